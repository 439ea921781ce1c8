"""The Spark demo behind ``lakemerge demo``: an order CDC stream upserted through the data source.

Steps (each a function of a ``DemoRun``, so compaction / changelog steps slot into ``STEPS``):
create the table (changelog-producer=lookup, so every commit also produces a real changelog) -> generate and
upsert CDC batches (inserts, updates, deletes across partitions) -> read the merged table through Spark and check
it against the engine -> time travel -> a pushed-down point query -> compact with Spark tasks (one COMPACT
snapshot) -> stream the changelog through Spark (``readStream``, AvailableNow) and summarize it -> the
``$snapshots`` system table through Spark.
"""
from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field

import pyarrow as pa

SCHEMA = pa.schema([("dt", pa.string()), ("order_id", pa.int64()), ("customer", pa.string()),
                    ("amount", pa.float64()), ("status", pa.string())])
DAYS = ("2024-01-01", "2024-01-02", "2024-01-03")


@dataclass
class DemoRun:
    spark: object
    warehouse: str
    rows: int
    commits: int
    echo: object
    table: object = None
    result: dict = field(default_factory=lambda: {"snapshots": [], "timings": {}})

    def timed(self, name: str, fn):
        t = time.perf_counter()
        out = fn()
        self.result["timings"][name] = round(time.perf_counter() - t, 3)
        return out


def cdc_batch(spark, commit: int, per_commit: int):
    """Commit ``commit`` (1-based) of the change stream: 70% new orders, 25% updates and 5% deletes of orders
    from earlier commits. Order ids are unique within a batch; the partition (dt) follows from the order id, so
    an update or delete lands where the order lives. Column ``op`` holds the row kind."""
    from pyspark.sql import functions as F
    n_ins = max(1, per_commit * 70 // 100)
    first = (commit - 1) * n_ins
    day = F.element_at(F.array(*[F.lit(d) for d in DAYS]), (F.col("order_id") % len(DAYS) + 1).cast("int"))

    def rows(ids, op, status, amount):
        return ids.select(F.col("id").alias("order_id")).select(
            day.alias("dt"), "order_id", F.concat(F.lit("c"), (F.col("order_id") % 997).cast("string")).alias("customer"),
            amount.alias("amount"), F.lit(status).alias("status"), F.lit(op).alias("op"))

    parts = [rows(spark.range(first, first + n_ins), "+I", "new", F.round(F.col("order_id") % 1000 * 1.5, 2))]
    if commit > 1:
        earlier = spark.range(0, first)
        n_upd, n_del = per_commit * 25 // 100, per_commit * 5 // 100
        upd = earlier.where(F.col("id") % 4 == commit % 4).limit(n_upd)
        dele = earlier.where((F.col("id") % 4 == (commit + 2) % 4) & (F.col("id") % 3 == 0)).limit(n_del)
        parts.append(rows(upd, "+U", f"shipped-{commit}", F.round(F.col("order_id") % 1000 * 1.5 + commit, 2)))
        parts.append(rows(dele, "-D", "cancelled", F.lit(0.0)))
    out = parts[0]
    for p in parts[1:]:
        out = out.unionByName(p)
    return out


def step_create(run: DemoRun) -> None:
    from engine import Catalog
    cat = Catalog(run.warehouse)
    cat.create_database("demo", ignore_if_exists=True)
    name = f"demo.orders_{int(time.time() * 1000)}"
    run.table = cat.create_table(name, SCHEMA, primary_key=["dt", "order_id"], partition_keys=["dt"],
                                 options={"bucket": "4", "changelog-producer": "lookup"})
    run.result.update(table=name, path=run.table.root)
    run.echo(f"table {name} at {run.table.root} (4 buckets, partitioned by dt, changelog-producer=lookup)")


def step_upserts(run: DemoRun) -> None:
    import spark_glue
    per_commit = max(1, run.rows // run.commits)
    total = 0.0
    for c in range(1, run.commits + 1):
        batch = cdc_batch(run.spark, c, per_commit).cache()
        counts = {r["op"]: r["count"] for r in batch.groupBy("op").count().collect()}
        t = time.perf_counter()
        sid = spark_glue.write_table(batch, run.table.root, **{"rowkind.column": "op"})
        dt = time.perf_counter() - t
        total += dt
        batch.unpersist()
        run.result["snapshots"].append(sid)
        run.echo(f"  commit {c}: snapshot {sid}: {counts.get('+I', 0):,} inserts, {counts.get('+U', 0):,} updates, "
                 f"{counts.get('-D', 0):,} deletes in {dt:.2f} s")
    run.result["timings"]["upserts"] = round(total, 3)


def step_read(run: DemoRun) -> None:
    df = run.spark.read.format("lakemerge").load(run.table.root)
    n = run.timed("merged_read", df.count)
    engine_rows = run.table.read().num_rows
    if n != engine_rows:
        raise AssertionError(f"Spark read {n} rows but the engine reads {engine_rows}")
    run.result["rows"] = n
    run.echo(f"merged read through Spark: {n:,} live orders in {run.result['timings']['merged_read']:.2f} s "
             f"(= engine read)")
    by_status: dict[str, int] = {}
    for r in df.groupBy("status").count().collect():
        by_status[r["status"].split("-")[0]] = by_status.get(r["status"].split("-")[0], 0) + r["count"]
    run.echo(f"  by status: {dict(sorted(by_status.items()))}")
    sample = df.orderBy("dt", "order_id").limit(5).collect()
    run.result["sample"] = [r.asDict() for r in sample]
    for r in sample:
        run.echo(f"  {r.dt} order {r.order_id:>7} {r.customer:>5} {r.amount:>8.2f} {r.status}")


def step_time_travel(run: DemoRun) -> None:
    first = run.result["snapshots"][0]
    n = run.timed("time_travel_read", run.spark.read.format("lakemerge").option("scan.snapshot-id", first)
                  .load(run.table.root).count)
    run.result["rows_at_first_snapshot"] = n
    run.echo(f"time travel to snapshot {first}: {n:,} orders")


def step_point_query(run: DemoRun) -> None:
    import spark_glue
    df = spark_glue.read_table(run.spark, run.table.root, prune=True).where(
        "dt = '2024-01-02' AND order_id = 1")
    rows = run.timed("point_query", df.collect)
    run.echo(f"point query (partition + bucket pruned, {df.rdd.getNumPartitions()} task): {[r.asDict() for r in rows]}")


def step_compact(run: DemoRun) -> None:
    import spark_glue
    table = run.table
    before = len(table.manifests.live_entries(table.snapshot()))
    sid = run.timed("compaction", lambda: spark_glue.compact(run.spark, table.root, full=True))
    after = len(table.manifests.live_entries(table.snapshot()))
    run.result["compact_snapshot"] = sid
    took = run.result["timings"]["compaction"]
    if sid is None:
        run.echo(f"Spark compaction (full): nothing to do, every bucket already is one top-level run ({before} "
                 f"files; the writers compact at each commit) -- checked in {took:.2f} s")
    else:
        run.echo(f"Spark compaction (full): snapshot {sid} (COMPACT), {before} files -> {after} in {took:.2f} s")


def step_changelog(run: DemoRun) -> None:
    """Stream every change since the first snapshot through Spark (a bounded AvailableNow query; each micro-batch
    is summarized by row kind in foreachBatch) and check the summary against the engine's read_changes."""
    import spark_glue
    kinds: dict[str, int] = {}
    batches = []

    def summarize(df, batch_id):
        batches.append(batch_id)
        for r in df.groupBy("_row_kind").count().collect():
            kinds[r["_row_kind"]] = kinds.get(r["_row_kind"], 0) + r["count"]

    def stream():
        q = (spark_glue.read_stream(run.spark, run.table.root, **{"scan.mode": "from-snapshot", "scan.snapshot-id": 1})
             .writeStream.foreachBatch(summarize).trigger(availableNow=True).start())
        q.awaitTermination()
    run.timed("changelog_stream", stream)
    engine = run.table.read_changes(0).column("_row_kind").to_pylist()
    expected = {k: engine.count(k) for k in set(engine)}
    if kinds != expected:
        raise AssertionError(f"Spark streamed changes {kinds} but the engine reads {expected}")
    run.result["changelog"] = dict(sorted(kinds.items()))
    run.echo(f"changelog streamed through Spark (snapshots 1..{run.table.latest_snapshot_id()}, {len(batches)} "
             f"micro-batch): {sum(kinds.values()):,} changes {dict(sorted(kinds.items()))} in "
             f"{run.result['timings']['changelog_stream']:.2f} s (= engine read_changes)")


def step_snapshots(run: DemoRun) -> None:
    rows = (run.spark.read.format("lakemerge").load(run.table.root + "$snapshots")
            .select("snapshot_id", "commit_kind", "delta_record_count").orderBy("snapshot_id").collect())
    run.result["snapshot_kinds"] = {r.snapshot_id: r.commit_kind for r in rows}
    run.echo("$snapshots through Spark: " + ", ".join(f"{r.snapshot_id} {r.commit_kind}" for r in rows))


STEPS = [step_create, step_upserts, step_read, step_time_travel, step_point_query, step_compact, step_changelog,
         step_snapshots]


def warm_up_kernels() -> None:
    """Compile or load every kernel module's Numba code in this process, which also fills the on-disk cache that
    Spark's Python workers load instead of compiling each on its own (spark-notes §3)."""
    import importlib
    for name in ("hashing", "keys", "merge", "lookup"):  # what the demo uses (no aggregation engine)
        module = importlib.import_module(f"kernels.{name}")
        if hasattr(module, "warm_up"):
            module.warm_up()


def run_demo(warehouse: str, rows: int = 200_000, commits: int = 4, echo=print, *, spark=None) -> dict:
    """Run the demo in ``warehouse`` on ``spark`` (default: a new local[2] session, stopped at the end).
    Returns {"table", "path", "snapshots", "rows", "rows_at_first_snapshot", "sample", "compact_snapshot",
    "changelog", "snapshot_kinds", "timings"}."""
    import spark_glue
    from spark_glue.session import local_session
    own = spark is None
    t = time.perf_counter()
    warm = threading.Thread(target=warm_up_kernels, daemon=True)
    warm.start()  # compiles (or loads) the Numba kernels while the JVM starts; the workers then load the cache
    if own:
        spark = local_session("lakemerge-demo", fast_start=True)
    spark_glue.register(spark)
    warm.join()
    os.makedirs(warehouse, exist_ok=True)
    run = DemoRun(spark, warehouse, rows, commits, echo)
    run.result["timings"]["spark_start"] = round(time.perf_counter() - t, 3)
    try:
        for step in STEPS:
            step(run)
        run.result["timings"]["total"] = round(time.perf_counter() - t, 3)
        echo("timings (s): " + ", ".join(f"{k} {v:.2f}" for k, v in run.result["timings"].items()))
    finally:
        if own:
            spark.stop()
    return run.result
