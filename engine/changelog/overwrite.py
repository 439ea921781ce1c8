"""OVERWRITE snapshots in continuous streaming reads (Paimon's DataTableStreamScan.handleOverwriteSnapshot).

An OVERWRITE snapshot (INSERT OVERWRITE, dynamic partition overwrite, a truncate) holds no changelog and is not
APPEND, so a streaming read skips it by default. With ``streaming-read-overwrite`` (primary-key tables) or
``streaming-read-append-overwrite`` (append tables) the read emits, instead of the snapshot's changelog, the files
its delta manifests replaced and added (FollowUpScanner.getOverwriteChangesPlan):

* primary-key tables (SnapshotReader.readChanges read by IncrementalChangelogReadProvider): per bucket, the files
  the snapshot deleted, merged by the merge engine (every level, retracts dropped), each row as -D; then the files
  it added, merged the same way, each row with its merged kind (+I, or +U if stored so). There is no diff: a key
  both removed and written gives -D (old row) and +I (new row), even when the row did not change. Deletion vectors
  are not applied (a streaming split carries none), so a row a vector deleted whose key has no newer record in the
  removed files comes back as a -D too, as in Paimon.
* append tables (a DELTA read of the ADD files): the added files' rows as +I in append order; removed rows give
  nothing.

Rows come as every -D (partition, bucket, key order), then every added row (same order): Paimon emits each
bucket's -D rows before its added rows, and putting all removals first keeps that order for a key whose bucket
changed (a rescale). With ``normalize`` (a model of Flink's ChangelogNormalize after the source) the added rows are
all +I, since the -D before them cleared the key's state (the -D rows are not filtered: ChangelogNormalize would
drop the -D of a key a deletion vector had deleted, which this model does not detect).

Only continuous streaming follows this: incremental reads (``read_changes``, stream mode ``incremental``) skip
OVERWRITE snapshots whatever the options (Paimon's IncrementalDeltaStartingScanner).
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from engine.changelog.emit import DELETE, INSERT
from engine.changelog.files import row_kind_text
from engine.changelog.reading import (
    append_rows,
    change_entries,
    check_columns,
    filter_changes,
    in_buckets,
    output_schema,
    read_columns,
    snapshot_changes,
)
from engine.merge import VALUE_KIND
from engine.meta.manifest import ADD
from engine.meta.manifest import DELETE as FILE_DELETE
from engine.meta.snapshot import COMMIT_KIND_APPEND, COMMIT_KIND_OVERWRITE, Snapshot
from engine.options import (
    STREAMING_READ_APPEND_OVERWRITE,
    STREAMING_READ_OVERWRITE,
    TableOptions,
)
from engine.read.scan import Split
from engine.read.file_skips import read_skips
from engine.read.split_read import SplitReader
from kernels.keys import encode_keys
from kernels.merge import sort_indices


def reads_overwrite(table, options: TableOptions | None = None) -> bool:
    """Whether a streaming read of ``table`` emits OVERWRITE snapshots: ``streaming-read-overwrite`` for a
    primary-key table, ``streaming-read-append-overwrite`` for an append table, from ``options`` (default: the
    table's)."""
    opts = options if options is not None else table.schema.table_options
    return bool(opts.get(STREAMING_READ_APPEND_OVERWRITE if table.schema.is_append_only
                         else STREAMING_READ_OVERWRITE))


def follow_up_changes(table, snapshot: Snapshot, columns: Sequence[str] | None = None, *,
                      normalize: bool = False, read_overwrite: bool | None = None, dnf=None,
                      buckets=None) -> pa.Table:
    """What a continuous streaming read emits for ``snapshot``: ``overwrite_changes`` for an OVERWRITE snapshot
    when ``read_overwrite`` (default: ``reads_overwrite(table)``), else ``snapshot_changes``; with the normalized
    filter ``dnf``, only the rows satisfying it; with ``buckets`` (a set of (partition bytes, bucket)) only the
    changes of those buckets (see ``follow_up_files``)."""
    if read_overwrite is None:
        read_overwrite = reads_overwrite(table)
    if read_overwrite and snapshot.commit_kind == COMMIT_KIND_OVERWRITE:
        return overwrite_changes(table, snapshot, columns, normalize=normalize, dnf=dnf, buckets=buckets)
    return snapshot_changes(table, snapshot, columns, normalize=normalize, dnf=dnf, buckets=buckets)


def follow_up_files(table, snapshot: Snapshot, *, read_overwrite: bool | None = None) -> list:
    """The manifest entries whose files ``follow_up_changes`` reads for ``snapshot`` (its (partition, bucket) pairs
    are the buckets it can be restricted to): the delta files of an OVERWRITE snapshot it emits (both kinds for a
    primary-key table, the added ones for an append table), else the change files (``change_entries``; an append
    table's APPEND snapshot's added files)."""
    if read_overwrite is None:
        read_overwrite = reads_overwrite(table)
    append_only = table.schema.is_append_only
    if (read_overwrite and snapshot.commit_kind == COMMIT_KIND_OVERWRITE) or \
            (append_only and snapshot.commit_kind == COMMIT_KIND_APPEND):
        entries = [e for meta in table.manifests.manifest_list(snapshot.delta_manifest_list)
                   for e in table.manifests.manifest(meta.file_name)]
        return [e for e in entries if e.kind == ADD] if append_only else entries
    return [] if append_only else change_entries(table, snapshot)


def overwrite_changes(table, snapshot: Snapshot, columns: Sequence[str] | None = None, *,
                      normalize: bool = False, dnf=None, buckets=None) -> pa.Table:
    """The rows ``snapshot``'s file changes stand for (module docstring), as ``columns`` + ``_row_kind``; with the
    normalized filter ``dnf`` only the rows satisfying it (files skipped by partition, bucket and key statistics,
    an append table's by value statistics too: its rows are not merged); with ``buckets`` only those (partition
    bytes, bucket) pairs' rows."""
    out_cols = check_columns(table, columns)
    if dnf:
        files = table.scan().entry_filter(dnf, by_values=table.schema.is_append_only)
        rows = _overwrite_changes(table, snapshot, read_columns(out_cols, dnf), normalize, in_buckets(files, buckets))
        return filter_changes(rows, dnf, out_cols)
    return _overwrite_changes(table, snapshot, out_cols, normalize, in_buckets(None, buckets))


def _overwrite_changes(table, snapshot: Snapshot, out_cols: list[str], normalize: bool, files) -> pa.Table:
    schema = output_schema(table, out_cols)
    entries = [e for meta in table.manifests.manifest_list(snapshot.delta_manifest_list)
               for e in table.manifests.manifest(meta.file_name) if files is None or files(e)]
    if table.schema.is_append_only:
        return append_rows(table, [e for e in entries if e.kind == ADD], out_cols, schema)
    removed = _merged(table, [e for e in entries if e.kind == FILE_DELETE], out_cols)
    added = _merged(table, [e for e in entries if e.kind == ADD], out_cols)
    parts = []
    for rows in removed:
        parts.append(_with_kinds(rows, out_cols, np.full(rows.num_rows, DELETE, np.int8), schema))
    for rows in added:
        kinds = rows.column(VALUE_KIND).to_numpy()
        parts.append(_with_kinds(rows, out_cols, np.full(rows.num_rows, INSERT, np.int8) if normalize else kinds,
                                 schema))
    return pa.concat_tables(parts) if parts else schema.empty_table()


def _with_kinds(rows: pa.Table, out_cols: list[str], kinds: np.ndarray, schema: pa.Schema) -> pa.Table:
    return pa.Table.from_arrays(rows.select(out_cols).columns + [row_kind_text(kinds)], schema=schema)


def _merged(table, entries, out_cols: list[str]) -> list[pa.Table]:
    """Per (partition, bucket) of ``entries``, in that order: the merged live records of its files (every level,
    no deletion vector, retracts dropped) with ``_VALUE_KIND``, in primary-key order."""
    groups: dict[tuple[bytes, int], list] = {}
    for e in entries:
        groups.setdefault((e.partition, e.bucket), []).append(e)
    pk = list(table.schema.primary_keys)
    columns = [c for c in table.schema.field_names if c in out_cols or c in pk]
    scan = table.scan()
    reader = SplitReader(table.file_io, table.schema, table.schema_manager.schema, read_skips(table))
    reader.raw_reads = False  # Paimon's streaming split always goes through the merge reader
    out = []
    for (partition, bucket) in sorted(groups):
        group = groups[(partition, bucket)]
        values = scan.partition_values(partition)
        split = Split(partition, values, bucket, group[0].total_buckets, scan.bucket_dir(values, bucket),
                      tuple(e.file for e in group))
        rows = reader.read(split, columns, with_kind=True)
        if rows.num_rows:
            out.append(rows.take(pa.array(sort_indices(encode_keys([rows.column(k) for k in pk])))))
    return out


__all__ = ["follow_up_changes", "follow_up_files", "overwrite_changes", "reads_overwrite"]
