"""Table: the public face of one primary-key table (write, delete, commit, read, lookup, snapshots)."""
from __future__ import annotations

import datetime as dt
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Sequence

import pyarrow as pa

from engine.commit.committer import Committer
from engine.data_paths import data_file_path
from engine.errors import (
    CommitConflict,
    CommitRetriesExhausted,
    CorruptFile,
    InvalidInput,
    InvalidOption,
    InvalidSchema,
    TableNotFound,
)
from engine.io.file_io import FileIO
from engine.meta.manifest import ManifestEntry
from engine.meta.snapshot import Snapshot
from engine.options import SCAN_FILE_CREATION_TIME_MILLIS
from engine.paths import TablePaths
from engine.read import predicate as pred
from engine.read.scan import ManifestCache, Split, TableScan
from engine.read.split_read import SplitReader
from engine.schema import TableSchema
from engine.snapshots import SchemaManager, SnapshotManager
from engine.write.commit_message import CommitMessage
from engine.write.table_write import TableWrite


class Table:
    """A Paimon primary-key table. Create it through ``Catalog``; this object is cheap and holds caches only."""

    # Set on the copies a fallback-branch read makes of each branch (engine.read.fallback_branch): those copies
    # read plainly (no fallback of their own) and their scans leave these partitions out. None: a normal table.
    _skip_partitions: frozenset[bytes] | None = None
    # True on a copy made by ``through_schema``: it reads every snapshot through its schema (no time-travel switch).
    _schema_pinned: bool = False

    def __init__(self, name: str, root: str, file_io: FileIO, *, meta_root: str | None = None,
                 validate: bool = True):
        self.name = name
        self.root = root
        self.file_io = file_io
        self.paths = TablePaths(root, meta_root)
        self.snapshot_manager = SnapshotManager(file_io, self.paths, name)
        self.schema_manager = SchemaManager(file_io, self.paths, name)
        self.manifests = ManifestCache(file_io, self.paths)
        schema = self.schema_manager.latest()
        if schema is None:
            raise TableNotFound(name)
        self.schema: TableSchema = schema
        if validate:  # False only to repair a schema another tool committed invalid (Catalog.alter_table)
            self.schema.validate(name, opening=True)

    def __repr__(self) -> str:
        return f"Table({self.name!r}, {self.root!r})"

    def through_schema(self, schema_id: int) -> Table:
        """This table read through schema ``schema_id`` (as Paimon's table object of that schema reads it): a copy
        sharing the caches whose ``schema`` is that schema and stays so (altering this table, or the copy, does not
        change the other's). Data files written under any schema are read by field id into it. Meant for readers
        that must keep the columns they started with; raises CorruptFile if the schema file is missing."""
        import copy
        pinned = copy.copy(self)
        pinned.schema = self.schema if schema_id == self.schema.id else self.schema_manager.schema(schema_id)
        pinned._schema_pinned = True
        return pinned

    def _as_of(self, snapshot_id=None, tag: str | None = None) -> Table:
        """The table a time-travel read of ``snapshot_id`` or ``tag`` goes through: as Paimon's
        AbstractFileStoreTable.tryTimeTravel, the fields and keys of the schema that snapshot was committed under
        (names, types) with the table's current options (restated for that schema:
        engine.schema_change.options_as_of), unless this object is pinned to a schema (``through_schema``). Raises
        like ``snapshot`` / ``tag_snapshot``, and InvalidSchema if those options do not fit that schema."""
        if self._schema_pinned or (snapshot_id is None and tag is None):
            return self
        self.check_time_travel(tag or snapshot_id)
        return self.as_of_snapshot(self.tag_snapshot(tag) if tag is not None else self.snapshot(snapshot_id))

    def check_time_travel(self, target) -> None:
        """Raises InvalidOption if this table's options forbid a read pinned to ``target`` (a snapshot id, tag or
        timestamp, named in the message): ``scan.file-creation-time-millis`` starts reads at the latest snapshot,
        and Paimon's SchemaValidation.validateStartupMode allows one starting point only."""
        created = self.schema.options.get(SCAN_FILE_CREATION_TIME_MILLIS)
        if created is not None:
            raise InvalidOption(SCAN_FILE_CREATION_TIME_MILLIS, created, "a read with this option reads the latest "
                                f"snapshot; it conflicts with time travel to {target!r}", table=self.name)

    def as_of_snapshot(self, snap: Snapshot | None) -> Table:
        """``_as_of`` of a resolved snapshot of this table (None, or one of the current schema: this table)."""
        if snap is None or snap.schema_id == self.schema.id:
            return self
        return self.as_of_schema(snap.schema_id, f"snapshot {snap.id} was committed under schema {snap.schema_id}")

    def as_of_schema(self, schema_id: int, why: str | None = None) -> Table:
        """This table as a time-travel read of a snapshot committed under schema ``schema_id`` reads it: that
        schema's fields and keys with the table's current options restated for it (``_as_of``); this table itself
        for its current schema. ``why`` opens the error message. Raises CorruptFile (no such schema file),
        InvalidSchema if the current options do not fit that schema."""
        if schema_id == self.schema.id:
            return self
        from engine.schema_change import options_as_of
        view = self.through_schema(schema_id)
        view.schema = replace(view.schema, options=options_as_of(self.schema.options, self.schema, view.schema))
        try:
            view.schema.validate(self.name, opening=True)
        except InvalidSchema as e:
            raise InvalidSchema(f"table {self.name!r}: {why or f'schema {schema_id}'}, which the table's current "
                                f"options do not fit: {e}") from e
        return view

    def branch(self, name: str) -> Table:
        """Branch ``name`` of this table (Paimon's ``db.t$branch_<name>``): a Table (engine.branch_table) whose
        snapshots, schemas, tags and consumers are the branch's (``branch/branch-<name>/``); everything but branch
        management works as on main. ``main`` is this table. Raises TableNotFound naming the table and the branch
        if there is no such branch."""
        from engine.branch_table import BranchTable
        return self if name == "main" else BranchTable(self, name)

    def branches(self) -> list[str]:
        """Names of the table's branches (not ``main``), sorted."""
        from engine.branches import branch_names
        return branch_names(self)

    def create_branch(self, name: str, tag: str | None = None) -> None:
        """Create branch ``name``, empty or from ``tag`` (engine.branches.create_branch: as Paimon does). Raises
        InvalidInput, TagNotFound."""
        from engine.branches import create_branch
        create_branch(self, name, tag)

    def delete_branch(self, name: str) -> None:
        """Delete branch ``name``'s metadata (engine.branches.delete_branch). Raises InvalidInput."""
        from engine.branches import delete_branch
        delete_branch(self, name)

    def rename_branch(self, source: str, target: str) -> None:
        """Rename branch ``source`` to ``target`` in one step (engine.branches.rename_branch, as Paimon's
        ``rename_branch``). Raises InvalidInput."""
        from engine.branches import rename_branch
        rename_branch(self, source, target)

    def merge_branch(self, source: str, target: str = "main") -> int | None:
        """Add the data files of append-table line ``source`` that line ``target`` lacks to ``target`` as one
        APPEND snapshot (engine.branches.merge_branch, as Paimon's ``merge_branch``); returns ``target``'s latest
        snapshot id. Raises InvalidInput, UnsupportedFeature, CommitConflict."""
        from engine.branches import merge_branch
        return merge_branch(self, source, target)

    def fast_forward(self, branch: str) -> None:
        """Make branch ``branch``'s history the table's (engine.branches.fast_forward, as Paimon's
        ``fast_forward``); this object then sees the new snapshots and latest schema. Raises InvalidInput."""
        from engine.branches import fast_forward
        fast_forward(self, branch)
        self.snapshot_manager = SnapshotManager(self.file_io, self.paths, self.name)
        self.schema_manager = SchemaManager(self.file_io, self.paths, self.name)
        self.schema = self.schema_manager.latest()

    # --- metadata -----------------------------------------------------------------------------------
    @property
    def arrow_schema(self) -> pa.Schema:
        """The table's columns as an Arrow schema (latest schema; primary-key columns not nullable)."""
        return self.schema.arrow_schema

    @property
    def primary_keys(self) -> tuple[str, ...]:
        """Primary-key column names in key order; empty for an append table."""
        return self.schema.primary_keys

    @property
    def partition_keys(self) -> tuple[str, ...]:
        """Partition column names in partition order; empty for an unpartitioned table."""
        return self.schema.partition_keys

    @property
    def options(self) -> dict:
        """A copy of the table options as stored in the schema (``str -> str``); changing it changes nothing."""
        return dict(self.schema.options)

    def snapshots(self) -> list[Snapshot]:
        """Every snapshot from the earliest retained to the latest, oldest first (empty without commits). Raises
        CorruptFile for an unreadable snapshot file.
        """
        return self.snapshot_manager.all()

    def latest_snapshot_id(self) -> int | None:
        """Id of the latest snapshot, or None for a table without commits."""
        return self.snapshot_manager.latest_id()

    def snapshot(self, snapshot_id: int | None = None) -> Snapshot | None:
        """The given snapshot, or the latest (None for a table without commits). Raises SnapshotNotFound."""
        if snapshot_id is None:
            return self.snapshot_manager.latest()
        return self.snapshot_manager.snapshot(int(snapshot_id))

    def scan(self) -> TableScan:
        """A TableScan over this table's latest schema (planning splits of a snapshot); cheap, shares the manifest
        cache.
        """
        return TableScan(self.paths, self.schema, self.manifests, self.name, self.schema_manager.schema,
                         self._skip_partitions or frozenset())

    def bucket_dir(self, partition_values: tuple, bucket: int) -> str:
        """The directory of ``bucket`` in the partition with ``partition_values`` (Paimon's path rules). Pure path
        arithmetic: nothing is created or checked.
        """
        return self.scan().bucket_dir(partition_values, bucket)

    def writer_base(self, snapshot: Snapshot | None) -> tuple[Snapshot | None, list[ManifestEntry]]:
        """``(base, live entries of base)`` for a writer that started from ``snapshot`` (None: no entries).

        The base is ``snapshot``, or the newest snapshot by listing if ``snapshot`` could not be read and is gone or
        no longer the newest (a concurrent expiration removed it, or it was a stale claim being withdrawn): nothing
        was derived from it yet, and a later base only raises the sequence numbers. A manifest missing from the
        newest snapshot is corruption. Raises CorruptFile."""
        sm = self.snapshot_manager
        while snapshot is not None:
            try:
                return snapshot, self.manifests.live_entries(snapshot)
            except CorruptFile:
                ids = sm.ids()
                if ids and ids[-1] == snapshot.id:
                    raise
                snapshot = sm.snapshot(ids[-1]) if ids else None
        return None, []

    # --- writing ------------------------------------------------------------------------------------
    def new_write(self, *, commit_user: str | None = None, commit_identifier: int | None = None,
                  overwrite: bool = False) -> TableWrite:
        """A writer for many batches committed together (use as a context manager). ``overwrite=True``: its
        messages are for ``commit_overwrite`` (a fixed-bucket writer ignores the partitions' previous files and places
        rows by the table's current ``bucket``, rescaling the partitions it overwrites; a dynamic-bucket writer then starts the index of every partition it
        writes empty, as Paimon's overwrite writer does, so its messages can only be committed by an overwrite; a
        postpone table's decides each partition's bucket count afresh, without the replaced layout)."""
        if self.schema.is_append_only:
            from engine.append.write import AppendWrite
            return AppendWrite(self, commit_user=commit_user, commit_identifier=commit_identifier, overwrite=overwrite)
        if self.schema.table_options.bucket == -1 and self.schema.cross_partition_update:
            from engine.dynamic_bucket.cross_partition import CrossPartitionWrite
            return CrossPartitionWrite(self, commit_user=commit_user, commit_identifier=commit_identifier)
        if self.schema.table_options.bucket == -2:
            from engine.postpone.write import new_postpone_write
            return new_postpone_write(self, commit_user=commit_user, commit_identifier=commit_identifier,
                                      overwrite=overwrite)
        if self.schema.table_options.bucket == -1:
            from engine.dynamic_bucket.write import DynamicBucketWrite
            return DynamicBucketWrite(self, commit_user=commit_user, commit_identifier=commit_identifier,
                                      overwrite=overwrite)
        return TableWrite(self, commit_user=commit_user, commit_identifier=commit_identifier, overwrite=overwrite)

    def commit(self, messages: Sequence[CommitMessage], *, properties: dict | None = None,
               commit_user: str | None = None, commit_identifier: int | None = None) -> int | None:
        """Publish messages from ``prepare_commit`` as one snapshot; returns its id.

        Committing the same messages again returns the same id without applying them twice.
        ``commit_user``/``commit_identifier`` name an empty commit (no messages, a table with
        ``snapshot.ignore-empty-commit=false``), e.g. a stream's empty batch; messages carry their own. If the commit
        cannot land (conflict, lost races) the error is raised, the table is unchanged, and the messages' files that no
        snapshot, tag or changelog references are deleted (files an earlier commit published stay).
        """
        messages = list(messages)
        fresh = next((m for m in messages if m.overwrite_only or getattr(m, "index_fresh", False)), None)
        if fresh is not None:  # it ignored the partition's files (sequence numbers, HASH index): only an overwrite
            # may publish it
            self._delete_uncommitted(messages)
            raise InvalidInput(f"the messages of an overwrite writer (new_write(overwrite=True)) for partition "
                               f"{tuple(fresh.partition_values)} can only be committed with commit_overwrite",
                               table=self.name)
        try:
            sid = Committer(self).commit(messages, properties=properties, commit_user=commit_user,
                                         commit_identifier=commit_identifier)
        except (CommitConflict, CommitRetriesExhausted):
            self._delete_uncommitted(messages)
            raise
        self._expire_after_commit(messages, commit_identifier)
        return sid

    def _delete_uncommitted(self, messages: Sequence[CommitMessage]) -> None:
        """After a rejected commit: delete the messages' data, changelog and index files unless referenced."""
        from engine.maintenance.orphans import delete_unreferenced
        paths = [data_file_path(self.bucket_dir(m.partition_values, m.bucket), f)
                 for m in messages for f in m.new_files + m.changelog_files]
        paths += [p for m in messages for p in getattr(m, "index_paths", ())]  # dynamic-bucket HASH index files
        delete_unreferenced(self, paths)

    def write(self, data, row_kinds=None, *, merge_schema: bool = False, type_widening: bool = False,
              explicit_cast: bool = False) -> int | None:
        """Upsert ``data`` (pa.Table, RecordBatch or pandas DataFrame) in one commit; returns the id of the last
        snapshot it published (the COMPACT snapshot that follows the APPEND one when the write compacted).
        ``merge_schema`` (Paimon's ``write.merge-schema``, with ``type_widening`` / ``explicit_cast``) first evolves
        the table to take ``data``'s new columns (``Table.merge_schema``; an input whose columns the merged schema
        would not take either, such as one lacking a NOT NULL column, is refused before that schema is published;
        the schema stays if the data write then fails on a value) and writes nulls for the nullable columns
        ``data`` lacks."""
        if merge_schema:
            from engine.merge_schema import merge_input_schema, with_missing_columns
            from engine.write.validate import conform, to_arrow_table
            data = to_arrow_table(data, self.name)

            def check(merged):  # refuse, before publishing, an input the merged schema would not take either
                # (one row: Arrow casts an empty struct column whatever its fields)
                conform(with_missing_columns(data.slice(0, 1), merged), merged, self.name)
            merge_input_schema(self, data.schema, type_widening=type_widening, explicit_cast=explicit_cast,
                               check=check)
            data = with_missing_columns(data, self.schema)
        with self.new_write() as w:
            w.write(data, row_kinds=row_kinds)
            messages = w.prepare_commit()
        return self.commit(messages)

    def delete(self, keys) -> int | None:
        """Delete the rows whose primary keys appear in ``keys``, in one commit; returns the snapshot id."""
        with self.new_write() as w:
            w.delete(keys)
            messages = w.prepare_commit()
        return self.commit(messages)

    def delete_where(self, filter) -> int | None:
        """DELETE FROM this table WHERE ``filter`` (the forms of ``read(filter=...)``; None deletes every row), in
        one snapshot; returns its id, or None when no row matched.

        Append table (engine.append.row_level): a condition on partition columns only drops the matching
        partitions; otherwise the files holding matching rows are rewritten without them, or with
        ``deletion-vectors.enabled`` the rows are marked in deletion vectors. Primary-key table
        (engine.write.row_level): the matching rows are read at the latest snapshot and written back as -D records;
        a merge engine that cannot take a delete record has the rows deleted from its files instead, as Paimon
        (engine.write.pk_rewrite; no condition or a partition-only one truncates). Raises InvalidInput (bad
        filter; a bucket that must be compacted first), UnsupportedFeature (a table whose data files lakemerge
        cannot rewrite), CommitConflict (nothing changed then)."""
        if self.schema.is_append_only:
            from engine.append.row_level import delete_where
        else:
            from engine.write.row_level import delete_where
        return delete_where(self, filter)

    def update_where(self, assignments, filter=None) -> int | None:
        """UPDATE this table SET ``assignments`` (column -> literal, pyarrow.compute.Expression or callable over
        the matching rows) WHERE ``filter`` (None: every row), in one snapshot; returns its id, or None when no row
        matched. Append table: copy-on-write, or with deletion vectors old rows marked deleted and the new ones
        appended (engine.append.row_level). Primary-key table: the matching rows are read at the latest snapshot and
        written back as +U records with the new values (engine.write.row_level). Raises InvalidInput (unknown column,
        bad value, a primary-key column, merge-engine aggregation / first-row), CommitConflict."""
        if self.schema.is_append_only:
            from engine.append.row_level import update_where
        else:
            from engine.write.row_level import update_where
        return update_where(self, assignments, filter)

    # --- reading ------------------------------------------------------------------------------------
    def plan(self, snapshot_id: int | None = None, filter=None) -> list[Split]:
        """The Splits (one per partition and bucket, with their live files) of ``snapshot_id`` (default: latest; none
        without commits) that may hold rows matching ``filter``; with ``scan.fallback-branch`` /
        ``scan.primary-branch`` also the other branch's splits of the partitions it supplies, marked with
        ``Split.branch`` (engine.read.fallback_branch). Raises SnapshotNotFound, InvalidInput for a bad filter,
        CorruptFile for damaged manifests.
        """
        if (at := self._as_of(snapshot_id)) is not self:
            return at.plan(snapshot_id, filter)
        from engine.read import fallback_branch
        dnf = pred.normalize(filter, self.arrow_schema, self.name)
        sides = fallback_branch.sides(self, snapshot_id)
        if sides is not None:
            return fallback_branch.splits(sides, dnf, batch=False)
        return self.scan().plan(self.snapshot(snapshot_id), dnf, batch_read=True)

    def read(self, snapshot_id: int | None = None, columns: Sequence[str] | None = None, filter=None, *,
             tag: str | None = None) -> pa.Table:
        """The merged table at ``snapshot_id`` (default: latest), optionally projected and filtered. A time-travel
        read (``snapshot_id`` or ``tag``) has the columns of the schema that snapshot was committed under, as in
        Paimon (names, types; ``columns`` and ``filter`` name those columns; ``_as_of``). With
        ``scan.fallback-branch`` / ``scan.primary-branch`` some partitions come from that branch, as Paimon's batch
        reads (engine.read.fallback_branch; ``to_reader`` and ``lookup`` too).

        Raises SnapshotNotFound for an unknown snapshot, TagNotFound, InvalidInput for unknown columns, bad filters
        or both ``snapshot_id`` and ``tag``, CorruptFile if a referenced file is missing or damaged.
        """
        if snapshot_id is not None and tag is not None:  # Paimon: only one time-travel option may be set
            raise InvalidInput(f"give snapshot_id ({snapshot_id}) or tag ({tag!r}), not both", table=self.name)
        if (at := self._as_of(snapshot_id, tag)) is not self:
            return at.read(snapshot_id, columns, filter, tag=tag)
        from engine.read import fallback_branch
        sides = fallback_branch.sides(self, snapshot_id, tag)
        if sides is not None:  # scan.fallback-branch / scan.primary-branch
            return fallback_branch.read(self, sides, columns, filter)
        if self.schema.is_append_only:
            from engine.append.read import read_append
            snap = self.tag_snapshot(tag) if tag is not None else None
            return read_append(self, snapshot_id, columns, filter, snapshot=snap)
        out_cols = self.output_columns(columns)
        snap = self.tag_snapshot(tag) if tag is not None else self.snapshot(snapshot_id)
        return self._read_merged(snap, out_cols, filter, batch_read=True)

    def output_columns(self, columns=None) -> list[str]:
        """The columns a read of ``columns`` returns, in that order (every field when None). Raises InvalidInput
        naming the first column the table does not have."""
        out = list(columns) if columns is not None else list(self.schema.field_names)
        unknown = [c for c in out if c not in self.schema.field_names]
        if unknown:
            raise InvalidInput(f"unknown column(s) {unknown}", table=self.name, column=unknown[0])
        return out

    def _read_merged(self, snap: Snapshot | None, out_cols: list[str], filter, *,
                     exclude: frozenset[str] = frozenset(), every_level: bool = False,
                     batch_read: bool = False, user_read: bool | None = None) -> pa.Table:
        """``read`` of a resolved snapshot; ``exclude`` and ``every_level`` as in engine.read.lookup.lookup_rows;
        ``batch_read`` as in TableScan.plan (a user's read, narrowed by the table's read options). ``user_read``
        (default: ``batch_read``): unreadable data files are skipped as engine.read.file_skips says; never for a
        row-level operation's read."""
        self.output_columns(out_cols)
        dnf = pred.normalize(filter, self.arrow_schema, self.name)
        from engine.postpone import real_bucket_splits
        from engine.read.split_read import batch_read_splits, with_schema
        planned = self.scan().plan(snap, dnf, exclude=exclude, batch_read=batch_read)
        splits = real_bucket_splits(planned) if every_level else batch_read_splits(planned, self.schema)
        read_cols = list(dict.fromkeys(out_cols + sorted(pred.columns_of(dnf))))
        from engine.read.file_skips import read_skips
        user_read = batch_read if user_read is None else user_read
        reader = SplitReader(self.file_io, self.schema, self.schema_manager.schema,
                             read_skips(self) if user_read else None)  # never for row-level operations
        parts = self._map(lambda sp: reader.read(sp, read_cols), splits)
        target = pa.schema([self.arrow_schema.field(c) for c in read_cols])
        result = pa.concat_tables([with_schema(p, target) for p in parts]) if parts else target.empty_table()
        if dnf:
            result = result.filter(pred.to_expression(dnf))
        return result.select(out_cols)

    def to_arrow(self, snapshot_id: int | None = None, columns: Sequence[str] | None = None, filter=None) -> pa.Table:
        """Same as ``read``: the merged rows as one Arrow table."""
        return self.read(snapshot_id, columns, filter)

    def to_pandas(self, snapshot_id: int | None = None, columns: Sequence[str] | None = None, filter=None):
        """``read(...)`` as a pandas DataFrame (needs pandas)."""
        return self.read(snapshot_id, columns, filter).to_pandas()

    def lookup(self, keys, snapshot_id: int | None = None, columns: Sequence[str] | None = None) -> pa.Table:
        """Rows for the given primary keys at a snapshot; keys that do not exist are absent from the result."""
        if self.schema.is_append_only:
            raise InvalidInput("an append table has no primary key to look rows up by", table=self.name)
        if (at := self._as_of(snapshot_id)) is not self:
            return at.lookup(keys, snapshot_id, columns)
        from engine.read import fallback_branch
        sides = fallback_branch.sides(self, snapshot_id)
        if sides is not None:  # scan.fallback-branch / scan.primary-branch: each side holds other partitions
            return fallback_branch.lookup(self, sides, keys, columns)
        from engine.postpone import require_lookup_readable
        require_lookup_readable(self.schema, self.name)
        if self.schema.cross_partition_update:
            from engine.dynamic_bucket.cross_partition import lookup_cross_partition
            return lookup_cross_partition(self, keys, snapshot_id, columns)
        from engine.read.lookup import lookup_rows
        return lookup_rows(self, keys, self.snapshot(snapshot_id), columns)

    @staticmethod
    def _map(fn, items: list) -> list:
        if len(items) <= 1:
            return [fn(i) for i in items]
        with ThreadPoolExecutor(max_workers=min(len(items), os.cpu_count() or 2)) as pool:
            return list(pool.map(fn, items))

    # --- Arrow ecosystem (issue 8) ------------------------------------------------------------------
    def to_reader(self, snapshot_id: int | None = None, columns: Sequence[str] | None = None, filter=None, *,
                  batch_size: int | None = None) -> pa.RecordBatchReader:
        """The merged rows as a ``pyarrow.RecordBatchReader`` that reads one bucket of one partition at a time
        (bounded memory); usable by DuckDB, Polars, DataFusion... The snapshot is pinned when this is called.
        Raises like ``read`` (data-file errors surface while iterating). See engine.read.stream."""
        if (at := self._as_of(snapshot_id)) is not self:
            return at.to_reader(snapshot_id, columns, filter, batch_size=batch_size)
        from engine.read import fallback_branch
        sides = fallback_branch.sides(self, snapshot_id)
        if sides is not None:  # scan.fallback-branch / scan.primary-branch
            return fallback_branch.batch_reader(self, sides, columns, filter, batch_size)
        from engine.read.stream import batch_reader
        return batch_reader(self, snapshot_id, columns, filter, batch_size)

    def to_batches(self, snapshot_id: int | None = None, columns: Sequence[str] | None = None, filter=None, *,
                   batch_size: int | None = None):
        """Iterator of ``pa.RecordBatch`` over the merged rows, streamed like ``to_reader``."""
        return iter(self.to_reader(snapshot_id, columns, filter, batch_size=batch_size))

    def to_polars(self, snapshot_id: int | None = None, columns: Sequence[str] | None = None, filter=None):
        """``read(...)`` as a polars DataFrame. Raises ImportError naming polars if it is not installed."""
        try:
            import polars as pl
        except ImportError:
            raise ImportError("Table.to_polars needs polars (pip install 'lakemerge[dataframes]')") from None
        return pl.from_arrow(self.read(snapshot_id, columns, filter))

    # --- compaction and maintenance (issue 4) ---------------------------------------------------------
    def compact(self, *, full: bool = False, partitions=None, progress=None) -> int | None:
        """Compact the latest snapshot's buckets and commit the result as a COMPACT snapshot; returns its id, or
        None when there was nothing to compact.

        ``full=True`` rewrites each bucket to one run at the top level; otherwise each bucket runs what universal
        compaction picks. ``partitions``: a dict or list of dicts of partition column -> value limiting the work.
        A concurrent commit that removed an input file makes this raise CommitConflict with nothing changed
        (the files it wrote are deleted); calling it again is safe. ``progress(rows=, bytes=)`` is called after
        each bucket (see engine.compact.manager.compact_table). On an append table this is small-file compaction
        (engine.append.compact.compact_append: ``full=True`` merges each bucket's files into target-size files).
        """
        from engine.refused_options import require_writable
        require_writable(self.schema.options, self.name)
        if self.schema.is_append_only:  # append tables: small-file compaction (engine.append.compact)
            from engine.append.compact import compact_append
            sid = compact_append(self, full=full, partitions=partitions, progress=progress)
            if sid is not None:
                self._expire_after_commit()
            return sid
        if self.schema.table_options.bucket == -2:  # postponed files move into real buckets (engine.postpone)
            from engine.postpone.compact import compact_postpone_table
            sid = compact_postpone_table(self, full=full, partitions=partitions, progress=progress)
            if sid is not None:
                self._expire_after_commit()
            return sid
        from engine.compact.manager import compact_table
        messages = compact_table(self, full=full, partitions=partitions, progress=progress)
        if not messages:
            return None
        sid = Committer(self).commit(messages)
        self._expire_after_commit(messages)
        return sid

    def expire_snapshots(self, *, retain_min: int | None = None, retain_max: int | None = None,
                         time_retained=None, max_deletes: int | None = None):
        """Expire old snapshots (defaults: the table's snapshot.* options) and delete exactly the files no retained
        snapshot or tag references. Returns a Removal (snapshot_ids, data_files, metadata_files, index_files)."""
        from engine.maintenance.expire import expire_snapshots
        return expire_snapshots(self, retain_min=retain_min, retain_max=retain_max, time_retained=time_retained,
                                max_deletes=max_deletes)

    def remove_orphan_files(self, older_than=None, *, dry_run: bool = False) -> list[str]:
        """Delete files no snapshot or tag references, last modified before ``older_than`` (default 1 day)."""
        from engine.maintenance.orphans import remove_orphan_files
        return remove_orphan_files(self, older_than, dry_run=dry_run)

    def create_tag(self, name: str, snapshot_id: int | None = None, time_retained=None) -> None:
        """Tag a snapshot (default: the latest) as ``tag/tag-<name>``, retained for ``time_retained`` (a timedelta;
        default ``tag.default-time-retained``; None: until deleted). Raises InvalidInput (also for a name in the
        automatic tags' format on a snapshot that already has an automatic tag, as Paimon), SnapshotNotFound (also
        when a concurrent expiration removed the snapshot while the tag was written: the tag is withdrawn)."""
        from engine.maintenance.auto_tags import check_no_auto_tag
        from engine.maintenance.tags import TagManager
        from engine.options import TAG_DEFAULT_TIME_RETAINED
        snap = self.snapshot(snapshot_id)
        if snap is None:
            raise InvalidInput("cannot tag a table without snapshots", table=self.name)
        retained = self.schema.table_options.get(TAG_DEFAULT_TIME_RETAINED) if time_retained is None \
            else time_retained // dt.timedelta(milliseconds=1)
        check_no_auto_tag(self, name, snap.id)
        TagManager(self).create_of_live(name, snap, retained)

    def delete_tag(self, name: str) -> None:
        """Remove a tag and the files only it kept alive. Raises TagNotFound."""
        from engine.maintenance.tags import delete_tag
        delete_tag(self, name)

    def tags(self) -> dict:
        """Tag name -> tagged Snapshot."""
        from engine.maintenance.tags import TagManager
        return TagManager(self).all()

    def tag_snapshot(self, name: str) -> Snapshot:
        """The snapshot tag ``name`` points at (it may have expired from snapshot/). Raises TagNotFound, CorruptFile.
        """
        from engine.maintenance.tags import TagManager
        return TagManager(self).get(name)

    def rollback_to(self, target) -> None:
        """Make a snapshot (int id) or a tag (str name) the latest state; later snapshots and their files go."""
        from engine.maintenance.rollback import rollback_to
        rollback_to(self, target)

    def _expire_after_commit(self, messages: Sequence[CommitMessage] = (), identifier: int | None = None) -> None:
        """Maintenance after a commit that landed (engine.maintenance.auto): automatic tags and tag expiration,
        partition, consumer and snapshot expiration unless write-only; never raises, problems are logged. The
        commit identifier is the messages' (or ``identifier``; default the batch identifier)."""
        from engine.maintenance.auto import maintain_after_commit
        from engine.meta.snapshot import BATCH_COMMIT_IDENTIFIER
        idents = {m.commit_identifier for m in messages} or ({int(identifier)} if identifier is not None else set())
        maintain_after_commit(self, idents.pop() if len(idents) == 1 else BATCH_COMMIT_IDENTIFIER)

    def rescale(self, bucket_num: int | None = None, partitions=None) -> int | None:
        """Paimon's ``rescale`` procedure: rewrite the partitions matching ``partitions`` (as in drop_partitions;
        None: every partition) with ``bucket_num`` buckets (default: the table's ``bucket``) in ONE OVERWRITE
        snapshot; returns its id, or None when no matched partition has data. See engine.maintenance.rescale.
        Raises InvalidInput, UnsupportedFeature, CommitConflict (a commit to those partitions meanwhile)."""
        from engine.maintenance.rescale import rescale
        return rescale(self, bucket_num, partitions)

    def drop_partitions(self, partitions) -> int | None:
        """Drop partitions as Paimon's ALTER TABLE DROP PARTITION: ONE OVERWRITE snapshot deleting every live data
        file and index file record (HASH, deletion vectors) of the partitions matching ``partitions`` (a dict, or a
        list of dicts, of partition column -> value; a spec naming some partition columns matches every partition
        with those values; None matches null). Returns its id, or the latest id when nothing matched. The files go
        from storage when the snapshots still referencing them expire. See engine.maintenance.partitions.
        Raises InvalidInput, CommitConflict, CommitRetriesExhausted."""
        from engine.maintenance.partitions import drop_partitions
        return drop_partitions(self, partitions)

    def expire_partitions(self, now=None) -> list[dict]:
        """Drop the partitions that ``partition.expiration-*`` expires at local time ``now`` (a naive datetime;
        default now), whatever the check interval; returns them (empty when the option is unset). See
        engine.maintenance.partition_expire."""
        from engine.maintenance.partition_expire import expire_partitions
        return expire_partitions(self, now)

    # --- schema evolution (issue 8) -----------------------------------------------------------------
    def alter(self):
        """A fluent schema update: ``table.alter().add_column("x", pa.int64()).rename_column("a", "b").commit()``.
        See engine.schema_change for the rules; ``commit()`` publishes schema-<N+1> and updates ``self.schema``."""
        from engine.schema_change import SchemaUpdate
        return SchemaUpdate(self)

    def merge_schema(self, input_schema: pa.Schema, *, type_widening: bool = False, explicit_cast: bool = False
                     ) -> TableSchema | None:
        """Evolve the table so rows of ``input_schema`` (an Arrow schema, e.g. ``batch.schema``) can be written, as
        Paimon's ``write.merge-schema``: new columns are added (nullable, at the end, in input order), new struct
        fields too, and with ``type_widening`` existing types are widened. Publishes one schema (None when nothing
        changes: the current schema already takes the input). Call it before ``new_write()``: a writer keeps the
        schema it was created with, and needs every column (``engine.merge_schema.with_missing_columns`` adds
        nulls for the nullable ones the input lacks). Raises SchemaMismatch (narrowing, incompatible type),
        UnsupportedFeature (a lossy change Paimon would make), InvalidSchema (a key column's type). See
        engine.merge_schema."""
        from engine.merge_schema import merge_input_schema
        return merge_input_schema(self, input_schema, type_widening=type_widening, explicit_cast=explicit_cast)

    def alter_table(self, changes) -> TableSchema:
        """Apply a list of ``engine.schema_change.SchemaChange`` and publish the next schema; returns it."""
        from engine.schema_change import alter_table
        return alter_table(self, changes)

    def schemas(self) -> list[TableSchema]:
        """Every schema of the table, oldest first."""
        return [self.schema_manager.schema(i) for i in self.schema_manager.ids()]


    # --- reliability (issue 7) ---
    def check(self, *, verify_data: bool = True, find_orphans: bool = True):
        """Check every snapshot's files against their metadata and return a ``engine.check.CheckReport``
        (typed problems, warnings, unreferenced files). Read-only; never raises for a damaged table."""
        from engine.check import check_table
        return check_table(self, verify_data=verify_data, find_orphans=find_orphans)


    # --- overwrite (issue 6) ------------------------------------------------------------------------
    def commit_overwrite(self, messages: Sequence[CommitMessage], partitions=None, *, commit_user: str | None = None,
                         commit_identifier: int | None = None, properties: dict | None = None,
                         strict_after: int | None = None, base_snapshot_id: int | None = None) -> int | None:
        """Publish an OVERWRITE snapshot: the live files of ``partitions`` are replaced by the messages' files.

        ``partitions``: None replaces the whole table; ``"dynamic"`` replaces the partitions the messages write
        (Paimon's dynamic partition overwrite); or an iterable of partition-value tuples, when every message must
        write one of them (else InvalidInput, the messages' files are deleted and the table is unchanged). Same
        atomicity, exactly-once, cleanup and snapshot-expiration behaviour as ``commit``; returns the snapshot id.
        A dynamic-bucket table's messages must come from ``new_write(overwrite=True)`` (else InvalidInput, files
        deleted): the written partitions' HASH index then holds only the keys written. ``strict_after``: a snapshot
        id; CommitConflict if a later snapshot changed real-bucket files of an overwritten partition.
        ``base_snapshot_id``: for an overwrite without messages, the snapshot its job started from; only later
        snapshots can hold it already (default: with a stream's identifier any snapshot of ``commit_user`` counts;
        with none, the batch identifier, it is a new commit every time, as Paimon's BatchTableCommit).
        """
        from engine.dynamic_bucket.write import DynamicBucketCommitMessage
        from engine.meta import binary_row
        messages = list(messages)
        stale = next((m for m in messages if isinstance(m, DynamicBucketCommitMessage) and not m.index_fresh), None)
        if stale is not None:  # Paimon's overwrite writer starts the index fresh (SimpleHashBucketAssigner)
            self._delete_uncommitted(messages)
            raise InvalidInput(f"dynamic-bucket table: the messages for partition {tuple(stale.partition_values)} "
                               "come from a writer that kept the partition's old key index (its HASH index would "
                               "still hold the replaced keys); write the overwrite with new_write(overwrite=True)",
                               table=self.name)
        if partitions == "dynamic":
            parts = {m.partition for m in messages}
        elif partitions is None:
            parts = None
        else:
            partitions = [tuple(v) for v in partitions]
            types = self.schema.types_of(self.partition_keys)
            parts = {binary_row.serialize_row(list(v), types) for v in partitions}
            stray = next((m for m in messages if m.new_files and m.partition not in parts), None)
            if stray is not None:  # Paimon: "... does not belong to this partition"
                self._delete_uncommitted(messages)
                raise InvalidInput(f"overwriting partition(s) {partitions}, but the data holds rows of partition "
                                   f"{tuple(stray.partition_values)}, which does not belong to them", table=self.name)
        try:
            sid = Committer(self).overwrite(messages, parts, commit_user=commit_user,
                                            commit_identifier=commit_identifier, properties=properties,
                                            strict_after=strict_after, base_snapshot_id=base_snapshot_id)
        except (CommitConflict, CommitRetriesExhausted):
            self._delete_uncommitted(messages)
            raise
        self._compact_overwritten(messages)
        self._expire_after_commit(messages, commit_identifier)
        return sid

    def _compact_overwritten(self, messages: Sequence[CommitMessage]) -> None:
        """After an overwrite of a deletion-vector table (not write-only): compact the partitions it wrote and
        commit a COMPACT snapshot, as Paimon commits the overwrite writer's compaction after the OVERWRITE. A
        deletion-vector read skips level-0 files, and the overwrite publishes the new files at level 0 (the
        writer's compaction of the replaced files is dropped), so without it the partitions read empty until the
        next compaction. Like Paimon's (FileStoreCommitImpl.overwritePartition), the compaction of files the
        overwrite wrote into real buckets commits no changelog: a lookup producer would report every overwritten
        row as inserted (after a rescale, rows already in the table). A failure here (a conflict, an unreadable
        file) is logged, never raised: the overwrite has landed, and its files stay at level 0 until a later
        compaction."""
        import logging

        from engine.errors import LakemergeError
        from engine.options import WRITE_ONLY
        log = logging.getLogger(__name__)
        opts = self.schema.table_options
        if not opts.deletion_vectors or opts.get(WRITE_ONLY) or not any(m.new_files for m in messages):
            return
        parts = None
        if self.partition_keys:
            parts = [dict(zip(self.partition_keys, v))
                     for v in dict.fromkeys(tuple(m.partition_values) for m in messages if m.new_files)]
        try:
            if self.schema.is_append_only or any(m.bucket == -2 for m in messages if m.new_files):
                self.compact(partitions=parts)  # postponed files move into real buckets: their changelog is due
            else:  # as Paimon's overwrite commits its compaction: without the changelog it produced
                from engine.compact.manager import compact_table, without_changelog
                messages = without_changelog(self, compact_table(self, partitions=parts))
                if messages:
                    Committer(self).commit(messages)
                    self._expire_after_commit(messages)
        except LakemergeError as e:
            log.warning("table %s: compaction after the overwrite failed (%s); its files stay at level 0, which "
                        "deletion-vector reads skip, until the next compaction", self.name, e)

    # --- changelog and streaming reads (issue 5) ------------------------------------------------------
    def read_changes(self, start_snapshot: int | None = None, end_snapshot: int | None = None,
                     columns: Sequence[str] | None = None, *, normalize: bool = False) -> pa.Table:
        """The changes of snapshots in (``start_snapshot``, ``end_snapshot``] (defaults: from the first snapshot to
        the latest) as a pa.Table of ``columns`` + ``_row_kind`` ('+I', '-U', '+U', '-D'), snapshot by snapshot.

        With changelog-producer input/lookup/full-compaction these are the changelog files; with ``none`` the new
        level-0 files of APPEND snapshots as stored, or with ``normalize=True`` a full changelog built by looking
        up each touched key before and after (ChangelogNormalize). Raises SnapshotNotFound, InvalidInput,
        UnsupportedFeature (``normalize=True`` over postponed records of a ``bucket = -2`` table)."""
        from engine.changelog.reading import read_changes
        return read_changes(self, start_snapshot, end_snapshot, columns, normalize=normalize)

    def stream(self, mode: str | None = "default", *, snapshot_id=None, timestamp_millis: int | None = None,
               start=None, end=None, consumer_id: str | None = None, columns: Sequence[str] | None = None,
               poll_interval: float = 1.0, idle_timeout: float | None = None, normalize: bool = False, filter=None):
        """Streaming read: a generator of pa.RecordBatch (``columns`` + ``_row_kind``), one per snapshot with
        changes, blocking for new snapshots every ``poll_interval`` seconds (``idle_timeout``: stop when idle that
        long). ``mode``: latest-full, latest, from-snapshot, from-snapshot-full (``snapshot_id``), from-timestamp
        (``timestamp_millis``), compacted-full, incremental (``start``/``end`` snapshot ids or tag names; two tags:
        the difference of the tagged states); ``default`` follows the start arguments given (``timestamp_millis``:
        from-timestamp, ``snapshot_id``: from-snapshot, ``start``/``end``: incremental, none: latest-full).
        ``consumer_id`` saves progress in consumer/consumer-<id> so a restarted stream resumes where it stopped.
        OVERWRITE snapshots are skipped unless ``streaming-read-overwrite`` / ``streaming-read-append-overwrite``
        (engine.changelog.overwrite). ``filter`` (``read``'s forms) keeps the rows satisfying it, each change row
        judged on its own, and prunes what is read. See engine.changelog.streaming."""
        from engine.changelog.streaming import stream
        return stream(self, mode, snapshot_id=snapshot_id, timestamp_millis=timestamp_millis, start=start, end=end,
                      consumer_id=consumer_id, columns=columns, poll_interval=poll_interval,
                      idle_timeout=idle_timeout, normalize=normalize, filter=filter)

    def consumers(self) -> dict[str, int]:
        """Consumer id -> next snapshot it will read."""
        from engine.changelog.consumers import ConsumerManager
        return ConsumerManager(self).all()

    def reset_consumer(self, consumer_id: str, next_snapshot: int | None = None) -> None:
        """Set a consumer's next snapshot, or delete the consumer when ``next_snapshot`` is None."""
        from engine.changelog.consumers import ConsumerManager
        cm = ConsumerManager(self)
        if next_snapshot is None:
            cm.delete(consumer_id)
        else:
            cm.record(consumer_id, next_snapshot)
