"""Paimon BinaryRow codec (format spec §9) and the bucket hash (semantics §1.3), in plain Python.

Used for partition values, min/max keys and stats rows in manifests, and as the reference for the Numba bucket
hash in ``kernels/hashing.py``. Where Java Paimon ([J]) and pypaimon ([Py]) write different bytes, this module
writes the [J] bytes (format spec §9.6) and reads both.

Layout: header byte 0x00 + null bits (``((arity + 63 + 8) // 64) * 8`` bytes in all), one 8-byte little-endian
slot per field, then the variable-length part, every value padded to 8 bytes. Values are the Python objects
``pyarrow.Scalar.as_py()`` returns (see ``encode_row``).
"""
from __future__ import annotations

import datetime as dt
import numbers
import operator
import struct
from decimal import Decimal
from typing import Any, Sequence

from engine.errors import InvalidInput, UnsupportedFeature
from engine.types import DataType, timestamp_unit

SEED = 42
EMPTY_ROW_SERIALIZED = b"\x00\x00\x00\x00" + bytes(8)  # arity 0 + an 8-byte row holding only the header

_EPOCH_ORDINAL = dt.date(1970, 1, 1).toordinal()
_NANOS_PER_UNIT = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}
_INT_BITS = {"TINYINT": 8, "SMALLINT": 16, "INT": 32, "BIGINT": 64}
_INLINE_MARK = 1 << 63  # bit 63 of a string/binary slot: the data (<= 7 bytes) is inline, length in bits 56..62
_M32 = 0xFFFFFFFF


def null_bits_size(arity: int) -> int:
    """Bytes of a BinaryRow's header for ``arity`` fields (8 header bits plus one null bit per field, rounded up to
    whole 8-byte words), as Java's BinaryRow.calculateBitSetWidthInBytes."""
    return ((arity + 63 + 8) // 64) * 8


def _pad8(n: int) -> int:
    return (n + 7) & ~7


def _is_var_reserved(t: DataType) -> bool:
    """Non-compact DECIMAL / TIMESTAMP: the slot always references a fixed-size var part (16 / 8 bytes)."""
    return (t.root == "DECIMAL" and not t.is_compact_decimal) or (
        t.root in ("TIMESTAMP", "TIMESTAMP_LTZ") and not t.is_compact_timestamp)


# --- encoding ----------------------------------------------------------------------------------------------
def encode_row(values: Sequence[Any], types: Sequence[DataType]) -> bytes:
    """BinaryRow bytes (no arity prefix) of ``values`` typed by ``types``; ``None`` is NULL.

    Accepted values: int, float, bool, str, bytes, Decimal (or int) for DECIMAL, date or int days for DATE,
    time or int millis of day for TIME, datetime (naive = UTC wall clock, aware = converted to UTC) or an int
    epoch value in the Arrow unit of the type's precision (s/ms/us/ns) for TIMESTAMP / TIMESTAMP_LTZ.
    """
    if len(values) != len(types):
        raise InvalidInput(f"row has {len(values)} values but {len(types)} types")
    arity = len(types)
    nbits = null_bits_size(arity)
    fixed = bytearray(nbits + 8 * arity)
    var = bytearray()
    for i, (v, t) in enumerate(zip(values, types)):
        if t.is_nested:
            raise UnsupportedFeature(f"column {i}: nested type {t.root} is not supported in a BinaryRow")
        pos = nbits + 8 * i
        offset = len(fixed) + len(var)  # where this field's var part starts, if it has one
        if v is None:
            fixed[(i + 8) >> 3] |= 1 << ((i + 8) & 7)
            if _is_var_reserved(t):
                # [J] (RowHelper / codegen) still reserves the var part of a NULL non-compact DECIMAL (16 bytes)
                # or TIMESTAMP (8 bytes) and writes slot = offset << 32; [Py] writes a zero slot. We follow [J].
                fixed[pos:pos + 8] = (offset << 32).to_bytes(8, "little")
                var += bytes(16 if t.root == "DECIMAL" else 8)
            continue
        try:
            slot, extra = _encode_field(v, t, offset)
        except (TypeError, ValueError, OverflowError, ArithmeticError, struct.error) as e:
            raise InvalidInput(f"column {i}: cannot encode {v!r} as {t.sql()}: {e}") from None
        fixed[pos:pos + 8] = slot.to_bytes(8, "little")
        var += extra
    return bytes(fixed + var)


def _encode_field(v: Any, t: DataType, offset: int) -> tuple[int, bytes]:
    """(slot as an unsigned 64-bit int, padded var-part bytes) of one non-null value."""
    r = t.root
    if r == "BOOLEAN":
        if isinstance(v, bool) or (hasattr(v, "dtype") and v.dtype.kind == "b"):
            return int(bool(v)), b""
        b = operator.index(v)
        if b not in (0, 1):
            raise ValueError("not a boolean")
        return b, b""
    if r in _INT_BITS:
        return _int_slot(operator.index(v), _INT_BITS[r]), b""
    if r in ("FLOAT", "DOUBLE"):
        if not isinstance(v, numbers.Real):
            raise TypeError(f"expected a number, got {type(v).__name__}")
        if r == "FLOAT":
            return int.from_bytes(struct.pack("<f", float(v)), "little"), b""
        return int.from_bytes(struct.pack("<d", float(v)), "little"), b""
    if r == "DATE":
        if isinstance(v, dt.datetime):
            raise TypeError("expected a date, got a datetime")
        days = v.toordinal() - _EPOCH_ORDINAL if isinstance(v, dt.date) else operator.index(v)
        return _int_slot(days, 32), b""
    if r == "TIME":
        if isinstance(v, dt.time):
            ms = ((v.hour * 60 + v.minute) * 60 + v.second) * 1000 + v.microsecond // 1000
        else:
            ms = operator.index(v)
        if not 0 <= ms < 86_400_000:
            raise ValueError("TIME must be within one day (0 <= millis < 86400000)")
        return ms, b""
    if r in ("TIMESTAMP", "TIMESTAMP_LTZ"):
        millis, nano_of_milli = divmod(_epoch_nanos(v, t), 1_000_000)  # floor: nanos are always 0..999_999
        if t.is_compact_timestamp:
            return _int_slot(millis, 64), b""
        return (offset << 32) | nano_of_milli, _int_slot(millis, 64).to_bytes(8, "little")
    if r == "DECIMAL":
        unscaled = _unscaled(v, t.precision, t.scale)
        if t.is_compact_decimal:
            return _int_slot(unscaled, 64), b""
        data = java_big_integer_bytes(unscaled)
        return (offset << 32) | len(data), data.ljust(16, b"\x00")
    if r in ("CHAR", "VARCHAR", "BINARY", "VARBINARY"):
        if r in ("CHAR", "VARCHAR"):
            if not isinstance(v, str):
                raise TypeError(f"expected str, got {type(v).__name__}")
            data = v.encode("utf-8")
        else:
            if not isinstance(v, (bytes, bytearray, memoryview)):
                raise TypeError(f"expected bytes, got {type(v).__name__}")
            data = bytes(v)
        n = len(data)
        if n <= 7:
            return int.from_bytes(data, "little") | ((0x80 | n) << 56), b""
        return (offset << 32) | n, data.ljust(_pad8(n), b"\x00")
    raise UnsupportedFeature(f"type {t.sql()} is not supported in a BinaryRow")


def _int_slot(x: int, bits: int) -> int:
    if not -(1 << (bits - 1)) <= x < (1 << (bits - 1)):
        raise OverflowError(f"{x} does not fit in a signed {bits}-bit integer")
    return x & ((1 << bits) - 1)  # two's complement in the low bytes, the rest of the slot stays zero


def _epoch_nanos(v: Any, t: DataType) -> int:
    if isinstance(v, dt.datetime):
        secs = (v.toordinal() - _EPOCH_ORDINAL) * 86400 + v.hour * 3600 + v.minute * 60 + v.second
        off = v.utcoffset()
        if off is not None:
            secs -= off.days * 86400 + off.seconds
        return (secs * 1_000_000 + v.microsecond) * 1000 + getattr(v, "nanosecond", 0)  # pandas.Timestamp
    if isinstance(v, dt.date):
        raise TypeError("expected a datetime, got a date")
    return operator.index(v) * _NANOS_PER_UNIT[timestamp_unit(t.precision)]


def _unscaled(v: Any, precision: int, scale: int) -> int:
    """Exact unscaled integer of ``v`` at ``scale`` (no context rounding; a loss of digits is an error)."""
    if isinstance(v, Decimal):
        if not v.is_finite():
            raise ValueError("not a finite decimal")
        sign, digits, exp = v.as_tuple()
        mag = int("".join(map(str, digits)) or "0")
        shift = exp + scale
        if shift >= 0:
            mag *= 10 ** shift
        else:
            mag, rest = divmod(mag, 10 ** -shift)
            if rest:
                raise ValueError(f"has more than {scale} fractional digits")
        unscaled = -mag if sign else mag
    else:
        unscaled = operator.index(v) * 10 ** scale
    if abs(unscaled) >= 10 ** precision:
        raise OverflowError(f"does not fit DECIMAL({precision}, {scale})")
    return unscaled


def java_big_integer_bytes(x: int) -> bytes:
    """Java ``BigInteger.toByteArray()``: minimal big-endian two's complement, ``bitLength / 8 + 1`` bytes.

    bitLength excludes the sign bit, so -128 is one byte ``80`` ([J]); [Py] writes ``ff80`` (format spec §9.6).
    """
    bit_length = (~x).bit_length() if x < 0 else x.bit_length()
    return x.to_bytes(bit_length // 8 + 1, "big", signed=True)


def serialize_row(values: Sequence[Any], types: Sequence[DataType]) -> bytes:
    """``SerializationUtils.serializeBinaryRow``: 4-byte big-endian arity + row bytes (format spec §9.5)."""
    return len(types).to_bytes(4, "big") + encode_row(values, types)


# --- decoding ----------------------------------------------------------------------------------------------
def decode_row(data: bytes, types: Sequence[DataType]) -> list:
    """Values of a BinaryRow (as ``encode_row`` accepts them; timestamps as datetimes, pandas.Timestamps when they
    have sub-microsecond digits)."""
    data = bytes(data)
    arity = len(types)
    nbits = null_bits_size(arity)
    if len(data) < nbits + 8 * arity:
        raise InvalidInput(f"BinaryRow of {len(data)} bytes is too short for {arity} fields")
    out: list = []
    for i, t in enumerate(types):
        if data[(i + 8) >> 3] & (1 << ((i + 8) & 7)):
            out.append(None)  # [Py] rows (zero slot) and [J] rows (reserved var part) both land here
            continue
        if t.is_nested:
            raise UnsupportedFeature(f"column {i}: nested type {t.root} is not supported in a BinaryRow")
        pos = nbits + 8 * i
        try:
            out.append(_decode_field(data, data[pos:pos + 8], t))
        except (ValueError, OverflowError, IndexError, struct.error) as e:
            raise InvalidInput(f"column {i}: cannot decode {t.sql()} from BinaryRow: {e}") from None
    return out


def _decode_field(data: bytes, slot: bytes, t: DataType) -> Any:
    r = t.root
    word = int.from_bytes(slot, "little")
    if r == "BOOLEAN":
        return slot[0] != 0
    if r in _INT_BITS:
        return int.from_bytes(slot[:_INT_BITS[r] // 8], "little", signed=True)
    if r == "FLOAT":
        return struct.unpack("<f", slot[:4])[0]
    if r == "DOUBLE":
        return struct.unpack("<d", slot)[0]
    if r == "DATE":
        return dt.date.fromordinal(_EPOCH_ORDINAL + int.from_bytes(slot[:4], "little", signed=True))
    if r == "TIME":
        ms = int.from_bytes(slot[:4], "little", signed=True)
        if not 0 <= ms < 86_400_000:
            raise ValueError(f"TIME value {ms} ms is not within one day")
        return (dt.datetime.min + dt.timedelta(milliseconds=ms)).time()
    if r in ("TIMESTAMP", "TIMESTAMP_LTZ"):
        if t.is_compact_timestamp:
            millis, nanos = int.from_bytes(slot, "little", signed=True), 0
        else:
            off, nanos = word >> 32, word & _M32
            millis = int.from_bytes(_var(data, off, 8), "little", signed=True)
        if nanos % 1000:
            value = _with_nanoseconds(millis, nanos)
        else:
            value = dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=millis * 1000 + nanos // 1000)
        return value.replace(tzinfo=dt.timezone.utc) if r == "TIMESTAMP_LTZ" else value
    if r == "DECIMAL":
        if t.is_compact_decimal:
            unscaled = int.from_bytes(slot, "little", signed=True)
        else:
            unscaled = int.from_bytes(_var(data, word >> 32, word & _M32), "big", signed=True)
        return Decimal((int(unscaled < 0), tuple(int(c) for c in str(abs(unscaled))), -t.scale))
    if r in ("CHAR", "VARCHAR", "BINARY", "VARBINARY"):
        if word & _INLINE_MARK:
            raw = slot[:(word >> 56) & 0x7F]
        else:
            raw = _var(data, word >> 32, word & _M32)
        return raw.decode("utf-8") if r in ("CHAR", "VARCHAR") else raw
    raise UnsupportedFeature(f"type {t.sql()} is not supported in a BinaryRow")


def _with_nanoseconds(millis: int, nano_of_milli: int) -> dt.datetime:
    """The timestamp ``millis`` ms + ``nano_of_milli`` ns after the epoch as a pandas.Timestamp (a datetime subclass,
    as pyarrow returns for nanosecond timestamps), so TIMESTAMP(7..9) partition values and min/max stats keep every
    digit. Built from the exact nanosecond count, so every value Arrow's nanosecond timestamps hold decodes (a
    detour through a microsecond datetime could floor below pandas' minimum). Without pandas, or outside its range,
    the sub-microsecond digits are dropped."""
    value = dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=millis * 1000 + nano_of_milli // 1000)
    try:
        import pandas as pd
    except ImportError:
        return value
    ns = millis * 1_000_000 + nano_of_milli
    if not -(2**63) < ns < 2**63:
        return value
    return pd.Timestamp(ns, unit="ns")


def _var(data: bytes, offset: int, length: int) -> bytes:
    if offset + length > len(data):
        raise ValueError(f"var part [{offset}, {offset + length}) is outside the {len(data)}-byte row")
    return data[offset:offset + length]


def deserialize_row(data: bytes, types: Sequence[DataType]) -> list:
    """Inverse of ``serialize_row``; the arity prefix must match ``len(types)``."""
    if len(data) < 4:
        raise InvalidInput("serialized BinaryRow is shorter than its 4-byte arity prefix")
    arity = int.from_bytes(data[:4], "big")
    if arity != len(types):
        raise InvalidInput(f"serialized BinaryRow has arity {arity}, expected {len(types)}")
    return decode_row(data[4:], types)


def upper_bound_of_floored(values: Sequence[Any], types: Sequence[DataType]) -> list:
    """``values`` (decoded maxima: a file's _MAX_KEY or max statistics) made safe as upper bounds: every
    TIMESTAMP(7..9) value without sub-microsecond digits is raised by one microsecond. pypaimon 2.1 records those
    bounds floored to microseconds (keys 1 ns and 900 ns give a max of 0 ns; Java records them exactly), so the raw
    value may lie below the file's real maximum. Raised, it lies above every value with that floor, so in a
    lexicographic key it bounds every key of the file too. Exact bounds only get looser (by under a microsecond).
    A value in the last microsecond of Arrow's nanosecond range is raised to its largest value (2**63 - 1 ns);
    values pandas cannot hold as nanoseconds (pypaimon cannot write them) stay as they are."""
    out = list(values)
    for i, (v, t) in enumerate(zip(values, types)):
        if v is None or t.root not in ("TIMESTAMP", "TIMESTAMP_LTZ") or (t.precision or 6) <= 6 or \
                getattr(v, "nanosecond", 0):
            continue
        try:
            import pandas as pd
        except ImportError:
            continue
        try:
            out[i] = pd.Timestamp(v) + pd.Timedelta(nanoseconds=1000)
        except (OverflowError, ValueError):
            top = pd.Timestamp.max if v.tzinfo is None else pd.Timestamp.max.tz_localize("UTC")
            if top - pd.Timedelta(microseconds=1) < v <= top:
                out[i] = top
    return out


# --- key order ---------------------------------------------------------------------------------------------
def order_key(values: Sequence[Any], types: Sequence[DataType]) -> tuple:
    """A tuple whose Python order is Paimon's key order for decoded key ``values``: nulls first, and FLOAT/DOUBLE
    as Java's Float/Double.compare (-0.0 < 0.0; NaN greatest and equal to itself), which Python's float
    comparison is not (-0.0 == 0.0, NaN unordered)."""
    return tuple((v is not None, _float_order(v) if v is not None and t.root in ("FLOAT", "DOUBLE") else v)
                 for v, t in zip(values, types))


def _float_order(x: float) -> int:
    if x != x:
        return 1 << 64
    bits = struct.unpack("<q", struct.pack("<d", x))[0]
    return bits ^ 0x7FFFFFFFFFFFFFFF if bits < 0 else bits


# --- hashing -----------------------------------------------------------------------------------------------
def _rotl32(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def hash_code(row_bytes: bytes) -> int:
    """``BinaryRow.hashCode()`` = ``MurmurHashUtils.hashBytesByWords(row, seed 42)`` as a signed int32."""
    n = len(row_bytes)
    if n % 4:
        raise InvalidInput(f"BinaryRow length {n} is not a multiple of 4")
    h = SEED
    for w in struct.unpack(f"<{n // 4}I", row_bytes):
        k = _rotl32((w * 0xCC9E2D51) & _M32, 15) * 0x1B873593 & _M32
        h = (_rotl32(h ^ k, 13) * 5 + 0xE6546B64) & _M32
    h ^= n
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _M32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _M32
    h ^= h >> 16
    return h - (1 << 32) if h & 0x80000000 else h


def bucket_of(hash_code: int, num_buckets: int) -> int:
    """Java ``Math.abs(hash % numBuckets)`` (truncated remainder), which equals ``abs(hash) % numBuckets``."""
    if num_buckets <= 0:
        raise InvalidInput(f"number of buckets must be positive, got {num_buckets}")
    return abs(hash_code) % num_buckets
