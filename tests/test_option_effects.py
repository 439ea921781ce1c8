"""Paimon options with visible effects a data engineer sets: snapshot.ignore-empty-commit,
snapshot.clean-empty-directories, target-file-row-num, file.suffix.include.compression, data-file.path-directory."""
from __future__ import annotations

import os

import pyarrow as pa
import pytest

from engine.errors import InvalidOption
from tests.conftest import expire_after_latest, list_files

SCHEMA = pa.schema([("dt", pa.string()), ("k", pa.int64()), ("v", pa.string())])


def _rows(dt: str, keys) -> pa.Table:
    keys = list(keys)
    return pa.table({"dt": [dt] * len(keys), "k": keys, "v": [f"v{k}" for k in keys]}, schema=SCHEMA)


def _pk(catalog, **options):
    return catalog.create_table("db.t", SCHEMA, primary_key=["dt", "k"], partition_keys=["dt"],
                                options={"bucket": "1", **options})


def _append(catalog, **options):
    return catalog.create_table("db.t", SCHEMA, partition_keys=["dt"], options=options)


def _data_files(t) -> list[str]:
    return sorted(e.file.file_name for e in t.manifests.live_entries(t.snapshot_manager.latest()))


# --- snapshot.ignore-empty-commit ------------------------------------------------------------------------
@pytest.mark.parametrize("make", [_pk, _append], ids=["pk", "append"])
def test_empty_commits_are_ignored_by_default(catalog, make):
    t = make(catalog)
    t.write(_rows("a", [1]))
    assert t.commit([]) == 1 and t.write(_rows("a", [])) == 1
    assert [s.id for s in t.snapshots()] == [1]


@pytest.mark.parametrize("make", [_pk, _append], ids=["pk", "append"])
def test_empty_commits_make_snapshots_when_not_ignored(catalog, make):
    """Paimon's FileStoreCommitImpl.commit publishes an APPEND snapshot without files when ignoreEmptyCommit is
    false (BatchWriteBuilderImpl reads it from snapshot.ignore-empty-commit)."""
    t = make(catalog, **{"snapshot.ignore-empty-commit": "false"})
    assert t.commit([]) == 1
    t.write(_rows("a", [1]))
    assert t.write(_rows("a", [])) == 3
    snaps = t.snapshots()
    assert [(s.id, s.commit_kind) for s in snaps] == [(1, "APPEND"), (2, "APPEND"), (3, "APPEND")]
    assert snaps[2].delta_record_count == 0 and snaps[2].total_record_count == snaps[1].total_record_count
    assert t.read().num_rows == 1


def test_an_empty_commit_keeps_its_commit_user_and_identifier(catalog):
    """Paimon's TableCommitImpl.commit(identifier, messages) publishes an empty snapshot under the committer's own
    commit user and identifier (a stream's checkpoint / batch id), so exactly-once sees it and the automatic batch
    tag (a batch-commit-identifier step, TagBatchCreation) is not made by a streaming commit."""
    t = _pk(catalog, **{"snapshot.ignore-empty-commit": "false", "tag.automatic-creation": "batch"})
    assert t.commit([], commit_user="stream-u", commit_identifier=7) == 1
    snap = t.snapshot()
    assert (snap.commit_user, snap.commit_identifier, snap.commit_kind) == ("stream-u", 7, "APPEND")
    assert t.tags() == {}
    assert t.commit([], commit_user="stream-u", commit_identifier=7) == 1  # replayed: not published again
    assert [s.id for s in t.snapshots()] == [1]


# --- snapshot.clean-empty-directories ----------------------------------------------------------------------
@pytest.mark.parametrize("key", ["snapshot.clean-empty-directories", "snapshot.expire.clean-empty-directories"])
def test_expiration_removes_the_directories_it_emptied(catalog, key):
    t = _pk(catalog, **{key: "true"})
    t.write(_rows("a", [1]))
    t.write(_rows("b", [2]))
    t.drop_partitions([{"dt": "a"}])
    expire_after_latest(t, retain_min=1, retain_max=1, time_retained=0)
    assert not os.path.exists(os.path.join(t.root, "dt=a"))
    assert os.path.isdir(os.path.join(t.root, "dt=b", "bucket-0"))
    assert t.read().column("k").to_pylist() == [2]


def test_tag_deletion_removes_the_directories_it_emptied(catalog):
    """A tag kept a dropped partition's files past expiration; deleting the tag (by hand, or automatic tag
    retention) deletes them and, with snapshot.clean-empty-directories, their emptied directories (Paimon's
    TagManager.doClean: TagDeletion.cleanUnusedDataFiles, then cleanEmptyDirectories). Directories still holding
    live files stay."""
    t = _pk(catalog, **{"snapshot.clean-empty-directories": "true"})
    t.write(_rows("a", [1]))
    t.write(_rows("b", [2]))
    t.create_tag("keep")
    t.drop_partitions([{"dt": "a"}])
    t.write(_rows("b", [3]))
    expire_after_latest(t, retain_min=1, retain_max=1, time_retained=0)
    assert os.listdir(os.path.join(t.root, "dt=a", "bucket-0"))  # the tag holds the files
    t.delete_tag("keep")
    assert not os.path.exists(os.path.join(t.root, "dt=a"))
    assert os.path.isdir(os.path.join(t.root, "dt=b", "bucket-0"))
    assert sorted(t.read().column("k").to_pylist()) == [2, 3]


def test_changelog_expiration_removes_the_directories_it_emptied(catalog):
    """A decoupled changelog kept a dropped partition's changelog files past snapshot expiration; its own
    expiration deletes them and, with snapshot.clean-empty-directories, the emptied directories (Paimon's
    ExpireChangelogImpl: ChangelogDeletion.cleanEmptyDirectories)."""
    t = _pk(catalog, **{"snapshot.clean-empty-directories": "true", "changelog-producer": "input",
                        "snapshot.num-retained.min": "1", "snapshot.num-retained.max": "1",
                        "changelog.num-retained.min": "10", "changelog.num-retained.max": "10"})
    t.write(_rows("a", [1]))
    t.write(_rows("b", [2]))
    t.drop_partitions([{"dt": "a"}])
    expire_after_latest(t, retain_min=1, retain_max=1, time_retained=0)
    assert os.listdir(os.path.join(t.root, "dt=a", "bucket-0"))  # the decoupled changelog holds its files
    t.alter().set_option("changelog.num-retained.max", "1").set_option("changelog.num-retained.min", "1").commit()
    t = catalog.get_table("db.t")
    t.write(_rows("b", [3]))
    expire_after_latest(t, retain_min=1, retain_max=1, time_retained=0)
    assert not os.path.exists(os.path.join(t.root, "dt=a"))
    assert os.path.isdir(os.path.join(t.root, "dt=b", "bucket-0"))
    assert sorted(t.read().column("k").to_pylist()) == [2, 3]


def test_expiration_keeps_empty_directories_by_default(catalog):
    t = _pk(catalog)
    t.write(_rows("a", [1]))
    t.drop_partitions([{"dt": "a"}])
    expire_after_latest(t, retain_min=1, retain_max=1, time_retained=0)
    assert os.path.isdir(os.path.join(t.root, "dt=a", "bucket-0"))
    assert not os.listdir(os.path.join(t.root, "dt=a", "bucket-0"))


# --- target-file-row-num ------------------------------------------------------------------------------------
@pytest.mark.parametrize("make", [_pk, _append], ids=["pk", "append"])
def test_written_files_roll_at_the_row_target_but_compaction_does_not(catalog, make):
    """Paimon's writers roll at target-file-row-num (AppendOnlyWriter, KeyValueFileWriterFactory), compaction
    output only by size."""
    t = make(catalog, **{"target-file-row-num": "3", "write-only": "true"})
    t.write(_rows("a", range(10)))
    assert sorted(e.file.row_count for e in t.manifests.live_entries(t.snapshot_manager.latest())) == [1, 3, 3, 3]
    t.compact(full=True)
    assert [e.file.row_count for e in t.manifests.live_entries(t.snapshot_manager.latest())] == [10]
    assert sorted(t.read().column("k").to_pylist()) == list(range(10))


def test_changelog_files_do_not_roll_at_the_row_target(catalog):
    """Paimon's KeyValueFileWriterFactory.createRollingChangelogFileWriter rolls changelog files by size only."""
    t = _pk(catalog, **{"target-file-row-num": "3", "changelog-producer": "input"})
    t.write(_rows("a", range(10)))
    names = os.listdir(os.path.join(t.root, "dt=a", "bucket-0"))
    assert sum(n.startswith("data-") for n in names) == 4 and sum(n.startswith("changelog-") for n in names) == 1


def test_row_target_must_be_positive(catalog):
    with pytest.raises(InvalidOption, match="target-file-row-num"):
        _append(catalog, **{"target-file-row-num": "0"})


# --- file.suffix.include.compression -----------------------------------------------------------------------
@pytest.mark.parametrize("options, suffix", [
    ({}, ".zst.parquet"),
    ({"file.compression": "gzip"}, ".gz.parquet"),
    ({"file.compression": "none"}, ".parquet"),
    ({"file.format": "orc", "file.compression": "lz4"}, ".lz4.orc"),
    ({"file.format": "avro", "file.compression": "snappy"}, ".snappy.avro"),
])
def test_file_names_carry_the_compression(catalog, options, suffix):
    """Paimon's DataFilePathFactory: '.<codec extension>.<format>' (HadoopCompressionType: zstd -> zst,
    gzip -> gz, none -> nothing)."""
    t = _pk(catalog, **{"file.suffix.include.compression": "true", **options})
    t.write(_rows("a", [1, 2]))
    t.write(_rows("a", [2, 3]))
    t.compact(full=True)
    names = _data_files(t)
    assert names and all(n.endswith(suffix) and n.count(".") == suffix.count(".") for n in names)
    assert sorted(t.read().column("k").to_pylist()) == [1, 2, 3]


def test_file_names_without_the_option_end_in_the_format(catalog):
    t = _append(catalog)
    t.write(_rows("a", [1]))
    assert all(n.endswith(".parquet") and n.count(".") == 1 for n in _data_files(t))


# --- data-file.path-directory --------------------------------------------------------------------------------
@pytest.mark.parametrize("make", [_pk, _append], ids=["pk", "append"])
def test_data_files_live_under_the_path_directory(catalog, make):
    """Paimon's FileStorePathFactory.relativeBucketPath: <table>/<directory>/<partition>/bucket-N."""
    t = make(catalog, **{"data-file.path-directory": "data"})
    t.write(_rows("a", [1, 2]))
    t.write(_rows("b", [3]))
    t.compact(full=True)
    data = [f for f in list_files(t.root) if not f.startswith(("schema", "snapshot", "manifest", "index"))]
    assert data and all(f.startswith("data/dt=") for f in data)
    assert sorted(t.read().column("k").to_pylist()) == [1, 2, 3]
    assert t.remove_orphan_files(older_than=0) == []


# --- scan.bucket / scan.file-creation-time-millis ------------------------------------------------------------
def _two_buckets(catalog, pk: bool):
    opts = {"bucket": "2"} if pk else {"bucket": "2", "bucket-key": "k"}
    t = catalog.create_table("db.t", SCHEMA, primary_key=["dt", "k"] if pk else None, partition_keys=["dt"],
                             options=opts)
    t.write(_rows("a", range(20)))
    return t


@pytest.mark.parametrize("pk", [True, False], ids=["pk", "append"])
def test_scan_bucket_reads_one_bucket(catalog, pk):
    """Paimon's AbstractFileStoreTable.newSnapshotReader / AbstractBatchTableScan: withBucket(scan.bucket)."""
    t = _two_buckets(catalog, pk)
    t.alter().set_option("scan.bucket", "1").commit()
    t = catalog.get_table("db.t")
    keys = sorted(t.read().column("k").to_pylist())
    assert 0 < len(keys) < 20
    assert {sp.bucket for sp in t.plan()} == {1}
    assert sorted(b["k"] for batch in t.to_reader() for b in batch.to_pylist()) == keys
    t.alter().remove_option("scan.bucket").commit()
    t = catalog.get_table("db.t")
    t.alter().set_option("scan.bucket", "0").commit()
    other = sorted(catalog.get_table("db.t").read().column("k").to_pylist())
    assert sorted(keys + other) == list(range(20))


def test_scan_bucket_does_not_narrow_writes(catalog):
    """Writers, compaction and row-level changes see every bucket whatever scan.bucket says."""
    t = _two_buckets(catalog, True)
    t.alter().set_option("scan.bucket", "0").commit()
    t = catalog.get_table("db.t")
    t.delete_where(None)
    t.compact(full=True)
    t.alter().remove_option("scan.bucket").commit()
    assert catalog.get_table("db.t").read().num_rows == 0


def test_postpone_merge_on_read_ignores_scan_bucket_and_refuses_file_creation_time(catalog):
    """Paimon's PostponeMergeReadBuilder plans with plain snapshot readers (every real bucket and the postponed
    files, whatever scan.bucket says) and refuses scan.file-creation-time-millis (validateReadMode): keeping one real
    bucket without the postponed records read stale rows."""
    from engine.errors import UnsupportedFeature
    from engine.postpone.write import FixedBucketPostponeWrite, PostponedWrite
    t = _pk(catalog, **{"bucket": "-2", "postpone.merge-on-read": "true", "postpone.default-bucket-num": "2"})
    for cls, value in ((FixedBucketPostponeWrite, "old"), (PostponedWrite, "new")):
        with cls(t) as w:
            w.write(_rows("a", range(10)).set_column(2, "v", pa.array([value] * 10)))
            t.commit(w.prepare_commit())
    t.alter().set_option("scan.bucket", "1").commit()
    rows = catalog.get_table("db.t").read()
    assert rows.num_rows == 10 and set(rows.column("v").to_pylist()) == {"new"}
    t.alter().remove_option("scan.bucket").set_option("scan.file-creation-time-millis", "0").commit()
    with pytest.raises(UnsupportedFeature, match="scan.file-creation-time-millis"):
        catalog.get_table("db.t").read()


@pytest.mark.parametrize("pk", [True, False], ids=["pk", "append"])
@pytest.mark.parametrize("option", ["scan.bucket", "scan.file-creation-time-millis"])
@pytest.mark.parametrize("op", ["delete", "update"])
def test_read_options_do_not_narrow_row_level_changes(catalog, pk, option, op):
    """delete_where / update_where with a condition change every matching row, whatever scan.bucket or
    scan.file-creation-time-millis narrow users' reads to."""
    import time
    t = _two_buckets(catalog, pk)
    time.sleep(0.01)
    cut = int(time.time() * 1000)
    time.sleep(0.01)
    t.write(_rows("a", [20, 21]))
    t.alter().set_option(option, "1" if option == "scan.bucket" else str(cut)).commit()
    t = catalog.get_table("db.t")
    if op == "delete":
        t.delete_where([("k", "<", 100)])
    else:
        t.update_where({"v": "new"}, [("k", "<", 100)])
    t.alter().remove_option(option).commit()
    rows = catalog.get_table("db.t").read()
    assert rows.num_rows == 0 if op == "delete" else set(rows.column("v").to_pylist()) == {"new"}


@pytest.mark.parametrize("pk", [True, False], ids=["pk", "append"])
def test_file_creation_time_reads_only_newer_files(catalog, pk):
    """Paimon's FileCreationTimeStartingScanner: the latest snapshot's files created at or after the time."""
    import time
    t = _pk(catalog) if pk else _append(catalog)
    t.write(_rows("a", [1, 2]))
    time.sleep(0.01)
    cut = int(time.time() * 1000)
    time.sleep(0.01)
    t.write(_rows("b", [3]))
    t.alter().set_option("scan.file-creation-time-millis", str(cut)).commit()
    t = catalog.get_table("db.t")
    assert t.read().column("k").to_pylist() == [3]
    with pytest.raises(InvalidOption, match="scan.file-creation-time-millis"):
        t.read(snapshot_id=1)


# --- primary-key / partition as options, and the warnings about options ---------------------------------------
def test_keys_given_as_options_define_the_table(catalog):
    """Paimon's Schema.normalizePrimaryKeys / normalizePartitionKeys: the options become the keys and are not
    stored; defining them both ways is an error."""
    t = catalog.create_table("db.t", SCHEMA, options={"primary-key": "dt, k", "partition": "dt", "bucket": "1"})
    assert t.primary_keys == ("dt", "k") and t.partition_keys == ("dt",)
    assert "primary-key" not in t.options and "partition" not in t.options
    from engine.errors import InvalidSchema
    with pytest.raises(InvalidSchema, match="primary-key"):
        catalog.create_table("db.u", SCHEMA, primary_key=["k"], options={"primary-key": "k"})


def test_options_lakemerge_does_not_implement_are_named_in_a_warning(catalog, caplog):
    from engine.options import TableOptions
    opts = TableOptions({"commit.timeout": "1 min", "lookup.cache-rows": "10", "no-such-option": "1",
                         "row-tracking.enabled": "false"}, table="db.t")
    assert opts.unknown_keys() == ["no-such-option"]
    with caplog.at_level("WARNING", logger="lakemerge.options"):
        opts.warn_unknown()
    assert "'commit.timeout' is not implemented by lakemerge (commits retry by commit.max-retries only)" \
        in caplog.text
    assert "'no-such-option' is not a Paimon option" in caplog.text and "lookup.cache-rows" not in caplog.text
