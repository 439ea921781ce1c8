"""pypaimon reads files whose statistics lakemerge wrote under per-column fields.<f>.stats-mode (truncated string
bounds, absent and count-only columns, 128-character key bounds) and its filters return the right rows."""
from __future__ import annotations

import pyarrow as pa
import pytest

from engine import Catalog
from tests.interop.pypaimon_util import pp_get_table

pytestmark = pytest.mark.interop

SCHEMA = pa.schema([pa.field("k", pa.string(), False), ("s", pa.string()), ("n", pa.int64()), ("c", pa.int64())])
KEYS = ["a" * 200, "a" * 150 + "b"]


def _pp_filtered(wh, build):
    pt = pp_get_table(wh, "db.t")
    rb = pt.new_read_builder()
    rb = rb.with_filter(build(rb.new_predicate_builder()))
    return sorted(rb.new_read().to_arrow(rb.new_scan().plan().splits()).column("n").to_pylist(), key=str)


EXTRA = {"dense": {}, "not-dense": {"metadata.stats-dense-store": "false"},
         "first-3": {"metadata.stats-keep-first-n-columns": "3", "fields.c.stats-mode": "none"},
         "avro-first-4": {"file.format": "avro", "metadata.stats-keep-first-n-columns": "4"}}


@pytest.mark.parametrize("extra", list(EXTRA))
@pytest.mark.parametrize("pk", [True, False], ids=["pk", "append"])
def test_pypaimon_filters_over_truncated_and_absent_stats(tmp_path, pk, extra):
    """Also with statistics of every column (metadata.stats-dense-store=false) and only the first columns'
    (metadata.stats-keep-first-n-columns), in Parquet and Avro files."""
    wh = str(tmp_path / "wh")
    cat = Catalog(wh)
    cat.create_database("db")
    t = cat.create_table("db.t", SCHEMA, primary_key=["k"] if pk else None, options={
        "bucket": "1" if pk else "-1", "metadata.stats-mode": "full", "fields.s.stats-mode": "truncate(2)",
        "fields.n.stats-mode": "none", "fields.c.stats-mode": "counts", **EXTRA[extra]})
    t.write(pa.table({"k": KEYS, "s": ["abcdef", "abzzz"], "n": [5, None], "c": [7, None]}, schema=SCHEMA))
    assert _pp_filtered(wh, lambda b: b.equal("s", "abcdef")) == [5]
    assert _pp_filtered(wh, lambda b: b.greater_or_equal("s", "abzzz")) == [None]
    assert _pp_filtered(wh, lambda b: b.equal("n", 5)) == [5]
    assert _pp_filtered(wh, lambda b: b.is_null("c")) == [None]
    assert _pp_filtered(wh, lambda b: b.equal("k", KEYS[1])) == [None]
    assert _pp_filtered(wh, lambda b: b.greater_than("s", "b")) == []
    assert sorted(pp_get_table(wh, "db.t").new_read_builder().new_read().to_arrow(
        pp_get_table(wh, "db.t").new_read_builder().new_scan().plan().splits()).column("n").to_pylist(),
        key=str) == [5, None]


def test_pypaimon_filters_files_of_levels_with_their_own_stats_modes(tmp_path):
    """metadata.stats-mode.per.level: level-0 files without value statistics next to a compacted file with
    count-only ones and one with full ones (fields.n.stats-mode); pypaimon's filters keep every matching row."""
    wh = str(tmp_path / "wh")
    cat = Catalog(wh)
    cat.create_database("db")
    t = cat.create_table("db.t", SCHEMA, primary_key=["k"], options={
        "bucket": "1", "metadata.stats-mode.per.level": "0:none,5:counts", "fields.n.stats-mode": "full"})
    first = pa.table({"k": KEYS, "s": ["abcdef", "abzzz"], "n": [5, None], "c": [7, None]}, schema=SCHEMA)
    t.write(first.slice(0, 1))
    t.write(first.slice(1, 1))
    t.compact(full=True)  # two runs merge into one level-5 file with count-only statistics (n: full)
    t.write(pa.table({"k": ["b", "c"], "s": ["x", None], "n": [6, 8], "c": [None, 9]}, schema=SCHEMA))
    files = {f.level: f for sp in t.plan() for f in sp.files}
    assert sorted(files) == [0, 5]
    assert files[0].value_stats_cols == ("n",) and files[5].value_stats_cols is None  # every column
    assert _pp_filtered(wh, lambda b: b.equal("s", "abcdef")) == [5]
    assert _pp_filtered(wh, lambda b: b.equal("s", "x")) == [6]
    assert _pp_filtered(wh, lambda b: b.greater_than("n", 5)) == [6, 8]
    assert _pp_filtered(wh, lambda b: b.equal("n", 5)) == [5]
    assert _pp_filtered(wh, lambda b: b.is_null("c")) == [6, None]
    assert _pp_filtered(wh, lambda b: b.equal("k", KEYS[1])) == [None]
