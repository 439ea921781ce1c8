"""Stateful model test with crashes: write, delete, multi-batch commit, two writers racing on one base,
crash-and-recover (a child process killed at a random crash point, then the commit re-run exactly once),
reopen, read at any snapshot. Invariants: reads equal a dict model at every snapshot; check() is clean.

Default run: a few short examples; ``-m reliability``: many more.
"""
from __future__ import annotations

import os
import pickle
import shutil
import tempfile

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from engine.crash_points import run_crashing
from tests.interop.dict_model import DictModel
from tests.interop.pypaimon_util import assert_rows_equal, rows_of
from tests.reliability.scenarios import WRITE_AND_COMMIT_POINTS

SCHEMA = pa.schema([("p", pa.string()), ("k", pa.int32()), ("v", pa.string())])
PK = ["p", "k"]
KEY_SCHEMA = pa.schema([SCHEMA.field("p"), SCHEMA.field("k")])

keys = st.tuples(st.sampled_from(["a", "b"]), st.integers(min_value=0, max_value=9))
rows = st.lists(st.tuples(st.sampled_from(["a", "b"]), st.integers(min_value=0, max_value=9),
                          st.one_of(st.none(), st.text(alphabet="xyé", max_size=3))), min_size=1, max_size=10)


def to_table(rs) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(SCHEMA.names, r)) for r in rs], schema=SCHEMA)


def to_keys(kk) -> pa.Table:
    return pa.Table.from_pylist([{"p": p, "k": k} for p, k in kk], schema=KEY_SCHEMA)


def child_commit(warehouse: str, rs, deletes, user: str, ident: int, pending: str) -> int:
    from engine import Catalog

    t = Catalog(warehouse).get_table("db.t")
    with t.new_write(commit_user=user, commit_identifier=ident) as w:
        w.write(to_table(rs))
        if deletes:
            w.delete(to_keys(deletes))
        messages = w.prepare_commit()
    with open(pending, "wb") as f:
        pickle.dump(messages, f)
    return t.commit(messages)


class CrashModel(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.dir = None
        self.table = None
        self.model = DictModel(SCHEMA, PK)
        self.sids: list[int] = []
        self.ident = 0

    @initialize(bucket=st.sampled_from([1, 4]))
    def create(self, bucket):
        from engine import Catalog

        self.dir = tempfile.mkdtemp(prefix="lakemerge-crash-model-")
        self.warehouse = os.path.join(self.dir, "wh")
        self.catalog = Catalog(self.warehouse)
        self.catalog.create_database("db")
        self.table = self.catalog.create_table("db.t", SCHEMA, primary_key=PK, partition_keys=["p"],
                                               options={"bucket": str(bucket)})

    def _committed(self, sid):
        # A commit publishes one snapshot, or an APPEND then a COMPACT one when the writer compacted.
        first = self.sids[-1] + 1 if self.sids else 1
        assert sid in (first, first + 1)
        if sid == first + 1:
            assert self.table.snapshot(sid).commit_kind == "COMPACT"
        self.model.commit(sid)
        self.sids.extend(range(first, sid + 1))

    @rule(rs=rows)
    def write(self, rs):
        sid = self.table.write(to_table(rs))
        self.model.apply(to_table(rs))
        self._committed(sid)

    @rule(kk=st.lists(keys, min_size=1, max_size=5))
    def delete(self, kk):
        sid = self.table.delete(to_keys(kk))
        self.model.delete(to_keys(kk))
        self._committed(sid)

    @rule(a=rows, b=rows, b_first=st.booleans())
    def two_writers_one_base(self, a, b, b_first):
        """Both start from the same snapshot; whichever commits later wins (sequence guard)."""
        staged = {}
        for name, rs in (("a", a), ("b", b)):
            w = self.table.new_write()
            w.write(to_table(rs))
            staged[name] = (rs, w.prepare_commit())
        for name in ("b", "a") if b_first else ("a", "b"):
            rs, messages = staged[name]
            sid = self.table.commit(messages)
            self.model.apply(to_table(rs))
            self._committed(sid)

    @rule(rs=rows, kk=st.lists(keys, max_size=3), point=st.sampled_from(WRITE_AND_COMMIT_POINTS))
    def crash_and_recover(self, rs, kk, point):
        from engine import Catalog

        self.ident += 1
        pending = os.path.join(self.dir, f"pending-{self.ident}.pkl")
        run = run_crashing(point, child_commit, self.warehouse, rs, kk, "crash-model", self.ident, pending)
        assert run.crashed and run.error is None, run
        self.table = Catalog(self.warehouse).get_table("db.t")
        report = self.table.check()
        assert report.ok, report.summary()
        landed = [s.id for s in self.table.snapshots()
                  if s.commit_identifier == self.ident and s.commit_kind != "COMPACT"]
        assert len(landed) <= 1
        if os.path.exists(pending):
            with open(pending, "rb") as f:
                messages = pickle.load(f)
            sid = self.table.commit(messages)
            assert self.table.commit(messages) == sid
        else:
            assert not landed
            sid = child_commit(self.warehouse, rs, kk, "crash-model", self.ident, pending)
        assert not landed or landed[0] in (sid, sid - 1)  # commit() returns the COMPACT snapshot if it compacted
        self.model.apply(to_table(rs))
        if kk:
            self.model.delete(to_keys(kk))
        self._committed(sid)

    @rule()
    def reopen(self):
        self.table = self.catalog.get_table("db.t")

    @rule(back=st.integers(min_value=0, max_value=6))
    def read_at_snapshot(self, back):
        if self.sids:
            sid = self.sids[max(0, len(self.sids) - 1 - back)]
            assert_rows_equal(rows_of(self.table.read(snapshot_id=sid), PK), self.model.live_rows(sid), PK,
                              f"read at snapshot {sid}")

    @invariant()
    def latest_matches(self):
        if self.table is not None and self.sids:
            assert_rows_equal(rows_of(self.table.read(), PK), self.model.live_rows(), PK, "latest read")

    def teardown(self):
        try:
            if self.table is not None and self.sids:
                t = self.catalog.get_table("db.t")
                assert [s.id for s in t.snapshots()] == self.sids
                report = t.check()
                assert report.ok, report.summary()
                for sid in self.sids:
                    assert_rows_equal(rows_of(t.read(snapshot_id=sid), PK), self.model.live_rows(sid), PK,
                                      f"time travel to snapshot {sid}")
        finally:
            if self.dir:
                shutil.rmtree(self.dir, ignore_errors=True)


_COMMON = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
               print_blob=True)


class TestCrashModelQuick(CrashModel.TestCase):
    settings = settings(max_examples=4, stateful_step_count=8, **_COMMON)


@pytest.mark.reliability
class TestCrashModelFull(CrashModel.TestCase):
    settings = settings(max_examples=60, stateful_step_count=20, **_COMMON)
