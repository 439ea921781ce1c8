"""spark_glue.merge_into on append tables, edge cases of the source and the target: a source that is a (pruned,
filtered) read of the target itself, a source read from a table with null keys, target files written under older
schemas (renamed, added, widened, dropped columns) with a map column, compared with the expected rows."""
from __future__ import annotations

import pyarrow as pa
import pytest

import spark_glue
from engine import Catalog
from tests.spark.test_spark_append_merge import DV, SCHEMA, make, rows


@pytest.mark.parametrize("options", [{}, DV], ids=["cow", "dv"])
def test_self_merge_with_a_partition_pruned_source(spark, tmp_path, options):
    """The source is a pruning read of the target restricted to one partition: the target scan of the MERGE must
    still see every row (not-matched-by-source deletes the other partition), not the source's pruned plan."""
    t = make(tmp_path, options)
    model = t.read().to_pylist()
    src = spark_glue.read_table(spark, t.root, prune=True).where("dt = 'b' and id > 50")
    spark_glue.merge_into(spark, t.root, src, on="id", when_matched={"v": "'hit'"}, when_not_matched=None,
                          when_not_matched_by_source="delete")
    assert rows(t.read()) == rows([{**r, "v": "hit"} for r in model if r["dt"] == "b" and r["id"] > 50])
    assert t.check().ok


def test_self_merge_of_a_table_with_a_not_null_column(spark, tmp_path):
    """read_table of a table with a NOT NULL column pushes an always-true guard on every query; two self-merges
    in a row, the second inserting shifted copies of the rows read from the target."""
    from pyspark.sql import functions as F
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    sch = pa.schema([("dt", pa.string()), pa.field("id", pa.int64(), False), ("v", pa.string())])
    t = cat.create_table("db.g", sch, partition_keys=["dt"], options=DV)
    t.write(pa.table({"dt": ["a"] * 5 + ["b"] * 5, "id": list(range(10)), "v": list("abcdefghij")}, schema=sch))
    src = spark_glue.read_table(spark, t.root, prune=True).where("dt = 'b' and id > 6")
    spark_glue.merge_into(spark, t.root, src, on="id", when_matched={"v": "'hit'"}, when_not_matched=None,
                          when_not_matched_by_source="delete")
    assert sorted(rows(t.read())) == [("b", i, "hit") for i in (7, 8, 9)]
    shifted = spark_glue.read_table(spark, t.root).withColumn("id", F.col("id") + 100)
    spark_glue.merge_into(spark, t.root, shifted, on="id", when_matched="delete", when_not_matched="insert")
    assert sorted(rows(t.read())) == [("b", i, "hit") for i in (7, 8, 9, 107, 108, 109)]


def test_source_read_from_a_table_with_null_keys(spark, tmp_path):
    """A pruning source read whose inner-join plan (cardinality check) gets an inferred ``id IS NOT NULL``: the
    insert still gets the source rows with a null key (they never match)."""
    t = make(tmp_path, {})
    s = make(tmp_path, {}, name="s", write=False)
    s.write(pa.table({"dt": ["a", "a", "c"], "id": [1, None, None], "v": ["u1", "n1", "n2"], "n": [1, 2, 3]},
                     schema=SCHEMA))
    model = t.read().to_pylist()
    spark_glue.merge_into(spark, t.root, spark_glue.read_table(spark, s.root, prune=True), on="id",
                          when_matched={"v": "s.v"}, when_not_matched="insert")
    assert rows(t.read()) == rows([{**r, "v": "u1"} if r["id"] == 1 else r for r in model]
                                  + [{"dt": "a", "id": None, "v": "n1", "n": 2},
                                     {"dt": "c", "id": None, "v": "n2", "n": 3}])


@pytest.mark.parametrize("options", [{}, DV], ids=["cow", "dv"])
def test_target_files_under_older_schemas(spark, tmp_path, options):
    """Files written before a rename, an added column, an INT->BIGINT widening and a dropped column are rewritten
    (copy-on-write) or marked (vectors) by a MERGE that updates, inserts and moves rows; a map column is kept."""
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    sch = pa.schema([("dt", pa.string()), ("id", pa.int32()), ("v", pa.string()), ("gone", pa.int64()),
                     ("m", pa.map_(pa.string(), pa.int64()))])
    t = cat.create_table("db.t", sch, partition_keys=["dt"], options=options)
    t.write(pa.table({"dt": ["a"] * 4, "id": [1, 2, 3, 4], "v": list("wxyz"), "gone": [1, 2, 3, 4],
                      "m": [[("k", 1)], None, [], [("q", 2)]]}, schema=sch))
    t.alter().rename_column("v", "vv").add_column("extra", pa.int32()).update_column_type("id", pa.int64()) \
        .drop_column("gone").commit()
    t = cat.get_table("db.t")
    src = spark.sql("select 'a' dt, cast(2 as bigint) id, 'X' vv, map('z', cast(9 as bigint)) m, 7 extra "
                    "union all select 'c', 3, 'M', map(), 8 "
                    "union all select 'b', 3000000000, 'N', map('n', cast(1 as bigint)), null")
    spark_glue.merge_into(spark, t.root, src, on="id", when_matched="update", when_not_matched="insert")
    got = sorted((r["dt"], r["id"], r["vv"], None if r["m"] is None else sorted(r["m"]), r["extra"])
                 for r in t.read().to_pylist())
    assert got == [("a", 1, "w", [("k", 1)], None), ("a", 2, "X", [("z", 9)], 7), ("a", 4, "z", [("q", 2)], None),
                   ("b", 3000000000, "N", [("n", 1)], None), ("c", 3, "M", [], 8)]
    report = t.check()
    assert report.ok and not report.orphan_files, report.summary()
