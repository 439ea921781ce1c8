"""table.check(): each kind of damage is reported with its kind and file; a healthy table reports nothing."""
from __future__ import annotations

import dataclasses
import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine import Catalog
from engine.check import PROBLEM_KINDS, CheckReport, check_table
from engine.errors import CorruptFile
from engine.meta.manifest import encode_manifest, encode_manifest_list
from tests.reliability import scenarios as sc


@pytest.fixture
def table(tmp_path):
    return sc.corruption_table(str(tmp_path / "wh"))


def _fresh(t):
    return Catalog(os.path.dirname(os.path.dirname(t.root))).get_table(t.name)


def _kinds(t, **kw) -> set[str]:
    report = _fresh(t).check(**kw)
    assert isinstance(report, CheckReport)
    assert all(p.kind in PROBLEM_KINDS for p in report.problems)
    return report.kinds()


def test_healthy_table(table):
    report = table.check()
    assert report.ok and report.problems == [] and report.warnings == []
    assert report.snapshot_ids == [1, 2] and report.data_files_checked == 4
    assert report.orphan_files == [] and "0 problem(s)" in report.summary()
    assert json.loads(json.dumps(report.to_dict()))["ok"] is True
    report.raise_if_problems()


def test_empty_table(tmp_path):
    t = sc.create_table(str(tmp_path / "wh"), 1)
    assert t.check().ok


def test_missing_data_file(table):
    path = sc.corruption_target(table, "data-file")
    os.unlink(path)
    report = _fresh(table).check()
    assert report.kinds() == {"data-file-missing"}
    assert report.problems[0].path == path and report.problems[0].snapshot_id == 2
    with pytest.raises(CorruptFile, match=os.path.basename(path)):
        report.raise_if_problems()


def test_data_file_size_and_checksum(table):
    path = sc.corruption_target(table, "data-file")
    chunk = pq.ParquetFile(path).metadata.row_group(0).column(0)
    start = chunk.dictionary_page_offset if chunk.has_dictionary_page else chunk.data_page_offset
    inside_page = start + chunk.total_compressed_size - 1  # the last byte of the chunk's last page (CRC-covered)
    with open(path, "ab") as f:
        f.write(b"x")
    assert _kinds(table) == {"data-file-size-mismatch"}
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) - 1)
        f.seek(inside_page)
        b = f.read(1)
        f.seek(inside_page)
        f.write(bytes([b[0] ^ 0x10]))
    assert _kinds(table) == {"data-file-unreadable"}
    assert _kinds(table, verify_data=False) == set()  # sizes only


def _rewrite_data_file(table, transform):
    """Rewrite the newest data file with ``transform(rows)`` and point the metadata at the new bytes."""
    t = table
    snap = t.snapshot()
    delta = t.manifests.manifest_list(snap.delta_manifest_list)[0]
    entries = t.manifests.manifest(delta.file_name)
    e = entries[0]
    path = os.path.join(t.bucket_dir(t.scan().partition_values(e.partition), e.bucket), e.file.file_name)
    rows = transform(pq.ParquetFile(path).read())
    os.unlink(path)
    pq.write_table(rows, path)
    new_file = dataclasses.replace(e.file, file_size=os.path.getsize(path), row_count=rows.num_rows)
    _replace_manifest(t, delta, [dataclasses.replace(e, file=new_file)] + entries[1:])


def _replace_manifest(t, delta_meta, entries):
    data = encode_manifest(entries)
    with open(t.paths.manifest(delta_meta.file_name), "wb") as f:
        f.write(data)
    snap = t.snapshot()
    lst = encode_manifest_list([dataclasses.replace(delta_meta, file_size=len(data))])
    with open(t.paths.manifest(snap.delta_manifest_list), "wb") as f:
        f.write(lst)
    with open(t.paths.snapshot(snap.id)) as f:
        text = f.read()
    text = text.replace(f'"deltaManifestListSize" : {snap.delta_manifest_list_size}',
                                                          f'"deltaManifestListSize" : {len(lst)}')
    with open(t.paths.snapshot(snap.id), "w") as f:
        f.write(text)


def test_unsorted_keys_and_sequence_range(table):
    def reverse(rows):
        rows = rows.take(pa.array(range(rows.num_rows - 1, -1, -1)))
        i = rows.column_names.index("_SEQUENCE_NUMBER")
        return rows.set_column(i, rows.schema.field(i), pa.array([10**6] * rows.num_rows, pa.int64()))
    _rewrite_data_file(table, reverse)
    assert _kinds(table) >= {"data-file-not-sorted", "sequence-range-mismatch"}


def test_record_counts(table):
    _rewrite_data_file(table, lambda rows: rows.slice(0, rows.num_rows - 1))
    assert "record-count-mismatch" in _kinds(table)


def test_level_overlap_and_schema_ids(table):
    snap = table.snapshot()
    delta = table.manifests.manifest_list(snap.delta_manifest_list)[0]
    entries = table.manifests.manifest(delta.file_name)
    same_bucket = [e for e in entries if e.bucket == entries[0].bucket]
    raised = [dataclasses.replace(e, file=dataclasses.replace(e.file, level=1, schema_id=9)) for e in entries]
    base = [e for e in table.manifests.manifest(table.manifests.manifest_list(snap.base_manifest_list)[0].file_name)
            if e.bucket == entries[0].bucket]
    # put the base file of the same bucket on level 1 too: both cover overlapping keys
    raised.append(dataclasses.replace(base[0], file=dataclasses.replace(base[0].file, level=1,
                                                                         file_name=base[0].file.file_name)))
    _replace_manifest(table, delta, raised)
    kinds = _kinds(table, verify_data=False)
    assert {"level-overlap", "schema-missing"} <= kinds, kinds
    assert same_bucket


def test_snapshot_problems(table):
    os.rename(table.paths.snapshot(1), table.paths.snapshot(5))  # holds id 1, gap 2..4 w.r.t. 5
    kinds = _kinds(table)
    assert {"snapshot-unreadable", "snapshot-gap"} <= kinds


def test_hints_are_warnings_only(table):
    with open(os.path.join(table.paths.snapshot_dir, "LATEST"), "w") as f:
        f.write("1")
    report = _fresh(table).check()
    assert report.ok and [w.kind for w in report.warnings] == ["hint-invalid"]
    with open(os.path.join(table.paths.snapshot_dir, "LATEST"), "w") as f:
        f.write("7")
    assert _kinds(table) == {"snapshot-missing"}


def test_missing_manifest_and_manifest_list(table):
    snap = table.snapshot()
    os.unlink(table.paths.manifest(snap.delta_manifest_list))
    report = check_table(_fresh(table))
    assert report.kinds() == {"manifest-unreadable"} and report.problems[0].snapshot_id == 2


def test_orphans_are_listed_not_problems(table):
    stray = os.path.join(table.plan()[0].bucket_dir, "data-stray.parquet")
    with open(stray, "wb") as f:
        f.write(b"12345")
    report = table.check()
    assert report.ok and report.orphan_files == [stray] and report.orphan_bytes == 5


def test_check_warehouse(table, tmp_path):
    from engine.check import check_warehouse

    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db2")
    cat.create_table("db2.u", sc.SCHEMA, primary_key=["p", "id"], options={"bucket": "1"})
    os.unlink(sc.corruption_target(table, "data-file"))
    reports = check_warehouse(str(tmp_path / "wh"))
    assert [(r.table, r.ok) for r in reports] == [("db.t", False), ("db2.u", True)]


def test_tags_keep_their_expired_snapshot_files_referenced_and_checked(table):
    table.create_tag("first", 1)
    table.compact(full=True)  # snapshot 3: snapshot 1's files are no longer live
    table.expire_snapshots(retain_min=1, retain_max=1)
    assert table.snapshot_manager.ids() == [3]
    report = _fresh(table).check()
    assert report.ok and report.orphan_files == [], report.summary()
    assert os.path.join(table.root, "tag", "tag-first") in report.referenced_files
    tagged_files = {p for p in report.referenced_files if p.endswith(".parquet")}
    latest_files = {os.path.join(sp.bucket_dir, f.file_name) for sp in table.plan() for f in sp.files}
    kept_by_tag = sorted(tagged_files - latest_files)
    assert kept_by_tag
    os.unlink(kept_by_tag[0])
    assert "data-file-missing" in _kinds(table)
    with open(os.path.join(table.root, "tag", "tag-first"), "w") as f:
        f.write("{not json")
    assert "tag-unreadable" in _kinds(table)
