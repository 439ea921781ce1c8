"""merge-engine=deduplicate (paimon-semantics §6.1): the newest record of each key wins, with its row kind.

Fast path: the k-way merge kernel returns only each key's winner (``merge_dedup``), and for unsorted output
every run is filtered in place, never gathered. With ``ignore-delete`` retract records are skipped, so a key
whose records are all retracts vanishes and an older add wins over a newer retract.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from engine.merge import (KEY_COLUMN_PREFIX, SEQUENCE_NUMBER, VALUE_KIND, _is_retract, merge_dedupe_runs,
                          schema_order_words)


def merge_sorted_runs(runs, schema, *, drop_retracts: bool, sorted_output: bool) -> pa.Table | None:
    """``engine.merge.merge_runs`` for deduplicate tables (runs non-empty)."""
    key_names = list(schema.trimmed_primary_keys)
    if schema.table_options.ignore_delete:
        runs = [r.filter(pa.array(~_is_retract(r.column(VALUE_KIND).to_numpy()))) for r in runs]
        runs = [r for r in runs if r.num_rows] or runs[:1]
    winner_masks: list[np.ndarray | None] = [None] * len(runs)
    winners = None
    if len(runs) > 1:
        # Order words are computed over all runs at once so rank-encoded (string) sequence fields compare
        # across runs; then split back per run for the k-way merge.
        seq_fields = list(schema.table_options.sequence_fields)
        both = pa.concat_tables([t.select(seq_fields + [SEQUENCE_NUMBER, VALUE_KIND]) for t in runs])
        words = schema_order_words(both, schema)
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
