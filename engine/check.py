"""Table consistency check (``Table.check()``, the engine behind ``lakemerge fsck``).

``check_table(table)`` re-reads everything from storage (no cache of the ``Table`` object is trusted) and reports:

- snapshots: every listed ``snapshot-N`` parses and holds id N; ids from earliest to latest are contiguous; the
  live files of each snapshot's base manifest list are exactly the live files of the snapshot before it;
  ``schemaId`` names an existing schema; ``totalRecordCount`` equals the row count of the live files and
  ``deltaRecordCount`` the added minus deleted rows of the delta;
- manifests: every manifest list and manifest a snapshot names exists, decodes, and has the size recorded for it;
  the entries fold without duplicate or dangling files;
- tags: every ``tag/tag-<name>`` parses; a tag whose snapshot has expired is checked like a snapshot (its files
  must still exist), and the files it keeps alive count as referenced;
- branches: the snapshots and tags of every ``branch/branch-<name>/`` are checked like tags (their files live in
  the table's shared directories and count as referenced), and the branch's own files are not orphans. Checking a
  branch table (``db.t$branch_b``) checks that branch as above (its snapshots, hints, tags, schemas, changelogs)
  and main and the other branches like tags; unreferenced files are the table's either way (all lines share the
  directories, so an orphan is one of all of them);
- changelogs: the changelog files of every snapshot and every decoupled ``changelog/changelog-<id>`` exist with
  their recorded sizes; decoupled changelog ids are contiguous and their files count as referenced;
- index files: every file a snapshot's or tag's index manifest lists (any index type) exists with the
  ``_FILE_SIZE`` its record states (contents are not verified); an index manifest that does not decode is
  ``manifest-unreadable``;
- data files: every live file exists with its recorded size and a known schema id; files of a level >= 1 of one
  bucket do not overlap in key range; with ``verify_data`` each file is also decoded (Parquet page checksums are
  verified), and its row count, sequence-number range and strict key order are compared with its metadata;
  deletion-vector and first-row tables: the latest snapshot's files above level 0 hold each key once per bucket.

Problems are ``Problem`` records (``kind`` from ``PROBLEM_KINDS``, the file ``path``, the ``snapshot_id`` that
reaches it, a ``detail`` sentence). Harmless findings (a LATEST/EARLIEST hint that is wrong, files no snapshot
references) are reported separately as ``warnings`` and ``orphan_files``; they never make ``ok`` False.
The check only reads; it never repairs. It raises only for a table whose root cannot be listed (StorageError).
``orphan_files`` also lists files of commits still in flight: removing them needs an age threshold.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from engine.data_paths import data_file_path
from engine.errors import CorruptFile, LakemergeError, SnapshotNotFound, StorageError
from engine.meta import binary_row
from engine.meta.manifest import ADD, DuplicateFileError, fold_entries
from engine.paths import TablePaths
from engine.postpone import POSTPONE_BUCKET
from engine.read.scan import ManifestCache, TableScan
from engine.schema import KEY_FIELD_PREFIX, SEQUENCE_NUMBER, VALUE_KIND
from engine.snapshots import SchemaManager, SnapshotManager
from engine.write.bucket_layout import partition_text

PROBLEM_KINDS = {
    "snapshot-unreadable": "a snapshot file does not parse or holds another id",
    "snapshot-gap": "snapshot ids between earliest and latest are missing",
    "snapshot-lineage": "a snapshot's base is not the state of the snapshot before it: one of the two is off the "
                        "table's history (e.g. a stale claim left by a crash; the older one is not the newest)",
    "snapshot-missing": "the LATEST hint names a snapshot newer than every snapshot file: published snapshots "
                        "were deleted (readers fall back to the newest remaining one, as Paimon does)",
    "schema-missing": "a snapshot or data file names a schema id that does not exist",
    "manifest-unreadable": "a manifest list or manifest is missing or does not decode",
    "manifest-size-mismatch": "a manifest list or manifest has another size than recorded",
    "manifest-inconsistent": "manifest entries add a file twice or delete a file that is not live",
    "record-count-mismatch": "a snapshot's record counts disagree with its files, or a file's row count with "
                             "its contents",
    "data-file-missing": "a live data file does not exist",
    "data-file-size-mismatch": "a live data file has another size than its manifest records",
    "data-file-unreadable": "a live data file does not decode or fails its checksums",
    "data-file-not-sorted": "a data file's keys are not strictly increasing",
    "sequence-range-mismatch": "a data file holds sequence numbers outside the range its metadata records",
    "level-overlap": "two files of one level >= 1 of a bucket overlap in key range",
    "tag-unreadable": "a tag file does not parse as a snapshot",
    "changelog-unreadable": "a decoupled changelog file (changelog/changelog-<id>) does not parse",
    "changelog-gap": "decoupled changelog ids are not contiguous: changes of the missing ids cannot be read",
    "changelog-file-missing": "a changelog file a snapshot or decoupled changelog references is missing or has "
                              "another size than recorded",
    "index-file-missing": "an index file an index manifest lists does not exist or cannot be read",
    "index-file-size-mismatch": "an index file has another size than its index manifest records",
    "deletion-vector-unreadable": "a deletion vector does not decode (version, size, magic, checksum, cardinality)",
    "deletion-vector-out-of-range": "a deletion vector deletes a row position beyond its data file's rows",
    "deletion-vector-duplicate-keys": "a deletion-vector table holds a key in two live rows above level 0: its "
                                      "batch reads (no merge) return it twice; a full compaction repairs it",
    "bucket-count-mixed": "a partition holds files placed by two bucket counts (a write after ALTER 'bucket' that "
                          "did not rescale the partition, as pypaimon 2.1 allows): a key may live in two buckets "
                          "and be read twice; Table.rescale of the partition repairs it",
    "first-row-duplicate-keys": "a first-row table holds a key in two files above level 0 (written by a lakemerge "
                                "before its first-row compaction looked keys up): Paimon's batch reads (no merge) "
                                "return it twice, lakemerge's read does not; a full compaction repairs it",
}
WARNING_KINDS = {
    "hint-invalid": "the LATEST or EARLIEST hint is unreadable or names another snapshot (only a hint: harmless)",
    "deletion-vector-stale": "a deletion vector names a data file the snapshot does not hold in that bucket "
                             "(never read: harmless)",
}


@dataclass(frozen=True)
class Problem:
    """One finding of a table check: its kind, the file path (if any), a detail message and the snapshot it
    concerns."""
    kind: str
    path: str | None
    detail: str
    snapshot_id: int | None = None

    def __str__(self) -> str:
        where = f" (snapshot {self.snapshot_id})" if self.snapshot_id is not None else ""
        return f"{self.kind}{where}: {self.path or '-'}: {self.detail}"


@dataclass
class CheckReport:
    """Result of ``check_table``. ``ok`` is True iff ``problems`` is empty."""
    table: str
    snapshot_ids: list[int] = field(default_factory=list)
    data_files_checked: int = 0
    problems: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)
    referenced_files: set[str] = field(default_factory=set)
    orphan_files: list[str] = field(default_factory=list)
    orphan_bytes: int = 0

    @property
    def ok(self) -> bool:
        """True if the check found no problems (warnings do not count)."""
        return not self.problems

    def kinds(self) -> set[str]:
        """Return the set of problem kinds found."""
        return {p.kind for p in self.problems}

    def summary(self) -> str:
        """Return a multi-line text summary: a count line, then one line per problem and warning."""
        head = (f"table {self.table}: {len(self.snapshot_ids)} snapshot(s), {self.data_files_checked} data file(s) "
                f"checked, {len(self.problems)} problem(s), {len(self.warnings)} warning(s), "
                f"{len(self.orphan_files)} unreferenced file(s) ({self.orphan_bytes} bytes)")
        return "\n".join([head] + [f"  problem {p}" for p in self.problems] + [f"  warning {w}" for w in self.warnings])

    def to_dict(self) -> dict:
        """JSON-ready form (for ``lakemerge fsck --json``)."""
        as_dict = lambda p: {"kind": p.kind, "path": p.path, "detail": p.detail, "snapshot_id": p.snapshot_id}
        return {"table": self.table, "ok": self.ok, "snapshot_ids": self.snapshot_ids,
                "data_files_checked": self.data_files_checked, "problems": [as_dict(p) for p in self.problems],
                "warnings": [as_dict(w) for w in self.warnings], "orphan_files": self.orphan_files,
                "orphan_bytes": self.orphan_bytes}

    def raise_if_problems(self) -> None:
        """Raise CorruptFile for the first problem (naming its file), if any."""
        if self.problems:
            p = self.problems[0]
            raise CorruptFile(p.path or self.table, f"{p.kind}: {p.detail} ({len(self.problems)} problem(s))")


def check_table(table, *, verify_data: bool = True, find_orphans: bool = True) -> CheckReport:
    """Check every snapshot of ``table`` (see module docstring). Never raises for a damaged table."""
    return _Checker(table, verify_data).run(find_orphans)


def check_warehouse(warehouse: str, *, file_io=None, verify_data: bool = True,
                    find_orphans: bool = True) -> list[CheckReport]:
    """``check_table`` for every table of every database of a warehouse, in name order."""
    from engine.catalog import Catalog

    cat = Catalog(warehouse, file_io=file_io)
    return [check_table(cat.get_table(f"{db}.{name}"), verify_data=verify_data, find_orphans=find_orphans)
            for db in cat.list_databases() for name in cat.list_tables(db)]


class _Checker:
    def __init__(self, table, verify_data: bool):
        self.t = table
        self.io = table.file_io
        self.paths = TablePaths(table.root, table.paths.meta_root)  # a branch table: the branch's metadata
        self.snapshots = SnapshotManager(self.io, self.paths, table.name)
        self.schemas = SchemaManager(self.io, self.paths, table.name)
        self.manifests = ManifestCache(self.io, self.paths)
        self.scan = TableScan(self.paths, table.schema, self.manifests, table.name)
        self.verify_data = verify_data
        self.line = table  # the line (main or a branch) whose snapshot is being checked: its schemas judge the files
        self.report = CheckReport(table.name)
        self.schema_ids = set(self.schemas.ids())
        self._checked_files: set[str] = set()
        self._checked_manifests: set[str] = set()
        self._vectors: dict[str, dict | None] = {}  # DV index file -> its decoded vectors (None: unreadable)
        self._bad_index_files: set[str] = set()  # missing or of another size than recorded
        self._live: dict[int, set] = {}  # live file identifiers of the last snapshot checked (lineage check)
        self._base_live: dict[int, set] = {}

    def problem(self, kind: str, path: str | None, detail: str, snapshot_id: int | None = None) -> None:
        self.report.problems.append(Problem(kind, path, detail, snapshot_id))

    def run(self, find_orphans: bool) -> CheckReport:
        ids = self.snapshots.ids()
        self.report.snapshot_ids = ids
        if ids:
            missing = sorted(set(range(ids[0], ids[-1] + 1)) - set(ids))
            if missing:
                self.problem("snapshot-gap", self.paths.snapshot_dir, f"snapshot ids {missing} are missing "
                             f"between {ids[0]} and {ids[-1]}")
        self._check_hints(ids)
        for sid in ids:
            self._check_snapshot(sid)
            self._check_lineage(sid)
        self._check_tags(set(ids))
        self._check_branches()
        self._check_changelogs()
        for sid in self.schema_ids:
            self.report.referenced_files.add(self.paths.schema(sid))
        if find_orphans:
            self._find_orphans()
        return self.report

    def _check_lineage(self, sid: int) -> None:
        """Snapshot ``sid``'s base must hold exactly the live files of snapshot ``sid - 1`` (kept only that long)."""
        before, base = self._live.pop(sid - 1, None), self._base_live.pop(sid, None)
        if before is not None and base is not None and before != base:
            self.problem("snapshot-lineage", self.paths.snapshot(sid - 1),
                         f"snapshot {sid} was not committed on it: its base holds {len(base - before)} file(s) "
                         f"snapshot {sid - 1} does not and lacks {len(before - base)} it has", sid - 1)

    def _check_hints(self, ids: list[int]) -> None:
        for name, expected in (("LATEST", ids[-1] if ids else None), ("EARLIEST", ids[0] if ids else None)):
            path = os.path.join(self.paths.snapshot_dir, name)
            try:
                text = self.io.read_bytes(path).decode("utf-8", "replace").strip()
            except FileNotFoundError:
                continue
            except StorageError as e:
                self.report.warnings.append(Problem("hint-invalid", path, str(e)))
                continue
            if name == "LATEST" and text.isdigit() and (expected is None or int(text) > expected):
                self.problem("snapshot-missing", path, f"names snapshot {text} but the newest snapshot file is "
                             f"{expected}")
            elif not text.isdigit() or int(text) != expected:
                self.report.warnings.append(Problem("hint-invalid", path, f"holds {text[:40]!r}, the {name.lower()} "
                                                    f"snapshot is {expected}"))

    def _check_tags(self, snapshot_ids: set[int]) -> None:
        from engine.maintenance.tags import is_tag_file_name
        from engine.meta.snapshot import Snapshot

        tag_dir = os.path.join(self.paths.meta_root, "tag")
        for name in sorted(self.io.list_names(tag_dir)):
            if not is_tag_file_name(name):
                continue
            path = os.path.join(tag_dir, name)
            self.report.referenced_files.add(path)
            try:
                snap = Snapshot.from_json(self.io.read_bytes(path).decode("utf-8"), path)
            except Exception as e:  # noqa: BLE001 - any decoding failure is the finding
                self.problem("tag-unreadable", path, str(e))
                continue
            if snap.id not in snapshot_ids:  # expired snapshot: the tag alone keeps its files alive
                self._check_snapshot_files(snap, path, snap.id)

    def _other_lines(self) -> list[tuple[str, str, list[str]]]:
        """``(name, metadata root, metadata directories)`` of every line other than the one checked: the branches
        (everything under ``branch/branch-<name>/``) and, when a branch is checked, main (its snapshot, schema, tag,
        consumer and changelog directories)."""
        from engine.branches import branch_names, branch_root
        from engine.changelog import retention

        own = getattr(self.t, "branch_name", None)
        lines = [(name, branch_root(self.t.root, name), [branch_root(self.t.root, name)])
                 for name in branch_names(self.t) if name != own]
        if own is not None:
            lines.insert(0, ("main", self.t.root, [os.path.join(self.t.root, d) for d in
                                                   ("snapshot", "schema", "tag", "consumer", retention.CHANGELOG_DIR)]))
        return lines

    def _check_branches(self) -> None:
        """Every metadata file of the other lines (``_other_lines``: branches, and main when a branch is checked)
        counts as referenced, and each of their snapshots and tags is checked like a snapshot: the manifests, data,
        changelog and index files it references, which live in the table's shared directories, must exist (and
        count as referenced), as must the files its decoupled changelogs read. The line's schema ids count as known
        for them."""
        from engine.changelog import retention
        from engine.maintenance.tags import TAG_PREFIX
        from engine.meta.snapshot import Snapshot

        main_schema_ids = self.schema_ids
        for name, root, dirs in self._other_lines():
            stack, files = list(dirs), []
            while stack:
                d = stack.pop()
                for n in self.io.list_names(d):
                    p = os.path.join(d, n)
                    (stack if self.io.is_dir(p) else files).append(p)
            self.report.referenced_files.update(files)
            schema_ids = {int(n[len("schema-"):]) for n in self.io.list_names(os.path.join(root, "schema"))
                          if n[len("schema-"):].isdigit() and n.startswith("schema-")}
            self.schema_ids = main_schema_ids | schema_ids
            try:
                self.line = self.t.branch(name)  # its schema ids may name other schemas than the checked line's
            except LakemergeError:
                self.line = self.t  # no schema: reported as schema-missing
            try:
                for path in sorted(files):
                    kind, base = os.path.basename(os.path.dirname(path)), os.path.basename(path)
                    is_snapshot = kind == "snapshot" and base.startswith("snapshot-")
                    if not (is_snapshot or (kind == "tag" and base.startswith(TAG_PREFIX))) or base.endswith(".tmp"):
                        continue
                    try:
                        snap = Snapshot.from_json(self.io.read_bytes(path).decode("utf-8"), path)
                    except Exception as e:  # noqa: BLE001 - any decoding failure is the finding
                        self.problem("snapshot-unreadable" if is_snapshot else "tag-unreadable", path, str(e))
                        continue
                    self._check_snapshot_files(snap, path, snap.id)
            finally:
                self.schema_ids = main_schema_ids
                self.line = self.t
            try:  # the files its decoupled changelogs read: they must still exist
                changelog_files = retention.referenced(self.t.branch(name))
            except LakemergeError as e:
                self.problem("changelog-unreadable", os.path.join(root, retention.CHANGELOG_DIR), str(e))
                continue
            self.report.referenced_files.update(changelog_files)
            for path in sorted(changelog_files):
                if not self.io.exists(path):
                    self.problem("changelog-file-missing", path, f"a decoupled changelog of branch {name!r} "
                                 "reads it but it does not exist")

    def _check_changelogs(self) -> None:
        """Decoupled changelogs (issue 5): each ``changelog-<id>`` parses, ids are contiguous, and the changelog
        manifests and files it references exist with their recorded sizes (and count as referenced): its changelog
        files, or for a table whose changes are delta files (retention.reads_deltas) an APPEND snapshot's delta."""
        from engine.changelog import retention
        from engine.meta.snapshot import COMMIT_KIND_APPEND, Snapshot

        cids = retention.ids(self.t)
        if cids and cids[-1] - cids[0] + 1 != len(cids):
            missing = sorted(set(range(cids[0], cids[-1] + 1)) - set(cids))
            self.problem("changelog-gap", os.path.join(self.paths.meta_root, retention.CHANGELOG_DIR),
                         f"changelog ids {missing} are missing between {cids[0]} and {cids[-1]}")
        for cid in cids:
            path = retention.path(self.t, cid)
            self.report.referenced_files.add(path)
            try:
                snap = Snapshot.from_json(self.io.read_bytes(path).decode("utf-8"), path)
            except Exception as e:  # noqa: BLE001 - any decoding failure is the finding
                self.problem("changelog-unreadable", path, str(e), cid)
                continue
            lists = [(snap.changelog_manifest_list, snap.changelog_manifest_list_size)] \
                if snap.changelog_manifest_list else []
            if snap.commit_kind == COMMIT_KIND_APPEND and retention.reads_deltas(self.t):
                # producer none / append tables: the changes are the delta's added data files (kept with it)
                lists.append((snap.delta_manifest_list, snap.delta_manifest_list_size))
            for name, size in lists:
                for meta in self._manifest_list(name, size, cid) or ():
                    for e in self._manifest(meta.file_name, meta.file_size, cid) or ():
                        self._check_changelog_file(e, cid)

    def _check_changelog_file(self, e, sid: int) -> None:
        """An ADDed changelog file exists with its recorded size (its contents are not verified)."""
        if e.kind != ADD:
            return
        path = self._data_path(e)
        self.report.referenced_files.add(path)
        if path in self._checked_files:
            return
        self._checked_files.add(path)
        try:
            size = self.io.size(path)
        except (FileNotFoundError, StorageError) as err:
            self.problem("changelog-file-missing", path, f"changelog file cannot be read: {err}", sid)
            return
        if size != e.file.file_size:
            self.problem("changelog-file-missing", path, f"has {size} bytes, the manifest records "
                         f"{e.file.file_size}", sid)

    def _check_snapshot(self, sid: int) -> None:
        path = self.paths.snapshot(sid)
        self.report.referenced_files.add(path)
        try:
            snap = self.snapshots.snapshot(sid)
        except (CorruptFile, SnapshotNotFound, StorageError) as e:
            self.problem("snapshot-unreadable", path, str(e), sid)
            return
        except Exception as e:  # noqa: BLE001 - any decoding failure is the finding
            self.problem("snapshot-unreadable", path, repr(e), sid)
            return
        self._check_snapshot_files(snap, path, sid)

    def _check_snapshot_files(self, snap, path: str, sid: int) -> None:
        if snap.schema_id not in self.schema_ids:
            self.problem("schema-missing", path, f"names schema {snap.schema_id}; existing: "
                         f"{sorted(self.schema_ids)}", sid)
        lists = [(snap.base_manifest_list, snap.base_manifest_list_size),
                 (snap.delta_manifest_list, snap.delta_manifest_list_size)]
        if snap.changelog_manifest_list:
            lists.append((snap.changelog_manifest_list, snap.changelog_manifest_list_size))
        if snap.index_manifest:
            self._check_index_files(snap.index_manifest, sid)
        metas_by_list = {}
        for name, size in lists:
            metas = self._manifest_list(name, size, sid)
            if metas is None:
                return
            metas_by_list[name] = metas
        entries_by_list = {}
        for name, _ in lists:
            entries = []
            for meta in metas_by_list[name]:
                got = self._manifest(meta.file_name, meta.file_size, sid)
                if got is None:
                    return
                entries.extend(got)
            entries_by_list[name] = entries
        data_entries = entries_by_list[snap.base_manifest_list] + entries_by_list[snap.delta_manifest_list]
        try:
            live, pending = fold_entries(data_entries)
            base_live, _ = fold_entries(entries_by_list[snap.base_manifest_list])
        except (DuplicateFileError, ValueError) as e:
            self.problem("manifest-inconsistent", self.paths.manifest(snap.delta_manifest_list), str(e), sid)
            return
        if pending:
            names = sorted(i[3] for i in pending)[:5]
            self.problem("manifest-inconsistent", self.paths.manifest(snap.delta_manifest_list),
                         f"deletes files that are not live: {names}", sid)
        live_adds = [e for e in live.values() if e.kind == ADD]
        self._live[sid] = {ident for ident, e in live.items() if e.kind == ADD}
        self._base_live[sid] = {ident for ident, e in base_live.items() if e.kind == ADD}
        total = sum(e.file.row_count for e in live_adds)
        if snap.total_record_count != total:
            self.problem("record-count-mismatch", path, f"totalRecordCount is {snap.total_record_count} but its "
                         f"live files hold {total} rows", sid)
        delta = entries_by_list[snap.delta_manifest_list]
        delta_rows = sum(e.file.row_count if e.kind == ADD else -e.file.row_count for e in delta)
        if snap.delta_record_count != delta_rows:
            self.problem("record-count-mismatch", path, f"deltaRecordCount is {snap.delta_record_count} but its "
                         f"delta adds {delta_rows} rows", sid)
        for e in entries_by_list.get(snap.changelog_manifest_list, []):
            self._check_changelog_file(e, sid)
        for e in live_adds:
            self._check_data_file(e, sid)
        self._check_levels(live_adds, sid)
        if snap.index_manifest:
            self._check_vectors(snap, live_adds, sid)
        opts = self.t.schema.table_options
        latest = self.report.snapshot_ids[-1] if self.report.snapshot_ids else None
        # only main's latest snapshot (a branch's or a tag's snapshot may carry the same id; main may have none)
        if sid == latest and path == self.paths.snapshot(sid):
            self._check_bucket_counts(live_adds, path, sid)
        if self.verify_data and sid == latest and path == self.paths.snapshot(sid) \
                and not self.t.schema.is_append_only:
            if opts.deletion_vectors:
                self._check_unique_live_keys(snap, sid, "deletion-vector-duplicate-keys")
            elif opts.merge_engine == "first-row":
                self._check_unique_live_keys(snap, sid, "first-row-duplicate-keys")

    def _check_bucket_counts(self, live_adds, path: str, sid: int) -> None:
        """Every partition's fixed-bucket files record one bucket count (Paimon's writers and commits refuse a
        second one; see engine.write.bucket_layout)."""
        counts: dict[bytes, set[int]] = {}
        for e in live_adds:
            if e.total_buckets > 0 and e.bucket >= 0:
                counts.setdefault(e.partition, set()).add(e.total_buckets)
        schema = self.t.schema
        types = schema.types_of(schema.partition_keys)
        for partition, seen in counts.items():
            if len(seen) > 1:
                try:
                    where = partition_text(schema, tuple(binary_row.deserialize_row(partition, types)) if types
                                           else ())
                except Exception:  # a partition row of another schema: name it by its bytes
                    where = f"partition {partition.hex()}"
                self.problem("bucket-count-mixed", path, f"{where} holds files of bucket counts {sorted(seen)}", sid)

    def _check_vectors(self, snap, live_adds, sid: int) -> None:
        """Each deletion vector of the snapshot decodes (each DV index file is read once, by ``read_dv_index``),
        belongs to a live data file of its bucket, is its only vector there and deletes only rows the file has."""
        from engine.deletion_vectors.index_file import DV_INDEX, read_dv_index
        try:
            records = self.manifests.index_records(snap.index_manifest)
        except CorruptFile:
            return  # reported as manifest-unreadable
        files = {(e.partition, e.bucket, e.file.file_name): e for e in live_adds}
        seen: set[tuple] = set()
        for r in records:
            if r["_INDEX_TYPE"] != DV_INDEX:
                continue
            path = self.scan.index_file_path(r)
            if path in self._bad_index_files:
                continue  # reported as index-file-missing / index-file-size-mismatch
            if path not in self._vectors:
                try:
                    self._vectors[path] = read_dv_index(self.io, path, r)
                except (CorruptFile, StorageError) as e:
                    self._vectors[path] = None
                    self.problem("deletion-vector-unreadable", path, str(e), sid)
            for name, deleted in (self._vectors[path] or {}).items():
                where = (r["_PARTITION"], r["_BUCKET"], name)
                if where in seen:
                    self.problem("deletion-vector-unreadable", path, f"a second vector of {name} in bucket "
                                 f"{r['_BUCKET']}", sid)
                seen.add(where)
                entry = files.get(where)
                if entry is None:
                    self.report.warnings.append(Problem("deletion-vector-stale", path, f"holds a vector of {name}, "
                                                        f"not a live file of bucket {r['_BUCKET']}", sid))
                elif len(deleted) and deleted[-1] >= entry.file.row_count:
                    self.problem("deletion-vector-out-of-range", path, f"deletes row {int(deleted[-1])} of {name}, "
                                 f"which has {entry.file.row_count} rows", sid)

    def _check_unique_live_keys(self, snap, sid: int, kind: str) -> None:
        """Deletion-vector and first-row tables: the live rows above level 0 of each bucket hold each key once
        (Paimon reads them without merging); else a ``kind`` problem."""
        import pyarrow as pa
        import pyarrow.compute as pc

        from engine.merge import KEY_COLUMN_PREFIX
        from engine.read.split_read import SplitReader
        from kernels.keys import encode_keys
        from kernels.merge import sort_indices
        reader = SplitReader(self.io, self.t.schema, self.schemas.schema)
        key_names = [KEY_COLUMN_PREFIX + k for k in self.t.schema.trimmed_primary_keys]
        for split in self.scan.plan(snap):
            high = [f for f in split.files if f.level > 0]
            if len(high) < 2:
                continue
            try:
                keys = pa.concat_tables([reader.read_file(split, f, []).select(key_names) for f in high])
            except (CorruptFile, StorageError):
                continue  # reported with the file
            enc = encode_keys([keys.column(k) for k in key_names])
            order = sort_indices(enc)
            if enc.is_fixed:
                words = enc.words[order]
                dup = bool(np.any(np.all(words[1:] == words[:-1], axis=1))) if len(words) > 1 else False
            else:  # the encoded keys as one Arrow binary array, neighbours compared in Arrow (no per-row Python)
                encoded = pa.LargeBinaryArray.from_buffers(pa.large_binary(), len(enc.offsets) - 1,
                                                           [None, pa.py_buffer(enc.offsets), pa.py_buffer(enc.data)])
                rows = encoded.take(pa.array(order))
                dup = len(rows) > 1 and bool(pc.any(pc.equal(rows.slice(1), rows.slice(0, len(rows) - 1))).as_py())
            if dup:
                self.problem(kind, split.bucket_dir, "live rows above level 0 hold a "
                             "key twice: batch reads return it twice until a full compaction", sid)

    def _check_index_files(self, name: str, sid: int) -> None:
        """The index files index manifest ``name`` lists exist with their recorded ``_FILE_SIZE``; the manifest and
        the files count as referenced."""
        from engine.dynamic_bucket.index_files import read_index_manifest

        path = self.paths.manifest(name)
        self.report.referenced_files.add(path)
        if name in self._checked_manifests:
            return
        self._checked_manifests.add(name)
        try:
            records = read_index_manifest(self.io, self.paths, name)
        except (CorruptFile, StorageError) as e:
            self.problem("manifest-unreadable", path, str(e), sid)
            return
        for r in records:
            file_path = self.scan.index_file_path(r)
            self.report.referenced_files.add(file_path)
            if file_path in self._checked_files:
                continue
            self._checked_files.add(file_path)
            try:
                size = self.io.size(file_path)
            except (FileNotFoundError, StorageError) as e:
                self._bad_index_files.add(file_path)
                self.problem("index-file-missing", file_path, f"{r['_INDEX_TYPE']} index file listed by {name} cannot "
                             f"be read: {e}", sid)
                continue
            if size != r.get("_FILE_SIZE"):
                self._bad_index_files.add(file_path)
                self.problem("index-file-size-mismatch", file_path, f"has {size} bytes, index manifest {name} "
                             f"records {r.get('_FILE_SIZE')}", sid)

    def _manifest_list(self, name: str, size: int | None, sid: int):
        path = self.paths.manifest(name)
        self.report.referenced_files.add(path)
        try:
            if size is not None and name not in self._checked_manifests:
                actual = self.io.size(path)
                if actual != size:
                    self.problem("manifest-size-mismatch", path, f"has {actual} bytes, the snapshot records {size}",
                                 sid)
                    return None
            metas = self.manifests.manifest_list(name)
        except FileNotFoundError:
            self.problem("manifest-unreadable", path, "manifest list is missing", sid)
            return None
        except Exception as e:  # noqa: BLE001 - any decoding failure is the finding
            self.problem("manifest-unreadable", path, str(e), sid)
            return None
        self._checked_manifests.add(name)
        return metas

    def _manifest(self, name: str, size: int, sid: int):
        path = self.paths.manifest(name)
        self.report.referenced_files.add(path)
        try:
            if name not in self._checked_manifests:
                actual = self.io.size(path)
                if actual != size:
                    self.problem("manifest-size-mismatch", path, f"has {actual} bytes, its manifest list records "
                                 f"{size}", sid)
                    return None
            entries = self.manifests.manifest(name)
        except FileNotFoundError:
            self.problem("manifest-unreadable", path, "manifest is missing", sid)
            return None
        except Exception as e:  # noqa: BLE001
            self.problem("manifest-unreadable", path, str(e), sid)
            return None
        self._checked_manifests.add(name)
        return entries

    def _data_path(self, e) -> str:
        return data_file_path(self.scan.bucket_dir(self.scan.partition_values(e.partition), e.bucket), e.file)

    def _check_data_file(self, e, sid: int) -> None:
        path = self._data_path(e)
        self.report.referenced_files.add(path)
        if path in self._checked_files:
            return
        self._checked_files.add(path)
        self.report.data_files_checked += 1
        meta = e.file
        if meta.schema_id not in self.schema_ids:
            self.problem("schema-missing", path, f"data file names schema {meta.schema_id}", sid)
        try:
            size = self.io.size(path)
        except FileNotFoundError:
            self.problem("data-file-missing", path, "live data file does not exist", sid)
            return
        except StorageError as e2:
            self.problem("data-file-unreadable", path, str(e2), sid)
            return
        if size != meta.file_size:
            self.problem("data-file-size-mismatch", path, f"has {size} bytes, the manifest records "
                         f"{meta.file_size}", sid)
            return
        if self.verify_data:
            self._verify_contents(path, meta, sid, sorted_keys=e.bucket != POSTPONE_BUCKET)

    def _verify_contents(self, path: str, meta, sid: int, *, sorted_keys: bool = True) -> None:
        """Decode the file and check it against its metadata; ``sorted_keys``: its keys must be strictly
        increasing (postponed files hold records as they arrived: engine.postpone)."""
        from engine.read.split_read import read_data_file

        key_names = list(self._file_schema(meta).trimmed_primary_keys)  # a renamed key keeps its old file name

        key_cols = []

        def choose(present):  # every column: decoding all pages verifies all page checksums
            key_cols.extend(KEY_FIELD_PREFIX + k if KEY_FIELD_PREFIX + k in present else k for k in key_names)
            return sorted(present)

        try:
            raw = read_data_file(self.io, path, meta, choose)
        except CorruptFile as err:
            kind = "record-count-mismatch" if "rows but the manifest" in str(err) else "data-file-unreadable"
            self.problem(kind, path, str(err), sid)
            return
        except Exception as err:  # noqa: BLE001
            self.problem("data-file-unreadable", path, repr(err), sid)
            return
        missing = self._missing_columns(meta, raw.column_names, key_names)
        if missing:
            self.problem("data-file-unreadable", path, f"has no column {', '.join(missing)} although the schema it "
                         "was written under declares it", sid)
            return
        if raw.num_rows == 0:
            return
        if SEQUENCE_NUMBER in raw.column_names:
            seq = raw.column(SEQUENCE_NUMBER).to_numpy()
            lo, hi = int(seq.min()), int(seq.max())
            if lo < meta.min_sequence_number or hi > meta.max_sequence_number:
                self.problem("sequence-range-mismatch", path, f"holds sequence numbers {lo}..{hi}, metadata "
                             f"records {meta.min_sequence_number}..{meta.max_sequence_number}", sid)
        if sorted_keys and key_cols and all(c in raw.column_names for c in key_cols):
            bad = _first_unsorted([raw.column(c) for c in key_cols])
            if bad is not None:
                self.problem("data-file-not-sorted", path, f"key of row {bad + 1} is not greater than the key of "
                             f"row {bad}", sid)

    def _file_schema(self, meta):
        """The schema data file ``meta`` was written under; the table's if that schema cannot be read (reported by
        the schema checks)."""
        try:
            return self.line.schema_manager.schema(meta.schema_id)
        except Exception:  # noqa: BLE001 - a missing schema is reported by the schema checks
            return self.line.schema

    def _missing_columns(self, meta, present: list[str], key_names: list[str]) -> list[str]:
        """Columns a data file must hold but lacks: every field of the schema it was written under and, for a
        primary-key table, _SEQUENCE_NUMBER, _VALUE_KIND and each key (as _KEY_<k> or <k>, ``key_names`` of that
        schema)."""
        try:
            fields = self.line.schema_manager.schema(meta.schema_id).field_names
        except Exception:  # noqa: BLE001 - a missing schema is reported by the schema checks
            fields = self.line.schema.field_names if meta.schema_id == self.line.schema.id else []
        have = set(present)
        missing = [f for f in fields if f not in have]
        if key_names:
            missing += [c for c in (SEQUENCE_NUMBER, VALUE_KIND) if c not in have]
            missing += [KEY_FIELD_PREFIX + k for k in key_names if KEY_FIELD_PREFIX + k not in have and k not in have]
        return missing

    def _check_levels(self, entries, sid: int) -> None:
        key_types = [t.with_nullable(True) for t in self.t.schema.types_of(self.t.schema.trimmed_primary_keys)]
        groups: dict[tuple, list] = {}
        for e in entries:
            if e.file.level >= 1:
                groups.setdefault((e.partition, e.bucket, e.file.level), []).append(e.file)
        for (partition, bucket, level), files in groups.items():
            if len(files) < 2:
                continue
            try:
                ranges = sorted(((binary_row.order_key(binary_row.deserialize_row(f.min_key, key_types), key_types),
                                  binary_row.order_key(binary_row.deserialize_row(f.max_key, key_types), key_types),
                                  f.file_name)
                                 for f in files))
            except Exception as err:  # noqa: BLE001
                self.problem("manifest-unreadable", None, f"undecodable min/max key in bucket {bucket}: {err!r}", sid)
                continue
            for (lo1, hi1, n1), (lo2, _hi2, n2) in zip(ranges, ranges[1:]):
                if hi1 >= lo2:
                    self.problem("level-overlap", n2, f"level {level} of bucket {bucket}: {n1} and {n2} overlap",
                                 sid)

    def _find_orphans(self) -> None:
        """Files under the table root that no snapshot, tag or schema references (hints, consumer progress files and
        tag success files excluded: they are not data)."""
        from engine.maintenance.tags import SUCCESS_FILE_DIR
        ref = self.report.referenced_files
        hints = {os.path.join(self.paths.snapshot_dir, n) for n in ("LATEST", "EARLIEST")}
        consumer_dir = os.path.join(self.paths.meta_root, "consumer")
        hints |= {os.path.join(consumer_dir, n) for n in self.io.list_names(consumer_dir) if n.startswith("consumer-")}
        orphans, total = [], 0
        stack = [self.t.root]
        while stack:
            d = stack.pop()
            for name in self.io.list_names(d):
                p = os.path.join(d, name)
                if self.io.is_dir(p):
                    if not (name == SUCCESS_FILE_DIR and os.path.basename(d) == "tag"):
                        stack.append(p)
                elif p not in ref and p not in hints:
                    orphans.append(p)
                    try:
                        total += self.io.size(p)
                    except (FileNotFoundError, StorageError):
                        pass
        self.report.orphan_files = sorted(orphans)
        self.report.orphan_bytes = total


def _first_unsorted(columns) -> int | None:
    """Index i of the first row whose key is not strictly less than row i+1's; None if strictly increasing."""
    from kernels.keys import encode_keys

    enc = encode_keys(columns, nullable=True)
    if enc.is_fixed:
        w = enc.words
        if len(w) < 2:
            return None
        a, b = w[:-1], w[1:]
        neq = a != b
        first = np.argmax(neq, axis=1)
        rows = np.arange(len(a))
        ok = neq.any(axis=1) & (a[rows, first] < b[rows, first])
        bad = np.flatnonzero(~ok)
        return int(bad[0]) if len(bad) else None
    off, data = enc.offsets, enc.data
    prev = bytes(data[off[0]:off[1]])
    for i in range(1, len(off) - 1):
        cur = bytes(data[off[i]:off[i + 1]])
        if not prev < cur:
            return i - 1
        prev = cur
    return None
