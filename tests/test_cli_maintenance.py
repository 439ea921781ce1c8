"""``lakemerge compact|expire|remove-orphans|tag|rollback``, ``show --tag`` and ``files --level`` through click's
CliRunner: output, exit codes (0 ok / 1 failure / 2 usage), --json."""
from __future__ import annotations

import datetime as dt
import io
import json
import os
import time

import pyarrow as pa
import pytest
from click.testing import CliRunner
from rich.console import Console

from engine.catalog import Catalog
from engine.cli import cli
from engine.cli.maintenance import parse_duration
from engine.cli.progress import bytes_progress, work_progress


@pytest.fixture
def run(warehouse):
    runner = CliRunner()

    def invoke(*args):
        return runner.invoke(cli, list(args), env={"LAKEMERGE_WAREHOUSE": warehouse}, catch_exceptions=False)
    return invoke


@pytest.fixture
def table(run, warehouse):
    """db.t (dt STRING partition, id BIGINT key, v STRING; 1 bucket) with 4 snapshots: ids 1..4 get v = 'sN'."""
    r = run("create", "db.t", "--schema", "dt STRING, id BIGINT, v STRING", "-k", "dt,id", "-p", "dt",
            "--bucket", "1")
    assert r.exit_code == 0, r.output
    t = Catalog(warehouse).get_table("db.t")
    for n in range(1, 5):
        t.write(pa.table({"dt": ["A", "B"], "id": pa.array([n, n], pa.int64()), "v": [f"s{n}", f"s{n}"]}))
    return t


def _json(result):
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return json.loads(result.stdout)


def _rows(run, *args):
    return sorted((r["dt"], r["id"], r["v"]) for r in _json(run("show", "db.t", "--json", "--limit", "0", *args)))


def _one_line_error(result, code: int, fragment: str) -> None:
    assert result.exit_code == code, (result.stdout, result.stderr)
    lines = [ln for ln in result.stderr.splitlines() if ln.startswith(("error:", "Error:"))]
    assert len(lines) == 1 and fragment in lines[0], result.stderr
    assert "Traceback" not in result.stderr


def test_compact_full_rewrites_each_bucket_into_one_top_level_file(run, table):
    before = _rows(run)
    nothing = _json(run("compact", "db.t", "--json"))  # 4 runs per bucket: below the compaction trigger (5)
    assert nothing["snapshot_id"] is None and nothing["files_before"] == 8 and nothing["files_after"] == 8
    assert "nothing to compact" in run("compact", "db.t").stdout
    out = _json(run("compact", "db.t", "--full", "--json"))
    assert out["snapshot_id"] == 5 and out["full"] is True
    assert (out["files_before"], out["files_after"], out["files_rewritten"], out["files_written"]) == (8, 2, 8, 2)
    assert out["rows_read"] == 8 and out["rows_written"] == 8 and out["bytes_written"] > 0
    assert _rows(run) == before
    snaps = _json(run("snapshots", "db.t", "--json"))
    assert snaps[-1]["commit_kind"] == "COMPACT"
    assert _json(run("files", "db.t", "--level", "0", "--json")) == []
    top = _json(run("files", "db.t", "--level", "5", "--json"))
    assert len(top) == 2 and {f["level"] for f in top} == {5}
    assert len(_json(run("files", "db.t", "--level", "0", "--snapshot", "4", "--json"))) == 8
    human = run("compact", "db.t", "--full")
    assert human.exit_code == 0 and "nothing to compact" in human.stdout


def test_compact_full_reports_files_moved_up_without_a_rewrite(run, warehouse):
    """A bucket whose only file is on level 0 is compacted by moving that file to the top level (Paimon's upgrade:
    MergeTreeCompactTask), not by rewriting it: the report counted neither and read '0 file(s) ... rewritten into
    0' for a committed COMPACT snapshot."""
    r = run("create", "db.u", "--schema", "dt STRING, id BIGINT", "-k", "dt,id", "-p", "dt", "--bucket", "1")
    assert r.exit_code == 0, r.output
    Catalog(warehouse).get_table("db.u").write(pa.table({"dt": ["A", "B"], "id": pa.array([1, 2], pa.int64())}))
    out = _json(run("compact", "db.u", "--full", "-p", "dt=A", "--json"))
    assert out["snapshot_id"] == 2
    assert (out["files_rewritten"], out["files_written"], out["files_upgraded"]) == (0, 0, 1)
    human = run("compact", "db.u", "--full", "-p", "dt=B")
    assert human.exit_code == 0 and "snapshot 3; 1 file(s) moved to level 5 without a rewrite;" in human.stdout


def test_compact_one_partition(run, table):
    out = _json(run("compact", "db.t", "--full", "--partition", "dt=A", "--json"))
    assert (out["files_before"], out["files_after"]) == (4, 1)
    files = _json(run("files", "db.t", "--json"))
    assert sorted((f["partition"], f["level"]) for f in files) == [("{A}", 5)] + [("{B}", 0)] * 4
    human = run("compact", "db.t", "--full", "-p", "dt=B")
    assert human.exit_code == 0 and "compacted db.t: snapshot 6; 4 file(s)" in human.stdout
    _one_line_error(run("compact", "db.t", "--partition", "dt"), 2, "COL=VALUE")
    _one_line_error(run("compact", "db.t", "--partition", "zz=1"), 1, "'zz' is not a partition key")
    _one_line_error(run("compact", "db.t$files"), 1, "not a system table")
    _one_line_error(run("compact", "db.nope"), 1, "'db.nope' does not exist")


def test_expire_keeps_retained_snapshots_and_reads(run, table):
    before = _rows(run)
    young = _json(run("expire", "db.t", "--retain-min", "1", "--older-than", "1h", "--json"))
    assert young["expired_snapshots"] == [] and young["earliest_snapshot"] == 1
    out = _json(run("expire", "db.t", "--retain-min", "1", "--retain-max", "2", "--json"))
    assert out["expired_snapshots"] == [1, 2] and (out["earliest_snapshot"], out["latest_snapshot"]) == (3, 4)
    assert out["deleted_metadata_files"] > 0
    assert _rows(run) == before
    human = run("expire", "db.t", "--retain-min", "1", "--older-than", "0s")
    assert human.exit_code == 0 and "expired 1 snapshot(s) of db.t (3)" in human.stdout
    assert [s["snapshot_id"] for s in _json(run("snapshots", "db.t", "--json"))] == [4]
    assert "no snapshot to expire" in run("expire", "db.t", "--retain-min", "1", "--older-than", "0s").stdout
    assert _rows(run) == before
    _one_line_error(run("expire", "db.t", "--retain-min", "3", "--retain-max", "2"), 2, "below --retain-min")
    _one_line_error(run("expire", "db.t", "--retain-min", "0"), 2, "--retain-min")
    _one_line_error(run("expire", "db.t", "--older-than", "5"), 2, "needs a unit")
    _one_line_error(run("expire", "db.t", "--older-than", "5 fortnights"), 2, "unknown unit")
    _one_line_error(run("expire", "db.t", "--older-than", "2999-01-01"), 2, "in the future")


def test_expire_older_than_a_date_time(run, table):
    past = (dt.datetime.now() - dt.timedelta(days=1)).strftime("%Y-%m-%d %H:%M:%S")
    out = _json(run("expire", "db.t", "--retain-min", "2", "--older-than", past, "--json"))
    assert out["expired_snapshots"] == []  # every snapshot is younger than a day
    time.sleep(0.01)
    now = dt.datetime.now().isoformat(sep=" ")  # after every commit
    out = _json(run("expire", "db.t", "--retain-min", "2", "--older-than", now, "--json"))
    assert out["expired_snapshots"] == [1, 2]


def test_tags_and_time_travel_by_tag(run, table):
    at1 = _rows(run, "--snapshot", "1")
    assert _json(run("tag", "create", "db.t", "first", "--snapshot", "1", "--json")) == {
        "table": "db.t", "tag": "first", "snapshot_id": 1}
    human = run("tag", "create", "db.t", "last")
    assert human.exit_code == 0 and "tagged snapshot 4 of db.t as 'last'" in human.stdout
    tags = _json(run("tag", "list", "db.t", "--json"))
    assert [(t["tag_name"], t["snapshot_id"]) for t in tags] == [("first", 1), ("last", 4)]
    assert "first" in run("tag", "list", "db.t").stdout
    assert _rows(run, "--tag", "first") == at1
    assert _json(run("show", "db.t", "--tag", "first", "--limit", "1", "--json")) != []
    assert len(_json(run("show", "db.t$files", "--tag", "first", "--json"))) == 2
    _one_line_error(run("tag", "create", "db.t", "first"), 1, "already exists")
    _one_line_error(run("tag", "create", "db.t", "42"), 1, "purely numeric")
    _one_line_error(run("tag", "create", "db.t", "x", "--snapshot", "9"), 1, "no snapshot 9")
    _one_line_error(run("show", "db.t", "--tag", "first", "--snapshot", "1"), 2, "at most one")
    _one_line_error(run("show", "db.t", "--tag", "nope"), 1, "has no tag 'nope'")
    _one_line_error(run("tag", "create", "db.t"), 2, "NAME")

    # the tag outlives its snapshot: time travel still works, from the data table (not from system tables)
    assert _json(run("expire", "db.t", "--retain-min", "1", "--older-than", "0s", "--json"))[
        "expired_snapshots"] == [1, 2, 3]
    assert _rows(run, "--tag", "first") == at1
    assert _json(run("show", "db.t", "--tag", "first", "--limit", "1", "--where", "dt = 'B'", "--json")) == [
        {"dt": "B", "id": 1, "v": "s1"}]
    _one_line_error(run("show", "db.t$files", "--tag", "first"), 1, "has expired")

    assert _json(run("tag", "delete", "db.t", "first", "--json"))["snapshot_id"] == 1
    assert "deleted tag 'last' (snapshot 4)" in run("tag", "delete", "db.t", "last").stdout
    assert _json(run("tag", "list", "db.t", "--json")) == []
    _one_line_error(run("tag", "delete", "db.t", "first"), 1, "has no tag 'first'")


def test_rollback_to_snapshot_and_tag(run, table):
    at2, at3 = _rows(run, "--snapshot", "2"), _rows(run, "--snapshot", "3")
    assert run("tag", "create", "db.t", "three", "--snapshot", "3").exit_code == 0
    assert run("tag", "create", "db.t", "four", "--snapshot", "4").exit_code == 0
    out = _json(run("rollback", "db.t", "--tag", "three", "--json"))
    assert out["latest_snapshot"] == 3 and out["removed_snapshots"] == [4] and out["deleted_data_files"] == 2
    assert _rows(run) == at3
    assert [t["tag_name"] for t in _json(run("tag", "list", "db.t", "--json"))] == ["three"]  # 'four' went too
    human = run("rollback", "db.t", "--snapshot", "2")
    assert human.exit_code == 0 and "rolled db.t back to snapshot 2: snapshot 2 is the latest" in human.stdout
    assert _rows(run) == at2
    assert [s["snapshot_id"] for s in _json(run("snapshots", "db.t", "--json"))] == [1, 2]
    _one_line_error(run("rollback", "db.t"), 2, "exactly one of --snapshot or --tag")
    _one_line_error(run("rollback", "db.t", "--snapshot", "1", "--tag", "three"), 2, "exactly one")
    _one_line_error(run("rollback", "db.t", "--snapshot", "9"), 1, "no snapshot 9")
    _one_line_error(run("rollback", "db.t", "--tag", "nope"), 1, "has no tag 'nope'")


def test_remove_orphans_dry_run_then_delete(run, table):
    before = _rows(run)
    bucket_dir = os.path.join(table.root, "dt=A", "bucket-0")
    old = os.path.join(bucket_dir, "data-stray-old.parquet")
    young = os.path.join(bucket_dir, "data-stray-young.parquet")
    for path in (old, young):
        with open(path, "wb") as f:
            f.write(b"not referenced")
    two_days_ago = time.time() - 2 * 86_400
    os.utime(old, (two_days_ago, two_days_ago))
    dry = _json(run("remove-orphans", "db.t", "--dry-run", "--json"))
    assert dry == {"table": "db.t", "dry_run": True, "files": [old]}
    assert os.path.exists(old)
    human = run("remove-orphans", "db.t")
    assert human.exit_code == 0 and "deleted 1 orphan file(s)" in human.stdout and old in human.stdout
    assert not os.path.exists(old) and os.path.exists(young)
    assert _json(run("remove-orphans", "db.t", "--older-than", "0s", "--json"))["files"] == [young]
    assert not os.path.exists(young)
    assert _rows(run) == before
    _one_line_error(run("remove-orphans", "db.t", "--older-than", "soon"), 2, "expected a duration")


@pytest.mark.parametrize("text, expected", [
    ("7d", dt.timedelta(days=7)), ("1 h", dt.timedelta(hours=1)), ("1d12h", dt.timedelta(days=1, hours=12)),
    ("90 min", dt.timedelta(minutes=90)), ("500ms", dt.timedelta(milliseconds=500)), ("2w", dt.timedelta(weeks=2)),
    ("0s", dt.timedelta(0)), ("3 Days", dt.timedelta(days=3)),
])
def test_parse_duration(text, expected):
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["", "5", "d", "7d junk", "1.5h", "-1d", "7 parsecs"])
def test_parse_duration_refuses(text):
    with pytest.raises(ValueError):
        parse_duration(text)


def test_work_progress_draws_only_when_enabled():
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=80)
    with work_progress(console, "compaction of db.t", enabled=True) as update:
        update("compaction of db.t: bucket 0")
    assert "compaction of db.t" in out.getvalue()
    quiet = io.StringIO()
    with work_progress(Console(file=quiet, force_terminal=True), "x", enabled=False) as update:
        update("y")
    assert quiet.getvalue() == ""


def test_compaction_reports_progress_per_bucket(table):
    seen = []
    sid = table.compact(full=True, progress=lambda rows, bytes: seen.append((rows, bytes)))
    assert sid == 5 and len(seen) == 2 and [rows for rows, _ in seen] == [4, 4] and all(b > 0 for _, b in seen)
    out = io.StringIO()
    with bytes_progress(Console(file=out, force_terminal=True, width=120), "compaction", 100, True) as report:
        report(rows=1234, bytes=100)
    assert "1,234 rows" in out.getvalue() and "compaction" in out.getvalue()


def test_progress_on_stderr_only_when_asked_off_a_terminal(run, table):
    quiet = run("compact", "db.t", "--full", "--json")
    assert quiet.exit_code == 0 and quiet.stderr == ""
    loud = run("compact", "db.t", "--full", "--progress", "--json")  # nothing left to compact: bar at 0 rows
    assert loud.exit_code == 0 and "compaction of db.t" in loud.stderr
    assert json.loads(loud.stdout)["snapshot_id"] is None  # stdout stays one JSON document
    spin = run("expire", "db.t", "--progress")
    assert spin.exit_code == 0 and "expiring snapshots of db.t" in spin.stderr
    assert run("remove-orphans", "db.t", "--no-progress").stderr == ""


def test_alter_bucket_then_rescale(run, table, warehouse):
    """``alter --set-option bucket=N`` points at ``rescale``; writes to old partitions fail until it ran."""
    from engine.errors import InvalidInput
    r = run("alter", "db.t", "--set-option", "bucket=3")
    assert r.exit_code == 0 and "lakemerge rescale db.t" in r.stdout
    rows = pa.table({"dt": ["A"], "id": pa.array([9], pa.int64()), "v": ["x"]})
    with pytest.raises(InvalidInput, match="new bucket num 3, but the previous bucket num is 1"):
        Catalog(warehouse).get_table("db.t").write(rows)
    r = run("rescale", "db.t", "-p", "dt=A")
    assert r.exit_code == 0 and "rescaled db.t to 3 bucket(s) in snapshot 5" in r.stdout
    assert json.loads(run("rescale", "db.t", "-p", "dt=Z", "--json").stdout)["snapshot"] is None
    t = Catalog(warehouse).get_table("db.t")
    t.write(rows)
    assert {e.total_buckets for e in t.manifests.live_entries(t.snapshot())} == {1, 3}
    assert run("rescale", "db.t", "--bucket-num", "0").exit_code == 2


def test_branches_create_rename_fast_forward_delete_and_maintenance_on_a_branch(run, table):
    assert _json(run("tag", "create", "db.t", "t2", "-s", "2", "--json"))["snapshot_id"] == 2
    assert _json(run("branch", "create", "db.t", "b1", "--tag", "t2", "--json")) == {
        "table": "db.t", "branch": "b1", "tag": "t2"}
    # a branch is a data table for the maintenance commands: tag it, then branch off its tag
    assert _json(run("tag", "create", "db.t$branch_b1", "bt", "--json"))["snapshot_id"] == 2
    r = run("branch", "create", "db.t$branch_b1", "c", "-t", "bt")
    assert r.exit_code == 0 and "created branch 'c' of db.t$branch_b1 from tag 'bt'" in r.stdout
    assert _json(run("branch", "list", "db.t", "--json"))["branches"] == ["b1", "c"]
    assert run("branch", "list", "db.t$branch_c").stdout.split() == ["b1", "c"]
    assert _json(run("branch", "rename", "db.t", "c", "c2", "--json"))["renamed_from"] == "c"
    assert table.branch("c2").read().num_rows == 4  # ids 1-2 in both partitions, as of snapshot 2
    table.branch("c2").write(pa.table({"dt": ["A"], "id": pa.array([9], pa.int64()), "v": ["c2"]}))
    assert _json(run("branch", "fast-forward", "db.t$branch_b1", "c2", "--json"))["latest_snapshot"] == 3
    assert sorted(table.branch("b1").read().column("id").to_pylist()) == [1, 1, 2, 2, 9]
    assert table.read().num_rows == 8  # main untouched
    _one_line_error(run("branch", "fast-forward", "db.t$branch_b1", "b1"), 1, "current branch 'b1'")
    _one_line_error(run("branch", "delete", "db.t", "nosuch"), 1, "'nosuch' does not exist")
    _one_line_error(run("branch", "create", "db.t$snapshots", "x"), 1, "not a system table")
    assert _json(run("branch", "delete", "db.t", "b1", "--json"))["deleted"] is True
    assert table.branches() == ["c2"]


def test_branch_merge_of_an_append_table(run, warehouse):
    assert run("create", "db.a", "--schema", "id BIGINT").exit_code == 0
    a = Catalog(warehouse).get_table("db.a")
    a.write(pa.table({"id": pa.array([1], pa.int64())}))
    a.create_tag("t1")
    a.create_branch("b", tag="t1")
    a.branch("b").write(pa.table({"id": pa.array([2], pa.int64())}))
    assert _json(run("branch", "merge", "db.a", "b", "--json")) == {
        "table": "db.a", "source": "b", "target": "main", "snapshot_id": 2}
    assert sorted(a.read().column("id").to_pylist()) == [1, 2]
    _one_line_error(run("branch", "merge", "db.a", "main", "--into", "main"), 1, "into itself")


def test_drop_partition_reports_what_was_dropped_and_which_specs_matched_nothing(run, table):
    """drop-partition used to report every spec given as dropped ("dropped 3 partition spec(s)"), also specs that
    matched no partition with data; now it names the partitions dropped and the specs that matched nothing."""
    r = run("drop-partition", "db.t", "-p", "dt=A", "-p", "dt=Z", "-p", "dt=Y")
    assert r.exit_code == 0, (r.stdout, r.stderr)
    assert r.stdout.splitlines() == ["dropped 1 partition(s) of db.t in snapshot 5: {dt=A}",
                                     "no partition with data matched: dt=Z, dt=Y"]
    assert {row[0] for row in _rows(run)} == {"B"}
    doc = _json(run("drop-partition", "db.t", "-p", "dt=A", "-p", "dt=B", "--json"))
    assert doc["snapshot"] == 6 and doc["dropped_partitions"] == [{"dt": "B"}]
    assert doc["unmatched_partitions"] == [{"dt": "A"}]  # already dropped: no live file left in it
    r = run("drop-partition", "db.t", "-p", "dt=A")
    assert r.exit_code == 0 and r.stdout.strip() == "db.t: no live file in the given partition(s) (dt=A); nothing " \
        "committed", r.stdout


def test_drop_partition_that_matches_nothing_while_another_writer_compacts_reports_nothing_dropped(
        run, table, warehouse, monkeypatch):
    """drop_partitions returns the latest snapshot id when nothing matched; a compaction committed by another writer
    meanwhile made that id differ from the one read before, and drop-partition reported the partitions that
    compaction rewrote as dropped, in the compaction's snapshot."""
    from engine.maintenance import partitions as partitions_module

    real = partitions_module.drop_partitions

    def compact_first(t, specs, **kwargs):
        Catalog(warehouse).get_table("db.t").compact(full=True)  # another writer: DELETEs files of A and B
        return real(t, specs, **kwargs)

    monkeypatch.setattr(partitions_module, "drop_partitions", compact_first)
    doc = _json(run("drop-partition", "db.t", "-p", "dt=Z", "--json"))
    assert doc["snapshot"] is None and doc["dropped_partitions"] == []
    assert doc["unmatched_partitions"] == [{"dt": "Z"}]
    r = run("drop-partition", "db.t", "-p", "dt=Y")
    assert r.stdout.strip() == "db.t: no live file in the given partition(s) (dt=Y); nothing committed", r.stdout
    assert {row[0] for row in _rows(run)} == {"A", "B"}
