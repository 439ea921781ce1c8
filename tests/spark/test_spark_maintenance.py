"""Maintenance after the commits of Spark jobs (engine.maintenance.auto) and spark_glue.drop_partitions."""
from __future__ import annotations

import pyarrow as pa
import pytest

import spark_glue
from engine import Catalog

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([("dt", pa.string()), ("id", pa.int64()), ("v", pa.string())])


def test_spark_commits_expire_snapshots_and_partitions_and_drop_partitions(spark, tmp_path):
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    t = cat.create_table("db.t", SCHEMA, ["dt", "id"], ["dt"],
                         {"bucket": "2", "snapshot.num-retained.min": "1", "snapshot.num-retained.max": "2",
                          "num-sorted-run.compaction-trigger": "100", "partition.expiration-time": "1 d",
                          "partition.expiration-check-interval": "0 s"})
    for i in range(3):  # the driver commits through the data source and write_table
        df = spark.createDataFrame([("9999-01-01", i, f"w{i}"), ("9999-01-02", i, f"w{i}")], "dt string, id long, "
                                   "v string")
        if i % 2:
            df.write.format("lakemerge").mode("append").save(t.root)
        else:
            spark_glue.write_table(df, t.root)
    assert t.snapshot_manager.ids() == [2, 3]  # retained max 2: the driver's commits expired snapshot 1
    old = spark.createDataFrame([("2000-01-01", 7, "old")], "dt string, id long, v string")
    spark_glue.write_table(old, t.root)
    t = cat.get_table("db.t")
    assert [s.commit_kind for s in t.snapshots()][-1] == "OVERWRITE"  # the expired partition went at once
    assert {r["dt"] for r in t.read().to_pylist()} == {"9999-01-01", "9999-01-02"}
    sid = spark_glue.drop_partitions(spark, t.root, {"dt": "9999-01-02"})
    assert t.snapshot(sid).commit_kind == "OVERWRITE"
    rows = spark.read.format("lakemerge").load(t.root).collect()
    assert sorted((r["dt"], r["id"]) for r in rows) == [("9999-01-01", i) for i in range(3)]
