"""Case (c): full compaction of the 8-run table, and merge-on-read before vs after it.

The 8 runs of the merge workload are committed one per commit into a ``bucket = 4`` table with ``write-only =
true`` (8 level-0 runs per bucket, nothing compacted). Then, each step in its own worker process:

* ``read-before``: lakemerge's merged read of the 8-run table;
* ``compact``: ``Table.compact(full=True)`` -- rows/s over the 10M input rows, peak RSS of the compacting process
  (the input is on disk, so the RSS is the compaction's own working set: one read batch per run plus one output
  file, see engine/compact/rewriter.py);
* ``read-after``: lakemerge's read of the compacted table (one top-level run per bucket: no merge across runs);
* ``pypaimon-read-after`` / ``pypaimon-native-read-after``: pypaimon 2.1.0 (pure / with pypaimon-rust) reading the
  compacted table, checked equal to lakemerge's result; ``pypaimon-read-before`` for reference.

Run: ``python -m benchmarks.compaction_bench run [--rows-per-run N] [--repeat R]`` (prints a table; writes
benchmarks/RESULTS-compaction.md with ``--write-results``).
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa

from benchmarks import report
from benchmarks.harness import (Row, assert_same_rows, current_rss_mb, emit, load_runs, load_table, peak_rss_mb,
                                run_worker, save_runs, save_table)
from benchmarks.workloads import FULL_ROWS_PER_RUN, FULL_RUNS, SCHEMA, SEED, merge_workload

NATIVE_OPTIONS = {"read.native.enabled": "true", "scan.native-plan.enabled": "true"}
RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "RESULTS-compaction.md")


def _expected(runs_path: str) -> tuple[np.ndarray, np.ndarray]:
    runs = load_runs(runs_path)
    key = np.concatenate([r.column("key").to_numpy() for r in runs])
    seq = np.concatenate([r.column("seq").to_numpy() for r in runs])
    order = np.lexsort((seq, key))
    k, s = key[order], seq[order]
    last = np.ones(k.shape[0], bool)
    last[:-1] = k[1:] != k[:-1]
    return k[last], s[last]


def _check(out: pa.Table, expected) -> None:
    got = out.sort_by("key")
    k, s = expected
    if not (np.array_equal(got.column("key").to_numpy(), k) and np.array_equal(got.column("seq").to_numpy(), s)):
        raise SystemExit("MISMATCH: read differs from the NumPy reference (keys / winning seq)")


# ---- worker steps ---------------------------------------------------------------------------------------------
def step_ingest(args) -> list[Row]:
    from engine import Catalog
    from kernels.merge import warm_up
    warm_up()
    runs = load_runs(args.data)
    cat = Catalog(args.warehouse)
    cat.create_database("db", ignore_if_exists=True)
    t = cat.create_table("db.t", SCHEMA, primary_key=["key"], options={"bucket": "4", "write-only": "true"})
    t0 = time.perf_counter()
    for run in runs:
        t.write(run)
    return [Row(case="ingest 8 commits (write-only)", contender="lakemerge", times=[time.perf_counter() - t0],
                rows=sum(r.num_rows for r in runs), peak_rss_mb=peak_rss_mb(), threads="default")]


def _lm_read(warehouse: str) -> pa.Table:
    from engine import Catalog
    return Catalog(warehouse).get_table("db.t").read()


def _pp_read(warehouse: str, native: bool) -> pa.Table:
    from pypaimon import CatalogFactory
    table = CatalogFactory.create({"warehouse": os.path.abspath(warehouse)}).get_table("db.t")
    if native:
        table = table.copy(NATIVE_OPTIONS)
    rb = table.new_read_builder()
    return rb.new_read().to_arrow(rb.new_scan().plan().splits())


def step_read(args, who: str, when: str) -> list[Row]:
    from kernels.merge import warm_up
    warm_up()
    baseline = current_rss_mb()
    times, out = [], None
    for _ in range(args.repeat):
        out = None
        t0 = time.perf_counter()
        out = _lm_read(args.warehouse) if who == "lakemerge" else _pp_read(args.warehouse, who.endswith("native"))
        times.append(time.perf_counter() - t0)
    if who == "lakemerge":
        _check(out, _expected(args.data))
        if args.ref:
            save_table(out, args.ref)
        note = f"{out.num_rows:,} rows, = NumPy reference"
    else:
        assert_same_rows(out, load_table(args.ref), SCHEMA, who)
        note = f"{out.num_rows:,} rows, = lakemerge"
    runs = load_runs(args.data)
    return [Row(case=f"merged read {when} compaction", contender=who, times=times,
                rows=sum(r.num_rows for r in runs), peak_rss_mb=peak_rss_mb(), baseline_rss_mb=baseline,
                threads="default", note=note, baseline=who == "lakemerge")]


def step_compact(args) -> list[Row]:
    from engine import Catalog
    from kernels.merge import warm_up
    warm_up()
    t = Catalog(args.warehouse).get_table("db.t")
    files_before = sum(len(sp.files) for sp in t.plan())
    rows = sum(sp.row_count for sp in t.plan())
    baseline = current_rss_mb()
    t0 = time.perf_counter()
    sid = t.compact(full=True)
    elapsed = time.perf_counter() - t0
    t = Catalog(args.warehouse).get_table("db.t")
    splits = t.plan()
    levels = sorted({f.level for sp in splits for f in sp.files})
    note = (f"snapshot {sid} COMPACT: {files_before} level-0 files -> {sum(len(sp.files) for sp in splits)} files "
            f"at level(s) {levels}, {sum(sp.row_count for sp in splits):,} rows kept")
    return [Row(case="full compaction (8 runs x 4 buckets)", contender="lakemerge", times=[elapsed], rows=rows,
                peak_rss_mb=peak_rss_mb(), baseline_rss_mb=baseline, threads="default (bucket thread pool, os.cpu_count())", note=note, baseline=True)]


def worker(argv) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("step", choices=["ingest", "read", "compact"])
    ap.add_argument("--who", default="lakemerge")
    ap.add_argument("--when", default="before")
    ap.add_argument("--data", required=True)
    ap.add_argument("--warehouse", required=True)
    ap.add_argument("--ref")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    if args.step == "ingest":
        emit(step_ingest(args))
    elif args.step == "compact":
        emit(step_compact(args))
    else:
        emit(step_read(args, args.who, args.when))


# ---- parent -----------------------------------------------------------------------------------------------------
def run(argv) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.compaction_bench run")
    ap.add_argument("--rows-per-run", type=int, default=FULL_ROWS_PER_RUN)
    ap.add_argument("--runs", type=int, default=FULL_RUNS)
    ap.add_argument("--repeat", type=int, default=3, help="timed repetitions of each read")
    ap.add_argument("--skip-pypaimon-pure", action="store_true", help="pure-Python pypaimon is slow at full size")
    ap.add_argument("--write-results", action="store_true")
    args = ap.parse_args(argv)
    workdir = tempfile.mkdtemp(prefix="lakemerge-compaction-bench-")
    try:
        workload = merge_workload(runs=args.runs, rows_per_run=args.rows_per_run)
        data = os.path.join(workdir, "runs.arrow")
        save_runs(workload.runs, data)
        header = [f"workload: {workload.describe()}; {workload.total_rows:,} input rows, seed {SEED}; "
                  f"table bucket=4, written write-only (8 level-0 runs per bucket)",
                  f"machine: {report.machine()}", f"versions: {report.versions()}"]
        del workload
        wh = os.path.join(workdir, "wh")
        env = {"NUMBA_CACHE_DIR": os.path.join(workdir, "numba-cache"),
               "PYTHONWARNINGS": "ignore::DeprecationWarning"}
        common = ["--data", data, "--warehouse", wh, "--repeat", str(args.repeat)]
        ref_before, ref_after = os.path.join(workdir, "before.arrow"), os.path.join(workdir, "after.arrow")
        plan = [(["ingest"], "ingest")]
        plan.append((["read", "--who", "lakemerge", "--when", "before", "--ref", ref_before], "lakemerge read before"))
        plan.append((["read", "--who", "pypaimon-native", "--when", "before", "--ref", ref_before],
                     "pypaimon-native read before"))
        plan.append((["compact"], "lakemerge full compaction"))
        plan.append((["read", "--who", "lakemerge", "--when", "after", "--ref", ref_after], "lakemerge read after"))
        plan.append((["read", "--who", "pypaimon-native", "--when", "after", "--ref", ref_after],
                     "pypaimon-native read after"))
        if not args.skip_pypaimon_pure:
            plan.append((["read", "--who", "pypaimon", "--when", "after", "--ref", ref_after],
                         "pypaimon read after"))
        rows: list[Row] = []
        failed = []
        for step, label in plan:
            got, _, err = run_worker("benchmarks.compaction_bench", ["worker", *step, *common], env, timeout=3600,
                                     label=label)
            if err:
                failed.append(f"{label}: {err}")
                rows.append(Row(case=label, contender=label.split()[0], error=err))
            rows += got
        print(report.render_text(rows))
        for line in header:
            print(line)
        if args.write_results:
            with open(RESULTS, "w") as f:
                f.write("# Compaction benchmark\n\n" + "\n".join(f"- {h}" for h in header) + "\n\n")
                f.write("Command: `python -m benchmarks.compaction_bench run " + " ".join(argv) + "`\n\n")
                f.write(report.render_markdown(rows) + "\n")
            print(f"wrote {RESULTS}")
        if failed:
            print("FAILED:\n  " + "\n  ".join(failed), file=sys.stderr)
            return 1
        return 0
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        worker(sys.argv[2:])
    elif len(sys.argv) > 1 and sys.argv[1] == "run":
        sys.exit(run(sys.argv[2:]))
    else:
        print(__doc__)
        sys.exit(2)
