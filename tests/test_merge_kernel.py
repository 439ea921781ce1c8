"""kernels.merge: sort_indices / merge_runs / merge_dedup == the plain references in kernels.reference."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernels.keys import encode_keys
from kernels.merge import MergeResult, last_per_key, merge_dedup, merge_runs, newest_per_key, sort_indices, warm_up
from kernels.reference import (merge_dedup_reference, merge_order_reference, newest_per_key_reference,
                               sort_indices_reference)
from tests.test_key_encoding import layouts, rows_for, schemas, to_columns

SIGN = np.uint64(1 << 63)


def seq_matrix(draw, n: int, m: int) -> np.ndarray:
    """Small seq words so that ties happen; m == 0 gives no seq at all (None)."""
    if m == 0:
        return None
    return np.array(draw(st.lists(st.lists(st.integers(0, 3), min_size=m, max_size=m), min_size=n, max_size=n)),
                    dtype=np.uint64).reshape(n, m)


@st.composite
def sorted_runs(draw, max_runs=12, max_rows=8, names=None):
    """(runs as lists of Arrow key columns, seq matrices, descending flags, nullable flag), every run sorted by
    (key, seq) with the reference comparator."""
    schema = draw(schemas(names=names))
    desc = draw(st.lists(st.booleans(), min_size=len(schema[0]), max_size=len(schema[0])))
    m = draw(st.integers(0, 2))
    runs, seqs = [], []
    for _ in range(draw(st.integers(0, max_runs))):
        rows = draw(rows_for(schema, max_size=max_rows))
        seq = seq_matrix(draw, len(rows), m)
        perm = sort_indices_reference(to_columns(schema, rows), seq, desc)
        rows = [rows[i] for i in perm]
        runs.append(to_columns(schema, rows, [draw(layouts()) for _ in schema[0]]))
        seqs.append(None if seq is None else seq[perm])
    nullable = any(schema[1]) or draw(st.booleans())
    return runs, seqs, desc, nullable


def check_merge(runs, seqs, desc, nullable):
    encoded = [encode_keys(cols, desc, nullable=nullable) for cols in runs]
    order, key_starts = merge_order_reference(runs, seqs, desc)
    result = merge_runs(encoded, seqs)
    np.testing.assert_array_equal(result.order, order)
    np.testing.assert_array_equal(result.key_starts, key_starts)
    expected = merge_dedup_reference(runs, seqs, desc)
    np.testing.assert_array_equal(last_per_key(result), expected)
    got = merge_dedup(encoded, seqs)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, expected)


@settings(deadline=None, max_examples=150)
@given(data=st.data())
def test_sort_indices_matches_reference(data):
    schema = data.draw(schemas())
    rows = data.draw(rows_for(schema, max_size=30))
    cols = to_columns(schema, rows, [data.draw(layouts()) for _ in schema[0]])
    desc = data.draw(st.lists(st.booleans(), min_size=len(cols), max_size=len(cols)))
    seq = seq_matrix(data.draw, len(rows), data.draw(st.integers(0, 2)))
    got = sort_indices(encode_keys(cols, desc), seq)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, sort_indices_reference(cols, seq, desc))


@settings(deadline=None, max_examples=200)
@given(data=st.data())
def test_newest_per_key_matches_reference(data):
    """The unstable-sort dedupe (one-word keys) equals the reference: per key the largest (seq row, input index);
    keys that do not pack into one word return None (callers take the stable path)."""
    schema = data.draw(schemas())
    rows = data.draw(rows_for(schema, max_size=40))
    cols = to_columns(schema, rows, [data.draw(layouts()) for _ in schema[0]])
    desc = data.draw(st.lists(st.booleans(), min_size=len(cols), max_size=len(cols)))
    seq = seq_matrix(data.draw, len(rows), data.draw(st.integers(0, 2)))
    keys = encode_keys(cols, desc)
    got = newest_per_key(keys, seq)
    if got is None:
        assert not keys.is_fixed or keys.width > 1
        return
    assert got.dtype == np.int64
    expected = newest_per_key_reference(cols, seq, desc)
    np.testing.assert_array_equal(got, expected)
    stable = sort_indices(keys, seq)  # and the stable path agrees
    sorted_keys = encode_keys([c.take(pa.array(stable)) for c in cols], desc)
    np.testing.assert_array_equal(stable[merge_dedup([sorted_keys], [None if seq is None else seq[stable]])],
                                  expected)


@settings(deadline=None, max_examples=200)
@given(case=sorted_runs())
def test_merge_matches_reference(case):
    check_merge(*case)


@settings(deadline=None, max_examples=100)
@given(case=sorted_runs(names=["int64"], max_runs=6, max_rows=12))
def test_merge_int64_keys(case):
    """One int64 column: the one-word fast paths (2 runs, loser tree), with and without nulls."""
    check_merge(*case)


@settings(deadline=None, max_examples=60)
@given(case=sorted_runs(names=["string"], max_runs=5))
def test_merge_single_string_keys(case):
    check_merge(*case)


@settings(deadline=None, max_examples=25)
@given(case=sorted_runs(max_runs=50, max_rows=3))
def test_merge_many_runs(case):
    check_merge(*case)


# ---- larger randomized checks of the fast paths against a NumPy reference ------------------------------------

def _numpy_reference(keys: list[np.ndarray], seqs: list[np.ndarray]):
    """(order, key_starts) by a stable lexsort of the concatenated runs; seqs are (n, m) matrices."""
    k = np.concatenate(keys)
    s = np.concatenate(seqs)
    cols = [s[:, j] for j in range(s.shape[1] - 1, -1, -1)]
    order = np.lexsort(cols + [k])  # stable: ties keep run, then row order
    ks = k[order]
    starts = np.flatnonzero(np.r_[True, ks[1:] != ks[:-1]])
    return order, np.r_[starts, len(order)]


@pytest.mark.parametrize("n_runs", [1, 2, 3, 8, 33])
@pytest.mark.parametrize("m", [0, 1, 2])
def test_fast_paths_against_numpy(n_runs, m):
    rng = np.random.default_rng(n_runs * 10 + m)
    key_sets, seq_sets, runs = [], [], []
    for r in range(n_runs):
        n = int(rng.integers(0, 400)) if r % 5 != 4 else 0
        keys = np.sort(rng.choice(np.array([-(2 ** 63), 2 ** 63 - 1, 0, 5]), n) if r % 3 == 0
                       else rng.integers(-300, 300, n))
        seq = rng.integers(0, 4, (n, m)).astype(np.uint64)
        perm = np.lexsort([seq[:, j] for j in range(m - 1, -1, -1)] + [keys])
        keys, seq = keys[perm], seq[perm]
        key_sets.append(keys)
        seq_sets.append(seq)
        runs.append(encode_keys([pa.array(keys, pa.int64())]))
    order, starts = _numpy_reference(key_sets, seq_sets)
    seqs = [s if m != 1 or r % 2 else s[:, 0] for r, s in enumerate(seq_sets)]  # 1-D seq arrays accepted
    result = merge_runs(runs, seqs)
    np.testing.assert_array_equal(result.order, order)
    np.testing.assert_array_equal(result.key_starts, starts)
    np.testing.assert_array_equal(merge_dedup(runs, seqs), order[starts[1:] - 1])


def test_composite_keys_that_do_not_pack():
    """Two full-range int64 words cannot be packed into one word: merged as big-endian bytes."""
    rng = np.random.default_rng(7)
    runs, seq_sets = [], []
    for _ in range(5):
        a = rng.choice(np.array([-(2 ** 63), 2 ** 63 - 1, 3]), 50)
        b = rng.choice(np.array([-(2 ** 63), 2 ** 63 - 1, 0, 1]), 50)
        seq = rng.integers(0, 3, 50).astype(np.uint64)
        perm = np.lexsort([seq, b, a])
        runs.append([pa.array(a[perm]), pa.array(b[perm])])
        seq_sets.append(seq[perm])
    encoded = [encode_keys(cols) for cols in runs]
    order, key_starts = merge_order_reference(runs, seq_sets)
    result = merge_runs(encoded, seq_sets)
    np.testing.assert_array_equal(result.order, order)
    np.testing.assert_array_equal(result.key_starts, key_starts)
    np.testing.assert_array_equal(merge_dedup(encoded, seq_sets), order[key_starts[1:] - 1])


def test_string_keys_with_long_common_prefix():
    """Byte-string kernels skip the prefix common to all rows; keys differ before, at and after 8 more bytes."""
    rng = np.random.default_rng(11)
    suffixes = ["", "\x00", "a", "a\x00", "ab", "abcdefgh", "abcdefgh\x00", "abcdefghi", "abcdefgz", "\xff"]
    runs, seqs = [], []
    for _ in range(6):
        values = ["common/prefix/" + suffixes[i] for i in rng.integers(0, len(suffixes), 12)]
        seq = rng.integers(0, 3, 12).astype(np.uint64)
        perm = sort_indices_reference([pa.array(values)], seq)
        runs.append([pa.array([values[i] for i in perm])])
        seqs.append(seq[perm])
    check_merge(runs, seqs, [False], False)
    flat = [pa.chunked_array([r[0] for r in runs])]
    seq = np.concatenate(seqs)
    np.testing.assert_array_equal(sort_indices(encode_keys(flat), seq), sort_indices_reference(flat, seq))


# ---- edge cases and validation ----------------------------------------------------------------------------------

def test_empty_inputs():
    assert merge_dedup([]).shape == (0,)
    result = merge_runs([])
    assert isinstance(result, MergeResult) and result.n_keys == 0 and result.key_starts.tolist() == [0]
    empty = encode_keys([pa.array([], pa.int64())])
    assert merge_dedup([empty, empty, empty]).shape == (0,)
    assert merge_runs([empty, empty]).key_starts.tolist() == [0]
    assert sort_indices(empty).shape == (0,)
    one = encode_keys([pa.array(["x"])])
    assert merge_runs([one]).order.tolist() == [0]
    assert merge_dedup([one, one]).tolist() == [1]


def test_all_duplicates_newest_wins():
    keys = encode_keys([pa.array([7, 7, 7])])
    seqs = [np.array([1, 5, 9], np.uint64), np.array([2, 6, 9], np.uint64)]
    assert merge_dedup([keys, keys], seqs).tolist() == [5]  # seq 9 ties: the later run wins
    assert merge_runs([keys, keys], seqs).order.tolist() == [0, 3, 1, 4, 2, 5]
    assert merge_dedup([keys, keys]).tolist() == [5]  # no seq: last run, last row


def test_validation():
    a = encode_keys([pa.array([1])])
    s = encode_keys([pa.array(["a"])])
    with pytest.raises(ValueError):
        merge_dedup([a, s])
    with pytest.raises(ValueError):
        merge_runs([a, encode_keys([pa.array([None, 1])])])
    with pytest.raises(ValueError):
        merge_dedup([a, a], [np.array([1], np.uint64), np.array([[1, 2]], np.uint64)])
    with pytest.raises(ValueError):
        merge_dedup([a], [np.array([1], np.int64)])
    with pytest.raises(ValueError):
        merge_dedup([a], [np.array([1, 2], np.uint64)])
    with pytest.raises(ValueError):
        merge_dedup([a, a], [None])
    with pytest.raises(ValueError):
        sort_indices(a, np.zeros((2, 1), np.uint64))


def test_warm_up_runs():
    warm_up()
