"""merge-engine=first-row (paimon-semantics §6.4): the oldest record of each key wins, visible at every level."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from engine.errors import InvalidInput, InvalidSchema

I = pa.int32()
S = pa.schema([("k", I), ("v", pa.string())])


def _batch(rows):
    return pa.Table.from_pylist([dict(zip(S.names, r)) for r in rows], schema=S)


def test_first_record_wins_in_buffer_and_across_level0_runs(catalog):
    t = catalog.create_table("db.f", S, primary_key=["k"], options={"bucket": "2", "merge-engine": "first-row"})
    t.write(_batch([(1, "a"), (1, "b"), (2, None)]))
    t.write(_batch([(1, "c"), (2, "x"), (3, "y")]))
    assert {r["k"]: r["v"] for r in t.read().to_pylist()} == {1: "a", 2: None, 3: "y"}
    got = {r["k"]: r["v"] for r in t.lookup(pa.table({"k": pa.array([3, 1], I)})).to_pylist()}
    assert got == {1: "a", 3: "y"}


def test_deletes(catalog):
    t = catalog.create_table("db.f", S, primary_key=["k"], options={"bucket": "1", "merge-engine": "first-row"})
    t.write(_batch([(1, "a")]))
    with pytest.raises(InvalidInput, match="first-row cannot take -U/-D"):
        t.delete(pa.table({"k": pa.array([1], I)}))
    for key in ("ignore-delete", "first-row.ignore-delete"):
        u = catalog.create_table(f"db.{key.replace('.', '_').replace('-', '_')}", S, primary_key=["k"],
                                 options={"bucket": "1", "merge-engine": "first-row", key: "true"})
        u.write(_batch([(1, "a")]))
        u.delete(pa.table({"k": pa.array([1], I)}))
        u.write(_batch([(1, "b")]))
        assert u.read().to_pylist() == [{"k": 1, "v": "a"}]


def test_rejects_sequence_field(catalog):
    s = pa.schema([("k", I), ("ts", pa.int64())])
    with pytest.raises(InvalidSchema, match="first-row does not allow sequence.field"):
        catalog.create_table("db.f", s, primary_key=["k"],
                             options={"bucket": "1", "merge-engine": "first-row", "sequence.field": "ts"})


# --- compaction drops a level-0 key whose first row is deeper (Paimon's FirstRowMergeFunctionWrapper) --------------
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


def _keys_above_level0(t) -> list[list[int]]:
    """Per bucket of the latest snapshot, the keys of every record in files above level 0 (duplicates kept)."""
    from engine.merge import KEY_COLUMN_PREFIX
    from engine.read.split_read import SplitReader
    reader = SplitReader(t.file_io, t.schema, t.schema_manager.schema)
    out = []
    for sp in t.plan():
        keys = []
        for f in sp.files:
            if f.level > 0:
                keys += reader.read_file(sp, f, [], live_only=False).column(KEY_COLUMN_PREFIX + "k").to_pylist()
        out.append(keys)
    return out


def _assert_one_record_per_key_above_level0(t) -> None:
    for keys in _keys_above_level0(t):
        assert len(keys) == len(set(keys)), f"a key has records in two files above level 0: {sorted(keys)}"


def _legacy_compaction(monkeypatch) -> None:
    """Compaction as lakemerge did before it looked keys up: no level-0 key is found deeper."""
    from engine.deletion_vectors.position_index import PositionIndex
    monkeypatch.setattr(PositionIndex, "contains", lambda self, probes: np.zeros(probes.num_rows, bool))


def _history(t):
    """Keys {1, 2}, then key 1 again with a new key per commit: each writer compaction takes level 0 to a level
    above the deeper data (the reported bug)."""
    t.write(_batch([(1, "a"), (2, "b")]))
    for i in range(4):
        t.write(_batch([(1, f"x{i}"), (10 + i, "n")]))


def test_compaction_drops_a_later_record_of_a_key_already_deeper(catalog):
    """The reported bug: level 0 compacted to a level above deeper data kept key 1's later record there."""
    t = catalog.create_table("db.f", S, primary_key=["k"], options={"bucket": "1", "merge-engine": "first-row"})
    _history(t)
    assert len({f.level for sp in t.plan() for f in sp.files} - {0}) > 1  # data on two levels above 0
    _assert_one_record_per_key_above_level0(t)
    assert {r["k"]: r["v"] for r in t.read().to_pylist()} == {1: "a", 2: "b", 10: "n", 11: "n", 12: "n", 13: "n"}


def test_string_keys_above_level0_once(catalog):
    """The same with variable-length keys (the byte-string paths of the key kernels)."""
    s = pa.schema([("k", pa.string()), ("v", pa.string())])
    t = catalog.create_table("db.s", s, primary_key=["k"], options={"bucket": "1", "merge-engine": "first-row"})
    t.write(pa.table({"k": ["key-1", "key-2"], "v": ["a", "b"]}, schema=s))
    model = {"key-1": "a", "key-2": "b"}
    for i in range(4):
        t.write(pa.table({"k": ["key-1", f"key-{10 + i}", "key-2"], "v": ["x", "n", "y"]}, schema=s))
        model[f"key-{10 + i}"] = "n"
        _assert_one_record_per_key_above_level0(t)
        assert {r["k"]: r["v"] for r in t.read().to_pylist()} == model


def test_full_compaction_repairs_duplicates_of_older_versions(catalog, monkeypatch):
    """Older lakemerge versions kept a later record of a key above level 0: check() reports it, a full compaction
    repairs it."""
    t = catalog.create_table("db.f", S, primary_key=["k"], options={"bucket": "1", "merge-engine": "first-row"})
    with monkeypatch.context() as m:
        _legacy_compaction(m)
        _history(t)
    assert any(len(keys) != len(set(keys)) for keys in _keys_above_level0(t))  # the old layout: key 1 twice
    assert "first-row-duplicate-keys" in t.check().kinds()
    t.compact(full=True)
    _assert_one_record_per_key_above_level0(t)
    assert t.check().ok
    assert {r["k"]: r["v"] for r in t.read().to_pylist()}[1] == "a"


_op = st.one_of(st.lists(st.tuples(st.integers(0, 12), st.sampled_from(["p", "q", "r"])), min_size=1, max_size=8),
                st.sampled_from(["compact", "full"]))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(ops=st.lists(_op, min_size=1, max_size=10), producer=st.sampled_from(["none", "lookup"]))
def test_model_with_interleaved_compactions(tmp_path_factory, ops, producer):
    """A dict model of first-row writes (the first value of a key wins) against the table after every step, with
    writer compactions, dedicated and full compactions interleaved: files above level 0 hold each key once."""
    from engine import Catalog
    cat = Catalog(str(tmp_path_factory.mktemp("wh")))
    cat.create_database("db")
    t = cat.create_table("db.f", S, primary_key=["k"], options={
        "bucket": "2", "merge-engine": "first-row", "changelog-producer": producer, "num-sorted-run.compaction-trigger": "2"})
    model: dict[int, str] = {}
    for op in ops:
        if op == "compact":
            t.compact()
        elif op == "full":
            t.compact(full=True)
        else:
            t.write(_batch(op))
            for k, v in op:
                model.setdefault(k, v)
        _assert_one_record_per_key_above_level0(t)
        assert {r["k"]: r["v"] for r in t.read().to_pylist()} == model


def test_level_0_file_compacted_into_a_level_of_another_format_is_rewritten(catalog):
    """file.format.per.level '0:avro': a first-row table always compacts with Paimon's lookup rewriter, whose
    upgradeStrategy rewrites a level-0 file whose output level has another format (LookupMergeTreeCompactRewriter),
    changelog or not; lakemerge's plain-merge shortcut (no changelog, nothing deeper) upgraded it by metadata,
    leaving an Avro file at the Parquet max level."""
    t = catalog.create_table("db.f", S, primary_key=["k"], options={
        "bucket": "1", "merge-engine": "first-row", "file.format": "parquet", "file.format.per.level": "0:avro",
        "write-only": "true"})
    t.write(_batch([(1, "a"), (2, "b")]))
    t.compact()
    [f] = [f for sp in t.plan() for f in sp.files]
    assert f.level == 5 and f.file_name.endswith(".parquet")
    assert {r["k"]: r["v"] for r in t.read().to_pylist()} == {1: "a", 2: "b"}


def test_check_reports_duplicate_string_keys_of_older_versions(catalog, monkeypatch):
    """check()'s duplicate-key test on variable-length keys (the encoded keys compared as one Arrow binary
    array): the older layout is reported, a full compaction repairs it."""
    s = pa.schema([("k", pa.string()), ("v", pa.string())])
    t = catalog.create_table("db.s", s, primary_key=["k"], options={"bucket": "1", "merge-engine": "first-row"})
    with monkeypatch.context() as m:
        _legacy_compaction(m)
        t.write(pa.table({"k": ["key-1", "key-2"], "v": ["a", "b"]}, schema=s))
        for i in range(4):
            t.write(pa.table({"k": ["key-1", f"key-{10 + i}"], "v": [f"x{i}", "n"]}, schema=s))
    assert "first-row-duplicate-keys" in t.check().kinds()
    t.compact(full=True)
    assert t.check().ok and {r["k"]: r["v"] for r in t.read().to_pylist()}["key-1"] == "a"
