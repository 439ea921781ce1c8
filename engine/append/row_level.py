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
positions to ``change_bucket`` (engine.write.file_changes, shared with the file-rewrite DELETE of primary-key
tables; spark_glue.append_dml).

Unlike Paimon, whose rewrite appends the kept rows with new sequence numbers (after the bucket's other files in
append order), a rewritten file takes the place of the one it replaces, so reads keep the table's row order.
"""
from __future__ import annotations

import uuid
from collections.abc import Mapping

import numpy as np
import pyarrow as pa

from engine.append.read import ordered_files, read_append_positions
from engine.errors import InvalidInput
from engine.read import predicate as pred
from engine.read.split_read import SplitReader
from engine.write.file_changes import (
    BucketChange,
    FileChange,
    change_bucket,
    commit_changes,
    discard_changes,
)

POSITION = "__lakemerge_position"


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
    if is_truncate(table, dnf):
        return truncate(table, snap, dnf)
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


def is_truncate(table, dnf) -> bool:
    """Whether a DELETE with condition ``dnf`` (normalized; None: no condition) truncates instead of deleting rows,
    as Paimon's OptimizeMetadataOnlyDeleteFromPaimonTable decides for every table: no condition truncates the
    table; a condition over partition columns only truncates the matching partitions, unless
    ``delete.force-produce-changelog`` asks for delete records (primary-key tables) or row-level changes."""
    from engine.options import DELETE_FORCE_PRODUCE_CHANGELOG
    if dnf is None:
        return True
    keys = set(table.partition_keys)
    return bool(keys) and pred.columns_of(dnf) <= keys \
        and not table.schema.table_options.get(DELETE_FORCE_PRODUCE_CHANGELOG)


def truncate(table, snap, dnf) -> int | None:
    """The truncate ``is_truncate`` chose: the whole table (``dnf`` None) or the partitions of ``snap`` matching
    ``dnf``; the new snapshot id, None when there is nothing to drop."""
    return drop_partitions(table, None if dnf is None else matching_partitions(table, snap, dnf))


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
