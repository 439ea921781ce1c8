"""Changelog retention decoupled from snapshots (``changelog.num-retained.min/max``, ``changelog.time-retained``).

When a changelog retention option keeps more than the matching snapshot option, changelog is *decoupled* (as in
Paimon): expiring a snapshot writes ``changelog/changelog-<id>`` (the snapshot's JSON) and keeps its changelog
manifest list, manifests and changelog files if it has them; ``read_changes`` and ``stream`` read such ids from
there. Those changelogs expire by the changelog options (min/max counted back from the latest snapshot, time
against the next changelog's commit time, never past what a consumer still needs; the files of a changelog whose
snapshot is tagged stay with the tag, as snapshot expiration keeps them). Without decoupling (the
default) changelog files expire with their snapshots.

changelog-producer=none (and append tables) have no changelog files: a snapshot's changes are the data files its
APPEND commit added, read through its delta manifest list. Decoupled, such a changelog keeps that manifest list, its
manifests and those data files (Paimon's SnapshotDeletion skips APPEND-sourced files and delays the manifest lists
when the changelog is decoupled and no changelog is produced; ExpireChangelogImpl frees them): snapshot expiration
and later compactions leave them alone while a changelog references them, and the changelog's expiration deletes
those no snapshot, tag or other changelog still uses. ``normalize=True`` reads look keys up in the snapshot itself,
so they raise SnapshotNotFound for an expired one.
"""
from __future__ import annotations

import os
import time

from engine.maintenance.references import changelog_added_files, delta_added_files
from engine.meta.snapshot import COMMIT_KIND_APPEND, Snapshot
from engine.options import (
    CHANGELOG_NUM_RETAINED_MAX,
    CHANGELOG_NUM_RETAINED_MIN,
    CHANGELOG_PRODUCER,
    CHANGELOG_TIME_RETAINED,
    SNAPSHOT_NUM_RETAINED_MAX,
    SNAPSHOT_NUM_RETAINED_MIN,
    SNAPSHOT_TIME_RETAINED,
)

CHANGELOG_DIR = "changelog"
PREFIX = "changelog-"


def retention(opts) -> tuple[int, int, int]:
    """(min, max, time ms) of changelog retention, defaulting to the snapshot options."""
    lo = opts.get(CHANGELOG_NUM_RETAINED_MIN)
    hi = opts.get(CHANGELOG_NUM_RETAINED_MAX)
    ms = opts.get(CHANGELOG_TIME_RETAINED)
    return (opts.get(SNAPSHOT_NUM_RETAINED_MIN) if lo is None else lo,
            opts.get(SNAPSHOT_NUM_RETAINED_MAX) if hi is None else hi,
            opts.get(SNAPSHOT_TIME_RETAINED) if ms is None else ms)


def is_decoupled(opts) -> bool:
    """True if changelog retention exceeds snapshot retention in any bound (Paimon's ExpireConfig, whatever the
    changelog producer)."""
    lo, hi, ms = retention(opts)
    return lo > opts.get(SNAPSHOT_NUM_RETAINED_MIN) or hi > opts.get(SNAPSHOT_NUM_RETAINED_MAX) \
        or ms > opts.get(SNAPSHOT_TIME_RETAINED)


def path(table, changelog_id: int) -> str:
    """Return the path of the decoupled changelog file with id ``changelog_id``."""
    return os.path.join(table.paths.meta_root, CHANGELOG_DIR, f"{PREFIX}{changelog_id}")


def ids(table) -> list[int]:
    """Return the ids of decoupled changelog files present, ascending; [] if the directory is missing."""
    directory = os.path.join(table.paths.meta_root, CHANGELOG_DIR)
    if not table.file_io.exists(directory):
        return []
    out = []
    for name in table.file_io.list_names(directory):
        if name.startswith(PREFIX) and name[len(PREFIX):].isdigit():
            out.append(int(name[len(PREFIX):]))
    return sorted(out)


def read(table, changelog_id: int) -> Snapshot | None:
    """Return the decoupled changelog ``changelog_id`` as a Snapshot, or None if its file does not exist."""
    p = path(table, changelog_id)
    try:
        data = table.file_io.read_bytes(p)
    except FileNotFoundError:
        return None
    return Snapshot.from_json(data.decode("utf-8"), p)


def reads_deltas(table) -> bool:
    """True if the table's changes are its APPEND snapshots' delta data files (changelog-producer none, append
    tables), not changelog files."""
    return table.schema.is_append_only or table.schema.table_options.get(CHANGELOG_PRODUCER) == "none"


def changelog_paths(table, snap: Snapshot) -> tuple[set[str], set[str]]:
    """(data files, metadata files) a changelog of ``snap`` reads its changes from: its changelog files and
    manifests, or -- when the table reads deltas (``reads_deltas``) -- an APPEND snapshot's delta manifest list,
    manifests and the data files they add."""
    meta = set()
    if snap.changelog_manifest_list:
        meta.add(table.paths.manifest(snap.changelog_manifest_list))
        for m in table.manifests.manifest_list(snap.changelog_manifest_list):
            meta.add(table.paths.manifest(m.file_name))
    data = changelog_added_files(table, snap)
    if snap.commit_kind == COMMIT_KIND_APPEND and reads_deltas(table):
        meta.add(table.paths.manifest(snap.delta_manifest_list))
        for m in table.manifests.manifest_list(snap.delta_manifest_list):
            meta.add(table.paths.manifest(m.file_name))
        data |= delta_added_files(table, snap)
    return data, meta


def preserve(table, doomed: list[Snapshot], removal) -> None:
    """Before snapshots expire (when decoupled): write changelog/changelog-<id> for every one of them, as Paimon
    does, so the retained changelog ids stay contiguous (one without changelog files yields no changes), and keep
    the files they and the changelogs already there read (``changelog_paths``) out of ``removal``."""
    if not is_decoupled(table.schema.table_options):
        return
    keep_data, keep_meta = set(), set()
    if reads_deltas(table):  # an older changelog's delta files may be what these snapshots compacted away
        for cid in ids(table):
            snap = read(table, cid)
            if snap is not None:
                data, meta = changelog_paths(table, snap)
                keep_data |= data
                keep_meta |= meta
    for snap in doomed:
        data, meta = changelog_paths(table, snap)
        keep_data |= data
        keep_meta |= meta
        table.file_io.mkdirs(os.path.join(table.paths.meta_root, CHANGELOG_DIR))
        table.file_io.overwrite(path(table, snap.id), snap.to_json().encode())
    removal.data_files = [p for p in removal.data_files if p not in keep_data]
    removal.metadata_files = [p for p in removal.metadata_files if p not in keep_meta]


def referenced(table) -> set[str]:
    """Files the decoupled changelogs reference (orphan cleanup keeps them)."""
    out = set()
    for cid in ids(table):
        snap = read(table, cid)
        if snap is not None:
            data, meta = changelog_paths(table, snap)
            out |= data | meta
    return out


def expire_changelogs(table, now_millis: int | None = None) -> list[int]:
    """Expire decoupled changelogs beyond the changelog retention; returns the removed ids."""
    present = ids(table)
    if not present:
        return []
    opts = table.schema.table_options
    lo, hi, keep_ms = retention(opts)
    sm = table.snapshot_manager
    latest = sm.latest_id()
    if latest is None:
        return []
    now = int(time.time() * 1000) if now_millis is None else now_millis
    earliest = present[0]
    first = max(latest - hi + 1, earliest)
    end = latest - lo + 1
    from engine.changelog.consumers import ConsumerManager
    needed = ConsumerManager(table).min_next_snapshot()
    if needed is not None:
        end = min(end, needed)
    cut = end
    for cid in present:
        if cid < first or cid >= end:
            continue
        nxt = read(table, cid + 1) if (cid + 1) in present else (sm.snapshot(cid + 1) if cid + 1 in sm.ids()
                                                                  else None)
        if nxt is not None and nxt.time_millis >= now - keep_ms:
            cut = cid
            break
    doomed = [cid for cid in present if cid < cut]
    if not doomed:
        return []
    from engine.branches import referenced_elsewhere
    from engine.maintenance.tags import tagged_snapshots
    tags = tagged_snapshots(table)
    tagged = {s.id for s in tags}
    # other lines (main, branches) share the files: a branch made from a tag holds that snapshot's changelog files
    in_use: set[str] = referenced_elsewhere(table)
    if reads_deltas(table):
        # a changelog's delta files may still be live (not compacted yet), in a tag, or read by a later changelog
        from engine.maintenance.references import data_files, metadata_files
        for snap in [sm.snapshot(sm.earliest_id())] + tags:
            in_use |= data_files(table, snap) | metadata_files(table, snap)
        for cid in present:
            if cid >= cut and (snap := read(table, cid)) is not None:
                in_use |= set().union(*changelog_paths(table, snap))
    deleted_data: list[str] = []
    for cid in doomed:
        snap = read(table, cid)
        if snap is None:
            continue
        # a tag of that snapshot references the same changelog files (as snapshot expiration keeps them for
        # tags): they stay until the tag is deleted (delete_tag frees them)
        data, meta = changelog_paths(table, snap) if cid not in tagged else (set(), set())
        table.file_io.delete(path(table, cid))
        for p in sorted((data | meta) - in_use):
            table.file_io.delete(p)
        deleted_data += sorted(data - in_use)
    from engine.maintenance.cleanup import clean_emptied_dirs
    clean_emptied_dirs(table, deleted_data)  # snapshot.clean-empty-directories (Paimon's ChangelogDeletion)
    return doomed


def changes_snapshot(table, snapshot_id: int) -> Snapshot:
    """The snapshot, or the decoupled changelog with that id. Raises SnapshotNotFound if neither exists."""
    from engine.errors import SnapshotNotFound
    try:
        return table.snapshot_manager.snapshot(snapshot_id)
    except SnapshotNotFound:
        snap = read(table, snapshot_id)
        if snap is None:
            raise
        return snap


def earliest_change_id(table) -> int | None:
    """Return the earliest id readable for changes: the oldest decoupled changelog if older than the earliest
    snapshot, else the earliest snapshot id (None if there is neither)."""
    present = ids(table)
    earliest = table.snapshot_manager.earliest_id()
    if present and (earliest is None or present[0] < earliest):
        return present[0]
    return earliest
