"""Binary search of encoded probe keys in a sorted, unique-key table (lookup index, changelog-producer=lookup).

Both sides must be encoded the same way (``kernels.keys.compatible``): for several arrays that may contain
nulls, encode them with ``nullable=True``.

``lower_bound(sorted_keys, probes)``: int64 per probe, the first row of ``sorted_keys`` whose key is >= the
probe (``sorted_keys.n`` if none). ``search_sorted(sorted_keys, probes)``: int64 per probe, the row with an
equal key, or -1.

Each probe that is >= the previous probe gallops forward from the previous answer, so sorted probes cost
O(log distance) each (a few steps more than a binary search when the distance is large); other probes use a
plain binary search. Comparisons are written inline (see ``kernels.merge`` on why).
"""
from __future__ import annotations

import numpy as np

from kernels.jit import njit
from kernels.keys import EncodedKeys, compatible

GALLOP_LIMIT = 64  # a probe far from the previous answer switches to a plain binary search over [lo, n)


def lower_bound(sorted_keys: EncodedKeys, probes: EncodedKeys) -> np.ndarray:
    """Per probe, the index of the first sorted row with key >= probe (``sorted_keys.n`` if none)."""
    return _search(sorted_keys, probes, False)


def search_sorted(sorted_keys: EncodedKeys, probes: EncodedKeys) -> np.ndarray:
    """Per probe, the index of the sorted row with an equal key, or -1. ``sorted_keys`` must have unique keys."""
    return _search(sorted_keys, probes, True)


def _search(sorted_keys: EncodedKeys, probes: EncodedKeys, exact: bool) -> np.ndarray:
    if not compatible(sorted_keys, probes):
        raise ValueError("sorted_keys and probes must have the same key encoding (form, width and layout)")
    out = np.empty(probes.n, np.int64)
    if sorted_keys.is_fixed:
        _search_words(np.ascontiguousarray(sorted_keys.words), np.ascontiguousarray(probes.words), exact, out)
    else:
        _search_bytes(sorted_keys.offsets, sorted_keys.data, probes.offsets, probes.data, exact, out)
    return out


# Both kernels run one loop per probe p over a search state (lo, hi, step):
#   galloping (step > 0): look at row lo + step - 1; if it is < p, lo moves past it and step doubles (up to
#                         GALLOP_LIMIT, then the binary phase starts), else hi becomes that row and the binary
#                         phase starts;
#   binary    (step == 0): look at the middle of [lo, hi).
# Invariant: rows < lo are < p, rows >= hi are >= p. ``hit`` remembers a row that compared equal: with unique
# keys an equal row exists iff the answer lo equals it (every candidate answer < n was compared).

@njit
def _search_words(A, B, exact, out):
    n, w = A.shape
    prev = 0
    for i in range(B.shape[0]):
        c = 0  # probe i vs probe i-1
        if i > 0:
            for t in range(w):
                if B[i, t] != B[i - 1, t]:
                    c = -1 if B[i, t] < B[i - 1, t] else 1
                    break
        lo = prev if (i > 0 and c >= 0) else 0
        hi = n
        step = 1 if (i > 0 and c >= 0) else 0
        hit = -1
        while lo < hi:
            mid = lo + step - 1 if step > 0 else (lo + hi) >> 1
            if mid >= hi:
                step = 0
                continue
            c = 0  # row mid vs probe i
            for t in range(w):
                if A[mid, t] != B[i, t]:
                    c = -1 if A[mid, t] < B[i, t] else 1
                    break
            if c < 0:
                lo = mid + 1
                step = step * 2 if step < GALLOP_LIMIT else 0
            else:
                hi = mid
                step = 0
                if c == 0:
                    hit = mid
        prev = lo
        out[i] = (lo if hit == lo else -1) if exact else lo


@njit
def _search_bytes(offa, da, offb, db, exact, out):
    n = offa.shape[0] - 1
    prev = 0
    for i in range(offb.shape[0] - 1):
        lb = offb[i + 1] - offb[i]
        c = 0  # probe i vs probe i-1
        if i > 0:
            lp = offb[i] - offb[i - 1]
            for t in range(min(lb, lp)):
                if db[offb[i] + t] != db[offb[i - 1] + t]:
                    c = -1 if db[offb[i] + t] < db[offb[i - 1] + t] else 1
                    break
            if c == 0 and lb != lp:
                c = -1 if lb < lp else 1
        lo = prev if (i > 0 and c >= 0) else 0
        hi = n
        step = 1 if (i > 0 and c >= 0) else 0
        hit = -1
        while lo < hi:
            mid = lo + step - 1 if step > 0 else (lo + hi) >> 1
            if mid >= hi:
                step = 0
                continue
            la = offa[mid + 1] - offa[mid]
            c = 0  # row mid vs probe i
            for t in range(min(la, lb)):
                x = da[offa[mid] + t]
                y = db[offb[i] + t]
                if x != y:
                    c = -1 if x < y else 1
                    break
            if c == 0 and la != lb:
                c = -1 if la < lb else 1
            if c < 0:
                lo = mid + 1
                step = step * 2 if step < GALLOP_LIMIT else 0
            else:
                hi = mid
                step = 0
                if c == 0:
                    hit = mid
        prev = lo
        out[i] = (lo if hit == lo else -1) if exact else lo


def warm_up() -> None:
    """Compile this module's kernels on tiny inputs."""
    import pyarrow as pa

    from kernels.keys import encode_keys
    for arr in (pa.array([1, 3, 5]), pa.array(["a", "c", "e"])):
        keys = encode_keys([arr])
        search_sorted(keys, keys)
        lower_bound(keys, keys)
