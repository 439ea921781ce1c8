"""Staged postponed files turned into a fixed-bucket write (Paimon's SparkPostponeStagedCommitter).

Parallel writers of a postpone table with ``postpone.batch-write-fixed-bucket`` cannot know the bucket count of a
partition that has no real buckets yet before all input is seen. As Paimon's Spark writer does, they first write
postponed files (PostponedWrite, "staged": never committed), and the committer then rewrites the staged records
into real buckets with one FixedBucketPostponeWrite: a partition keeps the count its real-bucket files record
(none for an overwrite), else gets ``engine.postpone.buckets.batch_write_buckets`` of its staged rows and file
sizes (PostponeUtils.decideFixedBucketNum's inputs).

``PartlyStagedWrite`` is a task of such a parallel write: rows of a partition whose count is known (its
real-bucket files in the writer's base snapshot; none for an overwrite) go straight to real buckets
(FixedBucketPostponeWrite), only the others are staged; ``rewrite_staged`` then rewrites the staged ones.

Contract of ``rewrite_staged``: the staged records of each partition enter the fixed-bucket writer in order of
their staged sequence numbers (writers on separate sequence lanes interleave, so two records of one key from
different writers are ordered as a fixed-bucket write on those lanes would order them), and get the next sequence
numbers of their real bucket. The messages returned are the fixed-bucket writer's (merged, compacted, changelog as
a fixed-bucket table); the staged files are not deleted (the caller deletes them once the rewrite is committed or
abandoned). Raises what the writer raises (InvalidOption, CorruptFile, ...) after deleting the files it wrote.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from engine.meta import binary_row
from engine.partitioning import partition_groups
from engine.postpone import POSTPONE_BUCKET
from engine.postpone.buckets import batch_write_buckets, known_bucket_counts
from engine.postpone.write import FixedBucketPostponeWrite, PostponedWrite
from engine.read.scan import Split
from engine.read.split_read import SplitReader
from engine.schema import SEQUENCE_NUMBER, VALUE_KIND
from engine.write.commit_message import CommitMessage
from engine.write.lifecycle import WriterLifecycle


def staged_files(messages) -> dict[bytes, tuple[tuple, list]]:
    """Partition -> (partition values, the postponed files ``messages`` add, in message order)."""
    out: dict[bytes, tuple[tuple, list]] = {}
    for m in messages:
        if m.bucket == POSTPONE_BUCKET and m.new_files:
            out.setdefault(m.partition, (m.partition_values, []))[1].extend(m.new_files)
    return out


def rewrite_staged(table, messages, *, base=None, overwrite: bool = False, commit_user: str,
                   commit_identifier: int) -> list[CommitMessage]:
    """The fixed-bucket messages of the staged postponed files in ``messages`` (module docstring), written by a
    writer of ``table`` (its files named by ``table``'s prefixes) from snapshot ``base`` (None: the latest);
    ``overwrite`` decides every partition's bucket count afresh."""
    staged = staged_files(messages)
    if not staged:
        return []
    # the writer numbers sequences from this snapshot too (default: the latest, as a new writer's base)
    base, entries = table.writer_base(table.snapshot() if base is None else base)
    known = {} if overwrite else known_bucket_counts(entries, table.root)
    opts = table.schema.table_options
    decided = {part: batch_write_buckets(opts, sum(f.row_count for f in files), sum(f.file_size for f in files))
               for part, (_, files) in staged.items() if part not in known}
    writer = FixedBucketPostponeWrite(table, overwrite=overwrite, decided=decided, commit_user=commit_user,
                                      commit_identifier=commit_identifier)
    writer.base_snapshot = base
    reader = SplitReader(table.file_io, table.schema, table.schema_manager.schema)
    names = list(table.schema.field_names)
    try:
        for part, (values, files) in staged.items():
            bucket_dir = table.bucket_dir(values, POSTPONE_BUCKET)
            split = Split(part, values, POSTPONE_BUCKET, POSTPONE_BUCKET, bucket_dir, tuple(files))
            rows = pa.concat_tables([reader.read_file(split, f, names) for f in files])
            order = np.argsort(rows.column(SEQUENCE_NUMBER).to_numpy(), kind="stable")
            rows = rows.take(pa.array(order))
            kinds = rows.column(VALUE_KIND).to_numpy().astype("int8")
            writer._add(rows.select(names).cast(table.arrow_schema), kinds)
        return writer.prepare_commit()
    except BaseException:
        writer.abort()
        raise


class PartlyStagedWrite(WriterLifecycle):
    """One task's writer of a parallel fixed-bucket write (module docstring): ``write`` sends each row to the
    fixed-bucket writer when its partition has a known count, else to a staging PostponedWrite (same commit user,
    identifier and sequence lane). ``prepare_commit`` returns both writers' messages; ``abort`` deletes both's
    files. Raises what the writers raise."""

    def __init__(self, table, *, overwrite: bool = False, **kw):
        self.table = table
        self.direct = FixedBucketPostponeWrite(table, overwrite=overwrite, decided={}, **kw)
        self.staged = PostponedWrite(table, **kw)
        self._start_lifecycle()

    @property
    def base_snapshot(self):
        return self.direct.base_snapshot

    @base_snapshot.setter
    def base_snapshot(self, snapshot) -> None:
        self.direct.base_snapshot = self.staged.base_snapshot = snapshot

    def write(self, data, row_kinds=None) -> None:
        from engine.write.validate import conform
        self._check_open()
        rows, kinds = conform(data, self.table.schema, self.table.name, row_kinds=row_kinds)
        known = self.direct._known_counts()
        types = self.table.schema.types_of(self.table.schema.partition_keys)
        direct = np.zeros(rows.num_rows, bool)
        for values, idx in partition_groups(rows, self.table.schema.partition_keys):
            if binary_row.serialize_row(list(values), types) in known:
                direct[slice(None) if idx is None else idx] = True
        for writer, mask in ((self.direct, direct), (self.staged, ~direct)):
            if mask.all():
                writer._add(rows, kinds)
            elif mask.any():
                keep = np.flatnonzero(mask)
                writer._add(rows.take(pa.array(keep)), kinds[keep])

    def prepare_commit(self) -> list[CommitMessage]:
        self._check_open()
        messages = self.direct.prepare_commit() + self.staged.prepare_commit()
        self._prepared = True
        return messages

    def abort(self) -> None:
        self.direct.abort()
        self.staged.abort()
