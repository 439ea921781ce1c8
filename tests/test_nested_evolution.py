"""Old files read after a nested schema change (as Java's ALTER TABLE ... r.y writes it): the fields of ROWs are
matched by field id at every depth, like Java's SchemaEvolutionUtil, not by name."""
from __future__ import annotations

import json
import os

import pyarrow as pa
import pytest

INNER = pa.struct([("x", pa.int32()), ("y", pa.string()), ("gone", pa.int32())])
SCHEMA = pa.schema([("k", pa.int32()), ("r", INNER), ("arr", pa.list_(INNER)), ("m", pa.map_(pa.string(), INNER))])


def _evolve_inner(row_type: dict, highest: int) -> dict:
    """Java's nested changes on one ROW<x, y, gone>: y renamed to w, x widened to BIGINT, gone dropped, z added."""
    x, y, _gone = row_type["fields"]
    return dict(row_type, fields=[dict(x, type="BIGINT"), dict(y, name="w"),
                                  {"id": highest, "name": "z", "type": "STRING"}])


@pytest.mark.parametrize("primary_key", [["k"], []])
def test_renamed_nested_fields_keep_their_values(catalog, warehouse, primary_key):
    options = {"bucket": "1"} if primary_key else {"bucket": "-1"}
    t = catalog.create_table("db.t", SCHEMA, primary_key=primary_key, options=options)
    inner = {"x": 1, "y": "a", "gone": 9}
    t.write(pa.Table.from_pylist([{"k": 1, "r": inner, "arr": [inner, None], "m": [("q", inner)]},
                                  {"k": 2, "r": None, "arr": None, "m": None}], schema=SCHEMA))

    schema_dir = os.path.join(warehouse, "db.db", "t", "schema")
    with open(os.path.join(schema_dir, "schema-0")) as f:
        doc = json.load(f)
    highest = doc["highestFieldId"]
    r, arr, m = doc["fields"][1:]
    r["type"] = _evolve_inner(r["type"], highest + 1)
    arr["type"]["element"] = _evolve_inner(arr["type"]["element"], highest + 2)
    m["type"]["value"] = _evolve_inner(m["type"]["value"], highest + 3)
    doc.update(id=1, highestFieldId=highest + 3)
    with open(os.path.join(schema_dir, "schema-1"), "w") as f:
        json.dump(doc, f)

    t = catalog.get_table("db.t")
    evolved = {"x": 1, "w": "a", "z": None}
    assert sorted(t.read().to_pylist(), key=lambda row: row["k"]) == [
        {"k": 1, "r": evolved, "arr": [evolved, None], "m": [("q", evolved)]},
        {"k": 2, "r": None, "arr": None, "m": None}]


@pytest.mark.parametrize("kind", ["array", "map", "row"])
def test_evolve_nested_takes_sliced_arrays(kind):
    """engine.types.evolve_nested on a slice of an Arrow array (a non-zero offset, nulls in the slice), as a
    table slice hands it: the slice's rows, evolved (Arrow refuses a validity mask over offsets that do not start
    at 0, so those must be rebased)."""
    from engine.types import DataType, evolve_nested
    old, new = pa.struct([("a", pa.int32())]), pa.struct([("a", pa.int32()), ("b", pa.string())])
    src_type, dst_type, values = {
        "array": (pa.list_(old), pa.list_(new), [[{"a": 1}], None, [{"a": 2}, None], [{"a": 3}], None]),
        "map": (pa.map_(pa.string(), old), pa.map_(pa.string(), new),
                [[("k", {"a": 1})], None, [("j", {"a": 2}), ("l", None)], [("n", {"a": 3})], None]),
        "row": (pa.struct([("l", pa.list_(old))]), pa.struct([("l", pa.list_(new))]),
                [{"l": [{"a": 1}]}, None, {"l": [{"a": 2}, None]}, {"l": None}, None]),
    }[kind]
    src, dst = DataType.from_arrow(src_type, True), DataType.from_arrow(dst_type, True)

    def widened(v):  # the model: every old ROW gains a null 'b'
        if isinstance(v, dict):
            return {k: widened(x) for k, x in v.items()} | ({"b": None} if set(v) == {"a"} else {})
        if isinstance(v, list):
            return [widened(x) for x in v]
        if isinstance(v, tuple):
            return tuple(widened(x) for x in v)
        return v
    arr = pa.array(values, src_type)
    for start, length in ((0, 5), (1, 3), (2, 2), (3, 2), (4, 1), (5, 0)):
        got = evolve_nested(arr.slice(start, length), src, dst)
        assert got.type == dst_type and got.to_pylist() == widened(values[start:start + length])
    chunked = pa.chunked_array([arr.slice(0, 2), arr.slice(2, 3)])
    assert evolve_nested(chunked, src, dst).to_pylist() == widened(values)
