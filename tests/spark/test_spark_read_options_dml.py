"""Spark row-level commands (spark_glue.delete_where / update_where / merge_into) change every matching row whatever
the read options scan.bucket and scan.file-creation-time-millis narrow users' reads to (engine.read.scan)."""
from __future__ import annotations

import time

import pyarrow as pa
import pytest

import spark_glue
from engine import Catalog

SCHEMA = pa.schema([pa.field("dt", pa.string(), False), pa.field("k", pa.int64(), False), ("v", pa.string())])


def make(root, pk: bool, option: str):
    cat = Catalog(str(root))
    cat.create_database("db", ignore_if_exists=True)
    opts = {"bucket": "2"} if pk else {"bucket": "2", "bucket-key": "k"}
    t = cat.create_table("db.t", SCHEMA, ["dt", "k"] if pk else None, ["dt"], options=opts)
    t.write(pa.table({"dt": ["a"] * 20, "k": list(range(20)), "v": ["old"] * 20}, schema=SCHEMA))
    time.sleep(0.01)
    cut = int(time.time() * 1000)
    time.sleep(0.01)
    t.write(pa.table({"dt": ["a"] * 2, "k": [20, 21], "v": ["old"] * 2}, schema=SCHEMA))
    t.alter().set_option(option, "1" if option == "scan.bucket" else str(cut)).commit()
    return cat


def whole(cat, option):
    cat.get_table("db.t").alter().remove_option(option).commit()
    return cat.get_table("db.t").read()


@pytest.mark.parametrize("pk", [True, False], ids=["pk", "append"])
@pytest.mark.parametrize("option", ["scan.bucket", "scan.file-creation-time-millis"])
def test_delete_and_update_see_every_row(spark, tmp_path, pk, option):
    cat = make(tmp_path / "u", pk, option)
    spark_glue.update_where(spark, cat.get_table("db.t").root, {"v": "'new'"}, "k < 100")
    assert set(whole(cat, option).column("v").to_pylist()) == {"new"}
    cat = make(tmp_path / "d", pk, option)
    spark_glue.delete_where(spark, cat.get_table("db.t").root, "k < 100")
    assert whole(cat, option).num_rows == 0


@pytest.mark.parametrize("option", ["scan.bucket", "scan.file-creation-time-millis"])
def test_merge_into_an_append_table_matches_every_row(spark, tmp_path, option):
    """A source row matching a target row outside the narrowed read is matched, not inserted again."""
    cat = make(tmp_path, False, option)
    source = spark.createDataFrame([("a", k, "new") for k in range(22)], "dt string, k bigint, v string")
    spark_glue.merge_into(spark, cat.get_table("db.t").root, source, on=["dt", "k"], when_matched="update",
                          when_not_matched="insert")
    rows = whole(cat, option)
    assert sorted(rows.column("k").to_pylist()) == list(range(22)) and set(rows.column("v").to_pylist()) == {"new"}


@pytest.mark.parametrize("travel", [{"scan.snapshot-id": "1"}, {"versionAsOf": "1"}, {"scan.tag-name": "t1"},
                                    {"timestampAsOf": "2999-01-01 00:00:00"}],
                         ids=["snapshot-id", "version", "tag", "timestamp"])
def test_time_travel_refuses_file_creation_time(spark, tmp_path, travel):
    """As the engine (Table.read(snapshot_id=...)) and Paimon's SchemaValidation.validateStartupMode: a read pinned
    to a snapshot, tag or time cannot also start at scan.file-creation-time-millis; the latest read still narrows."""
    cat = make(tmp_path, True, "scan.file-creation-time-millis")
    cat.get_table("db.t").create_tag("t1", 1)
    root = cat.get_table("db.t").root
    assert sorted(r.k for r in spark_glue.read_table(spark, root).collect()) == [20, 21]
    with pytest.raises(Exception, match="scan.file-creation-time-millis"):
        spark_glue.read_table(spark, root, **travel).collect()
    with pytest.raises(Exception, match="scan.file-creation-time-millis"):
        spark.read.format("lakemerge").options(**travel).load(root).collect()
