"""The index manifest (``manifest/index-manifest-<uuid>``) and HASH index files (``index/index-<uuid>-0``).

Format (Paimon's IndexManifestEntry, as Java and pypaimon 2.1 write it): an Avro container of records
``_VERSION`` (1), ``_KIND`` (0 = ADD), ``_PARTITION`` (serialized BinaryRow), ``_BUCKET``, ``_INDEX_TYPE``
("HASH", "DELETION_VECTORS", ...), ``_FILE_NAME``, ``_FILE_SIZE``, ``_ROW_COUNT`` and optional
``_DELETIONS_VECTORS_RANGES`` / ``_EXTERNAL_PATH`` / ``_GLOBAL_INDEX``. A snapshot's index manifest lists every
live index file. A HASH index file is the bucket's key hashes (BinaryRow hash codes of the trimmed primary key)
as big-endian int32s; ``_ROW_COUNT`` is their number.

How a commit changes the records: engine.commit.index_changes.
"""
from __future__ import annotations

import io
import uuid

import fastavro
import numpy as np

from engine.errors import CorruptFile
from engine.io.file_io import FileIO

HASH_INDEX = "HASH"
INDEX_ENTRY_VERSION = 1
INDEX_MANIFEST_PREFIX = "index-manifest-"

_DV_META = {"type": "record", "name": "DeletionVectorMeta", "fields": [
    {"name": "f0", "type": "string"}, {"name": "f1", "type": "int"}, {"name": "f2", "type": "int"},
    {"name": "_CARDINALITY", "type": ["null", "long"], "default": None}]}
_GLOBAL_INDEX_META = {"type": "record", "name": "GlobalIndexMeta", "fields": [
    {"name": "_ROW_RANGE_START", "type": "long"}, {"name": "_ROW_RANGE_END", "type": "long"},
    {"name": "_INDEX_FIELD_ID", "type": "int"},
    {"name": "_EXTRA_FIELD_IDS", "type": ["null", {"type": "array", "items": "int"}], "default": None},
    {"name": "_INDEX_META", "type": ["null", "bytes"], "default": None},
    {"name": "_SOURCE_META", "type": ["null", "bytes"], "default": None}]}
INDEX_MANIFEST_SCHEMA = {"type": "record", "name": "IndexManifestEntry", "fields": [
    {"name": "_VERSION", "type": "int"}, {"name": "_KIND", "type": "int"}, {"name": "_PARTITION", "type": "bytes"},
    {"name": "_BUCKET", "type": "int"}, {"name": "_INDEX_TYPE", "type": "string"},
    {"name": "_FILE_NAME", "type": "string"}, {"name": "_FILE_SIZE", "type": "long"},
    {"name": "_ROW_COUNT", "type": "long"},
    {"name": "_DELETIONS_VECTORS_RANGES", "type": ["null", {"type": "array", "items": _DV_META}], "default": None},
    {"name": "_EXTERNAL_PATH", "type": ["null", "string"], "default": None},
    {"name": "_GLOBAL_INDEX", "type": ["null", _GLOBAL_INDEX_META], "default": None}]}


def hash_record(partition: bytes, bucket: int, file_name: str, file_size: int, row_count: int) -> dict:
    """An ADD record for a HASH index file."""
    return {"_VERSION": INDEX_ENTRY_VERSION, "_KIND": 0, "_PARTITION": partition, "_BUCKET": int(bucket),
            "_INDEX_TYPE": HASH_INDEX, "_FILE_NAME": file_name, "_FILE_SIZE": int(file_size),
            "_ROW_COUNT": int(row_count), "_DELETIONS_VECTORS_RANGES": None, "_EXTERNAL_PATH": None,
            "_GLOBAL_INDEX": None}


def decode_index_manifest(data: bytes, path: str) -> list[dict]:
    """Records of an index manifest. Raises CorruptFile."""
    try:
        records = list(fastavro.reader(io.BytesIO(data)))
    except Exception as e:  # noqa: BLE001 - fastavro raises many types on bad input
        raise CorruptFile(path, f"cannot read index manifest Avro: {e!r}") from None
    for i, r in enumerate(records):
        if not isinstance(r, dict) or any(k not in r for k in ("_PARTITION", "_BUCKET", "_INDEX_TYPE",
                                                               "_FILE_NAME", "_ROW_COUNT")):
            raise CorruptFile(path, f"index manifest record {i} is incomplete")
    return records


def encode_index_manifest(records: list[dict]) -> bytes:
    """Return ``records`` encoded as a zstd-compressed Avro index manifest."""
    buf = io.BytesIO()
    fastavro.writer(buf, INDEX_MANIFEST_SCHEMA, [{f["name"]: r.get(f["name"]) for f in INDEX_MANIFEST_SCHEMA["fields"]}
                                                 for r in records], codec="zstandard")
    return buf.getvalue()


def read_index_manifest(file_io: FileIO, paths, name: str | None) -> list[dict]:
    """Records of the named index manifest ([] for None). Raises CorruptFile if it is missing or unreadable."""
    if not name:
        return []
    path = paths.manifest(name)
    try:
        return decode_index_manifest(file_io.read_bytes(path), path)
    except FileNotFoundError:
        raise CorruptFile(path, "index manifest referenced by a snapshot is missing") from None


def write_index_manifest(file_io: FileIO, paths, records: list[dict]) -> str:
    """Write ``records`` as a new, uniquely named index manifest in the manifest directory and return its name."""
    name = f"{INDEX_MANIFEST_PREFIX}{uuid.uuid4()}-0"
    file_io.mkdirs(paths.manifest_dir)
    file_io.write_bytes(paths.manifest(name), encode_index_manifest(records))
    return name


# --- HASH index files --------------------------------------------------------------------------------------
def index_dir(table_root: str) -> str:
    """Return the table's index directory path."""
    return f"{table_root}/index"


def index_path(table_root: str, record: dict, bucket_dir: str | None = None) -> str:
    """The path of the index file of ``record``: its ``_EXTERNAL_PATH`` if set, else the file in ``bucket_dir`` (tables
    with ``index-file-in-data-file-dir``) or in ``<table>/index``. ``TableScan.index_file_path`` decides which."""
    if record.get("_EXTERNAL_PATH"):
        from engine.data_paths import local_file_path
        return local_file_path(record["_EXTERNAL_PATH"], record["_FILE_NAME"])
    return f"{bucket_dir or index_dir(table_root)}/{record['_FILE_NAME']}"


def read_hashes(file_io: FileIO, path: str, record: dict) -> np.ndarray:
    """The int32 key hashes of HASH index file ``path`` of ``record``. Raises CorruptFile."""
    try:
        data = file_io.read_bytes(path)
    except FileNotFoundError:
        raise CorruptFile(path, "HASH index file referenced by the index manifest is missing") from None
    if len(data) % 4 or len(data) // 4 != record["_ROW_COUNT"]:
        raise CorruptFile(path, f"HASH index has {len(data)} bytes but the index manifest records "
                                f"{record['_ROW_COUNT']} hashes")
    return np.frombuffer(data, dtype=">i4").astype(np.int32)


def write_hashes(file_io: FileIO, directory: str, hashes: np.ndarray) -> tuple[str, int]:
    """Write a HASH index file (sorted hashes) in ``directory``; returns (file name, size)."""
    name = f"index-{uuid.uuid4()}-0"
    data = np.sort(np.asarray(hashes, dtype=np.int32)).astype(">i4").tobytes()
    file_io.mkdirs(directory)
    file_io.write_bytes(f"{directory}/{name}", data)
    return name, len(data)
