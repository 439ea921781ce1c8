"""Reading append tables: no merge; rows come partition by partition, bucket by bucket, and within a bucket in
sequence order (files by their sequence range, rows in file order) — the order they were appended.

Contract: ``iter_append_batches`` yields record batches with exactly the requested columns (table types), lazily
one file at a time (bounded memory); files are matched to the table's columns by field id (schema evolution);
a file whose statistics exclude the filter is skipped. Raises SnapshotNotFound, InvalidInput, CorruptFile.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa

from engine.data_paths import data_file_path
from engine.deletion_vectors.index_file import read_deletion_vector
from engine.meta.data_file import DataFileMeta
from engine.read import predicate as pred
from engine.read.scan import Split
from engine.read.file_skips import read_skips
from engine.read.split_read import SplitReader


def ordered_files(split: Split) -> list[DataFileMeta]:
    """A bucket's files in append order: by first sequence number; ties keep manifest (commit) order."""
    return sorted(split.files, key=lambda f: f.min_sequence_number)


def read_append_file(reader: SplitReader, split: Split, meta: DataFileMeta, columns: Sequence[str]) -> pa.Table:
    """One append file as the table's ``columns`` (renamed by field id, added columns null, widened cast), without
    the rows its deletion vector marks deleted."""
    rows = _file_rows(reader, split, meta, columns)
    return reader.live_rows(split, meta, rows, 0)  # rows a deletion vector marks deleted (Paimon DELETE) are gone


def read_append_positions(reader: SplitReader, split: Split, meta: DataFileMeta, columns: Sequence[str]
                          ) -> tuple[pa.Table, np.ndarray]:
    """``read_append_file`` plus each row's position in the file (sorted np.int64; the row index Paimon's
    ``__paimon_row_index`` metadata column shows and deletion vectors mark)."""
    rows = _file_rows(reader, split, meta, columns)
    where = split.deletion_file(meta.file_name)
    if where is None:
        return rows, np.arange(rows.num_rows, dtype=np.int64)
    keep = np.ones(rows.num_rows, dtype=bool)
    deleted = read_deletion_vector(reader.io, where)
    keep[deleted[deleted < rows.num_rows]] = False
    return rows.filter(pa.array(keep)), np.flatnonzero(keep).astype(np.int64)


def _file_rows(reader: SplitReader, split: Split, meta: DataFileMeta, columns: Sequence[str]) -> pa.Table:
    """Every row of one append file (deleted ones included) as the table's ``columns``."""
    path = data_file_path(split.bucket_dir, meta)
    rename = reader.file_to_table_names(meta.schema_id)
    wanted = set(columns)
    raw = reader.decode(path, meta, lambda present: [c for c in present if rename.get(c) in wanted])
    raw = pa.table({}) if raw is None else raw.rename_columns([rename[c] for c in raw.column_names])
    arrow = reader.schema.arrow_schema
    out = []
    for c in columns:
        target = arrow.field(c).type
        if c in raw.column_names:
            out.append(reader.as_table_type(raw.column(c), c, meta.schema_id, path))
        else:
            out.append(pa.nulls(raw.num_rows, target))
    return pa.Table.from_arrays(out, schema=pa.schema([arrow.field(c) for c in columns]))


def iter_append_batches(table, snapshot_id: int | None = None, columns: Sequence[str] | None = None,
                        filter=None, *, snapshot=None, batch_read: bool = True) -> Iterator[pa.RecordBatch]:
    """Yield record batches of ``columns`` (default: all) from the append table at ``snapshot_id`` (default:
    latest; ``snapshot``: an already resolved Snapshot, such as a tag's, instead), rows matching ``filter``.
    ``batch_read``: a user's read, narrowed by the table's read options (TableScan.plan); False reads every file.
    Raises InvalidInput for an unknown column."""
    schema = table.schema
    out_cols = table.output_columns(columns)
    dnf = pred.normalize(filter, table.arrow_schema, table.name)
    read_cols = list(dict.fromkeys(out_cols + sorted(pred.columns_of(dnf))))
    snap = snapshot if snapshot is not None else table.snapshot(snapshot_id)
    scan = table.scan()
    reader = SplitReader(table.file_io, schema, table.schema_manager.schema, read_skips(table) if batch_read else None)
    expr = pred.to_expression(dnf) if dnf else None
    for split in scan.plan(snap, dnf, batch_read=batch_read):
        for meta in ordered_files(split):
            if dnf and not scan._values_may_match(meta, dnf):
                continue
            part = read_append_file(reader, split, meta, read_cols)
            if expr is not None:
                part = part.filter(expr)
            for batch in part.select(out_cols).to_batches():
                if batch.num_rows:
                    yield batch


def read_append(table, snapshot_id: int | None = None, columns: Sequence[str] | None = None,
                filter=None, *, snapshot=None, batch_read: bool = True) -> pa.Table:
    """All rows of an append table at a snapshot (default latest; ``snapshot`` and ``batch_read`` as in
    ``iter_append_batches``), in append order per bucket."""
    out_cols = list(columns) if columns is not None else list(table.schema.field_names)
    batches = list(iter_append_batches(table, snapshot_id, columns, filter, snapshot=snapshot, batch_read=batch_read))
    target = pa.schema([table.schema.arrow_schema.field(c) for c in out_cols])
    return pa.Table.from_batches(batches, schema=target) if batches else target.empty_table()


def iter_appended_batches(table, from_snapshot_id: int, to_snapshot_id: int | None = None,
                          columns: Sequence[str] | None = None) -> Iterator[pa.RecordBatch]:
    """Rows appended by the commits after ``from_snapshot_id`` up to ``to_snapshot_id`` (default: latest), as an
    ordered stream: commit by commit, and within a commit partition by partition, bucket by bucket, in sequence
    order. Compactions add no rows and are skipped. Raises SnapshotNotFound if a snapshot in the range expired."""
    from engine.meta.manifest import ADD
    from engine.meta.snapshot import COMMIT_KIND_APPEND

    schema = table.schema
    out_cols = table.output_columns(columns)
    end = to_snapshot_id if to_snapshot_id is not None else table.latest_snapshot_id()
    if end is None:
        return
    scan = table.scan()
    reader = SplitReader(table.file_io, schema, table.schema_manager.schema, read_skips(table))
    for sid in range(int(from_snapshot_id) + 1, int(end) + 1):
        snap = table.snapshot(sid)
        if snap.commit_kind != COMMIT_KIND_APPEND:
            continue
        groups: dict[tuple[bytes, int], list] = {}
        for meta in table.manifests.manifest_list(snap.delta_manifest_list):
            for e in table.manifests.manifest(meta.file_name):
                if e.kind == ADD:
                    groups.setdefault((e.partition, e.bucket), []).append(e)
        for (partition, bucket) in sorted(groups):
            entries = groups[(partition, bucket)]
            values = scan.partition_values(partition)
            split = Split(partition, values, bucket, entries[0].total_buckets, scan.bucket_dir(values, bucket),
                          tuple(e.file for e in entries))
            for f in ordered_files(split):
                for batch in read_append_file(reader, split, f, out_cols).to_batches():
                    if batch.num_rows:
                        yield batch
