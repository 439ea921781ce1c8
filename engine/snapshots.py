"""Finding and reading a table's snapshots and schemas.

The LATEST / EARLIEST hint files are only hints (format spec §3): the latest id is the hint if the next snapshot
file does not exist, otherwise the directory listing decides. Correctness never depends on a hint.
"""
from __future__ import annotations

import re

from engine.errors import CorruptFile, SnapshotNotFound
from engine.io.file_io import FileIO
from engine.meta.snapshot import Snapshot
from engine.paths import TablePaths
from engine.schema import TableSchema

_SNAPSHOT = re.compile(r"^snapshot-(\d+)$")
_SCHEMA = re.compile(r"^schema-(\d+)$")


class SnapshotManager:
    """Reads a table's ``snapshot/`` directory: snapshot ids, snapshots (cached, they are immutable) and the
    LATEST/EARLIEST hints. Only reads, except the hint writers and ``forget``."""
    def __init__(self, io: FileIO, paths: TablePaths, table_name: str):
        self.io = io
        self.paths = paths
        self.table_name = table_name
        self._cache: dict[int, Snapshot] = {}  # snapshots are immutable once published

    # --- ids ----------------------------------------------------------------------------------------
    def _listed_ids(self) -> list[int]:
        ids = []
        for name in self.io.list_names(self.paths.snapshot_dir):
            m = _SNAPSHOT.match(name)
            if m:
                ids.append(int(m.group(1)))
        return sorted(ids)

    def _hint(self, name: str) -> int | None:
        try:
            return int(self.io.read_bytes(f"{self.paths.snapshot_dir}/{name}").decode().strip())
        except (FileNotFoundError, ValueError):
            return None

    def latest_id(self) -> int | None:
        """The newest snapshot id (the LATEST hint when it is still the newest, else the directory listing), or None
        for a table without snapshots."""
        hint = self._hint("LATEST")
        if hint is not None and self.io.exists(self.paths.snapshot(hint)) \
                and not self.io.exists(self.paths.snapshot(hint + 1)):
            return hint
        ids = self._listed_ids()
        return ids[-1] if ids else None

    def earliest_id(self) -> int | None:
        """The oldest existing snapshot id (the EARLIEST hint when valid, else the listing), or None for a table
        without snapshots."""
        hint = self._hint("EARLIEST")
        if hint is not None and self.io.exists(self.paths.snapshot(hint)) \
                and not self.io.exists(self.paths.snapshot(hint - 1)):
            return hint
        ids = self._listed_ids()
        return ids[0] if ids else None

    def ids(self) -> list[int]:
        """Every existing snapshot id, ascending (from the directory listing; hints are ignored)."""
        return self._listed_ids()

    def exists(self, snapshot_id: int) -> bool:
        """Whether ``snapshot-<id>`` exists now (not from the cache: expiration may have removed it)."""
        return self.io.exists(self.paths.snapshot(snapshot_id))

    # --- snapshots ----------------------------------------------------------------------------------
    def snapshot(self, snapshot_id: int) -> Snapshot:
        """Raises SnapshotNotFound if there is no such snapshot, CorruptFile if it cannot be parsed."""
        cached = self._cache.get(snapshot_id)
        if cached is not None:
            return cached
        path = self.paths.snapshot(snapshot_id)
        try:
            data = self.io.read_bytes(path)
        except FileNotFoundError:
            raise SnapshotNotFound(self.table_name, snapshot_id) from None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise CorruptFile(path, f"snapshot is not UTF-8 JSON: {e}") from None
        snap = Snapshot.from_json(text, path)
        if snap.id != snapshot_id:
            raise CorruptFile(path, f"file holds snapshot id {snap.id}")
        self._cache[snapshot_id] = snap
        return snap

    def latest(self) -> Snapshot | None:
        """The newest snapshot, or None for a table without snapshots. Raises CorruptFile if it cannot be parsed.

        A concurrent commit and expiration can remove the snapshot found newest before it is read (expiration never
        removes the newest one, so a newer one exists then): it is looked up again."""
        while True:
            sid = self.latest_id()
            if sid is None:
                return None
            try:
                return self.snapshot(sid)
            except SnapshotNotFound:
                if self.latest_id() == sid:  # still named newest but unreadable as missing: not a race
                    raise

    def all(self) -> list[Snapshot]:
        """Every existing snapshot, oldest first. Raises CorruptFile if one cannot be parsed."""
        return [self.snapshot(i) for i in self._listed_ids()]

    def reload(self, snapshot_id: int) -> Snapshot | None:
        """Snapshot ``snapshot_id`` read afresh from its file (replacing the cached copy: a rollback may have
        deleted the file and a later commit written another under the same id), or None when the file does not
        exist. Raises CorruptFile if it cannot be parsed."""
        self.forget(snapshot_id)
        try:
            return self.snapshot(snapshot_id)
        except SnapshotNotFound:
            return None

    def forget(self, snapshot_id: int) -> None:
        """Drop a cached snapshot (after expiration or rollback deleted its file)."""
        self._cache.pop(snapshot_id, None)

    def write_latest_hint(self, snapshot_id: int) -> None:
        """Overwrite the LATEST hint file (a hint only: readers verify it)."""
        self.io.overwrite(f"{self.paths.snapshot_dir}/LATEST", str(snapshot_id).encode())

    def write_earliest_hint(self, snapshot_id: int) -> None:
        """Overwrite the EARLIEST hint file (a hint only: readers verify it)."""
        self.io.overwrite(f"{self.paths.snapshot_dir}/EARLIEST", str(snapshot_id).encode())


class SchemaManager:
    """Reads and publishes a table's ``schema/schema-N`` files; parsed schemas are cached (immutable once
    published)."""
    def __init__(self, io: FileIO, paths: TablePaths, table_name: str):
        self.io = io
        self.paths = paths
        self.table_name = table_name
        self._cache: dict[int, TableSchema] = {}

    def ids(self) -> list[int]:
        """Every schema id, ascending (empty when the table does not exist)."""
        out = []
        for name in self.io.list_names(self.paths.schema_dir):
            m = _SCHEMA.match(name)
            if m:
                out.append(int(m.group(1)))
        return sorted(out)

    def schema(self, schema_id: int) -> TableSchema:
        """Schema ``schema_id``. Raises CorruptFile if the file is missing or not a valid Paimon schema."""
        cached = self._cache.get(schema_id)
        if cached is not None:
            return cached
        path = self.paths.schema(schema_id)
        try:
            data = self.io.read_bytes(path)
        except FileNotFoundError:
            raise CorruptFile(path, "schema file is missing") from None
        schema = TableSchema.from_json(data, path)
        self._cache[schema_id] = schema
        return schema

    def latest(self) -> TableSchema | None:
        """The newest schema, or None when the table has none (does not exist). Raises CorruptFile."""
        ids = self.ids()
        return self.schema(ids[-1]) if ids else None

    def commit(self, schema: TableSchema) -> bool:
        """Publish schema-N if absent; False if another writer created it first."""
        self.io.mkdirs(self.paths.schema_dir)
        return self.io.write_if_absent(self.paths.schema(schema.id), schema.to_json().encode())
