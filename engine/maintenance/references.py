"""What a snapshot references: its metadata files (manifest lists, manifests), its live data files and its index
files.

Paths are absolute. Reading a referenced metadata file that is missing or corrupt raises CorruptFile, so a caller
deciding what to delete fails closed.
"""
from __future__ import annotations

from engine.data_paths import all_file_paths
from engine.meta.manifest import ADD
from engine.meta.snapshot import Snapshot


def manifest_list_names(snapshot: Snapshot) -> list[str]:
    """Return the snapshot's base and delta manifest list names, plus the changelog one if it has it."""
    names = [snapshot.base_manifest_list, snapshot.delta_manifest_list]
    if snapshot.changelog_manifest_list:
        names.append(snapshot.changelog_manifest_list)
    return names


def metadata_files(table, snapshot: Snapshot) -> set[str]:
    """Paths of the manifest lists and manifests ``snapshot`` uses (plus its index manifest, if any)."""
    out = set()
    for name in manifest_list_names(snapshot):
        out.add(table.paths.manifest(name))
        for meta in table.manifests.manifest_list(name):
            out.add(table.paths.manifest(meta.file_name))
    if snapshot.index_manifest:
        out.add(table.paths.manifest(snapshot.index_manifest))
    return out


def entry_paths(table, entry) -> list[str]:
    """The data file of a manifest entry and its extra files."""
    scan = table.scan()
    return all_file_paths(scan.bucket_dir(scan.partition_values(entry.partition), entry.bucket), entry.file)


def data_files(table, snapshot: Snapshot) -> set[str]:
    """Paths of the live data files of ``snapshot`` and of the changelog files its changelog manifests add."""
    out = set()
    for e in table.manifests.live_entries(snapshot):
        out.update(entry_paths(table, e))
    if snapshot.changelog_manifest_list:
        for meta in table.manifests.manifest_list(snapshot.changelog_manifest_list):
            for e in table.manifests.manifest(meta.file_name):
                if e.kind == ADD:
                    out.update(entry_paths(table, e))
    return out


def _delta_files(table, snapshot: Snapshot) -> tuple[set[str], set[str]]:
    """(added, deleted) data file paths of ``snapshot``'s delta manifests."""
    added, deleted = set(), set()
    for meta in table.manifests.manifest_list(snapshot.delta_manifest_list):
        for e in table.manifests.manifest(meta.file_name):
            (added if e.kind == ADD else deleted).update(entry_paths(table, e))
    return added, deleted


def delta_added_files(table, snapshot: Snapshot) -> set[str]:
    """Data files ADDed by ``snapshot``'s delta manifests."""
    return _delta_files(table, snapshot)[0]


def delta_deleted_files(table, snapshot: Snapshot) -> set[str]:
    """Data files DELETEd by ``snapshot``'s delta manifests: the files it removed from the table (compaction
    inputs, overwritten files). A file deleted and re-added in the same delta (a level upgrade) is not included."""
    added, deleted = _delta_files(table, snapshot)
    return deleted - added


def changelog_added_files(table, snapshot: Snapshot) -> set[str]:
    """Changelog files ADDed by ``snapshot``'s changelog manifests (they live and die with the snapshot)."""
    out = set()
    if snapshot.changelog_manifest_list:
        for meta in table.manifests.manifest_list(snapshot.changelog_manifest_list):
            for e in table.manifests.manifest(meta.file_name):
                if e.kind == ADD:
                    out.update(entry_paths(table, e))
    return out


def index_file_path(table, record: dict) -> str:
    """The path of the index file an index manifest record names (TableScan.index_file_path)."""
    return table.scan().index_file_path(record)


def index_files(table, snapshot: Snapshot) -> set[str]:
    """Paths of the index files (dynamic-bucket HASH indexes, deletion vectors...) ``snapshot``'s index manifest
    lists, whatever their index type."""
    from engine.dynamic_bucket.index_files import read_index_manifest
    return {index_file_path(table, r)
            for r in read_index_manifest(table.file_io, table.paths, snapshot.index_manifest)}


def committed_on(table, snapshot: Snapshot, successor: Snapshot) -> bool:
    """Whether ``successor`` was committed on ``snapshot``: its base manifest list holds exactly ``snapshot``'s live
    data files (the ``snapshot-lineage`` rule of engine/check.py). False for a snapshot off the table's history, such
    as a stale claim (engine/commit/committer.py)."""
    live = {e.identifier for e in table.manifests.live_entries(snapshot)}
    return live == {e.identifier for e in table.manifests.base_entries(successor)}
