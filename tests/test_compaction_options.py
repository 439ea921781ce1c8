"""Compaction options of Paimon's CoreOptions that change which files a primary-key compaction rewrites:
compaction.force-rewrite-all-files (CompactStrategy.pickFullCompaction, MergeTreeCompactTask.upgrade), the early
full compaction thresholds (EarlyFullCompaction) and gentle lookup compaction (ForceUpLevel0Compaction with a max
interval). Results are read back by pypaimon."""
from __future__ import annotations

import pyarrow as pa

from engine import Catalog
from tests.interop.pypaimon_util import pp_get_table, pp_read

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), pa.field("v", pa.string())])


def _table(wh, options):
    cat = Catalog(str(wh))
    cat.create_database("db", ignore_if_exists=True)
    return cat.create_table("db.t", SCHEMA, primary_key=["id"], options={"bucket": "1", **options})


def _rows(ids, tag):
    return pa.table({"id": pa.array(list(ids), pa.int64()), "v": [f"{tag}{i}" for i in ids]}, schema=SCHEMA)


def _files(t):
    return [f for sp in t.plan() for f in sp.files]


def _read(t):
    return sorted(t.read().to_pylist(), key=lambda r: r["id"])


def _pp(wh):
    return sorted(pp_read(pp_get_table(str(wh), "db.t")).to_pylist(), key=lambda r: r["id"])


def test_force_rewrite_all_files_rewrites_a_bucket_that_is_one_top_level_run(tmp_path):
    t = _table(tmp_path, {"write-only": "true"})
    t.write(_rows(range(10), "a"))
    t.write(_rows(range(5, 15), "b"))
    t.compact(full=True)
    assert t.compact(full=True) is None  # without the option: nothing to do
    before, names = _read(t), {f.file_name for f in _files(t)}
    t.alter().set_option("compaction.force-rewrite-all-files", "true").commit()
    sid = t.compact(full=True)
    assert sid is not None and t.snapshot(sid).commit_kind == "COMPACT"
    files = _files(t)
    assert {f.level for f in files} == {5} and not names & {f.file_name for f in files}
    assert _read(t) == before and _pp(tmp_path) == before
    assert t.compact(full=True) is not None  # and again: every full compaction rewrites every file


def test_force_rewrite_all_files_rewrites_files_a_compaction_would_upgrade(tmp_path):
    opts = {"num-sorted-run.compaction-trigger": "2", "target-file-size": "1 kb",
            "compaction.small-file-ratio": "0.000001"}
    for force, upgraded in (("false", True), ("true", False)):
        wh = tmp_path / force
        t = _table(wh, {**opts, "compaction.force-rewrite-all-files": force})
        t.write(_rows(range(10), "a"))
        first = {f.file_name for f in _files(t)}
        t.write(_rows(range(100, 110), "b"))  # disjoint keys: both big files would be upgraded by metadata
        assert t.snapshot(t.latest_snapshot_id()).commit_kind == "COMPACT"
        assert bool(first & {f.file_name for f in _files(t)}) is upgraded
        assert _pp(wh) == _read(t) and len(_read(t)) == 20


def test_total_size_threshold_fully_compacts_at_every_write(tmp_path):
    t = _table(tmp_path, {"compaction.total-size-threshold": "1 gb"})
    t.write(_rows(range(10), "a"))
    assert {f.level for f in _files(t)} == {0}  # one run: nothing to merge
    t.write(_rows(range(5, 15), "b"))  # two runs, far below the trigger of 5
    assert {f.level for f in _files(t)} == {5} and len(_files(t)) == 1
    assert _pp(tmp_path) == _read(t)


def test_incremental_size_threshold_fully_compacts_once_new_data_is_big_enough(tmp_path):
    t = _table(tmp_path, {"compaction.incremental-size-threshold": "1 b"})
    t.write(_rows(range(10), "a"))
    t.write(_rows(range(5, 15), "b"))
    assert {f.level for f in _files(t)} == {5}
    t2 = _table(tmp_path / "big", {"compaction.incremental-size-threshold": "1 gb"})
    t2.write(_rows(range(10), "a"))
    t2.write(_rows(range(5, 15), "b"))
    assert {f.level for f in _files(t2)} == {0}


def test_optimization_interval_fully_compacts_a_bucket_never_fully_compacted(tmp_path):
    t = _table(tmp_path, {"compaction.optimization-interval": "1 h"})
    t.write(_rows(range(10), "a"))
    t.write(_rows(range(5, 15), "b"))
    assert {f.level for f in _files(t)} == {5}  # no max-level file: the last full compaction is unknown
    t.write(_rows(range(20, 25), "c"))  # the new top-level file is minutes old: not due again
    assert sorted(f.level for f in _files(t)) == [0, 5]


def test_gentle_lookup_compaction_leaves_level_0_until_the_interval(tmp_path):
    radical = _table(tmp_path / "radical", {"changelog-producer": "lookup"})
    radical.write(_rows(range(3), "a"))
    assert {f.level for f in _files(radical)} != {0}  # radical: level 0 compacted up at once
    t = _table(tmp_path / "gentle", {"changelog-producer": "lookup", "lookup-compact": "gentle",
                                     "lookup-compact.max-interval": "5"})
    for i in range(4):  # 4 writes of disjoint keys: 4 level-0 runs, below the trigger (5)
        t.write(_rows(range(10 * i, 10 * i + 3), f"w{i}"))
        assert {f.level for f in _files(t)} == {0}
    assert t.read_changes(0, t.latest_snapshot_id()).num_rows == 0  # no changelog before a lookup compaction
    t.write(_rows(range(100, 103), "x"))  # 5 runs: universal picks them (the trigger), no forced pick needed
    assert 0 not in {f.level for f in _files(t)}
    assert _pp(tmp_path / "gentle") == _read(t)


def test_gentle_lookup_compaction_forces_a_level_0_pick_every_interval_empty_picks():
    from engine.compact.manager import _gentle_pick_due
    key = ("/nowhere/gentle-test", b"p", 0)
    assert [_gentle_pick_due(*key, 3) for _ in range(7)] == [False, False, True, False, False, True, False]
    assert [_gentle_pick_due(key[0], b"q", 0, 1) for _ in range(2)] == [True, True]  # per bucket


def test_gentle_lookup_compaction_forces_level_0_up_in_a_write_at_the_interval(tmp_path):
    # ForceUpLevel0Compaction counts the picks universal compaction leaves empty (a universal pick does not reset
    # the count): writes 1-4 leave level 0 alone (4 empty picks), write 5 meets the trigger (5 runs: a universal
    # full pick), write 6 leaves 2 runs, an empty pick, the 5th: its level-0 run is forced up (to level 4).
    t = _table(tmp_path, {"changelog-producer": "lookup", "lookup-compact": "gentle",
                          "lookup-compact.max-interval": "5"})
    levels = []
    for i in range(7):
        t.write(_rows([i], f"w{i}"))
        levels.append(sorted(f.level for f in _files(t)))
    assert levels == [[0], [0, 0], [0, 0, 0], [0, 0, 0, 0], [5], [4, 5], [0, 4, 5]]
    assert t.read_changes(0, t.latest_snapshot_id()).num_rows == 6  # changelog of the 6 rows compacted up
    assert _pp(tmp_path) == _read(t)
