"""Rescaling partitions to a bucket count (Paimon's ``rescale`` procedure / RescaleAction).

Paimon's RescaleProcedure reads the real-bucket files of the chosen partitions at the latest snapshot and writes
the rows back with an overwrite writer of the table with ``bucket = bucket_num`` (default: the table's option),
committed as one OVERWRITE snapshot in strict mode (``commit.strict-mode.last-safe-snapshot`` = the snapshot it
read), so a commit to those partitions while it ran makes it fail instead of being lost. The table's schema is not
changed: rescaling to a count other than the ``bucket`` option leaves partitions that later writes refuse until
the option is altered to match (``ALTER TABLE SET ('bucket' = ...)`` first is the documented order).

Contract of ``rescale``:
- Rows are the merged rows of every level (a deletion-vector table's level-0 files too, as Paimon's rescale
  reads them); append tables keep their rows in append order per bucket.
- Memory: one old bucket's merged rows at a time, plus the writer's buffer (``write-buffer-size``), which spills
  sorted runs; a partition is never held whole.
- Only partitions holding real-bucket files are rewritten; none matched: nothing is committed, None returned.
- Postpone tables (``bucket = -2``) need ``bucket_num``; the partitions then get that count.
- Raises InvalidInput (no snapshot; bad ``bucket_num``; bad partition spec; a matched partition of a postpone
  table that also holds postponed files: Paimon's rescale would drop them with the overwrite, lakemerge refuses
  -- compact first), UnsupportedFeature (``bucket = -1`` tables), CommitConflict. On failure nothing changed and
  the files written are deleted.
"""
from __future__ import annotations

import copy
import dataclasses
import uuid

import pyarrow as pa

from engine.errors import InvalidInput, UnsupportedFeature
from engine.postpone import POSTPONE_BUCKET


def rescale(table, bucket_num: int | None = None, partitions=None) -> int | None:
    """Rewrite the matched partitions with ``bucket_num`` buckets (module contract); the OVERWRITE snapshot's id."""
    mode = table.schema.table_options.bucket
    snap = table.snapshot_manager.latest()
    if snap is None:
        raise InvalidInput(f"Table {table.name} has no snapshot, no need to rescale.", table=table.name)
    if mode == -1:
        raise UnsupportedFeature(f"table {table.name!r}: rescale applies to fixed-bucket (bucket > 0) and postpone "
                                 "(bucket = -2) tables; this table has bucket = -1")
    if bucket_num is not None and (isinstance(bucket_num, bool) or not isinstance(bucket_num, int)
                                   or bucket_num <= 0):
        raise InvalidInput(f"bucket_num must be a positive integer, got {bucket_num!r}", table=table.name)
    if bucket_num is None and mode == POSTPONE_BUCKET:
        raise InvalidInput("When rescaling postpone bucket tables, you must provide the resulting bucket number.",
                           table=table.name)
    matcher = _matcher(table, partitions)
    splits = [sp for sp in table.scan().plan(snap) if sp.files and (matcher is None or sp.partition in matcher)]
    grouped: dict[bytes, list] = {}
    for sp in splits:
        if sp.bucket != POSTPONE_BUCKET:
            grouped.setdefault(sp.partition, []).append(sp)
    if not grouped:
        return None
    postponed = next((sp for sp in splits if sp.bucket == POSTPONE_BUCKET and sp.partition in grouped), None)
    if postponed is not None:
        raise InvalidInput(f"partition {tuple(postponed.partition_values)} holds postponed files that are not in "
                           "real buckets yet; the rescale overwrite would drop them (Paimon's rescale reads only "
                           "real buckets): compact the table first", table=table.name)
    user = str(uuid.uuid4())
    writer = _overwrite_writer(table, bucket_num, grouped, user)
    with writer as w:
        for parts in grouped.values():
            for split in parts:  # one old bucket at a time: the writer spills sorted runs as its buffer fills
                rows = _rows(table, [split])
                if rows.num_rows:
                    w.write(rows)
        messages = w.prepare_commit()
    scope = [tuple(parts[0].partition_values) for parts in grouped.values()] if table.partition_keys else None
    return table.commit_overwrite(messages, scope, commit_user=user, strict_after=snap.id)


def _matcher(table, partitions):
    if partitions is None:
        return None
    if not table.partition_keys:
        raise InvalidInput("the table is not partitioned: give no partitions to rescale it whole", table=table.name)
    from engine.maintenance.partitions import PartitionMatcher, normalize_specs
    return PartitionMatcher(table, normalize_specs(table, partitions))


def _overwrite_writer(table, bucket_num: int | None, partitions, user: str):
    """An overwrite writer placing rows by ``bucket_num`` (the table's count when None)."""
    if table.schema.table_options.bucket == POSTPONE_BUCKET:
        from engine.postpone.write import FixedBucketPostponeWrite
        writer = FixedBucketPostponeWrite(table, overwrite=True, commit_user=user)
        counts = writer._known_counts()  # empty for an overwrite writer: the rescaled partitions get bucket_num
        counts.update(dict.fromkeys(partitions, bucket_num))
        return writer
    target = table
    if bucket_num is not None and bucket_num != table.schema.table_options.bucket:
        target = copy.copy(table)  # Paimon: the table copied with 'bucket' = bucket_num, schema file unchanged
        target.schema = dataclasses.replace(table.schema, options={**table.schema.options, "bucket": str(bucket_num)})
    return target.new_write(commit_user=user, overwrite=True)


def _rows(table, splits) -> pa.Table:
    """The live rows of one partition's real-bucket ``splits``, every level (module contract)."""
    from engine.read.split_read import SplitReader, with_schema
    reader = SplitReader(table.file_io, table.schema, table.schema_manager.schema)
    names = list(table.schema.field_names)
    if table.schema.is_append_only:
        from engine.append.read import ordered_files, read_append_file
        parts = [read_append_file(reader, sp, f, names) for sp in splits for f in ordered_files(sp)]
    else:
        parts = [reader.read(sp, names) for sp in splits]
    target = table.arrow_schema
    return pa.concat_tables([with_schema(p, target) for p in parts]) if parts else target.empty_table()
