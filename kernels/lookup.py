"""Binary search of encoded probe keys in a sorted, unique-key table (lookup index, changelog-producer=lookup).

Both sides must be encoded the same way (``kernels.keys.compatible``): for several arrays that may contain
nulls, encode them with ``nullable=True``.

``lower_bound(sorted_keys, probes)``: int64 per probe, the first row of ``sorted_keys`` whose key is >= the
probe (``sorted_keys.n`` if none). ``search_sorted(sorted_keys, probes)``: int64 per probe, the row with an
equal key, or -1.

Each probe that is >= the previous probe gallops forward from the previous answer, so sorted probes cost
O(log distance) each (a few steps more than a binary search when the distance is large); other probes use a
plain binary search. A large batch of probes in random order is sorted first (``kernels.merge.sort_indices``) and
the answers are put back in probe order: on a table larger than the CPU caches this is several times faster than
one cache-missing binary search per probe. Comparisons are written inline (see ``kernels.merge`` on why).
"""
from __future__ import annotations

import numpy as np

from kernels.jit import njit
from kernels.keys import EncodedKeys, compatible
from kernels.merge import sort_indices

GALLOP_LIMIT = 64  # a probe far from the previous answer switches to a plain binary search over [lo, n)
SORT_PROBES_MIN = 256  # batches at least this large whose probes are out of order (> 1/8 descents) are sorted first


def lower_bound(sorted_keys: EncodedKeys, probes: EncodedKeys) -> np.ndarray:
    """Per probe, the index of the first sorted row with key >= probe (``sorted_keys.n`` if none)."""
    return _search(sorted_keys, probes, False)


def search_sorted(sorted_keys: EncodedKeys, probes: EncodedKeys) -> np.ndarray:
    """Per probe, the index of the sorted row with an equal key, or -1. ``sorted_keys`` must have unique keys."""
    return _search(sorted_keys, probes, True)


def _search(sorted_keys: EncodedKeys, probes: EncodedKeys, exact: bool) -> np.ndarray:
    if not compatible(sorted_keys, probes):
        raise ValueError("sorted_keys and probes must have the same key encoding (form, width and layout)")
    if probes.n >= SORT_PROBES_MIN and _descents(probes) * 8 > probes.n:
        # Unsorted probes: a binary search per probe misses the cache at almost every level of a large table.
        # Sorting the probes (a stable sort, cheap next to the misses) lets each one gallop from the previous.
        # (equal probes get equal answers, so the sort need not be stable: introsort on one word is ~6x faster)
        perm = np.argsort(probes.words[:, 0]) if probes.is_fixed and probes.width == 1 else sort_indices(probes)
        out = np.empty(probes.n, np.int64)
        out[perm] = _search_in_order(sorted_keys, _permuted(probes, perm), exact)
        return out
    return _search_in_order(sorted_keys, probes, exact)


def _descents(probes: EncodedKeys) -> int:
    """How many probes are smaller than the probe before them (0 for sorted probes)."""
    if probes.is_fixed:
        return _descents_words(np.ascontiguousarray(probes.words))
    return _descents_bytes(probes.offsets, probes.data)


def _permuted(keys: EncodedKeys, perm: np.ndarray) -> EncodedKeys:
    if keys.is_fixed:
        words = keys.words[:, 0][perm].reshape(-1, 1) if keys.width == 1 else keys.words[perm]
        return EncodedKeys(words=np.ascontiguousarray(words), layout=keys.layout)
    lengths = (keys.offsets[1:] - keys.offsets[:-1])[perm]
    offsets = np.zeros(keys.n + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    data = np.empty(offsets[-1], np.uint8)
    _permute_bytes(keys.offsets, keys.data, perm, offsets, data)
    return EncodedKeys(offsets=offsets, data=data, layout=keys.layout)


@njit
def _permute_bytes(offsets, data, perm, out_offsets, out):
    for i in range(perm.shape[0]):
        src = offsets[perm[i]]
        dst = out_offsets[i]
        for q in range(out_offsets[i + 1] - dst):
            out[dst + q] = data[src + q]


@njit
def _descents_words(B):
    n, w = B.shape
    count = 0
    for i in range(1, n):
        for t in range(w):
            if B[i, t] != B[i - 1, t]:
                if B[i, t] < B[i - 1, t]:
                    count += 1
                break
    return count


@njit
def _descents_bytes(off, data):
    count = 0
    for i in range(1, off.shape[0] - 1):
        la = off[i + 1] - off[i]
        lp = off[i] - off[i - 1]
        c = 0
        for t in range(min(la, lp)):
            x = data[off[i] + t]
            y = data[off[i - 1] + t]
            if x != y:
                c = -1 if x < y else 1
                break
        if c < 0 or (c == 0 and la < lp):
            count += 1
    return count


def _search_in_order(sorted_keys: EncodedKeys, probes: EncodedKeys, exact: bool) -> np.ndarray:
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
        unsorted = encode_keys([arr.take(pa.array(np.arange(SORT_PROBES_MIN) % 3)[::-1])])
        search_sorted(keys, unsorted)   # the sort-the-probes path
