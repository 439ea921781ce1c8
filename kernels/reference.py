"""Plain, obviously-correct NumPy/Python references for every kernel. Tests check kernel == reference.

Slow by design: per-row Python is fine here and nowhere else.
"""
from __future__ import annotations

# ==== hashing references (kernels/hashing.py) ====
def hash_codes_reference(columns):
    """Per row: build the BinaryRow with ``engine.meta.binary_row.encode_row`` and hash it (int32 array)."""
    import numpy as np
    import pyarrow as pa

    from engine.meta import binary_row
    from engine.types import DataType

    arrays = [c.combine_chunks() if isinstance(c, pa.ChunkedArray) else c for c in columns]
    types = [DataType.from_arrow(a.type) for a in arrays]
    # timestamp[ns]: as_py() would lose the nanoseconds, so pass the raw epoch nanos (encode_row accepts ints)
    sources = [a.view(pa.int64()) if pa.types.is_timestamp(a.type) and a.type.unit == "ns" else a for a in arrays]
    n = len(arrays[0])
    out = [binary_row.hash_code(binary_row.encode_row([s[i].as_py() for s in sources], types)) for i in range(n)]
    return np.array(out, dtype=np.int32)


def bucket_ids_reference(columns, num_buckets):
    """``Math.abs(hash % numBuckets)`` of ``hash_codes_reference``."""
    import numpy as np

    from engine.meta import binary_row

    return np.array([binary_row.bucket_of(int(h), num_buckets) for h in hash_codes_reference(columns)], np.int32)


# ==== merge / key-order / lookup references (kernels/keys.py, kernels/merge.py, kernels/lookup.py) ====
class _Descending:
    """Wraps a sort key so that it orders in reverse (a descending key column)."""

    __slots__ = ("v",)

    def __init__(self, v):
        self.v = v

    def __lt__(self, other):
        return other.v < self.v

    def __eq__(self, other):
        return self.v == other.v

    def __hash__(self):
        return hash(self.v)


def _key_values(column) -> list:
    """Python values of one key column; temporal types as their integer value (order by value)."""
    import pyarrow as pa

    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    if pa.types.is_temporal(arr.type):
        arr = arr.view(pa.int32() if arr.type.bit_width == 32 else pa.int64())
    return arr.to_pylist()


def _value_key(v):
    """Paimon comparator (spec §2.1) for one value: nulls first; floats like Java Double.compare (-0.0 < +0.0,
    NaN greatest, NaNs equal); strings as UTF-8 bytes, bytes unsigned with the shorter first; others natural."""
    import math

    if v is None:
        return (0,)
    if isinstance(v, float):
        return (1, (1,)) if math.isnan(v) else (1, (0, v, math.copysign(1.0, v)))
    if isinstance(v, str):
        return (1, v.encode("utf-8"))
    if isinstance(v, bool):
        return (1, int(v))
    return (1, v)


def key_tuples(columns, descending=None) -> list:
    """``key_tuple`` of every row."""
    desc = list(descending) if descending is not None else [False] * len(columns)
    per_column = [[_Descending(_value_key(v)) if d else _value_key(v) for v in _key_values(c)]
                  for c, d in zip(columns, desc)]
    return list(zip(*per_column))


def key_tuple(columns, i, descending=None) -> tuple:
    """A Python sort key for row i implementing the Paimon key comparator directly from ``as_py()`` values."""
    return key_tuples([c[i:i + 1] for c in columns], descending)[0]


def _seq_tuples(seq, n) -> list:
    import numpy as np

    if seq is None:
        return [()] * n
    seq = np.asarray(seq)
    seq = seq.reshape(n, 1) if seq.ndim == 1 else seq
    return [tuple(int(x) for x in row) for row in seq]


def sort_indices_reference(columns, seq=None, descending=None):
    """Stable sort of the rows by (key_tuple, seq row as ints): int64 permutation."""
    import numpy as np

    keys = key_tuples(columns, descending)
    seqs = _seq_tuples(seq, len(keys))
    return np.array(sorted(range(len(keys)), key=lambda i: (keys[i], seqs[i])), dtype=np.int64)


def merge_order_reference(runs, seqs=None, descending=None):
    """Runs given as lists of key columns (each run sorted by (key, seq)): ``(order, key_starts)`` with global ids
    (concatenation order), the stable sort of all rows by (key, seq), and the starts of equal-key groups."""
    import numpy as np

    keys, seq_rows = [], []
    for r, cols in enumerate(runs):
        k = key_tuples(cols, descending)
        keys += k
        seq_rows += _seq_tuples(None if seqs is None else seqs[r], len(k))
    order = sorted(range(len(keys)), key=lambda i: (keys[i], seq_rows[i]))
    starts = [p for p in range(len(order)) if p == 0 or keys[order[p]] != keys[order[p - 1]]]
    return np.array(order, dtype=np.int64), np.array(starts + [len(order)], dtype=np.int64)


def merge_dedup_reference(runs, seqs=None, descending=None):
    """Deduplicate: the global id of the last row of every key in ``merge_order_reference`` order."""
    order, starts = merge_order_reference(runs, seqs, descending)
    return order[starts[1:] - 1]


def newest_per_key_reference(columns, seq=None, descending=None):
    """Input index of each key's newest row -- largest (seq row, input index) -- in ascending key order."""
    import numpy as np

    keys = key_tuples(columns, descending)
    seqs = _seq_tuples(seq, len(keys))
    best: dict = {}
    for i, k in enumerate(keys):
        if k not in best or (seqs[i], i) > (seqs[best[k]], best[k]):
            best[k] = i
    return np.array([best[k] for k in sorted(best)], dtype=np.int64)


def search_sorted_reference(sorted_columns, probe_columns, descending=None):
    """Per probe, the index of the row of ``sorted_columns`` with an equal key (by key_tuple), or -1."""
    import numpy as np

    index = {k: i for i, k in enumerate(key_tuples(sorted_columns, descending))}
    return np.array([index.get(k, -1) for k in key_tuples(probe_columns, descending)], dtype=np.int64)


def lower_bound_reference(sorted_columns, probe_columns, descending=None):
    """Per probe, the number of sorted rows whose key is < the probe's key."""
    import bisect

    import numpy as np

    keys = key_tuples(sorted_columns, descending)
    return np.array([bisect.bisect_left(keys, k) for k in key_tuples(probe_columns, descending)], dtype=np.int64)



# ==== gather reference (kernels/gather.py) ====
def gather_reference(runs, ids):
    """``pa.concat_tables(runs).take(ids)``, the runs combined into one chunk first."""
    import pyarrow as pa

    return pa.concat_tables(runs).combine_chunks().take(pa.array(ids, pa.int64()))
