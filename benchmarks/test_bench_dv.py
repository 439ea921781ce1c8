"""pytest-benchmark versions of ``python -m benchmarks dv``, at small sizes (8 runs x 5,000 rows), in this process.

Not collected by the default ``pytest`` run (testpaths = ["tests"]); run it by name::

    pytest benchmarks/test_bench_dv.py --benchmark-disable  # checks only, each case run once

Every reader reads the snapshot of the commit before last, which (at this size) has deletion vectors to apply, and
its result is checked against the NumPy reference.
"""
from __future__ import annotations

import pytest

from benchmarks import dv_bench
from benchmarks.workloads import MergeWorkload, expected_winners, merge_workload

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::UserWarning")


@pytest.fixture(scope="module")
def runs():
    return merge_workload(rows_per_run=5_000).runs


@pytest.mark.parametrize("table", list(dv_bench.TABLES))
def test_dv_ingest(benchmark, runs, tmp_path, table):
    counter = iter(range(10**6))

    def setup():  # a new warehouse per round
        return (runs, str(tmp_path / f"wh{next(counter)}"), dv_bench.TABLES[table][1]), {}

    snapshots = benchmark.pedantic(dv_bench.ingest, setup=setup, rounds=2, iterations=1)
    assert len(snapshots) == len(runs)


@pytest.mark.parametrize("reader", list(dv_bench.READERS))
def test_dv_read(benchmark, runs, tmp_path, reader):
    if reader.startswith("pypaimon"):
        pytest.importorskip("pypaimon")
    if reader == "pypaimon-native":
        pytest.importorskip("pypaimon_rust")
    table = dv_bench.READERS[reader][1]
    wh = str(tmp_path / "wh")
    snapshot = dv_bench.ingest(runs, wh, dv_bench.TABLES[table][1])[-2]
    if table == "dv":
        assert " 0 deletion vectors" not in dv_bench.shape(wh, snapshot)
    out = benchmark(dv_bench.read, reader, wh, snapshot)
    dv_bench.check(out, *expected_winners(MergeWorkload(runs[:-1])), None, reader)
