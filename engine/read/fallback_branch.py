"""Batch reads across two branches: options ``scan.fallback-branch`` and ``scan.primary-branch``, as Paimon's
FileStoreTableFactory wraps such a table in a FallbackReadFileStoreTable.

* ``scan.fallback-branch = b``: a partition the table has (in the snapshot read) is read from the table alone;
  the partitions only branch ``b`` has are read from ``b``.
* ``scan.primary-branch = b``: the partitions ``b`` has are read from ``b`` alone; the others from the table.

Ownership is decided per partition by the files the first side's batch read sees (live files of real buckets;
not the level-0 files of a deletion-vector table), whatever the filter's value terms (a partition the first
side has is never completed from the second). Each side is read as its own table: its own schema, primary keys,
merge engine and buckets (a primary-key fallback branch of an append table is merged). Non-partitioned tables
have one partition: the first side is read if it has any file, else the second.

Time travel (Paimon's FallbackReadFileStoreTable.rewriteOtherOptions): a snapshot id of the table reads the other
branch at its latest snapshot committed at or before that snapshot's time (its snapshot 1 when it has none, which
raises SnapshotNotFound if it does not exist, as Paimon fails); a tag reads the other branch's tag of that name
(TagNotFound if it has none, as Paimon). Streaming reads (changes, streams) read the table alone, as Paimon's.

Contract: the branches must have the same row type by position, ignoring top-level nullability (else InvalidInput,
as Paimon's validateSchema refuses the scan); lakemerge also needs the same field ids and partition keys by
position (else UnsupportedFeature). Columns, filters and lookup keys use the table's names; a branch's columns
are read by position under them. Both options set raise InvalidInput (Paimon refuses setting both). An option
naming a branch that does not exist reads the table alone and logs an error, as Paimon's factory does.
Unlike Paimon (unless ``scan.fallback-branch.read-fail-fast``), an error reading the other branch is raised,
never answered with the table's own read of that split.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Callable

from engine.errors import InvalidInput, TableNotFound, UnsupportedFeature
from engine.read import predicate as pred

FALLBACK_BRANCH = "scan.fallback-branch"
PRIMARY_BRANCH = "scan.primary-branch"

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Side:
    """One branch's part of a fallback read: ``table`` (a plain copy of that branch's table that skips the
    partitions the other side supplies), the pinned ``snapshot`` (None: nothing to read), ``branch`` (None: the
    table read; else the other branch's name) and ``names`` (the table's column name -> this branch's)."""
    table: object
    snapshot: object
    branch: str | None
    names: dict

    def columns(self, columns) -> list[str]:
        """The table's ``columns`` as this branch names them."""
        return [self.names[c] for c in columns]

    def dnf(self, dnf):
        """A normalized filter over the table's columns as one over this branch's."""
        if not dnf:
            return dnf
        return [[(self.names[c], op, v) for c, op, v in conj] for conj in dnf]


def branch_setting(table) -> tuple[str, str] | None:
    """``(option, branch)`` when batch reads of ``table`` take partitions from another branch; None otherwise (and
    for the per-branch copies a fallback read makes). Raises InvalidInput when both options are set."""
    if table._skip_partitions is not None:
        return None
    opts = table.schema.options
    fallback = (opts.get(FALLBACK_BRANCH) or "").strip()
    primary = (opts.get(PRIMARY_BRANCH) or "").strip()
    if fallback and primary:
        raise InvalidInput(f"cannot set both '{FALLBACK_BRANCH}' ({fallback!r}) and '{PRIMARY_BRANCH}' "
                           f"({primary!r}); unset one", table=table.name)
    if fallback:
        return FALLBACK_BRANCH, fallback
    if primary:
        return PRIMARY_BRANCH, primary
    return None


def branch_name(table) -> str:
    """The branch ``table`` is: its branch name, or ``main``."""
    return getattr(table, "branch_name", "main")


def open_branch(table, name: str):
    """Branch ``name`` of the table ``table`` belongs to (``main`` included), or None when it does not exist."""
    base = getattr(table, "main", table)
    try:
        return base if name == "main" else base.branch(name)
    except TableNotFound:
        return None


def sides(table, snapshot_id: int | None = None, tag: str | None = None) -> list[Side] | None:
    """The sides of a batch read of ``table`` at ``snapshot_id`` or ``tag`` (default: latest), first side first;
    None when the table reads alone (see the module docstring). Raises SnapshotNotFound, TagNotFound,
    InvalidInput, UnsupportedFeature."""
    if branch_setting(table) is None:
        return None
    snapshot = table.tag_snapshot(tag) if tag is not None else table.snapshot(snapshot_id)
    if tag is not None:
        def other_snapshot(other):
            return other.tag_snapshot(tag)
    elif snapshot_id is not None:
        def other_snapshot(other):
            return snapshot_at_or_before(other, snapshot.time_millis)
    else:
        def other_snapshot(other):
            return other.snapshot()
    return resolve(table, snapshot, other_snapshot, time_travel=tag is not None or snapshot_id is not None)


def snapshot_at_or_before(other, time_millis: int):
    """The other branch's snapshot for the table's snapshot committed at ``time_millis``: its latest committed at
    or before it, else its snapshot 1 (Paimon's rewriteOtherOptions). Raises SnapshotNotFound."""
    best = None
    for snap in other.snapshots():
        if snap.time_millis <= time_millis and (best is None or snap.id > best.id):
            best = snap
    return best if best is not None else other.snapshot(1)


def resolve(table, snapshot, other_snapshot: Callable, *, time_travel: bool = False) -> list[Side] | None:
    """The sides of a batch read of ``table`` at its resolved ``snapshot``; ``other_snapshot(branch_table)`` pins
    the other branch's. ``time_travel``: ``table`` reads through ``snapshot``'s schema (Table._as_of), so the other
    branch reads through its pinned snapshot's schema too (Paimon's FallbackReadFileStoreTable.copy time-travels
    both tables before comparing their row types). None when the table reads alone."""
    setting = branch_setting(table)
    if setting is None:
        return None
    option, name = setting
    other = open_branch(table, name)
    if other is None:  # Paimon's FileStoreTableFactory logs an error and reads the table alone
        log.error("table %r: %s=%r names no existing branch; reading the table alone", table.name, option, name)
        return None
    other_snap = other_snapshot(other)
    if time_travel:
        other = other.as_of_snapshot(other_snap)
    names = _column_names(table, other, option, name)
    mine = Side(table, snapshot, None, {c: c for c in table.schema.field_names})
    theirs = Side(other, other_snap, name, names)
    first, second = (mine, theirs) if option == FALLBACK_BRANCH else (theirs, mine)
    owned = _partitions(first.table, first.snapshot)
    return [replace(first, table=_plain(first.table, frozenset())), replace(second, table=_plain(second.table, owned))]


def splits(side_list: list[Side], dnf, *, batch: bool = True, batch_read: bool = True) -> list:
    """The splits of every side (``dnf`` over the table's columns), each other-branch split marked with its branch
    (``Split.branch``). ``batch``: as a batch read merges them (engine.read.split_read.batch_read_splits: a
    postpone side with ``postpone.merge-on-read`` carries its postponed records). ``batch_read``: a user's read,
    narrowed by the sides' read options (TableScan.plan); False: every file (a row-level command's read)."""
    from engine.read.split_read import batch_read_splits
    out = []
    for side in side_list:
        planned = side.table.scan().plan(side.snapshot, side.dnf(dnf), batch_read=batch_read)
        planned = batch_read_splits(planned, side.table.schema) if batch else planned
        out += [sp if side.branch is None else replace(sp, branch=side.branch) for sp in planned]
    return out


def read(table, side_list: list[Side], columns=None, filter=None, *, batch_read: bool = True):
    """``Table.read`` of a fallback read: every side's rows (first side first) as the table's columns;
    ``batch_read`` as in ``splits``. Raises InvalidInput for unknown columns or a bad filter, CorruptFile."""
    import pyarrow as pa
    out_cols = table.output_columns(columns)
    dnf = pred.normalize(filter, table.arrow_schema, table.name)
    parts = []
    for side in side_list:
        if side.snapshot is None:
            continue
        t, cols = side.table, side.columns(out_cols)
        if t.schema.is_append_only:
            from engine.append.read import read_append
            rows = read_append(t, None, cols, side.dnf(dnf), snapshot=side.snapshot, batch_read=batch_read)
        else:
            rows = t._read_merged(side.snapshot, cols, side.dnf(dnf), batch_read=batch_read)
        parts.append(_as_table_columns(rows, table, out_cols))
    target = pa.schema([table.arrow_schema.field(c) for c in out_cols])
    return pa.concat_tables(parts) if parts else target.empty_table()


def other_rows_refused(table, side_list: list[Side], filter, op: str) -> None:
    """Raises UnsupportedFeature (nothing written) when a row-level ``op`` (DELETE / UPDATE / MERGE INTO of a
    primary-key table, which reads the matching rows and writes delete or update records) matches a row that the
    other branch supplies (``filter`` over the table's columns; None: any row). Such records land in the table's own
    branch -- Paimon's FallbackReadFileStoreTable delegates every write to it, and its Spark DELETE / UPDATE read
    through both branches -- so in Paimon a changed row of a fallback partition makes that partition the table's
    and hides its other rows, and a changed row of a scan.primary-branch partition stays as it was. lakemerge
    refuses rather than ending so: change such rows on that branch."""
    dnf = pred.normalize(filter, table.arrow_schema, table.name)
    keys = list(table.partition_keys)
    for side in side_list:
        if side.branch is None or side.snapshot is None or not side.table.scan().plan(side.snapshot, side.dnf(dnf)):
            continue
        rows = read(table, [side], keys or None, filter, batch_read=False)
        if rows.num_rows:
            parts = {tuple(r[k] for k in keys) for r in rows.select(keys).to_pylist()} if keys else {()}
            raise refusal(table, op, side.branch, parts)


def other_branch_partitions(table) -> tuple[str, set[tuple]] | None:
    """``(branch, partition values)`` of the partitions whose rows the other branch supplies to a batch read of
    ``table``'s latest snapshot (``()`` for an unpartitioned table it supplies); None when the table reads alone or
    the other branch supplies nothing. For checks like ``other_rows_refused`` made elsewhere (Spark)."""
    found = sides(table)
    for side in found or ():
        if side.branch is not None and side.snapshot is not None:
            parts = {tuple(sp.partition_values) for sp in side.table.scan().plan(side.snapshot)}
            return (side.branch, parts) if parts else None
    return None


def refusal(table, op: str, branch: str, parts: set[tuple]) -> UnsupportedFeature:
    """The error of ``other_rows_refused``: ``op`` would change rows of partitions ``parts`` that ``branch``
    supplies."""
    where = f"partition(s) {sorted(parts, key=repr)[:5]}" if table.partition_keys else "the table"
    return UnsupportedFeature(
        f"table {table.name!r}: {op} matches rows of {where} that branch {branch!r} supplies "
        f"({branch_setting(table)[0]}); the change would be written to branch {branch_name(table)!r}, where it "
        "hides the other rows of those partitions (scan.fallback-branch) or has no visible effect "
        f"(scan.primary-branch), as in Paimon; change those rows on branch {branch!r} itself, or narrow the "
        "condition to the table's own partitions")


def batch_reader(table, side_list: list[Side], columns=None, filter=None, batch_size: int | None = None):
    """``Table.to_reader`` of a fallback read: each side's reader in turn (snapshots pinned now), batches under the
    table's names. Raises like engine.read.stream.batch_reader."""
    import pyarrow as pa
    out_cols = table.output_columns(columns)
    dnf = pred.normalize(filter, table.arrow_schema, table.name)
    readers = [side.table.to_reader(side.snapshot.id, side.columns(out_cols), side.dnf(dnf), batch_size=batch_size)
               for side in side_list if side.snapshot is not None]
    target = pa.schema([table.arrow_schema.field(c) for c in out_cols])

    def batches():
        for reader in readers:
            for batch in reader:
                yield from _as_table_columns(pa.Table.from_batches([batch]), table, out_cols).to_batches()
    return pa.RecordBatchReader.from_batches(target, batches())


def lookup(table, side_list: list[Side], keys, columns=None):
    """``Table.lookup`` of a fallback read: the keys looked up in each side (each side holds other partitions).
    Raises UnsupportedFeature when the other branch is an append table or has other primary keys."""
    import pyarrow as pa
    from engine.write.validate import to_arrow_table
    out_cols = table.output_columns(columns)
    probes = to_arrow_table(keys, table.name)
    parts = []
    for side in side_list:
        keys_there = side.columns(table.schema.primary_keys)
        if side.table.schema.is_append_only or keys_there != list(side.table.schema.primary_keys):
            raise UnsupportedFeature(f"table {table.name!r}: lookup when branch {side.branch!r} (read for some "
                                     f"partitions) is an append table or has other primary keys "
                                     f"({list(side.table.schema.primary_keys)})")
        if side.snapshot is None:
            continue
        mine = [c for c in probes.column_names if c in side.names]
        renamed = probes.select(mine).rename_columns(side.columns(mine))
        rows = side.table.lookup(renamed, side.snapshot.id, side.columns(out_cols))
        parts.append(_as_table_columns(rows, table, out_cols))
    target = pa.schema([table.arrow_schema.field(c) for c in out_cols])
    return pa.concat_tables(parts) if parts else target.empty_table()


def _as_table_columns(rows, table, columns):
    """``rows`` (a side's names for ``columns``, in that order) under the table's names and Arrow types."""
    import pyarrow as pa
    from engine.read.split_read import with_schema
    target = pa.schema([table.arrow_schema.field(c) for c in columns])
    return with_schema(rows.rename_columns(list(columns)), target)


def never_null_columns(table) -> list[str]:
    """The table's NOT NULL columns whose batch-read values are never null: with another branch read for some
    partitions, only those NOT NULL on both (Paimon ignores nullability when it compares the branches)."""
    names = [f.name for f in table.arrow_schema if not f.nullable]
    setting = branch_setting(table)
    other = open_branch(table, setting[1]) if setting is not None else None
    if other is None:
        return names
    theirs = dict(zip(table.schema.field_names, other.arrow_schema)) if len(other.arrow_schema) == len(
        table.arrow_schema) else {}
    return [c for c in names if c in theirs and not theirs[c].nullable]


def _plain(table, skip: frozenset):
    """A copy of ``table`` that reads without a fallback and plans no file of the partitions in ``skip``."""
    plain = table.through_schema(table.schema.id)  # each side reads through its current schema
    plain._skip_partitions = skip
    return plain


def _partitions(table, snapshot) -> frozenset:
    """The serialized partitions a batch read of ``table`` at ``snapshot`` sees files of (real buckets only -- and
    the postponed records of a ``postpone.merge-on-read`` table, whose real buckets count at every level -- and
    otherwise without the level-0 files of a deletion-vector table: engine.read.split_read.batch_read_splits),
    which is what
    Paimon's partition listing of a batch scan returns (its level and bucket filters apply to the listing)."""
    from engine.read.split_read import batch_read_splits
    return frozenset(sp.partition for sp in batch_read_splits(table.scan().plan(snapshot), table.schema))


def _column_names(table, other, option: str, name: str) -> dict:
    """The table's column names -> the other branch's, by position. Raises InvalidInput when the row types differ
    (Paimon's FallbackReadFileStoreTable.validateSchema), UnsupportedFeature for other field ids or partition
    keys."""
    mine, theirs = table.schema.fields, other.schema.fields
    if len(mine) != len(theirs) or any(a.type.with_nullable(True) != b.type.with_nullable(True)
                                       for a, b in zip(mine, theirs)):
        def row(fields):
            return ", ".join(f"{f.name} {f.type}" for f in fields)
        raise InvalidInput(f"branches {branch_name(table)!r} and {name!r} do not have the same row type, which "
                           f"'{option}' = {name!r} needs: {branch_name(table)} has ({row(mine)}), {name} has "
                           f"({row(theirs)})", table=table.name)
    odd = next((f"{a.name} (id {a.id}) / {b.name} (id {b.id})" for a, b in zip(mine, theirs) if a.id != b.id), None)
    if odd is not None:
        raise UnsupportedFeature(f"table {table.name!r}: '{option}' = {name!r}: branch {name!r} has other field ids "
                                 f"than {branch_name(table)!r} at the same positions ({odd}); lakemerge reads the "
                                 "branches' columns by position only when their ids match")
    names = {a.name: b.name for a, b in zip(mine, theirs)}
    if [names[k] for k in table.schema.partition_keys] != list(other.schema.partition_keys):
        raise UnsupportedFeature(f"table {table.name!r}: '{option}' = {name!r}: the branches are partitioned "
                                 f"differently ({list(table.schema.partition_keys)} / "
                                 f"{list(other.schema.partition_keys)}); partitions cannot be matched")
    return names
