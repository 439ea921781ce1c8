"""Schema merging on write (Table.write(merge_schema=True, type_widening=True)) across engines: pypaimon reads
what lakemerge merged, old files and new, writes under the merged schema, and lakemerge reads that back."""
from __future__ import annotations

import pyarrow as pa
import pytest

from engine import Catalog
from tests.interop.pypaimon_util import pp_get_table, pp_read, pp_write

pytestmark = pytest.mark.interop


def _both(wh: str, name: str) -> tuple[list, list]:
    mine = sorted(Catalog(wh).get_table(name).read().to_pylist(), key=lambda r: r["k"])
    return mine, pp_read(pp_get_table(wh, name), sort_by=["k"]).to_pylist()


def test_array_element_and_map_value_types_widen(warehouse):
    """Paimon's SchemaMergingUtils.merge widens an ARRAY's element and a MAP's value like a column (INT -> BIGINT,
    FLOAT -> DOUBLE, also an ARRAY nested in a MAP's value); old files read through the widening cast in both
    engines, pypaimon writes under the merged schema, and a full compaction keeps every row."""
    cat = Catalog(warehouse)
    cat.create_database("db")
    old = pa.schema([pa.field("k", pa.int64(), False), ("a", pa.list_(pa.int32())),
                     ("m", pa.map_(pa.string(), pa.float32())), ("am", pa.map_(pa.string(), pa.list_(pa.int32())))])
    t = cat.create_table("db.t", old, primary_key=["k"], options={"bucket": "1"})
    t.write(pa.Table.from_pylist([{"k": 1, "a": [1, None], "m": [("x", 1.5)], "am": [("q", [1])]}], schema=old))
    new = pa.schema([pa.field("k", pa.int64(), False), ("a", pa.list_(pa.int64())),
                     ("m", pa.map_(pa.string(), pa.float64())), ("am", pa.map_(pa.string(), pa.list_(pa.int64())))])
    t.write(pa.Table.from_pylist([{"k": 2, "a": [2**40], "m": [("y", 1e300)], "am": [("r", [2**41])]}], schema=new),
            merge_schema=True, type_widening=True)
    merged = cat.get_table("db.t").schema
    assert (merged.field("a").type.element.root, merged.field("m").type.value.root,
            merged.field("am").type.value.element.root) == ("BIGINT", "DOUBLE", "BIGINT")
    assert [f.id for f in merged.fields] == [0, 1, 2, 3]
    expected = [{"k": 1, "a": [1, None], "m": [("x", 1.5)], "am": [("q", [1])]},
                {"k": 2, "a": [2**40], "m": [("y", 1e300)], "am": [("r", [2**41])]}]
    assert _both(warehouse, "db.t") == (expected, expected)
    pp_write(pp_get_table(warehouse, "db.t"),
             pa.Table.from_pylist([{"k": 3, "a": [3], "m": [("z", 2.5)], "am": [("s", [-(2**40)])]}], schema=new))
    expected.append({"k": 3, "a": [3], "m": [("z", 2.5)], "am": [("s", [-(2**40)])]})
    assert _both(warehouse, "db.t") == (expected, expected)
    cat.get_table("db.t").compact(full=True)
    assert _both(warehouse, "db.t") == (expected, expected)
