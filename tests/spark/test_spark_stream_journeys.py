"""Streaming journeys through Spark: a CDC pipeline's readStream across restarts from its checkpoint, expiry,
rollbacks, empty tables and branches, and writeStream pipelines (one local SparkSession, conftest.py)."""
from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import spark_glue
from engine import Catalog
from tests.spark.stream_sink import run_available_now as _run
from tests.spark.stream_sink import sink_rows

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([pa.field("p", pa.string(), False), pa.field("k", pa.int64(), False), ("v", pa.string())])


def _data(*rows):
    return pa.table({"p": [r[0] for r in rows], "k": [r[1] for r in rows], "v": [r[2] for r in rows]}, schema=SCHEMA)


def _table(tmp_path, name="t", **options):
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db", ignore_if_exists=True)
    return cat.create_table(f"db.{name}", SCHEMA, ["p", "k"], ["p"], {"bucket": "1", **options})


def _out(out):
    return sorted((r["_row_kind"], r["p"], r["k"], r["v"]) for r in sink_rows(out))


def _changes(t, start, end=None):
    return sorted((r["_row_kind"], r["p"], r["k"], r["v"]) for r in t.read_changes(start, end).to_pylist())


def test_stream_survives_a_rollback_below_its_checkpoint_only_with_a_clear_error(spark, tmp_path):
    """A query whose checkpoint is past the latest snapshot after a rollback must fail (as the engine's stream and
    Paimon's NextSnapshotFetcher do), not wait and then skip the snapshots committed anew under its old ids."""
    t = _table(tmp_path, **{"changelog-producer": "input"})
    for i in range(4):
        t.write(_data(("a", i, str(i))))
    out, ck = str(tmp_path / "out"), str(tmp_path / "ck")
    _run(spark, t.root, out, ck, **{"scan.mode": "from-snapshot", "scan.snapshot-id": 1})
    assert _out(out) == _changes(t, 0)
    t.rollback_to(2)
    with pytest.raises(Exception, match="has no snapshot 4: the query has read up to snapshot 4 but the latest is 2"):
        _run(spark, t.root, out, ck)
    for i in range(10, 13):  # snapshots 3, 4, 5 anew: the query has delivered up to (the old) 4
        t.write(_data(("a", i, str(i))))
    with pytest.raises(Exception, match="has no snapshot 4: the snapshot the query read up to was replaced"):
        _run(spark, t.root, out, ck)
    assert _out(out) == _changes(t, 0, 2) + [("+I", "a", 2, "2"), ("+I", "a", 3, "3")]


def test_stream_of_a_branch_with_a_consumer_restarts_from_its_checkpoint(spark, tmp_path):
    """A query reading a branch sees only the branch's commits, keeps its consumer in the branch, and a restart
    from the checkpoint continues after the last delivered snapshot of the branch."""
    t = _table(tmp_path, **{"changelog-producer": "lookup"})
    t.write(_data(("a", 1, "main")))
    t.create_tag("t1", 1)
    t.create_branch("dev", "t1")
    dev = t.branch("dev")
    dev.write(_data(("a", 1, "dev"), ("b", 2, "dev")))
    t.write(_data(("a", 9, "main only")))
    out, ck = str(tmp_path / "out"), str(tmp_path / "ck")
    opts = {"branch": "dev", "consumer-id": "job"}
    _run(spark, t.root, out, ck, **opts)
    assert _out(out) == [("+I", "a", 1, "dev"), ("+I", "b", 2, "dev")]  # latest-full of the branch
    dev.write(_data(("b", 2, "dev2")))
    dev.delete(pa.table({"p": ["a"], "k": [1]}))
    t.write(_data(("a", 10, "main only")))
    _run(spark, t.root, out, ck, **opts)
    assert _out(out) == sorted([("+I", "a", 1, "dev"), ("+I", "b", 2, "dev"), ("-U", "b", 2, "dev"),
                                ("+U", "b", 2, "dev2"), ("-D", "a", 1, "dev")])
    assert t.consumers() == {} and dev.consumers()  # the consumer lives in the branch


DDL = "p string, k long, v string"


def _write_stream(spark, src, root, ck):
    """One AvailableNow run of a parquet-to-lakemerge query (checkpoint ``ck``); raises the query's error."""
    q = (spark.readStream.schema(DDL).parquet(str(src)).writeStream.format("lakemerge")
         .option("checkpointLocation", ck).trigger(availableNow=True).start(root))
    q.awaitTermination(120)
    if q.exception() is not None:
        raise RuntimeError(str(q.exception()))


def test_streaming_write_restarted_without_its_checkpoint_fails_instead_of_dropping_batches(spark, tmp_path):
    """Deleting a query's checkpoint and starting it again numbers its micro-batches from 0 under the same commit
    user (derived from the checkpoint location): those batches are new data, not replays of committed ones, and
    must not be skipped silently. A batch id below the user's newest committed one cannot be a replay (Spark only
    replays its last batch), so the write fails with a clear error."""
    import shutil
    t = _table(tmp_path)
    src, ck = tmp_path / "in", str(tmp_path / "ck")
    src.mkdir()
    for i in range(3):  # three runs: batches 0, 1, 2
        pq.write_table(_data(("a", i, "x")), str(src / f"{i}.parquet"))
        _write_stream(spark, src, t.root, ck)
    assert [s.commit_identifier for s in t.snapshots()] == [0, 1, 2]
    shutil.rmtree(ck)
    src2 = tmp_path / "in2"
    src2.mkdir()
    pq.write_table(_data(("a", 10, "new")), str(src2 / "0.parquet"))
    with pytest.raises(Exception, match="batch 0 .*newest batch 2"):
        _write_stream(spark, src2, t.root, ck)
    assert t.latest_snapshot_id() == 3 and sorted(t.read().column("k").to_pylist()) == [0, 1, 2]
    assert t.remove_orphan_files(older_than=0, dry_run=True) == []  # the refused batch's files are gone


def test_foreach_batch_helper_refuses_a_batch_older_than_the_committed_ones(spark, tmp_path):
    t = _table(tmp_path)
    write = spark_glue.stream_batch_writer(t.root, commit_user="pipeline")
    write(spark.createDataFrame([("a", 1, "x")], DDL), 0)
    write(spark.createDataFrame([("a", 2, "x")], DDL), 1)
    write(spark.createDataFrame([("a", 2, "y")], DDL), 1)  # a replay of the last batch: skipped
    with pytest.raises(Exception, match="batch 0 .*newest batch 1"):  # a new query under the same commit user
        write(spark.createDataFrame([("a", 3, "x")], DDL), 0)
    assert t.read().to_pylist() == [{"p": "a", "k": 1, "v": "x"}, {"p": "a", "k": 2, "v": "x"}]
    assert t.remove_orphan_files(older_than=0, dry_run=True) == []


@pytest.mark.parametrize("mode", ["latest-full", "from-snapshot-full"])
def test_stream_started_on_an_empty_table_then_restarted(spark, tmp_path, mode):
    """A query started before the table's first commit delivers every later commit once across restarts (a
    from-snapshot-full start waits for the first snapshot, as Paimon's and the engine's stream do)."""
    t = _table(tmp_path, **{"changelog-producer": "input"})
    out, ck = str(tmp_path / "out"), str(tmp_path / "ck")
    opts = {"scan.mode": mode, "scan.snapshot-id": 1, "consumer-id": "job"}
    _run(spark, t.root, out, ck, **opts)
    assert _out(out) == []
    t.write(_data(("a", 1, "x"), ("b", 2, "y")))
    t.write(_data(("a", 1, "z")))
    _run(spark, t.root, out, ck, **opts)
    t.delete(pa.table({"p": ["b"], "k": [2]}))
    _run(spark, t.root, out, ck, **opts)
    # latest-full: the changes of snapshot 1; from-snapshot-full: snapshot 1 in full (here the same rows)
    assert _out(out) == sorted([("+I", "a", 1, "x"), ("+I", "b", 2, "y"), ("+I", "a", 1, "z"), ("-D", "b", 2, None)])
    assert t.consumers() == {"job": 3}  # the consumer trails the query by one batch


def test_expiry_behind_a_stopped_query_fails_it_unless_a_consumer_holds_the_snapshots(spark, tmp_path):
    """Snapshot expiry while a query is stopped: without a consumer the restarted query fails naming the snapshot
    it needs (never skipping it); with a consumer-id, expiration keeps what the query has not committed."""
    retain = {"changelog-producer": "input", "snapshot.num-retained.min": "1", "snapshot.num-retained.max": "2",
              "snapshot.time-retained": "0 ms", "num-sorted-run.compaction-trigger": "100"}
    for consumer in (None, "job"):
        t = _table(tmp_path, name=f"t_{consumer}", **retain)
        t.write(_data(("a", 0, "0")))
        out, ck = str(tmp_path / f"out_{consumer}"), str(tmp_path / f"ck_{consumer}")
        opts = {"consumer-id": consumer} if consumer else {}
        _run(spark, t.root, out, ck, **opts)  # batch 0: snapshot 1 in full
        t.write(_data(("a", 1, "1")))
        _run(spark, t.root, out, ck, **opts)  # batch 1: snapshot 2; commits batch 0 (consumer: next = 2)
        for i in range(2, 6):
            t.write(_data(("a", i, str(i))))
        if consumer is None:
            assert t.snapshot_manager.earliest_id() > 3
            with pytest.raises(Exception, match="has no snapshot 3"):
                _run(spark, t.root, out, ck, **opts)
        else:
            assert t.snapshot_manager.earliest_id() == 2
            _run(spark, t.root, out, ck, **opts)
            assert _out(out) == [("+I", "a", i, str(i)) for i in range(6)]


def _fold(changes):
    """The state a downstream consumer builds from (kind, p, k, v) changes, checking each retract's values."""
    state = {}
    for kind, p, k, v in changes:
        if kind in ("+I", "+U"):
            assert kind == "+U" or (p, k) not in state, (kind, p, k, v)
            state[(p, k)] = v
        else:
            assert state.pop((p, k)) == v, (kind, p, k, v)
    return state


def test_two_streams_write_one_table_and_a_reader_folds_its_changelog_to_the_table(spark, tmp_path):
    """Two writeStream queries upsert overlapping keys into one lookup-changelog table at the same time (both
    compact the one bucket, so their compactions conflict): every batch lands once, nothing fails, and after a
    compaction the changelog a streaming reader gets folds to the table's rows, each -U carrying the value last
    emitted."""
    t = _table(tmp_path, **{"changelog-producer": "lookup"})
    queries = []
    for w in ("w1", "w2"):
        src = tmp_path / f"in_{w}"
        src.mkdir()
        for b in range(3):
            pq.write_table(_data(*[("a", k, f"{w}-{b}") for k in range(b, b + 4)]), str(src / f"{b}.parquet"))
        queries.append(spark.readStream.schema(DDL).option("maxFilesPerTrigger", 1).parquet(str(src))
                       .writeStream.format("lakemerge").option("checkpointLocation", str(tmp_path / f"ck_{w}"))
                       .trigger(availableNow=True).start(t.root))
    for q in queries:
        q.awaitTermination(180)
        assert q.exception() is None
    users = {}
    for s in t.snapshots():
        if s.commit_kind == "APPEND":
            users.setdefault(s.commit_user, []).append(s.commit_identifier)
    assert sorted(users.values()) == [[0, 1, 2], [0, 1, 2]]
    # a writer's compaction that lost to the other's commit is dropped (its data stays committed): the lookup
    # changelog of those level-0 files comes with the next compaction, as in Paimon
    t.compact()
    table_rows = {(r["p"], r["k"]): r["v"] for r in t.read().to_pylist()}
    assert sorted(table_rows) == [("a", k) for k in range(6)]
    got = []  # foreachBatch runs on the driver, batch after batch; collect() keeps the partitions' (snapshots') order
    q = (spark_glue.read_stream(spark, t.root, **{"scan.mode": "from-snapshot", "scan.snapshot-id": 1,
                                                  "read.stream.max-snapshots-per-trigger": 2})
         .writeStream.foreachBatch(lambda df, _: got.extend(
             (r["_row_kind"], r["p"], r["k"], r["v"]) for r in df.collect()))
         .option("checkpointLocation", str(tmp_path / "ck_read")).trigger(availableNow=True).start())
    q.awaitTermination(180)
    assert q.exception() is None
    assert _fold(got) == table_rows


def test_cdc_pipeline_mirrors_a_table_through_a_stream_and_survives_restarts(spark, tmp_path):
    """The classic pipeline: readStream of table A's changelog (lookup producer with row-deduplicate, a full
    compaction, deletes, a key deleted and inserted again) piped by writeStream with ``rowkind.column`` into table B:
    after each restart from the checkpoint B holds exactly A's rows, and B's snapshots carry consecutive batch ids."""
    a = _table(tmp_path, name="a", **{"changelog-producer": "lookup", "changelog-producer.row-deduplicate": "true"})
    b = _table(tmp_path, name="b", **{"changelog-producer": "lookup"})
    ck_write = str(tmp_path / "ck")

    def pump():
        q = (spark_glue.read_stream(spark, a.root, **{"consumer-id": "mirror"}).writeStream.format("lakemerge")
             .option("checkpointLocation", ck_write).option("rowkind.column", "_row_kind")
             .trigger(availableNow=True).start(b.root))
        q.awaitTermination(180)
        assert q.exception() is None

    a.write(_data(("a", 1, "x"), ("a", 2, "y"), ("b", 3, "z")))
    pump()
    assert b.read().to_pylist() == a.read().to_pylist()
    a.write(_data(("a", 1, "x2"), ("a", 2, "y")))  # an update and an unchanged row (row-deduplicate: no change)
    a.delete(pa.table({"p": ["b"], "k": [3]}))
    a.compact(full=True)
    pump()
    assert sorted(b.read().to_pylist(), key=str) == sorted(a.read().to_pylist(), key=str)
    a.write(_data(("b", 3, "back")))
    a.delete(pa.table({"p": ["a"], "k": [2]}))
    pump()
    assert sorted(b.read().to_pylist(), key=str) == sorted(a.read().to_pylist(), key=str)
    assert [s.commit_identifier for s in b.snapshots() if s.commit_kind == "APPEND"] == [0, 1, 2]


def test_rate_limits_per_snapshot(spark, tmp_path):
    """read.stream.max-snapshots-per-trigger splits a backlog into batches of whole snapshots, each delivered once
    (Paimon's split limits: test_spark_stream_limits.py)."""
    t = _table(tmp_path, **{"changelog-producer": "input"})
    for i in range(5):
        t.write(_data(("a", i, str(i))))
    batches = []
    q = (spark_glue.read_stream(spark, t.root, **{"scan.mode": "from-snapshot", "scan.snapshot-id": 1,
                                                  "read.stream.max-snapshots-per-trigger": 2})
         .writeStream.foreachBatch(lambda df, i: batches.append((i, sorted(r["k"] for r in df.collect()))))
         .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start())
    q.awaitTermination(120)
    assert q.exception() is None and batches == [(0, [0, 1]), (1, [2, 3]), (2, [4])]


def test_default_scan_mode_follows_the_start_options_as_paimon(spark, tmp_path):
    """Paimon's CoreOptions.startupMode: without scan.mode, scan.snapshot-id means from-snapshot and
    scan.timestamp-millis means from-timestamp (not latest-full, which would re-read the whole table instead)."""
    t = _table(tmp_path, **{"changelog-producer": "input"})
    for i in range(4):
        t.write(_data(("a", i, str(i))))
    _run(spark, t.root, str(tmp_path / "o1"), str(tmp_path / "c1"), **{"scan.snapshot-id": 3})
    assert _out(str(tmp_path / "o1")) == _changes(t, 2) == [("+I", "a", 2, "2"), ("+I", "a", 3, "3")]
    ts = t.snapshot(4).time_millis
    _run(spark, t.root, str(tmp_path / "o2"), str(tmp_path / "c2"), **{"scan.timestamp-millis": ts})
    assert _out(str(tmp_path / "o2")) == _changes(t, 3)
    _run(spark, t.root, str(tmp_path / "o3"), str(tmp_path / "c3"), **{"scan.mode": "full"})
    assert _out(str(tmp_path / "o3")) == [("+I", "a", i, str(i)) for i in range(4)]
    t.create_tag("t2", 2)  # Paimon refuses scan.tag-name in streaming mode; ignored it would mean latest-full
    with pytest.raises(Exception, match="scan.tag-name"):
        _run(spark, t.root, str(tmp_path / "o4"), str(tmp_path / "c4"), **{"scan.tag-name": "t2"})
    _run(spark, t.root, str(tmp_path / "o5"), str(tmp_path / "c5"), **{"scan.snapshot-id": "t2"})
    assert _out(str(tmp_path / "o5")) == [("+I", "a", i, str(i)) for i in range(1, 4)]


def test_consumer_ignore_progress_starts_a_new_query_from_its_scan_mode(spark, tmp_path):
    """consumer.ignore-progress (read option, or table option) makes a new query with a used consumer id start
    from its scan mode, as Paimon's DataTableStreamScan does; without it the query resumes at the consumer."""
    t = _table(tmp_path, **{"changelog-producer": "input"})
    for i in range(3):
        t.write(_data(("a", i, str(i))))
    t.reset_consumer("job", 3)
    opts = {"scan.mode": "from-snapshot", "scan.snapshot-id": 1, "consumer-id": "job"}
    _run(spark, t.root, str(tmp_path / "o1"), str(tmp_path / "c1"), **opts)
    assert _out(str(tmp_path / "o1")) == [("+I", "a", 2, "2")]
    _run(spark, t.root, str(tmp_path / "o2"), str(tmp_path / "c2"), **opts, **{"consumer.ignore-progress": "true"})
    assert _out(str(tmp_path / "o2")) == [("+I", "a", i, str(i)) for i in range(3)]


def test_replayed_batch_after_a_rollback_below_its_start_fails_before_delivering(spark, tmp_path):
    """A query stopped after planning a batch but before committing it replays that batch from its offset log on
    restart, without asking for a new latest offset: when the table was rolled back below the batch's start and
    written again meanwhile, the replay must fail before delivering, not deliver the snapshots committed anew
    under the batch's ids (skipping the new ones at or below its start)."""
    t = _table(tmp_path, **{"changelog-producer": "input"})
    for i in range(4):
        t.write(_data(("a", i, str(i))))
    out, ck = str(tmp_path / "out"), str(tmp_path / "ck")
    _run(spark, t.root, out, ck, **{"scan.mode": "from-snapshot", "scan.snapshot-id": 1})  # batch 0: 1..4
    for i in range(4, 6):
        t.write(_data(("a", i, str(i))))
    _run(spark, t.root, out, ck)  # batch 1: 5..6
    delivered = _out(out)
    assert delivered == _changes(t, 0)
    # as if the query had stopped before committing batch 1 (sink included): Spark replays it on restart
    for log in (os.path.join(ck, "commits"), os.path.join(out, "_spark_metadata")):
        for name in ("1", ".1.crc"):
            if os.path.exists(os.path.join(log, name)):
                os.remove(os.path.join(log, name))
    t.rollback_to(3)
    for i in range(10, 13):  # snapshots 4, 5, 6 anew
        t.write(_data(("a", i, str(i))))
    with pytest.raises(Exception, match="has no snapshot 4: the snapshot the query read up to was replaced"):
        _run(spark, t.root, out, ck)
    assert _out(out) == delivered


def test_scan_timestamp_starts_a_stream_from_that_time_as_paimon(spark, tmp_path):
    """Paimon's CoreOptions.startupMode: scan.timestamp (a date-time string) without scan.mode means
    from-timestamp, as scan.timestamp-millis does (AbstractDataTableScan parses it when no millis are given);
    ignoring it would read the whole table (latest-full)."""
    import datetime as dt
    t = _table(tmp_path, **{"changelog-producer": "input"})
    for i in range(4):
        t.write(_data(("a", i, str(i))))
    when = dt.datetime.fromtimestamp(t.snapshot(3).time_millis / 1000, dt.timezone.utc)
    _run(spark, t.root, str(tmp_path / "o1"), str(tmp_path / "c1"),
         **{"scan.timestamp": when.isoformat(timespec="milliseconds")})
    assert _out(str(tmp_path / "o1")) == _changes(t, 2)


def test_rollback_check_tolerates_the_offsets_snapshot_expiring_meanwhile(tmp_path, monkeypatch):
    """Snapshot expiry may delete the snapshot a query has read up to at any moment (without a consumer nothing
    holds it): between seeing it and reading its commit time is no rollback, and must not fail the query."""
    from engine.snapshots import SnapshotManager
    from spark_glue.stream_read import check_position, offset
    from spark_glue.tables import open_table
    t = _table(tmp_path)
    for i in range(3):
        t.write(_data(("a", i, str(i))))
    start = offset(2, table=t)
    assert "time" in start
    check_position(t, start)
    os.remove(t.snapshot_manager.paths.snapshot(2))  # expired right after the query saw it
    monkeypatch.setattr(SnapshotManager, "exists", lambda self, sid: True)
    check_position(open_table(t.root), start)  # as latestOffset does: a fresh table, nothing cached
    assert offset(2, table=open_table(t.root)) == {"snapshot": 2}  # e.g. a consumer's last snapshot, expiring


def test_non_integer_scan_timestamp_millis_fails_the_query_with_an_invalid_option(spark, tmp_path):
    """It raised a bare ValueError; Paimon's option is a long (a date-time goes in scan.timestamp)."""
    t = _table(tmp_path)
    t.write(_data(("a", 1, "x")))
    with pytest.raises(Exception, match="scan.timestamp-millis") as e:
        _run(spark, t.root, str(tmp_path / "o"), str(tmp_path / "c"), **{"scan.timestamp-millis": "yesterday"})
    assert "InvalidOption" in str(e.value) or "invalid value" in str(e.value)


def test_consumer_resumed_after_a_rollback_that_committed_its_ids_again_fails(spark, tmp_path):
    """A query's consumer keeps the commit time of the snapshot before its nextSnapshot, as the engine's streams
    do, and a query resuming from a consumer (new checkpoint) checks it: after a rollback that re-committed the ids
    below the consumer's position, the query and the engine's stream fail instead of skipping the new snapshots.
    Spark's consumer commit recorded no commit time and its initialOffset checked none."""
    import json

    from engine.changelog.consumers import ConsumerManager
    from engine.errors import SnapshotNotFound
    t = _table(tmp_path, **{"changelog-producer": "input"})
    for i in range(3):
        t.write(_data(("a", i, str(i))))
    opts = {"scan.mode": "from-snapshot", "scan.snapshot-id": 1, "consumer-id": "job"}
    _run(spark, t.root, str(tmp_path / "out"), str(tmp_path / "ck"), **opts)
    t.write(_data(("a", 3, "3")))
    _run(spark, t.root, str(tmp_path / "out"), str(tmp_path / "ck"), **opts)  # commits the first run's batch
    nxt = t.consumers()["job"]
    raw = json.loads(t.file_io.read_bytes(ConsumerManager(t).path("job")))
    assert raw == {"nextSnapshot": nxt, "lakemerge.previousSnapshotTime": t.snapshot(nxt - 1).time_millis}
    t.rollback_to(1)
    for i in range(10, 10 + nxt):  # snapshots 2 .. nxt + 1 anew
        t.write(_data(("a", i, "new")))
    with pytest.raises(SnapshotNotFound, match="replaced by another commit"):
        t.stream("latest", consumer_id="job", idle_timeout=0)
    with pytest.raises(Exception, match="replaced by another commit"):
        _run(spark, t.root, str(tmp_path / "out2"), str(tmp_path / "ck2"), **opts)
