"""Kernel cases: bucket hashing and point lookups, one thread each.

* hashing: 10M int64 keys and 10M 16-byte strings to 16 buckets. ``lakemerge`` is Paimon-exact
  (``kernels.hashing.bucket_ids``; checked against the BinaryRow reference on a sample); ``polars``
  (``Series.hash() % 16``) and ``duckdb`` (``hash(k) % 16``) compute *their own* hash, not Paimon's -- they show
  what a general-purpose engine spends on hashing, not an alternative way to get Paimon's buckets.
* lookups: 1M probe keys (90% hits) against a 10M-row sorted, unique-key table, in random order and as a
  sorted batch. ``lakemerge`` = ``kernels.keys.encode_keys`` of the probes + ``kernels.lookup.search_sorted``
  (the table's keys are encoded once, untimed: that is the index); ``numpy`` = ``np.searchsorted`` + hit check;
  ``python dict`` = ``dict.get`` per probe (dict built untimed); ``lakemerge Table.lookup`` and ``pypaimon``
  (``is_in`` filter on the key, its only way to find rows by key) look up in the same data written as a
  4-bucket Paimon table on local disk; pypaimon gets a sample of the probes (it is slow) and its rate is per probe.

Worker: ``python -m benchmarks.kernel_bench {hashing|lookups} CONTENDER [--repeat N] [--table-dir D] [--quick]``.
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np
import pyarrow as pa

from benchmarks.harness import Row, current_rss_mb, emit, peak_rss_mb, timed

HASH_CONTENDERS = ["lakemerge", "polars", "duckdb"]
LOOKUP_CONTENDERS = ["lakemerge", "numpy", "python dict", "lakemerge Table.lookup", "pypaimon"]
BUCKETS = 16
PYPAIMON_PROBES = 2_000
SLOW_FIRST_CALL_S = 20.0   # a lookup contender whose first call takes longer is timed once (that call)


def sizes(quick: bool) -> dict:
    """Full sizes, or a tenth for --quick (the pytest-benchmark cases use their own, smaller sizes)."""
    f = 10 if quick else 1
    return {"hash_rows": 10_000_000 // f, "table_rows": 10_000_000 // f, "probes": 1_000_000 // f}


# ---- hashing --------------------------------------------------------------------------------------------------

def lakemerge_buckets(col: pa.Array) -> np.ndarray:
    from kernels.hashing import bucket_ids

    return bucket_ids([col], BUCKETS)


def polars_buckets(col: pa.Array):
    import polars as pl

    return (pl.Series(values=col).hash() % BUCKETS).to_numpy()


def duckdb_buckets(col: pa.Array, con):
    tbl = pa.table({"k": col})   # noqa: F841 -- scanned by name (replacement scan)
    return con.sql("SELECT hash(k) % 16 AS b FROM tbl").fetchnumpy()["b"]


def check_paimon_exact(col: pa.Array, got: np.ndarray, sample: int = 2_000) -> None:
    """lakemerge's buckets equal the BinaryRow reference (kernels.reference) on evenly spaced rows."""
    from kernels.reference import bucket_ids_reference

    idx = np.linspace(0, len(col) - 1, num=min(sample, len(col)), dtype=np.int64)
    want = bucket_ids_reference([col.take(pa.array(idx))], BUCKETS)
    if not np.array_equal(got[idx], want):
        raise SystemExit("MISMATCH: kernels.hashing.bucket_ids differs from the BinaryRow reference")


def run_hashing(contender: str, repeat: int, quick: bool) -> list[Row]:
    from benchmarks.workloads import hash_workload

    n = sizes(quick)["hash_rows"]
    ints, strs = hash_workload(n)
    baseline = current_rss_mb()
    if contender == "lakemerge":
        from kernels.hashing import warm_up
        fn, note = lakemerge_buckets, "kernels.hashing.bucket_ids, Paimon-exact (checked on a sample)"
        warm_up()
    elif contender == "polars":
        import polars as pl
        fn, note = polars_buckets, f"Series.hash() % 16 (polars' own hash), threads={pl.thread_pool_size()}"
    else:
        import duckdb
        con = duckdb.connect()
        con.execute("SET threads=1").fetchall()
        fn, note = (lambda c: duckdb_buckets(c, con)), "SELECT hash(k) % 16 (duckdb's own hash)"
    rows = []
    for label, col in (("hash int64 -> 16 buckets", ints), ("hash string[16] -> 16 buckets", strs)):
        out = fn(col)   # warm-up
        if contender == "lakemerge":
            check_paimon_exact(col, out)
        times = [timed(fn, col)[0] for _ in range(repeat)]
        rows.append(Row(case=label, contender=contender, times=times, rows=n, peak_rss_mb=peak_rss_mb(),
                        baseline_rss_mb=baseline, threads="1", note=note, baseline=contender == "lakemerge"))
    return rows


# ---- lookups --------------------------------------------------------------------------------------------------

class KernelIndex:
    """The table's keys encoded once (the index); ``find`` encodes a probe batch and searches it."""

    def __init__(self, keys: np.ndarray):
        from kernels.keys import encode_keys

        self.index = encode_keys([pa.array(keys)])

    def find(self, probes: np.ndarray) -> np.ndarray:
        from kernels.keys import encode_keys
        from kernels.lookup import search_sorted

        return search_sorted(self.index, encode_keys([pa.array(probes)]))


def numpy_find(keys: np.ndarray, probes: np.ndarray) -> np.ndarray:
    pos = np.searchsorted(keys, probes)
    hit = pos < keys.shape[0]
    hit[hit] = keys[pos[hit]] == probes[hit]
    return np.where(hit, pos, -1)


def dict_find(index: dict, probes: np.ndarray) -> list:
    get = index.get
    return [get(k, -1) for k in probes.tolist()]


def write_lookup_table(w, warehouse: str):
    """The lookup data as a 4-bucket primary-key table (one commit), written by lakemerge; returns the Table."""
    from engine import Catalog

    cat = Catalog(warehouse)
    if os.path.exists(os.path.join(warehouse, "db.db", "t")):
        return cat.get_table("db.t")
    cat.create_database("db")
    t = cat.create_table("db.t", w.table().schema, primary_key=["key"], options={"bucket": "4"})
    t.write(w.table())
    return t


def pypaimon_lookup(warehouse: str, probes: np.ndarray) -> pa.Table:
    from pypaimon import CatalogFactory

    table = CatalogFactory.create({"warehouse": os.path.abspath(warehouse)}).get_table("db.t")
    rb = table.new_read_builder()
    rb = rb.with_filter(rb.new_predicate_builder().is_in("key", probes.tolist()))
    return rb.new_read().to_arrow(rb.new_scan().plan().splits())


def run_lookups(contender: str, repeat: int, quick: bool, table_dir: str | None) -> list[Row]:
    from benchmarks.workloads import lookup_workload

    s = sizes(quick)
    w = lookup_workload(s["table_rows"], s["probes"])
    baseline = current_rss_mb()
    random_p, sorted_p = w.probes, np.sort(w.probes)
    note_extra = ""
    if contender == "lakemerge":
        from kernels.lookup import warm_up
        warm_up()
        t_index, idx = timed(KernelIndex, w.keys)
        fn, note = idx.find, f"encode_keys(probes) + search_sorted; index built untimed in {t_index:.2f} s"
    elif contender == "numpy":
        fn, note = (lambda p: numpy_find(w.keys, p)), "np.searchsorted + equality check"
    elif contender == "python dict":
        t_index, d = timed(lambda: dict(zip(w.keys.tolist(), range(w.keys.shape[0]))))
        fn, note = (lambda p: dict_find(d, p)), f"dict.get per probe; dict built untimed in {t_index:.1f} s"
    else:
        if not table_dir:
            raise SystemExit("--table-dir is required for table contenders")
        t_write, table = timed(write_lookup_table, w, table_dir)
        if contender == "lakemerge Table.lookup":
            fn = lambda p: table.lookup(pa.table({"key": pa.array(p)}))
            note = f"Table.lookup on a 4-bucket table on local disk (written by lakemerge in {t_write:.1f} s)"
        else:
            sample = PYPAIMON_PROBES // (10 if quick else 1)
            random_p, sorted_p = random_p[:sample], np.sort(random_p[:sample])
            fn = lambda p: pypaimon_lookup(table_dir, p)
            note = (f"read with is_in(key, probes) filter, {sample:,} probes (rate per probe), same table "
                    f"(written by lakemerge)")
    rows = []
    for label, probes in (("lookup 1M random", random_p), ("lookup 1M sorted", sorted_p)):
        t_first, out = timed(fn, probes)
        hits = _count_hits(out)
        if isinstance(out, pa.Table):   # tables return each live key once
            expect_hits = int(np.unique(probes[np.isin(probes, w.keys)]).shape[0])
        else:
            expect_hits = int(np.isin(probes, w.keys).sum())
        if hits != expect_hits:
            raise SystemExit(f"MISMATCH: {contender} found {hits} of {len(probes)} probes, expected {expect_hits}")
        if t_first > SLOW_FIRST_CALL_S:   # a slow contender: its first call is its one timed run
            times = [t_first]
        else:
            times = [timed(fn, probes)[0] for _ in range(repeat)]
        rows.append(Row(case=label, contender=contender, times=times, rows=len(probes), peak_rss_mb=peak_rss_mb(),
                        baseline_rss_mb=baseline, threads="1" if contender != "lakemerge Table.lookup" else "default",
                        note=note + note_extra + f"; {hits:,} hits checked", baseline=contender == "lakemerge"))
    return rows


def _count_hits(out) -> int:
    if isinstance(out, pa.Table):
        return out.num_rows
    if isinstance(out, list):
        return sum(1 for x in out if x >= 0)
    return int((np.asarray(out) >= 0).sum())


def compile_time() -> float:
    import kernels.hashing
    import kernels.lookup

    t0 = time.perf_counter()
    kernels.hashing.warm_up()
    kernels.lookup.warm_up()
    return time.perf_counter() - t0


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("case", choices=["hashing", "lookups", "numba-compile"])
    ap.add_argument("contender", nargs="?", default="lakemerge")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--table-dir")
    args = ap.parse_args(argv)
    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    if args.case == "numba-compile":
        emit([], {"seconds": compile_time()})
    elif args.case == "hashing":
        emit(run_hashing(args.contender, args.repeat, args.quick))
    else:
        emit(run_lookups(args.contender, args.repeat, args.quick, args.table_dir))


if __name__ == "__main__":
    from benchmarks.harness import run_worker_main
    run_worker_main(main)
