"""Paimon data types: the JSON form of schema files and the mapping to and from Arrow.

``DataType.root`` is one of ROOTS. JSON strings follow Java's ``asSQLString`` (``DECIMAL(10, 2) NOT NULL``,
``TIMESTAMP(6) WITH LOCAL TIME ZONE``); the pypaimon spellings (``TIMESTAMP_LTZ(6)``, ``INTEGER``) are read too.
The Arrow mapping is pypaimon's, so both libraries see the same Arrow schema for a table.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import InvalidSchema

MAX_LEN = 2147483647

ROOTS = (
    "BOOLEAN", "TINYINT", "SMALLINT", "INT", "BIGINT", "FLOAT", "DOUBLE", "DECIMAL",
    "CHAR", "VARCHAR", "BINARY", "VARBINARY", "DATE", "TIME", "TIMESTAMP", "TIMESTAMP_LTZ",
    "ARRAY", "MULTISET", "MAP", "ROW",
)
INTEGER_ROOTS = ("TINYINT", "SMALLINT", "INT", "BIGINT")
STRING_ROOTS = ("CHAR", "VARCHAR")
BINARY_ROOTS = ("BINARY", "VARBINARY")
NESTED_ROOTS = ("ARRAY", "MULTISET", "MAP", "ROW")


@dataclass(frozen=True)
class DataField:
    """One column of a schema (or of a ROW type): a field id that never changes, a name, a type and an optional
    description, as in Paimon's schema JSON."""
    id: int
    name: str
    type: "DataType"
    description: str | None = None

    def to_json(self) -> dict:
        """The field as Paimon's schema JSON object (``description`` only when set)."""
        out: dict[str, Any] = {"id": self.id, "name": self.name, "type": self.type.to_json()}
        if self.description is not None:
            out["description"] = self.description
        return out

    @staticmethod
    def from_json(obj: dict) -> "DataField":
        """Parse a schema JSON field object. Raises KeyError/ValueError for a malformed object, InvalidSchema for an
        unknown type."""
        return DataField(int(obj["id"]), obj["name"], DataType.from_json(obj["type"]), obj.get("description"))


@dataclass(frozen=True)
class DataType:
    """A Paimon data type: ``root`` (e.g. BIGINT, VARCHAR, DECIMAL, TIMESTAMP_LTZ, ARRAY, MAP, ROW), nullability and
    the parameters its root uses (unused ones are None). Immutable; equal types compare equal."""
    root: str
    nullable: bool = True
    precision: int | None = None  # DECIMAL, TIME, TIMESTAMP*
    scale: int | None = None  # DECIMAL
    length: int | None = None  # CHAR, VARCHAR, BINARY, VARBINARY
    element: "DataType | None" = None  # ARRAY, MULTISET
    key: "DataType | None" = None  # MAP
    value: "DataType | None" = None  # MAP
    fields: tuple[DataField, ...] = field(default=())  # ROW

    def __post_init__(self):
        """Paimon's parameter ranges (Java's type constructors refuse anything else): DECIMAL precision 1..38 and
        scale 0..precision, TIME/TIMESTAMP precision 0..9, CHAR/VARCHAR/BINARY/VARBINARY length >= 1. Raises
        InvalidSchema."""
        r, p = self.root, self.precision
        if r == "DECIMAL" and p is not None and self.scale is not None and \
                not (1 <= p <= 38 and 0 <= self.scale <= p):
            raise InvalidSchema(f"DECIMAL({p}, {self.scale}): Paimon needs precision 1..38 and scale 0..precision")
        if r in ("TIME", "TIMESTAMP", "TIMESTAMP_LTZ") and p is not None and not 0 <= p <= 9:
            raise InvalidSchema(f"{r} precision {p} is outside Paimon's 0..9")
        if (r in STRING_ROOTS or r in BINARY_ROOTS) and self.length is not None and self.length < 1:
            raise InvalidSchema(f"{r}({self.length}): Paimon needs a length of at least 1")

    # --- classification -----------------------------------------------------------------------------
    @property
    def is_string(self) -> bool:
        """True for CHAR and VARCHAR (STRING)."""
        return self.root in STRING_ROOTS

    @property
    def is_binary(self) -> bool:
        """True for BINARY and VARBINARY (BYTES)."""
        return self.root in BINARY_ROOTS

    @property
    def is_nested(self) -> bool:
        """True for ARRAY, MULTISET, MAP and ROW."""
        return self.root in NESTED_ROOTS

    @property
    def is_compact_decimal(self) -> bool:
        """True for a DECIMAL of precision <= 18, which Paimon stores as a long in BinaryRow."""
        return self.root == "DECIMAL" and (self.precision or 10) <= 18

    @property
    def is_compact_timestamp(self) -> bool:
        """True for a TIMESTAMP(_LTZ) of precision <= 3, which Paimon stores as epoch milliseconds in BinaryRow."""
        return self.root in ("TIMESTAMP", "TIMESTAMP_LTZ") and (self.precision if self.precision is not None else 6) <= 3

    def with_nullable(self, nullable: bool) -> "DataType":
        """The same type with nullability ``nullable``."""
        return replace(self, nullable=nullable)

    # --- JSON ---------------------------------------------------------------------------------------
    def sql(self) -> str:
        """Java's ``asSQLString`` for atomic types (without the NOT NULL suffix)."""
        r = self.root
        if r == "DECIMAL":
            return f"DECIMAL({self.precision}, {self.scale})"
        if r == "VARCHAR":
            return "STRING" if self.length == MAX_LEN else f"VARCHAR({self.length})"
        if r == "VARBINARY":
            return "BYTES" if self.length == MAX_LEN else f"VARBINARY({self.length})"
        if r in ("CHAR", "BINARY"):
            return f"{r}({self.length})"
        if r == "TIME":
            return f"TIME({self.precision})"
        if r == "TIMESTAMP":
            return f"TIMESTAMP({self.precision})"
        if r == "TIMESTAMP_LTZ":
            return f"TIMESTAMP({self.precision}) WITH LOCAL TIME ZONE"
        return r

    def to_json(self) -> Any:
        """The type as Paimon's schema JSON: a string such as ``DECIMAL(10, 2) NOT NULL`` for atomic types, an
        object for nested ones; ``from_json`` reads it back unchanged."""
        suffix = "" if self.nullable else " NOT NULL"
        if self.root in ("ARRAY", "MULTISET"):
            return {"type": self.root + suffix, "element": self.element.to_json()}
        if self.root == "MAP":
            return {"type": "MAP" + suffix, "key": self.key.to_json(), "value": self.value.to_json()}
        if self.root == "ROW":
            return {"type": "ROW" + suffix, "fields": [f.to_json() for f in self.fields]}
        return self.sql() + suffix

    @staticmethod
    def from_json(obj: Any) -> "DataType":
        """Parse a type from Paimon's schema JSON (a string or a nested-type object). Raises InvalidSchema for a
        type it does not know."""
        if isinstance(obj, dict):
            name, nullable = _strip_not_null(obj["type"])
            name = name.upper()
            if name in ("ARRAY", "MULTISET"):
                return DataType(name, nullable, element=DataType.from_json(obj["element"]))
            if name == "MAP":
                return DataType("MAP", nullable, key=DataType.from_json(obj["key"]),
                                value=DataType.from_json(obj["value"]))
            if name == "ROW":
                return DataType("ROW", nullable, fields=tuple(DataField.from_json(f) for f in obj["fields"]))
            raise InvalidSchema(f"unsupported nested type {obj['type']!r}")
        return parse_atomic(obj)

    # --- Arrow --------------------------------------------------------------------------------------
    def to_arrow(self) -> pa.DataType:
        """The Arrow type lakemerge reads and writes this type as (STRING -> string, TIMESTAMP(p) -> timestamp of
        the unit fitting p, TIMESTAMP_LTZ -> UTC timestamp, TIME -> time32 ms, ...). Nullability lives on the
        Arrow field, not here. Raises InvalidSchema for a type without a mapping."""
        r = self.root
        simple = {
            "BOOLEAN": pa.bool_(), "TINYINT": pa.int8(), "SMALLINT": pa.int16(), "INT": pa.int32(),
            "BIGINT": pa.int64(), "FLOAT": pa.float32(), "DOUBLE": pa.float64(), "DATE": pa.date32(),
            "TIME": pa.time32("ms"),
        }
        if r in simple:
            return simple[r]
        if r in STRING_ROOTS:
            return pa.string()
        if r in BINARY_ROOTS:
            return pa.binary()
        if r == "DECIMAL":
            return pa.decimal128(self.precision, self.scale)
        if r in ("TIMESTAMP", "TIMESTAMP_LTZ"):
            tz = "UTC" if r == "TIMESTAMP_LTZ" else None
            return pa.timestamp(timestamp_unit(self.precision), tz=tz)
        if r in ("ARRAY", "MULTISET"):
            return pa.list_(pa.field("item", self.element.to_arrow(), nullable=self.element.nullable))
        if r == "MAP":
            return pa.map_(pa.field("key", self.key.to_arrow(), nullable=False),
                           pa.field("value", self.value.to_arrow(), nullable=self.value.nullable))
        if r == "ROW":
            return pa.struct([pa.field(f.name, f.type.to_arrow(), nullable=f.type.nullable) for f in self.fields])
        raise InvalidSchema(f"type {self.sql()} has no Arrow mapping")

    @staticmethod
    def from_arrow(t: pa.DataType, nullable: bool = True) -> "DataType":
        """The Paimon type for Arrow type ``t`` (strings become STRING, binaries BYTES, fixed-size binary BINARY(n),
        a zoned timestamp TIMESTAMP_LTZ). Raises InvalidSchema for Arrow types Paimon cannot store (e.g. decimals
        above precision 38, unions)."""
        if pa.types.is_boolean(t):
            return DataType("BOOLEAN", nullable)
        for check, root in ((pa.types.is_int8, "TINYINT"), (pa.types.is_int16, "SMALLINT"),
                            (pa.types.is_int32, "INT"), (pa.types.is_int64, "BIGINT"),
                            (pa.types.is_float32, "FLOAT"), (pa.types.is_float64, "DOUBLE"),
                            (pa.types.is_date32, "DATE")):
            if check(t):
                return DataType(root, nullable)
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            return DataType("VARCHAR", nullable, length=MAX_LEN)
        if pa.types.is_fixed_size_binary(t):
            return DataType("BINARY", nullable, length=t.byte_width)
        if pa.types.is_binary(t) or pa.types.is_large_binary(t):
            return DataType("VARBINARY", nullable, length=MAX_LEN)
        if pa.types.is_decimal(t):
            if t.precision > 38:
                raise InvalidSchema(f"DECIMAL precision {t.precision} exceeds Paimon's maximum of 38")
            return DataType("DECIMAL", nullable, precision=t.precision, scale=t.scale)
        if pa.types.is_timestamp(t):
            precision = {"s": 0, "ms": 3, "us": 6, "ns": 9}[t.unit]
            return DataType("TIMESTAMP_LTZ" if t.tz else "TIMESTAMP", nullable, precision=precision)
        if pa.types.is_time(t):
            return DataType("TIME", nullable, precision=0)
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            return DataType("ARRAY", nullable, element=DataType.from_arrow(t.value_type, t.value_field.nullable))
        if pa.types.is_map(t):
            return DataType("MAP", nullable, key=DataType.from_arrow(t.key_type, False),
                            value=DataType.from_arrow(t.item_type, t.item_field.nullable))
        if pa.types.is_struct(t):
            fields = tuple(DataField(i, t.field(i).name, DataType.from_arrow(t.field(i).type, t.field(i).nullable))
                           for i in range(t.num_fields))
            return DataType("ROW", nullable, fields=fields)
        raise InvalidSchema(f"Arrow type {t} has no Paimon equivalent")


def assign_nested_field_ids(t: DataType, highest: int) -> tuple[DataType, int]:
    """``t`` with fresh ids for the fields of every ROW inside it, counting up from ``highest``, and the new
    highest id. Java's ReassignFieldId order: a field's own type is numbered before the field itself."""
    if t.root in ("ARRAY", "MULTISET"):
        element, highest = assign_nested_field_ids(t.element, highest)
        return replace(t, element=element), highest
    if t.root == "MAP":
        key, highest = assign_nested_field_ids(t.key, highest)
        value, highest = assign_nested_field_ids(t.value, highest)
        return replace(t, key=key, value=value), highest
    if t.root == "ROW":
        fields = []
        for f in t.fields:
            ftype, highest = assign_nested_field_ids(f.type, highest)
            highest += 1
            fields.append(replace(f, id=highest, type=ftype))
        return replace(t, fields=tuple(fields)), highest
    return t, highest


def timestamp_unit(precision: int | None) -> str:
    """The Arrow time unit holding a timestamp of ``precision`` digits exactly: 0 -> s, 1-3 -> ms, 4-6 -> us, 7-9 ->
    ns (default precision 6)."""
    p = 6 if precision is None else precision
    if p == 0:
        return "s"
    if p <= 3:
        return "ms"
    if p <= 6:
        return "us"
    return "ns"


def _strip_not_null(text: str) -> tuple[str, bool]:
    t = text.strip()
    if t.upper().endswith(" NOT NULL"):
        return t[: -len(" NOT NULL")].strip(), False
    if t.upper().endswith(" NULL"):
        return t[: -len(" NULL")].strip(), True
    return t, True


_ATOMIC = re.compile(r"^([A-Z_]+(?: [A-Z]+)*?)\s*(?:\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\))?(\s+WITH LOCAL TIME ZONE)?$")


def parse_atomic(text: str) -> DataType:
    """Parse an atomic type string such as ``DECIMAL(10, 2) NOT NULL``. Raises InvalidSchema."""
    body, nullable = _strip_not_null(text)
    m = _ATOMIC.match(body.upper())
    if not m:
        raise InvalidSchema(f"cannot parse Paimon type {text!r}")
    name, a, b, ltz = m.group(1), m.group(2), m.group(3), m.group(4)
    a = int(a) if a is not None else None
    b = int(b) if b is not None else None
    aliases = {"INTEGER": "INT", "BOOL": "BOOLEAN", "TIMESTAMP WITHOUT TIME ZONE": "TIMESTAMP"}
    name = aliases.get(name, name)
    if name in ("BOOLEAN", "TINYINT", "SMALLINT", "INT", "BIGINT", "FLOAT", "DOUBLE", "DATE"):
        return DataType(name, nullable)
    if name == "STRING":
        return DataType("VARCHAR", nullable, length=MAX_LEN)
    if name == "BYTES":
        return DataType("VARBINARY", nullable, length=MAX_LEN)
    if name in ("CHAR", "BINARY"):
        return DataType(name, nullable, length=a if a is not None else 1)
    if name in ("VARCHAR", "VARBINARY"):
        return DataType(name, nullable, length=a if a is not None else 1)
    if name in ("DECIMAL", "NUMERIC", "DEC"):
        return DataType("DECIMAL", nullable, precision=a if a is not None else 10, scale=b if b is not None else 0)
    if name == "TIME":
        return DataType("TIME", nullable, precision=a if a is not None else 0)
    if name == "TIMESTAMP":
        return DataType("TIMESTAMP_LTZ" if ltz else "TIMESTAMP", nullable, precision=a if a is not None else 6)
    if name in ("TIMESTAMP_LTZ", "TIMESTAMP WITH LOCAL TIME ZONE"):
        return DataType("TIMESTAMP_LTZ", nullable, precision=a if a is not None else 6)
    raise InvalidSchema(f"unsupported Paimon type {text!r}")



def rebased_offsets(arr: pa.Array) -> tuple[pa.Array, int, int]:
    """(offsets, start, length) of a list or map array ``arr``, possibly a slice: its offsets made to start at 0,
    over its children's ``slice(start, length)`` (``.values`` / ``.keys`` / ``.items`` ignore the slice, and Arrow
    takes no validity mask with offsets that do not start at 0)."""
    offsets = arr.offsets
    if len(offsets) == 0:
        return offsets, 0, 0
    start = offsets[0].as_py()
    return pc.subtract(offsets, pa.scalar(start, offsets.type)), start, offsets[-1].as_py() - start


def evolve_nested(arr, src: DataType, dst: DataType, fit_lengths: bool = True):
    """Arrow array (or chunked array) ``arr`` of a file's type ``src`` as the table's type ``dst``, matching the
    fields of ROWs by field id at every depth, as Java's SchemaEvolutionUtil does: a renamed nested field keeps
    its values, an added one is null, a dropped one goes away, a widened one is cast (with ``fit_lengths``,
    character and binary values as ``fit_length`` makes them)."""
    if isinstance(arr, pa.ChunkedArray):
        return pa.chunked_array([evolve_nested(c, src, dst, fit_lengths) for c in arr.chunks], type=dst.to_arrow())
    mask = arr.is_null() if arr.null_count else None
    if src.root == dst.root == "ROW":
        children = arr.flatten()
        by_id = {f.id: i for i, f in enumerate(src.fields)}
        arrays = [pa.nulls(len(arr), f.type.to_arrow()) if f.id not in by_id
                  else evolve_nested(children[by_id[f.id]], src.fields[by_id[f.id]].type, f.type, fit_lengths)
                  for f in dst.fields]
        return pa.StructArray.from_arrays(arrays, fields=list(dst.to_arrow()), mask=mask)
    if src.root == dst.root and src.root in ("ARRAY", "MULTISET"):
        offsets, start, length = rebased_offsets(arr)
        values = evolve_nested(arr.values.slice(start, length), src.element, dst.element, fit_lengths)
        return pa.ListArray.from_arrays(offsets, values, type=dst.to_arrow(), mask=mask)
    if src.root == dst.root == "MAP":
        offsets, start, length = rebased_offsets(arr)
        keys = evolve_nested(arr.keys.slice(start, length), src.key, dst.key, fit_lengths)
        items = evolve_nested(arr.items.slice(start, length), src.value, dst.value, fit_lengths)
        return pa.MapArray.from_arrays(offsets, keys, items, type=dst.to_arrow(), mask=mask)
    target = dst.to_arrow()
    arr = arr if arr.type.equals(target) else arr.cast(target)
    return fit_length(arr, src, dst) if fit_lengths else arr


def fit_length(arr, src: DataType, dst: DataType):
    """Values of a file's ``src`` type, already in ``dst``'s Arrow type, as Java's cast to the table's character or
    binary type ``dst`` makes them (BinaryStringUtils.toCharacterString / toBinaryString, applied by
    SchemaEvolutionUtil only when the types differ): values longer than ``dst``'s length are cut to it, shorter ones
    are padded to a CHAR's length with spaces and to a BINARY's with zero bytes. ``arr`` as is when the types are
    equal or ``dst`` is not CHAR, VARCHAR, BINARY or VARBINARY."""
    if dst.root not in ("CHAR", "VARCHAR", "BINARY", "VARBINARY") or \
            src.with_nullable(True) == dst.with_nullable(True):
        return arr
    n = dst.length
    if dst.root in ("CHAR", "VARCHAR"):
        arr = pc.utf8_slice_codeunits(arr, 0, n) if n < MAX_LEN else arr  # slices whole characters
        return pc.utf8_rpad(arr, width=n, padding=" ") if dst.root == "CHAR" else arr
    arr = pc.binary_slice(arr, 0, n) if n < MAX_LEN else arr
    if dst.root == "VARBINARY":
        return arr
    # Arrow has no binary padding: append n zero bytes, keep the first n (nulls stay null)
    zeros, empty = pa.scalar(b"\0" * n, arr.type), pa.scalar(b"", arr.type)
    return pc.binary_slice(pc.binary_join_element_wise(arr, zeros, empty), 0, n)
