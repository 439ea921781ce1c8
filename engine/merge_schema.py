"""Schema merging on write (Paimon's ``write.merge-schema``): evolve a table so that input rows fit it.

Contract (Paimon's SchemaMergingUtils.merge with ``caseSensitive``, then SchemaManager.mergeSchema):
- An input column the table lacks is added at the end, in input order, nullable (Paimon makes every new column
  nullable, whatever the input says), with new field ids; a field of an input struct that the table's ROW lacks is
  added last in that ROW (also inside an ARRAY element or a MAP value). Table columns the input lacks stay; a
  merging write fills nullable ones with nulls (``with_missing_columns``); a missing NOT NULL one is refused by
  the writer (SchemaMismatch).
- Without ``type_widening`` existing types never change: the writer casts input values to them (safely, or raises
  SchemaMismatch). With it, an existing column takes a wider input type: the lossless widenings of
  engine.schema_change.is_widening (INT -> BIGINT, FLOAT -> DOUBLE, longer VARCHAR, more TIMESTAMP precision...),
  and for DECIMALs of equal scale the larger precision (Paimon refuses DECIMALs of different scales), at any depth
  (a struct field, an array element, a map value). A narrower or
  incompatible input type is refused with SchemaMismatch naming the table and column, as Paimon refuses it.
- A change Paimon's widening makes but which loses information (BIGINT -> DOUBLE, DOUBLE -> DECIMAL, TIMESTAMP ->
  DATE), and with ``explicit_cast`` (Paimon's ``write.merge-schema.explicit-cast``, which allows lossy changes such
  as BIGINT -> INT) any non-widening change, raises UnsupportedFeature: lakemerge's schema changes are lossless only,
  since old files must stay readable under the new type.
- A MAP key never changes (a ROW key gaining fields, a leaf key widened): Paimon's merge would change it, but its
  reader then cannot read the older files (SchemaEvolutionUtil.createMapCastExecutor requires equal key types),
  so that input raises UnsupportedFeature naming the table and column (a narrower or incompatible key
  SchemaMismatch, as other types; without ``type_widening`` a different leaf key is cast by the writer).
- Key columns: a primary-key, partition or bucket-key column never changes type (InvalidSchema from the alter path,
  which also names the table and column).
- The changes are published through ``engine.schema_change.alter_table`` (one ``schema-<N+1>``; when another
  writer publishes a schema first they are planned again on top of it, so columns it already merged in are not
  added twice) before any data is written; the data commit follows separately, as in Paimon, so a failed
  data write leaves the new schema over the old data.
"""
from __future__ import annotations

import pyarrow as pa

from engine.errors import InvalidSchema, SchemaMismatch, UnsupportedFeature
from engine.schema import TableSchema
from engine.schema_change import AddColumn, SchemaChange, UpdateColumnType, alter_table, apply_changes, is_widening
from engine.types import DataType


def merge_changes(schema: TableSchema, input_schema: pa.Schema, *, table: str, type_widening: bool = False,
                  explicit_cast: bool = False, case_sensitive: bool = True, ignore=()) -> list[SchemaChange]:
    """The schema changes that let rows of ``input_schema`` be written to ``schema`` (empty when none is needed);
    see the module contract. Input columns named in ``ignore`` (e.g. a Spark row-kind column) are skipped. With
    ``case_sensitive=False`` an input column matching a table column ignoring case is that column (Spark's
    default resolution). Raises SchemaMismatch / UnsupportedFeature / InvalidSchema (for an Arrow type Paimon
    cannot store); writes nothing."""
    def same(a: str, b: str) -> bool:
        return a == b if case_sensitive else a.lower() == b.lower()

    changes: list[SchemaChange] = []
    for field in input_schema:
        if field.name in ignore:
            continue
        update = _paimon_type(field.type, table, field.name)
        existing = next((f for f in schema.fields if same(f.name, field.name)), None)
        if existing is None:
            changes.append(AddColumn(field.name, update.with_nullable(True)))
        else:
            changes += _merge_type((existing.name,), existing.type, update, table=table,
                                   type_widening=type_widening, explicit_cast=explicit_cast, same=same)
    return changes


def merge_input_schema(table, input_schema: pa.Schema, *, type_widening: bool = False, explicit_cast: bool = False,
                       case_sensitive: bool = True, ignore=(), check=None) -> TableSchema | None:
    """Publish the schema ``merge_changes`` asks for on ``table`` (which then holds it in ``table.schema``) and
    return it, or None when the table's latest schema already accepts the input (``table.schema`` is then
    that latest schema, which may be newer than the one ``table`` was opened with). ``check``, if given, is
    called with the merged schema before it is published and raises to refuse an input that schema would not
    take either (a missing NOT NULL column, mismatched struct fields...): the table is then left unchanged.
    Raises as ``merge_changes``, ``check``, and ``alter_table`` (InvalidSchema naming the table and column,
    CommitConflict)."""
    planned: list[SchemaChange] = []

    def plan(latest: TableSchema) -> list[SchemaChange]:
        # planned again on each attempt: a concurrent writer may have merged the same columns in meanwhile
        planned[:] = merge_changes(latest, input_schema, table=table.name, type_widening=type_widening,
                                   explicit_cast=explicit_cast, case_sensitive=case_sensitive, ignore=ignore)
        if planned and check is not None:
            check(apply_changes(latest, planned, table=table.name,
                                has_snapshots=table.snapshot_manager.latest_id() is not None))
        return planned
    schema = alter_table(table, plan)  # holds the latest schema in table.schema even when nothing is published
    return schema if planned else None


def with_missing_columns(data: pa.Table, schema: TableSchema) -> pa.Table:
    """``data`` with a null column appended for each nullable column of ``schema`` it lacks (Paimon's merge-schema
    write fills them with NULL); a NOT NULL column it lacks stays missing, for the writer to refuse."""
    for field in schema.arrow_schema:
        if field.nullable and field.name not in data.column_names:
            data = data.append_column(field, pa.nulls(data.num_rows, field.type))
    return data


def _paimon_type(t: pa.DataType, table: str, column: str) -> DataType:
    try:
        return DataType.from_arrow(t, True)
    except InvalidSchema as e:
        raise SchemaMismatch(f"input column {column!r} cannot be added to the table: {e}", table=table,
                             column=column) from None


def _merge_type(path: tuple[str, ...], base: DataType, update: DataType, *, table: str, type_widening: bool,
                explicit_cast: bool, same) -> list[SchemaChange]:
    """The changes that merge input type ``update`` into the table's ``base`` at ``path`` (SchemaMergingUtils.merge:
    ROWs merge by field name, compared by ``same`` as the columns are, ARRAY elements and MAP values recursively,
    leaves only with ``type_widening``)."""
    def nested(step: str, b: DataType, u: DataType) -> list[SchemaChange]:
        return _merge_type(path + (step,), b, u, table=table, type_widening=type_widening,
                           explicit_cast=explicit_cast, same=same)

    if base.root == "ROW" and update.root == "ROW":
        changes: list[SchemaChange] = []
        for f in update.fields:
            existing = next((b for b in base.fields if same(b.name, f.name)), None)
            if existing is not None:
                changes += nested(existing.name, existing.type, f.type)
            else:
                changes.append(AddColumn(path + (f.name,), f.type.with_nullable(True)))
        return changes
    if base.root in ("ARRAY", "MULTISET") and update.root == base.root:
        return nested("element", base.element, update.element)
    if base.root == "MAP" and update.root == "MAP":
        if nested("key", base.key, update.key):  # Paimon would merge it, then fail reading the older files
            where = ".".join(path)
            raise UnsupportedFeature(f"table {table!r}: the map key of column {where!r} would change from "
                                     f"{base.key.sql()} to the input's {update.key.sql()}; Paimon cannot read "
                                     "files written before a map key type change (SchemaEvolutionUtil casts map "
                                     "values only), so a merge never changes a map key")
        return nested("value", base.value, update.value)
    if not type_widening or base.with_nullable(True) == update.with_nullable(True):
        return []  # the writer casts the input to the table's type (or refuses it)
    name = path[0] if len(path) == 1 else path
    where = ".".join(path)
    if base.root == "DECIMAL" and update.root == "DECIMAL":
        if base.scale != update.scale:
            raise SchemaMismatch(f"column {where!r} is {base.sql()} in the table and {update.sql()} in the input: "
                                 "decimals of different scales cannot be merged", table=table, column=path[0])
        if update.precision <= base.precision:
            return []
        return [UpdateColumnType(name, update)]
    if base.is_nested or update.is_nested:
        return []  # a nested type against another type: the writer's cast refuses it
    if is_widening(base, update):
        return [UpdateColumnType(name, update)]
    if explicit_cast or _paimon_widens(base, update):
        raise UnsupportedFeature(f"table {table!r}: column {where!r} would change from {base.sql()} to the input's "
                                 f"{update.sql()}, which loses information for old values; Paimon's type widening"
                                 f"{' with explicit-cast' if explicit_cast else ''} may make such a change, lakemerge "
                                 "only makes lossless ones (old files could not all be read under the new type)")
    raise SchemaMismatch(f"column {where!r} is {base.sql()} in the table and {update.sql()} in the input, which "
                         "is not a widening of it; write.merge-schema type widening only widens types",
                         table=table, column=path[0])


# Paimon's implicit casts between leaf roots (DataTypeCasts, without explicit): target -> sources
_INTS = ("TINYINT", "SMALLINT", "INT", "BIGINT")
_IMPLICIT_FROM = {
    "SMALLINT": ("TINYINT",), "INT": ("TINYINT", "SMALLINT"), "BIGINT": _INTS[:3],
    "FLOAT": _INTS + ("DECIMAL",), "DOUBLE": _INTS + ("DECIMAL", "FLOAT"), "DECIMAL": _INTS + ("FLOAT", "DOUBLE"),
    "VARCHAR": ("CHAR",), "VARBINARY": ("BINARY",), "DATE": ("TIMESTAMP",), "TIME": ("TIMESTAMP",),
    "TIMESTAMP": ("TIMESTAMP_LTZ",), "TIMESTAMP_LTZ": ("TIMESTAMP",),
}


def _paimon_widens(base: DataType, update: DataType) -> bool:
    """Whether Paimon's type widening (without explicit-cast) changes ``base`` to ``update``: an implicit cast,
    and no shorter length nor lower precision (SchemaMergingUtils.merge)."""
    if base.root != update.root and base.root not in _IMPLICIT_FROM.get(update.root, ()):
        return False
    if base.length is not None and update.length is not None and update.length < base.length:
        return False
    if base.root != "DECIMAL" and base.precision is not None and update.precision is not None \
            and update.precision < base.precision:
        return False
    return True
