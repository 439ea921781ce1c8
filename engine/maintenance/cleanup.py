"""Removing snapshots and exactly the files only they referenced (shared by expiration, rollback and tag deletion).

Order keeps every visible snapshot whole: what to delete is computed first (reading every involved snapshot; an
unreadable one raises and nothing is deleted), then snapshot files go, then the data, index and metadata files. A
crash in between leaves only unreferenced files, which orphan cleanup removes.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Sequence

from engine.branches import referenced_elsewhere
from engine.crash_points import crash_point
from engine.errors import CorruptFile
from engine.maintenance.references import (changelog_added_files, committed_on, data_files, delta_added_files,
                                           delta_deleted_files, index_files, metadata_files)
from engine.maintenance.tags import tagged_snapshots
from engine.meta.snapshot import Snapshot


@dataclass
class Removal:
    """What a cleanup removed (or would remove): snapshot ids, data, metadata and index file paths."""
    snapshot_ids: list[int] = field(default_factory=list)
    data_files: list[str] = field(default_factory=list)
    metadata_files: list[str] = field(default_factory=list)
    index_files: list[str] = field(default_factory=list)

    def merge(self, other: "Removal") -> None:
        """Add ``other``'s files (not its snapshot ids) to this removal."""
        self.data_files = sorted(set(self.data_files) | set(other.data_files))
        self.metadata_files = sorted(set(self.metadata_files) | set(other.metadata_files))
        self.index_files = sorted(set(self.index_files) | set(other.index_files))


def plan_removal(table, doomed: Sequence[Snapshot], kept_data: Sequence[Snapshot], first_doomed_full: bool,
                 tags: Sequence[Snapshot] | None = None, *, expiring: bool = False) -> Removal:
    """Files to delete with ``doomed``: data files and manifests/manifest lists they reference that neither a
    snapshot in ``kept_data`` (the retained snapshot adjacent to the doomed range) nor a tag references.

    Data file candidates: with ``expiring`` (expiration of the oldest snapshots, ``kept_data`` = the first retained
    one) the files that the snapshots after the first doomed one -- the later doomed ones and ``kept_data`` --
    DELETE in their deltas, as Paimon's expiration does: a file only ever ADDed by a snapshot off the table's
    history (a stale claim being withdrawn while this plan read it) is never deleted, its commit may still land.
    Otherwise, with ``first_doomed_full``, the first doomed snapshot's live files plus later doomed snapshots' added
    files; else only doomed snapshots' added files. Changelog files of doomed snapshots are always candidates.
    Index files (every index type of the index manifests): see ``_index_candidates``.
    ``tags``: the tagged snapshots of ``table``'s line that stay (default: every tag). Every file another line --
    main or a branch, whichever ``table`` is not -- references stays too (engine.branches.referenced_elsewhere):
    all lines share the table's manifests, data and index files.
    """
    doomed = sorted(doomed, key=lambda s: s.id)
    tags = tagged_snapshots(table) if tags is None else list(tags)
    candidates: set[str] = set()
    if expiring:
        for snap in doomed[1:] + list(kept_data):
            candidates |= delta_deleted_files(table, snap)
    for i, snap in enumerate(doomed):
        if not expiring:
            candidates |= data_files(table, snap) if (i == 0 and first_doomed_full) else \
                delta_added_files(table, snap)
        candidates |= changelog_added_files(table, snap)
    elsewhere = referenced_elsewhere(table)
    keep: set[str] = set(elsewhere)
    for snap in list(kept_data) + tags:
        keep |= data_files(table, snap)
    meta_candidates: set[str] = set()
    for snap in doomed:
        meta_candidates |= metadata_files(table, snap)
    # Manifests are immutable and, once merged away, never referenced again: a manifest shared by a doomed
    # snapshot and any remaining one is also used by the kept snapshot next to the doomed range.
    meta_keep: set[str] = set(elsewhere)
    for snap in list(kept_data) + tags:
        meta_keep |= metadata_files(table, snap)
    index_keep: set[str] = set(elsewhere)
    for snap in list(kept_data) + tags:
        index_keep |= index_files(table, snap)
    index_candidates = _index_candidates(table, doomed, kept_data, index_keep, expiring)
    return Removal([s.id for s in doomed], sorted(candidates - keep), sorted(meta_candidates - meta_keep),
                   sorted(index_candidates))


def _index_candidates(table, doomed: list[Snapshot], kept_data: Sequence[Snapshot], keep: set[str],
                      expiring: bool) -> set[str]:
    """Index files of ``doomed`` (sorted by id) not in ``keep`` (Paimon's rule: the doomed snapshots' index files
    minus those of the kept snapshot and the tags; an index file is listed by every snapshot from the one that
    added it to the last one before its replacement, so one in a later retained snapshot is also in ``kept_data``).

    With ``expiring``, only the index files of a doomed snapshot that the snapshot after it (the next doomed one or
    ``kept_data``) was committed on (``committed_on``): a snapshot off the table's history -- a stale claim being
    withdrawn, or left by a crash -- lists the index files of a commit that is still being retried and will land
    with them; they stay, as do those of a snapshot whose lineage cannot be read (a stale claim left by a crash
    names manifests that expired before it); orphan cleanup removes them once nothing references them. The
    lineage is read only for a doomed snapshot that has index files to free.
    """
    snaps = sorted(list(doomed) + list(kept_data), key=lambda s: s.id)
    by_manifest: dict[str, set[str]] = {}  # most snapshots carry their predecessor's index manifest over
    out: set[str] = set()
    for snap in doomed:
        if snap.index_manifest not in by_manifest:
            by_manifest[snap.index_manifest] = index_files(table, snap)
        files = by_manifest[snap.index_manifest] - keep - out
        if not files:
            continue
        if expiring:
            successor = next((s for s in snaps if s.id > snap.id), None)
            try:
                if successor is None or not committed_on(table, snap, successor):
                    continue
            except CorruptFile:
                continue  # keeping is safe; deleting what a landing commit references is not
        out |= files
    return out


def clean_emptied_dirs(table, data_files: Sequence[str]) -> None:
    """``delete_emptied_dirs`` when the table sets ``snapshot.clean-empty-directories`` (or its old name
    ``snapshot.expire.clean-empty-directories``); nothing otherwise. Paimon cleans after snapshot, changelog and
    tag deletion alike (FileDeletionBase.cleanEmptyDirectories)."""
    from engine.options import SNAPSHOT_CLEAN_EMPTY_DIRECTORIES, SNAPSHOT_EXPIRE_CLEAN_EMPTY_DIRECTORIES
    opts = table.schema.table_options
    if opts.get(SNAPSHOT_CLEAN_EMPTY_DIRECTORIES if SNAPSHOT_CLEAN_EMPTY_DIRECTORIES in opts.raw
                else SNAPSHOT_EXPIRE_CLEAN_EMPTY_DIRECTORIES):
        delete_emptied_dirs(table, data_files)


def delete_emptied_dirs(table, data_files: Sequence[str]) -> None:
    """Delete the directories of ``data_files`` that are now empty, and then their emptied parents, up to (not
    including) the table root, as Paimon's FileDeletionBase.cleanEmptyDirectories (option
    ``snapshot.clean-empty-directories``). A directory is removed only while empty: a file already written into it
    keeps it, but a writer that created it and has not yet written its file fails (FileNotFoundError, nothing
    committed) -- the race Paimon's option carries too. Files outside the table root (external paths) are left
    alone."""
    root = os.path.abspath(table.root)
    pending = {os.path.dirname(os.path.abspath(p)) for p in data_files}
    while pending:
        d = max(pending, key=len)  # deepest first: a parent can only empty after its children
        pending.discard(d)
        if d.startswith(root + os.sep) and table.file_io.delete_empty_dir(d):
            pending.add(os.path.dirname(d))


def delete_files(table, removal: Removal, crash_point_name: str | None = None) -> None:
    """Delete the removal's data, index, then metadata files; ``crash_point_name`` is passed after each deletion."""
    for path in removal.data_files + removal.index_files + removal.metadata_files:
        table.file_io.delete(path)
        if crash_point_name:
            crash_point(crash_point_name)
