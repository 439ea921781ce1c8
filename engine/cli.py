"""The ``lakemerge`` command line. For now: ``lakemerge demo``.

Exit codes: 0 ok, 1 failure (a LakemergeError, printed as one line), 2 usage.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa


def _change_batch(rng: np.random.Generator, start_id: int, n_new: int, n_updates: int, n_deletes: int,
                  existing_max: int, commit: int) -> tuple[pa.Table, pa.Table]:
    new_ids = np.arange(start_id, start_id + n_new, dtype=np.int64)
    upd_ids = rng.choice(existing_max, size=min(n_updates, existing_max), replace=False).astype(np.int64) \
        if existing_max else np.empty(0, np.int64)
    ids = np.concatenate([new_ids, upd_ids])
    n = len(ids)
    upserts = pa.table({
        "dt": pa.array(np.where(ids % 3 == 0, "2024-01-01", np.where(ids % 3 == 1, "2024-01-02", "2024-01-03"))),
        "order_id": ids,
        "customer": pa.array([f"c{int(i) % 997:04d}" for i in ids]),
        "amount": rng.random(n) * 100,
        "version": pa.array(np.full(n, commit, dtype=np.int32)),
    })
    del_ids = rng.choice(existing_max, size=min(n_deletes, existing_max), replace=False).astype(np.int64) \
        if existing_max else np.empty(0, np.int64)
    deletes = pa.table({
        "dt": pa.array(np.where(del_ids % 3 == 0, "2024-01-01",
                                np.where(del_ids % 3 == 1, "2024-01-02", "2024-01-03"))),
        "order_id": del_ids,
    })
    return upserts, deletes


def demo(args) -> int:
    from engine import Catalog
    from kernels import hashing, keys, merge

    warehouse = args.warehouse or os.path.join(tempfile.mkdtemp(prefix="lakemerge-demo-"), "warehouse")
    t0 = time.perf_counter()
    for module in (hashing, keys, merge):
        module.warm_up()
    try:
        from kernels import lookup
        lookup.warm_up()
    except ImportError:
        pass
    print(f"kernels ready (Numba compile or cache load): {time.perf_counter() - t0:.2f} s")

    catalog = Catalog(warehouse)
    catalog.create_database("demo", ignore_if_exists=True)
    name = f"demo.orders_{int(time.time())}"
    schema = pa.schema([("dt", pa.string()), ("order_id", pa.int64()), ("customer", pa.string()),
                        ("amount", pa.float64()), ("version", pa.int32())])
    table = catalog.create_table(name, schema, primary_key=["dt", "order_id"], partition_keys=["dt"],
                                 options={"bucket": "4", "merge-engine": "deduplicate"})
    print(f"table {name} at {table.root}")
    rng = np.random.default_rng(42)
    next_id, written, total_t = 0, 0, 0.0
    per_commit = args.rows // args.commits
    for c in range(1, args.commits + 1):
        upserts, deletes = _change_batch(rng, next_id, per_commit // 2, per_commit // 2, per_commit // 50,
                                         next_id, c)
        next_id += per_commit // 2
        t = time.perf_counter()
        with table.new_write() as w:
            w.write(upserts)
            if deletes.num_rows:
                w.delete(deletes)
            sid = table.commit(w.prepare_commit())
        dt = time.perf_counter() - t
        total_t += dt
        written += upserts.num_rows + deletes.num_rows
        print(f"  commit {c}: snapshot {sid}, {upserts.num_rows:,} upserts + {deletes.num_rows:,} deletes "
              f"in {dt:.2f} s")
    print(f"ingested {written:,} change rows in {total_t:.2f} s ({written / max(total_t, 1e-9):,.0f} rows/s)")
    t = time.perf_counter()
    result = table.read()
    dt = time.perf_counter() - t
    print(f"merged read: {result.num_rows:,} live rows in {dt:.2f} s ({result.num_rows / max(dt, 1e-9):,.0f} rows/s)")
    first = table.snapshots()[0].id
    t = time.perf_counter()
    old = table.read(snapshot_id=first)
    print(f"time travel to snapshot {first}: {old.num_rows:,} rows in {time.perf_counter() - t:.2f} s")
    t = time.perf_counter()
    probe = result.slice(0, min(1000, result.num_rows)).select(["dt", "order_id"])
    found = table.lookup(probe)
    print(f"lookup of {probe.num_rows:,} keys: {found.num_rows:,} found in {time.perf_counter() - t:.3f} s")
    one_day = table.read(filter=[("dt", "=", "2024-01-02")])
    print(f"filtered read dt=2024-01-02: {one_day.num_rows:,} rows")
    print(result.sort_by([("dt", "ascending"), ("order_id", "ascending")]).slice(0, 5).to_pandas()
          .to_string(index=False) if _has_pandas() else result.slice(0, 5))
    return 0


def _has_pandas() -> bool:
    try:
        import pandas  # noqa: F401
        return True
    except ImportError:
        return False


def main(argv=None) -> int:
    from engine.errors import LakemergeError

    parser = argparse.ArgumentParser(prog="lakemerge", description="Paimon primary-key tables in Python")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("demo", help="create a table, upsert a change stream in several commits, read it back")
    p.add_argument("--warehouse", default=os.environ.get("LAKEMERGE_WAREHOUSE"),
                   help="warehouse directory (default: a new temporary directory)")
    p.add_argument("--rows", type=int, default=1_000_000, help="change rows in total")
    p.add_argument("--commits", type=int, default=5, help="number of commits")
    args = parser.parse_args(argv)
    try:
        return demo(args)
    except LakemergeError as e:
        if args.debug:
            raise
        print(f"error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
