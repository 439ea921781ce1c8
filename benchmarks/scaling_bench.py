"""Case: thread scaling of a merged read -- the merge workload as a 4-bucket Paimon table (8 commits), read with a
thread pool over buckets, once with 1 thread and once with 2 (two worker processes).

The read is lakemerge's kernel path, called directly (what ``engine`` will do once it uses ``kernels.gather``):
per bucket, ``SplitReader.runs`` / ``read_file`` decode each file (Parquet, ``use_threads=False``), then
``kernels.keys.encode_keys`` + ``kernels.merge.merge_dedup`` pick each key's newest record and
``kernels.gather.gather`` builds the merged rows from the runs' buffers; retracts are dropped. All kernels are
``nogil``, so buckets run in parallel threads. Arrow's own CPU pool is set to 1 thread so that only the bucket
pool adds parallelism. The phase split (decode / merge / gather) is summed over buckets (thread-seconds).

Worker: ``python -m benchmarks.scaling_bench --data runs.arrow --threads N --workdir D [--repeat R]``.
"""
from __future__ import annotations

import argparse
import os
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa

from benchmarks.harness import Row, current_rss_mb, emit, load_runs, peak_rss_mb
from benchmarks.workloads import MergeWorkload, expected_winners

CASE = "scaling: merged read, kernel path"
SIGN = np.uint64(1 << 63)


def open_table(runs: list[pa.Table], warehouse: str):
    """The workload as a 4-bucket table (one commit per run), written by lakemerge; reused when it exists."""
    from engine import Catalog

    from benchmarks.workloads import SCHEMA

    cat = Catalog(warehouse)
    if os.path.exists(os.path.join(warehouse, "db.db", "t", "snapshot")):
        return cat.get_table("db.t")
    cat.create_database("db")
    t = cat.create_table("db.t", SCHEMA, primary_key=["key"], options={"bucket": "4"})
    for r in runs:
        t.write(r)
    return t


def read_split(table, split, columns: list[str]) -> tuple[pa.Table, float, float, float]:
    """Merged live rows of one bucket and the seconds spent decoding, merging and gathering."""
    from engine.read.split_read import SplitReader
    from kernels.gather import gather
    from kernels.keys import encode_keys
    from kernels.merge import merge_dedup

    t0 = time.perf_counter()
    reader = SplitReader(table.file_io, table.schema)
    runs = []
    for files in reader.runs(split):
        parts = [reader.read_file(split, f, columns) for f in files]
        runs.append(parts[0] if len(parts) == 1 else pa.concat_tables(parts))
    t1 = time.perf_counter()
    key_col = runs[0].column_names[0]          # "__key_<k>": one trimmed primary key here
    enc = [encode_keys([r.column(key_col)]) for r in runs]
    # order within a key: _SEQUENCE_NUMBER (unique per record of a bucket), so one word decides
    seq = [(r.column("_SEQUENCE_NUMBER").to_numpy().view(np.uint64) ^ SIGN) for r in runs]
    winners = merge_dedup(enc, seq)
    t2 = time.perf_counter()
    out = gather(runs, winners)
    kinds = out.column("_VALUE_KIND").to_numpy()
    live = (kinds == 0) | (kinds == 2)
    if not live.all():
        out = out.filter(pa.array(live))
    out = out.select(columns)
    return out, t1 - t0, t2 - t1, time.perf_counter() - t2


def read_table(table, threads: int) -> tuple[pa.Table, list[float]]:
    splits = table.plan()
    columns = list(table.arrow_schema.names)
    with ThreadPoolExecutor(max_workers=threads) as pool:
        parts = list(pool.map(lambda sp: read_split(table, sp, columns), splits))
    phases = [sum(p[i] for p in parts) for i in (1, 2, 3)]
    return pa.concat_tables([p[0] for p in parts]), phases


def check(out: pa.Table, keys: np.ndarray, seq: np.ndarray) -> None:
    got = out.sort_by("key")
    if not (np.array_equal(got.column("key").to_numpy(), keys) and np.array_equal(got.column("seq").to_numpy(), seq)):
        raise SystemExit("MISMATCH: the kernel-path read differs from the NumPy reference (keys / winning seq)")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--data", required=True)
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)

    import kernels.gather
    import kernels.merge
    kernels.merge.warm_up()
    kernels.gather.warm_up()
    runs = load_runs(args.data)
    n = sum(r.num_rows for r in runs)
    table = open_table(runs, os.path.join(os.path.abspath(args.workdir), "wh"))
    want_keys, want_seq = expected_winners(MergeWorkload(runs))
    del runs
    baseline = current_rss_mb()
    out, _ = read_table(table, args.threads)   # warm-up (page cache, first calls)
    check(out, want_keys, want_seq)
    expected_rows = out.num_rows
    times, phases = [], []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        out, ph = read_table(table, args.threads)
        times.append(time.perf_counter() - t0)
        phases.append(ph)
        if out.num_rows != expected_rows:
            raise SystemExit(f"MISMATCH: {out.num_rows} rows, the first read had {expected_rows}")
    best = int(np.argmin(times))
    d, m, g = phases[best]
    note = (f"{out.num_rows:,} rows out (= NumPy reference), {len(table.plan())} buckets; thread-seconds in the best run: decode "
            f"{d:.3f}, merge {m:.3f}, gather {g:.3f}")
    emit([Row(case=CASE, contender=f"{args.threads} thread(s)", times=times, rows=n, peak_rss_mb=peak_rss_mb(),
              baseline_rss_mb=baseline, threads=str(args.threads), note=note, baseline=args.threads == 1)])


if __name__ == "__main__":
    from benchmarks.harness import run_worker_main
    run_worker_main(main)
