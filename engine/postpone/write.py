"""Writers of postpone bucket tables (``bucket = -2``).

``FixedBucketPostponeWrite`` (``postpone.batch-write-fixed-bucket = true``, Paimon's default for batch writes): the
fixed-bucket TableWrite with one bucket count per partition -- the count the partition's real-bucket files record,
else one decided for it (engine.postpone.buckets) from the rows this writer gives it; an overwrite writer
(``overwrite=True``, for Table.commit_overwrite) decides every partition's count afresh, as Paimon's overwrite
ignores the replaced layout (postpone.default-bucket-num). Until every partition of the
input has a count, input is held back in arrival order (at most ``write-buffer-size`` bytes; past that the counts
are decided from what was seen), so sequence numbers still follow input order. Rows are then merged, compacted and
turn into changelog exactly as in a fixed-bucket table, and each message records its partition's count.
A writer given ``decided`` counts (one task of a distributed write, whose driver decided the counts of the whole
input beforehand) never holds input back: a partition without a known or decided count gets
``postpone.default-bucket-num``, or raises InvalidInput when that is unset.

``PostponedWrite`` (``postpone.batch-write-fixed-bucket = false``, and streaming writes, which Paimon always
postpones): every
record goes, unmerged and in arrival order, to its partition's ``bucket-postpone`` directory (bucket and
totalBuckets -2, level 0, file names ``<data-file.prefix>-u-<commit user>-s-<writer id>-w-`` + uuid, as
PostponeBucketFileStoreWrite names them so a compaction can keep one writer's files in order). Nothing is
compacted and no changelog is written (PostponeBucketWriter); engine.postpone.compact moves the records into real
buckets later. The files are written as PostponeBucketFileStoreWrite writes them (``postponed_file_format``).
"""
from __future__ import annotations

import random

import numpy as np
import pyarrow as pa

from engine.errors import UnsupportedFeature
from engine.meta import binary_row
from engine.meta.snapshot import BATCH_COMMIT_IDENTIFIER
from engine.options import DATA_FILE_PREFIX, FILE_FORMAT, POSTPONE_DEFAULT_BUCKET_NUM, STATS_MODE, TableOptions
from engine.partitioning import partition_groups
from engine.postpone import POSTPONE_BUCKET
from engine.postpone.buckets import batch_write_buckets, known_bucket_counts
from engine.write.file_writer import physical_table, write_sorted_run
from engine.write.formats import DataFileFormat, avro_schema, codec_of, data_file_format
from engine.write.table_write import TableWrite, _BucketBuffer


class FixedBucketPostponeWrite(TableWrite):
    """Batch writer of a postpone table into real buckets (module docstring)."""

    def __init__(self, table, *, overwrite: bool = False, decided: dict[bytes, int] | None = None, **kw):
        super().__init__(table, **kw)
        self.overwrite = overwrite
        self._counts: dict[bytes, int] | None = None
        self._decided = None if decided is None else dict(decided)
        self._held: list[tuple[pa.Table, np.ndarray]] = []
        self._held_bytes = 0
        self._held_stats: dict[bytes, list[int]] = {}  # partition without a count -> [rows, bytes]

    def _require_writable(self) -> None:
        TableOptions(self.schema.options, table=self.table.name).require_writable(allow_postpone_bucket=True)

    # --- bucket counts ------------------------------------------------------------------------------
    def _known_counts(self) -> dict[bytes, int]:
        if self._counts is None:
            if self._max_seq is None:
                self._load_base()
            entries = [] if self.base_snapshot is None or self.overwrite \
                else self.table.manifests.live_entries(self.base_snapshot)
            self._counts = {**(self._decided or {}), **known_bucket_counts(entries, self.table.root)}
        return self._counts

    def _total_buckets(self, partition: bytes) -> int:
        return self._known_counts()[partition]

    def _bucket_ids(self, partition: bytes, key_cols) -> np.ndarray:
        from kernels.hashing import bucket_ids
        return bucket_ids(key_cols, self._total_buckets(partition))

    # --- holding input back until its partitions have counts ----------------------------------------
    def _add(self, rows: pa.Table, kinds: np.ndarray) -> None:
        from engine.merge_engines import check_write_kinds
        rows, kinds = self._filter_kinds(rows, kinds)
        check_write_kinds(self.schema, kinds, self.table.name, rows)  # refuse a bad batch now, not at its release
        counts = self._known_counts()
        new = {p: stats for p, stats in partition_stats(self.schema, rows).items() if p not in counts}
        if new and self._decided is not None:
            self._default_counts(new)
            new = {}
        if not new and not self._held:
            super()._add(rows, kinds)
            return
        self._held.append((rows, kinds))
        self._held_bytes += rows.nbytes
        for partition, (n, nbytes) in new.items():
            stats = self._held_stats.setdefault(partition, [0, 0])
            stats[0] += n
            stats[1] += nbytes
        if self._held_bytes > self._buffer_limit:
            self._release()

    def _default_counts(self, partitions) -> None:
        """Give ``partitions`` (without a known or decided count) the default bucket count, or raise."""
        from engine.errors import InvalidInput
        default = self.options.get(POSTPONE_DEFAULT_BUCKET_NUM)
        if default is None:
            raise InvalidInput(f"no bucket count was decided for partition "
                               f"{self.table.scan().partition_values(next(iter(partitions)))} of this distributed "
                               f"write and postpone.default-bucket-num is not set", table=self.table.name)
        for partition in partitions:
            self._counts[partition] = batch_write_buckets(self.options, 0, 0)  # validates; the default

    def _release(self) -> None:
        """Decide the counts of the held partitions, then buffer the held input in arrival order."""
        counts = self._known_counts()
        for partition, (n, nbytes) in self._held_stats.items():
            counts.setdefault(partition, batch_write_buckets(self.options, n, nbytes))
        held, self._held, self._held_stats, self._held_bytes = self._held, [], {}, 0
        for rows, kinds in held:
            super()._add(rows, kinds)

    def flush(self) -> None:
        """Route held input, then write every bucket buffer (TableWrite.flush)."""
        if self._held:
            self._release()
        super().flush()

    def abort(self) -> None:
        self._held, self._held_stats, self._held_bytes = [], {}, 0
        super().abort()


def partition_stats(schema, rows: pa.Table) -> dict[bytes, tuple[int, int]]:
    """Partition (serialized) -> (rows, estimated bytes) of ``rows`` (conformed to ``schema``): the input sizes a
    fixed-bucket postpone write decides new partitions' bucket counts from (each row weighs the batch's average
    Arrow size)."""
    if not rows.num_rows:
        return {}
    types = schema.types_of(schema.partition_keys)
    bytes_per_row = rows.nbytes / rows.num_rows
    out = {}
    for values, idx in partition_groups(rows, schema.partition_keys):
        n = rows.num_rows if idx is None else len(idx)
        out[binary_row.serialize_row(list(values), types)] = (n, int(bytes_per_row * n))
    return out


def postponed_file_format(schema) -> tuple[DataFileFormat, str, str]:
    """(format, stats mode, the option naming that mode) of postponed files, as PostponeBucketFileStoreWrite writes
    them: when the table's columns convert to an Avro schema, the table's options with ``file.format = avro`` and
    ``metadata.stats-mode = none``, else the table's options unchanged; then the level-0 choice of
    KeyValueFileWriterFactory (``file.format.per.level`` / ``file.compression.per.level`` /
    ``metadata.stats-mode.per.level`` for level 0 still win, ``file.compression`` else; ``avro.codec`` overrides
    the codec of an Avro file, and ``zstd`` is Avro's zstandard
    at ``file.compression.zstd-level``). Columns lakemerge cannot write to Avro (MULTISET, which Paimon's Avro
    holds) also keep the table's options. Raises InvalidOption when the compression is not a codec of the format
    (as Paimon's Avro CodecFactory refuses it)."""
    names = list(schema.field_names)
    try:
        avro_schema(names, schema.types_of(names))
    except UnsupportedFeature:  # TIMESTAMP(7..9), TIME(4..9): Paimon keeps the table's format and statistics
        opts = schema.table_options
    else:
        opts = TableOptions({**schema.options, FILE_FORMAT: "avro", STATS_MODE: "none"},
                            table=schema.table_options.table)
    fmt = data_file_format(schema, 0, options=opts)
    codec_of(fmt.name, fmt.compression)
    return (fmt, *opts.stats_mode_of(0))


class PostponedWrite(TableWrite):
    """Writer of postponed files (module docstring): TableWrite's validation, buffering and sequence numbering, with
    every row in bucket -2 and each flush written as stored, in ``postponed_file_format``."""

    def __init__(self, table, **kw):
        super().__init__(table, **kw)
        writer_id = random.randrange(2 ** 31 - 1)
        self._prefix = f"{self.options.get(DATA_FILE_PREFIX)}-u-{self.commit_user}-s-{writer_id}-w-"
        self._format, self._stats_mode, self._stats_mode_key = postponed_file_format(self.schema)

    def _require_writable(self) -> None:
        TableOptions(self.schema.options, table=self.table.name).require_writable(allow_postpone_bucket=True)

    def _total_buckets(self, partition: bytes) -> int:
        return POSTPONE_BUCKET

    def _bucket_ids(self, partition: bytes, key_cols) -> np.ndarray:
        return np.full(len(key_cols[0]) if key_cols else 0, POSTPONE_BUCKET, np.int32)

    def _flush_bucket(self, buf: _BucketBuffer) -> None:
        if not buf.chunks:
            return
        chunks, buf.chunks = buf.chunks, []
        buf.nbytes = 0
        rows = pa.concat_tables([r.take(pa.array(idx)) for r, idx, _, _ in chunks])
        seq = np.concatenate([c[2] for c in chunks])
        kinds = np.concatenate([c[3] for c in chunks])
        files = write_sorted_run(self.table.file_io, self.table.bucket_dir(buf.partition_values, POSTPONE_BUCKET),
                                 physical_table(rows, seq, kinds, self.schema), self.schema, level=0,
                                 prefix=self._prefix, file_format=self._format, stats_mode=self._stats_mode,
                                 stats_mode_key=self._stats_mode_key)
        buf.files.extend(files)


def new_postpone_write(table, *, overwrite: bool = False, **kw) -> TableWrite:
    """The writer ``Table.new_write`` gives a postpone table: FixedBucketPostponeWrite for a batch write (deciding
    bucket counts afresh when ``overwrite``), or PostponedWrite with ``postpone.batch-write-fixed-bucket = false``
    or for a streaming write (an explicit ``commit_identifier`` other than the batch one, as lakemerge marks
    streaming commits), as Paimon's FlinkSinkBuilder picks its postpone sinks. Raises UnsupportedFeature for a
    primary key without every partition column (cross-partition update),
    which lakemerge does not write in this mode."""
    from engine.errors import UnsupportedFeature
    from engine.options import POSTPONE_BATCH_WRITE_FIXED_BUCKET
    if table.schema.cross_partition_update:
        raise UnsupportedFeature(f"table {table.name!r}: bucket=-2 (postpone) with a primary key that lacks partition "
                                 "columns (cross-partition update) cannot be written by lakemerge")
    streaming = kw.get("commit_identifier") not in (None, BATCH_COMMIT_IDENTIFIER)
    if table.schema.table_options.get(POSTPONE_BATCH_WRITE_FIXED_BUCKET) and not streaming:
        return FixedBucketPostponeWrite(table, overwrite=overwrite, **kw)
    return PostponedWrite(table, **kw)
