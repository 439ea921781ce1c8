"""Plain Python references for ``kernels/aggregate.py`` (same contracts, per-row loops). Tests compare them."""
from __future__ import annotations

import numpy as np

from kernels.aggregate import JAVA_WHITESPACE


def _segments(order, key_starts):
    for j in range(len(key_starts) - 1):
        yield j, [int(r) for r in order[key_starts[j]:key_starts[j + 1]]]


def segment_pick_reference(order, key_starts, eligible, first):
    out = []
    for _, rows in _segments(order, key_starts):
        hits = [r for r in rows if eligible[r]]
        out.append((hits[0] if first else hits[-1]) if hits else -1)
    return np.array(out, np.int64)


def rows_after_last_reference(order, key_starts, flag):
    after = np.ones(len(flag), bool)
    for _, rows in _segments(order, key_starts):
        flagged = [i for i, r in enumerate(rows) if flag[r]]
        if flagged:
            for r in rows[:flagged[-1] + 1]:
                after[r] = False
    return after


def segment_arg_extreme_reference(order, key_starts, words, eligible, want_max):
    out = []
    for _, rows in _segments(order, key_starts):
        best = -1
        for r in rows:
            if not eligible[r]:
                continue
            if best < 0 or (words[best] < words[r] if want_max else not words[best] < words[r]):
                best = r
        out.append(best)
    return np.array(out, np.int64)


def segment_arg_extreme_float_reference(order, key_starts, values, eligible, want_max):
    """Same as ``segment_arg_extreme_reference`` with Java's ``Double.compare`` as the order."""
    import struct

    def word(x):
        bits = struct.unpack("<q", struct.pack("<d", float(x)))[0]
        return bits ^ 0x7FFF_FFFF_FFFF_FFFF if bits < 0 else bits
    return segment_arg_extreme_reference(order, key_starts, [word(v) for v in values], eligible, want_max)


def segment_sum_reference(order, key_starts, values, valid, add, retract, product, lo, hi):
    """Python ints (unbounded), then the same range check; float32 values fold in NumPy float32 arithmetic (Java
    ``float``); returns (values, valid, error code, key)."""
    is_int = np.asarray(values).dtype.kind == "i"
    num = np.float32 if np.asarray(values).dtype == np.float32 else float
    out, out_valid = [], []
    for j, rows in _segments(order, key_starts):
        acc = None
        for r in rows:
            if not valid[r] or not (add[r] or retract[r]):
                continue
            x = int(values[r]) if is_int else num(values[r])
            if add[r]:
                acc = x if acc is None else (acc * x if product else acc + x)
            elif product:
                if acc is None:
                    continue
                if is_int:
                    if x == 0:
                        return None, None, 2, j
                    q = abs(acc) // abs(x)
                    acc = q if (acc >= 0) == (x >= 0) else -q
                else:
                    acc = (acc / x) if x != 0 else (float("nan") if acc == 0 else (float("inf") if acc > 0
                                                                                   else float("-inf")))
            else:
                acc = -x if acc is None else acc - x
            if not is_int:
                acc = num(acc)
            if is_int and not lo <= acc <= hi:
                return None, None, 1, j
        out.append(0 if acc is None else acc)
        out_valid.append(acc is not None)
    return np.array(out, dtype=np.asarray(values).dtype), np.array(out_valid, bool), 0, -1


def segment_listagg_reference(order, key_starts, strings, eligible, delimiter: bytes):
    """``strings``: list of bytes (or None) per global row; returns a list of bytes or None per key."""
    out = []
    for _, rows in _segments(order, key_starts):
        parts = [strings[r] for r in rows if eligible[r] and strings[r] is not None
                 and not all(ord(ch) in JAVA_WHITESPACE for ch in strings[r].decode())]
        out.append(delimiter.join(parts) if parts else None)
    return out


def segment_group_fold_reference(order, key_starts, words, all_null, add, retract):
    src, nulled = [], []
    newer = np.zeros(len(all_null), bool)
    for _, rows in _segments(order, key_starts):
        best, was_retract = -1, False
        for r in rows:
            if all_null[r] or not (add[r] or retract[r]):
                continue
            if best < 0 or tuple(words[r]) >= tuple(words[best]):
                best, was_retract = r, bool(retract[r])
                newer[r] = True
        src.append(best)
        nulled.append(was_retract)
    return np.array(src, np.int64), np.array(nulled, bool), newer


def segment_removal_barrier_reference(order, key_starts, words, bounds, all_null, add, retract, removes):
    out = []
    for _, rows in _segments(order, key_starts):
        state = [None] * (len(bounds) - 1)  # each group's current sequence (a tuple of words) or None
        barrier = -1
        for r in rows:
            if not (add[r] or retract[r]):
                continue
            seqs = [tuple(int(w) for w in words[r, bounds[g]:bounds[g + 1]]) for g in range(len(state))]
            takes = [not all_null[r, g] and (state[g] is None or seqs[g] >= state[g]) for g in range(len(state))]
            if retract[r] and removes[r] and any(takes):
                barrier = r
                state = seqs
            else:
                state = [seqs[g] if takes[g] else state[g] for g in range(len(state))]
        out.append(barrier)
    return np.array(out, np.int64)
