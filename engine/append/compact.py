"""Small-file compaction of append tables.

Per (partition, bucket), files are taken in append (sequence) order; every maximal run of consecutive files
smaller than ``target-file-size`` (append default 256 MB) with at least ``compaction.min.file-num`` files (default 5) is rewritten as
files rolled at ``target-file-size``, keeping row order and the run's sequence numbers. A file whose deletion vector
marks more than ``compaction.delete-ratio-threshold`` of its rows (default 0.2) is compacted whatever its size,
alone if need be. ``full=True`` rewrites every bucket holding more than one file (a fixed bucket's lone file
too under ``compaction.force-rewrite-all-files``). The result is committed as one COMPACT snapshot (DELETE of the old
files, ADD of the new) — row content and order are unchanged. Rows deletion vectors mark deleted are not copied,
and the vectors of the rewritten files are dropped from the bucket's DV index (as Paimon's AppendCompactTask).

Contract: returns the new snapshot id, or None when nothing needed compacting. If a compacted file was removed by
a concurrent commit, or its deletion vector changed (a concurrent DELETE), raises CommitConflict, deletes the files
it wrote and leaves the table unchanged.
"""
from __future__ import annotations

import dataclasses
import uuid

import pyarrow as pa

from engine.append.files import target_file_size, write_append_files
from engine.append.read import ordered_files, read_append_file
from engine.commit.committer import Committer
from engine.commit.conflicts import check_vectors_unchanged
from engine.data_paths import data_file_path
from engine.errors import (
    CommitConflict,
    CommitOutcomeUnknown,
    CommitRetriesExhausted,
    InvalidInput,
)
from engine.meta.data_file import FILE_SOURCE_COMPACT, DataFileMeta
from engine.meta.manifest import ADD, DELETE, ManifestEntry
from engine.meta.snapshot import BATCH_COMMIT_IDENTIFIER, COMMIT_KIND_COMPACT
from engine.options import COMPACTION_DELETE_RATIO_THRESHOLD, COMPACTION_MIN_FILE_NUM, FORCE_REWRITE_ALL_FILES
from engine.read.split_read import SplitReader
from engine.write.commit_message import CommitMessage


class _CompactCommitter(Committer):
    """A committer whose snapshot also deletes the compacted files (which must still be live, with the deletion
    vectors they had in ``base``)."""

    def __init__(self, table, deleted: list[ManifestEntry], base=None):
        super().__init__(table)
        self.deleted = deleted
        self.base = base

    def _entries(self, messages):
        return self.deleted + super()._entries(messages)

    def _check_conflicts(self, entries, latest):
        super()._check_conflicts([e for e in entries if e.kind == ADD], latest)
        live = {e.identifier for e in self.table.manifests.live_entries(latest)} if latest is not None else set()
        for e in entries:
            if e.kind == DELETE and e.identifier not in live:
                raise CommitConflict(self.table.name, f"file {e.file.file_name} was removed by a concurrent commit")
        # rows a concurrent DELETE marked in a compacted file would come back in the compacted output
        check_vectors_unchanged(self.table, self.base, latest,
                                [(e.partition, e.bucket, e.file.file_name) for e in entries if e.kind == DELETE])


def pick_runs(files: list[DataFileMeta], target_size: int, min_files: int, full: bool,
              must: frozenset[str] = frozenset(), force: bool = False) -> list[list[DataFileMeta]]:
    """Runs of consecutive files (in append order) to rewrite together: files smaller than ``target_size`` or
    named in ``must`` (too many rows deleted); a run is taken when it has ``min_files`` files (at least 2) or holds
    a ``must`` file (then even alone, as Paimon's coordinator always compacts the files it picked for their
    deletion vectors). ``full``: all files as one run when there are several, or one that is in ``must`` or
    ``force`` is set (compaction.force-rewrite-all-files)."""
    if full:
        return [files] if len(files) > 1 or (files and (force or files[0].file_name in must)) else []
    runs, current = [], []
    for f in files + [None]:
        if f is not None and (f.file_size < target_size or f.file_name in must):
            current.append(f)
            continue
        if len(current) >= max(2, min_files) or any(c.file_name in must for c in current):
            runs.append(current)
        current = []
    return runs


def too_many_deleted(files: list[DataFileMeta], vectors, threshold: float) -> frozenset[str]:
    """Names of the files whose deletion vector marks more than ``threshold`` x their rows deleted, or whose
    vector does not record its cardinality (Paimon's AppendCompactCoordinator.tooHighDeleteRatio)."""
    rows = {f.file_name: f.row_count for f in files}
    return frozenset(name for name, where in vectors.files if name in rows
                     and (where.cardinality is None or where.cardinality > rows[name] * threshold))


def compact_append(table, *, full: bool = False, partitions=None, progress=None) -> int | None:
    """Compact the small files of every bucket of an append table (see module docstring).

    ``partitions``: a dict or list of dicts of partition column -> value limiting the work (InvalidInput for a
    column that is not a partition key). ``progress(rows=, bytes=)``, if given, is called after each bucket with
    the rows and bytes of the bucket's live files, whether or not they needed rewriting."""
    from engine.compact.manager import compaction_splits

    if not table.schema.is_append_only:
        raise InvalidInput("compact_append works on append tables (no primary key)", table=table.name)
    snap, splits = compaction_splits(table, partitions)
    if snap is None:
        return None
    opts = table.schema.table_options
    target, min_files = target_file_size(table.schema), opts.get(COMPACTION_MIN_FILE_NUM)
    force = opts.get(FORCE_REWRITE_ALL_FILES) and opts.bucket > 0  # Paimon's BucketedAppendCompactManager only
    reader = SplitReader(table.file_io, table.schema, table.schema_manager.schema)
    columns = list(table.schema.field_names)
    user = str(uuid.uuid4())
    deleted: list[ManifestEntry] = []
    messages: list[CommitMessage] = []
    index_files: list[str] = []
    try:
        for split in splits:
            rewritten = []
            files = ordered_files(split)
            must = too_many_deleted(files, split.vectors, opts.get(COMPACTION_DELETE_RATIO_THRESHOLD))
            for run in pick_runs(files, target, min_files, full, must, force):
                rows = pa.concat_tables([read_append_file(reader, split, f, columns) for f in run])
                new = write_append_files(table.file_io, split.bucket_dir, rows, table.schema,
                                         run[0].min_sequence_number, file_source=FILE_SOURCE_COMPACT)
                messages.append(CommitMessage(split.partition, split.partition_values, split.bucket,
                                              split.total_buckets, tuple(new), user, BATCH_COMMIT_IDENTIFIER,
                                              snap.id, table.schema.id))
                deleted += [ManifestEntry(DELETE, split.partition, split.bucket, split.total_buckets, f)
                            for f in run]
                rewritten += [f.file_name for f in run]
            dv = _without_vectors(table, split, rewritten)
            if dv is not None:  # the rewritten files' vectors go (their live rows moved); one message carries it
                index_files += [table.scan().index_file_path(r) for r in dv[1]]
                messages[-1] = dataclasses.replace(messages[-1], dv_before=dv[0], dv_after=dv[1])
            if progress is not None:
                progress(rows=split.row_count, bytes=sum(f.file_size for f in split.files))
        if not messages:
            return None
        return _CompactCommitter(table, deleted, snap).commit(messages, commit_kind=COMMIT_KIND_COMPACT)
    except CommitOutcomeUnknown:
        raise  # the snapshot may reference the new files: keep them
    except BaseException as e:
        if not isinstance(e, (CommitConflict, CommitRetriesExhausted)) and _published(table, user):
            raise
        for m in messages:
            for f in m.new_files:
                table.file_io.delete(data_file_path(table.bucket_dir(m.partition_values, m.bucket), f))
        for path in index_files:
            table.file_io.delete(path)
        raise


def _without_vectors(table, split, rewritten: list[str]):
    """``(dv_before, dv_after)`` of the bucket of ``split`` once the vectors of the ``rewritten`` files are dropped
    (the bucket's remaining vectors are written to one new DV index file), or None when none of them had one."""
    names = {name for name, _ in split.vectors.files}
    if not names.intersection(rewritten):
        return None
    from engine.deletion_vectors.maintainer import BucketDeletionVectors
    from engine.options import DELETION_VECTORS_BITMAP64, DELETION_VECTORS_INDEX_PREFIX
    opts = table.schema.table_options
    vectors = BucketDeletionVectors(table, split.partition, split.bucket, split.vectors,
                                    bitmap64=opts.get(DELETION_VECTORS_BITMAP64),
                                    prefix=opts.get(DELETION_VECTORS_INDEX_PREFIX))
    vectors.apply({}, rewritten)
    return vectors.changes()


def _published(table, user: str) -> bool:
    latest = table.snapshot()
    return latest is not None and latest.commit_user == user
