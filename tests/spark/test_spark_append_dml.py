"""spark_glue.delete_where / update_where on append tables (spark_glue.append_dml): Spark evaluates the SQL
condition over rows read with __paimon_file_path / __paimon_row_index, tasks rewrite files or write deletion vectors,
the driver commits one OVERWRITE snapshot; compared with a pyarrow model."""
from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import spark_glue
from engine import Catalog
from engine.append.compact import compact_append
from engine.errors import CommitConflict
from engine.meta.manifest import ADD, DELETE
from engine.meta.snapshot import COMMIT_KIND_OVERWRITE

SCHEMA = pa.schema([("dt", pa.string()), ("id", pa.int64()), ("v", pa.string()), ("n", pa.int64())])
DV = {"deletion-vectors.enabled": "true"}


def batch(dt, ids, tag="v"):
    return pa.table({"dt": [dt] * len(ids), "id": ids, "v": [f"{tag}{i}" for i in ids],
                     "n": [i % 7 if i % 5 else None for i in ids]}, schema=SCHEMA)


def make(tmp_path, options, name="t"):
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db", ignore_if_exists=True)
    t = cat.create_table(f"db.{name}", SCHEMA, partition_keys=["dt"], options=options)
    t.write(batch("a", list(range(20))))
    t.write(batch("a", list(range(20, 40)), "w"))
    t.write(batch("b", list(range(40, 60))))
    return t


def rows(t: pa.Table) -> list[tuple]:
    return sorted(tuple(r.values()) for r in t.to_pylist())


def delta(t, sid):
    snap = t.snapshot(sid)
    return [e for m in t.manifests.manifest_list(snap.delta_manifest_list) for e in t.manifests.manifest(m.file_name)]


def job_files_left(t):
    """Files under the table that no snapshot references."""
    return t.check(verify_data=False).orphan_files


@pytest.mark.parametrize("options", [{}, DV, {"bucket": "2", "bucket-key": "id"},
                                     {"bucket": "2", "bucket-key": "id", **DV}],
                         ids=["unaware", "unaware-dv", "fixed", "fixed-dv"])
def test_delete_and_update_match_the_model(spark, tmp_path, options):
    t = make(tmp_path, options)
    model = t.read()
    files = {f.file_name for sp in t.plan() for f in sp.files}
    sid = spark_glue.delete_where(spark, t.root, "id % 3 = 0 AND n IS NOT NULL")
    model = pa.Table.from_pylist([r for r in model.to_pylist() if not (r["id"] % 3 == 0 and r["n"] is not None)],
                                 schema=SCHEMA)
    assert rows(t.read()) == rows(model) and t.snapshot(sid).commit_kind == COMMIT_KIND_OVERWRITE
    if options.get("deletion-vectors.enabled"):  # DELETE only marks vectors
        assert delta(t, sid) == [] and {f.file_name for sp in t.plan() for f in sp.files} == files
    else:
        assert {e.kind for e in delta(t, sid)} == {ADD, DELETE}
    sid = spark_glue.update_where(spark, t.root, {"v": "concat(v, '!')", "n": "n + 100"}, "id > 30 AND id < 45")
    model = pa.Table.from_pylist([{**r, "v": r["v"] + "!", "n": None if r["n"] is None else r["n"] + 100}
                                  if 30 < r["id"] < 45 else r for r in model.to_pylist()], schema=SCHEMA)
    assert rows(t.read()) == rows(model)
    if not options:  # copy-on-write keeps the row order
        assert t.read().to_pylist() == model.to_pylist()
    report = t.check()
    assert report.ok and not report.warnings and not report.orphan_files, report.summary()
    compact_append(t, full=True)
    assert rows(t.read()) == rows(model) and t.check().ok


def test_metadata_columns_name_each_rows_file_and_position(spark, tmp_path):
    t = make(tmp_path, DV)
    t.delete_where([("id", "=", 2)])
    df = spark_glue.read_table(spark, t.root, **{"metadata-columns": "__paimon_file_path,__paimon_row_index"})
    assert df.columns == ["dt", "id", "v", "n", "__paimon_file_path", "__paimon_row_index"]
    got = {(r["__paimon_file_path"], r["__paimon_row_index"]): r["id"] for r in df.collect()}
    want = {}
    for sp in t.plan():
        for f in sp.files:
            ids = pq.ParquetFile(os.path.join(sp.bucket_dir, f.file_name)).read().column("id").to_pylist()
            want.update({(os.path.join(sp.bucket_dir, f.file_name), i): v for i, v in enumerate(ids) if v != 2})
    assert got == want
    pk = Catalog(str(tmp_path / "wh")).create_table("db.pk", SCHEMA, primary_key=["dt", "id"], partition_keys=["dt"],
                                                    options={"bucket": "1"})
    with pytest.raises(Exception, match="append table"):
        spark.read.format("lakemerge").option("metadata-columns", "__paimon_row_index").load(pk.root).collect()


def test_partition_only_condition_drops_partitions(spark, tmp_path):
    t = make(tmp_path, {})
    before = {f.file_name for sp in t.plan() for f in sp.files}
    sid = spark_glue.delete_where(spark, t.root, "dt = 'b' OR dt = 'zz'")
    assert t.snapshot(sid).commit_kind == COMMIT_KIND_OVERWRITE
    assert {e.kind for e in delta(t, sid)} == {DELETE}
    assert {f.file_name for sp in t.plan() for f in sp.files} < before
    assert {r["dt"] for r in t.read().to_pylist()} == {"a"}
    assert spark_glue.delete_where(spark, t.root, "dt = 'b'") is None
    assert t.latest_snapshot_id() == sid


def test_a_condition_on_other_columns_logs_no_analysis_error(spark, tmp_path):
    """Whether a condition names partition columns only is probed by resolving it over the partition values; PySpark
    logged that probe's AnalysisException at ERROR with a JVM stack trace (the README's append DELETE showed it)."""
    import logging

    from pyspark.logger import PySparkLogger

    records = []
    handler = logging.Handler()
    handler.emit = records.append
    loggers = [PySparkLogger.getLogger(n) for n in ("SQLQueryContextLogger", "DataFrameQueryContextLogger")]
    for lg in loggers:
        lg.addHandler(handler)
    try:
        t = make(tmp_path, {})
        sid = spark_glue.delete_where(spark, t.root, "v LIKE 'w2%'")
        assert sid is not None and not [r for r in t.read().to_pylist() if r["v"].startswith("w2")]
        with pytest.raises(Exception, match="nope"):  # a condition Spark cannot resolve is still an error
            spark_glue.delete_where(spark, t.root, "nope = 1")
    finally:
        for lg in loggers:
            lg.removeHandler(handler)
    assert not [r for r in records if "name `v`" in r.getMessage()]  # the probe; the `nope` error is logged
    assert all(not lg.disabled and not lg.filters for lg in loggers)


def test_concurrent_probes_mute_only_their_own_thread():
    """The probe's muting is per thread: two delete_where calls probing at once (A starts, B starts, A ends, B ends)
    leave PySpark's loggers as they were (restoring a saved 'disabled' flag left them disabled for good), and an error
    another thread logs meanwhile is still logged."""
    import logging
    import threading

    from pyspark.logger import PySparkLogger

    from spark_glue.append_dml import _quiet_analysis_errors

    logger = PySparkLogger.getLogger("SQLQueryContextLogger")
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logger.addHandler(handler)
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()

    def probe_a():
        with _quiet_analysis_errors():
            a_in.set()
            b_in.wait(10)
            logger.error("from A")
        a_out.set()

    def probe_b():
        a_in.wait(10)
        with _quiet_analysis_errors():
            b_in.set()
            a_out.wait(10)

    threads = [threading.Thread(target=probe_a), threading.Thread(target=probe_b)]
    try:
        for th in threads:
            th.start()
        a_in.wait(10)
        logger.error("from another thread")
        for th in threads:
            th.join(10)
        logger.error("after")
    finally:
        logger.removeHandler(handler)
    assert [r.getMessage() for r in records] == ["from another thread", "after"]


def test_nothing_matched_publishes_nothing(spark, tmp_path):
    for i, options in enumerate([{}, DV]):
        t = make(tmp_path, options, name=f"t{i}")
        sid = t.latest_snapshot_id()
        assert spark_glue.delete_where(spark, t.root, "id > 1000") is None
        assert spark_glue.update_where(spark, t.root, {"v": "'x'"}, "v = 'nope'") is None
        assert t.latest_snapshot_id() == sid and not job_files_left(t)


def test_update_moves_rows_to_their_new_partition_and_bucket(spark, tmp_path):
    t = make(tmp_path, {"bucket": "2", "bucket-key": "id"})
    spark_glue.update_where(spark, t.root, {"dt": "'c'", "id": "id + 1000"}, "id < 3")
    got = rows(t.read())
    assert [r for r in got if r[0] == "c"] == [("c", 1000 + i, f"v{i}", None if i == 0 else i) for i in range(3)]
    assert len(got) == 60
    assert t.check().ok


@pytest.mark.parametrize("options", [{}, DV], ids=["cow", "dv"])
def test_concurrent_compaction_makes_it_conflict_and_leave_nothing(spark, tmp_path, monkeypatch, options):
    import spark_glue.append_dml as dml
    t = make(tmp_path, options)
    original = dml.commit_changes

    def racing(*args, **kwargs):
        compact_append(t, full=True)
        return original(*args, **kwargs)
    monkeypatch.setattr(dml, "commit_changes", racing)
    before = rows(t.read())
    with pytest.raises(CommitConflict):
        spark_glue.delete_where(spark, t.root, "id = 4")
    assert t.snapshot().commit_kind == "COMPACT" and rows(t.read()) == before
    assert not job_files_left(t)


@pytest.mark.parametrize("options", [{}, DV], ids=["cow", "dv"])
def test_the_pinned_snapshot_expiring_during_the_job_does_not_fail_it(spark, tmp_path, monkeypatch, options):
    """A writer commits after the tasks read the pinned snapshot and expiration removes it: the job still commits
    (Paimon's commit checks the latest snapshot, not the one read). Before, the driver re-read the pinned snapshot
    by id to commit and the job failed with SnapshotNotFound after all its work, leaving its files behind."""
    import spark_glue.append_dml as dml
    t = make(tmp_path, {**options, "snapshot.num-retained.min": "1", "snapshot.num-retained.max": "1"})
    pinned = t.latest_snapshot_id()
    original = dml.index_dir

    def racing(root):  # the driver calls it once the tasks are done, right before committing
        t.write(batch("c", [100]))
        t.write(batch("c", [101]))
        assert [s.id for s in t.snapshots()] == [pinned + 2]  # the pinned snapshot expired
        return original(root)
    monkeypatch.setattr(dml, "index_dir", racing)
    expected = sorted(r for r in rows(t.read()) if r[1] not in (4, 44)) + [("c", 100, "v100", None), ("c", 101, "v101", 3)]
    spark_glue.delete_where(spark, t.root, "id IN (4, 44)")
    assert rows(t.read()) == sorted(expected)
    assert t.check().ok and not job_files_left(t)


def test_deletion_vector_delete_of_an_orc_table(spark, tmp_path):
    """The tasks of a DV DELETE write only DV index files: an ORC append table pypaimon wrote can be deleted from
    and keeps only ORC data files."""
    from tests.interop.pypaimon_util import (
        pp_catalog,
        pp_create_table,
        pp_get_table,
        pp_read,
        pp_write,
    )
    wh = str(tmp_path / "wh")
    schema = pa.schema([("dt", pa.string()), ("id", pa.int64())])
    pp = pp_create_table(pp_catalog(wh), "db.orc", schema, [], ["dt"],
                         {"file.format": "orc", "deletion-vectors.enabled": "true"})
    pp_write(pp, pa.table({"dt": ["a"] * 5, "id": list(range(5))}, schema=schema))
    t = Catalog(wh).get_table("db.orc")
    assert spark_glue.delete_where(spark, t.root, "id IN (1, 3)") == 2
    assert sorted(t.read()["id"].to_pylist()) == [0, 2, 4]
    assert sorted(pp_read(pp_get_table(wh, "db.orc"))["id"].to_pylist()) == [0, 2, 4]
    assert all(f.file_name.endswith(".orc") for sp in t.plan() for f in sp.files)
    assert t.check().ok and not job_files_left(t)


@pytest.mark.parametrize("options", [{}, DV], ids=["cow", "dv"])
def test_a_failing_task_leaves_the_table_and_no_file(spark, tmp_path, options):
    """The task rewrites partition a's files, then refuses a null for partition b's NOT NULL column: the job
    fails, its files are deleted and nothing is committed."""
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db", ignore_if_exists=True)
    schema = pa.schema([("dt", pa.string()), pa.field("id", pa.int64(), nullable=False)])
    t = cat.create_table("db.strict", schema, partition_keys=["dt"], options=options)
    t.write(pa.table({"dt": ["a", "a", "b"], "id": [1, 2, 3]}, schema=schema))
    before = t.latest_snapshot_id()
    with pytest.raises(Exception, match="id"):
        spark_glue.update_where(spark, t.root, {"id": "CASE WHEN dt = 'b' THEN NULL ELSE id + 10 END"})
    assert t.latest_snapshot_id() == before and sorted(t.read()["id"].to_pylist()) == [1, 2, 3]
    assert not job_files_left(t)
