"""A branch of a table, read as a table: ``Table.branch(name)`` / ``Catalog.get_table("db.t$branch_<name>")``.

Its snapshots, schemas and tags are the branch's (``<table>/branch/branch-<name>/``, engine.branches); manifests and
data files are read from and written to the table's shared directories. Reading, planning, lookups, time travel
(snapshot ids and tags of the branch), writes, deletes, overwrites and compaction work as on main; a commit on a
branch runs no maintenance after it (no snapshot or partition expiration: expiring a branch must keep what main and
the other branches use, which lakemerge does not plan yet). Tags, expiration, rollback, schema changes, orphan
cleanup, changelog streams, consumers and check() on a branch raise UnsupportedFeature.
"""
from __future__ import annotations

from engine.branches import branch_root
from engine.errors import InvalidInput, TableNotFound, UnsupportedFeature
from engine.table import Table

BRANCH_SUFFIX = "branch_"  # db.t$branch_<name>, as Paimon names a branch table

_NOT_ON_A_BRANCH = ("expire_snapshots", "remove_orphan_files", "create_tag", "delete_tag", "rollback_to",
                    "drop_partitions", "expire_partitions", "alter", "alter_table",
                    "read_changes", "stream", "consumers", "reset_consumer", "check", "create_branch",
                    "delete_branch", "branches", "fast_forward")


class BranchTable(Table):
    """Branch ``branch`` of ``main`` (a Table of the main branch); ``name`` is ``<main name>$branch_<branch>``.
    Raises InvalidInput for a name with a path separator, TableNotFound if the branch has no schema (no such
    branch)."""

    def __init__(self, main: Table, branch: str):
        if not isinstance(branch, str) or not branch.strip() or "/" in branch or "\\" in branch \
                or branch.startswith("."):
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

    def _expire_after_commit(self, messages=(), identifier=None) -> None:
        """No maintenance after a branch commit (see the module docstring)."""


def _refuse(method: str):
    def refused(self, *args, **kwargs):
        raise UnsupportedFeature(f"table {self.name!r}: {method}() on a branch is not supported (lakemerge reads "
                                 "branches only; use the main table)")
    refused.__name__ = method
    return refused


for _method in _NOT_ON_A_BRANCH:
    assert hasattr(Table, _method), _method
    setattr(BranchTable, _method, _refuse(_method))
