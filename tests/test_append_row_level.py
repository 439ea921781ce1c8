"""DELETE / UPDATE on append tables (engine.append.row_level) against a pyarrow model of Paimon's semantics:
partition-only deletes drop partitions, copy-on-write rewrites only the files holding matching rows, deletion-vector
tables mark rows instead, one OVERWRITE snapshot per operation, conflicts leave the table unchanged."""
from __future__ import annotations

import os
import random

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from engine.append import row_level
from engine.append.compact import compact_append
from engine.errors import CommitConflict, InvalidInput
from engine.meta.manifest import ADD, DELETE
from engine.meta.snapshot import COMMIT_KIND_OVERWRITE
from tests.conftest import list_files

SCHEMA = pa.schema([("dt", pa.string()), ("id", pa.int64()), ("v", pa.string()), ("n", pa.int64())])
DV = {"deletion-vectors.enabled": "true"}
LAYOUTS = {"unaware": {}, "fixed": {"bucket": "3", "bucket-key": "id"}}


def batch(dt, ids, tag="v"):
    return pa.table({"dt": [dt] * len(ids), "id": ids, "v": [f"{tag}{i}" for i in ids],
                     "n": [i % 7 if i % 5 else None for i in ids]}, schema=SCHEMA)


def rows(t: pa.Table) -> list[tuple]:
    return sorted(tuple(r.values()) for r in t.to_pylist())


def make(catalog, layout, dv, name="db.t"):
    t = catalog.create_table(name, SCHEMA, partition_keys=["dt"], options={**LAYOUTS[layout], **(DV if dv else {})})
    t.write(batch("a", list(range(10))))
    t.write(batch("a", list(range(10, 20)), "w"))
    t.write(batch("b", list(range(20, 30))))
    return t


def data_files(t) -> dict[str, object]:
    return {f.file_name: f for sp in t.plan() for f in sp.files}


def delta(t, sid):
    snap = t.snapshot(sid)
    return [e for m in t.manifests.manifest_list(snap.delta_manifest_list) for e in t.manifests.manifest(m.file_name)]


def dv_records(t):
    snap = t.snapshot()
    return [r for r in t.manifests.index_records(snap.index_manifest) if r["_INDEX_TYPE"] == "DELETION_VECTORS"] \
        if snap.index_manifest else []


def assert_clean(t):
    report = t.check()
    assert report.ok, report.summary()
    assert not report.warnings, report.summary()


@pytest.mark.parametrize("dv", [False, True], ids=["cow", "dv"])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_random_deletes_and_updates_match_the_model(catalog, layout, dv):
    t = make(catalog, layout, dv)
    model = t.read()
    rnd = random.Random(7)
    for step in range(8):
        lo = rnd.randrange(0, 30)
        flt = [("id", ">=", lo), ("id", "<", lo + rnd.randrange(1, 8))]
        mask = pc.and_(pc.greater_equal(model["id"], lo), pc.less(model["id"], flt[1][2]))
        if step % 2:
            row_level.update_where(t, {"v": f"u{step}", "n": pc.field("n") + 100}, flt)
            new_v = pc.if_else(mask, pa.scalar(f"u{step}"), model["v"])
            new_n = pc.if_else(mask, pc.add(model["n"], 100), model["n"])
            model = model.set_column(2, "v", new_v).set_column(3, "n", new_n)
        else:
            t.delete_where(flt)
            model = model.filter(pc.invert(pc.fill_null(mask, False)))
        assert rows(t.read()) == rows(model), f"step {step}"
        assert t.snapshot().commit_kind == COMMIT_KIND_OVERWRITE
    if layout == "unaware" and not dv:  # copy-on-write keeps the table's row order
        assert t.read().to_pylist() == model.to_pylist()
    assert_clean(t)
    compact_append(t, full=True)
    assert rows(t.read()) == rows(model)
    assert_clean(t)  # compaction dropped the vectors of the files it rewrote
    assert not dv_records(t)


def test_null_never_matches(catalog):
    t = make(catalog, "unaware", False)
    before = t.read()
    t.delete_where([("n", "!=", 3)])
    assert rows(t.read()) == rows(before.filter(pc.invert(pc.fill_null(pc.not_equal(before["n"], 3), False))))
    assert all(r["n"] is None or r["n"] == 3 for r in t.read().to_pylist())


@pytest.mark.parametrize("dv", [False, True], ids=["cow", "dv"])
def test_partition_only_delete_drops_partitions(catalog, dv):
    t = make(catalog, "unaware", dv)
    t.delete_where([("id", "=", 25)])  # leaves a vector (dv) in partition b
    before = data_files(t)
    b_files = {f.file_name for sp in t.plan() if sp.partition_values == ("b",) for f in sp.files}
    sid = t.delete_where([("dt", "in", ["b", "zz"])])
    assert t.snapshot(sid).commit_kind == COMMIT_KIND_OVERWRITE
    assert {r["dt"] for r in t.read().to_pylist()} == {"a"}
    assert {(e.kind, e.file.file_name) for e in delta(t, sid)} == {(DELETE, n) for n in b_files}
    assert set(data_files(t)) == set(before) - b_files  # no data file written
    assert not dv_records(t)  # partition b's vectors went with it
    assert t.delete_where([("dt", "=", "b")]) is None  # nothing left to drop: no snapshot
    assert t.latest_snapshot_id() == sid
    assert_clean(t)


def test_delete_without_filter_truncates(catalog):
    t = make(catalog, "fixed", False)
    sid = t.delete_where(None)
    assert t.read().num_rows == 0 and t.snapshot(sid).commit_kind == COMMIT_KIND_OVERWRITE
    assert t.delete_where(None) is None


def test_copy_on_write_touches_only_matching_files(catalog):
    t = make(catalog, "unaware", False)
    before = data_files(t)
    touched = {f.file_name for sp in t.plan() if sp.partition_values == ("a",) for f in sp.files}
    sid = t.delete_where([("id", "in", [3, 12])])
    entries = delta(t, sid)
    gone = {e.file.file_name for e in entries if e.kind == DELETE}
    added = [e.file for e in entries if e.kind == ADD]
    assert gone == touched and len(added) == 2
    after = data_files(t)
    assert set(before) - gone <= set(after)
    assert sorted((f.min_sequence_number, f.row_count) for f in added) == [(0, 9), (10, 9)]
    for name in gone:  # the old files stay on disk for older snapshots
        assert any(name in p for p in list_files(t.root))
    assert [r["id"] for r in t.read(filter=[("dt", "=", "a")]).to_pylist()] == \
        [i for i in range(20) if i not in (3, 12)]


def test_deletion_vector_delete_writes_vectors_and_no_data_file(catalog):
    t = make(catalog, "unaware", True)
    before = data_files(t)
    t.delete_where([("id", "in", [1, 2])])
    sid = t.delete_where([("id", "in", [4, 15])])
    assert delta(t, sid) == []  # only the index manifest changed
    assert data_files(t) == before
    (record,) = dv_records(t)  # one index file per touched bucket, old marks merged with the new ones
    cards = sorted(r["_CARDINALITY"] for r in record["_DELETIONS_VECTORS_RANGES"])
    assert cards == [1, 3]
    assert sorted(r["id"] for r in t.read(filter=[("dt", "=", "a")]).to_pylist()) == \
        [i for i in range(20) if i not in (1, 2, 4, 15)]
    assert_clean(t)


def test_deletion_vector_update_marks_old_rows_and_appends_new_ones(catalog):
    t = make(catalog, "unaware", True)
    before = data_files(t)
    sid = t.update_where({"v": "new"}, [("id", "=", 21)])
    added = [e for e in delta(t, sid) if e.kind == ADD]
    assert len(added) == 1 and added[0].file.row_count == 1 and not [e for e in delta(t, sid) if e.kind == DELETE]
    assert set(before) <= set(data_files(t))
    assert [r for r in t.read().to_pylist() if r["id"] == 21] == [{"dt": "b", "id": 21, "v": "new", "n": 0}]
    assert added[0].file.min_sequence_number == 10  # appended after partition b's rows


@pytest.mark.parametrize("dv", [False, True], ids=["cow", "dv"])
def test_update_moving_rows_to_another_partition_and_bucket(catalog, dv):
    t = make(catalog, "fixed", dv)
    t.update_where({"dt": "c", "id": lambda r: pc.add(r["id"], 1000)}, [("id", "<", 3)])
    got = rows(t.read())
    assert [r for r in got if r[0] == "c"] == [("c", 1000 + i, f"v{i}", None if i == 0 else i) for i in range(3)]
    assert len(got) == 30
    from engine.append.read import read_append_file
    from engine.read.split_read import SplitReader
    from kernels.hashing import bucket_ids
    for sp in t.plan():  # every row sits in the bucket its key hashes to
        for f in sp.files:
            part = read_append_file(SplitReader(t.file_io, t.schema), sp, f, ["id"])
            assert set(np.asarray(bucket_ids([part["id"]], 3)).tolist()) <= {sp.bucket}
    assert_clean(t)


def test_nothing_matched_publishes_nothing(catalog):
    for dv in (False, True):
        t = make(catalog, "unaware", dv, name=f"db.t{int(dv)}")
        sid = t.latest_snapshot_id()
        files = list_files(t.root)
        assert t.delete_where([("id", "=", 999)]) is None
        assert t.update_where({"v": "x"}, [("v", "=", "nope")]) is None
        assert t.latest_snapshot_id() == sid and list_files(t.root) == files


def test_refusals(catalog):
    pk = catalog.create_table("db.pk", SCHEMA, primary_key=["dt", "id"], partition_keys=["dt"])
    from engine.append import row_level  # Table.delete_where / update_where of a PK table: test_pk_row_level.py
    with pytest.raises(InvalidInput, match="append tables"):
        row_level.delete_where(pk, [("id", "=", 1)])
    with pytest.raises(InvalidInput, match="append tables"):
        row_level.update_where(pk, {"v": "x"})
    t = make(catalog, "unaware", False)
    with pytest.raises(InvalidInput, match="unknown column"):
        t.update_where({"nope": 1})
    with pytest.raises(InvalidInput) as e:
        t.update_where({"n": "abc"}, [("id", "=", 1)])
    assert e.value.column == "n"
    strict = catalog.create_table("db.strict", pa.schema([pa.field("id", pa.int64(), nullable=False)]))
    strict.write(pa.table({"id": [1, 2]}))
    with pytest.raises(InvalidInput, match="id"):
        strict.update_where({"id": None}, [("id", "=", 1)])
    assert strict.read()["id"].to_pylist() == [1, 2] and strict.latest_snapshot_id() == 1
    with pytest.raises(InvalidInput, match="no column"):
        t.update_where({})
    with pytest.raises(InvalidInput):
        t.delete_where([("nope", "=", 1)])


def _concurrently(monkeypatch, action):
    """Run ``action`` right before the row-level operation commits."""
    original = row_level.commit_changes

    def racing(*args, **kwargs):
        action()
        return original(*args, **kwargs)
    monkeypatch.setattr(row_level, "commit_changes", racing)


@pytest.mark.parametrize("op", ["delete", "update"])
@pytest.mark.parametrize("dv", [False, True], ids=["cow", "dv"])
def test_concurrent_compaction_conflicts(catalog, monkeypatch, dv, op):
    t = make(catalog, "unaware", dv)
    _concurrently(monkeypatch, lambda: compact_append(t, full=True))
    with pytest.raises(CommitConflict):
        if op == "delete":
            t.delete_where([("id", "=", 4)])
        else:
            t.update_where({"v": "x"}, [("id", "=", 4)])
    monkeypatch.undo()
    assert t.snapshot().commit_kind == "COMPACT"
    assert rows(t.read()) == rows(pa.concat_tables([batch("a", list(range(10))), batch("a", list(range(10, 20)), "w"),
                                                    batch("b", list(range(20, 30)))]))
    assert_clean(t)
    assert not t.check().orphan_files  # the files the operation wrote were deleted


def test_concurrent_deletes_of_one_bucket_conflict_in_dv_mode(catalog, monkeypatch):
    t = make(catalog, "unaware", True)
    _concurrently(monkeypatch, lambda: (monkeypatch.undo(), t.delete_where([("id", "=", 1)])))
    with pytest.raises(CommitConflict, match="deletion vector"):
        t.delete_where([("id", "=", 2)])
    assert sorted(r["id"] for r in t.read().to_pylist()) == [i for i in range(30) if i != 1]
    assert not t.check().orphan_files


@pytest.mark.parametrize("op", ["delete", "update"])
def test_dv_index_conflict_of_a_row_level_change_names_the_operation(catalog, monkeypatch, op):
    """A concurrent delete marks a row of another file of the bucket: the marked file's vector is unchanged, but
    the bucket's DV index file is not the base's any more. The conflict names the row-level change (before, it
    said "since this compaction started")."""
    t = make(catalog, "unaware", True)
    _concurrently(monkeypatch, lambda: (monkeypatch.undo(), t.delete_where([("id", "=", 15)])))
    with pytest.raises(CommitConflict, match="deletion vectors of bucket 0") as e:
        if op == "delete":
            t.delete_where([("id", "=", 2)])
        else:
            t.update_where({"v": "x"}, [("id", "=", 2)])
    assert "row-level DELETE / UPDATE / MERGE started" in str(e.value)
    assert "compaction" not in str(e.value)
    assert sorted(r["id"] for r in t.read().to_pylist()) == [i for i in range(30) if i != 15]
    assert not t.check().orphan_files


def test_compaction_conflicts_with_a_concurrent_dv_delete(catalog, monkeypatch):
    t = make(catalog, "unaware", True)
    import engine.append.compact as compact_mod
    original = compact_mod._CompactCommitter.commit

    def racing(self, *args, **kwargs):
        monkeypatch.undo()
        t.delete_where([("id", "=", 5)])  # marks a row of a file the compaction is rewriting
        return original(self, *args, **kwargs)
    monkeypatch.setattr(compact_mod._CompactCommitter, "commit", racing)
    with pytest.raises(CommitConflict, match="deletion vector"):
        compact_append(t, full=True)
    assert 5 not in [r["id"] for r in t.read().to_pylist()]
    assert not t.check().orphan_files


def test_concurrent_appends_to_one_append_bucket(catalog):
    """Two writers of one append bucket from the same base: the later commit's file is re-sequenced in metadata
    (append files hold no sequence column; before, the sequence guard failed reading one)."""
    t = catalog.create_table("db.u", SCHEMA)
    t.write(batch("a", [1, 2]))
    w1, w2 = t.new_write(), t.new_write()
    w1.write(batch("a", [3]))
    w2.write(batch("a", [4]))
    m1, m2 = w1.prepare_commit(), w2.prepare_commit()
    t.commit(m1)
    t.commit(m2)
    assert [r["id"] for r in t.read().to_pylist()] == [1, 2, 3, 4]
    ranges = sorted((f.min_sequence_number, f.max_sequence_number) for f in t.plan()[0].files)
    assert ranges == [(0, 1), (2, 2), (3, 3)]
    assert_clean(t)


def test_rewritten_file_path_layout(catalog):
    t = make(catalog, "fixed", False)
    t.delete_where([("id", "=", 7)])
    for sp in t.plan():
        for f in sp.files:
            assert os.path.exists(os.path.join(sp.bucket_dir, f.file_name))


def test_force_produce_changelog_keeps_partition_conditions_row_level(tmp_path):
    """delete.force-produce-changelog: a DELETE over partition columns only changes rows instead of dropping the
    partition (Paimon's OptimizeMetadataOnlyDeleteFromPaimonTable is skipped); the result is the same rows."""
    from engine import Catalog
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    schema = pa.schema([("dt", pa.string()), ("n", pa.int64())])
    t = cat.create_table("db.t", schema, [], ["dt"], options={"delete.force-produce-changelog": "true",
                                                               "deletion-vectors.enabled": "true"})
    t.write(pa.table({"dt": ["a", "a", "b"], "n": [1, 2, 3]}, schema=schema))
    sid = t.delete_where([("dt", "=", "a")])
    assert sorted(r["n"] for r in t.read().to_pylist()) == [3]
    live = [e for e in t.manifests.live_entries(t.snapshot(sid))]
    # partition a's file stays, its rows marked in a deletion vector (a truncate would have dropped it)
    assert {t.scan().partition_values(e.partition)[0] for e in live} == {"a", "b"}
