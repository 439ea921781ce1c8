"""Decoupled changelog with changelog-producer=none (Paimon's ExpireSnapshotsImpl / SnapshotDeletion with
``changelogDecoupled`` and no changelog produced, ExpireChangelogImpl / ChangelogDeletion): expired APPEND snapshots
keep their delta manifest list, manifests and added data files while their changelog is retained, a stream started
from an expired snapshot id reads them, and the changelog's expiration frees them."""
from __future__ import annotations

import os

import pyarrow as pa

from engine.changelog import retention
from engine.maintenance.references import delta_added_files

SCHEMA = pa.schema([pa.field("k", pa.int64(), False), pa.field("v", pa.string())])


def rows(*keys):
    return pa.table({"k": list(keys), "v": [str(k) for k in keys]}, schema=SCHEMA)


def keys_of(batches):
    return [r["k"] for b in batches for r in b.to_pylist()]


def test_producer_none_decoupled_changelog_keeps_delta_files_until_it_expires(catalog):
    t = catalog.create_table("db.t", SCHEMA, ["k"], options={
        "bucket": "1", "changelog-producer": "none", "num-sorted-run.compaction-trigger": "100",
        "snapshot.num-retained.min": "1", "snapshot.num-retained.max": "1", "snapshot.time-retained": "0 ms",
        "changelog.num-retained.min": "4", "changelog.num-retained.max": "4", "changelog.time-retained": "0 ms"})
    delta = {}
    for k in (1, 2, 3):
        t.write(rows(k))
        delta[k] = delta_added_files(t, t.snapshot())
    t.compact(full=True)  # snapshot 4 compacts the three level-0 files away
    t.write(rows(4))  # snapshot 5: snapshots 1-4 expired, changelogs 2-4 retained
    assert t.snapshot_manager.ids() == [5] and retention.ids(t) == [2, 3, 4]
    assert all(os.path.exists(p) for k in (2, 3) for p in delta[k])  # compacted away, kept for changelogs 2, 3
    assert not any(os.path.exists(p) for p in delta[1])  # changelog 1 expired: freed
    # a stream from an expired snapshot id with a retained changelog reads the expired APPEND snapshots' deltas
    assert keys_of(t.stream("from-snapshot", snapshot_id=2, idle_timeout=0)) == [2, 3, 4]
    assert keys_of(t.stream("from-snapshot", snapshot_id=1, idle_timeout=0)) == [2, 3, 4]  # earliest readable
    assert [r["k"] for r in t.read_changes(1, 5).to_pylist()] == [2, 3, 4]
    report = t.check()
    assert report.ok, report.problems
    assert t.remove_orphan_files(older_than=0, dry_run=True) == []
    for k in (5, 6, 7, 8):  # every changelog of snapshots 1-4 expires
        t.write(rows(k))
    assert retention.ids(t) == [6, 7, 8]
    assert not any(os.path.exists(p) for k in (1, 2, 3) for p in delta[k])
    assert t.read().column("k").to_pylist() == [1, 2, 3, 4, 5, 6, 7, 8]
    assert keys_of(t.stream("from-snapshot", snapshot_id=6, idle_timeout=0)) == [5, 6, 7, 8]
    report = t.check()
    assert report.ok, report.problems
    assert t.remove_orphan_files(older_than=0, dry_run=True) == []


def test_producer_none_changelog_expiry_keeps_files_still_live(catalog):
    """A changelog's delta files that no compaction replaced are the table's live files: its expiration keeps them."""
    t = catalog.create_table("db.t", SCHEMA, ["k"], options={
        "bucket": "1", "changelog-producer": "none", "num-sorted-run.compaction-trigger": "100",
        "snapshot.num-retained.min": "1", "snapshot.num-retained.max": "1", "snapshot.time-retained": "0 ms",
        "changelog.num-retained.min": "2", "changelog.num-retained.max": "2", "changelog.time-retained": "0 ms"})
    for k in range(1, 7):
        t.write(rows(k))
    assert retention.ids(t) == [5]
    assert t.read().column("k").to_pylist() == [1, 2, 3, 4, 5, 6]
    report = t.check()
    assert report.ok, report.problems
    assert t.remove_orphan_files(older_than=0, dry_run=True) == []


def test_append_table_decoupled_changelog_reads_expired_appends(catalog):
    t = catalog.create_table("db.a", SCHEMA, options={
        "bucket": "-1", "snapshot.num-retained.min": "1", "snapshot.num-retained.max": "1",
        "snapshot.time-retained": "0 ms", "changelog.num-retained.min": "3", "changelog.num-retained.max": "3",
        "changelog.time-retained": "0 ms"})
    for k in range(1, 5):
        t.write(rows(k))
    assert t.snapshot_manager.ids() == [4] and retention.ids(t) == [2, 3]
    assert keys_of(t.stream("from-snapshot", snapshot_id=2, idle_timeout=0)) == [2, 3, 4]
    report = t.check()
    assert report.ok, report.problems
    assert t.remove_orphan_files(older_than=0, dry_run=True) == []


def test_check_reports_a_missing_delta_file_of_a_producer_none_changelog(catalog):
    t = catalog.create_table("db.t", SCHEMA, ["k"], options={
        "bucket": "1", "changelog-producer": "none", "num-sorted-run.compaction-trigger": "100",
        "snapshot.num-retained.min": "1", "snapshot.num-retained.max": "1", "snapshot.time-retained": "0 ms",
        "changelog.num-retained.min": "4", "changelog.num-retained.max": "4", "changelog.time-retained": "0 ms"})
    t.write(rows(1))
    t.write(rows(2))
    (lost,) = delta_added_files(t, t.snapshot())
    t.compact(full=True)
    t.write(rows(3))
    assert t.snapshot_manager.ids() == [4] and retention.ids(t) == [1, 2, 3]
    assert t.check().ok
    os.remove(lost)  # only changelog 2 references it now
    assert [p.path for p in t.check().problems] == [lost]
