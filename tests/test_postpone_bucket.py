"""Postpone bucket mode (``bucket = -2``) on lakemerge alone: option checks, fixed-bucket batch writes with a
bucket count per partition, postponed writes, and the compaction that moves postponed records into real buckets,
against a dict model through several commits and compactions; conflicts and crashes leave the last snapshot.

Paimon facts (Java): batch reads see real buckets only (AbstractBatchTableScan.onlyReadRealBuckets); a partition's
bucket count is its real-bucket files' totalBuckets, else postpone.default-bucket-num, else an estimate
(PostponeUtils.decideFixedBucketNum for fixed-bucket batch writes: power of two; createPostponeBucketNumResolver
for compaction: ceil(rows / postpone.target-row-num-per-bucket)); postponed records are rewritten by a fixed-bucket
writer at compaction, so they win over real-bucket data committed before the compaction.
"""
from __future__ import annotations

import os
import random

import pyarrow as pa
import pytest

from engine.errors import (
    CommitConflict,
    InvalidInput,
    InvalidOption,
    InvalidSchema,
    UnsupportedFeature,
)
from engine.meta.snapshot import BATCH_COMMIT_IDENTIFIER
from engine.postpone import POSTPONE_BUCKET
from engine.postpone.write import FixedBucketPostponeWrite, PostponedWrite
from tests.conftest import list_files

SCHEMA = pa.schema([("dt", pa.string()), ("id", pa.int64()), ("v", pa.string())])


def rows(dt, ids, tag):
    return pa.table({"dt": [dt] * len(ids), "id": list(ids), "v": [f"{tag}{i}" for i in ids]}, schema=SCHEMA)


def keys(dt, ids):
    return pa.table({"dt": [dt] * len(ids), "id": list(ids)})


def as_rows(t: pa.Table) -> list[tuple]:
    return sorted((r["dt"], r["id"], r["v"]) for r in t.to_pylist())


def make(catalog, name="db.t", **options):
    return catalog.create_table(name, SCHEMA, ["dt", "id"], ["dt"], options={"bucket": "-2", **options})


def entries(t):
    snap = t.snapshot()
    return [] if snap is None else t.manifests.live_entries(snap)


def bucket_counts(t) -> dict:
    out: dict = {}
    for e in entries(t):
        out.setdefault(t.scan().partition_values(e.partition)[0], set()).add(e.total_buckets)
    return out


# --- options ------------------------------------------------------------------------------------------------
def test_option_checks(catalog):
    with pytest.raises(InvalidOption, match="bucket"):  # Paimon: postpone needs a primary key
        catalog.create_table("db.a", SCHEMA, options={"bucket": "-2"})
    t = make(catalog, "db.z", **{"postpone.default-bucket-num": "0"})
    with pytest.raises(InvalidOption, match="postpone.default-bucket-num"):
        t.write(rows("a", [1], "x"))
    assert t.snapshot() is None and [f for f in list_files(t.root) if "bucket" in f] == []
    with pytest.raises(InvalidSchema, match="partition key"):  # a cross-partition key needs bucket=-1
        catalog.create_table("db.c", SCHEMA, ["id"], ["dt"], options={"bucket": "-2"})


# --- fixed-bucket batch writes ---------------------------------------------------------------------------
def test_fixed_bucket_writes_record_a_bucket_count_per_partition(catalog):
    t = make(catalog, **{"postpone.default-bucket-num": "3"})
    t.write(rows("a", range(20), "x"))
    assert bucket_counts(t) == {"a": {3}}
    assert all(e.bucket in (0, 1, 2) for e in entries(t))
    # an existing partition keeps its count when the default changes; a new one takes the new default
    t.alter().set_option("postpone.default-bucket-num", "5").commit()
    t.write(rows("a", range(10, 30), "y") )
    t.write(rows("b", range(5), "z"))
    assert bucket_counts(t) == {"a": {3}, "b": {5}}
    assert as_rows(t.read()) == sorted([("a", i, f"x{i}") for i in range(10)] +
                                       [("a", i, f"y{i}") for i in range(10, 30)] +
                                       [("b", i, f"z{i}") for i in range(5)])


def test_fixed_bucket_estimate_is_a_power_of_two_of_the_required_count(catalog):
    t = make(catalog, **{"postpone.target-row-num-per-bucket": "2",
                         "postpone.batch-write-fixed-bucket.max-parallelism": "8"})
    with t.new_write() as w:  # the count is decided from everything the writer got for the partition
        w.write(rows("a", range(3), "x"))
        w.write(rows("a", range(3, 5), "x"))
        w.write(rows("b", range(40), "x"))
        t.commit(w.prepare_commit())
    assert bucket_counts(t) == {"a": {4}, "b": {8}}  # ceil(5/2)=3 -> 4; ceil(40/2)=20 -> capped at 8
    assert len(as_rows(t.read())) == 45


def test_fixed_bucket_writes_merge_and_compact_as_a_fixed_bucket_table(catalog):
    t = make(catalog, **{"postpone.default-bucket-num": "2", "num-sorted-run.compaction-trigger": "2",
                         "changelog-producer": "input"})
    for i in range(4):
        t.write(rows("a", range(10), f"w{i}-"))
    assert as_rows(t.read()) == [("a", i, f"w3-{i}") for i in range(10)]
    assert any(e.file.level > 0 for e in entries(t))  # writers compacted
    assert t.read_changes(3, 4).num_rows == 10  # input changelog of the 4th write


# --- postponed writes ---------------------------------------------------------------------------------
def test_postponed_files_are_named_and_recorded_as_paimon_does(catalog):
    t = make(catalog, **{"postpone.batch-write-fixed-bucket": "false"})
    with t.new_write(commit_user="user-1") as w:
        assert isinstance(w, PostponedWrite)
        w.write(rows("a", [3, 1, 2], "x"))
        w.delete(keys("a", [1]))
        t.commit(w.prepare_commit())
    (e,) = entries(t)
    assert (e.bucket, e.total_buckets, e.file.level) == (POSTPONE_BUCKET, POSTPONE_BUCKET, 0)
    assert e.file.file_name.startswith("data--u-user-1-s-") and "-w-" in e.file.file_name
    assert os.path.exists(os.path.join(t.root, "dt=a", "bucket-postpone", e.file.file_name))
    assert (e.file.row_count, e.file.delete_row_count) == (4, 1)  # as stored: not merged
    assert t.read().num_rows == 0  # invisible until compacted
    assert t.snapshot().commit_kind == "APPEND"


def _postponed_files(t) -> list[tuple[str, str, object]]:
    """(extension, Avro codec or None, value stats) of each postponed file of ``t``'s latest snapshot."""
    import fastavro
    out = []
    for e in entries(t):
        if e.bucket != POSTPONE_BUCKET:
            continue
        ext = e.file.file_name.rsplit(".", 1)[1]
        codec = None
        if ext == "avro":
            path = os.path.join(t.root, "dt=" + t.scan().partition_values(e.partition)[0], "bucket-postpone",
                                e.file.file_name)
            with open(path, "rb") as fo:
                codec = fastavro.reader(fo).metadata["avro.codec"]
        out.append((ext, codec, e.file.value_stats_cols, e.file.value_stats))
    return out


@pytest.mark.parametrize("options, expected", [
    ({}, ("avro", "zstandard")),                                  # file.compression zstd: Avro's zstandard
    ({"file.compression": "snappy"}, ("avro", "snappy")),
    ({"avro.codec": "deflate"}, ("avro", "deflate")),
    ({"file.format": "orc"}, ("avro", "zstandard")),              # the table format does not matter
    ({"file.compression.per.level": "0:snappy"}, ("avro", "snappy")),
    ({"file.format.per.level": "0:orc"}, ("orc", None)),          # a level-0 format still wins
])
def test_postponed_files_are_avro_without_value_stats(catalog, options, expected):
    """PostponeBucketFileStoreWrite sets file.format=avro and metadata.stats-mode=none; KeyValueFileWriterFactory
    then picks level 0's per-level format/compression first and AvroFileFormat honours avro.codec."""
    t = make(catalog, **{"postpone.batch-write-fixed-bucket": "false", "postpone.default-bucket-num": "2",
                         "metadata.stats-mode": "full", **options})
    t.write(rows("a", [3, 1, 2], "x"))
    t.delete(keys("a", [1]))
    files = _postponed_files(t)
    assert [f[:2] for f in files] == [expected] * 2
    from engine.meta.data_file import SimpleStats
    assert [f[3] for f in files] == [SimpleStats.EMPTY] * 2  # stats-mode none, also for a level-0 orc file
    assert t.read().num_rows == 0
    changes = sorted((r["id"], r["_row_kind"], r["v"] or "") for r in t.read_changes(0).to_pylist())
    assert changes == [(1, "+I", "x1"), (1, "-D", ""), (2, "+I", "x2"), (3, "+I", "x3")]
    t.compact()
    assert as_rows(t.read()) == [("a", 2, "x2"), ("a", 3, "x3")]
    assert _postponed_files(t) == []


def test_a_level0_stats_mode_per_level_still_wins_for_postponed_files(catalog):
    """KeyValueFileWriterFactory takes metadata.stats-mode.per.level's level-0 entry before the metadata.stats-mode
    (none) PostponeBucketFileStoreWrite sets: Avro postponed files with counts statistics; compaction into the real
    buckets still reads them right."""
    t = make(catalog, **{"postpone.batch-write-fixed-bucket": "false", "postpone.default-bucket-num": "2",
                         "metadata.stats-mode.per.level": "0:counts"})
    t.write(rows("a", [3, 1, 2], "x"))
    ((ext, _, cols, stats),) = _postponed_files(t)
    assert ext == "avro" and cols is None and stats.null_counts == (0, 0, 0)
    t.compact()
    assert as_rows(t.read()) == [("a", 1, "x1"), ("a", 2, "x2"), ("a", 3, "x3")]


def test_a_compression_avro_lacks_refuses_postponed_writes(catalog):
    """file.compression lz4 is a Parquet codec, not an Avro one: Paimon's Avro CodecFactory refuses it when a
    postponed file is written; lakemerge refuses the postponed writer, naming the option, before writing."""
    t = make(catalog, **{"postpone.batch-write-fixed-bucket": "false", "file.compression": "lz4"})
    before = list_files(t.root)
    with pytest.raises(InvalidOption, match="file.compression"):
        t.write(rows("a", [1], "x"))
    assert t.snapshot() is None and list_files(t.root) == before


def test_postponed_files_keep_the_table_format_for_columns_avro_cannot_hold(catalog):
    """A TIMESTAMP(9) column has no Avro schema (AvroSchemaConverter refuses precision > 6), so Paimon keeps the
    table's options: file.format and metadata.stats-mode of the table."""
    schema = pa.schema([("dt", pa.string()), ("id", pa.int64()), ("ts", pa.timestamp("ns"))])
    t = catalog.create_table("db.ts", schema, ["dt", "id"], ["dt"], options={
        "bucket": "-2", "postpone.batch-write-fixed-bucket": "false", "postpone.default-bucket-num": "1",
        "metadata.stats-mode": "full"})
    ts = pa.array([1_000_000_001, 2_000_000_002], pa.timestamp("ns"))
    t.write(pa.table({"dt": ["a", "a"], "id": [1, 2], "ts": ts}, schema=schema))
    ((ext, codec, cols, stats),) = _postponed_files(t)
    assert (ext, codec) == ("parquet", None)
    assert stats.null_counts == (0, 0, 0)  # the table's stats mode (full), not none
    t.compact()
    assert t.read().sort_by("id").column("ts").to_pylist() == ts.to_pylist()


def test_streaming_writes_are_postponed_whatever_the_batch_option(catalog):
    """Paimon's FlinkSinkBuilder postpones streaming input even with postpone.batch-write-fixed-bucket=true;
    lakemerge's streaming commits are those with an explicit commit identifier."""
    t = make(catalog, **{"postpone.default-bucket-num": "2"})
    assert isinstance(t.new_write(), FixedBucketPostponeWrite)
    with t.new_write(commit_identifier=7) as w:
        assert isinstance(w, PostponedWrite)
        w.write(rows("a", [1], "s"))
        t.commit(w.prepare_commit())
    assert [e.bucket for e in entries(t)] == [POSTPONE_BUCKET] and t.snapshot().commit_identifier == 7
    from engine.meta.snapshot import BATCH_COMMIT_IDENTIFIER
    # the batch identifier (Long.MAX_VALUE, what Paimon's batch commits carry) given explicitly is still a batch write
    assert isinstance(t.new_write(commit_identifier=BATCH_COMMIT_IDENTIFIER), FixedBucketPostponeWrite)


# --- compaction against a dict model ------------------------------------------------------------------
def _apply(state: dict, batch: list) -> None:
    for kind, dt, i, v in batch:
        if kind == "+":
            state[(dt, i)] = v
        else:
            state.pop((dt, i), None)


def _write(t, writer_cls, batch) -> None:
    with writer_cls(t) as w:
        for kind, dt, i, v in batch:
            if kind == "+":
                w.write(pa.table({"dt": [dt], "id": [i], "v": [v]}, schema=SCHEMA))
            else:
                w.delete(keys(dt, [i]))
        t.commit(w.prepare_commit())


@pytest.mark.parametrize("seed", [1, 2])
def test_model_of_fixed_writes_postponed_writes_and_compactions(catalog, seed):
    rng = random.Random(seed)
    t = make(catalog, **{"postpone.target-row-num-per-bucket": "7", "num-sorted-run.compaction-trigger": "3"})
    visible: dict = {}  # what a batch read shows
    pending: list = []  # postponed records, in commit order
    for step in range(14):
        batch = [("+" if rng.random() < 0.75 else "-", rng.choice("ab"), rng.randrange(12), f"s{step}-{n}")
                 for n in range(rng.randrange(1, 9))]
        action = rng.choice(["fixed", "postponed", "postponed", "compact"])
        if action == "fixed":
            _write(t, FixedBucketPostponeWrite, batch)
            _apply(visible, batch)
        elif action == "postponed":
            _write(t, PostponedWrite, batch)
            pending += batch
        else:
            t.compact(full=rng.random() < 0.3)
            _apply(visible, pending)
            pending = []
            assert not any(e.bucket == POSTPONE_BUCKET for e in entries(t))
        assert as_rows(t.read()) == sorted((k[0], k[1], v) for k, v in visible.items()), (step, action)
        for dt, counts in bucket_counts(t).items():
            assert len(counts - {POSTPONE_BUCKET}) <= 1, dt  # one real bucket count per partition
    t.compact()
    _apply(visible, pending)
    assert as_rows(t.read()) == sorted((k[0], k[1], v) for k, v in visible.items())
    assert t.check().ok


def test_compaction_puts_postponed_records_after_the_real_bucket_data(catalog):
    t = make(catalog, **{"postpone.default-bucket-num": "2"})
    _write(t, PostponedWrite, [("+", "a", 1, "postponed"), ("+", "a", 2, "postponed")])
    _write(t, FixedBucketPostponeWrite, [("+", "a", 1, "fixed"), ("+", "a", 3, "fixed")])
    sid = t.compact()
    snap = t.snapshot()
    assert snap.id == sid and snap.commit_kind == "COMPACT"
    assert as_rows(t.read()) == [("a", 1, "postponed"), ("a", 2, "postponed"), ("a", 3, "fixed")]
    assert bucket_counts(t) == {"a": {2}}
    assert t.compact() is None  # nothing postponed, no real bucket needing work


def test_compaction_of_some_partitions_only(catalog):
    t = make(catalog, **{"postpone.batch-write-fixed-bucket": "false", "postpone.default-bucket-num": "1"})
    t.write(rows("a", [1, 2], "x"))
    t.write(rows("b", [1, 2], "y"))
    seen = []
    t.compact(partitions={"dt": "b"}, progress=lambda rows, bytes: seen.append(rows))
    assert seen == [2]  # the one postponed file of partition b
    assert as_rows(t.read()) == [("b", 1, "y1"), ("b", 2, "y2")]
    assert {t.scan().partition_values(e.partition)[0] for e in entries(t) if e.bucket == POSTPONE_BUCKET} == {"a"}


# --- conflicts and crashes ---------------------------------------------------------------------------
def test_a_concurrent_real_bucket_write_makes_compaction_conflict(catalog, monkeypatch):
    import engine.postpone.compact as pc
    t = make(catalog, **{"postpone.batch-write-fixed-bucket": "false", "postpone.default-bucket-num": "2"})
    t.write(rows("a", [1, 2, 3], "p"))
    other = catalog.get_table("db.t")
    original = pc._redistribute

    def racing(*args, **kw):
        out = original(*args, **kw)
        with FixedBucketPostponeWrite(other) as w:  # lands between the compaction's plan and its commit
            w.write(rows("a", [2], "concurrent"))
            other.commit(w.prepare_commit())
        return out

    monkeypatch.setattr(pc, "_redistribute", racing)
    with pytest.raises(CommitConflict, match="changed bucket"):
        t.compact()
    assert t.snapshot().commit_kind == "APPEND"
    assert as_rows(t.read()) == [("a", 2, "concurrent2")]
    assert t.remove_orphan_files(older_than=0, dry_run=True) == []  # the compaction's files were deleted
    monkeypatch.setattr(pc, "_redistribute", original)
    t.compact()  # a later compaction succeeds: the postponed records come after the concurrent write
    assert as_rows(t.read()) == [("a", 1, "p1"), ("a", 2, "p2"), ("a", 3, "p3")]


def test_postponed_appends_during_compaction_stay_postponed(catalog, monkeypatch):
    import engine.postpone.compact as pc
    t = make(catalog, **{"postpone.batch-write-fixed-bucket": "false", "postpone.default-bucket-num": "2"})
    t.write(rows("a", [1], "p"))
    other = catalog.get_table("db.t")
    original = pc._redistribute

    def racing(*args, **kw):
        out = original(*args, **kw)
        other.write(rows("a", [5], "late"))  # postponed: no conflict (Paimon's strict mode ignores it too)
        return out

    monkeypatch.setattr(pc, "_redistribute", racing)
    t.compact()
    assert as_rows(t.read()) == [("a", 1, "p1")]
    assert [e.file.row_count for e in entries(t) if e.bucket == POSTPONE_BUCKET] == [1]


def _crashing_compaction(warehouse):
    from engine import Catalog
    Catalog(warehouse).get_table("db.t").compact()


@pytest.mark.parametrize("point", ["compact.before-commit", "commit.before-publish"])
def test_a_crash_during_compaction_leaves_the_last_snapshot(catalog, warehouse, point):
    from engine.crash_points import reopen_and_check, run_crashing
    t = make(catalog, **{"postpone.batch-write-fixed-bucket": "false", "postpone.default-bucket-num": "2"})
    t.write(rows("a", [1, 2], "p"))
    t.compact()
    t.write(rows("a", [2, 3], "q"))
    last = t.snapshot().id
    assert run_crashing(point, _crashing_compaction, warehouse).crashed
    t2, report = reopen_and_check(warehouse, "db.t")
    assert t2.snapshot().id == last and report.ok
    assert as_rows(t2.read()) == [("a", 1, "p1"), ("a", 2, "p2")]
    t2.compact()
    assert as_rows(t2.read()) == [("a", 1, "p1"), ("a", 2, "q2"), ("a", 3, "q3")]


# --- streaming and overwrite -------------------------------------------------------------------------
def test_streaming_reads_postponed_records_as_stored_without_changelog_producer(catalog):
    """Paimon's DataTableStreamScan: with changelog-producer none the postponed files of APPEND snapshots are
    changes (unmerged, own row kinds); the compaction's COMPACT snapshot adds none."""
    t = make(catalog, **{"postpone.batch-write-fixed-bucket": "false", "postpone.default-bucket-num": "2"})
    t.write(rows("a", [1, 2], "x"))
    t.delete(keys("a", [1]))
    t.compact()
    changes = [(r["id"], r["_row_kind"]) for r in t.read_changes(0).to_pylist()]
    assert sorted(changes) == [(1, "+I"), (1, "-D"), (2, "+I")]
    assert t.read_changes(2, 3).num_rows == 0  # the COMPACT snapshot


def test_streaming_with_input_changelog_sees_postponed_rows_when_compacted(catalog):
    """With changelog-producer input the postponed writer writes no changelog (PostponeBucketWriter); the
    compaction's fixed-bucket writer does, in the COMPACT snapshot."""
    t = make(catalog, **{"postpone.batch-write-fixed-bucket": "false", "postpone.default-bucket-num": "2",
                         "changelog-producer": "input"})
    t.write(rows("a", [1, 2], "x"))
    assert t.read_changes(0).num_rows == 0
    sid = t.compact()
    assert sorted((r["id"], r["_row_kind"]) for r in t.read_changes(sid - 1, sid).to_pylist()) == [
        (1, "+I"), (2, "+I")]


def test_overwrite_replaces_postponed_and_real_files_of_the_partition(catalog):
    t = make(catalog, **{"postpone.default-bucket-num": "2"})
    t.write(rows("a", [1, 2], "fixed"))
    t.alter().set_option("postpone.batch-write-fixed-bucket", "false").commit()
    t.write(rows("a", [3], "postponed"))
    t.alter().set_option("postpone.batch-write-fixed-bucket", "true").commit()
    with t.new_write() as w:
        w.write(rows("a", [7], "new"))
        t.commit_overwrite(w.prepare_commit(), partitions="dynamic")
    assert as_rows(t.read()) == [("a", 7, "new7")]
    assert not any(e.bucket == POSTPONE_BUCKET for e in entries(t))
    assert bucket_counts(t) == {"a": {2}}


def test_an_overwrite_writer_decides_the_bucket_count_afresh(catalog):
    """Paimon decides an overwritten partition's count without its old layout (postpone.default-bucket-num: "for
    partitions receiving real buckets for the first time and for fixed-bucket overwrite writes";
    SparkPostponeStagedCommitter passes no existing count for an overwrite; pypaimon's overwrite plans from {})."""
    t = make(catalog, **{"postpone.default-bucket-num": "3"})
    t.write(rows("a", range(6), "x"))
    t.write(rows("b", range(6), "x"))
    t.alter().set_option("postpone.default-bucket-num", "5").commit()
    with t.new_write(overwrite=True) as w:
        w.write(rows("a", range(4), "new"))
        t.commit_overwrite(w.prepare_commit(), partitions="dynamic")
    assert bucket_counts(t) == {"a": {5}, "b": {3}}
    t.alter().remove_option("postpone.default-bucket-num").commit()
    t.alter().set_option("postpone.target-row-num-per-bucket", "2").commit()
    with t.new_write(overwrite=True) as w:  # estimated from the overwrite's rows: ceil(7 / 2) = 4
        w.write(rows("b", range(7), "new"))
        t.commit_overwrite(w.prepare_commit(), partitions="dynamic")
    assert bucket_counts(t) == {"a": {5}, "b": {4}}
    assert as_rows(t.read()) == sorted([("a", i, f"new{i}") for i in range(4)] + [("b", i, f"new{i}") for i in range(7)])
    with t.new_write() as w:  # a plain writer keeps the partition's count
        w.write(rows("b", [9], "later"))
        t.commit(w.prepare_commit())
    assert bucket_counts(t) == {"a": {5}, "b": {4}}


def test_a_writer_with_decided_counts_never_holds_input_back(catalog):
    """One task of a distributed write (spark_glue.postpone_buckets): decided counts, else the partition's known
    count (which wins), else postpone.default-bucket-num; without that default an undecided partition raises."""
    from engine.meta import binary_row
    t = make(catalog, **{"postpone.target-row-num-per-bucket": "2"})
    t.write(rows("a", range(4), "x"))  # 2 buckets
    b = binary_row.serialize_row(["b"], t.schema.types_of(["dt"]))
    a = binary_row.serialize_row(["a"], t.schema.types_of(["dt"]))
    with FixedBucketPostponeWrite(t, decided={a: 7, b: 3}) as w:
        w.write(rows("a", range(4, 6), "y"))
        w.write(rows("b", range(40), "y"))  # not estimated from its rows (20 -> 32)
        assert not w._held
        t.commit(w.prepare_commit())
    assert bucket_counts(t) == {"a": {2}, "b": {3}}
    with FixedBucketPostponeWrite(t, decided={}) as w:
        with pytest.raises(InvalidInput, match="postpone.default-bucket-num"):
            w.write(rows("c", [1], "z"))
    t.alter().set_option("postpone.default-bucket-num", "5").commit()
    with FixedBucketPostponeWrite(t, decided={}) as w:
        w.write(rows("c", [1], "z"))
        t.commit(w.prepare_commit())
    assert bucket_counts(t) == {"a": {2}, "b": {3}, "c": {5}}


def test_a_partly_staged_write_stages_only_partitions_without_a_known_count(catalog):
    """PartlyStagedWrite (a data source task when the counts cannot be decided first): a partition with real
    buckets in the base is written to them; a new one is staged in bucket-postpone, and rewrite_staged gives it
    the engine's count; an overwrite stages every partition."""
    from engine.postpone.staged import PartlyStagedWrite, rewrite_staged
    t = make(catalog, **{"postpone.target-row-num-per-bucket": "2"})
    t.write(rows("a", range(4), "x"))  # 2 buckets
    with PartlyStagedWrite(t, commit_user="u") as w:
        w.write(pa.concat_tables([rows("a", range(2, 6), "y"), rows("b", range(5), "y")]))
        messages = w.prepare_commit()
    where = {(t.scan().partition_values(m.partition)[0], m.bucket == POSTPONE_BUCKET) for m in messages}
    assert where == {("a", False), ("b", True)}
    final = [m for m in messages if m.bucket != POSTPONE_BUCKET] + rewrite_staged(
        t, messages, commit_user="u", commit_identifier=BATCH_COMMIT_IDENTIFIER)
    t.commit(final)
    assert bucket_counts(t) == {"a": {2}, "b": {4}}  # ceil(5 / 2) = 3 -> 4
    assert as_rows(t.read()) == sorted([("a", i, f"x{i}") for i in range(2)] + [("a", i, f"y{i}") for i in range(2, 6)]
                                       + [("b", i, f"y{i}") for i in range(5)])
    with PartlyStagedWrite(t, overwrite=True) as w:
        w.write(rows("a", [1], "z"))
        assert {m.bucket for m in w.prepare_commit()} == {POSTPONE_BUCKET}


@pytest.mark.parametrize("options", [{"deletion-vectors.enabled": "true"}, {"changelog-producer": "lookup"}])
def test_compaction_of_a_write_only_table_compacts_the_buckets_it_writes(catalog, options):
    """Paimon's postpone compaction writes with write-only=false (PostponeUtils.tableForPostponeRewrite): the moved
    records are compacted out of level 0, so a deletion-vector read (which skips level 0) sees them and the lookup
    producer writes their changelog."""
    t = make(catalog, **{"postpone.batch-write-fixed-bucket": "false", "postpone.default-bucket-num": "2",
                         "write-only": "true", **options})
    t.write(rows("a", [1, 2, 3], "p"))
    sid = t.compact()
    assert as_rows(t.read()) == [("a", i, f"p{i}") for i in (1, 2, 3)]
    assert all(e.file.level > 0 for e in entries(t))
    if "changelog-producer" in options:
        assert sorted(r["id"] for r in t.read_changes(sid - 1, sid).to_pylist()) == [1, 2, 3]


def test_a_refused_batch_is_refused_when_given_even_while_input_is_held_back(catalog):
    """TableWrite's contract: write/delete refuse a bad batch at once and leave no trace; a writer holding input
    back for a partition without a bucket count must not defer the refusal to prepare_commit (failing the batches
    it had accepted)."""
    from engine.errors import InvalidInput
    t = make(catalog, **{"merge-engine": "first-row", "postpone.default-bucket-num": "2"})
    with t.new_write() as w:
        w.write(rows("a", [1, 2], "x"))  # partition a has no count yet: held back
        with pytest.raises(InvalidInput, match="first-row"):
            w.delete(keys("a", [1]))
        t.commit(w.prepare_commit())
    assert as_rows(t.read()) == [("a", 1, "x1"), ("a", 2, "x2")]


def test_normalized_changes_refuse_postponed_records_instead_of_losing_them(catalog):
    """A normalized change stream (changelog-producer none) looks keys up before and after each APPEND snapshot;
    postponed records reach neither (batch state shows real buckets only) and the compaction's COMPACT snapshot has
    no changes, so the keys would never be emitted: refused, while raw changes give the records as stored."""
    t = make(catalog, **{"postpone.batch-write-fixed-bucket": "false", "postpone.default-bucket-num": "2"})
    t.write(rows("a", [1, 2], "x"))
    assert [r["id"] for r in t.read_changes(0).to_pylist()] == [1, 2]
    with pytest.raises(UnsupportedFeature, match="postpone"):
        t.read_changes(0, normalize=True)
    t.compact()
    t.alter().set_option("postpone.batch-write-fixed-bucket", "true").commit()
    t.write(rows("a", [2], "y"))  # a fixed-bucket write normalizes as on a fixed-bucket table
    assert [(r["id"], r["_row_kind"]) for r in t.read_changes(t.snapshot().id - 1, normalize=True).to_pylist()] == [
        (2, "-U"), (2, "+U")]


def test_postponed_files_keep_the_table_format_for_names_avro_refuses(catalog):
    """A column name Avro refuses ("my col": Avro names are [A-Za-z_][A-Za-z0-9_]*) makes AvroSchemaConverter
    throw, so Paimon keeps the table's format for postponed files; so does lakemerge (Java could not read an
    Avro file with that name)."""
    schema = pa.schema([("dt", pa.string()), ("id", pa.int64()), ("my col", pa.int64())])
    t = catalog.create_table("db.names", schema, ["dt", "id"], ["dt"], options={
        "bucket": "-2", "postpone.batch-write-fixed-bucket": "false", "postpone.default-bucket-num": "1"})
    t.write(pa.table({"dt": ["a", "a"], "id": [1, 2], "my col": [5, 6]}, schema=schema))
    ((ext, _, _, _),) = _postponed_files(t)
    assert ext == "parquet"
    t.compact()
    assert t.read().sort_by("id").column("my col").to_pylist() == [5, 6]


def test_decide_fixed_bucket_num_as_paimon_postpone_utils():
    """PostponeUtilsTest.testDecideFixedBucketNum: an existing count is kept unless the staged batch needs more than
    rescale-load-factor times it (and the rounded, capped count is larger); without one, postpone.default-bucket-num
    or the rounded estimate."""
    from engine.errors import InvalidOption
    from engine.options import TableOptions
    from engine.postpone.buckets import decide_fixed_bucket_num

    o = TableOptions({"postpone.target-row-num-per-bucket": "1",
                      "postpone.batch-write-fixed-bucket.max-parallelism": "16",
                      "postpone.batch-write-fixed-bucket.rescale-load-factor": "32"}, table="t")
    assert decide_fixed_bucket_num(o, 3, 0, None) == (4, False)
    assert decide_fixed_bucket_num(o, 2 ** 31, 0, None) == (16, False)
    assert decide_fixed_bucket_num(o, 224, 0, 7) == (7, False)
    assert decide_fixed_bucket_num(o, 225, 0, 7) == (16, True)
    capped = TableOptions({**o.raw, "postpone.batch-write-fixed-bucket.max-parallelism": "4"}, table="t")
    assert decide_fixed_bucket_num(capped, 225, 0, 7) == (7, False)
    assert decide_fixed_bucket_num(o, 257, 0, 8) == (16, True)
    low = TableOptions({**o.raw, "postpone.batch-write-fixed-bucket.rescale-load-factor": "4"}, table="t")
    assert decide_fixed_bucket_num(low, 29, 0, 7) == (16, True)
    with_default = TableOptions({**o.raw, "postpone.default-bucket-num": "3"}, table="t")
    assert decide_fixed_bucket_num(with_default, 100, 0, None) == (3, False)
    assert decide_fixed_bucket_num(with_default, 225, 0, 7) == (16, True)
    bad = TableOptions({**o.raw, "postpone.batch-write-fixed-bucket.rescale-load-factor": "0"}, table="t")
    with pytest.raises(InvalidOption, match="rescale-load-factor"):
        decide_fixed_bucket_num(bad, 1, 0, 1)
