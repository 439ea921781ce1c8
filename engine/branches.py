"""Paimon branches as they lie on disk: ``<table>/branch/branch-<name>/`` holds a branch's own ``snapshot/``,
``schema/`` and ``tag/`` directories, while its manifests, data and index files live in the table's usual
directories, shared with the main branch (Paimon's BranchManager.branchPath).

Used by everything that deletes files, on main and on a branch alike (``referenced_elsewhere``): a file that
another line's -- main's or any branch's -- snapshot, tag or decoupled changelog references is in use.
"""
from __future__ import annotations

import os
import uuid

from engine.errors import CorruptFile, InvalidInput
from engine.paths import TablePaths

BRANCH_DIR = "branch"
BRANCH_PREFIX = "branch-"
MAIN_BRANCH = "main"


def branch_root(table_root: str, name: str) -> str:
    """The directory of branch ``name`` (whether or not it exists)."""
    return os.path.join(table_root, BRANCH_DIR, BRANCH_PREFIX + name)


def branch_names(table) -> list[str]:
    """Names of the table's branches (the directories ``branch/branch-<name>``), sorted."""
    directory = os.path.join(table.root, BRANCH_DIR)
    return sorted(n[len(BRANCH_PREFIX):] for n in table.file_io.list_names(directory)
                  if n.startswith(BRANCH_PREFIX) and table.file_io.is_dir(os.path.join(directory, n)))


def other_lines(table) -> list:
    """Every line of ``table``'s history except its own, as tables: for the main table each branch; for a branch
    table (engine.branch_table) the main table and every other branch. Raises CorruptFile when one of those
    branches has no schema (as Paimon's OrphanFilesClean, which then refuses to clean: such a directory is not a
    branch it can read), so a caller deciding what to delete fails closed."""
    main = getattr(table, "main", table)
    own = getattr(table, "branch_name", None)
    out = [] if own is None else [main]
    for name in branch_names(main):
        if name == own:
            continue
        root = branch_root(main.root, name)
        if not any(n.startswith("schema-") for n in main.file_io.list_names(TablePaths(root).schema_dir)):
            raise CorruptFile(root, f"branch {name!r} of table {main.name!r} has no schema")
        out.append(main.branch(name))
    return out


def referenced_elsewhere(table) -> set[str]:
    """Every file (manifest lists, manifests, index manifests, data, changelog and index files; the table's
    directories are shared by all lines) that a line other than ``table``'s own (``other_lines``) references
    through a snapshot, a tag or a decoupled changelog -- including the files a changelog of such a snapshot
    reads. Whatever deletes files of one line (snapshot, changelog and tag expiration, rollback) keeps these.

    A line whose snapshots or tags change while it is read (its own expiration runs concurrently) is read again;
    an unreadable snapshot, tag or manifest of a line that did not change raises CorruptFile (callers fail
    closed)."""
    out: set[str] = set()
    for line in other_lines(table):
        out |= line_references(line)
    return out


def line_references(line, attempts: int = 5) -> set[str]:
    """The files ``line``'s (main's or a branch's) snapshots, tags and decoupled changelogs reference (see
    ``referenced_elsewhere``), read again while they change under it (a concurrent expiration, tag deletion or
    rollback: Paimon's OrphanFilesClean skips a snapshot that vanishes). Raises CorruptFile, SnapshotNotFound or
    TagNotFound when unchanged metadata cannot be read, or after ``attempts`` reads."""
    from engine.changelog import retention
    from engine.errors import SnapshotNotFound, TagNotFound
    from engine.maintenance.references import data_files, index_files, metadata_files
    from engine.maintenance.tags import TagManager

    sm, tags = line.snapshot_manager, TagManager(line)
    attempt = 1
    while True:
        state = (sm.ids(), tags.names(), retention.ids(line))
        try:
            out: set[str] = set()
            for snap in [sm.snapshot(i) for i in state[0]] + list(tags.all().values()):
                data, meta = retention.changelog_paths(line, snap)
                out |= data | meta | data_files(line, snap) | metadata_files(line, snap) | index_files(line, snap)
            return out | retention.referenced(line)
        except (CorruptFile, SnapshotNotFound, TagNotFound):
            if attempt >= attempts or (sm.ids(), tags.names(), retention.ids(line)) == state:
                raise
            attempt += 1


def validate_new_branch(table, name: str) -> None:
    """Raise InvalidInput unless ``name`` can name a new branch of ``table`` (Paimon's BranchManager.validateBranch:
    not ``main``, not blank, not purely numeric, and not an existing branch; lakemerge also refuses path separators
    and a leading '.')."""
    if not isinstance(name, str) or not name.strip():
        raise InvalidInput("a branch name must be a non-blank string", table=table.name)
    if name == MAIN_BRANCH:
        raise InvalidInput(f"branch name {name!r} is the default branch and cannot be used", table=table.name)
    if name.isdigit():
        raise InvalidInput(f"branch name {name!r} cannot be purely numeric", table=table.name)
    if "/" in name or "\\" in name or name.startswith("."):
        raise InvalidInput(f"branch name {name!r} may not contain path separators or start with '.'",
                           table=table.name)
    if table.file_io.exists(branch_root(table.root, name)):
        raise InvalidInput(f"branch {name!r} already exists", table=table.name)


def create_branch(table, name: str, tag: str | None = None) -> None:
    """Create branch ``name`` of ``table`` as Paimon's FileSystemBranchManager does: without ``tag``, an empty
    branch holding copies of the schemas up to the latest; from ``tag``, copies of the tag, of its snapshot (written
    from the tag when the snapshot expired) and of the schemas up to the snapshot's. Data and manifest files are
    shared, not copied. Raises InvalidInput for a bad or existing name, TagNotFound; a failed creation removes the
    branch directory it began."""
    from engine.maintenance.tags import TagManager

    validate_new_branch(table, name)
    tags = TagManager(table)
    snap = tags.get(tag) if tag is not None else None
    io, root = table.file_io, branch_root(table.root, name)
    paths = TablePaths(table.root, root)
    schema_id = snap.schema_id if snap is not None else table.schema_manager.latest().id
    try:
        io.mkdirs(paths.schema_dir)
        for sid in table.schema_manager.ids():
            if sid <= schema_id:
                io.write_bytes(paths.schema(sid), io.read_bytes(table.paths.schema(sid)))
        if snap is not None:
            io.mkdirs(paths.snapshot_dir)
            source = table.paths.snapshot(snap.id)
            data = io.read_bytes(source) if io.exists(source) else snap.to_json().encode()
            io.write_bytes(paths.snapshot(snap.id), data)
            branch_tags = TagManager(table, root=root)
            io.mkdirs(branch_tags.tag_dir)
            io.write_bytes(branch_tags.path(tag), io.read_bytes(tags.path(tag)))
    except BaseException:
        io.delete_tree(root)
        raise


def _refuse_if_read_by_fallback(table, name: str, action: str) -> None:
    """Raise InvalidInput if ``scan.fallback-branch`` or ``scan.primary-branch`` of ``table`` or of its main table
    names branch ``name`` (batch reads of that table read the branch)."""
    main = getattr(table, "main", table)
    for line in {id(main): main, id(table): table}.values():
        for option in ("scan.fallback-branch", "scan.primary-branch"):
            if line.schema.options.get(option) == name:
                raise InvalidInput(f"cannot {action} branch {name!r}: it is configured as {option!r} of "
                                   f"{line.name!r}; unset it first", table=table.name)


def _require_branch(table, name) -> None:
    if name == MAIN_BRANCH or not isinstance(name, str) or name not in branch_names(table):
        raise InvalidInput(f"branch {name!r} does not exist", table=table.name)


def delete_branch(table, name: str) -> None:
    """Delete branch ``name``: its directory only (its snapshots, schemas, tags and consumers), as Paimon does; the
    data it alone wrote become orphans for ``remove_orphan_files``. ``table`` may be main or any branch (the branch
    itself included, as Paimon allows). Raises InvalidInput for ``main``, an unknown branch, or the branch named by
    ``scan.fallback-branch`` or ``scan.primary-branch`` of ``table`` or of the main table (as Paimon's
    AbstractFileStoreTable.deleteBranch, which checks the calling table only: batch reads of main read it)."""
    _require_branch(table, name)
    _refuse_if_read_by_fallback(table, name, "delete")
    table.file_io.delete_tree(branch_root(table.root, name))


def rename_branch(table, source: str, target: str) -> None:
    """Rename branch ``source`` to ``target`` by renaming its directory in one step, as Paimon's
    FileSystemBranchManager.renameBranch: its snapshots, schemas, tags and consumers move with it; data files are
    shared and stay. Raises InvalidInput for ``main``, an unknown ``source``, a bad or existing ``target``, or a
    ``source`` that ``scan.fallback-branch`` / ``scan.primary-branch`` names (lakemerge's addition: Paimon renames
    it and the table's batch reads then fail)."""
    if source == MAIN_BRANCH:
        raise InvalidInput("cannot rename the main branch", table=table.name)
    _require_branch(table, source)
    validate_new_branch(table, target)
    _refuse_if_read_by_fallback(table, source, "rename")
    table.file_io.rename_dir(branch_root(table.root, source), branch_root(table.root, target))


def fast_forward(table, name: str) -> None:
    """Make branch ``name``'s history ``table``'s (main, or the branch ``table`` is), as Paimon's
    FileSystemBranchManager.fastForward does: ``table``'s snapshots from the branch's earliest snapshot id on, its
    schemas from that snapshot's schema id on and its tags of snapshots from that id on are deleted (with the LATEST
    hint), then the branch's snapshot, schema and tag files are copied into ``table``'s directories. Files only the
    dropped snapshots used stay on storage as orphans (``remove_orphan_files``). Not atomic (neither is Paimon's): a
    crash in between leaves ``table`` partly replaced; run it again. Raises InvalidInput for ``main`` (as Paimon's
    BranchManager.fastForwardValidate), ``table``'s own branch, an unknown branch or a branch without snapshot."""
    from engine.maintenance.tags import SUCCESS_FILE_DIR, TagManager

    if name == MAIN_BRANCH:
        raise InvalidInput("branch 'main' cannot be fast-forwarded to (fast-forward a branch into main instead)",
                           table=table.name)
    if name == getattr(table, "branch_name", None):
        raise InvalidInput(f"fast-forward from the current branch {name!r} is not allowed", table=table.name)
    _require_branch(table, name)
    branch = table.branch(name)
    ids = branch.snapshot_manager.ids()
    if not ids:
        raise InvalidInput(f"cannot fast-forward to branch {name!r}: it has no snapshot", table=table.name)
    earliest = branch.snapshot_manager.snapshot(ids[0])
    io, tags = table.file_io, TagManager(table)
    doomed = [table.paths.snapshot(i) for i in table.snapshot_manager.ids() if i >= earliest.id]
    doomed += [table.paths.schema(i) for i in table.schema_manager.ids() if i >= earliest.schema_id]
    doomed += [tags.path(n) for n, snap in tags.all().items() if snap.id >= earliest.id]
    io.delete(os.path.join(table.paths.snapshot_dir, "LATEST"))
    for path in doomed:
        io.delete(path)
    for source, target in ((branch.paths.snapshot_dir, table.paths.snapshot_dir),
                           (branch.paths.schema_dir, table.paths.schema_dir),
                           (TagManager(branch).tag_dir, tags.tag_dir)):
        names = [n for n in io.list_names(source) if not n.startswith(".") and n != SUCCESS_FILE_DIR]
        if names:
            io.mkdirs(target)
        for n in names:
            io.overwrite(os.path.join(target, n), io.read_bytes(os.path.join(source, n)))


def _line(table, name: str):
    """Line ``name`` of ``table``'s history (main or a branch) as a table; InvalidInput if there is none."""
    main = getattr(table, "main", table)
    if name == MAIN_BRANCH:
        return main
    if name not in branch_names(main):
        raise InvalidInput(f"branch {name!r} does not exist", table=main.name)
    return main.branch(name)


def _require_append_history(line, name: str) -> None:
    """Paimon's validateCompleteAppendOnly: every snapshot from 1 to the latest exists and is APPEND or ANALYZE
    (without lineage metadata, only a complete append-only history shows which files are whose)."""
    from engine.meta.snapshot import COMMIT_KIND_ANALYZE, COMMIT_KIND_APPEND

    ids = line.snapshot_manager.ids()
    if ids and ids[0] != 1:
        raise InvalidInput(f"cannot merge: branch {name!r} does not start at snapshot 1 (earliest is {ids[0]}); "
                           "branch merge needs the complete append-only snapshot history", table=line.name)
    if ids and len(ids) != ids[-1]:
        missing = sorted(set(range(1, ids[-1] + 1)) - set(ids))[0]
        raise InvalidInput(f"cannot merge: snapshot {missing} is missing on branch {name!r}; branch merge needs "
                           "the complete append-only snapshot history", table=line.name)
    for sid in ids:
        kind = line.snapshot_manager.snapshot(sid).commit_kind
        if kind not in (COMMIT_KIND_APPEND, COMMIT_KIND_ANALYZE):
            raise InvalidInput(f"cannot merge: snapshot {sid} on branch {name!r} has commit kind {kind!r}; branch "
                               "merge needs the complete append-only snapshot history", table=line.name)


def _schema_identity(schema) -> tuple:
    """What Paimon's TableSchema.equals compares: version, fields, keys, options, comment and creation time."""
    return (schema.version, schema.fields, schema.partition_keys, schema.primary_keys, schema.options,
            schema.comment, schema.time_millis)


def merge_branch(table, source: str, target: str = MAIN_BRANCH) -> int | None:
    """Add to line ``target`` (main or a branch) every data file line ``source``'s latest snapshot holds and
    ``target``'s does not, as one APPEND snapshot of ``target`` -- Paimon's FileSystemBranchManager.mergeBranch
    (``CALL sys.merge_branch``), a file-level merge for append tables. Files are shared, not copied. Returns the new
    snapshot id of ``target``, or its latest id when there is nothing to merge.

    Refused (InvalidInput, nothing written) as by Paimon: blank or equal names, an unknown branch, a line without
    snapshots, a line with primary keys, a line whose history is not complete (snapshots 1..latest) and append-only
    (APPEND / ANALYZE), differing latest columns, or a merged file whose schema id ``target`` lacks or holds
    differently (the whole schema, as Paimon's TableSchema.equals: options and creation time included).
    UnsupportedFeature for row-tracking or data-evolution tables (lakemerge assigns no row ids).
    CommitConflict if ``target`` already holds one of the files (a concurrent merge) -- nothing is deleted then:
    the files are ``source``'s."""
    from engine.commit.committer import Committer
    from engine.errors import UnsupportedFeature
    from engine.meta.manifest import ADD
    from engine.write.commit_message import CommitMessage

    for role, name in (("source", source), ("target", target)):
        if not isinstance(name, str) or not name.strip():
            raise InvalidInput(f"{role} branch name {name!r} is blank", table=table.name)
    if source == target:
        raise InvalidInput(f"cannot merge branch {source!r} into itself", table=table.name)
    src, dst = _line(table, source), _line(table, target)
    latest = {}
    for name, line, verb in ((source, src, "merge branch"), (target, dst, "merge into branch")):
        latest[name] = line.snapshot_manager.latest()
        if latest[name] is None:
            raise InvalidInput(f"cannot {verb} {name!r}: it has no snapshot", table=line.name)
    for name, line in ((source, src), (target, dst)):
        _require_append_history(line, name)
    for name, line in ((source, src), (target, dst)):
        if line.schema.primary_keys:
            raise InvalidInput(f"branch merge is only for append tables, but branch {name!r} has primary keys",
                               table=line.name)
    for name, line in ((source, src), (target, dst)):
        for option in ("data-evolution.enabled", "row-tracking.enabled"):
            if str(line.schema.options.get(option, "false")).lower() == "true":
                raise UnsupportedFeature(f"table {line.name!r}: branch merge of {option.split('.')[0]} tables is not "
                                         f"supported (branch {name!r}, option {option}=true)")
    if src.schema.fields != dst.schema.fields:
        raise InvalidInput(f"cannot merge branch {source!r} into {target!r}: their columns differ",
                           table=table.name)
    have = {e.identifier for e in dst.manifests.live_entries(latest[target])}
    merged = [e for e in src.manifests.live_entries(latest[source]) if e.kind == ADD and e.identifier not in have]
    if not merged:
        return latest[target].id
    for schema_id in sorted({e.file.schema_id for e in merged}):
        if schema_id not in dst.schema_manager.ids():
            raise InvalidInput(f"cannot merge branch {source!r} into {target!r}: {target!r} has no schema "
                               f"{schema_id}, which files of {source!r} were written with", table=table.name)
        if _schema_identity(src.schema_manager.schema(schema_id)) != _schema_identity(
                dst.schema_manager.schema(schema_id)):
            raise InvalidInput(f"cannot merge branch {source!r} into {target!r}: their schema {schema_id} "
                               "differs", table=table.name)
    groups: dict[tuple, list] = {}
    for e in merged:
        groups.setdefault((e.partition, e.bucket, e.total_buckets), []).append(e.file)
    scan, user = dst.scan(), f"merge-branch-{uuid.uuid4()}"
    messages = [CommitMessage(partition=p, partition_values=tuple(scan.partition_values(p)), bucket=b,
                              total_buckets=n, new_files=tuple(files), commit_user=user, commit_identifier=0,
                              base_snapshot_id=None, schema_id=dst.schema.id)
                for (p, b, n), files in groups.items()]
    sid = Committer(dst).commit(messages)  # on failure nothing is deleted: the files are the source's
    dst._expire_after_commit(messages)
    return sid
