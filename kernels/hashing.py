"""Paimon bucket hash of Arrow key columns: ``BinaryRow.hashCode()`` per row, without building rows.

Semantics §1.3 / format §9: the key columns form a BinaryRow (header 0x00, null bits, one 8-byte slot per
column, var part padded to 8), hashed with ``MurmurHashUtils.hashBytesByWords`` (seed 42) over its 4-byte
little-endian words; ``bucket = Math.abs(hash % numBuckets)``. The kernels feed the hash the words the row
would hold instead of materializing it. Everything is derived from the Arrow types (this layer does not import
``engine``); the plain reference is ``kernels.reference.hash_codes_reference``.

Where Java Paimon ([J]) and pypaimon ([Py]) differ this follows [J]: DECIMAL p > 18 uses Java's minimal
``BigInteger.toByteArray()`` (-128 is one byte ``80``), and a NULL DECIMAL p > 18 / TIMESTAMP p > 3 (Arrow
timestamp[us|ns]) still reserves its 16 / 8-byte var part with slot ``offset << 32`` (format §9.2, §9.6).

Layering: ``hash_codes`` / ``bucket_ids`` validate and unpack Arrow buffers into NumPy views (vectorized
pre-passes only), then ``_hash_fixed`` (all slots fixed-width: the row is null bits + 8 * arity bytes) or
``_hash_general`` (strings, binaries, wide decimals, timestamps with sub-millisecond precision) runs per row.
All arithmetic is on uint64 holding 32-bit values, so nothing overflows (also under NUMBA_DISABLE_JIT).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pyarrow as pa

from kernels.jit import njit
from kernels.memory import load8, load32

__all__ = ["hash_codes", "bucket_ids", "warm_up"]

_U = np.uint64
_ZERO, _ONE = _U(0), _U(1)
_M32, _B31, _B32 = _U(0xFFFFFFFF), _U(1 << 31), _U(1 << 32)
_C1, _C2, _C3, _FIVE = _U(0xCC9E2D51), _U(0x1B873593), _U(0xE6546B64), _U(5)
_F1, _F2 = _U(0x85EBCA6B), _U(0xC2B2AE35)
_S8, _S13, _S15, _S16, _S17, _S19 = _U(8), _U(13), _U(15), _U(16), _U(17), _U(19)
_S24, _S32, _S56, _S63 = _U(24), _U(32), _U(56), _U(63)
_SEED, _FF, _MARK = _U(42), _U(0xFF), _U(0x80)

# column kinds of the general kernel
_FIXED, _VAR, _DEC, _TS = 0, 1, 2, 3


# --- Murmur3 word mixing (MurmurHashUtils.hashBytesByWords) -------------------------------------------------
@njit
def _mix(h, w):
    k = (w * _C1) & _M32
    k = ((k << _S15) | (k >> _S17)) & _M32
    k = (k * _C2) & _M32
    h = h ^ k
    h = ((h << _S13) | (h >> _S19)) & _M32
    return (h * _FIVE + _C3) & _M32


@njit
def _mix64(h, slot):
    """Mix the 8 little-endian bytes of ``slot`` as two 4-byte words."""
    return _mix(_mix(h, slot & _M32), slot >> _S32)


@njit
def _finish(h, length, num_buckets):
    """fmix32 of ``h ^ length``; then, if num_buckets > 0, Java ``Math.abs(hash % numBuckets)``."""
    h = h ^ (length & _M32)
    h = h ^ (h >> _S16)
    h = (h * _F1) & _M32
    h = h ^ (h >> _S13)
    h = (h * _F2) & _M32
    h = h ^ (h >> _S16)
    if num_buckets > _ZERO:
        mag = _B32 - h if h >= _B31 else h  # |h| as a signed int32; |h % n| == |h| % n
        return mag % num_buckets
    return h


@njit
def _null_word(w, i, k, null_src, valid):
    """64-bit word ``w`` of the header + null-bit area for row ``i``: bit ``j + 8`` set = column j is null."""
    word = _ZERO
    for j in range(max(0, 64 * w - 8), min(k, 64 * w + 56)):
        s = null_src[j]
        if s >= 0 and valid[s, i] == 0:
            word |= _ONE << _U(j + 8 - 64 * w)
    return word


@njit
def _is_null(j, i, null_src, valid):
    s = null_src[j]
    return s >= 0 and valid[s, i] == 0


# --- all-fixed-width rows -----------------------------------------------------------------------------------
@njit
def _hash_fixed(fixed, null_src, valid, any_null, num_buckets, out):
    """Rows whose columns all live in their slot. ``fixed[j, i]`` is column j's slot (zero-extended)."""
    k = fixed.shape[0]
    nw = (k + 71) // 64
    length = _U(8 * nw + 8 * k)
    h_base = _SEED  # the hash state after a null-bit area without nulls
    for w in range(nw):
        h_base = _mix64(h_base, _ZERO)
    for i in range(out.shape[0]):
        h = h_base
        if any_null:
            h = _SEED
            for w in range(nw):
                h = _mix64(h, _null_word(w, i, k, null_src, valid))
        for j in range(k):
            if any_null and _is_null(j, i, null_src, valid):
                h = _mix64(h, _ZERO)
            else:
                h = _mix64(h, _U(fixed[j, i]))
        out[i] = _finish(h, length, num_buckets)


# --- one key column without nulls: the common bucket key, flat loops the compiler can vectorize --------------
# The row is the 8-byte header/null-bit word (all zero: its hash state is H1 below), then one 8-byte slot, then for
# a string/binary longer than 7 bytes its bytes padded to 8. Same arithmetic as above, written inline.
@njit
def _bucket_of(h, num_buckets, pow2_mask):
    """Math.abs(h % n) as in _finish; a power-of-two n uses a mask (no division)."""
    if num_buckets == _ZERO:
        return h
    mag = _B32 - h if h >= _B31 else h
    if pow2_mask != _ZERO:
        return mag & pow2_mask
    return mag % num_buckets


@njit
def _hash_one_fixed(vals, h1, num_buckets, pow2_mask, out):
    """One fixed-width column, no nulls: vals are the slot values (unsigned, zero-extended)."""
    for i in range(out.shape[0]):
        v = _U(vals[i])
        k = ((v & _M32) * _C1) & _M32
        k = ((k << _S15) | (k >> _S17)) & _M32
        k = (k * _C2) & _M32
        h = h1 ^ k
        h = ((h << _S13) | (h >> _S19)) & _M32
        h = (h * _FIVE + _C3) & _M32
        k = ((v >> _S32) * _C1) & _M32
        k = ((k << _S15) | (k >> _S17)) & _M32
        k = (k * _C2) & _M32
        h = h ^ k
        h = ((h << _S13) | (h >> _S19)) & _M32
        h = (h * _FIVE + _C3) & _M32
        h = h ^ _U(16)
        h = h ^ (h >> _S16)
        h = (h * _F1) & _M32
        h = h ^ (h >> _S13)
        h = (h * _F2) & _M32
        h = h ^ (h >> _S16)
        out[i] = _bucket_of(h, num_buckets, pow2_mask)


@njit
def _var_row_start(offs, i):
    start = np.int64(offs[i])
    return start, np.int64(offs[i + 1]) - start


@njit
def _var_slot(base, start, ln):
    """(slot, bytes in the row) of a string/binary of ``ln`` bytes at ``base + start``."""
    if ln <= 7:
        slot = (_MARK | _U(ln)) << _S56
        for q in range(ln):
            slot |= _U(load8(base + start + q)) << _U(8 * q)
        return slot, 16
    return (_U(16) << _S32) | _U(ln), 16 + (ln + 7) // 8 * 8


@njit
def _var_tail(h, base, p, ln, full):
    """Mix the bytes after the ``full`` whole words of a var part (a partial word, then zero padding words)."""
    words = full
    rem = ln - 4 * full
    if rem > 0:
        w = _ZERO
        for q in range(rem):
            w |= _U(load8(base + p + q)) << _U(8 * q)
        h = _mix(h, w)
        words += 1
    for _ in range(((ln + 7) // 8) * 2 - words):
        h = _mix(h, _ZERO)
    return h


@njit
def _hash_one_var(offs, data, h1, num_buckets, pow2_mask, out):
    """One string/binary column, no nulls (offs: int32 or int64 offsets into data). Whole 4-byte words are read
    with one unaligned load each (``kernels.memory``), inside the row's bytes. Two rows of equal length are hashed
    in lockstep: each row's hash is one long dependency chain, two chains keep the multipliers busy."""
    base = data.ctypes.data
    n = out.shape[0]
    i = 0
    while i < n:
        sa, la = _var_row_start(offs, i)
        slot_a, total_a = _var_slot(base, sa, la)
        ha = _mix(_mix(h1, slot_a & _M32), slot_a >> _S32)
        if i + 1 < n:
            sb, lb = _var_row_start(offs, i + 1)
        else:
            sb, lb = 0, -1
        if lb == la:
            slot_b, total_b = _var_slot(base, sb, lb)
            hb = _mix(_mix(h1, slot_b & _M32), slot_b >> _S32)
            if la > 7:
                full = la // 4
                for t in range(full):
                    ha = _mix(ha, _U(load32(base + sa + 4 * t)))
                    hb = _mix(hb, _U(load32(base + sb + 4 * t)))
                ha = _var_tail(ha, base, sa + 4 * full, la, full)
                hb = _var_tail(hb, base, sb + 4 * full, lb, full)
            out[i] = _bucket_of(_finish(ha, _U(total_a), _ZERO), num_buckets, pow2_mask)
            out[i + 1] = _bucket_of(_finish(hb, _U(total_b), _ZERO), num_buckets, pow2_mask)
            i += 2
            continue
        if la > 7:
            full = la // 4
            for t in range(full):
                ha = _mix(ha, _U(load32(base + sa + 4 * t)))
            ha = _var_tail(ha, base, sa + 4 * full, la, full)
        out[i] = _bucket_of(_finish(ha, _U(total_a), _ZERO), num_buckets, pow2_mask)
        i += 1


# --- rows with a variable-length part -----------------------------------------------------------------------
@njit
def _inline_slot(data, start, ln):
    """<= 7 bytes stored in the slot itself: data bytes LE, byte 7 = 0x80 | len."""
    slot = (_MARK | _U(ln)) << _S56
    for q in range(ln):
        slot |= _U(data[start + q]) << _U(8 * q)
    return slot


@njit
def _mix_bytes(h, data, start, ln):
    """Mix ``ln`` bytes zero-padded to a multiple of 8, as 4-byte little-endian words."""
    full = ln // 4
    p = start
    for _ in range(full):
        w = _U(data[p]) | (_U(data[p + 1]) << _S8) | (_U(data[p + 2]) << _S16) | (_U(data[p + 3]) << _S24)
        h = _mix(h, w)
        p += 4
    words = full
    rem = ln - 4 * full
    if rem > 0:
        w = _ZERO
        for q in range(rem):
            w |= _U(data[p + q]) << _U(8 * q)
        h = _mix(h, w)
        words += 1
    for _ in range(((ln + 7) // 8) * 2 - words):
        h = _mix(h, _ZERO)
    return h


@njit
def _dec_byte(lo, hi, b):
    """Byte ``b`` (0 = least significant) of the 128-bit two's complement value (hi, lo)."""
    if b < 8:
        return (lo >> _U(8 * b)) & _FF
    return (hi >> _U(8 * (b - 8))) & _FF


@njit
def _dec_len(lo, hi):
    """Length of Java ``BigInteger.toByteArray()``: drop leading sign bytes while the sign stays intact."""
    sign = _FF if (hi >> _S63) == _ONE else _ZERO
    nb = 16
    while nb > 1 and _dec_byte(lo, hi, nb - 1) == sign and (_dec_byte(lo, hi, nb - 2) >> _U(7)) == (sign & _ONE):
        nb -= 1
    return nb


@njit
def _mix_dec(h, lo, hi):
    """Mix the 16-byte var part of a wide decimal: big-endian minimal bytes, then zero padding."""
    nb = _dec_len(lo, hi)
    w0 = _ZERO
    w1 = _ZERO
    for p in range(nb):
        byte = _dec_byte(lo, hi, nb - 1 - p)
        if p < 8:
            w0 |= byte << _U(8 * p)
        else:
            w1 |= byte << _U(8 * (p - 8))
    return _mix64(_mix64(h, w0), w1)


@njit
def _hash_general(kinds, srcs, null_src, valid, any_null, fixed, offs, data, dec, ts_ms, ts_nano, num_buckets, out):
    """Rows with any layout. Column j of kind K reads its values from K's array at row ``srcs[j]``:
    _FIXED: ``fixed`` slots; _VAR: bytes ``data[offs[s, i]:offs[s, i + 1]]``; _DEC: ``dec[s, i] = (lo, hi)``
    of a decimal128; _TS: ``ts_ms`` epoch millis and ``ts_nano`` nano-of-millisecond."""
    k = kinds.shape[0]
    nw = (k + 71) // 64
    fixed_size = 8 * nw + 8 * k
    h_base = _SEED
    for w in range(nw):
        h_base = _mix64(h_base, _ZERO)
    for i in range(out.shape[0]):
        h = h_base
        if any_null:
            h = _SEED
            for w in range(nw):
                h = _mix64(h, _null_word(w, i, k, null_src, valid))
        cur = fixed_size  # offset of the next var-part value
        for j in range(k):  # the slots
            null = any_null and _is_null(j, i, null_src, valid)
            kind = kinds[j]
            s = srcs[j]
            slot = _ZERO
            if kind == _FIXED:
                if not null:
                    slot = fixed[s, i]
            elif kind == _VAR:
                if not null:
                    start = offs[s, i]
                    ln = offs[s, i + 1] - start
                    if ln <= 7:
                        slot = _inline_slot(data, start, ln)
                    else:
                        slot = (_U(cur) << _S32) | _U(ln)
                        cur += (ln + 7) // 8 * 8
            elif kind == _DEC:  # [J]: a NULL reserves the 16 bytes too; slot = offset << 32 | byteLength
                slot = _U(cur) << _S32
                if not null:
                    slot |= _U(_dec_len(dec[s, i, 0], dec[s, i, 1]))
                cur += 16
            else:  # _TS; [J]: a NULL reserves the 8 bytes too; slot = offset << 32 | nanoOfMillisecond
                slot = _U(cur) << _S32
                if not null:
                    slot |= ts_nano[s, i]
                cur += 8
            h = _mix64(h, slot)
        for j in range(k):  # the var part, in column order
            kind = kinds[j]
            if kind == _FIXED:
                continue
            null = any_null and _is_null(j, i, null_src, valid)
            s = srcs[j]
            if kind == _VAR:
                if not null:
                    start = offs[s, i]
                    ln = offs[s, i + 1] - start
                    if ln > 7:
                        h = _mix_bytes(h, data, start, ln)
            elif kind == _DEC:
                if null:
                    h = _mix64(_mix64(h, _ZERO), _ZERO)
                else:
                    h = _mix_dec(h, dec[s, i, 0], dec[s, i, 1])
            else:
                h = _mix64(h, _ZERO if null else ts_ms[s, i])
        out[i] = _finish(h, _U(cur), num_buckets)


# --- Arrow unpacking (vectorized) ---------------------------------------------------------------------------
def _ro(a: np.ndarray) -> np.ndarray:
    """Read-only C-contiguous: every kernel argument has one Numba type per dtype (fewer compilations)."""
    a = np.ascontiguousarray(a)
    a.flags.writeable = False
    return a


def _buf(arr: pa.Array, index: int, dtype, count: int) -> np.ndarray:
    b = arr.buffers()[index]
    if b is None or count == 0:
        return np.zeros(count, dtype)
    return np.frombuffer(b, dtype, count=count)


def _validity(arr: pa.Array) -> np.ndarray | None:
    """One byte per row, 1 = valid; None when the column has no nulls."""
    if arr.null_count == 0:
        return None
    off, n = arr.offset, len(arr)
    bits = _buf(arr, 0, np.uint8, (off + n + 7) // 8)[off // 8:]
    return np.unpackbits(bits, bitorder="little")[off % 8: off % 8 + n]


def _values(arr: pa.Array, dtype) -> np.ndarray:
    off, n = arr.offset, len(arr)
    return _buf(arr, 1, dtype, off + n)[off:]


def _normalize(col) -> pa.Array:
    if isinstance(col, pa.ChunkedArray):
        col = col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
    if not isinstance(col, pa.Array):
        raise TypeError(f"expected a pyarrow Array or ChunkedArray, got {type(col).__name__}")
    t = col.type
    if pa.types.is_dictionary(t):
        return _normalize(col.dictionary_decode())
    if pa.types.is_string_view(t):
        return col.cast(pa.large_string())
    if pa.types.is_binary_view(t):
        return col.cast(pa.large_binary())
    if pa.types.is_decimal(t) and not pa.types.is_decimal128(t):
        if t.precision > 38:
            raise TypeError(f"{t}: Paimon decimals have at most 38 digits")
        return col.cast(pa.decimal128(t.precision, t.scale))
    return col


_UNSIGNED = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _column(arr: pa.Array):
    """(kind, payload) of one normalized column. _FIXED payload: unsigned slot values (zero-extended by the
    kernel); _VAR: (offsets, data); _DEC: (n, 2) uint64 (lo, hi); _TS: (epoch millis, nano-of-milli)."""
    t, n, off = arr.type, len(arr), arr.offset
    if pa.types.is_boolean(t):
        bits = _buf(arr, 1, np.uint8, (off + n + 7) // 8)[off // 8:]
        return _FIXED, np.unpackbits(bits, bitorder="little")[off % 8: off % 8 + n]
    if pa.types.is_signed_integer(t) or pa.types.is_float32(t) or pa.types.is_float64(t) or pa.types.is_date32(t):
        return _FIXED, _values(arr, _UNSIGNED[t.bit_width // 8])  # signed or IEEE bits, reinterpreted
    if pa.types.is_time(t):  # TIME: int32 millis of day
        per_ms = {"s": None, "ms": 1, "us": 1000, "ns": 1_000_000}[t.unit]
        v = _values(arr, np.int32 if pa.types.is_time32(t) else np.int64)
        ms = v.astype(np.int64) * 1000 if per_ms is None else v // per_ms
        return _FIXED, ms.astype(np.int32).view(np.uint32)
    if pa.types.is_timestamp(t):
        v = _values(arr, np.int64)
        if t.unit in ("s", "ms"):  # compact TIMESTAMP(p <= 3): epoch millis in the slot
            return _FIXED, (v * 1000 if t.unit == "s" else v).view(np.uint64)
        per_ms, nano_mult = (1000, 1000) if t.unit == "us" else (1_000_000, 1)
        ms = np.floor_divide(v, per_ms)
        return _TS, (ms.view(np.uint64), ((v - ms * per_ms) * nano_mult).view(np.uint64))
    if pa.types.is_decimal128(t):
        pairs = _buf(arr, 1, np.uint64, 2 * (off + n)).reshape(-1, 2)[off:]
        if t.precision <= 18:  # compact: int64 unscaled value, the low half of the decimal128
            return _FIXED, pairs[:, 0]
        return _DEC, pairs
    if pa.types.is_string(t) or pa.types.is_binary(t) or pa.types.is_large_string(t) or pa.types.is_large_binary(t):
        wide = pa.types.is_large_string(t) or pa.types.is_large_binary(t)
        data = arr.buffers()[2]
        return _VAR, (_buf(arr, 1, np.int64 if wide else np.int32, off + n + 1)[off:],
                      np.zeros(0, np.uint8) if data is None else np.frombuffer(data, np.uint8))
    if pa.types.is_fixed_size_binary(t):
        w = t.byte_width
        return _VAR, (np.arange(off, off + n + 1, dtype=np.int64) * w, _buf(arr, 1, np.uint8, (off + n) * w))
    raise TypeError(f"Arrow type {t} cannot be part of a Paimon bucket key")


def _run(columns: Sequence, num_buckets: int) -> np.ndarray:
    if isinstance(columns, (pa.Array, pa.ChunkedArray)):
        raise TypeError("pass a sequence of columns, e.g. [array]")
    arrays = [_normalize(c) for c in columns]
    if not arrays:
        raise ValueError("at least one key column is required")
    n = len(arrays[0])
    if any(len(a) != n for a in arrays):
        raise ValueError(f"key columns have different lengths: {[len(a) for a in arrays]}")
    out = np.empty(n, np.uint32)
    if n == 0:
        return out.view(np.int32)
    nb = _U(num_buckets)

    valids, null_src = [], []
    for a in arrays:
        v = _validity(a)
        null_src.append(len(valids) if v is not None else -1)
        if v is not None:
            valids.append(v)
    valid = _ro(np.stack(valids) if valids else np.zeros((1, 1), np.uint8))
    null_src = _ro(np.array(null_src, np.int64))
    parts = [_column(a) for a in arrays]

    if len(parts) == 1 and not valids and parts[0][0] in (_FIXED, _VAR):
        kind, payload = parts[0]
        h1 = _mix64(_SEED, _ZERO)   # the hash state after the (all-zero) header + null-bit word
        mask = _U(num_buckets - 1) if num_buckets and (num_buckets & (num_buckets - 1)) == 0 else _ZERO
        if kind == _FIXED:
            _hash_one_fixed(_ro(payload), h1, nb, mask, out)
        else:
            _hash_one_var(_ro(payload[0]), _ro(payload[1]), h1, nb, mask, out)
        return out.view(np.int32)

    if all(kind == _FIXED for kind, _ in parts):
        payloads = [p for _, p in parts]
        dtype = payloads[0].dtype if len({p.dtype for p in payloads}) == 1 else np.uint64
        fixed = _ro(payloads[0][None, :] if len(payloads) == 1 else np.stack([p.astype(dtype) for p in payloads]))
        _hash_fixed(fixed, null_src, valid, bool(valids), nb, out)
        return out.view(np.int32)

    kinds, srcs = [], []
    fixed, var, dec, ts = [], [], [], []
    for kind, p in parts:
        kinds.append(kind)
        group = {_FIXED: fixed, _VAR: var, _DEC: dec, _TS: ts}[kind]
        srcs.append(len(group))
        group.append(p)
    fixed_a = np.stack([p.astype(np.uint64) for p in fixed]) if fixed else np.zeros((1, 1), np.uint64)
    if len(var) == 1:  # zero-copy: offsets index the column's own data buffer
        offs, data = var[0][0][None, :], var[0][1]
    else:  # several var columns: one data buffer, offsets rebased into it
        datas, offs, base = [], [], 0
        for o, d in var:
            datas.append(d[o[0]:o[-1]])
            offs.append(o.astype(np.int64) - np.int64(o[0]) + base)
            base += int(o[-1] - o[0])
        offs = np.stack(offs) if offs else np.zeros((1, 1), np.int64)
        data = np.concatenate(datas) if datas else np.zeros(1, np.uint8)
    dec_a = np.stack(dec) if dec else np.zeros((1, 1, 2), np.uint64)
    ts_ms = np.stack([m for m, _ in ts]) if ts else np.zeros((1, 1), np.uint64)
    ts_nano = np.stack([x for _, x in ts]) if ts else np.zeros((1, 1), np.uint64)
    _hash_general(_ro(np.array(kinds, np.int64)), _ro(np.array(srcs, np.int64)), null_src, valid, bool(valids),
                  _ro(fixed_a), _ro(offs), _ro(data), _ro(dec_a), _ro(ts_ms), _ro(ts_nano), nb, out)
    return out.view(np.int32)


# --- public API ---------------------------------------------------------------------------------------------
def hash_codes(columns: Sequence[pa.Array | pa.ChunkedArray]) -> np.ndarray:
    """Paimon ``BinaryRow.hashCode()`` (int32) of the row formed by ``columns`` (arity = len(columns)), per row."""
    return _run(columns, 0)


def bucket_ids(columns: Sequence[pa.Array | pa.ChunkedArray], num_buckets: int) -> np.ndarray:
    """Fixed-bucket assignment (int32): Java ``Math.abs(hashCode % numBuckets)`` per row."""
    if not 1 <= int(num_buckets) <= 2**31 - 1:
        raise ValueError(f"num_buckets must be in [1, 2^31 - 1], got {num_buckets}")
    return _run(columns, int(num_buckets))


def warm_up() -> None:
    """Compile (or load from the cache) the kernels for the common key layouts."""
    ints = [pa.array([1, None], t) for t in (pa.int8(), pa.int16(), pa.int32(), pa.int64())]
    for a in ints:
        hash_codes([a])
    hash_codes([ints[2], ints[3]])
    for t in (pa.int8(), pa.int16(), pa.int32(), pa.int64()):   # one column without nulls: the fast path
        bucket_ids([pa.array([1, 2], t)], 4)
    for t in (pa.string(), pa.large_string()):
        bucket_ids([pa.array(["a", "0123456789"], t)], 3)
    hash_codes([pa.array(["a", None, "0123456789"])])
    hash_codes([pa.array(["a", None, "0123456789"], pa.large_string())])
    hash_codes([pa.array([1, 2, 3], pa.int32()), pa.array(["a", "b", None]),
                pa.array([1, None, 3], pa.timestamp("us")), pa.array([1, None, 3], pa.decimal128(38, 2))])
