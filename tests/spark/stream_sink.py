"""Test helpers: run a lakemerge readStream into a Parquet sink once (AvailableNow) and read what it delivered."""
from __future__ import annotations

import glob
import os

import pyarrow as pa
import pyarrow.parquet as pq

import spark_glue


def run_available_now(spark, root: str, out: str, checkpoint: str, **options) -> None:
    """One AvailableNow run of a readStream of table ``root`` into Parquet files under ``out``, started again from
    ``checkpoint``; raises RuntimeError with the query's error if it failed."""
    q = (spark_glue.read_stream(spark, root, **options).writeStream.format("parquet")
         .option("checkpointLocation", checkpoint).option("path", out).trigger(availableNow=True).start())
    q.awaitTermination(120)
    if q.exception() is not None:
        raise RuntimeError(str(q.exception()))


def sink_rows(out: str) -> list[dict]:
    """Every row the Parquet sink under ``out`` holds (no order), [] before the first file."""
    files = glob.glob(os.path.join(out, "*.parquet"))
    return pa.concat_tables([pq.ParquetFile(f).read() for f in files]).to_pylist() if files else []


def run_batches(spark, root: str, checkpoint: str, on_batch=None, **options) -> list[list[dict]]:
    """One AvailableNow run of a readStream of table ``root`` through foreachBatch, started again from
    ``checkpoint``: the rows of each micro-batch, in batch order (``on_batch(batch_id, rows)`` is called first and
    may raise to fail the query at that batch); raises RuntimeError with the query's error if it failed."""
    batches: list[list[dict]] = []

    def collect(df, batch_id):
        rows = [r.asDict() for r in df.collect()]
        if on_batch is not None:
            on_batch(batch_id, rows)
        batches.append(rows)

    q = (spark_glue.read_stream(spark, root, **options).writeStream.foreachBatch(collect)
         .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    try:
        q.awaitTermination(120)
    except Exception as e:  # a failed foreachBatch function fails the query and awaitTermination raises it
        raise RuntimeError(str(e)) from e
    if q.exception() is not None:
        raise RuntimeError(str(q.exception()))
    return batches
