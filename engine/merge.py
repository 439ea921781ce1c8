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
from engine.options import SEQUENCE_AUTO_PADDING
from kernels.merge import merge_dedup, newest_per_key, sort_indices
from kernels.merge import merge_runs as kernel_merge_runs

# Column names of a *normalized run* (what SplitReader.read_file returns and merge_runs consumes): the primary key
# as "__key_<k>" for each trimmed primary key, then _SEQUENCE_NUMBER, _VALUE_KIND, the sequence fields, then the
# requested table columns. Each run is sorted by key with at most one record per key.
KEY_COLUMN_PREFIX = "__key_"
SEQUENCE_NUMBER = "_SEQUENCE_NUMBER"
VALUE_KIND = "_VALUE_KIND"

SIGN = np.uint64(1 << 63)


def _rank_words(col: pa.ChunkedArray, descending: bool) -> np.ndarray:
    """Order-preserving uint64 words of a sequence column that does not encode to fixed words (strings); nulls
    rank first."""
    col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    rank = pc.rank(col, sort_keys="descending" if descending else "ascending", null_placement="at_start",
                   tiebreaker="dense")
    return np.asarray(rank, dtype=np.uint64).reshape(-1, 1)


def _sequence_words(col: pa.ChunkedArray, descending: bool) -> np.ndarray:
    """Order-preserving uint64 words of one ``sequence.field`` column.

    A null is the oldest value in both sort orders: Paimon compares sequence fields with ``nullIsLast=false`` and
    negates only the comparison of two non-null values (``UserDefinedSeqComparator`` / ``generateRowCompare``).
    A descending encoding inverts the null marker too, so a validity word (0 = null) goes in front of it.
    """
    enc = encode_keys([col], descending=[descending])
    if not enc.is_fixed:
        return _rank_words(col, descending)
    if not descending:
        return enc.words
    valid = pc.is_valid(col).to_numpy(zero_copy_only=False).astype(np.uint64).reshape(-1, 1)
    return np.concatenate([valid, enc.words], axis=1)


def order_words(seq_columns: Sequence[pa.ChunkedArray], sequence_numbers: np.ndarray, kinds: np.ndarray,
                descending: bool = False) -> np.ndarray:
    """The secondary order of records within a key, as an (n, m) uint64 matrix compared lexicographically."""
    n = len(sequence_numbers)
    parts = [_sequence_words(c, descending) for c in seq_columns]
    parts.append((np.asarray(sequence_numbers, dtype=np.int64).view(np.uint64) ^ SIGN).reshape(n, 1))
    is_add = ((kinds == 0) | (kinds == 2)).astype(np.uint64).reshape(n, 1)
    parts.append(is_add)
    return np.ascontiguousarray(np.concatenate(parts, axis=1))


def sort_dedupe(key_columns: Sequence[pa.ChunkedArray], words: np.ndarray) -> np.ndarray:
    """Indices (into the input) of the newest record of each key, in ascending key order."""
    keys = encode_keys(list(key_columns))
    fast = newest_per_key(keys, words)  # one-word keys: an unstable sort plus one pass over equal keys
    if fast is not None:
        return fast
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


def schema_order_words(table: pa.Table, schema) -> np.ndarray:
    """``order_words`` of a table holding _SEQUENCE_NUMBER, _VALUE_KIND and the schema's sequence fields, with
    ``sequence.auto-padding`` applied."""
    from engine.sequence_padding import padded
    opts = schema.table_options
    seq_cols = [table.column(c) for c in opts.sequence_fields]
    padding = opts.get(SEQUENCE_AUTO_PADDING)
    if padding:
        seq_cols = [padded(c, padding) for c in seq_cols]
    return order_words(seq_cols, np.asarray(table.column(SEQUENCE_NUMBER).to_numpy()),
                       np.asarray(table.column(VALUE_KIND).to_numpy()), opts.sequence_descending)


def merge_runs(runs: Sequence[pa.Table], schema, *, drop_retracts: bool = True,
               sorted_output: bool = False, table_name: str | None = None,
               project: Sequence[str] | None = None, fold_lone_retracts: bool = False) -> pa.Table | None:
    """Merge normalized sorted runs (see KEY_COLUMN_PREFIX) into one record per key, with the merge engine.

    ``project``: the result needs only these columns (``_VALUE_KIND`` is always kept). ``runs`` (a list) is then
    consumed: it is emptied while the merge gathers, so each input column's memory is freed as soon as it is no
    longer needed -- callers must hold no other reference to the tables for that to help.
    ``fold_lone_retracts``: a key whose only record is a retract goes through the merge engine too (Paimon's
    lookup compaction, ``LookupMergeFunction``, has no lone-record pass-through: an aggregation table folds a lone
    -U into an insert); otherwise a lone record passes through unchanged.
    Guarantees: the result has the runs' columns (or ``project`` + ``_VALUE_KIND``); each key appears once, as the
    merged record with its row kind;
    records whose merged kind is a retract (-U/-D) are dropped when ``drop_retracts``; rows are in ascending key
    order when ``sorted_output`` (otherwise in no particular order). This is the one merge implementation shared by
    reads and compaction. ``schema`` (a TableSchema) supplies the key, sequence fields and merge options.
    Runs must hold the columns the engine needs (``engine.merge_engines.required_columns``).
    Returns None when every run is empty. Raises MergeFunctionError when records cannot be merged.
    """
    if project is None:
        runs = [r for r in runs if r.num_rows]
    else:
        runs[:] = [r for r in runs if r.num_rows]  # in place: the caller's list is the one consumed
        project = list(dict.fromkeys(list(project) + [VALUE_KIND]))
    if not runs:
        return None
    if len(runs) == 1 and not drop_retracts and not (fold_lone_retracts and _is_retract(
            runs[0].column(VALUE_KIND).to_numpy()).any()):
        return runs.pop().select(project) if project is not None else runs[0]
    engine = schema.table_options.merge_engine
    if engine == "deduplicate":
        from engine.merge_engines.deduplicate import merge_sorted_runs
        return merge_sorted_runs(runs, schema, drop_retracts=drop_retracts, sorted_output=sorted_output,
                                 project=project)
    merged = _merge_with_engine(runs, schema, drop_retracts=drop_retracts, sorted_output=sorted_output,
                                table_name=table_name, fold_lone_retracts=fold_lone_retracts)
    if project is not None:
        runs.clear()
        merged = merged.select(project)
    return merged


def _merge_with_engine(runs: list[pa.Table], schema, *, drop_retracts: bool, sorted_output: bool,
                       table_name: str | None, fold_lone_retracts: bool = False) -> pa.Table:
    """``merge_runs`` for the engines that fold a key's records (partial-update, aggregation, first-row)."""
    from engine.merge_engines import reduce_segments
    if len(runs) == 1 and fold_lone_retracts and _is_retract(runs[0].column(VALUE_KIND).to_numpy()).any():
        n = runs[0].num_rows  # a run holds one record per key
        merged = reduce_segments(runs[0], np.arange(n), np.arange(n + 1), schema, table_name=table_name,
                                 fold_lone_retracts=True)
    elif len(runs) == 1:
        merged = runs[0]
    else:
        both = pa.concat_tables(runs).combine_chunks()
        key_names = list(schema.trimmed_primary_keys)
        words = schema_order_words(both, schema)
        bounds = np.cumsum([t.num_rows for t in runs])[:-1]
        encoded = [encode_keys([t.column(KEY_COLUMN_PREFIX + k) for k in key_names]) for t in runs]
        result = kernel_merge_runs(encoded, [np.ascontiguousarray(w) for w in np.split(words, bounds)])
        merged = reduce_segments(both, result.order, result.key_starts, schema, sorted_output=sorted_output,
                                 table_name=table_name, fold_lone_retracts=fold_lone_retracts)
    if drop_retracts:
        keep = ~_is_retract(merged.column(VALUE_KIND).to_numpy())
        if not keep.all():
            merged = merged.filter(pa.array(keep))
    return merged


def merge_unsorted(table: pa.Table, schema, *, drop_retracts: bool = False, table_name: str | None = None
                   ) -> pa.Table:
    """One unsorted normalized run (keys may repeat; e.g. a write buffer) -> one record per key, in key order,
    with the table's merge engine. Same record rules as ``merge_runs``."""
    if table.num_rows == 0:
        return table
    table = table.combine_chunks()
    key_cols = [table.column(KEY_COLUMN_PREFIX + k) for k in schema.trimmed_primary_keys]
    words = schema_order_words(table, schema)
    if schema.table_options.merge_engine == "deduplicate":
        if schema.table_options.ignore_delete:
            keep = ~_is_retract(table.column(VALUE_KIND).to_numpy())
            if not keep.all():
                return merge_unsorted(table.filter(pa.array(keep)), schema, drop_retracts=drop_retracts)
        merged = table.take(pa.array(sort_dedupe(key_cols, words)))
    else:
        from engine.merge_engines import reduce_segments
        perm = sort_indices(encode_keys(key_cols), words)
        ordered = table.take(pa.array(perm))
        result = kernel_merge_runs([encode_keys([c.take(pa.array(perm)) for c in key_cols])],
                                   [np.ascontiguousarray(words[perm])])
        merged = reduce_segments(ordered, result.order, result.key_starts, schema, table_name=table_name)
    if drop_retracts:
        keep = ~_is_retract(merged.column(VALUE_KIND).to_numpy())
        if not keep.all():
            merged = merged.filter(pa.array(keep))
    return merged
