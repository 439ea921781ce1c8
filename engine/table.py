"""Table: the public face of one primary-key table (write, delete, commit, read, lookup, snapshots)."""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

import pyarrow as pa

from engine.commit.committer import Committer
from engine.errors import CommitConflict, CommitRetriesExhausted, InvalidInput, TableNotFound
from engine.io.file_io import FileIO
from engine.meta.snapshot import Snapshot
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

    def __init__(self, name: str, root: str, file_io: FileIO):
        self.name = name
        self.root = root
        self.file_io = file_io
        self.paths = TablePaths(root)
        self.snapshot_manager = SnapshotManager(file_io, self.paths, name)
        self.schema_manager = SchemaManager(file_io, self.paths, name)
        self.manifests = ManifestCache(file_io, self.paths)
        schema = self.schema_manager.latest()
        if schema is None:
            raise TableNotFound(name)
        self.schema: TableSchema = schema
        self.schema.validate(name)

    def __repr__(self) -> str:
        return f"Table({self.name!r}, {self.root!r})"

    # --- metadata -----------------------------------------------------------------------------------
    @property
    def arrow_schema(self) -> pa.Schema:
        return self.schema.arrow_schema

    @property
    def primary_keys(self) -> tuple[str, ...]:
        return self.schema.primary_keys

    @property
    def partition_keys(self) -> tuple[str, ...]:
        return self.schema.partition_keys

    @property
    def options(self) -> dict:
        return dict(self.schema.options)

    def snapshots(self) -> list[Snapshot]:
        return self.snapshot_manager.all()

    def latest_snapshot_id(self) -> int | None:
        return self.snapshot_manager.latest_id()

    def snapshot(self, snapshot_id: int | None = None) -> Snapshot | None:
        """The given snapshot, or the latest (None for a table without commits). Raises SnapshotNotFound."""
        if snapshot_id is None:
            return self.snapshot_manager.latest()
        return self.snapshot_manager.snapshot(int(snapshot_id))

    def scan(self) -> TableScan:
        return TableScan(self.paths, self.schema, self.manifests, self.name, self.schema_manager.schema)

    def bucket_dir(self, partition_values: tuple, bucket: int) -> str:
        return self.scan().bucket_dir(partition_values, bucket)

    def max_sequence_numbers(self, snapshot: Snapshot | None) -> dict[tuple[bytes, int], int]:
        """Largest _SEQUENCE_NUMBER per (partition, bucket) among the live files of ``snapshot``."""
        out: dict[tuple[bytes, int], int] = {}
        if snapshot is None:
            return out
        for e in self.manifests.live_entries(snapshot):
            key = (e.partition, e.bucket)
            out[key] = max(out.get(key, -1), e.file.max_sequence_number)
        return out

    # --- writing ------------------------------------------------------------------------------------
    def new_write(self, *, commit_user: str | None = None, commit_identifier: int | None = None) -> TableWrite:
        """A writer for many batches committed together (use as a context manager)."""
        return TableWrite(self, commit_user=commit_user, commit_identifier=commit_identifier)

    def commit(self, messages: Sequence[CommitMessage], *, properties: dict | None = None) -> int | None:
        """Publish messages from ``prepare_commit`` as one snapshot; returns its id.

        Committing the same messages again returns the same id without applying them twice. If the commit cannot
        land (conflict, lost races) its data files are deleted and the error is raised; the table is unchanged.
        """
        messages = list(messages)
        try:
            return Committer(self).commit(messages, properties=properties)
        except (CommitConflict, CommitRetriesExhausted):
            for m in messages:
                for f in m.new_files:
                    self.file_io.delete(os.path.join(self.bucket_dir(m.partition_values, m.bucket), f.file_name))
            raise

    def write(self, data, row_kinds=None) -> int | None:
        """Upsert ``data`` (pa.Table, RecordBatch or pandas DataFrame) in one commit; returns the snapshot id."""
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

    # --- reading ------------------------------------------------------------------------------------
    def plan(self, snapshot_id: int | None = None, filter=None) -> list[Split]:
        snap = self.snapshot(snapshot_id)
        dnf = pred.normalize(filter, self.arrow_schema, self.name)
        return self.scan().plan(snap, dnf)

    def read(self, snapshot_id: int | None = None, columns: Sequence[str] | None = None, filter=None) -> pa.Table:
        """The merged table at ``snapshot_id`` (default: latest), optionally projected and filtered.

        Raises SnapshotNotFound for an unknown snapshot, InvalidInput for unknown columns or bad filters,
        CorruptFile if a referenced file is missing or damaged.
        """
        out_cols = list(columns) if columns is not None else list(self.schema.field_names)
        unknown = [c for c in out_cols if c not in self.schema.field_names]
        if unknown:
            raise InvalidInput(f"unknown column(s) {unknown}", table=self.name, column=unknown[0])
        dnf = pred.normalize(filter, self.arrow_schema, self.name)
        snap = self.snapshot(snapshot_id)
        splits = self.scan().plan(snap, dnf)
        read_cols = list(dict.fromkeys(out_cols + sorted(pred.columns_of(dnf))))
        reader = SplitReader(self.file_io, self.schema)
        parts = self._map(lambda sp: reader.read(sp, read_cols), splits)
        target = pa.schema([self.arrow_schema.field(c) for c in read_cols])
        result = pa.concat_tables([p.cast(target) for p in parts]) if parts else target.empty_table()
        if dnf:
            result = result.filter(pred.to_expression(dnf))
        return result.select(out_cols)

    def to_arrow(self, snapshot_id: int | None = None) -> pa.Table:
        return self.read(snapshot_id)

    def to_pandas(self, snapshot_id: int | None = None):
        return self.read(snapshot_id).to_pandas()

    def lookup(self, keys, snapshot_id: int | None = None, columns: Sequence[str] | None = None) -> pa.Table:
        """Rows for the given primary keys at a snapshot; keys that do not exist are absent from the result."""
        from engine.read.lookup import lookup_rows
        return lookup_rows(self, keys, self.snapshot(snapshot_id), columns)

    @staticmethod
    def _map(fn, items: list) -> list:
        if len(items) <= 1:
            return [fn(i) for i in items]
        with ThreadPoolExecutor(max_workers=min(len(items), os.cpu_count() or 2)) as pool:
            return list(pool.map(fn, items))


    # --- overwrite (issue 6) ------------------------------------------------------------------------
    def commit_overwrite(self, messages: Sequence[CommitMessage], partitions=None, *, commit_user: str | None = None,
                         commit_identifier: int | None = None, properties: dict | None = None) -> int | None:
        """Publish an OVERWRITE snapshot: the live files of ``partitions`` are replaced by the messages' files.

        ``partitions``: None replaces the whole table; ``"dynamic"`` replaces the partitions the messages write
        (Paimon's dynamic partition overwrite); or an iterable of partition-value tuples. Same atomicity,
        exactly-once and cleanup guarantees as ``commit``; returns the snapshot id.
        """
        from engine.meta import binary_row
        messages = list(messages)
        if partitions == "dynamic":
            parts = {m.partition for m in messages}
        elif partitions is None:
            parts = None
        else:
            types = self.schema.types_of(self.partition_keys)
            parts = {binary_row.serialize_row(list(v), types) for v in partitions}
        try:
            return Committer(self).overwrite(messages, parts, commit_user=commit_user,
                                             commit_identifier=commit_identifier, properties=properties)
        except (CommitConflict, CommitRetriesExhausted):
            for m in messages:
                for f in m.new_files:
                    self.file_io.delete(os.path.join(self.bucket_dir(m.partition_values, m.bucket), f.file_name))
            raise
