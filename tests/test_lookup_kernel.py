"""kernels.lookup: search_sorted / lower_bound == the plain references in kernels.reference."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernels.keys import encode_keys
from kernels.lookup import lower_bound, search_sorted, warm_up
from kernels.reference import key_tuples, lower_bound_reference, search_sorted_reference
from tests.test_key_encoding import layouts, row_strategy, rows_for, schemas, to_columns


@st.composite
def table_and_probes(draw, names=None):
    """(schema, sorted unique table rows, probe rows, descending flags)."""
    schema = draw(schemas(names=names))
    desc = draw(st.lists(st.booleans(), min_size=len(schema[0]), max_size=len(schema[0])))
    rows = draw(rows_for(schema, max_size=30))
    keys = key_tuples(to_columns(schema, rows), desc)
    unique = {}
    for k, r in zip(keys, rows):
        unique.setdefault(k, r)
    table = [unique[k] for k in sorted(unique)]
    probes = draw(st.lists(st.sampled_from(table) | row_strategy(schema) if table else row_strategy(schema),
                           max_size=20))
    if draw(st.booleans()):  # sorted probes take the galloping path
        pk = key_tuples(to_columns(schema, probes), desc)
        probes = [probes[i] for i in sorted(range(len(probes)), key=lambda i: pk[i])]
    return schema, table, probes, desc


@settings(deadline=None, max_examples=250)
@given(case=table_and_probes(), data=st.data())
def test_search_matches_reference(case, data):
    _check_search(case, data)


@settings(deadline=None, max_examples=150)
@given(case=table_and_probes(), data=st.data())
def test_search_with_probe_sorting_matches_reference(case, data):
    """Every unsorted batch takes the sort-the-probes path (normally only batches of SORT_PROBES_MIN or more)."""
    from kernels import lookup

    old, lookup.SORT_PROBES_MIN = lookup.SORT_PROBES_MIN, 0
    try:
        _check_search(case, data)
    finally:
        lookup.SORT_PROBES_MIN = old


def _check_search(case, data):
    schema, table, probes, desc = case
    table_cols = to_columns(schema, table, [data.draw(layouts()) for _ in schema[0]])
    probe_cols = to_columns(schema, probes, [data.draw(layouts()) for _ in schema[0]])
    nullable = any(schema[1]) or data.draw(st.booleans())
    sorted_keys = encode_keys(table_cols, desc, nullable=nullable)
    probe_keys = encode_keys(probe_cols, desc, nullable=nullable)
    got = search_sorted(sorted_keys, probe_keys)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, search_sorted_reference(table_cols, probe_cols, desc))
    np.testing.assert_array_equal(lower_bound(sorted_keys, probe_keys),
                                  lower_bound_reference(table_cols, probe_cols, desc))


@settings(deadline=None, max_examples=80)
@given(case=table_and_probes(names=["int64"]))
def test_search_int64(case):
    schema, table, probes, desc = case
    table_cols, probe_cols = to_columns(schema, table), to_columns(schema, probes)
    sorted_keys = encode_keys(table_cols, desc, nullable=True)
    probe_keys = encode_keys(probe_cols, desc, nullable=True)
    np.testing.assert_array_equal(search_sorted(sorted_keys, probe_keys),
                                  search_sorted_reference(table_cols, probe_cols, desc))


@pytest.mark.parametrize("kind", ["int", "str"])
def test_large_sorted_and_unsorted_probes(kind):
    rng = np.random.default_rng(3)
    table = np.unique(rng.integers(-10 ** 6, 10 ** 6, 5000))
    probes = rng.integers(-10 ** 6 - 5, 10 ** 6 + 5, 3000)
    if kind == "str":  # zero-padded decimal strings sort like the numbers (all non-negative)
        def conv(a):
            return pa.array([f"{x + 2 * 10 ** 6:08d}" for x in a])
    else:
        conv = pa.array
    expected = np.where(np.isin(probes, table), np.searchsorted(table, probes), -1)
    for p in (probes, np.sort(probes)):
        exp = np.where(np.isin(p, table), np.searchsorted(table, p), -1)
        got = search_sorted(encode_keys([conv(table)]), encode_keys([conv(p)]))
        np.testing.assert_array_equal(got, exp)
        np.testing.assert_array_equal(lower_bound(encode_keys([conv(table)]), encode_keys([conv(p)])),
                                      np.searchsorted(table, p))
    assert (expected >= 0).any() and (expected < 0).any()


def test_edges_and_validation():
    empty = encode_keys([pa.array([], pa.int64())])
    keys = encode_keys([pa.array([1, 5, 9])])
    assert search_sorted(empty, keys).tolist() == [-1, -1, -1]
    assert lower_bound(empty, keys).tolist() == [0, 0, 0]
    assert search_sorted(keys, empty).shape == (0,)
    probes = encode_keys([pa.array([9, 0, 5, 10, 5, 1])])
    assert search_sorted(keys, probes).tolist() == [2, -1, 1, -1, 1, 0]
    assert lower_bound(keys, probes).tolist() == [2, 0, 1, 3, 1, 0]
    with pytest.raises(ValueError):
        search_sorted(keys, encode_keys([pa.array(["a"])]))
    with pytest.raises(ValueError):
        search_sorted(keys, encode_keys([pa.array([1, None])]))
    warm_up()
