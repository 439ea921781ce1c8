"""Point lookups on dynamic-bucket tables: the HASH index says which bucket may hold each probed key.

Contract: ``probe_groups`` returns (bucket, probe row indices) pairs that together cover every probe that can
exist in the partition; a probe whose key hash is in no bucket's index is left out (the key was never written).
Without a complete HASH index for the partition (tables written by a writer that keeps none) every bucket gets
every probe.
"""
from __future__ import annotations

import numpy as np

from engine.dynamic_bucket.index_files import (
    HASH_INDEX,
    read_hashes,
    read_index_manifest,
)


def probe_groups(table, snapshot, partition: bytes, key_cols, buckets: list[int]) -> list[tuple[int, np.ndarray]]:
    """Return (bucket, row positions) pairs: which probe keys may be in which of ``buckets``, from the hash index.
    If any bucket lacks an index, every bucket gets all positions."""
    n = len(key_cols[0])
    records = [r for r in read_index_manifest(table.file_io, table.paths, snapshot.index_manifest)
               if r["_INDEX_TYPE"] == HASH_INDEX and r["_PARTITION"] == partition]
    if not set(buckets) <= {r["_BUCKET"] for r in records}:
        return [(b, np.arange(n, dtype=np.int64)) for b in buckets]
    from kernels.hashing import hash_codes
    probes = hash_codes(key_cols)
    out = []
    for r in records:
        hit = np.flatnonzero(np.isin(probes, read_hashes(table.file_io, table.scan().index_file_path(r), r)))
        if len(hit) and r["_BUCKET"] in buckets:
            out.append((int(r["_BUCKET"]), hit.astype(np.int64)))
    return out
