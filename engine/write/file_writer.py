"""Write one sorted run of a bucket as Paimon data files (format spec §10.1; Parquet, ORC or Avro as the table's
``file.format`` options choose, ``engine.write.formats``) and describe them.

Contract: ``write_sorted_run`` receives rows already sorted by key with at most one row per key, in the physical
data-file layout (``_KEY_*``, ``_SEQUENCE_NUMBER``, ``_VALUE_KIND``, table columns). It rolls files near
``target-file-size`` and returns one ``DataFileMeta`` per file with exact row, delete and sequence counts, min/max
keys and statistics. Files are created new (never overwritten); on error, files it created are removed.
"""
from __future__ import annotations

import dataclasses
import os
import time
import uuid

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.crash_points import crash_point
from engine.data_paths import placer_for
from engine.io.file_io import FileIO
from engine.meta import binary_row
from engine.meta.data_file import FILE_SOURCE_APPEND, DataFileMeta
from engine.options import DATA_FILE_PREFIX, STATS_DENSE_STORE, STATS_MODE, TARGET_FILE_ROW_NUM, TARGET_FILE_SIZE
from engine.schema import KEY_FIELD_PREFIX, SEQUENCE_NUMBER, VALUE_KIND, TableSchema
from engine.write.formats import DataFileFormat, data_file_format, file_extension
from engine.write.stats import kv_stats_modes, simple_stats, value_stats


def local_millis_as_utc() -> int:
    """Paimon's _CREATION_TIME: local wall-clock time encoded as if it were UTC."""
    now = time.time()
    return int((now + time.localtime(now).tm_gmtoff) * 1000)


def write_sorted_run(io_: FileIO, bucket_dir: str, rows: pa.Table, schema: TableSchema, level: int = 0,
                     file_source: int = FILE_SOURCE_APPEND, prefix: str | None = None, *,
                     file_format: DataFileFormat | None = None, stats_mode: str | None = None,
                     dictionary: bool = True, row_target: bool = True,
                     stats_mode_key: str = STATS_MODE) -> list[DataFileMeta]:
    """Files are written in ``file_format`` (default: the format of ``level``, ``engine.write.formats``);
    ``stats_mode`` overrides the stats mode of ``level`` (default: ``TableOptions.stats_mode_of``; changelog files
    use their own options; ``stats_mode_key`` names the option it comes from in errors);
    ``dictionary=False`` writes plain Parquet encodings. Files roll at ``target-file-size`` and, for
    FILE_SOURCE_APPEND files unless ``row_target=False`` (changelog files), at ``target-file-row-num``. Raises
    UnsupportedFeature (nothing written) for a column the format cannot hold."""
    opts = schema.table_options
    target = opts.get(TARGET_FILE_SIZE)
    fmt = data_file_format(schema, level) if file_format is None else file_format
    if stats_mode is None:
        stats_mode, stats_mode_key = opts.stats_mode_of(level)
    key_cols = [KEY_FIELD_PREFIX + k if KEY_FIELD_PREFIX + k in schema.file_arrow_schema.names else k
                for k in schema.trimmed_primary_keys]
    key_modes, value_modes = kv_stats_modes(opts, key_cols, schema.field_names, fmt.name, stats_mode,
                                            default_key=stats_mode_key)
    dense = opts.get(STATS_DENSE_STORE)
    prefix = opts.get(DATA_FILE_PREFIX) if prefix is None else prefix
    n = rows.num_rows
    if n == 0:
        return []
    # In-memory size overestimates the compressed file, so files come out at or below the target size.
    bytes_per_row = max(1.0, rows.nbytes / n)
    rows_per_file = max(1, int(target / bytes_per_row))
    if file_source == FILE_SOURCE_APPEND and row_target:  # Paimon's KeyValueFileWriterFactory: not for
        # compaction output nor changelog files
        rows_per_file = min(rows_per_file, opts.get(TARGET_FILE_ROW_NUM))
    placer = placer_for(bucket_dir, schema)
    key_names = list(schema.trimmed_primary_keys)
    key_types = schema.types_of(key_names)
    value_names = list(schema.field_names)
    value_types = schema.types_of(value_names)
    file_uuid = uuid.uuid4()
    metas: list[DataFileMeta] = []
    written: list[str] = []
    try:
        for i, start in enumerate(range(0, n, rows_per_file)):
            part = rows.slice(start, rows_per_file)
            name = f"{prefix}{file_uuid}-{i}{file_extension(schema, fmt.name)}"
            path, external = placer.place(name)
            data = fmt.encode(part, schema, dictionary=dictionary)
            crash_point("write.before-data-file")
            io_.mkdirs(os.path.dirname(path))
            io_.write_bytes(path, data)
            written.append(path)
            crash_point("write.after-data-file")
            metas.append(dataclasses.replace(
                _describe(name, len(data), part, key_names, key_types, value_names, value_types, schema.id, level,
                          file_source, key_modes, value_modes, dense), external_path=external))
    except BaseException:
        for p in written:
            io_.delete(p)
        raise
    return metas


def _describe(name, size, part: pa.Table, key_names, key_types, value_names, value_types, schema_id, level,
              file_source, key_modes, value_modes, dense) -> DataFileMeta:
    key_cols = [KEY_FIELD_PREFIX + k if KEY_FIELD_PREFIX + k in part.column_names else k for k in key_names]
    first = [part.column(c)[0].as_py() for c in key_cols]
    last = [part.column(c)[part.num_rows - 1].as_py() for c in key_cols]
    kinds = part.column(VALUE_KIND)
    seq = part.column(SEQUENCE_NUMBER)
    seq_mm = pc.min_max(seq)
    deletes = int(pc.sum(pc.is_in(kinds, value_set=pa.array([1, 3], pa.int8()))).as_py() or 0)
    key_part = part.select(key_cols).rename_columns(key_names)
    key_stats = simple_stats(key_part, key_names, key_types, key_modes, keep_columns=True)
    values, value_cols = value_stats(part, value_names, value_types, value_modes, dense)
    return DataFileMeta(
        file_name=name, file_size=size, row_count=part.num_rows,
        min_key=binary_row.serialize_row(first, key_types), max_key=binary_row.serialize_row(last, key_types),
        key_stats=key_stats, value_stats=values,
        min_sequence_number=int(seq_mm["min"].as_py()), max_sequence_number=int(seq_mm["max"].as_py()),
        schema_id=schema_id, level=level, extra_files=(), creation_time_millis=local_millis_as_utc(),
        delete_row_count=deletes, embedded_index=None, file_source=file_source,
        value_stats_cols=value_cols,
    )


def physical_table(rows: pa.Table, seq: np.ndarray, kinds: np.ndarray, schema: TableSchema) -> pa.Table:
    """Table columns -> data-file layout: _KEY_* copies, _SEQUENCE_NUMBER, _VALUE_KIND, then the columns."""
    file_schema = schema.file_arrow_schema
    arrays = [rows.column(k) for k in schema.trimmed_primary_keys if KEY_FIELD_PREFIX + k in file_schema.names]
    arrays.append(pa.array(seq, pa.int64()))
    arrays.append(pa.array(kinds, pa.int8()))
    arrays.extend(rows.columns)
    return pa.Table.from_arrays(arrays, schema=file_schema)
