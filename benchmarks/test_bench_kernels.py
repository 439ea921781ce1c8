"""pytest-benchmark versions of ``python -m benchmarks hashing lookups upsert scaling``, at small sizes.

Not collected by the default ``pytest`` run (testpaths = ["tests"]); run it by name::

    pytest benchmarks/test_bench_kernels.py                      # timings + result checks
    pytest benchmarks/test_bench_kernels.py --benchmark-disable  # checks only, each case run once

Everything runs in this one process (see test_bench_merge.py for the thread settings). Results are checked:
lakemerge's buckets against the BinaryRow reference, lookups against NumPy, upserts against a NumPy reference.
"""
from __future__ import annotations

import os

os.environ.setdefault("POLARS_MAX_THREADS", "1")   # must precede any polars import

import numpy as np
import pyarrow as pa
import pytest

from benchmarks import kernel_bench, scaling_bench, upsert_bench
from benchmarks.workloads import hash_workload, lookup_workload, merge_workload, upsert_workload

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::UserWarning")


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)


# ---- hashing ----------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def hash_data():
    from kernels.hashing import warm_up

    warm_up()
    return hash_workload(50_000)


@pytest.mark.parametrize("column", ["int64", "string16"])
def test_hash_lakemerge(benchmark, hash_data, column):
    col = hash_data[0 if column == "int64" else 1]
    out = benchmark(kernel_bench.lakemerge_buckets, col)
    kernel_bench.check_paimon_exact(col, out, sample=300)


@pytest.mark.parametrize("column", ["int64", "string16"])
@pytest.mark.parametrize("peer", ["polars", "duckdb"])
def test_hash_peer(benchmark, hash_data, column, peer):
    col = hash_data[0 if column == "int64" else 1]
    if peer == "polars":
        pytest.importorskip("polars")
        fn = kernel_bench.polars_buckets
    else:
        duckdb = pytest.importorskip("duckdb")
        con = duckdb.connect()
        con.execute("SET threads=1").fetchall()
        fn = lambda c: kernel_bench.duckdb_buckets(c, con)
    out = np.asarray(benchmark(fn, col))
    assert out.shape[0] == len(col) and ((out >= 0) & (out < 16)).all()


# ---- lookups -----------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def lookup_data():
    from kernels.lookup import warm_up

    warm_up()
    w = lookup_workload(200_000, 20_000)
    return w, kernel_bench.numpy_find(w.keys, w.probes)


@pytest.mark.parametrize("order", ["random", "sorted"])
@pytest.mark.parametrize("contender", ["lakemerge", "numpy", "python dict"])
def test_lookup(benchmark, lookup_data, order, contender):
    w, want = lookup_data
    probes = w.probes if order == "random" else np.sort(w.probes)
    want = want if order == "random" else kernel_bench.numpy_find(w.keys, probes)
    if contender == "lakemerge":
        fn = kernel_bench.KernelIndex(w.keys).find
    elif contender == "numpy":
        fn = lambda p: kernel_bench.numpy_find(w.keys, p)
    else:
        d = dict(zip(w.keys.tolist(), range(w.keys.shape[0])))
        fn = lambda p: kernel_bench.dict_find(d, p)
    got = np.asarray(benchmark(fn, probes))
    assert np.array_equal(got, want)


@pytest.mark.parametrize("contender", ["lakemerge Table.lookup", "pypaimon"])
def test_lookup_table(benchmark, lookup_data, tmp_path_factory, contender):
    if contender == "pypaimon":
        pytest.importorskip("pypaimon")
    w, _ = lookup_data
    wh = str(tmp_path_factory.mktemp("lookup"))
    table = kernel_bench.write_lookup_table(w, wh)
    probes = w.probes[:500]
    if contender == "pypaimon":
        out = benchmark(kernel_bench.pypaimon_lookup, wh, probes)
    else:
        out = benchmark(lambda p: table.lookup(pa.table({"key": pa.array(p)})), probes)
    assert out.num_rows == np.unique(probes[np.isin(probes, w.keys)]).shape[0]


# ---- upsert -------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("contender", upsert_bench.CONTENDERS)
def test_upsert(benchmark, tmp_path, contender):
    if contender != "lakemerge":
        pytest.importorskip(contender)
    w = upsert_workload(initial_rows=20_000, batches=2, batch_rows=4_000)
    counter = iter(range(10**6))

    def setup():
        return (contender, str(tmp_path / f"rep{next(counter)}"), w), {}

    result = benchmark.pedantic(upsert_bench.run_once, setup=setup, rounds=2, iterations=1)
    upsert_bench.check_reference(w, result[-1], contender)


# ---- scaling: kernel-path read with a bucket thread pool ---------------------------------------------------------

@pytest.fixture(scope="module")
def scaling_table(tmp_path_factory):
    from kernels.gather import warm_up as gather_warm_up
    from kernels.merge import warm_up

    warm_up()
    gather_warm_up()
    runs = merge_workload(runs=4, rows_per_run=20_000).runs
    table = scaling_bench.open_table(runs, str(tmp_path_factory.mktemp("scaling")))
    from benchmarks.workloads import MergeWorkload, expected_winners
    return table, expected_winners(MergeWorkload(runs))


@pytest.mark.parametrize("threads", [1, 2])
def test_scaling_read(benchmark, scaling_table, threads):
    table, (keys, seq) = scaling_table
    out, _ = benchmark(scaling_bench.read_table, table, threads)
    scaling_bench.check(out, keys, seq)
