"""engine.merge.merge_runs for every engine, as compaction calls it (sorted_output=True, drop_retracts=False)."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from engine.merge import merge_runs
from engine.schema import TableSchema

SCHEMA = pa.schema([("k", pa.int32()), ("v", pa.int64())])


def _run(keys, seqs, kinds, values):
    return pa.table({"__key_k": pa.array(keys, pa.int32()), "_SEQUENCE_NUMBER": pa.array(seqs, pa.int64()),
                     "_VALUE_KIND": pa.array(kinds, pa.int8()), "v": pa.array(values, pa.int64())})


@pytest.mark.parametrize("engine, options, expected", [
    ("deduplicate", {}, [(1, 3, 3, None), (2, 4, 0, 20), (3, 2, 0, 30), (5, 5, 0, 50)]),
    ("partial-update", {"partial-update.remove-record-on-delete": "true"},
     [(1, 3, 3, None), (2, 4, 0, 20), (3, 2, 0, 30), (5, 5, 0, 50)]),
    ("aggregation", {"fields.v.aggregate-function": "sum"},
     [(1, 3, 0, 10), (2, 4, 0, 22), (3, 2, 0, 30), (5, 5, 0, 50)]),
    ("first-row", {"ignore-delete": "true"}, [(1, 0, 0, 10), (2, 1, 0, 2), (3, 2, 0, 30), (5, 5, 0, 50)]),
])
def test_sorted_output_keeps_retracts_and_key_order(engine, options, expected):
    schema = TableSchema.create(SCHEMA, ["k"], options={"bucket": "1", "merge-engine": engine, **options})
    old = _run([1, 2, 3], [0, 1, 2], [0, 0, 0], [10, 2, 30])
    new = _run([1, 2, 5], [3, 4, 5], [3, 0, 0], [None, 20, 50])
    out = merge_runs([new, old], schema, drop_retracts=False, sorted_output=True)
    got = list(zip(out.column("__key_k").to_pylist(), out.column("_SEQUENCE_NUMBER").to_pylist(),
                   out.column("_VALUE_KIND").to_pylist(), out.column("v").to_pylist()))
    assert got == expected
    live = merge_runs([new, old], schema)
    assert sorted(live.column("__key_k").to_pylist()) == [k for k, _, kind, _ in expected if kind in (0, 2)]
    assert np.all(np.isin(live.column("_VALUE_KIND").to_numpy(), [0, 2]))


@pytest.mark.parametrize("engine, options", [
    ("deduplicate", {}), ("deduplicate", {"ignore-delete": "true"}),
    ("partial-update", {"partial-update.remove-record-on-delete": "true"}),
    ("aggregation", {"fields.v.aggregate-function": "sum"}), ("first-row", {"ignore-delete": "true"}),
])
@pytest.mark.parametrize("drop_retracts", [True, False])
def test_projected_merge_consumes_its_runs_and_equals_the_full_merge(engine, options, drop_retracts):
    """merge_runs(project=...) (what reads use) returns the full merge's projected columns plus _VALUE_KIND, in
    the same rows, and empties the runs list it was given so the inputs can be freed early."""
    schema = TableSchema.create(SCHEMA, ["k"], options={"bucket": "1", "merge-engine": engine, **options})
    old = _run([1, 2, 3], [0, 1, 2], [0, 0, 0], [10, 2, 30])
    new = _run([1, 2, 5], [3, 4, 5], [3, 0, 0], [None, 20, 50])
    full = merge_runs([new, old], schema, drop_retracts=drop_retracts, sorted_output=True)
    runs = [new, old]
    got = merge_runs(runs, schema, drop_retracts=drop_retracts, sorted_output=True, project=["v"])
    assert runs == []
    assert got.column_names == ["v", "_VALUE_KIND"]
    assert got.to_pylist() == full.select(["v", "_VALUE_KIND"]).to_pylist()
    single = [old]
    assert merge_runs(single, schema, drop_retracts=drop_retracts, project=["v"]).column_names == ["v", "_VALUE_KIND"]
    assert single == []
