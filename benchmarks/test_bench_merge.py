"""pytest-benchmark versions of ``python -m benchmarks merge``, at small sizes (8 runs x 20,000 rows).

Not collected by the default ``pytest`` run (testpaths = ["tests"]); run it by name::

    pytest benchmarks/test_bench_merge.py                      # timings + result checks
    pytest benchmarks/test_bench_merge.py --benchmark-disable  # checks only, each case run once

Everything runs in this one process (no per-contender subprocess as in ``python -m benchmarks``), so thread
settings are process-wide: POLARS_MAX_THREADS=1 is set here before polars is imported (it has no effect if
polars was already imported by an earlier test module), Arrow gets one CPU and one I/O thread, DuckDB
``threads=1``. Every contender's output is checked equal to lakemerge's.
"""
from __future__ import annotations

import os

os.environ.setdefault("POLARS_MAX_THREADS", "1")   # must precede any polars import

import pyarrow as pa
import pytest

from benchmarks import merge_bench, table_bench
from benchmarks.harness import assert_same_rows
from benchmarks.workloads import SCHEMA, merge_workload

RUNS, ROWS_PER_RUN = 8, 20_000

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::UserWarning")


@pytest.fixture(scope="module")
def runs():
    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    return merge_workload(runs=RUNS, rows_per_run=ROWS_PER_RUN).runs


@pytest.fixture(scope="module")
def expected(runs):
    from kernels.merge import warm_up

    warm_up()
    *_, out = merge_bench.lakemerge_phases(runs)
    merge_bench._check_lakemerge(runs, out)
    return out


def _duckdb(sql_name):
    duckdb = pytest.importorskip("duckdb")
    con = duckdb.connect()
    con.execute("SET threads=1").fetchall()
    sql = merge_bench._DUCKDB_SQL[sql_name]
    return lambda r: merge_bench.duckdb_merge(r, sql, con)


# ---- case (a): in-memory merge ----------------------------------------------------------------------------

def test_merge_lakemerge(benchmark, runs, expected):
    out = benchmark(lambda r: merge_bench.lakemerge_phases(r)[-1], runs)
    assert_same_rows(out, expected, SCHEMA, "lakemerge")


def test_merge_lakemerge_kernel_only(benchmark, runs, expected):
    import numpy as np

    from kernels.keys import encode_keys
    from kernels.merge import merge_dedup

    enc = [encode_keys([r.column("key")]) for r in runs]
    seq = [(r.column("seq").to_numpy().view(np.uint64) ^ np.uint64(1 << 63)).reshape(-1, 1) for r in runs]
    winners = benchmark(merge_dedup, enc, seq)
    assert len(winners) == expected.num_rows


@pytest.mark.parametrize("name", ["pyarrow", "polars", "duckdb", "duckdb-argmax", "pandas"])
def test_merge_peer(benchmark, runs, expected, name):
    if name == "pyarrow":
        fn = merge_bench.pyarrow_merge
    elif name == "polars":
        pytest.importorskip("polars")
        fn = merge_bench.polars_merge
    elif name.startswith("duckdb"):
        fn = _duckdb(name)
    else:
        pytest.importorskip("pandas")
        fn = merge_bench.pandas_merge
    out = benchmark(fn, runs)
    assert_same_rows(merge_bench._as_arrow(out), expected, SCHEMA, name)


# ---- case (b): table ingest + merged read ----------------------------------------------------------------

TABLE_CONTENDERS = ["lakemerge", "pypaimon", "pypaimon-native"]


def _skip_unavailable(contender):
    if contender.startswith("pypaimon"):
        pytest.importorskip("pypaimon")
    if contender == "pypaimon-native":
        pytest.importorskip("pypaimon_rust")


@pytest.mark.parametrize("contender", TABLE_CONTENDERS)
def test_table_ingest(benchmark, runs, tmp_path, contender):
    _skip_unavailable(contender)
    counter = iter(range(10**6))

    def setup():   # a new, empty table per round
        return (table_bench._open(contender, str(tmp_path / f"wh{next(counter)}")), runs), {}

    benchmark.pedantic(lambda t, r: t.ingest(r), setup=setup, rounds=3, iterations=1)


@pytest.mark.parametrize("contender", TABLE_CONTENDERS)
def test_table_read(benchmark, runs, expected, tmp_path, contender):
    _skip_unavailable(contender)
    t = table_bench._open(contender, str(tmp_path / "wh"))
    t.ingest(runs)
    out = benchmark(t.read)
    assert_same_rows(out, expected, SCHEMA, contender)
