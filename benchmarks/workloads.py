"""Seeded workload generation shared by every benchmark case.

The merge workload ("8 sorted runs x 1.25M rows") models an upsert stream into a primary-key table:

* run 0 holds ``rows_per_run`` fresh keys; every later run takes half of its keys from the keys of the earlier
  runs (updates, drawn uniformly without replacement) and half fresh keys (inserts). So ~50% of each run overlaps
  earlier data, and 8 x 1.25M input rows collapse to 1.25M + 7 x 0.625M = 5.625M distinct keys.
* keys are distinct random int64 values in [0, 2**40) (not a dense range); each run is sorted by key, unique
  within the run;
* ``seq`` is int64, strictly increasing run by run (run r holds r*rows_per_run ... (r+1)*rows_per_run - 1, in key
  order), so a later run is always newer;
* ``v`` int64 and ``f`` float64 are random; ``s`` is a 16-character string (random hex).

Everything derives from one ``numpy.random.default_rng(seed)``: the same arguments give the same tables.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

SEED = 20240611
FULL_RUNS = 8
FULL_ROWS_PER_RUN = 1_250_000

SCHEMA = pa.schema([
    pa.field("key", pa.int64(), nullable=False),
    pa.field("seq", pa.int64()),
    pa.field("v", pa.int64()),
    pa.field("f", pa.float64()),
    pa.field("s", pa.string()),
])

_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)


@dataclass(frozen=True)
class MergeWorkload:
    runs: list[pa.Table]

    @property
    def total_rows(self) -> int:
        return sum(r.num_rows for r in self.runs)

    @property
    def nbytes(self) -> int:
        return sum(r.nbytes for r in self.runs)

    def describe(self) -> str:
        n = self.runs[0].num_rows if self.runs else 0
        return (f"{len(self.runs)} sorted runs x {n:,} rows (key int64, seq int64, v int64, f float64, s string[16]); "
                f"each later run: 50% keys updated from earlier runs, 50% new keys")


def _hex_strings(rng: np.random.Generator, n: int, width: int = 16) -> pa.Array:
    """n random lowercase hex strings of ``width`` characters, built straight into Arrow buffers."""
    raw = rng.integers(0, 256, size=(n, width // 2), dtype=np.uint8)
    chars = np.empty((n, width), np.uint8)
    chars[:, 0::2] = _HEX[raw >> 4]
    chars[:, 1::2] = _HEX[raw & 0x0F]
    offsets = np.arange(0, (n + 1) * width, width, dtype=np.int32)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(chars))


def _distinct_keys(rng: np.random.Generator, n: int) -> np.ndarray:
    """n distinct random int64 values in [0, 2**40), in random order."""
    out = np.empty(0, np.int64)
    while out.shape[0] < n:
        extra = rng.integers(0, 1 << 40, size=int((n - out.shape[0]) * 1.02) + 16, dtype=np.int64)
        out = np.sort(np.concatenate([out, extra]))
        out = out[np.concatenate([[True], out[1:] != out[:-1]])]   # (np.unique is far slower in NumPy 2.4)
    out = out[rng.permutation(out.shape[0])[:n]]
    return out


def merge_workload(runs: int = FULL_RUNS, rows_per_run: int = FULL_ROWS_PER_RUN, overlap: float = 0.5,
                   seed: int = SEED) -> MergeWorkload:
    rng = np.random.default_rng(seed)
    n_old = int(rows_per_run * overlap)
    n_fresh_later = rows_per_run - n_old
    n_distinct = rows_per_run + (runs - 1) * n_fresh_later
    key_values = _distinct_keys(rng, n_distinct)   # key id -> key value
    tables, next_fresh = [], 0
    for r in range(runs):
        if r == 0:
            ids = np.arange(rows_per_run, dtype=np.int64)
        else:
            old = rng.choice(next_fresh, size=n_old, replace=False).astype(np.int64)
            ids = np.concatenate([old, np.arange(next_fresh, next_fresh + n_fresh_later, dtype=np.int64)])
        next_fresh = max(next_fresh, int(ids.max()) + 1)
        keys = np.sort(key_values[ids])
        seq = np.arange(r * rows_per_run, (r + 1) * rows_per_run, dtype=np.int64)
        tables.append(pa.Table.from_arrays([
            pa.array(keys),
            pa.array(seq),
            pa.array(rng.integers(-(1 << 62), 1 << 62, size=rows_per_run, dtype=np.int64)),
            pa.array(rng.standard_normal(rows_per_run)),
            _hex_strings(rng, rows_per_run),
        ], schema=SCHEMA))
    return MergeWorkload(tables)


def expected_winners(workload: MergeWorkload) -> tuple[np.ndarray, np.ndarray]:
    """Independent NumPy reference: (keys ascending, winning seq per key)."""
    key = np.concatenate([r.column("key").to_numpy() for r in workload.runs])
    seq = np.concatenate([r.column("seq").to_numpy() for r in workload.runs])
    order = np.lexsort((seq, key))
    k, s = key[order], seq[order]
    last = np.ones(k.shape[0], bool)
    last[:-1] = k[1:] != k[:-1]
    return k[last], s[last]
