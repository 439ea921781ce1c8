"""A branch of a table, as a table: ``Table.branch(name)`` / ``Catalog.get_table("db.t$branch_<name>")``.

As Paimon's branch table (AbstractFileStoreTable.switchToBranch: an ordinary table whose snapshot, schema, tag,
consumer and changelog paths are the branch's), its snapshots, schemas, tags, consumers and decoupled changelogs are
the branch's (``<table>/branch/branch-<name>/``, engine.branches) and its options are those of the branch's schema;
manifests, data and index files are read from and written to the table's shared directories.

Everything a table does works on a branch: reads, time travel (snapshot ids and the branch's tags), writes,
deletes, overwrites, compaction, the maintenance after a commit (with the branch's options), snapshot and changelog
expiration, tags, rollback, schema changes (the branch's ``schema/`` only; main keeps its own), partition drop and
expiration, changelog reads, streams and consumers. Whatever deletes files on a branch keeps every file main or
another branch references (engine.branches.referenced_elsewhere) -- safer than Paimon, whose branch expiration does
not look at the other branches. ``remove_orphan_files`` runs on the whole table (main and every branch: orphans are
defined by all of them); ``check`` checks the branch, main and the other branches only as far as the files they
reference, and lists the whole table's unreferenced files (engine.check). Branch management works from a branch as
from main, as on Paimon's branch table: ``create_branch`` copies this branch's latest schema or one of its tags,
``fast_forward(other)`` replaces this branch's history with ``other``'s, and ``branches``, ``delete_branch`` and
``rename_branch`` act on the table's branches.
"""
from __future__ import annotations

from engine.branches import branch_root
from engine.errors import InvalidInput, TableNotFound
from engine.table import Table

BRANCH_SUFFIX = "branch_"  # db.t$branch_<name>, as Paimon names a branch table


class BranchTable(Table):
    """Branch ``branch`` of ``main`` (a Table of the main branch); ``name`` is ``<main name>$branch_<branch>``.
    Raises InvalidInput for a name with a path separator, TableNotFound if the branch has no schema (no such
    branch)."""

    def __init__(self, main: Table, branch: str):
        # a leading '.' is a name Paimon accepts (its directory is ``branch-.x``); only path separators are refused
        if not isinstance(branch, str) or not branch.strip() or "/" in branch or "\\" in branch:
            raise InvalidInput(f"{branch!r} is not a branch name", table=main.name)
        root = branch_root(main.root, branch)
        name = f"{main.name}${BRANCH_SUFFIX}{branch}"
        try:
            super().__init__(name, main.root, main.file_io, meta_root=root)
        except TableNotFound:
            raise TableNotFound(name, f"table {main.name!r} has no branch {branch!r} ({root} holds no schema)") \
                from None
        self.branch_name = branch
        self.main = main

    def branch(self, name: str) -> Table:
        """Branch ``name`` of the table (``main``: the main table), as Paimon's switchToBranch from a branch."""
        return self.main.branch(name)

    def remove_orphan_files(self, older_than=None, *, dry_run: bool = False) -> list[str]:
        """The main table's orphan cleanup: files no snapshot, tag or changelog of main or of any branch
        references (the lines share their directories, so an orphan is one for all of them)."""
        return self.main.remove_orphan_files(older_than, dry_run=dry_run)

