"""Plumbing shared by the cases: the worker-subprocess protocol, timing, RSS, result comparison.

Every (case, contender) runs in its own worker process (``python -m benchmarks.<case module> <contender> ...``):
that isolates thread settings (POLARS_MAX_THREADS must be set before polars is imported), gives a per-contender
peak RSS, and makes each contender pay its own imports. The parent only generates the data once (an Arrow IPC
file that workers read fully into memory -- not memory-mapped, so RSS is comparable), starts the workers and
collects the one ``RESULT {json}`` line each prints.
"""
from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field

import pyarrow as pa

RESULT_PREFIX = "RESULT "

# Environment for single-threaded workers. Numba kernels are plain @njit (no prange), so they are single-threaded
# anyway; these stop BLAS/OpenMP pools and give Numba/Arrow one thread.
ONE_THREAD_ENV = {
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "NUMBA_NUM_THREADS": "1",
    "POLARS_MAX_THREADS": "1",
}


@dataclass
class Row:
    """One line of the results table."""

    case: str
    contender: str
    times: list[float] = field(default_factory=list)
    rows: int = 0                       # input rows processed per timed call (rows/s = rows / best)
    peak_rss_mb: float | None = None
    baseline_rss_mb: float | None = None  # RSS right after the input was loaded (input data included)
    threads: str = ""
    note: str = ""
    error: str | None = None
    baseline: bool = False              # the lakemerge line the ratios of this case refer to

    @property
    def best(self) -> float | None:
        return min(self.times) if self.times else None

    @property
    def median(self) -> float | None:
        return statistics.median(self.times) if self.times else None


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0   # Linux: KiB


def current_rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def load_average() -> str:
    """The 1/5/15-minute load averages, as '0.9/1.2/1.5' (reported with every run: the machine is shared)."""
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def in_workdir(workdir: str | None, prefix: str, run) -> int:
    """``run(workdir)`` in ``workdir``, or in a new temporary directory removed afterwards; prints the total wall
    time to stderr and returns ``run``'s exit code."""
    import shutil
    import tempfile
    own = workdir is None
    workdir = workdir or tempfile.mkdtemp(prefix=prefix)
    os.makedirs(workdir, exist_ok=True)
    start = time.perf_counter()
    try:
        return run(workdir)
    finally:
        if own:
            shutil.rmtree(workdir, ignore_errors=True)
        print(f"total wall time {time.perf_counter() - start:.0f} s", file=sys.stderr)


def timed(fn, *args):
    t0 = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - t0, out


# ---- data exchange between parent and workers ----------------------------------------------------------

def save_runs(runs: list[pa.Table], path: str) -> None:
    """One IPC file, one record batch per run (runs are single-chunk tables)."""
    with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, runs[0].schema) as w:
        for r in runs:
            for b in r.combine_chunks().to_batches(max_chunksize=r.num_rows or None):
                w.write_batch(b)


def load_runs(path: str) -> list[pa.Table]:
    """Read the runs fully into memory (OSFile reads, no memory map), one single-chunk table per run."""
    with pa.OSFile(path, "rb") as src:
        reader = pa.ipc.open_file(src)
        return [pa.Table.from_batches([reader.get_batch(i)]) for i in range(reader.num_record_batches)]


def save_table(table: pa.Table, path: str) -> None:
    with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, table.schema) as w:
        w.write_table(table)


def load_table(path: str) -> pa.Table:
    with pa.OSFile(path, "rb") as src:
        return pa.ipc.open_file(src).read_all()


# ---- result checks ----------------------------------------------------------------------------------------

class Mismatch(AssertionError):
    pass


def normalise(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """Columns of ``schema`` in its order and types (string views / large strings cast back), sorted by key."""
    cols = []
    for f in schema:
        col = table.column(f.name)
        if col.type != f.type:
            col = col.cast(f.type)
        cols.append(col)
    t = pa.Table.from_arrays(cols, names=schema.names)
    keys = t.column(schema.names[0])
    import pyarrow.compute as pc
    sorted_already = t.num_rows < 2 or bool(pc.all(pc.greater_equal(
        keys.slice(1), keys.slice(0, t.num_rows - 1))).as_py())
    return t if sorted_already else t.sort_by(schema.names[0])


def assert_same_rows(got: pa.Table, want: pa.Table, schema: pa.Schema, who: str) -> None:
    """Same row count, same keys, same winning seq per key, and same values in every column (sorted by key)."""
    g, w = normalise(got, schema), normalise(want, schema)
    if g.num_rows != w.num_rows:
        raise Mismatch(f"{who}: {g.num_rows} rows, lakemerge has {w.num_rows}")
    for name in schema.names:
        a, b = g.column(name), w.column(name)
        if not a.equals(b):
            a, b = a.combine_chunks(), b.combine_chunks()
            import pyarrow.compute as pc
            diff = pc.invert(pc.equal(a, b).fill_null(False))
            first = pc.index(diff, True).as_py()
            raise Mismatch(f"{who}: column {name!r} differs from lakemerge at sorted row {first}: "
                           f"{g.slice(first, 1).to_pylist()} vs {w.slice(first, 1).to_pylist()}")


# ---- worker side ------------------------------------------------------------------------------------------

def run_worker_main(main) -> None:
    """Run a worker's ``main()``; any failure prints its traceback and a one-line summary and exits 1 (the parent
    reports it), while a clean ``SystemExit`` passes through."""
    try:
        main()
    except BaseException as e:
        if isinstance(e, SystemExit) and e.code in (0, None):
            raise
        import traceback
        traceback.print_exc()
        print(f"{type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)


def emit(rows: list[Row], extra: dict | None = None) -> None:
    print(RESULT_PREFIX + json.dumps({"rows": [asdict(r) for r in rows], "extra": extra or {}}), flush=True)


# ---- parent side ------------------------------------------------------------------------------------------

def run_worker(module: str, args: list[str], env: dict[str, str] | None = None, timeout: float = 900,
               label: str = "") -> tuple[list[Row], dict, str | None]:
    """Run ``python -m module args`` and return (rows, extra, error). The worker's stderr is passed through."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    cmd = [sys.executable, "-m", module, *args]
    print(f"  running {label or module} ...", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return [], {}, f"timed out after {timeout:.0f} s"
    elapsed = time.perf_counter() - t0
    result = None
    for line in proc.stdout.splitlines():
        if line.startswith(RESULT_PREFIX):
            result = json.loads(line[len(RESULT_PREFIX):])
    tail = "\n".join(proc.stderr.strip().splitlines()[-15:])
    print(f"  ... {label or module} done in {elapsed:.1f} s (exit {proc.returncode})", file=sys.stderr, flush=True)
    if proc.returncode != 0 or result is None:
        return [], {}, f"worker exit {proc.returncode}: {tail or proc.stdout[-2000:]}"
    rows = [Row(**r) for r in result["rows"]]
    return rows, result.get("extra", {}), None
