"""Decoding an Avro data file into Arrow with the types its writer schema declares (not inferred from values).

Contract: ``read_avro(data, choose_columns)`` returns the file's records as a ``pa.Table`` whose column types follow
the Avro schema as Paimon writes it (AvroSchemaConverter): ``["null", t]`` unions are nullable ``t``; int, long,
float, double, boolean, string, bytes; logical date, time-millis, timestamp-millis/micros, local-timestamp-
millis/micros, decimal; records as structs; arrays as lists; Avro maps and arrays of key/value records with logical
type ``map`` (Paimon's maps with non-string keys) as Arrow maps. ``choose_columns(names in file)`` picks the columns
(None: all, in file order). Raises ValueError for a schema it cannot map (the caller reports CorruptFile); fastavro's
own errors for damaged data propagate.
"""
from __future__ import annotations

import io

import pyarrow as pa

_PRIMITIVES = {"boolean": pa.bool_(), "int": pa.int32(), "long": pa.int64(), "float": pa.float32(),
               "double": pa.float64(), "string": pa.string(), "bytes": pa.binary(), "null": pa.null()}
_LOGICAL = {"date": pa.date32(), "time-millis": pa.time32("ms"), "time-micros": pa.time64("us"),
            "timestamp-millis": pa.timestamp("ms"), "timestamp-micros": pa.timestamp("us"),
            "local-timestamp-millis": pa.timestamp("ms"), "local-timestamp-micros": pa.timestamp("us")}


def read_avro(data: bytes, choose_columns=None) -> pa.Table:
    """The records of Avro file ``data`` as a typed table (see the module docstring)."""
    import fastavro
    reader = fastavro.reader(io.BytesIO(data))
    return _as_table(reader.writer_schema["fields"], list(reader), choose_columns)


def read_avro_blocks_before_failure(data: bytes, choose_columns=None) -> pa.Table | None:
    """The records of the Avro blocks of ``data`` that decode, up to the first block that does not (Paimon's Avro
    reader returns one block per batch), as ``read_avro`` types them; None when the header or the first block
    fails, or when no block fails."""
    import fastavro
    try:
        blocks = fastavro.block_reader(io.BytesIO(data))
        fields = blocks.writer_schema["fields"]
    except Exception:  # noqa: BLE001 - a damaged header: nothing is readable
        return None
    records: list = []
    try:
        for block in blocks:
            records.extend(list(block))  # a block that fails part-way adds none of its records
    except Exception:  # noqa: BLE001 - fastavro reports damage as IndexError, EOFError, codec errors...
        return _as_table(fields, records, choose_columns) if records else None
    return None


def _as_table(fields, records: list, choose_columns) -> pa.Table:
    names = [f["name"] for f in fields]
    chosen = None if choose_columns is None else choose_columns(set(names))
    wanted = names if chosen is None else list(chosen)
    types = {f["name"]: arrow_type(f["type"]) for f in fields if f["name"] in wanted}
    columns = [pa.array([r[name] for r in records], type=types[name][0]) for name in wanted]
    return pa.Table.from_arrays(columns, schema=pa.schema([pa.field(n, types[n][0], types[n][1]) for n in wanted]))


def arrow_type(avro) -> tuple[pa.DataType, bool]:
    """(Arrow type, nullable) of an Avro type as fastavro's parsed writer schema spells it. Raises ValueError for
    a union other than ``["null", t]`` or an unknown type."""
    if isinstance(avro, list):
        others = [t for t in avro if t != "null"]
        if len(others) != 1:
            raise ValueError(f"Avro union {avro} is not a nullable type")
        return arrow_type(others[0])[0], True
    if isinstance(avro, str):
        if avro not in _PRIMITIVES:
            raise ValueError(f"unknown Avro type {avro!r}")
        return _PRIMITIVES[avro], False
    kind, logical = avro.get("type"), avro.get("logicalType")
    if logical == "decimal":
        return pa.decimal128(avro["precision"], avro.get("scale", 0)), False
    if logical in _LOGICAL:
        return _LOGICAL[logical], False
    if kind == "record":
        return pa.struct([pa.field(f["name"], *arrow_type(f["type"])) for f in avro["fields"]]), False
    if kind == "array":
        item, item_nullable = arrow_type(avro["items"])
        if logical == "map" and pa.types.is_struct(item) and [f.name for f in item] == ["key", "value"]:
            return pa.map_(pa.field("key", item.field("key").type, False), item.field("value")), False
        return pa.list_(pa.field("item", item, item_nullable)), False
    if kind == "map":
        value, value_nullable = arrow_type(avro["values"])
        return pa.map_(pa.field("key", pa.string(), False), pa.field("value", value, value_nullable)), False
    if kind == "enum":
        return pa.string(), False
    if kind == "fixed":
        return pa.binary(avro["size"]), False
    if isinstance(kind, (str, list, dict)):
        return arrow_type(kind)
    raise ValueError(f"unknown Avro type {avro!r}")
