"""``python -m benchmarks dv [--quick]``: deletion-vector mode ("merge on write") vs merge-on-read, and pypaimon
reading lakemerge's deletion-vector table.

Workload: the merge workload (benchmarks/workloads.py, 8 runs x 1.25M rows; ``--quick``: 8 x 100,000), one commit per
run into a ``bucket = 4`` primary-key table. Three lakemerge tables, each ingested in its own worker process:

* ``lakemerge MOR (write-only)``: ``write-only = true``, no compaction, so a read merges 8 level-0 runs per bucket
  (the merge-table case's table; the baseline of every ratio);
* ``lakemerge DV``: ``deletion-vectors.enabled = true``; each commit's writer compacts level 0 up, looking its keys up
  in the deeper levels and marking the rows they supersede in deletion vectors. Reads need no merge: a bucket
  without level-0 files is read file by file (``SplitReader._raw_readable``);
* ``lakemerge MOR (compacting)``: default options (writers compact by universal compaction), for reference.

Cases: ingest (the 8 commits into a created table); read of the latest snapshot; read at the commit before last
(time travel to the snapshot that commit published). The second read exists because a compaction may rewrite the DV
table whole at the last commit (size amplification), leaving no vectors to apply; the notes give each table's files
per level and the rows its vectors mark. Readers: the three lakemerge tables, and pypaimon 2.1 pure and with
pypaimon-rust (``read.native.enabled``, ``scan.native-plan.enabled``) reading the DV table.

Every worker warms up untimed first (ingest: a small table with the same options; read: one read of the same
snapshot -- imports, Numba compile or cache load, page cache), reported in its note. A read worker checks that
first result before timing anything: keys and winning seq against a NumPy reference, every column against the
lakemerge MOR read. A pypaimon reader with a wrong result is excluded (not timed) and the difference reported; a
lakemerge mismatch fails the run. Peak RSS is the worker's peak over the timed runs only (VmHWM reset after the
warm-up and check). Ratios: median / the lakemerge MOR (write-only) median of the same case. Writes
benchmarks/RESULTS-dv.md only after a successful full-size, unfiltered, non-quick run.
Workers: ``python -m benchmarks.dv_bench ingest TABLE ...`` / ``read READER ...``.
"""
from __future__ import annotations

import argparse
import gc
import os
import shutil
import sys
import time
from collections import Counter

import numpy as np
import pyarrow as pa

from benchmarks import report
from benchmarks.harness import (Mismatch, Row, assert_same_rows, current_rss_mb, emit, in_workdir, load_average,
                                load_runs, load_table,
                                normalise, peak_rss_mb, run_worker, save_runs, save_table)
from benchmarks.workloads import FULL_ROWS_PER_RUN, FULL_RUNS, SCHEMA, SEED, MergeWorkload, expected_winners, \
    merge_workload

QUICK_ROWS_PER_RUN = 100_000
TABLES = {  # key -> (label, table options)
    "mor": ("lakemerge MOR (write-only)", {"bucket": "4", "write-only": "true"}),
    "dv": ("lakemerge DV", {"bucket": "4", "deletion-vectors.enabled": "true"}),
    "mor-compacting": ("lakemerge MOR (compacting)", {"bucket": "4"}),
}
READERS = {  # key -> (label, table it reads)
    "mor": (TABLES["mor"][0], "mor"),
    "dv": (TABLES["dv"][0], "dv"),
    "mor-compacting": (TABLES["mor-compacting"][0], "mor-compacting"),
    "pypaimon": ("pypaimon (DV table)", "dv"),
    "pypaimon-native": ("pypaimon-native (DV table)", "dv"),
}
PYPAIMON_NATIVE = {"read.native.enabled": "true", "scan.native-plan.enabled": "true"}
THREADS = {"pypaimon": "default (pyarrow pool)", "pypaimon-native": "default (Rust runtime)"}
LM_THREADS = "default (bucket thread pool, os.cpu_count())"
RESULTS_DV = os.path.join(os.path.dirname(os.path.abspath(__file__)), "RESULTS-dv.md")


# ---- table operations (also used in-process by test_bench_dv.py) ------------------------------------------------

def ingest(runs: list[pa.Table], warehouse: str, options: dict) -> list[int]:
    """Create ``db.t`` with ``options`` and commit each run; return the snapshot id the table has after each commit
    (for DV and compacting tables that is the writer's COMPACT snapshot)."""
    from engine import Catalog

    cat = Catalog(warehouse)
    cat.create_database("db")
    t = cat.create_table("db.t", SCHEMA, primary_key=["key"], options=options)
    snapshots = []
    for run in runs:
        t.write(run)
        snapshots.append(t.latest_snapshot_id())
    return snapshots


def read(reader: str, warehouse: str, snapshot: int | None = None) -> pa.Table:
    """Open ``db.t`` through a new catalog, plan and read it whole (at ``snapshot``, default latest)."""
    if not reader.startswith("pypaimon"):
        from engine import Catalog

        return Catalog(warehouse).get_table("db.t").read(snapshot_id=snapshot)
    from pypaimon import CatalogFactory

    table = CatalogFactory.create({"warehouse": os.path.abspath(warehouse)}).get_table("db.t")
    options = {**(PYPAIMON_NATIVE if reader == "pypaimon-native" else {}),
               **({"scan.snapshot-id": str(snapshot)} if snapshot is not None else {})}
    if options:
        table = table.copy(options)
    rb = table.new_read_builder()
    return rb.new_read().to_arrow(rb.new_scan().plan().splits())


def check(out: pa.Table, keys: np.ndarray, seqs: np.ndarray, ref: pa.Table | None, who: str) -> None:
    """Raise Mismatch unless ``out`` holds exactly one row per reference key with its winning seq, and (with
    ``ref``) the same values as ``ref`` in every column."""
    got = normalise(out, SCHEMA)
    k, s = got.column("key").to_numpy(), got.column("seq").to_numpy()
    if len(k) != len(keys) or not (np.array_equal(k, keys) and np.array_equal(s, seqs)):
        raise Mismatch(f"{who}: {len(k):,} rows with {len(np.unique(k)):,} distinct keys; the reference has "
                       f"{len(keys):,} keys, one row each (keys or winning seq differ)")
    if ref is not None:
        assert_same_rows(got, ref, SCHEMA, who)


def shape(warehouse: str, snapshot: int | None = None) -> str:
    """Files per level, deletion vectors and buckets a batch read reads raw, of a lakemerge table's snapshot."""
    from engine import Catalog
    from engine.read.split_read import SplitReader, batch_splits

    t = Catalog(warehouse).get_table("db.t")
    splits = t.plan(snapshot)
    levels = Counter(f.level for sp in splits for f in sp.files)
    marks = [d.cardinality for sp in splits for _, d in sp.vectors.files]
    marked = "?" if None in marks else f"{sum(marks):,}"
    raw = sum(SplitReader(t.file_io, t.schema)._raw_readable(sp) for sp in batch_splits(splits, t.schema))
    return (f"files per level {dict(sorted(levels.items()))}, {len(marks)} deletion vectors marking {marked} rows, "
            f"{raw}/{len(splits)} buckets read raw (no merge)")


# ---- workers ------------------------------------------------------------------------------------------------------

def reset_peak_rss() -> bool:
    """Reset this process's VmHWM (Linux >= 4.0); False if not possible (then ru_maxrss is reported)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_since_reset(reset: bool) -> float:
    if reset:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    return peak_rss_mb()


def ingest_worker(args) -> None:
    label, options = TABLES[args.table]
    runs = load_runs(args.data)
    n = sum(r.num_rows for r in runs)
    warm_dir = args.warehouse + "-warmup"
    t0 = time.perf_counter()  # warm-up: imports, Numba kernels (merge, lookup, vectors), first-call set-up
    ingest(merge_workload(runs=len(runs), rows_per_run=5_000).runs, warm_dir, options)
    read("lakemerge", warm_dir)
    warm_s = time.perf_counter() - t0
    shutil.rmtree(warm_dir, ignore_errors=True)
    gc.collect()
    reset = reset_peak_rss()
    baseline = current_rss_mb()
    times, cpu, snapshots = [], [], []
    for _ in range(args.repeat):  # the last repetition's table stays at --warehouse for the readers
        shutil.rmtree(args.warehouse, ignore_errors=True)
        t0, c0 = time.perf_counter(), time.process_time()
        snapshots = ingest(runs, args.warehouse, options)
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    peak = peak_since_reset(reset)
    note = (f"warm-up (untimed) {warm_s:.2f} s; CPU s median {np.median(cpu):.2f}; options {options}; "
            f"latest snapshot {snapshots[-1]}: {shape(args.warehouse)}")
    emit([Row(case=args.case, contender=label, times=times, rows=n, peak_rss_mb=peak, baseline_rss_mb=baseline,
              threads=LM_THREADS, note=note, baseline=args.table == "mor")], {"snapshots": snapshots})


def read_worker(args) -> None:
    label, table = READERS[args.reader]
    probe = None
    if args.reader.startswith("pypaimon"):
        from benchmarks.table_bench import NativeProbe
        probe = NativeProbe()
    expected = np.load(args.expected)
    keys, seqs = expected["key"], expected["seq"]
    ref = load_table(args.ref) if args.ref and not args.save_ref else None

    # warm-up read, checked before anything is timed
    t0 = time.perf_counter()
    out = read(args.reader, args.warehouse, args.snapshot)
    warm_s = time.perf_counter() - t0
    check(out, keys, seqs, ref, label)
    rows_out = out.num_rows
    if args.save_ref:
        save_table(out, args.ref)
    del out
    gc.collect()
    reset = reset_peak_rss()
    baseline = current_rss_mb()
    times, cpu, out = [], [], None
    for _ in range(args.repeat):
        out = None
        t0, c0 = time.perf_counter(), time.process_time()
        out = read(args.reader, args.warehouse, args.snapshot)
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        if times[-1] > args.slow_limit:
            break
    peak = peak_since_reset(reset)
    check(out, keys, seqs, ref, label)  # the last timed result too

    checked = "= NumPy reference" + (", = lakemerge MOR in every column" if ref is not None else "")
    note = (f"{rows_out:,} rows read, {checked}; warm-up read (untimed) {warm_s:.2f} s; CPU s median "
            f"{np.median(cpu):.2f}; snapshot {args.snapshot if args.snapshot is not None else 'latest'}")
    if probe:
        c = probe.counts
        note += (f"; plan native {c['plan_native']}/{c['plan_native'] + c['plan_python']}, read native "
                 f"{c['read_native']}/{c['read_native'] + c['read_python']}")
        if probe.fallbacks and args.reader == "pypaimon-native":
            note += "; fallbacks: " + "; ".join(sorted(set(probe.fallbacks)))
    else:
        note += ": " + shape(args.warehouse, args.snapshot)
    emit([Row(case=args.case, contender=label, times=times, rows=args.rows, peak_rss_mb=peak,
              baseline_rss_mb=baseline, threads=THREADS.get(args.reader, LM_THREADS), note=note,
              baseline=args.reader == "mor")])


def worker(argv) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.dv_bench")
    ap.add_argument("step", choices=["ingest", "read"])
    ap.add_argument("who", help="ingest: " + "|".join(TABLES) + "; read: " + "|".join(READERS))
    ap.add_argument("--warehouse", required=True)
    ap.add_argument("--case", required=True)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--data", help="ingest: the runs (Arrow IPC)")
    ap.add_argument("--expected", help="read: the NumPy reference (.npz with key, seq)")
    ap.add_argument("--ref", help="read: the lakemerge MOR result (Arrow IPC) to compare with, or to write")
    ap.add_argument("--save-ref", action="store_true", help="read: write the result to --ref (lakemerge MOR)")
    ap.add_argument("--snapshot", type=int, help="read: snapshot id (default: latest)")
    ap.add_argument("--rows", type=int, default=0, help="read: input rows of the snapshot (for rows/s)")
    ap.add_argument("--slow-limit", type=float, default=120.0)
    args = ap.parse_args(argv)
    if args.step == "ingest":
        args.table = args.who
        ingest_worker(args)
    else:
        args.reader = args.who
        read_worker(args)


# ---- parent -------------------------------------------------------------------------------------------------------

def parse_args(argv=None):
    ap = argparse.ArgumentParser(prog="python -m benchmarks dv", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help=f"{QUICK_ROWS_PER_RUN:,} rows per run (unless --rows-per-run), 1 ingest and 2 reads timed")
    ap.add_argument("--rows-per-run", type=int)
    ap.add_argument("--runs", type=int, default=FULL_RUNS)
    ap.add_argument("--repeat", type=int, help="timed ingests per table (default 3, --quick 1)")
    ap.add_argument("--read-repeat", type=int, help="timed reads per reader and case (default 5, --quick 2)")
    ap.add_argument("--slow-limit", type=float, default=120.0, help="stop repeating a read slower than this (s)")
    ap.add_argument("--only", help="comma-separated tables/readers (" + ",".join(READERS) + "); mor always runs")
    ap.add_argument("--workdir", help="scratch directory (default: a new temporary directory, removed at exit)")
    wr = ap.add_mutually_exclusive_group()
    wr.add_argument("--write-results", dest="write_results", action="store_true", default=None,
                    help="write benchmarks/RESULTS-dv.md (default: only for a full-size, unfiltered, non-quick run)")
    wr.add_argument("--no-write-results", dest="write_results", action="store_false")
    args = ap.parse_args(argv)
    if args.runs < 2:
        ap.error("--runs must be at least 2")
    args.rows_per_run = args.rows_per_run or (QUICK_ROWS_PER_RUN if args.quick else FULL_ROWS_PER_RUN)
    args.repeat = args.repeat or (1 if args.quick else 3)
    args.read_repeat = args.read_repeat or (2 if args.quick else 5)
    only = set(s.strip() for s in args.only.split(",")) if args.only else None
    if only and only - set(READERS):
        ap.error(f"--only: unknown {sorted(only - set(READERS))}; choose from {list(READERS)}")
    args.readers = [r for r in READERS if only is None or r in only or r == "mor"]
    args.tables = [t for t in TABLES if any(READERS[r][1] == t for r in args.readers)]
    if args.write_results is None:
        args.write_results = (not args.quick and only is None and args.rows_per_run == FULL_ROWS_PER_RUN
                              and args.runs == FULL_RUNS)
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    return in_workdir(args.workdir, "lakemerge-dv-bench-", lambda workdir: _run(args, workdir))


def _run(args, workdir: str) -> int:
    load_start = load_average()
    env = {"NUMBA_CACHE_DIR": os.path.join(workdir, "numba-cache"), "PYTHONWARNINGS": "ignore::DeprecationWarning"}
    n_runs, rpr = args.runs, args.rows_per_run
    print(f"generating data (seed {SEED}) ...", file=sys.stderr, flush=True)
    workload = merge_workload(runs=n_runs, rows_per_run=rpr)
    data = os.path.join(workdir, "runs.arrow")
    save_runs(workload.runs, data)
    expected = {}
    for commits in (n_runs, n_runs - 1):  # reference per read case: (keys, winning seq) after that many commits
        keys, seqs = expected_winners(MergeWorkload(workload.runs[:commits]))
        expected[commits] = os.path.join(workdir, f"expected-{commits}.npz")
        np.savez(expected[commits], key=keys, seq=seqs)
    header = [f"workload: {workload.describe()}; {workload.total_rows:,} input rows, seed {SEED}; "
              f"one commit per run into a bucket=4 table"]
    del workload

    case_ingest = f"ingest {n_runs} commits"
    cases = [(f"read latest ({n_runs} commits)", n_runs, False), (f"read at commit {n_runs - 1}", n_runs - 1, True)]
    rows: list[Row] = []
    fatal: list[str] = []
    warehouses = {t: os.path.join(workdir, f"wh-{t}") for t in TABLES}
    snapshots: dict[str, list[int]] = {}
    for t in args.tables:
        label = TABLES[t][0]
        got, extra, err = run_worker("benchmarks.dv_bench", [
            "ingest", t, "--data", data, "--warehouse", warehouses[t], "--case", case_ingest,
            "--repeat", str(args.repeat)], env, label=f"ingest {label}", timeout=3600)
        if err:
            rows.append(Row(case=case_ingest, contender=label, error=err))
            fatal.append(f"ingest {label}: {err}")
        else:
            rows += got
            snapshots[t] = extra["snapshots"]

    for case, commits, time_travel in cases:
        ref = os.path.join(workdir, f"mor-{commits}.arrow")
        for r in args.readers:
            label, t = READERS[r]
            if t not in snapshots:
                rows.append(Row(case=case, contender=label, error=f"no table: the {TABLES[t][0]} ingest failed"))
                continue
            cargs = ["read", r, "--warehouse", warehouses[t], "--case", case, "--expected", expected[commits],
                     "--rows", str(commits * rpr), "--repeat", str(args.read_repeat),
                     "--slow-limit", str(args.slow_limit)]
            if time_travel:
                cargs += ["--snapshot", str(snapshots[t][commits - 1])]
            if r == "mor":
                cargs += ["--ref", ref, "--save-ref"]
            elif os.path.exists(ref):
                cargs += ["--ref", ref]
            got, _, err = run_worker("benchmarks.dv_bench", cargs, env, label=f"{case}: {label}", timeout=1800)
            if not err:
                rows += got
            elif r.startswith("pypaimon") and "Mismatch" in err:  # a wrong answer is reported, never timed
                rows.append(Row(case=case, contender=label,
                                error="EXCLUDED, wrong result (checked before timing): " + err.splitlines()[-1]))
            else:
                rows.append(Row(case=case, contender=label, error=err))
                fatal.append(f"{case} / {label}: {err}")

    header += [f"machine: {report.machine()}", f"versions: {report.versions()}",
               f"contention: 1/5/15-min load average at the start {load_start}, at the end {load_average()} "
               "(absolute times are noisy on a shared machine; compare ratios from the same run)"]
    summary = summarize(rows, case_ingest, cases)
    print()
    print(report.render_text(rows))
    print()
    print("ratio = median / the lakemerge MOR (write-only) median of the same case (< 1: faster than it)")
    for line in header:
        print(line)
    print("\nsummary:")
    for line in summary:
        print("  " + line)
    print("\nnotes:")
    for line in report.notes_text(rows):
        print("  " + line)
    if fatal:
        print("\nFAILED:\n  " + "\n  ".join(fatal), file=sys.stderr)
        return 1
    if args.write_results:
        write_results(rows, header, summary)
        print(f"\nwrote {RESULTS_DV}")
    return 0


def summarize(rows: list[Row], case_ingest: str, cases) -> list[str]:
    """DV read speed-up over MOR, DV ingest cost over MOR, and the number of reads that repays the ingest cost."""
    med = {(r.case, r.contender): r.median for r in rows if r.times and not r.error}
    mor, dv, mc = (TABLES[t][0] for t in ("mor", "dv", "mor-compacting"))
    out = []

    def ratio(case, a, b):
        return f"{med[case, a] / med[case, b]:.2f}x" if (case, a) in med and (case, b) in med else "n/a"
    out.append(f"DV ingest cost: {ratio(case_ingest, dv, mor)} the MOR (write-only) ingest time, "
               f"{ratio(case_ingest, dv, mc)} the MOR (compacting) one (median / median)")
    for case, _, _ in cases:
        out.append(f"{case}: DV read speed-up {ratio(case, mor, dv)} over MOR (write-only), "
                   f"{ratio(case, mc, dv)} over MOR (compacting) (MOR median / DV median)")
    latest = cases[0][0]
    keys = [(case_ingest, dv), (case_ingest, mor), (latest, mor), (latest, dv)]
    if all(k in med for k in keys):
        extra, saved = med[keys[0]] - med[keys[1]], med[keys[2]] - med[keys[3]]
        if extra > 0 and saved > 0:
            out.append(f"DV's extra ingest time ({extra:.2f} s) is repaid after {extra / saved:.1f} reads of the "
                       f"latest snapshot (each {saved:.3f} s faster than MOR write-only)")
    return out


def write_results(rows: list[Row], header: list[str], summary: list[str]) -> None:
    date = time.strftime("%Y-%m-%d %H:%M %Z")
    body = ["# Deletion vectors vs merge-on-read", "",
            f"Command: `{report.command_line()}`  ", f"Date: {date}", "",
            *[f"- {h}" for h in header], "", report.render_markdown(rows), "",
            "Columns: best / median of the timed runs in seconds; rows/s = input rows of the snapshot (all commits' "
            "rows, before merging) / best; ratio to lakemerge = median / the lakemerge MOR (write-only) median of "
            "the case; peak RSS = the worker's peak resident set over its timed runs (input runs included for "
            "ingest). See the docstring of benchmarks/dv_bench.py for the method.", "",
            "Summary:", "", *[f"- {s}" for s in summary], "",
            "Notes per line:", "", *[f"- {n}" for n in report.notes_text(rows)], ""]
    with open(RESULTS_DV, "w") as f:
        f.write("\n".join(body))


if __name__ == "__main__":
    from benchmarks.harness import run_worker_main
    if sys.argv[1:2] in (["ingest"], ["read"]):
        run_worker_main(lambda: worker(sys.argv[1:]))
    else:
        sys.exit(main())
