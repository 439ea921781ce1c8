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


# ---- kernel cases: hashing and lookups --------------------------------------------------------------------------

def hash_workload(n: int = 10_000_000, seed: int = SEED) -> tuple[pa.Array, pa.Array]:
    """(n random int64 keys, n random 16-character hex strings), both without nulls."""
    rng = np.random.default_rng(seed + 1)
    return pa.array(rng.integers(-(1 << 63), (1 << 63) - 1, size=n, dtype=np.int64)), _hex_strings(rng, n)


@dataclass(frozen=True)
class LookupWorkload:
    keys: np.ndarray      # int64, sorted, distinct: the table's primary keys
    values: np.ndarray    # int64 payload per key
    probes: np.ndarray    # int64 probe keys in random order (90% hit an existing key, 10% miss)

    def table(self) -> pa.Table:
        return pa.Table.from_arrays([pa.array(self.keys), pa.array(self.values)],
                                    schema=pa.schema([pa.field("key", pa.int64(), nullable=False),
                                                      pa.field("v", pa.int64())]))


def lookup_workload(table_rows: int = 10_000_000, probes: int = 1_000_000, seed: int = SEED) -> LookupWorkload:
    rng = np.random.default_rng(seed + 2)
    universe = _distinct_keys(rng, table_rows + probes // 10)
    keys = np.sort(universe[:table_rows])
    misses = universe[table_rows:]
    hits = keys[rng.integers(0, table_rows, size=probes - misses.shape[0])]
    p = np.concatenate([hits, misses])
    return LookupWorkload(keys, rng.integers(-(1 << 62), 1 << 62, size=table_rows, dtype=np.int64),
                          p[rng.permutation(p.shape[0])])


# ---- upsert case ----------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class UpsertWorkload:
    initial: pa.Table          # SCHEMA, distinct keys
    batches: list[pa.Table]    # SCHEMA; each: half keys already in the table (updates), half new keys

    def describe(self) -> str:
        b = self.batches[0].num_rows if self.batches else 0
        return (f"{self.initial.num_rows:,}-row table, then {len(self.batches)} upserts of {b:,} rows "
                f"(50% updates of existing keys, 50% new keys), then a full read")


def upsert_workload(initial_rows: int = 5_000_000, batches: int = 4, batch_rows: int = 500_000,
                    seed: int = SEED) -> UpsertWorkload:
    rng = np.random.default_rng(seed + 3)
    n_new = batch_rows - batch_rows // 2
    universe = _distinct_keys(rng, initial_rows + batches * n_new)
    seq0 = 0

    def make(keys: np.ndarray) -> pa.Table:
        nonlocal seq0
        n = keys.shape[0]
        t = pa.Table.from_arrays([
            pa.array(keys), pa.array(np.arange(seq0, seq0 + n, dtype=np.int64)),
            pa.array(rng.integers(-(1 << 62), 1 << 62, size=n, dtype=np.int64)),
            pa.array(rng.standard_normal(n)), _hex_strings(rng, n)], schema=SCHEMA)
        seq0 += n
        return t

    initial = make(universe[:initial_rows])
    out, known = [], initial_rows
    for b in range(batches):
        old = universe[rng.choice(known, size=batch_rows // 2, replace=False)]
        new = universe[known:known + n_new]
        known += n_new
        keys = np.concatenate([old, new])
        out.append(make(keys[rng.permutation(keys.shape[0])]))
    return UpsertWorkload(initial, out)


def upsert_expected(w: UpsertWorkload) -> tuple[np.ndarray, np.ndarray]:
    """(keys ascending, winning seq per key): the last write of each key wins."""
    return expected_winners(MergeWorkload([w.initial, *w.batches]))
