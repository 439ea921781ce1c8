"""merge-engine=partial-update (paimon-semantics §6.2): later non-null values overwrite, nulls never do.

Per key, oldest first: each add record's non-null fields overwrite the accumulator. Sequence groups
(``fields.<g>.sequence-group = a,b``) guard their fields with their own sequence: a record whose group sequence
is all null leaves the group alone; otherwise it takes the group (sequence fields and guarded fields, nulls
included) when its group sequence is >= the current one; a retract taking a group nulls the guarded fields.
Guarded fields with ``fields.<f>.aggregate-function`` aggregate over every add record with a non-null group
sequence: ``agg(acc, in)`` when the record's group sequence is >= the group's, else ``agg(in, acc)``; a retract
record with a non-null group sequence retracts them whether or not it takes the group (Paimon's
``retractWithSequenceGroup`` retracts aggregated fields "for old sequence" too).
``partial-update.remove-record-on-delete``: a -D resets the row to the -D record and later adds start from it;
the result is -D when the key's last record is a -D or it has no add at all (an add before the -D counts, as
Paimon's ``meetInsert``), so +I, -D, -U gives +I with the -D's values. A key whose first record is a retract starts
from that record's values, every field and nulls included (Paimon's ``initRow``, also with ignore-delete and with
sequence groups, where the retract is then processed as usual). ``partial-update.remove-record-on-sequence-group``: a -D taking a named group does the same (every group
restarts from the -D's values); the key is removed when that -D is its last record. Result kind: +I if any add counts, else -D.
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


def _reset_rows(seg: Segments, cfg, add: np.ndarray, retract: np.ndarray) -> np.ndarray | None:
    """``partial-update.remove-record-on-sequence-group``: per key the last -D row that took a removing group
    (it reset the whole row to its own values, like Paimon's ``initRow``), or -1; None when no key has one."""
    removing = [g for g in cfg.groups if any(f in cfg.remove_on_sequence_group for f in g.sequence_fields)]
    removes = retract & (seg.kinds == DELETE)
    if not removing or not removes.any():
        return None
    words, all_null = zip(*(group_words(seg, g.sequence_fields) for g in removing))
    bounds = np.cumsum([0] + [w.shape[1] for w in words]).astype(np.int64)
    reset = K.segment_removal_barrier(seg.order, seg.key_starts, np.ascontiguousarray(np.concatenate(words, axis=1)),
                                      bounds, np.ascontiguousarray(np.stack(all_null, axis=1)), add, retract,
                                      removes)
    return reset if (reset >= 0).any() else None


def reduce(seg: Segments, cfg, value_names: list[str]) -> "pa.Table":  # noqa: F821
    """Merge each key's rows into one by partial update (latest non-null value per field, per sequence group if
    configured).
    Raises MergeFunctionError on retract records the configuration cannot take."""
    add = seg.add.copy()
    retract = seg.retract.copy()
    kinds = seg.kinds
    barrier_row = None  # per key: the row the accumulator restarted from (-1: none)
    last_row = seg.order[seg.key_starts[1:] - 1]
    seed_row = None  # per key: the first record when it is a retract (-1: none)
    if cfg.groups or cfg.ignore_delete or cfg.remove_on_delete:
        # Paimon's initRow: a key whose first record is a retract starts from that record's values (all fields,
        # nulls included); with sequence groups the retract is then processed as usual
        first_row = seg.order[seg.key_starts[:-1]]
        seed_row = np.where(seg.retract[first_row], first_row, -1)
        barrier_row = seed_row
    has_add = K.segment_pick(seg.order, seg.key_starts, add, False) >= 0
    if cfg.ignore_delete:
        retract[:] = False
    elif cfg.remove_on_delete:
        deletes = kinds == DELETE
        retract[:] = False  # -U is ignored
        if deletes.any():
            add &= K.rows_after_last(seg.order, seg.key_starts, deletes)
            last_delete = K.segment_pick(seg.order, seg.key_starts, deletes, False)
            barrier_row = np.where(last_delete >= 0, last_delete, barrier_row)
            # Paimon: an insert before the -D still counts (meetInsert); only a -D as the key's last record
            # makes the result a delete
            has_add &= ~deletes[last_row]
    elif not cfg.groups and retract.any():
        raise MergeFunctionError((f"table {seg.table_name!r}: " if seg.table_name else "")
                                 + "partial-update cannot take retract records (-U/-D); set ignore-delete=true, "
                                 "partial-update.remove-record-on-delete=true or use sequence groups")
    # remove-record-on-sequence-group: records up to a reset -D no longer count; the fold restarts from the -D
    # row, which every group takes as its current values (nulls included)
    reset = _reset_rows(seg, cfg, add, retract)
    is_reset = np.zeros(len(kinds), bool)
    if reset is not None:
        barrier_row = reset if barrier_row is None else np.where(reset >= 0, reset, barrier_row)
        is_reset[reset[reset >= 0]] = True
        after = K.rows_after_last(seg.order, seg.key_starts, is_reset)
        add &= after
        retract &= after
    values = {}
    for name in value_names:
        if cfg.group_of(name) is not None:
            continue
        arr = seg.column(name)
        idx = K.segment_pick(seg.order, seg.key_starts, add & valid_mask(arr), False)
        if barrier_row is not None:
            idx = np.where(idx < 0, barrier_row, idx)
        values[name] = take_or_null(arr, idx)
    seeded = _Seeded(seg, seed_row if cfg.groups else None,
                     None if reset is None else K.rows_after_last(seg.order, seg.key_starts, is_reset))
    for g in cfg.groups:
        wanted = [f for f in g.sequence_fields + g.fields if f in value_names]
        if not wanted:
            continue
        words, all_null = group_words(seg, g.sequence_fields)
        g_add, all_null = seeded.rows(add | is_reset, True), seeded.rows(all_null & ~is_reset, False)
        words, g_retract = seeded.rows(words), seeded.rows(retract, False)
        src, nulled, newer = K.segment_group_fold(seeded.seg.order, seeded.seg.key_starts, words, all_null, g_add,
                                                  g_retract)
        for f in g.sequence_fields:
            if f in value_names:
                values[f] = take_or_null(seeded.column(f), src)
        for f in g.fields:
            if f not in value_names:
                continue
            agg = cfg.aggs.get(f)
            if agg is not None:
                values[f] = aggregators.reduce_in_group(seeded.seg, seeded.column(f), agg, g_add & ~all_null,
                                                        g_retract & ~all_null, newer, seeded.marks)
            else:
                values[f] = take_or_null(seeded.column(f), src, nulled)
    out = seg.output(values, np.where(has_add, INSERT, DELETE).astype(np.int8))
    if reset is None:
        return out
    # a key whose last record is its reset -D is that -D record (Paimon: currentDeleteRow)
    removed = reset == last_row
    if not removed.any():
        return out
    import pyarrow as pa
    keys = np.flatnonzero(removed)
    keep = np.flatnonzero(~removed)
    out = pa.concat_tables([out.take(pa.array(keep)), seg.table.take(pa.array(reset[keys]))])
    perm = np.empty(seg.n_keys, np.int64)
    perm[np.concatenate([keep, keys])] = np.arange(seg.n_keys)
    return out.take(pa.array(perm))


class _Seeded:
    """The rows of ``seg`` with a copy of each key's seeding retract (``seed_row`` >= 0) put before the key's
    first record: Paimon's ``initRow`` sets every group to the retract's values (a copy is an add that takes
    every group, whatever its sequence; ``marks`` flags the copies, whose value aggregators take as is), then
    the retract itself is processed. Copies get row ids after ``seg``'s, so ``seg``'s per-row masks do not cover
    them: callers extend theirs with ``rows``. ``after`` (rows after a remove-record-on-sequence-group reset, or
    None) decides whether a copy still counts. Without seeds this is ``seg`` itself."""

    def __init__(self, seg: Segments, seed_row: np.ndarray | None, after: np.ndarray | None):
        self.base = seg
        self.copies = np.zeros(0, np.int64) if seed_row is None else seed_row[seed_row >= 0]
        self.after = after
        self.marks = None  # per row id: True for a copy
        if not len(self.copies):
            self.seg = seg
            return
        self.marks = np.concatenate([np.zeros(seg.table.num_rows, bool), np.ones(len(self.copies), bool)])
        n = seg.table.num_rows
        has = (seed_row >= 0).astype(np.int64)
        order = np.insert(seg.order, seg.key_starts[:-1][seed_row >= 0], n + np.arange(len(self.copies)))
        starts = seg.key_starts + np.concatenate([[0], np.cumsum(has)])
        self.seg = Segments(seg.table, order, starts, seg.table_name)

    def rows(self, per_row: np.ndarray, copy_value=None) -> np.ndarray:
        """A per-row array extended to the copies: ``copy_value`` for each copy (True only where the copy still
        counts), or the seeding row's own value when None."""
        if not len(self.copies):
            return per_row
        if copy_value is None:
            extra = per_row[self.copies]
        else:
            extra = np.full(len(self.copies), copy_value, per_row.dtype)
            if copy_value is True and self.after is not None:
                extra &= self.after[self.copies]
        return np.ascontiguousarray(np.concatenate([per_row, extra]))

    def column(self, name: str):
        """Column ``name`` by row id, copies included."""
        arr = self.base.column(name)
        if not len(self.copies):
            return arr
        import pyarrow as pa
        return pa.concat_arrays([arr, arr.take(pa.array(self.copies))])


def lone_add_is_unchanged(cfg) -> bool:
    """Without sequence groups a lone add record folds to itself (its non-null fields over an empty row)."""
    return not cfg.groups
