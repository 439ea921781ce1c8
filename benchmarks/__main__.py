"""``python -m benchmarks [NAME...] [--quick] [--repeat N]`` -- see benchmarks/__init__.py and benchmarks/RESULTS.md.
``python -m benchmarks reliability|spark|changelog|memory [--quick]`` -- the reliability figures, lakemerge through
Spark vs Spark on Parquet, commit throughput per changelog producer, peak memory of a merged read
(benchmarks/reliability.py, spark_bench.py, changelog_bench.py, memory_bench.py); ``python -m
benchmarks.compaction_bench run``, ``python -m benchmarks.engine_bench`` and ``python -m benchmarks.spark_breakdown``.

Names: ``merge`` (= merge-memory + merge-table), ``merge-memory`` (in-memory merge), ``merge-table`` (table ingest +
merged read), ``hashing``, ``lookups``, ``upsert``, ``scaling`` (1 vs 2 threads); ``all`` (default) = every one but
``dv``. ``python -m benchmarks dv [--quick]`` (deletion vectors vs merge-on-read, pypaimon reading the DV table;
benchmarks/dv_bench.py, RESULTS-dv.md) runs alone, with its own options and workload sizes.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import time

from benchmarks import kernel_bench, report, scaling_bench, upsert_bench
from benchmarks.harness import ONE_THREAD_ENV, Row, in_workdir, load_average, run_worker, save_runs
from benchmarks.workloads import FULL_ROWS_PER_RUN, FULL_RUNS, SEED, merge_workload

MEMORY_CONTENDERS = [  # (worker contender, label, extra env)
    ("pyarrow", "pyarrow", {}),
    ("polars", "polars", {"POLARS_MAX_THREADS": "1"}),
    ("polars", "polars (2 threads)", {"POLARS_MAX_THREADS": "2"}),
    ("duckdb", "duckdb", {}),
    ("duckdb-argmax", "duckdb arg_max", {}),
    ("pandas", "pandas", {}),
]
TABLE_CONTENDERS = ["lakemerge", "pypaimon-native", "pypaimon"]
NAMES = ["all", "merge", "merge-memory", "merge-table", "hashing", "lookups", "upsert", "scaling", "dv"]
STANDALONE = {"dv"}  # own entry point (must come first), not part of ``all``


def parse_args(argv=None):
    ap = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", default="all", choices=NAMES, help="what to run (default: all)")
    ap.add_argument("--quick", action="store_true", help="fewer repetitions (2 in memory, 1 for tables)")
    ap.add_argument("--repeat", type=int, help="timed repetitions per in-memory contender (default 5, --quick 2)")
    ap.add_argument("--table-repeat", type=int,
                    help="timed ingest+read repetitions per table contender (default 3, --quick 1); a contender "
                         "whose single ingest+read exceeds --slow-limit seconds is run once")
    ap.add_argument("--slow-limit", type=float, default=120.0)
    ap.add_argument("--rows-per-run", type=int, default=FULL_ROWS_PER_RUN, help=argparse.SUPPRESS)
    ap.add_argument("--runs", type=int, default=FULL_RUNS, help=argparse.SUPPRESS)
    ap.add_argument("--only", help="comma-separated contender labels to run (lakemerge always runs)")
    ap.add_argument("--workdir", help="scratch directory (default: a new temporary directory, removed at exit)")
    wr = ap.add_mutually_exclusive_group()
    wr.add_argument("--write-results", dest="write_results", action="store_true", default=None,
                    help="write benchmarks/RESULTS.md (default: only for a full, unfiltered, non-quick run)")
    wr.add_argument("--no-write-results", dest="write_results", action="store_false")
    args = ap.parse_args(argv)
    if args.repeat is None:
        args.repeat = 2 if args.quick else 5
    if args.table_repeat is None:
        args.table_repeat = 1 if args.quick else 3
    if isinstance(args.names, str):   # the default
        args.names = [args.names]
    if STANDALONE & set(args.names):
        ap.error("run 'dv' alone, first: python -m benchmarks dv [--quick] (see python -m benchmarks dv --help)")
    names = set(NAMES) - STANDALONE if "all" in args.names else set(args.names)
    args.memory = bool(names & {"merge", "merge-memory"})
    args.table = bool(names & {"merge", "merge-table"})
    args.hashing, args.lookups = "hashing" in names, "lookups" in names
    args.upsert, args.scaling = "upsert" in names, "scaling" in names
    args.everything = names >= set(NAMES) - {"all"} - STANDALONE
    args.only = set(s.strip() for s in args.only.split(",")) if args.only else None
    if args.write_results is None:
        args.write_results = (not args.quick and args.everything and args.only is None
                              and args.rows_per_run == FULL_ROWS_PER_RUN and args.runs == FULL_RUNS)
    return args


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["reliability"]:  # --- issue 7: python -m benchmarks reliability ---
        from benchmarks import reliability
        return reliability.main(argv[1:])
    if argv[:1] == ["spark"]:  # the Spark case has its own options (benchmarks/spark_bench.py)
        from benchmarks.spark_bench import main as spark_main
        return spark_main(argv[1:])

    if argv[:1] == ["memory"]:  # issue 9: peak RSS of a merged read, in isolation
        from benchmarks.memory_bench import main as memory_main
        return memory_main(argv[1:])
    if argv[:1] == ["dv"]:  # deletion vectors vs merge-on-read (benchmarks/dv_bench.py)
        from benchmarks.dv_bench import main as dv_main
        return dv_main(argv[1:])
    if argv[:1] == ["changelog"]:  # issue 5: commit throughput per changelog producer
        from benchmarks.changelog_bench import main as changelog_main
        return changelog_main(argv[1:])
    args = parse_args(argv)
    return in_workdir(args.workdir, "lakemerge-bench-", lambda workdir: _run(args, workdir))


def _run(args, workdir: str) -> int:
    load_start = load_average()
    # Workers use a private Numba cache so that runs never write into the source tree's __pycache__.
    cache = os.path.join(workdir, "numba-cache")
    base_env = {"NUMBA_CACHE_DIR": cache, "PYTHONWARNINGS": "ignore::DeprecationWarning"}
    one = {**base_env, **ONE_THREAD_ENV}

    print(f"generating data (seed {SEED}) ...", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    workload = merge_workload(runs=args.runs, rows_per_run=args.rows_per_run)
    gen_s = time.perf_counter() - t0
    data = os.path.join(workdir, "runs.arrow")
    save_runs(workload.runs, data)
    n_rows, data_mb, description = workload.total_rows, workload.nbytes / 2**20, workload.describe()
    del workload

    header = [f"workload: {description}; {n_rows:,} input rows, {data_mb:.0f} MB of Arrow data, seed {SEED} "
              f"(generated in {gen_s:.1f} s)"]
    rows: list[Row] = []
    fatal: list[str] = []
    selected = (lambda label: args.only is None or label in args.only)

    # Numba: a cold compile (empty cache) and a cache load, each in a fresh process.
    _, cold, err1 = run_worker("benchmarks.merge_bench", ["numba-compile"], one, label="numba cold compile")
    _, warm, err2 = run_worker("benchmarks.merge_bench", ["numba-compile"], one, label="numba cached load")
    numba_line = ("Numba: kernels.merge.warm_up() (compiles kernels.keys + kernels.merge) in a fresh process: "
                  + (f"{cold['seconds']:.2f} s cold compile (empty cache)" if not err1 else f"ERROR {err1}") + ", "
                  + (f"{warm['seconds']:.2f} s loading the on-disk cache" if not err2 else f"ERROR {err2}"))

    if args.memory:
        ref = os.path.join(workdir, "merge_ref.arrow")
        lm_rows, extra, err = run_worker(
            "benchmarks.merge_bench", ["lakemerge", "--data", data, "--ref", ref, "--repeat", str(args.repeat)],
            one, label="merge lakemerge")
        if err:
            rows.append(Row(case="merge in memory", contender="lakemerge", error=err))
            fatal.append(f"lakemerge in-memory merge failed: {err}")
            ref = None
        else:
            rows += lm_rows
            numba_line += (f"; in the merge worker: warm_up() {extra['warm_up_s']:.2f} s, then the first call on the "
                           f"benchmark data {extra['first_call_s']:.2f} s (untimed warm-up; later calls are the timed ones)")
        for contender, label, env in MEMORY_CONTENDERS:
            if not selected(label):
                continue
            cargs = [contender, "--data", data, "--repeat", str(args.repeat), "--label", label]
            if ref:
                cargs += ["--ref", ref]
            got, _, err = run_worker("benchmarks.merge_bench", cargs, {**one, **env}, label=f"merge {label}")
            if err:
                rows.append(Row(case="merge in memory", contender=label, error=err))
                if "Mismatch" in err or "MISMATCH" in err:
                    fatal.append(f"{label} result differs from lakemerge: {err}")
            else:
                if not ref:
                    for r in got:
                        r.note = r.note.replace("output checked = lakemerge", "UNCHECKED (lakemerge failed)")
                rows += got

    if args.table:
        ref = os.path.join(workdir, "table_ref.arrow")
        for contender in TABLE_CONTENDERS:
            if contender != "lakemerge" and not selected(contender):
                continue
            cargs = [contender, "--data", data, "--workdir", os.path.join(workdir, "warehouses"),
                     "--repeat", str(args.table_repeat), "--slow-limit", str(args.slow_limit)]
            if contender == "lakemerge" or os.path.exists(ref):
                cargs += ["--ref", ref]
            got, _, err = run_worker("benchmarks.table_bench", cargs, base_env, label=f"table {contender}",
                                     timeout=1800)
            if err:
                for case in ("table ingest (8 commits)", "table merged read"):
                    rows.append(Row(case=case, contender=contender, error=err))
                if "Mismatch" in err or "MISMATCH" in err:
                    fatal.append(f"table {contender}: {err}")
            else:
                rows += got

    quick = ["--quick"] if args.quick else []
    if args.hashing or args.lookups:   # compile (cold), then a cached load, each in a fresh process
        got = [run_worker("benchmarks.kernel_bench", ["numba-compile"], one, label="numba compile kernels")
               for _ in range(2)]
        header.append("Numba: kernels.hashing.warm_up() + kernels.lookup.warm_up() in a fresh process: " + ", ".join(
            f"ERROR {err}" if err else f"{extra['seconds']:.2f} s {what}"
            for (_, extra, err), what in zip(got, ["compiling (kernels.keys already cached)", "loading the cache"])))
    if args.hashing:
        for contender in kernel_bench.HASH_CONTENDERS:
            if contender == "lakemerge" or selected(contender):
                rows += _rows_or_errors(run_worker(
                    "benchmarks.kernel_bench", ["hashing", contender, "--repeat", str(args.repeat), *quick],
                    one, label=f"hashing {contender}"), contender, ["hash int64 -> 16 buckets",
                                                                    "hash string[16] -> 16 buckets"], fatal)
    if args.lookups:
        table_dir = os.path.join(workdir, "lookup-table")
        for contender in kernel_bench.LOOKUP_CONTENDERS:
            if contender == "lakemerge" or selected(contender):
                rows += _rows_or_errors(run_worker(
                    "benchmarks.kernel_bench", ["lookups", contender, "--repeat", str(args.repeat),
                                                "--table-dir", table_dir, *quick],
                    one, label=f"lookups {contender}", timeout=1800), contender,
                    ["lookup 1M random", "lookup 1M sorted"], fatal)
        shutil.rmtree(table_dir, ignore_errors=True)
    if args.upsert:
        ref = os.path.join(workdir, "upsert_ref.arrow")
        for contender in upsert_bench.CONTENDERS:
            if contender == "lakemerge" or selected(contender):
                rows += _rows_or_errors(run_worker(
                    "benchmarks.upsert_bench", [contender, "--workdir", workdir, "--ref", ref,
                                                "--repeat", str(args.table_repeat), "--slow-limit",
                                                str(args.slow_limit), *quick],
                    base_env, label=f"upsert {contender}", timeout=3600), contender,
                    [upsert_bench.CASE_LOAD, upsert_bench.CASE_UPSERT, upsert_bench.CASE_READ], fatal)
    if args.scaling:
        for threads in (1, 2):
            rows += _rows_or_errors(run_worker(
                "benchmarks.scaling_bench", ["--data", data, "--threads", str(threads),
                                             "--workdir", os.path.join(workdir, "scaling"),
                                             "--repeat", str(args.table_repeat)],
                base_env, label=f"scaling {threads} thread(s)", timeout=1800), f"{threads} thread(s)",
                [scaling_bench.CASE], fatal)

    case_order = {c: i for i, c in enumerate(dict.fromkeys(r.case for r in rows))}
    rows.sort(key=lambda r: case_order[r.case])   # stable: contender order kept within a case
    header += [numba_line, f"machine: {report.machine()}", f"versions: {report.versions()}",
               "contention: this machine is shared (other jobs run on its cores); 1/5/15-min load average at the "
               f"start {load_start}, at the end {load_average()} -- absolute times are noisy, ratios measured in the same "
               "run are what matter"]
    print()
    print(report.render_text(rows))
    print()
    for line in header:
        print(line)
    print()
    print("notes:")
    for line in report.notes_text(rows):
        print("  " + line)
    for line in report.breakdown(rows):
        print("  " + line)
    if fatal:
        print("\nFAILED:\n  " + "\n  ".join(fatal), file=sys.stderr)
        return 1
    if args.write_results:
        path = report.write_results_md(rows, header, report.command_line())
        print(f"\nwrote {path}")
    return 0


def _rows_or_errors(result, contender: str, cases: list[str], fatal: list[str]) -> list[Row]:
    got, _, err = result
    if not err:
        return got
    if "MISMATCH" in err or "Mismatch" in err:
        fatal.append(f"{contender}: {err}")
    return [Row(case=c, contender=contender, error=err) for c in cases]


if __name__ == "__main__":
    sys.exit(main())
