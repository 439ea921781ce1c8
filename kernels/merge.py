"""Sorting and k-way merging of sorted runs of encoded keys (spec §2.3 merge order, §4 LSM, §6.1 deduplicate).

Vocabulary:

* a **run** is an ``EncodedKeys`` sorted ascending by (key, seq); its rows may repeat a key.
* ``seq`` is the caller's *secondary order* matrix, uint64 ``(n, m)`` (a 1-D array counts as m=1, None as
  m=0): user sequence fields (encoded), then ``_SEQUENCE_NUMBER ^ 2**63``, then a 0/1 add flag. The kernels
  only compare its words lexicographically; all runs of one merge must have the same m.
* **global row ids**: run r's row i has id ``offsets[r] + i``, offsets being the cumulative run lengths in the
  order the runs are given.

Merged order: key ascending, then seq ascending, then run index ascending, then row index. Within a key group
the last row is the newest record, i.e. what deduplicate keeps.

Implementation notes. Runs are concatenated into one key store (a copy). Fixed keys of several words are first
reduced to one word when possible (constant words dropped, the others bit-packed by value range -- this keeps
the order); otherwise they are compared as big-endian bytes like the var form. So there are two kernel
families: one-word keys (``_merge_word1``, ``_dedup2_word1``) and byte-string keys (``_merge_bytes``). The
k-way merge is a loser tree over the run heads. Comparisons are written out inline in the loops on purpose:
a call to a non-inlined Numba function with array arguments costs an atomic incref/decref per array.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kernels.jit import njit
from kernels.keys import EncodedKeys, compatible

MAX_U64 = np.uint64(0xFFFF_FFFF_FFFF_FFFF)


@dataclass(frozen=True, eq=False)
class MergeResult:
    """``order``: int64 global row ids in merged order. ``key_starts``: int64 ``(n_keys + 1)``; the rows of the
    j-th distinct key are ``order[key_starts[j]:key_starts[j+1]]`` (``key_starts[-1] == len(order)``)."""

    order: np.ndarray
    key_starts: np.ndarray

    @property
    def n_keys(self) -> int:
        return self.key_starts.shape[0] - 1


def last_per_key(result: MergeResult) -> np.ndarray:
    """Global id of the newest (last) row of each key, in key order: int64 ``(n_keys,)``."""
    return result.order[result.key_starts[1:] - 1]


# ---- public API ------------------------------------------------------------------------------------------------

def sort_indices(keys: EncodedKeys, seq: np.ndarray | None = None) -> np.ndarray:
    """Stable permutation (int64) ordering the rows by (key, seq words); equal rows keep their input order."""
    S = _seq_matrix(seq, keys.n)
    if keys.n == 0:
        return np.empty(0, np.int64)
    if keys.is_fixed:
        K = _pack_words(keys.words)
        K = [K] if K is not None else [keys.words[:, j] for j in range(keys.width - 1, -1, -1)]
        if S.shape[1] == 0 and len(K) == 1:
            return np.argsort(K[0], kind="stable").astype(np.int64, copy=False)
        return np.lexsort([S[:, j] for j in range(S.shape[1] - 1, -1, -1)] + K).astype(np.int64, copy=False)
    return _sort_bytes(keys.offsets, keys.data, *_prefix_words(keys.offsets, keys.data), S)


def newest_per_key(keys: EncodedKeys, seq: np.ndarray | None = None) -> np.ndarray | None:
    """Input index of every key's newest row -- the largest seq row, then the latest input position -- in ascending
    key order: int64 ``(n_keys,)``, the same as ``merge_dedup`` over the stable ``sort_indices`` order. For keys
    that pack into one uint64 (fixed width) it sorts with an unstable introsort (about 5x faster than a stable sort
    on random keys) and resolves equal keys in one pass; returns None for other keys (use the stable path)."""
    if keys.n == 0:
        return np.empty(0, np.int64)
    if not keys.is_fixed:
        return None
    K = _pack_words(keys.words)
    if K is None:
        return None
    S = _seq_matrix(seq, keys.n)
    perm = np.argsort(K).astype(np.int64, copy=False)
    out = np.empty(keys.n, np.int64)
    n = _newest_in_groups(np.ascontiguousarray(K[perm]), perm, S, out)
    return out[:n]


def merge_runs(runs: Sequence[EncodedKeys], seqs: Sequence[np.ndarray | None] | None = None) -> MergeResult:
    """K-way merge of sorted runs into the merged order, with equal-key group boundaries (see MergeResult)."""
    if not runs:
        return MergeResult(np.empty(0, np.int64), np.zeros(1, np.int64))
    store = _Store(runs, seqs)
    order = np.empty(store.total, np.int64)
    key_starts = np.empty(store.total + 1, np.int64)
    if store.total == 0:
        n_keys = 0
    elif store.K is not None:
        n_keys = _merge_word1(store.K, store.S, store.starts, store.ends, False, order, key_starts)
    else:
        n_keys = _merge_bytes(store.off, store.data, *store.prefixes(), store.S, store.starts, store.ends, False,
                              order, key_starts)
    key_starts[n_keys] = store.total
    return MergeResult(order, key_starts[:n_keys + 1].copy())


def merge_dedup(runs: Sequence[EncodedKeys], seqs: Sequence[np.ndarray | None] | None = None) -> np.ndarray:
    """Global id of the newest row of every key, in key order: int64 ``(n_keys,)``.

    Equals ``last_per_key(merge_runs(runs, seqs))`` without materialising the merged order.
    """
    if not runs:
        return np.empty(0, np.int64)
    store = _Store(runs, seqs)
    out = np.empty(store.total, np.int64)
    none = np.empty(0, np.int64)
    live = np.flatnonzero(store.ends > store.starts)
    starts, ends = store.starts[live], store.ends[live]
    if len(live) == 0:
        n = 0
    elif store.K is None:
        n = _merge_bytes(store.off, store.data, *store.prefixes(), store.S, starts, ends, True, out, none)
    elif len(live) == 2:
        n = _dedup2_word1(store.K, store.S, starts[0], ends[0], starts[1], ends[1], out)
    else:
        n = _merge_word1(store.K, store.S, starts, ends, True, out, none)
    return out[:n]


# ---- input normalisation -------------------------------------------------------------------------------------

def _seq_matrix(seq, n: int) -> np.ndarray:
    if seq is None:
        return np.empty((n, 0), np.uint64)
    seq = np.asarray(seq)
    if seq.dtype != np.uint64:
        raise ValueError(f"seq must be uint64, got {seq.dtype}")
    if seq.ndim == 1:
        seq = seq.reshape(-1, 1)
    if seq.ndim != 2 or seq.shape[0] != n:
        raise ValueError(f"seq must have shape ({n}, m), got {seq.shape}")
    return np.ascontiguousarray(seq)


class _Store:
    """All runs concatenated: ``starts``/``ends`` (int64 per run), seq matrix ``S`` (total, m), and either ``K``
    (one uint64 word per row) or ``off``/``data`` (byte strings, offsets rebased to 0)."""

    def __init__(self, runs: Sequence[EncodedKeys], seqs):
        if seqs is None:
            seqs = [None] * len(runs)
        if len(seqs) != len(runs):
            raise ValueError(f"{len(runs)} runs but {len(seqs)} seq arrays")
        for r in runs[1:]:
            if not compatible(runs[0], r):
                raise ValueError("all runs must have the same key encoding (form, width and layout)")
        mats = [_seq_matrix(s, r.n) for r, s in zip(runs, seqs)]
        if len({m.shape[1] for m in mats}) > 1:
            raise ValueError("all runs must have the same number of seq words")
        lengths = np.array([r.n for r in runs], np.int64)
        self.ends = np.cumsum(lengths)
        self.starts = self.ends - lengths
        self.total = int(self.ends[-1])
        self.S = mats[0] if len(mats) == 1 else np.ascontiguousarray(np.concatenate(mats))
        self.K = self.off = self.data = None
        if runs[0].is_fixed:
            W = runs[0].words if len(runs) == 1 else np.concatenate([r.words for r in runs])
            K = _reduce_words(W)
            if not isinstance(K, tuple):
                self.K = K
                return
            self.off, self.data = K
            return
        self.off = np.empty(self.total + 1, np.int64)
        self.off[0] = 0
        parts, base = [], 0
        for r, s, e in zip(runs, self.starts, self.ends):
            o = r.offsets
            self.off[s + 1:e + 1] = o[1:] - o[0] + base
            base += int(o[-1] - o[0])
            parts.append(r.data[o[0]:o[-1]])
        self.data = np.concatenate(parts)

    def prefixes(self):
        """(prefix word per row, skip) for the byte-string kernels."""
        return _prefix_words(self.off, self.data)


def _pack_words(W: np.ndarray) -> np.ndarray | None:
    """Order-preserving packing of a (n, w) word matrix into one uint64 per row: constant words are dropped and
    the others concatenated bitwise after subtracting their minimum. None if they need more than 64 bits."""
    if W.shape[1] == 1:
        return np.ascontiguousarray(W[:, 0])
    vary, lo, bits = _varying_words(W)
    if sum(bits) > 64:
        return None
    K = np.zeros(W.shape[0], np.uint64)
    for j, b in zip(vary, bits):
        if b < 64:
            K <<= np.uint64(b)
        K |= W[:, j] - lo[j]
    return K


def _reduce_words(W: np.ndarray):
    """``_pack_words(W)`` if it fits, else the varying words as big-endian byte strings ``(offsets, data)``."""
    K = _pack_words(W)
    if K is not None:
        return K
    W = np.ascontiguousarray(W[:, _varying_words(W)[0]])
    width = 8 * W.shape[1]
    return np.arange(0, width * W.shape[0] + 1, width, dtype=np.int64), W.astype(">u8").view(np.uint8).reshape(-1)


def _varying_words(W: np.ndarray):
    """(indices of the non-constant columns, column minima, bits of each one's value range)."""
    if W.shape[0] == 0:
        return [], None, []
    lo, hi = _column_ranges(W)
    vary = [j for j in range(W.shape[1]) if hi[j] != lo[j]]
    return vary, lo, [int(hi[j] - lo[j]).bit_length() for j in vary]


@njit
def _column_ranges(W):
    lo = W[0].copy()
    hi = W[0].copy()
    for i in range(1, W.shape[0]):
        for j in range(W.shape[1]):
            x = W[i, j]
            lo[j] = min(lo[j], x)
            hi[j] = max(hi[j], x)
    return lo, hi


# ---- one-word keys -------------------------------------------------------------------------------------------

@njit
def _merge_word1(K, S, starts, ends, dedup, out, key_starts):
    """Loser-tree merge of runs K[starts[r]:ends[r]] of one-word keys.

    dedup=False: write the merged order to out and the start of every key group to key_starts; returns the
    number of keys. dedup=True: write the last row of every key (in merged order) to out; returns its count.

    tree[0] is the winning run; tree[1..k-1] the losers at the internal nodes (leaf r is node k + r, the parent
    of node i is i // 2). Run heads are cached in head[]; a finished run has head MAX and done=True. Heads are
    ordered by (head, done, seq unless dedup, run). The tree is built by letting every leaf climb: the first
    arrival at an empty node (-1) waits there, the second plays the match.
    In dedup mode a run's whole key group is consumed at once; equal-key groups leave the tree by run index,
    so a later group wins when its last seq is >= the best one so far.
    """
    k = starts.shape[0]
    m = S.shape[1]
    cur = starts.copy()
    done = cur >= ends
    head = np.empty(k, np.uint64)
    for r in range(k):
        head[r] = MAX_U64 if done[r] else K[cur[r]]
    tree = np.full(k, -1, np.int64)
    tkey = np.empty(k, np.uint64)  # head of the loser stored at each node
    n_out = 0
    n_keys = 0
    best = -1
    insert = 0
    while True:
        if insert < k:  # build phase
            x = insert
            insert += 1
        else:
            x = tree[0]
            if done[x]:
                break
            row = cur[x]
            key = head[x]
            e = ends[x]
            if dedup:
                j = row + 1
                while j < e and K[j] == key:
                    j += 1
                last = j - 1
                if best >= 0 and K[best] == key:
                    c = 0
                    for t in range(m):
                        if S[last, t] != S[best, t]:
                            c = -1 if S[last, t] < S[best, t] else 1
                            break
                    if c >= 0:
                        best = last
                else:
                    if best >= 0:
                        out[n_out] = best
                        n_out += 1
                    best = last
            else:
                j = row + 1
                if n_out == 0 or K[out[n_out - 1]] != key:
                    key_starts[n_keys] = n_out
                    n_keys += 1
                out[n_out] = row
                n_out += 1
            cur[x] = j
            if j < e:
                head[x] = K[j]
            else:
                head[x] = MAX_U64
                done[x] = True
        # x's head changed (or x is a new leaf): replay its path towards the root
        hx = head[x]
        node = (x + k) >> 1
        while node > 0:
            o = tree[node]
            if o < 0:
                tree[node] = x
                tkey[node] = hx
                x = -1
                break
            ho = tkey[node]
            if ho != hx:
                o_first = ho < hx
            elif done[o] != done[x]:
                o_first = done[x]
            else:
                c = 0
                if not dedup and not done[o]:
                    a = cur[o]
                    b = cur[x]
                    for t in range(m):
                        if S[a, t] != S[b, t]:
                            c = -1 if S[a, t] < S[b, t] else 1
                            break
                o_first = c < 0 or (c == 0 and o < x)
            if o_first:
                tree[node] = x
                tkey[node] = hx
                x = o
                hx = ho
            node >>= 1
        if x >= 0:
            tree[0] = x
    if dedup:
        if best >= 0:
            out[n_out] = best
            n_out += 1
        return n_out
    return n_keys


@njit
def _dedup2_word1(K, S, a, a_end, b, b_end, out):
    """merge_dedup of two runs of one-word keys, K[a:a_end] (older on seq ties) and K[b:b_end]."""
    m = S.shape[1]
    n = 0
    while a < a_end or b < b_end:
        if b == b_end or (a < a_end and K[a] < K[b]):
            key = K[a]
            a += 1
            while a < a_end and K[a] == key:
                a += 1
            out[n] = a - 1
        elif a == a_end or K[b] < K[a]:
            key = K[b]
            b += 1
            while b < b_end and K[b] == key:
                b += 1
            out[n] = b - 1
        else:
            key = K[a]
            a += 1
            while a < a_end and K[a] == key:
                a += 1
            b += 1
            while b < b_end and K[b] == key:
                b += 1
            win = b - 1
            for t in range(m):
                if S[a - 1, t] != S[b - 1, t]:
                    if S[a - 1, t] > S[b - 1, t]:
                        win = a - 1
                    break
            out[n] = win
        n += 1
    return n


# ---- byte-string keys -----------------------------------------------------------------------------------------
# Every row gets a prefix word: its bytes [lcp, lcp + 8) big-endian, zero padded, lcp being the longest prefix
# common to all rows. Comparing prefix words first, and only on a tie the bytes from lcp + 8 on (then the
# lengths), gives the byte order with the shorter string first.

@njit
def _prefix_words(off, data):
    """(prefix word per row, lcp + 8 = where a comparison continues after equal prefix words)."""
    n = off.shape[0] - 1
    lcp = off[1] - off[0] if n > 0 else 0
    for i in range(1, n):
        lcp = min(lcp, off[i + 1] - off[i])
        for t in range(lcp):
            if data[off[i] + t] != data[off[0] + t]:
                lcp = t
                break
    pre = np.zeros(n, np.uint64)
    for i in range(n):
        v = np.uint64(0)
        for t in range(lcp, lcp + 8):
            v = v << np.uint64(8)
            if off[i] + t < off[i + 1]:
                v = v | np.uint64(data[off[i] + t])
        pre[i] = v
    return pre, lcp + 8


@njit
def _merge_bytes(off, data, pre, skip, S, starts, ends, dedup, out, key_starts):
    """``_merge_word1`` for byte-string keys; same contract. Run heads cache their prefix word; comparisons
    look at the bytes only when prefix words tie."""
    k = starts.shape[0]
    m = S.shape[1]
    cur = starts.copy()
    done = cur >= ends
    head = np.empty(k, np.uint64)
    for r in range(k):
        head[r] = MAX_U64 if done[r] else pre[cur[r]]
    tree = np.full(k, -1, np.int64)
    n_out = 0
    n_keys = 0
    best = -1
    insert = 0
    while True:
        if insert < k:
            x = insert
            insert += 1
        else:
            x = tree[0]
            if done[x]:
                break
            row = cur[x]
            e = ends[x]
            j = row + 1
            while dedup and j < e and pre[j] == pre[row]:  # skip to the end of row's key group
                same = off[j + 1] - off[j] == off[row + 1] - off[row]
                if same:
                    for t in range(skip, off[j + 1] - off[j]):
                        if data[off[j] + t] != data[off[row] + t]:
                            same = False
                            break
                if not same:
                    break
                j += 1
            last = j - 1
            prev = best if dedup else (out[n_out - 1] if n_out > 0 else -1)
            same = prev >= 0 and pre[prev] == pre[row] and off[prev + 1] - off[prev] == off[row + 1] - off[row]
            if same:
                for t in range(skip, off[row + 1] - off[row]):
                    if data[off[prev] + t] != data[off[row] + t]:
                        same = False
                        break
            if dedup:
                if same:
                    c = 0
                    for t in range(m):
                        if S[last, t] != S[best, t]:
                            c = -1 if S[last, t] < S[best, t] else 1
                            break
                    if c >= 0:
                        best = last
                else:
                    if best >= 0:
                        out[n_out] = best
                        n_out += 1
                    best = last
            else:
                if not same:
                    key_starts[n_keys] = n_out
                    n_keys += 1
                out[n_out] = row
                n_out += 1
            cur[x] = j
            if j < e:
                head[x] = pre[j]
            else:
                head[x] = MAX_U64
                done[x] = True
        hx = head[x]
        node = (x + k) >> 1
        while node > 0:
            o = tree[node]
            if o < 0:
                tree[node] = x
                x = -1
                break
            ho = head[o]
            if ho != hx:
                o_first = ho < hx
            elif done[o] or done[x]:
                o_first = done[x] and (o < x or not done[o])
            else:
                a = cur[o]
                b = cur[x]
                la = off[a + 1] - off[a]
                lb = off[b + 1] - off[b]
                c = 0
                for t in range(skip, min(la, lb)):
                    if data[off[a] + t] != data[off[b] + t]:
                        c = -1 if data[off[a] + t] < data[off[b] + t] else 1
                        break
                if c == 0 and la != lb:
                    c = -1 if la < lb else 1
                if c == 0 and not dedup:
                    for t in range(m):
                        if S[a, t] != S[b, t]:
                            c = -1 if S[a, t] < S[b, t] else 1
                            break
                o_first = c < 0 or (c == 0 and o < x)
            if o_first:
                tree[node] = x
                x = o
                hx = ho
            node >>= 1
        if x >= 0:
            tree[0] = x
    if dedup:
        if best >= 0:
            out[n_out] = best
            n_out += 1
        return n_out
    return n_keys


@njit
def _sort_bytes(off, data, pre, skip, S):
    """Stable bottom-up merge sort of row ids by (bytes, seq), prefix words first."""
    n = pre.shape[0]
    m = S.shape[1]
    src = np.arange(n).astype(np.int64)
    dst = np.empty(n, np.int64)
    width = 1
    while width < n:
        for lo in range(0, n, 2 * width):
            mid = min(lo + width, n)
            hi = min(lo + 2 * width, n)
            i = lo
            j = mid
            for q in range(lo, hi):
                if i < mid and j < hi:
                    a = src[j]  # take from the right only if strictly before the left
                    b = src[i]
                    if pre[a] != pre[b]:
                        right = pre[a] < pre[b]
                    else:
                        la = off[a + 1] - off[a]
                        lb = off[b + 1] - off[b]
                        c = 0
                        for t in range(skip, min(la, lb)):
                            if data[off[a] + t] != data[off[b] + t]:
                                c = -1 if data[off[a] + t] < data[off[b] + t] else 1
                                break
                        if c == 0 and la != lb:
                            c = -1 if la < lb else 1
                        if c == 0:
                            for t in range(m):
                                if S[a, t] != S[b, t]:
                                    c = -1 if S[a, t] < S[b, t] else 1
                                    break
                        right = c < 0
                else:
                    right = i >= mid
                if right:
                    dst[q] = src[j]
                    j += 1
                else:
                    dst[q] = src[i]
                    i += 1
        src, dst = dst, src
        width *= 2
    return src


def warm_up() -> None:
    """Compile the kernels of kernels.keys, kernels.merge and kernels.lookup on tiny inputs."""
    import pyarrow as pa

    from kernels.keys import encode_keys
    from kernels.keys import warm_up as keys_warm_up
    from kernels.lookup import warm_up as lookup_warm_up

    keys_warm_up()
    lookup_warm_up()
    seq = np.arange(3, dtype=np.uint64)
    for cols in ([pa.array([1, 2, 3])], [pa.array(["a", "b", "c"])], [pa.array(["a", None, "c"])],
                 [pa.array([1, 2, 3]), pa.array([1, 1, 1])]):
        keys = encode_keys(cols)
        sort_indices(keys, seq)
        newest_per_key(keys, seq)
        for k in (1, 2, 3):
            merge_runs([keys] * k, [seq] * k)
            merge_dedup([keys] * k, [seq] * k)


@njit
def _newest_in_groups(k_sorted, perm, S, out):
    """``k_sorted``: packed keys in ascending order; ``perm``: the input index at each sorted position; ``S``: seq
    words in input order. Writes, per run of equal keys, the input index with the largest (S row, index)."""
    n = k_sorted.shape[0]
    m = S.shape[1]
    count = 0
    i = 0
    while i < n:
        best = perm[i]
        j = i + 1
        while j < n and k_sorted[j] == k_sorted[i]:
            cand = perm[j]
            greater = cand > best
            for c in range(m):
                if S[cand, c] != S[best, c]:
                    greater = S[cand, c] > S[best, c]
                    break
            if greater:
                best = cand
            j += 1
        out[count] = best
        count += 1
        i = j
    return count
