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

# Column names of a *normalized run* (what SplitReader.read_file returns and merge_runs consumes): the primary key
# as "__key_<k>" for each trimmed primary key, then _SEQUENCE_NUMBER, _VALUE_KIND, the sequence fields, then the
# requested table columns. Each run is sorted by key with at most one record per key.
KEY_COLUMN_PREFIX = "__key_"
SEQUENCE_NUMBER = "_SEQUENCE_NUMBER"
VALUE_KIND = "_VALUE_KIND"

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


def _is_retract(kinds: np.ndarray) -> np.ndarray:
    return (kinds == 1) | (kinds == 3)


def merge_runs(runs: Sequence[pa.Table], schema, *, drop_retracts: bool = True,
               sorted_output: bool = False) -> pa.Table | None:
    """Merge normalized sorted runs (see KEY_COLUMN_PREFIX) into one record per key, with the merge engine.

    Guarantees: the result has the runs' columns; each key appears once, as the merged record with its row kind;
    records whose merged kind is a retract (-U/-D) are dropped when ``drop_retracts``; rows are in ascending key
    order when ``sorted_output`` (otherwise in no particular order). This is the one merge implementation shared by
    reads and compaction. ``schema`` (a TableSchema) supplies the key, sequence fields and merge options.
    Returns None when every run is empty.
    """
    key_names = list(schema.trimmed_primary_keys)
    seq_fields = list(schema.table_options.sequence_fields)
    descending = schema.table_options.sequence_descending
    runs = [r for r in runs if r.num_rows]
    if not runs:
        return None
    if len(runs) == 1 and not drop_retracts:
        return runs[0]
    winner_masks: list[np.ndarray | None] = [None] * len(runs)
    winners = None
    if len(runs) > 1:
        # Order words are computed over all runs at once so rank-encoded (string) sequence fields compare
        # across runs; then split back per run for the k-way merge.
        both = pa.concat_tables([t.select(list(seq_fields) + [SEQUENCE_NUMBER, VALUE_KIND]) for t in runs])
        words = order_words([both.column(c) for c in seq_fields], both.column(SEQUENCE_NUMBER).to_numpy(),
                            both.column(VALUE_KIND).to_numpy(), descending)
        bounds = np.cumsum([t.num_rows for t in runs])[:-1]
        winners = merge_dedupe_runs([[t.column(KEY_COLUMN_PREFIX + k) for k in key_names] for t in runs],
                                    np.split(words, bounds))
        if not sorted_output:
            is_winner = np.zeros(both.num_rows, dtype=bool)
            is_winner[winners] = True
            winner_masks = list(np.split(is_winner, bounds))
    if sorted_output and winners is not None:
        merged = pa.concat_tables(runs).combine_chunks().take(pa.array(winners))
        if drop_retracts:
            keep = ~_is_retract(merged.column(VALUE_KIND).to_numpy())
            if not keep.all():
                merged = merged.filter(pa.array(keep))
        return merged
    # Keep each run's winning rows with a filter per run: cheaper than gathering rows across runs (which would
    # first combine the runs into one array).
    parts = []
    for table, winner in zip(runs, winner_masks):
        keep = np.ones(table.num_rows, dtype=bool)
        if drop_retracts:
            keep &= ~_is_retract(table.column(VALUE_KIND).to_numpy())
        if winner is not None:
            keep &= winner
        parts.append(table if keep.all() else table.filter(pa.array(keep)))
    return pa.concat_tables(parts)
