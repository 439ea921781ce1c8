"""Rollback to a snapshot or a tag (Paimon's ``rollback_to``).

Rolling back to snapshot N deletes snapshots N+1.. (newest first, so a crash leaves a consistent shorter history
whose latest snapshot is between N and the old latest; running the rollback again completes it),
tags of those snapshots, decoupled changelogs ``changelog-<id>`` with id > N (as Paimon's RollbackHelper), and the
files only they referenced (data, changelog, manifest and index files); snapshot N becomes the latest. Rolling back
to a tag whose snapshot has expired restores that snapshot from the tag and removes every other snapshot; a crash in
between leaves the newest remaining snapshot as the latest and a gap in snapshot ids (check() reports snapshot-gap)
until the rollback is run again.
Not safe while other writers commit to the table. A concurrent snapshot expiration may remove the target snapshot:
rolling back to a tag then restores it from the tag again (the tag kept its files); rolling back to a snapshot id
raises SnapshotNotFound, with nothing rolled back when the expiration landed before the rollback deleted anything
(an expiration landing in between those deletions can leave no snapshot: expiration and rollback take no lock).
"""
from __future__ import annotations

from engine.branches import referenced_elsewhere
from engine.changelog import retention
from engine.crash_points import crash_point
from engine.errors import SnapshotNotFound
from engine.maintenance.cleanup import Removal, delete_files, plan_removal
from engine.maintenance.tags import TagManager


def rollback_to(table, target) -> Removal:
    """``target``: a snapshot id (int) or a tag name (str). Raises SnapshotNotFound, TagNotFound."""
    sm = table.snapshot_manager
    tags = TagManager(table)
    restored = False
    tag_snap = None  # a tag target's snapshot: its files stay while the tag does
    if isinstance(target, str):
        snap = tag_snap = tags.get(target)
        if not table.file_io.exists(table.paths.snapshot(snap.id)):
            table.file_io.mkdirs(table.paths.snapshot_dir)
            table.file_io.write_if_absent(table.paths.snapshot(snap.id), snap.to_json().encode())
            sm.forget(snap.id)
            restored = True
            crash_point("rollback.after-restore")
        target_id = snap.id
    else:
        target_id = int(target)
        if not table.file_io.exists(table.paths.snapshot(target_id)):
            raise SnapshotNotFound(table.name, target_id)
    target_snap = sm.snapshot(target_id)
    later = [i for i in sm.ids() if i > target_id]
    all_tags = tags.all()
    dropped_tags = [name for name, tagged in all_tags.items() if tagged.id > target_id]
    kept_tags = [tagged for name, tagged in all_tags.items() if name not in dropped_tags]
    doomed = [sm.snapshot(i) for i in later]
    removal = plan_removal(table, doomed, [target_snap], first_doomed_full=True, tags=kept_tags) \
        if doomed else Removal()
    for name in dropped_tags:  # a dropped tag whose snapshot expired kept files no doomed snapshot holds
        tagged = all_tags[name]
        if tagged.id not in later:
            removal.merge(plan_removal(table, [tagged], [target_snap], first_doomed_full=True, tags=kept_tags))
    stale_changelogs = [cid for cid in retention.ids(table) if cid > target_id]
    if stale_changelogs:  # a changelog's files belong to its snapshot id alone -- in this line: others share them
        branch_use = referenced_elsewhere(table)
        for cid in stale_changelogs:
            snap = retention.read(table, cid)
            if snap is not None:
                data, meta = retention.changelog_paths(table, snap)
                removal.merge(Removal(data_files=sorted(data - branch_use), metadata_files=sorted(meta - branch_use)))
    crash_point("rollback.before-delete")
    if _restore_target(table, target_snap, tag_snap, "nothing was rolled back"):
        restored = True
    for name in dropped_tags:  # tags of rolled-back snapshots go with them
        tags.delete(name)
        crash_point("rollback.after-tag-delete")
    # The hint first (as Paimon's rollback does): while later snapshot files remain, readers take the newest listed
    # one, so a crash in between leaves an earlier committed state and a stale hint, never a hint past the end.
    # Not for a snapshot restored from a tag: it is older than every remaining snapshot and not followed by its
    # id + 1, so a hint naming it would already make it the latest while later snapshots still exist; the stale hint
    # is removed instead (the listing decides) and the hint written once the later snapshots are gone.
    if not restored:
        sm.write_latest_hint(target_id)
        crash_point("rollback.after-latest-hint")
    else:
        table.file_io.delete(f"{table.paths.snapshot_dir}/LATEST")
    for sid in sorted(later, reverse=True):
        table.file_io.delete(table.paths.snapshot(sid))
        sm.forget(sid)
        crash_point("rollback.after-snapshot-file")
    if _restore_target(table, target_snap, tag_snap, "the later snapshots were deleted too, so the table may have no "
                       "snapshot left"):
        restored = True
    for cid in sorted(stale_changelogs, reverse=True):
        table.file_io.delete(retention.path(table, cid))
    if restored:
        sm.write_latest_hint(target_id)
    if not any(i < target_id for i in sm.ids()):
        sm.write_earliest_hint(target_id)
    delete_files(table, removal, "rollback.after-file-delete")
    return removal


def _restore_target(table, target, tagged, lost: str) -> bool:
    """Make sure snapshot ``target`` still exists after a concurrent expiration may have removed it: True if it was
    written again from ``tagged`` (the tag's snapshot, whose files the tag kept), False if it was there. Raises
    SnapshotNotFound (``lost`` says what the rollback had done) when it is gone and no tag holds it."""
    path = table.paths.snapshot(target.id)
    if table.file_io.exists(path):
        return False
    if tagged is None:
        raise SnapshotNotFound(table.name, target.id, "a concurrent snapshot expiration removed it during the "
                               f"rollback; {lost}")
    table.file_io.write_if_absent(path, tagged.to_json().encode())
    table.snapshot_manager.forget(target.id)
    return True
