"""Small-file compaction of append tables.

Per (partition, bucket), files are taken in append (sequence) order; every maximal run of consecutive files
smaller than ``target-file-size`` (append default 256 MB) with at least ``compaction.min.file-num`` files (default 5) is rewritten as
files rolled at ``target-file-size``, keeping row order and the run's sequence numbers. ``full=True`` rewrites
every bucket holding more than one file. The result is committed as one COMPACT snapshot (DELETE of the old
files, ADD of the new) — row content and order are unchanged.

Contract: returns the new snapshot id, or None when nothing needed compacting. If a compacted file was removed by
a concurrent commit, raises CommitConflict, deletes the files it wrote and leaves the table unchanged.
"""
from __future__ import annotations

import os
import uuid

import pyarrow as pa

from engine.append.files import target_file_size, write_append_files
from engine.append.read import ordered_files, read_append_file
from engine.commit.committer import Committer
from engine.errors import (
    CommitConflict,
    CommitOutcomeUnknown,
    CommitRetriesExhausted,
    InvalidInput,
)
from engine.meta.data_file import FILE_SOURCE_COMPACT, DataFileMeta
from engine.meta.manifest import ADD, DELETE, ManifestEntry
from engine.meta.snapshot import BATCH_COMMIT_IDENTIFIER, COMMIT_KIND_COMPACT
from engine.options import COMPACTION_MIN_FILE_NUM
from engine.read.split_read import SplitReader
from engine.write.commit_message import CommitMessage


class _CompactCommitter(Committer):
    """A committer whose snapshot also deletes the compacted files (which must still be live)."""

    def __init__(self, table, deleted: list[ManifestEntry]):
        super().__init__(table)
        self.deleted = deleted

    def _entries(self, messages):
        return self.deleted + super()._entries(messages)

    def _check_conflicts(self, entries, latest):
        super()._check_conflicts([e for e in entries if e.kind == ADD], latest)
        live = {e.identifier for e in self.table.manifests.live_entries(latest)} if latest is not None else set()
        for e in entries:
            if e.kind == DELETE and e.identifier not in live:
                raise CommitConflict(self.table.name, f"file {e.file.file_name} was removed by a concurrent commit")


def pick_runs(files: list[DataFileMeta], target_size: int, min_files: int, full: bool) -> list[list[DataFileMeta]]:
    """Runs of consecutive files (in append order) to rewrite together."""
    if full:
        return [files] if len(files) > 1 else []
    runs, current = [], []
    for f in files + [None]:
        if f is not None and f.file_size < target_size:
            current.append(f)
            continue
        if len(current) >= max(2, min_files):
            runs.append(current)
        current = []
    return runs


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
    reader = SplitReader(table.file_io, table.schema, table.schema_manager.schema)
    columns = list(table.schema.field_names)
    user = str(uuid.uuid4())
    deleted: list[ManifestEntry] = []
    messages: list[CommitMessage] = []
    try:
        for split in splits:
            for run in pick_runs(ordered_files(split), target, min_files, full):
                rows = pa.concat_tables([read_append_file(reader, split, f, columns) for f in run])
                new = write_append_files(table.file_io, split.bucket_dir, rows, table.schema,
                                         run[0].min_sequence_number, file_source=FILE_SOURCE_COMPACT)
                messages.append(CommitMessage(split.partition, split.partition_values, split.bucket,
                                              split.total_buckets, tuple(new), user, BATCH_COMMIT_IDENTIFIER,
                                              snap.id, table.schema.id))
                deleted += [ManifestEntry(DELETE, split.partition, split.bucket, split.total_buckets, f)
                            for f in run]
            if progress is not None:
                progress(rows=split.row_count, bytes=sum(f.file_size for f in split.files))
        if not messages:
            return None
        return _CompactCommitter(table, deleted).commit(messages, commit_kind=COMMIT_KIND_COMPACT)
    except CommitOutcomeUnknown:
        raise  # the snapshot may reference the new files: keep them
    except BaseException as e:
        if not isinstance(e, (CommitConflict, CommitRetriesExhausted)) and _published(table, user):
            raise
        for m in messages:
            for f in m.new_files:
                table.file_io.delete(os.path.join(table.bucket_dir(m.partition_values, m.bucket), f.file_name))
        raise


def _published(table, user: str) -> bool:
    latest = table.snapshot()
    return latest is not None and latest.commit_user == user
