"""``lakemerge demo``: the Spark job of ``spark_glue.demo.run_demo`` when it can run, else an engine-only demo.

``run(warehouse, rows, commits, echo, spark)`` returns the demo's figures as a dict. pyspark is imported only
inside ``run`` (through ``spark_glue.demo``), never when this module is imported.
"""
from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable

import numpy as np
import pyarrow as pa


def load_spark_demo() -> tuple[Callable | None, str | None]:
    """``(spark_glue.demo.run_demo, None)``, or ``(None, reason)`` when it cannot be imported."""
    try:
        from spark_glue.demo import run_demo
    except ImportError as e:
        return None, f"{type(e).__name__}: {e}"
    return run_demo, None


def run(warehouse: str | None, rows: int, commits: int, echo: Callable[[str], None] = print,
        spark: bool = True) -> dict:
    """Run the demo in ``warehouse`` (default: a new temporary directory) and return its figures.

    With ``spark=True`` the Spark job ``spark_glue.demo.run_demo`` runs if it can be imported; otherwise (or with
    ``spark=False``) the engine-only demo runs. The result says which in ``"mode"``. Raises InvalidInput for
    rows < commits or commits < 1.
    """
    from engine.errors import InvalidInput

    if commits < 1 or rows < commits:
        raise InvalidInput(f"demo needs commits >= 1 and rows >= commits (got rows={rows}, commits={commits})")
    warehouse = warehouse or os.path.join(tempfile.mkdtemp(prefix="lakemerge-demo-"), "warehouse")
    if spark:
        run_demo, reason = load_spark_demo()
        if run_demo is not None:
            result = dict(run_demo(warehouse, rows, commits, echo=echo))
            result.setdefault("mode", "spark")
            result.setdefault("warehouse", warehouse)
            return result
        echo(f"Spark demo not available ({reason}); running the engine-only demo")
    return _engine_demo(warehouse, rows, commits, echo=echo)


def _change_batch(rng: np.random.Generator, start_id: int, n_new: int, n_updates: int, n_deletes: int,
                  existing_max: int, commit: int) -> tuple[pa.Table, pa.Table]:
    def day(ids):
        return pa.array(np.where(ids % 3 == 0, "2024-01-01", np.where(ids % 3 == 1, "2024-01-02", "2024-01-03")))

    new_ids = np.arange(start_id, start_id + n_new, dtype=np.int64)
    upd_ids = rng.choice(existing_max, size=min(n_updates, existing_max), replace=False).astype(np.int64) \
        if existing_max else np.empty(0, np.int64)
    ids = np.concatenate([new_ids, upd_ids])
    n = len(ids)
    upserts = pa.table({
        "dt": day(ids),
        "order_id": ids,
        "customer": pa.array([f"c{int(i) % 997:04d}" for i in ids]),
        "amount": rng.random(n) * 100,
        "version": pa.array(np.full(n, commit, dtype=np.int32)),
    })
    del_ids = rng.choice(existing_max, size=min(n_deletes, existing_max), replace=False).astype(np.int64) \
        if existing_max else np.empty(0, np.int64)
    deletes = pa.table({"dt": day(del_ids), "order_id": del_ids})
    return upserts, deletes


def _engine_demo(warehouse: str, rows: int, commits: int, echo: Callable[[str], None] = print) -> dict:
    """Engine-only demo: create a partitioned, bucketed orders table, upsert and delete a change stream in
    ``commits`` commits of ``rows // commits`` change rows, then read it merged, travel in time, look keys up and
    filter. Returns the figures (rows per second, live rows, snapshot ids)."""
    from engine import Catalog
    from kernels import hashing, keys, lookup, merge

    t0 = time.perf_counter()
    for module in (hashing, keys, merge, lookup):
        module.warm_up()
    echo(f"kernels ready (Numba compile or cache load): {time.perf_counter() - t0:.2f} s")

    catalog = Catalog(warehouse)
    catalog.create_database("demo", ignore_if_exists=True)
    name = f"demo.orders_{int(time.time() * 1000)}"
    schema = pa.schema([("dt", pa.string()), ("order_id", pa.int64()), ("customer", pa.string()),
                        ("amount", pa.float64()), ("version", pa.int32())])
    table = catalog.create_table(name, schema, primary_key=["dt", "order_id"], partition_keys=["dt"],
                                 options={"bucket": "4", "merge-engine": "deduplicate"})
    echo(f"table {name} at {table.root}")
    rng = np.random.default_rng(42)
    next_id, written, total_t = 0, 0, 0.0
    per_commit = rows // commits
    for c in range(1, commits + 1):
        upserts, deletes = _change_batch(rng, next_id, max(per_commit // 2, 1), per_commit // 2,
                                         per_commit // 50, next_id, c)
        next_id += max(per_commit // 2, 1)
        t = time.perf_counter()
        with table.new_write() as w:
            w.write(upserts)
            if deletes.num_rows:
                w.delete(deletes)
            messages = w.prepare_commit()
        sid = table.commit(messages)
        elapsed = time.perf_counter() - t
        total_t += elapsed
        written += upserts.num_rows + deletes.num_rows
        echo(f"  commit {c}: snapshot {sid}, {upserts.num_rows:,} upserts + {deletes.num_rows:,} deletes "
             f"in {elapsed:.2f} s")
    ingest_rate = written / max(total_t, 1e-9)
    echo(f"ingested {written:,} change rows in {total_t:.2f} s ({ingest_rate:,.0f} rows/s)")
    t = time.perf_counter()
    result = table.read()
    elapsed = time.perf_counter() - t
    echo(f"merged read: {result.num_rows:,} live rows in {elapsed:.2f} s "
         f"({result.num_rows / max(elapsed, 1e-9):,.0f} rows/s)")
    first = table.snapshots()[0].id
    t = time.perf_counter()
    old = table.read(snapshot_id=first)
    echo(f"time travel to snapshot {first}: {old.num_rows:,} rows in {time.perf_counter() - t:.2f} s")
    t = time.perf_counter()
    probe = result.slice(0, min(1000, result.num_rows)).select(["dt", "order_id"])
    found = table.lookup(probe)
    echo(f"lookup of {probe.num_rows:,} keys: {found.num_rows:,} found in {time.perf_counter() - t:.3f} s")
    one_day = table.read(filter=[("dt", "=", "2024-01-02")])
    echo(f"filtered read dt=2024-01-02: {one_day.num_rows:,} rows")
    return {"mode": "engine", "warehouse": warehouse, "table": name, "change_rows": written,
            "commits": commits, "ingest_rows_per_s": round(ingest_rate), "live_rows": result.num_rows,
            "first_snapshot_rows": old.num_rows, "latest_snapshot_id": table.latest_snapshot_id(),
            "lookup_found": found.num_rows, "filtered_rows": one_day.num_rows}
