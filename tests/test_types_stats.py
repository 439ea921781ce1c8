"""Types on lakemerge alone: min/max statistics and filters never drop a matching row, BinaryRow keeps every digit."""
from __future__ import annotations

import datetime as dt
import os

import pyarrow as pa
import pytest

from engine.meta import binary_row
from engine.errors import InvalidSchema
from engine.types import DataType, parse_atomic

NS = pa.timestamp("ns")


def _ns_table(catalog):
    t = catalog.create_table("db.t", pa.schema([("id", pa.int64()), ("ts", NS)]), primary_key=["id"],
                             options={"bucket": "1"})
    t.write(pa.table({"id": [1, 2], "ts": pa.array([1_700_000_000_000_003_399, -1], NS)}))
    return t


def test_binary_row_keeps_sub_microsecond_digits():
    ts9 = DataType("TIMESTAMP", precision=9)
    value = pa.scalar(1_700_000_000_000_003_399, NS).as_py()
    back = binary_row.decode_row(binary_row.encode_row([value, -1], [ts9, ts9]), [ts9, ts9])
    assert [pa.scalar(v, NS).value for v in back] == [1_700_000_000_000_003_399, -1]


def test_timestamp9_stats_do_not_skip_a_file_by_its_sub_microsecond_max(catalog):
    """The file's max 22:13:20.000003399 was decoded as 22:13:20.000003, so ts > 22:13:20.000003 skipped it."""
    t = _ns_table(catalog)
    assert t.read(filter=[("ts", ">", dt.datetime(2023, 11, 14, 22, 13, 20, 3))]).column("id").to_pylist() == [1]
    assert t.read(filter=[("ts", "<", dt.datetime(1970, 1, 1))]).column("id").to_pylist() == [2]


def test_nanosecond_literals_compare_exactly(catalog):
    """A nanosecond literal (pandas.Timestamp after the cast) went to Arrow through datetime, losing its last
    three digits, so ts = <the stored value> matched nothing."""
    t = _ns_table(catalog)
    stored = t.read().sort_by("id").column("ts")
    assert t.read(filter=[("ts", "=", stored[0])]).column("id").to_pylist() == [1]
    assert t.read(filter=[("ts", "=", stored[1])]).column("id").to_pylist() == [2]
    assert t.read(filter=[("ts", "in", [stored[0]])]).column("id").to_pylist() == [1]
    assert t.read(filter=[("ts", "not in", [stored[0]])]).column("id").to_pylist() == [2]


def test_pandas_timestamp_literals_keep_their_nanoseconds(catalog):
    """A pandas.Timestamp literal (what ``to_pylist`` gives for TIMESTAMP(9) values) went through
    ``pa.scalar``, which infers microseconds: ts = <a stored value with nanosecond digits> matched nothing and the
    plan pruned files by the truncated literal. Tz-aware literals on a TIMESTAMP_LTZ(9) column too."""
    t = _ns_table(catalog)
    stored = t.read().sort_by("id").column("ts").to_pylist()
    assert stored[0].nanosecond == 399
    assert t.read(filter=[("ts", "=", stored[0])]).column("id").to_pylist() == [1]
    assert t.read(filter=[("ts", "in", [stored[0], stored[1]])]).sort_by("id").column("id").to_pylist() == [1, 2]
    assert t.read(filter=[("ts", "<", stored[0]), ("ts", ">", stored[1])]).num_rows == 0
    ltz = catalog.create_table("db.ltz", pa.schema([("id", pa.int64()), ("ts", pa.timestamp("ns", tz="UTC"))]),
                               primary_key=["id"], options={"bucket": "1"})
    ltz.write(pa.table({"id": [1], "ts": pa.array([1_700_000_000_000_003_399], pa.timestamp("ns", tz="UTC"))}))
    (value,) = ltz.read().column("ts").to_pylist()
    assert ltz.read(filter=[("ts", "=", value)]).column("id").to_pylist() == [1]
    assert ltz.read(filter=[("ts", "=", value.tz_convert("Europe/Berlin"))]).column("id").to_pylist() == [1]


@pytest.mark.parametrize("arrow_type", [pa.decimal128(5, -2), pa.decimal128(3, 5), pa.binary(0)])
def test_types_outside_paimon_ranges_are_refused_at_create(catalog, warehouse, arrow_type):
    """DECIMAL(5, -2) and DECIMAL(3, 5) were written into schema-0 (which no reader, lakemerge included, could
    parse: the table was left broken) and BINARY(0) was accepted; Java's type constructors refuse all three."""
    with pytest.raises(InvalidSchema, match="column 'd'"):
        catalog.create_table("db.t", pa.schema([("k", pa.int32()), ("d", arrow_type)]), primary_key=["k"],
                             options={"bucket": "1"})
    assert not os.path.exists(os.path.join(warehouse, "db.db", "t"))
    for text in ("DECIMAL(39, 2)", "TIMESTAMP(10)", "VARCHAR(0)"):
        with pytest.raises(InvalidSchema):
            parse_atomic(text)


def test_partition_names_treat_blank_values_as_java_does():
    """Java's Character.isWhitespace does not count no-break spaces (U+00A0, U+2007, U+202F) or NEL (U+0085) as
    blank, so Java names those partitions by their value; Python's strip() made them __DEFAULT_PARTITION__, a
    directory Java never looks in. (pypaimon 2.1 uses isspace() and has the same bug.)"""
    from engine.paths import TablePaths

    string = DataType("VARCHAR", length=2147483647)
    names = [TablePaths.partition_dir(["p"], [v], [string], "__DEFAULT_PARTITION__")
             for v in ("\xa0", "\u2007", "\u202f", "\x85", " \t\n\x1f\u3000", "", None)]
    assert names == ["p=\xa0", "p=\u2007", "p=\u202f", "p=\x85"] + ["p=__DEFAULT_PARTITION__"] * 3


def test_float_keys_compact_in_java_order(catalog):
    """Files were ordered and checked for overlap by Python float comparison: [-0.0, NaN] and [0.0, NaN] looked
    disjoint (NaN is unordered, -0.0 == 0.0), so full compaction concatenated them unmerged and unsorted and the
    key NaN was read twice. Paimon compares keys with Double.compare: -0.0 < 0.0 are two keys, NaN is one.
    (pypaimon 2.1 merges -0.0 into 0.0.)"""
    t = catalog.create_table("db.f", pa.schema([("f", pa.float64()), ("v", pa.int32())]), primary_key=["f"],
                             options={"bucket": "1"})
    t.write(pa.table({"f": [-0.0, float("nan")], "v": pa.array([1, 3], pa.int32())}))
    t.write(pa.table({"f": [0.0, float("nan")], "v": pa.array([2, 4], pa.int32())}))
    t.compact(full=True)
    rows = [(repr(r["f"]), r["v"]) for r in t.read().to_pylist()]
    assert sorted(rows) == [("-0.0", 1), ("0.0", 2), ("nan", 4)]
    assert binary_row.order_key([-0.0], [DataType("DOUBLE")]) < binary_row.order_key([0.0], [DataType("DOUBLE")])


def test_nan_bounds_in_statistics_prove_nothing():
    """Java's stats collectors order NaN greatest, so a Java-written file with values [0.0, 1.5, NaN] has max NaN;
    every Python comparison with NaN is False, so '= 1.5' or '> 1.0' pruned the file."""
    from engine.read import predicate as pred

    nan = float("nan")
    for op, value in (("=", 1.5), (">", 1.0), (">=", 1.0), ("in", (1.5,)), ("<", 0.5)):
        assert pred.may_match([[("d", op, value)]], lambda c: (0.0, nan, 0), row_count=3), op
        assert pred.may_match([[("d", op, value)]], lambda c: (nan, nan, 0), row_count=3), op


def test_legacy_timestamp_partition_names_pad_the_year():
    """Java's LocalDateTime.toString pads the year to four digits; strftime('%Y') does not on Linux, so a
    TIMESTAMP partition in year 1 was named '1-01-01T00:00' instead of '0001-01-01T00:00'."""
    from engine.paths import partition_value_text

    ts = DataType("TIMESTAMP", precision=6)
    assert partition_value_text(dt.datetime(1, 1, 1), ts, "D") == "0001-01-01T00:00"
    assert partition_value_text(dt.datetime(999, 12, 31, 1, 2, 3, 4000), ts, "D") == "0999-12-31T01:02:03.004"


def test_is_null_and_is_not_null_filters(catalog):
    """("c", "is null", None) and ("c", "is not null", None), as Paimon's IsNull / IsNotNull predicates: on value
    columns (after the merge), on partition columns (a null partition value is a null) and in statistics pruning
    (a file of only nulls holds no "is not null" row, a file without nulls no "is null" row)."""
    schema = pa.schema([("p", pa.string()), ("k", pa.int64()), ("v", pa.float64())])
    t = catalog.create_table("db.nn", schema, primary_key=["k"], options={"bucket": "1"})
    t.write(pa.table({"p": ["a", "b", "c"], "k": [1, 2, 3], "v": [1.5, None, float("nan")]}, schema=schema))
    t.write(pa.table({"p": ["a"], "k": [1], "v": [None]}, schema=schema))  # the null wins the merge
    ids = lambda flt: sorted(t.read(filter=flt).column("k").to_pylist())  # noqa: E731
    assert ids([("v", "is null", None)]) == [1, 2]
    assert ids([("v", "is not null", None)]) == [3]
    assert ids([("v", "IS NOT NULL", None), ("k", "<", 3)]) == []
    assert ids([[("v", "is null", None), ("k", "=", 1)], [("k", "=", 3)]]) == [1, 3]
    appended = catalog.create_table("db.ap", schema, partition_keys=["p"])
    appended.write(pa.table({"p": [None, "x", None], "k": [1, 2, 3], "v": [None, None, 2.0]}, schema=schema))
    assert sorted(appended.read(filter=[("p", "is null", None)]).column("k").to_pylist()) == [1, 3]
    assert sorted(appended.read(filter=[("p", "is not null", None)]).column("k").to_pylist()) == [2]
    assert sorted(appended.read(filter=[("v", "is not null", None)]).column("k").to_pylist()) == [3]
    from engine.read import predicate as pred
    dnf = pred.normalize([("v", "is null", None)], schema, "t")
    assert not pred.may_match(dnf, lambda c: (1.0, 2.0, 0), row_count=5)
    assert pred.may_match(dnf, lambda c: (None, None, 5), row_count=5)
    dnf = pred.normalize([("v", "is not null", None)], schema, "t")
    assert not pred.may_match(dnf, lambda c: (None, None, 5), row_count=5)
    assert pred.may_match(dnf, lambda c: (1.0, 2.0, 4), row_count=5)
