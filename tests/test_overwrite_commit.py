"""OVERWRITE commits (issue 6): dynamic-partition and full-table overwrite in the engine committer."""
from __future__ import annotations

import pyarrow as pa
import pytest

from engine.errors import CommitConflict

SCHEMA = pa.schema([("p", pa.int32()), ("k", pa.int64()), ("v", pa.string())])


def _table(catalog, buckets="2"):
    t = catalog.create_table("db.t", SCHEMA, ["p", "k"], ["p"], {"bucket": buckets})
    t.write(pa.table({"p": pa.array([1, 1, 2, 2], pa.int32()), "k": [1, 2, 3, 4], "v": list("abcd")}))
    return t


def _staged(t, rows, **kw):
    with t.new_write(**kw) as w:
        w.write(rows)
        return w.prepare_commit()


def _rows(t, snapshot_id=None):
    return sorted((r["p"], r["k"], r["v"]) for r in t.read(snapshot_id).to_pylist())


def test_dynamic_overwrite_replaces_only_written_partitions(catalog):
    t = _table(catalog)
    sid = t.commit_overwrite(_staged(t, pa.table({"p": pa.array([1], pa.int32()), "k": [9], "v": ["z"]})),
                             "dynamic")
    assert _rows(t) == [(1, 9, "z"), (2, 3, "c"), (2, 4, "d")]
    snap = t.snapshot(sid)
    assert snap.commit_kind == "OVERWRITE"
    assert (snap.total_record_count, snap.delta_record_count) == (3, -1)
    assert _rows(t, 1) == [(1, 1, "a"), (1, 2, "b"), (2, 3, "c"), (2, 4, "d")]  # history kept


def test_full_overwrite_with_nothing_empties_the_table(catalog):
    t = _table(catalog)
    sid = t.commit_overwrite([], None, commit_user="u")
    assert _rows(t) == [] and t.snapshot(sid).total_record_count == 0
    # a batch overwrite of nothing identifies no earlier commit (Paimon's BatchTableCommit never filters): run
    # again after a write, it empties the table again; with the snapshot its job started from it is exactly once
    t.write(pa.table({"p": pa.array([1], pa.int32()), "k": [5], "v": ["e"]}))
    again = t.commit_overwrite([], None, commit_user="u")
    assert again == sid + 2 and _rows(t) == []
    assert t.commit_overwrite([], None, commit_user="u", base_snapshot_id=sid + 1) == again


def test_overwrite_listed_partitions(catalog):
    t = _table(catalog)
    msgs = _staged(t, pa.table({"p": pa.array([2], pa.int32()), "k": [7], "v": ["y"]}))
    t.commit_overwrite(msgs, [(2,)])
    assert _rows(t) == [(1, 1, "a"), (1, 2, "b"), (2, 7, "y")]
    # messages of one partition written with different bucket counts cannot land
    other = catalog.create_table("db.t4", SCHEMA, ["p", "k"], ["p"], {"bucket": "4"})
    m4 = _staged(other, pa.table({"p": pa.array([2], pa.int32()), "k": [8], "v": ["x"]}))
    fresh = _staged(t, pa.table({"p": pa.array([2], pa.int32()), "k": [6], "v": ["w"]}))
    mixed = [fresh[0], type(fresh[0])(**{**m4[0].__dict__, "commit_user": fresh[0].commit_user,
                                         "commit_identifier": fresh[0].commit_identifier})]
    with pytest.raises(CommitConflict):
        t.commit_overwrite(mixed, "dynamic")
    assert _rows(t) == [(1, 1, "a"), (1, 2, "b"), (2, 7, "y")]


@pytest.mark.interop
def test_pypaimon_reads_an_overwritten_table(catalog, warehouse):
    from tests.interop.pypaimon_util import pp_get_table, pp_read
    t = _table(catalog)
    t.commit_overwrite(_staged(t, pa.table({"p": pa.array([1], pa.int32()), "k": [9], "v": ["z"]})), "dynamic")
    got = pp_read(pp_get_table(warehouse, "db.t")).to_pylist()
    assert sorted((r["p"], r["k"], r["v"]) for r in got) == _rows(t)


def test_static_overwrite_rejects_rows_of_other_partitions(catalog):
    """As Paimon: overwriting partition p=2 with rows of p=1 is an error naming the table; nothing changes."""
    from engine.errors import InvalidInput
    t = _table(catalog)
    msgs = _staged(t, pa.table({"p": pa.array([1, 2], pa.int32()), "k": [9, 8], "v": ["z", "y"]}))
    with pytest.raises(InvalidInput, match=r"'db.t'.*partition \(1,\)"):
        t.commit_overwrite(msgs, [(2,)])
    assert t.latest_snapshot_id() == 1 and _rows(t) == [(1, 1, "a"), (1, 2, "b"), (2, 3, "c"), (2, 4, "d")]
    report = t.check()
    assert report.ok and report.orphan_files == []  # the rejected messages' files were deleted


def test_overwrite_commits_expire_snapshots(catalog):
    """Like any commit, an overwrite expires snapshots per the table's options (unless write-only)."""
    t = catalog.create_table("db.t", SCHEMA, ["p", "k"], ["p"], {"bucket": "1", "snapshot.num-retained.min": "1",
                                                                 "snapshot.num-retained.max": "2"})
    for i in range(5):
        t.commit_overwrite(_staged(t, pa.table({"p": pa.array([1], pa.int32()), "k": [i], "v": ["x"]})), [(1,)])
    assert [s.id for s in t.snapshots()] == [4, 5] and _rows(t) == [(1, 4, "x")]



def test_deletion_vector_overwrite_is_compacted_so_reads_see_it(catalog):
    """A deletion-vector read skips level-0 files and an overwrite publishes its files at level 0: lakemerge then
    compacts the partitions it wrote in a COMPACT snapshot, as Paimon commits the overwrite writer's compaction
    after the OVERWRITE (before, the overwritten partition read empty until some later compaction)."""
    opts = {"bucket": "2", "deletion-vectors.enabled": "true"}
    t = catalog.create_table("db.t", SCHEMA, ["p", "k"], ["p"], opts)
    t.write(pa.table({"p": pa.array([1, 1, 2, 3], pa.int32()), "k": [1, 2, 3, 4], "v": list("abcd")}))
    t.write(pa.table({"p": pa.array([1], pa.int32()), "k": [1], "v": ["a2"]}))
    before = t.latest_snapshot_id()
    sid = t.commit_overwrite(_staged(t, pa.table({"p": pa.array([1, 1, 2], pa.int32()), "k": [1, 9, 3],
                                                 "v": ["A", "Z", "C"]})), "dynamic")
    assert [s.commit_kind for s in t.snapshots() if s.id > before] == ["OVERWRITE", "COMPACT"]
    assert t.snapshot(sid).commit_kind == "OVERWRITE"
    assert _rows(t) == [(1, 1, "A"), (1, 9, "Z"), (2, 3, "C"), (3, 4, "d")]
    assert all(f.level > 0 for split in t.plan() for f in split.files)
    full = t.commit_overwrite(_staged(t, pa.table({"p": pa.array([5], pa.int32()), "k": [5], "v": ["e"]})))
    assert t.snapshot(full).commit_kind == "OVERWRITE" and _rows(t) == [(5, 5, "e")]


def _levels(t):
    return sorted((split.partition_values, split.bucket, f.level) for split in t.plan() for f in split.files)


@pytest.mark.parametrize("options", [{}, {"deletion-vectors.enabled": "true", "write-only": "true"}])
def test_overwrite_upgrades_new_files_to_the_top_level(catalog, options):
    """Paimon's FileStoreCommitImpl.tryUpgrade (overwrite-upgrade, default true): an overwrite without compaction
    commits each bucket's new files at num-levels - 1 when they do not overlap, so a write-only deletion-vector
    table reads them at once (before, they stayed at level 0, which its reads skip: the partition read empty)."""
    t = catalog.create_table("db.t", SCHEMA, ["p", "k"], ["p"], {"bucket": "1", **options})
    t.write(pa.table({"p": pa.array([1, 2], pa.int32()), "k": [1, 2], "v": ["a", "b"]}))
    new = pa.table({"p": pa.array([1, 1], pa.int32()), "k": [1, 9], "v": ["A", "Z"]})
    sid = t.commit_overwrite(_staged(t, new), "dynamic")
    assert t.snapshot(sid).commit_kind == "OVERWRITE" and t.latest_snapshot_id() == sid
    assert (((1,), 0, 5) in _levels(t)) and ((1,), 0, 0) not in _levels(t)  # 5 = trigger 5 + 1 levels - 1
    expect = [(1, 1, "A"), (1, 9, "Z")] + ([] if options else [(2, 2, "b")])  # write-only DV: p=2 waits at level 0
    assert _rows(t) == expect


def test_overwrite_keeps_level_0_for_overlapping_or_retracting_files_and_without_the_option(catalog):
    def table(name, **opts):
        t = catalog.create_table(name, SCHEMA, ["p", "k"], ["p"], {"bucket": "1", **opts})
        t.write(pa.table({"p": pa.array([1], pa.int32()), "k": [1], "v": ["a"]}))
        return t

    def staged(t, *batches):
        out = []
        for rows, kinds in batches:  # one writer per batch: files of the same bucket, same commit
            with t.new_write(commit_user="u", commit_identifier=7) as w:
                w.write(rows, kinds)
                out += w.prepare_commit()
        return out

    rows = pa.table({"p": pa.array([1, 1], pa.int32()), "k": [1, 5], "v": ["x", "y"]})
    more = pa.table({"p": pa.array([1], pa.int32()), "k": [3], "v": ["z"]})
    t = table("db.overlap")
    t.commit_overwrite(staged(t, (rows, None), (more, None)), "dynamic")  # [1, 5] and [3, 3] overlap
    assert _levels(t) == [((1,), 0, 0), ((1,), 0, 0)] and _rows(t) == [(1, 1, "x"), (1, 3, "z"), (1, 5, "y")]
    t = table("db.retract")
    t.commit_overwrite(staged(t, (rows, ["+I", "-D"])), "dynamic")
    assert _levels(t) == [((1,), 0, 0)] and _rows(t) == [(1, 1, "x")]
    t = table("db.off", **{"overwrite-upgrade": "false"})
    t.commit_overwrite(staged(t, (rows, None)), "dynamic")
    assert _levels(t) == [((1,), 0, 0)]
    t = table("db.disjoint")
    t.commit_overwrite(staged(t, (rows.slice(0, 1), None), (more, None)), "dynamic")  # [1, 1] and [3, 3]
    assert _levels(t) == [((1,), 0, 5), ((1,), 0, 5)] and _rows(t) == [(1, 1, "x"), (1, 3, "z")]


@pytest.mark.parametrize("error", ["conflict", "corrupt"])
def test_a_failed_compaction_after_a_deletion_vector_overwrite_leaves_the_overwrite_committed(catalog, error,
                                                                                           monkeypatch, caplog):
    import engine.compact.manager as manager
    from engine.errors import CorruptFile
    t = catalog.create_table("db.t", SCHEMA, ["p", "k"], ["p"], {"bucket": "1", "deletion-vectors.enabled": "true"})
    t.write(pa.table({"p": pa.array([1], pa.int32()), "k": [1], "v": ["a"]}))
    messages = _staged(t, pa.table({"p": pa.array([1], pa.int32()), "k": [2], "v": ["b"]}))

    def fail(table, **kw):
        if error == "conflict":
            raise CommitConflict(table.name, "a concurrent compaction")
        raise CorruptFile("some/data-file.parquet", "unreadable")
    monkeypatch.setattr(manager, "compact_table", fail)
    sid = t.commit_overwrite(messages, "dynamic")  # returns: the overwrite landed
    assert t.snapshot().id == sid and t.snapshot(sid).commit_kind == "OVERWRITE"
    assert "compaction after the overwrite failed" in caplog.text
    monkeypatch.undo()
    assert _rows(t) == [] and t.compact() is not None and _rows(t) == [(1, 2, "b")]  # level 0 until compacted
