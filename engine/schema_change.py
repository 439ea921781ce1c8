"""Schema evolution with Paimon's rules: schema changes, applying them, and publishing ``schema/schema-<N+1>``.

Contract:
- ``apply_changes(schema, changes)`` returns the next ``TableSchema`` (id + 1) or raises ``InvalidSchema`` /
  ``InvalidOption`` naming the table and column; it writes nothing.
- Field ids are never reused or changed: a new column gets ``highestFieldId + 1`` (the fields of a ROW in it the
  next ones, in Java's order); rename keeps the id; a dropped column's id is retired. Old data files are read by field id (``engine.read.split_read``), so a renamed column is
  found under its old name, a dropped-and-re-added name is a new (null) column, and widened types are cast on read.
- Allowed type changes are the lossless widenings (integers to larger integers, FLOAT/DOUBLE, DECIMAL with room for
  every old value; DECIMAL(p, s) to DECIMAL(p', s') with s' >= s and p'-s' >= p-s; FLOAT to DOUBLE; DECIMAL to
  DOUBLE; longer CHAR/VARCHAR/BINARY/VARBINARY; CHAR to VARCHAR, BINARY to VARBINARY; more TIMESTAMP precision).
  Paimon also accepts lossy "explicit" casts (e.g. BIGINT to INT) unless ``disable-explicit-type-casting``; lakemerge
  refuses them, since old files could not all be read under the new type.
- Nullability: NOT NULL -> nullable is always allowed (not for primary keys); nullable -> NOT NULL only while the
  table has no snapshot (Paimon's ``alter-column-null-to-not-null.disabled`` default refuses it on data).
- Options: immutable options (Paimon's ``@Immutable`` set) cannot be set or removed once the table has snapshots;
  ``bucket`` can change between fixed counts (and -2) on a table with data, as Paimon: only the metadata changes,
  each data file keeps the count it records, and a partition moves to the new count when it is overwritten
  (``Table.rescale``); it cannot be removed, nor changed from or to -1.
- Column options: a rename carries ``bucket-key``, ``sequence.field``, the keys of
  ``fields.<f>.{aggregate-function, ignore-retract, distinct, list-agg-delimiter, nested-key}`` and both sides of
  ``fields.<g>.sequence-group`` (Paimon's applyRenameColumnsToOptions); a column named by any other
  ``fields.<f>.*`` option cannot be renamed, and a column in a sequence group cannot be dropped (Paimon's
  validateFieldsPrefix refuses both). Dropping a column removes its own ``fields.<f>.*`` options (Paimon instead
  refuses the drop until they are reset).
- ``AddColumn`` / ``UpdateColumnType`` take a tuple name for a field nested in a ROW (Paimon's ``fieldNames``;
  ``element`` / ``value`` step into an ARRAY / a MAP's value, as Paimon's SchemaManager; never into a MAP key,
  since Paimon cannot read older files after a key type change): how schema merging on write
  (engine.merge_schema) adds struct fields and widens nested types.
- ``alter_table`` publishes with put-if-absent and re-applies the changes on top of a concurrently published schema.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import pyarrow as pa

from engine.errors import CommitConflict, InvalidSchema
from engine.options import (
    ADD_COLUMN_BEFORE_PARTITION,
    BUCKET,
    BUCKET_KEY,
    SEQUENCE_FIELD,
    TableOptions,
)
from engine.schema import TableSchema
from engine.types import DataField, DataType, assign_nested_field_ids, parse_atomic

TypeLike = pa.DataType | DataType | str

# Paimon's @Immutable options (CoreOptions.IMMUTABLE_OPTIONS): structural, fixed once the table has data.
IMMUTABLE_OPTIONS = frozenset({
    "type", "bucket-key", "bucket-function.type", "data-file.path-directory", "merge-engine",
    "sequence.snapshot-ordering", "aggregation.remove-record-on-delete", "partial-update.remove-record-on-delete",
    "partial-update.remove-record-on-sequence-group", "rowkind.field", "primary-key", "primary-key.nullable",
    "partition", "dynamic-bucket.initial-buckets", "force-lookup", "row-tracking.enabled",
    "data-evolution.enabled", "index-file-in-data-file-dir",
})
# Per-field option suffixes whose key carries the column name (renamed with the column, as Paimon's
# applyRenameColumnsToOptions). A column with another fields.<name>.* option cannot be renamed (Paimon refuses it too:
# the option would name no column).
_FIELD_OPTION_SUFFIXES = ("aggregate-function", "ignore-retract", "distinct", "list-agg-delimiter", "nested-key")
_SEQUENCE_GROUP = "sequence-group"  # fields.<ordering fields>.sequence-group = <guarded fields>


# --- changes -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Move:
    """Where a column goes: ``Move.first(c)``, ``Move.after(c, ref)``, ``Move.before(c, ref)``, ``Move.last(c)``."""
    column: str
    kind: str  # FIRST | AFTER | BEFORE | LAST
    reference: str | None = None

    @staticmethod
    def first(column: str) -> Move:
        """A move of ``column`` to the first position."""
        return Move(column, "FIRST")

    @staticmethod
    def after(column: str, reference: str) -> Move:
        """A move of ``column`` to just after ``reference``."""
        return Move(column, "AFTER", reference)

    @staticmethod
    def before(column: str, reference: str) -> Move:
        """A move of ``column`` to just before ``reference``."""
        return Move(column, "BEFORE", reference)

    @staticmethod
    def last(column: str) -> Move:
        """A move of ``column`` to the last position."""
        return Move(column, "LAST")


class SchemaChange:
    """Base of the change records; build them with the static constructors (pypaimon's names)."""

    @staticmethod
    def set_option(key: str, value) -> SetOption:
        """A change setting table option ``key`` to ``value`` (both stored as strings)."""
        return SetOption(str(key), str(value))

    @staticmethod
    def remove_option(key: str) -> RemoveOption:
        """A change removing table option ``key``."""
        return RemoveOption(str(key))

    @staticmethod
    def update_comment(comment: str | None) -> UpdateComment:
        """A change setting the table comment (None clears it)."""
        return UpdateComment(comment)

    @staticmethod
    def add_column(name: str, data_type: TypeLike, comment: str | None = None, move: Move | None = None
                   ) -> AddColumn:
        """A change adding column ``name`` of ``data_type``, optionally placed by ``move``; the type is parsed now."""
        return AddColumn(name, to_data_type(data_type), comment, move)

    @staticmethod
    def rename_column(name: str, new_name: str) -> RenameColumn:
        """A change renaming column ``name`` to ``new_name``."""
        return RenameColumn(name, new_name)

    @staticmethod
    def drop_column(name: str) -> DropColumn:
        """A change dropping column ``name``."""
        return DropColumn(name)

    @staticmethod
    def update_column_type(name: str, new_type: TypeLike, keep_nullability: bool = True) -> UpdateColumnType:
        """A change of column ``name`` to ``new_type`` (parsed now), keeping its nullability by default."""
        return UpdateColumnType(name, to_data_type(new_type), keep_nullability)

    @staticmethod
    def update_column_nullability(name: str, nullable: bool) -> UpdateColumnNullability:
        """A change setting whether column ``name`` is nullable."""
        return UpdateColumnNullability(name, bool(nullable))

    @staticmethod
    def update_column_comment(name: str, comment: str | None) -> UpdateColumnComment:
        """A change setting column ``name``'s comment (None clears it)."""
        return UpdateColumnComment(name, comment)

    @staticmethod
    def update_column_position(move: Move) -> UpdateColumnPosition:
        """A change moving a column as ``move`` says."""
        return UpdateColumnPosition(move)


@dataclass(frozen=True)
class SetOption(SchemaChange):
    """Set table option ``key`` to ``value``."""
    key: str
    value: str


@dataclass(frozen=True)
class RemoveOption(SchemaChange):
    """Remove table option ``key``."""
    key: str


@dataclass(frozen=True)
class UpdateComment(SchemaChange):
    """Set the table comment (None clears it)."""
    comment: str | None


@dataclass(frozen=True)
class AddColumn(SchemaChange):
    """Add column ``name`` of ``data_type``, at the end unless ``move`` places it. A tuple ``name`` is the path of
    a field nested in a ROW (Paimon's ``fieldNames``: ``("r", "x")``; ``"element"`` steps into an ARRAY,
    ``"value"`` into a MAP's value); a nested field goes last in its ROW (no ``move``)."""
    name: str | tuple[str, ...]
    data_type: DataType
    comment: str | None = None
    move: Move | None = None


@dataclass(frozen=True)
class RenameColumn(SchemaChange):
    """Rename column ``name`` to ``new_name``."""
    name: str
    new_name: str


@dataclass(frozen=True)
class DropColumn(SchemaChange):
    """Drop column ``name``."""
    name: str


@dataclass(frozen=True)
class UpdateColumnType(SchemaChange):
    """Change column ``name`` to ``new_type``, keeping its nullability if ``keep_nullability``; a tuple ``name``
    is the path of a nested field, as for AddColumn."""
    name: str | tuple[str, ...]
    new_type: DataType
    keep_nullability: bool = True


@dataclass(frozen=True)
class UpdateColumnNullability(SchemaChange):
    """Set whether column ``name`` is nullable."""
    name: str
    nullable: bool


@dataclass(frozen=True)
class UpdateColumnComment(SchemaChange):
    """Set column ``name``'s comment (None clears it)."""
    name: str
    comment: str | None


@dataclass(frozen=True)
class UpdateColumnPosition(SchemaChange):
    """Move a column as ``move`` says."""
    move: Move


def to_data_type(t: TypeLike) -> DataType:
    """A Paimon type from an Arrow type (nullable), a ``DataType`` or a Paimon type string ('DECIMAL(12, 2)')."""
    if isinstance(t, DataType):
        return t
    if isinstance(t, pa.DataType):
        return DataType.from_arrow(t, True)
    if isinstance(t, str):
        return parse_atomic(t)
    raise InvalidSchema(f"expected a pyarrow type, a Paimon type string or DataType, got {type(t).__name__}")


# --- type widening -----------------------------------------------------------------------------------------
_INT_DIGITS = {"TINYINT": 3, "SMALLINT": 5, "INT": 10, "BIGINT": 19}
_INT_RANK = {"TINYINT": 0, "SMALLINT": 1, "INT": 2, "BIGINT": 3}


def is_widening(old: DataType, new: DataType) -> bool:
    """True if every value of ``old`` is exactly representable in ``new`` (nullability ignored)."""
    a, b = old.root, new.root
    if old.with_nullable(True) == new.with_nullable(True):
        return True
    if a in _INT_RANK:
        if b in _INT_RANK:
            return _INT_RANK[b] >= _INT_RANK[a]
        if b == "DOUBLE":
            return a != "BIGINT"
        if b == "FLOAT":
            return a in ("TINYINT", "SMALLINT")
        if b == "DECIMAL":
            return new.precision - new.scale >= _INT_DIGITS[a]
        return False
    if a == "FLOAT":
        return b == "DOUBLE"
    if a == "DECIMAL":
        if b == "DECIMAL":
            return new.scale >= old.scale and new.precision - new.scale >= old.precision - old.scale
        return b == "DOUBLE" and old.precision <= 15
    if a in ("CHAR", "VARCHAR"):
        return b == "VARCHAR" and new.length >= old.length or (a == b == "CHAR" and new.length >= old.length)
    if a in ("BINARY", "VARBINARY"):
        return b == "VARBINARY" and new.length >= old.length or (a == b == "BINARY" and new.length >= old.length)
    if a in ("TIMESTAMP", "TIMESTAMP_LTZ"):
        return b == a and new.precision >= old.precision
    if a == "TIME":
        return b == "TIME" and new.precision >= old.precision
    return False


# --- applying ----------------------------------------------------------------------------------------------
def apply_changes(schema: TableSchema, changes: Sequence[SchemaChange], *, table: str | None = None,
                  has_snapshots: bool = True) -> TableSchema:
    """The schema after ``changes`` (see module contract). Raises InvalidSchema / InvalidOption; writes nothing."""
    where = f"table {table!r}: " if table else ""

    def fail(msg: str):
        raise InvalidSchema(where + msg)

    fields = list(schema.fields)
    highest = schema.highest_field_id
    options = dict(schema.options)
    comment = schema.comment
    primary_keys = list(schema.primary_keys)
    renames: dict[str, str] = {}

    def index_of(name: str) -> int:
        for i, f in enumerate(fields):
            if f.name == name:
                return i
        fail(f"column {name!r} does not exist; columns are {[f.name for f in fields]}")

    def assert_absent(name: str):
        if any(f.name == name for f in fields):
            fail(f"column {name!r} already exists")

    for change in changes:
        if isinstance(change, SetOption):
            if options.get(change.key) == change.value:
                continue
            _check_option_change(change.key, options.get(change.key), change.value, has_snapshots, fail, options)
            options[change.key] = change.value
        elif isinstance(change, RemoveOption):
            if change.key not in options:
                continue
            _check_option_change(change.key, options.get(change.key), None, has_snapshots, fail, options)
            del options[change.key]
        elif isinstance(change, UpdateComment):
            comment = change.comment
        elif isinstance(change, AddColumn) and _is_path(change.name):
            if change.move is not None:
                fail(f"nested field {'.'.join(change.name)!r} cannot be placed by a move")
            if not change.data_type.nullable:
                fail(f"nested field {'.'.join(change.name)!r} cannot be added as NOT NULL (existing rows have no "
                     "value); add it nullable")
            highest += 1  # the field's id first, then its type's fields (as the top-level add below)
            field_id = highest
            data_type, highest = assign_nested_field_ids(change.data_type, highest)
            new_field = DataField(field_id, change.name[-1], data_type, change.comment)

            def add_field(row: DataType, path=change.name, new_field=new_field) -> DataType:
                if any(f.name == path[-1] for f in row.fields):
                    fail(f"nested field {'.'.join(path)!r} already exists")
                return replace(row, fields=row.fields + (new_field,))
            i = index_of(change.name[0])
            fields[i] = replace(fields[i], type=_edit_nested(fields[i].type, change.name, 1, add_field, fail))
        elif isinstance(change, AddColumn):
            if not change.name:
                fail("a new column needs a name")
            assert_absent(change.name)
            if not change.data_type.nullable:
                fail(f"column {change.name!r} cannot be added as NOT NULL (existing rows have no value); "
                     "add it nullable")
            highest += 1
            field_id = highest
            data_type, highest = assign_nested_field_ids(change.data_type, highest)
            new_field = DataField(field_id, change.name, data_type, change.comment)
            before_partition = TableOptions(options, table=table).get(ADD_COLUMN_BEFORE_PARTITION)
            if change.move is None and before_partition and schema.partition_keys:
                first_part = min(i for i, f in enumerate(fields) if f.name in schema.partition_keys)
                fields.insert(first_part, new_field)
            elif change.move is None:
                fields.append(new_field)
            else:
                fields.append(new_field)
                _apply_move(fields, replace(change.move, column=change.name), fail)
        elif isinstance(change, RenameColumn):
            if change.name in schema.partition_keys:
                fail(f"cannot rename partition column {change.name!r}")
            i = index_of(change.name)
            if change.new_name != change.name:
                assert_absent(change.new_name)
            _check_field_options_follow(change.name, options, fail)
            fields[i] = replace(fields[i], name=change.new_name)
            primary_keys = [change.new_name if k == change.name else k for k in primary_keys]
            renames = {k: (change.new_name if v == change.name else v) for k, v in renames.items()}
            renames.setdefault(change.name, change.new_name)
            options = _rename_in_options(options, change.name, change.new_name)
        elif isinstance(change, DropColumn):
            if change.name in schema.partition_keys or change.name in primary_keys:
                fail(f"cannot drop partition key or primary key column {change.name!r}")
            i = index_of(change.name)
            del fields[i]
            if not fields:
                fail("cannot drop every column")
            _check_not_in_sequence_group(change.name, options, fail)
            # the dropped column's own per-field options go with it (Paimon refuses the drop while they exist)
            prefix = f"fields.{change.name}."
            options = {k: v for k, v in options.items() if not k.startswith(prefix)}
        elif isinstance(change, UpdateColumnType) and _is_path(change.name):
            top = change.name[0]
            if top in schema.partition_keys or top in primary_keys or top in schema.bucket_keys:
                fail(f"cannot change the type of a field nested in key column {top!r}")

            def retype(old: DataType, path=change.name, change=change) -> DataType:
                new_type = change.new_type.with_nullable(old.nullable) if change.keep_nullability \
                    else change.new_type
                if not is_widening(old, new_type):
                    fail(f"nested field {'.'.join(path)!r} cannot change type from {old.sql()} to "
                         f"{new_type.sql()} without losing information; only widening changes are allowed")
                if old.nullable and not new_type.nullable and has_snapshots:
                    fail(f"cannot make nested field {'.'.join(path)!r} NOT NULL: the table already has data")
                return new_type
            i = index_of(top)
            if _passes_multiset(fields[i].type, change.name):
                fail(f"nested field {'.'.join(change.name)!r} is inside a MULTISET: Paimon's readers cannot cast a "
                     "MULTISET's values (CastExecutors has no MULTISET cast), so its type cannot change")
            fields[i] = replace(fields[i], type=_replace_nested(fields[i].type, change.name, 1, retype, fail))
        elif isinstance(change, UpdateColumnType):
            if change.name in schema.partition_keys:
                fail(f"cannot change the type of partition column {change.name!r}")
            if change.name in primary_keys:
                fail(f"cannot change the type of primary key column {change.name!r}")
            if change.name in schema.bucket_keys:
                fail(f"cannot change the type of bucket-key column {change.name!r}: rows are placed in buckets by "
                     "its hash")
            i = index_of(change.name)
            old_type = fields[i].type
            new_type = change.new_type.with_nullable(old_type.nullable) if change.keep_nullability \
                else change.new_type
            if old_type.nullable and not new_type.nullable and has_snapshots:
                fail(f"cannot make column {change.name!r} NOT NULL: the table already has data")
            if not is_widening(old_type, new_type):
                fail(f"column {change.name!r} cannot change type from {old_type.sql()} to {new_type.sql()} "
                     "without losing information; only widening changes are allowed "
                     "(e.g. INT -> BIGINT, FLOAT -> DOUBLE, DECIMAL(10, 2) -> DECIMAL(12, 2))")
            fields[i] = replace(fields[i], type=new_type)
        elif isinstance(change, UpdateColumnNullability):
            i = index_of(change.name)
            old_type = fields[i].type
            if change.nullable and change.name in primary_keys:
                fail(f"primary key column {change.name!r} must stay NOT NULL")
            if old_type.nullable and not change.nullable and has_snapshots:
                fail(f"cannot make column {change.name!r} NOT NULL: the table already has data that may "
                     "hold nulls")
            fields[i] = replace(fields[i], type=old_type.with_nullable(change.nullable))
        elif isinstance(change, UpdateColumnComment):
            i = index_of(change.name)
            fields[i] = replace(fields[i], description=change.comment)
        elif isinstance(change, UpdateColumnPosition):
            _apply_move(fields, change.move, fail)
        else:
            raise InvalidSchema(where + f"unsupported schema change {change!r}")

    new = TableSchema(schema.id + 1, tuple(fields), highest, schema.partition_keys, tuple(primary_keys),
                      options, comment, _now_millis(), schema.version)
    TableOptions(options, table=table).check_new_schema(has_primary_key=bool(primary_keys),  # raises InvalidOption
                                                        previous=schema.options)
    new.validate(table)
    from engine.write.formats import check_new_schema_formats
    check_new_schema_formats(new, table)
    from engine.compact.record_expire import check_record_level_expire
    check_record_level_expire(new, table)
    return new


def _is_path(name) -> bool:
    """True for the tuple path of a nested field (a 1-tuple is a top-level column name)."""
    return isinstance(name, tuple) and len(name) > 1


def _edit_nested(t: DataType, path: tuple[str, ...], depth: int, edit, fail) -> DataType:
    """``t`` (the type at ``path[:depth]``) with ``edit`` applied to the ROW holding the field ``path[-1]``
    (stepping as ``_replace_nested``). Calls ``fail`` for a path that names nothing or no ROW."""
    def edit_row(row: DataType) -> DataType:
        if row.root != "ROW":
            fail(f"{'.'.join(path[:-1])!r} is {row.sql()}, not a ROW: nested field {'.'.join(path)!r} cannot be "
                 "changed there")
        return edit(row)
    return _replace_nested(t, path[:-1], depth, edit_row, fail)


def _passes_multiset(t: DataType, path: tuple[str, ...]) -> bool:
    """Whether the nested ``path`` (from its top-level column of type ``t``) steps through a MULTISET."""
    for step in path[1:]:
        if t.root == "MULTISET":
            return True
        if t.root == "ROW":
            t = next((f.type for f in t.fields if f.name == step), None)
        elif t.root == "ARRAY" and step == "element":
            t = t.element
        elif t.root == "MAP" and step == "value":
            t = t.value
        else:
            return False  # a path naming nothing: _replace_nested reports it
        if t is None:
            return False
    return False


def _replace_nested(t: DataType, path: tuple[str, ...], depth: int, replace_type, fail) -> DataType:
    """``t`` (the type at ``path[:depth]``) with the type at ``path`` replaced by ``replace_type(old type)``: ROW
    fields are stepped into by name, an ARRAY/MULTISET by ``element``, a MAP's value by ``value`` (Paimon's
    SchemaMergingUtils names). Calls ``fail`` for a path that names nothing."""
    if depth == len(path):
        return replace_type(t)
    step = path[depth]
    if t.root == "ROW":
        for k, f in enumerate(t.fields):
            if f.name == step:
                out = list(t.fields)
                out[k] = replace(f, type=_replace_nested(f.type, path, depth + 1, replace_type, fail))
                return replace(t, fields=tuple(out))
    elif t.root in ("ARRAY", "MULTISET") and step == "element":
        return replace(t, element=_replace_nested(t.element, path, depth + 1, replace_type, fail))
    elif t.root == "MAP" and step == "value":
        return replace(t, value=_replace_nested(t.value, path, depth + 1, replace_type, fail))
    fail(f"nested field {'.'.join(path[:depth + 1])!r} does not exist")


def _check_option_change(key: str, old: str | None, new: str | None, has_snapshots: bool, fail,
                         options: dict) -> None:
    if key == "type":
        fail("option 'type' cannot be changed")
    if not has_snapshots:
        return
    if key in IMMUTABLE_OPTIONS:
        fail(f"option {key!r} cannot be changed once the table has data")
    if key == "deletion-vectors.enabled" and _true(old) != _true(new) \
            and not _true(options.get("deletion-vectors.modifiable")):
        # Paimon's SchemaManager: files written in the other mode overlap across levels (or lack vectors), so
        # reads would return some keys twice until a full compaction
        fail(f"deletion vectors mode cannot change from {_true(old)} to {_true(new)} on a table with data: without "
             "a full compaction first, reads may return keys twice; compact fully, then set "
             "'deletion-vectors.modifiable' = 'true' to allow the change")
    if key == BUCKET:
        _check_bucket_change(old, new, fail)


def _check_bucket_change(old: str | None, new: str | None, fail) -> None:
    """Paimon's SchemaManager rules for ``bucket`` on a table with data: it cannot be removed, nor changed from or
    to -1 (dynamic bucket: the keys' HASH index is built for one layout). Between fixed counts (and postpone -2)
    only the metadata changes: each file keeps the count it records, and a partition moves to the new count when
    it is overwritten (Table.rescale)."""
    if new is None:
        fail("Cannot reset bucket. (option 'bucket' cannot be removed from a table with data)")
    try:
        old_count, new_count = (-1 if old is None else int(old)), int(new)
    except ValueError:
        return  # not a number: TableOptions validation refuses it with InvalidOption
    if old_count == -1:
        fail("Cannot change bucket when it is -1. (a dynamic-bucket or bucket-unaware table keeps its layout)")
    if new_count == -1:
        fail("Cannot change bucket to -1. (a table with data cannot become a dynamic-bucket table)")


def _true(value: str | None) -> bool:
    return value is not None and value.strip().lower() == "true"


def _check_field_options_follow(name: str, options: dict, fail) -> None:
    """Renaming ``name`` renames the per-field options Paimon renames (``_FIELD_OPTION_SUFFIXES``, sequence groups);
    any other ``fields.<name>.*`` option would be left naming no column, so the rename is refused, as Paimon's
    SchemaValidation.validateFieldsPrefix refuses it."""
    prefix = f"fields.{name}."
    for key in options:
        if key.startswith(prefix) and key[len(prefix):] not in _FIELD_OPTION_SUFFIXES + (_SEQUENCE_GROUP,):
            fail(f"cannot rename column {name!r}: option {key!r} would name no column; remove it first "
                 "(and set it again under the new name)")


def _check_not_in_sequence_group(name: str, options: dict, fail) -> None:
    """A column that orders or belongs to a sequence group cannot be dropped (Paimon's SchemaValidation refuses the
    option naming a missing field): dropping the group silently would change how its other fields merge."""
    for key, value in options.items():
        if key.startswith("fields.") and key.endswith(f".{_SEQUENCE_GROUP}"):
            ordering = key[len("fields."):-len(_SEQUENCE_GROUP) - 1].split(",")
            if name in [c.strip() for c in ordering + value.split(",")]:
                fail(f"cannot drop column {name!r}: option {key!r} = {value!r} names it; change or remove that "
                     "sequence group first")


def _rename_in_options(options: dict, old: str, new: str) -> dict:
    """The options after column ``old`` became ``new``, as Paimon's SchemaManager.applyRenameColumnsToOptions:
    ``bucket-key`` / ``sequence.field`` values, the keys of per-field options, and both the key and the value of
    ``fields.<f1,f2>.sequence-group``."""
    def renamed(names: str) -> str:
        return ",".join(new if c.strip() == old else c.strip() for c in names.split(","))

    out = dict(options)
    for key in (BUCKET_KEY, SEQUENCE_FIELD):
        if key in out:
            out[key] = renamed(out[key])
    for suffix in _FIELD_OPTION_SUFFIXES:
        k = f"fields.{old}.{suffix}"
        if k in out:
            out[f"fields.{new}.{suffix}"] = out.pop(k)
    for key in list(out):
        if key.startswith("fields.") and key.endswith(f".{_SEQUENCE_GROUP}"):
            ordering = key[len("fields."):-len(_SEQUENCE_GROUP) - 1]
            out[f"fields.{renamed(ordering)}.{_SEQUENCE_GROUP}"] = renamed(out.pop(key))
    return out


def options_as_of(options: dict, current: TableSchema, old: TableSchema) -> dict:
    """The table's ``options`` (of schema ``current``) restated for the older schema ``old``, for a time-travel
    read through it: a column renamed since is called by its ``old`` name (matched by field id) in the options
    that name columns, and a column ``old`` lacks (added since) is left out of them (its own ``fields.<f>.*``
    options, its place in ``sequence.field``, ``bucket-key`` and sequence groups). Java's tryTimeTravel copies
    the options unchanged and its validation then refuses such a read; pypaimon copies them unchanged too."""
    old_names = {f.id: f.name for f in old.fields}
    renamed = [(f.name, old_names[f.id]) for f in current.fields if old_names.get(f.id, f.name) != f.name]
    out = dict(options)
    for i, (now, _) in enumerate(renamed):  # through placeholders, so that swapped names do not collide
        out = _rename_in_options(out, now, f"\0{i}")
    for i, (_, then) in enumerate(renamed):
        out = _rename_in_options(out, f"\0{i}", then)
    names = set(old.field_names)

    def present(columns: str) -> list[str]:
        return [c.strip() for c in columns.split(",") if c.strip() in names]

    for key in list(out):
        if not key.startswith("fields."):
            continue
        named = key.split(".")[1]
        if named != "default-aggregate-function" and len(present(named)) < len(named.split(",")):
            del out[key]
        elif key.endswith(f".{_SEQUENCE_GROUP}"):
            out[key] = ",".join(present(out[key]))
    for key in (BUCKET_KEY, SEQUENCE_FIELD):
        if key in out and present(out[key]) != [c.strip() for c in out[key].split(",")]:
            if present(out[key]):
                out[key] = ",".join(present(out[key]))
            else:
                del out[key]
    return out


def _apply_move(fields: list, move: Move, fail) -> None:
    names = [f.name for f in fields]
    if move.column not in names:
        fail(f"column {move.column!r} does not exist")
    i = names.index(move.column)
    if move.kind in ("AFTER", "BEFORE"):
        if move.reference not in names:
            fail(f"reference column {move.reference!r} does not exist")
        if move.reference == move.column:
            fail(f"cannot move column {move.column!r} relative to itself")
    f = fields.pop(i)
    names.pop(i)
    if move.kind == "FIRST":
        fields.insert(0, f)
    elif move.kind == "LAST":
        fields.append(f)
    elif move.kind == "AFTER":
        fields.insert(names.index(move.reference) + 1, f)
    elif move.kind == "BEFORE":
        fields.insert(names.index(move.reference), f)
    else:
        fail(f"unknown move kind {move.kind!r}")


def _now_millis() -> int:
    import time
    return int(time.time() * 1000)


# --- publishing --------------------------------------------------------------------------------------------
def alter_table(table, changes: Sequence[SchemaChange] | Callable[[TableSchema], Sequence[SchemaChange]], *,
                max_attempts: int = 10) -> TableSchema:
    """Apply ``changes`` to the table's latest schema and publish it as ``schema-<N+1>``; returns the new schema
    and updates ``table.schema``. If another writer publishes a schema first, the changes are re-applied on top
    of it. ``changes`` may instead be a function of the latest schema giving the changes, called again on every
    attempt (changes planned from the schema, as schema merging's); when it gives none, nothing is published and
    the latest schema is returned (and held in ``table.schema``). Raises InvalidSchema / InvalidOption (nothing
    written), TableNotFound when the table (or its branch) has no schema any more, or CommitConflict after
    ``max_attempts``."""
    planned = callable(changes)
    fixed = None if planned else list(changes)
    for _ in range(max_attempts):
        latest = table.schema_manager.latest()
        if latest is None:  # e.g. a branch table object whose branch was deleted or renamed meanwhile
            from engine.errors import TableNotFound
            raise TableNotFound(table.name, f"{table.paths.meta_root} holds no schema (was the branch deleted or "
                                "renamed, or the table dropped?)")
        todo = list(changes(latest)) if planned else fixed
        if planned and not todo:
            table.schema = latest
            return latest
        has_snapshots = table.snapshot_manager.latest_id() is not None
        new = apply_changes(latest, todo, table=table.name, has_snapshots=has_snapshots)
        if has_snapshots and latest.table_options.bucket == -2 and new.table_options.bucket != -2:
            _require_no_postponed_files(table)
        _validate_read_branches(table, new)
        if table.schema_manager.commit(new):
            table.schema = new
            return new
    raise CommitConflict(table.name, f"schema changed concurrently {max_attempts} times; nothing was changed")


def _validate_read_branches(table, schema: TableSchema) -> None:
    """Paimon's SchemaValidation.validateFallbackBranch, run on every schema commit: ``scan.fallback-branch`` and
    ``scan.primary-branch`` are not both set, and a branch either names has a schema. Raises InvalidOption."""
    from engine.branches import branch_root
    from engine.errors import InvalidOption
    from engine.paths import TablePaths
    fallback = (schema.options.get("scan.fallback-branch") or "").strip()
    primary = (schema.options.get("scan.primary-branch") or "").strip()
    if fallback and primary:
        raise InvalidOption("scan.primary-branch", primary, "Cannot set both 'scan.fallback-branch' and "
                            "'scan.primary-branch' at the same time.", table=table.name)
    main = getattr(table, "main", table)  # a branch table's branches are the main table's
    for key, name in (("scan.fallback-branch", fallback), ("scan.primary-branch", primary)):
        schema_dir = TablePaths(branch_root(main.root, name)).schema_dir if name else None
        if name and not any(n.startswith("schema-") for n in main.file_io.list_names(schema_dir)):
            raise InvalidOption(key, name, f"Cannot set '{key}' = '{name}' because the branch '{name}' does not "
                                "exist.", table=table.name)


def _require_no_postponed_files(table) -> None:
    """Leaving postpone bucket mode (-2 -> N) with live postponed files would hide their records for good (only a
    postpone table's compaction moves them into real buckets): refuse it until a compaction moved them (lakemerge's
    refusal; Paimon lets the change through)."""
    from engine.postpone import POSTPONE_BUCKET
    snap = table.snapshot_manager.latest()
    postponed = [e for e in table.manifests.live_entries(snap) if e.bucket == POSTPONE_BUCKET]
    if postponed:
        raise InvalidSchema(f"table {table.name!r}: option 'bucket' cannot leave postpone mode (-2) while "
                            f"{len(postponed)} postponed file(s) are live (their records would never reach real "
                            "buckets); compact the table first (Table.compact)")


class SchemaUpdate:
    """Fluent builder over ``SchemaChange``: ``table.alter().add_column("x", pa.int64()).commit()``."""

    def __init__(self, table):
        self.table = table
        self.changes: list[SchemaChange] = []

    def _add(self, change: SchemaChange) -> SchemaUpdate:
        self.changes.append(change)
        return self

    def add_column(self, name: str, data_type: TypeLike, comment: str | None = None, *, first: bool = False,
                   after: str | None = None, before: str | None = None) -> SchemaUpdate:
        """Queue adding column ``name`` (placed first, after or before a column if asked); returns self for
        chaining."""
        move = Move.first(name) if first else Move.after(name, after) if after else \
            Move.before(name, before) if before else None
        return self._add(SchemaChange.add_column(name, data_type, comment, move))

    def drop_column(self, name: str) -> SchemaUpdate:
        """Queue dropping column ``name``; returns self for chaining."""
        return self._add(SchemaChange.drop_column(name))

    def rename_column(self, name: str, new_name: str) -> SchemaUpdate:
        """Queue renaming ``name`` to ``new_name``; returns self for chaining."""
        return self._add(SchemaChange.rename_column(name, new_name))

    def update_column_type(self, name: str, new_type: TypeLike) -> SchemaUpdate:
        """Queue changing column ``name`` to ``new_type``; returns self for chaining."""
        return self._add(SchemaChange.update_column_type(name, new_type))

    def set_nullable(self, name: str, nullable: bool = True) -> SchemaUpdate:
        """Queue setting column ``name``'s nullability; returns self for chaining."""
        return self._add(SchemaChange.update_column_nullability(name, nullable))

    def move_column(self, name: str, *, first: bool = False, last: bool = False, after: str | None = None,
                    before: str | None = None) -> SchemaUpdate:
        """Queue moving column ``name`` first, last, after or before another; returns self for chaining.
        Raises InvalidSchema if no position is given."""
        move = Move.first(name) if first else Move.last(name) if last else Move.after(name, after) if after \
            else Move.before(name, before) if before else None
        if move is None:
            raise InvalidSchema("move_column needs one of first/last/after/before")
        return self._add(SchemaChange.update_column_position(move))

    def update_column_comment(self, name: str, comment: str | None) -> SchemaUpdate:
        """Queue setting column ``name``'s comment; returns self for chaining."""
        return self._add(SchemaChange.update_column_comment(name, comment))

    def update_comment(self, comment: str | None) -> SchemaUpdate:
        """Queue setting the table comment; returns self for chaining."""
        return self._add(SchemaChange.update_comment(comment))

    def set_option(self, key: str, value) -> SchemaUpdate:
        """Queue setting table option ``key``; returns self for chaining."""
        return self._add(SchemaChange.set_option(key, value))

    def remove_option(self, key: str) -> SchemaUpdate:
        """Queue removing table option ``key``; returns self for chaining."""
        return self._add(SchemaChange.remove_option(key))

    def commit(self) -> TableSchema:
        """Apply all queued changes in one schema change and return the new TableSchema; raises if a change is
        invalid."""
        return alter_table(self.table, self.changes)


# --- commits prepared under an older schema ----------------------------------------------------------------
def check_commit_schema(written: TableSchema, latest: TableSchema, table: str) -> None:
    """Raise CommitConflict unless files written under ``written`` are read correctly under ``latest``: same key
    and partition columns (by field id), same bucketing, same sequence fields, and every surviving column's type
    in ``latest`` a widening of its type in ``written``, or a ROW with nullable fields added (not newly NOT
    NULL)."""
    if written.id == latest.id:
        return

    def ids(s: TableSchema, names) -> tuple:
        return tuple(s.field(n).id for n in names)

    def conflict(detail: str):
        raise CommitConflict(table, f"the files were written under schema {written.id} but the table now has "
                                    f"schema {latest.id}: {detail}; write the data again")

    if ids(written, written.primary_keys) != ids(latest, latest.primary_keys):
        conflict("the primary key changed")
    if ids(written, written.partition_keys) != ids(latest, latest.partition_keys):
        conflict("the partition keys changed")
    if ids(written, written.bucket_keys) != ids(latest, latest.bucket_keys):
        conflict("the bucket key changed")
    old_bucket, new_bucket = written.table_options.bucket, latest.table_options.bucket
    if old_bucket != new_bucket and not (old_bucket > 0 and (new_bucket > 0 or new_bucket == -2)):
        # fixed-count files stay readable under any count (each records its own; the commit checks that a
        # partition keeps one count, as Paimon's ConflictDetection); postponed or dynamic-bucket files do not
        conflict(f"the bucket mode changed from bucket={old_bucket} to bucket={new_bucket}")
    if ids(written, written.table_options.sequence_fields) != ids(latest, latest.table_options.sequence_fields):
        conflict("sequence.field changed")
    if written.table_options.merge_engine != latest.table_options.merge_engine:
        conflict("the merge engine changed")
    old_by_id = {f.id: f for f in written.fields}
    for f in latest.fields:
        old = old_by_id.get(f.id)
        if old is None:
            if not f.type.nullable:
                conflict(f"column {f.name!r} is NOT NULL and the files do not have it")
            continue
        if not _reads_as(old.type, f.type):
            conflict(f"column {f.name!r} changed type from {old.type.sql()} to {f.type.sql()}")
        if old.type.nullable and not f.type.nullable:
            conflict(f"column {f.name!r} became NOT NULL")


def _reads_as(old: DataType, new: DataType) -> bool:
    """Whether values written as ``old`` read correctly as ``new``: a widening, or a ROW whose fields (by id) each
    read so, with only nullable fields added (a merged-in struct field), recursively through ARRAY and MAP."""
    if old.root != new.root or old.root not in ("ROW", "ARRAY", "MULTISET", "MAP"):
        return is_widening(old, new)
    if old.root in ("ARRAY", "MULTISET"):
        return _reads_as(old.element, new.element)
    if old.root == "MAP":
        return _reads_as(old.key, new.key) and _reads_as(old.value, new.value)
    by_id = {f.id: f.type for f in old.fields}
    for f in new.fields:
        if f.id in by_id:
            if not _reads_as(by_id[f.id], f.type) or (by_id[f.id].nullable and not f.type.nullable):
                return False
        elif not f.type.nullable:
            return False
    return True
