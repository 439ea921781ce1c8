"""The bytes of one deletion vector (the deleted row positions of one data file), as Paimon writes them.

A record in a DV index file is ``int32 BE size``, ``size`` bytes of bitmap data, ``int32 BE CRC32`` of those bytes.
Bitmap data is one of (told apart by the magic in its first four bytes):

* 32-bit (Java ``BitmapDeletionVector``, the default): ``int32 BE MAGIC_32`` + a portable RoaringBitmap.
  Positions must be <= 2147483647. The index manifest records the range length ``size``.
* 64-bit (``deletion-vectors.bitmap64``, Java ``Bitmap64DeletionVector``, Iceberg's layout): ``int32 LE MAGIC_64``,
  ``int64 LE`` bitmap count, then per bitmap ``int32 LE`` key (high 32 bits, ascending, 0..2^31-2) + a portable
  RoaringBitmap of the low 32 bits. The range length is ``size + 8`` (it includes the size and CRC ints).

Portable RoaringBitmap (RoaringFormatSpec): reading supports array, bitmap and run containers; writing uses only
array and bitmap containers with the no-run cookie, which every reader accepts.

Contract: encoders raise ValueError for positions they cannot represent; decoders return sorted, unique np.int64
positions or raise ``CorruptFile(where, ...)`` naming what is wrong, never another exception on bad bytes.
"""
from __future__ import annotations

import struct
import zlib

import numpy as np

from engine.errors import CorruptFile

MAGIC_32 = 1581511376
MAGIC_64 = 1681511377
MAX_POSITION_32 = 2**31 - 1
# Java's OptimizedRoaringBitmap64.MAX_VALUE: key Integer.MAX_VALUE - 1, low 32 bits 0x80000000.
MAX_POSITION_64 = ((2**31 - 2) << 32) | 0x80000000

_SERIAL_COOKIE = 12347  # run containers present; container count in the high 16 bits
_SERIAL_COOKIE_NO_RUNCONTAINER = 12346
_NO_OFFSET_THRESHOLD = 4  # with the run cookie, offsets are written only for this many containers or more
_ARRAY_MAX = 4096  # containers with more values are bitmap containers (unless run-encoded)
_BITMAP_BYTES = 8192
_MAX_KEY_64 = 2**31 - 2


# --- portable 32-bit RoaringBitmap ---------------------------------------------------------------------------
def serialize_roaring32(values: np.ndarray) -> bytes:
    """The portable RoaringBitmap serialization of ``values`` (sorted, unique integers in [0, 2^32)), using array
    and bitmap containers only. Raises ValueError if ``values`` are not such integers."""
    v = np.asarray(values).ravel()
    if v.size == 0:
        return struct.pack("<II", _SERIAL_COOKIE_NO_RUNCONTAINER, 0)
    if v.dtype.kind not in "iu":
        raise ValueError(f"roaring bitmap values must be integers, got dtype {v.dtype}")
    if v.min() < 0 or v.max() > 0xFFFFFFFF:
        raise ValueError("roaring bitmap values must lie in [0, 2^32)")
    v = v.astype(np.int64, copy=False)
    if v.size > 1 and not np.all(v[1:] > v[:-1]):
        raise ValueError("roaring bitmap values must be sorted and unique")
    keys = v >> 16
    low = v & 0xFFFF
    starts = _group_starts(keys)
    ends = np.append(starts[1:], v.size)
    cards = ends - starts
    n = starts.size
    header = np.empty((n, 2), dtype="<u2")
    header[:, 0] = keys[starts]
    header[:, 1] = cards - 1
    sizes = np.where(cards > _ARRAY_MAX, _BITMAP_BYTES, 2 * cards)
    offsets = (8 + 8 * n + np.cumsum(sizes) - sizes).astype("<u4")
    parts = [struct.pack("<II", _SERIAL_COOKIE_NO_RUNCONTAINER, n), header.tobytes(), offsets.tobytes()]
    packed = low.astype("<u2")  # array containers are their low 16 bits, back to back
    done = 0
    for i in np.flatnonzero(cards > _ARRAY_MAX).tolist():
        parts.append(packed[done:starts[i]].tobytes())
        bits = np.zeros(1 << 16, dtype=np.uint8)
        bits[low[starts[i]:ends[i]]] = 1
        parts.append(np.packbits(bits, bitorder="little").tobytes())
        done = ends[i]
    parts.append(packed[done:].tobytes())
    return b"".join(parts)


def deserialize_roaring32(buf, start: int, where: str) -> tuple[np.ndarray, int]:
    """Decode the portable RoaringBitmap starting at byte ``start`` of ``buf`` (bytes-like; nothing past its end is
    read). Returns (sorted unique np.int64 values, offset just past the bitmap). Raises CorruptFile(where, ...) for
    a bad cookie, truncation, keys or values out of order, or container sizes that disagree with the header."""
    size = memoryview(buf).nbytes
    pos = start

    def need(n: int, what: str) -> None:
        if pos + n > size:
            raise CorruptFile(where, f"roaring bitmap at offset {start} is truncated: {what} needs {n} bytes at "
                                     f"offset {pos}, {max(size - pos, 0)} left")

    need(4, "the cookie")
    (cookie,) = struct.unpack_from("<I", buf, pos)
    pos += 4
    if cookie & 0xFFFF == _SERIAL_COOKIE:
        n = (cookie >> 16) + 1
        need((n + 7) // 8, "the run-container flags")
        flags = np.unpackbits(np.frombuffer(buf, np.uint8, (n + 7) // 8, pos), bitorder="little")[:n].astype(bool)
        pos += (n + 7) // 8
        has_offsets = n >= _NO_OFFSET_THRESHOLD
    elif cookie == _SERIAL_COOKIE_NO_RUNCONTAINER:
        need(4, "the container count")
        (n,) = struct.unpack_from("<I", buf, pos)
        pos += 4
        if n > 1 << 16:
            raise CorruptFile(where, f"roaring bitmap at offset {start} claims {n} containers (at most 65536)")
        flags = np.zeros(n, dtype=bool)
        has_offsets = True
    else:
        raise CorruptFile(where, f"roaring bitmap at offset {start} has an unknown cookie {cookie:#010x}")
    need(4 * n, "the container headers")
    header = np.frombuffer(buf, "<u2", 2 * n, pos).reshape(n, 2).astype(np.int64)
    pos += 4 * n
    keys, cards = header[:, 0], header[:, 1] + 1
    if n > 1 and np.any(keys[1:] <= keys[:-1]):
        raise CorruptFile(where, f"roaring bitmap at offset {start} has container keys out of order")
    if has_offsets:  # offsets only serve random access; a sequential read skips them
        need(4 * n, "the container offsets")
        pos += 4 * n
    # One step per run or bitmap container and per block of consecutive array containers.
    is_array = ~flags & (cards <= _ARRAY_MAX)
    blocks = _group_starts(np.where(is_array, -1, np.arange(n)))
    pieces = []
    for a, b in zip(blocks.tolist(), np.append(blocks[1:], n).tolist()):
        key, card = int(keys[a]), int(cards[a])
        if is_array[a]:
            count = int(cards[a:b].sum())
            need(2 * count, "array containers")
            values = np.frombuffer(buf, "<u2", count, pos).astype(np.int64)
            values += np.repeat(keys[a:b] << 16, cards[a:b])
            pos += 2 * count
            bad = np.flatnonzero(values[1:] <= values[:-1])
            if bad.size:  # keys ascend, so only a container's own values can be out of order
                raise CorruptFile(where, f"roaring bitmap at offset {start}: array container "
                                         f"{int(values[bad[0] + 1]) >> 16} is not sorted and unique")
            pieces.append(values)
            continue
        if flags[a]:
            need(2, "a run container's run count")
            (nruns,) = struct.unpack_from("<H", buf, pos)
            pos += 2
            need(4 * nruns, "a run container's runs")
            runs = np.frombuffer(buf, "<u2", 2 * nruns, pos).reshape(nruns, 2).astype(np.int64)
            pos += 4 * nruns
            run_starts, run_lengths = runs[:, 0], runs[:, 1] + 1
            run_ends = run_starts + run_lengths
            if np.any(run_ends > 1 << 16) or (nruns > 1 and np.any(run_starts[1:] < run_ends[:-1])):
                raise CorruptFile(where, f"roaring bitmap at offset {start}: run container {key} has runs out of "
                                         "order, overlapping or past 65535")
            total = int(run_lengths.sum())
            if total != card:
                raise CorruptFile(where, f"roaring bitmap at offset {start}: run container {key} holds {total} "
                                         f"values, its header says {card}")
            before = np.cumsum(run_lengths) - run_lengths
            low = np.repeat(run_starts - before, run_lengths) + np.arange(total, dtype=np.int64)
        else:
            need(_BITMAP_BYTES, "a bitmap container")
            bits = np.unpackbits(np.frombuffer(buf, np.uint8, _BITMAP_BYTES, pos), bitorder="little")
            pos += _BITMAP_BYTES
            low = np.flatnonzero(bits).astype(np.int64)
            if low.size != card:
                raise CorruptFile(where, f"roaring bitmap at offset {start}: bitmap container {key} holds "
                                         f"{low.size} values, its header says {card}")
        pieces.append(low + (key << 16))
    values = np.concatenate(pieces) if pieces else np.empty(0, dtype=np.int64)
    return values, pos


def _group_starts(keys: np.ndarray) -> np.ndarray:
    """Indices where each run of equal values in sorted ``keys`` begins."""
    if keys.size == 0:
        return np.empty(0, dtype=np.int64)
    return np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))


# --- deletion vector records -----------------------------------------------------------------------------------
def normalize_positions(positions: np.ndarray, bitmap64: bool) -> np.ndarray:
    """``positions`` (any integer array, any order, duplicates allowed) as sorted unique np.int64. Raises ValueError
    for non-integers, negative positions, or positions the format cannot hold (32-bit: > 2147483647; 64-bit: >
    MAX_POSITION_64, Java's OptimizedRoaringBitmap64 limit). Already sorted unique input costs O(n)."""
    arr = np.asarray(positions).ravel()
    if arr.size == 0:
        return np.empty(0, dtype=np.int64)
    if arr.dtype.kind not in "iu":
        raise ValueError(f"deletion vector positions must be integers, got dtype {arr.dtype}")
    lowest, highest = arr.min(), arr.max()
    if lowest < 0:
        raise ValueError(f"deletion vector positions must be >= 0, got {int(lowest)}")
    limit = MAX_POSITION_64 if bitmap64 else MAX_POSITION_32
    if highest > limit:
        hint = "" if bitmap64 else "; set deletion-vectors.bitmap64 for larger files"
        raise ValueError(f"deletion vector position {int(highest)} exceeds {limit}, the largest row position a "
                         f"{'64' if bitmap64 else '32'}-bit deletion vector can hold{hint}")
    arr = arr.astype(np.int64, copy=False)
    if arr.size > 1 and not np.all(arr[1:] > arr[:-1]):
        arr = np.sort(arr)  # then drop duplicates; np.unique's hash path is several times slower
        arr = arr[np.concatenate(([True], arr[1:] != arr[:-1]))]
    return arr


def encode_dv(positions: np.ndarray, bitmap64: bool) -> tuple[bytes, int]:
    """The complete index-file record of a deletion vector (size int + bitmap data + CRC int) and the range length
    to record in the index manifest (32-bit: size; 64-bit: size + 8). Raises ValueError as normalize_positions."""
    values = normalize_positions(positions, bitmap64)
    if bitmap64:
        keys = values >> 32
        starts = _group_starts(keys)
        ends = np.append(starts[1:], values.size)
        parts = [struct.pack("<iq", MAGIC_64, starts.size)]
        for s, e in zip(starts.tolist(), ends.tolist()):
            parts.append(struct.pack("<i", int(keys[s])))
            parts.append(serialize_roaring32(values[s:e] & 0xFFFFFFFF))
        data = b"".join(parts)
    else:
        data = struct.pack(">i", MAGIC_32) + serialize_roaring32(values)
    record = struct.pack(">i", len(data)) + data + struct.pack(">I", zlib.crc32(data))
    return record, len(data) + 8 if bitmap64 else len(data)


def decode_dv(data: bytes, offset: int, length: int, where: str) -> np.ndarray:
    """The sorted np.int64 positions of the record at ``offset`` of ``data`` (a whole DV index file) whose range
    length in the index manifest is ``length``. Checks the magic, the size against ``length`` (by the format's
    rule), that the record fits in ``data``, the CRC, and that the bitmap fills the record exactly. Raises
    CorruptFile(where, ...) naming the failed check."""
    view = memoryview(data)
    total = view.nbytes
    at = f"deletion vector at offset {offset}"
    if offset < 0 or offset + 8 > total:
        raise CorruptFile(where, f"{at} lies outside the file ({total} bytes)")
    (size,) = struct.unpack_from(">i", data, offset)
    if struct.unpack_from(">i", data, offset + 4)[0] == MAGIC_32:
        bitmap64, expected_length, minimum = False, size, 4
    elif struct.unpack_from("<i", data, offset + 4)[0] == MAGIC_64:
        bitmap64, expected_length, minimum = True, size + 8, 12
    else:
        raise CorruptFile(where, f"{at} has an unknown magic number {bytes(view[offset + 4:offset + 8]).hex()}")
    if expected_length != length:
        raise CorruptFile(where, f"{at} has size {size}, which does not match the length {length} recorded in the "
                                 f"index manifest ({'64' if bitmap64 else '32'}-bit format)")
    if size < minimum:
        raise CorruptFile(where, f"{at} has size {size}, too small for its header")
    end = offset + 4 + size  # the CRC int follows
    if end + 4 > total:
        raise CorruptFile(where, f"{at} ({size + 8} bytes) runs past the end of the file ({total} bytes)")
    (stored_crc,) = struct.unpack_from(">I", data, end)
    crc = zlib.crc32(view[offset + 4:end])
    if crc != stored_crc:
        raise CorruptFile(where, f"{at} fails its CRC check: stored {stored_crc:#010x}, computed {crc:#010x}")
    record = view[:end]  # decoders cannot read past the bitmap data
    if bitmap64:
        pos = offset + 16
        (count,) = struct.unpack_from("<q", data, offset + 8)
        if count < 0 or count * 12 > end - pos:  # each bitmap needs at least a key and an empty bitmap's 8 bytes
            raise CorruptFile(where, f"{at} claims {count} bitmaps, more than its {size} bytes can hold")
        pieces, last_key = [], -1
        for _ in range(count):
            if pos + 4 > end:
                raise CorruptFile(where, f"{at} is truncated before a bitmap key")
            (key,) = struct.unpack_from("<i", data, pos)
            if key < 0 or key > _MAX_KEY_64 or key <= last_key:
                raise CorruptFile(where, f"{at} has bitmap key {key} after {last_key}: keys must ascend in "
                                         f"[0, {_MAX_KEY_64}]")
            values, pos = deserialize_roaring32(record, pos + 4, where)
            pieces.append(values + (key << 32))
            last_key = key
        values = np.concatenate(pieces) if pieces else np.empty(0, dtype=np.int64)
    else:
        values, pos = deserialize_roaring32(record, offset + 8, where)
    if pos != end:
        raise CorruptFile(where, f"{at}: its bitmap ends at offset {pos} but the record's data ends at {end}")
    return values
