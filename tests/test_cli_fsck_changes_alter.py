"""``lakemerge fsck|changes|stream|alter`` and ``compact`` of append tables through click's CliRunner: output,
exit codes (0 ok / 1 failure / 2 usage), --json."""
from __future__ import annotations

import json
import os

import pyarrow as pa
import pytest
from click.testing import CliRunner

from engine.catalog import Catalog
from engine.cli import cli


@pytest.fixture
def run(warehouse):
    runner = CliRunner()

    def invoke(*args):
        return runner.invoke(cli, list(args), env={"LAKEMERGE_WAREHOUSE": warehouse}, catch_exceptions=False)
    return invoke


def _json(result):
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return json.loads(result.stdout)


def _one_line_error(result, code: int, fragment: str) -> None:
    assert result.exit_code == code, (result.stdout, result.stderr)
    lines = [ln for ln in result.stderr.splitlines() if ln.startswith(("error:", "Error:"))]
    assert len(lines) == 1 and fragment in lines[0], result.stderr
    assert "Traceback" not in result.stderr


@pytest.fixture
def table(run, warehouse):
    """db.t (id BIGINT key, v STRING; 1 bucket) with 3 snapshots: id 1 inserted, id 2 inserted, id 1 updated."""
    r = run("create", "db.t", "--schema", "id BIGINT, v STRING", "-k", "id", "--bucket", "1")
    assert r.exit_code == 0, r.output
    t = Catalog(warehouse).get_table("db.t")
    t.write(pa.table({"id": pa.array([1], pa.int64()), "v": ["a"]}))
    t.write(pa.table({"id": pa.array([2], pa.int64()), "v": ["b"]}))
    t.write(pa.table({"id": pa.array([1], pa.int64()), "v": ["c"]}))
    return t


def _data_files(t) -> list[str]:
    return sorted(os.path.join(d, f) for d, _, fs in os.walk(t.root) for f in fs if f.startswith("data-"))


# --- fsck ----------------------------------------------------------------------------------------------------
def test_fsck_clean_table_exits_0(run, table):
    r = run("fsck", "db.t")
    assert r.exit_code == 0, r.stderr
    assert r.stdout.startswith("db.t: ok: 3 snapshot(s), 3 data file(s) checked, 0 problem(s)")
    doc = _json(run("fsck", "db.t", "--json"))
    assert doc["ok"] is True and doc["table"] == "db.t" and doc["snapshot_ids"] == [1, 2, 3]
    assert doc["problems"] == [] and doc["data_files_checked"] == 3


def test_fsck_truncated_data_file_exits_1_and_names_the_file(run, table):
    victim = _data_files(table)[0]
    with open(victim, "r+b") as f:
        f.truncate(os.path.getsize(victim) - 10)
    r = run("fsck", "db.t")
    assert r.exit_code == 1
    assert "PROBLEMS" in r.stdout and "data-file-size-mismatch" in r.stdout and victim in r.stdout
    _one_line_error(r, 1, "1 problem(s) found in db.t")
    doc = json.loads(run("fsck", "db.t", "--json").stdout)
    assert doc["ok"] is False and [p["kind"] for p in doc["problems"]] == ["data-file-size-mismatch"]
    assert doc["problems"][0]["path"] == victim


def test_fsck_no_data_skips_decoding(run, table):
    victim = _data_files(table)[-1]
    with open(victim, "r+b") as f:  # same size, damaged contents: only decoding finds it
        f.seek(os.path.getsize(victim) // 2)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0xFF]))
    assert run("fsck", "db.t", "--no-data").exit_code == 0
    r = run("fsck", "db.t", "--json")
    assert r.exit_code == 1
    assert {p["kind"] for p in json.loads(r.stdout)["problems"]} <= {"data-file-unreadable", "record-count-mismatch",
                                                                    "data-file-not-sorted",
                                                                    "sequence-range-mismatch"}


def test_fsck_reports_unreferenced_files_without_failing(run, table):
    stray = os.path.join(table.root, "bucket-0", "data-stray.parquet")
    with open(stray, "wb") as f:
        f.write(b"left by a failed commit")
    r = run("fsck", "db.t")
    assert r.exit_code == 0 and f"unreferenced {stray}" in r.stdout and "1 unreferenced file(s) (23 bytes)" in r.stdout
    assert _json(run("fsck", "db.t", "--json"))["orphan_files"] == [stray]
    assert _json(run("fsck", "db.t", "--json", "--no-orphans"))["orphan_files"] == []


def test_fsck_all_checks_every_table(run, table, warehouse):
    assert run("create", "db.u", "--schema", "k INT", "-k", "k").exit_code == 0
    assert run("create", "other.w", "--schema", "k INT", "-k", "k").exit_code == 0
    doc = _json(run("fsck", "--all", "--json"))
    assert doc["ok"] is True and [t["table"] for t in doc["tables"]] == ["db.t", "db.u", "other.w"]
    os.remove(os.path.join(Catalog(warehouse).get_table("db.t").paths.snapshot_dir, "snapshot-2"))
    r = run("fsck", "--all")
    assert r.exit_code == 1 and "db.t: PROBLEMS" in r.stdout and "db.u: ok" in r.stdout and "other.w: ok" in r.stdout
    assert "snapshot-gap" in r.stdout


def test_fsck_table_whose_schema_cannot_be_read(run, table, warehouse):
    assert run("create", "db.u", "--schema", "k INT", "-k", "k").exit_code == 0
    schema_file = os.path.join(table.root, "schema", "schema-0")
    with open(schema_file, "wb") as f:
        f.write(b"{ not json")
    r = run("fsck", "db.t", "--json")
    assert r.exit_code == 1
    assert [p["kind"] for p in json.loads(r.stdout)["problems"]] == ["table-unreadable"]
    os.remove(schema_file)
    r = run("fsck", "--all", "--json")  # a listed table without schema files is a finding, the others are checked
    doc = json.loads(r.stdout)
    assert r.exit_code == 1 and [(t["table"], t["ok"]) for t in doc["tables"]] == [("db.t", False), ("db.u", True)]
    assert doc["tables"][0]["problems"][0]["kind"] == "table-unreadable"


def test_fsck_usage_and_lookup_errors(run, table):
    assert run("fsck").exit_code == 2
    assert run("fsck", "db.t", "--all").exit_code == 2
    _one_line_error(run("fsck", "db.nope"), 1, "db.nope")
    _one_line_error(run("fsck", "db.t$snapshots"), 1, "not a system table")


# --- changes -------------------------------------------------------------------------------------------------
def _changes(run, *args):
    return [(r["_snapshot_id"], r["_row_kind"], r["id"], r["v"])
            for r in _json(run("changes", "db.t", "--json", "--limit", "0", *args))]


def test_changes_of_a_range_per_snapshot(run, table):
    assert _changes(run) == [(1, "+I", 1, "a"), (2, "+I", 2, "b"), (3, "+I", 1, "c")]
    assert _changes(run, "--from", "1", "--to", "2") == [(2, "+I", 2, "b")]
    assert _changes(run, "--from", "3") == []
    human = run("changes", "db.t", "--from", "1")
    assert human.exit_code == 0 and "_row_kind" in human.stdout and "2 rows" in human.stdout


def test_changes_normalize_builds_update_pairs(run, table):
    got = _changes(run, "--from", "2", "--normalize")
    assert got == [(3, "-U", 1, "a"), (3, "+U", 1, "c")]


def test_changes_with_input_changelog_and_deletes(run, warehouse):
    assert run("create", "db.c", "--schema", "id BIGINT, v STRING", "-k", "id", "--bucket", "1",
               "-o", "changelog-producer=input").exit_code == 0
    t = Catalog(warehouse).get_table("db.c")
    t.write(pa.table({"id": pa.array([1, 2], pa.int64()), "v": ["a", "b"]}))
    t.delete(pa.table({"id": pa.array([2], pa.int64())}))
    rows = _json(run("changes", "db.c", "--json", "--columns", "id"))
    assert [(r["_snapshot_id"], r["_row_kind"], r["id"]) for r in rows] == [(1, "+I", 1), (1, "+I", 2),
                                                                           (2, "-D", 2)]
    assert set(rows[0]) == {"_snapshot_id", "id", "_row_kind"}


def test_changes_limit_says_more_exist(run, table):
    rows = _json(run("changes", "db.t", "--json", "--limit", "2"))
    assert [r["_snapshot_id"] for r in rows] == [1, 2]
    human = run("changes", "db.t", "--limit", "2")
    assert "first 2 rows shown; there are more" in human.stdout


def test_changes_errors(run, table):
    _one_line_error(run("changes", "db.t", "--from", "3", "--to", "2"), 1, "--from 3 is after --to 2")
    _one_line_error(run("changes", "db.t", "--to", "9"), 1, "--to 9 is after the latest snapshot (3)")
    _one_line_error(run("changes", "db.t", "--columns", "nope"), 1, "nope")
    assert run("changes", "db.t", "--from", "-1").exit_code == 2


def test_changes_of_an_expired_snapshot_fail(run, table):
    assert run("expire", "db.t", "--retain-min", "1", "--retain-max", "1").exit_code == 0
    _one_line_error(run("changes", "db.t", "--from", "1"), 1, "snapshot 2")


# --- stream --------------------------------------------------------------------------------------------------
def _stream(run, *args):
    r = run("stream", "db.t", "--json", "--idle-timeout", "0", "--poll-interval", "0", *args)
    assert r.exit_code == 0, r.stderr
    return [json.loads(line) for line in r.stdout.splitlines()]


def test_stream_latest_full_then_catch_up(run, table):
    rows = _stream(run)
    assert sorted((r["_snapshot_id"], r["_row_kind"], r["id"], r["v"]) for r in rows) == [(3, "+I", 1, "c"),
                                                                                       (3, "+I", 2, "b")]
    assert _stream(run, "--mode", "latest") == []
    human = run("stream", "db.t", "--idle-timeout", "0", "--mode", "from-snapshot", "--snapshot", "2")
    assert human.exit_code == 0 and "snapshot 2: 1 change(s)" in human.stdout and "snapshot 3: 1 change(s)" in human.stdout
    assert "stream stopped after 2 batch(es), 2 change(s)" in human.stderr


def test_stream_modes(run, table):
    assert [(r["_snapshot_id"], r["id"]) for r in _stream(run, "--mode", "from-snapshot", "--snapshot", "2")] == \
        [(2, 2), (3, 1)]
    full = _stream(run, "--mode", "from-snapshot-full", "--snapshot", "2", "--columns", "id")
    assert sorted((r["_snapshot_id"], r["id"]) for r in full) == [(2, 1), (2, 2), (3, 1)]
    assert set(full[0]) == {"_snapshot_id", "id", "_row_kind"}
    inc = _stream(run, "--mode", "incremental", "--start", "1", "--end", "2")
    assert [(r["_snapshot_id"], r["id"]) for r in inc] == [(2, 2)]
    assert [r["_snapshot_id"] for r in _stream(run, "--mode", "from-timestamp", "--timestamp", "0")] == [1, 2, 3]


def test_stream_consumer_resumes_where_it_stopped(run, table, warehouse):
    assert [r["_snapshot_id"] for r in _stream(run, "--consumer-id", "job1", "--mode", "from-snapshot",
                                               "--snapshot", "1")] == [1, 2, 3]
    assert Catalog(warehouse).get_table("db.t").consumers() == {"job1": 4}
    table.write(pa.table({"id": pa.array([5], pa.int64()), "v": ["e"]}))
    again = _stream(run, "--consumer-id", "job1", "--mode", "from-snapshot", "--snapshot", "1")
    assert [(r["_snapshot_id"], r["id"]) for r in again] == [(4, 5)]


def test_stream_usage_errors(run, table):
    assert run("stream", "db.t", "--mode", "from-snapshot").exit_code == 2
    assert run("stream", "db.t", "--mode", "incremental", "--start", "1").exit_code == 2
    assert run("stream", "db.t", "--snapshot", "2").exit_code == 2  # latest-full takes no --snapshot
    assert run("stream", "db.t", "--mode", "from-timestamp", "--timestamp", "yesterday").exit_code == 2
    _one_line_error(run("stream", "db.t", "--consumer-id", "a/b", "--idle-timeout", "0"), 1, "consumer id")


def test_changes_and_stream_of_an_append_table(run, warehouse):
    cat = Catalog(warehouse)
    cat.create_database("db", ignore_if_exists=True)
    t = cat.create_table("db.log", pa.schema([("id", pa.int64()), ("v", pa.string())]), options={"bucket": "-1"})
    t.write(pa.table({"id": pa.array([1, 2], pa.int64()), "v": ["a", "b"]}))
    t.write(pa.table({"id": pa.array([1], pa.int64()), "v": ["c"]}))
    rows = _json(run("changes", "db.log", "--json"))
    assert [(r["_snapshot_id"], r["_row_kind"], r["id"], r["v"]) for r in rows] == \
        [(1, "+I", 1, "a"), (1, "+I", 2, "b"), (2, "+I", 1, "c")]
    r = run("stream", "db.log", "--json", "--idle-timeout", "0", "--mode", "from-snapshot", "--snapshot", "1")
    assert [json.loads(x)["v"] for x in r.stdout.splitlines()] == ["a", "b", "c"]


# --- alter ---------------------------------------------------------------------------------------------------
def test_alter_applies_all_changes_in_one_schema(run, table, warehouse):
    r = run("alter", "db.t", "--add-column", "amount DECIMAL(12, 2) AFTER id", "--rename-column", "v", "label",
            "--set-option", "snapshot.num-retained.min=3", "--comment", "orders")
    assert r.exit_code == 0, r.stderr
    assert "altered db.t: schema 0 -> 1" in r.stdout
    assert "added column amount DECIMAL(12, 2)" in r.stdout and "renamed column v -> label" in r.stdout
    assert "option snapshot.num-retained.min = 3" in r.stdout
    t = Catalog(warehouse).get_table("db.t")
    assert [f.name for f in t.schema.fields] == ["id", "amount", "label"] and t.schema.id == 1
    assert [f.id for f in t.schema.fields] == [0, 2, 1] and t.schema.comment == "orders"
    rows = _json(run("show", "db.t", "--json"))
    assert sorted((r["id"], r["amount"], r["label"]) for r in rows) == [(1, None, "c"), (2, None, "b")]
    assert _json(run("schema", "db.t", "--json"))["options"]["snapshot.num-retained.min"] == "3"


def test_alter_widen_drop_and_options(run, warehouse):
    assert run("create", "db.w", "--schema", "id INT NOT NULL, n INT, f FLOAT, s STRING", "-k", "id").exit_code == 0
    t = Catalog(warehouse).get_table("db.w")
    t.write(pa.table({"id": pa.array([1], pa.int32()), "n": pa.array([7], pa.int32()),
                      "f": pa.array([1.5], pa.float32()), "s": ["x"]}))
    doc = _json(run("alter", "db.w", "--set-type", "n", "BIGINT", "--set-type", "f", "DOUBLE", "--drop-column", "s",
                    "--json"))
    assert doc["previous_schema_id"] == 0 and doc["schema_id"] == 1 and doc["dry_run"] is False
    assert [(f["name"], f["type"]) for f in doc["fields"]] == [("id", "INT"), ("n", "BIGINT"), ("f", "DOUBLE")]
    assert _json(run("show", "db.w", "--json")) == [{"id": 1, "n": 7, "f": 1.5}]
    assert _json(run("alter", "db.w", "--set-option", "a.b=1", "--json"))["options"]["a.b"] == "1"
    assert "a.b" not in _json(run("alter", "db.w", "--remove-option", "a.b", "--json"))["options"]
    assert len(Catalog(warehouse).get_table("db.w").schemas()) == 4


def test_alter_dry_run_publishes_nothing(run, table, warehouse):
    r = run("alter", "db.t", "--add-column", "x BIGINT FIRST", "--dry-run")
    assert r.exit_code == 0 and "would change db.t: schema 0 -> 1" in r.stdout and "nothing published" in r.stdout
    t = Catalog(warehouse).get_table("db.t")
    assert t.schema.id == 0 and len(t.schemas()) == 1


def test_alter_nullability(run, warehouse):
    assert run("create", "db.e", "--schema", "id INT, n INT NOT NULL, m INT", "-k", "id").exit_code == 0
    doc = _json(run("alter", "db.e", "--nullable", "n", "--not-null", "m", "--json"))  # no data yet: both allowed
    assert {f["name"]: f["nullable"] for f in doc["fields"]} == {"id": False, "n": True, "m": False}
    Catalog(warehouse).get_table("db.e").write(pa.table({"id": pa.array([1], pa.int32()),
                                                         "n": pa.array([None], pa.int32()),
                                                         "m": pa.array([2], pa.int32())}))
    _one_line_error(run("alter", "db.e", "--not-null", "n"), 1, "cannot make column 'n' NOT NULL")


def test_alter_refusals_publish_nothing(run, table, warehouse):
    _one_line_error(run("alter", "db.t", "--set-type", "v", "INT"), 1, "column 'v' cannot change type")
    _one_line_error(run("alter", "db.t", "--remove-option", "bucket"), 1, "Cannot reset bucket")
    _one_line_error(run("alter", "db.t", "--drop-column", "id"), 1, "primary key column 'id'")
    _one_line_error(run("alter", "db.t", "--rename-column", "nope", "x"), 1, "column 'nope' does not exist")
    _one_line_error(run("alter", "db.t", "--add-column", "x WHATEVER"), 1, "WHATEVER")
    _one_line_error(run("alter", "db.t$schemas", "--drop-column", "v"), 1, "not a system table")
    assert len(Catalog(warehouse).get_table("db.t").schemas()) == 1


def test_alter_usage_errors(run, table):
    assert run("alter", "db.t").exit_code == 2
    assert run("alter", "db.t", "--add-column", "lonely").exit_code == 2
    assert run("alter", "db.t", "--set-option", "novalue").exit_code == 2
    assert run("alter", "db.t", "--rename-column", "v").exit_code == 2


def test_parse_add_column_positions():
    from engine.cli.alter import parse_add_column
    from engine.schema_change import Move

    c = parse_add_column("price DECIMAL(10, 2) NOT NULL")
    assert (c.name, c.data_type.sql(), c.data_type.nullable, c.move) == ("price", "DECIMAL(10, 2)", False, None)
    assert parse_add_column("x BIGINT first").move == Move.first("x")
    assert parse_add_column("`my col` STRING AFTER id").move == Move.after("my col", "id")
    assert parse_add_column("x BIGINT BEFORE `a b`").move == Move.before("x", "a b")


# --- compact of append tables --------------------------------------------------------------------------------
def test_compact_append_table_merges_small_files_in_order(run, warehouse):
    r = run("create", "db.log", "--schema", "dt STRING, id BIGINT", "-p", "dt", "--bucket", "-1")
    assert r.exit_code == 0 and "- (append table)" in r.stdout
    t = Catalog(warehouse).get_table("db.log")
    assert t.schema.is_append_only
    for i in range(6):
        t.write(pa.table({"dt": ["A", "B"], "id": pa.array([i, 10 + i], pa.int64())}))
    before = t.read()
    out = _json(run("compact", "db.log", "--partition", "dt=A", "--json"))
    assert (out["snapshot_id"], out["files_before"], out["files_after"], out["files_rewritten"]) == (7, 6, 1, 6)
    assert out["rows_read"] == out["rows_written"] == 6
    assert _json(run("snapshots", "db.log", "--json"))[-1]["commit_kind"] == "COMPACT"
    human = run("compact", "db.log", "--full")
    assert human.exit_code == 0 and "compacted db.log: snapshot 8" in human.stdout
    assert "nothing to compact" in run("compact", "db.log", "--full").stdout
    after = Catalog(warehouse).get_table("db.log").read()
    assert after.to_pylist() == before.to_pylist()  # same rows, same append order
    assert _json(run("fsck", "db.log", "--json"))["ok"] is True
    _one_line_error(run("compact", "db.log", "--partition", "x=1"), 1, "'x' is not a partition key")


def test_table_compact_on_append_table_reports_progress_per_bucket(catalog):
    catalog.create_database("db", ignore_if_exists=True)
    t = catalog.create_table("db.log", pa.schema([("dt", pa.string()), ("id", pa.int64())]), partition_keys=["dt"],
                             options={"bucket": "-1"})
    for i in range(3):
        t.write(pa.table({"dt": ["A", "B", "B"], "id": pa.array([i, i, 10 + i], pa.int64())}))
    calls = []
    sid = t.compact(full=True, partitions={"dt": "B"}, progress=lambda rows, bytes: calls.append((rows, bytes > 0)))
    assert sid == 4 and calls == [(6, True)]
    live = {(sp.partition_values, len(sp.files)) for sp in t.plan()}
    assert live == {(("A",), 3), (("B",), 1)}
    assert [r["id"] for r in t.read(filter=[("dt", "=", "B")]).to_pylist()] == [0, 10, 1, 11, 2, 12]


# --- branches --------------------------------------------------------------------------------------------------
def test_inspection_commands_take_a_branch_and_still_refuse_system_tables(run, table, warehouse):
    """README: TABLE may be a branch for every command. snapshots, files, options, changes, alter and fsck used to
    refuse ``db.t$branch_b`` calling it a system table; they now act on the branch (fsck checks the branch: its
    snapshots, not main's, and says that the unreferenced files are the whole table's)."""
    t = table
    t.create_tag("t2", 2)
    t.create_branch("b1", tag="t2")
    b = t.branch("b1")
    b.write(pa.table({"id": pa.array([9], pa.int64()), "v": ["z"]}))
    assert [row["snapshot_id"] for row in _json(run("snapshots", "db.t$branch_b1", "--json"))] == [2, 3]
    assert len(_json(run("files", "db.t$branch_b1", "--json"))) == 3
    assert run("options", "db.t$branch_b1").exit_code == 0
    changes = _json(run("changes", "db.t$branch_b1", "--from", "2", "--to", "3", "--json"))
    assert [(row["id"], row["v"]) for row in changes] == [(9, "z")]
    doc = _json(run("alter", "db.t$branch_b1", "--set-option", "snapshot.num-retained.min=3", "--json"))
    assert doc["table"] == "db.t$branch_b1"
    assert b.schema.options.get("snapshot.num-retained.min") is None  # the opened object keeps its schema
    assert t.branch("b1").schema.options["snapshot.num-retained.min"] == "3"
    assert "snapshot.num-retained.min" not in Catalog(warehouse).get_table("db.t").options
    r = run("fsck", "db.t$branch_b1")
    assert r.exit_code == 0 and r.stdout.startswith("db.t$branch_b1: ok: 2 snapshot(s)"), (r.stdout, r.stderr)
    assert "unreferenced file(s) (0 bytes) of table db.t (all branches)" in r.stdout.splitlines()[0]
    assert _json(run("fsck", "db.t$branch_b1", "--json"))["snapshot_ids"] == [2, 3]
    for command in (("snapshots",), ("files",), ("options",), ("fsck",), ("alter", "--comment", "x")):
        _one_line_error(run(command[0], "db.t$snapshots", *command[1:]), 1, "not a system table")
