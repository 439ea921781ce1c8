"""Case (a): in-memory merge of sorted runs to one row per key (newest = highest seq wins), one thread each.

Contenders (each one in its own worker process, see ``harness``), all starting from the same list of Arrow
tables (one per run) and ending with the merged rows materialised:

* ``lakemerge``: ``kernels.keys.encode_keys`` per run + ``kernels.merge.merge_dedup`` (global row ids of the
  winners) + ``kernels.gather.gather(runs, winners)`` (rows straight from the runs' buffers); the phases are timed
  separately, and Arrow's ``pa.concat_tables(runs).take(winners)`` (the gather used before) is timed alongside.
* ``pyarrow``: concat, ``sort_indices`` by (key asc, seq desc), keep the first row of each key, take.
* ``polars``: ``pl.from_arrow(concat).sort(["key", "seq"]).unique("key", keep="last", maintain_order=True)``.
* ``duckdb``: ``QUALIFY row_number() OVER (PARTITION BY key ORDER BY seq DESC) = 1`` over the registered Arrow
  table (no copy), result fetched as Arrow; and a ``GROUP BY key`` / ``arg_max`` variant.
* ``pandas``: ``to_pandas`` + ``sort_values(["key", "seq"])`` + ``drop_duplicates("key", keep="last")``.

Worker: ``python -m benchmarks.merge_bench CONTENDER --data runs.arrow --ref ref.arrow --repeat N``.
"""
from __future__ import annotations

import argparse
import sys
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
    timed,
)
from benchmarks.workloads import SCHEMA

CASE = "merge in memory"


# ---- contenders: each returns the merged rows as an Arrow table (or something convertible, see _as_arrow) ------

def lakemerge_phases(runs: list[pa.Table], arrow_take: bool = False):
    """Returns (encode s, kernel s, gather s, result table); with ``arrow_take`` the last phase is Arrow's take."""
    from kernels.gather import gather
    from kernels.keys import encode_keys
    from kernels.merge import merge_dedup

    t0 = time.perf_counter()
    encoded = [encode_keys([r.column("key")]) for r in runs]
    seq_words = [(r.column("seq").to_numpy().view(np.uint64) ^ np.uint64(1 << 63)).reshape(-1, 1) for r in runs]
    t1 = time.perf_counter()
    winners = merge_dedup(encoded, seq_words)
    t2 = time.perf_counter()
    out = pa.concat_tables(runs).take(winners) if arrow_take else gather(runs, winners)
    t3 = time.perf_counter()
    return t1 - t0, t2 - t1, t3 - t2, out


def pyarrow_merge(runs: list[pa.Table]) -> pa.Table:
    import pyarrow.compute as pc

    t = pa.concat_tables(runs)
    idx = pc.sort_indices(t, sort_keys=[("key", "ascending"), ("seq", "descending")])
    keys = t.column("key").take(idx).to_numpy()
    first = np.empty(keys.shape[0], np.bool_)
    first[:1] = True
    np.not_equal(keys[1:], keys[:-1], out=first[1:])
    return t.take(idx.to_numpy()[first])


def polars_merge(runs: list[pa.Table]):
    import polars as pl

    return (pl.from_arrow(pa.concat_tables(runs)).sort(["key", "seq"])
            .unique(subset="key", keep="last", maintain_order=True))


_DUCKDB_SQL = {
    "duckdb": "SELECT * FROM t QUALIFY row_number() OVER (PARTITION BY key ORDER BY seq DESC) = 1",
    "duckdb-argmax": "SELECT key, max(seq) AS seq, arg_max(v, seq) AS v, arg_max(f, seq) AS f, "
                     "arg_max(s, seq) AS s FROM t GROUP BY key",
}


def duckdb_merge(runs: list[pa.Table], sql: str, con) -> pa.Table:
    con.register("t", pa.concat_tables(runs))   # an Arrow scan, no copy
    try:
        rel = con.sql(sql)   # relation API: the Arrow result without the extra copy of the DB-API path
        return rel.to_arrow_table() if hasattr(rel, "to_arrow_table") else rel.arrow()
    finally:
        con.unregister("t")


def pandas_merge(runs: list[pa.Table]):
    df = pa.concat_tables(runs).to_pandas()
    return df.sort_values(["key", "seq"], kind="stable").drop_duplicates(subset="key", keep="last")


def _as_arrow(out) -> pa.Table:
    if isinstance(out, pa.Table):
        return out
    if hasattr(out, "to_arrow"):          # polars
        return out.to_arrow()
    return pa.Table.from_pandas(out, preserve_index=False)


# ---- worker --------------------------------------------------------------------------------------------------

def _one_thread() -> None:
    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)


def _run_lakemerge(runs, repeat: int, baseline_rss: float, ref_path: str | None) -> tuple[list[Row], dict]:
    """The lakemerge worker: a first call (compiles what warm_up() did not), then ``repeat`` timed calls."""
    from kernels.gather import warm_up as gather_warm_up
    from kernels.merge import warm_up

    n = sum(r.num_rows for r in runs)
    t_warm, _ = timed(lambda: (warm_up(), gather_warm_up()))
    t0 = time.perf_counter()
    *_, first_out = lakemerge_phases(runs)
    t_first = time.perf_counter() - t0
    _check_lakemerge(runs, first_out)
    if ref_path:
        save_table(first_out, ref_path)
    del first_out
    enc, ker, gat, take = [], [], [], []
    for _ in range(repeat):
        e, k, g, out = lakemerge_phases(runs)
        del out
        *_, t, out = lakemerge_phases(runs, arrow_take=True)
        del out
        enc.append(e), ker.append(k), gat.append(g), take.append(t)
    peak = peak_rss_mb()
    common = dict(case=CASE, rows=n, peak_rss_mb=peak, baseline_rss_mb=baseline_rss, threads="1")
    rows = [
        Row(contender="lakemerge: kernel + gather", times=[k + g for k, g in zip(ker, gat)], baseline=True,
            note="headline; keys pre-encoded", **common),
        Row(contender="lakemerge: encode + kernel + gather", times=[e + k + g for e, k, g in zip(enc, ker, gat)],
            note="end to end from Arrow", **common),
        Row(contender="lakemerge: kernel + Arrow take", times=[k + t for k, t in zip(ker, take)],
            note="the previous gather: concat_tables(runs).take(winners)", **common),
        Row(contender="lakemerge: encode + kernel", times=[e + k for e, k in zip(enc, ker)],
            note="winner row ids, nothing materialised", **common),
        Row(contender="lakemerge: kernel only", times=ker, note="merge_dedup", **common),
        Row(contender="lakemerge: encode only", times=enc, note="encode_keys + seq words", **common),
        Row(contender="lakemerge: gather only", times=gat, note="kernels.gather.gather(runs, winners)", **common),
        Row(contender="lakemerge: Arrow take only", times=take, note="concat_tables(runs).take(winners)", **common),
    ]
    return rows, {"warm_up_s": t_warm, "first_call_s": t_first}


def compile_time() -> float:
    """Seconds for ``kernels.merge.warm_up()`` (compiles kernels.keys and kernels.merge on tiny inputs) in this
    fresh process: a compile when NUMBA_CACHE_DIR is empty, a cache load when an earlier process filled it."""
    import kernels.gather
    import kernels.merge

    t, _ = timed(lambda: (kernels.merge.warm_up(), kernels.gather.warm_up()))
    return t


def _check_lakemerge(runs, out: pa.Table) -> None:
    """lakemerge against an independent NumPy lexsort reference: keys and winning seq."""
    key = np.concatenate([r.column("key").to_numpy() for r in runs])
    seq = np.concatenate([r.column("seq").to_numpy() for r in runs])
    order = np.lexsort((seq, key))
    k, s = key[order], seq[order]
    last = np.ones(k.shape[0], bool)
    last[:-1] = k[1:] != k[:-1]
    if not (np.array_equal(out.column("key").to_numpy(), k[last])
            and np.array_equal(out.column("seq").to_numpy(), s[last])):
        raise SystemExit("MISMATCH: lakemerge's merge_dedup result differs from the NumPy lexsort reference")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("contender", choices=["lakemerge", "pyarrow", "polars", "duckdb", "duckdb-argmax", "pandas",
                                          "numba-compile"])
    ap.add_argument("--data")
    ap.add_argument("--ref", help="lakemerge: write its result here; others: compare with it")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--label", default=None)
    args = ap.parse_args(argv)

    _one_thread()
    if args.contender == "numba-compile":
        emit([], {"seconds": compile_time()})
        return
    runs = load_runs(args.data)
    baseline = current_rss_mb()
    n = sum(r.num_rows for r in runs)

    if args.contender == "lakemerge":
        rows, extra = _run_lakemerge(runs, args.repeat, baseline, args.ref)
        emit(rows, extra)
        return

    threads = "1"
    if args.contender == "pyarrow":
        fn = pyarrow_merge
    elif args.contender == "polars":
        import polars as pl
        threads = str(pl.thread_pool_size())
        fn = polars_merge
    elif args.contender.startswith("duckdb"):
        import duckdb
        con = duckdb.connect()
        con.execute("SET threads=1").fetchall()
        threads = str(con.execute("SELECT current_setting('threads')").fetchall()[0][0])
        sql = _DUCKDB_SQL[args.contender]
        fn = lambda r: duckdb_merge(r, sql, con)
    else:
        fn = pandas_merge

    out = fn(runs)                                     # warm-up (imports, first-call set-up)
    if args.ref:
        assert_same_rows(_as_arrow(out), load_table(args.ref), SCHEMA, args.label or args.contender)
    del out
    times = []
    for _ in range(args.repeat):
        t, out = timed(fn, runs)
        del out
        times.append(t)
    note = {"pandas": "includes to_pandas()", "polars": "includes from_arrow()",
            "duckdb": "QUALIFY row_number()", "duckdb-argmax": "GROUP BY key, arg_max(col, seq)",
            "pyarrow": "sort_indices + take"}[args.contender]
    emit([Row(case=CASE, contender=args.label or args.contender, times=times, rows=n, peak_rss_mb=peak_rss_mb(),
              baseline_rss_mb=baseline, threads=threads, note=note + "; output checked = lakemerge")])


if __name__ == "__main__":
    try:
        main()
    except Exception as e:
        import traceback
        traceback.print_exc()
        print(f"{type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
