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
    [f] = [f for sp in t.plan() for f in sp.files]
    types = t.schema.types_of(list(t.schema.field_names))
    stat_types = [ty.with_nullable(True) for ty in types]
    lo = binary_row.deserialize_row(f.value_stats.min_values, stat_types)
    hi = binary_row.deserialize_row(f.value_stats.max_values, stat_types)
    return {n: (lo[i], hi[i], f.value_stats.null_counts[i]) for i, n in enumerate(t.schema.field_names)}


@pytest.mark.parametrize("pk", [True, False], ids=["pk", "append"])
def test_each_column_gets_its_own_mode(tmp_path, pk):
    t = _table(tmp_path, pk)
    t.write(ROWS)
    assert _stats(t) == {"id": (1, 2, 0), "s": ("ab", "ac", 0), "n": (None, None, None), "c": (None, None, 1)}


def test_compaction_output_keeps_the_modes(tmp_path):
    t = _table(tmp_path, True)
    t.write(ROWS.slice(0, 1))
    t.write(ROWS.slice(1, 1))
    t.compact(full=True)
    assert _stats(t) == {"id": (1, 2, 0), "s": ("ab", "ac", 0), "n": (None, None, None), "c": (None, None, 1)}


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
