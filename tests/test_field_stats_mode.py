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
    return _file_stats(t, f)


def _file_stats(t, f) -> dict:
    """Column -> (min, max, null count) of data file ``f``'s value statistics (the columns it stores)."""
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


NOT_DENSE = {"metadata.stats-dense-store": "false"}


@pytest.mark.parametrize("pk", [True, False], ids=["pk", "append"])
def test_not_dense_stores_every_column_a_none_one_as_nulls(tmp_path, pk):
    """metadata.stats-dense-store=false: Paimon's SimpleStatsConverter.toBinaryAllMode stores every value column
    (value_stats_cols null), a none column with null min, max and null count -- written and compacted files."""
    t = _table(tmp_path, pk, **NOT_DENSE)
    t.write(ROWS.slice(0, 1))
    t.write(ROWS.slice(1, 1))
    t.compact(full=True)
    [f] = [f for sp in t.plan() for f in sp.files]
    assert f.value_stats_cols is None
    assert _stats(t) == {"id": (1, 2, 0), "s": ("ab", "ac", 0), "n": (None, None, None), "c": (None, None, 1)}
    # filters on every kind of column still find their rows
    assert t.read(filter=[("n", "=", 5)]).column("id").to_pylist() == [1]
    assert t.read(filter=[("n", "is null", None)]).column("id").to_pylist() == [2]
    assert t.read(filter=[("n", "is not null", None)]).column("id").to_pylist() == [1]
    assert t.plan(filter=[("s", ">", "b")]) == []


@pytest.mark.parametrize("pk", [True, False], ids=["pk", "append"])
def test_not_dense_with_every_column_none_keeps_a_row_of_nulls(tmp_path, pk):
    """All columns none: dense statistics are empty (value_stats_cols []), all-mode ones a row of nulls over every
    column (StatsCollectingSingleFileWriter gives every column SimpleColStats.NONE)."""
    t = _table(tmp_path, pk, **{"metadata.stats-mode": "none", "fields.s.stats-mode": "none",
                                "fields.c.stats-mode": "none", **NOT_DENSE})
    t.write(ROWS)
    [f] = [f for sp in t.plan() for f in sp.files]
    assert f.value_stats_cols is None
    assert _stats(t) == {c: (None, None, None) for c in ("id", "s", "n", "c")}
    assert t.read(filter=[("c", "is null", None)]).column("id").to_pylist() == [2]


def test_files_of_both_stores_and_added_columns_prune_right_in_one_table(tmp_path):
    """A table whose files were written dense, then not dense, then after a column was added: each file's
    statistics are read under its own layout, so every filter returns exactly the matching rows and still prunes
    on the columns whose bounds are stored."""
    t = _table(tmp_path, False)
    t.write(ROWS.slice(0, 1))                                    # dense: n left out
    t.alter().set_option("metadata.stats-dense-store", "false").commit()
    t.write(pa.table({"id": [3], "s": ["zz"], "n": [6], "c": [8]}, schema=SCHEMA))  # every column, n as nulls
    t.alter().add_column("x", pa.int64()).commit()
    t.write(pa.table({"id": [4], "s": ["m"], "n": [None], "c": [9], "x": [1]}))
    assert [f.value_stats_cols for sp in t.plan() for f in sorted(sp.files, key=lambda f: f.min_sequence_number)] \
        == [("id", "s", "c"), None, None]

    def ids(flt):
        return sorted(t.read(filter=flt).column("id").to_pylist())
    assert ids([("n", "=", 5)]) == [1] and ids([("n", "=", 6)]) == [3] and ids([("n", "is null", None)]) == [4]
    assert ids([("x", "is null", None)]) == [1, 3] and ids([("x", "=", 1)]) == [4]
    assert ids([("s", ">", "y")]) == [3] and ids([("c", "is null", None)]) == []
    from engine.read import predicate as pred
    files = sorted((f for sp in t.plan() for f in sp.files), key=lambda f: f.min_sequence_number)
    scan = t.scan()

    def kept(flt):  # which files (in write order) the read's per-file statistics test keeps
        dnf = pred.normalize(flt, t.arrow_schema, t.name)
        return [i for i, f in enumerate(files) if scan._values_may_match(f, dnf)]
    assert kept([("s", ">", "y")]) == [1] and kept([("id", "=", 4)]) == [2]  # bounds prune in all three layouts
    assert kept([("n", "=", 6)]) == [0, 1, 2]  # absent or null bounds never prune...
    assert kept([("c", "is null", None)]) == []  # ...stored null counts do
    # a column added later is null in every row of the older files (Paimon's NullCountsEvoArray: row count)
    assert kept([("x", "=", 1)]) == [2] and kept([("x", "is not null", None)]) == [2]
    assert kept([("x", "is null", None)]) == [0, 1]


def _modes(t) -> dict:
    """Column -> (min, max, null count) as _stats, with the columns a file leaves out as 'absent'."""
    got = _stats(t)
    return {n: got.get(n, "absent") for n in t.schema.field_names}


def _plain_table(tmp_path, pk: bool, **options):
    """As _table, without OPTIONS' per-column modes."""
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    return cat.create_table("db.t", SCHEMA, primary_key=["id"] if pk else None,
                            options={"bucket": "1" if pk else "-1", "metadata.stats-mode": "full", **options})


@pytest.mark.parametrize("pk", [True, False], ids=["pk", "append"])
def test_keep_first_n_columns(tmp_path, pk):
    """metadata.stats-keep-first-n-columns (StatsCollectorFactories.createStatsFactories): after N counted columns
    those without fields.<f>.stats-mode get none; a column with an override keeps it and counts; _KEY_ and system
    columns of primary-key files are not counted (their key statistics stay truncate(128))."""
    t = _plain_table(tmp_path, pk, **{"metadata.stats-keep-first-n-columns": "2", "fields.n.stats-mode": "counts"})
    t.write(ROWS)
    # id and s are the first two; n's override wins (and counts); c falls to none
    expected = {"id": (1, 2, 0), "s": ("abcdef", "abzzz", 0), "n": (None, None, 1), "c": "absent"}
    assert _modes(t) == expected
    if pk:
        assert _key_stats_of(t) == (1, 2, (0,))
        t.write(ROWS)
        t.compact(full=True)
        assert _modes(t) == expected
    t2 = _plain_table(tmp_path / "o", pk, **{"metadata.stats-keep-first-n-columns": "1",
                                              "fields.id.stats-mode": "counts"})
    t2.write(ROWS)  # the override of id counts: nothing else is kept
    assert _modes(t2) == {"id": (None, None, 0), "s": "absent", "n": "absent", "c": "absent"}


def _key_stats_of(t):
    [f] = [f for sp in t.plan() for f in sp.files]
    ty = t.schema.field("id").type.with_nullable(True)
    return (binary_row.deserialize_row(f.key_stats.min_values, [ty])[0],
            binary_row.deserialize_row(f.key_stats.max_values, [ty])[0], f.key_stats.null_counts)


def test_keep_first_n_columns_in_avro_files_counts_every_column(tmp_path):
    """createStatsFactoriesForAvro counts every column of the file in order -- _KEY_ columns, _SEQUENCE_NUMBER and
    _VALUE_KIND too -- so with N = 4 the key and the first value column keep statistics, with N = 3 only the key."""
    t = _plain_table(tmp_path, True, **{"file.format": "avro", "metadata.stats-keep-first-n-columns": "4"})
    t.write(ROWS)
    assert _modes(t) == {"id": (1, 2, 0), "s": "absent", "n": "absent", "c": "absent"}
    assert _key_stats_of(t) == (1, 2, (0,))
    t2 = _plain_table(tmp_path / "b", True, **{"file.format": "avro", "metadata.stats-keep-first-n-columns": "3"})
    t2.write(ROWS)
    assert _modes(t2) == {c: "absent" for c in ("id", "s", "n", "c")}
    assert _key_stats_of(t2) == (1, 2, (0,))
    t3 = _plain_table(tmp_path / "c", True, **{"file.format": "avro", "metadata.stats-keep-first-n-columns": "0"})
    t3.write(ROWS)
    assert _key_stats_of(t3) == (None, None, (None,))
    assert t3.read(filter=[("id", "=", 2)]).column("s").to_pylist() == ["abzzz"]


@pytest.mark.parametrize("key", ["fields.s.stats-mode", "metadata.stats-mode"])
def test_truncate_zero_is_refused_when_writing(tmp_path, key):
    """Paimon's TruncateSimpleColStatsCollector refuses a zero length ("Truncate length should larger than zero")
    when a writer is created: the table opens and reads, a write raises naming the option and writes nothing."""
    t = _table(tmp_path, False)
    t.write(ROWS)
    t.alter().set_option(key, "truncate(0)").commit()
    assert t.read().num_rows == 2
    with pytest.raises(InvalidOption, match=f"'{key}'.*larger than zero"):
        t.write(ROWS)
    assert t.read().num_rows == 2


PER_LEVEL = {"metadata.stats-mode.per.level": "0:none, 5:counts", "fields.c.stats-mode": "full"}


def _files_by_level(t) -> dict:
    return {f.level: f for sp in t.plan() for f in sp.files}


def test_stats_mode_per_level_picks_the_mode_of_each_files_level(tmp_path):
    """Paimon's KeyValueFileWriterFactory: metadata.stats-mode.per.level replaces metadata.stats-mode for the files
    written at a listed level (level 0: writes; the top level 5: a full compaction's output), other levels keep
    metadata.stats-mode; fields.<f>.stats-mode still wins, and the _KEY_ columns keep truncate(128)."""
    t = _table(tmp_path, True, **PER_LEVEL)
    t.write(ROWS.slice(0, 1))
    [f0] = _files_by_level(t).values()
    assert f0.level == 0 and _file_stats(t, f0) == {"s": ("ab", "ac", 0), "c": (7, 7, 0)}
    assert f0.key_stats.null_counts == (0,)  # key statistics are still collected
    t.write(ROWS.slice(1, 1))
    t.compact(full=True)
    [top] = _files_by_level(t).values()
    assert top.level == 5
    assert _file_stats(t, top) == {"id": (None, None, 0), "s": ("ab", "ac", 0), "c": (7, 7, 1)}
    # the statistics still prune right: no level-0 bounds, so only the compacted file's ranges decide
    assert t.read(filter=[("c", "=", 7)]).column("id").to_pylist() == [1]
    assert t.plan(filter=[("c", ">", 7)]) == []


def test_stats_mode_per_level_applies_to_compaction_outputs_below_the_top(tmp_path):
    """A level the option does not list takes metadata.stats-mode (full here)."""
    t = _table(tmp_path, True, **{"metadata.stats-mode.per.level": "0:none", "num-levels": "3"})
    t.write(ROWS.slice(0, 1))
    t.write(ROWS.slice(1, 1))
    t.compact(full=True)  # two runs: rewritten (a lone level-0 file would be upgraded, keeping its statistics)
    [top] = _files_by_level(t).values()
    assert top.level == 2 and _file_stats(t, top) == {"id": (1, 2, 0), "s": ("ab", "ac", 0),
                                                       "c": (None, None, 1)}


def test_stats_mode_per_level_is_ignored_by_append_tables(tmp_path):
    """Paimon's append writers take metadata.stats-mode only (StatsCollectorFactories.statsCollectors)."""
    t = _table(tmp_path, False, **{"metadata.stats-mode.per.level": "0:none"})
    t.write(ROWS)
    assert _stats(t) == {"id": (1, 2, 0), "s": ("ab", "ac", 0), "c": (None, None, 1)}


def _changelog_files(t) -> list:
    snap = t.snapshot(t.latest_snapshot_id())
    return [e.file for m in t.manifests.manifest_list(snap.changelog_manifest_list)
            for e in t.manifests.manifest(m.file_name)]


@pytest.mark.parametrize("changelog_mode", [None, "full"])
def test_changelog_files_take_their_levels_mode_unless_changelog_file_stats_mode(tmp_path, changelog_mode):
    """Changelog files: changelog-file.stats-mode when set, else the per-level mode of the level the changelog is
    written for (level 0 for changelog-producer=input), as Paimon's key2Stats in KeyValueFileWriterFactory."""
    extra = {} if changelog_mode is None else {"changelog-file.stats-mode": changelog_mode}
    t = _table(tmp_path, True, **{"changelog-producer": "input", "metadata.stats-mode.per.level": "0:none",
                                  "fields.c.stats-mode": "none", **extra})
    t.write(ROWS)
    [log] = _changelog_files(t)
    want = {"s": ("ab", "ac", 0)} if changelog_mode is None else {"id": (1, 2, 0), "s": ("ab", "ac", 0)}
    assert _file_stats(t, log) == want


@pytest.mark.parametrize("value", ["0:bogus", "x:none", "0none", "0:truncate"])
def test_a_bad_stats_mode_per_level_is_refused(tmp_path, value):
    with pytest.raises(InvalidOption, match="'metadata.stats-mode.per.level'"):
        _table(tmp_path, True, **{"metadata.stats-mode.per.level": value})


def test_a_zero_truncate_length_per_level_is_refused_when_writing(tmp_path):
    """As truncate(0) in metadata.stats-mode: the table opens, a write of that level raises naming the option
    (Paimon's TruncateSimpleColStatsCollector refuses a zero length when the level's writer starts), nothing is
    committed."""
    t = _table(tmp_path, True, **{"metadata.stats-mode.per.level": "0:truncate(0)"})
    with pytest.raises(InvalidOption, match="'metadata.stats-mode.per.level'"):
        t.write(ROWS)
    assert t.latest_snapshot_id() is None
