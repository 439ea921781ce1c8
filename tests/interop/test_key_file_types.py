"""Primary-key columns whose type in pypaimon's data files differs from the table's Arrow type (BINARY(n) as
Parquet fixed_size_binary, TIMESTAMP(0) as Parquet milliseconds, ORC and Avro physical types): lakemerge merges,
compacts, looks up and produces lookup changelog over them as over its own files."""
from __future__ import annotations

import datetime as dt
import decimal

import pyarrow as pa
import pytest

from engine import Catalog
from tests.interop.pypaimon_util import pp_catalog, pp_create_table, pp_get_table, pp_read, pp_write

pytestmark = pytest.mark.interop

BINARY_KEY = pa.schema([pa.field("k", pa.binary(4), False), pa.field("v", pa.int64())])


@pytest.mark.parametrize("options", [{}, {"changelog-producer": "lookup"}], ids=["default", "lookup-changelog"])
def test_binary_n_key_of_pypaimon_files_merges_and_compacts(tmp_path, options):
    wh = str(tmp_path / "wh")
    pt = pp_create_table(pp_catalog(wh), "db.t", BINARY_KEY, ["k"], options={"bucket": "1", **options})
    # given fixed_size_binary data, pypaimon writes Parquet FIXED_LEN_BYTE_ARRAY (lakemerge writes variable binary)
    pp_write(pt, pa.table({"k": pa.array([b"abcd", b"wxyz"], pa.binary(4)), "v": [1, 2]}, schema=BINARY_KEY),
             schema=BINARY_KEY)
    t = Catalog(wh).get_table("db.t")
    t.write(pa.table({"k": pa.array([b"abcd"], pa.binary(4)), "v": [10]}, schema=BINARY_KEY))
    t.compact(full=True)
    expected = [{"k": b"abcd", "v": 10}, {"k": b"wxyz", "v": 2}]
    assert sorted(t.read().to_pylist(), key=lambda r: r["k"]) == expected
    assert pp_read(pp_get_table(wh, "db.t"), sort_by=["k"]).to_pylist() == expected
    assert t.lookup(pa.table({"k": pa.array([b"wxyz"], pa.binary(4))})).to_pylist() == [{"k": b"wxyz", "v": 2}]


@pytest.mark.parametrize("fmt,typ,key", [
    ("parquet", pa.timestamp("s"), dt.datetime(2024, 1, 1, 12)),   # Parquet has no seconds unit: stored as ms
    ("orc", pa.timestamp("us"), dt.datetime(2024, 1, 1, 12)),       # decodes as timestamp[ns]
    ("orc", pa.time32("ms"), dt.time(1, 2, 3)),                      # decodes as int32
    ("avro", pa.timestamp("ms"), dt.datetime(2024, 1, 1, 12)),
    ("avro", pa.decimal128(25, 2), decimal.Decimal("1.25")),
])
def test_lookup_of_key_stored_as_another_type(tmp_path, fmt, typ, key):
    wh = str(tmp_path / "wh")
    schema = pa.schema([pa.field("k", typ, False), pa.field("v", pa.int64())])
    pt = pp_create_table(pp_catalog(wh), "db.t", schema, ["k"], options={"bucket": "1", "file.format": fmt})
    pp_write(pt, pa.Table.from_pylist([{"k": key, "v": 1}], schema=schema))
    t = Catalog(wh).get_table("db.t")
    probe = pa.Table.from_pylist([{"k": key}], schema=pa.schema([("k", typ)]))
    assert t.lookup(probe).to_pylist() == [{"k": key, "v": 1}]


@pytest.mark.parametrize("fmt", ["orc", "avro"])
@pytest.mark.parametrize("typ,keys", [
    (pa.timestamp("ms"), [dt.datetime(2024, 1, 1, 12, 0, 0, 1000), dt.datetime(1969, 12, 31, 23, 59, 59)]),
    (pa.timestamp("us"), [dt.datetime(2024, 1, 1, 12, 0, 0, 7), dt.datetime(2000, 2, 29)]),
    (pa.timestamp("us", tz="UTC"), [dt.datetime(2024, 1, 1, 12, 0, 0, 7, tzinfo=dt.UTC),
                                    dt.datetime(1999, 1, 1, tzinfo=dt.UTC)]),
    (pa.decimal128(25, 2), [decimal.Decimal("1.25"), decimal.Decimal("-99999999999999999.99")]),
    (pa.decimal128(10, 3), [decimal.Decimal("0.001"), decimal.Decimal("-1.5")]),
    (pa.date32(), [dt.date(2024, 2, 29), dt.date(1960, 1, 1)]),
    (pa.binary(), [b"\x00\xff", b""]),
    (pa.time32("ms"), [dt.time(1, 2, 3, 4000), dt.time(23, 59, 59)]),
    (pa.int8(), [-128, 127]),
], ids=lambda v: str(v) if isinstance(v, pa.DataType) else None)
def test_lakemerge_orc_avro_keys_of_each_type(tmp_path, fmt, typ, keys):
    """lakemerge writes, upserts, compacts and looks up keys of each type in ORC / Avro files; pypaimon reads the
    same rows (with a nested value column)."""
    wh = str(tmp_path / "wh")
    nested = pa.struct([("n", pa.int32()), ("when", pa.timestamp("us"))])
    schema = pa.schema([pa.field("k", typ, False), ("v", pa.int64()), ("r", nested)])
    cat = Catalog(wh)
    cat.create_database("db", ignore_if_exists=True)
    t = cat.create_table("db.t", schema, primary_key=["k"], options={"bucket": "1", "file.format": fmt})
    r = {"n": 1, "when": dt.datetime(2024, 5, 6, 7, 8, 9, 10)}
    t.write(pa.Table.from_pylist([{"k": k, "v": i, "r": r} for i, k in enumerate(keys)], schema=schema))
    t.write(pa.Table.from_pylist([{"k": keys[0], "v": 10, "r": None}], schema=schema))
    t.compact(full=True)
    expected = [{"k": keys[0], "v": 10, "r": None}, {"k": keys[1], "v": 1, "r": r}]
    key = (lambda row: row["k"]) if typ != pa.binary() else (lambda row: row["k"] or b"")
    assert sorted(t.read().to_pylist(), key=key) == sorted(expected, key=key)
    assert sorted(pp_read(pp_get_table(wh, "db.t")).to_pylist(), key=key) == sorted(expected, key=key)
    probe = pa.Table.from_pylist([{"k": keys[1]}], schema=pa.schema([pa.field("k", typ)]))
    assert t.lookup(probe).to_pylist() == [expected[1]]
