"""Spark writes after ``ALTER ... SET ('bucket')`` (rescale-bucket): an append into a partition still written with
the old count fails with Paimon's message and leaves the table unchanged; an overwrite rewrites the partition with
the new count (Paimon's RescaleProcedureTest "rescale with ALTER TABLE and write validation")."""
from __future__ import annotations

import glob
import os

import pyarrow as pa
import pytest

import spark_glue
from engine import Catalog

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([("region", pa.string()), ("id", pa.int64()), ("qty", pa.int32())])
DDL = "region string, id long, qty int"


def _counts(t) -> dict:
    out: dict = {}
    for e in t.manifests.live_entries(t.snapshot()):
        out.setdefault(t.scan().partition_values(e.partition)[0], set()).add(e.total_buckets)
    return out


def _files(root) -> set:
    return {os.path.relpath(p, root) for p in glob.glob(os.path.join(root, "**", "bucket-*", "*"), recursive=True)}


def test_spark_append_into_an_old_layout_partition_fails_and_overwrite_rescales(spark, tmp_path):
    spark_glue.register(spark)
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    t = cat.create_table("db.orders", SCHEMA, ["region", "id"], ["region"], {"bucket": "2"})
    data = [("eu", i, 1) for i in range(30)] + [("us", i, 2) for i in range(20)]
    spark_glue.write_table(spark.createDataFrame(data, DDL), t.root)
    t.alter().set_option("bucket", "4").commit()
    sid, files = t.latest_snapshot_id(), _files(t.root)
    df = spark.createDataFrame([("eu", 100, 9)], DDL)
    for write in (lambda: df.write.format("lakemerge").mode("append").save(t.root),
                  lambda: spark_glue.write_table(df, t.root)):
        with pytest.raises(Exception, match=r"Try to write partition \{region=eu\} with a new bucket num 4, but the "
                                            r"previous bucket num is 2"):
            write()
        assert t.latest_snapshot_id() == sid and _files(t.root) == files
    new_eu = [("eu", i, 3) for i in range(0, 30, 3)]
    spark.createDataFrame(new_eu, DDL).write.format("lakemerge").mode("overwrite").save(t.root)
    assert _counts(t) == {"eu": {4}, "us": {2}}
    spark_glue.write_table(spark.createDataFrame([("us", i, 4) for i in range(5)], DDL), t.root, mode="overwrite")
    assert _counts(t) == {"eu": {4}, "us": {4}}
    df.write.format("lakemerge").mode("append").save(t.root)
    got = sorted((r["region"], r["id"], r["qty"]) for r in t.read().to_pylist())
    assert got == sorted(new_eu + [("us", i, 4) for i in range(5)] + [("eu", 100, 9)])
    for k in (0, 3, 100):  # bucket pruning by the new count finds every key
        assert t.read(filter=[("region", "=", "eu"), ("id", "=", k)]).num_rows == 1


def test_spark_overwrite_of_a_lookup_changelog_table_emits_no_changelog(spark, tmp_path):
    """Paimon's overwrite commits no changelog (FileStoreCommitImpl.overwritePartition), nor does the compaction of
    the buckets the overwrite's tasks shared: a rescale by INSERT OVERWRITE streams no row again."""
    spark_glue.register(spark)
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    t = cat.create_table("db.orders", SCHEMA, ["region", "id"], ["region"],
                         {"bucket": "1", "changelog-producer": "lookup"})
    data = [("eu", i, 1) for i in range(40)]
    t.write(pa.table({"region": [r for r, _, _ in data], "id": [i for _, i, _ in data],
                      "qty": pa.array([q for _, _, q in data], pa.int32())}))
    t.compact(full=True)
    sid = t.latest_snapshot_id()
    t.alter().set_option("bucket", "2").commit()
    spark.createDataFrame(data, DDL).repartition(2).write.format("lakemerge").mode("overwrite").save(t.root)
    assert _counts(t) == {"eu": {2}} and t.read().num_rows == 40
    assert t.read_changes(sid).num_rows == 0
