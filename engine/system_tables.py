"""Paimon system tables: a table's metadata read as Arrow tables under Paimon's names (``db.t$snapshots``).

``catalog.get_table("db.t$files")`` returns a :class:`SystemTable`; ``read()`` gives a ``pa.Table`` whose columns
are named and typed as Paimon's system table of that name (Java ``org.apache.paimon.table.system``):

* ``$snapshots``, ``$schemas``, ``$options``, ``$tags``, ``$consumers``: the table's directories, whatever the
  snapshot;
* ``$files``, ``$manifests``, ``$partitions``, ``$buckets``, ``$table_indexes`` (index files: HASH indexes, deletion
  vectors with each data file's range): the live state of one snapshot (default: latest;
  ``read(snapshot_id=N)`` travels in time as Paimon's ``scan.snapshot-id`` does).

A branch's system tables (``db.t$branch_<name>$<kind>``, as Paimon names them) are those of the branch table: its
snapshots, schemas, tags, consumers and files.

Conventions taken from Paimon: timestamps are ``TIMESTAMP(3)`` in the local time zone (tz-naive ``ms``); in
``$files`` the partition, keys and stats are rendered as Java renders them (``{2024-01-01, 3}``, ``[42]``,
``{amount=0, id=0}``), ``$partitions`` and ``$buckets`` show partitions as ``dt=2024-01-01/h=3``; ``$schemas``
holds compact JSON. Rows come sorted by their natural key.
Everything here only reads; a damaged metadata file raises ``CorruptFile`` naming it.
"""
from __future__ import annotations

import datetime as dt
import decimal
import json
import os
from collections.abc import Callable, Sequence

import pyarrow as pa

from engine.errors import CorruptFile, InvalidInput, TableNotFound
from engine.meta import binary_row
from engine.meta.data_file import FILE_SOURCE_APPEND, FILE_SOURCE_COMPACT, DataFileMeta
from engine.maintenance.tags import SUCCESS_FILE_DIR
from engine.meta.snapshot import Snapshot
from engine.types import DataType, fit_length
from engine.options import PARTITION_DEFAULT_NAME
from engine.paths import _java_float_str, _java_local_datetime_str
from engine.read import predicate as pred

SEPARATOR = "$"
TAG_DIR = "tag"
TAG_PREFIX = "tag-"
CONSUMER_DIR = "consumer"
CONSUMER_PREFIX = "consumer-"

_TS = pa.timestamp("ms")


def _f(name: str, typ: pa.DataType, nullable: bool = True) -> pa.Field:
    return pa.field(name, typ, nullable=nullable)


SNAPSHOTS_SCHEMA = pa.schema([
    _f("snapshot_id", pa.int64(), False), _f("schema_id", pa.int64(), False), _f("commit_user", pa.string(), False),
    _f("commit_identifier", pa.int64(), False), _f("commit_kind", pa.string(), False),
    _f("commit_time", _TS, False), _f("base_manifest_list", pa.string(), False),
    _f("delta_manifest_list", pa.string(), False), _f("changelog_manifest_list", pa.string()),
    _f("total_record_count", pa.int64()), _f("delta_record_count", pa.int64()),
    _f("changelog_record_count", pa.int64()), _f("watermark", pa.int64()), _f("next_row_id", pa.int64()),
    _f("writer_version", pa.string()),
])
SCHEMAS_SCHEMA = pa.schema([
    _f("schema_id", pa.int64(), False), _f("fields", pa.string(), False), _f("partition_keys", pa.string(), False),
    _f("primary_keys", pa.string(), False), _f("options", pa.string(), False), _f("comment", pa.string()),
    _f("update_time", _TS, False),
])
OPTIONS_SCHEMA = pa.schema([_f("key", pa.string(), False), _f("value", pa.string(), False)])
FILES_SCHEMA = pa.schema([
    _f("partition", pa.string()), _f("bucket", pa.int32(), False), _f("file_path", pa.string(), False),
    _f("file_format", pa.string(), False), _f("schema_id", pa.int64(), False), _f("level", pa.int32(), False),
    _f("record_count", pa.int64(), False), _f("file_size_in_bytes", pa.int64(), False),
    _f("min_key", pa.string()), _f("max_key", pa.string()), _f("null_value_counts", pa.string(), False),
    _f("min_value_stats", pa.string(), False), _f("max_value_stats", pa.string(), False),
    _f("min_sequence_number", pa.int64()), _f("max_sequence_number", pa.int64()),
    _f("creation_time", _TS), _f("deleteRowCount", pa.int64()), _f("file_source", pa.string()),
    _f("first_row_id", pa.int64()), _f("write_cols", pa.list_(pa.string())),
])
MANIFESTS_SCHEMA = pa.schema([
    _f("file_name", pa.string(), False), _f("file_size", pa.int64(), False),
    _f("num_added_files", pa.int64(), False), _f("num_deleted_files", pa.int64(), False),
    _f("schema_id", pa.int64(), False), _f("min_partition_stats", pa.string()),
    _f("max_partition_stats", pa.string()), _f("min_row_id", pa.int64()), _f("max_row_id", pa.int64()),
])
PARTITIONS_SCHEMA = pa.schema([
    _f("partition", pa.string()), _f("record_count", pa.int64(), False),
    _f("file_size_in_bytes", pa.int64(), False), _f("file_count", pa.int64(), False),
    _f("last_update_time", _TS), _f("created_at", _TS), _f("created_by", pa.string()),
    _f("updated_by", pa.string()), _f("options", pa.string()), _f("total_buckets", pa.int32(), False),
    _f("done", pa.bool_(), False), _f("deleted_record_count", pa.int64()),
])
BUCKETS_SCHEMA = pa.schema([
    _f("partition", pa.string()), _f("bucket", pa.int32(), False), _f("record_count", pa.int64(), False),
    _f("file_size_in_bytes", pa.int64(), False), _f("file_count", pa.int64(), False),
    _f("last_update_time", _TS),
])
TAGS_SCHEMA = pa.schema([
    _f("tag_name", pa.string(), False), _f("snapshot_id", pa.int64(), False), _f("schema_id", pa.int64(), False),
    _f("commit_time", _TS, False), _f("record_count", pa.int64()), _f("create_time", _TS),
    _f("time_retained", pa.string()),
])
CONSUMERS_SCHEMA = pa.schema([_f("consumer_id", pa.string(), False), _f("next_snapshot_id", pa.int64(), False)])
_DV_RANGE = pa.struct([_f("f0", pa.string(), False), _f("f1", pa.int32(), False), _f("f2", pa.int32(), False),
                       _f("_CARDINALITY", pa.int64())])
TABLE_INDEXES_SCHEMA = pa.schema([
    _f("partition", pa.string()), _f("bucket", pa.int32(), False), _f("index_type", pa.string(), False),
    _f("file_name", pa.string(), False), _f("file_size", pa.int64(), False), _f("row_count", pa.int64(), False),
    _f("dv_ranges", pa.list_(_DV_RANGE)), _f("row_range_start", pa.int64()), _f("row_range_end", pa.int64()),
    _f("index_field_id", pa.int32()), _f("index_field_name", pa.string()),
])


# --- rendering as Java does ------------------------------------------------------------------------------
def local_time(millis: int | None) -> dt.datetime | None:
    """Epoch milliseconds -> naive local wall-clock time (Paimon's ``TIMESTAMP(3)`` in the JVM's zone)."""
    if millis is None:
        return None
    secs, ms = divmod(int(millis), 1000)
    return dt.datetime.fromtimestamp(secs).replace(microsecond=ms * 1000)


def wall_clock(millis: int | None) -> dt.datetime | None:
    """A ``_CREATION_TIME`` value (local wall clock encoded as UTC epoch millis) -> naive datetime."""
    if millis is None:
        return None
    return dt.datetime(1970, 1, 1) + dt.timedelta(milliseconds=int(millis))


def java_text(value) -> str:
    """One value as Java's ``toString`` shows it in system tables (null, true/false, ISO dates)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return _java_local_datetime_str(value)
    if isinstance(value, float):
        return _java_float_str(value, False)
    if isinstance(value, decimal.Decimal):
        return format(value, "f")
    return str(value)


def row_text(values: Sequence) -> str:
    """A row cast to string as Paimon casts ROW types: ``{a, b}``."""
    return "{" + ", ".join(java_text(v) for v in values) + "}"


def key_text(values: Sequence) -> str:
    """A key as Java's ``Arrays.toString``: ``[a, b]``."""
    return "[" + ", ".join(java_text(v) for v in values) + "]"


def map_text(mapping: dict) -> str:
    """A name-sorted map as Java's ``TreeMap.toString``: ``{a=1, b=null}``."""
    return "{" + ", ".join(f"{k}={java_text(mapping[k])}" for k in sorted(mapping)) + "}"


def java_duration(seconds: float) -> str:
    """Seconds as Java's ``Duration.toString`` (``PT24H``, ``PT1H30M``, ``PT0.5S``)."""
    total = decimal.Decimal(str(seconds))
    sign = "-" if total < 0 else ""
    total = abs(total)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    out = "PT"
    if hours:
        out += f"{sign}{int(hours)}H"
    if minutes:
        out += f"{sign}{int(minutes)}M"
    if secs or out == "PT":
        text = format(secs.normalize(), "f")
        out += f"{sign}{text}S"
    return out


# --- the system table object -----------------------------------------------------------------------------
class SystemTable:
    """A read-only Paimon system table of one data table. Get it with ``catalog.get_table("db.t$<kind>")``.

    ``read(snapshot_id, columns, filter)`` returns a ``pa.Table`` with ``arrow_schema`` (projected). Raises
    InvalidInput for unknown columns, a bad filter, or a snapshot id on a kind that does not depend on snapshots;
    SnapshotNotFound for an unknown snapshot; CorruptFile for unreadable metadata.
    """

    def __init__(self, table, kind: str):
        if kind not in KINDS:
            raise TableNotFound(f"{table.name}{SEPARATOR}{kind}",
                                f"unknown system table; known: {', '.join('$' + k for k in KINDS)}")
        self.table = table
        self.kind = kind
        self.name = f"{table.name}{SEPARATOR}{kind}"
        self.arrow_schema: pa.Schema = KINDS[kind][0] if KINDS[kind][0] is not None else _AUDIT_LOG_SCHEMA(table)

    def __repr__(self) -> str:
        return f"SystemTable({self.name!r})"

    @property
    def snapshot_dependent(self) -> bool:
        """True for the kinds whose content is the state of one snapshot ($files, $manifests, ...)."""
        return self.kind in _PER_SNAPSHOT

    def arrow_schema_at(self, snapshot_id: int | None = None, *, snapshot: Snapshot | None = None) -> pa.Schema:
        """The columns of a read of ``snapshot_id`` or the resolved ``snapshot`` (default: latest): ``arrow_schema``,
        except for ``$audit_log`` of a snapshot committed under an older table schema, whose columns are that
        schema's (as Paimon's AuditLogTable wraps the time-travelled table: AbstractFileStoreTable.tryTimeTravel).
        Raises SnapshotNotFound for an unknown snapshot id."""
        if self.kind != "audit_log" or (snapshot_id is None and snapshot is None):
            return self.arrow_schema
        snap = snapshot if snapshot is not None else self.table.snapshot(snapshot_id)
        return _AUDIT_LOG_SCHEMA(self.table.as_of_snapshot(snap))

    def read(self, snapshot_id: int | None = None, columns: Sequence[str] | None = None, filter=None, *,
             snapshot: Snapshot | None = None) -> pa.Table:
        """The system table's rows (see the class docstring for the contract), with ``arrow_schema_at``'s
        columns. ``snapshot``: a resolved snapshot instead of ``snapshot_id`` (a tag's, which the tag keeps after
        expiration removed its snapshot file)."""
        travels = snapshot_id is not None or snapshot is not None
        if travels and not self.snapshot_dependent:
            raise InvalidInput(f"system table ${self.kind} lists every {self.kind[:-1]} and takes no snapshot id",
                               table=self.name)
        snap = None if not self.snapshot_dependent else snapshot if snapshot is not None \
            else self.table.snapshot(snapshot_id)
        # $audit_log of an older snapshot reads through the schema it was committed under, as time travel does
        table = self.table.as_of_snapshot(snap) if self.kind == "audit_log" and travels else self.table
        arrow_schema = _AUDIT_LOG_SCHEMA(table) if table is not self.table else self.arrow_schema
        out_cols = list(columns) if columns is not None else list(arrow_schema.names)
        unknown = [c for c in out_cols if c not in arrow_schema.names]
        if unknown:
            raise InvalidInput(f"unknown column(s) {unknown}; columns are {arrow_schema.names}",
                               table=self.name, column=unknown[0])
        dnf = pred.normalize(filter, arrow_schema, self.name)
        builder = KINDS[self.kind][1]
        rows = builder(table, snap) if self.snapshot_dependent else builder(table)
        result = rows if isinstance(rows, pa.Table) else pa.Table.from_pylist(rows, schema=arrow_schema)
        if dnf:
            result = result.filter(pred.to_expression(dnf))
        return result.select(out_cols)

    def to_arrow(self, snapshot_id: int | None = None) -> pa.Table:
        """Same as ``read(snapshot_id)``."""
        return self.read(snapshot_id)

    def to_pandas(self, snapshot_id: int | None = None):
        """``read(snapshot_id)`` as a pandas DataFrame (needs pandas)."""
        return self.read(snapshot_id).to_pandas()

    def to_reader(self, snapshot_id: int | None = None, columns: Sequence[str] | None = None,
                  filter=None) -> pa.RecordBatchReader:
        """``read(...)`` as a RecordBatchReader (metadata is small; it is built in memory), e.g. for DuckDB."""
        result = self.read(snapshot_id, columns, filter)
        return pa.RecordBatchReader.from_batches(result.schema, result.to_batches())


def system_table(table, kind: str) -> SystemTable:
    """The system table ``kind`` (without ``$``) of ``table``. Raises TableNotFound for an unknown kind."""
    return SystemTable(table, kind)


def split_system_name(identifier: str) -> tuple[str, str | None]:
    """``'db.t$files'`` -> ``('db.t', 'files')``; ``'db.t'`` -> ``('db.t', None)``."""
    base, sep, kind = identifier.partition(SEPARATOR)
    return (base, kind) if sep else (identifier, None)


# --- builders: table-wide --------------------------------------------------------------------------------
def _snapshots(table) -> list[dict]:
    return [{
        "snapshot_id": s.id, "schema_id": s.schema_id, "commit_user": s.commit_user,
        "commit_identifier": s.commit_identifier, "commit_kind": s.commit_kind,
        "commit_time": local_time(s.time_millis), "base_manifest_list": s.base_manifest_list,
        "delta_manifest_list": s.delta_manifest_list, "changelog_manifest_list": s.changelog_manifest_list,
        "total_record_count": s.total_record_count, "delta_record_count": s.delta_record_count,
        "changelog_record_count": s.changelog_record_count, "watermark": s.watermark,
        "next_row_id": s.next_row_id, "writer_version": s.writer_version,
    } for s in table.snapshots()]


def _compact_json(value) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _schemas(table) -> list[dict]:
    out = []
    for sid in table.schema_manager.ids():
        s = table.schema_manager.schema(sid)
        out.append({"schema_id": s.id, "fields": _compact_json([f.to_json() for f in s.fields]),
                    "partition_keys": _compact_json(list(s.partition_keys)),
                    "primary_keys": _compact_json(list(s.primary_keys)), "options": _compact_json(dict(s.options)),
                    "comment": s.comment, "update_time": local_time(s.time_millis)})
    return out


def _options(table) -> list[dict]:
    return [{"key": k, "value": v} for k, v in sorted(table.schema.options.items())]


def _read_json_files(table, directory: str, prefix: str) -> list[tuple[str, str, dict]]:
    """(name after prefix, path, parsed JSON object) of every ``<prefix><name>`` file in ``directory`` (of the
    table's metadata root: a branch table's is its branch directory)."""
    root = os.path.join(table.paths.meta_root, directory)
    out = []
    for file_name in sorted(table.file_io.list_names(root)):
        if not file_name.startswith(prefix) or file_name.startswith(".") or file_name == SUCCESS_FILE_DIR:
            continue
        path = os.path.join(root, file_name)
        try:
            obj = json.loads(table.file_io.read_bytes(path))
        except FileNotFoundError:  # removed while listing
            continue
        except (ValueError, UnicodeDecodeError) as e:
            raise CorruptFile(path, f"not valid JSON: {e}") from None
        if not isinstance(obj, dict):
            raise CorruptFile(path, "JSON is not an object")
        out.append((file_name[len(prefix):], path, obj))
    return out


def _tag_create_time(value, path: str) -> dt.datetime | None:
    """Jackson writes a LocalDateTime as [y, m, d, h, min, s, nanos] (or an ISO string); both are accepted."""
    if value is None:
        return None
    try:
        if isinstance(value, list):
            parts = [int(v) for v in value] + [0] * (7 - len(value))
            y, mo, d, h, mi, s, nanos = parts[:7]
            return dt.datetime(y, mo, d, h, mi, s, nanos // 1000)
        return dt.datetime.fromisoformat(str(value))
    except (ValueError, TypeError) as e:
        raise CorruptFile(path, f"tagCreateTime {value!r} is not a date-time: {e}") from None


def _tag_retained(value, path: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return java_duration(value)
    if isinstance(value, str):
        return value
    raise CorruptFile(path, f"tagTimeRetained {value!r} is not a duration")


def _tags(table) -> list[dict]:
    out = []
    for name, path, obj in _read_json_files(table, TAG_DIR, TAG_PREFIX):
        snap = Snapshot.from_json(json.dumps(obj), path)
        out.append({"tag_name": name, "snapshot_id": snap.id, "schema_id": snap.schema_id,
                     "commit_time": local_time(snap.time_millis), "record_count": snap.total_record_count,
                     "create_time": _tag_create_time(obj.get("tagCreateTime"), path),
                     "time_retained": _tag_retained(obj.get("tagTimeRetained"), path)})
    return out


def _consumers(table) -> list[dict]:
    out = []
    for cid, path, obj in _read_json_files(table, CONSUMER_DIR, CONSUMER_PREFIX):
        nxt = obj.get("nextSnapshot")
        if not isinstance(nxt, int) or isinstance(nxt, bool):
            raise CorruptFile(path, f"consumer has no integer nextSnapshot (got {nxt!r})")
        out.append({"consumer_id": cid, "next_snapshot_id": nxt})
    return out


# --- builders: one snapshot ------------------------------------------------------------------------------
def _partition_types(table):
    return table.schema.types_of(table.schema.partition_keys)


def _partition_values(table, partition: bytes, cache: dict) -> list:
    values = cache.get(partition)
    if values is None:
        types = _partition_types(table)
        values = binary_row.deserialize_row(partition, types) if types else []
        cache[partition] = values
    return values


def _file_format(file_name: str) -> str:
    return file_name.rsplit(".", 1)[-1].lower() if "." in file_name else ""


def _decode_keys(table, f: DataFileMeta) -> tuple[str | None, str | None]:
    key_types = [t.with_nullable(True) for t in table.schema.types_of(table.schema.trimmed_primary_keys)]
    if not key_types:
        return None, None
    try:
        return (key_text(binary_row.deserialize_row(f.min_key, key_types)),
                key_text(binary_row.deserialize_row(f.max_key, key_types)))
    except Exception:  # keys written under an older key type: show the raw bytes rather than fail the listing
        return f.min_key.hex(), f.max_key.hex()


def _value_stats(table, f: DataFileMeta) -> tuple[str, str, str]:
    """(null counts, minimums, maximums) per current table column, as name-sorted maps (unknown -> null)."""
    from engine.read.scan import _stat_types

    names = list(table.schema.field_names)
    nulls = dict.fromkeys(names)
    mins = dict.fromkeys(names)
    maxs = dict.fromkeys(names)
    stats = f.value_stats
    cols = f.value_stats_cols
    try:
        if cols is None:
            cols = table.schema_manager.schema(f.schema_id).field_names
        cols = [c for c in cols]
        if stats.null_counts is not None and len(stats.null_counts) == len(cols) and cols:
            by_id = {fld.id: fld.name for fld in table.schema.fields}
            old = table.schema_manager.schema(f.schema_id)
            current = [by_id.get(old.field(c).id) if c in old.field_names else None for c in cols]
            # the stats are encoded under the file's schema (an INT column widened to BIGINT since keeps INT
            # bounds): decode with its types, then show them as values of the column's type now, as Paimon's
            # FilesTable evolves them (SimpleStatsEvolutions)
            types = [old.field(c).type.with_nullable(True) if c in old.field_names else None for c in cols]
            if all(t is not None for t in types):
                lo = binary_row.deserialize_row(stats.min_values, _stat_types(types))
                hi = binary_row.deserialize_row(stats.max_values, _stat_types(types))
                for i, n in enumerate(current):
                    if n is None:  # a column dropped since
                        continue
                    nulls[n] = stats.null_counts[i]
                    if not types[i].is_nested:
                        mins[n], maxs[n] = _as_type(lo[i], hi[i], types[i], table.schema.field(n).type)
            else:
                for i, n in enumerate(current):
                    if n is not None:
                        nulls[n] = stats.null_counts[i]
    except Exception:  # undecodable stats prove nothing; show them as unknown
        pass
    return map_text(nulls), map_text(mins), map_text(maxs)


def _as_type(lo, hi, written: DataType, now: DataType) -> tuple:
    """Bounds decoded under a column's ``written`` type as values of its type ``now`` (unchanged when the types
    agree; the reader's cast otherwise, e.g. INT 10 -> DOUBLE 10.0, CHAR(2) 'a' -> CHAR(3) 'a  ')."""
    if written.with_nullable(True) == now.with_nullable(True):
        return lo, hi
    try:
        return tuple(fit_length(pa.array([lo, hi], written.to_arrow()).cast(now.to_arrow()), written, now).to_pylist())
    except (pa.ArrowException, TypeError, ValueError):
        return None, None


def _files(table, snapshot: Snapshot | None) -> list[dict]:
    if snapshot is None:
        return []
    scan = table.scan()
    cache: dict = {}
    out = []
    for sp in scan.plan(snapshot):
        pvalues = _partition_values(table, sp.partition, cache)
        for f in sorted(sp.files, key=lambda f: (f.level, f.min_sequence_number, f.file_name)):
            min_key, max_key = _decode_keys(table, f)
            nulls, mins, maxs = _value_stats(table, f)
            source = {FILE_SOURCE_APPEND: "APPEND", FILE_SOURCE_COMPACT: "COMPACT"}.get(f.file_source)
            out.append({
                "partition": row_text(pvalues), "bucket": sp.bucket,
                "file_path": f.external_path or f"{sp.bucket_dir}/{f.file_name}",
                "file_format": _file_format(f.file_name), "schema_id": f.schema_id, "level": f.level,
                "record_count": f.row_count, "file_size_in_bytes": f.file_size,
                "min_key": min_key, "max_key": max_key, "null_value_counts": nulls,
                "min_value_stats": mins, "max_value_stats": maxs,
                "min_sequence_number": f.min_sequence_number, "max_sequence_number": f.max_sequence_number,
                "creation_time": wall_clock(f.creation_time_millis), "deleteRowCount": f.delete_row_count,
                "file_source": source, "first_row_id": f.first_row_id,
                "write_cols": None if f.write_cols is None else list(f.write_cols),
            })
    return out


def _manifests(table, snapshot: Snapshot | None) -> list[dict]:
    if snapshot is None:
        return []
    types = [t.with_nullable(True) for t in _partition_types(table)]
    out = []
    for m in table.manifests.data_manifests(snapshot):
        try:
            lo = row_text(binary_row.deserialize_row(m.partition_stats.min_values, types))
            hi = row_text(binary_row.deserialize_row(m.partition_stats.max_values, types))
        except Exception:  # stats over another partition layout: unknown
            lo = hi = None
        out.append({"file_name": m.file_name, "file_size": m.file_size, "num_added_files": m.num_added_files,
                    "num_deleted_files": m.num_deleted_files, "schema_id": m.schema_id,
                    "min_partition_stats": lo, "max_partition_stats": hi,
                    "min_row_id": m.min_row_id, "max_row_id": m.max_row_id})
    return out


def _partition_path_text(table, values: list) -> str | None:
    """``dt=2024-01-01/h=3`` with nulls as the table's default partition name (Paimon's $partitions); None for
    an unpartitioned table (as pypaimon)."""
    if not table.schema.partition_keys:
        return None
    default = table.schema.table_options.get(PARTITION_DEFAULT_NAME)
    return "/".join(f"{k}={default if v is None else java_text(v)}"
                    for k, v in zip(table.schema.partition_keys, values))


def _aggregate(table, snapshot: Snapshot | None, by_bucket: bool) -> dict:
    groups: dict = {}
    if snapshot is None:
        return groups
    for e in table.manifests.live_entries(snapshot):
        key = (e.partition, e.bucket) if by_bucket else e.partition
        g = groups.setdefault(key, {"record_count": 0, "file_size_in_bytes": 0, "file_count": 0,
                                    "last": None, "total_buckets": e.total_buckets, "deleted": 0})
        g["record_count"] += e.file.row_count
        deleted = e.file.delete_row_count
        g["deleted"] = None if deleted is None or g["deleted"] is None else g["deleted"] + deleted
        g["file_size_in_bytes"] += e.file.file_size
        g["file_count"] += 1
        t = e.file.creation_time_millis
        if t is not None and (g["last"] is None or t > g["last"]):
            g["last"] = t
    return groups


def _partitions(table, snapshot: Snapshot | None) -> list[dict]:
    cache: dict = {}
    out = []
    for partition, g in _aggregate(table, snapshot, by_bucket=False).items():
        out.append({"partition": _partition_path_text(table, _partition_values(table, partition, cache)),
                    "record_count": g["record_count"], "file_size_in_bytes": g["file_size_in_bytes"],
                    "file_count": g["file_count"], "last_update_time": wall_clock(g["last"]),
                    "created_at": None, "created_by": None, "updated_by": None, "options": None,
                    "total_buckets": g["total_buckets"], "done": False, "deleted_record_count": g["deleted"]})
    out.sort(key=lambda r: r["partition"] or "")
    return out


def _buckets(table, snapshot: Snapshot | None) -> list[dict]:
    cache: dict = {}
    out = []
    for (partition, bucket), g in _aggregate(table, snapshot, by_bucket=True).items():
        out.append({"partition": _partition_path_text(table, _partition_values(table, partition, cache)),
                    "bucket": bucket,
                    "record_count": g["record_count"], "file_size_in_bytes": g["file_size_in_bytes"],
                    "file_count": g["file_count"], "last_update_time": wall_clock(g["last"])})
    out.sort(key=lambda r: (r["partition"] or "", r["bucket"]))
    return out


def _table_indexes(table, snapshot: Snapshot | None) -> list[dict]:
    """The index files of the snapshot's index manifest (dynamic-bucket HASH indexes, deletion vectors with the
    range of each data file's vector, ...), as Paimon's TableIndexesTable."""
    if snapshot is None:
        return []
    cache: dict = {}
    names = {f.id: f.name for f in table.schema.fields}
    out = []
    for r in table.manifests.index_records(snapshot.index_manifest):
        glob = r.get("_GLOBAL_INDEX") or {}
        field_id = glob.get("_INDEX_FIELD_ID")
        out.append({
            "partition": row_text(_partition_values(table, r["_PARTITION"], cache)), "bucket": r["_BUCKET"],
            "index_type": r["_INDEX_TYPE"], "file_name": r["_FILE_NAME"], "file_size": r["_FILE_SIZE"],
            "row_count": r["_ROW_COUNT"], "dv_ranges": r.get("_DELETIONS_VECTORS_RANGES"),
            "row_range_start": glob.get("_ROW_RANGE_START"), "row_range_end": glob.get("_ROW_RANGE_END"),
            "index_field_id": field_id, "index_field_name": names.get(field_id)})
    out.sort(key=lambda r: (r["partition"] or "", r["bucket"], r["index_type"], r["file_name"]))
    return out


KINDS: dict[str, tuple[pa.Schema, Callable]] = {
    "snapshots": (SNAPSHOTS_SCHEMA, _snapshots),
    "schemas": (SCHEMAS_SCHEMA, _schemas),
    "options": (OPTIONS_SCHEMA, _options),
    "files": (FILES_SCHEMA, _files),
    "manifests": (MANIFESTS_SCHEMA, _manifests),
    "partitions": (PARTITIONS_SCHEMA, _partitions),
    "buckets": (BUCKETS_SCHEMA, _buckets),
    "tags": (TAGS_SCHEMA, _tags),
    "consumers": (CONSUMERS_SCHEMA, _consumers),
    "table_indexes": (TABLE_INDEXES_SCHEMA, _table_indexes),
    "audit_log": (None, lambda table, snapshot: _audit_log(table, snapshot)),  # schema per table (issue 5)
}
"""Supported system tables: name -> (Arrow schema as Paimon's, row builder)."""

_PER_SNAPSHOT = frozenset({"files", "manifests", "partitions", "buckets", "audit_log", "table_indexes"})


# --- issue 5: $audit_log ---
def _AUDIT_LOG_SCHEMA(table) -> pa.Schema:
    """``rowkind`` (+I/-U/+U/-D) then the table's columns, as Paimon's AuditLogTable. Raises UnsupportedFeature
    for a table whose option ``table-read.sequence-number.enabled`` asks for a _SEQUENCE_NUMBER column too."""
    from engine.refused_options import require_audit_log
    require_audit_log(table.schema.options, table.name)
    return pa.schema([pa.field("rowkind", pa.string(), False)] + list(table.arrow_schema))


def _audit_log(table, snapshot) -> pa.Table:
    """The merged record of every key of ``snapshot`` with its row kind (Paimon's batch audit_log, whose read keeps
    deletes: a key whose newest record is a -D/-U not yet dropped by a full compaction shows as that row); the
    change stream with row kinds is ``Table.stream`` / ``Table.read_changes``. A user's read: it skips unreadable
    data files as ``scan.ignore-corrupt-files`` / ``scan.ignore-lost-files`` say (engine.read.file_skips)."""
    from engine.changelog.files import row_kind_text
    from engine.read.split_read import SplitReader, batch_splits
    schema = _AUDIT_LOG_SCHEMA(table)
    if snapshot is None:
        return schema.empty_table()
    if table.schema.is_append_only:  # an append table's rows are all inserts (no merge, no row kinds stored)
        from engine.append.read import read_append
        rows = read_append(table, columns=list(table.schema.field_names), snapshot=snapshot)
        return pa.Table.from_arrays([pa.array(["+I"] * rows.num_rows, pa.string())] + rows.columns, schema=schema)
    from engine.read.file_skips import read_skips
    reader = SplitReader(table.file_io, table.schema, table.schema_manager.schema, read_skips(table))
    cols = list(table.schema.field_names)
    parts = []
    for split in batch_splits(table.scan().plan(snapshot), table.schema):
        rows = reader.read(split, cols, with_kind=True, keep_retracts=True)
        kinds = row_kind_text(rows.column("_VALUE_KIND").to_numpy())
        parts.append(pa.Table.from_arrays([kinds] + rows.select(cols).columns, schema=schema))
    return pa.concat_tables(parts) if parts else schema.empty_table()
