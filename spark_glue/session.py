"""A local SparkSession configured for lakemerge jobs (demo, benchmarks)."""
from __future__ import annotations

import os
import sys

PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def local_session(app: str = "lakemerge", cores: int = 2, *, fast_start: bool = False, driver_memory: str = "2g"):
    """``local[cores]`` with the UI off, few shuffle partitions, UTC, Arrow batches of 64k rows and this
    checkout importable by the Python workers. ``fast_start`` trades JIT quality for start-up time (tests)."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    path = os.environ.get("PYTHONPATH", "")
    if PROJECT_ROOT not in path.split(os.pathsep):
        os.environ["PYTHONPATH"] = PROJECT_ROOT + (os.pathsep + path if path else "")
    builder = (SparkSession.builder.master(f"local[{cores}]").appName(app)
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", str(cores)).config("spark.default.parallelism", str(cores))
               .config("spark.driver.memory", driver_memory)
               .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.sql.execution.arrow.maxRecordsPerBatch", "65536")
               .config("spark.executorEnv.PYTHONPATH", os.environ["PYTHONPATH"]))
    if fast_start:
        builder = builder.config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
