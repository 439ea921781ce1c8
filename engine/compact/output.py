"""Streaming output of a compaction: sorted physical rows in, rolling data files out (in the format of the output
level, ``engine.write.formats``: Parquet row groups, ORC stripes, Avro blocks).

``RollingRunWriter.add(rows)`` takes consecutive pieces of one sorted run (physical data-file layout, see
``engine.write.file_writer.physical_table``); rows are buffered only up to one Parquet row group, encoded into the
current file as they come (streamed to disk when the FileIO can ``open_new``), and the file is closed at
``target-file-size`` of *encoded* bytes (as Paimon rolls).
File metadata (keys, sequence range, delete count, key and value statistics) is accumulated piece by piece and is
exactly what ``write_sorted_run`` records for the same rows. Memory: one row group of rows (plus the encoded file
for FileIOs that cannot stream, and for ORC the stripe pyarrow's ORC writer buffers, 64 MB at most).
On ``abort`` (or an error) the files written so far are deleted.
"""
from __future__ import annotations

import io
import os
import uuid

import pyarrow as pa
import pyarrow.compute as pc

from engine.crash_points import crash_point
from engine.data_paths import placer_for
from engine.meta import binary_row
from engine.meta.data_file import FILE_SOURCE_COMPACT, DataFileMeta, SimpleStats
from engine.options import DATA_FILE_PREFIX, STATS_DENSE_STORE, TARGET_FILE_SIZE
from engine.schema import KEY_FIELD_PREFIX, SEQUENCE_NUMBER, VALUE_KIND, TableSchema
from engine.types import DataType
from engine.write.file_writer import local_millis_as_utc
from engine.write.formats import ROW_GROUP_ROWS, data_file_format, file_extension
from engine.write.stats import column_min_max, dense_columns, kv_stats_modes


class _ColumnStats:
    """Min / max / null count of one column merged over pieces; ``claims`` False once a piece proves nothing."""

    def __init__(self, dtype: DataType, mode: str):
        self.dtype, self.mode = dtype, mode
        self.lo = self.hi = None
        self.lo_ok = self.hi_ok = True
        self.nulls = 0

    def add(self, col) -> None:
        if self.mode == "none":  # no min, max nor null count
            self.nulls = None
            return
        lo, hi, nulls = column_min_max(col, self.dtype, self.mode)
        self.nulls += nulls
        if nulls == len(col):
            return
        if lo is None:
            self.lo_ok = False
        elif self.lo_ok:
            self.lo = lo if self.lo is None else min(self.lo, lo)
        if hi is None:
            self.hi_ok = False
        elif self.hi_ok:
            self.hi = hi if self.hi is None else max(self.hi, hi)

    def result(self):
        if self.dtype.is_nested:
            return None, None, self.nulls
        return (self.lo if self.lo_ok else None), (self.hi if self.hi_ok else None), self.nulls


def _serialize(stats: list[_ColumnStats], types: list[DataType]) -> SimpleStats:
    stat_types = [DataType("BIGINT", True) if t.is_nested else t.with_nullable(True) for t in types]
    values = [s.result() for s in stats]
    return SimpleStats(binary_row.serialize_row([v[0] for v in values], stat_types),
                       binary_row.serialize_row([v[1] for v in values], stat_types), tuple(v[2] for v in values))


class _OpenFile:
    def __init__(self, w: RollingRunWriter, name: str, first: pa.Table):
        self.name = name
        self.path, self.external_path = w.placer.place(name)
        open_new = getattr(w.io, "open_new", None)
        self.streamed = open_new is not None  # straight to the file; else encoded in memory, written at close
        if self.streamed:
            w.io.mkdirs(os.path.dirname(self.path))
            self.sink = open_new(self.path)
            w.paths.append(self.path)
        else:
            self.sink = io.BytesIO()
        try:
            self.writer = w.format.open_writer(self.sink, w.schema.file_arrow_schema, w.schema, first)
        except BaseException:
            self.sink.close()
            raise
        self.rows = 0
        self.first_key = None
        self.last_key = None
        self.seq_min = self.seq_max = None
        self.deletes = 0
        self.key_stats = [_ColumnStats(t, m) for t, m in zip(w.key_types, w.key_modes)]
        self.value_stats = [_ColumnStats(w.value_types[i], w.stats_mode[i]) for i in w.stats_cols]  # dense


class RollingRunWriter:
    """Writes one sorted run to level ``level`` of a bucket as rolling data files (see the module docstring):
    ``add`` pieces in key order, then ``finish`` for the files' metadata, or ``abort`` to delete them.
    """

    def __init__(self, io_, bucket_dir: str, schema: TableSchema, level: int, file_source: int = FILE_SOURCE_COMPACT):
        opts = schema.table_options
        self.io, self.bucket_dir, self.schema, self.level, self.file_source = io_, bucket_dir, schema, level, \
            file_source
        self.placer = placer_for(bucket_dir, schema)
        self.target = opts.get(TARGET_FILE_SIZE)
        self.format = data_file_format(schema, level)
        self.prefix = opts.get(DATA_FILE_PREFIX)
        self.key_names = list(schema.trimmed_primary_keys)
        self.key_types = schema.types_of(self.key_names)
        self.value_names = list(schema.field_names)
        self.value_types = schema.types_of(self.value_names)
        self.key_cols = [KEY_FIELD_PREFIX + k if KEY_FIELD_PREFIX + k in schema.file_arrow_schema.names else k
                         for k in self.key_names]
        mode, mode_key = opts.stats_mode_of(level)
        self.key_modes, self.stats_mode = kv_stats_modes(opts, self.key_cols, self.value_names, self.format.name,
                                                         mode, default_key=mode_key)  # one per value column
        self.dense = opts.get(STATS_DENSE_STORE)
        # the value columns whose statistics are stored (not dense: all, a none column as nulls)
        self.stats_cols = dense_columns(self.stats_mode) if self.dense else list(range(len(self.value_names)))
        self.uuid = uuid.uuid4()
        self.files: list[DataFileMeta] = []
        self.paths: list[str] = []
        self.pending: list[pa.Table] = []
        self.pending_rows = 0
        self.current: _OpenFile | None = None

    def add(self, rows: pa.Table) -> None:
        """Append the next rows of the run (physical data-file layout; keys continue after the previous piece). Empty
        input is ignored. A failed write raises (StorageError or OSError); the caller then calls ``abort``.
        """
        if rows.num_rows == 0:
            return
        self.pending.append(rows)
        self.pending_rows += rows.num_rows
        if self.pending_rows >= ROW_GROUP_ROWS:
            self._write_row_group()

    def finish(self) -> list[DataFileMeta]:
        """Write what is buffered, close the current file and return the DataFileMeta of every file written, in key
        order (empty if no rows came).
        """
        if self.pending_rows:
            self._write_row_group()
        if self.current is not None:
            self._close()
        return self.files

    def abort(self) -> None:
        """Close the open file and delete every file this writer created; never raises for the close. Afterwards the
        writer holds no files.
        """
        if self.current is not None:
            try:
                self.current.writer.close()
                self.current.sink.close()
            except Exception:  # noqa: BLE001 - the files are deleted below either way
                pass
            self.current = None
        for p in self.paths:
            self.io.delete(p)
        self.files, self.paths = [], []

    # --- internals ---------------------------------------------------------------------------------
    def _write_row_group(self) -> None:
        group = pa.concat_tables(self.pending).combine_chunks()
        self.pending, self.pending_rows = [], 0
        if self.current is None:
            self.current = _OpenFile(self, f"{self.prefix}{self.uuid}-{len(self.files)}"
                                  f"{file_extension(self.schema, self.format.name)}", group)
        f = self.current
        f.writer.write(group)
        self._track(f, group)
        if f.sink.tell() >= self.target:
            self._close()

    def _track(self, f: _OpenFile, part: pa.Table) -> None:
        n = part.num_rows
        if f.first_key is None:
            f.first_key = [part.column(c)[0].as_py() for c in self.key_cols]
        f.last_key = [part.column(c)[n - 1].as_py() for c in self.key_cols]
        f.rows += n
        mm = pc.min_max(part.column(SEQUENCE_NUMBER))
        lo, hi = mm["min"].as_py(), mm["max"].as_py()
        f.seq_min = lo if f.seq_min is None else min(f.seq_min, lo)
        f.seq_max = hi if f.seq_max is None else max(f.seq_max, hi)
        kinds = part.column(VALUE_KIND)
        f.deletes += int(pc.sum(pc.is_in(kinds, value_set=pa.array([1, 3], pa.int8()))).as_py() or 0)
        for s, c in zip(f.key_stats, self.key_cols):
            s.add(part.column(c))
        for s, i in zip(f.value_stats, self.stats_cols):
            s.add(part.column(self.value_names[i]))

    def _close(self) -> None:
        f, self.current = self.current, None
        f.writer.close()
        if f.streamed:
            size = f.sink.tell()
            f.sink.close()
        else:
            data = f.sink.getbuffer()
            size = len(data)
            self.io.mkdirs(os.path.dirname(f.path))
            self.io.write_bytes(f.path, data)
            self.paths.append(f.path)
        value_stats = _serialize(f.value_stats, [self.value_types[i] for i in self.stats_cols]) \
            if f.value_stats else SimpleStats.EMPTY
        value_cols = None if not self.dense else () if not f.value_stats \
            else None if len(self.stats_cols) == len(self.value_names) \
            else tuple(self.value_names[i] for i in self.stats_cols)  # Paimon's dense statistics
        self.files.append(DataFileMeta(
            file_name=f.name, file_size=size, row_count=f.rows,
            min_key=binary_row.serialize_row(f.first_key, self.key_types),
            max_key=binary_row.serialize_row(f.last_key, self.key_types),
            key_stats=_serialize(f.key_stats, self.key_types), value_stats=value_stats,
            min_sequence_number=f.seq_min, max_sequence_number=f.seq_max, schema_id=self.schema.id,
            level=self.level, extra_files=(), creation_time_millis=local_millis_as_utc(), delete_row_count=f.deletes,
            embedded_index=None, file_source=self.file_source,
            value_stats_cols=value_cols, external_path=f.external_path))
        crash_point("compact.after-output-file")
