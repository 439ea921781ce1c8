"""DELETION_VECTORS index files (``index/index-<uuid>-0``, or in the bucket directory with
``index-file-in-data-file-dir``: ``TableScan.index_file_dir``) and their index-manifest records.

A DV index file is one version byte (``DV_FILE_VERSION``) followed by one record per data file (see ``codec``).
Its index-manifest record (shape of ``engine.dynamic_bucket.index_files.hash_record``) has ``_INDEX_TYPE``
"DELETION_VECTORS", ``_ROW_COUNT`` = number of data files with a vector in the file, and
``_DELETIONS_VECTORS_RANGES`` = ``{"f0": data file name, "f1": record offset, "f2": range length,
"_CARDINALITY": deleted positions}`` per data file.

Contract: readers return sorted unique np.int64 positions and raise CorruptFile naming the index file for a
missing file or bad bytes. Nothing is cached here; callers cache.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass

import numpy as np

from engine.deletion_vectors.codec import decode_dv, encode_dv, normalize_positions
from engine.dynamic_bucket.index_files import hash_record
from engine.errors import CorruptFile
from engine.io.file_io import FileIO

DV_INDEX = "DELETION_VECTORS"
DV_FILE_VERSION = 1
_MAX_FILE_SIZE = 2**31 - 1  # range offsets are Avro ints


@dataclass(frozen=True)
class DeletionFile:
    """Where the deletion vector of one data file is: the index file ``path``, the record's byte ``offset`` and the
    range ``length`` from the index manifest, and the number of deleted positions if recorded."""
    path: str
    offset: int
    length: int
    cardinality: int | None


def write_dv_index(file_io: FileIO, directory: str, vectors: dict[str, np.ndarray], *, bitmap64: bool,
                   partition: bytes, bucket: int, prefix: str = "index-") -> dict:
    """Write one new DV index file ``<prefix><uuid>-0`` in ``directory`` holding the vector of every data file in
    ``vectors`` (in sorted name order; empty vectors are skipped) and return its ADD index-manifest record. With no
    non-empty vector the file holds only the version byte and the record lists no ranges. Raises ValueError (as
    ``encode_dv``) before writing anything if a vector cannot be encoded, StorageError if the write fails."""
    chunks = [bytes([DV_FILE_VERSION])]
    position = 1
    ranges = []
    for data_file in sorted(vectors):
        values = normalize_positions(vectors[data_file], bitmap64)
        if values.size == 0:
            continue
        record, length = encode_dv(values, bitmap64)
        ranges.append({"f0": data_file, "f1": position, "f2": length, "_CARDINALITY": int(values.size)})
        chunks.append(record)
        position += len(record)
    if position > _MAX_FILE_SIZE:
        raise ValueError(f"a DV index file of {position} bytes is too large: range offsets must fit in an int32")
    name = f"{prefix}{uuid.uuid4()}-0"
    file_io.mkdirs(directory)
    file_io.write_bytes(f"{directory}/{name}", b"".join(chunks))
    record = hash_record(partition, bucket, name, position, len(ranges))
    record.update({"_INDEX_TYPE": DV_INDEX, "_DELETIONS_VECTORS_RANGES": ranges})
    return record


def deletion_files(records: list[dict], path_of) -> dict[str, DeletionFile]:
    """Data file name -> where its deletion vector is, from the DELETION_VECTORS records among ``records`` (the live
    index records of a snapshot; other index types are ignored); ``path_of(record)`` is the index file's path
    (``TableScan.index_file_path``). Raises CorruptFile if a data file has two."""
    out: dict[str, DeletionFile] = {}
    for record in records:
        if record["_INDEX_TYPE"] != DV_INDEX:
            continue
        path = path_of(record)
        for r in record.get("_DELETIONS_VECTORS_RANGES") or []:
            name = r["f0"]
            if name in out:
                raise CorruptFile(path, f"data file {name!r} has a second deletion vector (the first is in "
                                        f"{out[name].path} at offset {out[name].offset})")
            out[name] = DeletionFile(path, int(r["f1"]), int(r["f2"]), r.get("_CARDINALITY"))
    return out


def read_dv_index(file_io: FileIO, path: str, record: dict) -> dict[str, np.ndarray]:
    """Every deletion vector of the index file ``path`` of ``record`` (data file name -> positions), reading the file
    once. Checks the version byte, ``_FILE_SIZE``, each range (``decode_dv``) and each recorded cardinality. Raises
    CorruptFile naming the index file."""
    data = _read_index_file(file_io, path)
    if len(data) != record["_FILE_SIZE"]:
        raise CorruptFile(path, f"DV index file has {len(data)} bytes but the index manifest records "
                                f"{record['_FILE_SIZE']}")
    out: dict[str, np.ndarray] = {}
    for r in record.get("_DELETIONS_VECTORS_RANGES") or []:
        if r["f0"] in out:
            raise CorruptFile(path, f"the index manifest lists data file {r['f0']!r} twice for this DV index file")
        out[r["f0"]] = _decode(data, DeletionFile(path, int(r["f1"]), int(r["f2"]), r.get("_CARDINALITY")))
    return out


def read_deletion_vector(file_io: FileIO, deletion_file: DeletionFile) -> np.ndarray:
    """The positions of one deletion vector. Raises CorruptFile naming the index file (missing file, bad version
    byte, bad record, cardinality differing from the recorded one)."""
    return _decode(_read_index_file(file_io, deletion_file.path), deletion_file)


def _read_index_file(file_io: FileIO, path: str) -> bytes:
    """The bytes of the DV index file ``path`` after checking its version byte. Raises CorruptFile."""
    try:
        data = file_io.read_bytes(path)
    except FileNotFoundError:
        raise CorruptFile(path, "DV index file referenced by the index manifest is missing") from None
    if not data:
        raise CorruptFile(path, "DV index file is empty (no version byte)")
    if data[0] != DV_FILE_VERSION:
        raise CorruptFile(path, f"DV index file has version {data[0]}, expected {DV_FILE_VERSION}")
    return data


def _decode(data: bytes, deletion_file: DeletionFile) -> np.ndarray:
    positions = decode_dv(data, deletion_file.offset, deletion_file.length, deletion_file.path)
    if deletion_file.cardinality is not None and positions.size != deletion_file.cardinality:
        raise CorruptFile(deletion_file.path, f"deletion vector at offset {deletion_file.offset} holds "
                                              f"{positions.size} positions but the index manifest records "
                                              f"{deletion_file.cardinality}")
    return positions
