"""Compaction of buckets: by writers after a flush, and by ``Table.compact`` (dedicated compaction).

``BucketCompaction`` holds one bucket's LSM tree while a writer or compactor works on it and accumulates what
every compaction run did into one ``(compact_before, compact_after)`` pair, as Paimon's writer does: a file written
by one compaction and consumed by a later one in the same commit is deleted at once and appears in neither list.
"""
from __future__ import annotations

import logging
import os
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Iterable

from engine.compact.levels import Levels
from engine.crash_points import crash_point
from engine.data_paths import data_file_path
from engine.errors import CorruptFile
from engine.compact.picker import CompactionSettings, CompactUnit, UniversalPicker
from engine.compact.rewriter import CompactResult, CompactRewriter
from engine.meta.data_file import DataFileMeta
from engine.meta.snapshot import BATCH_COMMIT_IDENTIFIER
from engine.write.commit_message import CommitMessage

log = logging.getLogger("lakemerge.compact")


class BucketCompaction:
    """One bucket's LSM tree while a writer or a dedicated compaction works on it. Compaction runs replace files in
    the tree; ``changes()`` is the net (compact_before, compact_after) of all of them. Files are written under the
    bucket's directory; nothing is committed here.
    """

    def __init__(self, table, partition: bytes, partition_values: tuple, bucket: int,
                 files: Iterable[DataFileMeta], settings: CompactionSettings, vectors=None):
        """``vectors``: the bucket's deletion vectors (BucketVectors) in the snapshot ``files`` come from, for
        deletion-vector tables."""
        from engine.deletion_vectors.maintainer import bucket_vectors
        self.table = table
        self.dv = bucket_vectors(table, partition, bucket, vectors)
        self.partition = partition
        self.partition_values = partition_values
        self.bucket = bucket
        self.settings = settings
        key_types = table.schema.types_of(table.schema.trimmed_primary_keys)
        self.where = table.bucket_dir(partition_values, bucket)
        self.levels = Levels(files, settings.num_levels, key_types, self.where)
        self.before: dict[tuple[str, int], DataFileMeta] = {}
        self.after: dict[tuple[str, int], DataFileMeta] = {}
        self.disabled = False
        self.changelog: list[DataFileMeta] = []  # lookup / full-compaction changelog files (issue 5)
        self.last_full_ms = last_full_compaction(self.levels)
        from engine.compact.record_expire import RecordExpire
        self.expire = RecordExpire.of(table.schema)

    def add_level0(self, files: Iterable[DataFileMeta]) -> None:
        """Add newly flushed files to level 0 (they become the newest sorted runs)."""
        self.levels = self.levels.update((), files)

    def sorted_runs(self) -> int:
        """The number of sorted runs the bucket has now."""
        return self.levels.number_of_sorted_runs()

    def pick(self, full: bool = False) -> CompactUnit | None:
        """The CompactUnit universal compaction would run next (``full``: every run to the max level, or the files
        of a bucket that already is one max-level run that must still be rewritten), or None. Writes no file;
        like Paimon's strategies it advances the picking state (time of the last full compaction, gentle lookup
        compaction's count of empty picks).
        """
        picker = UniversalPicker(self.settings, self.levels.max_level, last_full_ms=self.last_full_ms)
        runs = self.levels.runs()
        if full:
            return picker.pick_full(runs, self._rewrite_at_top)
        interval = self.settings.lookup_max_interval
        if interval is None:
            unit = picker.pick(runs)
        else:  # Paimon's ForceUpLevel0Compaction with a max interval
            unit = picker.pick(runs, force_level0=False)
            if unit is None and _gentle_pick_due(self.table.root, self.partition, self.bucket, interval):
                unit = picker.pick(runs, force_level0=True)
        if picker.is_full(unit, runs):
            self.last_full_ms = picker.now_ms
        return unit

    def _rewrite_at_top(self, f: DataFileMeta) -> bool:
        """A max-level file a full compaction rewrites although nothing is above it: it holds expired records
        (by its statistics) or has a deletion vector."""
        if self.expire is not None and self.expire.file_expired(f, self.table.schema_manager.schema):
            return True
        return self.dv is not None and self.dv.deleted(f.file_name) is not None

    def compact(self, full: bool = False) -> bool:
        """Run the picked unit (or a full compaction); True if anything changed."""
        unit = self.pick(full)
        if unit is None:
            return False
        rewriter = CompactRewriter(self.table, self.partition_values, self.bucket, self.settings, self.dv)
        result = rewriter.run(unit, self.levels)
        if self.dv is not None:
            self.dv.apply(result.deletions, {f.file_name for f in result.before} - {f.file_name for f in result.after})
        self._accumulate(result)
        self.changelog.extend(result.changelog)
        self.levels = self.levels.update(result.before, result.after)
        return bool(result.before or result.after)

    def compact_full(self) -> bool:
        """One full compaction: all runs to the max level, repeated while upgrades leave runs below it; or, for a
        bucket that already is one max-level run, one rewrite of its files that need it. True if anything
        changed."""
        changed = self.compact(full=True)
        while changed and not self._one_top_run() and self.compact(full=True):
            pass
        return changed

    def _one_top_run(self) -> bool:
        runs = self.levels.runs()
        return len(runs) == 1 and runs[0].level == self.levels.max_level

    def compact_in_writer(self, full: bool = False) -> None:
        """A writer's compaction: best effort. If an input file vanished (a concurrent compaction and expiration
        removed it), this bucket stops compacting for this commit; the data still commits and the commit's conflict
        check decides whether earlier compaction results of the bucket can land."""
        if self.disabled:
            return
        try:
            if full:
                self.compact_full()
            else:
                self.compact()
        except CorruptFile as e:
            self.disabled = True
            log.warning("table %s: compaction of %s skipped: %s", self.table.name, self.where, e)

    def compact_until_below_stop_trigger(self) -> None:
        """Writer back-pressure: compact synchronously while sorted runs exceed the stop trigger."""
        while not self.disabled and self.sorted_runs() > self.settings.stop_trigger:
            before = self.sorted_runs()
            self.compact_in_writer()
            if self.sorted_runs() >= before:
                break

    def changes(self) -> tuple[tuple[DataFileMeta, ...], tuple[DataFileMeta, ...]]:
        """(files removed, files added) by every compaction run so far, net: a file both written and consumed within
        this object appears in neither.
        """
        return tuple(self.before.values()), tuple(self.after.values())

    def vector_changes(self) -> tuple[tuple[str, ...] | None, tuple[dict, ...]]:
        """``(dv_before, dv_after)`` for the commit message: the bucket's base DV index files and the records of the
        index file that replaces them (written now), or ``(None, ())`` when the vectors did not change."""
        changes = self.dv.changes() if self.dv is not None else None
        return (None, ()) if changes is None else changes

    def changelog_files(self) -> tuple[DataFileMeta, ...]:
        """Changelog files the compactions wrote (changelog-producer lookup or full-compaction), in write order."""
        return tuple(self.changelog)

    def discard(self) -> None:
        """Delete the files compaction wrote (never upgraded inputs); used when the changes will not commit."""
        if self.dv is not None:
            self.dv.discard()
        for f in self.changelog:
            self.table.file_io.delete(data_file_path(self.where, f))
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
                    self.table.file_io.delete(data_file_path(self.where, f))
            else:
                self.before[ident] = f
        self.after.update(new_after)


_EMPTY_PICKS: dict[tuple[str, bytes, int], int] = {}
_EMPTY_PICKS_LOCK = threading.Lock()


def _gentle_pick_due(root: str, partition: bytes, bucket: int, interval: int) -> bool:
    """Gentle lookup compaction (lookup-compact=gentle): count one more pick that found nothing for the bucket;
    True (and the count restarts) at the ``interval``-th. Counted per process, across writers and commits, as a
    long-running Paimon writer counts (lakemerge's writers live for one commit)."""
    key = (root, partition, bucket)
    with _EMPTY_PICKS_LOCK:
        n = _EMPTY_PICKS.get(key, 0) + 1
        _EMPTY_PICKS[key] = 0 if n >= interval else n
    return n >= interval


def last_full_compaction(levels: Levels) -> int | None:
    """Epoch milliseconds of the newest max-level file's creation, None without one: Paimon's estimate of the
    last full compaction of a bucket whose writer starts (MergeTreeCompactManagerFactory)."""
    import datetime as dt
    times = [f.creation_time_millis for f in levels.levels.get(levels.max_level, ()) if f.creation_time_millis]
    if not times:
        return None
    local = dt.datetime(1970, 1, 1) + dt.timedelta(milliseconds=max(times))  # local wall clock, as written
    return int(local.timestamp() * 1000)


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


def compaction_splits(table, partitions=None):
    """(latest snapshot, its splits in the given partitions): the work of a dedicated compaction, one split per
    bucket. A scale-out driver can ship each split to a worker that calls ``compact_split``.
    Raises InvalidInput for a partition spec naming a column that is not a partition key."""
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
        return None, []
    from engine.postpone import real_bucket_splits

    # postponed files move to real buckets by engine.postpone.compact only
    return snapshot, [sp for sp in real_bucket_splits(table.scan().plan(snapshot))
                      if partition_matches(schema, sp.partition_values, partitions)]


def compact_split(table, split, base_snapshot_id: int, *, full: bool = False, commit_user: str,
                  commit_identifier: int = BATCH_COMMIT_IDENTIFIER) -> CommitMessage | None:
    """Compact one bucket (a Split of snapshot ``base_snapshot_id``); the COMPACT message, or None if the picker
    found nothing to do. On error the files it wrote are deleted."""
    bc = BucketCompaction(table, split.partition, split.partition_values, split.bucket, split.files,
                          CompactionSettings.of(table.schema.table_options), split.vectors)
    try:
        changed = bc.compact_full() if full else bc.compact()
        if changed:
            before, after = bc.changes()
            dv_before, dv_after = bc.vector_changes()
    except BaseException:
        bc.discard()
        raise
    if not changed:
        return None
    return CommitMessage(split.partition, split.partition_values, split.bucket, split.total_buckets, (), commit_user,
                         commit_identifier, base_snapshot_id, table.schema.id, compact_before=before,
                         compact_after=after, compact_changelog=bc.changelog_files(), dv_before=dv_before,
                         dv_after=dv_after)


def without_changelog(table, messages: list[CommitMessage]) -> list[CommitMessage]:
    """``messages`` without the changelog files their compactions wrote, which are deleted: the compaction after
    an overwrite commits none, as Paimon's (FileStoreCommitImpl.overwritePartition commits no changelog)."""
    import dataclasses
    for m in messages:
        for f in m.compact_changelog:
            table.file_io.delete(data_file_path(table.bucket_dir(m.partition_values, m.bucket), f))
    return [dataclasses.replace(m, compact_changelog=()) for m in messages]


def compact_table(table, *, full: bool = False, partitions=None, progress=None) -> list[CommitMessage]:
    """Compact every bucket of the latest snapshot (optionally only some partitions) and return COMPACT messages
    (commit them with ``Table.commit``). Buckets compact on parallel threads (Parquet and the merge kernels release
    the GIL); memory stays bounded per bucket (engine/compact/rewriter.py). If any bucket fails, every file written
    is deleted and the error is raised. Raises InvalidInput for a bad partition spec.

    ``progress(rows=, bytes=)``, if given, is called (from one thread at a time) after each bucket with the rows and
    bytes of the bucket's live files, whether or not they needed rewriting."""
    snapshot, splits = compaction_splits(table, partitions)
    return _compact_splits(table, snapshot, splits, full=full, commit_user=str(uuid.uuid4()),
                           commit_identifier=BATCH_COMMIT_IDENTIFIER, progress=progress)


def compact_buckets(table, buckets, *, commit_user: str, commit_identifier: int) -> list[CommitMessage]:
    """COMPACT messages for the (partition bytes, bucket) pairs ``buckets`` of the latest snapshot, picked as a
    writer committing ``commit_identifier`` picks (universal compaction, forced level-0 compaction where the
    changelog producer needs it, full compaction when ``full-compaction.delta-commits`` makes it due), buckets on
    parallel threads; empty when none needs work. For writes whose tasks shared buckets, so that their own
    compactions conflicted (spark_glue.writing). If a bucket fails, every file written is deleted and the error
    is raised."""
    wanted = set(buckets)
    snapshot, splits = compaction_splits(table)
    splits = [sp for sp in splits if (sp.partition, sp.bucket) in wanted]
    full = full_compaction_due(CompactionSettings.of(table.schema.table_options), commit_identifier)
    return _compact_splits(table, snapshot, splits, full=full, commit_user=commit_user,
                           commit_identifier=commit_identifier, progress=None)


def _compact_splits(table, snapshot, splits, *, full: bool, commit_user: str, commit_identifier: int,
                    progress) -> list[CommitMessage]:
    if not splits:
        return []
    progress_lock = threading.Lock()

    def run(sp):
        try:
            message = compact_split(table, sp, snapshot.id, full=full, commit_user=commit_user,
                                    commit_identifier=commit_identifier)
        except BaseException as e:  # noqa: BLE001 - re-raised below, after the other buckets' files are gone
            return None, e
        if progress is not None:
            with progress_lock:
                progress(rows=sp.row_count, bytes=sum(f.file_size for f in sp.files))
        return message, None

    if len(splits) <= 1:
        results = [run(sp) for sp in splits]
    else:
        with ThreadPoolExecutor(max_workers=min(len(splits), os.cpu_count() or 2)) as pool:
            results = list(pool.map(run, splits))
    messages = [m for m, _ in results if m is not None]
    errors = [e for _, e in results if e is not None]
    if errors:
        discard_messages(table, messages)
        raise errors[0]
    crash_point("compact.before-commit")
    return messages


def discard_messages(table, messages) -> None:
    """Delete the files compaction messages wrote (never upgraded inputs) and their changelog files; for
    messages that will not commit."""
    for m in messages:
        where = table.bucket_dir(m.partition_values, m.bucket)
        old = {f.file_name for f in m.compact_before}
        for f in m.compact_after:
            if f.file_name not in old:
                table.file_io.delete(data_file_path(where, f))
        for f in m.compact_changelog:
            table.file_io.delete(data_file_path(where, f))
        for r in m.dv_after:
            table.file_io.delete(table.scan().index_file_path(r))
