"""lakemerge's system tables against pypaimon 2.1's on the same table (written by lakemerge, tagged by pypaimon).

Columns and types must be identical. Values must be identical except where pypaimon departs from Paimon (Java),
which lakemerge follows:
- ``$files.partition``: Java casts the partition row to text (``{a}``); pypaimon writes ``dt=a``.
- ``$files.file_path``: Java gives the full path (bucket directory + name); pypaimon only the file name.
- ``$files`` stats maps: Java prints ``{name=1, x=null}`` (TreeMap.toString); pypaimon prints JSON.
- ``$files.file_source``: Java prints the enum (``APPEND``); pypaimon the ordinal (``0``).
- ``$files.creation_time`` and ``$buckets.last_update_time``: pypaimon drops the milliseconds.
- ``$partitions.total_buckets``: Java reports the manifest entries' bucket count; pypaimon counts buckets holding
  files.
"""
from __future__ import annotations

import pyarrow as pa
import pytest

from engine import Catalog
from tests.interop.pypaimon_util import pp_get_table

pytestmark = pytest.mark.interop

SCHEMA = pa.schema([("dt", pa.string()), ("id", pa.int64()), ("name", pa.string()), ("x", pa.float64())])
PYPAIMON_DIFFERS = {
    "files": {"partition", "file_path", "null_value_counts", "min_value_stats", "max_value_stats", "file_source",
              "creation_time"},
    "buckets": {"last_update_time"},
    "partitions": {"total_buckets"},
}


def _pp_read(warehouse: str, name: str) -> pa.Table:
    from pypaimon import CatalogFactory

    table = CatalogFactory.create({"warehouse": warehouse}).get_table(name)
    rb = table.new_read_builder()
    return rb.new_read().to_arrow(rb.new_scan().plan().splits())


@pytest.fixture
def written(warehouse):
    cat = Catalog(warehouse)
    cat.create_database("db")
    t = cat.create_table("db.t", SCHEMA, primary_key=["dt", "id"], partition_keys=["dt"], options={"bucket": "2"})
    t.write(pa.table({"dt": ["a", "b", "a"], "id": [1, 2, 3], "name": ["n1", None, "n3"], "x": [1.5, 2.0, None]}))
    t.write(pa.table({"dt": ["a"], "id": [1], "name": ["z"], "x": [0.25]}))
    from pypaimon import CatalogFactory
    pp = CatalogFactory.create({"warehouse": warehouse})
    pp.create_tag("db.t", "v1", 1)
    pp.create_tag("db.t", "v2", 2, time_retained="90 min")  # tagCreateTime + tagTimeRetained in the tag file
    pp_get_table(warehouse, "db.t")
    return cat


@pytest.mark.parametrize("kind", ["snapshots", "schemas", "options", "files", "manifests", "partitions",
                                  "buckets", "tags"])
def test_system_table_matches_pypaimon(written, warehouse, kind):
    ours = written.get_table(f"db.t${kind}").read()
    theirs = _pp_read(warehouse, f"db.t${kind}")
    assert ours.schema.names == theirs.schema.names
    assert [f.type for f in ours.schema] == [f.type for f in theirs.schema]
    assert ours.num_rows == theirs.num_rows > 0
    skip = PYPAIMON_DIFFERS.get(kind, set())
    keys = [c for c in ours.column_names if c not in skip and c != "write_cols"]
    assert sorted(map(repr, ours.select(keys).to_pylist())) == sorted(map(repr, theirs.select(keys).to_pylist()))
    if kind == "tags":
        v2 = [r for r in ours.to_pylist() if r["tag_name"] == "v2"][0]
        assert v2["time_retained"] == "PT1H30M" and v2["create_time"] is not None and v2["snapshot_id"] == 2
    if kind == "files":  # the differing columns still describe the same files
        names = sorted(p.rsplit("/", 1)[-1] for p in ours.column("file_path").to_pylist())
        assert names == sorted(theirs.column("file_path").to_pylist())
        assert sorted(ours.column("partition").to_pylist()) == sorted(
            "{" + p.split("=", 1)[1] + "}" for p in theirs.column("partition").to_pylist())


@pytest.mark.parametrize("kind", ["partitions", "buckets", "manifests", "files"])
def test_unpartitioned_typed_table_matches_pypaimon(warehouse, kind):
    import datetime as dt
    import decimal

    cat = Catalog(warehouse)
    cat.create_database("db")
    t = cat.create_table("db.u", pa.schema([("id", pa.int64()), ("d", pa.date32()), ("ts", pa.timestamp("us")),
                                            ("dec", pa.decimal128(10, 2))]), primary_key=["id"],
                         options={"bucket": "1"})
    t.write(pa.table({"id": [1, 2], "d": [dt.date(2024, 1, 2), None],
                      "ts": [dt.datetime(2024, 1, 2, 3, 4, 5, 6000), None], "dec": [decimal.Decimal("1.50"), None]}))
    ours = cat.get_table(f"db.u${kind}").read()
    theirs = _pp_read(warehouse, f"db.u${kind}")
    keys = [c for c in ours.column_names if c not in PYPAIMON_DIFFERS.get(kind, set()) and c != "write_cols"]
    assert ours.select(keys).to_pylist() == theirs.select(keys).to_pylist()
    if kind == "files":
        row = ours.to_pylist()[0]
        assert row["partition"] == "{}"  # Java casts the empty partition row; pypaimon gives null
        assert row["min_value_stats"] == "{d=2024-01-02, dec=1.50, id=1, ts=2024-01-02T03:04:05.006}"
        assert row["null_value_counts"] == "{d=1, dec=1, id=0, ts=1}"
