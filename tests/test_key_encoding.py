"""kernels.keys.encode_keys: encoded order == the Paimon key comparator (kernels.reference.key_tuple).

The strategies here (key schemas, rows, Arrow materialisation) are shared with test_merge_kernel.py and
test_lookup_kernel.py.
"""
from __future__ import annotations

import datetime
import decimal
import itertools
import math
import struct

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernels.keys import EncodedKeys, compatible, encode_keys
from kernels.reference import key_tuple, key_tuples

# ---- shared strategies ------------------------------------------------------------------------------------------

NEG_NAN = struct.unpack("<d", struct.pack("<Q", 0xFFF8_0000_0000_0001))[0]
PAYLOAD_NAN = struct.unpack("<d", struct.pack("<Q", 0x7FF0_0000_0000_0ABC))[0]
I64 = (-(2 ** 63), 2 ** 63 - 1)
TEXT = st.text(alphabet=st.sampled_from(["a", "b", "\x00", "\x01", "é", "\u4e2d", "\U0001f600", "\xff"]),
               max_size=6)
SPECIAL_TEXT = st.sampled_from(["", "a", "a\x00", "\x00", "ab", "\uffff", "a" * 200, "a" * 199 + "\x00"])
SPECIAL_BYTES = st.sampled_from([b"", b"\x00", b"\x00\x00", b"\xff", b"a", b"a\x00", b"\x01" * 200])


def _decimals(precision: int, scale: int):
    unscaled = st.integers(-(10 ** precision) + 1, 10 ** precision - 1) | st.integers(-3, 3)
    return unscaled.map(lambda u: decimal.Decimal(f"{u}E-{scale}"))  # exact, whatever the decimal context


# name -> (arrow type, value strategy)
TYPES = {
    "int64": (pa.int64(), st.one_of(st.sampled_from([I64[0], I64[1], 0, -1, 1]), st.integers(*I64),
                                    st.integers(-3, 3))),
    "int32": (pa.int32(), st.integers(-(2 ** 31), 2 ** 31 - 1) | st.integers(-2, 2)),
    "int8": (pa.int8(), st.integers(-128, 127)),
    "uint64": (pa.uint64(), st.sampled_from([0, 2 ** 64 - 1]) | st.integers(0, 2 ** 64 - 1)),
    "float64": (pa.float64(), st.one_of(st.sampled_from([0.0, -0.0, math.nan, NEG_NAN, PAYLOAD_NAN, math.inf,
                                                         -math.inf, 5e-324, -5e-324]), st.floats())),
    "float32": (pa.float32(), st.one_of(st.sampled_from([0.0, -0.0, math.nan, math.inf, -math.inf]),
                                        st.floats(width=32))),
    "bool": (pa.bool_(), st.booleans()),
    "string": (pa.string(), st.one_of(SPECIAL_TEXT, TEXT)),
    "large_string": (pa.large_string(), TEXT),
    "binary": (pa.binary(), st.one_of(SPECIAL_BYTES, st.binary(max_size=5))),
    "decimal(10,2)": (pa.decimal128(10, 2), _decimals(10, 2)),
    "decimal(38,4)": (pa.decimal128(38, 4), _decimals(38, 4) | st.sampled_from([decimal.Decimal("-0.0001")])),
    "date32": (pa.date32(), st.dates()),
    "timestamp_ns": (pa.timestamp("ns", "UTC"), st.integers(*I64)),
    "time64": (pa.time64("us"), st.times().map(lambda t: t.replace(tzinfo=None))),
}
BYTES_TYPES = {"string", "large_string", "binary"}


@st.composite
def schemas(draw, names=None, max_columns=3):
    """(type names, nullable flags)."""
    if names is None:
        names = draw(st.lists(st.sampled_from(sorted(TYPES)), min_size=1, max_size=max_columns))
    return list(names), [draw(st.booleans()) for _ in names]


def row_strategy(schema):
    names, nullable = schema
    return st.tuples(*[(st.none() | TYPES[n][1]) if nl else TYPES[n][1] for n, nl in zip(names, nullable)])


@st.composite
def rows_for(draw, schema, min_size=0, max_size=20):
    """Rows (tuples of Python values), drawn partly from a small pool so that keys repeat."""
    row = row_strategy(schema)
    pool = draw(st.lists(row, min_size=1, max_size=5))
    return draw(st.lists(st.sampled_from(pool) | row, min_size=min_size, max_size=max_size))


@st.composite
def layouts(draw):
    """How a column is materialised: plain, a slice of a longer array, or a chunked array."""
    return draw(st.sampled_from(["plain", "sliced", "chunked"])), draw(st.integers(0, 9)), draw(st.integers(0, 9))


def to_array(values, arrow_type, layout=("plain", 0, 0)):
    kind, a, b = layout
    if kind == "sliced":
        pad = [None] + values[:1]
        arr = pa.array(pad[: a % 3] + list(values) + pad[: b % 3], type=arrow_type)
        return arr.slice(a % 3, len(values))
    if kind == "chunked":
        cuts = sorted({0, len(values), min(a, len(values)), min(b, len(values))})
        return pa.chunked_array([pa.array(values[x:y], type=arrow_type) for x, y in itertools.pairwise(cuts)],
                                type=arrow_type)
    return pa.array(values, type=arrow_type)


def to_columns(schema, rows, layout_list=None):
    names = schema[0]
    layout_list = layout_list or [("plain", 0, 0)] * len(names)
    return [to_array([r[j] for r in rows], TYPES[n][0], layout_list[j]) for j, n in enumerate(names)]


def sign(x) -> int:
    return (x > 0) - (x < 0)


def cmp(a, b) -> int:
    return (a > b) - (a < b)


# ---- order == reference comparator ------------------------------------------------------------------------------

@settings(deadline=None, max_examples=300)
@given(data=st.data())
def test_encoded_order_equals_reference(data):
    schema = data.draw(schemas())
    rows = data.draw(rows_for(schema, max_size=16))
    cols = to_columns(schema, rows, [data.draw(layouts()) for _ in schema[0]])
    desc = data.draw(st.lists(st.booleans(), min_size=len(cols), max_size=len(cols)))
    enc = encode_keys(cols, desc, nullable=data.draw(st.booleans()))
    assert enc.n == len(rows)
    assert enc.is_fixed == (not BYTES_TYPES.intersection(schema[0]))
    ref = key_tuples(cols, desc)
    got = [enc.row(i) for i in range(enc.n)]
    for i in range(len(rows)):
        for j in range(len(rows)):
            assert cmp(got[i], got[j]) == cmp(ref[i], ref[j]), (rows[i], rows[j])


@settings(deadline=None, max_examples=150)
@given(data=st.data())
def test_random_pairs_match_key_tuple(data):
    """Two independent rows, each column compared by the encoding and by the reference comparator."""
    schema = data.draw(schemas())
    row = row_strategy(schema)
    a, b = data.draw(row), data.draw(row)
    cols = to_columns(schema, [a, b])
    enc = encode_keys(cols, nullable=True)
    assert cmp(enc.row(0), enc.row(1)) == cmp(key_tuple(cols, 0), key_tuple(cols, 1))


# ---- specific cases ---------------------------------------------------------------------------------------------

def _order(enc: EncodedKeys) -> list[int]:
    return sorted(range(enc.n), key=enc.row)


def test_int64_extremes_and_fixed_layout():
    enc = encode_keys([pa.array([2 ** 63 - 1, -(2 ** 63), 0, -1, 1])])
    assert enc.words.shape == (5, 1) and enc.words.flags.c_contiguous
    assert _order(enc) == [1, 3, 2, 4, 0]
    assert enc.words[0, 0] == np.uint64(2 ** 64 - 1) and enc.words[1, 0] == 0


def test_floats_total_order():
    values = [math.nan, 1.0, -0.0, 0.0, -math.inf, math.inf, NEG_NAN, -1.0, PAYLOAD_NAN]
    for t in (pa.float64(), pa.float32()):
        enc = encode_keys([pa.array(values, t)])
        assert [values[i] for i in _order(enc)][:6] == [-math.inf, -1.0, -0.0, 0.0, 1.0, math.inf]
        assert str([values[i] for i in _order(enc)][:3]) == "[-inf, -1.0, -0.0]"
        nan_words = {enc.row(i) for i, v in enumerate(values) if math.isnan(v)}
        assert len(nan_words) == 1  # all NaNs equal


def test_nulls_first_and_descending_nulls_last():
    arr = pa.array([3, None, 1])
    assert _order(encode_keys([arr])) == [1, 2, 0]
    assert _order(encode_keys([arr], [True])) == [0, 2, 1]
    s = pa.array(["b", None, "a"])
    assert _order(encode_keys([s])) == [1, 2, 0]
    assert _order(encode_keys([s], [True])) == [0, 2, 1]


def test_null_word_only_when_needed():
    assert encode_keys([pa.array([1, 2])]).width == 1
    assert encode_keys([pa.array([1, None])]).width == 2
    assert encode_keys([pa.array([1, 2])], nullable=True).width == 2
    a, b = encode_keys([pa.array([1, 2])], nullable=True), encode_keys([pa.array([None, 2])], nullable=True)
    assert compatible(a, b)
    assert not compatible(encode_keys([pa.array([1, 2])]), b)
    assert not compatible(encode_keys([pa.array([1])]), encode_keys([pa.array([1.0])]))


def test_strings_embedded_nul_and_prefixes():
    values = ["a\x00", "a", "", "a\x00\x00", "ab", "\x00", "é", "a" * 200]
    expected = sorted(range(len(values)), key=lambda i: values[i].encode())
    for cols in ([pa.array(values)], [pa.array(values), pa.array([1] * len(values))],
                 [pa.array(values, pa.large_binary()), pa.array(values)]):
        assert _order(encode_keys(cols)) == expected
    # descending string followed by another column: terminator handling keeps prefixes right
    enc = encode_keys([pa.array(values), pa.array([0] * len(values))], [True, False])
    assert _order(enc) == expected[::-1]


def test_single_string_column_is_zero_copy():
    arr = pa.array(["xx", "b", "a\x00", "ccc"]).slice(1, 3)
    enc = encode_keys([arr])
    assert enc.layout == ("raw", "bytes")
    assert enc.data.ctypes.data == arr.buffers()[2].address
    assert [enc.row(i) for i in range(3)] == [b"b", b"a\x00", b"ccc"]
    assert enc.offsets.dtype == np.int64 and enc.offsets[0] == 2
    large = pa.array(["q", "r"], pa.large_binary())
    assert encode_keys([large]).offsets.ctypes.data == large.buffers()[1].address
    # nulls, descending or nullable=True switch to the memcomparable form
    assert encode_keys([pa.array(["a", None])]).layout[0] == "memcmp"
    assert encode_keys([arr], [True]).layout[0] == "memcmp"
    assert encode_keys([arr], nullable=True).layout[0] == "memcmp"


def test_empty_and_chunked_inputs():
    for t in (pa.int64(), pa.string(), pa.bool_(), pa.decimal128(30, 2)):
        enc = encode_keys([pa.array([], t)])
        assert enc.n == 0
        enc = encode_keys([pa.chunked_array([], t)])
        assert enc.n == 0
    enc = encode_keys([pa.chunked_array([[3, None], [], [1]]), pa.chunked_array([["x"], ["y", "z"]])])
    assert enc.n == 3 and not enc.is_fixed
    assert _order(enc) == [1, 2, 0]


def test_other_types():
    dec = pa.array([decimal.Decimal("1.50"), decimal.Decimal("-2.25"), None], pa.decimal128(38, 2))
    assert _order(encode_keys([dec])) == [2, 1, 0]
    ts = pa.array([datetime.datetime(2024, 1, 1, 0, 0, 0, 1), datetime.datetime(1960, 1, 1)], pa.timestamp("us"))
    assert _order(encode_keys([ts])) == [1, 0]
    dic = pa.array(["b", "a", "b"]).dictionary_encode()
    assert _order(encode_keys([dic])) == [1, 0, 2]
    fsb = pa.array([b"\x02\x00", b"\x01\xff"], pa.binary(2))
    assert _order(encode_keys([fsb])) == [1, 0]
    boolean = pa.array([True, False, None, True]).slice(1)
    assert _order(encode_keys([boolean])) == [1, 0, 2]


def test_bad_input():
    with pytest.raises(ValueError):
        encode_keys([])
    with pytest.raises(ValueError):
        encode_keys([pa.array([1]), pa.array([1, 2])])
    with pytest.raises(ValueError):
        encode_keys([pa.array([1])], [True, False])
    with pytest.raises(TypeError):
        encode_keys([pa.array([[1]])])
    with pytest.raises(TypeError):
        encode_keys([np.array([1])])
