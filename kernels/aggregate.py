"""Per-key segment reductions over a merged order (the merge engines' hot loops).

Vocabulary (shared by every kernel here):

* ``order``: int64 global row ids in merged order, ``key_starts``: int64 ``(n_keys + 1)``; the rows of key j are
  ``order[key_starts[j]:key_starts[j + 1]]``, oldest first (see ``kernels.merge.MergeResult``).
* Per-row inputs (``valid``, ``add``, ``retract``, values...) are indexed by *global row id*, not by position.
* A *pick* result is an int64 global row id per key, ``-1`` when no row qualified.

Values are plain NumPy arrays: int64 (integers, dates, times, timestamps, unscaled decimals), float64, or
order-preserving uint64 words (``float_order_words``) for comparisons. Strings come as Arrow offsets + data.
Every kernel has a plain reference in ``kernels/reference_aggregate.py``.
"""
from __future__ import annotations

import numpy as np

from kernels.jit import njit

# error codes returned by the arithmetic kernels (0 = fine)
OK, OVERFLOW, DIVIDE_BY_ZERO = 0, 1, 2


@njit
def segment_pick(order, key_starts, eligible, first):
    """Per key: the first (``first``) or last eligible row, or -1."""
    n_keys = key_starts.shape[0] - 1
    out = np.full(n_keys, -1, np.int64)
    for j in range(n_keys):
        a = key_starts[j]
        b = key_starts[j + 1]
        if first:
            for p in range(a, b):
                if eligible[order[p]]:
                    out[j] = order[p]
                    break
        else:
            for p in range(b - 1, a - 1, -1):
                if eligible[order[p]]:
                    out[j] = order[p]
                    break
    return out


@njit
def rows_after_last(order, key_starts, flag):
    """Bool per global row: the row comes strictly after the key's last flagged row (all rows if none)."""
    after = np.ones(flag.shape[0], np.bool_)
    for j in range(key_starts.shape[0] - 1):
        a = key_starts[j]
        b = key_starts[j + 1]
        last = -1
        for p in range(b - 1, a - 1, -1):
            if flag[order[p]]:
                last = p
                break
        for p in range(a, last + 1):
            after[order[p]] = False
    return after


@njit
def segment_arg_extreme(order, key_starts, words, eligible, want_max):
    """Per key: the eligible row with the largest (``want_max``) or smallest word, or -1.

    Ties keep the earlier row for max and the later row for min (Paimon: ``acc < in ? in : acc`` and
    ``acc < in ? acc : in``)."""
    n_keys = key_starts.shape[0] - 1
    out = np.full(n_keys, -1, np.int64)
    for j in range(n_keys):
        best = -1
        for p in range(key_starts[j], key_starts[j + 1]):
            r = order[p]
            if not eligible[r]:
                continue
            if best < 0:
                best = r
            elif want_max:
                if words[best] < words[r]:
                    best = r
            elif not (words[best] < words[r]):
                best = r
        out[j] = best
    return out


@njit
def _double_word(x):
    bits = np.float64(x).view(np.int64)
    if bits < 0:
        bits = bits ^ np.int64(0x7FFF_FFFF_FFFF_FFFF)
    return bits


@njit
def segment_arg_extreme_float(order, key_starts, values, eligible, want_max):
    """``segment_arg_extreme`` over float64 values compared as Java's ``Double.compare`` (-0.0 < 0.0, NaN
    greatest), without materialising the order words."""
    n_keys = key_starts.shape[0] - 1
    out = np.full(n_keys, -1, np.int64)
    for j in range(n_keys):
        best = -1
        bw = np.int64(0)
        for p in range(key_starts[j], key_starts[j + 1]):
            r = order[p]
            if not eligible[r]:
                continue
            w = _double_word(values[r])
            if best < 0 or (bw < w if want_max else not (bw < w)):
                best = r
                bw = w
        out[j] = best
    return out


def segment_sum(order, key_starts, values, valid, add, retract, product, lo, hi):
    """Per key: Paimon's sum (``product=False``) or product fold with retraction, oldest first.

    add: null input keeps acc; null acc takes input; else acc + in (acc * in).
    retract: sum -> acc - in (null acc -> -in; null in -> acc); product -> acc / in, truncating for integers
    (either null -> acc). Integer results must stay in [lo, hi] (the column type's range); int64 values fold in
    exact int64 arithmetic, floats in the values' precision with Java semantics: a float32 array (FLOAT) rounds
    to float32 after every step, as Java ``float`` arithmetic does; x / 0.0 gives inf or NaN.
    Returns (out values, out valid, error code: OK / OVERFLOW / DIVIDE_BY_ZERO, offending key or -1); float
    results come as float64."""
    if values.dtype.kind == "f":
        single = values.dtype == np.float32
        return _sum_float(order, key_starts, values.astype(np.float64), valid, add, retract, product, single)
    return _sum_int(order, key_starts, values, valid, add, retract, product, lo, hi)


@njit
def _wrapping_add(a, b):
    """a + b modulo 2**64 (unsigned arithmetic: no undefined signed overflow for the optimiser to exploit)."""
    return np.int64(np.uint64(a) + np.uint64(b))


@njit
def _wrapping_mul(a, b):
    return np.int64(np.uint64(a) * np.uint64(b))


@njit
def _sum_int(order, key_starts, values, valid, add, retract, product, lo, hi):
    n_keys = key_starts.shape[0] - 1
    out = np.zeros(n_keys, np.int64)
    out_valid = np.zeros(n_keys, np.bool_)
    for j in range(n_keys):
        acc = np.int64(0)
        has = False
        for p in range(key_starts[j], key_starts[j + 1]):
            r = order[p]
            if not valid[r]:
                continue
            x = values[r]
            if add[r]:
                if not has:
                    acc = x
                    has = True
                elif product:
                    y = _wrapping_mul(acc, x)
                    if x != 0 and (y // x != acc or (x == -1 and acc == lo)):
                        return out, out_valid, OVERFLOW, j
                    acc = y
                else:
                    y = _wrapping_add(acc, x)
                    if ((acc ^ y) & (x ^ y)) < 0:
                        return out, out_valid, OVERFLOW, j
                    acc = y
            elif retract[r]:
                if product:
                    if not has:
                        continue
                    if x == 0:
                        return out, out_valid, DIVIDE_BY_ZERO, j
                    if x == -1 and acc == lo:
                        return out, out_valid, OVERFLOW, j
                    q = abs(acc) // abs(x)
                    acc = q if (acc >= 0) == (x >= 0) else -q
                elif not has:
                    if x == lo:
                        return out, out_valid, OVERFLOW, j
                    acc = -x
                    has = True
                else:
                    y = _wrapping_add(acc, _wrapping_mul(x, np.int64(-1)))
                    if ((acc ^ x) & (acc ^ y)) < 0:
                        return out, out_valid, OVERFLOW, j
                    acc = y
            else:
                continue
            if acc < lo or acc > hi:
                return out, out_valid, OVERFLOW, j
        out[j] = acc
        out_valid[j] = has
    return out, out_valid, OK, -1


@njit
def _sum_float(order, key_starts, values, valid, add, retract, product, single):
    """float64 values; ``single``: round to float32 after every step. A float32 +, -, * or / computed in
    float64 and then rounded is the correctly rounded float32 result (float64 has more than 2 * 24 + 2 bits)."""
    n_keys = key_starts.shape[0] - 1
    out = np.zeros(n_keys, np.float64)
    out_valid = np.zeros(n_keys, np.bool_)
    for j in range(n_keys):
        acc = 0.0
        has = False
        for p in range(key_starts[j], key_starts[j + 1]):
            r = order[p]
            if not valid[r]:
                continue
            x = values[r]
            if add[r]:
                if not has:
                    acc = x
                    has = True
                elif product:
                    acc = acc * x
                else:
                    acc = acc + x
            elif retract[r]:
                if product:
                    if not has:
                        continue
                    if x == 0.0:
                        acc = np.nan if acc == 0.0 else (np.inf if acc > 0 else -np.inf)
                    else:
                        acc = acc / x
                elif not has:
                    acc = -x
                    has = True
                else:
                    acc = acc - x
            if single:
                acc = np.float64(np.float32(acc))
        out[j] = acc
        out_valid[j] = has
    return out, out_valid, OK, -1


# Java's Character.isWhitespace (Paimon's StringUtils.isBlank): Unicode space, line and paragraph separators
# except the no-break spaces U+00A0, U+2007, U+202F, plus U+0009-U+000D and U+001C-U+001F.
JAVA_WHITESPACE = frozenset([*range(0x09, 0x0E), *range(0x1C, 0x21), 0x1680, *range(0x2000, 0x2007),
                             *range(0x2008, 0x200B), 0x2028, 0x2029, 0x205F, 0x3000])


@njit
def _is_java_whitespace(cp):
    return (cp == 32 or 9 <= cp <= 13 or 28 <= cp <= 31 or cp == 0x1680
            or (0x2000 <= cp <= 0x200A and cp != 0x2007) or cp == 0x2028 or cp == 0x2029 or cp == 0x205F
            or cp == 0x3000)


@njit
def _is_blank(data, a, b):
    """UTF-8 bytes data[a:b] are empty or Java whitespace only (every such character is 1 or 3 bytes)."""
    t = a
    while t < b:
        c = data[t]
        if c < 0x80:
            cp = np.int64(c)
            t += 1
        elif c >> 4 == 0xE and t + 2 < b:
            cp = (((np.int64(c) & 0x0F) << 12) | ((np.int64(data[t + 1]) & 0x3F) << 6)
                  | (np.int64(data[t + 2]) & 0x3F))
            t += 3
        else:
            return False
        if not _is_java_whitespace(cp):
            return False
    return True


@njit
def segment_listagg(order, key_starts, offsets, data, eligible, delimiter):
    """Per key: the non-blank eligible strings joined by ``delimiter`` in merged order (null if none).

    Blank means empty or whitespace only, as Java's ``Character.isWhitespace`` (``JAVA_WHITESPACE``).
    Returns Arrow (int64 offsets, uint8 data, bool valid)."""
    n_keys = key_starts.shape[0] - 1
    d = delimiter.shape[0]
    lengths = np.zeros(n_keys, np.int64)
    valid = np.zeros(n_keys, np.bool_)
    for j in range(n_keys):
        total = 0
        for p in range(key_starts[j], key_starts[j + 1]):
            r = order[p]
            if eligible[r] and not _is_blank(data, offsets[r], offsets[r + 1]):
                if valid[j]:
                    total += d
                total += offsets[r + 1] - offsets[r]
                valid[j] = True
        lengths[j] = total
    out_off = np.zeros(n_keys + 1, np.int64)
    for j in range(n_keys):
        out_off[j + 1] = out_off[j] + lengths[j]
    out = np.empty(out_off[n_keys], np.uint8)
    for j in range(n_keys):
        pos = out_off[j]
        started = False
        for p in range(key_starts[j], key_starts[j + 1]):
            r = order[p]
            if eligible[r] and not _is_blank(data, offsets[r], offsets[r + 1]):
                if started:
                    for t in range(d):
                        out[pos + t] = delimiter[t]
                    pos += d
                for t in range(offsets[r], offsets[r + 1]):
                    out[pos] = data[t]
                    pos += 1
                started = True
    return out_off, out, valid


@njit
def segment_group_fold(order, key_starts, words, all_null, add, retract):
    """Partial-update sequence group: per key, the row whose group values win, and whether it was a retract.

    Rows in merged order; rows with ``all_null`` group sequence are skipped. An add or retract row takes the
    group when no row did yet or its group sequence words compare >= the current winner's (lexicographic).
    Returns (winner row id or -1, winner is retract, per global row: it took the group when processed)."""
    n_keys = key_starts.shape[0] - 1
    m = words.shape[1]
    src = np.full(n_keys, -1, np.int64)
    nulled = np.zeros(n_keys, np.bool_)
    newer = np.zeros(all_null.shape[0], np.bool_)
    for j in range(n_keys):
        best = -1
        for p in range(key_starts[j], key_starts[j + 1]):
            r = order[p]
            if all_null[r] or not (add[r] or retract[r]):
                continue
            take = best < 0
            if not take:
                c = 0
                for t in range(m):
                    if words[r, t] != words[best, t]:
                        c = -1 if words[r, t] < words[best, t] else 1
                        break
                take = c >= 0
            if take:
                best = r
                nulled[j] = retract[r]
                newer[r] = True
        src[j] = best
    return src, nulled, newer


@njit
def _at_least(words, r, best, a, b):
    """Words r[a:b] compare >= best[a:b] (lexicographic)."""
    for t in range(a, b):
        if words[r, t] != words[best, t]:
            return words[r, t] > words[best, t]
    return True


@njit
def segment_removal_barrier(order, key_starts, words, bounds, all_null, add, retract, removes):
    """Partial-update ``remove-record-on-sequence-group``: per key, the last ``removes`` (-D) row that took one
    of the removing groups when processed, or -1. Such a row resets the whole row to its own values.

    Group g's sequence words are ``words[:, bounds[g]:bounds[g + 1]]`` and ``all_null[:, g]`` flags rows whose
    group sequence is all null (they leave the group alone). A row takes a group when no row did yet or its
    words compare >= the group's current ones (as ``segment_group_fold``). A reset sets every removing group's
    current sequence to the resetting row's (so a later row takes a group that row left null)."""
    n_keys = key_starts.shape[0] - 1
    n_groups = bounds.shape[0] - 1
    out = np.full(n_keys, -1, np.int64)
    best = np.empty(n_groups, np.int64)
    for j in range(n_keys):
        best[:] = -1
        for p in range(key_starts[j], key_starts[j + 1]):
            r = order[p]
            if not (add[r] or retract[r]):
                continue
            takes_any = False
            for g in range(n_groups):
                if all_null[r, g]:
                    continue
                if best[g] < 0 or _at_least(words, r, best[g], bounds[g], bounds[g + 1]):
                    takes_any = True
                    if not (retract[r] and removes[r]):
                        best[g] = r
            if takes_any and retract[r] and removes[r]:
                out[j] = r
                best[:] = r
    return out


def float_order_words(values: np.ndarray) -> np.ndarray:
    """Order-preserving uint64 words of float64 values (Java ``Double.compare``: -0.0 < 0.0, NaN greatest)."""
    bits = np.ascontiguousarray(values, dtype=np.float64).view(np.int64)
    flipped = np.where(bits < 0, bits ^ np.int64(0x7FFF_FFFF_FFFF_FFFF), bits)
    return flipped.view(np.uint64) ^ np.uint64(1 << 63)


def warm_up() -> None:
    """Compile every kernel of this module on tiny inputs."""
    order = np.arange(3, dtype=np.int64)
    starts = np.array([0, 2, 3], np.int64)
    mask = np.array([True, False, True])
    segment_pick(order, starts, mask, True)
    rows_after_last(order, starts, mask)
    for words in (np.arange(3, dtype=np.uint64), np.arange(3, dtype=np.int64), np.arange(3, dtype=np.float64)):
        segment_arg_extreme(order, starts, words, mask, True)
    segment_arg_extreme_float(order, starts, np.arange(3, dtype=np.float64), mask, True)
    for vals in (np.arange(3, dtype=np.int64), np.arange(3, dtype=np.float64)):
        segment_sum(order, starts, vals, mask, mask, ~mask, False, -(2 ** 63), 2 ** 63 - 1)
    segment_listagg(order, starts, np.arange(4, dtype=np.int64), np.zeros(3, np.uint8), mask,
                    np.zeros(1, np.uint8))
    segment_group_fold(order, starts, np.zeros((3, 1), np.uint64), ~mask, mask, ~mask)
    segment_removal_barrier(order, starts, np.zeros((3, 1), np.uint64), np.array([0, 1], np.int64),
                            np.zeros((3, 1), np.bool_), mask, ~mask, ~mask)
