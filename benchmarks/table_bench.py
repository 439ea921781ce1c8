"""Case (b): the merge workload as a Paimon primary-key table on local disk -- ingest, then merged read.

The 8 runs are committed one per commit into a fixed-bucket table (``bucket = 4``, primary key ``key``; ``seq`` is
an ordinary value column here, the writer assigns ``_SEQUENCE_NUMBER``, so the latest commit wins), then the whole
table is read back merged (one row per key). No compaction happens in between, so the read merges 8 sorted runs
per bucket, the same merge as case (a) plus Parquet decoding.

Contenders (each in its own worker process, default thread settings -- see ``THREADS``):

* ``lakemerge``: ``engine.Catalog`` / ``Table.write`` per run / ``Table.read()``;
* ``pypaimon``: pypaimon 2.1.0, pure Python (``write_arrow`` + ``commit`` per run; ``to_arrow(splits)``);
* ``pypaimon-native``: the same with pypaimon-rust enabled by the table options ``read.native.enabled``,
  ``scan.native-plan.enabled``, ``write.native.enabled``, ``commit.native.enabled`` = true (absolute warehouse).
  The worker instruments pypaimon's dispatch points (writer class; native commit / plan / read attempts and
  fallback reasons) and reports which paths really ran natively.

Timed: ingest = the 8 commits (table already created); read = open the table through a new catalog, plan and read
everything into one Arrow table. Files are in the OS page cache (just written). Each repetition uses a new
warehouse. Worker: ``python -m benchmarks.table_bench CONTENDER --data runs.arrow --workdir D --ref ref.arrow``.
"""
from __future__ import annotations

import argparse
import os
import shutil
import time

import numpy as np
import pyarrow as pa

from benchmarks.harness import (
    Row,
    assert_same_rows,
    current_rss_mb,
    emit,
    load_runs,
    load_table,
    peak_rss_mb,
    save_table,
)
from benchmarks.workloads import SCHEMA

CASE_INGEST = "table ingest (8 commits)"
CASE_READ = "table merged read"
NATIVE_OPTIONS = {"read.native.enabled": "true", "scan.native-plan.enabled": "true",
                  "write.native.enabled": "true", "commit.native.enabled": "true"}
THREADS = {"lakemerge": "default (bucket thread pool, os.cpu_count())",
           "pypaimon": "default (pyarrow pool)", "pypaimon-native": "default (Rust runtime)"}


# ---- lakemerge ------------------------------------------------------------------------------------------------

class LakemergeTable:
    def __init__(self, warehouse: str):
        from engine import Catalog

        self.warehouse = warehouse
        cat = Catalog(warehouse)
        cat.create_database("db")
        # write-only: no compaction between the commits, so the read merges 8 runs per bucket (see the docstring)
        self.table = cat.create_table("db.t", SCHEMA, primary_key=["key"], options={"bucket": "4", "write-only": "true"})

    def ingest(self, runs: list[pa.Table]) -> None:
        for run in runs:
            self.table.write(run)

    def read(self) -> pa.Table:
        from engine import Catalog

        return Catalog(self.warehouse).get_table("db.t").read()


# ---- pypaimon -------------------------------------------------------------------------------------------------

class PypaimonTable:
    def __init__(self, warehouse: str, native: bool):
        from pypaimon import CatalogFactory, Schema

        self.warehouse = os.path.abspath(warehouse)
        options = {"bucket": "4", **(NATIVE_OPTIONS if native else {})}
        cat = CatalogFactory.create({"warehouse": self.warehouse})
        cat.create_database("db", True)
        cat.create_table("db.t", Schema.from_pyarrow_schema(SCHEMA, primary_keys=["key"], options=options), False)
        self.table = cat.get_table("db.t")
        self.writer_classes: set[str] = set()

    def ingest(self, runs: list[pa.Table]) -> None:
        for run in runs:
            wb = self.table.new_batch_write_builder()
            w = wb.new_write()
            self.writer_classes.add(type(w).__name__)
            c = wb.new_commit()
            try:
                w.write_arrow(run)
                c.commit(w.prepare_commit())
            finally:
                w.close()
                c.close()

    def read(self) -> pa.Table:
        from pypaimon import CatalogFactory

        table = CatalogFactory.create({"warehouse": self.warehouse}).get_table("db.t")
        rb = table.new_read_builder()
        return rb.new_read().to_arrow(rb.new_scan().plan().splits())


class NativeProbe:
    """Counts what pypaimon's native dispatch points did (monkeypatched wrappers, in this worker only)."""

    def __init__(self):
        from pypaimon.read.table_read import TableRead
        from pypaimon.read.table_scan import TableScan
        from pypaimon.write.table_commit import TableCommit

        self.counts = {"commit_native": 0, "commit_python": 0, "plan_native": 0, "plan_python": 0,
                       "read_native": 0, "read_python": 0}
        self.fallbacks: list[str] = []
        self._wrap(TableCommit, "_prepare_native_commit", "commit")
        self._wrap(TableScan, "_try_native_plan", "plan")
        self._wrap(TableRead, "_try_native_batches", "read")
        orig_fallback = TableRead._native_fallback
        probe = self

        def fallback(this, reason, *a, **k):
            probe.fallbacks.append(str(reason))
            return orig_fallback(this, reason, *a, **k)
        TableRead._native_fallback = fallback

    def _wrap(self, cls, name, what):
        orig = getattr(cls, name)
        probe = self

        def wrapper(this, *a, **k):
            out = orig(this, *a, **k)
            probe.counts[f"{what}_{'python' if out is None else 'native'}"] += 1
            return out
        setattr(cls, name, wrapper)

    def summary(self, writer_classes: set[str], native_requested: bool) -> str:
        c = self.counts
        parts = [f"writer={'/'.join(sorted(writer_classes))}",
                 f"commit native {c['commit_native']}/{c['commit_native'] + c['commit_python']}",
                 f"plan native {c['plan_native']}/{c['plan_native'] + c['plan_python']}",
                 f"read native {c['read_native']}/{c['read_native'] + c['read_python']}"]
        if native_requested and c["commit_native"] == 0 and c["commit_python"]:
            parts.append("commits ran in Python: pypaimon 2.1.0 commits natively only through a REST catalog "
                         "(write/native_commit.py: _rest_catalog_supported)")
        if self.fallbacks:
            parts.append("fallbacks: " + "; ".join(sorted(set(self.fallbacks))))
        return ", ".join(parts)


# ---- worker ---------------------------------------------------------------------------------------------------

def _open(contender: str, warehouse: str):
    if contender == "lakemerge":
        return LakemergeTable(warehouse)
    return PypaimonTable(warehouse, native=contender == "pypaimon-native")


def _check_against_reference(runs, out: pa.Table) -> None:
    """The merged read must equal the NumPy reference of case (a): latest run (= highest seq) wins per key."""
    key = np.concatenate([r.column("key").to_numpy() for r in runs])
    seq = np.concatenate([r.column("seq").to_numpy() for r in runs])
    order = np.lexsort((seq, key))
    k, s = key[order], seq[order]
    last = np.ones(k.shape[0], bool)
    last[:-1] = k[1:] != k[:-1]
    got = out.sort_by("key")
    if not (np.array_equal(got.column("key").to_numpy(), k[last])
            and np.array_equal(got.column("seq").to_numpy(), s[last])):
        raise SystemExit("MISMATCH: lakemerge's table read differs from the NumPy reference (keys / winning seq)")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("contender", choices=["lakemerge", "pypaimon", "pypaimon-native"])
    ap.add_argument("--data", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--ref", help="lakemerge: write its read result here; others: compare with it")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--slow-limit", type=float, default=120.0,
                    help="stop repeating once one ingest+read took longer than this many seconds")
    args = ap.parse_args(argv)

    runs = load_runs(args.data)
    baseline = current_rss_mb()
    n = sum(r.num_rows for r in runs)
    probe = NativeProbe() if args.contender.startswith("pypaimon") else None
    root = os.path.join(os.path.abspath(args.workdir), args.contender)
    shutil.rmtree(root, ignore_errors=True)

    # warm-up: imports, Numba kernels, first-call set-up -- on a small table
    small = [r.slice(0, 20_000) for r in runs[:2]]
    t = _open(args.contender, os.path.join(root, "warmup"))
    t.ingest(small)
    t.read()
    shutil.rmtree(os.path.join(root, "warmup"), ignore_errors=True)

    ingest_times, read_times, out, writer_classes = [], [], None, set()
    for i in range(args.repeat):
        wh = os.path.join(root, f"rep{i}")
        t = _open(args.contender, wh)
        t0 = time.perf_counter()
        t.ingest(runs)
        t1 = time.perf_counter()
        out = t.read()
        t2 = time.perf_counter()
        ingest_times.append(t1 - t0)
        read_times.append(t2 - t1)
        writer_classes |= getattr(t, "writer_classes", set())
        if t2 - t0 > args.slow_limit or i + 1 == args.repeat:
            break          # keep ``out`` of the last repetition for the checks below
        out = None
        shutil.rmtree(wh, ignore_errors=True)
    peak = peak_rss_mb()
    disk_mb = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(root) for f in fs) / 2**20

    if args.contender == "lakemerge":
        _check_against_reference(runs, out)
        if args.ref:
            save_table(out, args.ref)
        check = "= NumPy reference"
    else:
        assert_same_rows(out, load_table(args.ref), SCHEMA, args.contender) if args.ref else None
        check = "= lakemerge" if args.ref else "unchecked"
    shutil.rmtree(root, ignore_errors=True)

    note = f"{out.num_rows:,} rows read, {check}; table {disk_mb:.0f} MB on disk"
    if probe:
        note += "; " + probe.summary(writer_classes, args.contender == "pypaimon-native")
    common = dict(rows=n, peak_rss_mb=peak, baseline_rss_mb=baseline, threads=THREADS[args.contender],
                  baseline=args.contender == "lakemerge")
    emit([Row(case=CASE_INGEST, contender=args.contender, times=ingest_times, note=note, **common),
          Row(case=CASE_READ, contender=args.contender, times=read_times, note=note, **common)],
         {"native_counts": probe.counts if probe else None})


if __name__ == "__main__":
    from benchmarks.harness import run_worker_main
    run_worker_main(main)
