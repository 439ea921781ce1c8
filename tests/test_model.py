"""Model-based test: random sequences of writes, deletes and multi-batch commits against a plain dict model.

After every commit the model state is recorded under the returned snapshot id. At the end of each example the
table is read at every snapshot (time travel) and compared with the model at that point, and random keys are
looked up. Hypothesis prints the failing example (and how to reproduce it) on failure.
"""
from __future__ import annotations

import shutil
import tempfile

import pyarrow as pa
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from tests.interop.dict_model import DictModel
from tests.interop.pypaimon_util import assert_rows_equal, rows_of

SCHEMA = pa.schema([("p", pa.string()), ("k", pa.int32()), ("v", pa.string()), ("n", pa.int64())])
PK = ["p", "k"]
KEY_SCHEMA = pa.schema([SCHEMA.field("p"), SCHEMA.field("k")])

parts = st.sampled_from(["a", "b", "c"])
ks = st.integers(min_value=-3, max_value=12)
keys = st.tuples(parts, ks)
rows = st.lists(
    st.tuples(parts, ks, st.one_of(st.none(), st.text(alphabet="xyzé", max_size=3)),
              st.one_of(st.none(), st.integers(min_value=-2**63, max_value=2**63 - 1))),
    min_size=1, max_size=12)
kinds = st.sampled_from(["+I", "+U", "-U", "-D"])


def to_table(rs) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(SCHEMA.names, r)) for r in rs], schema=SCHEMA)


def to_keys(kk) -> pa.Table:
    return pa.Table.from_pylist([{"p": p, "k": k} for p, k in kk], schema=KEY_SCHEMA)


class TableModel(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.dir = None
        self.table = None
        self.model = DictModel(SCHEMA, PK)
        self.sids: list[int] = []

    @initialize(bucket=st.sampled_from([1, 2, 3]), partitioned=st.booleans())
    def create(self, bucket, partitioned):
        from engine import Catalog

        self.dir = tempfile.mkdtemp(prefix="lakemerge-model-")
        cat = Catalog(self.dir + "/wh")
        cat.create_database("db")
        self.table = cat.create_table("db.t", schema=SCHEMA, primary_key=PK,
                                      partition_keys=["p"] if partitioned else [],
                                      options={"bucket": str(bucket)})
        self.catalog = cat

    def _committed(self, sid):
        expected = (self.sids[-1] + 1) if self.sids else 1
        # one APPEND snapshot, possibly followed by the COMPACT snapshot of the writer's compaction
        assert sid in (expected, expected + 1), f"commit returned snapshot id {sid}, expected {expected}"
        if sid == expected + 1:
            assert [self.table.snapshot(i).commit_kind for i in (expected, sid)] == ["APPEND", "COMPACT"]
        self.model.commit(sid)
        self.sids.append(sid)

    @rule(rs=rows, form=st.sampled_from(["table", "batch", "pandas"]))
    def upsert(self, rs, form):
        data = to_table(rs)
        if form == "batch":
            arg = data.to_batches()[0]
        elif form == "pandas":
            import pandas as pd

            # nullable integer dtypes: a plain to_pandas() would turn int64-with-nulls into lossy float64
            arg = data.to_pandas(types_mapper={pa.int64(): pd.Int64Dtype(), pa.int32(): pd.Int32Dtype()}.get)
        else:
            arg = data
        sid = self.table.write(arg)
        self.model.apply(data)
        self._committed(sid)

    @rule()
    def reopen(self):
        # a fresh handle must continue the table (sequence numbers restored from the files, next snapshot id)
        self.table = self.catalog.get_table("db.t")

    @rule(rs=rows, data=st.data())
    def write_with_kinds(self, rs, data):
        kk = data.draw(st.lists(kinds, min_size=len(rs), max_size=len(rs)))
        t = to_table(rs)
        sid = self.table.write(t, row_kinds=kk)
        self.model.apply(t, kk)
        self._committed(sid)

    @rule(kk=st.lists(keys, min_size=1, max_size=8))
    def delete(self, kk):
        sid = self.table.delete(to_keys(kk))
        self.model.delete(to_keys(kk))
        self._committed(sid)

    @rule(ops=st.lists(st.one_of(st.tuples(st.just("w"), rows),
                                 st.tuples(st.just("d"), st.lists(keys, min_size=1, max_size=5))),
                       min_size=2, max_size=4))
    def multi_batch_commit(self, ops):
        with self.table.new_write() as w:
            for op, arg in ops:
                if op == "w":
                    w.write(to_table(arg))
                else:
                    w.delete(to_keys(arg))
            messages = w.prepare_commit()
        sid = self.table.commit(messages)
        for op, arg in ops:
            if op == "w":
                self.model.apply(to_table(arg))
            else:
                self.model.delete(to_keys(arg))
        self._committed(sid)

    @rule(kk=st.lists(keys, min_size=1, max_size=6, unique=True), back=st.integers(min_value=0, max_value=5))
    def lookup(self, kk, back):
        if not self.sids:
            return
        sid = self.sids[max(0, len(self.sids) - 1 - back)]
        got = rows_of(self.table.lookup(to_keys(kk), snapshot_id=sid), PK)
        assert_rows_equal(got, self.model.lookup_rows(kk, sid), PK, f"lookup {kk} at snapshot {sid}")
        got = rows_of(self.table.lookup(to_keys(kk)), PK)
        assert_rows_equal(got, self.model.lookup_rows(kk), PK, f"lookup {kk} at the latest snapshot")

    @invariant()
    def latest_matches(self):
        if self.table is None or not self.sids:
            return
        assert_rows_equal(rows_of(self.table.read(), PK), self.model.live_rows(), PK,
                          f"latest read after snapshot {self.sids[-1]}")

    def teardown(self):
        try:
            if self.table is not None and self.sids:
                t = self.catalog.get_table("db.t")  # a fresh handle reads the same history
                assert [s.id for s in t.snapshots()] == self.model.snapshot_ids()
                for sid in self.model.snapshot_ids():
                    assert_rows_equal(rows_of(t.read(snapshot_id=sid), PK), self.model.live_rows(sid), PK,
                                      f"time travel to snapshot {sid}")
                all_keys = [(p, k) for p in ("a", "b", "c") for k in range(-3, 13)]
                got = rows_of(t.lookup(to_keys(all_keys)), PK)
                assert_rows_equal(got, self.model.lookup_rows(all_keys), PK, "lookup of every possible key")
        finally:
            if self.dir:
                shutil.rmtree(self.dir, ignore_errors=True)


TableModel.TestCase.settings = settings(
    max_examples=25,
    stateful_step_count=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)
test_table_matches_dict_model = TableModel.TestCase
