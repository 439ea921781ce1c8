"""Compaction of a postpone table: postponed files move into real buckets (Paimon's postpone compact procedure,
SparkPostponeCompactProcedure / Flink's CompactAction with BucketFiles).

Contract of ``compact_postpone_table``:
- The postponed files of the latest snapshot (optionally of some partitions) are read record by record, unmerged,
  files in commit order (the order their snapshots added them; one writer's files in the order it wrote them), and
  written through a fixed-bucket writer of their partition: the bucket count its real-bucket files record, else
  one decided from the postponed rows and file sizes (engine.postpone.buckets.compaction_buckets). Records get the
  next sequence numbers of their bucket, so they win over the data already there; they are merged, compacted
  (universal picking, or fully with ``full=True``) and turn into changelog as a fixed-bucket write would.
- Real buckets the postponed records do not reach are compacted as ``Table.compact`` compacts them.
- Everything lands as ONE COMPACT snapshot (postponed files deleted, new files added), as BucketFiles makes one
  compaction message per bucket. If a concurrent commit removed an input file or changed real-bucket files of a
  partition this compaction writes, CommitConflict is raised, the files written are deleted and the table keeps
  its last snapshot.
"""
from __future__ import annotations

import uuid

from engine.compact.manager import (
    compact_split,
    compaction_splits,
    discard_messages,
    partition_matches,
)
from engine.crash_points import crash_point
from engine.data_paths import data_file_path
from engine.meta.snapshot import BATCH_COMMIT_IDENTIFIER
from engine.options import WRITE_ONLY, TableOptions
from engine.postpone import POSTPONE_BUCKET
from engine.postpone.buckets import compaction_buckets, known_bucket_counts
from engine.postpone.write import FixedBucketPostponeWrite
from engine.read.scan import Split
from engine.read.split_read import SplitReader
from engine.write.commit_message import CommitMessage


class _RedistributeWrite(FixedBucketPostponeWrite):
    """The fixed-bucket writer of a postpone compaction: bucket counts given, base pinned, compaction per
    ``full``, also when the table is ``write-only`` (PostponeUtils.tableForPostponeRewrite sets it false)."""

    def __init__(self, table, base, counts: dict[bytes, int], full: bool, **kw):
        super().__init__(table, **kw)
        self.options = TableOptions({**self.schema.options, WRITE_ONLY: "false"}, table=table.name)
        self.base_snapshot = base
        self._load_base()
        self._counts = dict(counts)
        self._full = full

    def _compact_touched_buckets(self) -> None:
        if self._full:
            for bc in self._compactions.values():
                bc.compact_in_writer(full=True)
            return
        super()._compact_touched_buckets()


def compact_postpone_table(table, *, full: bool = False, partitions=None, progress=None) -> int | None:
    """Compact postpone table ``table`` as the module docstring says; returns the COMPACT snapshot's id, or None
    when there was nothing to do. Raises InvalidInput (bad partition spec), InvalidOption, CommitConflict,
    CommitRetriesExhausted, CorruptFile."""
    from engine.commit.committer import Committer
    base, splits = compaction_splits(table, partitions)  # real buckets; validates the partition spec
    if base is None:
        return None
    if partitions is not None and isinstance(partitions, dict):
        partitions = [partitions]
    entries = table.manifests.live_entries(base)
    postponed = [e for e in entries if e.bucket == POSTPONE_BUCKET
                 and partition_matches(table.schema, table.scan().partition_values(e.partition), partitions)]
    counts = known_bucket_counts(entries, table.root)
    for part in dict.fromkeys(e.partition for e in postponed):
        if part not in counts:
            mine = [e.file for e in postponed if e.partition == part]
            counts[part] = compaction_buckets(table.schema.table_options, sum(f.row_count for f in mine),
                                              sum(f.file_size for f in mine))
    commit_user = str(uuid.uuid4())
    messages: list[CommitMessage] = []
    try:
        messages += _redistribute(table, base, postponed, counts, full, commit_user, progress)
        touched = {(m.partition, m.bucket) for m in messages}
        for sp in splits:
            if (sp.partition, sp.bucket) in touched:
                continue
            m = compact_split(table, sp, base.id, full=full, commit_user=commit_user)
            if m is not None:
                messages.append(m)
            if progress is not None:
                progress(rows=sp.row_count, bytes=sum(f.file_size for f in sp.files))
    except BaseException:
        discard_messages(table, messages)
        raise
    if not messages:
        return None
    crash_point("compact.before-commit")
    try:
        return Committer(table).commit(messages, strict_after=base.id)
    except BaseException:
        discard_messages(table, messages)
        raise


def _redistribute(table, base, postponed, counts, full: bool, commit_user: str, progress=None
                  ) -> list[CommitMessage]:
    """Write the postponed records into real buckets; the messages (one per real bucket written, one per partition
    removing its postponed files), all as compaction changes. ``progress(rows=, bytes=)`` after each file read."""
    if not postponed:
        return []
    scan = table.scan()
    reader = SplitReader(table.file_io, table.schema, table.schema_manager.schema)
    names = list(table.schema.field_names)
    writer = _RedistributeWrite(table, base, counts, full, commit_user=commit_user)
    try:
        for e in postponed:  # live_entries keeps the order the snapshots added the files
            values = scan.partition_values(e.partition)
            split = Split(e.partition, values, POSTPONE_BUCKET, POSTPONE_BUCKET,
                          scan.bucket_dir(values, POSTPONE_BUCKET), (e.file,))
            rows = reader.read_file(split, e.file, names)
            kinds = rows.column("_VALUE_KIND").to_numpy().astype("int8")
            writer._add(rows.select(names).cast(table.arrow_schema), kinds)
            if progress is not None:
                progress(rows=e.file.row_count, bytes=e.file.file_size)
        written = writer.prepare_commit()
    except BaseException:
        writer.abort()
        raise
    messages = [_as_compaction(table, m) for m in written]
    removed: dict[bytes, list] = {}
    for e in postponed:
        removed.setdefault(e.partition, []).append(e.file)
    for part, files in removed.items():
        messages.append(CommitMessage(part, scan.partition_values(part), POSTPONE_BUCKET, POSTPONE_BUCKET, (),
                                      commit_user, BATCH_COMMIT_IDENTIFIER, base.id, table.schema.id,
                                      compact_before=tuple(files)))
    return messages


def _as_compaction(table, m: CommitMessage) -> CommitMessage:
    """A writer's message as compaction changes only (BucketFiles.makeMessage): its new files join
    ``compact_after``; a new file its own compaction consumed is in neither list and is deleted now."""
    new = {f.file_name: f for f in m.new_files}
    after_names = {f.file_name for f in m.compact_after}
    before = []
    for f in m.compact_before:
        if f.file_name in new:
            del new[f.file_name]
            if f.file_name not in after_names:
                table.file_io.delete(data_file_path(table.bucket_dir(m.partition_values, m.bucket), f))
        else:
            before.append(f)
    after = tuple(new.values()) + tuple(m.compact_after)
    return CommitMessage(m.partition, m.partition_values, m.bucket, m.total_buckets, (), m.commit_user,
                         m.commit_identifier, m.base_snapshot_id, m.schema_id, compact_before=tuple(before),
                         compact_after=after, compact_changelog=tuple(m.changelog_files) + tuple(m.compact_changelog),
                         dv_before=m.dv_before, dv_after=m.dv_after)
