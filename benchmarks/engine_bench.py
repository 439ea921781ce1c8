"""Merge-on-read under each merge engine: the standard 8-run workload as a table, read back merged.

``python -m benchmarks.engine_bench [--rows-per-run N] [--runs 8] [--repeat 3]``

The 8 runs of ``workloads.merge_workload`` are committed one per commit into a ``bucket = 4`` table (no
compaction), then ``Table.read()`` merges the 8 level-0 runs per bucket. Engines:

* ``deduplicate``: the baseline (winner filter per run);
* ``partial-update``: ``v``, ``f``, ``s`` are sparse -- each record carries each of them with probability 1/3
  (the others null), so every key's row is assembled from several records;
* ``aggregation``: ``v`` sum, ``f`` max, ``s`` last_non_null_value (``seq`` defaults to last_non_null_value);
  ``v`` is shifted right by 20 bits so that sums cannot overflow int64 (Paimon raises on overflow).

Timed: the read only (open the table through a new catalog, plan, read every row into one Arrow table), median of
``--repeat`` after one warm-up read (Numba compilation is excluded). Printed beside deduplicate's time as a ratio.

``--in-memory`` times ``engine.merge.merge_runs`` alone on the 8 runs held as normalized runs in memory (one
bucket, no Parquet), the engines interleaved repetition by repetition so that machine load hits them alike.
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute)

from benchmarks.workloads import SCHEMA, merge_workload

ENGINES = {
    "deduplicate": {},
    "partial-update": {"merge-engine": "partial-update"},
    "aggregation": {"merge-engine": "aggregation", "fields.v.aggregate-function": "sum",
                    "fields.f.aggregate-function": "max", "fields.s.aggregate-function": "last_non_null_value"},
}


def sparse(runs: list[pa.Table], seed: int = 7) -> list[pa.Table]:
    """Each value column kept with probability 1/3 per record (null otherwise)."""
    rng = np.random.default_rng(seed)
    out = []
    for r in runs:
        cols = [r.column("key"), r.column("seq")]
        for name in ("v", "f", "s"):
            null = rng.random(r.num_rows) >= 1 / 3
            col = r.column(name).combine_chunks()
            cols.append(pa.array(col.to_numpy(zero_copy_only=False), col.type, mask=null)
                        if name != "s" else pa.compute.if_else(pa.array(null), pa.nulls(r.num_rows, pa.string()),
                                                               col))
        out.append(pa.Table.from_arrays(cols, schema=SCHEMA))
    return out


def time_engine(engine: str, runs: list[pa.Table], workdir: str, repeat: int) -> tuple[float, int]:
    from engine import Catalog

    cat = Catalog(f"{workdir}/{engine}")
    cat.create_database("db")
    table = cat.create_table("db.t", SCHEMA, primary_key=["key"], options={"bucket": "4", **ENGINES[engine]})
    if engine == "partial-update":
        runs = sparse(runs)
    elif engine == "aggregation":
        runs = [r.set_column(2, "v", pa.compute.shift_right(r.column("v"), 20)) for r in runs]
    for run in runs:
        table.write(run)
    Catalog(f"{workdir}/{engine}").get_table("db.t").read()  # warm-up: compile kernels, fill the page cache
    times, rows = [], 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        rows = Catalog(f"{workdir}/{engine}").get_table("db.t").read().num_rows
        times.append(time.perf_counter() - t0)
    return statistics.median(times), rows


def normalized(runs: list[pa.Table]) -> list[pa.Table]:
    """The runs as ``SplitReader.read_file`` returns them (key copy, _SEQUENCE_NUMBER, _VALUE_KIND, columns)."""
    out, seq = [], 0
    for r in runs:
        n = r.num_rows
        cols = {"__key_key": r.column("key"), "_SEQUENCE_NUMBER": pa.array(np.arange(seq, seq + n), pa.int64()),
                "_VALUE_KIND": pa.array(np.zeros(n, np.int8))}
        seq += n
        t = pa.table(cols)
        for name in r.column_names:
            t = t.append_column(r.schema.field(name), r.column(name))
        out.append(t)
    return out


def time_in_memory(runs: list[pa.Table], repeat: int) -> dict[str, tuple[float, int]]:
    from engine.merge import merge_runs
    from engine.schema import TableSchema

    inputs = {"deduplicate": normalized(runs), "partial-update": normalized(sparse(runs)),
              "aggregation": normalized([r.set_column(2, "v", pa.compute.shift_right(r.column("v"), 20))
                                         for r in runs])}
    schemas = {e: TableSchema.create(SCHEMA, ["key"], options={"bucket": "1", **o}) for e, o in ENGINES.items()}
    times: dict[str, list[float]] = {e: [] for e in ENGINES}
    rows = {}
    for i in range(repeat + 1):  # the first round warms up
        for e in ENGINES:
            t0 = time.perf_counter()
            rows[e] = merge_runs(inputs[e], schemas[e]).num_rows
            if i:
                times[e].append(time.perf_counter() - t0)
    return {e: (statistics.median(times[e]), rows[e]) for e in ENGINES}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.engine_bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--rows-per-run", type=int, default=1_250_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--in-memory", action="store_true", help="time merge_runs on in-memory runs (no files)")
    args = ap.parse_args(argv)
    from kernels.aggregate import warm_up
    warm_up()
    runs = merge_workload(runs=args.runs, rows_per_run=args.rows_per_run).runs
    total = sum(r.num_rows for r in runs)
    if args.in_memory:
        results = time_in_memory(runs, args.repeat)
        what = "merge_runs in memory, one bucket"
    else:
        workdir = tempfile.mkdtemp(prefix="lakemerge-engine-bench-")
        try:
            results = {e: time_engine(e, runs, workdir, args.repeat) for e in ENGINES}
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        what = "merge-on-read, bucket=4"
    base = results["deduplicate"][0]
    print(f"{what}, {args.runs} runs x {args.rows_per_run:,} rows ({total:,} records), median of {args.repeat}")
    print(f"{'engine':<16}{'time s':>10}{'M records/s':>14}{'rows out':>12}{'x dedup':>10}")
    for engine, (secs, rows) in results.items():
        print(f"{engine:<16}{secs:>10.3f}{total / secs / 1e6:>14.2f}{rows:>12,}{secs / base:>10.2f}")


if __name__ == "__main__":
    main()
