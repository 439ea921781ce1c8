"""merge-engine=deduplicate (paimon-semantics §6.1): the newest record of each key wins, with its row kind.

Fast path: the k-way merge kernel returns only each key's winner (``merge_dedup``) and the gather kernel copies the
winners out of the runs' Arrow buffers in key order (``kernels.gather``). With ``ignore-delete`` retract records are skipped, so a key
whose records are all retracts vanishes and an older add wins over a newer retract.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from kernels.gather import gather, gather_column

from engine.merge import (KEY_COLUMN_PREFIX, SEQUENCE_NUMBER, VALUE_KIND, _is_retract, merge_dedupe_runs,
                          schema_order_words)


def merge_sorted_runs(runs: list[pa.Table], schema, *, drop_retracts: bool, sorted_output: bool,
                      project: list[str] | None = None) -> pa.Table | None:
    """``engine.merge.merge_runs`` for deduplicate tables (runs non-empty). With ``project`` (which includes
    _VALUE_KIND) only those columns are gathered, one at a time, and ``runs`` is consumed in place: each input
    column is dropped from it once gathered, so peak memory stays near the input plus one output column."""
    key_names = list(schema.trimmed_primary_keys)
    if schema.table_options.ignore_delete:
        kept = [r.filter(pa.array(~_is_retract(r.column(VALUE_KIND).to_numpy()))) for r in runs]
        runs[:] = [r for r in kept if r.num_rows] or kept[:1]
    if len(runs) == 1:
        # One run holds each key once already: only retracts may need dropping.
        run = runs.pop() if project is not None else runs[0]
        if drop_retracts:
            keep = ~_is_retract(run.column(VALUE_KIND).to_numpy())
            if not keep.all():
                run = run.filter(pa.array(keep))
        return run.select(project) if project is not None else run
    # Order words are computed over all runs at once so rank-encoded (string) sequence fields compare across runs;
    # then split back per run for the k-way merge.
    seq_fields = list(schema.table_options.sequence_fields)
    both = pa.concat_tables([t.select(seq_fields + [SEQUENCE_NUMBER, VALUE_KIND]) for t in runs])
    words = schema_order_words(both, schema)
    bounds = np.cumsum([t.num_rows for t in runs])[:-1]
    winners = merge_dedupe_runs([[t.column(KEY_COLUMN_PREFIX + k) for k in key_names] for t in runs],
                                np.split(words, bounds))
    if drop_retracts:
        kinds = both.column(VALUE_KIND).to_numpy()
        winners = winners[~_is_retract(kinds[winners])]
    del both, words
    # The gather kernel copies the winners straight out of the runs' Arrow buffers, in key order (no concatenation
    # of the runs first, unlike Arrow's take), so sorted output costs nothing extra.
    if project is None:
        return gather(runs, winners)
    runs[:] = [t.select(project) for t in runs]  # frees what the result does not need (sequence numbers...)
    out_schema = runs[0].schema
    columns = []
    for name in project:
        columns.append(gather_column([t.column(name) for t in runs], winners))
        runs[:] = [t.drop_columns([name]) for t in runs]
    runs.clear()
    return pa.Table.from_arrays(columns, schema=out_schema)
