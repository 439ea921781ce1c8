"""Hypothesis model tests, one per merge engine: random write/delete histories against a plain Python fold.

The model simulates what Paimon does: each commit's records of a key are folded by the writer (a key's only
record passes through unchanged, Paimon's ``ReducerMergeFunctionWrapper``), then the read folds the commits'
records in arrival order (no sequence.field) the same way; a merged retract (-U/-D) is not visible. A fold
returns (kind, a, b, g).
"""
from __future__ import annotations

import shutil
import tempfile

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

SCHEMA = pa.schema([("k", pa.int32()), ("a", pa.int64()), ("b", pa.string()), ("g", pa.int32())])
KINDS = ["+I", "+U", "-U", "-D"]

record = st.tuples(st.integers(0, 4), st.sampled_from(KINDS), st.one_of(st.none(), st.integers(-5, 5)),
                   st.one_of(st.none(), st.sampled_from(["x", "y", " ", "é"])),
                   st.one_of(st.none(), st.integers(0, 3)))
pytestmark = pytest.mark.slow

histories = st.lists(st.lists(record, min_size=1, max_size=8), min_size=1, max_size=4)


def _is_add(kind):
    return kind in ("+I", "+U")


def _is_retract(kind):
    return kind in ("-U", "-D")


# ---- small transliterations of Paimon's Java merge functions (paimon-core, mergetree/compact) -------------------
# A merge sees one key's records oldest first and returns (kind, a, b, g). Records are (k, kind, a, b, g).

class JavaAgg:
    """One field aggregator (aggregate/Field*Agg.java): agg, aggReversed and retract with Java's null rules.
    first_value / first_non_null_value keep an 'initialised' flag that only reset() clears; functions without
    a retract() raise (FieldAggregator.retract), fields.<f>.ignore-retract keeps the accumulator
    (FieldIgnoreRetractAgg)."""

    def __init__(self, fn, ignore_retract=False, delimiter=","):
        self.fn, self.ignore_retract, self.delimiter = fn, ignore_retract, delimiter
        self.initialised = False

    def agg(self, acc, x):
        fn = self.fn
        if fn == "last_value":
            return x
        if fn == "last_non_null_value":
            return acc if x is None else x
        if fn == "first_value":
            if not self.initialised:
                self.initialised = True
                return x
            return acc
        if fn == "first_non_null_value":
            if not self.initialised and x is not None:
                self.initialised = True
                return x
            return acc
        if fn == "listagg":  # FieldListaggAgg: blank input keeps acc, blank acc takes input
            if x is None or not x.strip():
                return acc
            return x if acc is None or not acc.strip() else acc + self.delimiter + x
        if acc is None or x is None:  # sum, max (FieldSumAgg / FieldMaxAgg)
            return x if acc is None else acc
        return acc + x if fn == "sum" else max(acc, x)

    def agg_reversed(self, acc, x):
        return self.agg(x, acc)

    def retract(self, acc, x):
        if self.ignore_retract:
            return acc
        if self.fn == "sum":
            if acc is None or x is None:
                return -x if acc is None and x is not None else acc
            return acc - x
        if self.fn == "last_value":
            return None
        if self.fn == "last_non_null_value":
            return None if x is not None else acc
        raise RetractRefused(self.fn)


class RetractRefused(Exception):
    pass


def java_aggregation(recs, aggs: dict, remove_on_delete=False):
    """AggregateMergeFunction.add/getResult: the row starts all null; an add aggregates, a retract retracts; with
    remove-record-on-delete a -D copies all its fields into the row (initRow) and the result is -D while it is
    the latest record. Aggregators are not reset by a -D."""
    row = {"a": None, "b": None, "g": None}
    deleted = False
    for _, kind, a, b, g in recs:
        values = {"a": a, "b": b, "g": g}
        deleted = remove_on_delete and kind == "-D"
        if deleted:
            row = dict(values)
            continue
        for f, agg in aggs.items():
            row[f] = agg.retract(row[f], values[f]) if _is_retract(kind) else agg.agg(row[f], values[f])
    return ("-D" if deleted else "+I", row["a"], row["b"], row["g"])


def _seq_key(values, seq):
    """A group sequence as Paimon's UserDefinedSeqComparator orders it: field by field, nulls first."""
    return tuple((0, 0) if values[f] is None else (1, values[f]) for f in seq)


def java_partial_update(recs, groups: dict, aggs: dict, ignore_delete=False, remove_on_sequence_group=()):
    """PartialUpdateMergeFunction.add with sequence groups: ``groups`` maps a sequence field, or a tuple of
    them, to its guarded fields, ``aggs`` a guarded field to its JavaAgg. A first record that is a retract seeds
    the row with all its fields (initRow). An add: per group whose sequence is not all null, if its sequence >=
    the row's (field by field, nulls first) the sequence and guarded fields take the record's values (aggregated
    ones agg(acc, in)), else aggregated ones take aggReversed; fields outside groups: non-null overwrite. A
    retract (unless ignore-delete): per group whose sequence is not all null and >= the row's, the sequence
    takes the record's values and guarded fields become null (aggregated ones: retract); older: aggregated ones
    retract; a -D taking a group of remove-record-on-sequence-group resets the row to the -D (result -D).
    Result: -D when the last record reset the row or no add was met."""
    groups = {(seq,) if isinstance(seq, str) else tuple(seq): fields for seq, fields in groups.items()}
    row = {"a": None, "b": None, "g": None}
    filled = met_insert = deleted = False
    grouped = {f for fs in groups.values() for f in fs} | {f for seq in groups for f in seq}
    for _, kind, a, b, g in recs:
        values = {"a": a, "b": b, "g": g}
        deleted = False
        if _is_retract(kind):
            if not filled:
                row, filled = dict(values), True
            if ignore_delete:
                continue
            for seq, fields in groups.items():
                if all(values[f] is None for f in seq):
                    continue
                if _seq_key(values, seq) >= _seq_key(row, seq):
                    if kind == "-D" and set(seq) & set(remove_on_sequence_group):
                        row, deleted = dict(values), True
                        break
                    for f in seq:
                        row[f] = values[f]
                    for f in fields:
                        row[f] = aggs[f].retract(row[f], values[f]) if f in aggs else None
                else:
                    for f in fields:
                        if f in aggs:
                            row[f] = aggs[f].retract(row[f], values[f])
            continue
        for seq, fields in groups.items():
            if all(values[f] is None for f in seq):
                continue
            newer = _seq_key(values, seq) >= _seq_key(row, seq)
            if newer:
                for f in seq:
                    row[f] = values[f]
            for f in fields:
                if f in aggs:
                    row[f] = aggs[f].agg(row[f], values[f]) if newer else aggs[f].agg_reversed(row[f], values[f])
                elif newer:
                    row[f] = values[f]
        for f in ("a", "b", "g"):
            if f not in grouped and values[f] is not None:
                row[f] = values[f]
        met_insert = filled = True
    return ("-D" if deleted or not met_insert else "+I", row["a"], row["b"], row["g"])


def run(options: dict, history, fold, *, keep_kinds=KINDS, model_kinds=KINDS, compact=False):
    d = tempfile.mkdtemp(prefix="lakemerge-engine-model-")
    try:
        from engine import Catalog
        cat = Catalog(d)
        cat.create_database("db")
        t = cat.create_table("db.t", SCHEMA, primary_key=["k"], options={"bucket": "2", **options})
        per_key: dict[int, list] = {}
        for commit in history:
            commit = [r for r in commit if r[1] in keep_kinds]
            by_key: dict[int, list] = {}
            if not commit:
                continue
            t.write(pa.Table.from_pylist([dict(zip(SCHEMA.names, (r[0], r[2], r[3], r[4]))) for r in commit],
                                         schema=SCHEMA), row_kinds=[r[1] for r in commit])
            for r in commit:
                if r[1] in model_kinds:
                    by_key.setdefault(r[0], []).append(r)
            for k, recs in by_key.items():
                per_key.setdefault(k, []).append(recs)
        expected = {}
        for k, per_commit in per_key.items():
            recs = [c[0] if len(c) == 1 else (k, *fold(c)) for c in per_commit]
            final = recs[0][1:] if len(recs) == 1 else fold(recs)
            if _is_add(final[0]):
                expected[k] = tuple(final[1:])
        got = {r["k"]: (r["a"], r["b"], r["g"]) for r in t.read().to_pylist()}
        assert got == expected
        if expected:
            keys = pa.table({"k": pa.array(sorted(expected), pa.int32())})
            looked = {r["k"]: (r["a"], r["b"], r["g"]) for r in t.lookup(keys).to_pylist()}
            assert looked == expected
        if compact:  # a full compaction folds the same records in one merge, as the read did
            t.compact(full=True)
            assert {r["k"]: (r["a"], r["b"], r["g"]) for r in t.read().to_pylist()} == expected
    finally:
        shutil.rmtree(d, ignore_errors=True)


SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(histories)
def test_partial_update_model(history):
    def fold(recs):
        acc = [None, None, None]
        for _, _, a, b, g in recs:
            acc = [a if a is not None else acc[0], b if b is not None else acc[1], g if g is not None else acc[2]]
        return ("+I", *acc)
    run({"merge-engine": "partial-update"}, history, fold, keep_kinds=["+I", "+U"])


@SETTINGS
@given(histories)
def test_partial_update_remove_record_on_delete_model(history):
    """Paimon: a first record that retracts seeds the row; a -D resets the row to its values; -U is otherwise
    ignored; the result is -D when the last record is a -D or no add was met (an add before a -D counts)."""
    def fold(recs):
        acc, met_add, deleted = [None, None, None], False, False
        for i, (_, kind, a, b, g) in enumerate(recs):
            deleted = kind == "-D"
            if deleted or (i == 0 and not _is_add(kind)):
                acc = [a, b, g]
            elif _is_add(kind):
                acc = [a if a is not None else acc[0], b if b is not None else acc[1], g if g is not None else acc[2]]
                met_add = True
        return ("-D" if deleted or not met_add else "+I", *acc)
    run({"merge-engine": "partial-update", "partial-update.remove-record-on-delete": "true"}, history, fold)


@SETTINGS
@given(histories)
def test_aggregation_model(history):
    """a: sum (retracts subtract); b: listagg ignoring retracts; g: max ignoring retracts."""
    def fold(recs):
        return java_aggregation(recs, {"a": JavaAgg("sum"), "b": JavaAgg("listagg", ignore_retract=True),
                                       "g": JavaAgg("max", ignore_retract=True)})
    run({"merge-engine": "aggregation", "fields.a.aggregate-function": "sum",
         "fields.b.aggregate-function": "listagg", "fields.b.ignore-retract": "true",
         "fields.g.aggregate-function": "max", "fields.g.ignore-retract": "true"}, history, fold, compact=True)


@SETTINGS
@given(histories)
def test_first_row_model(history):
    def fold(recs):
        adds = [r for r in recs if _is_add(r[1])]
        return adds[0][1:] if adds else recs[-1][1:]
    # ignore-delete drops retracts at write: the model sees only adds
    run({"merge-engine": "first-row", "ignore-delete": "true"}, history, fold, model_kinds=["+I", "+U"])


@SETTINGS
@given(histories)
def test_aggregation_java_model(history):
    """Against java_aggregation: a sum (retracts subtract, a retract of an empty row negates), b last_value, g
    last_non_null_value (the default function)."""
    def fold(recs):
        return java_aggregation(recs, {"a": JavaAgg("sum"), "b": JavaAgg("last_value"),
                                       "g": JavaAgg("last_non_null_value")})
    run({"merge-engine": "aggregation", "fields.a.aggregate-function": "sum",
         "fields.b.aggregate-function": "last_value"}, history, fold, compact=True)


@SETTINGS
@given(histories)
def test_aggregation_remove_record_on_delete_java_model(history):
    """Against java_aggregation with remove-record-on-delete: a sum, b listagg, g first_non_null_value; a -D
    seeds the row with its values (Paimon initRow), first_non_null_value keeps its initialised flag. -U is left
    out (listagg and first_non_null_value cannot retract)."""
    def fold(recs):
        return java_aggregation(recs, {"a": JavaAgg("sum"), "b": JavaAgg("listagg"),
                                       "g": JavaAgg("first_non_null_value")}, remove_on_delete=True)
    run({"merge-engine": "aggregation", "aggregation.remove-record-on-delete": "true",
         "fields.a.aggregate-function": "sum", "fields.b.aggregate-function": "listagg",
         "fields.g.aggregate-function": "first_non_null_value"}, history, fold,
        keep_kinds=["+I", "+U", "-D"], compact=True)


@SETTINGS
@given(histories)
def test_partial_update_sequence_group_java_model(history):
    """Against java_partial_update: g guards a, b is outside groups; a first retract seeds the row."""
    def fold(recs):
        return java_partial_update(recs, {"g": ["a"]}, {})
    run({"merge-engine": "partial-update", "fields.g.sequence-group": "a"}, history, fold, compact=True)


@SETTINGS
@given(histories)
def test_partial_update_sequence_group_sum_java_model(history):
    """Against java_partial_update: g guards a, aggregated by sum (retracts subtract, also for older
    sequences)."""
    def fold(recs):
        return java_partial_update(recs, {"g": ["a"]}, {"a": JavaAgg("sum")})
    run({"merge-engine": "partial-update", "fields.g.sequence-group": "a", "fields.a.aggregate-function": "sum"},
        history, fold, compact=True)


@SETTINGS
@given(histories)
def test_partial_update_sequence_group_ignore_delete_java_model(history):
    """Against java_partial_update with ignore-delete: retracts are dropped at write (Paimon's writer drops
    them with ignore-delete), so the model sees adds only."""
    def fold(recs):
        return java_partial_update(recs, {"g": ["a"]}, {"a": JavaAgg("max")}, ignore_delete=True)
    run({"merge-engine": "partial-update", "fields.g.sequence-group": "a", "fields.a.aggregate-function": "max",
         "ignore-delete": "true"}, history, fold, model_kinds=["+I", "+U"], compact=True)


@SETTINGS
@given(histories)
def test_partial_update_remove_record_on_sequence_group_java_model(history):
    """Against java_partial_update: a -D taking group g (partial-update.remove-record-on-sequence-group=g)
    resets the row to the -D."""
    def fold(recs):
        return java_partial_update(recs, {"g": ["a"]}, {}, remove_on_sequence_group=("g",))
    run({"merge-engine": "partial-update", "fields.g.sequence-group": "a",
         "partial-update.remove-record-on-sequence-group": "g"}, history, fold, compact=True)


@SETTINGS
@given(histories)
def test_partial_update_sequence_group_first_values_java_model(history):
    """Against java_partial_update: g guards a (first_value) and b (first_non_null_value), both ignoring
    retracts; older group sequences call the stateful functions reversed (agg(in, acc))."""
    def fold(recs):
        return java_partial_update(recs, {"g": ["a", "b"]}, {"a": JavaAgg("first_value", ignore_retract=True),
                                                             "b": JavaAgg("first_non_null_value",
                                                                          ignore_retract=True)})
    run({"merge-engine": "partial-update", "fields.g.sequence-group": "a,b",
         "fields.a.aggregate-function": "first_value", "fields.a.ignore-retract": "true",
         "fields.b.aggregate-function": "first_non_null_value", "fields.b.ignore-retract": "true"},
        history, fold, compact=True)


@SETTINGS
@given(histories)
def test_partial_update_two_sequence_fields_group_java_model(history):
    """Against java_partial_update: the group ordered by (g, a), nulls first field by field, guards b."""
    def fold(recs):
        return java_partial_update(recs, {("g", "a"): ["b"]}, {})
    run({"merge-engine": "partial-update", "fields.g,a.sequence-group": "b"}, history, fold, compact=True)
