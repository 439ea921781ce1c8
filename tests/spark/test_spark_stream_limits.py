"""Paimon's Spark rate limits on lakemerge streams (read.stream.maxFilesPerTrigger / maxBytesPerTrigger /
maxRowsPerTrigger / minRowsPerTrigger + maxTriggerDelayMs; Paimon's PaimonMicroBatchStream, PaimonReadLimits):
batches cut inside snapshots, checkpoints restarted mid-snapshot, the full first snapshot and changes of
primary-key, changelog and append tables. The driver-side tests call the stream reader directly (no Spark job)."""
from __future__ import annotations

import json
import os

import pyarrow as pa
import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable

import spark_glue
from engine import Catalog
from engine.changelog.files import ROW_KIND_COLUMN
from engine.changelog.streaming import full_read_split
from engine.errors import InvalidOption, SnapshotNotFound
from engine.schema_change import SetOption
from spark_glue.stream_read import ChangeStreamReader, FullSplit, OrderedParts, SnapshotChanges, _full_append_split
from spark_glue.tables import open_table, spark_schema
from tests.spark.stream_sink import run_available_now, run_batches, sink_rows

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([pa.field("p", pa.string(), False), pa.field("k", pa.int64(), False), ("v", pa.string())])
CHANGES = {"scan.mode": "latest-full", "read.changelog": "true"}


def _data(rows):
    return pa.table({"p": [r[0] for r in rows], "k": [r[1] for r in rows], "v": [r[2] for r in rows]}, schema=SCHEMA)


def _table(tmp_path, pk=True, bucket="2", **options):
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db", ignore_if_exists=True)
    return cat.create_table("db.t", SCHEMA, ["p", "k"] if pk else None, ["p"], {"bucket": bucket, **options})


def _rows(rows):
    return sorted((r.get(ROW_KIND_COLUMN, "+I"), r["p"], r["k"], r["v"]) for r in rows)


def _reference(spark, t, tmp_path, name, checkpoint=None, **options):
    """Every row the unlimited stream delivers (one AvailableNow run into a Parquet sink)."""
    out = str(tmp_path / f"ref-{name}")
    run_available_now(spark, t.root, out, checkpoint or str(tmp_path / f"ref-ck-{name}"), **options)
    return _rows(sink_rows(out))


def _split_rows(t, snapshot_id):
    """The rows of each split of a full read of the snapshot, by partition value then bucket (the stream order
    for a table partitioned by one string column)."""
    table = t.through_schema(t.schema.id)
    splits = sorted(table.scan().plan(table.snapshot(snapshot_id)), key=lambda s: (s.partition_values, s.bucket))
    read = _full_append_split if table.schema.is_append_only else full_read_split
    return [_rows(read(table, s, ["p", "k", "v"]).to_pylist()) for s in splits]


def _reader(t, **options):
    schema = t.arrow_schema
    if options.get("read.changelog") == "true":
        schema = schema.append(pa.field(ROW_KIND_COLUMN, pa.string()))
    return ChangeStreamReader({"path": t.root, **{k.lower(): str(v) for k, v in options.items()}},
                              spark_schema(schema))


def _offsets(reader, start=None, limit=None):
    """The end offsets of every batch the reader would plan from ``start`` (its initial offset)."""
    start = reader.initialOffset() if start is None else start
    ends = []
    while True:
        end = reader.latestOffset(start, reader.getDefaultReadLimit() if limit is None else limit)
        if end == start:
            return ends
        ends.append(end)
        start = end


def _logged_offset(checkpoint, batch_id):
    with open(os.path.join(checkpoint, "offsets", str(batch_id))) as f:
        return json.loads(f.read().splitlines()[-1])


def test_max_files_splits_the_full_snapshot_then_the_changes(spark, tmp_path):
    """maxFilesPerTrigger=2 on a primary-key table with a changelog (latest-full, AvailableNow): the full first
    snapshot's splits two per batch in partition/bucket order, then a later snapshot's changes cut inside it; every
    row of the unlimited stream once, and the offset inside a snapshot is Paimon's (snapshot id, index)."""
    t = _table(tmp_path, **{"changelog-producer": "input"})
    t.write(_data([(p, k, "x") for p in "abc" for k in range(6)]))
    t.write(_data([(p, k, "y") for p in "ab" for k in range(3)]))
    per_split = _split_rows(t, 2)
    assert len(per_split) == 6  # 3 partitions x 2 buckets
    ck = str(tmp_path / "ck")
    opts = {**CHANGES, "read.stream.maxFilesPerTrigger": 2}
    batches = run_batches(spark, t.root, ck, **opts)
    assert [_rows(b) for b in batches] == [sorted(per_split[i] + per_split[i + 1]) for i in (0, 2, 4)]
    assert _logged_offset(ck, 0) == {"snapshot": 2, "time": t.snapshot(2).time_millis, "index": 1, "full": True}
    assert _logged_offset(ck, 2) == {"snapshot": 2, "time": t.snapshot(2).time_millis}
    ref_ck = str(tmp_path / "ref-ck")
    reference = _reference(spark, t, tmp_path, "full", ref_ck, **CHANGES)
    t.write(_data([(p, k, "z") for p in "ac" for k in range(6)]))  # changes in 4 buckets
    more = run_batches(spark, t.root, ck, **{**opts, "read.stream.maxFilesPerTrigger": 3})
    assert len(more) == 2  # 4 splits, 3 per batch
    assert _logged_offset(ck, 3)["index"] == 2 and _logged_offset(ck, 3)["snapshot"] == 3
    assert sorted(r for b in more for r in _rows(b)) == _rows(t.read_changes(2, 3).to_pylist())
    reference += _reference(spark, t, tmp_path, "changes", ref_ck, **CHANGES)  # the same query, continued
    assert sorted(r for b in batches + more for r in _rows(b)) == sorted(reference)


def test_max_rows_admits_splits_while_under_the_limit_and_max_bytes_one_split(spark, tmp_path):
    """As Paimon's PaimonReadLimitGuard: a split joins while the batch is under maxRowsPerTrigger before it (the
    batch may overshoot by its last split), at least one split per batch (maxBytesPerTrigger=1: one each), and
    with several limits the first reached ends the batch."""
    t = _table(tmp_path, bucket="1")
    t.write(_data([("a", k, "x") for k in range(3)] + [("b", 0, "x")] + [("c", k, "x") for k in range(2)]))
    a, b, c = _split_rows(t, 1)
    rows = run_batches(spark, t.root, str(tmp_path / "ck1"), **{"read.stream.maxRowsPerTrigger": 3})
    assert [_rows(x) for x in rows] == [a, sorted(b + c)]
    one = run_batches(spark, t.root, str(tmp_path / "ck2"), **{"read.stream.maxBytesPerTrigger": 1})
    assert [_rows(x) for x in one] == [a, b, c]
    both = run_batches(spark, t.root, str(tmp_path / "ck3"), **{"read.stream.maxFilesPerTrigger": 2,
                                                                "read.stream.maxRowsPerTrigger": 1})
    assert [_rows(x) for x in both] == [a, b, c]
    whole = run_batches(spark, t.root, str(tmp_path / "ck4"), **{"read.stream.maxRowsPerTrigger": 10})
    assert [_rows(x) for x in whole] == [sorted(a + b + c)]
    # Paimon's guard never puts the first batch off; AvailableNow here never does
    waits = run_batches(spark, t.root, str(tmp_path / "ck5"), **{"read.stream.minRowsPerTrigger": 100,
                                                                 "read.stream.maxTriggerDelayMs": 10**9})
    assert [_rows(x) for x in waits] == [sorted(a + b + c)]
    once = []  # Trigger.Once asks for ReadAllAvailable: the limits do not apply, as in Paimon
    q = (spark_glue.read_stream(spark, t.root, **{"read.stream.maxFilesPerTrigger": 1}).writeStream
         .foreachBatch(lambda df, i: once.append(_rows(r.asDict() for r in df.collect())))
         .option("checkpointLocation", str(tmp_path / "ck6")).trigger(once=True).start())
    q.awaitTermination(120)
    assert q.exception() is None and once == [sorted(a + b + c)]


def test_checkpoint_restart_inside_a_snapshot_replays_the_same_split_then_continues(spark, tmp_path):
    """A query failing in its second batch (one split each) has committed the first, inside the full snapshot;
    restarted from its checkpoint, Spark replays the logged second batch, which covers the same split, and the
    query continues after it: every row once, none lost."""
    t = _table(tmp_path, **{"changelog-producer": "input"})
    t.write(_data([(p, k, "x") for p in "abc" for k in range(6)]))
    ck = str(tmp_path / "ck")
    opts = {**CHANGES, "read.stream.maxFilesPerTrigger": 1}
    attempted = {}

    def fail_second(batch_id, rows):
        if batch_id == 1:
            attempted["rows"] = _rows(rows)
            raise RuntimeError("sink down")

    with pytest.raises(RuntimeError, match="sink down"):
        run_batches(spark, t.root, ck, on_batch=fail_second, **opts)
    assert _logged_offset(ck, 0)["index"] == 0 and _logged_offset(ck, 1)["index"] == 1
    every_row = _rows(t.read_changes(0, 1).to_pylist())  # snapshot 1 is the full snapshot
    per_split = _split_rows(t, 1)
    assert attempted["rows"] == per_split[1]
    rest = run_batches(spark, t.root, ck, **opts)
    assert [_rows(b) for b in rest] == per_split[1:]
    assert sorted(per_split[0] + [r for b in rest for r in _rows(b)]) == every_row


def test_append_table_full_and_delta_splits(spark, tmp_path):
    """An append table (bucket-unaware): the full first snapshot one split per batch, then an APPEND snapshot's
    changes one partition per batch; every row of the unlimited stream once."""
    t = _table(tmp_path, pk=False, bucket="-1")
    t.write(_data([(p, k, "x") for p in "abc" for k in range(4)]))
    ck = str(tmp_path / "ck")
    first = run_batches(spark, t.root, ck, **{"read.stream.maxFilesPerTrigger": 1})
    assert [_rows(b) for b in first] == _split_rows(t, 1)
    t.write(_data([(p, k, "y") for p in "bc" for k in range(10, 12)]))
    more = run_batches(spark, t.root, ck, **{"read.stream.maxFilesPerTrigger": 1})
    assert [_rows(b) for b in more] == [[("+I", p, k, "y") for k in (10, 11)] for p in "bc"]
    ref = _reference(spark, t, tmp_path, "ref", **{"scan.mode": "from-snapshot-full", "scan.snapshot-id": 1})
    assert sorted(r for b in first + more for r in _rows(b)) == ref


def test_changelog_stream_under_limits_delivers_the_unlimited_changes(spark, tmp_path):
    """A lookup-changelog table streamed from snapshot 1 with maxRowsPerTrigger: -U/+U/-D rows of several
    snapshots cut across batches, together exactly the unlimited stream's rows."""
    t = _table(tmp_path, **{"changelog-producer": "lookup"})
    t.write(_data([(p, k, "x") for p in "abc" for k in range(4)]))
    t.write(_data([(p, k, "y") for p in "ab" for k in range(2)]))
    t.delete(pa.table({"p": ["c", "a"], "k": [3, 3]}))
    opts = {"scan.mode": "from-snapshot", "scan.snapshot-id": 1, "read.changelog": "true"}
    batches = run_batches(spark, t.root, str(tmp_path / "ck"), **opts, **{"read.stream.maxRowsPerTrigger": 2})
    assert len(batches) > t.snapshot_manager.latest_id()  # snapshots were cut
    got = sorted(r for b in batches for r in _rows(b))
    assert got == _reference(spark, t, tmp_path, "ref", **opts)
    assert {r[0] for r in got} >= {"+I", "-U", "+U", "-D"}


# --- driver side: offsets, options, combinations ---------------------------------------------------------------
def _partitioned_history(tmp_path, **options):
    t = _table(tmp_path, **options)
    for i in range(3):  # snapshots 1..3, each changing 2 buckets of partition a and 2 of partition b
        t.write(_data([(p, k, str(i)) for p in "ab" for k in range(6)]))
    return t


def test_invalid_limits_are_refused_naming_the_option(tmp_path):
    """Only one of minRowsPerTrigger / maxTriggerDelayMs (Paimon's PaimonMicroBatchStream), and a value that is
    not a positive integer, raise InvalidOption naming the option as Paimon spells it."""
    t = _table(tmp_path)
    for opts, name in [({"read.stream.minRowsPerTrigger": 5}, "read.stream.minRowsPerTrigger"),
                       ({"READ.STREAM.MAXTRIGGERDELAYMS": 5}, "read.stream.maxTriggerDelayMs"),
                       ({"read.stream.maxFilesPerTrigger": 0}, "read.stream.maxFilesPerTrigger"),
                       ({"read.stream.maxRowsPerTrigger": -3}, "read.stream.maxRowsPerTrigger"),
                       ({"read.stream.maxBytesPerTrigger": "1mb"}, "read.stream.maxBytesPerTrigger")]:
        with pytest.raises(InvalidOption, match=name.replace(".", r"\.")):
            _reader(t, **opts)
    _reader(t, **{"read.stream.minRowsPerTrigger": 5, "read.stream.maxTriggerDelayMs": 1000})


def test_limits_combine_with_max_snapshots_and_read_all_available_ignores_them(tmp_path):
    """max-snapshots-per-trigger (lakemerge's own) bounds the snapshots a batch reaches into, maxFilesPerTrigger
    its splits: the first reached ends it. Spark's ReadAllAvailable (Trigger.Once) ignores the split limits."""
    t = _partitioned_history(tmp_path)
    start = {"snapshot": 0}
    r = _reader(t, **{"read.stream.max-snapshots-per-trigger": 2, "read.stream.maxFilesPerTrigger": 5})
    ends = _offsets(r, start)
    # 4 splits per snapshot: 1+2 (4 + 1 split, index 0 of 2), then the rest of 2 + 3 (3 + 2 splits), then 3's rest
    assert [(e["snapshot"], e.get("index")) for e in ends] == [(2, 0), (3, 1), (3, None)]
    assert _offsets(_reader(t, **{"read.stream.maxFilesPerTrigger": 5}), start, ReadAllAvailable()) == \
        [{"snapshot": 3, "time": t.snapshot(3).time_millis}]
    parts = r.parts(start, ends[0])
    assert [type(p) for p in parts] == [SnapshotChanges, SnapshotChanges]
    assert parts[0].buckets is None and len(parts[1].buckets) == 1  # snapshot 1 whole, one bucket of 2
    assert r.parts(ends[0], ends[1])[0].buckets == frozenset(
        k for sp in r._splits(t, 2, False)[1:] for k in [sp.key])


def test_whole_snapshot_offsets_of_earlier_versions_still_plan_the_same_batches(tmp_path):
    """A checkpoint written before rate limits existed holds whole-snapshot offsets: they plan the full snapshot's
    splits and whole snapshots' changes as before, and a limited query resumes from them."""
    t = _partitioned_history(tmp_path)
    r = _reader(t, **{"read.stream.maxFilesPerTrigger": 3})
    old_full = {"snapshot": 1, "full": True, "time": t.snapshot(1).time_millis}
    parts = r.parts(old_full, {"snapshot": 3, "time": t.snapshot(3).time_millis})
    assert [type(p).__name__ for p in parts] == ["FullSplit"] * 4 + ["SnapshotChanges"] * 2
    assert all(p.buckets is None for p in parts if isinstance(p, SnapshotChanges))
    # Spark gets one partition per bucket: its full split, then its changes of snapshots 2 and 3 in order
    groups = r.partitions(old_full, {"snapshot": 3, "time": t.snapshot(3).time_millis})
    assert len(groups) == 4 and all(isinstance(g, OrderedParts) for g in groups)
    for g in groups:
        key = (g.parts[0].split.partition, g.parts[0].split.bucket)
        assert [(type(p), p.snapshot_id) for p in g.parts] == [(FullSplit, 1), (SnapshotChanges, 2),
                                                               (SnapshotChanges, 3)]
        assert all(p.buckets == frozenset([key]) for p in g.parts[1:])
    assert [(e["snapshot"], e.get("index"), e.get("full")) for e in _offsets(r, old_full)] == \
        [(1, 2, True), (2, 1, None), (3, 0, None), (3, None, None)]


def test_rollback_below_an_offset_inside_a_snapshot_fails(tmp_path):
    """An offset inside snapshot s carries s's commit time: after a rollback that commits snapshot s anew, the
    next batch fails instead of reading the new snapshot's remaining splits."""
    t = _partitioned_history(tmp_path)
    r = _reader(t, **{"scan.mode": "from-snapshot", "scan.snapshot-id": 2, "read.stream.maxFilesPerTrigger": 1})
    mid = r.latestOffset(r.initialOffset(), r.getDefaultReadLimit())
    assert (mid["snapshot"], mid["index"]) == (2, 0)
    t.rollback_to(1)
    t.write(_data([("a", 0, "new")]))
    t.write(_data([("a", 1, "new")]))
    with pytest.raises(SnapshotNotFound, match="replaced by another commit"):
        r.latestOffset(mid, r.getDefaultReadLimit())
    with pytest.raises(SnapshotNotFound, match="replaced by another commit"):
        r.partitions(mid, {**mid, "index": 1})


def test_min_rows_puts_a_small_batch_off_until_the_delay_passed(tmp_path):
    """minRowsPerTrigger + maxTriggerDelayMs (Paimon's guard): the first batch is never put off; a later one under
    minRows returns no new offset while the delay since the last batch has not passed, and is planned once it has
    (here: the last batch's time moved back). Trigger.AvailableNow never puts a batch off (Spark would end the
    query there)."""
    t = _table(tmp_path, bucket="1")
    t.write(_data([("a", k, "x") for k in range(5)]))
    r = _reader(t, **{"read.stream.minRowsPerTrigger": 4, "read.stream.maxTriggerDelayMs": 10**9})
    first = r.latestOffset(r.initialOffset(), r.getDefaultReadLimit())
    assert first == {"snapshot": 1, "time": t.snapshot(1).time_millis}
    t.write(_data([("a", 9, "y")]))
    assert r.latestOffset(first, r.getDefaultReadLimit()) == first
    r.last_trigger_ms -= 10**9 + 1
    assert r.latestOffset(first, r.getDefaultReadLimit())["snapshot"] == 2
    now = _reader(t, **{"read.stream.minRowsPerTrigger": 4, "read.stream.maxTriggerDelayMs": 10**9})
    now.prepareForTriggerAvailableNow()
    now.last_trigger_ms = r.last_trigger_ms + 10**9
    assert now.latestOffset(first, now.getDefaultReadLimit())["snapshot"] == 2


def test_normalized_changes_stay_one_split_per_snapshot(tmp_path):
    """changelog.normalize without a changelog producer looks keys up across buckets: each snapshot's changes are
    one split, so maxFilesPerTrigger=1 gives one snapshot per batch, never an offset inside one."""
    t = _partitioned_history(tmp_path)
    r = _reader(t, **{"changelog.normalize": "true", "read.changelog": "true", "read.stream.maxFilesPerTrigger": 1})
    ends = _offsets(r, {"snapshot": 0})
    assert [(e["snapshot"], e.get("index")) for e in ends] == [(1, None), (2, None), (3, None)]
    full = _reader(t, **{"read.stream.maxFilesPerTrigger": 1})
    assert [type(p) for p in full.partitions(full.initialOffset(), _offsets(full)[0])] == [FullSplit]


def test_table_options_set_the_limits_and_read_options_override_them(tmp_path):
    """As Paimon's source reads its options from the table copied with the read options: a rate limit set as a
    table option applies, a read option of the same key wins."""
    t = _partitioned_history(tmp_path, **{"read.stream.maxFilesPerTrigger": "2"})
    assert len(_offsets(_reader(t, **{"scan.mode": "from-snapshot", "scan.snapshot-id": 1}))) == 6
    assert len(_offsets(_reader(t, **{"scan.mode": "from-snapshot", "scan.snapshot-id": 1,
                                      "read.stream.maxFilesPerTrigger": 4}))) == 3


def test_compacted_full_start_is_cut_into_splits(tmp_path):
    """compacted-full reads the latest compaction in full, split by split under maxFilesPerTrigger, then the
    changes after it."""
    t = _partitioned_history(tmp_path, **{"changelog-producer": "input"})
    t.compact(full=True)
    t.write(_data([("a", 0, "after")]))
    r = _reader(t, **{"scan.mode": "compacted-full", "read.stream.maxFilesPerTrigger": 3})
    start = r.initialOffset()
    assert start["snapshot"] == 4 and start["full"]
    ends = _offsets(r)
    assert [(e["snapshot"], e.get("index"), e.get("full")) for e in ends] == [(4, 2, True), (5, None, None)]
    parts = r.parts(ends[0], ends[1])
    assert [type(p) for p in parts] == [FullSplit, SnapshotChanges] and parts[1].buckets is None


def test_from_snapshot_full_continues_from_the_full_splits_into_the_changes(tmp_path):
    """from-snapshot-full: a batch takes the full snapshot's last splits and the first splits of the next
    snapshot's changes, the next one the rest (Paimon's offsets move from scanSnapshot=true to false)."""
    t = _partitioned_history(tmp_path)
    r = _reader(t, **{"scan.mode": "from-snapshot-full", "scan.snapshot-id": 2, "read.stream.maxFilesPerTrigger": 3})
    start = r.initialOffset()
    ends = _offsets(r, start)
    assert [(e["snapshot"], e.get("index"), e.get("full")) for e in ends] == [(2, 2, True), (3, 1, None),
                                                                              (3, None, None)]
    middle = r.parts(ends[0], ends[1])
    assert [type(p) for p in middle] == [FullSplit, SnapshotChanges] and len(middle[1].buckets) == 2
    last = r.parts(ends[1], ends[2])
    assert len(last) == 1 and last[0].buckets == frozenset(s.key for s in r._splits(t, 3, False)[2:])


def test_consumer_is_not_advanced_inside_a_full_read(tmp_path):
    """As Paimon's PaimonMicroBatchStream.commit: a batch ending inside the full first snapshot leaves the consumer
    as it was (a consumer holds a snapshot id of changes, it cannot say "the rest of a full read"), so a new query
    with the same consumer-id and no checkpoint reads the full snapshot again instead of only its changes; a batch
    ending inside a snapshot of changes records that snapshot, one at its end the next."""
    t = _partitioned_history(tmp_path)
    r = _reader(t, **{"consumer-id": "job", "read.stream.maxFilesPerTrigger": 3})
    ends = _offsets(r)
    assert [(e["snapshot"], e.get("index"), e.get("full")) for e in ends][:2] == [(3, 2, True), (3, None, None)]
    r.commit(ends[0])
    assert t.consumers() == {}
    again = _reader(t, **{"consumer-id": "job", "read.stream.maxFilesPerTrigger": 3})
    assert again.initialOffset()["full"]  # the full read starts over
    r.commit(ends[1])
    assert t.consumers() == {"job": 4}
    t.write(_data([(p, k, "z") for p in "ab" for k in range(6)]))
    mid = r.latestOffset(ends[1], r.getDefaultReadLimit())
    assert (mid["snapshot"], mid["index"]) == (4, 2)
    r.commit(mid)
    assert t.consumers() == {"job": 4}


def _rows_of(reader, partitions):
    return _rows(r for p in partitions for batch in reader.read(p) for r in batch.to_pylist())


@pytest.mark.parametrize("mode", ["changes", "full then changes", "limited"])
def test_batch_of_several_snapshots_is_one_partition_per_bucket_in_snapshot_order(tmp_path, mode):
    """A batch with changes of several snapshots is planned as one Spark partition per (partition, bucket) it
    reads (a key stays in its bucket, so each key's rows are in snapshot order and buckets are read in
    parallel), each reading its bucket's parts in batch order; together they deliver what the batch's parts
    read one after the other deliver. A batch ending inside a snapshot (rate limits) groups only its buckets."""
    t = _partitioned_history(tmp_path, **{"changelog-producer": "input"})
    options = {"read.changelog": "true"}
    if mode == "limited":
        options["read.stream.maxFilesPerTrigger"] = 6
    options.update({"scan.mode": "from-snapshot-full" if mode == "full then changes" else "from-snapshot",
                    "scan.snapshot-id": 1})
    r = _reader(t, **options)
    start = r.initialOffset()
    end = _offsets(r, start)[0]
    parts = r.parts(start, end)
    groups = r.partitions(start, end)
    assert len(groups) == 4
    for g in groups:
        inner = g.parts if isinstance(g, OrderedParts) else (g,)
        assert [p.snapshot_id for p in inner] == sorted(p.snapshot_id for p in inner)
        keys = {(p.split.partition, p.split.bucket) if isinstance(p, FullSplit) else next(iter(p.buckets))
                for p in inner}
        assert len(keys) == 1 and all(isinstance(p, FullSplit) or len(p.buckets) == 1 for p in inner)
    assert _rows_of(r, groups) == _rows_of(r, parts)
    if mode == "limited":
        assert (end["snapshot"], end["index"]) == (2, 1)  # snapshot 1 whole, 2 of snapshot 2's 4 buckets
        assert sum(isinstance(g, OrderedParts) for g in groups) == 2
    else:  # the full split of snapshot 1 and the changes of 2 and 3, or the changes of 1, 2 and 3
        assert all(isinstance(g, OrderedParts) and len(g.parts) == 3 for g in groups)
        assert {type(g.parts[0]) for g in groups} == {FullSplit if mode == "full then changes" else SnapshotChanges}


def _changes_reader(t, **options):
    return _reader(t, **{"scan.mode": "from-snapshot", "scan.snapshot-id": 1, "read.changelog": "true", **options})


def _planned_as_one_ordered_partition(t, **options):
    """Whether the reader of ``options`` plans the batch of every change since snapshot 1 as one OrderedParts
    reading its parts in order; asserts the batch reaches into several buckets (else one partition anyway)."""
    r = _changes_reader(t, **options)
    start = r.initialOffset()
    end = r.latestOffset(start, ReadAllAvailable())
    parts = r.parts(start, end)
    plain = _changes_reader(t)
    table = open_table(t.root)
    assert len({sp.key for p in parts for sp in plain._splits(table, p.snapshot_id, False)}) > 1
    [whole] = r.partitions(start, end)
    return isinstance(whole, OrderedParts) and [p.snapshot_id for p in whole.parts] == \
        [p.snapshot_id for p in parts]


def test_batch_over_a_rescale_overwrite_stays_one_ordered_partition(tmp_path):
    """A rescale (an OVERWRITE snapshot) moves keys to other buckets: a batch reaching across it is one partition
    read in snapshot order, with or without streaming-read-overwrite."""
    t = _table(tmp_path, **{"changelog-producer": "input"})
    t.write(_data([("a", k, "one") for k in range(8)]))
    t.alter_table([SetOption("bucket", "3")])
    t.rescale(3)
    t.write(_data([("a", k, "two") for k in range(8)]))
    assert t.snapshot(2).commit_kind == "OVERWRITE"
    assert _planned_as_one_ordered_partition(t)
    assert _planned_as_one_ordered_partition(t, **{"streaming-read-overwrite": "true"})


def test_batch_of_normalized_changes_stays_one_ordered_partition(tmp_path):
    t = _partitioned_history(tmp_path)
    for mode in ("from-snapshot", "from-snapshot-full"):
        assert _planned_as_one_ordered_partition(t, **{"changelog.normalize": "true", "scan.mode": mode})


@pytest.mark.parametrize("bucket", ["-1", "-2"])
def test_batch_of_a_table_whose_keys_change_bucket_stays_one_ordered_partition(tmp_path, bucket):
    """A key of a cross-partition dynamic-bucket table moves partition (and a deleted key leaves the index); a
    postpone-bucket table's records move from the postpone bucket into real ones: one ordered partition."""
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    pk = ["k"] if bucket == "-1" else ["p", "k"]
    opts = {"bucket": bucket, "changelog-producer": "input"}
    if bucket == "-1":
        opts["dynamic-bucket.target-row-num"] = "2"
    else:
        opts["postpone.default-bucket-num"] = "2"
    t = cat.create_table("db.t", SCHEMA, pk, ["p"], opts)
    t.write(_data([("a", k, "one") for k in range(6)]))
    t.write(_data([("b", k, "two") for k in range(6)]))
    assert _planned_as_one_ordered_partition(t)
