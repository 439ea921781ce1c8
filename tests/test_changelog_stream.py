"""Changelog reads and streaming scans (issue 5): producers none and input, scan modes, consumers, expiry."""
from __future__ import annotations

import pyarrow as pa
import pytest

from engine.errors import InvalidInput, InvalidOption, SnapshotNotFound
from tests.conftest import expire_after_latest

SCHEMA = pa.schema([pa.field("k", pa.int64(), False), pa.field("a", pa.int64()), pa.field("v", pa.string())])


def rows(*triples):
    return pa.table({"k": [t[0] for t in triples], "a": [t[1] for t in triples], "v": [t[2] for t in triples]},
                    schema=SCHEMA)


def changes(t: pa.Table) -> list[tuple]:
    return [(r["_row_kind"], r["k"], r["a"], r["v"]) for r in t.to_pylist()]


def make(catalog, name, producer, **opts):
    options = {"bucket": "1", "changelog-producer": producer}
    options.update({k.replace("_", "-"): v for k, v in opts.items()})
    return catalog.create_table(f"db.{name}", SCHEMA, ["k"], options=options)


def history(t):
    t.write(rows((1, 1, "1"), (2, 1, "x")))
    t.write(rows((1, 1, "2")))
    t.delete(pa.table({"k": [2]}))
    with t.new_write() as w:  # new key updated and deleted in one commit; an update sent as -U/+U
        w.write(rows((3, 3, "a")))
        w.write(rows((3, 3, "b")), row_kinds=["+U"])
        w.write(rows((1, 1, "2"), (1, 1, "3")), row_kinds=["-U", "+U"])
        w.delete(pa.table({"k": [3]}))
        t.commit(w.prepare_commit())


def test_input_changelog_is_every_input_row_sorted_by_key(catalog):
    t = make(catalog, "t", "input")
    history(t)
    assert changes(t.read_changes(0, 1)) == [("+I", 1, 1, "1"), ("+I", 2, 1, "x")]
    assert changes(t.read_changes(1, 3)) == [("+I", 1, 1, "2"), ("-D", 2, None, None)]
    assert changes(t.read_changes(3, 4)) == [("-U", 1, 1, "2"), ("+U", 1, 1, "3"), ("+I", 3, 3, "a"),
                                             ("+U", 3, 3, "b"), ("-D", 3, None, None)]
    snap = t.snapshot(4)
    assert snap.changelog_manifest_list is not None and snap.changelog_record_count == 5


def test_none_reads_new_level0_files_as_stored(catalog):
    t = make(catalog, "t", "none")
    history(t)
    assert t.snapshot(4).changelog_manifest_list is None
    assert changes(t.read_changes(3, 4)) == [("+U", 1, 1, "3"), ("-D", 3, None, None)]
    assert changes(t.read_changes()) == [("+I", 1, 1, "1"), ("+I", 2, 1, "x"), ("+I", 1, 1, "2"),
                                         ("-D", 2, None, None), ("+U", 1, 1, "3"), ("-D", 3, None, None)]


def test_none_normalized_looks_up_previous_values(catalog):
    t = make(catalog, "t", "none")
    history(t)
    assert changes(t.read_changes(normalize=True)) == [
        ("+I", 1, 1, "1"), ("+I", 2, 1, "x"), ("-U", 1, 1, "1"), ("+U", 1, 1, "2"), ("-D", 2, 1, "x"),
        ("-U", 1, 1, "2"), ("+U", 1, 1, "3")]


@pytest.mark.parametrize("bucket", ["1", "-1"])
def test_normalized_changes_need_no_earlier_snapshot(catalog, bucket):
    """The state before an APPEND snapshot is its own files without the ones it added: normalizing the earliest
    retained snapshot works after the one before it expired, as the plain changes do."""
    t = make(catalog, "t", "none", **{"bucket": bucket, "snapshot.num-retained.min": "2",
                                      "snapshot.num-retained.max": "2", "num-sorted-run.compaction-trigger": "100"})
    t.write(rows((1, 1, "a"), (2, 2, "b")))
    t.write(rows((1, 1, "a2")))
    t.write(rows((1, 1, "a3"), (3, 3, "c")))
    t.delete(pa.table({"k": [2]}))
    assert t.snapshot_manager.ids() == [3, 4]
    assert changes(t.read_changes(2, normalize=True)) == [
        ("-U", 1, 1, "a2"), ("+U", 1, 1, "a3"), ("+I", 3, 3, "c"), ("-D", 2, 2, "b")]
    assert [changes(pa.Table.from_batches([b])) for b in t.stream("from-snapshot", snapshot_id=1, normalize=True,
                                                                   idle_timeout=0)][0] == \
        [("-U", 1, 1, "a2"), ("+U", 1, 1, "a3"), ("+I", 3, 3, "c")]


@pytest.mark.parametrize("cross_partition", [False, True])
def test_normalized_changes_of_a_deletion_vector_table(catalog, cross_partition):
    """The new rows of an APPEND snapshot are level-0 files, which a DV table's batch view hides: normalize looks
    keys up in every level, as a streaming reader sees them."""
    schema = pa.schema([pa.field("k", pa.int64(), False), pa.field("p", pa.string(), False), ("v", pa.string())])
    if cross_partition:  # key moves between partitions
        t = catalog.create_table("db.t", schema, ["k"], partition_keys=["p"],
                                 options={"bucket": "-1", "deletion-vectors.enabled": "true"})
    else:
        t = catalog.create_table("db.t", schema, ["k"], options={"bucket": "1", "deletion-vectors.enabled": "true"})
    t.write(pa.table({"k": [1, 2], "p": ["x", "x"], "v": ["a", "b"]}, schema=schema))
    t.write(pa.table({"k": [1], "p": ["y" if cross_partition else "x"], "v": ["a2"]}, schema=schema))
    t.delete(pa.table({"k": [2], "p": ["x"]}, schema=schema.remove(2)))
    got = [(r["_row_kind"], r["k"], r["v"]) for r in t.read_changes(normalize=True, columns=["k", "v"]).to_pylist()]
    assert got == [("+I", 1, "a"), ("+I", 2, "b"), ("-U", 1, "a"), ("+U", 1, "a2"), ("-D", 2, "b")]


def test_normalize_emits_nothing_for_unchanged_rows(catalog):
    """Flink's ChangelogNormalize (DeduplicateFunctionHelper.processLastRowOnChangelog, state TTL off) swallows an
    upsert equal to the stored row and a delete of an absent key."""
    t = make(catalog, "t", "none")
    t.write(rows((1, 1, "a"), (2, 2, "b")))
    t.write(rows((1, 1, "a"), (2, 2, "c")))  # key 1 re-sent unchanged, key 2 updated
    with t.new_write() as w:  # key 2 deleted and re-inserted with the same row, key 1 deleted
        w.delete(pa.table({"k": [2, 1]}))
        w.write(rows((2, 2, "c")))
        t.commit(w.prepare_commit())
    t.delete(pa.table({"k": [9]}))  # absent key
    assert changes(t.read_changes(1, normalize=True)) == [("-U", 2, 2, "b"), ("+U", 2, 2, "c"), ("-D", 1, 1, "a")]
    assert changes(t.read_changes(1)) == [("+I", 1, 1, "a"), ("+I", 2, 2, "c"), ("-D", 1, None, None),
                                          ("+I", 2, 2, "c"), ("-D", 9, None, None)]


def test_columns_and_bad_ranges(catalog):
    t = make(catalog, "t", "input")
    history(t)
    assert t.read_changes(0, 1, columns=["v"]).column_names == ["v", "_row_kind"]
    with pytest.raises(InvalidInput):
        t.read_changes(3, 1)
    with pytest.raises(InvalidInput):
        t.read_changes(columns=["nope"])
    with pytest.raises(InvalidInput):
        t.stream("sideways")


def batches(it) -> list[list[tuple]]:
    return [changes(pa.Table.from_batches([b])) for b in it]


def test_stream_modes(catalog):
    t = make(catalog, "t", "input")
    history(t)
    full = batches(t.stream("latest-full", idle_timeout=0))
    assert full == [[("+I", 1, 1, "3")]]
    assert batches(t.stream("latest", idle_timeout=0)) == []
    assert batches(t.stream("from-snapshot", snapshot_id=3, idle_timeout=0)) == [
        [("-D", 2, None, None)], changes(t.read_changes(3, 4))]
    got = batches(t.stream("from-snapshot-full", snapshot_id=2, idle_timeout=0))
    assert [sorted(got[0])] + got[1:] == [
        [("+I", 1, 1, "2"), ("+I", 2, 1, "x")], [("-D", 2, None, None)], changes(t.read_changes(3, 4))]
    ts = t.snapshot(3).time_millis
    assert batches(t.stream("from-timestamp", timestamp_millis=ts, idle_timeout=0))[0] == [("-D", 2, None, None)]
    t.create_tag("one", 1)
    assert batches(t.stream("incremental", start="one", end=3)) == [
        [("+I", 1, 1, "2")], [("-D", 2, None, None)]]
    stream = t.stream("latest-full", idle_timeout=0)
    first = next(stream)
    assert first.schema.metadata[b"lakemerge.snapshot_id"] == b"4"


def test_default_mode_follows_the_start_arguments_as_paimon(catalog):
    """Paimon's CoreOptions.startupMode: scan.mode default means from-timestamp with a timestamp, from-snapshot
    with a snapshot id, incremental with a range, else latest-full; 'full' is latest-full."""
    t = make(catalog, "t", "input")
    for i in range(4):
        t.write(rows((i, i, str(i))))
    assert batches(t.stream(snapshot_id=3, idle_timeout=0)) == [[("+I", 2, 2, "2")], [("+I", 3, 3, "3")]]
    assert batches(t.stream(timestamp_millis=t.snapshot(4).time_millis, idle_timeout=0)) == [[("+I", 3, 3, "3")]]
    assert batches(t.stream(start=2, end=3)) == [[("+I", 2, 2, "2")]]
    full = [[("+I", i, i, str(i)) for i in range(4)]]
    for mode in ("default", "full", None):
        assert [sorted(b) for b in batches(t.stream(mode, idle_timeout=0))] == full


def test_from_snapshot_full_of_an_expired_snapshot_reads_the_earliest(catalog):
    t = make(catalog, "t", "input", **{"snapshot.num-retained.min": "2", "snapshot.num-retained.max": "2",
                                       "num-sorted-run.compaction-trigger": "100"})
    for i in range(5):
        t.write(rows((i, i, str(i))))
    assert t.snapshot_manager.ids() == [4, 5]
    got = batches(t.stream("from-snapshot-full", snapshot_id=1, idle_timeout=0))
    assert [sorted(got[0])] + got[1:] == [[("+I", i, i, str(i)) for i in range(4)], [("+I", 4, 4, "4")]]
    with pytest.raises(SnapshotNotFound):  # a snapshot not yet committed is still an error
        t.stream("from-snapshot-full", snapshot_id=9, idle_timeout=0)


@pytest.mark.parametrize("mode", ["latest-full", "latest", "compacted-full", "from-timestamp", "from-snapshot",
                                  "from-snapshot-full"])
def test_stream_started_on_an_empty_table_delivers_every_later_commit(catalog, mode):
    """A pipeline started before the table's first commit: every mode waits for it, then delivers everything once.
    from-snapshot-full too: Paimon's ContinuousFromSnapshotFullStartingScanner finds no snapshot and is asked again
    at the next poll, then reads the earliest snapshot from the id on in full (here snapshot 1, then changes)."""
    t = make(catalog, f"t_{mode.replace('-', '_')}", "lookup")
    s = t.stream(mode, snapshot_id=1, timestamp_millis=0, consumer_id="job", idle_timeout=0)
    assert t.consumers() == ({} if mode == "from-snapshot-full" else {"job": 1})
    t.write(rows((1, 1, "a"), (2, 2, "b")))
    t.write(rows((1, 1, "c")))
    t.delete(pa.table({"k": [2]}))
    got = batches(s)
    assert got[0] == [("+I", 1, 1, "a"), ("+I", 2, 2, "b")]  # snapshot 1 as changelog, or in full
    assert [r for b in got[1:] for r in b] == [("-U", 1, 1, "a"), ("+U", 1, 1, "c"), ("-D", 2, 2, "b")]
    assert t.consumers() == {"job": t.latest_snapshot_id() + 1}


def test_incremental_checks_its_range_before_the_first_batch(catalog):
    t = make(catalog, "t", "input", **{"snapshot.num-retained.min": "2", "snapshot.num-retained.max": "2",
                                       "num-sorted-run.compaction-trigger": "100"})
    assert list(t.stream("incremental", start=0, end=3)) == []  # no snapshots yet
    for i in range(5):
        t.write(rows((i, i, str(i))))
    assert t.snapshot_manager.ids() == [4, 5]
    with pytest.raises(SnapshotNotFound) as e:  # raised by stream() itself, before snapshot 5's batch
        t.stream("incremental", start=4, end=7)
    assert e.value.snapshot_id == 7
    with pytest.raises(SnapshotNotFound) as e:
        t.stream("incremental", start=2, end=5)
    assert e.value.snapshot_id == 3
    assert batches(t.stream("incremental", start=3, end=5)) == [[("+I", 3, 3, "3")], [("+I", 4, 4, "4")]]
    assert list(t.stream("incremental", start=1, end=1)) == []


@pytest.mark.parametrize("producer", ["none", "input", "lookup"])
def test_incremental_between_two_tags_is_the_difference_of_their_states(catalog, producer):
    """Paimon's default for incremental-between with two tags is IncrementalDiffStartingScanner.betweenTags: the
    tagged states compared key by key (deletes kept, as its audit log reads them), which needs none of the
    snapshots in between."""
    t = make(catalog, "t", producer, **{"snapshot.num-retained.min": "1", "snapshot.num-retained.max": "1"})
    t.write(rows((1, 1, "a"), (2, 2, "b"), (3, 3, "c"), (5, 5, "e")))
    t.create_tag("t1")
    t.write(rows((1, 1, "a2")))
    t.delete(pa.table({"k": [2]}))
    t.write(rows((4, 4, "d"), (3, 3, "c")))  # key 3 re-sent unchanged
    t.write(rows((1, 1, "a3")))
    t.compact(full=True)
    t.create_tag("t2")
    t.delete(pa.table({"k": [5]}))  # a delete still pending in t3's state
    t.create_tag("t3")
    assert t.snapshot_manager.ids() == [t.latest_snapshot_id()]  # every snapshot in between expired
    got = list(t.stream("incremental", start="t1", end="t2"))
    assert [b.schema.metadata[b"lakemerge.snapshot_id"] for b in got] == [str(t.tags()["t2"].id).encode()]
    assert batches(got) == [[("+I", 1, 1, "a3"), ("-D", 2, 2, "b"), ("+I", 4, 4, "d")]]
    assert batches(t.stream("incremental", start="t2", end="t3")) == [[("-D", 5, None, None)]]
    assert batches(t.stream("incremental", start="t2", end="t2")) == []
    with pytest.raises(InvalidInput, match="after end tag"):
        t.stream("incremental", start="t2", end="t1")


def test_incremental_between_tags_to_snapshot_reads_the_changes(catalog):
    t = make(catalog, "t", "input", **{"incremental-between-tag-to-snapshot": "true"})
    t.write(rows((1, 1, "a")))
    t.create_tag("t1")
    t.write(rows((1, 1, "b")))
    t.write(rows((1, 1, "c")))
    t.create_tag("t2")
    assert batches(t.stream("incremental", start="t1", end="t2")) == [[("+I", 1, 1, "b")], [("+I", 1, 1, "c")]]


def test_stream_refuses_to_wait_past_a_missing_snapshot(catalog):
    """Paimon's NextSnapshotFetcher raises 'The next expected snapshot is too big' when the next snapshot is beyond
    the latest + 1: a start id past it, or a rollback below a running stream, whose re-committed snapshots it would
    otherwise skip."""
    t = make(catalog, "t", "input")
    for i in range(3):
        t.write(rows((i, i, str(i))))
    with pytest.raises(SnapshotNotFound):
        t.stream("from-snapshot", snapshot_id=9, idle_timeout=0)
    assert batches(t.stream("from-snapshot", snapshot_id=4, idle_timeout=0)) == []  # the next one: waits
    s = t.stream("latest", consumer_id="job", idle_timeout=0)
    assert list(s) == [] and t.consumers() == {"job": 4}
    running = t.stream("latest", idle_timeout=0)  # waiting for snapshot 4
    t.rollback_to(1)
    t.write(rows((7, 7, "7")))  # snapshot 2 again, unseen by the streams
    with pytest.raises(SnapshotNotFound) as e:
        list(running)
    assert e.value.snapshot_id == 3
    with pytest.raises(SnapshotNotFound):  # the consumer's saved progress too
        t.stream("latest", consumer_id="job", idle_timeout=0)


def test_running_stream_detects_a_rollback_whose_ids_were_committed_again(catalog):
    """A stream past snapshot 3 when the table is rolled back to 1 and written up to 5 again must not skip the new
    snapshots 2 and 3: snapshot 3 has another commit time than the one the stream read (engine.changelog.position,
    the rule Spark's readStream applies)."""
    t = make(catalog, "t", "input")
    for i in range(3):
        t.write(rows((i, i, str(i))))
    running = t.stream("latest-full", idle_timeout=0)
    assert next(running).num_rows == 3  # snapshot 3 in full; the stream waits for 4
    t.rollback_to(1)
    for i in range(4):  # snapshots 2..5 anew
        t.write(rows((10 + i, i, "new")))
    with pytest.raises(SnapshotNotFound, match="replaced by another commit") as e:
        next(running)
    assert e.value.snapshot_id == 3


def test_consumer_resumed_after_a_rollback_that_committed_its_ids_again_fails(catalog):
    """The consumer file keeps the commit time of the snapshot before nextSnapshot, so a restarted stream checks
    it too; Paimon's readers ignore the extra field."""
    import json
    t = make(catalog, "t", "input")
    for i in range(3):
        t.write(rows((i, i, str(i))))
    assert len(batches(t.stream("from-snapshot", snapshot_id=1, consumer_id="job", idle_timeout=0))) == 3
    assert t.consumers() == {"job": 4}
    from engine.changelog.consumers import ConsumerManager
    raw = json.loads(t.file_io.read_bytes(ConsumerManager(t).path("job")))
    assert raw == {"nextSnapshot": 4, "lakemerge.previousSnapshotTime": t.snapshot(3).time_millis}
    t.write(rows((5, 5, "5")))  # resuming without a rollback reads snapshot 4
    assert batches(t.stream("latest", consumer_id="job", idle_timeout=0)) == [[("+I", 5, 5, "5")]]
    t.rollback_to(2)
    for i in range(4):  # snapshots 3..6 anew
        t.write(rows((10 + i, i, "new")))
    with pytest.raises(SnapshotNotFound, match="replaced by another commit") as e:
        t.stream("latest", consumer_id="job", idle_timeout=0)
    assert e.value.snapshot_id == 4
    t.reset_consumer("job", 3)  # a reset consumer (no commit time recorded) starts where told
    assert [b[0][1] for b in batches(t.stream("latest", consumer_id="job", idle_timeout=0))] == [10, 11, 12, 13]


def test_non_integer_timestamp_millis_is_an_invalid_option(catalog):
    """Paimon's scan.timestamp-millis is a long: a stream argument or table option that is not one raises
    InvalidOption naming it (Paimon's SchemaValidation parses the table option at create/alter)."""
    t = make(catalog, "t", "input")
    t.write(rows((1, 1, "1")))
    for bad in ("abc", "2024-01-01", 1.5, True):
        with pytest.raises(InvalidOption, match="scan.timestamp-millis"):
            t.stream("from-timestamp", timestamp_millis=bad, idle_timeout=0)
    assert batches(t.stream(timestamp_millis=str(t.snapshot(1).time_millis), idle_timeout=0)) == \
        [[("+I", 1, 1, "1")]]
    with pytest.raises(InvalidOption, match="scan.timestamp-millis"):
        make(catalog, "bad", "input", **{"scan.timestamp-millis": "yesterday"})
    assert not catalog.table_exists("db.bad")
    assert make(catalog, "good", "input", **{"scan.timestamp-millis": "1700000000000"}) is not None


def test_stream_from_a_tag_whose_snapshot_expired(catalog):
    """A tag keeps its snapshot (the tag file) and data files after expiry: from-snapshot-full at the tag reads that
    state in full, then the changes after it. Changes the start needs that expired raise SnapshotNotFound instead of
    starting at the earliest snapshot, which would skip some. A numeric id that expired starts at the earliest, as
    Paimon's ContinuousFromSnapshotStartingScanner does."""
    t = make(catalog, "t", "input", **{"snapshot.num-retained.min": "1", "snapshot.num-retained.max": "2"})
    t.write(rows((1, 1, "a")))
    t.write(rows((2, 2, "b")))
    t.create_tag("t2", 2)
    t.write(rows((3, 3, "c")))
    t.write(rows((4, 4, "d")))
    expire_after_latest(t)
    assert t.snapshot_manager.earliest_id() == 3
    assert batches(t.stream("from-snapshot-full", snapshot_id="t2", idle_timeout=0)) == [
        [("+I", 1, 1, "a"), ("+I", 2, 2, "b")], [("+I", 3, 3, "c")], [("+I", 4, 4, "d")]]
    with pytest.raises(SnapshotNotFound, match="tag 't2'") as e:  # snapshot 2's own changes are gone
        t.stream("from-snapshot", snapshot_id="t2", idle_timeout=0)
    assert e.value.snapshot_id == 2
    assert batches(t.stream("from-snapshot", snapshot_id=1, idle_timeout=0)) == [[("+I", 3, 3, "c")],
                                                                                [("+I", 4, 4, "d")]]
    t.write(rows((5, 5, "e")))
    t.create_tag("t5")
    t.write(rows((6, 6, "f")))
    t.write(rows((7, 7, "g")))
    expire_after_latest(t)
    with pytest.raises(SnapshotNotFound, match="tag 't2'"):  # the changes after it are gone too
        t.stream("from-snapshot-full", snapshot_id="t2", idle_timeout=0)
    assert batches(t.stream("from-snapshot-full", snapshot_id="t5", idle_timeout=0))[1:] == [[("+I", 6, 6, "f")],
                                                                                          [("+I", 7, 7, "g")]]


def test_compacted_full_reads_latest_compact_snapshot(catalog):
    t = make(catalog, "t", "input")
    history(t)
    sid = t.compact(full=True)
    t.write(rows((9, 9, "9")))
    out = batches(t.stream("compacted-full", idle_timeout=0))
    assert out == [[("+I", 1, 1, "3")], [("+I", 9, 9, "9")]]
    assert t.snapshot(sid).commit_kind == "COMPACT"


def test_stream_blocks_until_a_new_snapshot(catalog):
    import threading
    t = make(catalog, "t", "input")
    t.write(rows((1, 1, "1")))
    stream = t.stream("latest", poll_interval=0.01, idle_timeout=30)
    threading.Timer(0.2, lambda: t.write(rows((2, 2, "2")))).start()
    assert changes(pa.Table.from_batches([next(stream)])) == [("+I", 2, 2, "2")]
    stream.close()


def test_consumer_resume_loses_and_repeats_nothing(catalog):
    t = make(catalog, "t", "input")
    for i in range(5):
        t.write(rows((i, i, str(i))))
    seen = []
    s = t.stream("from-snapshot", snapshot_id=1, consumer_id="job", idle_timeout=0)
    seen.append(next(s))
    seen.append(next(s))
    s.close()  # "crash" after two batches were handed over
    assert t.consumers() == {"job": 3}
    for i in range(5, 7):
        t.write(rows((i, i, str(i))))
    seen += list(t.stream("from-snapshot", snapshot_id=1, consumer_id="job", idle_timeout=0))
    got = [r["k"] for b in seen for r in b.to_pylist()]
    assert got == list(range(7))
    nxt = t.latest_snapshot_id() + 1
    assert t.consumers() == {"job": nxt}
    assert catalog.get_table("db.t$consumers").read().to_pylist() == [{"consumer_id": "job", "next_snapshot_id": nxt}]


@pytest.mark.parametrize("mode", ["latest-full", "from-snapshot-full", "compacted-full"])
def test_consumer_stopped_during_the_full_read_reads_it_again(catalog, mode):
    """A full first read counts as consumed only once handed over: a stream stopped before (a crash mid-read) must
    not resume with the changes after it, which would lose the rows of the full read."""
    t = make(catalog, "t", "input")
    for i in range(3):
        t.write(rows((i, i, str(i))))
    t.stream(mode, snapshot_id=3 if mode == "from-snapshot-full" else None, consumer_id="job", idle_timeout=0)
    assert t.consumers() == {}  # the full read was never handed over
    again = batches(t.stream(mode, snapshot_id=3 if mode == "from-snapshot-full" else None, consumer_id="job",
                             idle_timeout=0))
    assert [sorted(b) for b in again] == [[("+I", 0, 0, "0"), ("+I", 1, 1, "1"), ("+I", 2, 2, "2")]]
    assert t.consumers() == {"job": 4}


def test_expiration_keeps_what_a_consumer_needs(catalog):
    t = make(catalog, "t", "input", **{"snapshot.num-retained.min": "1", "snapshot.num-retained.max": "2",
                                       "num-sorted-run.compaction-trigger": "100",
                                       "snapshot.time-retained": "0 ms"})
    t.write(rows((0, 0, "0")))
    s = t.stream("from-snapshot", snapshot_id=1, consumer_id="slow", idle_timeout=0)
    next(s)
    s.close()
    for i in range(1, 6):
        t.write(rows((i, i, str(i))))
    assert t.snapshot_manager.earliest_id() == 2  # consumer's next snapshot
    assert [r["k"] for b in t.stream("latest", consumer_id="slow", idle_timeout=0) for r in b.to_pylist()] == \
        [1, 2, 3, 4, 5]
    t.write(rows((6, 6, "6")))
    # The commit's own expiry may run in snapshot 7's millisecond, when snapshot 7 is not yet older than
    # time-retained (0 ms) and Paimon keeps snapshot 6; expire once more a millisecond later to make it deterministic.
    from engine.maintenance.expire import expire_snapshots
    expire_snapshots(t, now_millis=t.snapshot_manager.latest().time_millis + 1)
    assert t.snapshot_manager.earliest_id() == 7  # the consumer moved on: retain-min (1) applies again
    t.reset_consumer("slow")
    assert t.consumers() == {}
    t.reset_consumer("late", 1)  # a consumer pointing at an expired snapshot cannot resume
    with pytest.raises(SnapshotNotFound):
        list(t.stream("latest", consumer_id="late", idle_timeout=0))


def test_consumer_expiration_time_frees_the_snapshots_of_abandoned_consumers(catalog, monkeypatch):
    """Paimon's commit maintenance (TableCommitImpl) first deletes consumer files not modified within
    consumer.expiration-time, then expires snapshots; without it an abandoned consumer pins every snapshot."""
    import os
    import time
    t = make(catalog, "t", "input", **{"snapshot.num-retained.min": "1", "snapshot.num-retained.max": "2",
                                       "num-sorted-run.compaction-trigger": "100", "consumer.expiration-time": "1 h"})
    t.write(rows((0, 0, "0")))
    t.reset_consumer("gone", 1)
    t.reset_consumer("live", 1)
    t.write(rows((1, 1, "1")))
    t.write(rows((2, 2, "2")))
    assert t.snapshot_manager.earliest_id() == 1  # both consumers still need snapshot 1
    old = time.time() - 2 * 3600
    os.utime(os.path.join(t.root, "consumer", "consumer-gone"), (old, old))
    t.write(rows((3, 3, "3")))
    assert t.consumers() == {"live": 1}
    assert t.snapshot_manager.earliest_id() == 1  # the live one still holds it
    t.reset_consumer("live", 4)
    t.write(rows((4, 4, "4")))
    assert t.consumers() == {"live": 4} and t.snapshot_manager.ids() == [4, 5]
    # a running stream that has caught up keeps its consumer file fresh
    import engine.changelog.streaming as streaming
    monkeypatch.setattr(streaming, "CONSUMER_REFRESH_SECONDS", 0.0)
    live = os.path.join(t.root, "consumer", "consumer-live")
    assert len(list(t.stream("latest", consumer_id="live", idle_timeout=0))) == 2  # snapshots 4 and 5
    idle = t.stream("latest", consumer_id="live", idle_timeout=0.05, poll_interval=0.01)
    os.utime(live, (old, old))  # after stream() recorded the start
    assert list(idle) == []
    assert os.stat(live).st_mtime > old + 3600 and t.consumers() == {"live": 6}


def test_changelog_files_expire_with_their_snapshots(catalog):
    import os
    t = make(catalog, "t", "input", **{"snapshot.num-retained.min": "1", "snapshot.num-retained.max": "1",
                                       "num-sorted-run.compaction-trigger": "100",
                                       "snapshot.time-retained": "0 ms"})
    for i in range(4):
        t.write(rows((i, i, str(i))))
    bucket = os.path.join(t.root, "bucket-0")
    logs = [f for f in os.listdir(bucket) if f.startswith("changelog-")]
    assert len(logs) == 1  # only the retained snapshot's changelog file
    assert changes(t.read_changes(3, 4)) == [("+I", 3, 3, "3")]


def test_producer_validation(catalog):
    with pytest.raises(InvalidOption, match="first-row"):
        catalog.create_table("db.f", SCHEMA, ["k"], options={"bucket": "1", "merge-engine": "first-row",
                                                            "changelog-producer": "input"})
    with pytest.raises(InvalidOption, match="full-compaction.delta-commits"):
        catalog.create_table("db.g", SCHEMA, ["k"], options={"bucket": "1", "changelog-producer": "lookup",
                                                            "full-compaction.delta-commits": "2"})
    assert not catalog.table_exists("db.f") and not catalog.table_exists("db.g")


def test_audit_log_system_table(catalog):
    t = make(catalog, "t", "none")
    history(t)
    audit = catalog.get_table("db.t$audit_log")
    assert audit.arrow_schema.names == ["rowkind", "k", "a", "v"]
    # Paimon's batch audit_log keeps deletes: keys whose newest record is a delete show as -D until a full
    # compaction drops them (AuditLogTable's read is forceKeepDelete)
    assert sorted(audit.read().to_pylist(), key=lambda r: r["k"]) == [
        {"rowkind": "+U", "k": 1, "a": 1, "v": "3"}, {"rowkind": "-D", "k": 2, "a": None, "v": None},
        {"rowkind": "-D", "k": 3, "a": None, "v": None}]
    assert sorted(audit.read(snapshot_id=1).to_pylist(), key=lambda r: r["k"]) == [
        {"rowkind": "+I", "k": 1, "a": 1, "v": "1"}, {"rowkind": "+I", "k": 2, "a": 1, "v": "x"}]
    assert audit.read(filter=("rowkind", "=", "+U"), columns=["k"]).to_pylist() == [{"k": 1}]
    assert t.read().to_pylist() == [{"k": 1, "a": 1, "v": "3"}]  # plain reads drop them
    t.compact(full=True)
    assert audit.read().to_pylist() == [{"rowkind": "+U", "k": 1, "a": 1, "v": "3"}]


def test_audit_log_at_an_older_snapshot_reads_through_its_schema(catalog):
    """As time travel (Table.read(snapshot_id)): Paimon's AuditLogTable wraps the time-travelled table, so
    $audit_log at a snapshot committed under an older schema has that schema's columns (old names, no column added
    since)."""
    t = make(catalog, "t", "none")
    t.write(rows((1, 1, "a")))
    t.alter().rename_column("v", "w").add_column("z", pa.int32()).commit()
    t.write(pa.table({"k": [2], "a": [2], "w": ["b"], "z": pa.array([7], pa.int32())}))
    audit = catalog.get_table("db.t$audit_log")
    old = audit.read(snapshot_id=1)
    assert old.schema.names == ["rowkind"] + t.read(snapshot_id=1).schema.names == ["rowkind", "k", "a", "v"]
    assert audit.arrow_schema_at(1) == old.schema
    assert old.to_pylist() == [{"rowkind": "+I", "k": 1, "a": 1, "v": "a"}]
    assert audit.read(snapshot_id=1, columns=["v"], filter=("v", "=", "a")).to_pylist() == [{"v": "a"}]
    assert audit.read().schema.names == ["rowkind", "k", "a", "w", "z"] == audit.arrow_schema_at().names
    assert sorted(audit.read().to_pylist(), key=lambda r: r["k"]) == [
        {"rowkind": "+I", "k": 1, "a": 1, "w": "a", "z": None}, {"rowkind": "+I", "k": 2, "a": 2, "w": "b", "z": 7}]


def test_audit_log_of_an_append_table(catalog):
    t = catalog.create_table("db.app", SCHEMA)  # no primary key
    first = t.write(rows((1, 1, "a"), (1, 1, "a")))
    t.write(rows((2, 2, "b")))
    audit = catalog.get_table("db.app$audit_log")
    assert audit.read().to_pylist() == [{"rowkind": "+I", "k": 1, "a": 1, "v": "a"},
                                        {"rowkind": "+I", "k": 1, "a": 1, "v": "a"},
                                        {"rowkind": "+I", "k": 2, "a": 2, "v": "b"}]
    assert audit.read(snapshot_id=first, columns=["rowkind", "v"]).to_pylist() == [{"rowkind": "+I", "v": "a"}] * 2


def test_decoupled_changelog_outlives_snapshots(catalog):
    import os
    t = make(catalog, "t", "input", **{"snapshot.num-retained.min": "1", "snapshot.num-retained.max": "1",
                                       "snapshot.time-retained": "0 ms", "num-sorted-run.compaction-trigger": "100",
                                       "changelog.num-retained.min": "3", "changelog.num-retained.max": "3",
                                       "changelog.time-retained": "0 ms"})
    for i in range(5):
        t.write(rows((i, i, str(i))))
    assert t.snapshot_manager.ids() == [5]
    assert sorted(os.listdir(os.path.join(t.root, "changelog"))) == ["changelog-3", "changelog-4"]
    assert [r["k"] for r in t.read_changes(2, 5).to_pylist()] == [2, 3, 4]
    with pytest.raises(SnapshotNotFound):
        t.read_changes(0, 5)
    assert [r["k"] for b in t.stream("from-snapshot", snapshot_id=1, idle_timeout=0) for r in b.to_pylist()] == \
        [2, 3, 4]
    bucket = os.path.join(t.root, "bucket-0")
    assert len([f for f in os.listdir(bucket) if f.startswith("changelog-")]) == 3
    assert t.remove_orphan_files(older_than=0, dry_run=True) == []
    assert t.read().num_rows == 5


def test_from_timestamp_starts_in_the_decoupled_changelog(catalog):
    """Paimon's ContinuousFromTimestampStartingScanner looks the time up among the decoupled changelogs too: a
    timestamp older than the earliest snapshot starts at the first changelog committed at or after it."""
    import time

    from engine.changelog import retention
    t = make(catalog, "t", "input", **{"snapshot.num-retained.min": "1", "snapshot.num-retained.max": "1",
                                       "snapshot.time-retained": "0 ms", "num-sorted-run.compaction-trigger": "100",
                                       "changelog.num-retained.min": "10", "changelog.num-retained.max": "10",
                                       "changelog.time-retained": "1 h"})
    for i in range(5):
        t.write(rows((i, i, str(i))))
        time.sleep(0.002)  # distinct commit times
    assert t.snapshot_manager.ids() == [5] and retention.ids(t) == [1, 2, 3, 4]

    def keys(ts):
        return [r["k"] for b in t.stream("from-timestamp", timestamp_millis=ts, idle_timeout=0) for r in b.to_pylist()]
    assert keys(retention.read(t, 3).time_millis) == [2, 3, 4]
    assert keys(retention.read(t, 3).time_millis - 1) == [2, 3, 4]
    assert keys(0) == [0, 1, 2, 3, 4]
    assert keys(t.snapshot(5).time_millis) == [4]
    assert keys(t.snapshot(5).time_millis + 1) == []


def test_expired_decoupled_changelog_keeps_the_files_of_a_tag(catalog):
    """Snapshot expiration keeps a tagged snapshot's changelog files; expiring its decoupled changelog later must
    too (check() found the tag's changelog manifest list missing), until the tag goes."""
    import os
    import time
    t = make(catalog, "t", "input", **{"snapshot.num-retained.min": "1", "snapshot.num-retained.max": "1",
                                       "snapshot.time-retained": "0 ms", "num-sorted-run.compaction-trigger": "100",
                                       "changelog.num-retained.min": "2", "changelog.num-retained.max": "2",
                                       "changelog.time-retained": "0 ms"})
    t.write(rows((0, 0, "0")))
    t.create_tag("one")
    for i in range(1, 6):
        t.write(rows((i, i, str(i))))
    time.sleep(0.002)
    t.expire_snapshots()
    assert t.snapshot_manager.ids() == [6] and os.listdir(os.path.join(t.root, "changelog")) == ["changelog-5"]
    report = t.check()
    assert report.ok, report.problems
    assert t.remove_orphan_files(older_than=0, dry_run=True) == []
    bucket = os.path.join(t.root, "bucket-0")
    assert len([f for f in os.listdir(bucket) if f.startswith("changelog-")]) == 3  # the tag's, changelog 5's, 6's
    t.delete_tag("one")
    assert len([f for f in os.listdir(bucket) if f.startswith("changelog-")]) == 2
    assert t.check().ok and t.remove_orphan_files(older_than=0, dry_run=True) == []


@pytest.mark.parametrize("producer", ["input", "lookup"])
def test_decoupled_changelog_has_no_gaps_for_snapshots_without_changelog(catalog, producer):
    """Expiration writes changelog-<id> for every expired snapshot (as Paimon does), with or without changelog
    files, so changes over the expired range stay readable."""
    import os
    t = make(catalog, "t", producer, **{"snapshot.num-retained.min": "1", "snapshot.num-retained.max": "1",
                                        "snapshot.time-retained": "1 ms", "write-only": "true",
                                        "changelog.num-retained.max": "100", "changelog.time-retained": "1 d"})
    t.write(rows((1, 1, "a"), (2, 1, "b")))
    t.write(rows((2, 2, "c"), (3, 3, "d")))
    t.compact(full=True)
    t.write(rows((4, 4, "e")))
    t.write(rows((5, 5, "f")))
    before = changes(t.read_changes(0))
    assert before
    t.expire_snapshots()
    assert t.snapshot_manager.ids() == [5]
    assert sorted(os.listdir(os.path.join(t.root, "changelog"))) == [f"changelog-{i}" for i in range(1, 5)]
    assert changes(t.read_changes(0)) == before
    assert sorted(changes(pa.concat_tables(
        [pa.Table.from_batches([b]) for b in t.stream("from-snapshot", snapshot_id=0, idle_timeout=0,
                                                      poll_interval=0)]))) == sorted(before)
    assert t.check().ok and t.remove_orphan_files(older_than=0, dry_run=True) == []


@pytest.mark.parametrize("producer,extra", [
    ("lookup", {}), ("lookup", {"changelog-producer.row-deduplicate": "true"}),
    ("full-compaction", {"full-compaction.delta-commits": "3", "changelog-producer.row-deduplicate": "true"}),
    ("input", {}),
])
def test_weeks_of_cdc_with_a_restarting_consumer_expiry_and_tags(catalog, producer, extra):
    """A CDC pipeline over many commits: upserts (some unchanged), deletes, full compactions, daily tags, snapshot
    expiry with small retention, and a consumer that stops after a few batches and restarts. Folding what it read
    gives the table at every restart, each retract carries the value last emitted for its key (lookup /
    full-compaction), and with row-deduplicate no -U/+U pair has equal values (Paimon's
    LookupChangelogMergeFunctionWrapper / FullChangelogMergeFunctionWrapper)."""
    import random
    rnd = random.Random(7)
    t = make(catalog, "t", producer, **{"snapshot.num-retained.min": "2", "snapshot.num-retained.max": "3",
                                        "snapshot.time-retained": "0 ms", **extra})
    t.reset_consumer("cdc", 1)  # the pipeline is set up before the first commit: expiry keeps what it needs
    state: dict[int, tuple] = {}
    retracts = producer != "input"  # input forwards the writer's rows: a delete of an absent key is forwarded too
    read: list[tuple] = []
    stream_checks = 0
    for day in range(12):
        for _ in range(rnd.randint(1, 3)):
            keys = rnd.sample(range(12), 4)
            upserts = [(k, rnd.randint(0, 2), "v") for k in keys[:3]]
            t.write(rows(*upserts))
            t.delete(pa.table({"k": [keys[3]]}))
        if day % 3 == 2:
            t.compact(full=True)
        if day % 4 == 0:
            t.create_tag(f"day{day}")
        s = t.stream("from-snapshot", snapshot_id=1, consumer_id="cdc", idle_timeout=0)
        for n, b in enumerate(s):
            read.append(b)
            if n == rnd.randint(0, 3):
                s.close()  # the job stops midway; the next day it resumes from the consumer
                break
        for b in t.stream("from-snapshot", snapshot_id=1, consumer_id="cdc", idle_timeout=0):
            read.append(b)
        for b in read[stream_checks:]:
            out = b.to_pylist()
            for i, r in enumerate(out):
                k, value = r["k"], (r["a"], r["v"])
                if r["_row_kind"] in ("+I", "+U"):
                    if retracts and r["_row_kind"] == "+U" and "changelog-producer.row-deduplicate" in extra:
                        prev = out[i - 1]
                        assert not (prev["_row_kind"] == "-U" and (prev["a"], prev["v"]) == value), r
                    state[k] = value
                else:
                    old = state.pop(k, None)
                    if retracts:
                        assert old == value, (day, r, old)
        stream_checks = len(read)
        expected = {r["k"]: (r["a"], r["v"]) for r in t.read().to_pylist()}
        assert t.consumers() == {"cdc": t.latest_snapshot_id() + 1}
        expire_after_latest(t)
        assert t.snapshot_manager.earliest_id() >= t.latest_snapshot_id() - 2  # the consumer holds nothing back
        if producer == "full-compaction" and day % 3 != 2:
            continue  # only a full compaction (every third day) brings the changelog up to the table
        assert state == expected, day
