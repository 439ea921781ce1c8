"""Assigning key hashes to dynamic buckets, partition by partition (Paimon's HashBucketAssigner semantics).

Contract (per partition):
- a hash seen before (in the partition's HASH index files or earlier in this write) keeps its bucket;
- a new hash goes to the first non-full bucket of its assigner, in index order (a bucket is full at
  ``dynamic-bucket.target-row-num`` hashes); else to a new bucket, the smallest unused id owned by that assigner;
  with ``dynamic-bucket.max-buckets`` reached, to a random existing bucket of the assigner;
- with ``dynamic-bucket.initial-buckets`` = k there are k assigners; assigner of a key =
  (|partitionHash % k| + |keyHash % k|) % k and assigner i owns the buckets b with b % k == i (so the first k
  buckets open at once). Without it there is one assigner.
Everything is vectorized over unique hashes; new hashes are taken in order of first appearance.
"""
from __future__ import annotations

import random

import numpy as np

MAX_BUCKETS = 32768  # Java Short.MAX_VALUE + 1


def _java_rem_abs(values: np.ndarray, k: int) -> np.ndarray:
    """|Java int remainder| == |x| % k (computed in int64 so INT_MIN is safe)."""
    return np.abs(values.astype(np.int64)) % k


class PartitionIndex:
    """The key-hash -> bucket index of one partition, assigning new hashes to non-full buckets up to
    ``max_buckets``."""
    def __init__(self, partition_hash: int, hashes: np.ndarray, buckets: np.ndarray, bucket_counts: dict[int, int],
                 target_rows: int, num_assigners: int, max_buckets: int):
        order = np.argsort(hashes, kind="stable")
        self.hashes = np.asarray(hashes, np.int32)[order]
        self.buckets = np.asarray(buckets, np.int32)[order]
        self.partition_hash = partition_hash
        self.target_rows = target_rows
        self.k = max(1, num_assigners)
        self.max_buckets = max_buckets
        self.total = dict(bucket_counts)  # bucket -> hash count, in index order
        self.non_full: list[dict[int, int]] = [{} for _ in range(self.k)]
        for b, n in bucket_counts.items():
            if n < target_rows:
                self.non_full[b % self.k][b] = n
        self.touched: set[int] = set()

    def assign(self, key_hashes: np.ndarray) -> np.ndarray:
        """Bucket of each key hash (int32 array), remembering new hashes."""
        key_hashes = np.asarray(key_hashes, np.int32)
        uniq, first, inverse = np.unique(key_hashes, return_index=True, return_inverse=True)
        pos = np.searchsorted(self.hashes, uniq)
        safe = np.minimum(pos, max(len(self.hashes) - 1, 0))
        found = (pos < len(self.hashes)) & (self.hashes[safe] == uniq) if len(self.hashes) else \
            np.zeros(len(uniq), bool)
        out = np.empty(len(uniq), np.int32)
        out[found] = self.buckets[safe[found]]
        new = np.flatnonzero(~found)
        if len(new):
            new = new[np.argsort(first[new], kind="stable")]
            owner = (_java_rem_abs(np.array([self.partition_hash]), self.k)[0]
                     + _java_rem_abs(uniq[new], self.k)) % self.k
            for a in range(self.k):
                mine = new[owner == a]
                if len(mine):
                    out[mine] = self._place(a, len(mine))
            self.hashes = np.concatenate([self.hashes, uniq[new]])
            self.buckets = np.concatenate([self.buckets, out[new]])
            order = np.argsort(self.hashes, kind="stable")
            self.hashes, self.buckets = self.hashes[order], self.buckets[order]
            self.touched.update(int(b) for b in np.unique(out[new]))
        return out[inverse.reshape(-1)]

    def _place(self, assigner: int, n: int) -> np.ndarray:
        """Buckets for ``n`` new hashes of one assigner, in order."""
        out = np.empty(n, np.int32)
        i = 0
        non_full = self.non_full[assigner]
        while i < n:
            if non_full:
                b = next(iter(non_full))
                take = min(self.target_rows - non_full[b], n - i)
                out[i:i + take] = b
                non_full[b] += take
                self.total[b] = self.total.get(b, 0) + take
                if non_full[b] >= self.target_rows:
                    del non_full[b]
                i += take
                continue
            owned = [b for b in self.total if b % self.k == assigner]
            limit = MAX_BUCKETS if self.max_buckets == -1 else self.max_buckets
            b = next((c for c in range(assigner, limit, self.k) if c not in self.total), None)
            if b is None:
                if not owned:
                    raise RuntimeError("no dynamic bucket left for this assigner; raise dynamic-bucket.max-buckets "
                                       "or dynamic-bucket.target-row-num")
                for j in range(i, n):  # Paimon: a random existing bucket once the limit is reached
                    out[j] = random.choice(owned)
                    self.total[int(out[j])] += 1
                return out
            self.total[b] = 0
            non_full[b] = 0
        return out

    def hashes_of(self, bucket: int) -> np.ndarray:
        """Return the key hashes assigned to ``bucket``, in ascending order."""
        return self.hashes[self.buckets == bucket]
