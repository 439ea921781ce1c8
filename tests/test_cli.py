"""The ``lakemerge`` command line through click's CliRunner: output, exit codes (0/1/2), --json."""
from __future__ import annotations

import json
import os
import sys

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.cli import cli
from engine.cli.where import combine, parse_where
from engine.errors import InvalidInput
from tests.conftest import list_files

SCHEMA = "dt STRING, id BIGINT, name STRING, amount DECIMAL(10, 2)"


@pytest.fixture
def run(warehouse):
    runner = CliRunner()

    def invoke(*args, env_warehouse=True):
        env = {"LAKEMERGE_WAREHOUSE": warehouse} if env_warehouse else {"LAKEMERGE_WAREHOUSE": None}
        return runner.invoke(cli, list(args), env=env, catch_exceptions=False)
    return invoke


@pytest.fixture
def orders(run):
    r = run("create", "db.orders", "--schema", SCHEMA, "-k", "dt,id", "-p", "dt", "--bucket", "2")
    assert r.exit_code == 0, r.output
    return "db.orders"


def _json(result):
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return json.loads(result.stdout)


def _rows(run, table, *extra):
    rows = _json(run("show", table, "--json", "--limit", "0", *extra))
    return sorted((r["dt"], r["id"], r["name"], r["amount"]) for r in rows)


def test_create_prints_definition_and_schema_json(run, orders, warehouse):
    info = _json(run("schema", orders, "--json"))
    assert info["primary_keys"] == ["dt", "id"] and info["partition_keys"] == ["dt"]
    assert [(f["name"], f["type"], f["nullable"]) for f in info["fields"]] == [
        ("dt", "STRING", False), ("id", "BIGINT", False), ("name", "STRING", True),
        ("amount", "DECIMAL(10, 2)", True)]
    assert info["options"] == {"bucket": "2"}
    again = run("create", orders, "--schema", SCHEMA, "-k", "dt,id", "-p", "dt", "--bucket", "2")
    assert again.exit_code == 1 and "already exists" in again.stderr
    same = run("create", orders, "--schema", SCHEMA, "-k", "dt,id", "--bucket", "2", "--if-not-exists", "--json")
    assert _json(same)["created"] is False
    human = run("schema", orders)
    assert "DECIMAL(10, 2)" in human.stdout and "partition, primary key" in human.stdout


def test_create_like_file_and_options(run, tmp_path):
    path = str(tmp_path / "sample.parquet")
    pq.write_table(pa.table({"k": pa.array([1], pa.int32()), "v": ["x"]}), path)
    info = _json(run("create", "db.t2", "--like", path, "-k", "k", "-o", "bucket=3", "-o", "file.compression=zstd",
                     "--json"))
    assert info["columns"] == ["k INT", "v STRING"]
    assert _json(run("options", "db.t2", "--json")) == {"bucket": "3", "file.compression": "zstd"}


def test_create_usage_errors_exit_2(run):
    assert run("create", "db.x", "-k", "id").exit_code == 2  # neither --schema nor --like
    assert run("create", "db.x", "--schema", "id BIGINT", "-k", "id", "-o", "novalue").exit_code == 2
    bad_type = run("create", "db.x", "--schema", "id BIGNUM", "-k", "id", "--bucket", "1")
    assert bad_type.exit_code == 1 and "column 'id'" in bad_type.stderr


def test_ingest_parquet_csv_jsonl_in_one_commit(run, orders, tmp_path):
    pq.write_table(pa.table({"dt": ["2024-01-01", "2024-01-02", "2024-01-01"], "id": [1, 2, 3],
                             "name": ["a", "b", "c"], "amount": [1.5, 2.25, 3.0]}), tmp_path / "a.parquet")
    pacsv.write_csv(pa.table({"dt": ["2024-01-01"], "id": [1], "name": ["A"], "amount": ["9.99"]}),
                    tmp_path / "b.csv")
    (tmp_path / "c.jsonl").write_text('{"dt": "2024-01-02", "id": 4, "name": "d", "amount": 4}\n'
                                      '{"dt": "2024-01-02", "id": 5, "name": null, "amount": 0.5}\n')
    out = _json(run("ingest", orders, str(tmp_path / "a.parquet"), str(tmp_path / "b.csv"),
                    str(tmp_path / "c.jsonl"), "--json"))
    assert out["snapshot_id"] == 1 and out["rows"] == 6 and out["files"] == 3
    assert out["bytes"] == sum(os.path.getsize(tmp_path / n) for n in ("a.parquet", "b.csv", "c.jsonl"))
    assert _rows(run, orders) == [("2024-01-01", 1, "A", "9.99"), ("2024-01-01", 3, "c", "3.00"),
                                  ("2024-01-02", 2, "b", "2.25"), ("2024-01-02", 4, "d", "4.00"),
                                  ("2024-01-02", 5, None, "0.50")]
    human = run("ingest", orders, str(tmp_path / "b.csv"))
    assert human.exit_code == 0 and "ingested 1 rows from 1 file(s)" in human.stdout and "snapshot 2" in human.stdout


def test_ingest_row_kind_column_and_delete(run, orders, tmp_path):
    (tmp_path / "base.jsonl").write_text("".join(
        json.dumps({"dt": "2024-01-01", "id": i, "name": f"n{i}", "amount": i}) + "\n" for i in range(4)))
    assert run("ingest", orders, str(tmp_path / "base.jsonl")).exit_code == 0
    (tmp_path / "cdc.csv").write_text("op,dt,id,name,amount\n-D,2024-01-01,0,n0,0\n-U,2024-01-01,1,n1,1\n"
                                      "+U,2024-01-01,1,new,10.5\n+I,2024-01-01,9,n9,9\n")
    assert run("ingest", orders, str(tmp_path / "cdc.csv"), "--row-kind-column", "op").exit_code == 0
    assert _rows(run, orders) == [("2024-01-01", 1, "new", "10.50"), ("2024-01-01", 2, "n2", "2.00"),
                                  ("2024-01-01", 3, "n3", "3.00"), ("2024-01-01", 9, "n9", "9.00")]
    (tmp_path / "keys.csv").write_text("dt,id\n2024-01-01,2\n2024-01-01,3\n")
    assert run("ingest", orders, str(tmp_path / "keys.csv"), "--delete").exit_code == 0
    assert [r[1] for r in _rows(run, orders)] == [1, 9]


def test_ingest_bad_row_commits_nothing(run, orders, tmp_path, warehouse):
    (tmp_path / "good.csv").write_text("dt,id,name,amount\n2024-01-01,1,a,1\n")
    (tmp_path / "bad.csv").write_text("dt,id,name,amount\n2024-01-01,,b,2\n")  # null primary key
    before = list_files(warehouse)
    r = run("ingest", orders, str(tmp_path / "good.csv"), str(tmp_path / "bad.csv"))
    assert r.exit_code == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "bad.csv" in lines[0] and "'id'" in lines[0]
    assert "Traceback" not in r.stderr
    assert list_files(warehouse) == before  # no snapshot, no data file left behind
    unknown = run("ingest", orders, str(tmp_path / "good.csv"), "--row-kind-column", "op")
    assert unknown.exit_code == 1 and "row-kind column 'op'" in unknown.stderr
    (tmp_path / "data.xyz").write_text("x")
    assert "--format" in run("ingest", orders, str(tmp_path / "data.xyz")).stderr
    assert run("ingest", orders, str(tmp_path / "missing.csv")).exit_code == 2


def test_show_where_limit_snapshot_columns(run, orders, tmp_path):
    (tmp_path / "a.jsonl").write_text("".join(
        json.dumps({"dt": f"2024-01-0{1 + i % 2}", "id": i, "name": f"n{i}", "amount": i}) + "\n"
        for i in range(10)))
    run("ingest", orders, str(tmp_path / "a.jsonl"))
    (tmp_path / "b.jsonl").write_text(json.dumps({"dt": "2024-01-01", "id": 0, "name": "changed", "amount": 1}))
    run("ingest", orders, str(tmp_path / "b.jsonl"))
    assert [r[1] for r in _rows(run, orders, "--where", "dt = '2024-01-02' AND id >= 5")] == [5, 7, 9]
    assert sorted(r[1] for r in _rows(run, orders, "--where", "id IN (1, 2) OR name = 'changed'")) == [0, 1, 2]
    assert [r[1] for r in _rows(run, orders, "--where", "id < 4", "--where", "dt = 2024-01-01")] == [0, 2]
    assert [r for r in _rows(run, orders, "--snapshot", "1") if r[1] == 0][0][2] == "n0"
    assert [r for r in _rows(run, orders) if r[1] == 0][0][2] == "changed"
    limited = run("show", orders, "--limit", "3")
    assert limited.exit_code == 0 and "first 3 rows shown; there are more" in limited.stdout
    assert "10 rows" in run("show", orders, "--limit", "10").stdout
    assert "2 of 2 rows" not in run("show", f"{orders}$snapshots", "--limit", "1").stdout
    assert "1 of 2 rows shown" in run("show", f"{orders}$snapshots", "--limit", "1").stdout
    cols = _json(run("show", orders, "--columns", "id,name", "--limit", "2", "--json"))
    assert len(cols) == 2 and set(cols[0]) == {"id", "name"}
    bad = run("show", orders, "--where", "nope = 1")
    assert bad.exit_code == 1 and "'nope'" in bad.stderr
    assert run("show", orders, "--snapshot", "9").exit_code == 1
    (tmp_path / "c.jsonl").write_text(json.dumps({"dt": "2024-01-01", "id": 20, "name": None, "amount": 1}))
    run("ingest", orders, str(tmp_path / "c.jsonl"))
    assert [r[1] for r in _rows(run, orders, "--where", "name IS NULL")] == [20]
    assert len(_rows(run, orders, "--where", "name is not null and id < 100")) == 10
    # NULL literals mean what they mean in Paimon's In / NotIn, and '= NULL' is refused rather than read as text
    assert [r[1] for r in _rows(run, orders, "--where", "name IN ('n1', NULL)")] == [1]
    assert _rows(run, orders, "--where", "name NOT IN ('n1', NULL)") == []
    eq_null = run("show", orders, "--where", "name = NULL")
    assert eq_null.exit_code == 1 and "is null" in eq_null.stderr
    # a number with more decimals than the column is refused, not rounded by a float cast (1.005 became 1.00)
    assert sorted(r[1] for r in _rows(run, orders, "--where", "amount >= 8.5")) == [9]
    too_fine = run("show", orders, "--where", "amount >= 1.005")
    assert too_fine.exit_code == 1 and "'amount'" in too_fine.stderr


def test_metadata_commands(run, orders, tmp_path):
    (tmp_path / "a.csv").write_text("dt,id,name,amount\n2024-01-01,1,a,1\n2024-01-02,2,b,2\n")
    run("ingest", orders, str(tmp_path / "a.csv"))
    run("ingest", orders, str(tmp_path / "a.csv"))
    snaps = _json(run("snapshots", orders, "--json"))
    assert [s["snapshot_id"] for s in snaps] == [1, 2] and snaps[0]["commit_kind"] == "APPEND"
    assert snaps[1]["total_record_count"] == 4 and snaps[1]["delta_record_count"] == 2
    files = _json(run("files", orders, "--json"))
    assert len(files) == 4 and {f["partition"] for f in files} == {"{2024-01-01}", "{2024-01-02}"}
    assert all(os.path.isfile(f["file_path"]) for f in files)
    assert len(_json(run("files", orders, "--snapshot", "1", "--json"))) == 2
    human = run("snapshots", orders)
    assert human.exit_code == 0 and "APPEND" in human.stdout and "2 rows" in human.stdout
    sys_rows = _json(run("show", f"{orders}$snapshots", "--json"))
    assert [s["snapshot_id"] for s in sys_rows] == [1, 2]
    assert run("show", f"{orders}$nope").exit_code == 1
    assert run("files", f"{orders}$files").exit_code == 1


def test_errors_are_one_line_unless_debug(run, warehouse):
    r = run("show", "db.missing")
    assert r.exit_code == 1 and r.stderr.strip().splitlines() == [f"error: warehouse {warehouse!r} does not exist"]
    os.makedirs(warehouse)
    r = run("show", "db.missing")
    assert r.exit_code == 1 and r.stderr.strip().splitlines() == ["error: table 'db.missing' does not exist"]
    assert "Traceback" not in r.stderr
    r = run("show", "db.missing", "--debug")
    assert r.exit_code == 1 and "Traceback" in r.stderr and "TableNotFound" in r.stderr
    assert run("show", "not-a-name").exit_code == 1
    assert run("show").exit_code == 2
    assert run("no-such-command").exit_code == 2
    assert run("show", "db.t", env_warehouse=False).exit_code == 2  # --warehouse is required


def test_warehouse_option_overrides_environment(run, tmp_path):
    other = str(tmp_path / "other")
    r = run("create", "db.t", "--schema", "id BIGINT", "-k", "id", "--bucket", "1", "-w", other)
    assert r.exit_code == 0 and os.path.isdir(os.path.join(other, "db.db", "t"))
    assert run("schema", "db.t").exit_code == 1  # not in the environment's warehouse


def test_where_parser():
    assert parse_where("a = 1 AND b != 'x''y' OR c IN (1, 2.5, \"z\")") == [
        [("a", "=", 1), ("b", "!=", "x'y")], [("c", "in", (1, 2.5, "z"))]]
    assert parse_where("d not in (true) and e <> bare-word") == [[("d", "not in", (True,)), ("e", "!=", "bare-word")]]
    assert combine(["a = 1 OR b = 2", "c = 3"]) == [[("a", "=", 1), ("c", "=", 3)], [("b", "=", 2), ("c", "=", 3)]]
    assert parse_where("a IS NULL AND b is not null OR c iS nUlL") == [
        [("a", "is null", None), ("b", "is not null", None)], [("c", "is null", None)]]
    # an unquoted NULL is the null literal, never the text 'null' (SQL's and Paimon's meaning)
    assert parse_where("a IN (1, NULL) AND b NOT IN (null) OR c = 'null'") == [
        [("a", "in", (1, None)), ("b", "not in", (None,))], [("c", "=", "null")]]
    assert parse_where("a = NULL") == [[("a", "=", None)]]
    for bad in ("", "a", "a = ", "a IN 1", "a = 1 b = 2", "= 1", "a NOT = 1", "a IN (1", "a IS", "a IS NOT",
                "a IS 1", "a IS NOT 'x'"):
        with pytest.raises(InvalidInput):
            parse_where(bad)


def test_demo_engine_only_json(run, tmp_path):
    wh = str(tmp_path / "demo")
    r = run("demo", "--no-spark", "--rows", "400", "--commits", "2", "-w", wh, "--json")
    assert r.exit_code == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["mode"] == "engine" and out["commits"] == 2 and out["latest_snapshot_id"] == 2
    # commit 1: ids 0..99; commit 2: ids 100..199 new, 100 updates of old ids, 4 old ids deleted
    assert out["first_snapshot_rows"] == 100 and out["live_rows"] == 196 and out["change_rows"] == 304
    assert "commit 2: snapshot 2" in r.stderr


def test_demo_falls_back_when_spark_demo_cannot_be_imported(run, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "spark_glue.demo", None)  # import raises ImportError
    r = run("demo", "--rows", "100", "--commits", "1", "-w", str(tmp_path / "demo"))
    assert r.exit_code == 0, r.stderr
    assert "running the engine-only demo" in r.stdout and "merged read:" in r.stdout


def test_demo_calls_spark_run_demo_when_importable(run, tmp_path, monkeypatch):
    import types
    calls = []
    fake = types.ModuleType("spark_glue.demo")

    def run_demo(warehouse, rows, commits, echo=print):
        calls.append((warehouse, rows, commits))
        echo("spark job ran")
        return {"live_rows": 7}
    fake.run_demo = run_demo
    monkeypatch.setitem(sys.modules, "spark_glue.demo", fake)
    wh = str(tmp_path / "w")
    out = _json(run("demo", "--rows", "10", "--commits", "2", "-w", wh, "--json"))
    assert calls == [(wh, 10, 2)] and out == {"live_rows": 7, "mode": "spark", "warehouse": wh}


def test_bench_delegates_to_benchmarks_module(run):
    assert run("bench", "--help").exit_code == 0
    assert run("bench", "no-such-benchmark").exit_code == 2  # argparse usage error from python -m benchmarks


def test_main_returns_exit_codes(warehouse, capsys):
    from engine.cli import main

    assert main(["--help"]) == 0
    assert main(["show"]) == 2
    os.makedirs(warehouse)
    assert main(["show", "db.nope", "-w", warehouse]) == 1
    assert capsys.readouterr().err.strip().endswith("error: table 'db.nope' does not exist")


def test_progress_only_when_asked_off_a_terminal(run, orders, tmp_path):
    (tmp_path / "a.csv").write_text("dt,id,name,amount\n2024-01-01,1,a,1\n2024-01-01,2,b,2\n")
    quiet = run("ingest", orders, str(tmp_path / "a.csv"))
    assert quiet.exit_code == 0 and quiet.stderr == ""
    shown = run("ingest", orders, str(tmp_path / "a.csv"), "--progress")
    assert shown.exit_code == 0 and "2 rows" in shown.stderr and "bytes" in shown.stderr


def test_importing_the_cli_does_not_import_pyspark():
    import subprocess
    code = ("import sys, engine, engine.cli, engine.cli.demo, engine.system_tables, engine.read.stream; "
            "sys.exit(1 if 'pyspark' in sys.modules else 0)")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    assert subprocess.run([sys.executable, "-c", code], cwd=root).returncode == 0


def test_show_with_limit_stops_reading_early(run, orders, tmp_path, monkeypatch):
    from engine.read.split_read import SplitReader

    (tmp_path / "a.csv").write_text("dt,id,name,amount\n" + "".join(
        f"2024-01-0{1 + i % 2},{i},n{i},{i}\n" for i in range(40)))
    run("ingest", orders, str(tmp_path / "a.csv"))
    calls = []
    original = SplitReader.read
    monkeypatch.setattr(SplitReader, "read", lambda self, sp, cols: calls.append(sp) or original(self, sp, cols))
    assert "first 1 rows shown" in run("show", orders, "--limit", "1").stdout
    assert len(calls) == 1  # 4 splits (2 partitions x 2 buckets); the first one answers
    calls.clear()
    assert "40 rows" in run("show", orders, "--limit", "0").stdout and len(calls) == 4


_idents = st.from_regex(r"[a-z_][a-z0-9_]{0,6}", fullmatch=True).filter(
    lambda s: s.lower() not in ("and", "or", "not", "in", "true", "false"))
_literals = st.one_of(st.integers(-10**6, 10**6), st.booleans(), st.text(
    st.characters(blacklist_categories=("Cs", "Cc")), max_size=8))
_ops = st.sampled_from(["=", "!=", "<", "<=", ">", ">="])


def _lit_text(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    return "'" + v.replace("'", "''") + "'"


def test_where_numbers_are_exact_decimals():
    """A number with a point or exponent was parsed as a float, so 'd = 1.123456789012345678' on DECIMAL(38, 18)
    searched for 1.1234567890123457 and found nothing; it is the decimal as written, and a float column gets the
    nearest float (the sign of -0.0 kept: Java's Double.compare tells it from 0.0)."""
    from decimal import Decimal

    from engine.read import predicate as pred

    schema = pa.schema([("d", pa.decimal128(38, 18)), ("x", pa.float64()), ("g", pa.float32()), ("s", pa.string())])
    dnf = pred.normalize(parse_where("d = 1.123456789012345678 AND x IN (-0.0, 0.1, 1e-3) AND g = 0.1 "
                                     "AND s = 1.50"), schema, "t")
    (d, x, g, s), = dnf
    assert d[2] == Decimal("1.123456789012345678")
    assert [repr(v) for v in x[2]] == ["-0.0", "0.1", "0.001"]
    assert g[2] == pa.scalar(0.1, pa.float32()).as_py()
    assert s[2] == "1.50"


@given(st.lists(st.lists(st.one_of(
    st.tuples(_idents, _ops, _literals),
    st.tuples(_idents, st.sampled_from(["in", "not in"]), st.lists(_literals, min_size=1, max_size=3).map(tuple)),
    st.tuples(_idents, st.sampled_from(["is null", "is not null"]), st.none())),
    min_size=1, max_size=3), min_size=1, max_size=3))
@settings(max_examples=60, deadline=None)
def test_where_parser_round_trips(dnf):
    def term(t):
        col, op, v = t
        if op in ("in", "not in"):
            return f"{col} {op.upper()} ({', '.join(_lit_text(x) for x in v)})"
        if op in ("is null", "is not null"):
            return f"{col} {op.upper()}"
        return f"{col} {op} {_lit_text(v)}"
    text = " OR ".join(" AND ".join(term(t) for t in conj) for conj in dnf)
    assert parse_where(text) == [[tuple(t) for t in conj] for conj in dnf]


def test_ingest_a_directory_of_part_files(run, orders, tmp_path):
    out = tmp_path / "spark_out"
    out.mkdir()
    for i in range(3):
        pq.write_table(pa.table({"dt": ["2024-01-01"], "id": [i], "name": [f"p{i}"], "amount": [float(i)]}),
                       out / f"part-0000{i}.parquet")
    (out / "_SUCCESS").write_text("")
    (out / ".part-00000.parquet.crc").write_text("x")
    result = _json(run("ingest", orders, str(out), "--json"))
    assert result["files"] == 3 and result["rows"] == 3 and result["snapshot_id"] == 1
    empty = tmp_path / "empty"
    empty.mkdir()
    r = run("ingest", orders, str(empty))
    assert r.exit_code == 1 and "no data files" in r.stderr

