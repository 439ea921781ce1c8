"""Compaction of tables: write-triggered, full, dedicated; COMPACT snapshots; conflicts."""
from __future__ import annotations

import os
import random

import pyarrow as pa
import pytest

from engine import Catalog
from engine.compact.manager import compact_table
from engine.errors import CommitConflict, InvalidInput
from engine.meta.manifest import ADD, DELETE

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])


def _table(tmp_path, options=None, name="db.t", schema=SCHEMA, pk=("id",), partition_keys=()):
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db", ignore_if_exists=True)
    opts = {"bucket": "1"}
    opts.update(options or {})
    return cat.create_table(name, schema, primary_key=list(pk), partition_keys=list(partition_keys), options=opts)


def _rows(ids, tag):
    return pa.table({"id": pa.array(ids, pa.int64()), "v": [f"{tag}{i}" for i in ids]})


def _levels(t, snapshot_id=None):
    return sorted(f.level for sp in t.plan(snapshot_id) for f in sp.files)


def _delta(t, sid):
    snap = t.snapshot(sid)
    return [(e.kind, e.file.file_name, e.file.level)
            for m in t.manifests.manifest_list(snap.delta_manifest_list) for e in t.manifests.manifest(m.file_name)]


def _sorted(t, sid=None):
    return t.read(sid).sort_by("id").to_pylist()


def test_fifth_write_compacts_to_the_max_level_in_a_compact_snapshot(tmp_path):
    t = _table(tmp_path)
    for i in range(4):
        assert t.write(_rows(range(i * 3, i * 3 + 5), f"w{i}-")) == i + 1
    assert _levels(t) == [0, 0, 0, 0]
    sid = t.write(_rows(range(12, 17), "w4-"))
    kinds = [s.commit_kind for s in t.snapshots()]
    assert sid == 6 and kinds == ["APPEND"] * 5 + ["COMPACT"]
    assert _levels(t) == [5]
    assert _sorted(t, 5) == _sorted(t, 6)
    delta = _delta(t, 6)
    assert sorted(k for k, _, _ in delta) == [ADD] + [DELETE] * 5
    assert {lvl for k, _, lvl in delta if k == DELETE} == {0}
    snap5, snap6 = t.snapshot(5), t.snapshot(6)
    assert snap6.commit_identifier == snap5.commit_identifier and snap6.commit_user == snap5.commit_user
    assert snap6.total_record_count == 17 and snap6.delta_record_count == 17 - snap5.total_record_count


def test_full_compaction_rewrites_each_bucket_to_one_top_level_run_and_drops_deletes(tmp_path):
    t = _table(tmp_path, {"bucket": "3", "write-only": "true"})
    t.write(_rows(range(100), "a"))
    t.write(_rows(range(50, 150), "b"))
    t.delete(pa.table({"id": pa.array(range(0, 150, 7), pa.int64())}))
    before = _sorted(t)
    sid = t.compact(full=True)
    assert t.snapshot(sid).commit_kind == "COMPACT"
    assert _sorted(t) == before
    for sp in t.plan():
        assert {f.level for f in sp.files} == {5}
        assert all(f.delete_row_count == 0 for f in sp.files)
        assert sum(f.row_count for f in sp.files) == sp.row_count
    assert sum(sp.row_count for sp in t.plan()) == len(before)
    assert t.compact(full=True) is None  # already one top-level run per bucket


def test_a_big_file_alone_is_upgraded_by_metadata_only(tmp_path):
    t = _table(tmp_path, {"target-file-size": "64 kb", "compaction.small-file-ratio": "0.01", "write-only": "true"})
    t.write(_rows(range(500), "x"))
    (f0,) = t.plan()[0].files
    sid = t.compact(full=True)
    (f1,) = t.plan()[0].files
    assert f1.file_name == f0.file_name and (f0.level, f1.level) == (0, 5)
    assert sorted(_delta(t, sid)) == [(ADD, f0.file_name, 5), (DELETE, f0.file_name, 0)]
    assert _sorted(t, 1) == _sorted(t, sid)


def test_a_file_with_deletes_is_rewritten_not_upgraded_to_the_max_level(tmp_path):
    t = _table(tmp_path, {"target-file-size": "64 kb", "compaction.small-file-ratio": "0.01", "write-only": "true"})
    t.write(_rows(range(500), "x"), row_kinds=["+I"] * 499 + ["-D"])
    (f0,) = t.plan()[0].files
    assert f0.delete_row_count == 1
    t.compact(full=True)
    files = t.plan()[0].files
    assert f0.file_name not in {f.file_name for f in files} and all(f.delete_row_count == 0 for f in files)
    assert t.read().num_rows == 499


def test_write_only_writers_pile_up_runs_and_a_dedicated_compaction_picks(tmp_path):
    t = _table(tmp_path, {"write-only": "true"})
    for i in range(7):
        t.write(_rows(range(i, i + 10), f"w{i}-"))
    assert _levels(t) == [0] * 7 and all(s.commit_kind == "APPEND" for s in t.snapshots())
    before = _sorted(t)
    sid = t.compact()
    assert t.snapshot(sid).commit_kind == "COMPACT" and _levels(t) == [5]
    assert _sorted(t) == before
    assert t.compact() is None


def test_stop_trigger_makes_the_writer_compact_while_flushing(tmp_path):
    opts = {"num-sorted-run.compaction-trigger": "2", "num-sorted-run.stop-trigger": "3", "write-buffer-size": "1 b"}
    t = _table(tmp_path, opts)
    t.write(_rows(range(5), "base"))
    with t.new_write() as w:
        for i in range(8):
            w.write(_rows(range(i * 2, i * 2 + 4), f"b{i}-"))
            bc = next(iter(w._compactions.values()))
            assert bc.sorted_runs() <= 3 + 1
        messages = w.prepare_commit()
    (m,) = messages
    assert len(m.new_files) == 8 and m.compact_before and m.compact_after
    t.commit(messages)
    assert len(t.plan()[0].files) <= 4
    expected = {i: "base" + str(i) for i in range(5)}
    for i in range(8):
        expected.update({j: f"b{i}-{j}" for j in range(i * 2, i * 2 + 4)})
    assert {r["id"]: r["v"] for r in _sorted(t)} == expected


def test_full_compaction_delta_commits_compacts_every_n_commits(tmp_path):
    t = _table(tmp_path, {"full-compaction.delta-commits": "3", "num-sorted-run.compaction-trigger": "50"})
    for ident in range(1, 7):
        with t.new_write(commit_user="job", commit_identifier=ident) as w:
            w.write(_rows(range(ident, ident + 4), f"c{ident}-"))
            t.commit(w.prepare_commit())
    compacts = [s.commit_identifier for s in t.snapshots() if s.commit_kind == "COMPACT"]
    assert compacts == [3, 6]
    assert _levels(t) == [50]  # num-levels defaults to trigger + 1
    # batch commits (identifier Long.MAX_VALUE) fully compact every time, as Paimon's batch writers do
    t.write(_rows([100], "z"))
    assert _levels(t) == [50] and t.snapshots()[-1].commit_kind == "COMPACT"


def test_compact_limited_to_partitions(tmp_path):
    schema = pa.schema([("p", pa.string()), ("id", pa.int64()), ("v", pa.string())])
    t = _table(tmp_path, {"bucket": "2", "write-only": "true"}, schema=schema, pk=("p", "id"), partition_keys=("p",))
    for i in range(3):
        t.write(pa.table({"p": ["a", "b"] * 10, "id": list(range(20)), "v": [f"{i}"] * 20}))
    t.compact(full=True, partitions=[{"p": "a"}])
    by_part = {}
    for sp in t.plan():
        by_part.setdefault(sp.partition_values[0], set()).update(f.level for f in sp.files)
    assert by_part == {"a": {5}, "b": {0}}
    with pytest.raises(InvalidInput, match="not a partition key"):
        t.compact(partitions=[{"id": 1}])


def test_compaction_whose_inputs_were_removed_aborts_cleanly_and_can_be_retried(tmp_path):
    t = _table(tmp_path, {"write-only": "true", "bucket": "2"})
    for i in range(3):
        t.write(_rows(range(i * 10, i * 10 + 30), f"w{i}-"))
    first = compact_table(t, full=True)
    second = compact_table(t, full=True)
    written = [f.file_name for m in second for f in m.compact_after]
    bucket_dirs = {m.bucket: t.bucket_dir(m.partition_values, m.bucket) for m in second}
    assert all(os.path.exists(os.path.join(bucket_dirs[m.bucket], f.file_name))
               for m in second for f in m.compact_after)
    sid = t.commit(first)
    with pytest.raises(CommitConflict, match="deletion conflicts"):
        t.commit(second)
    assert t.latest_snapshot_id() == sid
    assert not any(os.path.exists(os.path.join(bucket_dirs[m.bucket], f.file_name))
                   for m in second for f in m.compact_after), written
    before = _sorted(t)
    t.write(_rows(range(5), "new"))
    assert t.compact(full=True) is not None  # a retry plans from the new latest snapshot
    assert _sorted(t)[5:] == before[5:]


def test_appends_racing_a_compaction_lose_nothing(tmp_path):
    t = _table(tmp_path, {"write-only": "true", "bucket": "2"})
    for i in range(4):
        t.write(_rows(range(i * 10, i * 10 + 20), f"w{i}-"))
    with t.new_write() as w:  # prepared against the pre-compaction snapshot
        w.write(_rows(range(15, 60), "late-"))
        messages = w.prepare_commit()
    t.compact(full=True)
    t.commit(messages)
    got = {r["id"]: r["v"] for r in _sorted(t)}
    assert got == {**{i: f"w{min(i // 10, 3) if i < 15 else 0}-{i}" for i in range(15)},
                   **{i: f"late-{i}" for i in range(15, 60)}}


def test_a_writers_own_compaction_losing_a_race_still_commits_its_data(tmp_path, caplog):
    t = _table(tmp_path, {"num-sorted-run.compaction-trigger": "2"})
    t.write(_rows(range(10), "a"))
    with t.new_write() as w:
        w.write(_rows(range(5, 15), "b"))
        messages = w.prepare_commit()
    assert messages[0].compact_before
    t.compact(full=True)  # a dedicated compactor takes the same input files first
    sid = t.commit(messages)
    assert t.snapshot(sid).commit_kind == "APPEND"
    assert "compaction was dropped" in caplog.text
    assert {r["id"]: r["v"] for r in _sorted(t)} == {**{i: f"a{i}" for i in range(5)},
                                                      **{i: f"b{i}" for i in range(5, 15)}}
    names = {f.file_name for m in messages for f in m.compact_after} - {f.file_name for m in messages
                                                                         for f in m.compact_before}
    assert not any(os.path.exists(os.path.join(t.bucket_dir((), 0), n)) for n in names)


def test_overlapping_files_in_a_level_above_zero_are_refused(tmp_path):
    from dataclasses import replace
    t = _table(tmp_path, {"write-only": "true"})
    t.write(_rows(range(10), "a"))
    t.write(_rows(range(5, 15), "b"))
    files = t.plan()[0].files
    (m,) = compact_table(t, full=True)
    bad = replace(m, compact_before=files, compact_after=tuple(f.upgrade(1) for f in files))
    with pytest.raises(CommitConflict, match="LSM conflicts"):
        t.commit([bad])
    assert _levels(t) == [0, 0]


def test_compaction_messages_commit_exactly_once(tmp_path):
    import pickle
    t = _table(tmp_path, {"write-only": "true"})
    for i in range(3):
        t.write(_rows(range(i, i + 5), "x"))
    messages = compact_table(t, full=True)
    sid = t.commit(messages)
    assert t.commit(pickle.loads(pickle.dumps(messages))) == sid
    assert len(t.snapshots()) == 4


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_streaming_merge_in_small_batches_equals_the_read(tmp_path, seed):
    """Many files per level, composite string keys, tiny read batches: the streamed compaction keeps every row."""
    rnd = random.Random(seed)
    schema = pa.schema([("k1", pa.string()), ("k2", pa.int32()), ("v", pa.int64())])
    t = _table(tmp_path, {"write-only": "true", "target-file-size": "2 kb", "compaction.read-batch-rows": "7",
                          "bucket": "2"}, schema=schema, pk=("k1", "k2"))
    for c in range(6):
        n = rnd.randrange(50, 300)
        data = pa.table({"k1": [rnd.choice("abcde") * rnd.randrange(1, 4) for _ in range(n)],
                         "k2": pa.array([rnd.randrange(40) for _ in range(n)], pa.int32()),
                         "v": [c * 1000 + i for i in range(n)]})
        kinds = [rnd.choice(["+I", "+I", "+U", "-D"]) for _ in range(n)]
        t.write(data, row_kinds=kinds)
        if c == 3:
            t.compact()
            t.compact(full=True)
    expected = t.read().sort_by([("k1", "ascending"), ("k2", "ascending")])
    t.compact(full=True)
    assert t.read().sort_by([("k1", "ascending"), ("k2", "ascending")]).equals(expected)
    for sp in t.plan():
        assert {f.level for f in sp.files} == {5} and len(sp.files) >= 1


def test_compaction_merges_bounded_batches_not_whole_buckets(tmp_path, monkeypatch):
    """Each merge during compaction sees at most one read batch per input run, whatever the bucket size."""
    import engine.compact.rewriter as rw
    seen = []
    real = rw.merge_runs

    def spy(runs, schema, **kw):
        seen.append(sum(r.num_rows for r in runs))
        return real(runs, schema, **kw)

    monkeypatch.setattr(rw, "merge_runs", spy)
    t = _table(tmp_path, {"write-only": "true", "compaction.read-batch-rows": "50"})
    for i in range(4):
        t.write(_rows(range(i * 500, i * 500 + 1500), f"w{i}-"))
    expected = _sorted(t)
    t.compact(full=True)
    assert _sorted(t) == expected
    assert len(seen) > 20 and max(seen) <= 4 * 50


def test_a_writer_whose_compaction_inputs_vanished_still_commits(tmp_path, caplog):
    t = _table(tmp_path, {"num-sorted-run.compaction-trigger": "2"})
    t.write(_rows(range(10), "a"))
    with t.new_write() as w:
        w.write(_rows(range(5, 15), "b"))
        (old,) = t.plan()[0].files
        os.rename(os.path.join(t.bucket_dir((), 0), old.file_name), str(tmp_path / "aside"))
        messages = w.prepare_commit()  # its compaction cannot read the old file
        os.rename(str(tmp_path / "aside"), os.path.join(t.bucket_dir((), 0), old.file_name))
    assert "compaction of" in caplog.text and not messages[0].compact_before
    t.commit(messages)
    assert {r["id"]: r["v"] for r in _sorted(t)} == {**{i: f"a{i}" for i in range(5)},
                                                      **{i: f"b{i}" for i in range(5, 15)}}


def test_a_failing_bucket_aborts_the_whole_compaction_and_leaves_no_files(tmp_path):
    from engine.errors import CorruptFile
    t = _table(tmp_path, {"write-only": "true", "bucket": "2"})
    for i in range(3):
        t.write(_rows(range(i * 10, i * 10 + 30), f"w{i}-"))
    before = {d: sorted(os.listdir(os.path.join(t.root, d))) for d in ("bucket-0", "bucket-1")}
    victim = next(f for sp in t.plan() if sp.bucket == 1 for f in sp.files)
    path = os.path.join(t.root, "bucket-1", victim.file_name)
    with open(path, "r+b") as f:  # truncate: the size no longer matches the manifest
        f.truncate(victim.file_size // 2)
    sid = t.latest_snapshot_id()
    with pytest.raises(CorruptFile):
        t.compact(full=True)
    assert t.latest_snapshot_id() == sid
    assert {d: sorted(os.listdir(os.path.join(t.root, d))) for d in ("bucket-0", "bucket-1")} == before
