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
