"""Scan planning: snapshot -> manifests -> live files -> splits, one per (partition, bucket).

Pruning never drops a file that may hold a matching row: partitions by their values, buckets by the bucket
function when the filter pins every bucket-key column, files by key statistics (every version of a key has the
same key). Value statistics prune whole buckets only: a single file cannot be skipped by its values, since a newer
version of a row may lie in another file (skipping that file would resurrect the older version), but when no file
of a bucket can match, no merged row of it can.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa

from engine.deletion_vectors.index_file import DeletionFile
from engine.deletion_vectors.maintainer import BucketVectors, vectors_by_bucket
from engine.dynamic_bucket.index_files import index_dir, index_path
from engine.errors import CorruptFile, UnsupportedFeature
from engine.io.file_io import FileIO
from engine.meta import binary_row
from engine.meta.data_file import DataFileMeta
from engine.meta.manifest import (ADD, ManifestEntry, ManifestFileMeta, decode_manifest, decode_manifest_list,
                                  fold_entries)
from engine.meta.snapshot import Snapshot
from engine.options import (DATA_FILE_PATH_DIRECTORY, PARTITION_DEFAULT_NAME, PARTITION_LEGACY_NAME, SCAN_BUCKET,
                            SCAN_FILE_CREATION_TIME_MILLIS)
from engine.paths import TablePaths
from engine.postpone.merge_on_read import merges_on_read
from engine.read import predicate as pred
from engine.schema import TableSchema

INDEX_IN_DATA_FILE_DIR = "index-file-in-data-file-dir"


@dataclass(frozen=True)
class Split:
    """All live files of one bucket of one partition, with the bucket's deletion vectors (``vectors``: its DV
    index files and where each data file's vector is; empty without deletion vectors)."""
    partition: bytes
    partition_values: tuple
    bucket: int
    total_buckets: int
    bucket_dir: str
    files: tuple[DataFileMeta, ...]
    vectors: BucketVectors = BucketVectors()
    branch: str | None = None  # a fallback read's split of another branch (engine.read.fallback_branch)
    # postpone.merge-on-read: the partition's postpone-bucket split, whose records of this bucket are merged in as
    # the newest run (engine.postpone.merge_on_read); None otherwise
    postponed: Split | None = None

    def deletion_file(self, file_name: str) -> DeletionFile | None:
        """Where the deletion vector of data file ``file_name`` is, or None when it has none."""
        for name, where in self.vectors.files:
            if name == file_name:
                return where
        return None

    @property
    def row_count(self) -> int:
        """Rows in the split's files before merging (an upper bound of the merged rows)."""
        return sum(f.row_count for f in self.files)


class ManifestCache:
    """Decoded manifests and manifest lists by file name (they are immutable once written)."""

    def __init__(self, io: FileIO, paths: TablePaths, max_entries: int = 4096):
        self.io = io
        self.paths = paths
        self._lists: dict[str, list[ManifestFileMeta]] = {}
        self._manifests: dict[str, list[ManifestEntry]] = {}
        self._indexes: dict[str, list[dict]] = {}
        self.max_entries = max_entries

    def _read(self, name: str) -> bytes:
        path = self.paths.manifest(name)
        try:
            return self.io.read_bytes(path)
        except FileNotFoundError:
            raise CorruptFile(path, "manifest file referenced by a snapshot is missing") from None

    def manifest_list(self, name: str) -> list[ManifestFileMeta]:
        """The entries of manifest list ``name`` (cached). Raises CorruptFile if it is missing or cannot be decoded."""
        if name not in self._lists:
            if len(self._lists) > self.max_entries:
                self._lists.clear()
            self._lists[name] = decode_manifest_list(self._read(name), self.paths.manifest(name))
        return self._lists[name]

    def manifest(self, name: str) -> list[ManifestEntry]:
        """The entries of manifest ``name`` (cached). Raises CorruptFile if it is missing or cannot be decoded."""
        if name not in self._manifests:
            if len(self._manifests) > self.max_entries:
                self._manifests.clear()
            self._manifests[name] = decode_manifest(self._read(name), self.paths.manifest(name))
        return self._manifests[name]

    def index_records(self, name: str | None) -> list[dict]:
        """The records of index manifest ``name`` ([] for None; cached). Raises CorruptFile if it is missing or
        cannot be decoded."""
        if not name:
            return []
        if name not in self._indexes:
            if len(self._indexes) > self.max_entries:
                self._indexes.clear()
            from engine.dynamic_bucket.index_files import decode_index_manifest
            self._indexes[name] = decode_index_manifest(self._read(name), self.paths.manifest(name))
        return self._indexes[name]

    def data_manifests(self, snapshot: Snapshot) -> list[ManifestFileMeta]:
        """The data manifests of ``snapshot``: its base list then its delta list. Raises CorruptFile."""
        return self.manifest_list(snapshot.base_manifest_list) + self.manifest_list(snapshot.delta_manifest_list)

    def live_entries(self, snapshot: Snapshot, manifest_filter=None) -> list[ManifestEntry]:
        """Folded ADD entries of a snapshot (format spec §6.4). Raises CorruptFile on inconsistent manifests."""
        return self._fold(self.data_manifests(snapshot), snapshot.delta_manifest_list, manifest_filter)

    def base_entries(self, snapshot: Snapshot) -> list[ManifestEntry]:
        """Folded ADD entries of a snapshot's base manifest list only: the live files of the snapshot it was
        committed on. Raises CorruptFile."""
        return self._fold(self.manifest_list(snapshot.base_manifest_list), snapshot.base_manifest_list)

    def _fold(self, metas: list[ManifestFileMeta], list_name: str, manifest_filter=None) -> list[ManifestEntry]:
        entries: list[ManifestEntry] = []
        for meta in metas:
            if manifest_filter is not None and not manifest_filter(meta):
                continue
            entries.extend(self.manifest(meta.file_name))
        try:
            live, _pending = fold_entries(entries)
        except ValueError as e:
            raise CorruptFile(self.paths.manifest(list_name), str(e)) from None
        return [e for e in live.values() if e.kind == ADD]


class TableScan:
    """Plans reads: the live data files of a snapshot grouped into one Split per (partition, bucket), pruned by a
    filter using partition values, bucket hashing and file statistics. Only reads metadata. ``skip_partitions``:
    serialized partitions whose files ``plan`` leaves out (the partitions another branch supplies in a fallback
    read, engine.read.fallback_branch)."""
    def __init__(self, paths: TablePaths, schema: TableSchema, manifests: ManifestCache, table_name: str,
                 schema_of=None, skip_partitions: frozenset[bytes] = frozenset()):
        self.skip_partitions = skip_partitions
        self.manifests_schema = schema_of or (lambda schema_id: schema)
        self.paths = paths
        self.schema = schema
        self.manifests = manifests
        self.table_name = table_name
        self._partition_cache: dict[bytes, tuple] = {}

    def partition_values(self, partition: bytes) -> tuple:
        """The partition values (Python objects, in partition-key order) of a serialized partition BinaryRow; () for
        an unpartitioned table. Raises InvalidInput when the row's arity does not match the partition keys."""
        values = self._partition_cache.get(partition)
        if values is None:
            types = self.schema.types_of(self.schema.partition_keys)
            values = tuple(binary_row.deserialize_row(partition, types)) if types else ()
            self._partition_cache[partition] = values
        return values

    def bucket_dir(self, partition_values: tuple, bucket: int) -> str:
        """The directory of ``bucket`` in the partition with ``partition_values`` (Paimon's path rules and the
        table's partition options), under ``data-file.path-directory`` when the table sets it (Paimon's
        FileStorePathFactory.relativeBucketPath)."""
        s = self.schema
        opts = s.table_options
        pdir = TablePaths.partition_dir(s.partition_keys, partition_values, s.types_of(s.partition_keys),
                                        opts.get(PARTITION_DEFAULT_NAME), opts.get(PARTITION_LEGACY_NAME))
        directory = opts.get(DATA_FILE_PATH_DIRECTORY)
        if directory:
            pdir = f"{directory.strip('/')}/{pdir}" if pdir else directory.strip("/")
        return self.paths.bucket_dir(pdir, bucket)

    def index_file_dir(self, partition: bytes, bucket: int) -> str:
        """Where new index files of a bucket go: ``<table>/index``, or the bucket's directory when the table has
        ``index-file-in-data-file-dir`` (Paimon's IndexInDataFileDirPathFactory)."""
        if self._index_in_bucket_dirs():
            return self.bucket_dir(self.partition_values(partition), bucket)
        return index_dir(self.paths.root)

    def index_file_path(self, record: dict) -> str:
        """The path of the index file an index-manifest record names."""
        bucket_dir = None
        if self._index_in_bucket_dirs() and not record.get("_EXTERNAL_PATH"):
            bucket_dir = self.bucket_dir(self.partition_values(record["_PARTITION"]), record["_BUCKET"])
        return index_path(self.paths.root, record, bucket_dir)

    def _index_in_bucket_dirs(self) -> bool:
        return self.schema.options.get(INDEX_IN_DATA_FILE_DIR, "").strip().lower() == "true"

    def vectors(self, snapshot: Snapshot | None) -> dict[tuple[bytes, int], BucketVectors]:
        """Deletion vectors of ``snapshot`` by (partition, bucket). Raises CorruptFile."""
        if snapshot is None or not snapshot.index_manifest:
            return {}
        return vectors_by_bucket(self.manifests.index_records(snapshot.index_manifest), self.index_file_path)

    def plan(self, snapshot: Snapshot | None, dnf=None, *, exclude: frozenset[str] = frozenset(),
             batch_read: bool = False) -> list[Split]:
        """The Splits of ``snapshot`` (none for None) that may hold rows matching the normalized filter ``dnf``,
        sorted by (partition, bucket). Never drops a split that holds a matching row. ``exclude``: data file names
        left out (the files an APPEND snapshot added: the state it was committed on). ``batch_read``: the plan of
        a user's read, which the table's read options narrow as in Paimon's table scans: ``scan.bucket`` keeps one
        bucket, ``scan.file-creation-time-millis`` only files created at or after that time (Paimon's
        FileCreationTimeStartingScanner: imprecise, a compaction gives old rows new files); a postpone table read
        with ``postpone.merge-on-read`` reads every bucket whatever ``scan.bucket`` says and refuses
        ``scan.file-creation-time-millis`` (UnsupportedFeature), as Paimon's PostponeMergeReadBuilder. Raises
        CorruptFile for missing or inconsistent manifests."""
        if snapshot is None:
            return []
        s = self.schema
        parts = s.partition_keys
        only_bucket = s.table_options.get(SCAN_BUCKET) if batch_read else None
        created_after = s.table_options.get(SCAN_FILE_CREATION_TIME_MILLIS) if batch_read else None
        if merges_on_read(s) and batch_read:  # the postponed records of a bucket sit in no bucket of their own
            only_bucket = None
            if created_after is not None:
                raise UnsupportedFeature(f"table {self.table_name!r}: option {SCAN_FILE_CREATION_TIME_MILLIS}="
                                         f"{created_after} cannot narrow a postpone.merge-on-read read, which "
                                         "needs a full snapshot scan (as Paimon's PostponeMergeReadBuilder)")
        key_names = s.trimmed_primary_keys
        may_hold = self.entry_filter(dnf)
        groups: dict[tuple[bytes, int], list[ManifestEntry]] = {}
        for entry in self.manifests.live_entries(snapshot):
            if entry.file.file_name in exclude or entry.partition in self.skip_partitions:
                continue
            if only_bucket is not None and entry.bucket != only_bucket:
                continue
            if created_after is not None and _creation_epoch_millis(entry.file) < created_after:
                continue
            if may_hold is not None and not may_hold(entry):
                continue
            groups.setdefault((entry.partition, entry.bucket), []).append(entry)
        splits = []
        value_cols = pred.columns_of(dnf) - set(key_names) - set(parts)
        if s.table_options.merge_engine in ("partial-update", "aggregation"):
            value_cols = set()  # issue 3: a merged row can match a value filter that no single record matches
        if merges_on_read(s):  # a postponed record may replace a matching one (or, first-row, lose to one)
            value_cols = set()
        vectors = self.vectors(snapshot) if groups else {}
        for (partition, bucket), entries in groups.items():
            if value_cols and not any(self._values_may_match(e.file, dnf) for e in entries):
                continue
            values = self.partition_values(partition)
            splits.append(Split(partition, values, bucket, entries[0].total_buckets,
                                self.bucket_dir(values, bucket), tuple(e.file for e in entries),
                                vectors.get((partition, bucket), BucketVectors())))
        splits.sort(key=lambda sp: (sp.partition, sp.bucket))
        return splits

    def entry_filter(self, dnf, *, by_values: bool = False) -> Callable[[ManifestEntry], bool] | None:
        """A test of manifest entries that is False only for a file holding no record that matches ``dnf`` (None
        without a filter): by its partition values, its bucket (when ``dnf`` pins the bucket key) and its key
        statistics -- every version of a key has the same key, so merging never needs a file this drops -- and,
        with ``by_values``, its value statistics (only for files whose rows are read one by one, not merged: a
        merged row may take a value no single file's range holds)."""
        if not dnf:
            return None
        s = self.schema
        parts = s.partition_keys
        buckets_allowed = self._bucket_filter(dnf)
        key_names = s.trimmed_primary_keys
        key_types = s.types_of(key_names)

        def partition_ok(values: tuple) -> bool:
            if not parts:
                return True
            by_col = dict(zip(parts, values))
            return pred.may_match(dnf, lambda c: (by_col[c], by_col[c], 0 if by_col[c] is not None else 1)
                                  if c in by_col else None, row_count=1)

        def may_hold(entry: ManifestEntry) -> bool:
            if not partition_ok(self.partition_values(entry.partition)):
                return False
            if buckets_allowed is not None and entry.total_buckets > 0 \
                    and entry.bucket not in buckets_allowed.get(entry.total_buckets, set()):
                return False
            if not self._file_may_match(entry.file, dnf, key_names, key_types):
                return False
            return not by_values or self._values_may_match(entry.file, dnf)
        return may_hold

    def _bucket_filter(self, dnf) -> "_LazyBuckets | None":
        """Per total-bucket count, the buckets a filter can touch; None if it cannot be narrowed."""
        combos = pred.equality_values(dnf, self.schema.bucket_keys)
        if combos is None:
            return None
        arrow = self.schema.arrow_schema
        columns = [pa.array([c[i] for c in combos], arrow.field(k).type)
                   for i, k in enumerate(self.schema.bucket_keys)]
        return _LazyBuckets(columns)

    def _values_may_match(self, f: DataFileMeta, dnf) -> bool:
        stats = f.value_stats
        if stats.null_counts is None:
            return True
        try:
            file_schema = self.schema if f.schema_id == self.schema.id else self.manifests_schema(f.schema_id)
        except Exception:
            return True
        names = f.value_stats_cols
        if names is None:
            names = file_schema.field_names
        if not names or len(stats.null_counts) != len(names) or any(n not in file_schema.field_names for n in names):
            return True
        # Stats are stored under the file's schema: decode with its types, then name them as the table does now
        # (by field id; columns dropped since are ignored).
        types = [t.with_nullable(True) for t in file_schema.types_of(names)]
        now = {fl.id: fl.name for fl in self.schema.fields}
        try:
            mins = binary_row.deserialize_row(stats.min_values, _stat_types(types))
            maxs = binary_row.upper_bound_of_floored(
                binary_row.deserialize_row(stats.max_values, _stat_types(types)), types)
        except Exception:
            return True
        # a column with ``fields.<f>.default-value`` reads its nulls as the default, which the stats do not know
        # (Paimon's DefaultValueAssigner.handlePredicate keeps such columns out of pushed-down filters)
        from engine.merge_engines import merge_config
        defaults = merge_config(self.schema).defaults
        ranges = {}
        for i, n in enumerate(names):
            table_name = now.get(file_schema.field(n).id)
            if table_name is not None and not types[i].is_nested and table_name not in defaults:
                lo, hi = _as_read(mins[i], maxs[i], types[i], self.schema.field(table_name).type)
                ranges[table_name] = (lo, hi, stats.null_counts[i])
        # a column added after the file was written reads as null in every row (Paimon's NullCountsEvoArray
        # gives it the file's row count as null count)
        in_file = {fl.id for fl in file_schema.fields}
        for fl in self.schema.fields:
            if fl.id not in in_file and fl.name not in defaults:
                ranges[fl.name] = (None, None, f.row_count)
        return pred.may_match(dnf, ranges.get, row_count=f.row_count)

    @staticmethod
    def _file_may_match(f: DataFileMeta, dnf, key_names, key_types) -> bool:
        if not key_names or f.key_stats.null_counts is None:
            return True
        try:
            mins = binary_row.deserialize_row(f.key_stats.min_values, [t.with_nullable(True) for t in key_types])
            maxs = binary_row.upper_bound_of_floored(
                binary_row.deserialize_row(f.key_stats.max_values, [t.with_nullable(True) for t in key_types]),
                key_types)
        except Exception:  # stats we cannot decode prove nothing
            return True
        if len(mins) != len(key_names):
            return True
        ranges = {k: (mins[i], maxs[i], f.key_stats.null_counts[i] if i < len(f.key_stats.null_counts) else None)
                  for i, k in enumerate(key_names)}
        return pred.may_match(dnf, ranges.get, row_count=f.row_count)


class _LazyBuckets(dict):
    """Maps a total-bucket count (as recorded per manifest entry) to the buckets the pinned key values hash to."""

    def __init__(self, columns):
        super().__init__()
        self.columns = columns

    def get(self, total, default=None):
        if total not in self:
            from kernels.hashing import bucket_ids
            self[total] = {int(b) for b in bucket_ids(self.columns, max(1, total))}
        return self[total]


def _creation_epoch_millis(f: DataFileMeta) -> int:
    """A file's creation time as epoch milliseconds: ``_CREATION_TIME`` is local wall-clock time, converted back
    with this process's time zone (as Paimon's DataFileMeta.creationTimeEpochMillis uses the JVM's); -1 if
    unknown."""
    if f.creation_time_millis is None:
        return -1
    local = f.creation_time_millis
    return local - time.localtime(local / 1000).tm_gmtoff * 1000


def _as_read(lo, hi, written, now):
    """Bounds recorded under a column's ``written`` type as values of its widened type ``now``, cast as the
    reader casts the values (Arrow): a DECIMAL 1.10 is the double 1.1 it reads as, an INT bound becomes a float
    compared in Java's order. A monotone cast keeps them bounds; any other pair is returned unchanged. Bounds of a
    character or binary column that the reader pads or cuts (engine.types.fit_length: its type changed to a CHAR /
    BINARY, or to a shorter length) prove nothing: padding does not keep the order ('a' < 'a\\x10' but
    'a  ' > 'a\\x10 '), and a cut value may lie below the minimum."""
    if written.with_nullable(True) != now.with_nullable(True) and (
            now.root in ("CHAR", "BINARY") or (now.length is not None and written.length is not None
                                               and now.length < written.length)):
        return None, None
    if written.root == now.root or now.root not in ("FLOAT", "DOUBLE"):
        return lo, hi
    try:
        return tuple(pa.array([lo, hi], written.to_arrow()).cast(now.to_arrow()).to_pylist())
    except (pa.ArrowException, TypeError, ValueError):
        return None, None  # bounds that cannot be cast prove nothing


def _stat_types(types):
    from engine.types import DataType
    return [DataType("BIGINT", True) if t.is_nested else t for t in types]

