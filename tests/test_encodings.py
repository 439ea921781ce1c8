"""Per-file Parquet encodings (engine/write/encodings.py): chosen from the data, standard, and lossless."""
from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.parquet as pq

from engine.write.encodings import parquet_encodings


def _encodings(t: pa.Table, **kw) -> dict[str, set[str]]:
    sink = io.BytesIO()
    pq.write_table(t, sink, **parquet_encodings(t, **kw))
    pf = pq.ParquetFile(pa.BufferReader(sink.getvalue()))
    assert pf.read().equals(t)  # lossless whatever was chosen
    rg = pf.metadata.row_group(0)
    return {rg.column(i).path_in_schema: set(rg.column(i).encodings) for i in range(rg.num_columns)}


def test_sequence_and_leading_integer_key_are_delta_encoded_and_values_follow_their_cardinality():
    n = 10_000
    t = pa.table({"_KEY_k": pa.array(range(n), pa.int64()), "_SEQUENCE_NUMBER": pa.array(range(n, 2 * n), pa.int64()),
                  "_VALUE_KIND": pa.array([0] * n, pa.int8()), "k": pa.array(range(n), pa.int64()),
                  "status": pa.array(["open", "closed"] * (n // 2)), "id": pa.array([f"{i:08d}" for i in range(n)])})
    enc = _encodings(t)
    for col in ("_KEY_k", "_SEQUENCE_NUMBER", "k"):
        assert "DELTA_BINARY_PACKED" in enc[col], col
    assert "RLE_DICTIONARY" in enc["status"]  # two distinct values: a dictionary pays off
    assert "RLE_DICTIONARY" not in enc["id"] and "PLAIN" in enc["id"]  # unique values: plain
    assert "RLE_DICTIONARY" in enc["_VALUE_KIND"]
    assert not any("RLE_DICTIONARY" in e for e in _encodings(t, dictionary=False).values())


def test_a_string_key_or_a_table_without_key_columns_gets_no_delta_encoding():
    t = pa.table({"_KEY_s": ["a", "b", "c"], "_SEQUENCE_NUMBER": pa.array([1, 2, 3], pa.int64()), "s": ["a", "b", "c"]})
    assert parquet_encodings(t)["column_encoding"] == {"_SEQUENCE_NUMBER": "DELTA_BINARY_PACKED"}
    append = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "v": ["x", "x", "x"]})
    assert parquet_encodings(append) == {"use_dictionary": ["v"], "column_encoding": {}}


def test_nested_columns_keep_dictionaries_on_their_leaves():
    t = pa.table({"m": pa.array([{"a": 1}, None], pa.map_(pa.string(), pa.int32())),
                  "l": pa.array([[1, 2], None], pa.list_(pa.int64())),
                  "st": pa.array([{"x": 1, "y": ["p"]}, None], pa.struct([("x", pa.int32()), ("y", pa.list_(pa.string()))]))})
    assert parquet_encodings(t)["use_dictionary"] == ["m.key_value.key", "m.key_value.value", "l.list.element",
                                                       "st.x", "st.y.list.element"]
    _encodings(t)
