"""Commit throughput per changelog producer: none vs input vs lookup vs full-compaction.

``python -m benchmarks changelog [--quick]`` (or ``python -m benchmarks.changelog_bench``)

Per producer: a deduplicate table (``bucket = 4``) is loaded with N keys and fully compacted (untimed), then
receives 10 commits of M updates of random existing keys (full run: N = 1,000,000, M = 100,000; ``--quick``:
N = 100,000, M = 10,000). Commits use streaming identifiers 1..10; full-compaction runs with
``full-compaction.delta-commits = 5`` (a full compaction, and its changelog, at commits 5 and 10). Timed: each
commit from ``new_write`` to the published snapshot(s), including the writer's compaction and, for lookup, the
lookup of every updated key's previous value. Reported: total seconds, rows/s, ratio to ``none`` and the number of
changelog rows produced, and the process CPU seconds of the
commits (all threads; steadier than wall time on a shared machine) with their ratio to ``none`` (checked: lookup emits a -U/+U pair per distinct updated key and commit).
Numba compilation is excluded (a warm-up table runs first).
"""
from __future__ import annotations

import argparse
import shutil
import tempfile
import time

import numpy as np
import pyarrow as pa

PRODUCERS = {
    "none": {},
    "input": {"changelog-producer": "input"},
    "lookup": {"changelog-producer": "lookup"},
    "full-compaction": {"changelog-producer": "full-compaction", "full-compaction.delta-commits": "5"},
}
SCHEMA = pa.schema([pa.field("k", pa.int64(), False), pa.field("v", pa.int64()), pa.field("s", pa.string())])


def batch(keys: np.ndarray, rng) -> pa.Table:
    v = rng.integers(0, 1 << 40, len(keys))
    return pa.table({"k": keys, "v": v, "s": pa.array([f"s{x % 100000}" for x in v])}, schema=SCHEMA)


def run_producer(warehouse: str, name: str, options: dict, n_keys: int, n_updates: int, commits: int,
                 seed: int) -> dict:
    from engine import Catalog
    cat = Catalog(warehouse)
    cat.create_database("db", ignore_if_exists=True)
    t = cat.create_table(f"db.{name.replace('-', '_')}", SCHEMA, ["k"], options={"bucket": "4", **options})
    rng = np.random.default_rng(seed)
    t.write(batch(np.arange(n_keys, dtype=np.int64), rng))
    t.compact(full=True)
    start_snapshot = t.latest_snapshot_id()
    times, cpu = [], []
    distinct = 0
    for i in range(1, commits + 1):
        keys = rng.integers(0, n_keys, n_updates).astype(np.int64)
        distinct += len(np.unique(keys))
        data = batch(keys, rng)
        t0, c0 = time.perf_counter(), time.process_time()
        with t.new_write(commit_identifier=i) as w:
            w.write(data)
            t.commit(w.prepare_commit())
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    changelog_rows = 0
    for s in t.snapshots():
        if s.id > start_snapshot and s.changelog_record_count:
            changelog_rows += s.changelog_record_count
    if name == "lookup" and changelog_rows != 2 * distinct:
        raise AssertionError(f"lookup produced {changelog_rows} changelog rows, expected {2 * distinct}")
    return {"seconds": sum(times), "cpu_seconds": sum(cpu), "per_commit": times, "changelog_rows": changelog_rows}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks changelog", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="100k keys, 10 commits of 10k updates")
    ap.add_argument("--keys", type=int)
    ap.add_argument("--updates", type=int)
    ap.add_argument("--commits", type=int, default=10)
    ap.add_argument("--only", help="comma-separated producers")
    args = ap.parse_args(argv)
    n_keys = args.keys or (100_000 if args.quick else 1_000_000)
    n_updates = args.updates or (10_000 if args.quick else 100_000)
    chosen = [p for p in PRODUCERS if args.only is None or p in args.only.split(",")]
    workdir = tempfile.mkdtemp(prefix="lakemerge-changelog-bench-")
    try:
        for p in chosen:  # warm-up: compile every kernel the paths use
            run_producer(f"{workdir}/warm", p, PRODUCERS[p], 2000, 200, 2, 0)
        results = {}
        for p in chosen:
            results[p] = run_producer(f"{workdir}/wh", p, PRODUCERS[p], n_keys, n_updates, args.commits, 42)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    base = results.get("none", {}).get("seconds")
    print(f"changelog producers: {n_keys:,} keys, {args.commits} commits x {n_updates:,} updates, bucket=4")
    base_cpu = results.get("none", {}).get("cpu_seconds")
    print(f"{'producer':<16}{'total s':>10}{'rows/s':>12}{'vs none':>10}{'cpu s':>8}{'cpu vs none':>13}"
          f"{'changelog rows':>16}")
    for p, r in results.items():
        ratio = f"{r['seconds'] / base:.2f}x" if base else "-"
        cpu_ratio = f"{r['cpu_seconds'] / base_cpu:.2f}x" if base_cpu else "-"
        rate = n_updates * args.commits / r["seconds"]
        print(f"{p:<16}{r['seconds']:>10.2f}{rate:>12,.0f}{ratio:>10}{r['cpu_seconds']:>8.2f}{cpu_ratio:>13}"
              f"{r['changelog_rows']:>16,}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
