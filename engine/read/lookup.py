"""Point lookups by primary key: per bucket, binary search in each sorted file (lookup kernel).

Contract: the result holds, for every distinct probe key that is live at the snapshot, its merged row (as
``Table.read`` would return it: the newest record for deduplicate, every record folded by the other engines).
Files whose [min key, max key] range holds no probe are not opened.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.merge import merge_unsorted, schema_order_words, sort_dedupe
from engine.merge_engines import apply_default_values, required_columns
from engine.partitioning import bucket_groups, partition_groups
from engine.meta import binary_row
from engine.read.file_skips import read_skips
from engine.read.split_read import RETRACT_KINDS, SplitReader, with_schema
from engine.schema import VALUE_KIND
from engine.write.validate import conform, to_arrow_table
from kernels.hashing import bucket_ids
from kernels.keys import encode_keys
from kernels.lookup import search_sorted


def lookup_rows(table, keys, snapshot, columns=None, *, exclude: frozenset[str] = frozenset(),
                every_level: bool = False) -> pa.Table:
    """Return the rows of ``columns`` (default: all) for the primary keys in ``keys`` at ``snapshot``; missing
    keys are absent. ``exclude`` leaves data files out (TableScan.plan); ``every_level`` also searches the level-0
    files a batch read of a deletion-vector table does not see (engine.read.split_read.batch_view).
    Raises InvalidInput for an unknown column or bad keys; no snapshot gives an empty table."""
    schema = table.schema
    out_cols = table.output_columns(columns)
    probes = to_arrow_table(keys, table.name)
    probes = probes.select([c for c in probes.column_names if c in schema.primary_keys])
    probes, _ = conform(probes, schema, table.name, delete=True)
    if snapshot is None or probes.num_rows == 0:
        return schema.arrow_schema.empty_table().select(out_cols)

    key_names = list(schema.trimmed_primary_keys)
    key_types = schema.types_of(key_names)
    part_types = schema.types_of(schema.partition_keys)
    from engine.postpone import real_bucket_splits
    from engine.read.split_read import batch_splits
    planned = table.scan().plan(snapshot, exclude=exclude)
    splits = {(sp.partition, sp.bucket): sp
              for sp in (real_bucket_splits(planned) if every_level else batch_splits(planned, schema))}
    totals = {partition: sp.total_buckets for (partition, _), sp in splits.items()}
    reader = SplitReader(table.file_io, schema, table.schema_manager.schema, read_skips(table))
    # Without sequence.field the newest run holding a key decides, so later (older) runs need not be searched.
    # Other merge engines fold every record of a key: all runs are searched and merged per bucket.
    dedupe = schema.table_options.merge_engine == "deduplicate"
    newest_wins = dedupe and not schema.table_options.sequence_fields
    # dedupe groups the hits by primary key (partition columns included), so those are read whatever ``columns``
    read_cols = list(dict.fromkeys(out_cols + list(schema.primary_keys))) if dedupe \
        else required_columns(schema, out_cols)
    from engine.read.split_read import _lookup_merge
    newest_high_wins = _lookup_merge(schema)  # issue 5: levels of lookup tables hold full states
    merged_parts = []
    candidates = []
    for values, idx in partition_groups(probes, schema.partition_keys):
        partition = binary_row.serialize_row(list(values), part_types)
        if partition not in totals:
            continue
        in_part = probes if idx is None else probes.take(pa.array(idx))
        idx = np.arange(probes.num_rows, dtype=np.int64) if idx is None else idx
        if totals[partition] > 0:
            groups = bucket_groups(bucket_ids([in_part.column(k) for k in schema.bucket_keys], totals[partition]))
        else:  # dynamic bucket mode: the HASH index knows the key's bucket
            from engine.dynamic_bucket.lookup import probe_groups
            groups = probe_groups(table, snapshot, partition, [in_part.column(k) for k in schema.bucket_keys],
                                  [b for (p, b) in splits if p == partition])
        for bucket, chunk in groups:
            sp = splits.get((partition, bucket))
            if sp is None:
                continue
            probe_keys = [in_part.column(k).take(pa.array(chunk)) for k in key_names]
            hits = _search_bucket(reader, sp, probe_keys, key_names, key_types, read_cols, newest_wins,
                                  newest_high_wins)
            if not dedupe:
                # each hit file row once (duplicate probes must not feed an aggregate twice)
                rows_hit = [rows.take(pa.array(np.unique(hit_row))) for rows, _, hit_row in hits]
                if rows_hit:
                    merged_parts.append(merge_unsorted(pa.concat_tables(rows_hit), schema, drop_retracts=True,
                                                       table_name=table.name))
                continue
            for rows, hit_probe, hit_row in hits:
                part = rows.take(pa.array(hit_row))
                candidates.append(part.append_column("__probe", pa.array(idx[chunk[hit_probe]], pa.int64())))
    if not dedupe:
        if not merged_parts:
            return schema.arrow_schema.empty_table().select(out_cols)
        merged = apply_default_values(pa.concat_tables(merged_parts).select(out_cols), schema)
        return with_schema(merged, pa.schema([schema.arrow_schema.field(c) for c in out_cols]))
    if not candidates:
        return schema.arrow_schema.empty_table().select(out_cols)
    allrows = pa.concat_tables(candidates)
    words = schema_order_words(allrows, schema)
    # Group by the probed key (not the probe index) so duplicate probes collapse to one row.
    winners = sort_dedupe([allrows.column("__key_" + k) for k in key_names] if not schema.partition_keys
                          else [allrows.column(k) for k in schema.primary_keys], words)
    merged = allrows.take(pa.array(winners))
    merged = merged.filter(pc.invert(pc.is_in(merged.column(VALUE_KIND), value_set=RETRACT_KINDS)))
    return with_schema(merged.select(out_cols), pa.schema([schema.arrow_schema.field(c) for c in out_cols]))


def _search_bucket(reader, split, probe_keys, key_names, key_types, out_cols, newest_wins,
                   newest_high_wins=False):
    """Binary-search the probes in each sorted run of a bucket, newest run first (level-0 files by descending
    sequence number, then levels 1, 2, ...). Yields (file rows, probe positions, row positions) per hit set."""
    runs = reader.runs(split)
    level0 = sorted((r for r in runs if r[0].level == 0), key=lambda r: -r[0].max_sequence_number)
    ordered = level0 + [r for r in runs if r[0].level > 0]
    remaining = np.arange(len(probe_keys[0]), dtype=np.int64)
    for run in ordered:
        if not len(remaining):
            return
        keys_now = [c.take(pa.array(remaining)) for c in probe_keys]
        probe_enc = encode_keys(keys_now)
        lo, hi = _first_column_range(keys_now[0])
        found_in_run = []
        for f in run:
            if not _overlaps(f, key_types, lo, hi):
                continue
            rows = reader.read_file(split, f, out_cols)
            hit = search_sorted(encode_keys([rows.column("__key_" + k) for k in key_names]), probe_enc)
            found = np.flatnonzero(hit >= 0)
            if len(found):
                found_in_run.append(found)
                yield rows, remaining[found], hit[found]
        if (newest_wins or (newest_high_wins and run[0].level > 0)) and found_in_run:
            remaining = np.delete(remaining, np.concatenate(found_in_run))


def _first_column_range(col):
    mm = pc.min_max(col)
    return mm["min"].as_py(), mm["max"].as_py()


def _overlaps(f, key_types, lo, hi) -> bool:
    """Whether the file's first-key-column range can hold a probe (conservative)."""
    try:
        fmin = binary_row.deserialize_row(f.min_key, key_types)[0]
        fmax = binary_row.upper_bound_of_floored(binary_row.deserialize_row(f.max_key, key_types), key_types)[0]
        return not (hi < fmin or lo > fmax)
    except Exception:  # undecodable or incomparable ranges prove nothing
        return True
