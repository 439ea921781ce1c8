"""Encoding data files in a table's file format: Parquet, ORC or Avro, as Paimon writes them.

Contract:
- ``DataFileFormat`` is one (format, codec, zstd level) choice; ``data_file_format(schema, level, changelog=...)``
  picks it as Paimon's KeyValueFileWriterFactory does (``changelog-file.format`` / ``changelog-file.compression``
  for changelog files, else ``file.format.per.level`` / ``file.compression.per.level`` for the level, else
  ``file.format`` / ``file.compression``); ``append_file_format`` is the append tables' choice (``file.format``,
  ``file.compression``, no per-level settings, as Paimon's append writer).
- ``encode(rows)`` returns the bytes of one complete file; ``open_writer(sink, file_schema)`` streams a file in
  pieces (``write(rows)`` in order, ``close()``). The file name extension is ``DataFileFormat.name``.
- Parquet files: page checksums, no stored Arrow schema, field ids from the file schema, encodings chosen from the
  data (``engine.write.encodings``), row groups of ROW_GROUP_ROWS rows.
- ORC files carry the column names (Paimon's ORC reader matches columns by name; the ``paimon.id`` type attributes
  Paimon's writer adds are never read back, and pyarrow cannot set them). TIME is stored as an int of milliseconds,
  as Paimon does; ORC has no codec level, so ``file.compression.zstd-level`` does not apply.
- Avro files use Paimon's schema (AvroSchemaConverter): record ``org.apache.paimon.avro.generated.record``, nested
  rows named ``<parent>_<field>``, nullable types as ``["null", t]`` unions with a null default, logical types for
  decimal (bytes), date, time-millis, timestamp-millis/micros (TIMESTAMP) and local-timestamp-millis/micros
  (TIMESTAMP_LTZ). Codec names: zstd -> zstandard (with the zstd level), snappy, deflate, null.
  Maps with string keys are Avro maps, other maps arrays of ``key`` / ``value`` records with logical type ``map``.
- A column a format cannot hold faithfully raises UnsupportedFeature naming it (nothing is written): MULTISET in ORC
  and Avro, TIME nested in ORC, TIMESTAMP precision > 6 and TIME precision > 3 in Avro (Paimon refuses those too),
  and ORC timestamp values outside 1677-2262 (pyarrow, lakemerge's and pypaimon's ORC reader, decodes them as
  nanoseconds; Paimon's Java reader would read them).
"""
from __future__ import annotations

import datetime as _dt
import io
import re
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import InvalidOption, UnsupportedFeature
from engine.options import (FILE_COMPRESSION, FILE_SUFFIX_INCLUDE_COMPRESSION, TARGET_FILE_SIZE, ZSTD_LEVEL,
                            TableOptions)
from engine.schema import KEY_FIELD_PREFIX, SEQUENCE_NUMBER, VALUE_KIND, TableSchema
from engine.types import DataType

WRITABLE_FORMATS = ("parquet", "orc", "avro")
# Data file formats Paimon knows; lakemerge writes WRITABLE_FORMATS and refuses to write the others.
PAIMON_FORMATS = WRITABLE_FORMATS + ("csv", "json", "text", "lance", "mosaic", "vortex", "blob", "row")

# file.compression value -> the codec name of each format's writer (None: no compression). A value missing for a
# format is not a codec of that format (Paimon's writer refuses it too: ORC CompressionKind, Avro CodecFactory).
CODECS: dict[str, dict[str, str | None]] = {
    "parquet": {"zstd": "zstd", "snappy": "snappy", "lz4": "lz4", "gzip": "gzip", "none": None, "uncompressed": None},
    "orc": {"zstd": "zstd", "snappy": "snappy", "lz4": "lz4", "zlib": "zlib", "none": "uncompressed",
            "uncompressed": "uncompressed"},
    "avro": {"zstd": "zstandard", "zstandard": "zstandard", "snappy": "snappy", "deflate": "deflate", "null": "null",
             "none": "null", "uncompressed": "null", "bzip2": "bzip2", "xz": "xz"},
}
ALL_CODECS = tuple(dict.fromkeys(c for codecs in CODECS.values() for c in codecs))

AVRO_RECORD_NAME = "org.apache.paimon.avro.generated.record"
ORC_STRIPE_SIZE = 64 << 20  # ORC's default stripe size (orc.stripe.size), as Paimon writes
_SYSTEM_TYPES = {SEQUENCE_NUMBER: DataType("BIGINT", False), VALUE_KIND: DataType("TINYINT", False)}


def codec_of(fmt: str, compression: str) -> str | None:
    """The writer codec name of ``compression`` in format ``fmt``. Raises InvalidOption when ``fmt`` has no such
    codec (``TableOptions.check_file_formats`` names the option first on every write path that checks)."""
    try:
        return CODECS[fmt][compression]
    except KeyError:
        raise InvalidOption("file.compression", compression, f"not a {fmt} codec") from None


@dataclass(frozen=True)
class DataFileFormat:
    """How one data file is encoded: ``name`` (parquet, orc or avro; also the file name extension), the
    ``file.compression`` value, the zstd level and the ORC stripe size (an ORC file grows on disk a stripe at a
    time, so rolling files near a target size smaller than a stripe needs smaller stripes)."""
    name: str
    compression: str
    zstd_level: int
    orc_stripe_size: int = ORC_STRIPE_SIZE

    def encode(self, rows: pa.Table, schema: TableSchema, *, dictionary: bool = True) -> bytes:
        """The bytes of one file holding ``rows`` (a data-file layout of ``schema``). ``dictionary=False`` writes
        Parquet without dictionaries. Raises UnsupportedFeature for a column the format cannot hold."""
        if self.name == "parquet":
            return parquet_bytes(rows, self.compression, self.zstd_level, dictionary)
        sink = io.BytesIO()
        writer = self.open_writer(sink, rows.schema, schema, rows)
        writer.write(rows)
        writer.close()
        return sink.getvalue()

    def open_writer(self, sink, file_schema: pa.Schema, schema: TableSchema, first: pa.Table):
        """A streaming writer of one file into ``sink`` (a binary file object, left open): ``write(rows)`` appends
        rows of ``file_schema``, ``close()`` completes the file. ``first`` (the first rows) chooses Parquet
        encodings. Raises UnsupportedFeature for a column the format cannot hold."""
        if self.name == "parquet":
            return _ParquetStream(sink, file_schema, self, first)
        if self.name == "orc":
            return _OrcStream(sink, file_schema, schema, self)
        if self.name == "avro":
            return _AvroStream(sink, file_schema, schema, self)
        raise UnsupportedFeature(f"lakemerge cannot write {self.name} data files")


def data_file_format(schema: TableSchema, level: int, *, changelog: bool = False,
                     options: TableOptions | None = None) -> DataFileFormat:
    """The format of a primary-key table's data file at ``level`` (a changelog file when ``changelog``):
    ``TableOptions.file_format_of`` of ``options`` (default: the table's)."""
    opts = schema.table_options if options is None else options
    return _format(schema, *opts.file_format_of(level, changelog=changelog))


def append_file_format(schema: TableSchema) -> DataFileFormat:
    """The format of an append table's data files: ``file.format`` and ``file.compression`` (no per-level
    settings, as Paimon's append writer)."""
    return _format(schema, *schema.table_options.file_format_of(0, per_level=False))


def _format(schema: TableSchema, fmt: str, codec: str) -> DataFileFormat:
    opts = schema.table_options
    return DataFileFormat(fmt, codec, opts.get(ZSTD_LEVEL), min(ORC_STRIPE_SIZE, opts.get(TARGET_FILE_SIZE)))


def check_columns_writable(schema: TableSchema, table: str) -> None:
    """Every column can be written in every format the options choose for some file of the table: ``file.format``;
    for primary-key tables also the ``file.format.per.level`` entries and, with a changelog producer,
    ``changelog-file.format``. Raises UnsupportedFeature naming the table and column, before anything is written
    (else writes would succeed until the first compaction to such a level, and every write after it would fail).
    Primary-key writers check it when they start (TableWrite)."""
    from engine.options import CHANGELOG_FILE_FORMAT, CHANGELOG_PRODUCER, FILE_FORMAT_PER_LEVEL
    opts = schema.table_options
    formats = {opts.file_format_of(0, per_level=False)[0]}
    if not schema.is_append_only:
        formats |= set(opts.get(FILE_FORMAT_PER_LEVEL).values())
        if opts.get(CHANGELOG_PRODUCER) != "none" and opts.get(CHANGELOG_FILE_FORMAT):
            formats.add(opts.get(CHANGELOG_FILE_FORMAT))
    for f in schema.fields:
        try:
            if "orc" in formats:
                _check_orc(f.name, f.type)
            if "avro" in formats:
                _check_avro_name(f.name, f.name)
                _avro_type(f.name, f.type, AVRO_RECORD_NAME)
        except UnsupportedFeature as e:
            raise UnsupportedFeature(f"table {table!r}: {e}") from None


def check_new_schema_formats(schema: TableSchema, table: str | None = None) -> None:
    """Paimon's SchemaValidation of the columns against the formats, made when a schema is created or altered:
    with ``file.format`` avro every column (nested ones too) must have an Avro type, and a ``file.format.per.level``
    avro entry needs every top-level TIMESTAMP / TIMESTAMP_LTZ of precision <= 6. Raises InvalidSchema naming the
    column (else a table would take writes whose compaction to an Avro level can never succeed)."""
    from engine.errors import InvalidSchema
    from engine.options import FILE_FORMAT, FILE_FORMAT_PER_LEVEL
    opts = schema.table_options
    where = f"table {table!r}: " if table else ""

    def too_precise(t: DataType, nested: bool) -> str | None:
        p = t.precision
        if t.root in ("TIMESTAMP", "TIMESTAMP_LTZ") and (6 if p is None else p) > 6:
            return f"Avro holds timestamps of precision up to 6, not {p}"
        if nested and t.root == "TIME" and (p or 0) > 3:
            return f"Avro holds TIME of precision up to 3, not {p}"
        if nested:
            return next((m for c in _children(t) if (m := too_precise(c, True))), None)
        return None

    checks = []
    if opts.get(FILE_FORMAT) == "avro":
        checks.append((FILE_FORMAT, "avro", True))
    checks += [(FILE_FORMAT_PER_LEVEL, f"{level}:avro", False)
               for level, fmt in sorted(opts.get(FILE_FORMAT_PER_LEVEL).items()) if fmt == "avro"]
    for key, value, nested in checks:
        for f in schema.fields:
            message = too_precise(f.type, nested)
            if message:
                raise InvalidSchema(where + f"{key} {value!r} is incompatible with column {f.name!r} of type "
                                    f"{f.type.sql()}: {message}")


# Paimon's HadoopCompressionType file extensions (other codecs are named as they are; none adds nothing).
_CODEC_EXTENSIONS = {"none": None, "gzip": "gz", "bzip2": "bz2", "deflate": "deflate", "snappy": "snappy",
                     "lz4": "lz4", "zstd": "zst"}


def file_extension(schema: TableSchema, fmt: str) -> str:
    """The extension of a new data or changelog file in format ``fmt``: ``.<format>``, or with
    ``file.suffix.include.compression`` ``.<codec extension>.<format>`` where the codec is ``file.compression`` (as
    Paimon's DataFilePathFactory: the table's file.compression whatever the level or the format's own codec option;
    zstd -> zst, gzip -> gz, none -> no codec part)."""
    opts = schema.table_options
    if not opts.get(FILE_SUFFIX_INCLUDE_COMPRESSION):
        return f".{fmt}"
    codec = opts.get(FILE_COMPRESSION)
    ext = _CODEC_EXTENSIONS.get(codec, codec)
    return f".{ext}.{fmt}" if ext else f".{fmt}"


def format_of_file(file_name: str) -> str:
    """The format of a data file, from its name's extension (lower case)."""
    return file_name.rsplit(".", 1)[-1].lower()


def physical_types(file_schema: pa.Schema, schema: TableSchema) -> list[DataType]:
    """The Paimon type of each column of a data file of ``schema``: ``_KEY_<k>`` is ``k`` NOT NULL, the system
    columns BIGINT / TINYINT NOT NULL, the others the table's columns."""
    out = []
    for f in file_schema:
        if f.name in _SYSTEM_TYPES:
            out.append(_SYSTEM_TYPES[f.name])
        elif f.name.startswith(KEY_FIELD_PREFIX) and f.name not in schema.field_names:
            out.append(schema.field(f.name[len(KEY_FIELD_PREFIX):]).type.with_nullable(False))
        else:
            out.append(schema.field(f.name).type)
    return out


# --- Parquet ---------------------------------------------------------------------------------------------------
# Row groups small enough for point lookups and file skipping, large enough for scan speed.
ROW_GROUP_ROWS = 256 * 1024


def parquet_bytes(table: pa.Table, compression: str, level: int, dictionary: bool = True) -> bytes:
    """Parquet bytes of ``table`` with encodings chosen from its data (``engine.write.encodings``);
    ``dictionary=False`` uses no dictionaries (write-once, scan-once files such as changelog files)."""
    import pyarrow.parquet as pq

    from engine.write.encodings import parquet_encodings
    sink = io.BytesIO()
    kwargs = parquet_encodings(table, dictionary=dictionary)
    if compression == "zstd":
        kwargs["compression_level"] = level
    pq.write_table(table, sink, compression=codec_of("parquet", compression), row_group_size=ROW_GROUP_ROWS,
                   write_page_checksum=True, store_schema=False, **kwargs)
    return sink.getvalue()


class _ParquetStream:
    def __init__(self, sink, file_schema: pa.Schema, fmt: DataFileFormat, first: pa.Table):
        import pyarrow.parquet as pq

        from engine.write.encodings import parquet_encodings
        kwargs = parquet_encodings(first)  # chosen from the file's first row group
        if fmt.compression == "zstd":
            kwargs["compression_level"] = fmt.zstd_level
        self._writer = pq.ParquetWriter(sink, file_schema, compression=codec_of("parquet", fmt.compression),
                                        write_page_checksum=True, store_schema=False, **kwargs)

    def write(self, rows: pa.Table) -> None:
        self._writer.write_table(rows, row_group_size=rows.num_rows)

    def close(self) -> None:
        self._writer.close()


# --- ORC -------------------------------------------------------------------------------------------------------
def _check_orc(name: str, t: DataType, nested: bool = False) -> None:
    if t.root == "MULTISET":
        raise UnsupportedFeature(f"column {name!r}: lakemerge cannot write MULTISET columns to ORC files "
                                 "(Paimon stores them as ORC maps)")
    if t.root == "TIME" and nested:
        raise UnsupportedFeature(f"column {name!r}: lakemerge cannot write TIME inside nested types to ORC files")
    for child in _children(t):
        _check_orc(name, child, True)


def _has_timestamp(t: DataType) -> bool:
    return t.root in ("TIMESTAMP", "TIMESTAMP_LTZ") or any(_has_timestamp(c) for c in _children(t))


def _check_orc_timestamps(name: str, col) -> None:
    """pyarrow's ORC reader decodes timestamps as nanoseconds: a value outside 1677-09-21 .. 2262-04-11 would be
    written fine but read back overflowed (lakemerge and pypaimon read ORC with pyarrow). Raises
    UnsupportedFeature naming the column."""
    for leaf in _timestamp_leaves(col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col):
        try:
            leaf.cast(pa.timestamp("ns", tz=leaf.type.tz))
        except pa.ArrowInvalid:
            raise UnsupportedFeature(f"column {name!r}: lakemerge writes ORC timestamps between 1677-09-21 and "
                                     "2262-04-11 only (pyarrow's ORC reader decodes nanoseconds); use parquet "
                                     "or avro") from None


def _timestamp_leaves(arr: pa.Array):
    t = arr.type
    if pa.types.is_timestamp(t):
        yield arr
    elif pa.types.is_struct(t):
        for child in arr.flatten():
            yield from _timestamp_leaves(child)
    elif pa.types.is_map(t):
        entries = arr.cast(pa.list_(pa.field("entries", pa.struct([t.key_field, t.item_field]), False))).flatten()
        for child in entries.flatten():
            yield from _timestamp_leaves(child)
    elif pa.types.is_list(t) or pa.types.is_large_list(t):
        yield from _timestamp_leaves(arr.flatten())


class _OrcStream:
    def __init__(self, sink, file_schema: pa.Schema, schema: TableSchema, fmt: DataFileFormat):
        from pyarrow import orc
        types = physical_types(file_schema, schema)
        for f, t in zip(file_schema, types):
            _check_orc(f.name, t)
        self._time = [i for i, t in enumerate(types) if t.root == "TIME"]
        self._timestamps = [i for i, t in enumerate(types) if _has_timestamp(t)]
        self._writer = orc.ORCWriter(sink, compression=codec_of("orc", fmt.compression),
                                     stripe_size=fmt.orc_stripe_size)

    def write(self, rows: pa.Table) -> None:
        for i in self._time:  # Paimon's ORC TIME: int milliseconds of the day (pyarrow has no ORC time type)
            rows = rows.set_column(i, pa.field(rows.field(i).name, pa.int32(), rows.field(i).nullable),
                                   rows.column(i).cast(pa.int32()))
        for i in self._timestamps:
            _check_orc_timestamps(rows.field(i).name, rows.column(i))
        self._writer.write(rows)

    def close(self) -> None:
        self._writer.close()


# --- Avro ------------------------------------------------------------------------------------------------------
def avro_schema(names: list[str], types: list[DataType]) -> dict:
    """The Avro schema Paimon writes for columns ``names`` of ``types`` (AvroSchemaConverter). Raises
    UnsupportedFeature for a column Avro cannot hold here."""
    fields = []
    for name, t in zip(names, types):
        _check_avro_name(name, name)
        field = {"name": name, "type": _avro_type(name, t, f"{AVRO_RECORD_NAME}_{name}")}
        if t.nullable:
            field["default"] = None
        fields.append(field)
    return {"type": "record", "name": AVRO_RECORD_NAME, "fields": fields}


_AVRO_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _check_avro_name(column: str, name: str) -> None:
    """Avro names are [A-Za-z_][A-Za-z0-9_]*: Paimon's AvroSchemaConverter (Avro's SchemaBuilder) refuses any other
    field name, and Java's Avro reader would refuse a file carrying one, so lakemerge does not write it either."""
    if not _AVRO_NAME.fullmatch(name):
        where = f"column {column!r}" if name == column else f"field {name!r} of column {column!r}"
        raise UnsupportedFeature(f"{where}: Avro field names must match [A-Za-z_][A-Za-z0-9_]* (Paimon's Avro "
                                 "writer refuses the name too); use parquet or orc for this table")


def _avro_type(column: str, t: DataType, row_name: str):
    r = t.root
    if r in ("BOOLEAN",):
        s = "boolean"
    elif r in ("TINYINT", "SMALLINT", "INT"):
        s = "int"
    elif r == "BIGINT":
        s = "long"
    elif r == "FLOAT":
        s = "float"
    elif r == "DOUBLE":
        s = "double"
    elif t.is_string:
        s = "string"
    elif t.is_binary:
        s = "bytes"
    elif r == "DATE":
        s = {"type": "int", "logicalType": "date"}
    elif r == "TIME":
        if (t.precision or 0) > 3:
            raise UnsupportedFeature(f"column {column!r}: Avro holds TIME of precision up to 3, not {t.precision}")
        s = {"type": "int", "logicalType": "time-millis"}
    elif r in ("TIMESTAMP", "TIMESTAMP_LTZ"):
        p = 6 if t.precision is None else t.precision
        if p > 6:
            raise UnsupportedFeature(f"column {column!r}: Avro holds timestamps of precision up to 6, not {p}")
        unit = "millis" if p <= 3 else "micros"
        s = {"type": "long", "logicalType": ("local-timestamp-" if r == "TIMESTAMP_LTZ" else "timestamp-") + unit}
    elif r == "DECIMAL":
        s = {"type": "bytes", "logicalType": "decimal", "precision": t.precision, "scale": t.scale}
    elif r == "ARRAY":
        s = {"type": "array", "items": _avro_type(column, t.element, row_name)}
    elif r == "ROW":
        fields = []
        for f in t.fields:
            _check_avro_name(column, f.name)
            field = {"name": f.name, "type": _avro_type(column, f.type, f"{row_name}_{f.name}")}
            if f.type.nullable:
                field["default"] = None
            fields.append(field)
        s = {"type": "record", "name": row_name, "fields": fields}
    elif r == "MAP" and t.key.is_string:
        s = {"type": "map", "values": _avro_type(column, t.value, row_name)}
    elif r == "MAP":  # Avro maps have string keys: Paimon writes an array of key/value records marked "map"
        value = {"name": "value", "type": _avro_type(column, t.value, f"{row_name}_value")}
        if t.value.nullable:
            value["default"] = None
        entry = {"type": "record", "name": row_name,
                 "fields": [{"name": "key", "type": _avro_type(column, t.key, f"{row_name}_key")}, value]}
        s = {"type": "array", "items": entry, "logicalType": "map"}
    else:  # MULTISET
        raise UnsupportedFeature(f"column {column!r}: lakemerge cannot write {r} columns to Avro files "
                                 "(Paimon stores them as maps of counts)")
    return ["null", s] if t.nullable else s


def _children(t: DataType) -> list[DataType]:
    if t.root in ("ARRAY", "MULTISET"):
        return [t.element]
    if t.root == "MAP":
        return [t.key, t.value]
    if t.root == "ROW":
        return [f.type for f in t.fields]
    return []


_EPOCH = _dt.datetime(1970, 1, 1)
_EPOCH_UTC = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)


def _avro_column(col, t: DataType) -> list:
    """Python values of one column as fastavro writes them for Paimon's Avro type of ``t``: timestamps, dates and
    times as the integers of their logical types, decimals as Decimal, rows as dicts."""
    if t.root in ("TIMESTAMP", "TIMESTAMP_LTZ"):
        unit = "ms" if (6 if t.precision is None else t.precision) <= 3 else "us"
        col = col.cast(pa.timestamp(unit, tz=col.type.tz))
        return pc.cast(col, pa.int64()).to_pylist()
    if t.root in ("DATE", "TIME"):
        return pc.cast(col, pa.int32()).to_pylist()
    values = col.to_pylist()
    if t.is_nested and _needs_conversion(t):
        return [_avro_value(v, t) for v in values]
    return values


def _needs_conversion(t: DataType) -> bool:
    return t.root in ("TIMESTAMP", "TIMESTAMP_LTZ", "DATE", "TIME", "MAP") \
        or any(_needs_conversion(c) for c in _children(t))


def _avro_value(v, t: DataType):
    if v is None:
        return None
    r = t.root
    if r in ("TIMESTAMP", "TIMESTAMP_LTZ"):
        delta = v - (_EPOCH_UTC if v.tzinfo is not None else _EPOCH)
        micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
        return micros // 1000 if (6 if t.precision is None else t.precision) <= 3 else micros
    if r == "DATE":
        return (v - _dt.date(1970, 1, 1)).days
    if r == "TIME":
        return ((v.hour * 60 + v.minute) * 60 + v.second) * 1000 + v.microsecond // 1000
    if r == "ARRAY":
        return [_avro_value(x, t.element) for x in v]
    if r == "ROW":
        return {f.name: _avro_value(v.get(f.name), f.type) for f in t.fields}
    if r == "MAP" and t.key.is_string:
        return {k: _avro_value(x, t.value) for k, x in v}
    if r == "MAP":
        return [{"key": _avro_value(k, t.key), "value": _avro_value(x, t.value)} for k, x in v]
    return v


class _AvroStream:
    def __init__(self, sink, file_schema: pa.Schema, schema: TableSchema, fmt: DataFileFormat):
        import fastavro
        from fastavro.write import Writer
        self._names = list(file_schema.names)
        self._types = physical_types(file_schema, schema)
        parsed = fastavro.parse_schema(avro_schema(self._names, self._types))
        codec = codec_of("avro", fmt.compression)
        # Paimon: file.compression zstd -> zstandard at file.compression.zstd-level; "zstandard" itself (e.g. from
        # avro.codec) -> Avro's default level
        level = {"compression_level": fmt.zstd_level} if fmt.compression == "zstd" else {}
        self._writer = Writer(sink, parsed, codec, **level)

    def write(self, rows: pa.Table) -> None:
        columns = [_avro_column(rows.column(i), t) for i, t in enumerate(self._types)]
        names = self._names
        write = self._writer.write
        for values in zip(*columns):
            write(dict(zip(names, values)))

    def close(self) -> None:
        self._writer.flush()
