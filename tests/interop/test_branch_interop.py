"""Branches made as Paimon makes them (pypaimon 2.1's FileSystemBranchManager lays a branch out as Java's does:
``branch/branch-<name>/{snapshot,schema,tag}``, manifests and data files in the table's shared directories).

A file only a branch's snapshot or tag references must survive lakemerge's orphan cleanup, snapshot expiration and
tag deletion of main, and ``check()`` must not call it an orphan (Paimon: OrphanFilesClean collects the used files
of every branch; a branch created from a tag copies the tag and its snapshot into the branch).
"""
from __future__ import annotations

import datetime as dt
import json
import os

import pyarrow as pa
import pytest

from engine import Catalog
from engine.errors import CorruptFile, InvalidInput, TableNotFound, TagNotFound
from tests.conftest import expire_after_latest
from tests.interop.pypaimon_util import pp_catalog, pp_write

pytestmark = pytest.mark.interop

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])


def _rows(n0, n1, tag):
    return pa.table({"id": list(range(n0, n1)), "v": [tag] * (n1 - n0)})


def _table_with_branch(tmp_path):
    """A lakemerge table tagged ``t1``, and branch ``b1`` made from that tag by pypaimon, which then commits to the
    branch: the branch's own data file and manifests are referenced by nothing on main."""
    wh = str(tmp_path / "wh")
    cat = Catalog(wh)
    cat.create_database("db")
    t = cat.create_table("db.t", SCHEMA, primary_key=["id"], options={"bucket": "1"})
    t.write(_rows(0, 5, "main"))
    t.create_tag("t1")
    pc = pp_catalog(wh, "db")
    pc.create_branch("db.t", "b1", "t1")
    pp_write(pc.get_table("db.t$branch_b1"), _rows(100, 103, "branch"))
    return t, pc


def _branch_rows(pc, branch="b1"):
    bt = pc.get_table(f"db.t$branch_{branch}")
    rb = bt.new_read_builder()
    return sorted(r["id"] for r in rb.new_read().to_arrow(rb.new_scan().plan().splits()).to_pylist())


def _files(root):
    return [os.path.join(d, f) for d, _, files in os.walk(root) for f in files]


def _age_all(root, days=2):
    old = (dt.datetime.now() - dt.timedelta(days=days)).timestamp()
    for d, _, files in os.walk(root):
        for f in files:
            os.utime(os.path.join(d, f), (old, old))


def test_orphan_cleanup_and_check_keep_what_only_a_branch_references(tmp_path):
    t, pc = _table_with_branch(tmp_path)
    assert os.path.isdir(os.path.join(t.root, "branch", "branch-b1", "snapshot"))
    expected = list(range(5)) + [100, 101, 102]
    assert _branch_rows(pc) == expected
    _age_all(t.root)
    report = t.check()
    assert report.ok, report.problems
    assert report.orphan_files == []
    assert t.remove_orphan_files(older_than=0) == []
    assert _branch_rows(pc) == expected


def test_expire_and_tag_deletion_on_main_keep_the_branch_files(tmp_path):
    t, pc = _table_with_branch(tmp_path)
    for i in range(3):
        t.write(_rows(0, 5, f"main{i}"))
    t.compact(full=True)
    t.delete_tag("t1")  # the branch keeps its own copy of the tag, and of the tagged snapshot
    expire_after_latest(t, retain_min=1, time_retained=0)
    assert len(t.snapshots()) == 1
    assert t.read().num_rows == 5
    assert _branch_rows(pc) == list(range(5)) + [100, 101, 102]
    _age_all(t.root)
    assert t.remove_orphan_files(older_than=0) == []
    report = t.check()
    assert report.ok, report.problems
    assert report.orphan_files == []
    assert _branch_rows(pc) == list(range(5)) + [100, 101, 102]


def test_orphan_cleanup_refuses_a_branch_without_schema(tmp_path):
    """Paimon's OrphanFilesClean aborts when a branch has no schema: its snapshots cannot be trusted."""
    t, pc = _table_with_branch(tmp_path)
    schema_dir = os.path.join(t.root, "branch", "branch-b1", "schema")
    for name in os.listdir(schema_dir):
        os.remove(os.path.join(schema_dir, name))
    junk = os.path.join(t.paths.manifest_dir, "manifest-junk-0")
    with open(junk, "wb") as f:
        f.write(b"x")
    _age_all(t.root)
    with pytest.raises(CorruptFile, match="b1"):
        t.remove_orphan_files(older_than=0)
    assert os.path.exists(junk)


def test_a_branch_reads_as_a_table_with_its_own_snapshots_and_tags(tmp_path):
    t, pc = _table_with_branch(tmp_path)
    t.write(_rows(200, 202, "main-only"))
    cat = Catalog(str(tmp_path / "wh"))
    b = cat.get_table("db.t$branch_b1")
    assert b.name == "db.t$branch_b1" and t.branch("b1").name == b.name
    assert [s.id for s in b.snapshots()] == [1, 2]  # the tagged snapshot copied, then pypaimon's branch commit
    assert sorted(b.read().column("id").to_pylist()) == _branch_rows(pc)
    assert sorted(b.read(1).column("id").to_pylist()) == list(range(5))
    assert sorted(b.read(tag="t1").column("id").to_pylist()) == list(range(5))
    assert list(b.tags()) == ["t1"]
    assert b.lookup(pa.table({"id": [101]})).column("v").to_pylist() == ["branch"]
    assert [s.id for s in b.schemas()] == [0]
    # main is untouched by the branch and the branch by main
    assert sorted(t.read().column("id").to_pylist()) == list(range(5)) + [200, 201]
    assert cat.get_table("db.t$branch_main").read().num_rows == 7


def test_an_unknown_branch_is_refused_and_renames_are_seen_both_ways(tmp_path):
    t, pc = _table_with_branch(tmp_path)
    cat = Catalog(str(tmp_path / "wh"))
    with pytest.raises(TableNotFound, match="db.t.*no branch 'b9'"):
        cat.get_table("db.t$branch_b9")
    with pytest.raises(TableNotFound, match="b9"):
        t.branch("b9")
    with pytest.raises(InvalidInput):
        t.branch("../t")
    b = t.branch("b1")
    assert b.branch("main") is t and b.branch("b1").name == "db.t$branch_b1"  # switching from a branch
    with pytest.raises(TableNotFound):
        cat.get_table("db.t$branch_b1$nosuchkind")
    # lakemerge renames a branch pypaimon made, from the branch itself; pypaimon reads it under the new name
    b.rename_branch("b1", "b2")
    assert pc.list_branches("db.t") == ["b2"] and _branch_rows(pc, "b2") == [0, 1, 2, 3, 4, 100, 101, 102]
    # pypaimon renames it back; lakemerge reads it
    pc.rename_branch("db.t", "b2", "b1")
    assert t.branches() == ["b1"] and sorted(t.branch("b1").read().column("id").to_pylist()) == [
        0, 1, 2, 3, 4, 100, 101, 102]


def test_files_only_a_branch_changelog_reads_survive_main_maintenance(tmp_path):
    """A branch whose snapshot 2 expired into a decoupled changelog (``branch/branch-b1/changelog/changelog-2``, as
    Paimon's expiration of the branch writes it): the delta files that changelog reads (changelog-producer none)
    stay through main's orphan cleanup, and check() does not call them orphans."""
    t, pc = _table_with_branch(tmp_path)
    broot = os.path.join(t.root, "branch", "branch-b1")
    os.makedirs(os.path.join(broot, "changelog"))
    os.replace(os.path.join(broot, "snapshot", "snapshot-2"), os.path.join(broot, "changelog", "changelog-2"))
    with open(os.path.join(broot, "snapshot", "LATEST"), "w") as f:
        f.write("1")
    with open(os.path.join(broot, "changelog", "changelog-2")) as f:
        changelog = json.load(f)
    base_list = os.path.normpath(os.path.join(t.paths.manifest_dir, changelog["baseManifestList"]))
    assert t.branch("b1").read(1).num_rows == 5
    # what a changelog does not read (its base manifest list) Paimon's expiration deleted: an orphan now
    kept = [p for p in _files(t.root) if os.path.normpath(p) != base_list]
    _age_all(t.root)
    report = t.check()
    assert report.ok, report.problems
    assert [os.path.normpath(p) for p in report.orphan_files] == [base_list]
    assert t.remove_orphan_files(older_than=0) == [base_list]
    assert all(os.path.exists(p) for p in kept)


def _layout(root):
    return sorted(os.path.relpath(p, root) for p in _files(os.path.join(root, "branch")))


def test_create_branch_lays_it_out_as_paimon_and_delete_branch_drops_its_metadata(tmp_path):
    wh = str(tmp_path / "wh")
    cat = Catalog(wh)
    cat.create_database("db")
    t = cat.create_table("db.t", SCHEMA, primary_key=["id"], options={"bucket": "1"})
    t.write(_rows(0, 5, "main"))
    t.create_tag("t1")
    t.write(_rows(5, 6, "later"))
    pc = pp_catalog(wh, "db")
    pc.create_branch("db.t", "pp", "t1")
    pc.create_branch("db.t", "pp_empty")
    t.create_branch("lm", "t1")
    t.create_branch("lm_empty")
    layout = _layout(t.root)
    assert [p.replace("branch-lm", "branch-pp") for p in layout if "branch-lm" in p] == \
        [p for p in layout if "branch-pp" in p]  # the same files as pypaimon (Java's layout) creates
    assert t.branches() == ["lm", "lm_empty", "pp", "pp_empty"]
    for name in ("pp", "lm"):
        with open(os.path.join(t.root, "branch", f"branch-{name}", "tag", "tag-t1"), "rb") as f, \
                open(os.path.join(t.root, "tag", "tag-t1"), "rb") as g:
            assert f.read() == g.read()
    # pypaimon reads and writes the branch lakemerge made
    before = set(_files(t.root))
    pp_write(pc.get_table("db.t$branch_lm"), _rows(100, 102, "branch"))
    assert sorted(t.branch("lm").read().column("id").to_pylist()) == list(range(5)) + [100, 101]
    assert t.branch("lm_empty").read().num_rows == 0 and t.branch("lm_empty").snapshots() == []
    with pytest.raises(InvalidInput, match="already exists"):
        t.create_branch("lm")
    for bad in ("main", "123", " ", "a/b"):
        with pytest.raises(InvalidInput):
            t.create_branch(bad)
    with pytest.raises(TagNotFound):
        t.create_branch("x", "no-such-tag")
    assert not os.path.exists(os.path.join(t.root, "branch", "branch-x"))
    branch_data = {os.path.normpath(p) for p in set(_files(t.root)) - before
                   if os.sep + "branch" + os.sep not in p}
    t.delete_branch("lm")
    assert t.branches() == ["lm_empty", "pp", "pp_empty"]
    with pytest.raises(InvalidInput, match="does not exist"):
        t.delete_branch("lm")
    _age_all(t.root)
    removed = set(t.remove_orphan_files(older_than=0))  # only what the deleted branch wrote
    assert removed == branch_data
    assert sorted(t.read().column("id").to_pylist()) == list(range(6))
    assert sorted(t.branch("pp").read().column("id").to_pylist()) == list(range(5))
    assert t.check().ok


def test_fast_forward_makes_the_branch_history_main_as_paimon_does(tmp_path):
    t, pc = _table_with_branch(tmp_path)  # main: snapshot 1 (tag t1); branch b1: snapshots 1, 2
    t.write(_rows(300, 302, "main-only"))
    t.write(_rows(400, 402, "main-only"))
    t.create_tag("t3")
    branch_rows = _branch_rows(pc)
    t.create_branch("empty")
    with pytest.raises(InvalidInput, match="no snapshot"):
        t.fast_forward("empty")
    with pytest.raises(InvalidInput, match="does not exist"):
        t.fast_forward("nope")
    t.fast_forward("b1")
    assert [s.id for s in t.snapshots()] == [1, 2]
    assert list(t.tags()) == ["t1"]  # t3 tagged a dropped snapshot; t1 comes from the branch
    assert sorted(t.read().column("id").to_pylist()) == branch_rows
    main = pc.get_table("db.t")  # pypaimon reads main as the branch
    rb = main.new_read_builder()
    assert sorted(r["id"] for r in rb.new_read().to_arrow(rb.new_scan().plan().splits()).to_pylist()) == branch_rows
    _age_all(t.root)
    removed = t.remove_orphan_files(older_than=0)  # the dropped main snapshots' files
    assert removed and not any(os.sep + "branch" + os.sep in p for p in removed)
    t.write(_rows(500, 501, "after"))
    assert sorted(t.read().column("id").to_pylist()) == branch_rows + [500]
    assert t.check().ok


def test_lakemerge_writes_and_compacts_a_branch_and_pypaimon_reads_it(tmp_path):
    t, pc = _table_with_branch(tmp_path)
    main_before = [s.id for s in t.snapshots()]
    b = Catalog(str(tmp_path / "wh")).get_table("db.t$branch_b1")
    b.write(_rows(3, 7, "lm-branch"))
    b.delete(pa.table({"id": [0]}))
    b.compact(full=True)
    expected = sorted(b.read().column("id").to_pylist())
    assert expected == [1, 2, 3, 4, 5, 6, 100, 101, 102]
    assert _branch_rows(pc) == expected  # pypaimon reads what lakemerge committed on the branch
    assert [s.id for s in b.snapshots()] == [1, 2, 3, 4, 5]  # no expiry after branch commits
    assert [s.id for s in t.snapshots()] == main_before
    assert sorted(t.read().column("id").to_pylist()) == list(range(5))
    _age_all(t.root)
    assert t.remove_orphan_files(older_than=0) == []  # main's cleanup keeps the branch's new files
    assert t.check().ok
    assert _branch_rows(pc) == expected


PT_SCHEMA = pa.schema([pa.field("pt", pa.int32(), nullable=False), pa.field("id", pa.int64(), nullable=False),
                       ("v", pa.string())])


def _pt_rows(rows):
    return pa.table({"pt": [r[0] for r in rows], "id": [r[1] for r in rows], "v": [r[2] for r in rows]},
                    schema=PT_SCHEMA)


def _partitioned_table_with_pypaimon_branch(tmp_path):
    """Main (lakemerge) holds pt=1; branch b1, made by pypaimon from tag t1, gets pt=1 and pt=2 rows from pypaimon."""
    wh = str(tmp_path / "wh")
    cat = Catalog(wh)
    cat.create_database("db")
    t = cat.create_table("db.t", PT_SCHEMA, primary_key=["pt", "id"], partition_keys=["pt"],
                         options={"bucket": "2"})
    t.write(_pt_rows([(1, 1, "main"), (1, 2, "main")]))
    t.create_tag("t1")
    pc = pp_catalog(wh, "db")
    pc.create_branch("db.t", "b1", "t1")
    pp_write(pc.get_table("db.t$branch_b1"), _pt_rows([(1, 2, "branch"), (1, 3, "branch"), (2, 1, "branch")]))
    return t, pc


def _pp_rows(pc, name):
    rb = pc.get_table(name).new_read_builder()
    return sorted(tuple(r.values()) for r in rb.new_read().to_arrow(rb.new_scan().plan().splits()).to_pylist())


def test_fallback_branch_written_by_pypaimon_fills_the_partitions_main_lacks(tmp_path):
    """scan.fallback-branch (Paimon's FallbackReadFileStoreTable): pt=1 from main, pt=2 from the branch pypaimon
    wrote. pypaimon 2.1 does not implement the option (it reads main alone); lakemerge follows Paimon."""
    t, pc = _partitioned_table_with_pypaimon_branch(tmp_path)
    t.alter().set_option("scan.fallback-branch", "b1").commit()
    want = [(1, 1, "main"), (1, 2, "main"), (2, 1, "branch")]
    assert sorted(tuple(r.values()) for r in t.read().to_pylist()) == want
    assert sorted(tuple(r.values()) for r in pa.Table.from_batches(list(t.to_reader())).to_pylist()) == want
    assert _pp_rows(pc, "db.t") == [(1, 1, "main"), (1, 2, "main")]  # pypaimon 2.1: main only (not Paimon's)
    assert t.branch("b1").read().num_rows == 4


def test_primary_branch_written_by_pypaimon_owns_its_partitions(tmp_path):
    """scan.primary-branch: every partition b1 has (pt=1, pt=2) is read from b1; main's pt=1 rows are not."""
    t, pc = _partitioned_table_with_pypaimon_branch(tmp_path)
    t.write(_pt_rows([(3, 1, "main")]))
    t.alter().set_option("scan.primary-branch", "b1").commit()
    assert sorted(tuple(r.values()) for r in t.read().to_pylist()) == \
        [(1, 1, "main"), (1, 2, "branch"), (1, 3, "branch"), (2, 1, "branch"), (3, 1, "main")]
    assert _pp_rows(pc, "db.t$branch_b1") == [(1, 1, "main"), (1, 2, "branch"), (1, 3, "branch"), (2, 1, "branch")]


def test_rollback_to_a_tag_keeps_the_files_a_branch_shares_with_dropped_decoupled_changelogs(tmp_path):
    """Main's decoupled changelogs of expired snapshots read those snapshots' delta data files (append table): a
    branch made from a tag of such a snapshot holds the same files live. Rolling main back to an earlier tag drops
    the later changelogs but must keep what the branch references (Paimon's rollback never deletes a file a branch
    uses: its branches keep their own snapshot copies)."""
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    t = cat.create_table("db.t", SCHEMA, options={"bucket": "-1", "changelog.num-retained.min": "10",
                                                  "changelog.num-retained.max": "10", "changelog.time-retained": "1 h",
                                                  "snapshot.num-retained.min": "1", "snapshot.num-retained.max": "1",
                                                  "snapshot.time-retained": "0 ms", "write-only": "true"})
    t.write(_rows(0, 2, "s1"))
    t.create_tag("t1")
    t.write(_rows(2, 4, "s2"))
    t.create_tag("t2")
    t.create_branch("b", "t2")
    t.write(_rows(4, 6, "s3"))
    expire_after_latest(t, retain_min=1, retain_max=1, time_retained=0)
    assert t.snapshot_manager.ids() == [3]
    t.rollback_to("t1")
    assert sorted(t.read().column("id").to_pylist()) == [0, 1]
    assert sorted(t.branch("b").read().column("id").to_pylist()) == [0, 1, 2, 3]
    report = t.check()
    assert report.ok, report.problems


def _ids(table, **kw):
    return sorted(table.read(**kw).column("id").to_pylist())


def _main_with_branch_from_tag(tmp_path, options=None):
    """Main: snapshot 1 (rows 0..4) tagged t1, branch b made from t1 by lakemerge."""
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    t = cat.create_table("db.t", SCHEMA, primary_key=["id"], options={"bucket": "1", **(options or {})})
    t.write(_rows(0, 5, "main"))
    t.create_tag("t1")
    t.create_branch("b", "t1")
    return cat, t


def test_expiring_a_branch_keeps_the_files_main_still_reads(tmp_path):
    """The branch's compaction replaces the data file it shares with main (made from main's tag): expiring the
    branch's first snapshot frees that file for the branch, but main's snapshot (and tag) still read it. Paimon's
    branch expiration would delete it (it knows no other line); lakemerge keeps it."""
    cat, t = _main_with_branch_from_tag(tmp_path)
    b = t.branch("b")
    b.write(_rows(100, 102, "branch"))
    b.compact(full=True)
    b.delete_tag("t1")  # the branch's copy of main's tag; main's own tag stays
    main_files = {p for p in _files(t.root) if p.endswith(".parquet")}
    removal = expire_after_latest(b, retain_min=1, retain_max=1, time_retained=0)
    assert [s.id for s in b.snapshots()] == [3] and removal.snapshot_ids == [1, 2]
    assert all(os.path.exists(p) for p in main_files if p not in removal.data_files)
    assert _ids(t) == list(range(5)) and _ids(t, tag="t1") == list(range(5))
    assert _ids(b) == list(range(5)) + [100, 101]
    assert _branch_rows(pp_catalog(str(tmp_path / "wh"), "db"), "b") == list(range(5)) + [100, 101]
    report = t.check()
    assert report.ok, report.problems
    # the branch's own files that only its expired snapshots used did go
    assert removal.data_files and not any(os.path.exists(p) for p in removal.data_files)


def test_main_and_branch_expiring_in_turn_lose_no_file_of_either(tmp_path):
    """Branch made from a tag of main, then both lines write, compact and expire (main first, then the branch,
    then main again) with their tags deleted: both read as before, check() is clean and no file is left over."""
    cat, t = _main_with_branch_from_tag(tmp_path)
    t.create_branch("c", "t1")  # a third line holding the tagged snapshot: neither expiry may free its files
    b = t.branch("b")
    for i in range(3):
        t.write(_rows(10 * i, 10 * i + 3, f"main{i}"))
        b.write(_rows(100 + i, 101 + i, f"branch{i}"))
    t.compact(full=True)
    b.compact(full=True)
    main_rows, branch_rows = _ids(t), _ids(b)
    t.delete_tag("t1")
    b.delete_tag("t1")
    expire_after_latest(t, retain_min=1, retain_max=1, time_retained=0)
    expire_after_latest(b, retain_min=1, retain_max=1, time_retained=0)
    t.write(_rows(50, 51, "after"))
    expire_after_latest(t, retain_min=1, retain_max=1, time_retained=0)
    assert len(t.snapshots()) == 1 and len(b.snapshots()) == 1
    assert _ids(t) == sorted(main_rows + [50]) and _ids(b) == branch_rows
    assert _ids(t.branch("c")) == list(range(5))
    _age_all(t.root)
    report = t.check()
    assert report.ok, report.problems
    assert report.orphan_files == []  # expiry deleted exactly what no line uses any more
    assert b.remove_orphan_files(older_than=0) == []
    t.delete_branch("c")  # now the tagged snapshot's files are orphans, as Paimon leaves them
    assert t.remove_orphan_files(older_than=0)
    assert _ids(t) == sorted(main_rows + [50]) and _ids(b) == branch_rows
    assert t.check().ok


def _pp_read(pp_table):
    rb = pp_table.new_read_builder()
    return rb.new_read().to_arrow(rb.new_scan().plan().splits())


def test_alter_on_a_branch_changes_its_schema_only_and_its_options_drive_its_maintenance(tmp_path):
    """ALTER of ``t$branch_b`` writes the branch's schema/ (Paimon's SchemaManager with a branch); the branch's
    snapshot options, not main's, drive the expiration after its commits (switchToBranch takes the branch's
    schema options)."""
    cat, t = _main_with_branch_from_tag(tmp_path)
    b = cat.get_table("db.t$branch_b")
    b.alter().add_column("w", pa.int32()).set_option("snapshot.num-retained.min", "1") \
        .set_option("snapshot.num-retained.max", "1").commit()
    assert [s.id for s in b.schemas()] == [0, 1] and b.schema.field_names[-1] == "w"
    assert os.path.exists(os.path.join(t.root, "branch", "branch-b", "schema", "schema-1"))
    main = cat.get_table("db.t")
    assert [s.id for s in main.schemas()] == [0] and "w" not in main.schema.field_names
    for i in range(4):
        b.write(pa.table({"id": [100 + i], "v": ["b"], "w": pa.array([i], pa.int32())}))
        t.write(_rows(10 + i, 11 + i, "main"))
    assert len(b.snapshots()) == 1  # num-retained.max 1 on the branch: each commit expired the one before
    assert t.snapshots()[0].id == 1 and len(t.snapshots()) >= 5  # main's defaults keep every snapshot
    got = b.read().sort_by("id")
    assert got.column("id").to_pylist() == list(range(5)) + [100, 101, 102, 103]
    assert got.column("w").to_pylist() == [None] * 5 + [0, 1, 2, 3]
    assert _ids(t) == list(range(5)) + [10, 11, 12, 13]
    pp = pp_catalog(str(tmp_path / "wh"), "db")
    pp_got = _pp_read(pp.get_table("db.t$branch_b")).sort_by("id")
    assert pp_got.column("w").to_pylist() == got.column("w").to_pylist()
    assert _pp_read(pp.get_table("db.t")).column_names == ["id", "v"]
    report = t.check()
    assert report.ok, report.problems


def test_tags_and_rollback_on_a_branch(tmp_path):
    """Tags of a branch live in its tag/ (Paimon's TagManager with a branch) and time-travel on it; rolling the
    branch back drops its later snapshots, tags and files, never main's."""
    cat, t = _main_with_branch_from_tag(tmp_path)
    b = t.branch("b")
    b.write(_rows(100, 102, "b"))
    b.create_tag("bt2")
    b.write(_rows(102, 104, "b"))
    b.create_tag("bt3")
    assert list(b.tags()) == ["bt2", "bt3", "t1"] and list(t.tags()) == ["t1"]
    assert os.path.exists(os.path.join(t.root, "branch", "branch-b", "tag", "tag-bt2"))
    assert _ids(b, tag="bt2") == list(range(5)) + [100, 101]
    pp_branch = pp_catalog(str(tmp_path / "wh"), "db").get_table("db.t$branch_b")
    assert sorted(_pp_read(pp_branch.copy({"scan.tag-name": "bt2"})).column("id").to_pylist()) == \
        list(range(5)) + [100, 101]
    t.write(_rows(10, 12, "main"))
    with pytest.raises(TagNotFound):
        t.read(tag="bt2")
    b.delete_tag("bt3")
    b.rollback_to("bt2")
    assert [s.id for s in b.snapshots()] == [1, 2] and list(b.tags()) == ["bt2", "t1"]
    assert _ids(b) == list(range(5)) + [100, 101]
    b.rollback_to(1)  # the snapshot copied from main's tag: main's files it holds stay
    assert list(b.tags()) == ["t1"] and _ids(b) == list(range(5))
    assert _ids(t) == list(range(5)) + [10, 11] and _ids(t, tag="t1") == list(range(5))
    _age_all(t.root)
    report = t.check()
    assert report.ok, report.problems
    assert report.orphan_files == []  # the rollback deleted the files of the dropped branch snapshots


def test_changes_streams_and_consumers_of_a_branch(tmp_path):
    """read_changes / stream read the branch's snapshots; a consumer's progress goes to the branch's consumer/
    (where pypaimon's ConsumerManager with a branch finds it) and holds the branch's expiration back."""
    from pypaimon.consumer.consumer_manager import ConsumerManager as PPConsumerManager

    cat, t = _main_with_branch_from_tag(tmp_path, {"changelog-producer": "input"})
    b = t.branch("b")
    b.write(_rows(100, 102, "b"))
    t.write(_rows(10, 12, "main"))
    changes = b.read_changes(1)
    assert sorted(changes.column("id").to_pylist()) == [100, 101]
    assert set(changes.column("_row_kind").to_pylist()) == {"+I"}
    batches = list(b.stream("from-snapshot", snapshot_id=2, consumer_id="c1", idle_timeout=0))
    assert sorted(i for x in batches for i in x.column("id").to_pylist()) == [100, 101]
    assert b.consumers() == {"c1": 3} and t.consumers() == {}
    assert os.path.exists(os.path.join(t.root, "branch", "branch-b", "consumer", "consumer-c1"))
    pp_branch = pp_catalog(str(tmp_path / "wh"), "db").get_table("db.t$branch_b")
    assert PPConsumerManager(pp_branch.file_io, pp_branch.table_path, "b").min_next_snapshot() == 3
    b.write(_rows(102, 104, "b"))
    b.reset_consumer("c1", 2)
    expire_after_latest(b, retain_min=1, retain_max=1, time_retained=0)
    assert [s.id for s in b.snapshots()] == [2, 3]  # the consumer still needs snapshot 2
    b.reset_consumer("c1")
    assert b.consumers() == {}
    expire_after_latest(b, retain_min=1, retain_max=1, time_retained=0)
    assert [s.id for s in b.snapshots()] == [3]
    assert _ids(t) == list(range(5)) + [10, 11] and _ids(b) == list(range(5)) + [100, 101, 102, 103]
    assert t.check().ok


def test_drop_and_expire_partitions_on_a_branch(tmp_path):
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    schema = pa.schema([("id", pa.int64()), ("d", pa.string())])
    t = cat.create_table("db.t", schema, primary_key=["id", "d"], partition_keys=["d"],
                         options={"bucket": "1", "partition.expiration-time": "7 d",
                                  "partition.timestamp-formatter": "yyyyMMdd"})
    t.write(pa.table({"id": [1, 2, 3], "d": ["20240101", "20240110", "20240120"]}))
    t.create_tag("t1")
    t.create_branch("b", "t1")
    b = t.branch("b")
    b.drop_partitions({"d": "20240120"})
    assert sorted(b.read().column("d").to_pylist()) == ["20240101", "20240110"]
    expired = b.expire_partitions(now=dt.datetime(2024, 1, 15))
    assert expired == [{"d": "20240101"}]
    assert sorted(b.read().column("d").to_pylist()) == ["20240110"]
    assert sorted(t.read().column("d").to_pylist()) == ["20240101", "20240110", "20240120"]
    expire_after_latest(b, retain_min=1, retain_max=1, time_retained=0)
    assert sorted(t.read().column("d").to_pylist()) == ["20240101", "20240110", "20240120"]
    report = b.check()  # the branch, with main checked as far as the files it references
    assert report.ok, report.problems


def test_branch_expiry_reads_main_again_when_main_expires_meanwhile(tmp_path):
    """Main's snapshots expire while a branch's expiration reads them (two writers, each maintaining after its
    commits): the branch reads main's line again instead of failing, and keeps what main still uses."""
    cat, t = _main_with_branch_from_tag(tmp_path)
    b = t.branch("b")
    b.write(_rows(100, 102, "b"))
    b.compact(full=True)
    b.delete_tag("t1")
    for i in range(3):
        t.write(_rows(10 + i, 11 + i, "main"))
    main_sm = b.main.snapshot_manager
    read_snapshot, raced = main_sm.snapshot, []

    def snapshot_racing_main_expiry(sid):
        if not raced:
            raced.append(sid)
            expire_after_latest(t, retain_min=1, retain_max=1, time_retained=0)
        return read_snapshot(sid)

    main_sm.snapshot = snapshot_racing_main_expiry
    removal = expire_after_latest(b, retain_min=1, retain_max=1, time_retained=0)
    main_sm.snapshot = read_snapshot
    assert raced and removal.snapshot_ids == [1, 2] and len(t.snapshots()) == 1
    assert _ids(t) == list(range(5)) + [10, 11, 12] and _ids(t, tag="t1") == list(range(5))
    assert _ids(b) == list(range(5)) + [100, 101]
    report = t.check()
    assert report.ok, report.problems


def test_system_tables_of_a_branch(tmp_path):
    """``t$branch_b$<kind>`` (Paimon's system tables of a branch table) read the branch's metadata."""
    cat, t = _main_with_branch_from_tag(tmp_path)
    b = t.branch("b")
    b.write(_rows(100, 102, "b"))
    b.create_tag("bt")
    list(b.stream("from-snapshot", snapshot_id=2, consumer_id="c2", idle_timeout=0))
    t.write(_rows(10, 12, "main"))
    read = lambda kind: cat.get_table(f"db.t$branch_b${kind}").read()  # noqa: E731
    assert read("snapshots").column("snapshot_id").to_pylist() == [1, 2]
    assert read("tags").column("tag_name").to_pylist() == ["bt", "t1"]
    assert read("consumers").column("consumer_id").to_pylist() == ["c2"]
    assert read("files").num_rows == 2  # main's file from the tag and the branch's own
    assert cat.get_table("db.t$tags").read().column("tag_name").to_pylist() == ["t1"]
    assert cat.get_table("db.t$consumers").read().num_rows == 0


def test_deleting_a_branch_tag_after_the_branch_expired_its_snapshot_keeps_main_files(tmp_path):
    """The branch's copy of main's tag outlives the branch's copy of the snapshot; deleting that tag frees the
    files only it kept for the branch -- not the ones main's snapshot and tag still read."""
    cat, t = _main_with_branch_from_tag(tmp_path)
    b = t.branch("b")
    b.write(_rows(100, 102, "b"))
    b.compact(full=True)
    expire_after_latest(b, retain_min=1, retain_max=1, time_retained=0)
    assert [s.id for s in b.snapshots()] == [3] and list(b.tags()) == ["t1"]
    b.delete_tag("t1")
    assert list(t.tags()) == ["t1"]
    assert _ids(t) == list(range(5)) and _ids(t, tag="t1") == list(range(5))
    assert _ids(b) == list(range(5)) + [100, 101]
    report = t.check()
    assert report.ok, report.problems


def test_partition_expiration_check_interval_is_kept_per_branch(tmp_path, monkeypatch):
    """Each line keeps its own last partition-expiration check (Paimon keeps it in each table's commit object): a
    check that just ran on main does not make the branch's due check wait."""
    from engine.maintenance import partition_expire
    from engine.maintenance.partition_expire import expire_partitions_if_due
    from engine.meta.snapshot import BATCH_COMMIT_IDENTIFIER

    monkeypatch.setattr(partition_expire.random, "randrange", lambda n: 0)
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    t = cat.create_table("db.t", pa.schema([("id", pa.int64()), ("d", pa.string())]), primary_key=["id", "d"],
                         partition_keys=["d"], options={"bucket": "1", "partition.expiration-time": "1 d",
                                                        "partition.expiration-check-interval": "1 h",
                                                        "partition.timestamp-formatter": "yyyyMMdd",
                                                        "write-only": "true"})
    t.write(pa.table({"id": [1, 2], "d": ["20000101", "20000102"]}))
    t.create_tag("t1")
    t.create_branch("b", "t1")
    b = t.branch("b")
    now = dt.datetime.now()
    assert expire_partitions_if_due(b, BATCH_COMMIT_IDENTIFIER, now) is None  # first sight of the branch
    assert expire_partitions_if_due(t, BATCH_COMMIT_IDENTIFIER, now + dt.timedelta(minutes=1)) is None
    assert len(expire_partitions_if_due(t, BATCH_COMMIT_IDENTIFIER, now + dt.timedelta(minutes=62))) == 2
    assert len(expire_partitions_if_due(b, BATCH_COMMIT_IDENTIFIER, now + dt.timedelta(minutes=63))) == 2
    assert b.read().num_rows == 0 and t.read().num_rows == 0


def test_check_of_a_table_whose_only_snapshots_are_a_branch_s(tmp_path):
    """An empty branch of a table without commits, written to: check() of main checks the branch's snapshots
    instead of failing on main's missing latest snapshot; check() of the branch checks them as its own."""
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    t = cat.create_table("db.t", SCHEMA, primary_key=["id"], options={"bucket": "1",
                                                                        "deletion-vectors.enabled": "true"})
    t.create_branch("b")
    b = t.branch("b")
    b.write(_rows(0, 3, "b"))
    assert t.snapshots() == [] and _ids(b) == [0, 1, 2]
    for line, ids in ((t, []), (b, [s.id for s in b.snapshots()])):
        report = line.check()
        assert report.ok, report.problems
        assert report.snapshot_ids == ids and (ids or line is t)


def test_check_reads_branch_files_through_the_branch_schemas_when_main_has_other_ones_of_the_same_id(tmp_path):
    """Main and its branch both ALTER to their own schema-1 (main adds x; the branch renames v and adds y) and
    write: check() judges each data file by the schema of the line that wrote it, so the branch's files are not
    called unreadable for lacking main's columns."""
    cat, t = _main_with_branch_from_tag(tmp_path)
    b = t.branch("b")
    t.alter().add_column("x", pa.string()).commit()
    b.alter().rename_column("v", "vv").add_column("y", pa.int32()).commit()
    t.write(pa.table({"id": [10], "v": ["m"], "x": ["a"]}))
    b.write(pa.table({"id": [100], "vv": ["b"], "y": pa.array([7], pa.int32())}))
    b.compact(full=True)
    assert [s.id for s in t.schemas()] == [0, 1] and [s.id for s in b.schemas()] == [0, 1]
    assert _ids(b) == list(range(5)) + [100] and _ids(t) == list(range(5)) + [10]
    for line in (t, b):
        report = line.check()
        assert report.ok, report.problems


def test_check_reports_a_missing_file_of_a_branch_decoupled_changelog(tmp_path):
    """A branch's expiration keeps its snapshots' changelog files in decoupled changelogs (branch/branch-b/
    changelog/); check() finds one of those files missing as it does for main's."""
    from engine.changelog import retention

    cat, t = _main_with_branch_from_tag(tmp_path, {"changelog-producer": "input", "changelog.num-retained.min": "20",
                                                    "changelog.num-retained.max": "30"})
    b = t.branch("b")
    for i in range(3):
        b.write(_rows(100 + i, 101 + i, "b"))
    expire_after_latest(b, retain_min=1, retain_max=1, time_retained=0)
    assert retention.ids(b) == [1, 2, 3] and retention.ids(t) == []
    assert t.check().ok
    only_the_changelog = sorted(p for p in retention.changelog_paths(b, retention.read(b, 3))[0])
    assert only_the_changelog
    os.remove(only_the_changelog[0])
    report = t.check()
    assert [(p.kind, p.path) for p in report.problems] == [("changelog-file-missing", only_the_changelog[0])]


def test_a_paimon_branch_named_with_a_leading_dot_is_read_and_protected(tmp_path):
    """Paimon's BranchManager.validateBranch accepts '.dot' (only main, blank and numeric names are refused):
    lakemerge opens such a branch, and main's expiry, which must read every branch, is not blocked by it."""
    wh = str(tmp_path / "wh")
    cat = Catalog(wh)
    cat.create_database("db")
    t = cat.create_table("db.t", SCHEMA, primary_key=["id"], options={"bucket": "1"})
    t.write(_rows(0, 5, "main"))
    t.create_tag("t1")
    pc = pp_catalog(wh, "db")
    pc.create_branch("db.t", ".dot", "t1")
    t.delete_tag("t1")
    t.write(_rows(0, 5, "newer"))
    t.compact(full=True)
    expire_after_latest(t, retain_min=1, retain_max=1, time_retained=0)
    assert [s.id for s in t.snapshots()] == [t.latest_snapshot_id()]
    assert sorted(r["id"] for r in t.branch(".dot").read().to_pylist()) == list(range(5))
    assert {r["v"] for r in t.branch(".dot").read().to_pylist()} == {"main"}  # its tag's files were kept
    assert t.check().ok


def test_merge_branch_of_an_append_table_pypaimon_wrote_to_is_read_by_pypaimon(tmp_path):
    """pypaimon appends to a branch of a lakemerge append table; lakemerge's merge_branch (Paimon's
    FileSystemBranchManager.mergeBranch) adds those files to main, where pypaimon reads them."""
    wh = str(tmp_path / "wh")
    cat = Catalog(wh)
    cat.create_database("db")
    t = cat.create_table("db.a", SCHEMA, options={"bucket": "-1"})
    t.write(_rows(0, 3, "main"))
    t.create_tag("t1")
    t.create_branch("b1", tag="t1")
    pc = pp_catalog(wh, "db")
    pp_write(pc.get_table("db.a$branch_b1"), _rows(100, 102, "branch"))
    t.merge_branch("b1")
    rb = pc.get_table("db.a").new_read_builder()
    got = sorted(r["id"] for r in rb.new_read().to_arrow(rb.new_scan().plan().splits()).to_pylist())
    assert got == sorted(t.read().column("id").to_pylist()) == [0, 1, 2, 100, 101]
