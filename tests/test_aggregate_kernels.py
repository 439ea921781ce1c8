"""Hypothesis: every kernel of kernels/aggregate.py equals its plain reference on random histories."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kernels import aggregate as K
from kernels import reference_aggregate as R


@st.composite
def histories(draw, values=st.integers(-50, 50)):
    """(order, key_starts, n_rows, per-row dict) with the merged order a random permutation of a subset."""
    n = draw(st.integers(0, 30))
    lengths = draw(st.lists(st.integers(1, 6), min_size=0, max_size=8))
    total = min(sum(lengths), n)
    lens, acc = [], 0
    for length in lengths:
        if acc + length > total:
            break
        lens.append(length)
        acc += length
    perm = np.array(draw(st.permutations(list(range(n)))), dtype=np.int64)
    order = perm[:acc]
    key_starts = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    kinds = np.array(draw(st.lists(st.sampled_from([0, 1, 2, 3]), min_size=n, max_size=n)), dtype=np.int8)
    valid = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
    vals = draw(st.lists(values, min_size=n, max_size=n))
    return order, key_starts, kinds, valid, vals


@settings(max_examples=150, deadline=None)
@given(histories(), st.booleans())
def test_pick_and_after(h, first):
    order, starts, kinds, valid, _ = h
    assert np.array_equal(K.segment_pick(order, starts, valid, first), R.segment_pick_reference(order, starts, valid,
                                                                                              first))
    flag = kinds == 3
    assert np.array_equal(K.rows_after_last(order, starts, flag), R.rows_after_last_reference(order, starts, flag))


@settings(max_examples=150, deadline=None)
@given(histories(values=st.integers(-3, 3)), st.booleans())
def test_arg_extreme_with_ties(h, want_max):
    order, starts, kinds, valid, vals = h
    words = np.array(vals, np.int64)
    got = K.segment_arg_extreme(order, starts, words, valid, want_max)
    assert np.array_equal(got, R.segment_arg_extreme_reference(order, starts, words, valid, want_max))


@settings(max_examples=200, deadline=None)
@given(histories(values=st.integers(-130, 130)), st.booleans(), st.sampled_from([7, 63]))
def test_sum_and_product_integers(h, product, bits):
    order, starts, kinds, valid, vals = h
    add = (kinds == 0) | (kinds == 2)
    lo, hi = -(2 ** bits), 2 ** bits - 1
    values = np.clip(np.array(vals, np.int64), lo, hi)  # inputs come from a column of that type
    out, ov, err, key = K.segment_sum(order, starts, values, valid, add, ~add, product, lo, hi)
    r_out, r_valid, r_err, r_key = R.segment_sum_reference(order, starts, values, valid, add, ~add, product, lo, hi)
    assert (err, key) == (r_err, r_key)
    if not err:
        assert np.array_equal(ov, r_valid)
        assert np.array_equal(out[ov], r_out[r_valid])


@settings(max_examples=100, deadline=None)
@given(histories(values=st.floats(-1e6, 1e6, allow_nan=False)), st.booleans())
def test_sum_and_product_floats(h, product):
    order, starts, kinds, valid, vals = h
    values = np.array(vals, np.float64)
    add = (kinds == 0) | (kinds == 2)
    out, ov, err, _ = K.segment_sum(order, starts, values, valid, add, ~add, product, 0, 0)
    r_out, r_valid, r_err, _ = R.segment_sum_reference(order, starts, values, valid, add, ~add, product, 0, 0)
    assert err == r_err == 0
    assert np.array_equal(ov, r_valid)
    np.testing.assert_allclose(out[ov], r_out[r_valid], rtol=1e-9, equal_nan=True)


@settings(max_examples=150, deadline=None)
@given(histories(values=st.floats(-1e6, 1e6, allow_nan=False, width=32)), st.booleans())
def test_sum_and_product_float32_round_every_step(h, product):
    """FLOAT columns fold like Java float: each step rounds to float32 (the reference uses NumPy float32)."""
    order, starts, kinds, valid, vals = h
    values = np.array(vals, np.float32)
    add = (kinds == 0) | (kinds == 2)
    out, ov, err, _ = K.segment_sum(order, starts, values, valid, add, ~add, product, 0, 0)
    with np.errstate(all="ignore"):
        r_out, r_valid, r_err, _ = R.segment_sum_reference(order, starts, values, valid, add, ~add, product, 0, 0)
    assert err == r_err == 0
    assert np.array_equal(ov, r_valid)
    np.testing.assert_array_equal(out[ov].astype(np.float32), r_out[r_valid])
    assert np.array_equal(out[ov], out[ov].astype(np.float32), equal_nan=True)


def test_float32_sum_rounds_every_step():
    order, starts = np.arange(3, dtype=np.int64), np.array([0, 3], np.int64)
    ones = np.ones(3, bool)
    out, _, _, _ = K.segment_sum(order, starts, np.array([16777216, 1, 1], np.float32), ones, ones, ~ones, False, 0, 0)
    assert out[0] == 16777216.0  # float64 would give 16777218


@settings(max_examples=150, deadline=None)
@given(histories(values=st.text(alphabet="ab é\t\u3000\u00a0\u2003\u2007\u1680\u0085", max_size=4)),
       st.sampled_from([b",", b"", b"--"]))
def test_listagg(h, delimiter):
    import pyarrow as pa

    order, starts, kinds, valid, vals = h
    arr = pa.array([v if ok else None for v, ok in zip(vals, valid)], pa.large_string())
    offsets = np.frombuffer(arr.buffers()[1], np.int64)[:len(arr) + 1]
    data = np.frombuffer(arr.buffers()[2], np.uint8) if arr.buffers()[2] is not None else np.zeros(0, np.uint8)
    eligible = (kinds == 0) | (kinds == 2)
    off, out, ok = K.segment_listagg(order, starts, offsets, data, eligible & valid,
                                     np.frombuffer(delimiter, np.uint8))
    got = [bytes(out[off[j]:off[j + 1]]) if ok[j] else None for j in range(len(ok))]
    strings = [v.encode() if v is not None else None for v in arr.to_pylist()]
    assert got == R.segment_listagg_reference(order, starts, strings, eligible, delimiter)


@settings(max_examples=150, deadline=None)
@given(histories(values=st.integers(0, 3)))
def test_group_fold(h):
    order, starts, kinds, valid, vals = h
    words = np.stack([valid.astype(np.uint64), np.array(vals, np.uint64)], axis=1) if len(vals) else \
        np.zeros((0, 2), np.uint64)
    all_null = ~valid
    add = (kinds == 0) | (kinds == 2)
    got = K.segment_group_fold(order, starts, np.ascontiguousarray(words), all_null, add, ~add)
    ref = R.segment_group_fold_reference(order, starts, words, all_null, add, ~add)
    assert all(np.array_equal(g, r) for g, r in zip(got, ref))


@settings(max_examples=200, deadline=None)
@given(histories(values=st.integers(0, 3)), st.integers(1, 2), st.randoms(use_true_random=False))
def test_removal_barrier(h, n_groups, rnd):
    """Groups of one or two sequence words (each a (valid, value) pair); -D rows remove."""
    order, starts, kinds, valid, vals = h
    n = len(vals)
    widths = [rnd.choice([1, 2]) for _ in range(n_groups)]
    bounds = np.concatenate([[0], np.cumsum([2 * w for w in widths])]).astype(np.int64)
    cols, all_null = [], np.ones((n, n_groups), bool)
    for g, w in enumerate(widths):
        for _ in range(w):
            v = np.array([rnd.random() < 0.7 for _ in range(n)], bool)
            x = np.array([rnd.randint(0, 3) for _ in range(n)], np.uint64)
            cols += [v.astype(np.uint64), np.where(v, x, np.uint64(0))]
            all_null[:, g] &= ~v
    words = np.ascontiguousarray(np.stack(cols, axis=1)) if n else np.zeros((0, int(bounds[-1])), np.uint64)
    add = (kinds == 0) | (kinds == 2)
    removes = kinds == 3
    got = K.segment_removal_barrier(order, starts, words, bounds, all_null, add & valid, ~add & valid, removes)
    ref = R.segment_removal_barrier_reference(order, starts, words, bounds, all_null, add & valid, ~add & valid,
                                              removes)
    assert np.array_equal(got, ref)


def test_float_order_words_follow_java_double_compare():
    vals = np.array([float("-inf"), -1.5, -0.0, 0.0, 1e-300, 2.0, float("inf"), float("nan")])
    w = K.float_order_words(vals)
    assert (np.diff(w.astype(object)) > 0).all()


@settings(max_examples=100, deadline=None)
@given(histories(values=st.sampled_from([float("nan"), -0.0, 0.0, 1.5, -2.0, float("inf")])), st.booleans())
def test_arg_extreme_float_follows_double_compare(h, want_max):
    order, starts, kinds, valid, vals = h
    values = np.array(vals, np.float64)
    got = K.segment_arg_extreme_float(order, starts, values, valid, want_max)
    assert np.array_equal(got, R.segment_arg_extreme_float_reference(order, starts, values, valid, want_max))


def test_int64_sums_are_exact_and_overflow_raises():
    order = np.arange(3, dtype=np.int64)
    starts = np.array([0, 3], np.int64)
    ones = np.ones(3, bool)
    big = np.array([2 ** 62 + 1, 2, -7], np.int64)
    out, ok, err, _ = K.segment_sum(order, starts, big, ones, ones, ~ones, False, -(2 ** 63), 2 ** 63 - 1)
    assert (int(out[0]), bool(ok[0]), err) == (2 ** 62 - 4, True, K.OK)
    huge = np.array([2 ** 62, 2 ** 62, 1], np.int64)
    assert K.segment_sum(order, starts, huge, ones, ones, ~ones, False, -(2 ** 63), 2 ** 63 - 1)[2] == K.OVERFLOW
