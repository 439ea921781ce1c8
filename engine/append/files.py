"""Writing append-table data files in the table's ``file.format`` / ``file.compression`` (``engine.write.formats``):
only the table's columns (Parquet field ids = Paimon field ids), no key or system columns. Each file records the sequence-number range of its rows and full value statistics.

Contract: ``write_append_files`` writes ``rows`` (in order) as new files rolled near ``target-file-size`` with
consecutive sequence numbers from ``first_sequence``; it returns their ``DataFileMeta`` in order. On error the
files it created are removed.
"""
from __future__ import annotations

import os
import uuid

import pyarrow as pa

from engine.data_paths import placer_for
from engine.io.file_io import FileIO
from engine.meta.data_file import (
    EMPTY_ROW,
    FILE_SOURCE_APPEND,
    DataFileMeta,
    SimpleStats,
)
from engine.options import DATA_FILE_PREFIX, STATS_DENSE_STORE, STATS_MODE, TARGET_FILE_ROW_NUM, TARGET_FILE_SIZE
from engine.schema import TableSchema
from engine.write.file_writer import local_millis_as_utc
from engine.write.formats import append_file_format, file_extension
from engine.write.stats import stats_modes, value_stats

APPEND_TARGET_FILE_SIZE = 256 << 20  # Paimon's default target-file-size for append tables


def target_file_size(schema: TableSchema) -> int:
    """``target-file-size`` if set, else Paimon's append-table default (256 MB; primary-key tables: 128 MB)."""
    return schema.table_options.get(TARGET_FILE_SIZE) if TARGET_FILE_SIZE in schema.options \
        else APPEND_TARGET_FILE_SIZE


def append_file_schema(schema: TableSchema) -> pa.Schema:
    """Physical schema of an append data file: the table columns with their Paimon field ids."""
    return pa.schema([pa.field(f.name, f.type.to_arrow(), nullable=f.type.nullable,
                               metadata={b"PARQUET:field_id": str(f.id).encode()}) for f in schema.fields])


def write_append_files(io: FileIO, bucket_dir: str, rows: pa.Table, schema: TableSchema, first_sequence: int,
                       file_source: int = FILE_SOURCE_APPEND) -> list[DataFileMeta]:
    """Write ``rows`` as append data files in ``bucket_dir``, split near the target file size, with sequence
    numbers from ``first_sequence``.
    Returns one DataFileMeta per file written; an empty table writes nothing and returns []."""
    n = rows.num_rows
    if n == 0:
        return []
    opts = schema.table_options
    rows = pa.Table.from_arrays(rows.select(list(schema.field_names)).columns, schema=append_file_schema(schema))
    rows_per_file = max(1, int(target_file_size(schema) / max(1.0, rows.nbytes / n)))
    if file_source == FILE_SOURCE_APPEND:  # Paimon's AppendOnlyWriter: at write time only (compaction is by size)
        rows_per_file = min(rows_per_file, opts.get(TARGET_FILE_ROW_NUM))
    names = list(schema.field_names)
    types = schema.types_of(names)
    modes = stats_modes(opts, names, opts.get(STATS_MODE))  # before any file is written: a bad mode raises
    prefix = opts.get(DATA_FILE_PREFIX)
    fmt = append_file_format(schema)
    file_uuid = uuid.uuid4()
    placer = placer_for(bucket_dir, schema)
    written: list[str] = []
    metas: list[DataFileMeta] = []
    try:
        for i, start in enumerate(range(0, n, rows_per_file)):
            part = rows.slice(start, rows_per_file)
            name = f"{prefix}{file_uuid}-{i}{file_extension(schema, fmt.name)}"
            path, external = placer.place(name)
            data = fmt.encode(part, schema)
            io.mkdirs(os.path.dirname(path))
            io.write_bytes(path, data)
            written.append(path)
            stats, stats_cols = value_stats(part, names, types, modes, opts.get(STATS_DENSE_STORE))
            seq0 = first_sequence + start
            metas.append(DataFileMeta(
                file_name=name, file_size=len(data), row_count=part.num_rows, min_key=EMPTY_ROW, max_key=EMPTY_ROW,
                key_stats=SimpleStats.EMPTY, value_stats=stats, min_sequence_number=seq0,
                max_sequence_number=seq0 + part.num_rows - 1, schema_id=schema.id, level=0, extra_files=(),
                creation_time_millis=local_millis_as_utc(), delete_row_count=0, embedded_index=None,
                file_source=file_source, value_stats_cols=stats_cols,
                external_path=external))
    except BaseException:
        for p in written:
            io.delete(p)
        raise
    return metas
