"""Compaction of buckets: by writers after a flush, and by ``Table.compact`` (dedicated compaction).

``BucketCompaction`` holds one bucket's LSM tree while a writer or compactor works on it and accumulates what
every compaction run did into one ``(compact_before, compact_after)`` pair, as Paimon's writer does: a file written
by one compaction and consumed by a later one in the same commit is deleted at once and appears in neither list.
"""
from __future__ import annotations

import uuid
from typing import Iterable

from engine.compact.levels import Levels
from engine.compact.picker import CompactionSettings, CompactUnit, UniversalPicker
from engine.compact.rewriter import CompactResult, CompactRewriter
from engine.meta.data_file import DataFileMeta
from engine.meta.snapshot import BATCH_COMMIT_IDENTIFIER
from engine.write.commit_message import CommitMessage


class BucketCompaction:
    def __init__(self, table, partition: bytes, partition_values: tuple, bucket: int,
                 files: Iterable[DataFileMeta], settings: CompactionSettings):
        self.table = table
        self.partition = partition
        self.partition_values = partition_values
        self.bucket = bucket
        self.settings = settings
        key_types = table.schema.types_of(table.schema.trimmed_primary_keys)
        self.where = table.bucket_dir(partition_values, bucket)
        self.levels = Levels(files, settings.num_levels, key_types, self.where)
        self.before: dict[tuple[str, int], DataFileMeta] = {}
        self.after: dict[tuple[str, int], DataFileMeta] = {}
        self.changelog: list[DataFileMeta] = []  # lookup / full-compaction changelog files (issue 5)

    def add_level0(self, files: Iterable[DataFileMeta]) -> None:
        self.levels = self.levels.update((), files)

    def sorted_runs(self) -> int:
        return self.levels.number_of_sorted_runs()

    def pick(self, full: bool = False) -> CompactUnit | None:
        picker = UniversalPicker(self.settings, self.levels.max_level)
        runs = self.levels.runs()
        return picker.pick_full(runs) if full else picker.pick(runs)

    def compact(self, full: bool = False) -> bool:
        """Run the picked unit (or a full compaction); True if anything changed."""
        unit = self.pick(full)
        if unit is None:
            return False
        rewriter = CompactRewriter(self.table, self.partition_values, self.bucket, self.settings)
        result = rewriter.run(unit, self.levels)
        self._accumulate(result)
        self.changelog.extend(result.changelog)
        self.levels = self.levels.update(result.before, result.after)
        return bool(result.before or result.after)

    def compact_until_below_stop_trigger(self) -> None:
        """Writer back-pressure: compact synchronously while sorted runs exceed the stop trigger."""
        while self.sorted_runs() > self.settings.stop_trigger:
            if not self.compact():
                break

    def changes(self) -> tuple[tuple[DataFileMeta, ...], tuple[DataFileMeta, ...]]:
        return tuple(self.before.values()), tuple(self.after.values())

    def changelog_files(self) -> tuple[DataFileMeta, ...]:
        return tuple(self.changelog)

    def discard(self) -> None:
        """Delete the files compaction wrote (never upgraded inputs); used when the changes will not commit."""
        for f in self.changelog:
            self.table.file_io.delete(f"{self.where}/{f.file_name}")
        self.changelog.clear()
        old = {name for name, _ in self.before}
        for (name, _), f in self.after.items():
            if name not in old:
                self.table.file_io.delete(f"{self.where}/{name}")
        self.before.clear()
        self.after.clear()

    def _accumulate(self, result: CompactResult) -> None:
        new_after = {(f.file_name, f.level): f for f in result.after}
        new_after_names = {f.file_name for f in result.after}
        for f in result.before:
            ident = (f.file_name, f.level)
            if ident in self.after:  # an intermediate file of this commit
                del self.after[ident]
                if f.file_name not in {n for n, _ in self.before} and f.file_name not in new_after_names:
                    self.table.file_io.delete(f"{self.where}/{f.file_name}")
            else:
                self.before[ident] = f
        self.after.update(new_after)


def full_compaction_due(settings: CompactionSettings, commit_identifier: int) -> bool:
    """``full-compaction.delta-commits = N``: streaming commits (explicit identifiers) fully compact when the
    identifier is a multiple of N; batch commits (identifier Long.MAX_VALUE) fully compact every commit, as Paimon's
    batch writers do."""
    n = settings.full_delta_commits
    if not n or n <= 0:
        return False
    return commit_identifier == BATCH_COMMIT_IDENTIFIER or commit_identifier % n == 0


def partition_matches(schema, values: tuple, partitions) -> bool:
    """True when ``partitions`` is None or one of its specs (dicts of partition column -> value) matches."""
    if partitions is None:
        return True
    by_name = dict(zip(schema.partition_keys, values))
    for spec in partitions:
        if all(k in by_name and (by_name[k] == v or str(by_name[k]) == str(v)) for k, v in spec.items()):
            return True
    return False


def compact_table(table, *, full: bool = False, partitions=None) -> list[CommitMessage]:
    """Compact every bucket of the latest snapshot (optionally only some partitions) and return COMPACT messages.

    Raises InvalidInput for a partition spec naming a column that is not a partition key.
    """
    from engine.errors import InvalidInput
    schema = table.schema
    if partitions is not None:
        if isinstance(partitions, dict):
            partitions = [partitions]
        for spec in partitions:
            bad = [k for k in spec if k not in schema.partition_keys]
            if bad:
                raise InvalidInput(f"{bad[0]!r} is not a partition key (partition keys: "
                                   f"{list(schema.partition_keys)})", table=table.name, column=bad[0])
    snapshot = table.snapshot_manager.latest()
    if snapshot is None:
        return []
    settings = CompactionSettings.of(schema.table_options)
    user = str(uuid.uuid4())
    messages = []
    done: list[BucketCompaction] = []
    try:
        for split in table.scan().plan(snapshot):
            if not partition_matches(schema, split.partition_values, partitions):
                continue
            bc = BucketCompaction(table, split.partition, split.partition_values, split.bucket, split.files,
                                  settings)
            done.append(bc)
            if not bc.compact(full=full):
                continue
            if full:
                while bc.compact(full=True):  # upgrades can leave several runs below the top level
                    pass
            before, after = bc.changes()
            messages.append(CommitMessage(split.partition, split.partition_values, split.bucket,
                                          split.total_buckets, (), user, BATCH_COMMIT_IDENTIFIER, snapshot.id,
                                          schema.id, compact_before=before, compact_after=after,
                                          compact_changelog=bc.changelog_files()))
    except BaseException:
        for bc in done:
            bc.discard()
        raise
    return messages
