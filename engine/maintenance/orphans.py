"""Orphan file cleanup: delete files under the table that no snapshot, tag or in-flight commit can reference.

A file is an orphan when no existing snapshot or tag -- of main or of any branch (``branch/branch-<name>/``, whose
manifests, data and index files share the table's directories) -- references it (as a manifest list, manifest, index manifest,
data, changelog, extra or index file) and it was last modified before ``older_than`` ago: younger files may belong
to a commit still in flight. Snapshot, schema, tag, consumer, branch, changelog and statistics directories are never
swept (except stale ``.tmp`` files of interrupted publishes); ``index/`` is, by the index manifests of every
snapshot and tag (whatever the index type). If any snapshot, tag or manifest cannot be read, nothing is deleted
(CorruptFile is raised): an unreadable reference could point at any file.
"""
from __future__ import annotations

import datetime as dt
import os
import time

from engine.branches import line_references, referenced_elsewhere
from engine.crash_points import crash_point
from engine.data_paths import external_bucket_dirs
from engine.errors import LakemergeError

# Never swept: metadata lakemerge does not interpret file by file (statistics/ holds table statistics) is left alone
# rather than guessed at. index/ is swept: its files are referenced through the snapshots' index manifests.
PROTECTED_DIRS = ("schema", "snapshot", "tag", "consumer", "branch", "changelog", "service", "statistics")
DAY_MS = 86_400_000


def _older_than_ms(older_than) -> int:
    if older_than is None:
        return DAY_MS
    if isinstance(older_than, dt.timedelta):
        return int(older_than.total_seconds() * 1000)
    if isinstance(older_than, dt.datetime):
        return int((time.time() - older_than.timestamp()) * 1000)
    return int(older_than)


def referenced_files(table) -> set[str]:
    """Every file path some snapshot, tag or decoupled changelog of ``table``'s line or of any other line (main,
    branches) references; a line is read again while a concurrent expiration, tag deletion or rollback changes it
    (engine.branches.line_references). Raises CorruptFile (or SnapshotNotFound, TagNotFound) if unchanged metadata
    cannot be read."""
    return line_references(table) | referenced_elsewhere(table)


def delete_unreferenced(table, paths) -> list[str]:
    """Delete those of ``paths`` that no snapshot, tag or decoupled changelog references; returns them.

    For the files of a commit that failed: the same files may already be committed (a replayed or mixed message
    set), and committed files are never deleted. When the references cannot be read, nothing is deleted (an
    orphan is harmless, a missing committed file is not)."""
    paths = list(paths)
    if not paths:
        return []
    sm = table.snapshot_manager
    for _ in range(3):
        ids = sm.ids()
        try:
            keep = {os.path.normpath(p) for p in referenced_files(table)}
            break
        except LakemergeError:
            if sm.ids() == ids:  # damaged, not a concurrent expiration: fail closed
                return []
    else:
        return []
    out = [p for p in paths if os.path.normpath(p) not in keep]
    for p in out:
        try:
            table.file_io.delete(p)
        except LakemergeError:
            pass  # left behind as an orphan
    return out


def remove_orphan_files(table, older_than=None, *, dry_run: bool = False) -> list[str]:
    """Delete orphans last modified more than ``older_than`` ago (timedelta, datetime cutoff, or milliseconds;
    default one day): files under the table root and, as Paimon does, in the bucket directories under the roots of
    ``data-file.external-paths``. Returns the deleted (or, with ``dry_run``, deletable) paths."""
    cutoff = time.time() - _older_than_ms(older_than) / 1000.0
    keep = {os.path.normpath(p) for p in referenced_files(table)}

    def is_old(path: str) -> bool:
        """Last modified before the cutoff (a file gone meanwhile is not an orphan to delete)."""
        try:
            return table.file_io.modified_millis(path) <= cutoff * 1000
        except FileNotFoundError:
            return False

    out = []
    root = table.root
    for directory, subdirs, files in os.walk(root):
        rel = os.path.relpath(directory, root)
        top = rel.split(os.sep)[0]
        if top in PROTECTED_DIRS:
            candidates = [f for f in files if f.startswith(".") and f.endswith(".tmp")]
        else:
            candidates = files
        out += [path for path in (os.path.normpath(os.path.join(directory, name)) for name in candidates)
                if path not in keep and is_old(path)]
    for directory in external_bucket_dirs(table.schema.options, len(table.schema.partition_keys)):
        out += [path for path in (os.path.normpath(os.path.join(directory, name))
                                  for name in table.file_io.list_names(directory))
                if path not in keep and os.path.isfile(path) and is_old(path)]
    if not dry_run:
        crash_point("orphans.before-delete")
        for path in out:
            table.file_io.delete(path)
            crash_point("orphans.after-delete")
    return sorted(out)
