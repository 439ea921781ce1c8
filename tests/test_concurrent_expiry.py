"""Commits, writers and expirations racing a concurrent expiration, each race forced deterministically.

The multi-process version of these races is tests/reliability/test_concurrent_writers.py::
test_expiry_racing_a_pinned_reader; here each interleaving is injected at the exact step where it bites.
"""
from __future__ import annotations

import os

import pyarrow as pa
import pytest

from engine import Catalog
from engine.errors import CommitOutcomeUnknown
from engine.maintenance import expire as expire_module

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])


def _table(tmp_path, options=None):
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db", ignore_if_exists=True)
    return cat.create_table("db.t", SCHEMA, primary_key=["id"], options=options or {"bucket": "2"})


def _other(tmp_path):
    """The same table opened by another process (no shared caches)."""
    return Catalog(str(tmp_path / "wh")).get_table("db.t")


def _commit_and_expire(other, rows: dict[int, str], times: int = 1) -> None:
    for _ in range(times):
        other.write(pa.table({"id": list(rows), "v": list(rows.values())}))
        expire_module.expire_snapshots(other, retain_min=1, retain_max=1, now_millis=2**62)


def _state(t) -> dict[int, str]:
    return {r["id"]: r["v"] for r in t.read().to_pylist()}


def _prepared(t, rows: dict[int, str]):
    with t.new_write() as w:
        w.write(pa.table({"id": list(rows), "v": list(rows.values())}))
        return w.prepare_commit()


def test_a_claim_of_an_expired_snapshot_id_is_withdrawn_and_retried(tmp_path, monkeypatch):
    """Our commit read snapshot 1; before it claims snapshot 2, others publish 2 and 3 and expire 1 and 2. Claiming
    ``snapshot-2`` then succeeds (the name is free again) but is off the table's history: readers follow 3, and the
    commit would be lost. It must be withdrawn and land as snapshot 4."""
    t = _table(tmp_path)
    t.write(pa.table({"id": [1], "v": ["a"]}))
    messages = _prepared(t, {2: "ours"})
    other = _other(tmp_path)
    real = t.file_io.write_if_absent
    raced = []

    def racing(path, data):
        if path.endswith("snapshot-2") and not raced:
            raced.append(path)
            _commit_and_expire(other, {3: "x"})      # snapshot 2, expires 1
            _commit_and_expire(other, {4: "y"})      # snapshot 3, expires 2: the name snapshot-2 is free again
            assert not os.path.exists(path)
        return real(path, data)

    monkeypatch.setattr(t.file_io, "write_if_absent", racing)
    assert t.commit(messages) == 4
    assert raced
    assert _state(_other(tmp_path)) == {1: "a", 2: "ours", 3: "x", 4: "y"}
    assert [s.id for s in t.snapshots()] == [3, 4]
    assert t.check().problems == []


def test_a_claim_followed_by_a_commit_on_it_and_expiry_of_its_base_stands(tmp_path, monkeypatch):
    """The legitimate look-alike: our snapshot 2 lands, another process commits 3 on it and expires 1 (our base)
    before our check runs. Snapshot 3 holds our files, so the claim stands (no retry, no duplicate)."""
    t = _table(tmp_path)
    t.write(pa.table({"id": [1], "v": ["a"]}))
    messages = _prepared(t, {2: "ours"})
    other = _other(tmp_path)
    real = t.file_io.write_if_absent

    def racing(path, data):
        won = real(path, data)
        if path.endswith("snapshot-2"):
            _commit_and_expire(other, {3: "x"})  # snapshot 3 built on ours; expires 1 and 2
        return won

    monkeypatch.setattr(t.file_io, "write_if_absent", racing)
    assert t.commit(messages) == 2
    assert _state(_other(tmp_path)) == {1: "a", 2: "ours", 3: "x"}
    assert [s.id for s in t.snapshots()] == [3]
    assert len([s for s in t.snapshots() if s.commit_user == messages[0].commit_user]) == 0  # ours expired


def test_a_stale_claim_without_new_files_is_reported_as_unknown(tmp_path, monkeypatch):
    """An overwrite that only deletes cannot be told from the snapshot it may have replaced: the committer says
    so (CommitOutcomeUnknown) instead of guessing."""
    t = _table(tmp_path)
    t.write(pa.table({"id": [1], "v": ["a"]}))
    other = _other(tmp_path)
    real = t.file_io.write_if_absent

    def racing(path, data):
        if path.endswith("snapshot-2"):
            _commit_and_expire(other, {3: "x"}, times=2)  # snapshots 2 and 3; 1 and 2 expired
        return real(path, data)

    monkeypatch.setattr(t.file_io, "write_if_absent", racing)
    with pytest.raises(CommitOutcomeUnknown, match="adds no file"):
        t.commit_overwrite([], commit_user="truncate", commit_identifier=1)


def test_commit_whose_newest_snapshot_expires_while_read_is_retried(tmp_path, monkeypatch):
    """Between reading the newest snapshot and reading its manifests, others commit and expire it (its manifest
    lists are deleted): a lost race, retried on the new newest snapshot, not a CorruptFile."""
    t = _table(tmp_path)
    t.write(pa.table({"id": [1], "v": ["a"]}))
    messages = _prepared(t, {2: "ours"})
    other = _other(tmp_path)
    real = t.manifests.manifest_list
    raced = []

    def racing(name):
        if not raced:
            raced.append(name)
            _commit_and_expire(other, {3: "x"}, times=2)
        return real(name)

    monkeypatch.setattr(t.manifests, "manifest_list", racing)
    sid = t.commit(messages)
    assert raced and sid == 4
    assert _state(_other(tmp_path)) == {1: "a", 2: "ours", 3: "x"}
    assert t.check().problems == []


def test_writer_whose_base_expired_before_it_read_it_uses_the_newest(tmp_path):
    """A writer opened on snapshot 1 reads its base lazily; if 1 expired by then, the newest snapshot is its base
    and its sequence numbers start past it (its rows win over the ones committed meanwhile)."""
    t = _table(tmp_path, {"bucket": "1"})
    t.write(pa.table({"id": [1], "v": ["a"]}))
    w = t.new_write()
    _commit_and_expire(_other(tmp_path), {1: "other"}, times=2)
    w.write(pa.table({"id": [1], "v": ["mine"]}))
    t.commit(w.prepare_commit())
    w.close()
    assert _state(_other(tmp_path)) == {1: "mine"}


def test_expiration_racing_another_expiration_plans_again(tmp_path, monkeypatch):
    """Two expirations at once: the one whose plan reads snapshots the other just removed plans again."""
    t = _table(tmp_path)
    for i in range(4):
        t.write(pa.table({"id": [i], "v": [f"v{i}"]}))
    other = _other(tmp_path)
    real = expire_module.plan_removal
    raced = []

    def racing(table, doomed, kept, **kw):
        if not raced:
            raced.append(True)
            expire_module.expire_snapshots(other, retain_min=1, retain_max=1, now_millis=2**62)
        return real(table, doomed, kept, **kw)

    monkeypatch.setattr(expire_module, "plan_removal", racing)
    expire_module.expire_snapshots(_other(tmp_path), retain_min=1, retain_max=1, now_millis=2**62)  # cold caches
    assert raced
    assert [s.id for s in t.snapshots()] == [4]
    assert _state(_other(tmp_path)) == {0: "v0", 1: "v1", 2: "v2", 3: "v3"}
    assert t.check().problems == []


def test_a_stale_claim_left_by_a_crash_is_flagged_and_not_taken_for_the_commit(tmp_path, monkeypatch):
    """A crash right after a stale claim, before its withdrawal, leaves the stale snapshot behind. Re-running the
    commit (same user and identifier) must still apply it -- the stale snapshot is not in the table's history, so it
    does not count as the commit having landed -- and check() reports the stale snapshot."""
    t = _table(tmp_path)
    t.write(pa.table({"id": [1], "v": ["a"]}))
    messages = _prepared(t, {2: "ours"})
    other = _other(tmp_path)
    real_put, real_delete = t.file_io.write_if_absent, t.file_io.delete

    def racing(path, data):
        if path.endswith("snapshot-2") and not os.path.exists(t.paths.snapshot(3)):
            _commit_and_expire(other, {3: "x"})
            _commit_and_expire(other, {4: "y"})  # snapshots 2 and 3 landed, 1 and 2 expired
        return real_put(path, data)

    def crash_on_withdrawal(path):
        if path == t.paths.snapshot(2):
            raise KeyboardInterrupt("process killed before the stale claim was withdrawn")
        return real_delete(path)

    monkeypatch.setattr(t.file_io, "write_if_absent", racing)
    monkeypatch.setattr(t.file_io, "delete", crash_on_withdrawal)
    with pytest.raises(KeyboardInterrupt):
        t.commit(messages)
    assert [s.id for s in _other(tmp_path).snapshots()] == [2, 3]  # the stale snapshot 2 is still there
    problems = _other(tmp_path).check().problems
    # its base list names manifests that expired with snapshot 1, and it is not snapshot 3's base
    assert problems and {p.snapshot_id for p in problems} == {2}

    again = _other(tmp_path)
    sid = again.commit(messages)  # the retry after the crash
    assert sid == 4
    assert _state(_other(tmp_path)) == {1: "a", 2: "ours", 3: "x", 4: "y"}


def test_orphan_cleanup_racing_an_expiration_reads_again(tmp_path):
    """A scheduled orphan cleanup whose listed snapshots expire while it reads them reads the snapshots again (as
    Paimon's OrphanFilesClean skips a snapshot that vanishes) instead of failing with SnapshotNotFound; it still
    deletes a real orphan and nothing a remaining snapshot needs."""
    t = _table(tmp_path)
    for i in range(4):
        t.write(pa.table({"id": [i], "v": [f"v{i}"]}))
    orphan = os.path.join(t.root, "bucket-0", "data-orphan-0.parquet")
    with open(orphan, "wb") as f:
        f.write(b"left by a crashed writer")
    os.utime(orphan, (0, 0))
    cleaner = _other(tmp_path)  # cold caches: it reads every snapshot file itself
    sm = cleaner.snapshot_manager
    listed = sm.ids
    raced = []

    def ids_then_expire():
        out = listed()
        if not raced:
            raced.append(True)
            expire_module.expire_snapshots(_other(tmp_path), retain_min=1, retain_max=1, now_millis=2**62)
        return out

    sm.ids = ids_then_expire
    assert cleaner.remove_orphan_files(older_than=0) == [orphan]
    assert raced and [s.id for s in t.snapshots()] == [4]
    assert _state(_other(tmp_path)) == {0: "v0", 1: "v1", 2: "v2", 3: "v3"}
    assert t.check().problems == [] and t.check().orphan_files == []


def test_tag_created_while_an_expiration_deletes_its_snapshot_keeps_its_files(tmp_path, monkeypatch):
    """A tag written on a snapshot after an expiration planned its removal (the plan read no such tag) and before
    the snapshot file went: the expiration reads the tags again before deleting files and spares the new tag's.
    Found by a scheduler tagging the latest snapshot while writers expired: the tag named deleted manifests."""
    t = _table(tmp_path)
    for i in range(3):
        t.write(pa.table({"id": [i], "v": [f"v{i}"]}))
    real = expire_module._plan
    tagged = []

    def plan_then_tag(table, ids, *args):
        plan = real(table, ids, *args)
        if plan is not None and not tagged:
            tagged.append(plan[0][-1])
            _other(tmp_path).create_tag("nightly", plan[0][-1])  # snapshot 2, about to expire
        return plan

    monkeypatch.setattr(expire_module, "_plan", plan_then_tag)
    expire_module.expire_snapshots(_other(tmp_path), retain_min=1, retain_max=1, now_millis=2**62)
    assert tagged == [2] and [s.id for s in t.snapshots()] == [3]
    assert {r["id"] for r in _other(tmp_path).read(tag="nightly").to_pylist()} == {0, 1}
    report = _other(tmp_path).check()
    assert report.problems == [] and report.orphan_files == [], report.summary()


def test_tag_whose_snapshot_expires_before_the_tag_is_written_is_withdrawn(tmp_path, monkeypatch):
    """The other order: the expiration read the tags (none) and removed the snapshot before the tag file landed;
    create_tag then finds the snapshot gone, deletes its tag and raises SnapshotNotFound instead of leaving a tag
    whose files were deleted."""
    from engine.errors import SnapshotNotFound
    from engine.maintenance import auto_tags

    t = _table(tmp_path)
    for i in range(3):
        t.write(pa.table({"id": [i], "v": [f"v{i}"]}))
    real = auto_tags.check_no_auto_tag

    def expire_first(table, name, sid):  # runs after create_tag read snapshot 2, before it writes the tag
        expire_module.expire_snapshots(_other(tmp_path), retain_min=1, retain_max=1, now_millis=2**62)
        return real(table, name, sid)

    monkeypatch.setattr(auto_tags, "check_no_auto_tag", expire_first)
    tagger = _other(tmp_path)
    tagger.snapshot(2)  # cached, as a scheduler's table object holds it
    with pytest.raises(SnapshotNotFound):
        tagger.create_tag("nightly", 2)
    assert _other(tmp_path).tags() == {}
    report = _other(tmp_path).check()
    assert report.problems == [], report.summary()


def test_tag_withdrawn_after_an_expiration_spared_its_files_takes_them_along(tmp_path, monkeypatch):
    """The tag file landed before the expiration deleted its snapshot, so the expiration read it again and spared
    its files; create_tag then found the snapshot gone and withdrew the tag, but only the tag file: the spared
    files stayed unreferenced. Found by a process tagging and deleting tags while writers expired."""
    from engine.errors import SnapshotNotFound
    from engine.maintenance import tags as tags_module

    t = _table(tmp_path)
    for i in range(3):
        t.write(pa.table({"id": [i], "v": [f"v{i}"]}))
    real = tags_module.TagManager.create

    def create_then_expire(self, *args, **kwargs):
        real(self, *args, **kwargs)
        expire_module.expire_snapshots(_other(tmp_path), retain_min=1, retain_max=1, now_millis=2**62)

    monkeypatch.setattr(tags_module.TagManager, "create", create_then_expire)
    with pytest.raises(SnapshotNotFound):
        _other(tmp_path).create_tag("nightly", 2)
    fresh = _other(tmp_path)
    assert fresh.tags() == {} and [s.id for s in fresh.snapshots()] == [3]
    report = fresh.check()
    assert report.problems == [] and report.orphan_files == [], report.summary()


def test_tag_deleted_while_an_expiration_removes_its_snapshot_leaves_no_unreferenced_files(tmp_path, monkeypatch):
    """delete_tag found the tagged snapshot still there (its files are then the expiration's business), but the
    expiration had planned while the tag existed and so kept the tag's files: nobody deleted them. The expiration
    reads the tags again after deleting the snapshot files and also removes the files of a tag deleted meanwhile
    whose snapshot it expired."""
    t = _table(tmp_path)
    for i in range(5):
        t.write(pa.table({"id": [i], "v": [f"v{i}"]}))
    t.compact(full=True)  # snapshot 6: the files of snapshot 2 are no longer live
    t.create_tag("old", 2)
    real = expire_module._plan
    deleted = []

    def plan_then_delete_tag(table, ids, *args):
        plan = real(table, ids, *args)
        if plan is not None and not deleted:
            deleted.append(True)
            _other(tmp_path).delete_tag("old")  # snapshot 2 still exists: nothing for delete_tag to remove
        return plan

    monkeypatch.setattr(expire_module, "_plan", plan_then_delete_tag)
    expire_module.expire_snapshots(_other(tmp_path), retain_min=1, retain_max=1, now_millis=2**62)
    fresh = _other(tmp_path)
    assert deleted and fresh.tags() == {} and [s.id for s in fresh.snapshots()] == [6]
    assert _state(fresh) == {i: f"v{i}" for i in range(5)}
    report = fresh.check()
    assert report.problems == [] and report.orphan_files == [], report.summary()


def _tagged_then_expired(tmp_path):
    """Snapshots 1..5 of five single-row commits, tag ``old`` on snapshot 2, snapshots 1-2 expired: only the tag
    keeps snapshot 2's manifests."""
    t = _table(tmp_path)
    for i in range(5):
        t.write(pa.table({"id": [i], "v": [f"v{i}"]}))
    t.create_tag("old", 2)
    expire_module.expire_snapshots(t, retain_min=3, retain_max=3, now_millis=2**62)
    assert [s.id for s in t.snapshots()] == [3, 4, 5]
    return t


def test_delete_tag_racing_an_expiration_of_the_earliest_snapshot_plans_again(tmp_path, monkeypatch):
    """delete_tag keeps what the earliest snapshot references; an expiration removing that snapshot (and its
    manifests) while the plan reads it made delete_tag fail with CorruptFile ("manifest file referenced by a
    snapshot is missing"). Found by a stress run tagging and deleting tags while writers expired."""
    from engine.maintenance import cleanup

    _tagged_then_expired(tmp_path)
    real = cleanup.plan_removal
    raced = []

    def expire_first(table, *args, **kwargs):
        if not raced:
            raced.append(True)
            expire_module.expire_snapshots(_other(tmp_path), retain_min=1, retain_max=1, now_millis=2**62)
        return real(table, *args, **kwargs)

    monkeypatch.setattr(cleanup, "plan_removal", expire_first)
    _other(tmp_path).delete_tag("old")  # a fresh table object: no cached manifests
    assert raced and _other(tmp_path).tags() == {} and [s.id for s in _other(tmp_path).snapshots()] == [5]
    assert _state(_other(tmp_path)) == {i: f"v{i}" for i in range(5)}
    report = _other(tmp_path).check()
    assert report.problems == [] and report.orphan_files == [], report.summary()


@pytest.mark.parametrize("tag_snapshot_expires", [False, True])
def test_delete_tag_racing_an_expiration_leaves_no_unreferenced_files(tmp_path, monkeypatch, tag_snapshot_expires):
    """An expiration that read the tag keeps its files, and delete_tag's plan kept the earliest snapshot's (or,
    while the tagged snapshot existed, planned nothing): without planning again after the tag is gone, files only
    the expired snapshots and the tag referenced stayed behind unreferenced."""
    from engine.maintenance import tags as tags_module

    t = _table(tmp_path)
    for i in range(5):
        t.write(pa.table({"id": [i], "v": [f"v{i}"]}))
    t.create_tag("old", 2)
    if not tag_snapshot_expires:  # the tagged snapshot already expired; the race expires the earliest one
        expire_module.expire_snapshots(t, retain_min=3, retain_max=3, now_millis=2**62)
    real = tags_module.TagManager.delete
    raced = []

    def expire_first(self, name):  # after delete_tag planned, before the tag file goes: an expiration reads it
        if not raced:
            raced.append(True)
            expire_module.expire_snapshots(_other(tmp_path), retain_min=1, retain_max=1, now_millis=2**62)
        return real(self, name)

    monkeypatch.setattr(tags_module.TagManager, "delete", expire_first)
    _other(tmp_path).delete_tag("old")
    assert raced and _other(tmp_path).tags() == {} and [s.id for s in _other(tmp_path).snapshots()] == [5]
    assert _state(_other(tmp_path)) == {i: f"v{i}" for i in range(5)}
    report = _other(tmp_path).check()
    assert report.problems == [] and report.orphan_files == [], report.summary()


def test_automatic_tag_of_a_snapshot_expiring_meanwhile_is_withdrawn(tmp_path, monkeypatch):
    """tag.automatic-creation: the snapshot being tagged expired after it was read and before its tag was written
    (the expiration saw no tag and deleted its manifests). The automatic tag was left naming deleted files; it is
    withdrawn and the period tagged on a later snapshot by the next run; create_tag withdraws its tag the same way."""
    from engine.commit.committer import Committer
    from engine.maintenance import auto_tags

    t = _table(tmp_path, {"bucket": "1", "tag.automatic-creation": "process-time", "tag.creation-period": "daily"})
    real = auto_tags.check_no_auto_tag
    raced = []

    def commit_and_expire_first(table, name, sid):  # after the tagger read snapshot 1, before the tag is written
        if not raced:
            raced.append(sid)
            other = _other(tmp_path)
            Committer(other).commit(_prepared(other, {1: "b"}))  # no automatic maintenance: the tagger holds it
            expire_module.expire_snapshots(other, retain_min=1, retain_max=1, now_millis=2**62)
        return real(table, name, sid)

    monkeypatch.setattr(auto_tags, "check_no_auto_tag", commit_and_expire_first)
    t.write(pa.table({"id": [0], "v": ["a"]}))
    assert raced == [1] and [s.id for s in _other(tmp_path).snapshots()] == [2]
    assert _other(tmp_path).tags() == {}
    assert auto_tags.create_period_tags(_other(tmp_path))  # the next run tags the period on snapshot 2
    assert [s.id for s in _other(tmp_path).tags().values()] == [2]
    report = _other(tmp_path).check()
    assert report.problems == [] and report.orphan_files == [], report.summary()


def _expire_at(monkeypatch, tmp_path, point: str):
    """Run an expiration down to one snapshot (by another table object) when the rollback reaches ``point``."""
    from engine.maintenance import rollback

    real = rollback.crash_point
    raced = []

    def expire_there(name):
        if name == point and not raced:
            raced.append(name)
            expire_module.expire_snapshots(_other(tmp_path), retain_min=1, retain_max=1, now_millis=2**62)
        return real(name)

    monkeypatch.setattr(rollback, "crash_point", expire_there)
    return raced


@pytest.mark.parametrize("point", ["rollback.before-delete", "rollback.after-snapshot-file"])
@pytest.mark.parametrize("tag_snapshot_expired", [True, False])
def test_rollback_to_a_tag_racing_an_expiration_restores_the_tagged_snapshot(tmp_path, monkeypatch, point,
                                                                             tag_snapshot_expired):
    """The expiration removes the target snapshot (restored from the tag, or still there) while the rollback runs;
    the rollback then deleted the later snapshots and left the table without any snapshot. The tag kept the
    target's files, so the rollback writes the snapshot again from it."""
    t = _table(tmp_path)
    for i in range(5):
        t.write(pa.table({"id": [i], "v": [f"v{i}"]}))
    t.create_tag("old", 2)
    if tag_snapshot_expired:
        expire_module.expire_snapshots(t, retain_min=3, retain_max=3, now_millis=2**62)
    raced = _expire_at(monkeypatch, tmp_path, point)
    _other(tmp_path).rollback_to("old")
    fresh = _other(tmp_path)
    assert raced and [s.id for s in fresh.snapshots()] == [2] and fresh.latest_snapshot_id() == 2
    assert _state(fresh) == {0: "v0", 1: "v1"} and list(fresh.tags()) == ["old"]
    report = fresh.check()
    assert report.problems == [] and report.warnings == [], report.summary()
    fresh.write(pa.table({"id": [9], "v": ["after"]}))
    assert _state(_other(tmp_path)) == {0: "v0", 1: "v1", 9: "after"}


def test_rollback_to_a_snapshot_an_expiration_removed_rolls_back_nothing(tmp_path, monkeypatch):
    """Rolling back to snapshot 3 while an expiration removes it: the rollback went on deleting snapshots 4-5 and
    left no snapshot. Now it finds the target gone before deleting anything and raises SnapshotNotFound saying so;
    the table keeps its latest snapshot and tags."""
    from engine.errors import SnapshotNotFound

    t = _table(tmp_path)
    for i in range(5):
        t.write(pa.table({"id": [i], "v": [f"v{i}"]}))
    t.create_tag("five", 5)
    raced = _expire_at(monkeypatch, tmp_path, "rollback.before-delete")
    with pytest.raises(SnapshotNotFound, match="concurrent snapshot expiration removed it.*nothing was rolled back"):
        _other(tmp_path).rollback_to(3)
    fresh = _other(tmp_path)
    assert raced and [s.id for s in fresh.snapshots()] == [5] and list(fresh.tags()) == ["five"]
    assert _state(fresh) == {i: f"v{i}" for i in range(5)}
    report = fresh.check()
    assert report.problems == [] and report.orphan_files == [], report.summary()


def test_tag_of_a_stale_claim_withdrawn_meanwhile_keeps_the_retried_commits_files(tmp_path, monkeypatch):
    """create_tag reads snapshot 2, a stale claim (see the first test), which its committer withdraws while the tag
    is written: the tag is withdrawn, but the files snapshot 2 added belong to the commit being retried and must
    stay (taking the tag's files along deleted them, and the retried commit failed with a missing data file)."""
    from engine.errors import SnapshotNotFound
    t = _table(tmp_path)
    t.write(pa.table({"id": [1], "v": ["a"]}))
    messages = _prepared(t, {2: "ours"})
    other, tagger = _other(tmp_path), _other(tmp_path)
    real_claim, real_delete = t.file_io.write_if_absent, t.file_io.delete
    real_tag_write = tagger.file_io.write_if_absent
    raced, tagged = [], []

    def racing(path, data):
        if path.endswith("snapshot-2") and not raced:
            raced.append(path)
            _commit_and_expire(other, {3: "x"})
            _commit_and_expire(other, {4: "y"})
        return real_claim(path, data)

    def withdrawing(path):
        if path.endswith("snapshot-2") and not tagged:
            tagged.append(path)
            with pytest.raises(SnapshotNotFound):
                tagger.create_tag("x", 2)  # reads the stale claim; it is withdrawn while the tag is written
        return real_delete(path)

    def tag_write(path, data):
        won = real_tag_write(path, data)
        if path.endswith("tag-x"):
            real_delete(tagged[0])  # the committer withdraws its stale claim now
        return won

    monkeypatch.setattr(t.file_io, "write_if_absent", racing)
    monkeypatch.setattr(t.file_io, "delete", withdrawing)
    monkeypatch.setattr(tagger.file_io, "write_if_absent", tag_write)
    assert t.commit(messages) == 4
    assert raced and tagged
    assert _state(_other(tmp_path)) == {1: "a", 2: "ours", 3: "x", 4: "y"}
    assert t.check().problems == []
