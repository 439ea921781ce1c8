"""Splitting rows by partition and bucket, without per-row Python."""
from __future__ import annotations

from typing import Iterator, Sequence

import numpy as np
import pyarrow as pa


def partition_groups(rows: pa.Table, keys: Sequence[str]) -> Iterator[tuple[tuple, np.ndarray | None]]:
    """Yield (partition values, row indices) per distinct partition; indices are None when unpartitioned."""
    if not keys:
        yield (), None
        return
    idx = pa.array(np.arange(rows.num_rows, dtype=np.int64))
    grouped = rows.select(list(keys)).append_column("__row", idx).group_by(list(keys), use_threads=False) \
        .aggregate([("__row", "list")])
    lists = grouped.column("__row_list")
    key_cols = [grouped.column(k) for k in keys]
    for i in range(grouped.num_rows):
        yield tuple(c[i].as_py() for c in key_cols), np.asarray(lists[i].values.to_numpy(), dtype=np.int64)


def bucket_groups(bucket_ids: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    """Yield (bucket, row indices in input order) per distinct bucket id."""
    keys = bucket_ids
    if len(bucket_ids) and 0 <= bucket_ids.min() and bucket_ids.max() < 1 << 16:
        keys = bucket_ids.astype(np.uint16)  # NumPy's stable sort is a radix sort for 16-bit keys: O(n)
    order = np.argsort(keys, kind="stable")
    bounds = np.flatnonzero(np.diff(bucket_ids[order])) + 1
    for chunk in np.split(order, bounds):
        if len(chunk):
            yield int(bucket_ids[chunk[0]]), chunk
