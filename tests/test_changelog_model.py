"""Randomized model test of the changelog a downstream consumer gets (Paimon's lookup / full-compaction guarantee).

Random CDC histories (row kinds given as ``row_kinds`` or through ``rowkind.field``, ``sequence.field`` values out
of order and tied, duplicate keys inside one commit, keys moving between partitions on a cross-partition table),
interleaved with minor and full compactions and ALTER TABLE ADD COLUMN, over several merge engines, bucket modes
and deletion vectors. Checks, at every commit:

* folding the changelog read by ``Table.stream`` gives the batch read of the snapshot the stream reached, and each
  retract (-U / -D) carries exactly the values last emitted for its key; an insert (+I) never meets a live key;
* ``read_changes`` of each snapshot is what the stream handed over for it;
* a consumer stopped midway and restarted continues with no lost and no repeated snapshot;
* the deduplicate engine's batch reads equal tests.interop.dict_model.DictModel at every snapshot (time travel).

With ``changelog-producer.row-deduplicate`` a -U / +U pair with equal values is never emitted (Paimon's
LookupChangelogMergeFunctionWrapper / FullChangelogMergeFunctionWrapper drop it).
"""
from __future__ import annotations

import os
import shutil
import tempfile

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.interop.dict_model import DictModel

SCHEMA = pa.schema([pa.field("p", pa.string(), False), pa.field("k", pa.int32(), False), ("s", pa.int32()),
                    ("a", pa.int64()), ("v", pa.string()), ("op", pa.string())])
ADD = ("+I", "+U")
KINDS = ["+I", "+U", "-U", "-D"]

# name -> (options, cross-partition primary key, kinds the history may use)
CONFIGS = {
    "dedup-lookup": ({"bucket": "2", "changelog-producer": "lookup"}, False, KINDS),
    "dedup-lookup-seq-dv": ({"bucket": "1", "changelog-producer": "lookup", "sequence.field": "s",
                             "deletion-vectors.enabled": "true"}, False, KINDS),
    "dedup-lookup-rowkind-rowdedup": ({"bucket": "2", "changelog-producer": "lookup", "rowkind.field": "op",
                                       "changelog-producer.row-deduplicate": "true"}, False, KINDS),
    "dedup-full-seq": ({"bucket": "1", "changelog-producer": "full-compaction", "sequence.field": "s",
                        "full-compaction.delta-commits": "2"}, False, KINDS),
    "dedup-full-rowdedup": ({"bucket": "2", "changelog-producer": "full-compaction",
                             "changelog-producer.row-deduplicate": "true"}, False, KINDS),
    "dedup-lookup-dynamic": ({"bucket": "-1", "changelog-producer": "lookup"}, False, KINDS),
    "dedup-lookup-cross": ({"bucket": "-1", "changelog-producer": "lookup"}, True, KINDS),
    "dedup-lookup-cross-seq-dv": ({"bucket": "-1", "changelog-producer": "lookup", "sequence.field": "s",
                                   "deletion-vectors.enabled": "true"}, True, KINDS),
    "partial-lookup": ({"bucket": "2", "changelog-producer": "lookup", "merge-engine": "partial-update",
                        "partial-update.remove-record-on-delete": "true"}, False, KINDS),
    "partial-seqgroup-full": ({"bucket": "1", "changelog-producer": "full-compaction", "merge-engine": "partial-update",
                               "fields.s.sequence-group": "a", "full-compaction.delta-commits": "1"}, False, KINDS),
    "partial-seqgroup-lookup-dv": ({"bucket": "2", "changelog-producer": "lookup", "merge-engine": "partial-update",
                                    "fields.s.sequence-group": "a,v", "deletion-vectors.enabled": "true"},
                                   False, KINDS),
    "agg-lookup": ({"bucket": "2", "changelog-producer": "lookup", "merge-engine": "aggregation",
                    "fields.a.aggregate-function": "sum", "fields.s.aggregate-function": "max",
                    "fields.s.ignore-retract": "true", "fields.v.aggregate-function": "last_non_null_value",
                    "fields.v.ignore-retract": "true"}, False, KINDS),
    "agg-lookup-remove-on-delete": ({"bucket": "2", "changelog-producer": "lookup", "merge-engine": "aggregation",
                                     "fields.a.aggregate-function": "sum", "fields.s.aggregate-function": "max",
                                     "aggregation.remove-record-on-delete": "true"}, False, ["+I", "+U", "-D"]),
    "agg-full": ({"bucket": "1", "changelog-producer": "full-compaction", "merge-engine": "aggregation",
                  "fields.a.aggregate-function": "sum", "fields.s.aggregate-function": "min",
                  "fields.s.ignore-retract": "true", "fields.v.ignore-retract": "true",
                  "full-compaction.delta-commits": "1"}, False, ["+I", "+U", "-U"]),
    "first-row-lookup": ({"bucket": "2", "changelog-producer": "lookup", "merge-engine": "first-row"},
                         False, ["+I"]),
    "first-row-lookup-dynamic": ({"bucket": "-1", "changelog-producer": "lookup", "merge-engine": "first-row"},
                                 False, ["+I"]),
    "dedup-lookup-postpone": ({"bucket": "-2", "changelog-producer": "lookup"}, False, KINDS),
    "dedup-full-cross": ({"bucket": "-1", "changelog-producer": "full-compaction",
                          "full-compaction.delta-commits": "3"}, True, KINDS),
    "dedup-input": ({"bucket": "2", "changelog-producer": "input"}, False, None),
}

record = st.tuples(st.sampled_from(KINDS), st.sampled_from(["x", "y"]), st.integers(0, 4),
                   st.one_of(st.none(), st.integers(0, 3)), st.one_of(st.none(), st.integers(-3, 3)),
                   st.one_of(st.none(), st.sampled_from(["m", "n"])))
step = st.one_of(
    st.tuples(st.just("write"), st.lists(record, min_size=1, max_size=6)),
    st.tuples(st.just("write"), st.lists(record, min_size=1, max_size=6)),
    st.tuples(st.just("compact"), st.booleans()),
    st.tuples(st.just("alter"), st.none()),
    st.tuples(st.just("overwrite"), st.lists(record, min_size=0, max_size=4)),
    st.tuples(st.just("rollback"), st.integers(1, 3)),
    st.tuples(st.just("expire"), st.integers(1, 4)),
)
histories = st.lists(step, min_size=1, max_size=7)


def _key(row: dict) -> tuple:
    return row["p"], row["k"]


def fold_batch(state: dict, batch: pa.Table, value_cols: list[str], label: str) -> None:
    """Fold one snapshot's changes into ``state`` ((p, k) -> values), checking every retract against it."""
    before = None  # the (kind, key) of the previous row: +U follows the -U of its key
    for r in batch.to_pylist():
        key, row = _key(r), tuple(r[c] for c in value_cols)
        kind = r["_row_kind"]
        if kind in ADD:
            assert kind == "+U" or key not in state, f"{label}: +I of live key {key}: {r}, state {state.get(key)}"
            assert kind == "+I" or before == ("-U", key), f"{label}: +U not after the -U of key {key}: {r}"
            state[key] = row
        else:
            assert state.get(key) == row, f"{label}: {kind} {r} does not carry the emitted {state.get(key)}"
            del state[key]
        before = (kind, key)


def merged(t, sid: int, value_cols: list[str]) -> dict:
    return {_key(r): tuple(r[c] for c in value_cols) for r in t.read(sid).to_pylist()}


def _batch_sid(b: pa.RecordBatch) -> int:
    return int(b.schema.metadata[b"lakemerge.snapshot_id"])


def run(name: str, history, start_at: float = 0.0) -> None:
    options, cross, kinds = CONFIGS[name]
    options = {"num-sorted-run.compaction-trigger": "3", "snapshot.num-retained.min": "100", **options}
    rowkind_field = options.get("rowkind.field")
    engine_name = options.get("merge-engine", "deduplicate")
    d = tempfile.mkdtemp(prefix="lakemerge-changelog-model-")
    try:
        from engine import Catalog
        cat = Catalog(d)
        cat.create_database("db")
        pk = ["k"] if cross else ["p", "k"]
        t = cat.create_table("db.t", SCHEMA, primary_key=pk, partition_keys=["p"], options=options)
        model = DictModel(SCHEMA, pk, sequence_fields=[options["sequence.field"]] if "sequence.field" in options
                          else (), rowkind_field=rowkind_field)
        check_model = engine_name == "deduplicate" and not cross
        value_cols = [c for c in SCHEMA.names if c not in ("p", "k")]
        if cross:
            value_cols = ["p", *value_cols]
        producer = options["changelog-producer"]
        stream_from = 1  # the stream must start at or after an overwrite (its changes are skipped, as Paimon)
        for op, arg in history:
            if op in ("write", "overwrite"):
                recs = [r for r in arg if kinds is None or r[0] in kinds]
                if op == "overwrite":
                    if cross:
                        continue
                    recs = [("+I", *r[1:]) for r in recs if r[1] == "x"]
                if "sequence.field" in options and engine_name == "deduplicate" and op == "write":
                    recs = _without_late_adds(recs, model, cross)
                if not recs:
                    continue
                cols = {"p": [r[1] for r in recs], "k": [r[2] for r in recs], "s": [r[3] for r in recs],
                        "a": [r[4] for r in recs], "v": [r[5] for r in recs], "op": [r[0] for r in recs]}
                for extra in t.schema.field_names[len(SCHEMA):]:
                    cols[extra] = [None] * len(recs)
                data = pa.table(cols, schema=t.arrow_schema)
                kinds_arg = None if rowkind_field else [r[0] for r in recs]
                if op == "write":
                    t.write(data, row_kinds=kinds_arg)
                else:  # INSERT OVERWRITE of partition x
                    with t.new_write(overwrite=True) as w:
                        w.write(data, row_kinds=kinds_arg)
                        stream_from = t.commit_overwrite(w.prepare_commit(), [("x",)])
                    stream_from = max(stream_from, t.latest_snapshot_id() or 0)
                    model.state = {k: v for k, v in model.state.items() if v[2]["p"] != "x"}
                if check_model:
                    model.apply(pa.Table.from_pydict({c: cols[c] for c in SCHEMA.names}, schema=SCHEMA), kinds_arg)
            elif op == "compact":
                t.compact(full=arg)
            elif op == "rollback":  # to a tag ``arg`` snapshots back; later snapshots are gone
                latest = t.latest_snapshot_id()
                if latest is None or latest - arg < max(1, stream_from, t.snapshot_manager.ids()[0]):
                    continue
                target = latest - arg
                if _has_compact_after(t, target):
                    continue  # a writer's APPEND snapshot whose compaction (and lookup changelog) would be lost
                t.create_tag(f"t{target}", target)
                t.rollback_to(f"t{target}")
                t.delete_tag(f"t{target}")
                if check_model:
                    model.state = dict(model.history[target])
                    model.history = {i: v for i, v in model.history.items() if i <= target}
            elif op == "expire":
                t.expire_snapshots(retain_min=arg, retain_max=arg)
            else:  # ALTER TABLE ADD COLUMN between commits: the stream keeps the schema it started with
                t.alter().add_column(f"c{len(t.schema.field_names)}", pa.int64()).commit()
            sid = t.latest_snapshot_id()
            if check_model and sid is not None:
                model.commit(sid)
        if t.latest_snapshot_id() is None:
            return
        if producer == "full-compaction":
            t.compact(full=True)  # the changelog reaches the merged state at a full compaction
        latest = t.latest_snapshot_id()
        retained = t.snapshot_manager.ids()
        if check_model:
            model.commit(latest)
            dv = options.get("deletion-vectors.enabled") == "true"
            for sid in retained:  # batch reads (time travel) equal the model
                if dv and _has_compact_after(t, sid):
                    continue  # a deletion-vector read skips level 0 until compaction (as Paimon)
                got = sorted((_key(r), tuple(r[c] for c in value_cols)) for r in t.read(sid, SCHEMA.names).to_pylist())
                want = sorted((_key(r), tuple(r[c] for c in value_cols)) for r in model.live_rows(sid))
                assert got == want, f"snapshot {sid}"
        if producer == "input":
            return
        cols = SCHEMA.names
        lo = max(stream_from, retained[0])
        first = lo + round(start_at * (latest - lo))
        # the stream: snapshot ``first`` in full, then its changes, folded
        state: dict = {}
        batches = list(t.stream("from-snapshot-full", snapshot_id=first, columns=cols, idle_timeout=0))
        for i, b in enumerate(batches):
            sid = _batch_sid(b)
            tb = pa.Table.from_batches([b])
            fold_batch(state, tb, value_cols, f"snapshot {sid}")
            if i > 0:
                assert tb.to_pylist() == t.read_changes(sid - 1, sid, cols).to_pylist(), f"read_changes {sid}"
            if options.get("changelog-producer.row-deduplicate") == "true":
                rows = tb.to_pylist()
                for before, after in zip(rows, rows[1:]):
                    if before["_row_kind"] == "-U" and after["_row_kind"] == "+U" and _key(before) == _key(after):
                        assert before != {**after, "_row_kind": "-U"}, f"equal -U/+U pair at {sid}: {after}"
            if producer == "lookup" and (t.snapshot(sid).commit_kind == "COMPACT" or not _has_compact_after(t, sid)):
                # lookup: the stream is at the merged state of every snapshot it reached
                assert state == merged(t, sid, value_cols), f"stream at snapshot {sid}"
        assert state == merged(t, latest, value_cols)
        if len(batches) > 1:  # read_changes over the whole range is the stream's changes
            whole = t.read_changes(_batch_sid(batches[0]), latest, cols).to_pylist()
            assert whole == [r for b in batches[1:] for r in b.to_pylist()]
        # a consumer stopped midway and restarted: nothing lost, nothing repeated
        if len(batches) >= 2:
            s = t.stream("from-snapshot-full", snapshot_id=first, columns=cols, consumer_id="job", idle_timeout=0)
            half = [next(s) for _ in range(len(batches) // 2)]
            s.close()
            rest = list(t.stream("from-snapshot-full", snapshot_id=first, columns=cols, consumer_id="job",
                                 idle_timeout=0))
            assert [_batch_sid(b) for b in half + rest] == [_batch_sid(b) for b in batches]
            assert [b.to_pylist() for b in half + rest] == [b.to_pylist() for b in batches]
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _has_compact_after(t, sid: int) -> bool:
    nxt = sid + 1
    return nxt <= t.latest_snapshot_id() and t.snapshot(nxt).commit_kind == "COMPACT"


def _without_late_adds(recs, model: DictModel, cross: bool):
    """Drop what DictModel does not model: an add with a smaller sequence value than a retained retract."""
    out = []
    retracted = {k: r.get("s") for k, r in model.retracted_rows().items()}
    for r in recs:
        key = (r[2],) if cross else (r[1], r[2])
        if r[0] in ADD and key in retracted and (r[3] is None or (retracted[key] is not None
                                                                  and r[3] < retracted[key])):
            continue
        if r[0] not in ADD:
            retracted[key] = r[3]
        out.append(r)
    return out


# The quick suite runs a few configurations briefly; the whole matrix is slow (LAKEMERGE_MODEL_EXAMPLES scales it).
EXAMPLES = int(os.environ.get("LAKEMERGE_MODEL_EXAMPLES", "20"))
QUICK = ["dedup-lookup", "dedup-lookup-cross-seq-dv", "dedup-full-seq", "partial-seqgroup-lookup-dv"]


@pytest.mark.parametrize("name", QUICK)
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=histories, start_at=st.floats(0, 1))
def test_changelog_model_quick(name, history, start_at):
    run(name, history, start_at)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CONFIGS))
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=histories, start_at=st.floats(0, 1))
def test_changelog_model(name, history, start_at):
    run(name, history, start_at)
