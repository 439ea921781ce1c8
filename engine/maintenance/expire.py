"""Snapshot expiration (paimon-semantics §12): retain at least ``snapshot.num-retained.min`` snapshots, at most
``snapshot.num-retained.max``, and every snapshot younger than ``snapshot.time-retained``; expire at most
``snapshot.expire.limit`` per run; never expire a snapshot a consumer (``consumer/consumer-<id>``) still needs.

Guarantees: the latest snapshot is never expired; snapshots are expired oldest first, so the retained ones stay
a contiguous range; files still referenced by a retained snapshot or a tag are never deleted, every other file
that only expired snapshots referenced is -- except files only a snapshot off the table's history (a stale claim,
see engine/commit/committer.py) referenced: their commit may still land, orphan cleanup removes them otherwise.
Index files (``index/``) included: see engine/maintenance/cleanup.py.
"""
from __future__ import annotations

import datetime as dt
import time

from engine.changelog.retention import expire_changelogs, preserve
from engine.crash_points import crash_point
from engine.errors import CorruptFile, InvalidInput, SnapshotNotFound, TagNotFound
from engine.maintenance.cleanup import Removal, clean_emptied_dirs, delete_files, plan_removal
from engine.maintenance.tags import TagManager
from engine.options import (SNAPSHOT_EXPIRE_LIMIT, SNAPSHOT_NUM_RETAINED_MAX, SNAPSHOT_NUM_RETAINED_MIN,
                            SNAPSHOT_TIME_RETAINED)


def _millis(value) -> int:
    if isinstance(value, dt.timedelta):
        return int(value.total_seconds() * 1000)
    return int(value)


def expire_snapshots(table, *, retain_min: int | None = None, retain_max: int | None = None,
                     time_retained=None, max_deletes: int | None = None, now_millis: int | None = None) -> Removal:
    """Expire snapshots per the table's options, overridden by the arguments (``time_retained``: a timedelta or
    milliseconds). Returns what was removed. Raises InvalidInput for retain_min < 1 or retain_max < retain_min."""
    opts = table.schema.table_options
    retain_min = opts.get(SNAPSHOT_NUM_RETAINED_MIN) if retain_min is None else int(retain_min)
    retain_max = opts.get(SNAPSHOT_NUM_RETAINED_MAX) if retain_max is None else int(retain_max)
    keep_ms = opts.get(SNAPSHOT_TIME_RETAINED) if time_retained is None else _millis(time_retained)
    limit = opts.get(SNAPSHOT_EXPIRE_LIMIT) if max_deletes is None else int(max_deletes)
    if retain_min < 1:
        raise InvalidInput("snapshot.num-retained.min must be at least 1", table=table.name)
    if retain_max < retain_min:
        raise InvalidInput(f"snapshot.num-retained.max ({retain_max}) is below snapshot.num-retained.min "
                           f"({retain_min})", table=table.name)
    sm = table.snapshot_manager
    now = int(time.time() * 1000) if now_millis is None else now_millis
    tags_before = set(TagManager(table).names())
    try:
        tagged_before = TagManager(table).all()
    except (CorruptFile, TagNotFound):
        tagged_before = {}  # a tag being deleted meanwhile: a tag deleted during the expiration may leave orphans
    while True:
        ids = sm.ids()
        try:
            plan = _plan(table, ids, retain_min, retain_max, keep_ms, limit, now)
            break
        except (CorruptFile, SnapshotNotFound):
            # a concurrent expiration (or rollback) removed snapshots this plan read, or a committer is withdrawing
            # a stale claim that the plan read (it goes within moments): plan again; unchanged snapshots mean
            # real damage
            if sm.ids() == ids:
                time.sleep(0.05)
                if sm.ids() == ids:
                    raise
    if plan is None:
        expire_changelogs(table, now)
        return Removal()
    doomed_ids, first_kept, removal = plan
    crash_point("expire.before-delete")
    for sid in doomed_ids:  # oldest first: retained snapshots stay contiguous
        table.file_io.delete(table.paths.snapshot(sid))
        sm.forget(sid)
        crash_point("expire.after-snapshot-file")
    crash_point("expire.before-earliest-hint")
    sm.write_earliest_hint(first_kept.id)
    crash_point("expire.after-earliest-hint")
    removal = _spare_new_tags(table, tags_before, removal)
    removal.merge(_files_of_deleted_tags(table, tagged_before, set(doomed_ids), first_kept))
    delete_files(table, removal, "expire.after-file-delete")
    clean_emptied_dirs(table, removal.data_files)
    expire_changelogs(table, now)
    return removal


def _spare_new_tags(table, tags_before: set[str], removal: Removal) -> Removal:
    """``removal`` without the files of tags created since the plan read the tags (a tag of a snapshot being
    expired, written while it still existed: Table.create_tag withdraws a tag whose
    snapshot is gone after it wrote it, so a tag this re-read misses is withdrawn). When such a tag cannot be read,
    only the snapshot files go: the rest is left to orphan cleanup."""
    from engine.maintenance.references import data_files, index_files, metadata_files
    try:
        new = [snap for name, snap in TagManager(table).all().items() if name not in tags_before]
        keep = set().union(*(data_files(table, s) | metadata_files(table, s) | index_files(table, s) for s in new))
    except (CorruptFile, TagNotFound):
        return Removal(removal.snapshot_ids)
    if not keep:
        return removal
    return Removal(removal.snapshot_ids, [p for p in removal.data_files if p not in keep],
                   [p for p in removal.metadata_files if p not in keep],
                   [p for p in removal.index_files if p not in keep])


def _files_of_deleted_tags(table, tagged_before: dict, doomed: set[int], first_kept) -> Removal:
    """The files that only tags deleted since the plan read them kept alive, for tags of snapshots this expiration
    removed: delete_tag found their snapshot still there and left the files to expiration, while the plan kept
    them for the tag. Nothing when the tags or those files cannot be read (orphan cleanup removes them)."""
    try:
        now = TagManager(table).all()
    except (CorruptFile, TagNotFound):
        return Removal()
    from engine.changelog.retention import referenced
    out = Removal()
    for name, snap in tagged_before.items():
        if name in now or snap.id not in doomed:
            continue
        try:
            out.merge(plan_removal(table, [snap], [first_kept], first_doomed_full=True, tags=list(now.values())))
            changelogs = referenced(table)  # a decoupled changelog keeps its files, as in delete_tag
        except (CorruptFile, SnapshotNotFound, TagNotFound):
            return Removal()
    if out.data_files or out.metadata_files:
        out.data_files = [p for p in out.data_files if p not in changelogs]
        out.metadata_files = [p for p in out.metadata_files if p not in changelogs]
    return out


def _plan(table, ids: list[int], retain_min: int, retain_max: int, keep_ms: int, limit: int, now: int):
    """``(doomed ids, first kept snapshot, Removal)`` for snapshots ``ids``, or None if none expires. Only reads
    (and keeps decoupled changelogs); raises SnapshotNotFound or CorruptFile for a snapshot that vanished."""
    if not ids:
        return None
    sm = table.snapshot_manager
    earliest, latest = ids[0], ids[-1]
    lo = max(latest - retain_max + 1, earliest)
    hi = min(latest - retain_min + 1, earliest + limit)
    from engine.changelog.consumers import ConsumerManager
    needed = ConsumerManager(table).min_next_snapshot()  # issue 5: consumers keep what they still read
    if needed is not None:
        hi = min(hi, needed)
    end = hi
    present = set(ids)
    for sid in range(lo, hi):
        # a snapshot stays while the one after it is younger than time-retained (it was current then)
        if sid + 1 in present and sm.snapshot(sid + 1).time_millis >= now - keep_ms:
            end = sid
            break
    doomed_ids = [i for i in ids if i < end and i < latest]
    if not doomed_ids:
        return None
    doomed = [sm.snapshot(i) for i in doomed_ids]
    first_kept = sm.snapshot(min(i for i in ids if i > doomed_ids[-1]))
    removal = plan_removal(table, doomed, [first_kept], first_doomed_full=True, expiring=True)
    preserve(table, doomed, removal)  # issue 5: decoupled changelog outlives its snapshot
    return doomed_ids, first_kept, removal
