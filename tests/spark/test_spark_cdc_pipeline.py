"""A CDC pipeline end to end, checked against a dict-per-key model: CDC files (row kind, sequence field) streamed
by Spark into table A (partial-update / aggregation / deduplicate with a changelog producer) while another thread
compacts A, then A's changelog streamed into table B, which must end equal to A (one local SparkSession)."""
from __future__ import annotations

import os
import random
import threading
import zlib

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import spark_glue
from engine import Catalog
from engine.errors import CommitConflict

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([pa.field("p", pa.string(), False), pa.field("k", pa.int64(), False), ("s", pa.int64()),
                    ("a", pa.int64()), ("g", pa.int64()), ("b", pa.int64()), ("op", pa.string())])
DDL = "p STRING, k BIGINT, s BIGINT, a BIGINT, g BIGINT, b BIGINT, op STRING"
VALUES = ["s", "a", "g", "b"]


def _dedup(cur, r):
    """deduplicate with sequence.field s: the record with the greatest s wins (ties: the later)."""
    if cur is not None and r["s"] < cur["s"]:
        return cur
    return dict(r)


def _groups(cur, r):
    """partial-update, fields.s.sequence-group = a, fields.g.sequence-group = b (PartialUpdateMergeFunction)."""
    row = dict(cur) if cur is not None else {c: None for c in VALUES}
    add = r["op"] in ("+I", "+U")
    for seq, fields in (("s", ["a"]), ("g", ["b"])):
        if r[seq] is None or (row[seq] is not None and r[seq] < row[seq]):
            continue
        row[seq] = r[seq]
        for f in fields:
            row[f] = r[f] if add else None
    return row


def _sums(cur, r):
    """aggregation: sum everywhere, retractions subtract."""
    row = dict(cur) if cur is not None else {c: None for c in VALUES}
    sign = 1 if r["op"] in ("+I", "+U") else -1
    for c in VALUES:
        if r[c] is not None:
            row[c] = sign * r[c] if row[c] is None else row[c] + sign * r[c]
    return row


ENGINES = {
    "deduplicate": (_dedup, {"sequence.field": "s"}),
    "groups": (_groups, {"merge-engine": "partial-update", "fields.s.sequence-group": "a",
                         "fields.g.sequence-group": "b"}),
    "sums": (_sums, {"merge-engine": "aggregation", **{f"fields.{c}.aggregate-function": "sum" for c in VALUES}}),
}


def _cdc_files(src, model_fn, seed, n_files=6):
    """Write ``n_files`` CDC parquet files (one micro-batch each) and return the model's rows afterwards. A key's
    retractions come only while it is present, and without values Paimon's merge would treat differently
    depending on which records one merge sees (a buffer, a compaction's runs), which the concurrent compactions
    make vary."""
    rnd = random.Random(seed)
    model, seq = {}, 100
    for i in range(n_files):
        rows = []
        for _ in range(rnd.randint(3, 8)):
            key = (rnd.choice("xy"), rnd.randint(0, 4))
            live = key in model and (model_fn is not _dedup or model[key]["op"] in ("+I", "+U"))
            op = rnd.choice(["+I", "+U", "-U", "-D"] if live else ["+I", "+U"])
            seq += 1
            r = {"p": key[0], "k": key[1], "op": op, "s": seq if (rnd.random() < 0.8 or not live) else seq - 50,
                 "a": rnd.choice([None, rnd.randint(1, 9)]), "g": rnd.choice([None, seq]),
                 "b": rnd.randint(1, 9)}
            if model_fn is _groups and r["g"] is None:
                r["b"] = None  # Paimon keeps it when the record is merged alone, or opens a merge as a retraction
            if model_fn is _dedup and op in ("-U", "-D"):
                r["s"] = seq  # a retraction that loses to the row it retracts is a no-op only when kept
            rows.append(r)
            model[key] = model_fn(model.get(key), r)
        path = src / f"{i:03d}.parquet"
        pq.write_table(pa.Table.from_pylist(rows, SCHEMA), str(path))
        # Spark's file source takes files in modification-time order: make it the name order (equal times would
        # let a later file's -D commit first, be dropped by a top-level compaction, and not retract the older
        # record that arrives after it -- Paimon's LSM semantics, which the model does not follow)
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))
    if model_fn is _dedup:
        return {k: v for k, v in model.items() if v["op"] in ("+I", "+U")}
    return model


def _rows(table):
    return sorted(tuple(r[c] for c in ("p", "k", *VALUES)) for r in table.read().to_pylist())


@pytest.mark.slow
@pytest.mark.parametrize("engine,producer", [("deduplicate", "lookup"), ("groups", "lookup"),
                                             ("sums", "lookup"), ("groups", "full-compaction"),
                                             ("deduplicate", "input")])
def test_cdc_stream_through_two_tables_equals_the_model(spark, tmp_path, engine, producer):
    model_fn, opts = ENGINES[engine]
    src = tmp_path / "src"
    src.mkdir()
    want = _cdc_files(src, model_fn, seed=zlib.crc32(f"{engine}-{producer}".encode()) % 1000)
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    a = cat.create_table("db.a", SCHEMA, ["p", "k"], ["p"],
                         {"bucket": "2", "changelog-producer": producer, "rowkind.field": "op",
                          "num-sorted-run.compaction-trigger": "2", **opts,
                          **({"full-compaction.delta-commits": "2"} if producer == "full-compaction" else {})})
    b = cat.create_table("db.b", SCHEMA.remove(SCHEMA.get_field_index("op")), ["p", "k"], ["p"], {"bucket": "1"})
    stop = threading.Event()
    compactions = []

    def compact_meanwhile():
        other = cat.get_table("db.a")
        while not stop.is_set():
            try:
                compactions.append(other.compact())
            except CommitConflict:
                pass
            stop.wait(0.2)

    thread = threading.Thread(target=compact_meanwhile)
    thread.start()
    try:
        q = (spark.readStream.schema(DDL).option("maxFilesPerTrigger", 1).parquet(str(src))
             .writeStream.format("lakemerge").option("checkpointLocation", str(tmp_path / "ck_a"))
             .trigger(availableNow=True).start(a.root))
        q.awaitTermination(300)
        assert q.exception() is None
    finally:
        stop.set()
        thread.join()
    a.compact(full=True)
    got = _rows(a)
    assert got == sorted((p, k, *[v[c] for c in VALUES]) for (p, k), v in want.items())
    if producer == "input":
        return  # the input changelog holds out-of-order records the table dropped: it does not fold to A
    q = (spark_glue.read_stream(spark, a.root, **{"scan.mode": "from-snapshot", "scan.snapshot-id": 1,
                                                  "consumer-id": "to_b"})
         .drop("op").writeStream.format("lakemerge").option("checkpointLocation", str(tmp_path / "ck_b"))
         .option("rowkind.column", "_row_kind").trigger(availableNow=True).start(b.root))
    q.awaitTermination(300)
    assert q.exception() is None
    assert _rows(b) == got


@pytest.mark.parametrize("sink,buckets", [("format", "1"), ("foreachBatch", "1"), ("format", "3")])
def test_stream_of_several_snapshots_into_a_table_keeps_each_keys_order(spark, tmp_path, sink, buckets):
    """A micro-batch reaching into several snapshots hands each key's changes on in snapshot order: piped into
    table B by a writeStream (whose tasks write the same bucket on separate sequence lanes), B ends equal to A.
    Read as one Spark partition per snapshot, key 9's update of snapshot 2 (first row of its task) lost to its
    insert of snapshot 1 (tenth row of the other task). With 3 buckets the batch is one partition per bucket."""
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    schema = pa.schema([pa.field("k", pa.int64(), False), ("v", pa.string())])
    a = cat.create_table("db.a", schema, ["k"], [], {"bucket": buckets, "changelog-producer": "input"})
    b = cat.create_table("db.b", schema, ["k"], [], {"bucket": "1"})
    a.write(pa.table({"k": list(range(10)), "v": ["one"] * 10}, schema=schema))
    a.write(pa.table({"k": [9], "v": ["two"]}, schema=schema))
    a.write(pa.table({"k": [0, 4, 9], "v": ["three"] * 3}, schema=schema))
    changes = spark_glue.read_stream(spark, a.root, **{"scan.mode": "from-snapshot", "scan.snapshot-id": 1})
    if sink == "format":
        w = changes.writeStream.format("lakemerge").option("rowkind.column", "_row_kind")
    else:  # write_table under it: one task per bucket after a shuffle of the micro-batch
        w = changes.writeStream.foreachBatch(spark_glue.stream_batch_writer(b.root, "mirror",
                                                                            **{"rowkind.column": "_row_kind"}))
    q = w.option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start(
        b.root if sink == "format" else None)
    q.awaitTermination(300)
    assert q.exception() is None
    assert sorted(b.read().to_pylist(), key=str) == sorted(a.read().to_pylist(), key=str)
