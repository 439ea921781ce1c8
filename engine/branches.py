"""Paimon branches as they lie on disk: ``<table>/branch/branch-<name>/`` holds a branch's own ``snapshot/``,
``schema/`` and ``tag/`` directories, while its manifests, data and index files live in the table's usual
directories, shared with the main branch (Paimon's BranchManager.branchPath).

Used by everything that deletes files: a file any branch's snapshot, tag or decoupled changelog references is in
use.
"""
from __future__ import annotations

import os

from engine.errors import CorruptFile
from engine.meta.snapshot import Snapshot
from engine.paths import TablePaths

BRANCH_DIR = "branch"
BRANCH_PREFIX = "branch-"


def branch_root(table_root: str, name: str) -> str:
    """The directory of branch ``name`` (whether or not it exists)."""
    return os.path.join(table_root, BRANCH_DIR, BRANCH_PREFIX + name)


def branch_names(table) -> list[str]:
    """Names of the table's branches (the directories ``branch/branch-<name>``), sorted."""
    directory = os.path.join(table.root, BRANCH_DIR)
    return sorted(n[len(BRANCH_PREFIX):] for n in table.file_io.list_names(directory)
                  if n.startswith(BRANCH_PREFIX) and table.file_io.is_dir(os.path.join(directory, n)))


def branch_snapshots(table) -> list[Snapshot]:
    """Every snapshot and every tagged snapshot of every branch of ``table`` (not of main).

    Raises CorruptFile when a branch has no schema (as Paimon's OrphanFilesClean, which then refuses to clean: such
    a directory is not a branch it can read) or when one of its snapshots or tags cannot be read, so a caller
    deciding what to delete fails closed."""
    from engine.maintenance.tags import TagManager
    from engine.snapshots import SnapshotManager

    out: list[Snapshot] = []
    for name in branch_names(table):
        root = branch_root(table.root, name)
        paths = TablePaths(root)
        if not any(n.startswith("schema-") for n in table.file_io.list_names(paths.schema_dir)):
            raise CorruptFile(root, f"branch {name!r} of table {table.name!r} has no schema")
        sm = SnapshotManager(table.file_io, paths, f"{table.name}$branch_{name}")
        out += [sm.snapshot(i) for i in sm.ids()]
        out += list(TagManager(table, root=root).all().values())
    return out


def branch_changelog_files(table) -> set[str]:
    """Files (data and manifests, in the table's shared directories) that the decoupled changelogs of every branch
    (``branch/branch-<name>/changelog/``) reference."""
    from engine.changelog.retention import referenced
    out: set[str] = set()
    for name in branch_names(table):
        out |= referenced(table.branch(name))
    return out
