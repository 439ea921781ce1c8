"""Paimon's changelog rules for one key's ``before`` and ``after`` (paimon-semantics §8.1).

* before absent or a retract, after an add: ``+I after``;
* before an add, after a retract (or absent): ``-D before``;
* both adds: ``-U before``, ``+U after`` -- unless ``changelog-producer.row-deduplicate`` and the values are equal
  ignoring ``changelog-producer.row-deduplicate-ignore-fields`` (then nothing);
* otherwise nothing. The first-row engine only ever emits ``+I`` (a key with no earlier version).

Inputs are aligned per key: ``before_idx[i]`` / ``after_idx[i]`` are row numbers in ``before`` / ``after`` (or -1
when absent) for the i-th key, keys in ascending order. The output keeps ``before``'s/``after``'s columns (they
must match), in key order with a key's retract row first.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.merge import KEY_COLUMN_PREFIX, VALUE_KIND
from engine.options import CHANGELOG_ROW_DEDUPLICATE, CHANGELOG_ROW_DEDUPLICATE_IGNORE_FIELDS
from kernels.keys import encode_keys
from kernels.lookup import search_sorted

INSERT, UPDATE_BEFORE, UPDATE_AFTER, DELETE = 0, 1, 2, 3


def is_add(kinds) -> np.ndarray:
    """Return a boolean mask, True where the row kind is INSERT or UPDATE_AFTER."""
    k = np.asarray(kinds)
    return (k == INSERT) | (k == UPDATE_AFTER)


def _kinds(table: pa.Table, idx: np.ndarray) -> np.ndarray:
    """Kinds at ``idx`` (-1 -> a retract placeholder)."""
    kinds = np.asarray(table.column(VALUE_KIND).to_numpy(zero_copy_only=False)) if table is not None and \
        table.num_rows else np.zeros(0, np.int8)
    out = np.full(len(idx), DELETE, np.int8)
    present = idx >= 0
    out[present] = kinds[idx[present]]
    return out


def equal_values(a: pa.Table, b: pa.Table, columns) -> np.ndarray:
    """Row-wise: every column in ``columns`` equal (two nulls are equal)."""
    n = a.num_rows
    same = np.ones(n, bool)
    for c in columns:
        x, y = a.column(c), b.column(c)
        try:
            eq = pc.equal(x, y)
            both_null = pc.and_(pc.is_null(x), pc.is_null(y))
            eq = pc.or_(pc.fill_null(eq, False), both_null)
            same &= np.asarray(eq.to_numpy(zero_copy_only=False), bool)
        except (pa.ArrowNotImplementedError, pa.ArrowInvalid):
            same &= np.array([u == v for u, v in zip(x.to_pylist(), y.to_pylist())], bool)
    return same


def changelog_rows(before: pa.Table | None, before_idx: np.ndarray, after: pa.Table | None, after_idx: np.ndarray,
                   schema, *, drop_unchanged: bool = False) -> pa.Table | None:
    """The changelog rows (see the module docstring); None when there are none. ``drop_unchanged``: no -U/+U pair
    for a key whose values are all equal before and after, whatever the row-deduplicate options (Flink's
    ChangelogNormalize)."""
    before_idx = np.asarray(before_idx, np.int64)
    after_idx = np.asarray(after_idx, np.int64)
    b_add = (before_idx >= 0) & is_add(_kinds(before, before_idx))
    a_add = (after_idx >= 0) & is_add(_kinds(after, after_idx))
    opts = schema.table_options
    pieces: list[tuple[pa.Table, np.ndarray, int, int]] = []  # rows, key positions, kind, sub-order
    if opts.merge_engine == "first-row":
        ins = ~b_add & a_add
        pieces.append((after, np.flatnonzero(ins), INSERT, 1))
    else:
        ins = ~b_add & a_add
        dele = b_add & ~a_add
        upd = b_add & a_add
        if (drop_unchanged or opts.get(CHANGELOG_ROW_DEDUPLICATE)) and upd.any():
            ignore = set(opts.get(CHANGELOG_ROW_DEDUPLICATE_IGNORE_FIELDS)) if opts.get(CHANGELOG_ROW_DEDUPLICATE) \
                else set()
            cols = [c for c in schema.field_names if c not in ignore]
            pos = np.flatnonzero(upd)
            same = equal_values(before.take(pa.array(before_idx[pos])), after.take(pa.array(after_idx[pos])), cols)
            upd[pos[same]] = False
        pieces.append((before, np.flatnonzero(dele), DELETE, 0))
        pieces.append((before, np.flatnonzero(upd), UPDATE_BEFORE, 0))
        pieces.append((after, np.flatnonzero(upd), UPDATE_AFTER, 1))
        pieces.append((after, np.flatnonzero(ins), INSERT, 1))
    parts, order = [], []
    for rows, positions, kind, sub in pieces:
        if not len(positions):
            continue
        idx = before_idx[positions] if rows is before else after_idx[positions]
        part = rows.take(pa.array(idx))
        part = part.set_column(part.column_names.index(VALUE_KIND), VALUE_KIND,
                               pa.array(np.full(len(idx), kind, np.int8)))
        parts.append(part)
        order.append(positions * 2 + sub)
    if not parts:
        return None
    out = pa.concat_tables(parts)
    return out.take(pa.array(np.argsort(np.concatenate(order), kind="stable")))


def key_columns(table: pa.Table, schema) -> list:
    """Return the key columns (KEY_COLUMN_PREFIX + trimmed primary key names) of ``table``, in key order."""
    return [table.column(KEY_COLUMN_PREFIX + k) for k in schema.trimmed_primary_keys]


def positions(sorted_keys: pa.Table | None, probes: pa.Table | None, schema) -> np.ndarray:
    """For each row of ``probes``, its row in ``sorted_keys`` (ascending unique keys, normalized layout) or -1."""
    if probes is None or probes.num_rows == 0:
        return np.zeros(0, np.int64)
    if sorted_keys is None or sorted_keys.num_rows == 0:
        return np.full(probes.num_rows, -1, np.int64)
    return search_sorted(encode_keys(key_columns(sorted_keys, schema)), encode_keys(key_columns(probes, schema)))
