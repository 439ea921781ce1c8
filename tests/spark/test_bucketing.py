"""spark_glue.bucketing: Paimon's bucket as Spark expressions must equal the engine's hashing kernel exactly."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from kernels.hashing import bucket_ids

pytestmark = pytest.mark.spark

EDGES = [0, 1, -1, 2, -2, 2**31 - 1, -2**31, 2**31, -2**31 - 1, 2**32, 2**63 - 1, -2**63, 123456789, -987654321]


BUCKETS = [1, 4, 16, 7, 1000]


@pytest.mark.parametrize("arrow_type, spark_type, bits", [(pa.int64(), "bigint", 64), (pa.int32(), "int", 32)])
def test_bucket_expression_equals_the_kernel(spark, arrow_type, spark_type, bits):
    from spark_glue.bucketing import with_bucket_column

    rng = np.random.default_rng(bits)
    lo, hi = -2**(bits - 1), 2**(bits - 1) - 1
    values = [v for v in EDGES if lo <= v <= hi] + rng.integers(lo, hi, 4000, dtype=np.int64, endpoint=True).tolist()
    df = spark.createDataFrame(pa.table({"k": pa.array(values, arrow_type)}).to_pandas())
    for b in BUCKETS:
        df = with_bucket_column(df, "k", arrow_type, b, f"b{b}")
    rows = df.collect()
    keys = pa.array([r["k"] for r in rows], arrow_type)
    for b in BUCKETS:
        assert [r[f"b{b}"] for r in rows] == bucket_ids([keys], b).tolist(), f"{b} buckets"


def test_other_key_types_fall_back_to_the_kernel(spark):
    from spark_glue.bucketing import with_bucket_column

    df = spark.createDataFrame([("a",)], "k string")
    assert with_bucket_column(df, "k", pa.string(), 4, "b") is None


def test_distribute_by_bucket_puts_each_bucket_in_one_task(spark, tmp_path):
    """With the JVM expression (one BIGINT key, no partitions) every bucket lands in exactly one Spark partition."""
    from engine import Catalog
    from spark_glue.api import distribute_by_bucket

    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    t = cat.create_table("db.t", pa.schema([("k", pa.int64()), ("v", pa.string())]), primary_key=["k"],
                         options={"bucket": "8"})
    df = spark.range(0, 5000).selectExpr("id * 7919 - 20000 AS k", "CAST(id AS STRING) AS v")
    parts = distribute_by_bucket(df, t.root, num_tasks=3).rdd.glom().map(lambda rows: [r.k for r in rows]).collect()
    owner = {}
    for task, keys in enumerate(parts):
        for b in bucket_ids([pa.array(keys, pa.int64())], 8).tolist():
            assert owner.setdefault(b, task) == task, f"bucket {b} is split across tasks"
    assert sum(len(p) for p in parts) == 5000


def test_distribute_by_bucket_of_a_postpone_table_uses_each_partitions_count(spark, tmp_path):
    """Postpone table: each (partition, bucket) lands in one task, the bucket hashed with the partition's own count
    (given, else the latest snapshot's, else postpone.default-bucket-num); partitions keyed as the writer keys them
    (a DATE partition here)."""
    import datetime

    from engine import Catalog
    from engine.meta.binary_row import serialize_row
    from spark_glue.api import distribute_by_bucket

    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    schema = pa.schema([("d", pa.date32()), ("k", pa.int64())])
    t = cat.create_table("db.t", schema, primary_key=["d", "k"], partition_keys=["d"],
                         options={"bucket": "-2", "postpone.default-bucket-num": "2"})
    days = [datetime.date(2024, 1, i) for i in (1, 2, 3)]
    t.write(pa.table({"d": [days[2]] * 3, "k": [1, 2, 3]}, schema=schema))  # day 3: 2 buckets, from the table
    types = t.schema.types_of(["d"])
    given = {serialize_row([days[0]], types): 5}  # day 1: given; day 2: the default (2)
    expected = {days[0]: 5, days[1]: 2, days[2]: 2}
    df = spark.range(0, 3000).selectExpr("date_add(DATE'2024-01-01', CAST(id % 3 AS INT)) AS d", "id * 7919 AS k")
    for counts in (given, None):
        placed = distribute_by_bucket(df, t.root, num_tasks=3, bucket_counts=counts)
        parts = placed.rdd.glom().map(lambda rows: [(r.d, r.k) for r in rows]).collect()
        owner = {}
        for task, rows in enumerate(parts):
            for d, k in rows:
                n = expected[d] if counts is not None else 2
                b = bucket_ids([pa.array([k], pa.int64())], n)[0]
                assert owner.setdefault((d, b), task) == task, f"bucket {b} of {d} is split across tasks"
        assert sum(len(p) for p in parts) == 3000
