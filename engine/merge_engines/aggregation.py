"""merge-engine=aggregation (paimon-semantics §6.3): every non-key field folds with its aggregate function.

Per key, oldest first: an add record aggregates, a retract record retracts (or raises for functions that cannot
take one, unless ``fields.<f>.ignore-retract``). The result kind is +I. With
``aggregation.remove-record-on-delete`` a -D resets the key: if it is the newest record the result is that -D
record (kind -D); later records aggregate onto the -D's values (Paimon's ``AggregateMergeFunction.initRow``
copies every field of the -D into the accumulator, nulls included, and resets no aggregator state).
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from engine.merge_engines import aggregators
from engine.merge_engines.segments import DELETE, INSERT, Segments
from kernels import aggregate as K


def reduce(seg: Segments, cfg, value_names: list[str]) -> pa.Table:
    """Merge each key's rows with the configured field aggregators; returns one INSERT row per key
    (honouring ignore-delete and remove-record-on-delete)."""
    add = seg.add
    retract = seg.retract
    if cfg.ignore_delete:
        retract = np.zeros_like(retract)
    deleted = None
    seed = None
    if cfg.remove_on_delete:
        deletes = seg.kinds == DELETE
        if deletes.any():
            after = K.rows_after_last(seg.order, seg.key_starts, deletes)
            seed_rows = K.segment_pick(seg.order, seg.key_starts, deletes, False)
            seed = aggregators.Seed(seed_rows, add & ~after)
            add, retract = add & after, retract & after
            deleted = deletes[seg.last_rows]
    values = {name: aggregators.reduce(seg, seg.column(name), cfg.aggs[name], add, retract, seed)
              for name in value_names if name in cfg.aggs}
    out = seg.output(values, np.full(seg.n_keys, INSERT, np.int8))
    if deleted is not None and deleted.any():
        keys = np.flatnonzero(deleted)
        keep = np.flatnonzero(~deleted)
        out = pa.concat_tables([out.take(pa.array(keep)), seg.table.take(pa.array(seg.last_rows[keys]))])
        perm = np.empty(seg.n_keys, np.int64)
        perm[np.concatenate([keep, keys])] = np.arange(seg.n_keys)
        out = out.take(pa.array(perm))
    return out


EXACT_ON_ONE_RECORD = ("sum", "product", "max", "min", "last_value", "last_non_null_value", "first_value",
                       "first_non_null_value", "bool_and", "bool_or")


def lone_add_is_unchanged(cfg) -> bool:
    """Whether folding a key's only (add) record returns it unchanged (true for the scalar functions)."""
    return all(a.function in EXACT_ON_ONE_RECORD for a in cfg.aggs.values())
