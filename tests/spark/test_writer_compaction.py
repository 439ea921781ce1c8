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


def test_first_row_task_compactions_keep_each_key_once_above_level_0(spark, tmp_path):
    """A first-row table written by Spark tasks: their compactions drop a level-0 key already deeper (the engine's
    lookup compaction), so check() finds no key twice above level 0 and reads keep each key's first value."""
    import spark_glue
    from engine import Catalog

    path = str(tmp_path / "wh" / "db.db" / "f")
    expected = {}
    for commit in range(5):
        rows = [(1, f"v{commit}"), (2, f"v{commit}"), (10 + commit, "n")]
        for k, v in rows:
            expected.setdefault(k, v)
        df = spark.createDataFrame(rows, "k long, v string")
        spark_glue.write_table(df, path, **{"primary-key": "k", "bucket": "1", "merge-engine": "first-row"})
    table = Catalog(str(tmp_path / "wh")).get_table("db.f")
    levels = {f.level for sp in table.plan() for f in sp.files}
    assert 0 not in levels
    assert table.check().ok  # no first-row-duplicate-keys
    got = {r["k"]: r["v"] for r in spark.read.format("lakemerge").load(path).collect()}
    assert got == expected
