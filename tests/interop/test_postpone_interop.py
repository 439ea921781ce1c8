"""Postpone bucket mode (``bucket = -2``) across engines.

pypaimon 2.1 facts relied on: ``new_batch_write_builder`` on a postpone table writes every row to the partition's
``bucket-postpone`` directory (avro files, bucket and totalBuckets -2); ``new_postpone_fixed_bucket_write_builder``
writes to real buckets with the partition's bucket count recorded as totalBuckets; its batch read shows real
buckets only (as Paimon's AbstractBatchTableScan.onlyReadRealBuckets).
"""
from __future__ import annotations

import pyarrow as pa
import pytest

from tests.interop.pypaimon_util import (
    pp_catalog,
    pp_create_table,
    pp_get_table,
    pp_read,
    pp_write,
    pp_write_fixed_bucket,
)

pytestmark = pytest.mark.interop

SCHEMA = pa.schema([("dt", pa.string()), ("id", pa.int64()), ("v", pa.string())])


def rows(dt, ids, tag):
    return pa.table({"dt": [dt] * len(ids), "id": ids, "v": [f"{tag}{i}" for i in ids]}, schema=SCHEMA)


def as_rows(t: pa.Table) -> list[tuple]:
    return sorted((r["dt"], r["id"], r["v"]) for r in t.to_pylist())


def pp_table(tmp_path, options=None):
    cat = pp_catalog(str(tmp_path))
    return pp_create_table(cat, "db.t", SCHEMA, ["dt", "id"], ["dt"], {"bucket": "-2", **(options or {})})


def test_batch_read_sees_only_real_buckets(tmp_path):
    from engine import Catalog
    pp = pp_table(tmp_path)
    pp_write(pp, rows("a", [1, 2, 3], "post-"), SCHEMA)            # postponed: invisible to batch reads
    pp_write_fixed_bucket(pp, rows("a", [2, 5], "fix-"), SCHEMA)   # real buckets
    pp_write(pp, rows("b", [7], "post-"), SCHEMA)
    t = Catalog(str(tmp_path)).get_table("db.t")
    expected = [("a", 2, "fix-2"), ("a", 5, "fix-5")]
    assert as_rows(pp_read(pp_get_table(str(tmp_path), "db.t"), sort_by=["dt", "id"])) == expected
    assert as_rows(t.read()) == expected
    assert as_rows(pa.Table.from_batches(list(t.to_batches()), schema=t.arrow_schema)) == expected
    assert t.lookup(pa.table({"dt": ["a", "a", "b"], "id": [1, 2, 7]})).to_pylist() == [
        {"dt": "a", "id": 2, "v": "fix-2"}]
    assert as_rows(t.read(filter=[("dt", "=", "b")])) == []


@pytest.mark.parametrize("producer", ["none", "input"])
def test_streaming_full_read_reads_postponed_records_only_without_changelog_producer(tmp_path, producer):
    """Paimon's DataTableStreamScan reads the postpone bucket (unmerged) unless a changelog producer is set."""
    from engine import Catalog
    pp = pp_table(tmp_path, {"changelog-producer": producer})
    pp_write_fixed_bucket(pp, rows("a", [1, 2], "fix-"), SCHEMA)
    pp_write(pp, rows("a", [2, 3], "post-"), SCHEMA)
    t = Catalog(str(tmp_path)).get_table("db.t")
    full = pa.Table.from_batches(list(t.stream("latest-full", idle_timeout=0)))
    got = sorted((r["id"], r["v"], r["_row_kind"]) for r in full.to_pylist())
    if producer == "none":
        assert got == [(1, "fix-1", "+I"), (2, "fix-2", "+I"), (2, "post-2", "+I"), (3, "post-3", "+I")]
    else:
        assert got == [(1, "fix-1", "+I"), (2, "fix-2", "+I")]


def test_lakemerge_compacts_what_pypaimon_postponed_and_pypaimon_reads_it(tmp_path):
    """pypaimon's postponed (avro) files, moved into real buckets by lakemerge, read the same in both engines; the
    postponed records win over real-bucket data committed before the compaction."""
    from engine import Catalog
    pp = pp_table(tmp_path, {"postpone.default-bucket-num": "3"})
    pp_write_fixed_bucket(pp, rows("a", [1, 2, 3], "fix-"), SCHEMA)
    pp_write(pp, rows("a", [2, 4], "post1-"), SCHEMA)
    pp_write(pp, rows("b", [1], "post1-"), SCHEMA)
    pp_write(pp, rows("a", [4, 5], "post2-"), SCHEMA)
    t = Catalog(str(tmp_path)).get_table("db.t")
    t.compact()
    expected = [("a", 1, "fix-1"), ("a", 2, "post1-2"), ("a", 3, "fix-3"), ("a", 4, "post2-4"), ("a", 5, "post2-5"),
                ("b", 1, "post1-1")]
    assert as_rows(t.read()) == expected
    assert as_rows(pp_read(pp_get_table(str(tmp_path), "db.t"), sort_by=["dt", "id"])) == expected
    totals = {(e.partition, e.total_buckets) for e in t.manifests.live_entries(t.snapshot())}
    assert sorted(n for _, n in totals) == [3, 3]  # partition a kept pypaimon's count, b got the default


def test_both_engines_write_fixed_buckets_of_one_table_with_the_same_hash(tmp_path):
    """Fixed-bucket batch writes of both engines into one partition put each key in one bucket (pypaimon's read
    would show a key twice otherwise), and pypaimon reads lakemerge's postponed-then-compacted data."""
    from engine import Catalog
    pp = pp_table(tmp_path, {"postpone.default-bucket-num": "4"})
    pp_write_fixed_bucket(pp, rows("a", range(40), "pp-"), SCHEMA)
    t = Catalog(str(tmp_path)).get_table("db.t")
    t.write(rows("a", range(20, 60), "lm-"))
    pp_write_fixed_bucket(pp_get_table(str(tmp_path), "db.t"), rows("a", range(50, 70), "pp2-"), SCHEMA)
    lm_post = Catalog(str(tmp_path)).get_table("db.t")
    lm_post.alter().set_option("postpone.batch-write-fixed-bucket", "false").commit()
    lm_post.write(rows("b", [1, 2], "lmp-"))
    lm_post.compact()
    expected = sorted([("a", i, f"pp-{i}") for i in range(20)] + [("a", i, f"lm-{i}") for i in range(20, 50)]
                      + [("a", i, f"pp2-{i}") for i in range(50, 70)] + [("b", 1, "lmp-1"), ("b", 2, "lmp-2")])
    assert as_rows(pp_read(pp_get_table(str(tmp_path), "db.t"), sort_by=["dt", "id"])) == expected
    assert as_rows(lm_post.read()) == expected


def test_streaming_full_read_gives_postponed_records_in_commit_order(tmp_path):
    """Paimon's postpone writers number every file's records from 0 (PostponeBucketWriter.maxSequenceNumber is 0),
    so only the order the snapshots added the files orders them: a streaming full read must give the updates of a
    key in commit order, or a consumer applying them keeps a stale value."""
    from engine import Catalog
    pp_table(tmp_path)
    for i in range(5):
        pp_write(pp_get_table(str(tmp_path), "db.t"), rows("a", [1], f"w{i}-"), SCHEMA)
    t = Catalog(str(tmp_path)).get_table("db.t")
    full = pa.Table.from_batches(list(t.stream("latest-full", idle_timeout=0)))
    assert [r["v"] for r in full.to_pylist()] == [f"w{i}-1" for i in range(5)]


def test_pypaimon_streams_lakemerge_postponed_avro_files(tmp_path):
    """lakemerge's postponed files are Avro as Paimon writes them (PostponeBucketFileStoreWrite): pypaimon's
    streaming read of the APPEND snapshot reads them as stored (row kinds kept, unmerged); then pypaimon reads
    lakemerge's compaction of them."""
    from engine import Catalog
    pp_table(tmp_path, {"postpone.batch-write-fixed-bucket": "false", "postpone.default-bucket-num": "2"})
    t = Catalog(str(tmp_path)).get_table("db.t")
    t.write(rows("a", [1], "first-"))
    rb = pp_get_table(str(tmp_path), "db.t").new_stream_read_builder()
    plans = rb.new_streaming_scan().stream_sync()
    next(plans)  # the initial full plan (real buckets only)
    t.write(rows("a", [1, 2, 3], "x"))
    t.delete(pa.table({"dt": ["a"], "id": [2]}))
    assert [f.file_name.rsplit(".", 1)[1] for e in t.manifests.live_entries(t.snapshot()) for f in [e.file]] == [
        "avro"] * 3
    got = []
    for _ in range(2):
        got += sorted((r["id"], r["v"] or "") for r in rb.new_read().to_arrow(next(plans).splits()).to_pylist())
    assert got == [(1, "x1"), (2, "x2"), (3, "x3"), (2, "")]
    t.compact()
    expected = [("a", 1, "x1"), ("a", 3, "x3")]
    assert as_rows(pp_read(pp_get_table(str(tmp_path), "db.t"), sort_by=["dt", "id"])) == expected
    assert as_rows(t.read()) == expected


def test_merge_on_read_of_pypaimon_postponed_files_equals_the_compacted_table(tmp_path):
    """postpone.merge-on-read (Paimon 2.0): lakemerge's batch read of pypaimon's postponed (avro) files merged with
    its real buckets gives the rows the postpone compaction then writes, which pypaimon reads back. pypaimon 2.1
    does not know the option and reads real buckets only before the compaction (not Paimon's behaviour)."""
    from engine import Catalog
    pp = pp_table(tmp_path, {"postpone.default-bucket-num": "3", "postpone.merge-on-read": "true"})
    pp_write_fixed_bucket(pp, rows("a", [1, 2, 3], "fix-"), SCHEMA)
    pp_write(pp, rows("a", [2, 4], "post1-"), SCHEMA)
    pp_write(pp, rows("b", [1], "post1-"), SCHEMA)
    pp_write(pp, rows("a", [4, 5], "post2-"), SCHEMA)
    t = Catalog(str(tmp_path)).get_table("db.t")
    expected = [("a", 1, "fix-1"), ("a", 2, "post1-2"), ("a", 3, "fix-3"), ("a", 4, "post2-4"), ("a", 5, "post2-5"),
                ("b", 1, "post1-1")]
    assert as_rows(t.read()) == expected
    assert as_rows(pp_read(pp_get_table(str(tmp_path), "db.t"), sort_by=["dt", "id"])) == [
        ("a", 1, "fix-1"), ("a", 2, "fix-2"), ("a", 3, "fix-3")]  # pypaimon 2.1: real buckets only
    t.compact()
    assert as_rows(t.read()) == expected
    assert as_rows(pp_read(pp_get_table(str(tmp_path), "db.t"), sort_by=["dt", "id"])) == expected
