"""Reading what changed in snapshots (paimon-semantics §13, follow-up scanner).

* changelog-producer ``none``: the ADD data files of APPEND snapshots' delta manifests, each file as stored (one
  record per key per flush, with its stored kind); COMPACT/OVERWRITE snapshots give nothing. With ``normalize=True``
  (Flink's ChangelogNormalize) each key touched by an APPEND snapshot is looked up before (the state the snapshot
  was committed on: its files without the ones it added) and after, in every level as a streaming reader sees them,
  and the rows follow Paimon's lookup rules instead: +I new, -U old/+U new, -D old -- nothing for a key whose row
  did not change (ChangelogNormalize swallows an upsert equal to the stored row). UnsupportedFeature for a
  snapshot holding postponed records (bucket=-2), which no table state shows until their COMPACT snapshot.
* ``input`` / ``lookup`` / ``full-compaction``: the changelog files of any snapshot with a changelog manifest list.
* append tables (no primary key): the rows each APPEND snapshot added, all ``+I``, in append order.

Rows come in (partition, bucket, file sequence) order with a string ``_row_kind`` column (+I/-U/+U/-D) after the
requested table columns.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from engine.changelog.emit import changelog_rows
from engine.changelog.files import ROW_KIND_COLUMN, row_kind_text
from engine.errors import InvalidInput, UnsupportedFeature
from engine.merge import VALUE_KIND, sort_dedupe
from engine.meta.manifest import ADD
from engine.meta.snapshot import COMMIT_KIND_APPEND, Snapshot
from engine.options import CHANGELOG_PRODUCER
from engine.read import predicate as pred
from engine.read.scan import Split
from engine.read.file_skips import read_skips
from engine.read.split_read import SplitReader
from kernels.keys import encode_keys
from kernels.lookup import search_sorted


def output_schema(table, columns: Sequence[str]) -> pa.Schema:
    """Return the Arrow schema of ``columns`` followed by a string row-kind column."""
    return pa.schema([table.arrow_schema.field(c) for c in columns] + [pa.field(ROW_KIND_COLUMN, pa.string())])


def check_columns(table, columns) -> list[str]:
    """Return ``columns`` as a list (all table fields if None); raises InvalidInput for an unknown column."""
    return table.output_columns(columns)


def change_entries(table, snapshot: Snapshot, files=None) -> list:
    """Manifest entries of the files holding ``snapshot``'s changes (see the module docstring), those ``files``
    accepts when given."""
    producer = table.schema.table_options.get(CHANGELOG_PRODUCER)
    if producer == "none":
        if snapshot.commit_kind != COMMIT_KIND_APPEND:
            return []
        list_name = snapshot.delta_manifest_list
    else:
        list_name = snapshot.changelog_manifest_list
        if not list_name:
            return []
    entries = [e for meta in table.manifests.manifest_list(list_name)
               for e in table.manifests.manifest(meta.file_name) if e.kind == ADD and (files is None or files(e))]
    entries.sort(key=lambda e: (e.partition, e.bucket, e.file.min_sequence_number, e.file.file_name))
    return entries


def read_columns(out_cols: list[str], dnf) -> list[str]:
    """The columns to read for ``out_cols`` filtered by the normalized filter ``dnf``: ``out_cols``, then the
    filter's other columns."""
    return list(dict.fromkeys(out_cols + sorted(pred.columns_of(dnf))))


def filter_changes(rows: pa.Table, dnf, out_cols: list[str]) -> pa.Table:
    """The change rows (``read_columns`` + ``_row_kind``) that satisfy ``dnf``, each row judged on its own (an -U
    whose row matches is kept while its +U that does not is dropped, as Paimon's streaming reads filter a
    changelog), as ``out_cols`` + ``_row_kind``."""
    if dnf:
        rows = rows.filter(pred.to_expression(dnf))
    return rows.select(out_cols + [ROW_KIND_COLUMN])


def in_buckets(files, buckets):
    """``files`` (a test of manifest entries; None accepts all) narrowed to ``buckets`` ((partition bytes, bucket)
    pairs; None: not narrowed)."""
    if buckets is None:
        return files
    if files is None:
        return lambda e: (e.partition, e.bucket) in buckets
    return lambda e: (e.partition, e.bucket) in buckets and files(e)


def snapshot_changes(table, snapshot: Snapshot, columns: Sequence[str] | None = None, *,
                     normalize: bool = False, dnf=None, buckets=None) -> pa.Table:
    """The changes ``snapshot`` made, as a pa.Table of ``columns`` + ``_row_kind``; with the normalized filter
    ``dnf`` only the rows satisfying it (``filter_changes``), files that hold none skipped by their partition,
    bucket and statistics (read row by row, a file none of whose rows matches contributes nothing); with
    ``buckets`` (a set of (partition bytes, bucket)) only those buckets' changes. Normalized changes look keys up
    across buckets, so they are read for the whole snapshot only: UnsupportedFeature for ``buckets`` with them."""
    out_cols = check_columns(table, columns)
    normalized = normalize and not table.schema.is_append_only \
        and table.schema.table_options.get(CHANGELOG_PRODUCER) == "none"
    if normalized and buckets is not None:
        raise UnsupportedFeature(f"table {table.name!r}: normalized changes of snapshot {snapshot.id} are read "
                                 "for the whole snapshot, not for some of its buckets")
    if dnf:
        # normalized rows are looked up, not read: a delta file's values say nothing about the -U row of its key,
        # nor (cross-partition update) its partition about the partition the key's old row is in
        files = None if normalized and table.schema.cross_partition_update \
            else table.scan().entry_filter(dnf, by_values=not normalized)
        rows = _snapshot_changes(table, snapshot, read_columns(out_cols, dnf), normalize, in_buckets(files, buckets))
        return filter_changes(rows, dnf, out_cols)
    return _snapshot_changes(table, snapshot, out_cols, normalize, in_buckets(None, buckets))


def _snapshot_changes(table, snapshot: Snapshot, out_cols: list[str], normalize: bool, files) -> pa.Table:
    """``snapshot_changes`` of the change files ``files`` accepts (all for None)."""
    schema = output_schema(table, out_cols)
    if table.schema.is_append_only:
        return _appended(table, snapshot, out_cols, schema, files)
    if normalize and table.schema.table_options.get(CHANGELOG_PRODUCER) == "none":
        return _normalized(table, snapshot, out_cols, schema, files)
    scan = table.scan()
    reader = SplitReader(table.file_io, table.schema, table.schema_manager.schema, read_skips(table))
    parts = []
    for e in change_entries(table, snapshot, files):
        values = scan.partition_values(e.partition)
        split = Split(e.partition, values, e.bucket, e.total_buckets, scan.bucket_dir(values, e.bucket), (e.file,))
        rows = reader.read_file(split, e.file, out_cols)
        kinds = row_kind_text(rows.column(VALUE_KIND).to_numpy())
        parts.append(pa.Table.from_arrays(rows.select(out_cols).columns + [kinds], schema=schema))
    return pa.concat_tables(parts) if parts else schema.empty_table()


def read_changes(table, start_snapshot: int | None, end_snapshot: int | None = None,
                 columns: Sequence[str] | None = None, *, normalize: bool = False) -> pa.Table:
    """Changes of snapshots ``start_snapshot`` (exclusive; None = from the beginning) to ``end_snapshot``
    (inclusive; None = latest), snapshot by snapshot. Raises SnapshotNotFound when a snapshot in the range has
    expired, InvalidInput for a reversed range or unknown columns."""
    out_cols = check_columns(table, columns)
    sm = table.snapshot_manager
    end = sm.latest_id() if end_snapshot is None else int(end_snapshot)
    start = 0 if start_snapshot is None else int(start_snapshot)
    if end is None:
        return output_schema(table, out_cols).empty_table()
    if start > end:
        raise InvalidInput(f"start snapshot {start} is after end snapshot {end}", table=table.name)
    from engine.changelog.retention import changes_snapshot
    parts = [snapshot_changes(table, changes_snapshot(table, sid), out_cols, normalize=normalize)
             for sid in range(start + 1, end + 1)]
    return pa.concat_tables(parts) if parts else output_schema(table, out_cols).empty_table()


# --- append tables -------------------------------------------------------------------------------------------
def _appended(table, snapshot: Snapshot, out_cols: list[str], schema: pa.Schema, files=None) -> pa.Table:
    """An append table's changes: the rows its APPEND snapshots added, all +I, in append order per bucket
    (partition by partition, bucket by bucket, files by sequence number); other snapshots add no rows."""
    if snapshot.commit_kind != COMMIT_KIND_APPEND:
        return schema.empty_table()
    entries = [e for meta in table.manifests.manifest_list(snapshot.delta_manifest_list)
               for e in table.manifests.manifest(meta.file_name) if e.kind == ADD and (files is None or files(e))]
    return append_rows(table, entries, out_cols, schema)


def append_rows(table, entries, out_cols: list[str], schema: pa.Schema) -> pa.Table:
    """The rows of an append table's ADD ``entries``, all +I, partition by partition, bucket by bucket, files by
    sequence number (deletion vectors are not applied: a streaming split carries none)."""
    from engine.append.read import read_append_file

    entries = sorted(entries, key=lambda e: (e.partition, e.bucket, e.file.min_sequence_number))
    scan = table.scan()
    reader = SplitReader(table.file_io, table.schema, table.schema_manager.schema, read_skips(table))
    parts = []
    for e in entries:
        values = scan.partition_values(e.partition)
        split = Split(e.partition, values, e.bucket, e.total_buckets, scan.bucket_dir(values, e.bucket), (e.file,))
        rows = read_append_file(reader, split, e.file, out_cols)
        kinds = pa.array(["+I"] * rows.num_rows, pa.string())
        parts.append(pa.Table.from_arrays(rows.columns + [kinds], schema=schema))
    return pa.concat_tables(parts) if parts else schema.empty_table()


# --- changelog-producer=none, normalized ---------------------------------------------------------------------
def _lookup(table, keys: pa.Table, snapshot: Snapshot, *, exclude: frozenset[str] = frozenset()) -> pa.Table:
    """The merged rows of ``keys`` at ``snapshot`` without the ``exclude`` files, every level searched."""
    if table.schema.cross_partition_update:
        from engine.dynamic_bucket.cross_partition import lookup_cross_partition
        return lookup_cross_partition(table, keys, snapshot=snapshot, exclude=exclude, every_level=True)
    from engine.read.lookup import lookup_rows
    return lookup_rows(table, keys, snapshot, exclude=exclude, every_level=True)


def _normalized(table, snapshot: Snapshot, out_cols: list[str], schema: pa.Schema, files=None) -> pa.Table:
    from engine.postpone import POSTPONE_BUCKET
    if any(e.bucket == POSTPONE_BUCKET for e in change_entries(table, snapshot)):
        raise UnsupportedFeature(f"table {table.name!r}: snapshot {snapshot.id} holds postponed records (bucket=-2), "
                                 "which no table state shows before their compaction (whose snapshot has no changes "
                                 "without a changelog producer): normalized changes cannot follow them; read the "
                                 "changes as stored (normalize=False) or set a changelog producer")
    delta = _snapshot_changes(table, snapshot, list(table.schema.primary_keys), False, files)
    if delta.num_rows == 0:
        return schema.empty_table()
    pk = list(table.schema.primary_keys)
    keys = delta.select(pk).combine_chunks()
    keys = keys.take(pa.array(sort_dedupe([keys.column(k) for k in pk], np.zeros((keys.num_rows, 1), np.uint64))))
    # Before = the state the APPEND snapshot was committed on: its files without the ones it added (so the previous
    # snapshot need not be retained); both sides see every level (a deletion-vector table's batch view hides
    # level 0, where the snapshot's new rows are).
    added = frozenset(e.file.file_name for e in change_entries(table, snapshot))
    before = _lookup(table, keys, snapshot, exclude=added)
    after = _lookup(table, keys, snapshot)
    encoded = encode_keys([keys.column(k) for k in pk])

    def aligned(rows: pa.Table) -> tuple[pa.Table, np.ndarray]:
        idx = np.full(keys.num_rows, -1, np.int64)
        if rows.num_rows:
            at = search_sorted(encoded, encode_keys([rows.column(k) for k in pk]))
            idx[at] = np.arange(rows.num_rows)
        rows = rows.append_column(VALUE_KIND, pa.array(np.zeros(rows.num_rows, np.int8)))
        return rows, idx

    b, bi = aligned(before)
    a, ai = aligned(after)
    rows = changelog_rows(b, bi, a, ai, table.schema, drop_unchanged=True)
    if rows is None:
        return schema.empty_table()
    kinds = row_kind_text(rows.column(VALUE_KIND).to_numpy())
    return pa.Table.from_arrays(rows.select(out_cols).columns + [kinds], schema=schema)
