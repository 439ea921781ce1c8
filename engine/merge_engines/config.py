"""Per-table merge configuration parsed from the options: sequence groups, field aggregators, delete handling.

``merge_config(schema)`` is cached per schema object. ``validate(schema, table)`` raises InvalidSchema (or
UnsupportedFeature for valid Paimon settings lakemerge does not implement) with a message naming the field.
"""
from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field

from engine import options as O
from engine.errors import InvalidSchema, UnsupportedFeature

_SEQ_GROUP = re.compile(r"^fields\.(.+)\.sequence-group$")
PADDING_VALUES = ("row-kind-flag", "second-to-micro", "millis-to-micro")


@dataclass(frozen=True)
class FieldAgg:
    """The aggregate function of one field and its per-field settings."""
    field: str
    function: str
    delimiter: str = ","
    distinct: bool = False
    ignore_retract: bool = False
    extra: dict = field(default_factory=dict, compare=False)  # every fields.<f>.<option> of the field


@dataclass(frozen=True)
class SequenceGroup:
    """A sequence group: the fields updated together, ordered by ``sequence_fields``."""
    sequence_fields: tuple[str, ...]
    fields: tuple[str, ...]


@dataclass
class MergeConfig:
    """The merge-engine settings parsed from a table's options."""
    engine: str
    ignore_delete: bool
    sequence_fields: tuple[str, ...]
    descending: bool
    padding: tuple[str, ...]
    groups: list[SequenceGroup] = field(default_factory=list)
    aggs: dict[str, FieldAgg] = field(default_factory=dict)
    remove_on_delete: bool = False
    remove_on_sequence_group: tuple[str, ...] = ()
    defaults: dict[str, str] = field(default_factory=dict)

    def group_of(self, name: str) -> SequenceGroup | None:
        """Return the first sequence group containing ``name`` as a field or sequence field, or None."""
        for g in self.groups:
            if name in g.fields or name in g.sequence_fields:
                return g
        return None


def _bool(raw: dict, key: str) -> bool:
    return raw.get(key, "false").strip().lower() == "true"


def _field_agg(raw: dict, name: str, function: str) -> FieldAgg:
    prefix = f"fields.{name}."
    extra = {k[len(prefix):]: v for k, v in raw.items() if k.startswith(prefix)}
    return FieldAgg(name, function.strip().lower(), raw.get(f"fields.{name}.list-agg-delimiter", ","),
                    _bool(raw, f"fields.{name}.distinct"), _bool(raw, f"fields.{name}.ignore-retract"), extra)


def build(schema) -> MergeConfig:
    """Parse the merge-engine configuration from ``schema``'s options (raises on invalid settings)."""
    opts = schema.table_options
    raw = opts.raw
    engine = opts.merge_engine
    pk = set(schema.primary_keys)
    cfg = MergeConfig(engine, opts.ignore_delete, tuple(opts.sequence_fields), opts.sequence_descending,
                      tuple(opts.get(O.SEQUENCE_AUTO_PADDING)))
    for key, value in raw.items():
        m = _SEQ_GROUP.match(key)
        if m:
            cfg.groups.append(SequenceGroup(tuple(s.strip() for s in m.group(1).split(",")),
                                            tuple(s.strip() for s in value.split(",") if s.strip())))
        m = re.match(r"^fields\.(.+)\.default-value$", key)
        if m:
            cfg.defaults[m.group(1)] = value
    default_fn = opts.get(O.DEFAULT_AGGREGATE_FUNCTION)
    for name in schema.field_names:
        if name in pk:
            continue
        fn = raw.get(f"fields.{name}.aggregate-function")
        if engine == "aggregation":
            if name in cfg.sequence_fields:
                fn = "last_value"
            cfg.aggs[name] = _field_agg(raw, name, fn or default_fn or "last_non_null_value")
        elif engine == "partial-update" and (fn or default_fn):
            # Paimon's PartialUpdateMergeFunction.getAggFuncName: a group's sequence field has no aggregator,
            # every other non-key field takes its own or the default function (validate refuses one outside
            # the groups unless it is last_non_null_value)
            if not any(name in g.sequence_fields for g in cfg.groups):
                cfg.aggs[name] = _field_agg(raw, name, fn or default_fn)
    if engine == "partial-update":
        cfg.remove_on_delete = opts.get(O.PARTIAL_UPDATE_REMOVE_ON_DELETE)
        cfg.remove_on_sequence_group = tuple(opts.get(O.PARTIAL_UPDATE_REMOVE_ON_SEQUENCE_GROUP))
    elif engine == "aggregation":
        cfg.remove_on_delete = opts.get(O.AGGREGATION_REMOVE_ON_DELETE)
    return cfg


_cache: dict[int, tuple[object, MergeConfig]] = {}
_lock = threading.Lock()


def merge_config(schema) -> MergeConfig:
    """Return the MergeConfig for ``schema``, cached per schema object."""
    with _lock:
        hit = _cache.get(id(schema))
        if hit is not None and hit[0] is schema:
            return hit[1]
    cfg = build(schema)
    with _lock:
        if len(_cache) > 256:
            _cache.clear()
        _cache[id(schema)] = (schema, cfg)
    return cfg


_MERGE_FIELD_OPTION = re.compile(r"^fields\.[^.]+\.(aggregate-function|ignore-retract|distinct|list-agg-delimiter)$")


def validate(schema, table: str | None = None, *, opening: bool = False) -> None:
    """Check the merge-engine settings of ``schema`` the way Paimon does at table creation. ``opening`` (an
    existing schema, perhaps committed by another tool): every ``fields.<name>.*`` option naming no column is
    refused only at create and alter, as Paimon validates only there; opening still refuses a merge option
    (aggregate function, ignore-retract, distinct, list-agg delimiter) naming no column, which would change how
    rows merge."""
    from engine.merge_engines.aggregators import check_function

    where = f"table {table!r}: " if table else ""
    cfg = build(schema)
    names = set(schema.field_names)
    pk = set(schema.primary_keys)
    if cfg.padding:
        bad = [p for p in cfg.padding if p not in PADDING_VALUES]
        if bad:
            raise InvalidSchema(where + f"sequence.auto-padding {bad[0]!r} is not one of {list(PADDING_VALUES)}")
        if not cfg.sequence_fields:
            raise InvalidSchema(where + "sequence.auto-padding needs sequence.field")
    if cfg.engine == "first-row":
        if cfg.sequence_fields:
            raise InvalidSchema(where + "merge-engine=first-row does not allow sequence.field (Paimon rejects it)")
        return
    if cfg.groups and cfg.engine != "partial-update":
        raise InvalidSchema(where + "fields.<f>.sequence-group is only allowed with merge-engine=partial-update")
    seen: dict[str, str] = {}
    for g in cfg.groups:
        for f in g.sequence_fields + g.fields:
            if f not in names:
                raise InvalidSchema(where + f"sequence group field {f!r} is not a column")
        for f in g.fields:
            if f in pk:
                raise InvalidSchema(where + f"primary-key field {f!r} cannot be in a sequence group")
            if f in seen:
                raise InvalidSchema(where + f"field {f!r} is in more than one sequence group")
            seen[f] = ",".join(g.sequence_fields)
    for name in names:
        if f"fields.{name}.aggregate-function" in schema.options and name in pk:
            raise InvalidSchema(where + f"primary-key field {name!r} cannot have an aggregate function")
    for key in schema.options:  # Paimon's SchemaValidation.validateFieldsPrefix
        if key.startswith("fields.") and not (opening and not _MERGE_FIELD_OPTION.match(key)):
            for name in key.split(".")[1].split(","):
                if name != "default-aggregate-function" and name not in names:
                    raise InvalidSchema(where + f"option {key!r} names no column ({name!r})")
    if cfg.engine == "partial-update":
        if cfg.remove_on_delete and cfg.ignore_delete:
            raise InvalidSchema(where + "partial-update.remove-record-on-delete cannot be combined with ignore-delete")
        if cfg.remove_on_sequence_group and cfg.ignore_delete:
            raise InvalidSchema(where + "partial-update.remove-record-on-sequence-group cannot be combined with "
                                "ignore-delete")
        if cfg.remove_on_delete and cfg.groups:
            raise InvalidSchema(where + "partial-update.remove-record-on-delete cannot be combined with sequence "
                                "groups (use partial-update.remove-record-on-sequence-group)")
        group_names = {",".join(g.sequence_fields) for g in cfg.groups} | {f for g in cfg.groups
                                                                            for f in g.sequence_fields}
        for g in cfg.remove_on_sequence_group:
            if g not in group_names:
                raise InvalidSchema(where + f"partial-update.remove-record-on-sequence-group names {g!r}, which is "
                                    "not a sequence group")
        for name, agg in cfg.aggs.items():
            if agg.function != "last_non_null_value" and name not in seen:
                raise InvalidSchema(where + f"field {name!r} has aggregate function {agg.function!r} but is not in "
                                    "a sequence group (partial-update allows aggregators only inside groups)")
    if cfg.engine == "aggregation" and cfg.remove_on_delete:
        ignoring = [a.field for a in cfg.aggs.values() if a.ignore_retract]
        if ignoring:
            raise InvalidSchema(where + "aggregation.remove-record-on-delete cannot be combined with "
                                f"fields.{ignoring[0]}.ignore-retract")
    for agg in cfg.aggs.values():
        check_function(agg, schema.field(agg.field).type, where)
    if cfg.engine not in O.SUPPORTED_MERGE_ENGINES:
        raise UnsupportedFeature(where + f"merge-engine={cfg.engine} is not supported")
