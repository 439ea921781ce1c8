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


def run(options: dict, history, fold, *, keep_kinds=KINDS, model_kinds=KINDS):
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
def test_partial_update_sequence_group_model(history):
    """g guards a; b has no group. A retract taking the group nulls a; b ignores retracts."""
    def fold(recs):
        a = b = g = None
        taken = False
        any_add = False
        for _, kind, ra, rb, rg in recs:
            add = _is_add(kind)
            any_add |= add
            if rg is not None and (not taken or rg >= g):
                g, a, taken = rg, (ra if add else None), True
            if add and rb is not None:
                b = rb
        return ("+I" if any_add else "-D", a, b, g)
    run({"merge-engine": "partial-update", "fields.g.sequence-group": "a"}, history, fold)


@SETTINGS
@given(histories)
def test_aggregation_model(history):
    """a: sum (retracts subtract); b: listagg ignoring retracts; g: max ignoring retracts."""
    def fold(recs):
        s = None
        words = []
        mx = None
        for _, kind, a, b, g in recs:
            if a is not None:
                s = (0 if s is None else s) + (a if _is_add(kind) else -a)
            if _is_add(kind):
                if b is not None and b.strip():
                    words.append(b)
                if g is not None:
                    mx = g if mx is None else max(mx, g)
        return ("+I", s, ",".join(words) if words else None, mx)
    run({"merge-engine": "aggregation", "fields.a.aggregate-function": "sum",
         "fields.b.aggregate-function": "listagg", "fields.b.ignore-retract": "true",
         "fields.g.aggregate-function": "max", "fields.g.ignore-retract": "true"}, history, fold)


@SETTINGS
@given(histories)
def test_first_row_model(history):
    def fold(recs):
        adds = [r for r in recs if _is_add(r[1])]
        return adds[0][1:] if adds else recs[-1][1:]
    # ignore-delete drops retracts at write: the model sees only adds
    run({"merge-engine": "first-row", "ignore-delete": "true"}, history, fold, model_kinds=["+I", "+U"])
