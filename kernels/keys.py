"""Order-preserving key encoding (Paimon key comparator, spec §2.1).

``encode_keys`` turns key columns (Arrow) into one of two forms whose plain comparison gives the Paimon order:

* **fixed** -- ``words``: uint64 ``(n, w)``, C-contiguous. Compare rows word by word (lexicographically).
  Used when no column is string/binary. Per column, in key order:

  - an optional **null word** (0 = null, 1 = present) -- present iff the column has nulls in this array, or
    ``nullable`` is set for it (pass ``nullable=True`` when several arrays must share one layout, e.g. the
    runs of one merge: the null word would otherwise appear only in the runs that happen to contain nulls);
  - the **value word(s)**, those of the value 0 for null rows: signed ints / DATE / TIME / TIMESTAMP /
    DURATION widened to int64 then XOR the sign bit; unsigned ints as is; FLOAT/DOUBLE widened to float64
    then the IEEE total-order transform (-0.0 < +0.0; every NaN becomes all-ones, so NaNs are equal and
    greatest, like ``Double.compare``); BOOLEAN 0/1; DECIMAL128 with precision <= 18 as the int64 unscaled
    value (sign-flipped), precision > 18 as two words (high word sign-flipped, low word).

* **var** -- ``offsets`` int64 ``(n+1)`` and ``data`` uint8: row i is ``data[offsets[i]:offsets[i+1]]``;
  unsigned byte order with the shorter string first gives key order. ``offsets[0]`` need not be 0.

  - *raw*: exactly one string/binary column, ascending, no nulls and not ``nullable``: the Arrow buffers
    themselves (``data`` is a zero-copy view of the Arrow data buffer; int32 offsets are widened to int64).
  - *memcmp*: otherwise. Per column a marker byte (0x00 null / 0x01 present; nothing follows a null), then
    fixed-width values as the big-endian bytes of their value words, strings with 0x00 escaped as 0x00 0xFF
    and terminated by 0x00 0x00. Every column encoding is prefix-free, so concatenation keeps the order.

``descending[i]`` inverts column i completely (all its words / bytes, null marker included), so its nulls
sort last. (``sequence.field.sort-order=descending`` keeps nulls first: ``engine.merge.order_words`` puts a
validity word in front.)

``EncodedKeys.layout`` records how each column was encoded. Two encodings are comparable iff their layouts
are equal; ``kernels.merge`` and ``kernels.lookup`` check it.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from kernels.jit import njit

SIGN = np.uint64(1 << 63)
ALL_ONES = np.uint64(0xFFFF_FFFF_FFFF_FFFF)


@dataclass(frozen=True, eq=False)
class EncodedKeys:
    """Encoded keys of n rows: fixed form (``words``) or var form (``offsets`` + ``data``), see module doc."""

    words: np.ndarray | None = None
    offsets: np.ndarray | None = None
    data: np.ndarray | None = None
    layout: tuple | None = None

    def __post_init__(self):
        if (self.words is None) == (self.offsets is None) or (self.offsets is None) != (self.data is None):
            raise ValueError("EncodedKeys needs either words, or offsets and data")
        if self.words is not None and (self.words.dtype != np.uint64 or self.words.ndim != 2):
            raise ValueError("words must be a 2-D uint64 array")
        if self.offsets is not None and (self.offsets.dtype != np.int64 or self.data.dtype != np.uint8):
            raise ValueError("offsets must be int64 and data uint8")

    @property
    def n(self) -> int:
        return self.words.shape[0] if self.words is not None else self.offsets.shape[0] - 1

    @property
    def is_fixed(self) -> bool:
        return self.words is not None

    @property
    def width(self) -> int:
        """Words per row (fixed form); -1 for the var form."""
        return self.words.shape[1] if self.words is not None else -1

    def row(self, i: int):
        """Row i as a plain Python comparable (tuple of ints or bytes) -- for tests and debugging."""
        if self.words is not None:
            return tuple(int(x) for x in self.words[i])
        return bytes(self.data[self.offsets[i]:self.offsets[i + 1]])


def compatible(a: EncodedKeys, b: EncodedKeys) -> bool:
    """True iff rows of a and b may be compared with each other."""
    if a.is_fixed != b.is_fixed or a.width != b.width:
        return False
    return a.layout is None or b.layout is None or a.layout == b.layout


# ---- public entry ------------------------------------------------------------------------------------------

def encode_keys(columns: Sequence[pa.Array | pa.ChunkedArray], descending: Sequence[bool] | None = None, *,
                nullable: bool | Sequence[bool] | None = None) -> EncodedKeys:
    """Encode key columns (equal lengths, at least one) so that plain comparison gives the Paimon key order.

    ``descending``: per column, invert its order (nulls last). ``nullable``: per column (or one bool for all),
    force a stable layout whether or not this array has nulls (null word in the fixed form; no raw var form).
    """
    arrays = [_as_array(c) for c in columns]
    if not arrays:
        raise ValueError("encode_keys needs at least one column")
    n = len(arrays[0])
    if any(len(a) != n for a in arrays):
        raise ValueError("key columns have different lengths")
    desc = _flags(descending, len(arrays), "descending")
    nul = _flags(nullable, len(arrays), "nullable")
    cols = [_Column(a) for a in arrays]
    if not any(c.is_bytes for c in cols):
        return _encode_fixed(cols, desc, nul, n)
    if len(cols) == 1 and not desc[0] and not nul[0] and cols[0].valid is None:
        c = cols[0]
        return EncodedKeys(offsets=c.offsets, data=c.data, layout=("raw", c.kind))
    return _encode_memcmp(cols, desc, n)


def _flags(value, k: int, name: str) -> list[bool]:
    if value is None or isinstance(value, (bool, np.bool_)):
        return [bool(value)] * k
    flags = [bool(v) for v in value]
    if len(flags) != k:
        raise ValueError(f"{name} has {len(flags)} entries for {k} columns")
    return flags


def _as_array(col) -> pa.Array:
    if isinstance(col, pa.ChunkedArray):
        col = col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
    if not isinstance(col, pa.Array):
        raise TypeError(f"expected a pyarrow Array or ChunkedArray, got {type(col).__name__}")
    if isinstance(col.type, pa.ExtensionType):
        col = col.storage
    if pa.types.is_dictionary(col.type):
        col = col.dictionary_decode()
    if pa.types.is_string_view(col.type) or pa.types.is_binary_view(col.type):
        col = col.cast(pa.large_binary())
    return col


# ---- per-column preparation (NumPy views of the Arrow buffers) ---------------------------------------------

def _bits(buf: pa.Buffer, offset: int, n: int) -> np.ndarray:
    """Bits [offset, offset+n) of an Arrow bitmap as a bool array."""
    first, last = offset // 8, (offset + n + 7) // 8
    raw = np.frombuffer(buf, dtype=np.uint8, count=last, offset=0)[first:last] if n else np.empty(0, np.uint8)
    return np.unpackbits(raw, bitorder="little")[offset % 8: offset % 8 + n].view(np.bool_)


def _view(buf: pa.Buffer | None, dtype, offset: int, n: int) -> np.ndarray:
    if n == 0:
        return np.empty(0, dtype)
    return np.frombuffer(buf, dtype=dtype, count=offset + n)[offset:]


class _Column:
    """One key column: ``kind`` (layout token), ``valid`` (bool array or None when no nulls), and either
    ``words`` (n, nw) uint64 value words (null rows: those of the value 0), or ``offsets``/``data`` (bytes columns)."""

    def __init__(self, arr: pa.Array):
        t, n, off, bufs = arr.type, len(arr), arr.offset, arr.buffers()
        self.valid = _bits(bufs[0], off, n) if arr.null_count else None
        self.is_bytes = False
        self.words = None
        if pa.types.is_string(t) or pa.types.is_binary(t) or pa.types.is_large_string(t) \
                or pa.types.is_large_binary(t):
            odt = np.int64 if (pa.types.is_large_string(t) or pa.types.is_large_binary(t)) else np.int32
            self.offsets = _view(bufs[1], odt, off, n + 1).astype(np.int64, copy=False) if n else np.zeros(1, np.int64)
            self.data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.empty(0, np.uint8)
            self.is_bytes, self.kind = True, "bytes"
            return
        if pa.types.is_fixed_size_binary(t):
            bw = t.byte_width
            self.offsets = (np.arange(off, off + n + 1, dtype=np.int64) * bw)
            self.data = np.frombuffer(bufs[1], dtype=np.uint8) if bufs[1] is not None else np.empty(0, np.uint8)
            self.is_bytes, self.kind = True, "bytes"
            return
        self.kind, words = _value_words(arr, t, n, off, bufs)
        if self.valid is not None:  # null rows get the words of the value 0: canonical, and near typical data
            words[~self.valid] = 0
            if self.kind not in ("bool", "uint"):
                words[~self.valid, 0] = SIGN
        self.words = words


def _value_words(arr, t, n, off, bufs) -> tuple[str, np.ndarray]:
    if pa.types.is_boolean(t):
        return "bool", _bits(bufs[1], off, n).astype(np.uint64).reshape(n, 1)
    if pa.types.is_signed_integer(t) or pa.types.is_temporal(t):
        vals = _view(bufs[1], np.dtype(f"int{t.bit_width}"), off, n)
        return _temporal_kind(t), (vals.astype(np.int64).view(np.uint64) ^ SIGN).reshape(n, 1)
    if pa.types.is_unsigned_integer(t):
        return "uint", _view(bufs[1], np.dtype(f"uint{t.bit_width}"), off, n).astype(np.uint64).reshape(n, 1)
    if pa.types.is_floating(t):
        vals = _view(bufs[1], np.dtype(f"float{t.bit_width}"), off, n).astype(np.float64)
        bits = vals.view(np.uint64)
        out = np.where(bits & SIGN, ~bits, bits | SIGN)
        out[np.isnan(vals)] = ALL_ONES
        return "float", out.reshape(n, 1)
    if pa.types.is_decimal128(t):
        pairs = _view(bufs[1], np.uint64, 2 * off, 2 * n).reshape(n, 2)
        if t.precision <= 18:
            return f"decimal(s={t.scale},w=1)", (pairs[:, 0] ^ SIGN).reshape(n, 1)
        out = np.empty((n, 2), np.uint64)
        out[:, 0] = pairs[:, 1] ^ SIGN
        out[:, 1] = pairs[:, 0]
        return f"decimal(s={t.scale},w=2)", out
    raise TypeError(f"unsupported key type {t}")


def _temporal_kind(t: pa.DataType) -> str:
    """Layout token of an int64-encoded column: equal tokens mean comparable values (same unit)."""
    if pa.types.is_signed_integer(t):
        return "int"
    if pa.types.is_date(t):
        return str(t)  # date32[day] / date64[ms]
    unit = getattr(t, "unit", "")
    base = "timestamp" if pa.types.is_timestamp(t) else "duration" if pa.types.is_duration(t) else "time"
    return f"{base}[{unit}]"


# ---- fixed form ---------------------------------------------------------------------------------------------

def _encode_fixed(cols: list[_Column], desc: list[bool], nul: list[bool], n: int) -> EncodedKeys:
    blocks, layout = [], []
    for c, d, nl in zip(cols, desc, nul):
        block = c.words
        has_null_word = c.valid is not None or nl
        if has_null_word:
            flag = c.valid.astype(np.uint64) if c.valid is not None else np.ones(n, np.uint64)
            block = np.concatenate([flag.reshape(n, 1), block], axis=1)
        if d:
            block = ~block
        blocks.append(block)
        layout.append((c.kind, has_null_word, d))
    words = blocks[0] if len(blocks) == 1 else np.concatenate(blocks, axis=1)
    return EncodedKeys(words=np.ascontiguousarray(words), layout=("fixed", tuple(layout)))


# ---- var form (memcomparable bytes) -------------------------------------------------------------------------

def _encode_memcmp(cols: list[_Column], desc: list[bool], n: int) -> EncodedKeys:
    lengths = np.full(n, len(cols), np.int64)  # one marker byte per column
    big_endian = []
    for c in cols:
        has_valid = c.valid is not None
        valid = c.valid if has_valid else np.empty(0, np.bool_)
        if c.is_bytes:
            _add_escaped_lengths(c.offsets, c.data, valid, has_valid, lengths)
            big_endian.append(None)
        else:
            be = c.words.astype(">u8").view(np.uint8).reshape(n, 8 * c.words.shape[1])
            lengths += be.shape[1] if not has_valid else be.shape[1] * valid
            big_endian.append(be)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    data = np.empty(offsets[-1], np.uint8)
    pos = offsets[:-1].copy()
    for c, be, d in zip(cols, big_endian, desc):
        has_valid = c.valid is not None
        valid = c.valid if has_valid else np.empty(0, np.bool_)
        flip = 0xFF if d else 0
        if c.is_bytes:
            _write_escaped(c.offsets, c.data, valid, has_valid, flip, data, pos)
        else:
            _write_fixed(np.ascontiguousarray(be), valid, has_valid, flip, data, pos)
    layout = ("memcmp", tuple((c.kind, d) for c, d in zip(cols, desc)))
    return EncodedKeys(offsets=offsets, data=data, layout=layout)


@njit
def _add_escaped_lengths(offsets, data, valid, has_valid, lengths):
    """lengths[i] += bytes of the escaped string i (each 0x00 doubled, plus the 2-byte terminator)."""
    for i in range(lengths.shape[0]):
        if has_valid and not valid[i]:
            continue
        extra = offsets[i + 1] - offsets[i] + 2
        for p in range(offsets[i], offsets[i + 1]):
            if data[p] == 0:
                extra += 1
        lengths[i] += extra


@njit
def _write_escaped(offsets, data, valid, has_valid, flip, out, pos):
    """Append marker + escaped string + terminator of every row i at out[pos[i]:], XOR flip; advance pos."""
    for i in range(pos.shape[0]):
        p = pos[i]
        if has_valid and not valid[i]:
            out[p] = flip
            pos[i] = p + 1
            continue
        out[p] = 1 ^ flip
        p += 1
        for q in range(offsets[i], offsets[i + 1]):
            b = data[q]
            out[p] = b ^ flip
            p += 1
            if b == 0:
                out[p] = 0xFF ^ flip
                p += 1
        out[p] = flip
        out[p + 1] = flip
        pos[i] = p + 2


@njit
def _write_fixed(be, valid, has_valid, flip, out, pos):
    """Append marker + big-endian value bytes (row i of ``be``) at out[pos[i]:], XOR flip; advance pos."""
    n, width = be.shape
    for i in range(n):
        p = pos[i]
        if has_valid and not valid[i]:
            out[p] = flip
            pos[i] = p + 1
            continue
        out[p] = 1 ^ flip
        for j in range(width):
            out[p + 1 + j] = be[i, j] ^ flip
        pos[i] = p + 1 + width


def warm_up() -> None:
    """Compile this module's kernels on tiny inputs."""
    encode_keys([pa.array(["a", None, "b\x00"]), pa.array([1, 2, None])], [False, True])
