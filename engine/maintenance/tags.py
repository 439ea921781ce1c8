"""Tags in Paimon's layout: ``<table>/tag/tag-<name>`` holds the tagged snapshot's JSON (as Java and pypaimon write
a tag without retention); a tag with a retention also holds ``tagCreateTime`` (Java LocalDateTime array) and
``tagTimeRetained`` (Java Duration, decimal seconds), as Paimon's Tag. A tag keeps its snapshot's files alive through
snapshot expiration. With ``tag.create-success-file`` a new tag also gets ``tag/tag-success-file/<name>_SUCCESS``
(Paimon's SuccessFileTagCallback); that directory is not a tag.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import re
import time
import uuid

from engine.crash_points import crash_point
from engine.errors import CorruptFile, InvalidInput, SnapshotNotFound, TagNotFound
from engine.meta.snapshot import Snapshot

TAG_PREFIX = "tag-"
SUCCESS_FILE_DIR = "tag-success-file"
__all__ = ["SUCCESS_FILE_DIR", "TAG_PREFIX", "TagManager", "TagNotFound", "delete_tag", "is_tag_file_name",
           "tagged_snapshots"]


def is_tag_file_name(name: str) -> bool:
    """True for the name of a tag file in a ``tag/`` directory (not a temporary file, not the success-file
    directory)."""
    return name.startswith(TAG_PREFIX) and not name.endswith(".tmp") and name != SUCCESS_FILE_DIR


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
        return sorted(n[len(TAG_PREFIX):] for n in self.io.list_names(self.tag_dir) if is_tag_file_name(n))

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

    def create(self, name: str, snapshot: Snapshot, time_retained_ms: int | None = None, *,
               automatic: bool = False) -> None:
        """Write tag ``name`` of ``snapshot``; with ``time_retained_ms`` (milliseconds) it records that retention and
        its create time (local time now), as Paimon does only then. With the table option ``tag.create-success-file``
        the tag's success file is written too. ``automatic`` tags (engine.maintenance.auto_tags) may have purely
        numeric names, as Paimon's ``yyyyMMdd`` ones. Raises InvalidInput for a bad or existing name."""
        from engine.options import TAG_CREATE_SUCCESS_FILE
        self.validate_name(name, allow_numeric=automatic)
        self.io.mkdirs(self.tag_dir)
        crash_point("tag.before-create")
        if not self.io.write_if_absent(self.path(name), _tag_json(snapshot, time_retained_ms).encode()):
            raise InvalidInput(f"tag {name!r} already exists", table=self.table.name)
        crash_point("tag.after-create")
        if self.table.schema.table_options.get(TAG_CREATE_SUCCESS_FILE):
            self._write_success_file(name)

    def create_of_live(self, name: str, snapshot: Snapshot, time_retained_ms: int | None = None, *,
                       automatic: bool = False) -> None:
        """``create``, then withdraw the tag and raise SnapshotNotFound if ``snapshot`` no longer exists: a
        concurrent expiration that read the tags before this one was written may delete its files
        (engine.maintenance.expire._spare_new_tags spares only tags written before it deletes the snapshot file).
        Raises InvalidInput as ``create``. The snapshot may also have been a stale claim that its committer withdrew
        (engine/commit/committer.py): the commit is retried with the files the snapshot added, so those stay (a
        withdrawn tag of a really expired snapshot leaves them to orphan cleanup)."""
        from engine.errors import LakemergeError, SnapshotNotFound
        self.create(name, snapshot, time_retained_ms, automatic=automatic)
        if not self.table.snapshot_manager.exists(snapshot.id):
            try:  # the expiration may have spared the files for the tag: they go with it
                delete_tag(self.table, name, keep_added=True)
            except LakemergeError:
                self.delete(name)  # the tag must go; files it alone kept are left to orphan cleanup
            raise SnapshotNotFound(self.table.name, snapshot.id)

    def delete(self, name: str) -> Snapshot:
        """Delete tag ``name`` (only the tag file and its success file; see ``delete_tag`` for its data files) and
        return its snapshot. Raises TagNotFound.
        """
        snap = self.get(name)
        self.io.delete(self.path(name))
        self.io.delete(self.success_file_path(name))
        return snap

    def success_file_path(self, name: str) -> str:
        """``tag/tag-success-file/<name>_SUCCESS`` (Paimon's SuccessFileTagCallback)."""
        return os.path.join(self.tag_dir, SUCCESS_FILE_DIR, name + "_SUCCESS")

    def _write_success_file(self, name: str) -> None:
        """Paimon's SuccessFile JSON: creationTime kept from an existing file, modificationTime now (epoch ms)."""
        path = self.success_file_path(name)
        now = int(time.time() * 1000)
        created = now
        try:
            created = int(json.loads(self.io.read_bytes(path))["creationTime"])
        except FileNotFoundError:
            pass
        except (ValueError, KeyError, TypeError, UnicodeDecodeError):
            pass  # an unreadable old success file is replaced
        self.io.mkdirs(os.path.dirname(path))
        text = json.dumps({"creationTime": created, "modificationTime": now}, indent=2, separators=(",", " : "))
        self.io.write_bytes(path, text.encode())

    def retention(self, name: str) -> tuple[dt.datetime | None, int | None]:
        """(tagCreateTime as a naive local datetime, tagTimeRetained in milliseconds) of tag ``name``; None for a
        field the tag does not record. Raises TagNotFound, CorruptFile."""
        path = self.path(name)
        try:
            obj = json.loads(self.io.read_bytes(path))
        except FileNotFoundError:
            raise TagNotFound(self.table.name, name) from None
        except (ValueError, UnicodeDecodeError) as e:
            raise CorruptFile(path, f"not valid JSON: {e}") from None
        if not isinstance(obj, dict):
            raise CorruptFile(path, "JSON is not an object")
        from engine.system_tables import _tag_create_time
        return _tag_create_time(obj.get("tagCreateTime"), path), _retained_ms(obj.get("tagTimeRetained"), path)

    def validate_name(self, name: str, *, allow_numeric: bool = False) -> None:
        """Raise InvalidInput unless ``name`` is a non-blank string that is not purely numeric (unless
        ``allow_numeric``: Paimon allows it, lakemerge refuses it for the tags users name), has no path separator,
        does not start with '.' and is not ``success-file`` (its file would be the success-file directory).
        """
        if not isinstance(name, str) or not name.strip():
            raise InvalidInput("a tag name must be a non-blank string", table=self.table.name)
        if not allow_numeric and re.fullmatch(r"\d+", name):
            raise InvalidInput(f"tag name {name!r} cannot be purely numeric (it would read as a snapshot id)",
                               table=self.table.name)
        if "/" in name or "\\" in name or name.startswith("."):
            raise InvalidInput(f"tag name {name!r} may not contain path separators or start with '.'",
                               table=self.table.name)
        if TAG_PREFIX + name == SUCCESS_FILE_DIR:
            raise InvalidInput(f"tag name {name!r} is reserved: tag/{SUCCESS_FILE_DIR} holds the tags' success files",
                               table=self.table.name)


def _tag_json(snapshot: Snapshot, time_retained_ms: int | None) -> str:
    """The snapshot's JSON, plus Paimon's Tag fields when a retention is given (Jackson's forms: the create time
    as [y, m, d, h, min(, s(, nanos))] with trailing zeros dropped, the retention as decimal seconds)."""
    if time_retained_ms is None:
        return snapshot.to_json()
    now = dt.datetime.fromtimestamp(time.time())
    created = [now.year, now.month, now.day, now.hour, now.minute]
    if now.second or now.microsecond:
        created.append(now.second)
        if now.microsecond:
            created.append(now.microsecond * 1000)
    out = json.loads(snapshot.to_json())
    out["tagCreateTime"] = created
    # json writes no fixed-point number: a placeholder no other value can hold is replaced by Jackson's form
    placeholder = f"@retained-{uuid.uuid4().hex}@"
    out["tagTimeRetained"] = placeholder
    secs, ms = divmod(int(time_retained_ms), 1000)
    text = json.dumps(out, indent=2, separators=(",", " : "), ensure_ascii=False)
    return text.replace(f'"{placeholder}"', f"{secs}.{ms * 1_000_000:09d}", 1)


_ISO_DURATION = re.compile(r"(-)?PT(?:(-?\d+)H)?(?:(-?\d+)M)?(?:(-?\d+(?:\.\d+)?)S)?")


def _retained_ms(value, path: str) -> int | None:
    """A tagTimeRetained value (Jackson writes decimal seconds; an ISO-8601 ``PT..`` text is read too) in ms."""
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return round(value * 1000)
    m = _ISO_DURATION.fullmatch(value) if isinstance(value, str) else None
    if m is None or value == "PT":
        raise CorruptFile(path, f"tagTimeRetained {value!r} is not a duration")
    h, mi, s = (float(g) if g else 0.0 for g in m.group(2, 3, 4))
    ms = round((h * 3600 + mi * 60 + s) * 1000)
    return -ms if m.group(1) else ms


def tagged_snapshots(table) -> list[Snapshot]:
    """Every tag's snapshot. Raises CorruptFile when a tag cannot be read (callers deleting files fail closed)."""
    return list(TagManager(table).all().values())


def delete_tag(table, name: str, *, keep_added: bool = False) -> None:
    """Remove tag ``name``; when its snapshot has expired, also the files only the tag kept alive -- data, manifest
    and index files (files shared with retained snapshots live on in the earliest one; a decoupled changelog's files
    stay with it, as in Paimon, where changelog files belong to snapshot and changelog expiration).

    Safe against a concurrent snapshot expiration: the files to delete are planned again when it removes snapshots
    the plan reads, and once more after the tag is gone if the earliest snapshot changed meanwhile (an expiration
    that read the tag kept its files; the first plan kept the earliest snapshot's). Raises TagNotFound, CorruptFile
    for unreadable metadata that nothing is changing (the tag is kept then). With ``keep_added`` the files the tagged
    snapshot added (data and changelog files of its deltas, its index files) stay: see TagManager.create_of_live."""
    from engine.maintenance.cleanup import Removal, clean_emptied_dirs, delete_files
    tags = TagManager(table)
    snap = tags.get(name)
    spared = _added_files(table, snap) if keep_added else set()
    earliest, removal = _tag_removal(table, name, snap)
    tags.delete(name)
    ids = table.snapshot_manager.ids()
    if (ids[0] if ids else None) != earliest:
        try:
            removal = _tag_removal(table, name, snap)[1] or removal
        except (CorruptFile, SnapshotNotFound, TagNotFound):
            pass  # the first plan is still safe (it kept more); orphan cleanup removes the rest
    if removal is not None:
        removal = Removal(removal.snapshot_ids, [p for p in removal.data_files if p not in spared],
                          removal.metadata_files, [p for p in removal.index_files if p not in spared])
        delete_files(table, removal)
        clean_emptied_dirs(table, removal.data_files)


def _added_files(table, snap: Snapshot) -> set[str]:
    """The data and changelog files ``snap``'s deltas add and its index files: what a stale claim's commit, retried,
    publishes again. Raises CorruptFile for unreadable metadata."""
    from engine.maintenance.references import changelog_added_files, delta_added_files, index_files
    return delta_added_files(table, snap) | changelog_added_files(table, snap) | index_files(table, snap)


def _tag_removal(table, name: str, snap: Snapshot):
    """``(earliest snapshot id, Removal)`` of tag ``name`` of ``snap``: the files only it keeps alive, or None while
    ``snap`` still exists (expiration removes its files later). Planned again while the snapshots or tags it reads
    change under it; raises CorruptFile, SnapshotNotFound or TagNotFound when unchanged metadata cannot be read."""
    from engine.changelog.retention import referenced
    from engine.maintenance.cleanup import plan_removal
    sm, tags = table.snapshot_manager, TagManager(table)
    while True:
        state = (sm.ids(), tags.names())
        ids = state[0]
        earliest = ids[0] if ids else None
        if table.file_io.exists(table.paths.snapshot(snap.id)):
            return earliest, None
        try:
            kept = [] if earliest is None else [sm.snapshot(earliest)]
            others = [s for n, s in tags.all().items() if n != name]  # read after the earliest: a tag of an older
            removal = plan_removal(table, [snap], kept, first_doomed_full=True, tags=others)  # snapshot is withdrawn
            changelogs = referenced(table)
        except (CorruptFile, SnapshotNotFound, TagNotFound):
            if (sm.ids(), tags.names()) == state:
                time.sleep(0.05)  # a committer withdrawing a stale claim: it goes within moments
                if (sm.ids(), tags.names()) == state:
                    raise
            continue
        removal.data_files = [p for p in removal.data_files if p not in changelogs]
        removal.metadata_files = [p for p in removal.metadata_files if p not in changelogs]
        return earliest, removal
