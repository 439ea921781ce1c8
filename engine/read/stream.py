"""Streaming reads: a table's merged rows as a ``pyarrow.RecordBatchReader``, one split at a time.

Contract: ``batch_reader`` validates columns and filter and pins the snapshot (default: latest at call time) before
returning; data files are read only as batches are pulled, one split (all files of one bucket of one partition)
at a time, so memory holds one merged split plus the batch being consumed. The rows, over all batches, are exactly
``Table.read(snapshot_id, columns, filter)``; batches come split by split in (partition, bucket) order, rows within a
split in no particular order. Errors while streaming (a missing or damaged data file) raise ``CorruptFile`` from
the reader's ``read_next_batch``/iteration.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa

from engine.errors import InvalidInput
from engine.read import predicate as pred
from engine.read.file_skips import read_skips
from engine.read.split_read import SplitReader, batch_read_splits, with_schema

DEFAULT_BATCH_ROWS = 64 * 1024


def batch_reader(table, snapshot_id: int | None = None, columns: Sequence[str] | None = None, filter=None,
                 batch_size: int | None = None) -> pa.RecordBatchReader:
    """A RecordBatchReader over the merged rows of ``table`` (see the module docstring). ``batch_size`` caps the
    rows per batch (default 65,536). Raises InvalidInput / SnapshotNotFound before any data is read."""
    out_cols = table.output_columns(columns)
    if batch_size is not None and batch_size < 1:
        raise InvalidInput(f"batch_size must be positive, got {batch_size}", table=table.name)
    dnf = pred.normalize(filter, table.arrow_schema, table.name)
    max_rows = batch_size or DEFAULT_BATCH_ROWS
    out_schema = pa.schema([table.arrow_schema.field(c) for c in out_cols])
    if table.schema.is_append_only:  # nothing to merge: file by file, in append order (engine.append.read)
        return pa.RecordBatchReader.from_batches(out_schema, _append_batches(table, table.snapshot(snapshot_id),
                                                                             out_cols, dnf, max_rows))
    splits = batch_read_splits(table.scan().plan(table.snapshot(snapshot_id), dnf, batch_read=True), table.schema)
    read_cols = list(dict.fromkeys(out_cols + sorted(pred.columns_of(dnf))))
    read_schema = pa.schema([table.arrow_schema.field(c) for c in read_cols])
    expression = pred.to_expression(dnf) if dnf else None
    reader = SplitReader(table.file_io, table.schema, table.schema_manager.schema, read_skips(table))

    def batches() -> Iterator[pa.RecordBatch]:
        for split in splits:
            part = with_schema(reader.read(split, read_cols), read_schema)
            if expression is not None:
                part = part.filter(expression)
            part = part.select(out_cols)
            for batch in part.to_batches(max_chunksize=max_rows):
                if batch.num_rows:
                    yield batch
            del part
            pa.default_memory_pool().release_unused()  # give the bucket's memory back before the next one

    return pa.RecordBatchReader.from_batches(out_schema, batches())


def _append_batches(table, snapshot, columns, dnf, max_rows: int) -> Iterator[pa.RecordBatch]:
    """An append table's rows at ``snapshot`` (None: none) in batches of at most ``max_rows``."""
    if snapshot is None:
        return
    from engine.append.read import iter_append_batches
    for batch in iter_append_batches(table, None, columns, dnf, snapshot=snapshot):
        yield from pa.Table.from_batches([batch]).to_batches(max_chunksize=max_rows)
