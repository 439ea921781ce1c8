"""Case: upserts into a lake table -- a 5M-row table, then 4 upserts of 500k rows (half updates, half new keys),
then a full read. Same data for every contender (``workloads.upsert_workload``), tables on local disk.

Contenders (each in its own worker process, default threading):

* ``lakemerge``: a primary-key table (``bucket = 4``, key ``key``); load = ``Table.write(initial)``, each upsert
  = ``Table.write(batch)`` (merge-on-read: the upsert only writes the new rows), read = ``Table.read()``;
* ``deltalake``: ``write_deltalake`` then ``DeltaTable.merge(batch, "t.key = s.key").when_matched_update_all()
  .when_not_matched_insert_all().execute()`` (copy-on-write of the touched files), read = ``to_pyarrow_table()``;
* ``pyiceberg``: a SQL catalog on sqlite, ``append`` then ``Table.upsert(batch, join_cols=["key"])``, read =
  ``scan().to_arrow()``.

Timed separately: the initial load, the 4 upserts together, the full read. The read is checked against an
independent NumPy reference (last write of each key wins); other contenders are also compared with lakemerge's
result. A contender whose load + upserts + read exceeds --slow-limit seconds is timed once.

Worker: ``python -m benchmarks.upsert_bench CONTENDER --workdir D [--repeat N] [--quick]``.
"""
from __future__ import annotations

import argparse
import os
import shutil
import time

import numpy as np
import pyarrow as pa

from benchmarks.harness import Row, assert_same_rows, current_rss_mb, emit, load_table, peak_rss_mb, save_table
from benchmarks.workloads import SCHEMA, upsert_expected, upsert_workload

CONTENDERS = ["lakemerge", "deltalake", "pyiceberg"]
CASE_LOAD, CASE_UPSERT, CASE_READ = "upsert: initial load", "upsert: 4 upserts", "upsert: full read"
THREADS = {"lakemerge": "default (bucket thread pool)", "deltalake": "default (tokio runtime)",
           "pyiceberg": "default (pyarrow pool)"}


def sizes(quick: bool) -> dict:
    f = 10 if quick else 1
    return {"initial_rows": 5_000_000 // f, "batches": 4, "batch_rows": 500_000 // f}


class LakemergeLake:
    def __init__(self, root: str):
        from engine import Catalog

        self.root = root
        cat = Catalog(root)
        cat.create_database("db")
        self.table = cat.create_table("db.t", SCHEMA, primary_key=["key"], options={"bucket": "4"})

    def load(self, t: pa.Table) -> None:
        self.table.write(t)

    def upsert(self, t: pa.Table) -> None:
        self.table.write(t)

    def read(self) -> pa.Table:
        from engine import Catalog

        return Catalog(self.root).get_table("db.t").read()


class DeltaLake:
    def __init__(self, root: str):
        self.path = os.path.join(root, "t")

    def load(self, t: pa.Table) -> None:
        from deltalake import write_deltalake

        write_deltalake(self.path, t)

    def upsert(self, t: pa.Table) -> None:
        from deltalake import DeltaTable

        (DeltaTable(self.path).merge(t, predicate="t.key = s.key", source_alias="s", target_alias="t")
         .when_matched_update_all().when_not_matched_insert_all().execute())

    def read(self) -> pa.Table:
        from deltalake import DeltaTable

        return DeltaTable(self.path).to_pyarrow_table()


class IcebergLake:
    def __init__(self, root: str):
        from pyiceberg.catalog.sql import SqlCatalog

        os.makedirs(root, exist_ok=True)
        self.catalog = SqlCatalog("bench", uri=f"sqlite:///{os.path.join(root, 'catalog.db')}",
                                  warehouse=f"file://{os.path.abspath(root)}")
        self.catalog.create_namespace("db")
        self.table = self.catalog.create_table("db.t", schema=SCHEMA)

    def load(self, t: pa.Table) -> None:
        self.table.append(t)

    def upsert(self, t: pa.Table) -> None:
        self.table.upsert(t, join_cols=["key"])

    def read(self) -> pa.Table:
        return self.catalog.load_table("db.t").scan().to_arrow()


OPEN = {"lakemerge": LakemergeLake, "deltalake": DeltaLake, "pyiceberg": IcebergLake}


def run_once(contender: str, root: str, w) -> tuple[float, float, float, pa.Table]:
    lake = OPEN[contender](root)
    t0 = time.perf_counter()
    lake.load(w.initial)
    t1 = time.perf_counter()
    for b in w.batches:
        lake.upsert(b)
    t2 = time.perf_counter()
    out = lake.read()
    return t1 - t0, t2 - t1, time.perf_counter() - t2, out


def check_reference(w, out: pa.Table, who: str) -> None:
    keys, seq = upsert_expected(w)
    got = out.sort_by("key")
    if not (np.array_equal(got.column("key").to_numpy(), keys) and np.array_equal(got.column("seq").to_numpy(), seq)):
        raise SystemExit(f"MISMATCH: {who}'s read differs from the NumPy reference (keys / last write per key)")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("contender", choices=CONTENDERS)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--ref", help="lakemerge: write its read result here; others: compare with it")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--slow-limit", type=float, default=120.0)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)

    w = upsert_workload(**sizes(args.quick))
    baseline = current_rss_mb()
    root = os.path.join(os.path.abspath(args.workdir), "upsert-" + args.contender)
    shutil.rmtree(root, ignore_errors=True)
    small = upsert_workload(initial_rows=20_000, batches=1, batch_rows=2_000)
    run_once(args.contender, os.path.join(root, "warmup"), small)   # imports, kernels, first-call set-up
    loads, upserts, reads, out = [], [], [], None
    for i in range(args.repeat):
        wh = os.path.join(root, f"rep{i}")
        a, b, c, out = run_once(args.contender, wh, w)
        loads.append(a), upserts.append(b), reads.append(c)
        if a + b + c > args.slow_limit or i + 1 == args.repeat:
            break
        shutil.rmtree(wh, ignore_errors=True)
    peak = peak_rss_mb()
    disk_mb = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(os.path.join(root, f"rep{i}"))
                  for f in fs) / 2**20
    check_reference(w, out, args.contender)
    if args.contender == "lakemerge" and args.ref:
        save_table(out, args.ref)
    elif args.ref and os.path.exists(args.ref):
        assert_same_rows(out, load_table(args.ref), SCHEMA, args.contender)
    shutil.rmtree(root, ignore_errors=True)
    note = f"{out.num_rows:,} rows read, = NumPy reference; table {disk_mb:.0f} MB on disk"
    common = dict(contender=args.contender, peak_rss_mb=peak, baseline_rss_mb=baseline,
                  threads=THREADS[args.contender], note=note, baseline=args.contender == "lakemerge")
    n_up = sum(b.num_rows for b in w.batches)
    emit([Row(case=CASE_LOAD, times=loads, rows=w.initial.num_rows, **common),
          Row(case=CASE_UPSERT, times=upserts, rows=n_up, **common),
          Row(case=CASE_READ, times=reads, rows=out.num_rows, **common)])


if __name__ == "__main__":
    from benchmarks.harness import run_worker_main
    run_worker_main(main)
