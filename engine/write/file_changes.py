"""Row-level changes of data files, shared by the DELETE / UPDATE / MERGE of append tables (engine.append.row_level,
spark_glue.append_dml) and the file-rewrite DELETE of primary-key tables (engine.write.pk_rewrite,
spark_glue.pk_delete): the positions to change per data file (FileChange), applied bucket by bucket (change_bucket:
copy-on-write rewrite or deletion-vector marks), then published as ONE snapshot (commit_changes,
engine.commit.row_level) or undone (discard_changes).

A rewritten file takes the place of the one it replaces: an append file keeps its first sequence number (its place
in append order); a key-value file keeps its level and its kept rows keep their own sequence numbers and row kinds
(a subset of a sorted run is still a sorted run with the same key order, so every level invariant holds). Paimon
instead writes the kept rows as new files (append: after the bucket's other files; primary key: level 0 with new
sequence numbers, which reads the same once merged).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from engine.append.files import write_append_files
from engine.append.read import ordered_files, read_append_positions
from engine.data_paths import data_file_path
from engine.errors import (
    CommitConflict,
    CommitOutcomeUnknown,
    CommitRetriesExhausted,
    InvalidInput,
)
from engine.meta import binary_row
from engine.meta.manifest import DELETE, ManifestEntry
from engine.meta.snapshot import BATCH_COMMIT_IDENTIFIER
from engine.read.scan import Split
from engine.read.split_read import SplitReader
from engine.write.commit_message import CommitMessage


@dataclass(frozen=True)
class FileChange:
    """The change of one data file: ``positions`` (sorted np.int64 positions in the file of live rows that match)
    and, for UPDATE, ``updated``: the new rows for them (all table columns, in position order); None for DELETE.
    ``drop`` (MERGE, with ``updated``): a bool per position, True where the row is deleted instead (its row in
    ``updated`` is ignored)."""
    positions: np.ndarray
    updated: pa.Table | None = None
    drop: np.ndarray | None = None


@dataclass
class BucketChange:
    """What changing one bucket produced (picklable: Spark tasks return it). ``written``: paths of every data and
    index file written, for clean-up if the commit fails."""
    messages: list = field(default_factory=list)
    deleted: list = field(default_factory=list)
    marked: list = field(default_factory=list)
    rewrites: set = field(default_factory=set)
    written: list = field(default_factory=list)


def change_bucket(table, split: Split, changes: Mapping[str, FileChange], *, base_id: int | None, commit_user: str,
                  appender=None) -> BucketChange:
    """Apply ``changes`` (data file name -> FileChange) to the bucket of ``split`` (read from snapshot
    ``base_id``) as the module docstring says; updated rows that must be appended go to ``appender`` (an
    AppendWrite of the same commit user). Raises InvalidInput when a change names a file of another bucket or a
    position that is not a live row; on error the files it wrote are deleted."""
    from engine.deletion_vectors.maintainer import BucketDeletionVectors
    from engine.options import DELETION_VECTORS_BITMAP64, DELETION_VECTORS_INDEX_PREFIX

    schema = table.schema
    opts = schema.table_options
    out = BucketChange()
    files = {f.file_name: f for f in split.files}
    unknown = [n for n in changes if n not in files]
    if unknown:
        raise InvalidInput(f"data file {unknown[0]} is not a live file of bucket {split.bucket} of partition "
                           f"{split.partition_values}", table=table.name)
    vectors = BucketDeletionVectors(table, split.partition, split.bucket, split.vectors,
                                    bitmap64=opts.get(DELETION_VECTORS_BITMAP64),
                                    prefix=opts.get(DELETION_VECTORS_INDEX_PREFIX))
    reader = SplitReader(table.file_io, schema, table.schema_manager.schema)
    new_files = []
    try:
        for meta in ordered_files(split):
            change = changes.get(meta.file_name)
            if change is None or not len(change.positions):
                continue
            positions = np.asarray(change.positions, dtype=np.int64)
            updated = None if change.updated is None else _conform(table, change.updated)
            if updated is not None and updated.num_rows != len(positions):
                raise InvalidInput(f"{updated.num_rows} updated rows for {len(positions)} positions of data file "
                                   f"{meta.file_name}", table=table.name)
            drop = np.zeros(len(positions), dtype=bool) if change.drop is None else np.asarray(change.drop, bool)
            if len(drop) != len(positions):
                raise InvalidInput(f"{len(drop)} drop flags for {len(positions)} positions of data file "
                                   f"{meta.file_name}", table=table.name)
            if opts.deletion_vectors:
                _check_live(table, split, meta, positions)
                vectors.apply({meta.file_name: [positions]}, ())
                out.marked.append((split.partition, split.bucket, meta.file_name))
                if updated is not None and not drop.all():
                    appender.write(updated.filter(pa.array(~drop)) if drop.any() else updated)
                continue
            if schema.is_append_only:
                written = _rewrite_append(table, reader, split, meta, positions, updated, drop, appender)
            elif updated is not None:
                raise InvalidInput("only DELETE rewrites the data files of a primary-key table", table=table.name)
            else:
                written = _rewrite_key_value(table, reader, split, meta, positions)
            out.written += [data_file_path(split.bucket_dir, f) for f in written]
            new_files += written
            out.rewrites.update(f.file_name for f in written)
            out.deleted.append(ManifestEntry(DELETE, split.partition, split.bucket, split.total_buckets, meta))
            vectors.apply({}, [meta.file_name])  # a rewritten file's vector goes with it
        dv = vectors.changes()
        if dv is not None:
            out.written += [table.scan().index_file_path(r) for r in dv[1]]
        if new_files or dv is not None:
            out.messages.append(CommitMessage(
                split.partition, split.partition_values, split.bucket, split.total_buckets, tuple(new_files),
                commit_user, BATCH_COMMIT_IDENTIFIER, base_id, schema.id,
                dv_before=None if dv is None else dv[0], dv_after=() if dv is None else dv[1]))
    except BaseException:
        vectors.discard()
        for path in out.written:
            table.file_io.delete(path)
        raise
    return out


def _rewrite_append(table, reader: SplitReader, split: Split, meta, positions: np.ndarray, updated, drop,
                    appender) -> list:
    """Copy-on-write of one append file: its live rows without (DELETE) or with the new values of (UPDATE) the rows
    at ``positions``; rows that leave the bucket go to ``appender``. The new files' metadata (none if empty)."""
    columns = list(table.schema.field_names)
    rows, live = read_append_positions(reader, split, meta, columns)
    hit = np.isin(live, positions)
    if int(hit.sum()) != len(positions):
        raise InvalidInput(f"positions {sorted(set(positions.tolist()) - set(live.tolist()))[:5]} are not "
                           f"live rows of data file {meta.file_name}", table=table.name)
    if updated is None:
        kept = rows.filter(pa.array(~hit))
    else:
        stay = _stays(table, split, updated)
        moved = ~stay & ~drop
        stay &= ~drop
        if moved.any():
            appender.write(updated.filter(pa.array(moved)))
        # every live row in file order: kept rows as they are, matched rows replaced where they stay
        # (dropped and moved rows leave the file)
        take = np.arange(rows.num_rows, dtype=np.int64)
        slots = np.flatnonzero(hit)
        take[slots] = rows.num_rows + np.arange(len(slots))
        take = take[~hit | np.isin(np.arange(rows.num_rows), slots[stay])]
        kept = pa.concat_tables([rows, updated.select(columns).cast(rows.schema)]).take(pa.array(take))
    return write_append_files(table.file_io, split.bucket_dir, kept, table.schema, meta.min_sequence_number)


def _rewrite_key_value(table, reader: SplitReader, split: Split, meta, positions: np.ndarray) -> list:
    """Copy-on-write of one key-value file: its rows without those at ``positions`` (and those its deletion vector
    marks), each kept row with its own
    sequence number and row kind, in the current schema's physical layout, at the file's level (module
    docstring). The new files' metadata (none when no row is kept)."""
    from engine.schema import SEQUENCE_NUMBER, VALUE_KIND
    from engine.write.file_writer import physical_table, write_sorted_run
    schema = table.schema
    columns = list(schema.field_names)
    _check_live(table, split, meta, positions)
    rows = reader.read_file(split, meta, columns, live_only=False)
    keep = np.ones(rows.num_rows, dtype=bool)
    keep[positions] = False
    where = split.deletion_file(meta.file_name)
    if where is not None:  # rows its vector marks (deletion vectors since switched off) stay deleted
        from engine.deletion_vectors.index_file import read_deletion_vector
        deleted = read_deletion_vector(reader.io, where)
        keep[deleted[deleted < rows.num_rows]] = False
    kept = rows.filter(pa.array(keep))
    physical = physical_table(kept.select(columns), kept.column(SEQUENCE_NUMBER).to_numpy(),
                              kept.column(VALUE_KIND).to_numpy(), schema)
    return write_sorted_run(table.file_io, split.bucket_dir, physical, schema, level=meta.level)


def _check_live(table, split: Split, meta, positions: np.ndarray) -> None:
    if positions[0] < 0 or positions[-1] >= meta.row_count or np.any(np.diff(positions) <= 0):
        raise InvalidInput(f"positions of data file {meta.file_name} must be sorted, unique and below its "
                           f"{meta.row_count} rows", table=table.name)


def _conform(table, rows: pa.Table) -> pa.Table:
    from engine.write.validate import conform
    return conform(rows, table.schema, table.name)[0]


def _stays(table, split: Split, rows: pa.Table) -> np.ndarray:
    """Which of ``rows`` belong to the bucket of ``split`` (an update may move a row's partition or bucket)."""
    schema = table.schema
    stay = np.ones(rows.num_rows, dtype=bool)
    if schema.partition_keys:
        from engine.partitioning import partition_groups
        types = schema.types_of(schema.partition_keys)
        for values, idx in partition_groups(rows, schema.partition_keys):
            if binary_row.serialize_row(list(values), types) != split.partition:
                stay[idx] = False
    if split.total_buckets > 0:
        from kernels.hashing import bucket_ids
        ids = bucket_ids([rows.column(k) for k in schema.bucket_keys], split.total_buckets)
        stay &= np.asarray(ids) == split.bucket
    return stay


def discard_changes(table, changes: list[BucketChange], appender=None) -> None:
    """Undo uncommitted work after a failure: abort ``appender`` (the rows UPDATE/MERGE append) and delete the files
    ``changes`` wrote (rewritten data files, deletion-vector index files)."""
    if appender is not None:
        appender.abort()
    for c in changes:
        for path in c.written:
            table.file_io.delete(path)


def commit_changes(table, base, changes: list[BucketChange], commit_user: str, appended=()) -> int | None:
    """Publish bucket changes (and the appender's messages ``appended``) as one snapshot
    (engine.commit.row_level); its id, or None when nothing changed. If the commit fails for sure, every file the
    changes wrote is deleted and the error raised; after CommitOutcomeUnknown nothing is deleted."""
    from engine.commit.row_level import RowLevelCommitter
    from engine.maintenance.orphans import delete_unreferenced
    messages = [m for c in changes for m in c.messages] + list(appended)
    written = [p for c in changes for p in c.written]
    written += [data_file_path(table.bucket_dir(m.partition_values, m.bucket), f)
                for m in appended for f in m.new_files]
    committer = RowLevelCommitter(table, base, [e for c in changes for e in c.deleted],
                                  [k for c in changes for k in c.marked], {n for c in changes for n in c.rewrites})
    try:
        sid = committer.commit_change(messages, commit_user)
    except CommitOutcomeUnknown:
        raise
    except BaseException as e:
        if isinstance(e, (CommitConflict, CommitRetriesExhausted)) or not _published(table, commit_user):
            delete_unreferenced(table, written)
        raise
    if sid is not None:
        table._expire_after_commit()
    return sid


def _published(table, user: str) -> bool:
    latest = table.snapshot()
    return latest is not None and latest.commit_user == user
