"""``python -m benchmarks spark [--quick]``: lakemerge through Spark vs Spark on plain Parquet, local[2].

Workload: N change rows over K keys (full: 5M rows, 1M keys; --quick: 500k rows, 100k keys), split into 5
commits of N/5 rows with random keys, written into an unpartitioned primary-key table with 16 buckets.
- upsert: ``spark_glue.write_table`` per commit (Paimon's bucket as JVM expressions, repartitionById, one task
  per core writing its buckets' sorted runs, the driver committing one snapshot per commit) vs ``df.write.parquet``
  appends of the same inputs; also the same placement written through the data source
  (``df.write.format("lakemerge")``), whose commit runs in Spark's planner Python workers.
- merged read: ``spark.read.format("lakemerge")`` of the table (merge-on-read of 5 runs per bucket, K rows)
  vs a plain Parquet scan of the appended files (N rows, no merge) and vs Spark deduplicating those files
  itself (``max_by`` per key), all into Spark's ``noop`` sink.
- full compaction: ``spark_glue.compact(spark, path, full=True)`` of the same 5 commits written with
  ``write-only`` (5 runs per bucket; restored from a copy before each run; rows/s counts its live files' rows) vs Spark deduplicating the appended Parquet files
  (``max_by`` per key) and rewriting them as Parquet.
The figure of merit is the time ratio to plain Parquet. Inputs are generated and materialized first (untimed);
the lakemerge result is checked against Spark's own deduplication (same live key count and value sum).
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

COMMITS = 5
BUCKETS = 16


def _timed(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def run(rows: int, keys: int, repeat: int, workdir: str, echo=print) -> list[dict]:
    import pyarrow as pa
    from pyspark.sql import functions as F

    import spark_glue
    from engine import Catalog
    from spark_glue.api import distribute_by_bucket
    from spark_glue.session import local_session

    t0 = time.perf_counter()
    spark = local_session("lakemerge-bench", driver_memory="3g")
    spark_glue.register(spark)
    echo(f"spark session: {time.perf_counter() - t0:.1f} s")
    per = rows // COMMITS
    inputs = []
    for c in range(COMMITS):
        path = os.path.join(workdir, f"input-{c}")
        (spark.range(c * per, (c + 1) * per, numPartitions=2)
         .select(F.pmod(F.xxhash64("id"), F.lit(keys)).alias("key"), F.col("id").alias("seq"),
                 (F.rand(c) * 1000).alias("amount"), F.concat(F.lit("customer-"), (F.col("id") % 9973).cast("string"))
                 .alias("customer"))
         .write.mode("overwrite").parquet(path))
        inputs.append(path)
    echo(f"inputs: {rows:,} rows over {keys:,} keys in {COMMITS} parquet inputs ({time.perf_counter() - t0:.1f} s)")
    schema = pa.schema([("key", pa.int64()), ("seq", pa.int64()), ("amount", pa.float64()), ("customer", pa.string())])
    results = []

    def lm_write(through_source: bool = False, name: str = "b.t", extra_options=None):
        cat = Catalog(os.path.join(workdir, "wh"))
        cat.create_database("b", ignore_if_exists=True)
        cat.drop_table(name, ignore_if_not_exists=True)
        t = cat.create_table(name, schema, ["key"], None,
                             {"bucket": str(BUCKETS), "sequence.field": "seq", **(extra_options or {})})
        for p in inputs:
            if through_source:
                distribute_by_bucket(spark.read.parquet(p), t.root).write.format("lakemerge").mode("append").save(
                    t.root)
            else:
                spark_glue.write_table(spark.read.parquet(p), t.root)
        return t

    table_holder = {}

    def lm_write_keep():
        table_holder["t"] = lm_write()

    pq_out = os.path.join(workdir, "parquet-out")

    def pq_write():
        shutil.rmtree(pq_out, ignore_errors=True)
        for p in inputs:
            spark.read.parquet(p).write.mode("append").parquet(pq_out)

    # Untimed warm-up: Python workers import the engine and load (or compile) the Numba kernels once.
    t = time.perf_counter()
    warm = Catalog(os.path.join(workdir, "warm"))
    warm.create_database("b", ignore_if_exists=True)
    wt = warm.create_table("b.w", schema, ["key"], None, {"bucket": str(BUCKETS), "sequence.field": "seq"})
    for _ in range(2):
        spark_glue.write_table(spark.read.parquet(inputs[0]).limit(50_000), wt.root)
        distribute_by_bucket(spark.read.parquet(inputs[0]).limit(50_000), wt.root).write.format("lakemerge").mode(
            "append").save(wt.root)
    spark.read.format("lakemerge").load(wt.root).write.format("noop").mode("overwrite").save()
    echo(f"warm-up (workers import the engine, Numba kernels load): {time.perf_counter() - t:.1f} s")

    # Rounds interleave the three writers, so a slow spell of this shared machine hits all of them alike; the
    # per-round ratio (write_table / Parquet) is reported beside the best-of times.
    w_ds = w_lm = w_pq = float("inf")
    round_ratios = []
    for _ in range(repeat):
        w_ds = min(w_ds, _timed(lambda: lm_write(through_source=True), 1))
        lm_once, pq_once = _timed(lm_write_keep, 1), _timed(pq_write, 1)
        w_lm, w_pq = min(w_lm, lm_once), min(w_pq, pq_once)
        round_ratios.append(lm_once / pq_once)
        echo(f"round: write_table {lm_once:.2f} s, parquet {pq_once:.2f} s")
    echo("upsert, write_table / Parquet append per round: " + ", ".join(f"{r:.2f}x" for r in round_ratios))
    results.append(dict(case=f"upsert {rows:,} rows in {COMMITS} commits", contender="lakemerge (16 buckets)",
                        seconds=w_lm, rows=rows))
    results.append(dict(case=f"upsert {rows:,} rows in {COMMITS} commits", contender="lakemerge via data source",
                        seconds=w_ds, rows=rows))
    results.append(dict(case=f"upsert {rows:,} rows in {COMMITS} commits", contender="spark parquet append",
                        seconds=w_pq, rows=rows))
    root = table_holder["t"].root

    def lm_read():
        spark.read.format("lakemerge").load(root).write.format("noop").mode("overwrite").save()

    def pq_read():
        spark.read.parquet(pq_out).write.format("noop").mode("overwrite").save()

    def pq_dedupe():
        (spark.read.parquet(pq_out).groupBy("key")
         .agg(F.max_by(F.struct("amount", "customer"), "seq").alias("r"))
         .write.format("noop").mode("overwrite").save())

    r_lm, r_pq, r_dd = _timed(lm_read, repeat), _timed(pq_read, repeat), _timed(pq_dedupe, repeat)
    results.append(dict(case="merged read", contender="lakemerge merge-on-read", seconds=r_lm, rows=keys))
    results.append(dict(case="merged read", contender="spark parquet scan (no merge)", seconds=r_pq, rows=rows))
    results.append(dict(case="merged read", contender="spark parquet + max_by dedupe", seconds=r_dd, rows=keys))

    lm = spark.read.format("lakemerge").load(root).agg(F.count("*").alias("n"), F.sum("amount").alias("s")).first()
    ref = (spark.read.parquet(pq_out).groupBy("key").agg(F.max_by("amount", "seq").alias("amount"))
           .agg(F.count("*").alias("n"), F.sum("amount").alias("s")).first())
    if lm.n != ref.n or abs(lm.s - ref.s) > 1e-6 * max(1.0, abs(ref.s)):
        raise AssertionError(f"MISMATCH: lakemerge read {lm.n} rows (sum {lm.s}), Spark dedupe {ref.n} ({ref.s})")
    echo(f"check: lakemerge merged read = Spark's own dedupe ({lm.n:,} live keys)")

    # Spark compaction: the same 5 commits written without compaction (write-only, so each bucket holds 5 runs),
    # compacted in full (every bucket rewritten as one run) by Spark tasks, restored from a copy before each timed
    # run; vs Spark deduplicating the appended Parquet and rewriting it.
    table = lm_write(name="b.c", extra_options={"write-only": "true"})
    root = table.root
    compact_rows = sum(e.file.row_count for e in table.manifests.live_entries(table.snapshot()))
    backup = os.path.join(workdir, "table-before-compaction")
    shutil.copytree(root, backup)
    c_lm = float("inf")
    for _ in range(repeat):
        shutil.rmtree(root)
        shutil.copytree(backup, root)
        t = time.perf_counter()
        sid = spark_glue.compact(spark, root, full=True)
        c_lm = min(c_lm, time.perf_counter() - t)
    compacted = Catalog(os.path.join(workdir, "wh")).get_table("b.c")
    live = list(compacted.manifests.live_entries(compacted.snapshot()))
    if sid is None or compacted.snapshot().commit_kind != "COMPACT" or len(live) != BUCKETS or \
            sum(e.file.row_count for e in live) != ref.n:
        raise AssertionError(f"full compaction did not leave one run of {ref.n:,} rows in each of {BUCKETS} buckets")
    pq_compacted = os.path.join(workdir, "parquet-compacted")

    def pq_compact():
        (spark.read.parquet(pq_out).groupBy("key")
         .agg(F.max_by(F.struct("seq", "amount", "customer"), "seq").alias("r")).select("key", "r.*")
         .write.mode("overwrite").parquet(pq_compacted))

    c_pq = _timed(pq_compact, repeat)
    results.append(dict(case="full compaction", contender="lakemerge compact(full=True)",
                        seconds=c_lm, rows=compact_rows))
    results.append(dict(case="full compaction", contender="spark parquet dedupe+rewrite", seconds=c_pq,
                        rows=rows))
    after = spark.read.format("lakemerge").load(root).agg(F.count("*").alias("n"), F.sum("amount").alias("s")).first()
    if after.n != ref.n or abs(after.s - ref.s) > 1e-6 * max(1.0, abs(ref.s)):
        raise AssertionError(f"MISMATCH after compaction: {after.n} rows (sum {after.s}), expected {ref.n}")
    echo(f"check: the compacted table reads the same ({after.n:,} live keys, {compact_rows:,} rows compacted)")
    spark.stop()
    for r in results:
        base = next(x for x in results if x["case"] == r["case"] and x["contender"].startswith("spark parquet"))
        r["ratio"] = r["seconds"] / base["seconds"]
    return results


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks spark", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="500k rows over 100k keys")
    ap.add_argument("--rows", type=int)
    ap.add_argument("--keys", type=int)
    ap.add_argument("--repeat", type=int, default=3, help="best of N timed runs per case")
    args = ap.parse_args(argv)
    rows = args.rows or (500_000 if args.quick else 5_000_000)
    keys = args.keys or (100_000 if args.quick else 1_000_000)
    workdir = tempfile.mkdtemp(prefix="lakemerge-spark-bench-")
    try:
        results = run(rows, keys, args.repeat, workdir, echo=lambda m: print(m, file=sys.stderr, flush=True))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"{'case':<36} {'contender':<32} {'seconds':>8} {'rows/s':>12} {'x parquet':>10}")
    for r in results:
        print(f"{r['case']:<36} {r['contender']:<32} {r['seconds']:>8.2f} {r['rows'] / r['seconds']:>12,.0f} "
              f"{r['ratio']:>10.2f}")
    print(f"local[2] on {os.cpu_count()} cores; best of {args.repeat}; rows/s counts input rows for writes and "
          f"compactions, output rows for reads")
    return 0


if __name__ == "__main__":
    sys.exit(main())
