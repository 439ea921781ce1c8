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
