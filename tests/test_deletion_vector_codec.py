"""Deletion-vector bytes (engine.deletion_vectors.codec) and DV index files (engine.deletion_vectors.index_file).

Oracles: pyroaring (CRoaring's portable RoaringBitmap serialization, 32-bit and the 64-bit layout Paimon's
Bitmap64DeletionVector copies from Iceberg) and pypaimon 2.1's own deletion-vector reader and serializer.
"""
from __future__ import annotations

import os
import pickle
import struct
import zlib

import numpy as np
import pyroaring
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.deletion_vectors.codec import (
    MAGIC_32,
    MAGIC_64,
    MAX_POSITION_32,
    MAX_POSITION_64,
    decode_dv,
    deserialize_roaring32,
    encode_dv,
    serialize_roaring32,
)
from engine.deletion_vectors.index_file import (
    DV_INDEX,
    DeletionFile,
    deletion_files,
    read_deletion_vector,
    read_dv_index,
    write_dv_index,
)
from engine.dynamic_bucket.index_files import (decode_index_manifest, encode_index_manifest, hash_record, index_dir,
                                               index_path)
from engine.errors import CorruptFile
from engine.io.file_io import LocalFileIO


def root_paths(root):
    """Index file paths of a table rooted at ``root`` (no index-file-in-data-file-dir)."""
    return lambda record: index_path(root, record)


EMPTY_PARTITION = bytes(12)
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --- position-set strategies ------------------------------------------------------------------------------------
@st.composite
def dense_range(draw, top: int):
    """A run of consecutive positions long enough for bitmap containers (> 4096 per 2^16 key), with some holes."""
    length = draw(st.integers(4097, 140_000))
    start = draw(st.integers(0, top - length))
    values = np.arange(start, start + length, dtype=np.int64)
    holes = draw(st.lists(st.integers(0, length - 1), max_size=50))
    return np.delete(values, holes)


@st.composite
def multi_container(draw, top: int):
    """Values spread over several 2^16 keys, each key with a few to a few thousand values."""
    keys = draw(st.lists(st.integers(0, top >> 16), min_size=1, max_size=8, unique=True))
    parts = []
    for key in keys:
        count = draw(st.sampled_from([1, 3, 100, 4096, 4097, 9000]))
        seed = draw(st.integers(0, 2**32 - 1))
        low = np.random.default_rng(seed).choice(1 << 16, size=count, replace=False)
        parts.append((np.int64(key) << 16) + low)
    values = np.concatenate(parts)
    return values[values <= top]


def position_sets(top: int):
    """Position arrays (unsorted, with duplicates) in [0, top]: empty, tiny, dense, sparse, near the top, multi-key."""
    ints = st.integers(0, top)
    return st.one_of(
        st.just(np.empty(0, dtype=np.int64)),
        st.lists(st.integers(0, 20), max_size=5).map(lambda v: np.array(v, dtype=np.int64)),
        dense_range(top),
        st.lists(ints, min_size=1, max_size=300).map(lambda v: np.array(v, dtype=np.int64)),
        st.lists(st.integers(0, 70_000), min_size=1, max_size=200).map(lambda v: top - np.array(v, dtype=np.int64)),
        multi_container(top),
    ).map(lambda v: np.concatenate([v, v[: len(v) // 3]]))  # duplicates, unsorted tail


def reference(values: np.ndarray) -> np.ndarray:
    return np.unique(values).astype(np.int64)


# --- portable 32-bit RoaringBitmap ---------------------------------------------------------------------------
@FAST
@given(position_sets(MAX_POSITION_32))
def test_serialize_roaring32_is_read_by_pyroaring(values):
    expected = reference(values)
    data = serialize_roaring32(expected)
    assert pyroaring.BitMap.deserialize(data) == pyroaring.BitMap(expected.tolist())
    decoded, end = deserialize_roaring32(data, 0, "mem")
    assert end == len(data)
    assert decoded.dtype == np.int64
    np.testing.assert_array_equal(decoded, expected)


@FAST
@given(position_sets(2**32 - 1), st.booleans())
def test_deserialize_roaring32_reads_pyroaring_with_and_without_runs(values, run_optimize):
    bitmap = pyroaring.BitMap(reference(values).tolist(), optimize=False)  # optimize=True would add runs
    if run_optimize:
        bitmap.run_optimize()
    else:
        assert struct.unpack_from("<H", bitmap.serialize())[0] == 12346  # no run containers
    data = b"pad" + bitmap.serialize() + b"tail"
    decoded, end = deserialize_roaring32(data, 3, "mem")
    assert end == len(data) - 4
    np.testing.assert_array_equal(decoded, np.array(list(bitmap), dtype=np.int64))


@pytest.mark.parametrize("keys", [1, 3, 4, 5])
def test_run_containers_with_and_without_offsets(keys):
    """With run containers the offsets are written only for 4 or more containers: both layouts decode. Each bitmap
    mixes run, bitmap and array containers."""
    values = []
    for key in range(keys):
        base = key << 16
        kind = key % 3
        if kind == 0:
            values += range(base + 10, base + 30000)  # one run
        elif kind == 1:
            values += range(base, base + 20000, 2)  # bitmap container: no runs worth encoding
        else:
            values += [base + 7, base + 9, base + 60000]  # array container
    bitmap = pyroaring.BitMap(values)
    bitmap.run_optimize()
    data = bitmap.serialize()
    assert struct.unpack_from("<I", data)[0] & 0xFFFF == 12347  # run cookie: run containers are present
    decoded, end = deserialize_roaring32(data, 0, "mem")
    assert end == len(data)
    np.testing.assert_array_equal(decoded, np.array(values, dtype=np.int64))


def test_serialize_roaring32_known_bytes():
    assert serialize_roaring32(np.array([1, 3])) == bytes.fromhex("3a300000" "01000000" "00000100" "10000000"
                                                                  "0100" "0300")
    assert serialize_roaring32(np.empty(0, dtype=np.int64)) == bytes.fromhex("3a300000" "00000000")


@pytest.mark.parametrize("values", [[3, 1], [1, 1], [-1], [2**32]])
def test_serialize_roaring32_rejects_bad_values(values):
    with pytest.raises(ValueError):
        serialize_roaring32(np.array(values, dtype=np.int64))


def _roaring(cookie_and_count: bytes, headers: list[tuple[int, int]], offsets: bool, body: bytes) -> bytes:
    out = cookie_and_count + b"".join(struct.pack("<HH", k, c - 1) for k, c in headers)
    if offsets:
        out += bytes(4 * len(headers))
    return out + body


NO_RUN = struct.pack("<II", 12346, 1)


@pytest.mark.parametrize("data, message", [
    (struct.pack("<II", 12345, 0), "unknown cookie"),
    (struct.pack("<II", 12346, 70000), "containers"),
    (_roaring(NO_RUN, [(0, 2)], True, struct.pack("<HH", 5, 5)), "not sorted and unique"),
    (_roaring(NO_RUN, [(0, 2)], True, struct.pack("<HH", 5, 3)), "not sorted and unique"),
    (_roaring(struct.pack("<II", 12346, 2), [(1, 1), (0, 1)], True, struct.pack("<HH", 5, 3)), "out of order"),
    (_roaring(NO_RUN, [(0, 5000)], True, bytes(8192)), "holds 0 values"),
    # run cookie for 1 container, run flag set: runs (0, len 10) and (5, len 10) overlap
    (_roaring(struct.pack("<IB", 12347, 1), [(0, 20)], False, struct.pack("<HHHHH", 2, 0, 9, 5, 9)),
     "out of order, overlapping"),
    (_roaring(struct.pack("<IB", 12347, 1), [(0, 20)], False, struct.pack("<HHH", 1, 65530, 9)), "past 65535"),
    (_roaring(struct.pack("<IB", 12347, 1), [(0, 20)], False, struct.pack("<HHH", 1, 0, 9)), "holds 10 values"),
])
def test_deserialize_roaring32_rejects_invalid(data, message):
    with pytest.raises(CorruptFile, match=message) as info:
        deserialize_roaring32(data, 0, "/t/index/x")
    assert info.value.path == "/t/index/x"


def test_deserialize_roaring32_rejects_every_truncation():
    values = list(range(0, 300_000, 7)) + list(range(500_000, 600_000))
    run_optimized = pyroaring.BitMap(values)
    run_optimized.run_optimize()
    for data in (serialize_roaring32(np.array(values)), run_optimized.serialize()):
        for cut in list(range(0, 64)) + list(range(64, len(data), 997)) + [len(data) - 1]:
            with pytest.raises(CorruptFile, match="truncated"):
                deserialize_roaring32(data[:cut], 0, "mem")


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_deserialize_roaring32_on_mutated_bytes_returns_a_set_or_raises_corrupt(data):
    bitmap = pyroaring.BitMap(list(range(0, 70_000, 3)) + [200_000, 200_002] + list(range(300_000, 310_000)),
                              optimize=False)
    if data.draw(st.booleans()):
        bitmap.run_optimize()
    buf = bytearray(bitmap.serialize())
    for _ in range(data.draw(st.integers(1, 4))):
        buf[data.draw(st.integers(0, len(buf) - 1))] = data.draw(st.integers(0, 255))
    try:
        values, end = deserialize_roaring32(bytes(buf), 0, "mem")
    except CorruptFile:
        return
    assert end <= len(buf)
    assert values.dtype == np.int64
    assert np.all(values[1:] > values[:-1]) and (values.size == 0 or 0 <= values[0] <= values[-1] < 2**32)


# --- deletion vector records ---------------------------------------------------------------------------------
@FAST
@given(position_sets(MAX_POSITION_32))
def test_encode_decode_round_trip_32(values):
    record, length = encode_dv(values, bitmap64=False)
    (size,) = struct.unpack_from(">i", record)
    assert length == size == len(record) - 8
    assert struct.unpack_from(">i", record, 4)[0] == MAGIC_32
    data = b"\x01" + b"junk" + record + b"more"
    np.testing.assert_array_equal(decode_dv(data, 5, length, "f"), reference(values))


@FAST
@given(st.one_of(position_sets(MAX_POSITION_32),
                 position_sets(MAX_POSITION_64),
                 st.lists(st.tuples(st.integers(0, 5), st.integers(0, 2**32 - 1)), min_size=1, max_size=200)
                 .map(lambda kv: np.array([(k << 32) | low for k, low in kv], dtype=np.int64))))
def test_encode_decode_round_trip_64(values):
    record, length = encode_dv(values, bitmap64=True)
    (size,) = struct.unpack_from(">i", record)
    assert length == size + 8 == len(record)
    assert struct.unpack_from("<i", record, 4)[0] == MAGIC_64
    expected = reference(values)
    np.testing.assert_array_equal(decode_dv(b"\x01" + record, 1, length, "f"), expected)
    # the bitmap data after the magic is CRoaring's (and Iceberg's) portable 64-bit layout
    assert pyroaring.BitMap64.deserialize(record[8:-4]) == pyroaring.BitMap64(expected.tolist())


@FAST
@given(position_sets(2**40), st.booleans())
def test_decode_dv_reads_pyroaring_64_bit_bitmaps(values, run_optimize):
    """Java run-optimizes before writing and writes an (empty) bitmap for every key below the largest: decode
    CRoaring's 64-bit serialization wrapped in a record, including run containers and empty bitmaps."""
    bitmap = pyroaring.BitMap64(reference(values).tolist(), optimize=False)
    if run_optimize:
        bitmap.run_optimize()
    data = struct.pack("<i", MAGIC_64) + bitmap.serialize()
    record = struct.pack(">i", len(data)) + data + struct.pack(">I", zlib.crc32(data))
    np.testing.assert_array_equal(decode_dv(record, 0, len(record), "f"), np.array(list(bitmap), dtype=np.int64))


def test_decode_dv_accepts_empty_bitmaps_for_missing_keys():
    """Java's OptimizedRoaringBitmap64 serializes one bitmap per key up to the largest, empty ones included."""
    empty = serialize_roaring32(np.empty(0, dtype=np.int64))
    data = (struct.pack("<iq", MAGIC_64, 3) + struct.pack("<i", 0) + empty + struct.pack("<i", 1) + empty
            + struct.pack("<i", 2) + serialize_roaring32(np.array([7])))
    record = struct.pack(">i", len(data)) + data + struct.pack(">I", zlib.crc32(data))
    np.testing.assert_array_equal(decode_dv(record, 0, len(data) + 8, "f"), [(2 << 32) + 7])


def test_known_bytes_32():
    record, length = encode_dv(np.array([3, 1, 3]), bitmap64=False)
    bitmap = bytes.fromhex("3a300000" "01000000" "00000100" "10000000" "0100" "0300")
    assert record[:4] == (24).to_bytes(4, "big")  # magic (4) + bitmap (20)
    assert record[4:8] == bytes.fromhex("5e43f2d0") == MAGIC_32.to_bytes(4, "big")
    assert record[8:-4] == bitmap
    assert record[-4:] == bytes.fromhex("da2d59d3") == zlib.crc32(record[4:-4]).to_bytes(4, "big")
    assert length == 24 and len(record) == 32


def test_known_bytes_64():
    record, length = encode_dv(np.array([3, 1]), bitmap64=True)
    bitmap = bytes.fromhex("3a300000" "01000000" "00000100" "10000000" "0100" "0300")
    assert record[:4] == (36).to_bytes(4, "big")  # magic (4) + count (8) + key (4) + bitmap (20)
    assert record[4:8] == MAGIC_64.to_bytes(4, "little") == bytes.fromhex("d1d33964")
    assert record[8:16] == (1).to_bytes(8, "little") and record[16:20] == bytes(4)
    assert record[20:-4] == bitmap
    assert record[-4:] == zlib.crc32(record[4:-4]).to_bytes(4, "big")
    assert length == 44 == len(record)


def test_empty_vector_round_trips():
    for bitmap64 in (False, True):
        record, length = encode_dv(np.array([], dtype=np.int64), bitmap64)
        assert decode_dv(record, 0, length, "f").size == 0


@pytest.mark.parametrize("positions, bitmap64, message", [
    ([0, MAX_POSITION_32 + 1], False, "exceeds 2147483647"),
    ([-1, 5], False, ">= 0"),
    ([-1], True, ">= 0"),
    ([MAX_POSITION_64 + 1], True, "exceeds"),
    (np.array([2**64 - 1], dtype=np.uint64), True, "exceeds"),
    ([1.5], False, "integers"),
])
def test_encode_rejects_positions_the_format_cannot_hold(positions, bitmap64, message):
    with pytest.raises(ValueError, match=message):
        encode_dv(np.asarray(positions), bitmap64)


def test_encode_accepts_the_largest_positions():
    for bitmap64, top in ((False, MAX_POSITION_32), (True, MAX_POSITION_64)):
        record, length = encode_dv(np.array([top, 0, 2**31 - 1], dtype=np.uint64), bitmap64)
        np.testing.assert_array_equal(decode_dv(record, 0, length, "f"), sorted({0, 2**31 - 1, top}))


def _record(bitmap64: bool) -> tuple[bytes, int]:
    record, length = encode_dv(np.array([1, 5, 70000, 70001]), bitmap64)
    return b"\x01" + record, length


@pytest.mark.parametrize("bitmap64", [False, True])
def test_decode_dv_rejects_corruption(bitmap64):
    data, length = _record(bitmap64)
    where = "/t/index/index-x-0"

    def corrupt(buf, offset=1, n=length):
        with pytest.raises(CorruptFile) as info:
            decode_dv(bytes(buf), offset, n, where)
        assert info.value.path == where
        return str(info.value)

    flipped_crc = bytearray(data)
    flipped_crc[-1] ^= 0x01
    assert "CRC" in corrupt(flipped_crc)
    flipped_bitmap = bytearray(data)
    flipped_bitmap[-6] ^= 0x10
    assert "CRC" in corrupt(flipped_bitmap)
    assert "runs past the end" in corrupt(data[:-1])
    assert "runs past the end" in corrupt(data[:len(data) // 2])
    assert "outside the file" in corrupt(data[:6])
    assert "does not match the length" in corrupt(data, n=length + 1)
    assert "does not match the length" in corrupt(data, n=length - 8)
    bad_magic = bytearray(data)
    bad_magic[5:9] = b"\x00\x00\x00\x01"
    assert "unknown magic" in corrupt(bad_magic)
    assert "outside the file" in corrupt(data, offset=len(data) - 4)


@pytest.mark.parametrize("bitmap64", [False, True])
def test_decode_dv_rejects_bytes_after_the_bitmap(bitmap64):
    """A record whose CRC is right but whose bitmap does not fill it (a writer bug) is rejected."""
    record, _ = encode_dv(np.array([4, 9]), bitmap64)
    data = record[4:-4] + b"\x00\x00"
    padded = struct.pack(">i", len(data)) + data + struct.pack(">I", zlib.crc32(data))
    length = len(data) + 8 if bitmap64 else len(data)
    with pytest.raises(CorruptFile, match="bitmap ends at offset"):
        decode_dv(padded, 0, length, "f")


def test_decode_dv_rejects_bad_64_bit_keys():
    def record(keys: list[int], count: int | None = None) -> bytes:
        body = b"".join(struct.pack("<i", k) + serialize_roaring32(np.array([1])) for k in keys)
        data = struct.pack("<iq", MAGIC_64, len(keys) if count is None else count) + body
        return struct.pack(">i", len(data)) + data + struct.pack(">I", zlib.crc32(data))

    for keys, message in (([2, 1], "keys must ascend"), ([1, 1], "keys must ascend"), ([-1], "keys must ascend"),
                          ([2**31 - 1], "keys must ascend")):
        data = record(keys)
        with pytest.raises(CorruptFile, match=message):
            decode_dv(data, 0, len(data), "f")
    for count in (-1, 5, 2**40):
        data = record([0, 1], count)
        with pytest.raises(CorruptFile, match="claims"):
            decode_dv(data, 0, len(data), "f")


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_decode_dv_on_mutated_bytes_returns_positions_or_raises_corrupt(data):
    bitmap64 = data.draw(st.booleans())
    buf, length = _record(bitmap64)
    buf = bytearray(buf)
    for _ in range(data.draw(st.integers(1, 3))):
        buf[data.draw(st.integers(0, len(buf) - 1))] = data.draw(st.integers(0, 255))
    try:
        values = decode_dv(bytes(buf), 1, length, "f")
    except CorruptFile:
        return
    np.testing.assert_array_equal(values, [1, 5, 70000, 70001])  # only mutations of the version byte survive


# --- pypaimon as the oracle ------------------------------------------------------------------------------------
def _pypaimon_read(path: str, df: DeletionFile) -> list[int]:
    from pypaimon.common.file_io import FileIO as PyPaimonFileIO
    from pypaimon.deletionvectors import DeletionVector
    from pypaimon.table.source.deletion_file import DeletionFile as PyPaimonDeletionFile

    dv = DeletionVector.read(PyPaimonFileIO.get(path), PyPaimonDeletionFile(
        dv_index_path=df.path, offset=df.offset, length=df.length, cardinality=df.cardinality))
    assert dv.get_cardinality() == df.cardinality
    return dv.bit_map().to_list()


@pytest.mark.interop
@FAST
@given(st.lists(position_sets(MAX_POSITION_32), min_size=1, max_size=4))
def test_pypaimon_reads_the_32_bit_index_file(tmp_path_factory, vectors):
    """pypaimon 2.1's DeletionVector.read reads every range of a lakemerge-written 32-bit DV index file.

    The 64-bit format is not tested against pypaimon: its reader accepts only the big-endian 32-bit magic and
    raises "Invalid magic number" for a Bitmap64DeletionVector record (pyroaring.BitMap64 is its oracle here)."""
    root = str(tmp_path_factory.mktemp("t"))
    vectors = {f"data-{i}.parquet": v for i, v in enumerate(vectors)}
    record = write_dv_index(LocalFileIO(), index_dir(root), vectors, bitmap64=False, partition=EMPTY_PARTITION,
                            bucket=0)
    files = deletion_files([record], root_paths(root))
    assert set(files) == {name for name, v in vectors.items() if v.size}
    for name, df in files.items():
        assert _pypaimon_read(root, df) == reference(vectors[name]).tolist()


@pytest.mark.interop
@FAST
@given(position_sets(MAX_POSITION_32), st.booleans())
def test_pypaimon_serialized_vectors_decode(values, run_optimize):
    """Records from pypaimon's BitmapDeletionVector.serialize decode to its positions; Java run-optimizes its
    bitmaps before writing, so that variant is read as well. Without run containers the bytes equal ours."""
    from pypaimon.deletionvectors import BitmapDeletionVector
    from pypaimon.utils.roaring_bitmap import RoaringBitmap

    bitmap = pyroaring.BitMap(reference(values).tolist(), optimize=False)
    if run_optimize:
        bitmap.run_optimize()
    record = BitmapDeletionVector(RoaringBitmap.deserialize(bitmap.serialize())).serialize()
    (size,) = struct.unpack_from(">i", record)
    np.testing.assert_array_equal(decode_dv(record, 0, size, "f"), reference(values))
    if not run_optimize:
        assert record == encode_dv(values, bitmap64=False)[0]


# --- index files -----------------------------------------------------------------------------------------------
VECTORS = {
    "data-b.parquet": np.array([9, 2, 2, 70_000]),
    "data-a.parquet": np.arange(0, 20_000, dtype=np.int64),
    "data-empty.parquet": np.array([], dtype=np.int64),
    "data-c.parquet": np.array([MAX_POSITION_32]),
}


@pytest.mark.parametrize("bitmap64", [False, True])
def test_write_and_read_dv_index(tmp_path, bitmap64):
    root = str(tmp_path / "t")
    io = LocalFileIO()
    partition = b"\x00\x00\x00\x01" + bytes(16)
    record = write_dv_index(io, index_dir(root), VECTORS, bitmap64=bitmap64, partition=partition, bucket=3)

    assert set(record) == set(hash_record(partition, 3, "x", 0, 0))
    assert record["_INDEX_TYPE"] == DV_INDEX
    assert (record["_VERSION"], record["_KIND"], record["_PARTITION"], record["_BUCKET"]) == (1, 0, partition, 3)
    assert record["_EXTERNAL_PATH"] is None and record["_GLOBAL_INDEX"] is None
    assert record["_FILE_NAME"].startswith("index-") and record["_FILE_NAME"].endswith("-0")
    path = os.path.join(root, "index", record["_FILE_NAME"])
    assert index_path(root, record) == path
    data = LocalFileIO().read_bytes(path)
    assert data[0] == 1 and record["_FILE_SIZE"] == len(data)
    assert record["_ROW_COUNT"] == 3
    ranges = record["_DELETIONS_VECTORS_RANGES"]
    assert [r["f0"] for r in ranges] == ["data-a.parquet", "data-b.parquet", "data-c.parquet"]
    assert [r["_CARDINALITY"] for r in ranges] == [20_000, 3, 1]
    assert ranges[0]["f1"] == 1
    for r, following in zip(ranges, ranges[1:] + [None]):
        record_bytes = r["f2"] + (0 if bitmap64 else 8)
        assert (following["f1"] if following else len(data)) == r["f1"] + record_bytes

    # the record survives the index manifest's Avro schema
    (decoded,) = decode_index_manifest(encode_index_manifest([record]), "m")
    assert decoded["_DELETIONS_VECTORS_RANGES"] == ranges

    expected = {name: reference(v) for name, v in VECTORS.items() if v.size}
    got = read_dv_index(io, index_path(root, decoded), decoded)
    assert set(got) == set(expected)
    for name in expected:
        np.testing.assert_array_equal(got[name], expected[name])

    files = deletion_files([hash_record(partition, 3, "index-h-0", 8, 2), decoded], root_paths(root))
    assert set(files) == set(expected)
    for name, df in files.items():
        assert df == pickle.loads(pickle.dumps(df))
        assert df.path == path and df.cardinality == expected[name].size
        np.testing.assert_array_equal(read_deletion_vector(io, df), expected[name])


def test_write_dv_index_with_no_vectors_writes_only_the_version_byte(tmp_path):
    root = str(tmp_path)
    record = write_dv_index(LocalFileIO(), index_dir(root), {"d.parquet": np.array([], dtype=np.int64)}, bitmap64=False,
                            partition=EMPTY_PARTITION, bucket=0)
    assert record["_ROW_COUNT"] == 0 and record["_DELETIONS_VECTORS_RANGES"] == [] and record["_FILE_SIZE"] == 1
    assert read_dv_index(LocalFileIO(), index_path(root, record), record) == {}


def test_write_dv_index_rejects_bad_positions_before_writing(tmp_path):
    with pytest.raises(ValueError, match="exceeds"):
        write_dv_index(LocalFileIO(), index_dir(str(tmp_path)), {"a": np.array([1]), "b": np.array([2**31])},
                       bitmap64=False, partition=EMPTY_PARTITION, bucket=0)
    assert not os.path.exists(tmp_path / "index") or not os.listdir(tmp_path / "index")


def test_external_path_is_honoured(tmp_path):
    io = LocalFileIO()
    record = write_dv_index(io, index_dir(str(tmp_path / "t")), {"d.parquet": np.array([4])}, bitmap64=False,
                            partition=EMPTY_PARTITION, bucket=0)
    external = str(tmp_path / "elsewhere")
    os.rename(index_path(str(tmp_path / "t"), record), external)
    moved = {**record, "_EXTERNAL_PATH": external}
    assert index_path(str(tmp_path / "t"), moved) == external
    np.testing.assert_array_equal(read_dv_index(io, index_path(str(tmp_path / "t"), moved), moved)["d.parquet"], [4])
    (df,) = deletion_files([moved], root_paths(str(tmp_path / "t"))).values()
    assert df.path == external


def test_a_data_file_with_two_vectors_is_corrupt(tmp_path):
    io = LocalFileIO()
    one = write_dv_index(io, index_dir(str(tmp_path)), {"d.parquet": np.array([4])}, bitmap64=False,
                         partition=EMPTY_PARTITION, bucket=0)
    two = write_dv_index(io, index_dir(str(tmp_path)), {"d.parquet": np.array([5])}, bitmap64=False,
                         partition=EMPTY_PARTITION, bucket=0)
    with pytest.raises(CorruptFile, match="second deletion vector"):
        deletion_files([one, two], root_paths(str(tmp_path)))
    doubled = {**one, "_DELETIONS_VECTORS_RANGES": one["_DELETIONS_VECTORS_RANGES"] * 2}
    with pytest.raises(CorruptFile, match="twice"):
        read_dv_index(io, index_path(str(tmp_path), doubled), doubled)


def _written(tmp_path) -> tuple[LocalFileIO, str, dict, str]:
    io = LocalFileIO()
    root = str(tmp_path)
    record = write_dv_index(io, index_dir(root), {"a.parquet": np.array([1, 2]), "b.parquet": np.array([3])},
                            bitmap64=False,
                            partition=EMPTY_PARTITION, bucket=0)
    return io, root, record, index_path(root, record)


def _rewrite(path: str, data: bytes) -> None:
    os.unlink(path)
    with open(path, "wb") as f:
        f.write(data)


def test_index_file_corruption_is_reported_with_the_path(tmp_path):
    io, root, record, path = _written(tmp_path)
    original = io.read_bytes(path)
    df = deletion_files([record], root_paths(root))["b.parquet"]

    _rewrite(path, b"\x02" + original[1:])
    for read in (lambda: read_dv_index(io, index_path(root, record), record), lambda: read_deletion_vector(io, df)):
        with pytest.raises(CorruptFile, match="version 2") as info:
            read()
        assert info.value.path == path

    _rewrite(path, original[:-1])
    with pytest.raises(CorruptFile, match="records"):
        read_dv_index(io, index_path(root, record), record)  # _FILE_SIZE no longer matches
    with pytest.raises(CorruptFile, match="runs past the end"):
        read_deletion_vector(io, df)

    _rewrite(path, original[:-1] + bytes([original[-1] ^ 0xFF]))
    with pytest.raises(CorruptFile, match="CRC"):
        read_dv_index(io, index_path(root, record), record)

    _rewrite(path, b"")
    with pytest.raises(CorruptFile, match="empty"):
        read_deletion_vector(io, df)

    _rewrite(path, original)
    with pytest.raises(CorruptFile, match="holds 1 positions but the index manifest records 2"):
        read_deletion_vector(io, DeletionFile(df.path, df.offset, df.length, 2))
    with pytest.raises(CorruptFile, match="does not match the length"):
        read_deletion_vector(io, DeletionFile(df.path, df.offset, df.length + 1, None))

    os.unlink(path)
    for read in (lambda: read_dv_index(io, index_path(root, record), record), lambda: read_deletion_vector(io, df)):
        with pytest.raises(CorruptFile, match="DV index file referenced by the index manifest is missing") as info:
            read()
        assert info.value.path == path


def test_deletion_file_is_frozen_and_picklable():
    df = DeletionFile("/t/index/index-1-0", 1, 24, None)
    assert pickle.loads(pickle.dumps(df)) == df
    with pytest.raises(AttributeError):
        df.offset = 2  # type: ignore[misc]
