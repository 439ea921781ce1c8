"""Table.delete_where / update_where on primary-key tables (engine.write.row_level, Paimon's DELETE / UPDATE of a
PK table): against a dict model (hypothesis), partitioned, fixed / dynamic bucket, deletion vectors; refusals;
changelog rows of changelog-producer input / lookup; a concurrent commit between the read and the write."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.errors import InvalidInput

SCHEMA = pa.schema([pa.field("dt", pa.string(), False), pa.field("id", pa.int64(), False),
                    ("v", pa.string()), ("n", pa.int64())])
LAYOUTS = {"fixed": {"bucket": "2"}, "fixed-dv": {"bucket": "2", "deletion-vectors.enabled": "true"},
           "dynamic": {"bucket": "-1"}}


def make(catalog, name, options, primary_key=("dt", "id"), partition_keys=("dt",)):
    return catalog.create_table(f"db.{name}", SCHEMA, list(primary_key), list(partition_keys), options=options)


def state(t) -> dict:
    return {(r["dt"], r["id"]): (r["v"], r["n"]) for r in t.read().to_pylist()}


def batch(items: dict) -> pa.Table:
    return pa.table({"dt": [k[0] for k in items], "id": [k[1] for k in items],
                     "v": [v[0] for v in items.values()], "n": [v[1] for v in items.values()]}, schema=SCHEMA)


ROW = st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 30)), \
    st.tuples(st.sampled_from(["x", "y", None]), st.one_of(st.none(), st.integers(-5, 5)))
OPS = st.lists(st.one_of(
    st.tuples(st.just("write"), st.dictionaries(*ROW, min_size=1, max_size=12)),
    st.tuples(st.just("delete"), st.integers(-5, 5), st.sampled_from(["a", "b", None])),
    st.tuples(st.just("update"), st.integers(-5, 5), st.sampled_from(["a", "b", None]))), min_size=1, max_size=7)


@pytest.mark.parametrize("layout", list(LAYOUTS))
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_matches_a_dict_model(tmp_path_factory, layout, ops):
    from engine import Catalog
    cat = Catalog(str(tmp_path_factory.mktemp("wh")))
    cat.create_database("db")
    t = make(cat, "t", LAYOUTS[layout])
    model: dict = {}
    for op in ops:
        before = t.latest_snapshot_id()
        if op[0] == "write":
            t.write(batch(op[1]))
            model.update(op[1])
            continue
        _, limit, dt = op
        filt = [("n", ">=", limit)] + ([("dt", "=", dt)] if dt else [])
        hit = {k for k, (v, n) in model.items() if n is not None and n >= limit and (dt is None or k[0] == dt)}
        if op[0] == "delete":
            sid = t.delete_where(filt)
            model = {k: r for k, r in model.items() if k not in hit}
        else:  # n = n * 2, v = 'u' + v (null stays null)
            sid = t.update_where({"n": pc.field("n") * 2, "v": lambda rows: pc.binary_join_element_wise(
                "u", rows.column("v"), "")}, filt)
            model.update({k: (None if model[k][0] is None else "u" + model[k][0], model[k][1] * 2) for k in hit})
        if hit:
            assert sid == before + 1 or t.snapshot(sid).commit_kind == "COMPACT"
        else:
            assert sid is None and t.latest_snapshot_id() == before
        assert state(t) == model
    assert t.check().ok


def test_update_writes_plus_u_and_delete_minus_d_in_one_commit(catalog):
    t = make(catalog, "t", {"bucket": "1", "changelog-producer": "input"})
    t.write(batch({("a", 1): ("x", 1), ("a", 2): ("y", 2), ("b", 3): ("z", 3)}))
    sid = t.update_where({"v": "new"}, [("n", ">=", 2)])
    assert t.snapshot(sid).commit_kind == "APPEND" and t.snapshot(sid - 1).id == sid - 1
    changes = t.read_changes(sid - 1, sid).to_pylist()
    assert sorted((r["_row_kind"], r["id"], r["v"], r["n"]) for r in changes) == [("+U", 2, "new", 2),
                                                                                  ("+U", 3, "new", 3)]
    sid = t.delete_where([("v", "=", "new"), ("dt", "=", "b")])
    changes = t.read_changes(sid - 1, sid).to_pylist()
    assert [(r["_row_kind"], r["dt"], r["id"], r["v"], r["n"]) for r in changes] == [("-D", "b", 3, "new", 3)]
    assert state(t) == {("a", 1): ("x", 1), ("a", 2): ("new", 2)}
    assert t.delete_where([("id", "=", 99)]) is None and t.latest_snapshot_id() == sid


def test_lookup_changelog_has_the_old_values(catalog):
    t = make(catalog, "t", {"bucket": "2", "changelog-producer": "lookup"})
    t.write(batch({("a", 1): ("x", 1), ("a", 2): ("y", 2), ("b", 3): ("z", 3)}))
    start = t.latest_snapshot_id()
    t.update_where({"n": 10}, [("id", "<=", 2)])
    t.delete_where([("id", "=", 3)])
    changes = sorted((r["_row_kind"], r["id"], r["v"], r["n"]) for r in t.read_changes(start).to_pylist())
    assert changes == sorted([("-U", 1, "x", 1), ("+U", 1, "x", 10), ("-U", 2, "y", 2), ("+U", 2, "y", 10),
                              ("-D", 3, "z", 3)])


def test_refusals(catalog):
    t = make(catalog, "t", {"bucket": "1"})
    t.write(batch({("a", 1): ("x", 1)}))
    for assignments, column in (({"id": 5}, "id"), ({"dt": "b"}, "dt"), ({"nope": 1}, "nope")):
        with pytest.raises(InvalidInput) as e:
            t.update_where(assignments)
        assert e.value.column == column
    with pytest.raises(InvalidInput, match="no column"):
        t.update_where({})
    with pytest.raises(InvalidInput, match="NOT NULL|cannot be computed"):
        t.update_where({"n": "not a number"})
    with pytest.raises(InvalidInput):
        t.delete_where([("nope", "=", 1)])
    one = {"bucket": "1"}
    agg = make(catalog, "agg", {**one, "merge-engine": "aggregation", "fields.n.aggregate-function": "sum"})
    first = make(catalog, "first", {**one, "merge-engine": "first-row"})
    partial = make(catalog, "partial", {**one, "merge-engine": "partial-update"})
    for table in (agg, first, partial):
        table.write(batch({("a", 1): ("x", 1)}))
    for table in (agg, first):
        with pytest.raises(InvalidInput, match="merge-engine"):
            table.update_where({"n": 100})
    partial.update_where({"v": "p"})  # partial-update takes +U rows
    assert state(partial) == {("a", 1): ("p", 1)}
    partial.compact(full=True)  # the +U record made the key's files overlap
    for table in (agg, first, partial):  # no delete record: the rows leave the files (test_pk_row_level_rewrite)
        sid = table.delete_where([("id", "=", 1)])
        assert table.snapshot(sid).commit_kind == "OVERWRITE" and state(table) == {}


@pytest.mark.parametrize("options", [{"merge-engine": "aggregation", "fields.n.aggregate-function": "sum",
                                      "aggregation.remove-record-on-delete": "true"},
                                     {"merge-engine": "partial-update",
                                      "partial-update.remove-record-on-delete": "true"}],
                         ids=["aggregation", "partial-update"])
def test_delete_from_engines_that_remove_records(catalog, options):
    t = make(catalog, "t", {"bucket": "1", **options})
    t.write(batch({("a", 1): ("x", 1), ("a", 2): ("y", 2)}))
    t.write(batch({("a", 1): ("x", 4)}))
    t.delete_where([("id", "=", 1)])
    assert set(state(t)) == {("a", 2)}


def test_cross_partition_update_moves_the_row(catalog):
    t = make(catalog, "t", {"bucket": "-1"}, primary_key=("id",))
    t.write(batch({("a", 1): ("x", 1), ("a", 2): ("y", 2)}))
    t.update_where({"dt": "b"}, [("id", "=", 1)])
    assert state(t) == {("b", 1): ("x", 1), ("a", 2): ("y", 2)}


def test_nanosecond_sequence_field_is_kept(catalog):
    """The engine reads and writes nanoseconds exactly, so the +U row's sequence.field equals the stored one and
    the newer record wins (spark_glue refuses this table: Spark floors nanoseconds)."""
    schema = pa.schema([pa.field("id", pa.int64(), False), ("ts", pa.timestamp("ns")), ("v", pa.string())])
    t = catalog.create_table("db.ns", schema, ["id"], options={"bucket": "1", "sequence.field": "ts"})
    t.write(pa.table({"id": [1, 2], "ts": pa.array([1_000_000_001, 5], pa.timestamp("ns")), "v": ["a", "b"]},
                     schema=schema))
    t.update_where({"v": "new"}, [("id", "=", 1)])
    assert t.read().sort_by("id").column("v").to_pylist() == ["new", "b"]
    t.delete_where([("id", "=", 1)])
    assert t.read().column("id").to_pylist() == [2]


def test_a_concurrent_commit_after_the_read_loses(catalog):
    """Pinned to the snapshot it read, the UPDATE's +U rows win over a write published between its read and its
    commit (the sequence guard renumbers them), as the later commit does in Paimon."""
    from engine import Catalog
    t = make(catalog, "t", {"bucket": "1"})
    t.write(batch({("a", 1): ("x", 1), ("a", 2): ("y", 2)}))
    other = Catalog(catalog.warehouse).get_table("db.t")
    original = t.new_write

    def racing(**kwargs):
        other.write(batch({("a", 1): ("concurrent", 7), ("a", 3): ("c", 3)}))
        return original(**kwargs)
    t.new_write = racing
    sid = t.update_where({"v": "u"}, [("id", "=", 1)])
    assert t.snapshot(sid).commit_kind == "APPEND"
    assert state(t) == {("a", 1): ("u", 1), ("a", 2): ("y", 2), ("a", 3): ("c", 3)}


def test_a_concurrent_commit_on_a_cross_partition_table_conflicts(catalog):
    """A cross-partition table's key index is the read snapshot's: a commit published after the read may have
    moved a key, so the UPDATE's commit is refused (without the pin the writer would take the newer index and the
    values read before the move would silently win) and leaves no file behind."""
    from engine import Catalog
    from engine.errors import CommitConflict
    t = make(catalog, "t", {"bucket": "-1"}, primary_key=("id",))
    t.write(batch({("a", 1): ("x", 1), ("a", 2): ("y", 2)}))
    other = Catalog(catalog.warehouse).get_table("db.t")
    original = t.new_write

    def racing(**kwargs):
        other.write(batch({("b", 1): ("moved", 7)}))
        return original(**kwargs)
    t.new_write = racing
    with pytest.raises(CommitConflict, match="cross-partition"):
        t.update_where({"v": "u"}, [("id", "=", 1)])
    assert state(t) == {("b", 1): ("moved", 7), ("a", 2): ("y", 2)}
    report = t.check()
    assert report.ok and not report.orphan_files, report.summary()


@pytest.mark.parametrize("layout", ["fixed", "fixed-dv", "dynamic"])
def test_no_condition_or_partition_only_truncates_as_paimon(catalog, layout):
    """Paimon's OptimizeMetadataOnlyDeleteFromPaimonTable applies to primary-key tables too: a DELETE without a
    condition truncates the table and one over partition columns only drops the partitions (an OVERWRITE snapshot,
    no -D records), so even uncompacted level-0 rows a deletion-vector table's batch read skips are gone."""
    t = make(catalog, "t", {**LAYOUTS[layout], "write-only": "true"})
    t.write(batch({("a", 1): ("x", 1), ("b", 2): ("y", 2), ("c", 3): ("z", 3)}))
    sid = t.delete_where([("dt", "in", ["a", "c"])])
    snap = t.snapshot(sid)
    assert snap.commit_kind == "OVERWRITE"
    t.compact(full=True)  # brings level 0 up: a deletion-vector table's read shows it only then
    assert state(t) == {("b", 2): ("y", 2)}
    added = [e for m in t.manifests.manifest_list(snap.delta_manifest_list)
             for e in t.manifests.manifest(m.file_name) if e.kind == 0]
    assert added == []  # no delete records written
    last = t.latest_snapshot_id()
    assert t.delete_where([("dt", "=", "zz")]) is None and t.latest_snapshot_id() == last
    assert t.snapshot(t.delete_where(None)).commit_kind == "OVERWRITE" and state(t) == {}
    assert t.check().ok


def test_force_produce_changelog_writes_delete_records_for_partition_conditions(catalog):
    """With delete.force-produce-changelog a partition-only DELETE writes -D records (Paimon's rule is skipped), so
    changelog-producer=input streams them."""
    t = make(catalog, "t", {"bucket": "1", "changelog-producer": "input", "delete.force-produce-changelog": "true"})
    t.write(batch({("a", 1): ("x", 1), ("b", 2): ("y", 2)}))
    sid = t.delete_where([("dt", "=", "a")])
    assert t.snapshot(sid).commit_kind == "APPEND" and state(t) == {("b", 2): ("y", 2)}
    assert [(r["_row_kind"], r["id"]) for r in t.read_changes(sid - 1, sid).to_pylist()] == [("-D", 1)]
