"""Spark reads honour scan.ignore-corrupt-files / scan.ignore-lost-files given as a read option (Paimon's dynamic
options) or as a table option: the unreadable data file is skipped; without the option the read fails."""
from __future__ import annotations

import os

import pyarrow as pa
import pytest

import spark_glue
from engine import Catalog


def _table(root, **options):
    cat = Catalog(str(root))
    cat.create_database("db")
    t = cat.create_table("db.t", pa.schema([("id", pa.int64()), ("v", pa.string())]), primary_key=["id"],
                         options={"bucket": "1", **options})
    t.write(pa.table({"id": [1, 2, 3], "v": ["old"] * 3}))
    t.write(pa.table({"id": [3, 4], "v": ["new"] * 2}))
    files = sorted((f.min_sequence_number, os.path.join(sp.bucket_dir, f.file_name))
                   for sp in t.plan() for f in sp.files)
    return t, [p for _, p in files]


def _ids(df):
    return sorted((r["id"], r["v"]) for r in df.collect())


def test_corrupt_file_skipped_by_read_option(spark, tmp_path):
    t, files = _table(tmp_path / "c")
    with open(files[1], "r+b") as f:
        f.truncate(os.path.getsize(files[1]) // 2)
    with pytest.raises(Exception, match="corrupt"):
        spark_glue.read_table(spark, t.root).collect()
    df = spark_glue.read_table(spark, t.root, **{"scan.ignore-corrupt-files": "true"})
    assert _ids(df) == [(1, "old"), (2, "old"), (3, "old")]


def test_lost_file_skipped_by_table_option(spark, tmp_path):
    t, files = _table(tmp_path / "l", **{"scan.ignore-lost-files": "true"})
    os.unlink(files[0])
    assert _ids(spark_glue.read_table(spark, t.root)) == [(3, "new"), (4, "new")]
    with pytest.raises(Exception, match="missing"):  # a read option overrides the table's
        spark_glue.read_table(spark, t.root, **{"scan.ignore-lost-files": "false"}).collect()


def test_stream_read_skips_a_corrupt_file_by_read_option(spark, tmp_path):
    from tests.spark.stream_sink import run_available_now, sink_rows
    t, files = _table(tmp_path / "s")
    with open(files[1], "r+b") as f:
        f.truncate(os.path.getsize(files[1]) // 2)
    out, ck = str(tmp_path / "out"), str(tmp_path / "ck")
    run_available_now(spark, t.root, out, ck, **{"scan.ignore-corrupt-files": "true"})
    assert sorted((r["id"], r["v"]) for r in sink_rows(out)) == [(1, "old"), (2, "old"), (3, "old")]


@pytest.mark.parametrize("pk", [True, False], ids=["pk", "append"])
def test_row_level_commands_still_fail(spark, tmp_path, pk):
    """Spark DML reads every file (read.every-file) and never skips one: changing rows around an unreadable file
    would miss or lose its rows."""
    cat = Catalog(str(tmp_path / "d"))
    cat.create_database("db")
    t = cat.create_table("db.t", pa.schema([("id", pa.int64()), ("v", pa.string())]),
                         primary_key=["id"] if pk else None,
                         options={"bucket": "1" if pk else "-1", "scan.ignore-corrupt-files": "true"})
    t.write(pa.table({"id": [1, 2], "v": ["a", "b"]}))
    [path] = [os.path.join(sp.bucket_dir, f.file_name) for sp in t.plan() for f in sp.files]
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) // 2)
    before = t.latest_snapshot_id()
    with pytest.raises(Exception, match="corrupt"):
        spark_glue.delete_where(spark, t.root, "id = 1")
    with pytest.raises(Exception, match="corrupt"):
        spark_glue.update_where(spark, t.root, {"v": "'z'"}, "id = 2")
    assert cat.get_table("db.t").latest_snapshot_id() == before
