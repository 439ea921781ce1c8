"""System tables ($snapshots, $schemas, $options, $files, $manifests, $partitions, $buckets, $tags, $consumers)
against tables whose content is known."""
from __future__ import annotations

import datetime as dt
import json
import os

import pyarrow as pa
import pytest

from engine.errors import CorruptFile, InvalidInput, SnapshotNotFound, TableNotFound
from engine.system_tables import KINDS, java_duration, local_time

SCHEMA = pa.schema([("dt", pa.string()), ("id", pa.int64()), ("name", pa.string()), ("x", pa.float64())])


@pytest.fixture
def table(catalog):
    t = catalog.create_table("db.t", SCHEMA, primary_key=["dt", "id"], partition_keys=["dt"],
                             options={"bucket": "2", "snapshot.num-retained.max": "10"})
    t.write(pa.table({"dt": ["a", "b", "a"], "id": [1, 2, 3], "name": ["n1", None, "n3"], "x": [1.5, 2.0, None]}))
    t.write(pa.table({"dt": ["a"], "id": [1], "name": ["z"], "x": [0.25]}))
    return t


def _sys(catalog, kind, **kw):
    return catalog.get_table(f"db.t${kind}").read(**kw)


def test_every_kind_has_its_paimon_columns(catalog, table):
    assert sorted(KINDS) == ["audit_log", "buckets", "consumers", "files", "manifests", "options", "partitions",
                             "schemas", "snapshots", "table_indexes", "tags"]
    assert _sys(catalog, "snapshots").column_names[:6] == ["snapshot_id", "schema_id", "commit_user",
                                                           "commit_identifier", "commit_kind", "commit_time"]
    assert _sys(catalog, "files").schema.field("deleteRowCount").type == pa.int64()
    for kind, (schema, _) in KINDS.items():
        system = catalog.get_table(f"db.t${kind}")
        assert system.read().schema == (schema if schema is not None else system.arrow_schema)


def test_snapshots(catalog, table):
    rows = _sys(catalog, "snapshots").to_pylist()
    snaps = table.snapshots()
    assert [r["snapshot_id"] for r in rows] == [1, 2]
    assert [(r["total_record_count"], r["delta_record_count"]) for r in rows] == [(3, 3), (4, 1)]
    assert rows[1]["commit_time"] == local_time(snaps[1].time_millis)
    assert rows[1]["commit_time"].tzinfo is None
    assert abs(rows[1]["commit_time"] - dt.datetime.now()) < dt.timedelta(minutes=5)  # local wall clock
    assert rows[0]["base_manifest_list"] == snaps[0].base_manifest_list and rows[0]["commit_kind"] == "APPEND"
    only = _sys(catalog, "snapshots", columns=["snapshot_id"], filter=[("snapshot_id", ">", 1)])
    assert only.to_pylist() == [{"snapshot_id": 2}]
    reader = catalog.get_table("db.t$snapshots").to_reader(columns=["snapshot_id", "total_record_count"])
    assert reader.read_all().to_pylist() == [{"snapshot_id": 1, "total_record_count": 3},
                                             {"snapshot_id": 2, "total_record_count": 4}]


def test_schemas_and_options(catalog, table):
    (row,) = _sys(catalog, "schemas").to_pylist()
    assert json.loads(row["fields"])[0] == {"id": 0, "name": "dt", "type": "STRING NOT NULL"}
    assert json.loads(row["primary_keys"]) == ["dt", "id"] and json.loads(row["partition_keys"]) == ["dt"]
    assert " " not in row["primary_keys"] and row["comment"] is None
    assert _sys(catalog, "options").to_pylist() == [{"key": "bucket", "value": "2"},
                                                    {"key": "snapshot.num-retained.max", "value": "10"}]


def test_files_lists_live_files_with_keys_and_stats(catalog, table):
    rows = _sys(catalog, "files").to_pylist()
    assert len(rows) == 4
    assert sorted((r["partition"], r["bucket"], r["min_key"], r["record_count"]) for r in rows) == [
        ("{a}", 0, "[1]", 1), ("{a}", 0, "[1]", 1), ("{a}", 1, "[3]", 1), ("{b}", 0, "[2]", 1)]
    for r in rows:
        assert os.path.getsize(r["file_path"]) == r["file_size_in_bytes"]
        bucket_dir = os.path.join(table.root, "dt=" + r["partition"][1:-1], f"bucket-{r['bucket']}")
        assert r["file_path"].startswith(bucket_dir)
        assert r["file_format"] == "parquet" and r["level"] == 0 and r["file_source"] == "APPEND"
        assert r["deleteRowCount"] == 0 and isinstance(r["creation_time"], dt.datetime)
    b = [r for r in rows if r["partition"] == "{b}"][0]
    assert b["null_value_counts"] == "{dt=0, id=0, name=1, x=0}"
    assert b["min_value_stats"] == "{dt=b, id=2, name=null, x=2.0}" == b["max_value_stats"]
    latest_a1 = [r for r in rows if r["min_key"] == "[1]" and r["max_sequence_number"] == 1]
    assert len(latest_a1) == 1 and latest_a1[0]["min_value_stats"] == "{dt=a, id=1, name=z, x=0.25}"
    first = _sys(catalog, "files", snapshot_id=1)
    assert first.num_rows == 3  # time travel
    assert _sys(catalog, "files", filter=[("bucket", "=", 1)]).num_rows == 1


def test_files_shows_stats_of_files_written_before_a_widening_as_values_of_the_new_type(catalog):
    """Statistics stay encoded under the file's schema: after a merge-schema write widened INT -> BIGINT and
    FLOAT -> DOUBLE (and added a column), an old file's bounds are decoded with its own types and shown as values
    of the new ones, as Paimon's FilesTable evolves them (read as BIGINT / DOUBLE they were garbage)."""
    schema = pa.schema([pa.field("id", pa.int64(), False), ("a", pa.int32()), ("f", pa.float32())])
    t = catalog.create_table("db.t", schema, primary_key=["id"], options={"bucket": "1"})
    t.write(pa.table({"id": [1, 2], "a": pa.array([-5, 10], pa.int32()),
                      "f": pa.array([1.5, -2.25], pa.float32())}, schema=schema))
    t.write(pa.table({"id": [3], "a": [2 ** 40], "f": [0.5], "n": [7]}), merge_schema=True, type_widening=True)
    rows = sorted(_sys(catalog, "files").to_pylist(), key=lambda r: r["schema_id"])
    assert [(r["schema_id"], r["null_value_counts"], r["min_value_stats"], r["max_value_stats"]) for r in rows] == [
        (0, "{a=0, f=0, id=0, n=null}", "{a=-5, f=-2.25, id=1, n=null}", "{a=10, f=1.5, id=2, n=null}"),
        (1, "{a=0, f=0, id=0, n=0}", "{a=1099511627776, f=0.5, id=3, n=7}", "{a=1099511627776, f=0.5, id=3, n=7}")]


def test_manifests_partitions_buckets_agree_with_files(catalog, table):
    files = _sys(catalog, "files").to_pylist()
    manifests = _sys(catalog, "manifests").to_pylist()
    assert sum(m["num_added_files"] - m["num_deleted_files"] for m in manifests) == len(files)
    assert (manifests[0]["min_partition_stats"], manifests[0]["max_partition_stats"]) == ("{a}", "{b}")
    assert all(os.path.isfile(os.path.join(table.root, "manifest", m["file_name"])) for m in manifests)
    parts = _sys(catalog, "partitions").to_pylist()
    assert [(p["partition"], p["record_count"], p["file_count"], p["total_buckets"], p["deleted_record_count"])
            for p in parts] == [("dt=a", 3, 3, 2, 0), ("dt=b", 1, 1, 2, 0)]
    assert parts[0]["file_size_in_bytes"] == sum(f["file_size_in_bytes"] for f in files if f["partition"] == "{a}")
    buckets = _sys(catalog, "buckets").to_pylist()
    assert [(b["partition"], b["bucket"], b["record_count"], b["file_count"]) for b in buckets] == [
        ("dt=a", 0, 2, 2), ("dt=a", 1, 1, 1), ("dt=b", 0, 1, 1)]
    assert max(b["last_update_time"] for b in buckets) == max(f["creation_time"] for f in files)
    assert _sys(catalog, "partitions", snapshot_id=1).column("record_count").to_pylist() == [2, 1]


def test_tags_and_consumers_read_their_directories(catalog, table):
    assert _sys(catalog, "tags").num_rows == 0 and _sys(catalog, "consumers").num_rows == 0
    snap = json.loads(table.snapshot(1).to_json())
    os.makedirs(os.path.join(table.root, "tag"))
    with open(os.path.join(table.root, "tag", "tag-v1"), "w") as fh:
        json.dump({**snap, "tagCreateTime": [2024, 5, 6, 7, 8, 9, 123000000], "tagTimeRetained": 86400.0}, fh)
    with open(os.path.join(table.root, "tag", "tag-a0"), "w") as fh:
        json.dump(snap, fh)
    tags = _sys(catalog, "tags").to_pylist()
    assert [t["tag_name"] for t in tags] == ["a0", "v1"]
    assert tags[1]["snapshot_id"] == 1 and tags[1]["record_count"] == 3 and tags[1]["schema_id"] == 0
    assert tags[1]["create_time"] == dt.datetime(2024, 5, 6, 7, 8, 9, 123000)
    assert tags[1]["time_retained"] == "PT24H" and tags[0]["time_retained"] is None
    os.makedirs(os.path.join(table.root, "consumer"))
    for cid, nxt in (("etl", 2), ("audit", 1)):
        with open(os.path.join(table.root, "consumer", f"consumer-{cid}"), "w") as fh:
            json.dump({"nextSnapshot": nxt}, fh)
    assert _sys(catalog, "consumers").to_pylist() == [{"consumer_id": "audit", "next_snapshot_id": 1},
                                                      {"consumer_id": "etl", "next_snapshot_id": 2}]
    with open(os.path.join(table.root, "consumer", "consumer-bad"), "w") as fh:
        fh.write("{not json")
    with pytest.raises(CorruptFile, match="consumer-bad"):
        _sys(catalog, "consumers")


def test_empty_table_and_errors(catalog):
    catalog.create_table("db.e", SCHEMA, primary_key=["id"], options={"bucket": "1"})
    for kind in KINDS:
        rows = catalog.get_table(f"db.e${kind}").read()
        assert rows.num_rows == (1 if kind in ("schemas", "options") else 0)
    assert catalog.get_table("db.e$files").read().to_pylist() == []
    with pytest.raises(TableNotFound, match=r"\$nope"):
        catalog.get_table("db.e$nope")
    with pytest.raises(TableNotFound):
        catalog.get_table("db.missing$snapshots")
    with pytest.raises(InvalidInput, match="takes no snapshot id"):
        catalog.get_table("db.e$snapshots").read(snapshot_id=1)
    with pytest.raises(InvalidInput, match="unknown column"):
        catalog.get_table("db.e$snapshots").read(columns=["nope"])
    with pytest.raises(SnapshotNotFound):
        catalog.get_table("db.e$files").read(snapshot_id=5)


def test_java_duration_text():
    assert [java_duration(s) for s in (86400, 5400, 0.5, 0, 61.25)] == ["PT24H", "PT1H30M", "PT0.5S", "PT0S",
                                                                     "PT1M1.25S"]


def test_audit_log_and_files_at_a_tag_whose_snapshot_expired(catalog):
    """``read(snapshot=...)`` takes a resolved snapshot, such as the one a tag file keeps after expiration removed
    its snapshot file (Spark's scan.tag-name goes through it); by id that snapshot is gone."""
    from tests.conftest import table_with_an_expired_tagged_snapshot
    t = table_with_an_expired_tagged_snapshot(catalog, "db.e")
    audit, files = catalog.get_table("db.e$audit_log"), catalog.get_table("db.e$files")
    with pytest.raises(SnapshotNotFound):
        audit.read(snapshot_id=1)
    tagged = t.tag_snapshot("t1")
    assert audit.arrow_schema_at(snapshot=tagged).names == ["rowkind", "k", "v"]
    assert audit.read(snapshot=tagged).to_pylist() == [{"rowkind": "+I", "k": 1, "v": "a"}]
    assert files.read(snapshot=tagged).num_rows == 1
    with pytest.raises(InvalidInput):
        catalog.get_table("db.e$snapshots").read(snapshot=tagged)
