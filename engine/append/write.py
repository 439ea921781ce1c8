"""AppendWrite: validate -> partition -> bucket -> buffer -> append files -> commit messages (no merge).

Contract:
- Rows are only inserted: row kinds other than +I are refused (``InvalidRowKind``), ``delete`` raises
  ``UnsupportedFeature``; a rejected batch leaves no trace.
- Bucket-unaware tables (``bucket=-1``) put every row of a partition in bucket 0 (total buckets -1); fixed-bucket
  tables hash the ``bucket-key`` columns exactly as Paimon does.
- Rows keep their input order within a bucket; sequence numbers continue from the bucket's largest one in the
  snapshot the writer started from.
- Used as a context manager, files of a write that raised or was never committed are deleted on exit.
"""
from __future__ import annotations

import uuid

import numpy as np
import pyarrow as pa

from engine.append.files import write_append_files
from engine.data_paths import data_file_path
from engine.errors import InvalidOption, InvalidRowKind, UnsupportedFeature
from engine.meta import binary_row
from engine.meta.manifest import max_sequence_numbers
from engine.meta.snapshot import BATCH_COMMIT_IDENTIFIER
from engine.options import FILE_COMPRESSION, FORMAT_CODEC_KEYS, WRITE_BUFFER_SIZE
from engine.partitioning import bucket_groups, partition_groups
from engine.schema import TableSchema
from engine.write.bucket_layout import check_partition_count, fixed_bucket_counts
from engine.write.commit_message import CommitMessage
from engine.write.formats import CODECS, WRITABLE_FORMATS
from engine.write.lifecycle import WriterLifecycle
from engine.write.validate import conform

UNAWARE_BUCKET = 0


def require_append_writable(schema: TableSchema, table: str) -> None:
    """Raise UnsupportedFeature for append-table settings this version cannot write."""
    from engine.refused_options import require_writable
    require_writable(schema.options, table)
    opts = schema.table_options
    if opts.bucket == -2:
        raise UnsupportedFeature(f"table {table!r}: bucket=-2 (postpone) cannot be written by lakemerge")
    fmt, codec = opts.file_format_of(0, per_level=False)
    if fmt not in WRITABLE_FORMATS:
        raise UnsupportedFeature(f"table {table!r}: file.format={fmt}: lakemerge cannot write {fmt} data files (it "
                                 f"writes {', '.join(WRITABLE_FORMATS)})")
    if codec not in CODECS[fmt]:
        key = FORMAT_CODEC_KEYS[fmt] if FORMAT_CODEC_KEYS.get(fmt) in opts.raw else FILE_COMPRESSION
        raise InvalidOption(key, codec, f"not a {fmt} codec (use one of {', '.join(CODECS[fmt])})", table=table)


class AppendWrite(WriterLifecycle):
    """Buffers rows for an append (no primary key) table and writes them as files per (partition, bucket).
    Nothing is visible until the messages from prepare_commit are committed."""
    def __init__(self, table, *, commit_user: str | None = None, commit_identifier: int | None = None,
                 overwrite: bool = False):
        self.table = table
        self.schema = table.schema
        require_append_writable(self.schema, table.name)
        self.num_buckets = self.schema.table_options.bucket  # -1: bucket-unaware
        self.commit_user = commit_user or str(uuid.uuid4())
        self.commit_identifier = BATCH_COMMIT_IDENTIFIER if commit_identifier is None else int(commit_identifier)
        self.base_snapshot = table.snapshot_manager.latest()
        self._max_seq: dict | None = None
        self._layout: dict[bytes, int] = {}  # partition -> bucket count its live files record
        self.ignore_previous_files = bool(overwrite)  # an overwrite writer: the partitions' files are replaced
        self._pending: dict[tuple[bytes, int], list[pa.Table]] = {}
        self._values: dict[bytes, tuple] = {}
        self._next_seq: dict[tuple[bytes, int], int] = {}
        self._files: dict[tuple[bytes, int], list] = {}
        self._buffered = 0
        self._buffer_limit = self.schema.table_options.get(WRITE_BUFFER_SIZE)
        self._start_lifecycle()

    # --- public -------------------------------------------------------------------------------------
    def write(self, data, row_kinds=None) -> None:
        """Buffer rows to append. Raises SchemaMismatch/InvalidInput/InvalidRowKind (nothing buffered)."""
        self._check_open()
        rows, kinds = conform(data, self.schema, self.table.name, row_kinds=row_kinds)
        if len(kinds) and np.any(kinds != 0):
            raise InvalidRowKind("an append table only accepts inserts (+I); it has no primary key to update "
                                 "or delete by", table=self.table.name)
        if rows.num_rows == 0:
            return
        if any(c.num_chunks > 1 for c in rows.columns):
            rows = rows.combine_chunks()
        part_types = self.schema.types_of(self.schema.partition_keys)
        groups = [(values, idx, binary_row.serialize_row(list(values), part_types))
                  for values, idx in partition_groups(rows, self.schema.partition_keys)]
        if self.num_buckets > 0:  # a partition keeps the count its files record (engine.write.bucket_layout)
            self._load_base()
            for values, _, partition in groups:
                check_partition_count(self.table, self._layout, partition, values, self.num_buckets)
        for values, idx, partition in groups:
            self._values[partition] = values
            part_rows = rows if idx is None else rows.take(pa.array(idx))
            if self.num_buckets <= 0:
                self._buffer(partition, UNAWARE_BUCKET, part_rows)
                continue
            from kernels.hashing import bucket_ids
            ids = bucket_ids([part_rows.column(k) for k in self.schema.bucket_keys], self.num_buckets)
            for b, chunk in bucket_groups(ids):
                self._buffer(partition, b, part_rows.take(pa.array(chunk)))
        if self._buffered > self._buffer_limit:
            self.flush()

    def delete(self, keys) -> None:
        """Always raises UnsupportedFeature: append tables have no key to delete by."""
        raise UnsupportedFeature(f"table {self.table.name!r} is an append table (no primary key): rows cannot be "
                                 "deleted by key")

    def flush(self) -> None:
        """Write every buffered bucket as append files."""
        for key, tables in list(self._pending.items()):
            if not tables:
                continue
            self._pending[key] = []
            rows = pa.concat_tables(tables)
            partition, bucket = key
            seq = self._next_sequence(key)
            bucket_dir = self.table.bucket_dir(self._values[partition], bucket)
            files = write_append_files(self.table.file_io, bucket_dir, rows, self.schema, seq)
            self._next_seq[key] = seq + rows.num_rows
            self._files.setdefault(key, []).extend(files)
        self._buffered = 0

    def prepare_commit(self) -> list[CommitMessage]:
        """Flush and return one message per touched (partition, bucket). Call once."""
        self._check_open()
        self.flush()
        self._prepared = True
        base = None if self.base_snapshot is None else self.base_snapshot.id
        return [CommitMessage(p, self._values[p], b, self.num_buckets if self.num_buckets > 0 else -1,
                              tuple(files), self.commit_user, self.commit_identifier, base, self.schema.id,
                              overwrite_only=self.ignore_previous_files)
                for (p, b), files in self._files.items() if files]

    def abort(self) -> None:
        """Delete every data file this writer has written and drop buffered rows; nothing is committed."""
        for (p, b), files in self._files.items():
            for f in files:
                self.table.file_io.delete(data_file_path(self.table.bucket_dir(self._values[p], b), f))
        self._files.clear()
        self._pending.clear()

    # --- internals ----------------------------------------------------------------------------------
    def _buffer(self, partition: bytes, bucket: int, rows: pa.Table) -> None:
        self._pending.setdefault((partition, bucket), []).append(rows)
        self._buffered += rows.nbytes

    def _next_sequence(self, key) -> int:
        if key not in self._next_seq:
            self._load_base()
            self._next_seq[key] = self._max_seq.get(key, -1) + 1
        return self._next_seq[key]

    def _load_base(self) -> None:
        """Read the base once (Table.writer_base may move it): each bucket's largest sequence number and each
        partition's bucket count; none for an overwrite writer."""
        if self._max_seq is None:
            self.base_snapshot, entries = self.table.writer_base(self.base_snapshot)
            if self.ignore_previous_files:
                entries = []
            self._max_seq = max_sequence_numbers(entries)
            self._layout = fixed_bucket_counts(entries)
