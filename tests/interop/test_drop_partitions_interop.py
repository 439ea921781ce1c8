"""pypaimon 2.1.0 reads a lakemerge table after Table.drop_partitions (an OVERWRITE snapshot deleting the
partitions' files and index records) and after partition expiration, at the new and the older snapshots."""
from __future__ import annotations

import pyarrow as pa
import pytest

from engine import Catalog
from tests.interop.pypaimon_util import pp_get_table, pp_read, pp_write, rows_of

pytestmark = pytest.mark.interop

SCHEMA = pa.schema([("dt", pa.string()), ("id", pa.int64()), ("v", pa.string())])


def _rows(dts, ids, tag="v"):
    return pa.table({"dt": dts, "id": pa.array(ids, pa.int64()), "v": [f"{tag}{i}" for i in ids]}, schema=SCHEMA)


@pytest.mark.parametrize("options, pk", [
    ({"bucket": "2"}, ["dt", "id"]),
    ({"bucket": "-1", "dynamic-bucket.target-row-num": "2"}, ["dt", "id"]),
    ({"bucket": "1", "deletion-vectors.enabled": "true", "num-sorted-run.compaction-trigger": "2"}, ["dt", "id"]),
    ({"bucket": "-1"}, None),
], ids=["pk", "dynamic-bucket", "deletion-vectors", "append"])
def test_pypaimon_reads_a_table_after_drop_partitions(tmp_path, options, pk):
    warehouse = str(tmp_path / "wh")
    cat = Catalog(warehouse)
    cat.create_database("db")
    t = cat.create_table("db.t", SCHEMA, primary_key=pk, partition_keys=["dt"], options=options)
    t.write(_rows(["a"] * 4 + ["b"] * 3 + ["c"], [1, 2, 3, 4, 5, 6, 7, 8]))
    t.write(_rows(["a", "b", "c"], [1, 5, 9], tag="w"))
    before = t.latest_snapshot_id()
    sid = t.drop_partitions({"dt": "b"})
    assert t.snapshot(sid).commit_kind == "OVERWRITE"
    pp = pp_get_table(warehouse, "db.t")
    keys = ["dt", "id", "v"]
    assert rows_of(pp_read(pp, sort_by=keys), keys) == rows_of(t.read().sort_by([(k, "ascending") for k in keys]),
                                                                keys)
    assert {r["dt"] for r in rows_of(pp_read(pp, sort_by=keys), keys)} == {"a", "c"}
    assert rows_of(pp_read(pp, before, sort_by=keys), keys) == rows_of(
        t.read(before).sort_by([(k, "ascending") for k in keys]), keys)
    # pypaimon keeps writing the table: partition b comes back with only the new row (a deletion-vector table
    # hides level-0 files from batch reads until a compaction, pypaimon's writer never compacts)
    pp_write(pp, _rows(["b"], [50], tag="pp"))
    got = rows_of(pp_read(pp_get_table(warehouse, "db.t"), sort_by=keys), keys)
    dv = options.get("deletion-vectors.enabled") == "true"
    assert [r for r in got if r["dt"] == "b"] == ([] if dv else [{"dt": "b", "id": 50, "v": "pp50"}])
    assert rows_of(cat.get_table("db.t").read().sort_by([(k, "ascending") for k in keys]), keys) == got


def test_pypaimon_reads_a_table_after_partition_expiration(tmp_path):
    warehouse = str(tmp_path / "wh")
    cat = Catalog(warehouse)
    cat.create_database("db")
    t = cat.create_table("db.t", SCHEMA, primary_key=["dt", "id"], partition_keys=["dt"],
                         options={"bucket": "1", "partition.expiration-time": "1 d",
                                  "partition.expiration-check-interval": "0 s"})
    t.write(_rows(["2000-01-01", "2000-01-02", "9999-01-01"], [1, 2, 3]))  # the commit expires the first two
    assert [s.commit_kind for s in t.snapshots()] == ["APPEND", "OVERWRITE"]
    keys = ["dt", "id", "v"]
    assert rows_of(pp_read(pp_get_table(warehouse, "db.t"), sort_by=keys), keys) == [
        {"dt": "9999-01-01", "id": 3, "v": "v3"}]
