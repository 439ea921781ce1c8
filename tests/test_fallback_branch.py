"""Batch reads of tables with ``scan.fallback-branch`` / ``scan.primary-branch`` (engine.read.fallback_branch), as
Paimon's FallbackReadFileStoreTable reads them (cases after paimon-flink BranchSqlITCase and paimon-core
FallbackReadFileStoreTableTest): a partition is read from the branch that owns it, whole."""
from __future__ import annotations

import dataclasses
import logging
import random

import pandas as pd
import pyarrow as pa
import pytest

from engine import Catalog
from engine.errors import InvalidInput, InvalidOption, SnapshotNotFound, TagNotFound, UnsupportedFeature
from engine.paths import TablePaths

SCHEMA = pa.schema([pa.field("pt", pa.int32(), nullable=False), pa.field("k", pa.int32(), nullable=False),
                    ("v", pa.string())])
KEYS = pa.schema([pa.field("pt", pa.int32(), nullable=False), pa.field("k", pa.int32(), nullable=False)])


def _rows(*rows):
    return pa.table({"pt": [r[0] for r in rows], "k": [r[1] for r in rows], "v": [r[2] for r in rows]},
                    schema=SCHEMA)


def _set(table):
    return sorted(tuple(r.values()) for r in table.to_pylist())


def _catalog(tmp_path):
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    return cat


def _pk_table(cat, name="db.t", **options):
    return cat.create_table(name, SCHEMA, primary_key=["pt", "k"], partition_keys=["pt"],
                            options={"bucket": "2", **options})


def _option(t, key, value):
    t.alter().set_option(key, value).commit()
    return t


def write_schema(t, on, schema) -> None:
    """Commit ``schema`` as a schema file of ``on`` (table ``t`` or one of its branches), as another tool would."""
    t.file_io.write_bytes(TablePaths(t.root, on.paths.meta_root).schema(schema.id), schema.to_json().encode())


def add_main_column_to_branch(t, branch: str, column: str) -> None:
    """Add main's column ``column`` to the latest schema of ``branch`` (a new schema file of the branch)."""
    s = t.branch(branch).schema
    write_schema(t, t.branch(branch), dataclasses.replace(s, id=s.id + 1, fields=s.fields + (t.schema.field(column),),
                                                          highest_field_id=t.schema.highest_field_id))


def test_fallback_branch_fills_the_partitions_main_lacks(tmp_path):
    """BranchSqlITCase.testFallbackBranchBatchRead: pt=1 lives on main, so the branch's pt=1 rows are never read
    (whatever the filter), pt=2 comes from the branch; a later write of pt=1 to the branch changes nothing."""
    cat = _catalog(tmp_path)
    t = _pk_table(cat)
    t.write(_rows((1, 10, "apple"), (1, 20, "banana")))
    t.create_branch("b")
    b = t.branch("b")
    b.write(_rows((1, 20, "cat"), (1, 30, "dog")))
    _option(t, "scan.fallback-branch", "b")
    assert _set(t.read()) == [(1, 10, "apple"), (1, 20, "banana")]
    b.write(_rows((2, 10, "tiger"), (2, 20, "wolf")))
    b.write(_rows((2, 10, "lion")))
    want = [(1, 10, "apple"), (1, 20, "banana"), (2, 10, "lion"), (2, 20, "wolf")]
    assert _set(t.read()) == want
    assert _set(cat.get_table("db.t").read()) == want
    assert _set(pa.Table.from_batches(list(t.to_reader(batch_size=1)))) == want
    assert _set(t.read(filter=[("pt", "=", 2)])) == [(2, 10, "lion"), (2, 20, "wolf")]
    # FallbackReadFileStoreTableTest.testPlanWithDataFilter: the owner is decided by partition, not by the data
    assert t.read(filter=[("pt", "=", 1), ("k", "=", 30)]).num_rows == 0
    assert t.read(columns=["v"], filter=[("k", "=", 20)]).column("v").to_pylist() == ["banana", "wolf"]
    assert {(sp.partition_values, sp.branch) for sp in t.plan()} == {((1,), None), ((2,), "b")}
    got = t.lookup(pa.table({"pt": [1, 2, 1], "k": [30, 10, 20]}, schema=KEYS))
    assert _set(got) == [(1, 20, "banana"), (2, 10, "lion")]
    # branch reads stay the branch's own; the overwritten partition moves nothing
    assert _set(b.read()) == [(1, 20, "cat"), (1, 30, "dog"), (2, 10, "lion"), (2, 20, "wolf")]
    t.alter().remove_option("scan.fallback-branch").commit()
    assert _set(t.read()) == [(1, 10, "apple"), (1, 20, "banana")]


def test_primary_branch_owns_the_partitions_it_has(tmp_path):
    """BranchSqlITCase.testPrimaryBranchBatchRead: with scan.primary-branch = b, a partition b has is read from b
    (main's rows of it are not), the others from main."""
    cat = _catalog(tmp_path)
    t = _pk_table(cat)
    t.create_branch("b")
    _option(t, "scan.primary-branch", "b")
    b = t.branch("b")
    b.write(_rows((1, 20, "cat"), (1, 30, "dog")))
    t.write(_rows((1, 10, "apple"), (1, 20, "banana")))
    assert _set(t.read()) == [(1, 20, "cat"), (1, 30, "dog")]
    b.write(_rows((2, 10, "tiger"), (2, 20, "wolf")))
    t.write(_rows((3, 10, "horse")))
    assert _set(t.read()) == [(1, 20, "cat"), (1, 30, "dog"), (2, 10, "tiger"), (2, 20, "wolf"),
                                    (3, 10, "horse")]
    assert {sp.partition_values: sp.branch for sp in t.plan()} == {(1,): "b", (2,): "b", (3,): None}
    assert _set(t.read(filter=[("pt", "in", (1, 3))])) == [(1, 20, "cat"), (1, 30, "dog"), (3, 10, "horse")]
    t.alter().remove_option("scan.primary-branch").commit()
    assert _set(t.read()) == [(1, 10, "apple"), (1, 20, "banana"), (3, 10, "horse")]


def _make_branch_primary_key(t, branch, primary_key, options):
    """What Paimon's ``ALTER TABLE `t$branch_b` SET ('primary-key' = ..., 'bucket' = ...)`` leaves: the branch's
    next schema with those keys and options (lakemerge does not alter branches)."""
    b = t.branch(branch)
    s = b.schema
    new = dataclasses.replace(s, id=s.id + 1, primary_keys=tuple(primary_key), options={**s.options, **options})
    write_schema(t, b, new)
    return t.branch(branch)


def test_append_table_with_a_primary_key_fallback_branch(tmp_path):
    """BranchSqlITCase.testFallbackBranchBatchRead's layout: main an append table, the fallback branch a primary-key
    table (merged when read), the typical batch main + streaming branch."""
    cat = _catalog(tmp_path)
    t = cat.create_table("db.t", SCHEMA, partition_keys=["pt"], options={"bucket": "-1"})
    t.write(_rows((1, 10, "apple"), (1, 20, "banana")))
    t.create_branch("pk")
    pk = _make_branch_primary_key(t, "pk", ["pt", "k"], {"bucket": "2"})
    _option(t, "scan.fallback-branch", "pk")
    pk.write(_rows((2, 10, "tiger"), (2, 20, "wolf")))
    pk.write(_rows((2, 10, "lion"), (1, 99, "never")))
    want = [(1, 10, "apple"), (1, 20, "banana"), (2, 10, "lion"), (2, 20, "wolf")]
    assert _set(t.read()) == want
    assert _set(pa.Table.from_batches(list(t.to_reader()))) == want
    assert t.read(columns=["k"], filter=[("pt", "=", 2)]).column("k").to_pylist() in ([10, 20], [20, 10])
    with pytest.raises(InvalidInput, match="append table"):
        t.lookup(pa.table({"pt": [2], "k": [10]}, schema=KEYS))


def test_primary_key_table_with_an_append_fallback_branch_refuses_lookups(tmp_path):
    cat = _catalog(tmp_path)
    t = cat.create_table("db.t", SCHEMA, partition_keys=["pt"], options={"bucket": "-1"})
    t.create_branch("a")
    t.write(_rows((1, 10, "apple")))
    main = _make_branch_primary_key(t, "a", ["pt", "k"], {"bucket": "1"})  # any PK branch will do as "main"
    main.write(_rows((1, 1, "x")))
    # the branch table reads its own fallback option: point it at main (an append table)
    b = dataclasses.replace(main.schema, id=main.schema.id + 1,
                            options={**main.schema.options, "scan.fallback-branch": "main"})
    write_schema(t, main, b)
    a = t.branch("a")
    assert _set(a.read()) == [(1, 1, "x")]  # pt=1 is the branch's own
    with pytest.raises(UnsupportedFeature, match="append table"):
        a.lookup(pa.table({"pt": [1], "k": [1]}, schema=KEYS))


def test_random_writes_match_a_pandas_model(tmp_path):
    """Random upserts to main and the fallback branch over 6 partitions: the read is, per partition, the model's
    merged rows of main when main has the partition, else of the branch (pandas: last write of a key wins)."""
    rng = random.Random(7)
    cat = _catalog(tmp_path)
    t = _pk_table(cat)
    t.create_branch("b")
    b = t.branch("b")
    _option(t, "scan.fallback-branch", "b")
    model = {"main": [], "b": []}
    for i in range(8):
        side = rng.choice(["main", "b"])
        pts = [1, 2, 3] if side == "main" else [2, 3, 4, 5, 6]
        rows = [(rng.choice(pts), rng.randrange(6), f"{side}{i}-{j}") for j in range(rng.randrange(1, 6))]
        (t if side == "main" else b).write(_rows(*rows))
        model[side] += rows

    def merged(rows):
        df = pd.DataFrame(rows, columns=["pt", "k", "v"])
        return df.drop_duplicates(["pt", "k"], keep="last")

    m, f = merged(model["main"]), merged(model["b"])
    want = pd.concat([m, f[~f.pt.isin(set(m.pt))]])
    assert _set(t.read()) == sorted(map(tuple, want.itertuples(index=False)))
    flt = [[("pt", ">=", 3)], [("k", "=", 0)]]
    want_f = want[(want.pt >= 3) | (want.k == 0)]
    assert _set(t.read(filter=flt)) == sorted(map(tuple, want_f.itertuples(index=False)))
    assert _set(t.to_pandas(filter=flt).pipe(pa.Table.from_pandas, preserve_index=False)) == \
        sorted(map(tuple, want_f.itertuples(index=False)))


def test_unpartitioned_table_reads_main_when_it_has_files(tmp_path):
    """Non-partitioned: one partition, the first side's when it has any file (Paimon lists the empty partition)."""
    cat = _catalog(tmp_path)
    t = cat.create_table("db.t", SCHEMA, primary_key=["pt", "k"], options={"bucket": "1"})
    t.create_branch("b")
    _option(t, "scan.fallback-branch", "b")
    t.branch("b").write(_rows((1, 1, "branch")))
    assert _set(t.read()) == [(1, 1, "branch")]
    t.write(_rows((2, 2, "main")))
    assert _set(t.read()) == [(2, 2, "main")]
    t.delete(pa.table({"pt": [2], "k": [2]}, schema=KEYS))
    assert _set(t.read()) == []  # main still has files (the delete record): main owns the partition, empty
    t.compact(full=True)  # the full compaction leaves main no file: the branch's rows again
    assert t.plan() and all(sp.branch == "b" for sp in t.plan())
    assert _set(t.read()) == [(1, 1, "branch")]


def test_time_travel_maps_snapshot_ids_by_time_and_tags_by_name(tmp_path):
    """Paimon's rewriteOtherOptions: main's snapshot N reads the branch at its latest snapshot committed at or
    before N's time (its snapshot 1 when none is); a tag reads the branch's tag of that name."""
    cat = _catalog(tmp_path)
    t = _pk_table(cat)
    t.write(_rows((1, 1, "m1")))                       # main 1
    t.create_tag("t1")
    t.create_branch("b", tag="t1")                    # branch snapshot 1 = main's
    b = t.branch("b")
    _option(t, "scan.fallback-branch", "b")
    b.write(_rows((2, 1, "b2")))                      # branch 2
    t.write(_rows((1, 2, "m2")))                      # main 2
    b.write(_rows((2, 2, "b3")))                      # branch 3
    assert _set(t.read(snapshot_id=1)) == [(1, 1, "m1")]            # branch 1: pt=2 not yet there
    assert _set(t.read(snapshot_id=2)) == [(1, 1, "m1"), (1, 2, "m2"), (2, 1, "b2")]
    assert _set(t.read()) == [(1, 1, "m1"), (1, 2, "m2"), (2, 1, "b2"), (2, 2, "b3")]
    assert _set(t.read(tag="t1")) == [(1, 1, "m1")]
    t.create_tag("t2", 2)
    with pytest.raises(TagNotFound):  # the branch has no tag t2: Paimon fails the scan too
        t.read(tag="t2")
    assert _set(t.lookup(pa.table({"pt": [2, 2], "k": [1, 2]}, schema=KEYS), snapshot_id=2)) == \
        [(2, 1, "b2")]


def test_snapshot_id_before_every_branch_snapshot_reads_branch_snapshot_1(tmp_path):
    cat = _catalog(tmp_path)
    t = _pk_table(cat)
    t.write(_rows((1, 1, "m1")))
    t.create_branch("b")  # empty
    _option(t, "scan.fallback-branch", "b")
    with pytest.raises(SnapshotNotFound):  # no branch snapshot at all (Paimon: "There is currently no snapshot.")
        t.read(snapshot_id=1)
    t.branch("b").write(_rows((2, 1, "b1")))
    assert _set(t.read(snapshot_id=1)) == [(1, 1, "m1"), (2, 1, "b1")]


def test_branches_with_other_row_types_are_refused(tmp_path):
    """BranchSqlITCase.testDifferentRowTypes: Paimon refuses the scan ("does not have the same row type")."""
    cat = _catalog(tmp_path)
    t = _pk_table(cat)
    t.create_branch("b")
    t.alter().add_column("v2", pa.int64()).commit()
    _option(t, "scan.fallback-branch", "b")
    for read in (t.read, t.to_reader, t.plan):
        with pytest.raises(InvalidInput, match="same row type"):
            read()
    t.alter().remove_option("scan.fallback-branch").commit()
    assert t.read().num_rows == 0


def test_same_added_columns_on_both_branches_read_together(tmp_path):
    """BranchSqlITCase.testMainAndFallbackNoPrimaryKeys: both branches add v2 (same id); old rows read null."""
    cat = _catalog(tmp_path)
    t = cat.create_table("db.t", pa.schema([("pt", pa.int32()), ("v", pa.int32())]), partition_keys=["pt"],
                         options={"bucket": "-1"})
    t.write(pa.table({"pt": [1], "v": [110]}, schema=t.arrow_schema))
    t.create_branch("test")
    _option(t, "scan.fallback-branch", "test")
    t.branch("test").write(pa.table({"pt": [2], "v": [210]}, schema=t.arrow_schema))
    assert _set(t.read()) == [(1, 110), (2, 210)]
    t.alter().add_column("v2", pa.int32()).commit()
    add_main_column_to_branch(t, "test", "v2")
    t.write(pa.table({"pt": [1], "v": [120], "v2": [1200]}, schema=t.arrow_schema))
    t.branch("test").write(pa.table({"pt": [2], "v": [220], "v2": [2200]}, schema=t.arrow_schema))
    rows = sorted(t.read().to_pylist(), key=lambda r: (r["pt"], r["v"]))
    assert [tuple(r.values()) for r in rows] == [(1, 110, None), (1, 120, 1200), (2, 210, None), (2, 220, 2200)]


def test_renamed_column_on_the_branch_is_read_by_position(tmp_path):
    cat = _catalog(tmp_path)
    t = _pk_table(cat)
    t.create_branch("b")
    b = t.branch("b")
    s = b.schema
    renamed = dataclasses.replace(s, id=s.id + 1, fields=tuple(
        dataclasses.replace(f, name="value") if f.name == "v" else f for f in s.fields))
    write_schema(t, b, renamed)
    t.branch("b").write(pa.table({"pt": [2], "k": [1], "value": ["x"]}, schema=t.branch("b").arrow_schema))
    _option(t, "scan.fallback-branch", "b")
    assert t.read(columns=["v"], filter=[("v", "=", "x")]).to_pylist() == [{"v": "x"}]
    assert t.lookup(pa.table({"pt": [2], "k": [1]}, schema=KEYS), columns=["v"]).to_pylist() == [{"v": "x"}]
    assert pa.Table.from_batches(list(t.to_reader(columns=["v"]))).to_pylist() == [{"v": "x"}]


def test_other_field_ids_are_refused(tmp_path):
    cat = _catalog(tmp_path)
    t = _pk_table(cat)
    t.create_branch("b")
    b = t.branch("b")
    s = b.schema
    moved = dataclasses.replace(s, id=s.id + 1, highest_field_id=s.highest_field_id + 1, fields=tuple(
        dataclasses.replace(f, id=s.highest_field_id + 1) if f.name == "v" else f for f in s.fields))
    write_schema(t, b, moved)
    _option(t, "scan.fallback-branch", "b")
    with pytest.raises(UnsupportedFeature, match="field ids"):
        t.read()


def _force_options(t, drop=(), **options):
    """Options written into a new schema file directly, as a table another tool altered (or whose branch was
    removed by hand) may hold them, past ALTER's validation."""
    import dataclasses
    s = t.schema_manager.latest()
    kept = {k: v for k, v in s.options.items() if k not in drop}
    new = dataclasses.replace(s, id=s.id + 1, options={**kept, **options})
    t.file_io.write_bytes(t.paths.schema(new.id), new.to_json().encode())
    t.schema = new


def test_alter_refuses_both_options_and_a_missing_branch_as_paimon(tmp_path):
    """SchemaValidation.validateFallbackBranch on every schema commit; nothing is written."""
    cat = _catalog(tmp_path)
    t = _pk_table(cat)
    t.write(_rows((1, 1, "m")))
    t.create_branch("b")
    before = t.schema_manager.latest().id
    with pytest.raises(InvalidOption, match="Cannot set both"):
        t.alter().set_option("scan.fallback-branch", "b").set_option("scan.primary-branch", "b").commit()
    for key in ("scan.fallback-branch", "scan.primary-branch"):
        with pytest.raises(InvalidOption, match="because the branch 'gone' does not exist"):
            t.alter().set_option(key, "gone").commit()
    assert t.schema_manager.latest().id == before
    t.alter().set_option("scan.primary-branch", "b").commit()  # an existing branch is accepted
    assert t.schema.options["scan.primary-branch"] == "b"


def test_both_options_are_refused_and_a_missing_branch_reads_main_alone(tmp_path, caplog):
    cat = _catalog(tmp_path)
    t = _pk_table(cat)
    t.write(_rows((1, 1, "m")))
    t.create_branch("b")
    _force_options(t, **{"scan.fallback-branch": "b", "scan.primary-branch": "b"})
    with pytest.raises(InvalidInput, match="both"):
        t.read()
    _force_options(t, drop=("scan.primary-branch",), **{"scan.fallback-branch": "gone"})
    with caplog.at_level(logging.ERROR, logger="engine.read.fallback_branch"):
        assert _set(t.read()) == [(1, 1, "m")]  # Paimon's factory logs an error and reads main alone
    assert "gone" in caplog.text


def test_streaming_reads_ignore_the_fallback_branch(tmp_path):
    """BranchSqlITCase.testFallbackBranchStreamRead: changes are main's only."""
    cat = _catalog(tmp_path)
    t = _pk_table(cat)
    t.write(_rows((1, 10, "apple")))
    t.create_branch("b")
    _option(t, "scan.fallback-branch", "b")
    t.branch("b").write(_rows((2, 20, "cat")))
    assert t.read().num_rows == 2
    changes = t.read_changes(0)
    assert sorted(changes.column("v").to_pylist()) == ["apple"]


def test_lookup_of_some_columns_of_a_partitioned_table(tmp_path):
    """Lookup with ``columns`` leaving the partition key out (it failed with a KeyError before)."""
    t = _pk_table(_catalog(tmp_path))
    t.write(_rows((1, 1, "x"), (2, 1, "y")))
    t.write(_rows((1, 1, "x2")))
    assert t.lookup(pa.table({"pt": [1], "k": [1]}, schema=KEYS), columns=["v"]).to_pylist() == [{"v": "x2"}]


def test_to_reader_of_an_append_table(tmp_path):
    """``to_reader`` of an append table reads its files unmerged (it tried a primary-key merge before)."""
    t = _catalog(tmp_path).create_table("db.a", SCHEMA, partition_keys=["pt"], options={"bucket": "-1"})
    t.write(_rows((1, 1, "x"), (1, 1, "y"), (2, 5, "z")))
    got = pa.Table.from_batches(list(t.to_reader(columns=["v"], filter=[("k", "=", 1)], batch_size=1)))
    assert sorted(got.column("v").to_pylist()) == ["x", "y"]
    assert _set(pa.Table.from_batches(list(t.to_reader()))) == _set(t.read())


def test_never_null_columns_need_not_null_on_both_branches(tmp_path):
    """Paimon compares the branches ignoring nullability, so a column NOT NULL on main may hold nulls in rows of
    the other branch (here an append branch where ``k`` is nullable)."""
    from engine.read.fallback_branch import never_null_columns
    cat = _catalog(tmp_path)
    t = _pk_table(cat)
    t.create_branch("b")
    b = t.branch("b")
    s = b.schema
    loose = dataclasses.replace(s, id=s.id + 1, primary_keys=(), options={**s.options, "bucket": "-1"},
                                fields=tuple(dataclasses.replace(f, type=f.type.with_nullable(True))
                                             if f.name == "k" else f for f in s.fields))
    write_schema(t, b, loose)
    assert never_null_columns(t) == ["pt", "k"]
    _option(t, "scan.fallback-branch", "b")
    assert never_null_columns(t) == ["pt"]
    t.branch("b").write(pa.table({"pt": [2], "k": [None], "v": ["null key"]}, schema=t.branch("b").arrow_schema))
    assert t.read().to_pylist() == [{"pt": 2, "k": None, "v": "null key"}]


def test_a_partition_with_only_level_0_files_of_a_deletion_vector_main_is_read_from_the_branch(tmp_path):
    """Paimon lists the partitions a side owns with its batch scan, which skips level-0 files of a deletion-vector
    table (AbstractBatchTableScan: batchScanSkipLevel0), so a partition whose main files are all still at level 0
    is not main's: it is read from the fallback branch (lakemerge read it from main: no rows)."""
    cat = _catalog(tmp_path)
    t = _pk_table(cat, **{"deletion-vectors.enabled": "true", "write-only": "true"})
    t.create_branch("b")
    b = t.branch("b")
    b.write(_rows((1, 20, "cat"), (2, 30, "dog")))
    b.compact(full=True)
    t.write(_rows((1, 10, "apple"), (2, 10, "pear")))
    t.compact(full=True, partitions=[{"pt": 2}])
    t.write(_rows((2, 11, "plum")))  # level 0: invisible to batch reads until compacted
    _option(t, "scan.fallback-branch", "b")
    want = [(1, 20, "cat"), (2, 10, "pear")]
    assert _set(t.read()) == want
    assert _set(pa.Table.from_batches(list(t.to_reader()))) == want
    assert _set(t.lookup(pa.table({"pt": [1, 2], "k": [20, 10]}, schema=KEYS))) == want


def test_streaming_full_read_of_an_append_table_reads_main_alone(tmp_path):
    """Paimon's FallbackReadFileStoreTable streams through main's stream scan (DelegatedFileStoreTable
    .newStreamScan), so the first (full) batch of ``latest-full`` holds main's rows only, not the fallback branch's
    partitions (an append table's full read went through Table.read, which now reads both branches)."""
    cat = _catalog(tmp_path)
    t = cat.create_table("db.t", SCHEMA, partition_keys=["pt"], options={"bucket": "-1"})
    t.write(_rows((1, 10, "apple")))
    t.create_branch("b")
    _option(t, "scan.fallback-branch", "b")
    t.branch("b").write(_rows((2, 20, "cat")))
    assert t.read().num_rows == 2
    got = [r for b in t.stream("latest-full", idle_timeout=0.1, poll_interval=0.05) for r in b.to_pylist()]
    assert got == [{"pt": 1, "k": 10, "v": "apple", "_row_kind": "+I"}]


def test_time_travel_before_an_added_column_reads_both_branches_through_their_snapshots_schemas(tmp_path):
    """Paimon's FallbackReadFileStoreTable.copy time-travels the table and the other branch (each to its pinned
    snapshot's schema) before comparing their row types: both read v2-less; the latest read has v2."""
    cat = _catalog(tmp_path)
    t = cat.create_table("db.t", pa.schema([("pt", pa.int32()), ("v", pa.int32())]), partition_keys=["pt"],
                         options={"bucket": "-1"})
    t.write(pa.table({"pt": [1], "v": [110]}, schema=t.arrow_schema))
    t.create_branch("test")  # empty: main's snapshot 1 reads the branch's snapshot 1 (pt=2)
    _option(t, "scan.fallback-branch", "test")
    t.branch("test").write(pa.table({"pt": [2], "v": [210]}, schema=t.arrow_schema))
    t.alter().add_column("v2", pa.int32()).commit()
    add_main_column_to_branch(t, "test", "v2")
    t.write(pa.table({"pt": [1], "v": [120], "v2": [1200]}, schema=t.arrow_schema))
    t.branch("test").write(pa.table({"pt": [2], "v": [220], "v2": [2200]}, schema=t.arrow_schema))
    assert t.read(snapshot_id=1).column_names == ["pt", "v"]
    assert _set(t.read(snapshot_id=1)) == [(1, 110), (2, 210)]
    assert _set(pa.Table.from_batches(list(t.to_reader(snapshot_id=1)), schema=pa.schema(
        [("pt", pa.int32()), ("v", pa.int32())]))) == [(1, 110), (2, 210)]
    assert len(t.read().column_names) == 3


@pytest.mark.parametrize("option", ["scan.fallback-branch", "scan.primary-branch"])
def test_row_level_changes_of_rows_the_other_branch_supplies_are_refused(tmp_path, option):
    """A primary-key DELETE / UPDATE writes its records to the table's own branch (Paimon's
    FallbackReadFileStoreTable delegates writes there): for a row the other branch supplies, Paimon's Spark DELETE
    ends with that partition owned by the table, its other rows hidden (fallback), or with no visible change
    (primary). lakemerge refuses, nothing written; the table's own rows still change."""
    cat = _catalog(tmp_path)
    t = _pk_table(cat)
    t.write(_rows((1, 10, "main"), (1, 20, "main")))
    t.create_branch("b")
    t.branch("b").write(_rows((2, 10, "branch"), (2, 20, "branch")))
    _option(t, option, "b")
    before = _set(t.read())
    sid = t.latest_snapshot_id()
    with pytest.raises(UnsupportedFeature, match=r"partition\(s\) \[\(2,\)\].*branch 'b'"):
        t.delete_where([("k", "=", 10)])
    with pytest.raises(UnsupportedFeature, match="update_where"):
        t.update_where({"v": "new"}, [("pt", "=", 2), ("k", "=", 20)])
    assert t.latest_snapshot_id() == sid and _set(t.read()) == before
    assert t.delete_where([("pt", "=", 1), ("k", "=", 10)]) is not None
    assert t.update_where({"v": "new"}, [("pt", "=", 1)]) is not None
    assert _set(t.read()) == [(1, 20, "new"), (2, 10, "branch"), (2, 20, "branch")]
