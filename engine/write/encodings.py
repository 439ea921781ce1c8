"""Parquet column encodings chosen per file from the rows being written.

Contract: ``parquet_encodings(rows, dictionary=True)`` returns the ``use_dictionary`` and ``column_encoding``
keyword arguments for ``pq.write_table`` / ``pq.ParquetWriter``. Only standard Parquet encodings are used, which
Paimon's Java reader, pyarrow and arrow-rs all read.

- ``_SEQUENCE_NUMBER`` and the leading integer key column (``_KEY_<k>`` and its value copy ``<k>``, sorted in a
  data file): DELTA_BINARY_PACKED. Sorted keys and sequence numbers of one write span a narrow range, so a value
  takes a few bits instead of eight bytes, and decoding is cheaper than decompressing plain pages.
- every other primitive column: dictionary when a sample of its first rows repeats values (at most half of the
  sample distinct), plain otherwise. A dictionary over unique values is built only to be abandoned at its size limit,
  which roughly doubles the write cost and slows the read.
- nested columns: dictionary (Parquet's default); ``dictionary=False`` writes every column without one.
"""
from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from engine.schema import KEY_FIELD_PREFIX, SEQUENCE_NUMBER

SAMPLE_ROWS = 4096


def parquet_encodings(rows: pa.Table, *, dictionary: bool = True) -> dict:
    """``{"use_dictionary": [leaf column paths], "column_encoding": {column: encoding}}`` for ``rows``."""
    delta = _delta_columns(rows)
    use_dictionary: list[str] = []
    for field in rows.schema:
        if field.name in delta or not dictionary:
            continue
        if _is_nested(field.type):
            use_dictionary.extend(_leaf_paths(field.name, field.type))
        elif _repeats(rows.column(field.name)):
            use_dictionary.append(field.name)
    return {"use_dictionary": use_dictionary, "column_encoding": {c: "DELTA_BINARY_PACKED" for c in delta}}


def _delta_columns(rows: pa.Table) -> list[str]:
    names = rows.column_names
    candidates = [SEQUENCE_NUMBER]
    if names and names[0].startswith(KEY_FIELD_PREFIX):
        candidates += [names[0], names[0][len(KEY_FIELD_PREFIX):]]
    return [c for c in candidates
            if c in names and rows.schema.field(c).type in (pa.int32(), pa.int64())]


def _repeats(column: pa.ChunkedArray) -> bool:
    """True if at most half of the non-null values among the first SAMPLE_ROWS rows are distinct."""
    sample = column.slice(0, SAMPLE_ROWS)
    valid = len(sample) - sample.null_count
    if valid == 0 or pa.types.is_boolean(column.type) or pa.types.is_dictionary(column.type):
        return True
    return pc.count_distinct(sample, mode="only_valid").as_py() * 2 <= valid


def _is_nested(t: pa.DataType) -> bool:
    return pa.types.is_struct(t) or pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_map(t) \
        or pa.types.is_fixed_size_list(t)


def _leaf_paths(path: str, t: pa.DataType) -> list[str]:
    """Parquet leaf column paths of an Arrow field, as pyarrow names them (compliant nested types)."""
    if pa.types.is_struct(t):
        return [p for i in range(t.num_fields) for p in _leaf_paths(f"{path}.{t.field(i).name}", t.field(i).type)]
    if pa.types.is_map(t):
        return _leaf_paths(f"{path}.key_value.key", t.key_type) + _leaf_paths(f"{path}.key_value.value", t.item_type)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return _leaf_paths(f"{path}.list.element", t.value_type)
    return [path]
