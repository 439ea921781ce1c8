"""Types on lakemerge alone: min/max statistics and filters never drop a matching row, BinaryRow keeps every digit."""
from __future__ import annotations

import datetime as dt

import pyarrow as pa

from engine.meta import binary_row
from engine.types import DataType

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
