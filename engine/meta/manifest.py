"""Manifests and manifest lists (format spec §6): dataclasses, Avro byte codecs and the entry fold.

Files are written with the Java schemas of spec Appendix A (Java record names, ``_VERSION`` = 2, codec
``zstandard``). Files are read with the writer schema stored in the file and matched by field name, so
record names do not matter, unknown fields are ignored and missing nullable fields read as None.
Functions take and return bytes; the FileIO layer does the I/O.
"""
from __future__ import annotations

import io
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

import fastavro

from engine.errors import CorruptFile, LakemergeError
from engine.meta.data_file import DataFileMeta, SimpleStats

ADD = 0
DELETE = 1
MANIFEST_VERSION = 2
MANIFEST_LIST_VERSION = 2
CODEC = "zstandard"

_NS = "org.apache.paimon.avro.generated.record"


def _opt(name: str, typ: object) -> dict:
    return {"name": name, "type": ["null", typ], "default": None}


def _stats(field: str, record_name: str) -> dict:
    return {"name": field, "type": {"type": "record", "name": record_name, "fields": [
        {"name": "_MIN_VALUES", "type": "bytes"},
        {"name": "_MAX_VALUES", "type": "bytes"},
        _opt("_NULL_COUNTS", {"type": "array", "items": ["null", "long"]}),
    ]}}


_STRINGS = {"type": "array", "items": "string"}

MANIFEST_ENTRY_SCHEMA = fastavro.parse_schema({"type": "record", "name": _NS, "fields": [
    {"name": "_VERSION", "type": "int"},
    {"name": "_KIND", "type": "int"},
    {"name": "_PARTITION", "type": "bytes"},
    {"name": "_BUCKET", "type": "int"},
    {"name": "_TOTAL_BUCKETS", "type": "int"},
    {"name": "_FILE", "type": {"type": "record", "name": _NS + "__FILE", "fields": [
        {"name": "_FILE_NAME", "type": "string"},
        {"name": "_FILE_SIZE", "type": "long"},
        {"name": "_ROW_COUNT", "type": "long"},
        {"name": "_MIN_KEY", "type": "bytes"},
        {"name": "_MAX_KEY", "type": "bytes"},
        _stats("_KEY_STATS", _NS + "__FILE__KEY_STATS"),
        _stats("_VALUE_STATS", _NS + "__FILE__VALUE_STATS"),
        {"name": "_MIN_SEQUENCE_NUMBER", "type": "long"},
        {"name": "_MAX_SEQUENCE_NUMBER", "type": "long"},
        {"name": "_SCHEMA_ID", "type": "long"},
        {"name": "_LEVEL", "type": "int"},
        {"name": "_EXTRA_FILES", "type": _STRINGS},
        _opt("_CREATION_TIME", {"type": "long", "logicalType": "timestamp-millis"}),
        _opt("_DELETE_ROW_COUNT", "long"),
        _opt("_EMBEDDED_FILE_INDEX", "bytes"),
        _opt("_FILE_SOURCE", "int"),
        _opt("_VALUE_STATS_COLS", _STRINGS),
        _opt("_EXTERNAL_PATH", "string"),
        _opt("_FIRST_ROW_ID", "long"),
        _opt("_WRITE_COLS", _STRINGS),
        _opt("_WRITE_COLS_SEQUENCES", {"type": "array", "items": "long"}),
    ]}},
]})
"""Parsed Avro schema of a manifest entry (spec Appendix A)."""

MANIFEST_FILE_META_SCHEMA = fastavro.parse_schema({"type": "record", "name": _NS, "fields": [
    {"name": "_VERSION", "type": "int"},
    {"name": "_FILE_NAME", "type": "string"},
    {"name": "_FILE_SIZE", "type": "long"},
    {"name": "_NUM_ADDED_FILES", "type": "long"},
    {"name": "_NUM_DELETED_FILES", "type": "long"},
    _stats("_PARTITION_STATS", _NS + "__PARTITION_STATS"),
    {"name": "_SCHEMA_ID", "type": "long"},
    _opt("_MIN_BUCKET", "int"),
    _opt("_MAX_BUCKET", "int"),
    _opt("_MIN_LEVEL", "int"),
    _opt("_MAX_LEVEL", "int"),
    _opt("_MIN_ROW_ID", "long"),
    _opt("_MAX_ROW_ID", "long"),
]})
"""Parsed Avro schema of a manifest list record (spec Appendix A)."""

# _CREATION_TIME must stay inside Python's datetime range, or fastavro cannot read it back.
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MIN_MILLIS = -62135596800000  # 0001-01-01T00:00:00
_MAX_MILLIS = 253402300799999  # 9999-12-31T23:59:59.999


# --- dataclasses ---------------------------------------------------------------------------------------
Identifier = tuple[bytes, int, int, str, tuple[str, ...], "bytes | None", "str | None"]
"""(partition, bucket, level, file name, extra files, embedded index, external path), spec §6.4."""


@dataclass(frozen=True)
class ManifestEntry:
    """One file change in a manifest: ``kind`` is ADD (0) or DELETE (1); ``partition`` is the serialized
    partition BinaryRow; ``total_buckets`` the partition's bucket count when the file was written."""

    kind: int
    partition: bytes
    bucket: int
    total_buckets: int
    file: DataFileMeta

    @property
    def identifier(self) -> Identifier:
        """The key readers fold entries by (spec §6.4). The level is part of it."""
        f = self.file
        return (self.partition, self.bucket, f.level, f.file_name, tuple(f.extra_files), f.embedded_index,
                f.external_path)


@dataclass(frozen=True)
class ManifestFileMeta:
    """One manifest list record: a manifest file and summary stats over its entries (spec §6.1)."""

    file_name: str
    file_size: int
    num_added_files: int
    num_deleted_files: int
    partition_stats: SimpleStats
    schema_id: int
    min_bucket: int | None = None
    max_bucket: int | None = None
    min_level: int | None = None
    max_level: int | None = None
    min_row_id: int | None = None
    max_row_id: int | None = None


class DuplicateFileError(LakemergeError, ValueError):
    """Folding met an ADD of a file identifier that is already live (or already pending deletion)."""

    def __init__(self, identifier: Identifier):
        partition, bucket, level, file_name = identifier[:4]
        super().__init__(f"file {file_name!r} (partition {partition.hex()}, bucket {bucket}, level {level}) "
                         "is added twice")
        self.identifier = identifier
        self.file_name = file_name


def max_sequence_numbers(entries: Iterable[ManifestEntry]) -> dict[tuple[bytes, int], int]:
    """Largest _SEQUENCE_NUMBER per (partition, bucket) among the files of ``entries``."""
    out: dict[tuple[bytes, int], int] = {}
    for e in entries:
        key = (e.partition, e.bucket)
        out[key] = max(out.get(key, -1), e.file.max_sequence_number)
    return out


# --- fold ----------------------------------------------------------------------------------------------
def fold_entries(entries: Iterable[ManifestEntry]) -> tuple[dict[Identifier, ManifestEntry], set[Identifier]]:
    """Fold entries in order into the live file set (spec §6.4).

    Returns ``(live, pending_deletes)``: ``live`` maps identifier → ADD entry in the order the files were
    added; ``pending_deletes`` holds identifiers of DELETE entries whose file was not live (a conflict when
    committing). ADD of a live or pending-deleted identifier raises DuplicateFileError, as Java does;
    a repeated DELETE of a pending identifier is a no-op.
    """
    live: dict[Identifier, ManifestEntry] = {}
    pending: set[Identifier] = set()
    for entry in entries:
        ident = entry.identifier
        if entry.kind == ADD:
            if ident in live or ident in pending:
                raise DuplicateFileError(ident)
            live[ident] = entry
        elif entry.kind == DELETE:
            if live.pop(ident, None) is None:
                pending.add(ident)
        else:
            raise ValueError(f"unknown manifest entry kind {entry.kind!r} for file {entry.file.file_name!r}")
    return live, pending


# --- encode --------------------------------------------------------------------------------------------
def _stats_record(stats: SimpleStats) -> dict:
    return {"_MIN_VALUES": stats.min_values, "_MAX_VALUES": stats.max_values,
            "_NULL_COUNTS": None if stats.null_counts is None else list(stats.null_counts)}


def _opt_list(values: Sequence | None) -> list | None:
    return None if values is None else list(values)


def _file_record(f: DataFileMeta) -> dict:
    if f.creation_time_millis is not None and not _MIN_MILLIS <= f.creation_time_millis <= _MAX_MILLIS:
        raise ValueError(f"creation time {f.creation_time_millis} of {f.file_name!r} is out of range")
    return {
        "_FILE_NAME": f.file_name, "_FILE_SIZE": f.file_size, "_ROW_COUNT": f.row_count,
        "_MIN_KEY": f.min_key, "_MAX_KEY": f.max_key,
        "_KEY_STATS": _stats_record(f.key_stats), "_VALUE_STATS": _stats_record(f.value_stats),
        "_MIN_SEQUENCE_NUMBER": f.min_sequence_number, "_MAX_SEQUENCE_NUMBER": f.max_sequence_number,
        "_SCHEMA_ID": f.schema_id, "_LEVEL": f.level, "_EXTRA_FILES": list(f.extra_files),
        "_CREATION_TIME": f.creation_time_millis, "_DELETE_ROW_COUNT": f.delete_row_count,
        "_EMBEDDED_FILE_INDEX": f.embedded_index, "_FILE_SOURCE": f.file_source,
        "_VALUE_STATS_COLS": _opt_list(f.value_stats_cols), "_EXTERNAL_PATH": f.external_path,
        "_FIRST_ROW_ID": f.first_row_id, "_WRITE_COLS": _opt_list(f.write_cols),
        "_WRITE_COLS_SEQUENCES": _opt_list(f.write_cols_sequences),
    }


def _write(schema: dict, records: Iterable[dict]) -> bytes:
    buf = io.BytesIO()
    fastavro.writer(buf, schema, records, codec=CODEC)
    return buf.getvalue()


def encode_manifest(entries: Sequence[ManifestEntry]) -> bytes:
    """Encode entries, in order, as the bytes of a ``manifest-*`` file."""
    return _write(MANIFEST_ENTRY_SCHEMA, (
        {"_VERSION": MANIFEST_VERSION, "_KIND": e.kind, "_PARTITION": e.partition, "_BUCKET": e.bucket,
         "_TOTAL_BUCKETS": e.total_buckets, "_FILE": _file_record(e.file)} for e in entries))


def encode_manifest_list(metas: Sequence[ManifestFileMeta]) -> bytes:
    """Encode manifest file metas, in order, as the bytes of a ``manifest-list-*`` file."""
    return _write(MANIFEST_FILE_META_SCHEMA, (
        {"_VERSION": MANIFEST_LIST_VERSION, "_FILE_NAME": m.file_name, "_FILE_SIZE": m.file_size,
         "_NUM_ADDED_FILES": m.num_added_files, "_NUM_DELETED_FILES": m.num_deleted_files,
         "_PARTITION_STATS": _stats_record(m.partition_stats), "_SCHEMA_ID": m.schema_id,
         "_MIN_BUCKET": m.min_bucket, "_MAX_BUCKET": m.max_bucket, "_MIN_LEVEL": m.min_level,
         "_MAX_LEVEL": m.max_level, "_MIN_ROW_ID": m.min_row_id, "_MAX_ROW_ID": m.max_row_id}
        for m in metas))


# --- decode --------------------------------------------------------------------------------------------
class _Missing(Exception):
    def __init__(self, name: str):
        self.name = name


def _req(rec: Mapping, name: str):
    value = rec.get(name)
    if value is None:
        raise _Missing(name)
    return value


def _tuple(value) -> tuple | None:
    return None if value is None else tuple(value)


def _millis(value) -> int | None:
    if value is None or isinstance(value, int):
        return value
    if value.tzinfo is None:  # not produced by fastavro, handled for safety
        value = value.replace(tzinfo=timezone.utc)
    delta = value - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def _stats_value(rec: Mapping) -> SimpleStats:
    return SimpleStats(_req(rec, "_MIN_VALUES"), _req(rec, "_MAX_VALUES"), _tuple(rec.get("_NULL_COUNTS")))


def _file_value(f: Mapping) -> DataFileMeta:
    return DataFileMeta(
        file_name=_req(f, "_FILE_NAME"), file_size=_req(f, "_FILE_SIZE"), row_count=_req(f, "_ROW_COUNT"),
        min_key=_req(f, "_MIN_KEY"), max_key=_req(f, "_MAX_KEY"),
        key_stats=_stats_value(_req(f, "_KEY_STATS")), value_stats=_stats_value(_req(f, "_VALUE_STATS")),
        min_sequence_number=_req(f, "_MIN_SEQUENCE_NUMBER"), max_sequence_number=_req(f, "_MAX_SEQUENCE_NUMBER"),
        schema_id=_req(f, "_SCHEMA_ID"), level=_req(f, "_LEVEL"), extra_files=tuple(_req(f, "_EXTRA_FILES")),
        creation_time_millis=_millis(f.get("_CREATION_TIME")), delete_row_count=f.get("_DELETE_ROW_COUNT"),
        embedded_index=f.get("_EMBEDDED_FILE_INDEX"), file_source=f.get("_FILE_SOURCE"),
        value_stats_cols=_tuple(f.get("_VALUE_STATS_COLS")), external_path=f.get("_EXTERNAL_PATH"),
        first_row_id=f.get("_FIRST_ROW_ID"), write_cols=_tuple(f.get("_WRITE_COLS")),
        write_cols_sequences=_tuple(f.get("_WRITE_COLS_SEQUENCES")),
    )


def _read(data: bytes, path: str, what: str, version: int, convert) -> list:
    try:
        records = list(fastavro.reader(io.BytesIO(data)))
    except Exception as exc:  # fastavro raises many types for bad input (ValueError, EOFError, zstd errors...)
        raise CorruptFile(path, f"cannot read {what} Avro: {exc!r}") from None
    out = []
    for i, rec in enumerate(records):
        if not isinstance(rec, Mapping):
            raise CorruptFile(path, f"{what} record {i} is not a record")
        if rec.get("_VERSION") != version:
            raise CorruptFile(path, f"{what} record {i} has _VERSION {rec.get('_VERSION')!r}, expected {version}")
        try:
            out.append(convert(rec))
        except _Missing as exc:
            raise CorruptFile(path, f"{what} record {i} has no {exc.name}") from None
    return out


def _entry_value(rec: Mapping) -> ManifestEntry:
    return ManifestEntry(kind=_req(rec, "_KIND"), partition=_req(rec, "_PARTITION"), bucket=_req(rec, "_BUCKET"),
                         total_buckets=_req(rec, "_TOTAL_BUCKETS"), file=_file_value(_req(rec, "_FILE")))


def _meta_value(rec: Mapping) -> ManifestFileMeta:
    return ManifestFileMeta(
        file_name=_req(rec, "_FILE_NAME"), file_size=_req(rec, "_FILE_SIZE"),
        num_added_files=_req(rec, "_NUM_ADDED_FILES"), num_deleted_files=_req(rec, "_NUM_DELETED_FILES"),
        partition_stats=_stats_value(_req(rec, "_PARTITION_STATS")), schema_id=_req(rec, "_SCHEMA_ID"),
        min_bucket=rec.get("_MIN_BUCKET"), max_bucket=rec.get("_MAX_BUCKET"), min_level=rec.get("_MIN_LEVEL"),
        max_level=rec.get("_MAX_LEVEL"), min_row_id=rec.get("_MIN_ROW_ID"), max_row_id=rec.get("_MAX_ROW_ID"),
    )


def decode_manifest(data: bytes, path: str = "") -> list[ManifestEntry]:
    """Decode the bytes of a ``manifest-*`` file into its entries, in file order.

    Raises CorruptFile(path, ...) if the bytes are not a readable Avro container, a record's ``_VERSION`` is
    not 2, or a required field is missing.
    """
    return _read(data, path, "manifest", MANIFEST_VERSION, _entry_value)


def decode_manifest_list(data: bytes, path: str = "") -> list[ManifestFileMeta]:
    """Decode the bytes of a ``manifest-list-*`` file, in file order. Extra fields (pypaimon's
    ``_TOTAL_BUCKETS`` / ``_EXTRA_FILES``) are ignored. Raises CorruptFile like :func:`decode_manifest`."""
    return _read(data, path, "manifest list", MANIFEST_LIST_VERSION, _meta_value)
