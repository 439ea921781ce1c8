"""Snapshot expiration, tags, rollback and orphan cleanup."""
from __future__ import annotations

import datetime as dt
import os

import pyarrow as pa
import pytest

from engine import Catalog
from engine.errors import CorruptFile, InvalidInput, SnapshotNotFound, TagNotFound
from engine.maintenance.orphans import referenced_files
from engine.read.split_read import SplitReader
from tests.conftest import expire_after_latest

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])
META_DIRS = ("schema", "snapshot", "tag")


def _table(tmp_path, options=None):
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db", ignore_if_exists=True)
    opts = {"bucket": "2"}
    opts.update(options or {})
    return cat.create_table("db.t", SCHEMA, primary_key=["id"], options=opts)


def _write(t, i, n=10):
    return t.write(pa.table({"id": list(range(i * 4, i * 4 + n)), "v": [f"v{i}"] * n}))


def _files_on_disk(t) -> set[str]:
    out = set()
    for d, _, files in os.walk(t.root):
        if os.path.relpath(d, t.root).split(os.sep)[0] in META_DIRS:
            continue
        out.update(os.path.normpath(os.path.join(d, f)) for f in files)
    return out


def _assert_exact(t):
    """Every data/manifest file on disk is referenced by a snapshot or tag, and every referenced one exists."""
    referenced = {os.path.normpath(p) for p in referenced_files(t)}
    on_disk = _files_on_disk(t)
    assert on_disk - referenced == set(), "unreferenced files survived"
    assert referenced - on_disk == set(), "referenced files were deleted"


def _state(t, sid=None, tag=None):
    return t.read(sid, tag=tag).sort_by("id").to_pylist()


def test_expire_keeps_retain_min_and_deletes_exactly_the_unreferenced_files(tmp_path):
    t = _table(tmp_path)
    for i in range(9):
        _write(t, i)
    states = {s.id: _state(t, s.id) for s in t.snapshots()}
    assert any(s.commit_kind == "COMPACT" for s in t.snapshots())
    removal = expire_after_latest(t, retain_min=3, time_retained=0)
    ids = [s.id for s in t.snapshots()]
    assert ids == sorted(states)[-3:] and removal.snapshot_ids == sorted(states)[:-3]
    assert removal.data_files and removal.metadata_files
    for sid in ids:
        assert _state(t, sid) == states[sid]
    assert t.snapshot_manager.earliest_id() == ids[0]
    _assert_exact(t)
    with pytest.raises(SnapshotNotFound):
        t.read(removal.snapshot_ids[-1])


def test_time_retained_protects_young_snapshots_and_retain_max_caps_them(tmp_path):
    t = _table(tmp_path, {"write-only": "true"})
    for i in range(6):
        _write(t, i)
    assert t.expire_snapshots(retain_min=1).snapshot_ids == []  # default time-retained 1 h: all are young
    assert t.expire_snapshots(retain_min=1, retain_max=4).snapshot_ids == [1, 2]
    assert expire_after_latest(t, retain_min=2, time_retained=dt.timedelta(0), max_deletes=1).snapshot_ids == [3]
    assert [s.id for s in t.snapshots()] == [4, 5, 6]
    with pytest.raises(InvalidInput):
        t.expire_snapshots(retain_min=0)
    with pytest.raises(InvalidInput):
        t.expire_snapshots(retain_min=5, retain_max=2)
    _assert_exact(t)


def test_commits_expire_snapshots_per_table_options_unless_write_only(tmp_path):
    t = _table(tmp_path, {"snapshot.num-retained.min": "2", "snapshot.num-retained.max": "3"})
    for i in range(8):
        _write(t, i)
        assert len(t.snapshots()) <= 3
    _assert_exact(t)
    assert _state(t) == sorted({r["id"]: r for i in range(8) for r in
                                [{"id": k, "v": f"v{i}"} for k in range(i * 4, i * 4 + 10)]}.values(),
                               key=lambda r: r["id"])
    w = _table(tmp_path / "other", {"snapshot.num-retained.min": "1", "snapshot.num-retained.max": "1",
                                     "write-only": "true"})
    for i in range(3):
        _write(w, i)
    assert len(w.snapshots()) == 3


def test_a_reader_pinned_to_a_retained_snapshot_is_not_disturbed(tmp_path):
    t = _table(tmp_path, {"write-only": "true"})
    for i in range(4):
        _write(t, i)
    pinned = t.latest_snapshot_id()
    splits = t.plan(pinned)
    expected = _state(t, pinned)
    _write(t, 10)
    t.compact(full=True)
    expire_after_latest(t, retain_min=3, time_retained=0)
    assert pinned in [s.id for s in t.snapshots()]
    reader = SplitReader(t.file_io, t.schema)
    got = pa.concat_tables([reader.read(sp, ["id", "v"]) for sp in splits]).sort_by("id").to_pylist()
    assert got == expected


def test_tags_read_protect_files_and_their_deletion_cleans_up(tmp_path):
    t = _table(tmp_path)
    _write(t, 0)
    _write(t, 1)
    t.create_tag("release-1")
    tagged = _state(t)
    assert os.path.exists(os.path.join(t.root, "tag", "tag-release-1"))
    for i in range(2, 8):
        _write(t, i)
    t.compact(full=True)
    expire_after_latest(t, retain_min=1, time_retained=0)
    assert len(t.snapshots()) == 1
    assert _state(t, tag="release-1") == tagged
    _assert_exact(t)
    t.delete_tag("release-1")
    assert t.tags() == {}
    _assert_exact(t)
    with pytest.raises(TagNotFound):
        t.read(tag="release-1")


def test_read_refuses_a_snapshot_id_and_a_tag_together(tmp_path):
    t = _table(tmp_path)
    first = _write(t, 0)
    t.create_tag("one", first)
    _write(t, 1)
    with pytest.raises(InvalidInput, match="not both") as e:  # neither one silently wins
        t.read(t.latest_snapshot_id(), tag="one")
    assert e.value.table == "db.t"


def test_tag_names_are_checked(tmp_path):
    t = _table(tmp_path)
    with pytest.raises(InvalidInput, match="without snapshots"):
        t.create_tag("a")
    _write(t, 0)
    t.create_tag("a", snapshot_id=1)
    with pytest.raises(InvalidInput, match="already exists"):
        t.create_tag("a")
    for bad in ("", "123", "a/b", ".hidden"):
        with pytest.raises(InvalidInput):
            t.create_tag(bad)
    with pytest.raises(SnapshotNotFound):
        t.create_tag("b", snapshot_id=99)
    with pytest.raises(TagNotFound):
        t.delete_tag("nope")


def test_rollback_to_a_snapshot_drops_later_snapshots_tags_and_files(tmp_path):
    t = _table(tmp_path)
    for i in range(3):
        _write(t, i)
    target = t.latest_snapshot_id()
    expected = _state(t)
    t.create_tag("keep", target)
    for i in range(3, 9):
        _write(t, i)
    t.create_tag("later")
    t.rollback_to(target)
    assert [s.id for s in t.snapshots()] == list(range(1, target + 1))
    assert set(t.tags()) == {"keep"}
    assert _state(t) == expected
    _assert_exact(t)
    sid = _write(t, 50)
    assert sid == target + 1
    assert len(_state(t)) == len(expected) + 10
    with pytest.raises(SnapshotNotFound):
        t.rollback_to(999)


def test_rollback_to_a_tag_whose_snapshot_expired(tmp_path):
    t = _table(tmp_path)
    _write(t, 0)
    t.create_tag("v1")
    expected = _state(t)
    for i in range(1, 7):
        _write(t, i)
    expire_after_latest(t, retain_min=2, time_retained=0)
    assert 1 not in [s.id for s in t.snapshots()]
    t.rollback_to("v1")
    assert [s.id for s in t.snapshots()] == [1]
    assert _state(t) == expected
    _assert_exact(t)
    assert _write(t, 9) == 2


def test_orphan_cleanup_deletes_only_old_unreferenced_files(tmp_path):
    t = _table(tmp_path)
    for i in range(3):
        _write(t, i)
    with t.new_write() as w:  # files of a commit that never happened
        w.write(pa.table({"id": [1000], "v": ["lost"]}))
        w.prepare_commit()
        abandoned = [os.path.join(t.bucket_dir((), b.bucket), f.file_name) for b in w._buffers.values()
                     for f in b.files]
        w._prepared = True  # keep them on disk, as a crashed writer would
    junk = [os.path.join(t.paths.manifest_dir, "manifest-junk-0"), os.path.join(t.root, "bucket-0", "data-x.parquet")]
    for p in junk:
        with open(p, "wb") as f:
            f.write(b"x")
    assert t.remove_orphan_files() == []  # default: only files older than a day
    old = (dt.datetime.now() - dt.timedelta(days=2)).timestamp()
    for p in junk:
        os.utime(p, (old, old))
    assert sorted(t.remove_orphan_files()) == sorted(os.path.normpath(p) for p in junk)
    assert set(t.remove_orphan_files(older_than=dt.timedelta(0), dry_run=True)) == set(abandoned)
    assert set(t.remove_orphan_files(older_than=0)) == set(abandoned)
    _assert_exact(t)
    assert len(_state(t)) == 18


def test_orphan_cleanup_refuses_when_a_referenced_manifest_is_unreadable(tmp_path):
    t = _table(tmp_path)
    _write(t, 0)
    junk = os.path.join(t.root, "bucket-0", "data-junk.parquet")
    with open(junk, "wb") as f:
        f.write(b"x")
    snap = t.snapshot()
    os.remove(t.paths.manifest(snap.delta_manifest_list))
    t.manifests._lists.clear()
    with pytest.raises(CorruptFile):
        t.remove_orphan_files(older_than=0)
    assert os.path.exists(junk)


def test_expiration_keeps_what_a_consumer_still_needs(tmp_path):
    t = _table(tmp_path, {"write-only": "true"})
    for i in range(6):
        _write(t, i)
    os.makedirs(os.path.join(t.root, "consumer"))
    with open(os.path.join(t.root, "consumer", "consumer-job1"), "w") as f:
        f.write('{"nextSnapshot" : 3}')
    assert expire_after_latest(t, retain_min=1, time_retained=0).snapshot_ids == [1, 2]
    with open(os.path.join(t.root, "consumer", "consumer-job1"), "w") as f:
        f.write("not json")
    with pytest.raises(CorruptFile):
        expire_after_latest(t, retain_min=1, time_retained=0)
    assert [s.id for s in t.snapshots()] == [3, 4, 5, 6]


def test_orphan_cleanup_leaves_the_statistics_directory_alone_and_sweeps_index(tmp_path):
    t = _table(tmp_path)
    _write(t, 0)
    kept = os.path.join(t.root, "statistics", "stat-x-0")
    stray = os.path.join(t.root, "index", "index-x-0")  # no index manifest lists it
    for p in (kept, stray):
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(b"x")
    assert t.remove_orphan_files(older_than=0) == [os.path.normpath(stray)]
    assert os.path.exists(kept) and not os.path.exists(stray)


DECOUPLED = {"bucket": "1", "changelog-producer": "input", "write-only": "true", "snapshot.num-retained.min": "1",
             "snapshot.num-retained.max": "1", "snapshot.time-retained": "1 ms", "changelog.num-retained.max": "100",
             "changelog.time-retained": "1 d"}


def test_delete_tag_keeps_the_files_of_a_decoupled_changelog(tmp_path):
    t = _table(tmp_path, DECOUPLED)
    _write(t, 0)
    t.create_tag("t1", 1)
    _write(t, 1)
    _write(t, 2)
    t.expire_snapshots()
    assert t.snapshot_manager.ids() == [3]
    before = t.read_changes(0, 1)
    t.delete_tag("t1")
    assert t.read_changes(0, 1).equals(before)
    assert t.read_changes(0).num_rows == 30 and t.check().ok
    assert t.remove_orphan_files(older_than=0, dry_run=True) == []  # what only the tag used is gone


@pytest.mark.parametrize("options,key", [
    ({"snapshot.num-retained.min": "0"}, "snapshot.num-retained.min"),
    ({"snapshot.num-retained.min": "5", "snapshot.num-retained.max": "2"}, "snapshot.num-retained.min"),
    ({"snapshot.num-retained.max": "2"}, "snapshot.num-retained.max"),  # the default min (10) is larger
    ({"changelog.num-retained.min": "0"}, "changelog.num-retained.min"),
    ({"changelog.num-retained.min": "5", "changelog.num-retained.max": "2"}, "changelog.num-retained.min"),
    ({"changelog.num-retained.max": "3"}, "changelog.num-retained.max"),  # below the snapshot min it defaults to
])
def test_invalid_retention_options_are_rejected_at_create_and_alter(tmp_path, options, key):
    """As Paimon's SchemaValidation: retention min >= 1 and min <= max (changelog values default to snapshot's)."""
    from engine.errors import InvalidOption
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    with pytest.raises(InvalidOption, match=rf"'db.x'.*{key}") as err:
        cat.create_table("db.x", SCHEMA, primary_key=["id"], options={"bucket": "1", **options})
    assert err.value.key == key
    t = _table(tmp_path)
    update = t.alter()
    for k, v in options.items():
        update = update.set_option(k, v)
    with pytest.raises(InvalidOption, match=key):
        update.commit()
    assert t.schema_manager.latest().id == 0



def test_table_with_retention_options_paimon_would_reject_still_opens(tmp_path):
    """The retention checks run at create and alter only (Paimon's SchemaValidation): a table whose schema file
    holds snapshot.num-retained.max=2 alone (default min 10), as pypaimon writes without checking, opens, takes
    writes and reads; alter then refuses to keep the bad value and accepts a fix."""
    import json
    from engine.errors import InvalidOption
    t = _table(tmp_path)
    schema_file = os.path.join(t.root, "schema", "schema-0")
    with open(schema_file) as f:
        doc = json.load(f)
    doc["options"]["snapshot.num-retained.max"] = "2"
    with open(schema_file, "w") as f:
        json.dump(doc, f)
    t = Catalog(str(tmp_path / "wh")).get_table("db.t")
    _write(t, 0)
    _write(t, 1)
    assert t.read().num_rows == 14
    with pytest.raises(InvalidOption, match="snapshot.num-retained"):
        t.alter().set_option("write-only", "true").commit()
    t.alter().set_option("snapshot.num-retained.min", "1").commit()
    assert t.schema_manager.latest().id == 1

def test_rollback_drops_later_decoupled_changelogs_and_their_files(tmp_path):
    """As Paimon's RollbackHelper: changelog-<id> past the rollback target goes, with its files."""
    t = _table(tmp_path, DECOUPLED)
    _write(t, 0)
    t.create_tag("t1")
    _write(t, 1)
    _write(t, 2)
    t.expire_snapshots()
    assert t.snapshot_manager.ids() == [3]
    t.rollback_to("t1")
    assert sorted(os.listdir(os.path.join(t.root, "changelog"))) == ["changelog-1"]
    t.compact(full=True)
    _write(t, 3)
    t.expire_snapshots()
    assert [r["v"] for r in t.read_changes(0).to_pylist()] == ["v0"] * 10 + ["v3"] * 10
    assert t.check().ok and t.remove_orphan_files(older_than=0, dry_run=True) == []


def test_rollback_deletes_the_files_only_dropped_tags_kept(tmp_path):
    t = _table(tmp_path, {"bucket": "1", "write-only": "true", "snapshot.num-retained.min": "1",
                          "snapshot.time-retained": "1 ms"})
    _write(t, 0)
    t.create_tag("base")
    _write(t, 1)
    t.create_tag("later")
    t.compact(full=True)  # snapshot 2's files are now kept only by tag 'later'
    _write(t, 2)
    t.expire_snapshots(retain_max=1)
    assert t.remove_orphan_files(older_than=0, dry_run=True) == []
    t.rollback_to("base")
    assert list(t.tags()) == ["base"] and [r["v"] for r in t.read().to_pylist()] == ["v0"] * 10
    _assert_exact(t)
    assert t.check().ok and t.remove_orphan_files(older_than=0, dry_run=True) == []


def test_check_covers_decoupled_changelogs(tmp_path):
    """check(): a decoupled changelog's files are referenced (not orphans); a missing changelog file, a gap in the
    changelog ids or an unreadable changelog-<id> is a problem."""
    t = _table(tmp_path, DECOUPLED)
    for i in range(4):
        _write(t, i)
    t.expire_snapshots()
    assert t.snapshot_manager.ids() == [4]
    report = t.check()
    assert report.ok and report.orphan_files == [], report.summary()
    cdir = os.path.join(t.root, "changelog")
    from engine.changelog import retention
    from engine.maintenance.references import changelog_added_files
    victim = sorted(changelog_added_files(t, retention.read(t, 2)))[0]
    os.remove(victim)
    assert {(p.kind, p.path) for p in t.check().problems} == {("changelog-file-missing", victim)}
    os.remove(os.path.join(cdir, "changelog-2"))
    assert t.check().kinds() == {"changelog-gap"}
    with open(os.path.join(cdir, "changelog-1"), "w") as f:
        f.write("{not json")
    assert t.check().kinds() == {"changelog-gap", "changelog-unreadable"}
