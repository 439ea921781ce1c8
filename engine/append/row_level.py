"""Row-level DELETE and UPDATE of append tables (no primary key), with the semantics of Paimon's Spark
DeleteFromPaimonTableCommand / UpdatePaimonTableCommand.

- DELETE whose condition names partition columns only (or no condition): the matching partitions are dropped
  (Paimon truncates them: an OVERWRITE snapshot deleting their files and vectors). Nothing matched: no snapshot.
- Otherwise only the data files holding a matching row are touched:
  - without deletion vectors (copy-on-write): each such file is rewritten without the matching rows (DELETE) or
    with their new values (UPDATE), rows in file order; the rewrite keeps the old file's sequence numbers (so its
    place in append order) and the old file is deleted. An updated row whose partition or bucket changes leaves
    the file and is appended to its new bucket.
  - with ``deletion-vectors.enabled``: DELETE marks the matching rows' positions in the bucket's deletion vectors
    (one new DV index file per touched bucket, holding its old vectors merged with the new marks); no data file is
    written. UPDATE marks the old rows deleted and appends the updated rows (Paimon's writeOnlyUpdatedData).
  Everything lands in ONE OVERWRITE snapshot (engine.commit.row_level); nothing matched: no snapshot.
- A concurrent commit that removed a touched file or changed its deletion vector makes the operation raise
  CommitConflict; the table is left at its last snapshot and the files the operation wrote are deleted.

Conditions are the filters of ``Table.read(filter=...)`` (engine.read.predicate: a row whose tested value is null
matches no term, so it is never deleted or updated). Spark evaluates SQL conditions itself and hands the matching
positions to ``change_bucket`` (spark_glue.dml).

Unlike Paimon, whose rewrite appends the kept rows with new sequence numbers (after the bucket's other files in
append order), a rewritten file takes the place of the one it replaces, so reads keep the table's row order.
"""
from __future__ import annotations

import uuid
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
from engine.read import predicate as pred
from engine.read.scan import Split
from engine.read.split_read import SplitReader
from engine.write.commit_message import CommitMessage

POSITION = "__lakemerge_position"


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


def require_append_table(table, op: str) -> None:
    """Raise InvalidInput unless ``table`` is an append table (primary-key tables: engine.write.row_level)."""
    if not table.schema.is_append_only:
        raise InvalidInput(f"{op} of engine.append.row_level works on append tables (no primary key); "
                           f"Table.{op} of a primary-key table goes through engine.write.row_level",
                           table=table.name)


def require_rewritable(table, update: bool) -> None:
    """Raise UnsupportedFeature when the change would write data files this version cannot write (a DELETE in
    deletion-vector mode writes none)."""
    if update or not table.schema.table_options.deletion_vectors:
        from engine.append.write import require_append_writable
        require_append_writable(table.schema, table.name)


# --- per bucket --------------------------------------------------------------------------------------
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
    columns = list(schema.field_names)
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
            written = write_append_files(table.file_io, split.bucket_dir, kept, schema, meta.min_sequence_number)
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


# --- commit ------------------------------------------------------------------------------------------
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


def drop_partitions(table, partitions: set[bytes] | None, commit_user: str | None = None) -> int | None:
    """Truncate ``partitions`` (serialized partition rows; None = the whole table) as Paimon's DELETE with a
    partition-only condition does: one OVERWRITE snapshot deleting their files and deletion vectors. None (no
    snapshot) when there is nothing to drop."""
    from engine.commit.committer import Committer
    if partitions is not None and not partitions:
        return None
    latest = table.snapshot()
    if partitions is None and (latest is None or not table.manifests.live_entries(latest)):
        return None
    sid = Committer(table).overwrite([], partitions, commit_user=commit_user or str(uuid.uuid4()),
                                     base_snapshot_id=None if latest is None else latest.id)
    table._expire_after_commit()
    return sid


# --- engine entry points -----------------------------------------------------------------------------
def delete_where(table, filter) -> int | None:
    """DELETE FROM an append table WHERE ``filter`` (Table.read's filter forms; None: every row); see the module
    docstring. Returns the new snapshot id, or None when no row matched. Raises InvalidInput (bad filter, a
    primary-key table), UnsupportedFeature (copy-on-write of a table lakemerge cannot write data files for),
    CommitConflict."""
    require_append_table(table, "delete_where")
    dnf = pred.normalize(filter, table.arrow_schema, table.name)
    snap = table.snapshot()
    if snap is None:
        return None
    if dnf is None or (table.partition_keys and pred.columns_of(dnf) <= set(table.partition_keys)):
        return drop_partitions(table, None if dnf is None else matching_partitions(table, snap, dnf))
    return _change(table, snap, dnf, None)


def update_where(table, assignments: Mapping[str, object], filter=None) -> int | None:
    """UPDATE an append table SET ``assignments`` WHERE ``filter`` (None: every row); see the module docstring.

    ``assignments``: column -> new value, one of: a literal (Python value or pa.Scalar), a
    ``pyarrow.compute.Expression`` over the table's columns (``pc.field("v") * 2``), or a callable taking the
    matching rows (pa.Table) and returning an array (or a scalar) of their new values. The values are cast safely to
    the column's type. Returns the new snapshot id, or None when no row matched. Raises InvalidInput (unknown
    column, a value that does not fit, null in a NOT NULL column, a primary-key table), UnsupportedFeature (a table
lakemerge cannot write data files for, e.g. file.format=csv), CommitConflict."""
    require_append_table(table, "update_where")
    unknown = [c for c in assignments if c not in table.schema.field_names]
    if unknown or not assignments:
        raise InvalidInput(f"update_where: unknown column(s) {unknown} in the assignments" if unknown else
                           "update_where: no column to set", table=table.name, column=unknown[0] if unknown else None)
    dnf = pred.normalize(filter, table.arrow_schema, table.name)
    snap = table.snapshot()
    if snap is None:
        return None
    return _change(table, snap, dnf, dict(assignments))


def matching_partitions(table, snap, dnf) -> set[bytes]:
    """The live partitions of ``snap`` (serialized) whose values satisfy ``dnf`` (partition columns only)."""
    scan = table.scan()
    parts = sorted({e.partition for e in table.manifests.live_entries(snap)})
    if not parts:
        return set()
    keys = list(table.partition_keys)
    arrow = table.arrow_schema
    values = [scan.partition_values(p) for p in parts]
    frame = pa.table({k: pa.array([v[i] for v in values], arrow.field(k).type) for i, k in enumerate(keys)})
    hit = frame.append_column(POSITION, pa.array(np.arange(len(parts)))).filter(pred.to_expression(dnf))
    return {parts[i] for i in hit.column(POSITION).to_pylist()}


def _change(table, snap, dnf, assignments) -> int | None:
    """DELETE (``assignments`` None) or UPDATE of the rows of ``snap`` matching ``dnf`` (None: all)."""
    require_rewritable(table, assignments is not None)
    user = str(uuid.uuid4())
    scan = table.scan()
    reader = SplitReader(table.file_io, table.schema, table.schema_manager.schema)
    columns = list(table.schema.field_names)
    expr = pred.to_expression(dnf) if dnf else None
    appender = None  # only UPDATE appends rows: a deletion-vector DELETE of an ORC table must not open a writer
    if assignments is not None:
        appender = table.new_write(commit_user=user)
        appender.base_snapshot = snap
    results: list[BucketChange] = []
    try:
        for split in scan.plan(snap, dnf):
            changes = {}
            for meta in ordered_files(split):
                if dnf and not scan._values_may_match(meta, dnf):
                    continue
                rows, live = read_append_positions(reader, split, meta, columns)
                rows = rows.append_column(POSITION, pa.array(live))
                if expr is not None:
                    rows = rows.filter(expr)
                if rows.num_rows == 0:
                    continue
                positions = rows.column(POSITION).to_numpy()
                updated = None
                if assignments is not None:
                    updated = evaluate_assignments(table, rows.drop_columns([POSITION]), assignments)
                changes[meta.file_name] = FileChange(positions, updated)
            if changes:
                results.append(change_bucket(table, split, changes, base_id=snap.id, commit_user=user,
                                             appender=appender))
        appended = appender.prepare_commit() if appender is not None else []
    except BaseException:
        discard_changes(table, results, appender)
        raise
    finally:
        if appender is not None:
            appender.close()
    return commit_changes(table, snap, results, user, appended)


def evaluate_assignments(table, rows: pa.Table, assignments: Mapping[str, object]) -> pa.Table:
    """``rows`` (all table columns) with ``assignments`` applied (see ``update_where``), cast to the table's
    types. Raises InvalidInput naming the column whose value cannot be computed or cast."""
    import pyarrow.compute as pc
    import pyarrow.dataset as ds
    arrow = table.arrow_schema
    out = rows
    for name, value in assignments.items():
        target = arrow.field(name).type
        try:
            if isinstance(value, pc.Expression):
                column = ds.dataset(rows).to_table(columns={name: value}, use_threads=False).column(name)
            elif callable(value):
                column = value(rows)
            else:
                column = value
            if isinstance(column, (pa.Array, pa.ChunkedArray)):
                column = column.cast(target)
            elif isinstance(column, (list, tuple, np.ndarray)):
                column = pa.array(column, target)
            else:
                scalar = column if isinstance(column, pa.Scalar) else pa.scalar(column)
                column = pa.array([scalar.cast(target).as_py()] * rows.num_rows, target)
        except (pa.ArrowException, TypeError, ValueError) as e:
            raise InvalidInput(f"update_where: the new value of column {name!r} cannot be computed as {target}: "
                               f"{e}", table=table.name, column=name) from None
        if len(column) != rows.num_rows:
            raise InvalidInput(f"update_where: {len(column)} values for column {name!r}, expected {rows.num_rows}",
                               table=table.name, column=name)
        out = out.set_column(out.column_names.index(name), arrow.field(name), column)
    return out
