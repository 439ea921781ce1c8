"""Table schemas: the ``schema/schema-N`` JSON file, key roles of fields, and the Arrow view of a table.

Guarantees: a ``TableSchema`` built by ``TableSchema.create`` is valid Paimon (primary key covers the partition keys,
key columns NOT NULL, explicit string options) and ``to_json`` writes what Java's SchemaSerializer writes.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from functools import cached_property

import pyarrow as pa

from engine.errors import CorruptFile, InvalidSchema
from engine.options import BUCKET_KEY, THIN_MODE, TableOptions
from engine.types import DataField, DataType, assign_nested_field_ids

SCHEMA_VERSION = 3
KEY_FIELD_PREFIX = "_KEY_"
KEY_FIELD_ID_START = 1073741823  # Integer.MAX_VALUE / 2
SEQUENCE_NUMBER = "_SEQUENCE_NUMBER"
SEQUENCE_NUMBER_ID = 2147483646
VALUE_KIND = "_VALUE_KIND"
VALUE_KIND_ID = 2147483645


@dataclass(frozen=True)
class TableSchema:
    """One ``schema/schema-N`` file of a primary-key table (Paimon's TableSchema JSON, versions 1-3): fields with
    stable ids, keys, options and comment. Immutable; a change of schema is a new TableSchema with the next id.
    ``create`` builds schema 0 and validates it; ``from_json`` reads what Java, pypaimon or lakemerge wrote."""
    id: int
    fields: tuple[DataField, ...]
    highest_field_id: int
    partition_keys: tuple[str, ...]
    primary_keys: tuple[str, ...]
    options: dict = field(default_factory=dict)
    comment: str | None = None
    time_millis: int = 0
    version: int = SCHEMA_VERSION

    # --- construction -------------------------------------------------------------------------------
    @staticmethod
    def create(arrow_schema: pa.Schema, primary_keys, partition_keys=(), options=None, comment=None,
               table: str | None = None) -> "TableSchema":
        """Build schema-0 from an Arrow schema. Options ``primary-key`` and ``partition`` (comma-separated columns)
        define the keys when the arguments do not, and are not stored (Paimon's Schema.normalizePrimaryKeys /
        normalizePartitionKeys). Raises InvalidSchema / InvalidOption."""
        names = [f.name for f in arrow_schema]
        where = f"table {table!r}: " if table else ""
        if len(set(names)) != len(names):
            raise InvalidSchema(where + "duplicate column names")
        options = dict(options or {})
        keys = {}
        for key, given, what in (("primary-key", primary_keys, "primary key"), ("partition", partition_keys,
                                                                                "partition")):
            keys[key] = tuple(given or ())
            if key in options:
                if keys[key]:
                    raise InvalidSchema(where + f"cannot define the {what} both as an argument and as option {key!r}")
                keys[key] = tuple(c.strip() for c in str(options.pop(key)).split(",") if c.strip())
        pk, parts = keys["primary-key"], keys["partition"]
        # No primary key: an append table (engine.append).
        for role, cols in (("primary key", pk), ("partition key", parts)):
            for c in cols:
                if c not in names:
                    raise InvalidSchema(where + f"{role} column {c!r} is not in the schema {names}")
            if len(set(cols)) != len(cols):
                raise InvalidSchema(where + f"duplicate {role} columns {list(cols)}")
        missing = [p for p in parts if p not in pk]
        dynamic = str((options or {}).get("bucket", "-1")).strip() == "-1"
        if pk and missing and not dynamic:
            raise InvalidSchema(where + f"the primary key {list(pk)} must include every partition key "
                                f"(missing {missing}) unless the table uses dynamic bucket mode (bucket=-1, "
                                "cross-partition upsert)")
        if pk and all(k in parts for k in pk):
            raise InvalidSchema(where + "the primary key must have a column that is not a partition key")
        fields = []
        highest = -1  # ids as Java's Schema.Builder gives them: a column, then the fields nested in it
        for f in arrow_schema:
            try:
                dtype = DataType.from_arrow(f.type, f.nullable)
            except InvalidSchema as e:
                raise InvalidSchema(where + f"column {f.name!r}: {e}") from None
            if f.name in pk:
                if dtype.is_nested:
                    raise InvalidSchema(where + f"primary key column {f.name!r} has nested type {f.type}")
                dtype = dtype.with_nullable(False)  # Paimon makes primary-key columns NOT NULL
            highest += 1
            field_id = highest
            dtype, highest = assign_nested_field_ids(dtype, highest)
            fields.append(DataField(field_id, f.name, dtype))
        opts = {str(k): str(v) for k, v in (options or {}).items()}
        schema = TableSchema(0, tuple(fields), highest, parts, pk, opts, comment,
                             int(time.time() * 1000))
        schema.validate(table)
        TableOptions(opts, table=table).check_new_schema(has_primary_key=bool(pk))
        from engine.write.formats import check_new_schema_formats
        check_new_schema_formats(schema, table)
        from engine.compact.record_expire import check_record_level_expire
        check_record_level_expire(schema, table)
        return schema

    def validate(self, table: str | None = None, *, opening: bool = False) -> None:
        """Check the options against the columns (sequence.field, rowkind.field, bucket-key, merge-engine options).
        Raises InvalidSchema or InvalidOption naming ``table``; returns nothing when valid. ``opening``: the schema
        is an existing one being opened, not a new one (see engine.merge_engines.config.validate)."""
        from engine.refused_options import require_readable
        require_readable(self.options, table)
        opts = TableOptions(self.options, table=table)
        names = self.field_names
        where = f"table {table!r}: " if table else ""
        for f in opts.sequence_fields:
            if f not in names:
                raise InvalidSchema(where + f"sequence.field {f!r} is not a column")
        rk = opts.rowkind_field
        if rk is not None:
            if rk not in names:
                raise InvalidSchema(where + f"rowkind.field {rk!r} is not a column")
            if not self.field(rk).type.is_string:
                raise InvalidSchema(where + f"rowkind.field {rk!r} must be a string column")
        for b in opts.get(BUCKET_KEY):
            if not self.primary_keys:
                if b not in names or b in self.partition_keys:
                    raise InvalidSchema(where + f"bucket-key {b!r} must be a column that is not a partition key")
            elif b not in self.primary_keys or b in self.partition_keys:
                raise InvalidSchema(where + f"bucket-key {b!r} must be a primary-key column that is not a "
                                    "partition key")
        from engine.merge_engines.config import validate as validate_merge_engine  # issue 3
        validate_merge_engine(self, table, opening=opening)

        if self.primary_keys and opts.bucket == -1 and opts.get(BUCKET_KEY):
            raise InvalidSchema(where + "bucket-key cannot be set in dynamic bucket mode (bucket=-1)")
        if not self.primary_keys and opts.bucket > 0 and not opts.get(BUCKET_KEY):
            raise InvalidSchema(where + f"an append table with bucket={opts.bucket} needs a 'bucket-key' option "
                                "naming the columns rows are hashed by (or bucket=-1 for bucket-unaware)")

    @property
    def cross_partition_update(self) -> bool:
        """True when the primary key lacks a partition field: a key may move between partitions."""
        return bool(self.primary_keys) and any(p not in self.primary_keys for p in self.partition_keys)

    @property
    def is_append_only(self) -> bool:
        """True for a table without primary key (an append table, engine.append)."""
        return not self.primary_keys

    # --- JSON ---------------------------------------------------------------------------------------
    def to_json(self) -> str:
        """The schema file's JSON text as Paimon writes it (camel-case keys, ``comment`` only when set);
        ``from_json(to_json())`` returns an equal schema."""
        out = {"version": self.version, "id": self.id, "fields": [f.to_json() for f in self.fields],
               "highestFieldId": self.highest_field_id, "partitionKeys": list(self.partition_keys),
               "primaryKeys": list(self.primary_keys), "options": dict(self.options)}
        if self.comment is not None:
            out["comment"] = self.comment
        out["timeMillis"] = self.time_millis
        return json.dumps(out, indent=2)

    @staticmethod
    def from_json(text: str | bytes, path: str = "") -> "TableSchema":
        """Parse a schema file (``path`` names it in errors). Applies Paimon's defaults for old versions (v1: bucket
        1, v<=2: file.format orc). Raises CorruptFile for anything that is not a valid Paimon schema."""
        try:
            obj = json.loads(text)
            version = int(obj.get("version", 1))
            options = {str(k): str(v) for k, v in (obj.get("options") or {}).items()}
            if version <= 1 and "bucket" not in options:
                options["bucket"] = "1"
            if version <= 2 and "file.format" not in options:
                options["file.format"] = "orc"
            comment = obj.get("comment")
            return TableSchema(
                id=int(obj["id"]), fields=tuple(DataField.from_json(f) for f in obj["fields"]),
                highest_field_id=int(obj["highestFieldId"]), partition_keys=tuple(obj.get("partitionKeys") or ()),
                primary_keys=tuple(obj.get("primaryKeys") or ()), options=options,
                comment=None if comment in (None, "null") else comment,
                time_millis=int(obj.get("timeMillis") or 0), version=version)
        except (ValueError, KeyError, TypeError, InvalidSchema) as e:
            raise CorruptFile(path or "<schema>", f"not a valid Paimon schema: {e}") from None

    # --- derived views ------------------------------------------------------------------------------
    @cached_property
    def field_names(self) -> tuple[str, ...]:
        """Column names in schema order."""
        return tuple(f.name for f in self.fields)

    def field(self, name: str) -> DataField:
        """The field named ``name``. Raises KeyError if there is none."""
        return self._by_name[name]

    @cached_property
    def _by_name(self) -> dict[str, DataField]:
        return {f.name: f for f in self.fields}

    @cached_property
    def trimmed_primary_keys(self) -> tuple[str, ...]:
        """Primary key minus partition keys, in primary-key order: the key stored in data files."""
        return tuple(k for k in self.primary_keys if k not in self.partition_keys)

    @cached_property
    def bucket_keys(self) -> tuple[str, ...]:
        """The columns hashed to pick a bucket: option ``bucket-key`` when set, else the trimmed primary key."""
        explicit = TableOptions(self.options).get(BUCKET_KEY)
        return tuple(explicit) if explicit else self.trimmed_primary_keys

    @cached_property
    def table_options(self) -> TableOptions:
        """The options parsed and typed (engine.options.TableOptions). Raises InvalidOption for a bad value."""
        return TableOptions(self.options)

    def types_of(self, names) -> list[DataType]:
        """The DataTypes of columns ``names``, in that order. Raises KeyError for an unknown name."""
        return [self._by_name[n].type for n in names]

    @cached_property
    def arrow_schema(self) -> pa.Schema:
        """The table's columns as Arrow sees them (what reads return)."""
        return pa.schema([pa.field(f.name, f.type.to_arrow(), nullable=f.type.nullable) for f in self.fields])

    @cached_property
    def file_arrow_schema(self) -> pa.Schema:
        """Physical schema of a primary-key data file, with Paimon field ids for Parquet. With
        ``data-file.thin-mode`` the ``_KEY_*`` copies are omitted (readers take keys from the value columns)."""
        def fid(i: int) -> dict:
            return {b"PARQUET:field_id": str(i).encode()}
        cols = []
        for k in (() if self.table_options.get(THIN_MODE) else self.trimmed_primary_keys):
            f = self._by_name[k]
            cols.append(pa.field(KEY_FIELD_PREFIX + k, f.type.to_arrow(), nullable=False,
                                 metadata=fid(f.id + KEY_FIELD_ID_START)))
        cols.append(pa.field(SEQUENCE_NUMBER, pa.int64(), nullable=False, metadata=fid(SEQUENCE_NUMBER_ID)))
        cols.append(pa.field(VALUE_KIND, pa.int8(), nullable=False, metadata=fid(VALUE_KIND_ID)))
        for f in self.fields:
            cols.append(pa.field(f.name, f.type.to_arrow(), nullable=f.type.nullable, metadata=fid(f.id)))
        return pa.schema(cols)
