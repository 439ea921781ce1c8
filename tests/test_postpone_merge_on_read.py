"""``postpone.merge-on-read = true`` (Paimon 2.0: PostponeMergeReadBuilder, MergeFileSplitRead
.createPostponeMergeReader): batch reads of a postpone table merge the postponed records in as the postpone
compaction would place them -- newer than every real-bucket record of their bucket, in commit order among
themselves. The oracle is the table itself after that compaction: the same rows before and after it, for every
merge engine, with filters, time travel and ``to_reader``."""
from __future__ import annotations

import random

import pyarrow as pa
import pytest

from engine.errors import UnsupportedFeature
from engine.postpone import POSTPONE_BUCKET
from engine.postpone.write import FixedBucketPostponeWrite, PostponedWrite

SCHEMA = pa.schema([("dt", pa.string()), ("id", pa.int64()), ("v", pa.int64()), ("s", pa.string())])
ENGINES = {
    "deduplicate": {},
    "partial-update": {},
    "aggregation": {"fields.v.aggregate-function": "sum", "fields.s.aggregate-function": "last_non_null_value"},
    "first-row": {},
}


def rows(dt, ids, v, s=None):
    n = len(ids)
    return pa.table({"dt": [dt] * n, "id": list(ids), "v": [v] * n if not isinstance(v, list) else v,
                     "s": [s] * n}, schema=SCHEMA)


def make(catalog, engine="deduplicate", name="db.t", **options):
    return catalog.create_table(name, SCHEMA, ["dt", "id"], ["dt"], options={
        "bucket": "-2", "postpone.merge-on-read": "true", "postpone.default-bucket-num": "3", "merge-engine": engine,
        **ENGINES[engine], **options})


def write(t, data, kinds=None, *, postpone: bool):
    cls = PostponedWrite if postpone else FixedBucketPostponeWrite
    with cls(t) as w:
        w.write(data, row_kinds=kinds)
        return t.commit(w.prepare_commit())


def as_rows(table: pa.Table) -> list[tuple]:
    return sorted(tuple(r.values()) for r in table.to_pylist())


def postponed_files(t) -> int:
    return sum(1 for e in t.manifests.live_entries(t.snapshot()) if e.bucket == POSTPONE_BUCKET)


def _history(t, engine: str, seed: int) -> None:
    """Real-bucket and postponed commits on partitions 'a' (it gets real buckets first) and 'b' (postponed only),
    overlapping keys, nulls for partial updates, and deletes where the engine takes them."""
    rng = random.Random(seed)
    deletes = engine == "deduplicate"
    write(t, rows("a", range(0, 40), 1, "r1"), postpone=False)
    for step in range(6):
        dt = rng.choice("ab")
        ids = sorted(rng.sample(range(60), 15))
        data = rows(dt, ids, step + 2, None if (engine == "partial-update" and step % 2) else f"s{step}")
        postpone = rng.random() < 0.7 or dt == "b"
        kinds = None
        if deletes and step % 3 == 2:
            kinds = ["-D" if i % 4 == 0 else "+I" for i in ids]
        write(t, data, kinds, postpone=postpone)


@pytest.mark.parametrize("engine,options", [(e, {}) for e in ENGINES] + [
    ("deduplicate", {"deletion-vectors.enabled": "true"}),
    ("deduplicate", {"sequence.field": "v"}),
    ("deduplicate", {"changelog-producer": "lookup"})])
@pytest.mark.parametrize("seed", [1, 2])
def test_a_merged_read_equals_the_read_after_the_postpone_compaction(catalog, engine, options, seed):
    t = make(catalog, engine, **options)
    _history(t, engine, seed)
    assert postponed_files(t) > 0
    before_id = t.latest_snapshot_id()
    merged = as_rows(t.read())
    filtered = {
        "v": as_rows(t.read(filter=("v", ">=", 4))),
        "key": as_rows(t.read(filter=[("dt", "=", "a"), ("id", "in", [0, 5, 17, 33, 59])])),
        "b": as_rows(t.read(filter=("dt", "=", "b"))),
    }
    streamed = as_rows(t.to_reader(batch_size=7).read_all())
    t.compact()
    assert postponed_files(t) == 0
    after = as_rows(t.read())
    assert merged == after and streamed == after
    assert filtered["v"] == [r for r in after if r[2] is not None and r[2] >= 4]
    assert filtered["key"] == [r for r in after if r[0] == "a" and r[1] in (0, 5, 17, 33, 59)]
    assert filtered["b"] == [r for r in after if r[0] == "b"]
    assert as_rows(t.read(snapshot_id=before_id)) == merged  # time travel merges that snapshot's postponed records


def test_postponed_records_win_over_real_records_and_keep_their_commit_order(catalog):
    t = make(catalog)
    write(t, rows("a", [1, 2], 10, "real"), postpone=False)
    write(t, rows("a", [1], 20, "p1"), postpone=True)
    write(t, rows("a", [1, 3], 30, "p2"), postpone=True)
    write(t, rows("a", [2], 40, "real-later"), postpone=False)  # committed later, but postponed records still win
    write(t, rows("a", [2], 50, "p3"), ["-D"], postpone=True)
    assert as_rows(t.read()) == [("a", 1, 30, "p2"), ("a", 3, 30, "p2")]
    t.alter().set_option("postpone.merge-on-read", "false").commit()
    assert as_rows(t.read()) == [("a", 1, 10, "real"), ("a", 2, 40, "real-later")]  # real buckets only
    t.alter().set_option("postpone.merge-on-read", "true").commit()
    t.compact()
    assert as_rows(t.read()) == [("a", 1, 30, "p2"), ("a", 3, 30, "p2")]


def test_a_partition_with_only_postponed_records_and_the_plan(catalog):
    t = make(catalog)
    write(t, rows("b", [5, 6], 1, "x"), postpone=True)
    write(t, rows("b", [6], 2, "y"), postpone=True)
    assert as_rows(t.read()) == [("b", 5, 1, "x"), ("b", 6, 2, "y")]
    write(t, rows("a", [1], 1, "r"), postpone=False)
    write(t, rows("a", [7, 8, 9], 2, "p"), postpone=True)
    from engine.read.split_read import batch_read_splits
    splits = [sp for sp in batch_read_splits(t.plan(), t.schema) if sp.partition_values == ("a",)]
    # every bucket of 'a' (count 3) may receive postponed records, each split carries them all
    assert [sp.bucket for sp in splits] == [0, 1, 2]
    assert all(len(sp.postponed.files) == 1 for sp in splits)
    assert as_rows(t.read(filter=("dt", "=", "a"))) == [("a", 1, 1, "r"), ("a", 7, 2, "p"), ("a", 8, 2, "p"),
                                                        ("a", 9, 2, "p")]


def test_a_read_decodes_each_postponed_file_once(catalog, monkeypatch):
    """Every bucket of a partition merges its postponed records; their files are decoded once per read, not once
    per bucket (``read`` and ``to_reader``)."""
    from engine.read.split_read import SplitReader
    t = make(catalog)
    write(t, rows("a", range(20), 1, "r"), postpone=False)
    write(t, rows("a", range(10, 30), 2, "p1"), postpone=True)
    write(t, rows("a", range(25, 40), 3, "p2"), postpone=True)
    assert postponed_files(t) == 2
    expected = as_rows(t.read())
    real, decoded = SplitReader.read_file, []

    def spy(self, split, meta, columns, **kw):
        if split.bucket == POSTPONE_BUCKET:
            decoded.append(meta.file_name)
        return real(self, split, meta, columns, **kw)
    monkeypatch.setattr(SplitReader, "read_file", spy)
    assert as_rows(t.read()) == expected and sorted(decoded) == sorted(set(decoded)) and len(decoded) == 2
    decoded.clear()
    assert as_rows(pa.Table.from_batches(list(t.to_reader()))) == expected and len(decoded) == 2


def test_lookups_are_refused_as_paimon_refuses_them(catalog):
    t = make(catalog)
    write(t, rows("a", [1], 1, "x"), postpone=True)
    with pytest.raises(UnsupportedFeature, match="lookups of a postpone.merge-on-read table"):
        t.lookup(pa.table({"dt": ["a"], "id": [1]}))


def test_deletion_vector_level_0_real_files_are_merged_as_paimon_merges_them(catalog):
    """Paimon's PostponeMergeReadBuilder plans real buckets with a plain snapshot reader (no level filter): unlike an
    ordinary deletion-vector batch scan, its merge-on-read sees real-bucket level-0 files (here left by write-only
    fixed-bucket writes) -- and the rows equal those after the postpone compaction."""
    t = make(catalog, **{"deletion-vectors.enabled": "true", "write-only": "true"})
    write(t, rows("a", [1, 2, 3], 1, "r"), postpone=False)
    write(t, rows("b", [1], 1, "r"), postpone=False)  # a partition without postponed records
    write(t, rows("a", [2], 2, "p"), postpone=True)
    assert {e.file.level for e in t.manifests.live_entries(t.snapshot()) if e.bucket >= 0} == {0}
    expected = [("a", 1, 1, "r"), ("a", 2, 2, "p"), ("a", 3, 1, "r"), ("b", 1, 1, "r")]
    assert as_rows(t.read()) == expected
    assert as_rows(t.to_reader().read_all()) == expected
    t.compact()
    assert as_rows(t.read()) == expected
