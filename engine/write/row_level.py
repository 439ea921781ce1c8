"""Row-level DELETE / UPDATE of primary-key tables by condition, as Paimon's Spark DeleteFromPaimonTableCommand /
UpdatePaimonTableCommand do on a primary-key table: the rows matching the condition are read at the latest snapshot
(merged, exact filter) and written back in ONE commit, -D records carrying the old row (DELETE) or +U records
carrying the whole new row (UPDATE). The table's merge engine and changelog producer treat them as any written
-D / +U record (changelog-producer=input: exactly these rows; lookup / full-compaction: -D / -U,+U against the old
values when compacted).

DELETE from a table that cannot take a delete record (PrimaryKeyTableUtils.validatePKUpsertDeletable:
partial-update without partial-update.remove-record-on-delete / remove-record-on-sequence-group, aggregation
without aggregation.remove-record-on-delete, first-row) does not write -D records: as Paimon, it deletes the rows
from the data files instead (engine.write.pk_rewrite: deletion-vector marks or a copy-on-write rewrite of
compacted files; InvalidInput asking to compact first otherwise).

A DELETE without a condition, or with one over partition columns only, writes no record: it truncates the table or
the matching partitions (engine.append.row_level.is_truncate, Paimon's OptimizeMetadataOnlyDeleteFromPaimonTable;
``delete.force-produce-changelog`` keeps partition conditions on the record path so the changelog sees -D rows).

Refused up front (nothing written), as Paimon refuses (InvalidInput):
- UPDATE of a primary-key column ("Can't update the primary key column"); a partition column of an ordinary
  primary-key table is part of its key. A cross-partition table (bucket=-1, key without the partition columns) may
  move a row to another partition, as in Paimon.
- UPDATE of a table whose merge engine is not deduplicate or partial-update (RowLevelOp.Update): aggregation
  would fold the new value into the old one, first-row would ignore it.
Note as in Paimon: with ignore-delete the -D records are dropped (the DELETE changes nothing); on partial-update an
UPDATE to NULL leaves the old value (nulls do not overwrite). A nanosecond sequence.field is fine here (the
engine reads and writes nanoseconds exactly; spark_glue.dml refuses it because Spark floors them).
Also as in Paimon (its batch scan skips level 0 on a deletion-vector table, CoreOptions.batchScanSkipLevel0): on
a deletion-vector table the read does not see rows still in level-0 files (write-only=true, or a writer whose
compaction was dropped); the newer +U / -D records then override those rows of the matched keys when compacted.

Concurrency (what Paimon guarantees, plus lakemerge's base checks): Paimon's DELETE / UPDATE of a PK table is a
plain APPEND commit with no read-set check: a change another writer commits to a matched key after the read is
overwritten by the values computed from the read, and only a changed bucket count is detected. Here the writer is
pinned to the snapshot the rows were read from (its sequence numbers, key index and the commit's base), so:
- the commit wins over every commit published since the read (the sequence guard renumbers it), as the later
  commit does in Paimon;
- the commit is refused with CommitConflict (nothing published, its files deleted) where lakemerge's commit checks
  its base: a changed bucket count of a written partition, and on a cross-partition table any data commit since
  the read (it may have moved a matched key; unpinned, the stale values would win in the key's new partition).
"""
from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa

from engine.errors import InvalidInput
from engine.options import (
    AGGREGATION_REMOVE_ON_DELETE,
    PARTIAL_UPDATE_REMOVE_ON_DELETE,
    PARTIAL_UPDATE_REMOVE_ON_SEQUENCE_GROUP,
)


def upsert_deletable(table) -> bool:
    """Whether primary-key ``table``'s merge engine takes delete records (Paimon's
    PrimaryKeyTableUtils.validatePKUpsertDeletable): deduplicate; partial-update with
    partial-update.remove-record-on-delete or remove-record-on-sequence-group; aggregation with
    aggregation.remove-record-on-delete. Not first-row."""
    opts = table.schema.table_options
    engine = opts.merge_engine
    if engine == "partial-update":
        return bool(opts.get(PARTIAL_UPDATE_REMOVE_ON_DELETE) or opts.get(PARTIAL_UPDATE_REMOVE_ON_SEQUENCE_GROUP))
    if engine == "aggregation":
        return bool(opts.get(AGGREGATION_REMOVE_ON_DELETE))
    return engine == "deduplicate"


def check_row_level(table, op: str, *, update: bool) -> None:
    """Raise InvalidInput when a row-level UPDATE ``op`` cannot be done on primary-key ``table`` (a merge engine
    other than deduplicate and partial-update, module docstring). DELETE and append tables pass: a table whose
    merge engine cannot take delete records deletes by rewriting its files (engine.write.pk_rewrite)."""
    schema = table.schema
    if schema.is_append_only or not update:
        return
    engine = schema.table_options.merge_engine
    if engine not in ("deduplicate", "partial-update"):
        raise InvalidInput(f"{op} cannot update a table with merge-engine={engine} (only deduplicate and "
                           "partial-update, as Paimon's UPDATE / MERGE INTO)", table=table.name)


def _check_assignments(table, assignments: Mapping[str, object]) -> None:
    names = table.schema.field_names
    unknown = [c for c in assignments if c not in names]
    if unknown or not assignments:
        raise InvalidInput(f"update_where: unknown column(s) {unknown} in the assignments" if unknown else
                           "update_where: no column to set", table=table.name, column=unknown[0] if unknown else None)
    keys = [c for c in assignments if c in table.primary_keys]
    if keys:
        raise InvalidInput(f"update_where: primary-key column(s) {keys} cannot be updated (delete and insert "
                           "instead)", table=table.name, column=keys[0])


def delete_where(table, filter) -> int | None:
    """DELETE FROM primary-key ``table`` WHERE ``filter`` (Table.read's filter forms; None: every row) in one
    commit; the new snapshot id, or None when no row matched. A table whose merge engine takes delete records gets
    -D records (module docstring), any other has its files rewritten or marked (engine.write.pk_rewrite). Raises
    InvalidInput (bad filter; with rewriting, a file that must be compacted first), UnsupportedFeature
    (rewriting data files lakemerge cannot write), CommitConflict."""
    if not upsert_deletable(table):
        from engine.write.pk_rewrite import delete_by_rewrite
        return delete_by_rewrite(table, filter)
    from engine.append.row_level import is_truncate, truncate
    from engine.read import predicate as pred
    dnf = pred.normalize(filter, table.arrow_schema, table.name)
    if is_truncate(table, dnf):  # as Paimon: no delete records, the files go
        snap = table.snapshot()
        return None if snap is None else truncate(table, snap, dnf)
    return _write(table, filter, None)


def update_where(table, assignments: Mapping[str, object], filter=None) -> int | None:
    """UPDATE primary-key ``table`` SET ``assignments`` (as engine.append.row_level.update_where: literal,
    pyarrow.compute.Expression or callable over the matching rows) WHERE ``filter`` (None: every row) in one
    commit; the new snapshot id, or None when no row matched. Raises InvalidInput (unknown or primary-key column,
    a value that does not fit, a merge engine that cannot be updated), CommitConflict."""
    check_row_level(table, "update_where", update=True)
    _check_assignments(table, assignments)
    return _write(table, filter, dict(assignments))


def _write(table, filter, assignments) -> int | None:
    from engine.read import predicate as pred
    pred.normalize(filter, table.arrow_schema, table.name)  # a bad filter fails before anything is read
    snap = table.snapshot()
    if snap is None:
        return None
    # the rows as written now, in every bucket and file: as Table.read (with the partitions scan.fallback-branch
    # supplies), but not narrowed by the read options scan.bucket and scan.file-creation-time-millis
    from engine.read import fallback_branch
    pinned = table.through_schema(table.schema.id)
    sides = fallback_branch.sides(pinned, snap.id)
    if sides is not None:  # rows the other branch supplies cannot be changed by writing to this one
        fallback_branch.other_rows_refused(pinned, sides, filter,
                                           "delete_where" if assignments is None else "update_where")
    rows = pinned._read_merged(snap, pinned.output_columns(), filter) if sides is None \
        else fallback_branch.read(pinned, sides, None, filter, batch_read=False)
    if rows.num_rows == 0:
        return None
    if assignments is None:
        kind = "-D"
    else:
        from engine.append.row_level import evaluate_assignments
        rows = evaluate_assignments(table, rows, assignments)
        kind = "+U"
    writer = table.new_write()
    writer.base_snapshot = snap  # sequence numbers and the commit's base: the snapshot the rows were read from
    with writer:
        writer.write(rows, row_kinds=pa.array([kind] * rows.num_rows, pa.string()))
        messages = writer.prepare_commit()
    return table.commit(messages)
