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
from engine.errors import CorruptFile, InvalidInput, TableNotFound, TagNotFound, UnsupportedFeature
from tests.conftest import expire_after_latest
from tests.interop.pypaimon_util import pp_catalog

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
    bt = pc.get_table("db.t$branch_b1")
    builder = bt.new_batch_write_builder()
    w, c = builder.new_write(), builder.new_commit()
    w.write_arrow(_rows(100, 103, "branch"))
    c.commit(w.prepare_commit())
    w.close()
    c.close()
    return t, pc


def _branch_rows(pc):
    bt = pc.get_table("db.t$branch_b1")
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


def test_an_unknown_branch_and_writes_to_a_branch_are_refused(tmp_path):
    t, _ = _table_with_branch(tmp_path)
    cat = Catalog(str(tmp_path / "wh"))
    with pytest.raises(TableNotFound, match="db.t.*no branch 'b9'"):
        cat.get_table("db.t$branch_b9")
    with pytest.raises(TableNotFound, match="b9"):
        t.branch("b9")
    with pytest.raises(InvalidInput):
        t.branch("../t")
    b = t.branch("b1")
    before = [s.id for s in b.snapshots()]
    for call in (lambda: b.create_tag("t2"), lambda: b.expire_snapshots(), lambda: b.remove_orphan_files(),
                 lambda: b.rollback_to(1), lambda: b.create_branch("c")):
        with pytest.raises(UnsupportedFeature, match=r"db\.t\$branch_b1"):
            call()
    assert [s.id for s in b.snapshots()] == before
    with pytest.raises(UnsupportedFeature):
        cat.get_table("db.t$branch_b1$files")


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
    bt = pc.get_table("db.t$branch_lm")
    builder = bt.new_batch_write_builder()
    w, c = builder.new_write(), builder.new_commit()
    w.write_arrow(_rows(100, 102, "branch"))
    c.commit(w.prepare_commit())
    w.close()
    c.close()
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
    bt = pc.get_table("db.t$branch_b1")
    builder = bt.new_batch_write_builder()
    w, c = builder.new_write(), builder.new_commit()
    w.write_arrow(_pt_rows([(1, 2, "branch"), (1, 3, "branch"), (2, 1, "branch")]))
    c.commit(w.prepare_commit())
    w.close()
    c.close()
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
