"""fields.<f>.stats-mode overrides metadata.stats-mode per column (Paimon's StatsCollectorFactories), in append,
primary-key and compaction writers; a file whose string maximum is truncated (rounded up) is never pruned for a
row it holds, and a column without statistics never prunes."""
from __future__ import annotations

import pyarrow as pa
import pytest

from engine import Catalog
from engine.errors import InvalidOption
from engine.meta import binary_row

SCHEMA = pa.schema([("id", pa.int64()), ("s", pa.string()), ("n", pa.int64()), ("c", pa.int64())])
OPTIONS = {"metadata.stats-mode": "full", "fields.s.stats-mode": "truncate(2)", "fields.n.stats-mode": "none",
           "fields.c.stats-mode": "counts"}
ROWS = pa.table({"id": [1, 2], "s": ["abcdef", "abzzz"], "n": [5, None], "c": [7, None]}, schema=SCHEMA)


def _table(tmp_path, pk: bool, **options):
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    return cat.create_table("db.t", SCHEMA, primary_key=["id"] if pk else None,
                            options={"bucket": "1" if pk else "-1", **OPTIONS, **options})


def _stats(t) -> dict:
    """Column -> (min, max, null count) of the one data file's value statistics (the columns it stores)."""
    [f] = [f for sp in t.plan() for f in sp.files]
    names = list(t.schema.field_names) if f.value_stats_cols is None else list(f.value_stats_cols)
    stat_types = [ty.with_nullable(True) for ty in t.schema.types_of(names)]
    lo = binary_row.deserialize_row(f.value_stats.min_values, stat_types)
    hi = binary_row.deserialize_row(f.value_stats.max_values, stat_types)
    return {n: (lo[i], hi[i], f.value_stats.null_counts[i]) for i, n in enumerate(names)}


@pytest.mark.parametrize("pk", [True, False], ids=["pk", "append"])
def test_each_column_gets_its_own_mode(tmp_path, pk):
    """A none column is left out of the statistics, which name the columns they hold (value_stats_cols), as Paimon's
    SimpleStatsConverter stores them under metadata.stats-dense-store (default true)."""
    t = _table(tmp_path, pk)
    t.write(ROWS)
    assert _stats(t) == {"id": (1, 2, 0), "s": ("ab", "ac", 0), "c": (None, None, 1)}


def test_compaction_output_keeps_the_modes(tmp_path):
    """As test_each_column_gets_its_own_mode, for the compaction writer (dense statistics too)."""
    t = _table(tmp_path, True)
    t.write(ROWS.slice(0, 1))
    t.write(ROWS.slice(1, 1))
    t.compact(full=True)
    assert _stats(t) == {"id": (1, 2, 0), "s": ("ab", "ac", 0), "c": (None, None, 1)}


@pytest.mark.parametrize("pk", [True, False], ids=["pk", "append"])
def test_truncated_and_absent_stats_never_prune_a_matching_file(tmp_path, pk):
    t = _table(tmp_path, pk)
    t.write(ROWS)
    assert t.read(filter=[("s", ">=", "abzzz")]).column("id").to_pylist() == [2]
    assert t.read(filter=[("s", "=", "abcdef")]).column("id").to_pylist() == [1]
    assert t.read(filter=[("n", "=", 5)]).column("id").to_pylist() == [1]
    assert t.read(filter=[("n", "is null", None)]).column("id").to_pylist() == [2]
    assert t.plan(filter=[("s", ">", "b")]) == []  # the rounded-up maximum still prunes what cannot match


def test_an_unknown_mode_is_refused(tmp_path):
    t = _table(tmp_path, False, **{"fields.s.stats-mode": "truncate"})
    with pytest.raises(InvalidOption, match="fields.s.stats-mode"):
        t.write(ROWS)
    assert t.latest_snapshot_id() is None


def _key_stats(t):
    [f] = [f for sp in t.plan() for f in sp.files]
    [ty] = [t.schema.field("k").type.with_nullable(True)]
    return (binary_row.deserialize_row(f.key_stats.min_values, [ty])[0],
            binary_row.deserialize_row(f.key_stats.max_values, [ty])[0], f.key_stats.null_counts)


LONG = ["a" * 200, "a" * 150 + "b"]


def _key_table(tmp_path, **options):
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    t = cat.create_table("db.k", pa.schema([pa.field("k", pa.string(), False), ("v", pa.int64())]),
                         primary_key=["k"], options={"bucket": "1", "metadata.stats-mode": "full", **options})
    t.write(pa.table({"k": LONG, "v": [1, 2]}))
    return t


def test_key_stats_are_truncated_to_128_characters_as_in_paimon(tmp_path):
    """Paimon collects the _KEY_ columns' stats with truncate(128) whatever metadata.stats-mode says
    (StatsCollectorFactories: system fields); a key filter still finds both rows."""
    t = _key_table(tmp_path)
    assert _key_stats(t) == ("a" * 128, "a" * 127 + "b", (0,))
    assert sorted(t.read(filter=[("k", "=", LONG[1])]).column("v").to_pylist()) == [2]
    assert t.lookup(pa.table({"k": [LONG[1]]})).column("v").to_pylist() == [2]
    t.write(pa.table({"k": [LONG[0]], "v": [3]}))
    t.compact(full=True)
    assert _key_stats(t) == ("a" * 128, "a" * 127 + "b", (0,))


def test_key_stats_follow_a_key_column_override_and_avro_the_table_mode(tmp_path):
    # fields._KEY_k.* names no column (Paimon's SchemaValidation refuses it); in thin mode the key's own column
    # is the key's column in the file, so its override applies to the key statistics too
    thin = _key_table(tmp_path / "o", **{"data-file.thin-mode": "true", "fields.k.stats-mode": "full"})
    assert _key_stats(thin)[:2] == tuple(LONG)
    assert _key_stats(_key_table(tmp_path / "t", **{"data-file.thin-mode": "true"}))[:2] == ("a" * 128,
                                                                                            "a" * 127 + "b")
    # Avro files: Paimon's createStatsFactoriesForAvro gives _KEY_ columns the file's stats mode
    assert _key_stats(_key_table(tmp_path / "a", **{"file.format": "avro", "metadata.stats-mode": "counts"})) \
        == (None, None, (0,))


@pytest.mark.parametrize("pk", [True, False], ids=["pk", "append"])
def test_a_maximum_that_cannot_be_rounded_up_drops_the_minimum_too(tmp_path, pk):
    """Paimon's TruncateSimpleColStatsCollector: when the truncated maximum has no upper bound (a prefix of only
    U+10FFFF characters or 0xFF bytes) the column keeps neither bound, only its null count -- in written and
    compacted files alike."""
    schema = pa.schema([("id", pa.int64()), ("s", pa.string()), ("b", pa.binary())])
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    t = cat.create_table("db.t", schema, primary_key=["id"] if pk else None,
                         options={"bucket": "1" if pk else "-1", "metadata.stats-mode": "truncate(2)"})
    t.write(pa.table({"id": [1], "s": ["a"], "b": [b"\x00"]}, schema=schema))
    t.write(pa.table({"id": [2], "s": ["\U0010FFFF" * 3], "b": [b"\xff\xff\xff"]}, schema=schema))
    t.compact(full=True)
    assert _stats(t) == {"id": (1, 2, 0), "s": (None, None, 0), "b": (None, None, 0)}
    assert t.read(filter=[("s", ">", "b")]).column("id").to_pylist() == [2]


def test_thin_mode_key_column_value_stats_are_the_key_stats(tmp_path):
    """Thin mode: the key's own value column is the key's column in the file, and Paimon's StatsCollectorFactories
    gives it truncate(128) (not metadata.stats-mode) unless fields.<k>.stats-mode is set; its value statistics and
    the key statistics (KeyValueThinDataFileWriterImpl copies them) agree, in written and compacted files."""
    t = _key_table(tmp_path, **{"data-file.thin-mode": "true", "metadata.stats-mode": "truncate(4)"})
    bounds = ("a" * 128, "a" * 127 + "b", 0)
    assert _stats(t)["k"] == bounds and _key_stats(t) == bounds[:2] + ((0,),)
    t.write(pa.table({"k": [LONG[0]], "v": [3]}))
    t.compact(full=True)
    assert _stats(t)["k"] == bounds and _key_stats(t) == bounds[:2] + ((0,),)


def test_a_bad_changelog_file_stats_mode_is_named(tmp_path):
    """changelog-file.stats-mode is the default mode of a changelog file's columns: a bad value is refused naming
    that option, not a fields.<f>.stats-mode the user never set."""
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    with pytest.raises(InvalidOption, match="'changelog-file.stats-mode'"):
        t = cat.create_table("db.c", SCHEMA, primary_key=["id"], options={
            "bucket": "1", "changelog-producer": "input", "changelog-file.stats-mode": "bogus"})
        t.write(ROWS)
