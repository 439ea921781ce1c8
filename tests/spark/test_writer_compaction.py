"""Spark writes into a table whose writers compact: the files a task's compaction produced are committed and kept."""
import pytest

pytestmark = pytest.mark.spark


def test_writes_that_compact_in_tasks_keep_their_outputs(spark, tmp_path):
    import spark_glue
    from engine import Catalog

    path = str(tmp_path / "wh" / "db.db" / "t")
    expected = {}
    for commit in range(6):  # the 5th sorted run of the bucket triggers universal compaction in the task's writer
        rows = [(k, f"v{commit}-{k}") for k in range(commit * 5, commit * 5 + 20)]
        expected.update(dict(rows))
        df = spark.createDataFrame(rows, "k long, v string")
        spark_glue.write_table(df, path, **{"primary-key": "k", "bucket": "1"})
    table = Catalog(str(tmp_path / "wh")).get_table("db.t")
    assert any(s.commit_kind == "COMPACT" for s in table.snapshots())
    assert table.check().ok
    got = {r["k"]: r["v"] for r in spark.read.format("lakemerge").load(path).collect()}
    assert got == expected
