"""Position-only lookup of deletion-vector compaction (engine.deletion_vectors.position_index): deduplicate tables
without changelog look up where a key's previous record lies, never its values, and end in the same state as the
full-value lookup."""
from __future__ import annotations

from types import SimpleNamespace

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.changelog.lookup_index import LookupIndex, table_cache
from engine.deletion_vectors import position_index
from engine.deletion_vectors.index_file import read_deletion_vector
from engine.read.split_read import SplitReader

INT = pa.int64()
LEVELS = {"num-sorted-run.compaction-trigger": "10", "compaction.max-size-amplification-percent": "100000"}


def schema_of(key_type):
    return pa.schema([("k", key_type), ("v", pa.int64()), ("s", pa.string())])


def batch(keys, value, key_type=INT):
    ks = [k if key_type == pa.int64() else f"key-{k:05d}" for k in keys]
    return pa.table({"k": ks, "v": [value + k for k in keys], "s": [f"s{value}-{k}" for k in keys]},
                    schema=schema_of(key_type))


def make(catalog, name, key_type=INT, **options):
    return catalog.create_table(name, schema_of(key_type), primary_key=["k"],
                                options={"bucket": "1", "deletion-vectors.enabled": "true", **LEVELS, **options})


def state(table) -> list:
    """Every data file of the latest snapshot as (level, its rows with sequence number and kind, its deleted
    positions), sorted: the table's whole physical state but the random file names."""
    out = []
    for split in table.plan():
        reader = SplitReader(table.file_io, table.schema, table.schema_manager.schema)
        vectors = dict(split.vectors.files)
        for f in split.files:
            got = reader.read_file(split, f, ["k", "v", "s"], live_only=False).drop_columns(["__key_k"])
            dead = read_deletion_vector(table.file_io, vectors[f.file_name]) if f.file_name in vectors else []
            out.append((split.bucket, f.level, tuple(tuple(r.values()) for r in got.to_pylist()),
                        tuple(int(p) for p in dead)))
    return sorted(out)


def full_values_only(monkeypatch):
    """Force the full-value LookupIndex (the path every lookup table took before position-only lookups)."""
    monkeypatch.setattr(position_index, "positions_suffice", lambda options: False)


def test_position_path_caches_keys_only_and_marks_the_same_rows(catalog, monkeypatch):
    located, read_columns, writing = [], [], [False]
    locate, read_file = position_index.PositionIndex.locate, SplitReader.read_file

    def spy_locate(self, probes, found):
        n = locate(self, probes, found)
        located.append(n)
        return n

    def spy_read(self, split, meta, columns, **kw):
        if writing[0]:
            read_columns.append((meta.level, list(columns)))
        return read_file(self, split, meta, columns, **kw)
    monkeypatch.setattr(position_index.PositionIndex, "locate", spy_locate)
    monkeypatch.setattr(SplitReader, "read_file", spy_read)

    def run(t):
        t.write(batch(range(1000), 0))
        t.compact(full=True)
        for i in range(5):
            writing[0] = True
            t.write(batch(range(i * 150, i * 150 + 200), 10 * (i + 1)))
            writing[0] = False
            cached = list(table_cache(t).entries.values())
            yield cached, state(t)

    positions = list(run(make(catalog, "db.pos")))
    assert sum(located) > 0  # keys were found deeper and marked
    assert all(rows is None for cached, _ in positions for rows, _ in cached)  # keys only, no value columns
    assert any(cached for cached, _ in positions)
    assert [c for lv, c in read_columns if lv > 0] and all(c == [] for lv, c in read_columns if lv > 0)  # deeper files: keys, never values
    assert any(dead for _, st_ in positions for *_, dead in st_)

    full_values_only(monkeypatch)
    located.clear()
    full = list(run(make(catalog, "db.full")))
    assert not located
    assert any(rows is not None for cached, _ in full for rows, _ in cached)  # the full path holds rows
    assert [st_ for _, st_ in positions] == [st_ for _, st_ in full]


@pytest.mark.parametrize("options, served", [
    ({}, True),
    ({"force-lookup": "true"}, True),
    ({"ignore-delete": "true"}, True),  # per unit: unit_allows_positions
    ({"changelog-producer": "lookup"}, False),  # the changelog needs the previous values
    ({"sequence.field": "v"}, False),
    ({"merge-engine": "partial-update"}, False),
    ({"merge-engine": "aggregation", "fields.v.aggregate-function": "sum"}, False),
    ({"deletion-vectors.enabled": "false", "force-lookup": "true"}, False),
])
def test_tables_the_position_path_serves(catalog, options, served):
    t = make(catalog, "db.t", **options)
    assert position_index.positions_suffice(t.schema.table_options) is served


def _file(level, lo, hi, deletes=0):
    return SimpleNamespace(level=level, min_sequence_number=lo, max_sequence_number=hi, delete_row_count=deletes)


@pytest.mark.parametrize("deeper_max, level0_min, ignore_delete, deletes, allowed", [
    (99, 100, False, 0, True),
    (100, 100, False, 0, False),   # a deeper record as new as a level-0 one: the merge may pick it
    (150, 100, False, 0, False),
    (99, 100, False, 3, True),     # retracts win over older records: still the newest level-0 record
    (99, 100, True, 3, False),     # ignore-delete skips level-0 retracts: the deeper record would be the result
    (99, 100, True, None, False),  # unknown delete count
    (99, 100, True, 0, True),
])
def test_unit_guard(deeper_max, level0_min, ignore_delete, deletes, allowed):
    options = SimpleNamespace(ignore_delete=ignore_delete)
    unit = [_file(0, level0_min, level0_min + 10, deletes), _file(0, level0_min + 20, level0_min + 30),
            _file(3, 5, 6)]
    levels = SimpleNamespace(levels={0: unit[:2], 3: [unit[2]], 4: [_file(4, 0, deeper_max)],
                                     5: [_file(5, 0, 10)]})
    assert position_index.unit_allows_positions(options, unit, levels, 4) is allowed
    assert position_index.unit_allows_positions(options, [unit[2]], levels, 4)  # no level 0: nothing looked up


def test_ignore_delete_with_retracts_at_level0_keeps_the_deeper_rows(catalog):
    """Retracts written before ignore-delete was set: the deduplicate merge skips them, so a key's result is its
    deeper record (full-value path); a position-only merge would drop the key (as Paimon's would)."""
    t = make(catalog, "db.t")
    t.write(batch(range(2000), 0))
    t.alter().set_option("write-only", "true").commit()
    t.write(batch([1, 2], 0), row_kinds=["-D", "-D"])
    t.alter().set_option("write-only", "false").set_option("ignore-delete", "true").commit()
    t.write(batch([4], 40))
    assert sorted(f.level for sp in t.plan() for f in sp.files) == [9, 10]  # compacted with a lookup into 10
    got = {r["k"]: r["v"] for r in t.read().to_pylist()}
    assert len(got) == 2000 and got[1] == 1 and got[2] == 2 and got[4] == 44


def test_full_value_lookup_after_positions_reads_the_rows(catalog):
    """A keys-only cache entry is a miss for LookupIndex (the unit guard may send one unit of a table the full-value
    way), which reads and caches the rows."""
    t = make(catalog, "db.t")
    t.write(batch(range(1000), 0))
    t.compact(full=True)
    t.write(batch(range(100), 5))
    (deep,) = [f for sp in t.plan() for f in sp.files if f.level == 10]
    split = t.plan()[0]
    path = f"{split.bucket_dir}/{deep.file_name}"
    assert table_cache(t).peek(path)[0] is None
    reader = SplitReader(t.file_io, t.schema, t.schema_manager.schema)
    levels = SimpleNamespace(levels={10: [deep]}, decode=lambda key: key)
    index = LookupIndex(t, split, reader, levels, 10, ["k", "v", "s"])
    probes = reader.read_file(split, deep, [], live_only=False).slice(200, 3)
    found = []
    rows = index.get(probes, found=lambda name, pos: found.append((name, list(pos))))
    assert rows.column("v").to_pylist() == [200, 201, 202] and found == [(deep.file_name, [200, 201, 202])]
    assert table_cache(t).peek(path)[0] is not None


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(["write", "write", "delete", "compact", "full"]),
                          st.lists(st.integers(0, 40), min_size=1, max_size=12),
                          st.integers(0, 99)), min_size=1, max_size=10),
       st.sampled_from([pa.int64(), pa.string()]), st.sampled_from(["1", "2"]), st.sampled_from(["2", "4"]))
def test_position_path_gives_the_full_value_state(tmp_path_factory, ops, key_type, buckets, trigger):
    """Random writes, deletes and compactions: a table compacting with position-only lookups has, after every
    operation, the same files (levels, rows, sequence numbers) and deletion vectors as one with full-value
    lookups."""
    from engine import Catalog
    catalog = Catalog(str(tmp_path_factory.mktemp("wh")))
    catalog.create_database("db", ignore_if_exists=True)
    opts = {"bucket": buckets, "num-sorted-run.compaction-trigger": trigger}
    pos = make(catalog, "db.pos", key_type, **opts)
    full = make(catalog, "db.full", key_type, **opts)
    with pytest.MonkeyPatch.context() as mp:
        full_values_only(mp)
        full.write(batch(range(200), 0, key_type))
    pos.write(batch(range(200), 0, key_type))
    for op, keys, value in ops:
        for t in (pos, full):
            with pytest.MonkeyPatch.context() as mp:
                if t is full:
                    full_values_only(mp)
                if op == "write":
                    t.write(batch(sorted(set(keys)), value, key_type))
                elif op == "delete":
                    t.write(batch(sorted(set(keys)), value, key_type), row_kinds=["-D"] * len(set(keys)))
                else:
                    t.compact(full=op == "full")
        assert state(pos) == state(full)
