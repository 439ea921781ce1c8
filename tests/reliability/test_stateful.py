"""Stateful model test with crashes: write, delete, multi-batch commit, two writers racing on one base,
crash-and-recover (a child process killed at a random crash point, then the commit re-run exactly once),
compact, expire, tag, rollback (to a snapshot or a tag), remove_orphan_files, a compaction or expiration killed
at one of its crash points and run again, reopen, read at any retained snapshot or tag.
Invariants: reads at every retained snapshot and tag equal a dict model; check() is clean; after orphan cleanup
with older_than=0 no unreferenced file is left.

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
from engine.errors import InvalidInput
from tests.interop.dict_model import DictModel
from tests.interop.pypaimon_util import assert_rows_equal, rows_of
from tests.reliability.scenarios import MAINTENANCE_POINTS, WRITE_AND_COMMIT_POINTS

MAINTENANCE_CRASHES = [(op, point) for op in ("compact", "expire") for point, _ in MAINTENANCE_POINTS[op]]
TAG_NAMES = ["t1", "t2", "t3"]

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


def child_maintenance(warehouse: str, operation: str, retain: int):
    from engine import Catalog

    t = Catalog(warehouse).get_table("db.t")
    if operation == "compact":
        return t.compact(full=True)
    return t.expire_snapshots(retain_min=1, retain_max=retain).snapshot_ids


class CrashModel(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.dir = None
        self.table = None
        self.model = DictModel(SCHEMA, PK)
        self.sids: list[int] = []     # retained snapshot ids, oldest first
        self.tags: dict[str, int] = {}  # tag name -> snapshot id
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

    # --- maintenance ----------------------------------------------------------------------------------------
    def _compacted(self, sid):
        if sid is None:
            return
        first = self.sids[-1] + 1 if self.sids else 1
        assert sid >= first and all(self.table.snapshot(s).commit_kind == "COMPACT" for s in range(first, sid + 1))
        self.model.commit(sid)  # compaction changes no content
        self.sids.extend(range(first, sid + 1))

    def _expired(self):
        ids = [s.id for s in self.table.snapshots()]
        assert ids and ids == self.sids[len(self.sids) - len(ids):], (ids, self.sids)  # oldest first, a suffix
        self.sids = ids

    @rule(full=st.booleans())
    def compact(self, full):
        if self.sids:
            self._compacted(self.table.compact(full=full))

    @rule(retain=st.integers(min_value=1, max_value=4))
    def expire(self, retain):
        if self.sids:
            removal = self.table.expire_snapshots(retain_min=1, retain_max=retain)
            assert removal.snapshot_ids == self.sids[:len(removal.snapshot_ids)]
            assert len(self.sids) - len(removal.snapshot_ids) >= min(retain, len(self.sids))
            self._expired()

    @rule(name=st.sampled_from(TAG_NAMES), back=st.integers(min_value=0, max_value=4))
    def tag(self, name, back):
        if not self.sids:
            return
        sid = self.sids[max(0, len(self.sids) - 1 - back)]
        if name in self.tags:
            with pytest.raises(InvalidInput, match="already exists"):
                self.table.create_tag(name, sid)
        else:
            self.table.create_tag(name, sid)
            self.tags[name] = sid

    @rule(back=st.integers(min_value=0, max_value=4), to_tag=st.booleans())
    def rollback(self, back, to_tag):
        if not self.sids:
            return
        if to_tag and self.tags:
            name = sorted(self.tags)[back % len(self.tags)]
            target = self.tags[name]
            self.table.rollback_to(name)
            self.sids = [s for s in self.sids if s <= target] if target in self.sids else [target]
        else:
            target = self.sids[max(0, len(self.sids) - 1 - back)]
            self.table.rollback_to(target)
            self.sids = [s for s in self.sids if s <= target]
        self.tags = {n: s for n, s in self.tags.items() if s <= target}
        for sid in [s for s in self.model.history if s > target]:  # ids after the target will be reused
            del self.model.history[sid]
        self.model.state = dict(self.model.history[target])
        assert [s.id for s in self.table.snapshots()] == self.sids
        assert {n: s.id for n, s in self.table.tags().items()} == self.tags

    @rule()
    def remove_orphan_files(self):
        self.table.remove_orphan_files(older_than=0)
        report = self.table.check()
        assert report.ok and report.orphan_files == [], report.summary()

    @rule(crash=st.sampled_from(MAINTENANCE_CRASHES), retain=st.integers(min_value=1, max_value=3))
    def crash_in_maintenance(self, crash, retain):
        """Kill a compaction or expiration at one of its crash points, check, then run it again to completion."""
        from engine import Catalog

        operation, point = crash
        if not self.sids:
            return
        run = run_crashing(point, child_maintenance, self.warehouse, operation, retain)
        assert run.error is None, run
        self.table = Catalog(self.warehouse).get_table("db.t")
        report = self.table.check()
        assert report.ok, report.summary()
        for _ in range(2):  # the finished job is safe to repeat
            result = child_maintenance(self.warehouse, operation, retain)
            if operation == "compact":
                latest = self.table.latest_snapshot_id()
                self._compacted(latest if latest != self.sids[-1] else None)
            else:
                self._expired()
                assert all(s < self.sids[0] for s in result)

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

    @invariant()
    def tags_match(self):
        if self.table is not None:
            for name, sid in self.tags.items():
                assert_rows_equal(rows_of(self.table.read(tag=name), PK), self.model.live_rows(sid), PK,
                                  f"read of tag {name}")

    def teardown(self):
        try:
            if self.table is not None and self.sids:
                t = self.catalog.get_table("db.t")
                assert [s.id for s in t.snapshots()] == self.sids
                report = t.check()
                assert report.ok, report.summary()
                t.remove_orphan_files(older_than=0)
                report = t.check()
                assert report.ok and report.orphan_files == [], report.summary()
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
