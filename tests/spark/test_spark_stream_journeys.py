"""Streaming journeys through Spark: a CDC pipeline's readStream across restarts from its checkpoint, expiry,
rollbacks, empty tables and branches, and writeStream pipelines (one local SparkSession, conftest.py)."""
from __future__ import annotations

import glob
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import spark_glue
from engine import Catalog

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([pa.field("p", pa.string(), False), pa.field("k", pa.int64(), False), ("v", pa.string())])


def _data(*rows):
    return pa.table({"p": [r[0] for r in rows], "k": [r[1] for r in rows], "v": [r[2] for r in rows]}, schema=SCHEMA)


def _table(tmp_path, name="t", **options):
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db", ignore_if_exists=True)
    return cat.create_table(f"db.{name}", SCHEMA, ["p", "k"], ["p"], {"bucket": "1", **options})


def _run(spark, root, out, ck, **options):
    """One AvailableNow run of the query (started again from checkpoint ``ck``); raises the query's error."""
    q = (spark_glue.read_stream(spark, root, **options).writeStream.format("parquet")
         .option("checkpointLocation", ck).option("path", out).trigger(availableNow=True).start())
    q.awaitTermination(120)
    if q.exception() is not None:
        raise RuntimeError(str(q.exception()))


def _out(out):
    files = glob.glob(os.path.join(out, "*.parquet"))
    rows = pa.concat_tables([pq.ParquetFile(f).read() for f in files]).to_pylist() if files else []
    return sorted((r["_row_kind"], r["p"], r["k"], r["v"]) for r in rows)


def _changes(t, start, end=None):
    return sorted((r["_row_kind"], r["p"], r["k"], r["v"]) for r in t.read_changes(start, end).to_pylist())


def test_stream_survives_a_rollback_below_its_checkpoint_only_with_a_clear_error(spark, tmp_path):
    """A query whose checkpoint is past the latest snapshot after a rollback must fail (as the engine's stream and
    Paimon's NextSnapshotFetcher do), not wait and then skip the snapshots committed anew under its old ids."""
    t = _table(tmp_path, **{"changelog-producer": "input"})
    for i in range(4):
        t.write(_data(("a", i, str(i))))
    out, ck = str(tmp_path / "out"), str(tmp_path / "ck")
    _run(spark, t.root, out, ck, **{"scan.mode": "from-snapshot", "scan.snapshot-id": 1})
    assert _out(out) == _changes(t, 0)
    t.rollback_to(2)
    with pytest.raises(Exception, match="has no snapshot 4: the query has read up to snapshot 4 but the latest is 2"):
        _run(spark, t.root, out, ck)
    for i in range(10, 13):  # snapshots 3, 4, 5 anew: the query has delivered up to (the old) 4
        t.write(_data(("a", i, str(i))))
    with pytest.raises(Exception, match="has no snapshot 4: the snapshot the query read up to was replaced"):
        _run(spark, t.root, out, ck)
    assert _out(out) == _changes(t, 0, 2) + [("+I", "a", 2, "2"), ("+I", "a", 3, "3")]
