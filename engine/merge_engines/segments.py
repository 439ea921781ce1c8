"""The records of many keys in merged order, and Arrow <-> NumPy helpers the engines share.

``Segments`` wraps a combined Arrow table of normalized rows (global row id = row position) with the merged order
and key boundaries of ``kernels.merge.MergeResult``. Engines reduce each key's rows to one output row.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.schema import VALUE_KIND
from kernels.aggregate import float_order_words

INSERT, UPDATE_BEFORE, UPDATE_AFTER, DELETE = 0, 1, 2, 3


@dataclass
class Segments:
    """The rows of many keys for one merge: ``table`` holds normalized rows (single-chunk columns; a row id is its
    position), ``order`` the row ids in merged order (by key, and within a key oldest to newest), ``key_starts``
    where each key's rows start in ``order`` (n_keys + 1 offsets, the last is ``len(order)``), ``table_name`` names
    the table in errors.
    """
    table: pa.Table  # single-chunk columns
    order: np.ndarray
    key_starts: np.ndarray
    table_name: str | None = None

    @property
    def n_keys(self) -> int:
        """The number of distinct keys."""
        return self.key_starts.shape[0] - 1

    @cached_property
    def kinds(self) -> np.ndarray:
        """_VALUE_KIND of every row (by row id) as int8: 0 +I, 1 -U, 2 +U, 3 -D."""
        return column_numpy(self.table.column(VALUE_KIND)).astype(np.int8, copy=False)

    @cached_property
    def add(self) -> np.ndarray:
        """Per row id: True for an adding row (+I or +U)."""
        return (self.kinds == INSERT) | (self.kinds == UPDATE_AFTER)

    @cached_property
    def retract(self) -> np.ndarray:
        """Per row id: True for a retracting row (-U or -D) in ``order``. Rows of ``table`` outside ``order`` (the
        lone records a merge passes through unmerged) are never retracting here, so an engine refusing retracts
        does not raise for a key it does not merge."""
        in_order = np.zeros(len(self.kinds), np.bool_)
        in_order[self.order] = True
        return ~self.add & in_order

    @cached_property
    def last_rows(self) -> np.ndarray:
        """The row id of each key's newest row, in key order."""
        return self.order[self.key_starts[1:] - 1]

    def column(self, name: str) -> pa.Array:
        """Column ``name`` as one Arrow array indexed by row id. Raises KeyError for an unknown column."""
        col = self.table.column(name)
        return col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()

    def valid(self, name: str) -> np.ndarray:
        """Per row id: True where column ``name`` is not null."""
        return valid_mask(self.column(name))

    def output(self, values: dict[str, pa.Array], kinds: np.ndarray, rows_for_rest: np.ndarray | None = None
               ) -> pa.Table:
        """One row per key: ``values`` for the named columns, ``kinds`` as _VALUE_KIND, every other column
        (keys, _SEQUENCE_NUMBER, ...) taken from ``rows_for_rest`` (default: each key's newest row)."""
        rest = self.last_rows if rows_for_rest is None else rows_for_rest
        idx = pa.array(rest)
        cols = []
        for name in self.table.column_names:
            if name == VALUE_KIND:
                cols.append(pa.array(kinds.astype(np.int8), pa.int8()))
            elif name in values:
                cols.append(values[name])
            else:
                cols.append(self.column(name).take(idx))
        return pa.Table.from_arrays(cols, schema=self.table.schema)


def take_or_null(arr: pa.Array, rows: np.ndarray, null: np.ndarray | None = None) -> pa.Array:
    """``arr[rows]`` with nulls where ``rows < 0`` (or ``null`` is set)."""
    mask = rows < 0 if null is None else (rows < 0) | null
    if not mask.any():
        return arr.take(pa.array(rows))
    return arr.take(pa.array(np.where(mask, 0, rows), mask=mask))


def valid_mask(arr: pa.Array) -> np.ndarray:
    """A NumPy bool array, True where ``arr`` is not null."""
    if arr.null_count == 0:
        return np.ones(len(arr), bool)
    return np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=bool)


def column_numpy(col) -> np.ndarray:
    """A (chunked) Arrow column as one NumPy array (copies when it must; nulls as Arrow converts them)."""
    if isinstance(col, pa.ChunkedArray):
        col = col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
    return col.to_numpy(zero_copy_only=False)


def decimal_unscaled(arr: pa.Array) -> np.ndarray:
    """Unscaled int64 values of a decimal128 array with precision <= 18 (nulls read as 0)."""
    words = np.frombuffer(arr.buffers()[1], dtype=np.int64)[2 * arr.offset:2 * (arr.offset + len(arr))]
    out = words[0::2].copy()
    if arr.null_count:
        out[~valid_mask(arr)] = 0
    return out


def decimal_from_unscaled(values: np.ndarray, valid: np.ndarray, type_: pa.DataType) -> pa.Array:
    """decimal128 array from unscaled int64 values; values beyond the precision become null (as in Paimon)."""
    limit = 10 ** type_.precision
    valid = valid & (values > -limit) & (values < limit)
    words = np.empty(2 * len(values), np.int64)
    words[0::2] = values
    words[1::2] = values >> 63
    validity = pa.array(valid, pa.bool_()).buffers()[1] if not valid.all() else None
    return pa.Array.from_buffers(type_, len(values), [validity, pa.py_buffer(words.tobytes())],
                                 null_count=int((~valid).sum()))


def _no_nulls(arr: pa.Array, fill):
    return arr if arr.null_count == 0 else arr.fill_null(fill)


def order_values(arr: pa.Array) -> np.ndarray:
    """Per row a NumPy value whose ``<`` is Paimon's order of the column type (nulls read as anything)."""
    t = arr.type
    if pa.types.is_integer(t):
        return _no_nulls(arr, 0).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    if pa.types.is_floating(t):
        return float_order_words(arr.cast(pa.float64()).fill_null(0).to_numpy(zero_copy_only=False))
    if pa.types.is_boolean(t):
        return arr.fill_null(False).to_numpy(zero_copy_only=False).astype(np.int64)
    if pa.types.is_date32(t) or pa.types.is_time32(t):
        return arr.view(pa.int32()).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    if pa.types.is_timestamp(t) or pa.types.is_time64(t) or pa.types.is_date64(t):
        return arr.view(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    if pa.types.is_decimal(t) and t.precision <= 18:
        return decimal_unscaled(arr)
    # strings, binary, wide decimals: dense ranks (byte order for strings and binary)
    rank = pc.rank(arr, sort_keys="ascending", null_placement="at_end", tiebreaker="dense")
    return np.asarray(rank, dtype=np.int64)
