"""Tags in Paimon's layout: ``<table>/tag/tag-<name>`` holds the tagged snapshot's JSON (as Java and pypaimon write
a tag without retention). A tag keeps its snapshot's files alive through snapshot expiration.
"""
from __future__ import annotations

import os
import re

from engine.crash_points import crash_point
from engine.errors import InvalidInput, TagNotFound
from engine.meta.snapshot import Snapshot

TAG_PREFIX = "tag-"
__all__ = ["TAG_PREFIX", "TagManager", "TagNotFound", "delete_tag", "tagged_snapshots"]


class TagManager:
    """Reads and writes the tag files of one table (``<table>/tag/tag-<name>``; of a branch table, its branch's
    ``tag/``); with ``root``, those of the branch rooted there (``<table>/branch/branch-<name>/tag/``)."""

    def __init__(self, table, root: str | None = None):
        self.table = table
        self.io = table.file_io
        self.tag_dir = os.path.join(table.paths.meta_root if root is None else root, "tag")

    def path(self, name: str) -> str:
        """The file of tag ``name`` (whether or not it exists); the name is not validated here."""
        return os.path.join(self.tag_dir, TAG_PREFIX + name)

    def names(self) -> list[str]:
        """Names of the existing tags, sorted (temporary files of tags being written are skipped)."""
        return sorted(n[len(TAG_PREFIX):] for n in self.io.list_names(self.tag_dir)
                      if n.startswith(TAG_PREFIX) and not n.endswith(".tmp"))

    def get(self, name: str) -> Snapshot:
        """The tagged snapshot. Raises TagNotFound, CorruptFile."""
        path = self.path(name)
        try:
            data = self.io.read_bytes(path)
        except FileNotFoundError:
            raise TagNotFound(self.table.name, name) from None
        return Snapshot.from_json(data.decode("utf-8"), path)

    def all(self) -> dict[str, Snapshot]:
        """Tag name -> tagged Snapshot for every tag. Raises CorruptFile for an unreadable tag file."""
        return {n: self.get(n) for n in self.names()}

    def create(self, name: str, snapshot: Snapshot) -> None:
        """Raises InvalidInput for a bad or existing name."""
        self.validate_name(name)
        self.io.mkdirs(self.tag_dir)
        crash_point("tag.before-create")
        if not self.io.write_if_absent(self.path(name), snapshot.to_json().encode()):
            raise InvalidInput(f"tag {name!r} already exists", table=self.table.name)
        crash_point("tag.after-create")

    def delete(self, name: str) -> Snapshot:
        """Delete tag ``name`` (only the tag file; see ``delete_tag`` for its data files) and return its snapshot.
        Raises TagNotFound.
        """
        snap = self.get(name)
        self.io.delete(self.path(name))
        return snap

    def validate_name(self, name: str) -> None:
        """Raise InvalidInput unless ``name`` is a non-blank string that is not purely numeric, has no path separator
        and does not start with '.'.
        """
        if not isinstance(name, str) or not name.strip():
            raise InvalidInput("a tag name must be a non-blank string", table=self.table.name)
        if re.fullmatch(r"\d+", name):
            raise InvalidInput(f"tag name {name!r} cannot be purely numeric (it would read as a snapshot id)",
                               table=self.table.name)
        if "/" in name or "\\" in name or name.startswith("."):
            raise InvalidInput(f"tag name {name!r} may not contain path separators or start with '.'",
                               table=self.table.name)


def tagged_snapshots(table) -> list[Snapshot]:
    """Every tag's snapshot. Raises CorruptFile when a tag cannot be read (callers deleting files fail closed)."""
    return list(TagManager(table).all().values())


def delete_tag(table, name: str) -> None:
    """Remove tag ``name``; when its snapshot has expired, also the files only the tag kept alive -- data, manifest
    and index files (files shared with retained snapshots live on in the earliest one; a decoupled changelog's files
    stay with it, as in Paimon, where changelog files belong to snapshot and changelog expiration). Raises
    TagNotFound."""
    from engine.changelog.retention import referenced
    from engine.maintenance.cleanup import delete_files, plan_removal
    tags = TagManager(table)
    snap = tags.get(name)
    others = [s for n, s in tags.all().items() if n != name]
    removal = None
    if not table.file_io.exists(table.paths.snapshot(snap.id)):
        sm = table.snapshot_manager
        earliest = sm.earliest_id()
        kept = [] if earliest is None else [sm.snapshot(earliest)]
        removal = plan_removal(table, [snap], kept, first_doomed_full=True, tags=others)
        changelogs = referenced(table)
        removal.data_files = [p for p in removal.data_files if p not in changelogs]
        removal.metadata_files = [p for p in removal.metadata_files if p not in changelogs]
    tags.delete(name)
    if removal is not None:
        delete_files(table, removal)
