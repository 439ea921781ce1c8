"""``python -m benchmarks.spark_breakdown [--rows N]``: where one Spark upsert commit's time goes, local[2].

One commit of N rows (default 1M, keys 0..N-1) into an unpartitioned 16-bucket table, timed step by step against
a plain Parquet append of the same DataFrame (each case best of 3 after one warm-up run):
- ``parquet append``: ``df.write.parquet`` (mode append);
- ``write_table``: ``spark_glue.write_table`` -- bucket placement, shuffle, Python writer tasks, driver commit;
- ``distribute_by_bucket -> noop``: the placement and shuffle alone (Spark's ``noop`` sink);
- ``repartitionById -> noop``: a shuffle into the same number of tasks by ``key mod tasks``, no bucket hash;
- ``distribute_by_bucket -> Python (count rows)``: placement, shuffle and handing every row to Python workers
  as Arrow batches, which only count them -- the hand-over without any engine work;
- ``scan -> Python (count rows), no shuffle``: the input handed to Python workers as it is read, with no placement
  and no shuffle -- what any Python writer pays before doing anything;
- ``engine write of N/(tasks) rows``: the engine's own work in one writer task (``TableWrite`` + commit), no
  Spark;
- ``JVM: place + sort + partitioned Parquet``: the same placement, then Spark's own ``sortWithinPartitions``
  and ``write.partitionBy("bucket").parquet`` -- a lower bound for a writer that did the work in the JVM (it
  still lacks sequence numbers, dedupe and Paimon's metadata).
"""
from __future__ import annotations

import argparse
import os
import shutil
import tempfile

from benchmarks.spark_bench import _timed


def _best(fn, repeat: int = 3) -> float:
    fn()  # warm-up: worker start, imports, Numba cache loads
    return _timed(fn, repeat)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.spark_breakdown", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    args = ap.parse_args(argv)

    import pyarrow as pa
    from pyspark.sql import functions as F

    import spark_glue
    from engine import Catalog
    from spark_glue.api import distribute_by_bucket
    from spark_glue.bucketing import with_bucket_column
    from spark_glue.session import local_session

    workdir = tempfile.mkdtemp(prefix="lakemerge-spark-breakdown-")
    try:
        spark = local_session("lakemerge-breakdown", driver_memory="3g")
        spark_glue.register(spark)
        source = os.path.join(workdir, "input")
        spark.range(0, args.rows, numPartitions=2).select(
            F.col("id").alias("key"), F.col("id").alias("seq"), (F.rand(1) * 1000).alias("amount"),
            F.concat(F.lit("customer-"), (F.col("id") % 9973).cast("string")).alias("customer")).write.parquet(source)
        schema = pa.schema([("key", pa.int64()), ("seq", pa.int64()), ("amount", pa.float64()),
                            ("customer", pa.string())])
        cat = Catalog(os.path.join(workdir, "wh"))
        cat.create_database("db")
        table = cat.create_table("db.t", schema, primary_key=["key"], options={"bucket": "16"})
        df = spark.read.parquet(source)
        tasks = min(16, spark.sparkContext.defaultParallelism)  # distribute_by_bucket's default
        half = pa.table(df.limit(args.rows // tasks).toPandas(), schema=schema)

        def count_rows(batches):
            n = sum(b.num_rows for b in batches)
            yield pa.RecordBatch.from_arrays([pa.array([n], pa.int64())], names=["n"])

        def engine_write():
            table.write(half)

        def jvm_write():
            placed = with_bucket_column(df, "key", pa.int64(), 16, "bucket")
            (placed.repartitionById(tasks, F.col("bucket") % tasks).sortWithinPartitions("bucket", "key", "seq")
             .write.mode("overwrite").partitionBy("bucket").parquet(os.path.join(workdir, "jvm")))

        cases = [
            ("parquet append", lambda: df.write.mode("append").parquet(os.path.join(workdir, "pq"))),
            ("write_table", lambda: spark_glue.write_table(df, table.root)),
            ("distribute_by_bucket -> noop",
             lambda: distribute_by_bucket(df, table.root).write.format("noop").mode("overwrite").save()),
            ("repartitionById -> noop",
             lambda: df.withColumn("s", F.pmod("key", F.lit(tasks)).cast("int")).repartitionById(tasks, "s")
             .write.format("noop").mode("overwrite").save()),
            ("distribute_by_bucket -> Python (count rows)",
             lambda: distribute_by_bucket(df, table.root).mapInArrow(count_rows, "n long").write.format("noop")
             .mode("overwrite").save()),
            ("scan -> Python (count rows), no shuffle",
             lambda: df.mapInArrow(count_rows, "n long").write.format("noop").mode("overwrite").save()),
            (f"engine write of {len(half):,} rows", engine_write),
            ("JVM: place + sort + partitioned Parquet", jvm_write),
        ]
        print(f"one commit of {args.rows:,} rows into 16 buckets, local[2], best of 3 after a warm-up")
        for label, fn in cases:
            print(f"  {label:<44} {_best(fn):6.2f} s", flush=True)
        spark.stop()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
