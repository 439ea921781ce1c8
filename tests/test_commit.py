"""Commit protocol: atomic publish, exactly-once, concurrent committers from several processes."""
from __future__ import annotations

import multiprocessing as mp
import os
import pickle

import pyarrow as pa
import pytest

from engine import Catalog
from engine.errors import CommitConflict, CommitRetriesExhausted

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def _table(tmp_path, name="db.t", options=None):
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db", ignore_if_exists=True)
    return cat.create_table(name, SCHEMA, primary_key=["id"], options=options or {"bucket": "2"})


def test_same_messages_committed_twice_apply_once(tmp_path):
    t = _table(tmp_path)
    t.write(pa.table({"id": [1], "v": ["a"]}))
    with t.new_write() as w:
        w.write(pa.table({"id": [2, 3], "v": ["b", "c"]}))
        messages = w.prepare_commit()
    first = t.commit(messages)
    again = t.commit(pickle.loads(pickle.dumps(messages)))  # e.g. a retried Spark driver commit
    assert first == again == 2
    assert [s.id for s in t.snapshots()] == [1, 2]
    assert t.read().num_rows == 3


def test_retried_commit_is_detected_after_other_commits(tmp_path):
    t = _table(tmp_path)
    with t.new_write(commit_user="job-7", commit_identifier=1) as w:
        w.write(pa.table({"id": [1], "v": ["a"]}))
        messages = w.prepare_commit()
    sid = t.commit(messages)
    t.write(pa.table({"id": [2], "v": ["b"]}))
    assert t.commit(messages) == sid
    assert len(t.snapshots()) == 2


@pytest.mark.parametrize("overwrite", [False, True], ids=["append", "overwrite"])
def test_replay_of_messages_written_on_an_empty_table_applies_once(tmp_path, overwrite):
    """Messages written when the table had no snapshot carry no base snapshot: a replay of their batch commit must
    still find it (every snapshot is looked at), not be taken for an empty batch commit, which is new each time."""
    t = _table(tmp_path)
    with t.new_write(commit_user="u") as w:
        w.write(pa.table({"id": [1], "v": ["a"]}))
        messages = w.prepare_commit()
    assert [m.base_snapshot_id for m in messages] == [None]
    commit = (lambda ms: t.commit_overwrite(ms, None)) if overwrite else t.commit
    assert commit(messages) == 1
    t.write(pa.table({"id": [2], "v": ["b"]}))
    assert commit(pickle.loads(pickle.dumps(messages))) == 1
    assert len(t.snapshots()) == 2 and sorted(t.read().column("id").to_pylist()) == [1, 2]


def test_a_stream_commit_is_replayed_when_the_user_has_a_later_one(tmp_path):
    """Paimon's FileStoreCommitImpl.filterCommitted: a stream's commit (its own identifiers, in order) landed when
    the user's newest snapshot has a greater identifier, even after its own snapshot expired."""
    t = _table(tmp_path)
    staged = {}
    for ident in (1, 2):
        with t.new_write(commit_user="stream", commit_identifier=ident) as w:
            w.write(pa.table({"id": [ident], "v": ["x"]}))
            staged[ident] = w.prepare_commit()
        t.commit(staged[ident])
    t.write(pa.table({"id": [3], "v": ["y"]}))
    t.expire_snapshots(retain_min=1, retain_max=2)
    assert [s.id for s in t.snapshots()] == [2, 3]
    assert t.commit(pickle.loads(pickle.dumps(staged[1]))) == 2
    assert [s.id for s in t.snapshots()] == [2, 3] and t.read().num_rows == 3


def test_a_batch_commit_of_the_stream_user_does_not_hide_the_streams_next_commit(tmp_path):
    """A batch commit (identifier Long.MAX_VALUE) by a stream's commit user says nothing about the stream's
    progress: the stream's next commit still lands (Paimon's stream committer commits it; only its restore
    filters), instead of being taken for a replay and lost."""
    t = _table(tmp_path)
    t.write(pa.table({"id": [0], "v": ["a"]}))
    with t.new_write(commit_user="q", commit_identifier=1) as stream:
        stream.write(pa.table({"id": [2], "v": ["s"]}))
        with t.new_write(commit_user="q") as batch:
            batch.write(pa.table({"id": [1], "v": ["b"]}))
            assert t.commit(batch.prepare_commit()) == 2
        staged = stream.prepare_commit()
        assert t.commit(staged) == 3
    assert sorted(t.read().column("id").to_pylist()) == [0, 1, 2]
    t.write(pa.table({"id": [3], "v": ["c"]}))
    assert t.commit(pickle.loads(pickle.dumps(staged))) == 3  # the stream's replay is still found
    assert len(t.snapshots()) == 4 and t.read().num_rows == 4


@pytest.mark.parametrize("overwrite", [False, True], ids=["append", "overwrite"])
def test_empty_commits_replay_by_paimon_rules(tmp_path, overwrite):
    """An empty batch commit (no identifier: Paimon's BatchTableCommit, which never filters) is a new commit each
    time; an empty stream commit is a replay while the user's newest snapshot has its identifier or a greater one
    (FileStoreCommitImpl.filterCommitted)."""
    t = _table(tmp_path, options={"bucket": "2", "snapshot.ignore-empty-commit": "false"})


    def commit(**kw):  # the id it returns, and whether it published a snapshot
        if overwrite:  # an overwrite of nothing publishes only when there is something to delete
            t.write(pa.table({"id": [1], "v": ["a"]}))
        before = t.snapshot_manager.latest_id()
        sid = t.commit_overwrite([], None, **kw) if overwrite else t.commit([], **kw)
        return sid, t.snapshot_manager.latest_id() != before
    first, new = commit(commit_user="u")
    second, new2 = commit(commit_user="u")
    assert new and new2 and second > first
    s7, new = commit(commit_user="s", commit_identifier=7)
    s8, new8 = commit(commit_user="s", commit_identifier=8)
    assert new and new8 and s8 > s7
    assert commit(commit_user="s", commit_identifier=7) == (s8, False)  # replayed: s already committed 8
    assert commit(commit_user="s", commit_identifier=8) == (s8, False)
    assert commit(commit_user="s", commit_identifier=9)[1]
    if overwrite:  # a job that started before its commit finds it among the later snapshots
        assert t.commit_overwrite([], None, commit_user="u", base_snapshot_id=second - 1) == second


def test_empty_commit_publishes_nothing(tmp_path):
    t = _table(tmp_path)
    assert t.write(pa.table({"id": pa.array([], pa.int64()), "v": pa.array([], pa.string())})) is None
    assert t.snapshots() == []
    t.write(pa.table({"id": [1], "v": ["a"]}))
    assert t.write(pa.table({"id": pa.array([], pa.int64()), "v": pa.array([], pa.string())})) == 1


def test_publish_never_replaces_an_existing_snapshot(tmp_path):
    t = _table(tmp_path)
    t.write(pa.table({"id": [1], "v": ["a"]}))
    path = t.paths.snapshot(1)
    before = _read(path)
    assert t.file_io.write_if_absent(path, b"{}") is False
    assert _read(path) == before
    assert not [n for n in os.listdir(t.paths.snapshot_dir) if n.endswith(".tmp")]


def test_lost_race_retries_on_the_next_id(tmp_path, monkeypatch):
    """Another committer takes snapshot N between our read of LATEST and our publish."""
    t = _table(tmp_path)
    t.write(pa.table({"id": [1], "v": ["a"]}))
    other = Catalog(str(tmp_path / "wh")).get_table("db.t")
    with t.new_write() as w:
        w.write(pa.table({"id": [2], "v": ["b"]}))
        messages = w.prepare_commit()
    real = t.file_io.write_if_absent
    state = {"raced": False}

    def racing(path, data):
        if path.endswith("snapshot-2") and not state["raced"]:
            state["raced"] = True
            other.write(pa.table({"id": [3], "v": ["c"]}))  # wins snapshot 2
        return real(path, data)

    monkeypatch.setattr(t.file_io, "write_if_absent", racing)
    sid = t.commit(messages)
    assert sid == 3
    assert sorted(t.read().column("id").to_pylist()) == [1, 2, 3]
    manifests = set(os.listdir(t.paths.manifest_dir))
    referenced = set()
    for s in t.snapshots():
        referenced |= {s.base_manifest_list, s.delta_manifest_list}
        referenced |= {m.file_name for m in t.manifests.data_manifests(s)}
    assert manifests == referenced, "the losing attempt's manifest lists must be cleaned up"


def test_retries_exhausted_leaves_table_unchanged(tmp_path, monkeypatch):
    t = _table(tmp_path, options={"bucket": "1", "commit.max-retries": "2", "commit.min-retry-wait": "1 ms"})
    t.write(pa.table({"id": [1], "v": ["a"]}))
    files_before = {os.path.join(d, f) for d, _, fs in os.walk(t.root) for f in fs}
    monkeypatch.setattr(t.file_io, "write_if_absent", lambda path, data: False)
    with pytest.raises(CommitRetriesExhausted) as err:
        t.write(pa.table({"id": [2], "v": ["b"]}))
    assert "db.t" in str(err.value)
    monkeypatch.undo()
    files_after = {os.path.join(d, f) for d, _, fs in os.walk(t.root) for f in fs}
    assert files_after == files_before
    assert t.read().column("id").to_pylist() == [1]


def test_bucket_count_change_is_a_conflict(tmp_path):
    t = _table(tmp_path, options={"bucket": "2"})
    t.write(pa.table({"id": [1, 2, 3], "v": ["a", "b", "c"]}))
    with t.new_write() as w:
        w.write(pa.table({"id": [4], "v": ["d"]}))
        messages = w.prepare_commit()
    from dataclasses import replace
    bad = [replace(m, total_buckets=3) for m in messages]
    with pytest.raises(CommitConflict, match="Try to write table with a new bucket num 3, but the previous bucket num is 2"):
        t.commit(bad)
    assert t.read().num_rows == 3


def _commit_worker(args):
    warehouse, worker, commits = args
    t = Catalog(warehouse).get_table("db.t")
    acknowledged = []
    for i in range(commits):
        key = worker * 1000 + i
        sid = t.write(pa.table({"id": [key], "v": [f"w{worker}-{i}"]}))
        acknowledged.append((key, sid))
    return acknowledged


@pytest.mark.slow
def test_concurrent_processes_lose_no_acknowledged_commit(tmp_path):
    """pypaimon loses commits here (check-then-rename publish); lakemerge must not lose any."""
    t = _table(tmp_path, options={"bucket": "2", "commit.min-retry-wait": "1 ms", "commit.max-retries": "200"})
    warehouse = str(tmp_path / "wh")
    workers, commits = 4, 15
    ctx = mp.get_context("spawn")
    with ctx.Pool(workers) as pool:
        results = pool.map(_commit_worker, [(warehouse, w, commits) for w in range(workers)])
    acknowledged = [a for r in results for a in r]
    snaps = t.snapshots()
    assert [s.id for s in snaps] == list(range(1, len(snaps) + 1))
    assert sum(1 for s in snaps if s.commit_kind == "APPEND") == workers * commits  # plus writers' compactions
    assert len({sid for _, sid in acknowledged}) == workers * commits
    assert sorted(t.read().column("id").to_pylist()) == sorted(k for k, _ in acknowledged)
    for key, sid in acknowledged:  # each acknowledged commit is visible from its own snapshot on
        assert key in t.read(snapshot_id=sid).column("id").to_pylist()


def _ids(t):
    return sorted(t.read().column("id").to_pylist())


def test_rejected_replay_after_expiry_keeps_committed_files(tmp_path):
    """A replay whose first commit expired is rejected, but its files are live: they must stay."""
    t = _table(tmp_path, options={"bucket": "1", "write-only": "true", "snapshot.num-retained.min": "1",
                                  "snapshot.num-retained.max": "2"})
    with t.new_write(commit_user="job", commit_identifier=7) as w:
        w.write(pa.table({"id": [1, 2], "v": ["a", "b"]}))
        messages = w.prepare_commit()
    t.commit(messages)
    for i in range(3):
        t.write(pa.table({"id": [10 + i], "v": ["x"]}))
    t.expire_snapshots()
    assert t.snapshots()[0].id > 1
    with pytest.raises(CommitConflict):
        t.commit(messages)
    assert _ids(t) == [1, 2, 10, 11, 12] and t.check().ok



def test_replay_after_its_files_were_compacted_away_is_a_conflict(tmp_path):
    """A replay whose first commit expired and whose files a full compaction replaced: CommitConflict naming the
    missing file (not CorruptFile, which would send the user looking for damage); the table is unchanged."""
    t = _table(tmp_path, options={"bucket": "1", "snapshot.num-retained.min": "1", "snapshot.num-retained.max": "1",
                                  "snapshot.time-retained": "1 ms"})
    t.write(pa.table({"id": [1, 2], "v": ["a", "a"]}))
    with t.new_write(commit_user="job", commit_identifier=7) as w:
        w.write(pa.table({"id": [1, 3], "v": ["b", "b"]}))
        messages = w.prepare_commit()
    t.commit(messages)
    t.compact(full=True)
    t.write(pa.table({"id": [9], "v": ["c"]}))
    latest = t.latest_snapshot_id()
    with pytest.raises(CommitConflict, match="no longer exists"):
        t.commit(messages)
    assert t.latest_snapshot_id() == latest and _ids(t) == [1, 2, 3, 9] and t.check().ok


def test_replay_after_its_files_were_overwritten_is_refused(tmp_path):
    """A replay whose first commit expired, after an overwrite deleted its files (so no sequence overlap triggers
    a rewrite): refused with CommitConflict before publishing; it published a snapshot naming deleted files, and
    the table could not be read."""
    t = _table(tmp_path, options={"bucket": "2", "snapshot.num-retained.min": "1", "snapshot.num-retained.max": "1",
                                  "snapshot.time-retained": "1 ms"})
    with t.new_write(commit_user="job", commit_identifier=7) as w:
        w.write(pa.table({"id": [1, 2], "v": ["x", "x"]}))
        messages = w.prepare_commit()
    t.commit(messages)
    with t.new_write() as w:
        w.write(pa.table({"id": [3], "v": ["y"]}))
        replacement = w.prepare_commit()
    t.commit_overwrite(replacement)
    latest = t.latest_snapshot_id()
    for commit in (t.commit, t.commit_overwrite):
        with pytest.raises(CommitConflict, match="no longer exists"):
            commit(messages)
    assert t.latest_snapshot_id() == latest and _ids(t) == [3] and t.check().ok

def test_rejected_mixed_message_set_keeps_committed_files(tmp_path):
    t = _table(tmp_path, options={"bucket": "1"})
    with t.new_write() as w:
        w.write(pa.table({"id": [1, 2], "v": ["a", "b"]}))
        m1 = w.prepare_commit()
    t.commit(m1)
    with t.new_write() as w:
        w.write(pa.table({"id": [3], "v": ["c"]}))
        m2 = w.prepare_commit()
    with pytest.raises(CommitConflict):
        t.commit(m1 + m2)
    with pytest.raises(CommitConflict):
        t.commit_overwrite(m1 + m2)
    assert _ids(t) == [1, 2]
    report = t.check()
    assert report.ok and report.orphan_files == []  # m2's files, never committed, were deleted


def test_rejected_replay_of_a_compaction_keeps_its_committed_output(tmp_path):
    """Compaction messages replayed after their COMPACT snapshot expired are rejected; their output is live."""
    from engine.compact.manager import compact_table
    t = _table(tmp_path, options={"bucket": "1", "write-only": "true", "snapshot.num-retained.min": "1",
                                  "snapshot.num-retained.max": "1"})
    t.write(pa.table({"id": [1, 2], "v": ["a", "b"]}))
    t.write(pa.table({"id": [2, 3], "v": ["c", "d"]}))
    messages = compact_table(t, full=True)
    t.commit(messages)
    t.write(pa.table({"id": [4], "v": ["e"]}))
    t.expire_snapshots()
    with pytest.raises(CommitConflict):
        t.commit(messages)
    assert t.read().sort_by("id").column("v").to_pylist() == ["a", "c", "d", "e"] and t.check().ok
