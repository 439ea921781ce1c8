"""kernels.hashing == kernels.reference.hash_codes_reference (per-row BinaryRow + hash), and == the spec vectors."""
from __future__ import annotations

import datetime as dt
import json
import math
from decimal import Context, Decimal
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.types import parse_atomic
from kernels import hashing
from kernels.reference import bucket_ids_reference, hash_codes_reference

VECTORS = json.loads((Path(__file__).parent / "data" / "test-vectors.json").read_text())
_EXACT = Context(prec=100)


def _ints(bits):
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    return st.integers(lo, hi) | st.sampled_from([lo, hi, -1, 0, 1])


def _decimals(precision, scale):
    bound = 10**precision - 1
    special = [s * 2 ** (8 * k - 1) for k in range(1, 17) for s in (-1, 1) if 2 ** (8 * k - 1) <= bound]
    special += [-(2 ** (8 * k - 1)) - 1 for k in range(1, 16) if 2 ** (8 * k - 1) < bound]  # e.g. -129
    unscaled = st.integers(-bound, bound) | st.sampled_from(special + [0, -1, bound, -bound])
    return unscaled.map(lambda u: Decimal(u).scaleb(-scale, context=_EXACT))


_floats = st.floats(allow_nan=False) | st.sampled_from([-0.0, math.nan, -math.nan, math.inf, -math.inf])
_US_MIN, _US_MAX = -62135596800_000000, 253402300799_999999  # datetime.datetime's range in epoch micros
_strings = st.text(max_size=120) | st.sampled_from(["", "abcdefg", "abcdefgh", "été", "日本語のキー", "x" * 130])
_bytes = st.binary(max_size=120) | st.sampled_from([b"", b"\x00" * 7, b"\xff" * 8, b"\x80" * 101])

# (Arrow type, strategy of values pa.array accepts for it)
COLUMN_SPECS = [
    (pa.int8(), _ints(8)), (pa.int16(), _ints(16)), (pa.int32(), _ints(32)), (pa.int64(), _ints(64)),
    (pa.float32(), st.floats(width=32, allow_nan=False) | st.sampled_from([-0.0, math.nan, math.inf])),
    (pa.float64(), _floats),
    (pa.bool_(), st.booleans()),
    (pa.date32(), st.dates()),
    (pa.time32("ms"), st.integers(0, 86_399_999)),
    (pa.time32("s"), st.integers(0, 86_399)),
    (pa.time64("us"), st.integers(0, 86_399_999_999)),
    (pa.timestamp("s"), st.integers(_US_MIN // 10**6, _US_MAX // 10**6)),
    (pa.timestamp("ms"), st.integers(_US_MIN // 1000, _US_MAX // 1000)),
    (pa.timestamp("us"), st.integers(_US_MIN, _US_MAX) | st.sampled_from([-1, -999, -1000, -1001, 0])),
    (pa.timestamp("us", tz="UTC"), st.integers(_US_MIN, _US_MAX)),
    (pa.timestamp("ns"), _ints(64) | st.sampled_from([-1, -999_999, -1_000_000, -1_000_001])),
    (pa.decimal128(10, 2), _decimals(10, 2)),
    (pa.decimal128(18, 0), _decimals(18, 0)),
    (pa.decimal128(38, 0), _decimals(38, 0)),
    (pa.decimal128(38, 10), _decimals(38, 10)),
    (pa.decimal128(20, 5), _decimals(20, 5)),
    (pa.string(), _strings), (pa.large_string(), _strings),
    (pa.binary(), _bytes), (pa.large_binary(), _bytes),
    (pa.binary(3), st.binary(min_size=3, max_size=3)),
    (pa.binary(12), st.binary(min_size=12, max_size=12)),
]


def _to_arrow(values, t):
    if pa.types.is_timestamp(t) or pa.types.is_time(t):  # values are raw epoch / time-of-day integers
        storage = pa.int32() if pa.types.is_time32(t) else pa.int64()
        return pa.array(values, storage).cast(t)
    return pa.array(values, t)


@st.composite
def key_columns(draw, max_rows=12, max_cols=3):
    n = draw(st.integers(0, max_rows))
    pad = draw(st.integers(0, 4))  # leading rows sliced away: array.offset != 0
    specs = draw(st.lists(st.sampled_from(COLUMN_SPECS), min_size=1, max_size=max_cols))
    columns = []
    for t, values in specs:
        nulls = draw(st.booleans())
        elem = (st.none() | values) if nulls else values
        arr = _to_arrow(draw(st.lists(elem, min_size=n + pad, max_size=n + pad)), t).slice(pad)
        if draw(st.booleans()):
            cut = draw(st.integers(0, n))
            arr = pa.chunked_array([arr[:cut], arr[cut:]], type=t)
        columns.append(arr)
    return columns


@settings(deadline=None, max_examples=250, suppress_health_check=[HealthCheck.too_slow])
@given(key_columns(), st.sampled_from([1, 2, 3, 7, 16, 128, 2**31 - 1]))
def test_kernel_matches_reference(columns, num_buckets):
    expected = hash_codes_reference(columns)
    got = hashing.hash_codes(columns)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(hashing.bucket_ids(columns, num_buckets), bucket_ids_reference(columns, num_buckets))


@settings(deadline=None, max_examples=30)
@given(st.lists(st.none() | _ints(8), min_size=1, max_size=5), st.integers(57, 130))
def test_kernel_many_columns(values, arity):
    """Arity > 56 puts null bits into a second (or third) 8-byte word; both kernels handle it."""
    col = pa.array(values, pa.int8())
    for columns in ([col] * arity, [col, pa.array(["k" * 9] * len(values))] * (arity // 2)):
        np.testing.assert_array_equal(hashing.hash_codes(columns), hash_codes_reference(columns))


def test_empty_and_single_row():
    assert hashing.hash_codes([pa.array([], pa.int64())]).shape == (0,)
    assert hashing.bucket_ids([pa.chunked_array([], pa.string()), pa.array([], pa.int32())], 4).shape == (0,)
    assert hashing.hash_codes([pa.array([0], pa.int32())]).tolist() == [-300363099]
    assert hashing.hash_codes([pa.array([None], pa.int32())]).tolist() == [-1748325344]


def test_medium_random_composite_against_reference():
    rng = np.random.default_rng(7)
    n = 2000
    ids = pa.array(rng.integers(-(2**63), 2**63 - 1, n, dtype=np.int64), mask=rng.random(n) < 0.1)
    names = pa.array([("n%d" % i) * int(rng.integers(0, 6)) for i in range(n)], mask=rng.random(n) < 0.1)
    ts = pa.array(rng.integers(-(10**17), 10**17, n), pa.timestamp("ns"))
    for columns in ([ids], [names], [ids, names], [names, ts, ids]):
        sliced = [c.slice(5, n - 10) for c in columns]
        np.testing.assert_array_equal(hashing.hash_codes(sliced), hash_codes_reference(sliced))
        np.testing.assert_array_equal(hashing.bucket_ids(sliced, 10), bucket_ids_reference(sliced, 10))


# --- spec vectors ------------------------------------------------------------------------------------------
def _vector_column(text, type_text):
    t = parse_atomic(type_text.replace(" nullable", ""))
    arrow_type = t.to_arrow()
    if text is None:
        return pa.array([None], arrow_type)
    r = t.root
    if r in ("TINYINT", "SMALLINT", "INT", "BIGINT"):
        value = int(text)
    elif r == "BOOLEAN":
        value = text == "True"
    elif r in ("FLOAT", "DOUBLE"):
        value = float(text)
    elif r == "DATE":
        value = dt.date.fromisoformat(text)
    elif r == "DECIMAL":
        value = Decimal(text)
    elif r.startswith("TIMESTAMP"):
        value = dt.datetime.fromisoformat(text)
    else:
        value = text
    return pa.array([value], arrow_type)


@pytest.mark.parametrize("vec", VECTORS["buckets"], ids=lambda v: f"{v['key_types']}={v['key_values']}")
def test_kernel_bucket_vectors(vec):
    columns = [_vector_column(v, t) for v, t in zip(vec["key_values"], vec["key_types"].split(","))]
    assert hashing.hash_codes(columns).tolist() == [vec["hash_code"]]
    for n, bucket in vec["buckets"].items():
        assert hashing.bucket_ids(columns, int(n)).tolist() == [bucket]


@pytest.mark.parametrize("vec", [v for v in VECTORS["binary_rows"] if v["types"]], ids=lambda v: v["name"])
def test_kernel_binary_row_vectors(vec):
    columns = [_vector_column(v, t) for v, t in zip(vec["values"], vec["types"])]
    assert hashing.hash_codes(columns).tolist() == [vec["hash_code"]]


@pytest.mark.parametrize("vec", VECTORS["known_java_pypaimon_differences"], ids=lambda v: v["name"])
def test_kernel_follows_java_where_pypaimon_differs(vec):
    """The kernel produces the JAVA hash ([J]), not pypaimon's (format spec §9.6)."""
    name = vec["name"]
    if name.startswith("NULL "):
        column = _vector_column(None, name[len("NULL "):])
    else:
        type_text, _, number = name.rpartition(" ")
        column = _vector_column(number, type_text)
    assert hashing.hash_codes([column]).tolist() == [vec["java_expected_hash_code"]]


def test_kernel_end_to_end_checks():
    e2e = VECTORS["end_to_end_checks"]["FixedBucketRowKeyExtractor(bucket=4, pk=[id INT])"]
    assert hashing.bucket_ids([pa.array(e2e["ids"], pa.int32())], 4).tolist() == e2e["buckets"]
    worked = [pa.array([42], pa.int64()), pa.array(["longer than 7"])]
    assert hashing.hash_codes(worked).tolist() == [-213930647]


def test_bad_inputs():
    with pytest.raises(ValueError):
        hashing.hash_codes([])
    with pytest.raises(ValueError):
        hashing.hash_codes([pa.array([1, 2]), pa.array([1])])
    with pytest.raises(ValueError):
        hashing.bucket_ids([pa.array([1])], 0)
    with pytest.raises(TypeError):
        hashing.hash_codes([pa.array([[1]])])
    with pytest.raises(TypeError):
        hashing.hash_codes(pa.array([1]))
    for no_paimon_type in (pa.uint8(), pa.uint64(), pa.float16(), pa.date64(), pa.null()):
        with pytest.raises(TypeError):
            hashing.hash_codes([pa.array([None], no_paimon_type)])


def test_dictionary_and_view_inputs():
    plain = pa.array(["a", "bbbbbbbbbb", None, "a"])
    expected = hashing.hash_codes([plain])
    np.testing.assert_array_equal(hashing.hash_codes([plain.dictionary_encode()]), expected)
    np.testing.assert_array_equal(hashing.hash_codes([plain.cast(pa.string_view())]), expected)


# ---- the single-column fast paths (one key column without nulls) ----------------------------------------------

_SINGLE = st.sampled_from([
    (pa.int8(), st.integers(-128, 127)), (pa.int16(), st.integers(-2**15, 2**15 - 1)),
    (pa.int32(), st.integers(-2**31, 2**31 - 1)), (pa.int64(), st.integers(-2**63, 2**63 - 1)),
    (pa.float64(), st.floats(allow_nan=False)), (pa.date32(), st.dates()),
    (pa.string(), st.text(max_size=30)), (pa.large_string(), st.text(max_size=30)),
    (pa.binary(), st.binary(max_size=30)),
])


@settings(max_examples=200, deadline=None)
@given(data=st.data(), num_buckets=st.one_of(st.sampled_from([1, 2, 4, 16, 1024]), st.integers(1, 1000)),
       sliced=st.booleans())
def test_single_column_fast_path_matches_reference(data, num_buckets, sliced):
    t, values = data.draw(_SINGLE)
    vals = data.draw(st.lists(values, min_size=1, max_size=25))
    arr = pa.array(vals, t)
    if sliced and len(arr) > 2:
        arr = pa.array([vals[0]] + vals, t).slice(1, len(vals))
    assert np.array_equal(hashing.hash_codes([arr]), hash_codes_reference([arr]))
    assert np.array_equal(hashing.bucket_ids([arr], num_buckets), bucket_ids_reference([arr], num_buckets))


def test_single_string_column_pairs_of_equal_and_unequal_lengths():
    # rows hashed in lockstep pairs when their lengths match: cover pairs, odd counts, every length class
    vals = ["", "a", "abcdefg", "abcdefgh", "0123456789abcdef", "0123456789abcdeF", "xyz", "x" * 23, "y" * 23,
            "z" * 9]
    arr = pa.array(vals)
    for n in range(1, len(vals) + 1):
        assert np.array_equal(hashing.hash_codes([arr.slice(0, n)]), hash_codes_reference([arr.slice(0, n)]))
    assert np.array_equal(hashing.bucket_ids([arr], 7), bucket_ids_reference([arr], 7))
