"""Rescaling partitions to a bucket count (Paimon's ``rescale`` procedure / RescaleAction).

Paimon's RescaleProcedure reads the real-bucket files of the chosen partitions at the latest snapshot and writes
the rows back with an overwrite writer of the table with ``bucket = bucket_num`` (default: the table's option),
committed as one OVERWRITE snapshot in strict mode (``commit.strict-mode.last-safe-snapshot`` = the snapshot it
read), so a commit to those partitions while it ran makes it fail instead of being lost. The table's schema is not
changed: rescaling to a count other than the ``bucket`` option leaves partitions that later writes refuse until
the option is altered to match (``ALTER TABLE SET ('bucket' = ...)`` first is the documented order).

The steps are shared with the distributed rescale (spark_glue.rescale): ``plan_rescale`` (validate, pick the
splits at one snapshot), ``rescale_writer`` (an overwrite writer by the new count; a postpone table's is handed
the planned partitions' count), ``commit_rescale`` (the strict-mode OVERWRITE commit).

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


@dataclasses.dataclass(frozen=True)
class RescalePlan:
    """What a rescale rewrites: the real-bucket splits of each matched partition (serialized partition -> its
    splits, in bucket order) at snapshot ``snapshot_id``, and the count they get (``bucket_num``; None: the table's
    ``bucket``)."""
    snapshot_id: int
    bucket_num: int | None
    splits: dict

    @property
    def partitions(self) -> list[bytes]:
        return list(self.splits)


def rescale(table, bucket_num: int | None = None, partitions=None) -> int | None:
    """Rewrite the matched partitions with ``bucket_num`` buckets (module contract); the OVERWRITE snapshot's id."""
    plan = plan_rescale(table, bucket_num, partitions)
    if plan is None:
        return None
    user = str(uuid.uuid4())
    with rescale_writer(table, plan, commit_user=user) as w:
        for parts in plan.splits.values():
            for split in parts:  # one old bucket at a time: the writer spills sorted runs as its buffer fills
                rows = _rows(table, [split])
                if rows.num_rows:
                    w.write(rows)
        messages = w.prepare_commit()
    return commit_rescale(table, plan, messages, commit_user=user)


def plan_rescale(table, bucket_num: int | None = None, partitions=None) -> RescalePlan | None:
    """Validate a rescale of ``table`` and plan it at the latest snapshot; None when no matched partition holds
    real-bucket files. Raises as the module contract says (everything but CommitConflict); writes nothing."""
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
    return RescalePlan(snap.id, bucket_num, grouped)


def commit_rescale(table, plan: RescalePlan, messages, *, commit_user: str) -> int | None:
    """Publish ``messages`` (written by ``rescale_writer``s of ``plan``) as one OVERWRITE snapshot of the planned
    partitions in strict mode: CommitConflict (files deleted, table unchanged) if a snapshot after the planned one
    changed real-bucket files of those partitions."""
    scope = [tuple(parts[0].partition_values) for parts in plan.splits.values()] if table.partition_keys else None
    return table.commit_overwrite(messages, scope, commit_user=commit_user, strict_after=plan.snapshot_id)


def _matcher(table, partitions):
    if partitions is None:
        return None
    if not table.partition_keys:
        raise InvalidInput("the table is not partitioned: give no partitions to rescale it whole", table=table.name)
    from engine.maintenance.partitions import PartitionMatcher, normalize_specs
    return PartitionMatcher(table, normalize_specs(table, partitions))


def rescale_writer(table, plan: RescalePlan, *, commit_user: str, commit_identifier: int | None = None):
    """An overwrite writer of ``table`` placing rows by ``plan.bucket_num`` (the table's count when None); a
    postpone table's writes real buckets, the planned partitions with ``plan.bucket_num`` buckets."""
    if table.schema.table_options.bucket == POSTPONE_BUCKET:
        from engine.postpone.write import FixedBucketPostponeWrite
        return FixedBucketPostponeWrite(table, overwrite=True, decided=dict.fromkeys(plan.splits, plan.bucket_num),
                                        commit_user=commit_user, commit_identifier=commit_identifier)
    target = table
    if plan.bucket_num is not None and plan.bucket_num != table.schema.table_options.bucket:
        target = copy.copy(table)  # Paimon: the table copied with 'bucket' = bucket_num, schema file unchanged
        target.schema = dataclasses.replace(table.schema,
                                            options={**table.schema.options, "bucket": str(plan.bucket_num)})
    return target.new_write(commit_user=commit_user, commit_identifier=commit_identifier, overwrite=True)


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
