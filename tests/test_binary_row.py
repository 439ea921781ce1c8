"""engine.meta.binary_row against the spec vectors (format spec §9, semantics §1.3-1.4) and round trips."""
from __future__ import annotations

import datetime as dt
import json
import math
from decimal import Context, Decimal
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.errors import InvalidInput, UnsupportedFeature
from engine.meta import binary_row as br
from engine.types import DataType, parse_atomic

VECTORS = json.loads((Path(__file__).parent / "data" / "test-vectors.json").read_text())


def parse_value(text, t: DataType):
    """Values in test-vectors.json are strings (str() of the Python value); None is NULL."""
    if text is None:
        return None
    r = t.root
    if r in ("TINYINT", "SMALLINT", "INT", "BIGINT"):
        return int(text)
    if r == "BOOLEAN":
        return {"True": True, "False": False}[text]
    if r in ("FLOAT", "DOUBLE"):
        return float(text)
    if r == "DATE":
        return dt.date.fromisoformat(text)
    if r == "DECIMAL":
        return Decimal(text)
    if r in ("TIMESTAMP", "TIMESTAMP_LTZ"):
        return dt.datetime.fromisoformat(text)
    return text


def bucket_key_types(spec: str) -> list[DataType]:
    """``buckets[].key_types``: comma-separated; 'INT nullable' is nullable, the others are key columns."""
    return [parse_atomic(p.replace(" nullable", "")) for p in spec.split(",")]


@pytest.mark.parametrize("vec", VECTORS["binary_rows"], ids=lambda v: v["name"])
def test_binary_row_vectors(vec):
    types = [parse_atomic(t) for t in vec["types"]]
    values = [parse_value(v, t) for v, t in zip(vec["values"], types)]
    row = br.encode_row(values, types)
    assert row.hex() == vec["row_hex"]
    assert len(row) == vec["size_in_bytes"]
    assert br.hash_code(row) == vec["hash_code"]
    serialized = br.serialize_row(values, types)
    assert serialized.hex() == vec["serialized_hex_with_arity_prefix"]
    for decoded in (br.decode_row(row, types), br.deserialize_row(serialized, types)):
        assert [None if v is None else str(v) for v in decoded] == vec["roundtrip"]


@pytest.mark.parametrize("vec", VECTORS["buckets"], ids=lambda v: f"{v['key_types']}={v['key_values']}")
def test_bucket_vectors(vec):
    types = bucket_key_types(vec["key_types"])
    values = [parse_value(v, t) for v, t in zip(vec["key_values"], types)]
    row = br.encode_row(values, types)
    assert row.hex() == vec["key_row_hex"]
    h = br.hash_code(row)
    assert h == vec["hash_code"]
    for n, bucket in vec["buckets"].items():
        assert br.bucket_of(h, int(n)) == bucket


@pytest.mark.parametrize("vec", VECTORS["known_java_pypaimon_differences"], ids=lambda v: v["name"])
def test_known_java_pypaimon_differences_follow_java(vec):
    """We write the JAVA bytes/hash ([J]), not pypaimon's (format spec §9.6); pypaimon's rows still decode."""
    name = vec["name"]
    if name.startswith("NULL "):
        t, value = parse_atomic(name[len("NULL "):]), None
    else:
        type_text, _, number = name.rpartition(" ")
        t, value = parse_atomic(type_text), Decimal(number)
    row = br.encode_row([value], [t])
    assert row.hex() == vec["java_expected_row_hex"].replace(" ", "")
    assert br.hash_code(row) == vec["java_expected_hash_code"]
    assert br.hash_code(bytes.fromhex(vec["pypaimon_row_hex"].replace(" ", ""))) == vec["pypaimon_hash_code"]
    for data in (row, bytes.fromhex(vec["pypaimon_row_hex"].replace(" ", ""))):
        assert br.decode_row(data, [t]) == [value]


def test_end_to_end_checks():
    checks = VECTORS["end_to_end_checks"]
    e2e = checks["FixedBucketRowKeyExtractor(bucket=4, pk=[id INT])"]
    buckets = [br.bucket_of(br.hash_code(br.encode_row([i], [parse_atomic("INT NOT NULL")])), 4) for i in e2e["ids"]]
    assert buckets == e2e["buckets"]
    # bucket-key = b: only b forms the key row
    expected = checks["FixedBucketRowKeyExtractor(bucket=8, pk=[a,b], bucket-key=b) rows (1,'abc'),(2,'abc')"]
    string = parse_atomic("STRING NOT NULL")
    assert [br.bucket_of(br.hash_code(br.encode_row(["abc"], [string])), 8)] * 2 == expected
    # partition dt is excluded from the key: only id BIGINT remains
    key = "FixedBucketRowKeyExtractor(bucket=5, partition=dt, pk=[dt,id]) rows ('20230501',7),('20230502',7)"
    expected = checks[key]
    bigint = parse_atomic("BIGINT NOT NULL")
    assert [br.bucket_of(br.hash_code(br.encode_row([7], [bigint])), 5)] * 2 == expected


def test_spec_worked_example_and_table():
    types = [parse_atomic("BIGINT"), parse_atomic("STRING")]
    row = br.encode_row([42, "longer than 7"], types)
    assert row.hex() == "00" * 8 + "2a00000000000000" + "0d00000018000000" + "6c6f6e6765722074" + "68616e2037000000"
    assert br.hash_code(row) == -213930647
    table = [
        (["INT"], [1], "0000000000000000 0100000000000000"),
        (["INT"], [None], "0001000000000000 0000000000000000"),
        (["STRING"], ["abc"], "0000000000000000 6162630000000083"),
        (["STRING"], ["abcdefgh"], "0000000000000000 0800000010000000 6162636465666768"),
        (["INT", "STRING"], [None, "x"], "0001000000000000 0000000000000000 7800000000000081"),
        (["DECIMAL(38, 10)"], [Decimal("123.45")],
         "0000000000000000 0600000010000000 011f6def19000000 0000000000000000"),
        (["TIMESTAMP(6)"], [dt.datetime(2023, 5, 1, 12, 34, 56, 789123)],
         "0000000000000000 78e0010010000000 95144fd787010000"),
        ([], [], "0000000000000000"),
    ]
    for type_texts, values, words in table:
        assert br.encode_row(values, [parse_atomic(t) for t in type_texts]).hex() == words.replace(" ", "")
    # §9.5 partition example, §9.2 NULL TIMESTAMP(6) as [J] writes it
    assert br.serialize_row(["20230501"], [parse_atomic("STRING")]).hex() == (
        "00000001" + "0000000000000000" + "0800000010000000" + "3230323330353031")
    assert br.encode_row([None], [parse_atomic("TIMESTAMP(6)")]).hex() == (
        "0001000000000000" + "0000000010000000" + "0000000000000000")
    assert br.EMPTY_ROW_SERIALIZED == br.serialize_row([], [])
    assert br.deserialize_row(br.EMPTY_ROW_SERIALIZED, []) == []


def test_accepts_raw_arrow_integers():
    ts6, ts9, ts0, ts3 = (parse_atomic(f"TIMESTAMP({p})") for p in (6, 9, 0, 3))
    value = dt.datetime(2023, 5, 1, 12, 34, 56, 789123)
    micros = 1682944496789123
    assert br.encode_row([micros], [ts6]) == br.encode_row([value], [ts6])
    assert br.encode_row([micros * 1000 + 7], [ts9])[16:] == br.encode_row([value], [ts6])[16:]
    assert br.encode_row([micros * 1000 + 7], [ts9])[8:12] == (789123007 % 1_000_000).to_bytes(4, "little")
    assert br.encode_row([micros // 1000], [ts3]) == br.encode_row([value], [ts3])
    assert br.encode_row([micros // 1_000_000], [ts0]) == br.encode_row([value.replace(microsecond=0)], [ts0])
    date = parse_atomic("DATE")
    assert br.encode_row([19478], [date]) == br.encode_row([dt.date(2023, 5, 1)], [date])
    # pre-1970: millis floor, nano-of-millisecond stays in 0..999_999
    row = br.encode_row([-1], [ts6])
    assert row[8:12] == (999_000).to_bytes(4, "little") and row[16:24] == (-1).to_bytes(8, "little", signed=True)
    assert br.decode_row(row, [ts6]) == [dt.datetime(1969, 12, 31, 23, 59, 59, 999999)]


def test_timestamp_ltz_and_aware_datetimes():
    ltz = parse_atomic("TIMESTAMP(6) WITH LOCAL TIME ZONE")
    utc = dt.datetime(2023, 5, 1, 12, 0, tzinfo=dt.timezone.utc)
    plus2 = dt.datetime(2023, 5, 1, 14, 0, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    assert br.encode_row([utc], [ltz]) == br.encode_row([plus2], [ltz])
    assert br.encode_row([utc], [ltz]) == br.encode_row([utc.replace(tzinfo=None)], [parse_atomic("TIMESTAMP(6)")])
    assert br.decode_row(br.encode_row([plus2], [ltz]), [ltz]) == [utc]


def test_invalid_values_raise_with_column_position():
    cases = [
        (["INT", "INT"], [1, 2**31]),
        (["INT", "TINYINT"], [1, 128]),
        (["INT", "STRING"], [1, b"bytes"]),
        (["INT", "BYTES"], [1, "str"]),
        (["INT", "DECIMAL(5, 2)"], [1, Decimal("1234.5")]),
        (["INT", "DECIMAL(10, 2)"], [1, Decimal("1.005")]),
        (["INT", "DECIMAL(38, 2)"], [1, Decimal("NaN")]),
        (["INT", "DATE"], [1, "2023-05-01"]),
        (["INT", "DATE"], [1, dt.datetime(2023, 5, 1)]),
        (["INT", "TIMESTAMP(3)"], [1, dt.date(2023, 5, 1)]),
        (["INT", "FLOAT"], [1, "1.5"]),
        (["INT", "FLOAT"], [1, 1e300]),
        (["INT", "BOOLEAN"], [1, 2]),
        (["INT", "TIME"], [1, 86_400_000]),
    ]
    for type_texts, values in cases:
        with pytest.raises(InvalidInput, match="column 1"):
            br.encode_row(values, [parse_atomic(t) for t in type_texts])
    with pytest.raises(InvalidInput):
        br.encode_row([1], [])
    with pytest.raises(InvalidInput):
        br.deserialize_row(br.serialize_row([1], [parse_atomic("INT")]), [])
    with pytest.raises(InvalidInput):
        br.decode_row(b"\x00" * 8, [parse_atomic("INT")])


def test_nested_types_unsupported():
    nested = DataType("ARRAY", element=parse_atomic("INT"))
    with pytest.raises(UnsupportedFeature):
        br.encode_row([[1]], [nested])
    with pytest.raises(UnsupportedFeature):
        br.decode_row(bytes(16), [nested])


def test_bucket_of_is_java_math_abs_of_truncated_remainder():
    assert br.bucket_of(-7, 4) == 3  # Java: -7 % 4 == -3, abs -> 3 (Python's -7 % 4 would be 1)
    assert br.bucket_of(-(2**31), 10) == 8
    assert br.bucket_of(2**31 - 1, 1) == 0
    with pytest.raises(InvalidInput):
        br.bucket_of(1, 0)


def test_java_big_integer_bytes():
    assert br.java_big_integer_bytes(-128) == b"\x80"
    assert br.java_big_integer_bytes(-32768) == b"\x80\x00"
    assert br.java_big_integer_bytes(-129) == b"\xff\x7f"
    assert br.java_big_integer_bytes(128) == b"\x00\x80"
    assert br.java_big_integer_bytes(0) == b"\x00"
    assert br.java_big_integer_bytes(-1) == b"\xff"
    assert len(br.java_big_integer_bytes(-(10**38 - 1))) == 16


# --- hypothesis round trips -------------------------------------------------------------------------------
def _ints(bits):
    return st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)


def _decimals(precision, scale):
    bound = 10**precision - 1
    return st.integers(-bound, bound).map(lambda u: Decimal(u).scaleb(-scale, context=_EXACT))


_EXACT = Context(prec=100)
_datetimes = st.datetimes(min_value=dt.datetime(1, 1, 2), max_value=dt.datetime(9999, 12, 30))

FIELDS = {
    "BOOLEAN": st.booleans(),
    "TINYINT": _ints(8),
    "SMALLINT": _ints(16),
    "INT": _ints(32),
    "BIGINT": _ints(64),
    "FLOAT": st.floats(width=32, allow_nan=False),
    "DOUBLE": st.floats(allow_nan=False),
    "DATE": st.dates(),
    "TIME": st.times().map(lambda t: t.replace(microsecond=t.microsecond // 1000 * 1000)),
    "TIMESTAMP(3)": _datetimes.map(lambda d: d.replace(microsecond=d.microsecond // 1000 * 1000)),
    "TIMESTAMP(0)": _datetimes.map(lambda d: d.replace(microsecond=0)),
    "TIMESTAMP(6)": _datetimes,
    "TIMESTAMP(9)": _datetimes,
    "TIMESTAMP(6) WITH LOCAL TIME ZONE": _datetimes.map(lambda d: d.replace(tzinfo=dt.timezone.utc)),
    "DECIMAL(10, 2)": _decimals(10, 2),
    "DECIMAL(18, 0)": _decimals(18, 0),
    "DECIMAL(38, 10)": _decimals(38, 10),
    "DECIMAL(20, 0)": _decimals(20, 0),
    "STRING": st.text(max_size=40),
    "VARCHAR(10)": st.text(max_size=10),
    "BYTES": st.binary(max_size=40),
    "BINARY(4)": st.binary(min_size=4, max_size=4),
}


@st.composite
def rows(draw):
    names = draw(st.lists(st.sampled_from(sorted(FIELDS)), max_size=70))  # > 56 columns: two null-bit words
    values = [draw(st.none() | FIELDS[name]) for name in names]
    return [parse_atomic(n) for n in names], values


@settings(deadline=None, max_examples=300)
@given(rows())
def test_roundtrip(row):
    types, values = row
    data = br.encode_row(values, types)
    assert len(data) % 8 == 0 and data[0] == 0
    assert len(data) >= br.null_bits_size(len(types)) + 8 * len(types)
    assert br.decode_row(data, types) == values
    assert br.deserialize_row(br.serialize_row(values, types), types) == values
    assert -(2**31) <= br.hash_code(data) < 2**31


@settings(deadline=None)
@given(st.floats(width=32) | st.sampled_from([-0.0, math.inf, -math.inf]))
def test_float_bits_roundtrip(x):
    t = parse_atomic("FLOAT")
    (back,) = br.decode_row(br.encode_row([x], [t]), [t])
    assert (math.isnan(x) and math.isnan(back)) or (back == x and math.copysign(1, back) == math.copysign(1, x))


def test_nanosecond_timestamps_at_the_ends_of_arrows_range_round_trip():
    """TIMESTAMP(9) values as far out as Arrow's nanosecond timestamps reach (+-(2**63 - 1) ns, pandas' own limits)
    decode back to themselves: decoding went through a microsecond datetime floored below pandas' minimum and then
    raised 'cannot decode TIMESTAMP(9) from BinaryRow', so a table with such a key could not be read or compacted."""
    import pandas as pd

    ts9 = parse_atomic("TIMESTAMP(9)")
    for ns in (-(2**63 - 1), 2**63 - 1, -1, -999, -1_000_001):
        assert br.decode_row(br.encode_row([ns], [ts9]), [ts9]) == [pd.Timestamp(ns, unit="ns")], ns


def test_upper_bound_of_floored_nanosecond_values():
    """A TIMESTAMP(7..9) maximum without sub-microsecond digits (maybe floored by pypaimon) is raised to bound
    every value with that floor, also in the last microsecond of Arrow's nanosecond range (raised to its largest
    value, 2**63 - 1 ns); values with nanosecond digits and other types stay as they are."""
    import pandas as pd

    ts9, ltz9, ts6 = parse_atomic("TIMESTAMP(9)"), parse_atomic("TIMESTAMP_LTZ(9)"), parse_atomic("TIMESTAMP(6)")
    top = pd.Timestamp(2**63 - 1, unit="ns")
    floored_top = dt.datetime(2262, 4, 11, 23, 47, 16, 854775)
    assert br.upper_bound_of_floored([floored_top], [ts9]) == [top]
    assert br.upper_bound_of_floored([floored_top.replace(tzinfo=dt.timezone.utc)], [ltz9]) == \
        [top.tz_localize("UTC")]
    assert br.upper_bound_of_floored([dt.datetime(2020, 1, 1)], [ts9]) == [pd.Timestamp("2020-01-01 00:00:00.000001")]
    assert br.upper_bound_of_floored([pd.Timestamp(5, unit="ns"), dt.datetime(2020, 1, 1), 7],
                                    [ts9, ts6, parse_atomic("BIGINT")]) == \
        [pd.Timestamp(5, unit="ns"), dt.datetime(2020, 1, 1), 7]
