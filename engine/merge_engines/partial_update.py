"""merge-engine=partial-update (paimon-semantics §6.2): later non-null values overwrite, nulls never do.

Per key, oldest first: each add record's non-null fields overwrite the accumulator. Sequence groups
(``fields.<g>.sequence-group = a,b``) guard their fields with their own sequence: a record whose group sequence
is all null leaves the group alone; otherwise it takes the group (sequence fields and guarded fields, nulls
included) when its group sequence is >= the current one; a retract taking a group nulls the guarded fields.
Guarded fields with ``fields.<f>.aggregate-function`` aggregate over every add record with a non-null group
sequence: ``agg(acc, in)`` when the record's group sequence is >= the group's, else ``agg(in, acc)``; a retract
record with a non-null group sequence retracts them whether or not it takes the group (Paimon's
``retractWithSequenceGroup`` retracts aggregated fields "for old sequence" too). ``partial-update.remove-record-on-delete``: a -D resets the row to
the -D record (kind -D) and later adds start from it. Result kind: +I if any add counts, else -D.
"""
from __future__ import annotations

import numpy as np

from engine.errors import MergeFunctionError
from engine.merge_engines import aggregators
from engine.merge_engines.segments import DELETE, INSERT, Segments, order_values, take_or_null, valid_mask
from kernels import aggregate as K

SIGN = np.uint64(1 << 63)


def group_words(seg: Segments, fields) -> tuple[np.ndarray, np.ndarray]:
    """(uint64 (n, 2*len(fields)) ascending words with nulls first, all-null flag) of a group's sequence."""
    n = seg.table.num_rows
    cols = []
    all_null = np.ones(n, bool)
    for f in fields:
        arr = seg.column(f)
        valid = valid_mask(arr)
        all_null &= ~valid
        v = order_values(arr)
        w = v if v.dtype == np.uint64 else (v.astype(np.int64).view(np.uint64) ^ SIGN)
        cols += [valid.astype(np.uint64), np.where(valid, w, np.uint64(0))]
    return np.ascontiguousarray(np.stack(cols, axis=1)), all_null


def reduce(seg: Segments, cfg, value_names: list[str]) -> "pa.Table":  # noqa: F821
    """Merge each key's rows into one by partial update (latest non-null value per field, per sequence group if
    configured).
    Raises MergeFunctionError on retract records the configuration cannot take."""
    add = seg.add.copy()
    retract = seg.retract.copy()
    kinds = seg.kinds
    barrier_row = None
    if cfg.ignore_delete:
        retract[:] = False
    elif cfg.remove_on_delete:
        deletes = kinds == DELETE
        retract[:] = False  # -U is ignored
        if deletes.any():
            add &= K.rows_after_last(seg.order, seg.key_starts, deletes)
            barrier_row = K.segment_pick(seg.order, seg.key_starts, deletes, False)
    elif not cfg.groups and retract.any():
        raise MergeFunctionError((f"table {seg.table_name!r}: " if seg.table_name else "")
                                 + "partial-update cannot take retract records (-U/-D); set ignore-delete=true, "
                                 "partial-update.remove-record-on-delete=true or use sequence groups")
    values = {}
    for name in value_names:
        if cfg.group_of(name) is not None:
            continue
        arr = seg.column(name)
        idx = K.segment_pick(seg.order, seg.key_starts, add & valid_mask(arr), False)
        if barrier_row is not None:
            idx = np.where(idx < 0, barrier_row, idx)
        values[name] = take_or_null(arr, idx)
    removed = np.zeros(seg.n_keys, bool)
    removed_row = np.full(seg.n_keys, -1, np.int64)
    for g in cfg.groups:
        wanted = [f for f in g.sequence_fields + g.fields if f in value_names]
        if not wanted:
            continue
        words, all_null = group_words(seg, g.sequence_fields)
        src, nulled, newer = K.segment_group_fold(seg.order, seg.key_starts, words, all_null, add, retract)
        for f in g.sequence_fields:
            if f in value_names:
                values[f] = take_or_null(seg.column(f), src)
        for f in g.fields:
            if f not in value_names:
                continue
            agg = cfg.aggs.get(f)
            if agg is not None:
                values[f] = aggregators.reduce_in_group(seg, seg.column(f), agg, add & ~all_null,
                                                        retract & ~all_null, newer)
            else:
                values[f] = take_or_null(seg.column(f), src, nulled)
        if ",".join(g.sequence_fields) in cfg.remove_on_sequence_group or any(
                f in cfg.remove_on_sequence_group for f in g.sequence_fields):
            hit = nulled & (src >= 0) & (kinds[np.maximum(src, 0)] == DELETE)
            removed_row = np.where(hit & ~removed, src, removed_row)
            removed |= hit
    has_add = K.segment_pick(seg.order, seg.key_starts, add, False) >= 0
    out_kinds = np.where(has_add, INSERT, DELETE).astype(np.int8)
    out = seg.output(values, out_kinds)
    if removed.any():
        import pyarrow as pa
        keys = np.flatnonzero(removed)
        deleted = seg.table.take(pa.array(removed_row[keys]))
        keep = np.flatnonzero(~removed)
        out = pa.concat_tables([out.take(pa.array(keep)), deleted])
        perm = np.empty(seg.n_keys, np.int64)
        perm[np.concatenate([keep, keys])] = np.arange(seg.n_keys)
        out = out.take(pa.array(perm))
    return out


def lone_add_is_unchanged(cfg) -> bool:
    """Without sequence groups a lone add record folds to itself (its non-null fields over an empty row)."""
    return not cfg.groups
