"""Changelog producers × merge engines against hand-written expected changelogs (paimon-semantics §8.1), and
the property that folding the changelog reproduces the table (lookup, full-compaction)."""
from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

SCHEMA = pa.schema([pa.field("k", pa.int64(), False), pa.field("a", pa.int64()), pa.field("v", pa.string())])


def rows(*triples):
    return pa.table({"k": [t[0] for t in triples], "a": [t[1] for t in triples], "v": [t[2] for t in triples]},
                    schema=SCHEMA)


def make(catalog, name, producer, engine="deduplicate", **extra):
    options = {"bucket": "1", "changelog-producer": producer, "merge-engine": engine}
    options.update(extra)
    return catalog.create_table(f"db.{name}", SCHEMA, ["k"], options=options)


def commit(t, *ops):
    """ops: ("+I"/"+U"/"-U"/"-D", (k, a, v)) in one commit; returns the changes that commit produced."""
    before = t.latest_snapshot_id() or 0
    with t.new_write() as w:
        for kind, row in ops:
            w.write(rows(row), row_kinds=[kind])
        sid = t.commit(w.prepare_commit())
    return [(r["_row_kind"], r["k"], r["a"], r["v"]) for r in t.read_changes(before, sid).to_pylist()]


def test_seed_example_deduplicate_lookup(catalog):
    t = make(catalog, "t", "lookup")
    t.write(rows((1, 1, "1")))
    t.write(rows((1, 1, "2")))
    got = [(r["_row_kind"], r["k"], r["a"], r["v"]) for b in t.stream("from-snapshot", snapshot_id=1,
                                                                      idle_timeout=0) for r in b.to_pylist()]
    assert got == [("+I", 1, 1, "1"), ("-U", 1, 1, "1"), ("+U", 1, 1, "2")]


DEDUP_HISTORY = [
    # (ops of one commit, expected lookup changelog)
    ([("+I", (1, 1, "1"))], [("+I", 1, 1, "1")]),                                           # insert
    ([("+I", (1, 1, "2"))], [("-U", 1, 1, "1"), ("+U", 1, 1, "2")]),                        # update
    ([("+U", (1, 1, "2"))], [("-U", 1, 1, "2"), ("+U", 1, 1, "2")]),                        # equal value
    ([("-D", (1, None, None))], [("-D", 1, 1, "2")]),                                       # delete: old values
    ([("+I", (1, 5, "r"))], [("+I", 1, 5, "r")]),                                           # re-insert
    ([("-D", (7, None, None))], []),                                                        # delete missing key
    ([("+I", (8, 8, "b")), ("-D", (8, None, None))], []),                                   # delete before emit
    ([("+I", (9, 9, "b")), ("+U", (9, 9, "c"))], [("+I", 9, 9, "c")]),                      # insert+update
    ([("-U", (1, 5, "r")), ("+U", (1, 6, "s"))], [("-U", 1, 5, "r"), ("+U", 1, 6, "s")]),   # -U/+U input
]


@pytest.mark.parametrize("producer,extra", [("lookup", {}),
                                            ("full-compaction", {"full-compaction.delta-commits": "1"})])
def test_deduplicate_history(catalog, producer, extra):
    t = make(catalog, "t", producer, **extra)
    for ops, expected in DEDUP_HISTORY:
        assert commit(t, *ops) == expected, ops


def test_row_deduplicate_drops_equal_updates(catalog):
    t = make(catalog, "t", "lookup", **{"changelog-producer.row-deduplicate": "true",
                                        "changelog-producer.row-deduplicate-ignore-fields": "a"})
    assert commit(t, ("+I", (1, 1, "x"))) == [("+I", 1, 1, "x")]
    assert commit(t, ("+I", (1, 1, "x"))) == []
    assert commit(t, ("+I", (1, 2, "x"))) == []  # only the ignored field changed
    assert commit(t, ("+I", (1, 2, "y"))) == [("-U", 1, 2, "x"), ("+U", 1, 2, "y")]


def test_input_history_forwards_inputs(catalog):
    t = make(catalog, "t", "input")
    assert commit(t, ("+I", (1, 1, "1"))) == [("+I", 1, 1, "1")]
    assert commit(t, ("+I", (1, 1, "2"))) == [("+I", 1, 1, "2")]
    assert commit(t, ("+I", (8, 8, "b")), ("-D", (8, None, None))) == [("+I", 8, 8, "b"), ("-D", 8, None, None)]
    assert commit(t, ("-D", (7, None, None))) == [("-D", 7, None, None)]


def test_none_history_is_stored_rows(catalog):
    t = make(catalog, "t", "none")
    assert commit(t, ("+I", (1, 1, "1"))) == [("+I", 1, 1, "1")]
    assert commit(t, ("+I", (9, 9, "b")), ("+U", (9, 9, "c"))) == [("+U", 9, 9, "c")]
    assert commit(t, ("+I", (8, 8, "b")), ("-D", (8, None, None))) == [("-D", 8, None, None)]


def test_full_compaction_changelog_spans_full_compactions(catalog):
    t = make(catalog, "t", "full-compaction", **{"num-sorted-run.compaction-trigger": "10"})
    assert commit(t, ("+I", (1, 1, "A"))) == []  # no full compaction yet
    sid = t.compact(full=True)
    assert [(r["_row_kind"], r["v"]) for r in t.read_changes(sid - 1, sid).to_pylist()] == [("+I", "A")]
    commit(t, ("+I", (1, 1, "B")))
    commit(t, ("+I", (1, 1, "C")))
    commit(t, ("+I", (2, 2, "x")))
    commit(t, ("-D", (2, None, None)))
    before = t.latest_snapshot_id()
    t.compact(full=True)
    assert [(r["_row_kind"], r["k"], r["v"]) for r in t.read_changes(before).to_pylist()] == [
        ("-U", 1, "A"), ("+U", 1, "C")]


def test_partial_update_lookup(catalog):
    t = make(catalog, "t", "lookup", "partial-update")
    assert commit(t, ("+I", (1, 1, None))) == [("+I", 1, 1, None)]
    assert commit(t, ("+I", (1, None, "x"))) == [("-U", 1, 1, None), ("+U", 1, 1, "x")]
    assert commit(t, ("+I", (1, 2, None))) == [("-U", 1, 1, "x"), ("+U", 1, 2, "x")]
    assert t.read().to_pylist() == [{"k": 1, "a": 2, "v": "x"}]


def test_aggregation_lookup_and_full_compaction(catalog):
    for producer, extra in (("lookup", {}), ("full-compaction", {"full-compaction.delta-commits": "1"})):
        t = make(catalog, f"t_{producer.replace('-', '_')}", producer, "aggregation",
                 **{"fields.a.aggregate-function": "sum"}, **extra)
        assert commit(t, ("+I", (1, 1, "a"))) == [("+I", 1, 1, "a")]
        assert commit(t, ("+I", (1, 2, None))) == [("-U", 1, 1, "a"), ("+U", 1, 3, "a")]
        assert commit(t, ("+I", (1, 4, "b"))) == [("-U", 1, 3, "a"), ("+U", 1, 7, "b")]
        assert t.read().to_pylist() == [{"k": 1, "a": 7, "v": "b"}]  # levels hold full states, read once
        assert t.lookup(pa.table({"k": [1]})).to_pylist() == [{"k": 1, "a": 7, "v": "b"}]


def test_aggregation_lookup_folds_a_lone_retract(catalog):
    """Paimon's lookup compaction folds every level-0 record through the merge function (LookupMergeFunction has
    no lone-record pass-through): a -U for a new key becomes sum.retract(null, 5) = -5, an insert."""
    t = make(catalog, "t", "lookup", "aggregation", **{"fields.a.aggregate-function": "sum"})
    assert commit(t, ("+I", (1, 5, "a"))) == [("+I", 1, 5, "a")]
    assert commit(t, ("-U", (2, 5, "b"))) == [("+I", 2, -5, None)]  # last_non_null_value retracts v to null
    assert commit(t, ("+I", (2, 7, "c"))) == [("-U", 2, -5, None), ("+U", 2, 2, "c")]
    assert t.read().to_pylist() == [{"k": 1, "a": 5, "v": "a"}, {"k": 2, "a": 2, "v": "c"}]


def test_first_row_lookup_emits_inserts_only(catalog):
    t = make(catalog, "t", "lookup", "first-row")
    assert commit(t, ("+I", (1, 1, "1"))) == [("+I", 1, 1, "1")]
    assert commit(t, ("+I", (1, 2, "2"))) == []
    assert commit(t, ("+I", (2, 2, "2")), ("+I", (1, 3, "3"))) == [("+I", 2, 2, "2")]
    assert sorted(r["k"] for r in t.read().to_pylist()) == [1, 2]


def test_first_row_lookup_below_the_output_level(catalog):
    """A level-0 key whose first row lies below the output level emits nothing and is dropped from the output;
    new keys emit +I, keys of the unit's own upper levels nothing (Paimon's FirstRowMergeFunctionWrapper)."""
    t = make(catalog, "t", "lookup", "first-row")
    base = [(k, k, "old") for k in range(0, 4000, 2)]
    assert commit(t, *[("+I", r) for r in base]) == [("+I",) + r for r in base]
    assert {f.level for sp in t.plan() for f in sp.files} == {5}
    assert commit(t, ("+I", (2, 9, "x")), ("+I", (3, 3, "d"))) == [("+I", 3, 3, "d")]
    assert sorted((f.level, f.row_count) for sp in t.plan() for f in sp.files) == [(4, 1), (5, 2000)]
    assert commit(t, ("+I", (3, 8, "y")), ("+I", (4, 8, "y")), ("+I", (5, 5, "e"))) == [("+I", 5, 5, "e")]
    assert sorted((f.level, f.row_count) for sp in t.plan() for f in sp.files) == [(4, 2), (5, 2000)]
    got = {r["k"]: (r["a"], r["v"]) for r in t.read().to_pylist()}
    assert got == {**{k: (k, "old") for k in range(0, 4000, 2)}, 3: (3, "d"), 5: (5, "e")}


def test_lookup_reaches_deeper_levels_with_pruning(catalog):
    """Keys spread over several files of a deep level: the lookup index finds the old values."""
    t = make(catalog, "t", "lookup", **{"target-file-size": "4 kb"})
    t.write(rows(*[(k, k, f"v{k}") for k in range(0, 2000, 2)]))
    t.compact(full=True)
    got = commit(t, ("+I", (10, 0, "new")), ("+I", (11, 0, "new")), ("+I", (1998, 0, "new")))
    assert got == [("-U", 10, 10, "v10"), ("+U", 10, 0, "new"), ("+I", 11, 0, "new"),
                   ("-U", 1998, 1998, "v1998"), ("+U", 1998, 0, "new")]


# --- folding the changelog reproduces the table ---------------------------------------------------------
OPS = st.lists(st.lists(st.tuples(st.sampled_from(["+I", "+I", "-D"]), st.integers(0, 6), st.integers(0, 3)),
                        min_size=1, max_size=6), min_size=1, max_size=6)


def fold(state: dict, changes: pa.Table) -> None:
    for r in changes.to_pylist():
        key, row = r["k"], (r["a"], r["v"])
        if r["_row_kind"] in ("+I", "+U"):
            assert r["_row_kind"] == "+U" or key not in state, "insert of a live key"
            state[key] = row
        else:
            assert state.get(key) == row, "retract does not match the emitted state"
            del state[key]


@pytest.mark.slow
@pytest.mark.parametrize("producer,engine,extra", [
    ("lookup", "deduplicate", {}),
    ("lookup", "partial-update", {}),
    ("lookup", "aggregation", {"fields.a.aggregate-function": "sum"}),
    ("full-compaction", "deduplicate", {"full-compaction.delta-commits": "1"}),
    ("full-compaction", "aggregation", {"fields.a.aggregate-function": "sum", "full-compaction.delta-commits": "1"}),
])
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(history=OPS)
def test_folding_changelog_reproduces_table(tmp_path_factory, producer, engine, extra, history):
    from engine import Catalog
    cat = Catalog(str(tmp_path_factory.mktemp("wh")))
    cat.create_database("db")
    options = {"num-sorted-run.compaction-trigger": "3", **extra}
    if engine != "deduplicate":
        options["partial-update.remove-record-on-delete" if engine == "partial-update"
                else "aggregation.remove-record-on-delete"] = "true"
    t = make(cat, "t", producer, engine, **options)
    state: dict = {}
    last = 0
    for ops in history:
        with t.new_write() as w:
            for kind, k, a in ops:
                w.write(rows((k, a, str(a))), row_kinds=[kind])
            sid = t.commit(w.prepare_commit())
        fold(state, t.read_changes(last, sid))
        last = sid
        expected = {r["k"]: (r["a"], r["v"]) for r in t.read(sid).to_pylist()}
        assert state == expected
        looked = t.lookup(pa.table({"k": list(range(7))}), sid)
        assert {r["k"]: (r["a"], r["v"]) for r in looked.to_pylist()} == expected


def test_partitioned_multi_bucket_lookup(catalog):
    schema = pa.schema([pa.field("p", pa.string(), False), pa.field("k", pa.int64(), False), pa.field("v", pa.int64())])
    t = catalog.create_table("db.pt", schema, ["p", "k"], partition_keys=["p"],
                             options={"bucket": "3", "changelog-producer": "lookup"})
    t.write(pa.table({"p": ["a", "b"] * 10, "k": list(range(20)), "v": [0] * 20}, schema=schema))
    before = t.latest_snapshot_id()
    t.write(pa.table({"p": ["a", "b", "a"], "k": [0, 1, 100], "v": [1, 1, 1]}, schema=schema))
    got = sorted((r["_row_kind"], r["p"], r["k"], r["v"]) for r in t.read_changes(before).to_pylist())
    assert got == [("+I", "a", 100, 1), ("+U", "a", 0, 1), ("+U", "b", 1, 1), ("-U", "a", 0, 0), ("-U", "b", 1, 0)]


def test_none_normalize_partial_update(catalog):
    t = make(catalog, "t", "none", "partial-update")
    t.write(rows((1, 1, None)))
    t.write(rows((1, None, "x")))
    got = [(r["_row_kind"], r["k"], r["a"], r["v"]) for r in t.read_changes(normalize=True).to_pylist()]
    assert got == [("+I", 1, 1, None), ("-U", 1, 1, None), ("+U", 1, 1, "x")]
    assert [(r["_row_kind"], r["a"], r["v"]) for r in t.read_changes().to_pylist()] == [("+I", 1, None),
                                                                                        ("+I", None, "x")]


def test_changelog_file_compression_and_plain_encoding(catalog):
    import glob

    import pyarrow.parquet as pq
    t = make(catalog, "t", "lookup", **{"changelog-file.compression": "snappy", "changelog-file.stats-mode": "none"})
    commit(t, ("+I", (1, 1, "a")), ("+I", (2, 2, "b")))
    assert commit(t, ("+I", (1, 3, "c"))) == [("-U", 1, 1, "a"), ("+U", 1, 3, "c")]
    where = t.bucket_dir((), 0)
    logs = glob.glob(f"{where}/changelog-*.parquet")
    data = [p for p in glob.glob(f"{where}/*.parquet") if p not in logs]
    assert logs and data
    for path in logs:
        col = pq.ParquetFile(path).metadata.row_group(0).column(0)
        assert col.compression == "SNAPPY" and "PLAIN_DICTIONARY" not in col.encodings \
            and "RLE_DICTIONARY" not in col.encodings
    assert pq.ParquetFile(data[0]).metadata.row_group(0).column(0).compression == "ZSTD"


def test_lookup_compaction_uses_written_level0_rows_without_reading_them(catalog):
    t = make(catalog, "t", "lookup")
    commit(t, ("+I", (1, 1, "a")), ("+I", (2, 2, "b")))
    written, read = [], []
    io_ = t.file_io
    orig_write, orig_read = io_.write_bytes, io_.read_bytes
    io_.write_bytes = lambda path, data, *a, **k: (written.append(path), orig_write(path, data, *a, **k))[1]
    io_.read_bytes = lambda path, *a, **k: (read.append(path), orig_read(path, *a, **k))[1]
    try:
        got = commit(t, ("+I", (1, 3, "c")), ("+I", (5, 5, "e")))
    finally:
        io_.write_bytes, io_.read_bytes = orig_write, orig_read
    assert got == [("-U", 1, 1, "a"), ("+U", 1, 3, "c"), ("+I", 5, 5, "e")]
    new_data = [p for p in written if "/data-" in p]
    assert new_data and not set(new_data) & set(read)
    assert t.read().sort_by("k").to_pylist() == [{"k": 1, "a": 3, "v": "c"}, {"k": 2, "a": 2, "v": "b"},
                                                 {"k": 5, "a": 5, "v": "e"}]
