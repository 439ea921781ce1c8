"""Branch management from main and from a branch table, as Paimon's FileSystemBranchManager: create (empty: the
calling line's latest schema; from a tag: the calling line's tag), delete, rename (one directory rename), list and
fast-forward (into the calling line). A commit by a table object whose branch was deleted or renamed meanwhile is
refused and resurrects nothing."""
from __future__ import annotations

import os

import pyarrow as pa
import pytest

from engine.errors import CommitConflict, InvalidInput, StorageError, TagNotFound
from engine.io.faulty import Fault, FaultyFileIO

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])


def _rows(ids, v):
    return pa.table({"id": list(ids), "v": [v] * len(ids)})


def _ids(table, **kw):
    return sorted(table.read(**kw).column("id").to_pylist())


@pytest.fixture()
def table(catalog):
    """db.t with ids 0-4 on main, tag ``t1``, and branch ``b1`` from it holding ids 0-4 and 100-102."""
    t = catalog.create_table("db.t", SCHEMA, primary_key=["id"], options={"bucket": "1"})
    t.write(_rows(range(5), "main"))
    t.create_tag("t1")
    t.create_branch("b1", tag="t1")
    t.branch("b1").write(_rows(range(100, 103), "b1"))
    return t


def test_create_from_a_branch_copies_that_branchs_schema_and_tags(table):
    b1 = table.branch("b1")
    b1.alter().add_column("extra", pa.int32()).commit()
    b1.write(pa.table({"id": [200], "v": ["b1"], "extra": pa.array([7], pa.int32())}))
    b1.create_tag("bt")
    b1.create_branch("empty")  # empty: b1's latest schema, not main's
    empty = table.branch("empty")
    assert empty.snapshots() == [] and "extra" in empty.arrow_schema.names
    assert "extra" not in table.arrow_schema.names
    b1.create_branch("fromtag", tag="bt")  # from b1's own tag
    c = table.branch("fromtag")
    assert _ids(c) == _ids(b1) == [0, 1, 2, 3, 4, 100, 101, 102, 200]
    assert c.tag_snapshot("bt").id == b1.tag_snapshot("bt").id
    with pytest.raises(TagNotFound):
        b1.create_branch("x", tag="nosuch")  # main has no tag 'bt', and b1 has no 'nosuch'
    with pytest.raises(TagNotFound):
        table.create_branch("x", tag="bt")  # b1's tag is not main's
    assert b1.branches() == table.branches() == ["b1", "empty", "fromtag"]
    c.write(pa.table({"id": [300], "v": ["c"], "extra": pa.array([None], pa.int32())}))  # its own line
    assert 300 not in _ids(b1) and 300 in _ids(c) and _ids(table) == [0, 1, 2, 3, 4]


def test_fast_forward_into_a_branch_replaces_its_history_only(table):
    b1 = table.branch("b1")
    b1.create_tag("b1t")
    b1.create_branch("c", tag="b1t")
    c = table.branch("c")
    c.write(_rows([500], "c"))
    c.delete(_rows([100], "c"))
    b1.write(_rows([600], "b1"))  # replaced: snapshot 3 of b1 is at or after c's earliest snapshot (2)
    b1.fast_forward("c")
    assert _ids(b1) == _ids(c) == [0, 1, 2, 3, 4, 101, 102, 500]
    assert [s.id for s in b1.snapshots()] == [1] + [s.id for s in c.snapshots()]  # b1's own before c's earliest
    assert _ids(table) == [0, 1, 2, 3, 4] and _ids(table.branch("b1")) == _ids(c)
    b1.write(_rows([700], "b1"))  # b1 goes on from c's history; c is unchanged
    assert 700 in _ids(b1) and 700 not in _ids(c)
    with pytest.raises(InvalidInput, match="current branch 'b1'"):
        b1.fast_forward("b1")
    with pytest.raises(InvalidInput, match="'main' cannot be fast-forwarded"):
        b1.fast_forward("main")
    with pytest.raises(InvalidInput, match="'nosuch' does not exist"):
        b1.fast_forward("nosuch")


def test_rename_moves_the_branch_with_its_tags_and_consumers(table):
    b1 = table.branch("b1")
    b1.create_tag("bt")
    before = _ids(b1)
    table.rename_branch("b1", "b2")
    assert table.branches() == ["b2"]
    b2 = table.branch("b2")
    assert _ids(b2) == before and b2.tag_snapshot("bt").id == 2 and b2.name == "db.t$branch_b2"
    b2.write(_rows([900], "b2"))
    assert 900 in _ids(b2) and _ids(table) == [0, 1, 2, 3, 4]
    b2.rename_branch("b2", "b3")  # from the branch itself, as Paimon's branch table allows
    assert table.branches() == ["b3"] and 900 in _ids(table.branch("b3"))
    assert table.check().ok


@pytest.mark.parametrize("source,target,message", [
    ("main", "x", "cannot rename the main branch"),
    ("nosuch", "x", "'nosuch' does not exist"),
    ("b1", "b1", "already exists"),
    ("b1", "main", "default branch"),
    ("b1", "123", "purely numeric"),
    ("b1", "a/b", "path separators"),
    ("b1", " ", "non-blank"),
])
def test_rename_refuses_bad_names_and_changes_nothing(table, source, target, message):
    with pytest.raises(InvalidInput, match=message):
        table.rename_branch(source, target)
    assert table.branches() == ["b1"] and _ids(table.branch("b1")) == [0, 1, 2, 3, 4, 100, 101, 102]


def test_a_branch_that_main_falls_back_to_is_neither_renamed_nor_deleted_from_any_line(table):
    table.create_branch("b2")
    table.alter().set_option("scan.fallback-branch", "b1").commit()
    for line in (table, table.branch("b2"), table.branch("b1")):
        with pytest.raises(InvalidInput, match="'scan.fallback-branch' of 'db.t'"):
            line.rename_branch("b1", "x")
        with pytest.raises(InvalidInput, match="'scan.fallback-branch' of 'db.t'"):
            line.delete_branch("b1")
    assert table.branches() == ["b1", "b2"]
    table.branch("b2").delete_branch("b2")  # a branch may delete itself, as in Paimon
    assert table.branches() == ["b1"]


def test_a_failed_rename_leaves_the_branch_as_it_was(catalog, table):
    faulty = FaultyFileIO(table.file_io, [Fault("rename_dir", "*branch-b1")])
    t = type(table)(table.name, table.root, faulty)
    with pytest.raises(StorageError):
        t.rename_branch("b1", "b2")
    assert table.branches() == ["b1"] and _ids(table.branch("b1")) == [0, 1, 2, 3, 4, 100, 101, 102]


@pytest.mark.parametrize("change", ["delete", "rename"])
def test_a_commit_to_a_branch_deleted_or_renamed_meanwhile_is_refused(table, change):
    stale = table.branch("b1")
    if change == "delete":
        table.delete_branch("b1")
    else:
        table.rename_branch("b1", "b2")
    files_before = {os.path.join(d, f) for d, _, fs in os.walk(table.root) for f in fs}
    with pytest.raises(CommitConflict, match="branch deleted or renamed"):
        stale.write(_rows([42], "late"))
    assert not os.path.exists(os.path.join(table.root, "branch", "branch-b1"))  # nothing resurrected
    files_after = {os.path.join(d, f) for d, _, fs in os.walk(table.root) for f in fs}
    assert files_after == files_before  # the refused commit's data and manifest files are gone
    assert table.check().ok


APPEND_SCHEMA = pa.schema([("dt", pa.string()), ("id", pa.int64())])


def _append_rows(dt, ids):
    return pa.table({"dt": [dt] * len(ids), "id": list(ids)})


@pytest.fixture()
def append_table(catalog):
    """Append table db.a partitioned by dt: main holds ids 0-2 (dt A); branch b1 from tag t1 adds ids 10-11 (dt A)
    and 20 (dt B) in two commits; main then adds id 3."""
    t = catalog.create_table("db.a", APPEND_SCHEMA, partition_keys=["dt"])
    t.write(_append_rows("A", range(3)))
    t.create_tag("t1")
    t.create_branch("b1", tag="t1")
    b1 = t.branch("b1")
    b1.write(_append_rows("A", [10, 11]))
    b1.write(_append_rows("B", [20]))
    t.write(_append_rows("A", [3]))
    return t


def test_merge_branch_adds_the_files_only_the_source_has(append_table):
    t = append_table
    files_before = sorted(os.listdir(os.path.join(t.root, "dt=A", "bucket-0")))
    sid = t.merge_branch("b1")
    assert _ids(t) == [0, 1, 2, 3, 10, 11, 20]
    snap = t.snapshot(sid)
    assert snap.commit_kind == "APPEND" and snap.delta_record_count == 3
    assert sorted(os.listdir(os.path.join(t.root, "dt=A", "bucket-0"))) == files_before  # shared, not copied
    assert t.merge_branch("b1") == sid  # nothing left to merge: no new snapshot
    assert _ids(t.branch("b1")) == [0, 1, 2, 10, 11, 20]  # the source is unchanged
    t.branch("b1").merge_branch("main", "b1")  # the other way, from the branch table: main's id 3 joins b1
    assert _ids(t.branch("b1")) == [0, 1, 2, 3, 10, 11, 20]
    # main's merged files outlive the branch: delete it and clean orphans
    t.delete_branch("b1")
    t.remove_orphan_files(older_than=0)
    assert _ids(t) == [0, 1, 2, 3, 10, 11, 20] and t.check().ok


def test_merge_branch_refusals_change_nothing(catalog, append_table):
    t = append_table
    before = [s.id for s in t.snapshots()]
    t.branch("b1").compact(full=True)  # a COMPACT snapshot breaks the append-only history
    for call, message in [
        (lambda: t.merge_branch("b1"), "commit kind 'COMPACT'"),
        (lambda: t.merge_branch("main"), "into itself"),
        (lambda: t.merge_branch(" "), "blank"),
        (lambda: t.merge_branch("nosuch"), "'nosuch' does not exist"),
        (lambda: t.merge_branch("main", "nosuch"), "'nosuch' does not exist"),
    ]:
        with pytest.raises(InvalidInput, match=message):
            call()
    t.create_branch("empty")
    with pytest.raises(InvalidInput, match="merge branch 'empty': it has no snapshot"):
        t.merge_branch("empty")
    t.create_branch("b2", tag="t1")
    t.branch("b2").alter().add_column("x", pa.int32()).commit()
    t.branch("b2").write(pa.table({"dt": ["C"], "id": [30], "x": pa.array([1], pa.int32())}))
    with pytest.raises(InvalidInput, match="columns differ"):
        t.merge_branch("b2")
    pk = catalog.create_table("db.k", SCHEMA, primary_key=["id"], options={"bucket": "1"})
    pk.write(_rows([1], "x"))
    pk.create_tag("t")
    pk.create_branch("b", tag="t")
    with pytest.raises(InvalidInput, match="only for append tables"):
        pk.merge_branch("b")
    assert [s.id for s in t.snapshots()] == before and _ids(t) == [0, 1, 2, 3]


def test_merge_branch_needs_the_history_from_snapshot_1(append_table):
    t = append_table
    t.expire_snapshots(retain_max=1, retain_min=1)
    with pytest.raises(InvalidInput, match="does not start at snapshot 1"):
        t.merge_branch("b1")


def test_merge_branch_refuses_files_of_a_schema_id_the_lines_hold_differently(append_table):
    """Paimon's validateMergeFileSchemas compares the whole schema of each merged file's schema id
    (TableSchema.equals: fields, keys, options, comment, time), not only its fields: main and b1 each made their
    own schema 1 (same columns, different options), so b1's files written with it are not merged."""
    t = append_table
    t.alter().set_option("snapshot.num-retained.min", "5").commit()
    b1 = t.branch("b1")
    b1.alter().set_option("snapshot.num-retained.min", "7").commit()
    b1.write(_append_rows("C", [30]))
    assert t.schema.id == b1.schema.id == 1 and t.schema.fields == b1.schema.fields
    before = [s.id for s in t.snapshots()]
    with pytest.raises(InvalidInput, match="schema 1 differs"):
        t.merge_branch("b1")
    assert [s.id for s in t.snapshots()] == before and _ids(t) == [0, 1, 2, 3]


@pytest.mark.parametrize("change", ["delete", "rename"])
def test_consumer_progress_of_a_branch_deleted_or_renamed_meanwhile_resurrects_nothing(table, change):
    """A stream with a consumer id (or ``reset_consumer``) on a branch table object whose branch was deleted or
    renamed must not recreate ``branch/branch-b1/consumer/``: a schema-less branch directory makes every cleanup of
    the table fail (engine.branches.other_lines fails closed)."""
    from engine.errors import TableNotFound
    stale = table.branch("b1")
    if change == "delete":
        table.delete_branch("b1")
    else:
        table.rename_branch("b1", "b2")
    with pytest.raises(TableNotFound, match="branch deleted or renamed"):
        stale.reset_consumer("c1", 1)
    with pytest.raises(TableNotFound, match="branch deleted or renamed"):
        list(stale.stream(consumer_id="c1", idle_timeout=0.1, poll_interval=0.01))
    assert not os.path.exists(os.path.join(table.root, "branch", "branch-b1"))
    table.remove_orphan_files(older_than=0)
    assert table.check().ok


def test_altering_a_branch_deleted_meanwhile_raises_table_not_found(table):
    from engine.errors import TableNotFound
    stale = table.branch("b1")
    table.delete_branch("b1")
    with pytest.raises(TableNotFound, match="no schema"):
        stale.alter().set_option("snapshot.num-retained.min", "3").commit()
    assert not os.path.exists(os.path.join(table.root, "branch", "branch-b1"))


def test_check_of_a_branch_checks_that_branch(table):
    """check() of ``db.t$branch_b1`` used to return main's report (its snapshot ids, and none of the branch's own
    hint or gap findings). Now the branch is checked as its own table -- main and the other branches only as far as
    the files they reference -- and the unreferenced files are still the whole table's."""
    b = table.branch("b1")
    b.write(_rows([103], "b1"))
    b.write(_rows([104], "b1"))
    assert [s.id for s in b.snapshots()] == [1, 2, 3, 4] and [s.id for s in table.snapshots()] == [1]
    report = b.check()
    assert report.table == "db.t$branch_b1" and report.snapshot_ids == [1, 2, 3, 4] and report.ok
    gone = b.snapshot(3)
    os.remove(os.path.join(b.paths.snapshot_dir, "snapshot-3"))  # a gap in the branch's history
    unreferenced = sorted(b.paths.manifest(n) for n in (gone.base_manifest_list, gone.delta_manifest_list))
    report = table.branch("b1").check()
    assert report.kinds() == {"snapshot-gap"} and report.problems[0].path == b.paths.snapshot_dir
    assert report.orphan_files == unreferenced
    main_report = table.check()
    assert main_report.snapshot_ids == [1] and main_report.ok and main_report.orphan_files == unreferenced
    table.create_branch("b2")
    assert table.branch("b2").check().orphan_files == unreferenced  # main's and b1's files are referenced
