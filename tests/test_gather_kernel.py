"""kernels.gather against its reference (concat + take) for every Arrow layout it handles natively, plus the
fallback, the int32-offset overflow split and bad input."""
from __future__ import annotations

import decimal

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernels import gather as G
from kernels.reference import gather_reference

TYPES = {
    "int8": (pa.int8(), st.integers(-128, 127)),
    "int16": (pa.int16(), st.integers(-2**15, 2**15 - 1)),
    "int32": (pa.int32(), st.integers(-2**31, 2**31 - 1)),
    "int64": (pa.int64(), st.integers(-2**63, 2**63 - 1)),
    "uint64": (pa.uint64(), st.integers(0, 2**64 - 1)),
    "float32": (pa.float32(), st.floats(width=32, allow_nan=False)),
    "float64": (pa.float64(), st.floats(allow_nan=False)),
    "bool": (pa.bool_(), st.booleans()),
    "string": (pa.string(), st.text(max_size=20)),
    "large_string": (pa.large_string(), st.text(max_size=20)),
    "binary": (pa.binary(), st.binary(max_size=20)),
    "fixed3": (pa.binary(3), st.binary(min_size=3, max_size=3)),
    "decimal(10,2)": (pa.decimal128(10, 2), st.decimals(min_value=-10**7, max_value=10**7, places=2)),
    "decimal(38,4)": (pa.decimal128(38, 4), st.decimals(min_value=-10**30, max_value=10**30, places=4)),
    "decimal256": (pa.decimal256(50, 0), st.integers(-10**40, 10**40).map(decimal.Decimal)),
    "date32": (pa.date32(), st.dates()),
    "timestamp_us": (pa.timestamp("us"), st.integers(-2**50, 2**50)),
}


def _array(t, values):
    if pa.types.is_timestamp(t):
        return pa.array(values, pa.int64()).cast(t)
    return pa.array(values, t)


@st.composite
def runs_and_ids(draw, type_name=None):
    """2-4 runs of one column (nullable values; some runs sliced or chunked) and ids into their concatenation."""
    name = type_name or draw(st.sampled_from(sorted(TYPES)))
    t, values = TYPES[name]
    runs = []
    for _ in range(draw(st.integers(1, 4))):
        vals = draw(st.lists(st.one_of(st.none(), values), max_size=12))
        arr = _array(t, vals)
        shape = draw(st.sampled_from(["plain", "sliced", "chunked"]))
        if shape == "sliced" and len(arr) > 2:
            arr = _array(t, [None] + vals + [None]).slice(1, len(vals))
        if shape == "chunked" and len(arr) > 2:
            col = pa.chunked_array([arr.slice(0, 2), arr.slice(2)], t)
        else:
            col = pa.chunked_array([arr], t)
        runs.append(pa.table({"c": col}))
    total = sum(r.num_rows for r in runs)
    ids = draw(st.lists(st.integers(0, total - 1), max_size=30)) if total else []
    return runs, np.array(ids, np.int64)


def _check(runs, ids):
    got = G.gather(runs, ids)
    want = gather_reference(runs, ids)
    assert got.schema == want.schema
    assert got.num_rows == want.num_rows
    for name in want.column_names:
        g, w = got.column(name).combine_chunks(), want.column(name).combine_chunks()
        g.validate(full=True)
        assert g.equals(w), (name, g, w)
        assert g.null_count == w.null_count


@settings(max_examples=300, deadline=None)
@given(runs_and_ids())
def test_gather_equals_reference(case):
    _check(*case)


@pytest.mark.parametrize("name", sorted(TYPES))
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_gather_each_type(name, data):
    _check(*data.draw(runs_and_ids(name)))


def test_gather_merge_output_several_columns():
    rng = np.random.default_rng(3)
    runs = []
    for r in range(5):
        n = 1000
        runs.append(pa.table({
            "k": pa.array(np.sort(rng.integers(0, 10**6, n))),
            "s": pa.array([None if i % 7 == 0 else "x" * (i % 23) for i in range(n)]),
            "f": pa.array(rng.standard_normal(n)),
            "b": pa.array(rng.integers(0, 2, n).astype(bool)),
        }))
    ids = np.sort(rng.choice(5000, 2500, replace=False))
    _check(runs, ids)
    _check(runs, ids[::-1].copy())


def test_fallback_for_nested_types():
    runs = [pa.table({"l": pa.array([[1, 2], None, [3]])}), pa.table({"l": pa.array([[4], []])})]
    _check(runs, np.array([4, 0, 1, 3, 2], np.int64))


def test_null_type_column():
    runs = [pa.table({"n": pa.nulls(3)}), pa.table({"n": pa.nulls(2)})]
    _check(runs, np.array([4, 0], np.int64))


def test_string_offset_overflow_splits_into_chunks(monkeypatch):
    monkeypatch.setattr(G, "_INT32_MAX", 10)   # pretend int32 offsets end at 10 bytes
    runs = [pa.table({"s": pa.array(["abcd", "efgh", None, "ij"])}), pa.table({"s": pa.array(["klmnop", "q"])})]
    ids = np.array([0, 1, 4, 3, 5, 2, 0], np.int64)
    got = G.gather(runs, ids).column("s")
    assert got.num_chunks > 1
    assert all(sum(len(v or "") for v in c.to_pylist()) <= 10 for c in got.chunks)
    assert got.combine_chunks().equals(gather_reference(runs, ids).column("s").combine_chunks())


def test_empty_ids_and_empty_runs():
    runs = [pa.table({"a": pa.array([], pa.int64()), "s": pa.array([], pa.string())}),
            pa.table({"a": pa.array([7], pa.int64()), "s": pa.array(["x"])})]
    _check(runs, np.array([], np.int64))
    _check(runs, np.array([0, 0], np.int64))


@pytest.mark.parametrize("bad", [-1, 3])
def test_out_of_range_id_raises(bad):
    runs = [pa.table({"a": pa.array([1, 2])}), pa.table({"a": pa.array([3])})]
    with pytest.raises(IndexError, match=f"row id {bad}"):
        G.gather(runs, np.array([0, bad], np.int64))


def test_mismatched_schemas_raise():
    with pytest.raises(ValueError, match="different schemas"):
        G.gather([pa.table({"a": pa.array([1])}), pa.table({"a": pa.array(["x"])})], np.array([0]))


def test_gather_column_and_locate():
    cols = [pa.array([1, 2, 3]), pa.chunked_array([[4], [5, 6]])]
    assert G.gather_column(cols, np.array([5, 0, 3])).to_pylist() == [6, 1, 4]
    seg, row = G.locate([3, 0, 2], np.array([4, 0, 3, 2]))
    assert seg.tolist() == [2, 0, 2, 0] and row.tolist() == [1, 0, 0, 2]


def test_locate_many_segments_uses_search():
    lengths = [1] * 40
    seg, row = G.locate(lengths, np.arange(40)[::-1].copy())
    assert seg.tolist() == list(range(39, -1, -1)) and not row.any()
