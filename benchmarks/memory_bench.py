"""``python -m benchmarks memory [--quick]``: peak memory of a merged read, measured in isolation (issue 9).

Target: merge-on-read peak RSS <= 2x the merged output + one file's decoded batch per sorted run (for every bucket
read at the same time). The merge workload (8 commits into a 4-bucket table) is written by one process; each
measurement then runs in a fresh process that never held the input: it imports lakemerge and warms its kernels up
on a tiny table, records its RSS (the baseline), and samples its RSS every 2 ms while it reads:

* ``read``: ``Table.read()`` -- the whole merged table materialized as one Arrow table (the output counts fully);
* ``stream``: ``Table.to_reader()`` consumed batch by batch and dropped -- the output held at once is one bucket's.

Bound (the issue's) = 2 x the merged output + concurrency x the largest bucket's sum, over its sorted runs, of its
largest file decoded (files are decoded whole, so a file is the "batch"); concurrency = the bucket thread pool size
for ``read``, 1 for ``stream``. For ``stream`` a stricter bound is reported too, with only the output held at once
(the largest bucket's share) in place of the whole output. Decoded sizes are measured by decoding the files with
pyarrow. Exit code 1 if the issue's bound is exceeded. Workers: ``python -m benchmarks.memory_bench prepare|measure``.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time

from benchmarks.harness import current_rss_mb, emit, peak_rss_mb, run_worker

FULL_ROWS_PER_RUN, QUICK_ROWS_PER_RUN = 1_250_000, 200_000


class RssSampler:
    """Largest RSS seen by a background thread sampling /proc/self/statm every ``interval`` seconds."""

    def __init__(self, interval: float = 0.002):
        self.interval, self.peak, self._stop = interval, current_rss_mb(), threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, current_rss_mb())
            time.sleep(self.interval)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, current_rss_mb())


def prepare(warehouse: str, rows_per_run: int) -> None:
    from benchmarks.scaling_bench import open_table
    from benchmarks.workloads import merge_workload

    open_table(merge_workload(rows_per_run=rows_per_run).runs, warehouse)
    emit([])


def _decoded_mb_per_bucket(table) -> list[float]:
    """Per bucket: the sum over its sorted runs of the run's largest file, decoded (MB)."""
    import pyarrow.parquet as pq
    from engine.read.split_read import SplitReader

    reader = SplitReader(table.file_io, table.schema)
    out = []
    for split in table.plan():
        total = 0.0
        for files in reader.runs(split):
            largest = max(files, key=lambda f: f.row_count)
            total += pq.read_table(os.path.join(split.bucket_dir, largest.file_name)).nbytes / 2**20
        out.append(total)
    return out


def measure(warehouse: str, mode: str) -> None:
    import gc

    from engine import Catalog

    scratch = tempfile.mkdtemp(prefix="lakemerge-mem-warmup-")
    try:  # imports, Numba kernels and first-call set-up, on a tiny table
        from benchmarks.scaling_bench import open_table
        from benchmarks.workloads import merge_workload
        small = open_table(merge_workload(runs=2, rows_per_run=2000).runs, scratch)
        small.read()
        for _ in small.to_reader():
            pass
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    table = Catalog(warehouse).get_table("db.t")
    splits = table.plan()
    gc.collect()
    baseline = current_rss_mb()
    t0 = time.perf_counter()
    if mode == "read":
        with RssSampler() as sampler:
            out = table.read()
        rows, output_mb, held_mb = out.num_rows, out.nbytes / 2**20, out.nbytes / 2**20
        concurrency = min(len(splits), os.cpu_count() or 2)
    else:
        rows = nbytes = 0
        with RssSampler() as sampler:
            for batch in table.to_reader():
                rows += batch.num_rows
                nbytes += batch.nbytes
                del batch
        output_mb = nbytes / 2**20
        per_split = [s.row_count for s in splits]  # the biggest bucket's share of the output
        held_mb = output_mb * max(per_split) / sum(per_split)
        concurrency = 1
    seconds = time.perf_counter() - t0
    decoded = _decoded_mb_per_bucket(table)
    emit([], {"mode": mode, "rows": rows, "seconds": seconds, "baseline_mb": baseline,
              "peak_mb": sampler.peak, "ru_maxrss_mb": peak_rss_mb(), "output_mb": output_mb, "held_mb": held_mb,
              "decoded_run_files_mb": max(decoded), "concurrency": concurrency,
              "bound_mb": 2 * output_mb + concurrency * max(decoded),
              "strict_bound_mb": 2 * held_mb + concurrency * max(decoded)})


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks memory", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help=f"{QUICK_ROWS_PER_RUN:,} rows per commit instead of "
                                                         f"{FULL_ROWS_PER_RUN:,}")
    args = ap.parse_args(argv)
    rows_per_run = QUICK_ROWS_PER_RUN if args.quick else FULL_ROWS_PER_RUN
    workdir = tempfile.mkdtemp(prefix="lakemerge-mem-")
    env = {"NUMBA_CACHE_DIR": os.path.join(workdir, "numba-cache")}
    try:
        warehouse = os.path.join(workdir, "wh")
        _, _, err = run_worker("benchmarks.memory_bench", ["prepare", "--warehouse", warehouse,
                                                           "--rows-per-run", str(rows_per_run)], env,
                               label="write the table", timeout=1800)
        if err:
            print(f"error: {err}", file=sys.stderr)
            return 1
        failed = False
        print(f"merged-read memory: 8 commits x {rows_per_run:,} rows into 4 buckets "
              "(peak and baseline RSS of a fresh process; bound = 2 x output + concurrency x decoded run files)")
        for mode in ("read", "stream"):
            _, m, err = run_worker("benchmarks.memory_bench", ["measure", "--warehouse", warehouse, "--mode", mode],
                                   env, label=f"measure {mode}", timeout=1800)
            if err:
                print(f"  {mode}: error: {err}")
                failed = True
                continue
            used = m["peak_mb"] - m["baseline_mb"]
            ok = used <= m["bound_mb"]
            failed |= not ok
            strict = "" if mode == "read" else (
                f"; with only the output held at once: bound {m['strict_bound_mb']:.0f} MB -> "
                f"{used / m['strict_bound_mb']:.2f} ({'met' if used <= m['strict_bound_mb'] else 'not met'})")
            print(f"  {mode:<6} {m['rows']:,} rows in {m['seconds']:.2f} s: peak {m['peak_mb']:.0f} MB - baseline "
                  f"{m['baseline_mb']:.0f} MB = {used:.0f} MB used; output {m['output_mb']:.0f} MB ({m['held_mb']:.0f} "
                  f"held at once), decoded run files {m['decoded_run_files_mb']:.0f} MB per bucket x "
                  f"{m['concurrency']}; bound {m['bound_mb']:.0f} MB -> {used / m['bound_mb']:.2f} of the bound "
                  f"({'met' if ok else 'NOT met'}){strict}")
        return 1 if failed else 0
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _worker(argv=None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("step", choices=["prepare", "measure"])
    ap.add_argument("--warehouse", required=True)
    ap.add_argument("--rows-per-run", type=int, default=FULL_ROWS_PER_RUN)
    ap.add_argument("--mode", choices=["read", "stream"], default="read")
    args = ap.parse_args(argv)
    if args.step == "prepare":
        prepare(args.warehouse, args.rows_per_run)
    else:
        measure(args.warehouse, args.mode)


if __name__ == "__main__":
    from benchmarks.harness import run_worker_main
    run_worker_main(_worker)
