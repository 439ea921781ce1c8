"""The merge engines: one module per ``merge-engine`` value, all reducing the records of a key to one record.

Entry points (used by ``engine.merge``): ``reduce_segments`` runs the table's engine over a merged order;
``required_columns`` says which columns an engine must decode; ``check_write_kinds`` rejects, before anything is
written, retract records the engine cannot take. Shared rule (Paimon's ``ReducerMergeFunctionWrapper``): a key
with a single record is passed through unchanged, whatever the engine.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from engine.errors import InvalidInput
from engine.merge_engines.config import MergeConfig, merge_config, validate  # noqa: F401
from engine.merge_engines.segments import Segments
from engine.schema import SEQUENCE_NUMBER, VALUE_KIND

KEY_COLUMN_PREFIX = "__key_"


def _module(engine: str):
    if engine == "partial-update":
        from engine.merge_engines import partial_update as m
    elif engine == "aggregation":
        from engine.merge_engines import aggregation as m
    elif engine == "first-row":
        from engine.merge_engines import first_row as m
    else:
        raise ValueError(f"no segment reducer for merge-engine={engine}")
    return m


def value_names(table: pa.Table, schema) -> list[str]:
    """Table columns of a normalized run that the engine reduces (not keys, not system columns)."""
    pk = set(schema.primary_keys)
    return [c for c in table.column_names
            if not c.startswith(KEY_COLUMN_PREFIX) and c not in (SEQUENCE_NUMBER, VALUE_KIND) and c not in pk]


def reduce_segments(table: pa.Table, order: np.ndarray, key_starts: np.ndarray, schema, *,
                    sorted_output: bool = True, table_name: str | None = None,
                    fold_lone_retracts: bool = False) -> pa.Table:
    """One record per key of the merged order (``kernels.merge.MergeResult`` fields) over ``table``'s rows,
    by the schema's (non-deduplicate) merge engine; keys in ascending order when ``sorted_output``.
    ``fold_lone_retracts``: a key whose only record is a retract is folded by the engine instead of passed
    through (Paimon's lookup compaction)."""
    cfg = merge_config(schema)
    module = _module(cfg.engine)
    table = table.combine_chunks()
    lengths = np.diff(key_starts)
    single = lengths == 1
    if fold_lone_retracts:
        lone_kinds = table.column(VALUE_KIND).to_numpy()[order[key_starts[:-1]]]
        single &= (lone_kinds != 1) & (lone_kinds != 3)
    if single.all():
        return table.take(pa.array(order[key_starts[:-1]]))
    if module.lone_add_is_unchanged(cfg):
        # The engine's fold of a lone add record is that record, so every key goes through the engine at once
        # (no split into lone and merged keys); lone records only keep their own row kind (+I or +U).
        seg = Segments(table, order, key_starts, table_name)
        lone_rows = order[key_starts[:-1][single]]
        if not seg.retract[lone_rows].any():
            merged = module.reduce(seg, cfg, value_names(table, schema))
            kinds = merged.column(VALUE_KIND).to_numpy().copy()
            kinds[single] = seg.kinds[lone_rows]
            i = merged.column_names.index(VALUE_KIND)
            return merged.set_column(i, merged.field(i), pa.array(kinds, pa.int8()))
    multi = np.flatnonzero(~single)
    sub_order = order[np.repeat(~single, lengths)]
    sub_starts = np.zeros(len(multi) + 1, np.int64)
    np.cumsum(lengths[multi], out=sub_starts[1:])
    seg = Segments(table, sub_order, sub_starts, table_name)
    merged = _module(cfg.engine).reduce(seg, cfg, value_names(table, schema))
    if not single.any():
        return merged
    singles = np.flatnonzero(single)
    both = pa.concat_tables([merged, table.take(pa.array(order[key_starts[singles]]))])
    if not sorted_output:
        return both
    perm = np.empty(len(lengths), np.int64)
    perm[multi] = np.arange(len(multi))
    perm[singles] = len(multi) + np.arange(len(singles))
    return both.take(pa.array(perm))


def required_columns(schema, columns) -> list[str]:
    """``columns`` plus what the engine needs to merge them (the sequence fields of their sequence groups)."""
    cfg = merge_config(schema)
    out = list(columns)
    if cfg.engine == "partial-update":
        for c in list(columns):
            g = cfg.group_of(c)
            if g is not None:
                out += list(g.sequence_fields)
        for name in cfg.remove_on_sequence_group:
            for g in cfg.groups:
                if name == ",".join(g.sequence_fields) or name in g.sequence_fields:
                    out += list(g.sequence_fields)
    return list(dict.fromkeys(out))


def check_write_kinds(schema, kinds: np.ndarray, table: str | None, rows: pa.Table | None = None) -> None:
    """Raise InvalidInput if the batch holds retract records (-U/-D) the table's merge engine cannot take.

    Partial-update with sequence groups: a retract reaches a group's aggregators only when its group sequence is
    not all null (Paimon skips such a group), so only those ``rows`` are checked (all rows when ``rows`` is None).
    """
    cfg = merge_config(schema)
    retract = (kinds == 1) | (kinds == 3)
    if cfg.engine == "deduplicate" or not retract.any():
        return
    if cfg.engine == "first-row":
        raise InvalidInput("merge-engine=first-row cannot take -U/-D records; set ignore-delete=true to drop them",
                           table=table)
    if cfg.engine == "partial-update":
        if not (cfg.remove_on_delete or cfg.groups):
            raise InvalidInput("merge-engine=partial-update cannot take -U/-D records; set ignore-delete=true, "
                               "partial-update.remove-record-on-delete=true or use sequence groups", table=table)
        if cfg.groups:
            from engine.merge_engines.aggregators import takes_retract
            for name, agg in cfg.aggs.items():
                g = cfg.group_of(name)
                if takes_retract(agg) or g is None or not _reaches_group(rows, g, retract):
                    continue
                raise InvalidInput(f"field {name!r}: aggregate function {agg.function!r} cannot take -U/-D "
                                   f"records; set fields.{name}.ignore-retract=true", table=table, column=name)
        return
    if cfg.engine == "aggregation":
        from engine.merge_engines.aggregators import takes_retract
        only_deletes_removed = cfg.remove_on_delete and not (kinds == 1).any()
        if only_deletes_removed:
            return
        for name, agg in cfg.aggs.items():
            if not takes_retract(agg):
                raise InvalidInput(f"field {name!r}: aggregate function {agg.function!r} cannot take -U/-D records "
                                   "(only sum, product, collect, merge_map, nested_update, last_value and "
                                   f"last_non_null_value can); set fields.{name}.ignore-retract=true",
                                   table=table, column=name)


def _reaches_group(rows: pa.Table | None, group, retract: np.ndarray) -> bool:
    """Whether some retract row has a group sequence that is not all null."""
    if rows is None:
        return True
    seq = [rows.column(f) for f in group.sequence_fields if f in rows.column_names]
    return any(np.asarray(c.is_valid())[retract].any() for c in seq)


def apply_default_values(table: pa.Table, schema) -> pa.Table:
    """Nulls of columns with ``fields.<f>.default-value`` replaced by the default (Paimon's read-side
    ``DefaultValueAssigner`` of versions before 1.2)."""
    cfg = merge_config(schema)
    if not cfg.defaults:
        return table
    for name, text in cfg.defaults.items():
        if name not in table.column_names:
            continue
        col = table.column(name)
        if col.null_count == 0:
            continue
        default = pa.scalar(text, pa.string()).cast(col.type)
        i = table.column_names.index(name)
        table = table.set_column(i, table.field(i), col.fill_null(default))
    return table
