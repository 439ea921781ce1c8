"""Manifest compaction at commit: minor merges of small manifests, full compaction cancelling ADD/DELETE pairs."""
from __future__ import annotations

import pyarrow as pa
import pytest

from engine import Catalog
from engine.commit.manifest_merge import cancel_pairs
from engine.meta.data_file import DataFileMeta, SimpleStats
from engine.meta.manifest import ADD, DELETE, ManifestEntry

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])


def _table(tmp_path, options):
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db", ignore_if_exists=True)
    return cat.create_table("db.t", SCHEMA, primary_key=["id"], options={"bucket": "2", **options})


def _entry(kind, name, level=0):
    f = DataFileMeta(name, 1, 1, b"", b"", SimpleStats.EMPTY, SimpleStats.EMPTY, 0, 0, 0, level)
    return ManifestEntry(kind, b"p", 0, 1, f)


def test_cancel_pairs_removes_add_then_delete_and_keeps_unmatched_deletes():
    entries = [_entry(ADD, "a"), _entry(ADD, "b"), _entry(DELETE, "a"), _entry(DELETE, "z"), _entry(ADD, "a", 5),
               _entry(DELETE, "b"), _entry(ADD, "c")]
    got = [(e.kind, e.file.file_name, e.file.level) for e in cancel_pairs(entries)]
    assert got == [(DELETE, "z", 0), (ADD, "a", 5), (ADD, "c", 0)]


def _base_entries(t, snap):
    return [e for m in t.manifests.manifest_list(snap.base_manifest_list) for e in t.manifests.manifest(m.file_name)]


def _check_all_snapshots(t, states):
    for sid, rows in states.items():
        assert t.read(sid).sort_by("id").to_pylist() == rows, f"snapshot {sid}"


def test_minor_merge_keeps_the_manifest_count_bounded(tmp_path):
    t = _table(tmp_path, {"write-only": "true", "manifest.merge-min-count": "3",
                          "manifest.target-file-size": "64 kb", "manifest.full-compaction-threshold-size": "1 gb"})
    states = {}
    for i in range(20):
        sid = t.write(pa.table({"id": [i, i + 100], "v": [f"v{i}"] * 2}))
        states[sid] = t.read().sort_by("id").to_pylist()
        assert len(t.manifests.manifest_list(t.snapshot().base_manifest_list)) < 4
    _check_all_snapshots(t, states)


def test_minor_merge_groups_reaching_the_target_size(tmp_path):
    t = _table(tmp_path, {"write-only": "true", "manifest.merge-min-count": "1000",
                          "manifest.target-file-size": "1 b", "manifest.full-compaction-threshold-size": "1 gb"})
    for i in range(6):
        t.write(pa.table({"id": [i], "v": ["x"]}))
    # every manifest alone reaches the 1-byte target: groups of one are kept as they are, nothing merges
    assert len(t.manifests.manifest_list(t.snapshot().base_manifest_list)) == 5


def test_full_compaction_cancels_add_delete_pairs(tmp_path):
    t = _table(tmp_path, {"manifest.full-compaction-threshold-size": "1 b", "manifest.target-file-size": "1 mb",
                          "write-only": "true"})
    states = {}
    for i in range(6):
        t.write(pa.table({"id": list(range(i, i + 5)), "v": [f"v{i}"] * 5}))
        states[t.latest_snapshot_id()] = t.read().sort_by("id").to_pylist()
    t.compact(full=True)
    states[t.latest_snapshot_id()] = t.read().sort_by("id").to_pylist()
    t.write(pa.table({"id": [99], "v": ["z"]}))
    states[t.latest_snapshot_id()] = t.read().sort_by("id").to_pylist()
    snap = t.snapshot()
    base = _base_entries(t, snap)
    assert all(e.kind == ADD for e in base)
    live = {(e.file.file_name, e.file.level) for e in t.manifests.live_entries(snap)}
    delta = {(e.file.file_name, e.file.level) for m in t.manifests.manifest_list(snap.delta_manifest_list)
             for e in t.manifests.manifest(m.file_name)}
    assert {(e.file.file_name, e.file.level) for e in base} == live - delta
    assert all(e.file.level == 5 for e in base)
    _check_all_snapshots(t, states)


@pytest.mark.interop
def test_pypaimon_reads_tables_with_merged_manifests(tmp_path):
    from tests.interop.pypaimon_util import pp_get_table, pp_read, rows_of
    t = _table(tmp_path, {"manifest.full-compaction-threshold-size": "1 b", "manifest.merge-min-count": "2"})
    for i in range(8):
        t.write(pa.table({"id": list(range(i, i + 5)), "v": [f"v{i}"] * 5}))
    pp = pp_get_table(str(tmp_path / "wh"), "db.t")
    for s in t.snapshots():
        assert rows_of(pp_read(pp, s.id), ["id"]) == rows_of(t.read(s.id), ["id"])
