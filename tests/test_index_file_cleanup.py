"""Index files (``index/``, listed by index manifests) are freed by expiration, rollback, tag deletion and orphan
cleanup exactly when nothing that stays references them, and check() verifies them. The tables are in dynamic
bucket mode (no ``bucket`` option), whose commits write HASH index files."""
from __future__ import annotations

import os

import pyarrow as pa
import pytest

from engine import Catalog
from engine.maintenance import expire as expire_module
from engine.maintenance.references import index_files
from tests.conftest import expire_after_latest

SCHEMA = pa.schema([("dt", pa.string()), ("id", pa.int64()), ("v", pa.string())])


def _table(tmp_path):
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db", ignore_if_exists=True)
    return cat.create_table("db.t", SCHEMA, primary_key=["dt", "id"], partition_keys=["dt"],
                            options={"write-only": "true"})


def _rows(dt_, ids, tag="v"):
    return pa.table({"dt": [dt_] * len(ids), "id": ids, "v": [f"{tag}{i}" for i in ids]}, schema=SCHEMA)


def _commits(t):
    """Five snapshots; partition a's HASH index is replaced by snapshots 3 and 4, partition b's by snapshot 4."""
    t.write(_rows("a", [1, 2]))
    t.write(_rows("b", [1]))
    t.write(_rows("a", [3]))
    t.write(pa.concat_tables([_rows("a", [4]), _rows("b", [2])]))
    t.write(_rows("a", [1], "u"))
    assert [s.id for s in t.snapshots()] == [1, 2, 3, 4, 5]


def _on_disk(t) -> set[str]:
    d = os.path.join(t.root, "index")
    return {os.path.join(d, n) for n in os.listdir(d)} if os.path.isdir(d) else set()


def _indexed(t, *sids) -> set[str]:
    return set().union(*(index_files(t, t.snapshot_manager.snapshot(i)) for i in sids))


def _state(t, sid=None, tag=None):
    return sorted((r["dt"], r["id"], r["v"]) for r in t.read(sid, tag=tag).to_pylist())


def _other_of(t):
    """The same table opened afresh (no shared caches), as another process would."""
    return Catalog(os.path.dirname(os.path.dirname(t.root))).get_table(t.name)


def _assert_clean(t):
    """check() finds no problem and no unreferenced file."""
    report = _other_of(t).check()
    assert report.ok and report.orphan_files == [], report.summary()


def test_expiration_frees_index_files_no_retained_snapshot_or_tag_references(tmp_path):
    t = _table(tmp_path)
    _commits(t)
    latest, tagged = _state(t), _state(t, 2)
    assert len({frozenset(_indexed(t, i)) for i in range(1, 6)}) >= 4  # the commits replaced index files
    t.create_tag("two", 2)
    keep = _indexed(t, 5) | _indexed(t, 2)
    replaced = _indexed(t, 1, 3, 4) - keep
    assert replaced and _on_disk(t) == keep | replaced
    removal = expire_after_latest(t, retain_min=1, retain_max=1, time_retained=0)
    assert removal.snapshot_ids == [1, 2, 3, 4] and sorted(removal.index_files) == sorted(replaced)
    assert _on_disk(t) == keep  # the tag keeps snapshot 2's index files
    assert _state(t) == latest and _state(t, tag="two") == tagged
    _assert_clean(t)
    assert t.remove_orphan_files(older_than=0) == []  # the tag's index files are referenced
    t.delete_tag("two")
    assert _on_disk(t) == _indexed(t, 5)
    assert _state(_other_of(t)) == latest
    _assert_clean(t)
    t.write(_rows("a", [9]))  # the index restored from what is left still places keys
    assert _state(t) == sorted(latest + [("a", 9, "v9")])
    _assert_clean(t)


def test_rollback_frees_index_files_only_dropped_snapshots_referenced(tmp_path):
    t = _table(tmp_path)
    _commits(t)
    target = _state(t, 2)
    keep, dropped = _indexed(t, 2), _indexed(t, 3, 4, 5) - _indexed(t, 2)
    assert dropped and keep
    t.rollback_to(2)
    assert _on_disk(t) == keep
    assert _state(_other_of(t)) == target
    _assert_clean(t)


def test_orphan_cleanup_sweeps_unreferenced_index_files(tmp_path):
    t = _table(tmp_path)
    _commits(t)
    referenced = _indexed(t, 1, 2, 3, 4, 5)
    stray = os.path.join(t.root, "index", "index-stray-0")
    with open(stray, "wb") as f:
        f.write(b"1234")
    report = t.check()
    assert report.ok and report.orphan_files == [stray] and report.orphan_bytes == 4
    assert t.remove_orphan_files() == []  # younger than the default day: may belong to a commit in flight
    assert os.path.exists(stray)
    assert t.remove_orphan_files(older_than=0) == [os.path.normpath(stray)]
    assert _on_disk(t) == referenced
    _assert_clean(t)


@pytest.mark.parametrize("killed", [True, False])
def test_expiration_keeps_the_index_files_of_a_stale_claim(tmp_path, monkeypatch, killed):
    """As tests/test_concurrent_expiry.py's stale claim left by a crash, in a dynamic-bucket table: our commit
    claims snapshot 2 after others published 2 and 3 and expired 1 and 2, then stops before withdrawing the claim.
    The stale snapshot 2 is off the table's history and alone lists our new HASH index file. Expiring it must not
    delete that file: the commit is run again and lands with it. ``killed``: the process died on the spot, so the
    stale snapshot's lineage is read and found broken; else (interrupted) the commit's cleanup deleted its delta
    manifest, so its lineage cannot be read."""
    t = _table(tmp_path)
    t.write(_rows("a", [1]))
    with t.new_write() as w:
        w.write(_rows("a", [2], "ours"))
        messages = w.prepare_commit()
    ours = {p for m in messages for p in m.index_paths}
    assert len(ours) == 1
    other = _other_of(t)
    real_put, real_delete = t.file_io.write_if_absent, t.file_io.delete

    def racing(path, data):
        if path.endswith("snapshot-2") and not os.path.exists(t.paths.snapshot(3)):
            for ids in ([1], [2]):  # snapshots 2 and 3 in partition b; 1 and 2 expire
                other.write(_rows("b", ids))
                expire_module.expire_snapshots(other, retain_min=1, retain_max=1, now_millis=2**62)
        return real_put(path, data)

    crashed = []

    def crash_on_withdrawal(path):
        if crashed and killed:
            return None  # a killed process deletes nothing more
        if path == t.paths.snapshot(2):
            crashed.append(path)
            raise KeyboardInterrupt("process killed before the stale claim was withdrawn")
        return real_delete(path)

    monkeypatch.setattr(t.file_io, "write_if_absent", racing)
    monkeypatch.setattr(t.file_io, "delete", crash_on_withdrawal)
    with pytest.raises(KeyboardInterrupt):
        t.commit(messages)
    fresh = _other_of(t)
    assert [s.id for s in fresh.snapshots()] == [2, 3]
    assert _indexed(fresh, 2) & ours and not _indexed(fresh, 3) & ours  # only the stale claim lists it

    removal = expire_after_latest(fresh, retain_min=1, retain_max=1, time_retained=0)
    assert removal.snapshot_ids == [2] and not set(removal.index_files) & ours
    assert all(os.path.exists(p) for p in ours)

    again = _other_of(t)
    assert again.commit(messages) == 4  # the retry after the crash
    assert ours <= _indexed(again, 4)
    assert _state(_other_of(t)) == [("a", 1, "v1"), ("a", 2, "ours2"), ("b", 1, "v1"), ("b", 2, "v2")]
    _assert_clean(again)


def test_check_reports_missing_and_wrong_size_index_files(tmp_path):
    t = _table(tmp_path)
    t.write(_rows("a", [1, 2]))
    t.write(_rows("b", [1]))
    missing, wrong = sorted(_indexed(t, 2))
    os.remove(missing)
    with open(wrong, "ab") as f:
        f.write(b"\0")
    report = _other_of(t).check()
    assert {(p.kind, p.path, p.snapshot_id) for p in report.problems} == {
        ("index-file-missing", missing, 1 if missing in _indexed(t, 1) else 2),
        ("index-file-size-mismatch", wrong, 1 if wrong in _indexed(t, 1) else 2)}
    assert report.orphan_files == []


def test_unreadable_index_manifest_is_reported(tmp_path):
    t = _table(tmp_path)
    t.write(_rows("a", [1]))
    with open(t.paths.manifest(t.snapshot().index_manifest), "wb") as f:
        f.write(b"not avro")
    report = _other_of(t).check()
    assert report.kinds() == {"manifest-unreadable"}
    assert report.problems[0].path == t.paths.manifest(t.snapshot().index_manifest)


@pytest.mark.parametrize("operation,point", [("expire", "expire.after-file-delete"),
                                             ("rollback", "rollback.after-file-delete"),
                                             ("orphans", "orphans.after-delete")])
def test_maintenance_killed_while_deleting_in_a_dynamic_bucket_table(tmp_path, operation, point):
    """The crash matrix's maintenance case (tests/reliability/scenarios.py) on a dynamic-bucket table: after the
    kill check() is clean, re-running completes the job, and orphan cleanup leaves exactly the referenced files,
    index files included."""
    from tests.reliability import scenarios as sc

    out = sc.maintenance_crash_case(str(tmp_path), operation, point, 1, -1)
    assert out.crashed and out.failures == []
