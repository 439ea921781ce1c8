"""Validate and conform user input to a table schema before anything touches storage.

Contract: ``conform`` either returns an Arrow table with exactly the table's columns, in schema order and with the
schema's Arrow types, plus an int8 NumPy array of row kinds; or raises an ``InvalidInput`` subclass naming the table
and column. It never writes anything.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import InvalidInput, InvalidRowKind, NullPrimaryKey, SchemaMismatch
from engine.schema import TableSchema

ROW_KIND_CODES = {"+I": 0, "-U": 1, "+U": 2, "-D": 3}
INSERT, UPDATE_BEFORE, UPDATE_AFTER, DELETE = 0, 1, 2, 3


def to_arrow_table(data, table: str) -> pa.Table:
    """Return ``data`` (Arrow table/batch, pandas or polars frame, or dict of columns) as a pyarrow Table.
    Raises InvalidInput for any other type."""
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    if type(data).__module__.startswith("pandas"):
        return pa.Table.from_pandas(data, preserve_index=False)
    if type(data).__module__.startswith("polars"):
        return data.to_arrow()
    if isinstance(data, dict):
        return pa.table(data)
    raise InvalidInput(f"expected a pyarrow Table/RecordBatch or pandas DataFrame, got {type(data).__name__}",
                       table=table)


def parse_row_kinds(kinds, n: int, table: str, column: str | None = None) -> np.ndarray:
    """Strings '+I','-U','+U','-D' or int codes 0..3 -> int8 array. Raises InvalidRowKind."""
    if isinstance(kinds, (pa.Array, pa.ChunkedArray)):
        arr = kinds
    else:
        arr = pa.array(np.asarray(kinds) if not isinstance(kinds, list) else kinds)
    if len(arr) != n:
        raise InvalidRowKind(f"got {len(arr)} row kinds for {n} rows", table=table, column=column)
    if arr.null_count:
        raise InvalidRowKind("row kind is null" + (f" in column {column!r}" if column else ""),
                             table=table, column=column)
    if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
        codes = pc.index_in(arr, value_set=pa.array(list(ROW_KIND_CODES)))
        if codes.null_count:
            bad = pc.filter(arr, pc.is_null(codes))[0].as_py()
            raise InvalidRowKind(f"unknown row kind {bad!r}; expected +I, -U, +U or -D"
                                 + (f" in column {column!r}" if column else ""), table=table, column=column)
        return np.asarray(codes.to_numpy(zero_copy_only=False), dtype=np.int8)
    if pa.types.is_integer(arr.type):
        out = np.asarray(arr.to_numpy(zero_copy_only=False))
        if n and (out.min() < 0 or out.max() > 3):
            raise InvalidRowKind("row kind codes must be 0..3 (+I, -U, +U, -D)", table=table, column=column)
        return out.astype(np.int8)
    raise InvalidRowKind(f"row kinds must be strings or int codes, got {arr.type}", table=table, column=column)


def conform(data, schema: TableSchema, table: str, *, row_kinds=None, delete: bool = False
            ) -> tuple[pa.Table, np.ndarray]:
    """Return (rows conformed to the schema, int8 row kinds). See the module docstring.

    With ``delete=True`` only primary-key columns are required; missing columns are filled with nulls (or a
    type's zero value for NOT NULL columns) and every row kind is -D.
    """
    tbl = to_arrow_table(data, table)
    names = set(tbl.column_names)
    if len(names) != tbl.num_columns:
        raise SchemaMismatch("input has duplicate column names", table=table)
    target = schema.arrow_schema
    extra = [c for c in tbl.column_names if c not in target.names]
    if extra:
        raise SchemaMismatch(f"input has columns that are not in the table: {extra}", table=table, column=extra[0])
    required = schema.primary_keys if delete else target.names
    missing = [c for c in required if c not in names]
    if missing:
        raise SchemaMismatch(f"input is missing column(s) {missing}", table=table, column=missing[0])
    n = tbl.num_rows
    columns = []
    for field in target:
        if field.name in names:
            col = tbl.column(field.name)
            if not col.type.equals(field.type):
                try:
                    col = col.cast(field.type, safe=True)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
                    raise SchemaMismatch(f"column {field.name!r} has type {col.type}, which cannot be cast "
                                         f"safely to the table type {field.type}: {e}",
                                         table=table, column=field.name) from None
        else:
            col = _filler(field, n)
        columns.append(col)
    out = pa.Table.from_arrays(columns, names=target.names)
    for key in schema.primary_keys:
        if out.column(key).null_count:
            raise NullPrimaryKey(f"primary-key column {key!r} contains nulls", table=table, column=key)
    if not delete:
        for field in target:
            if not field.nullable and out.column(field.name).null_count:
                raise InvalidInput(f"column {field.name!r} is NOT NULL but the input contains nulls",
                                   table=table, column=field.name)
            for chunk in out.column(field.name).chunks:
                path = _null_in_not_null_nested(chunk, field.name)
                if path is not None:
                    raise InvalidInput(f"nested field {path} of column {field.name!r} is NOT NULL but the input "
                                       "contains nulls", table=table, column=field.name)
    out = pa.Table.from_arrays(out.columns, schema=target)
    if delete:
        kinds = np.full(n, DELETE, dtype=np.int8)
    elif row_kinds is not None:
        kinds = parse_row_kinds(row_kinds, n, table)
    elif schema.table_options.rowkind_field is not None:
        col = schema.table_options.rowkind_field
        kinds = parse_row_kinds(out.column(col), n, table, column=col)
    else:
        kinds = np.zeros(n, dtype=np.int8)
    return out, kinds


def _null_in_not_null_nested(arr: pa.Array, path: str) -> str | None:
    """The path of a NOT NULL field nested in ``arr`` (struct field, list element, map value) holding a null where
    its parent is not null, else None. (Arrow does not enforce nested nullability: ``Table.from_pylist`` accepts
    such nulls, and some file encoders would store them, leaving files no reader can decode.)"""
    t = arr.type
    if pa.types.is_struct(t):
        for i, child in enumerate(arr.flatten()):  # a child is null where it or its parent is null
            name = f"{path}.{t.field(i).name}"
            if not t.field(i).nullable and child.null_count > arr.null_count:
                return name
            found = _null_in_not_null_nested(child, name)
            if found:
                return found
        return None
    if pa.types.is_map(t):
        entries = pa.list_(pa.field("entries", pa.struct([t.key_field, t.item_field]), False))
        values = arr.cast(entries).flatten()  # the entries of the non-null maps, as structs of key / value
        items = values.field(1)
        if not t.item_field.nullable and items.null_count:
            return f"{path}.value"
        return _null_in_not_null_nested(values.field(0), f"{path}.key") \
            or _null_in_not_null_nested(items, f"{path}.value")
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        values = arr.flatten()  # the elements of the non-null lists
        if not t.value_field.nullable and values.null_count:
            return f"{path}.element"
        return _null_in_not_null_nested(values, f"{path}.element")
    return None


def _filler(field: pa.Field, n: int) -> pa.Array:
    if field.nullable:
        return pa.nulls(n, field.type)
    zero = {pa.types.is_string: "", pa.types.is_binary: b"", pa.types.is_boolean: False}
    for check, value in zero.items():
        if check(field.type):
            return pa.array([value] * n, field.type)
    return pa.array(np.zeros(n, dtype=np.int64)).cast(field.type, safe=False)
