"""Merge order and the deduplicate merge engine, on top of the key/merge kernels.

Records of one key are ordered oldest -> newest by (user ``sequence.field`` values, ``_SEQUENCE_NUMBER``, retract
before add) — paimon-semantics §2.3. Deduplicate keeps the newest record of each key, with its row kind.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kernels.keys import encode_keys
from kernels.merge import merge_dedup, sort_indices

SIGN = np.uint64(1 << 63)


def _rank_words(columns: Sequence[pa.ChunkedArray], descending: bool) -> np.ndarray:
    """Order-preserving uint64 words for sequence columns that do not encode to fixed words (strings)."""
    out = []
    for col in columns:
        col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
        rank = pc.rank(col, sort_keys="descending" if descending else "ascending",
                       null_placement="at_end" if descending else "at_start", tiebreaker="dense")
        out.append(np.asarray(rank, dtype=np.uint64))
    return np.stack(out, axis=1) if out else np.zeros((0, 0), np.uint64)


def order_words(seq_columns: Sequence[pa.ChunkedArray], sequence_numbers: np.ndarray, kinds: np.ndarray,
                descending: bool = False) -> np.ndarray:
    """The secondary order of records within a key, as an (n, m) uint64 matrix compared lexicographically."""
    n = len(sequence_numbers)
    parts = []
    if seq_columns:
        enc = encode_keys(list(seq_columns), descending=[descending] * len(seq_columns))
        parts.append(enc.words if enc.is_fixed else _rank_words(seq_columns, descending))
    parts.append((np.asarray(sequence_numbers, dtype=np.int64).view(np.uint64) ^ SIGN).reshape(n, 1))
    is_add = ((kinds == 0) | (kinds == 2)).astype(np.uint64).reshape(n, 1)
    parts.append(is_add)
    return np.ascontiguousarray(np.concatenate(parts, axis=1)) if len(parts) > 1 else parts[0]


def sort_dedupe(key_columns: Sequence[pa.ChunkedArray], words: np.ndarray) -> np.ndarray:
    """Indices (into the input) of the newest record of each key, in ascending key order."""
    keys = encode_keys(list(key_columns))
    perm = sort_indices(keys, words)
    sorted_keys = encode_keys([c.take(pa.array(perm)) for c in key_columns])
    winners = merge_dedup([sorted_keys], [np.ascontiguousarray(words[perm])])
    return perm[winners]


def merge_dedupe_runs(run_keys: Sequence[Sequence[pa.ChunkedArray]], run_words: Sequence[np.ndarray]
                      ) -> np.ndarray:
    """K-way merge of sorted runs; global ids (into the runs' concatenation) of each key's newest record."""
    encoded = [encode_keys(list(cols)) for cols in run_keys]
    return merge_dedup(encoded, [np.ascontiguousarray(w) for w in run_words])
