"""Publishing commits as snapshots.

Guarantees (and how they are kept):
- Atomic visibility: a snapshot becomes visible only when ``snapshot-N`` appears, and it is created with a
  put-if-absent (temp file + ``os.link``), never by renaming over a file. Every manifest and data file it references
  is fully written before that.
- One winner per id: two committers racing for ``snapshot-N`` cannot both succeed; the loser re-reads the latest
  snapshot, re-checks conflicts and retries with N+1 (up to ``commit.max-retries``, with exponential back-off).
- No lost acknowledged commit: a new snapshot's base manifest list holds every manifest of its parent, so nothing a
  previous snapshot made visible is dropped.
- Exactly once: if a snapshot with the same commit user and identifier was published after the writer's base
  snapshot (and is in the table's lineage: a stale claim left by a crash does not count), committing again returns
  that snapshot's id and applies nothing.
- On any error before publishing, the manifests written for the attempt are deleted and the table is unchanged.
  After ``CommitOutcomeUnknown`` nothing the attempt wrote is deleted: the snapshot may have landed.
- Storage errors are never mistaken for a lost race: if writing ``snapshot-N`` raises, the name is read back;
  our bytes there = the commit landed; absent = ``StorageError`` (data files are kept so the same messages can be
  committed again); unreadable = ``CommitOutcomeUnknown``.
- Concurrent expiration: an attempt whose newest snapshot was expired while it read its manifests lost its race and
  is retried. Put-if-absent alone could claim ``snapshot-N`` a second time after an expiration removed the first
  one, publishing a snapshot off the table's history. Expiration removes the oldest snapshots first and never the
  newest, so a claim is checked right after it is made: if its base ``N-1`` still exists, no first ``N`` can have
  expired; otherwise the next snapshot must have been built on this one (it holds this commit's files as live).
  A stale claim is withdrawn and the attempt retried; ``CommitOutcomeUnknown`` when it cannot be told.
- Writers of one bucket that started from the same snapshot: the commit landing later is re-sequenced past the
  earlier one before publishing (engine/commit/sequence_guard.py), so the later commit wins, never a tie.
- Crash points (engine/crash_points.py) mark every step: commit.before-manifest, commit.after-manifest,
  commit.after-rebase, commit.before-publish, commit.after-publish, commit.after-hint.
"""
from __future__ import annotations

import logging
import os
import random
import time
import uuid
from typing import Sequence

from engine.commit.overwrite_upgrade import upgrade_overwrite
from engine.commit.sequence_guard import rebase_sequences
from engine.crash_points import crash_point
from engine.data_paths import all_file_paths, data_file_path
from engine.errors import (CommitConflict, CommitOutcomeUnknown, CommitRetriesExhausted, CorruptFile, SnapshotNotFound,
                           StorageError)
from engine.meta import binary_row
from engine.meta.data_file import SimpleStats
from engine.commit.conflicts import check_file_changes
from engine.commit.index_changes import next_index_manifest
from engine.deletion_vectors.index_file import DV_INDEX
from engine.dynamic_bucket.index_files import read_index_manifest
from engine.commit.manifest_merge import ManifestMerger
from engine.meta.manifest import (ADD, DELETE, ManifestEntry, ManifestFileMeta, encode_manifest, encode_manifest_list)
from engine.meta.snapshot import (BATCH_COMMIT_IDENTIFIER, COMMIT_KIND_APPEND, COMMIT_KIND_COMPACT,
                                  COMMIT_KIND_OVERWRITE, Snapshot)
from engine.options import (COMMIT_MAX_RETRIES, COMMIT_MAX_RETRY_WAIT, COMMIT_MIN_RETRY_WAIT,
                            SNAPSHOT_IGNORE_EMPTY_COMMIT)
from engine.postpone import POSTPONE_BUCKET
from engine.refused_options import require_writable
from engine.write.commit_message import CommitMessage

WRITER_VERSION = "lakemerge-0.1.0"
log = logging.getLogger("lakemerge.commit")


class Committer:
    """Publishes commit messages as new snapshots of ``table``."""
    def __init__(self, table):
        self.table = table
        self._messages: Sequence[CommitMessage] = ()
        self._strict_after: int | None = None
        self._overwritten = None  # an OVERWRITE's partitions (None: every partition)

    # --- public -------------------------------------------------------------------------------------
    def commit(self, messages: Sequence[CommitMessage], *, commit_kind: str = COMMIT_KIND_APPEND,
               properties: dict | None = None, strict_after: int | None = None, commit_user: str | None = None,
               commit_identifier: int | None = None) -> int | None:
        """Publish the messages and return the id of the last snapshot published.

        New files become one APPEND snapshot; compaction changes (``compact_before``/``compact_after``) become a
        following COMPACT snapshot with the same commit identifier. Empty input publishes nothing and returns the
        latest snapshot id (None for an empty table), unless the table has ``snapshot.ignore-empty-commit=false``:
        then the APPEND snapshot is published even without files, as Paimon does. If the COMPACT snapshot cannot
        land, the files compaction wrote are deleted; the error is raised when the messages held only compaction
        changes, otherwise the APPEND snapshot's id is returned (the data is committed, only the compaction was
        lost).
        ``strict_after``: a snapshot id; the commit is refused (CommitConflict) if a later snapshot added or removed
        real-bucket files of a partition the messages change (Paimon's commit.strict-mode.last-safe-snapshot, here
        also for APPENDs, whose sequence numbers would tie with the messages'; postponed files may come and go).
        ``commit_user``/``commit_identifier`` name the commit when there are no messages (an empty snapshot of a
        stream's batch, exactly once per pair like any stream commit; without an identifier, a batch commit, a new
        one every time); messages carry their own and these are ignored.
        Raises CommitConflict, CommitRetriesExhausted, CommitOutcomeUnknown, UnsupportedFeature (the table has a
        feature lakemerge cannot write: engine.refused_options).
        """
        t = self.table
        require_writable(t.schema.options, t.name)
        messages = list(messages)
        self._messages = messages
        self._strict_after = strict_after
        appends = self._entries(messages)
        compacts = [ManifestEntry(DELETE, m.partition, m.bucket, m.total_buckets, f)
                    for m in messages for f in m.compact_before]
        compacts += [ManifestEntry(ADD, m.partition, m.bucket, m.total_buckets, f)
                     for m in messages for f in m.compact_after]
        append_log = [ManifestEntry(ADD, m.partition, m.bucket, m.total_buckets, f)
                      for m in messages for f in m.changelog_files]
        compact_log = [ManifestEntry(ADD, m.partition, m.bucket, m.total_buckets, f)
                       for m in messages for f in m.compact_changelog]
        keep_empty = commit_kind == COMMIT_KIND_APPEND \
            and t.schema.table_options.get(SNAPSHOT_IGNORE_EMPTY_COMMIT) is False
        if not appends and not compacts and not keep_empty:
            return t.snapshot_manager.latest_id()
        users = {(m.commit_user, m.commit_identifier) for m in messages} or {
            (commit_user or f"empty-commit-{uuid.uuid4()}",
             BATCH_COMMIT_IDENTIFIER if commit_identifier is None else int(commit_identifier))}
        if len(users) != 1:
            raise CommitConflict(t.name, "messages from different commit users/identifiers cannot be committed "
                                 "as one snapshot")
        commit_user, identifier = users.pop()
        bases = [m.base_snapshot_id for m in messages if m.base_snapshot_id is not None]
        base_id = self._replay_base(messages, identifier, None)
        guard_base = None if any(m.base_snapshot_id is None for m in messages) else (min(bases) if bases else 0)
        schema_id = max((m.schema_id for m in messages), default=t.schema.id)
        self._check_schemas({m.schema_id for m in messages})
        published = None
        try:
            if appends or keep_empty:  # snapshot.ignore-empty-commit=false: an APPEND even without files (Paimon's
                # FileStoreCommitImpl.commit; compaction-only messages then make an empty APPEND and the COMPACT)
                published = self._commit_entries(appends, commit_user, identifier, base_id, commit_kind, schema_id,
                                                 properties, append_log, guard_base=guard_base)
        except CommitOutcomeUnknown:
            raise
        except BaseException:
            self._delete_compaction_outputs(messages)
            raise
        if compacts:
            try:
                published = self._commit_entries(compacts, commit_user, identifier, base_id, COMMIT_KIND_COMPACT,
                                                 schema_id, properties, compact_log)
            except (CommitConflict, CommitRetriesExhausted) as e:
                self._delete_compaction_outputs(messages)
                if not appends:
                    raise
                log.warning("table %s: data committed as snapshot %s, but its compaction was dropped: %s",
                            t.name, published, e)
        return published

    def _commit_entries(self, entries: list[ManifestEntry], commit_user: str, identifier: int, base_id: int,
                        commit_kind: str, schema_id: int, properties: dict | None,
                        changelog: list[ManifestEntry] | None = None, guard_base: int | None = None) -> int:
        """Publish ``entries`` (and ``changelog`` entries in the changelog manifest list) as one snapshot, retrying
        lost races. ``guard_base``: the writers' base snapshot for the sequence guard (None: no re-sequencing, e.g.
        for compaction results)."""
        t = self.table
        messages = self._messages
        opts = t.schema.table_options
        retries = opts.get(COMMIT_MAX_RETRIES)
        wait = opts.get(COMMIT_MIN_RETRY_WAIT) / 1000.0
        max_wait = opts.get(COMMIT_MAX_RETRY_WAIT) / 1000.0

        delta_name, delta_meta = None, None
        rebased: list[str] = []  # data files rewritten by the sequence guard for the current entries
        log_name, log_meta = None, None
        try:
            for attempt in range(retries + 1):
                latest = t.snapshot_manager.latest()
                done = self._already_committed(commit_user, identifier, base_id, latest, commit_kind)
                if done is not None:
                    return done
                if attempt == 0:
                    self._require_files(entries + list(changelog or ()), self._index_records(commit_kind))
                try:
                    self._check_conflicts(entries, latest)
                    rebased_entries, written = self._rebase(entries, latest, guard_base)
                    if written:  # a retry re-sequenced some buckets again: drop only the copies it replaced
                        names = {e.file.file_name for e in rebased_entries}
                        self._delete_all([p for p in rebased if os.path.basename(p) not in names])
                        rebased = [p for p in rebased if os.path.basename(p) in names] + written
                    if rebased_entries is not entries:  # a concurrent commit wrote the same bucket: the
                        entries = rebased_entries       # manifest must name the re-sequenced files
                        if delta_name is not None:
                            t.file_io.delete(t.paths.manifest(delta_name))
                            delta_name = None
                    if delta_name is None and entries:  # a snapshot changing only deletion vectors has none
                        crash_point("commit.before-manifest")
                        delta_name, delta_meta = self._write_manifest(entries, schema_id)
                        crash_point("commit.after-manifest")
                    if changelog and log_name is None:
                        log_name, log_meta = self._write_manifest(changelog, schema_id)
                    published = self._try_publish(latest, delta_meta, entries, commit_user, identifier,
                                                  commit_kind, schema_id, properties, log_meta, changelog)
                except (CorruptFile, SnapshotNotFound):
                    if not self._superseded(latest):
                        raise
                    published = None  # a newer snapshot replaced it and the old one expired: a lost race
                if published is not None:
                    delta_name = log_name = None  # now referenced by a snapshot: never delete
                    if rebased:  # originals replaced by re-sequenced copies are no longer needed
                        rebased = []
                        kept = {e.file.file_name for e in entries}
                        self._delete_all(self._message_files(messages, skip=kept))
                    return published
                time.sleep(min(max_wait, wait * (2 ** attempt)) * (0.5 + random.random()))
            raise CommitRetriesExhausted(t.name, retries + 1)
        except CommitOutcomeUnknown:
            delta_name = log_name = None  # the snapshot may have landed and reference them: keep all it wrote
            rebased = []
            raise
        finally:
            if delta_name is not None:
                t.file_io.delete(t.paths.manifest(delta_name))
            if log_name is not None:
                t.file_io.delete(t.paths.manifest(log_name))
            self._delete_all(rebased)

    def _expired(self, snapshot: Snapshot | None) -> bool:
        """Whether ``snapshot`` (the newest when an attempt began) no longer exists: a concurrent commit and
        expiration (or a rollback) removed it and possibly its manifests while the attempt read them."""
        return snapshot is not None and not self.table.snapshot_manager.exists(snapshot.id)

    def _superseded(self, snapshot: Snapshot | None) -> bool:
        """After a read of ``snapshot`` failed: whether it is gone or no longer the newest snapshot by listing (the
        attempt lost its race; a stale claim being withdrawn may even have been taken for the newest through the
        LATEST hint). Otherwise the failure is real corruption."""
        if snapshot is None:
            return False
        ids = self.table.snapshot_manager.ids()
        return not ids or ids[-1] != snapshot.id

    def _stale_claim(self, base: Snapshot | None, new_id: int, entries: list[ManifestEntry]) -> bool:
        """Whether snapshot ``new_id``, just claimed on ``base``, is off the table's history (see the module
        docstring). Raises CommitOutcomeUnknown when that cannot be told."""
        sm = self.table.snapshot_manager
        if base is None or sm.exists(base.id):
            return False  # a first new_id could only have expired after base
        later = [i for i in sm.ids() if i > new_id]
        if not later:
            return False  # a first new_id expired only while a newer snapshot existed, and the newest never expires
        if later[0] != new_id + 1:
            return True  # a successor built on this claim could only have expired after it
        added = {e.identifier for e in entries if e.kind == ADD}
        if not added:
            raise CommitOutcomeUnknown(self.table.name, new_id, CommitConflict(
                self.table.name, f"snapshot {new_id} adds no file, so it cannot be told from a snapshot {new_id} "
                "that a concurrent expiration removed"))
        try:
            return not self._successor_holds(new_id, added)
        except (CorruptFile, SnapshotNotFound) as e:
            raise CommitOutcomeUnknown(self.table.name, new_id, e) from e

    def _rebase(self, entries: list[ManifestEntry], latest: Snapshot | None, guard_base: int | None
                ) -> tuple[list[ManifestEntry], list[str]]:
        """The sequence guard (engine/commit/sequence_guard.py) over ``entries``: ``(entries, files written)``."""
        return rebase_sequences(self.table, entries, latest, guard_base)

    def _next_index_manifest(self, latest: Snapshot | None, kind: str) -> tuple[str | None, bool]:
        """The index manifest of a snapshot of ``kind`` on ``latest`` (engine.commit.index_changes): DV changes
        land with COMPACT snapshots, HASH changes with the others; an OVERWRITE drops the DV records of the
        partitions it replaces."""
        return next_index_manifest(
            self.table, latest, self._messages, deletion_vectors=kind == COMMIT_KIND_COMPACT,
            overwritten=self._overwritten if kind == COMMIT_KIND_OVERWRITE else False)

    def _index_records(self, commit_kind: str) -> list[dict]:
        """The index-manifest records the messages add with a snapshot of ``commit_kind``: DV records with the
        COMPACT snapshot, HASH records with the others (engine.commit.index_changes)."""
        if commit_kind == COMMIT_KIND_COMPACT:
            return [r for m in self._messages for r in m.dv_after]
        return [r for m in self._messages for r in getattr(m, "index_records", ())]

    def _require_files(self, entries: list[ManifestEntry], index_records=()) -> None:
        """Raise CommitConflict naming the first file an ADD entry or an added index record names that does not
        exist: publishing it would leave the table unreadable (e.g. messages replayed after their first commit
        expired and a compaction or overwrite deleted their files)."""
        t = self.table
        for r in index_records:
            path = t.scan().index_file_path(r)
            if not t.file_io.exists(path):
                raise CommitConflict(t.name, f"index file {path} of the commit being published no longer exists "
                                     "(were these messages committed before, and their files expired?); nothing "
                                     "was committed")
        scan = t.scan()
        for e in entries:
            if e.kind != ADD:
                continue
            path = data_file_path(t.bucket_dir(scan.partition_values(e.partition), e.bucket), e.file)
            if not t.file_io.exists(path):
                raise CommitConflict(t.name, f"data file {path} of the commit being published no longer exists "
                                     "(were these messages committed before, and their files compacted away or "
                                     "overwritten?); nothing was committed")

    def _delete_all(self, paths) -> None:
        for p in paths:
            try:
                self.table.file_io.delete(p)
            except StorageError:
                pass  # an unreferenced file left behind is an orphan, never a correctness problem

    def _message_files(self, messages, skip=frozenset()) -> list[str]:
        t = self.table
        return [p for m in messages for f in m.new_files if f.file_name not in skip
                for p in all_file_paths(t.bucket_dir(m.partition_values, m.bucket), f)]

    def _delete_compaction_outputs(self, messages: Sequence[CommitMessage]) -> None:
        """Delete files a compaction wrote (not upgraded inputs, which stay referenced by their old entries), unless a
        snapshot, tag or changelog references them (a replay of messages committed before)."""
        from engine.maintenance.orphans import delete_unreferenced
        t = self.table
        paths = []
        for m in messages:
            old = {f.file_name for f in m.compact_before} | {f.file_name for f in m.new_files}
            paths += [data_file_path(t.bucket_dir(m.partition_values, m.bucket), f)
                      for f in list(m.compact_changelog) + [f for f in m.compact_after if f.file_name not in old]]
            paths += [t.scan().index_file_path(r) for r in m.dv_after]
        delete_unreferenced(t, paths)

    def _delete_input_changelog(self, messages: Sequence[CommitMessage]) -> None:
        """Delete the messages' input changelog files (an overwrite publishes none), unless something references
        them (a replay of messages committed before)."""
        from engine.maintenance.orphans import delete_unreferenced
        t = self.table
        delete_unreferenced(t, [data_file_path(t.bucket_dir(m.partition_values, m.bucket), f)
                                for m in messages for f in m.changelog_files])

    # --- steps --------------------------------------------------------------------------------------
    def _entries(self, messages: Sequence[CommitMessage]) -> list[ManifestEntry]:
        """The manifest entries of the commit's first snapshot (subclasses may add DELETE entries)."""
        return [ManifestEntry(ADD, m.partition, m.bucket, m.total_buckets, f) for m in messages for f in m.new_files]

    def _check_schemas(self, schema_ids: set[int]) -> None:
        """Files written under an older schema may land only if the latest schema reads them correctly
        (engine.schema_change.check_commit_schema); raises CommitConflict otherwise."""
        from engine.schema_change import check_commit_schema
        sm = self.table.schema_manager
        latest = sm.latest()
        for sid in schema_ids:
            if latest is not None and sid != latest.id:
                check_commit_schema(sm.schema(sid), latest, self.table.name)

    def _snapshot_schema_id(self, files_schema_id: int, latest: Snapshot | None) -> int:
        """The schema a new snapshot records: the table's latest schema at commit time, as Paimon's
        FileStoreCommitImpl writes it (so a writer that opened the table before an ALTER commits a snapshot that
        time travel reads through the new schema, its files by field id), never below the files' or the previous
        snapshot's."""
        latest_schema = self.table.schema_manager.latest()
        return max(files_schema_id, latest.schema_id if latest else 0,
                   latest_schema.id if latest_schema is not None else 0)

    def _replay_base(self, messages, identifier: int, base_snapshot_id: int | None) -> int:
        """The snapshot after which a commit of ``messages`` may already have landed: the messages' oldest base,
        else ``base_snapshot_id``, else 0 (every snapshot: messages written on an empty table, or a stream's
        empty commit, whose user's newest snapshot decides, ``_already_committed``) -- except for an empty batch
        commit (no messages, batch identifier): it identifies nothing earlier, so it is a new commit (the latest
        snapshot now), as Paimon's BatchTableCommit commits without filtering."""
        bases = [m.base_snapshot_id for m in messages if m.base_snapshot_id is not None]
        if bases:
            return min(bases)
        if base_snapshot_id is not None:
            return base_snapshot_id
        if not messages and identifier == BATCH_COMMIT_IDENTIFIER:
            return self.table.snapshot_manager.latest_id() or 0
        return 0

    def _already_committed(self, user: str, identifier: int, base_id: int, latest: Snapshot | None,
                           kind: str = COMMIT_KIND_APPEND) -> int | None:
        """The id of a snapshot after ``base_id`` showing that commit (``user``, ``identifier``) of ``kind`` already
        landed, else None. As Paimon's FileStoreCommitImpl.filterCommitted, a stream's commit (identifier below
        the batch one) landed when the user's newest snapshot has a greater identifier (streams commit in order)
        or the same one (an APPEND landed before its COMPACT), the user's batch snapshots (identifier Long.MAX_VALUE,
        e.g. a batch job sharing the user) aside; a batch commit when a snapshot of the same user,
        identifier and kind exists. Snapshots a crash kept off the table's lineage do not count; the search stops
        at the first expired snapshot."""
        if latest is None:
            return None
        sm = self.table.snapshot_manager
        stream = identifier != BATCH_COMMIT_IDENTIFIER
        for sid in range(latest.id, base_id, -1):
            try:
                snap = sm.snapshot(sid)
            except Exception:  # expired or unreadable snapshots cannot hold a newer commit of ours
                break
            if snap.commit_user != user or (stream and snap.commit_identifier == BATCH_COMMIT_IDENTIFIER):
                continue  # a batch commit of the stream's user says nothing of the stream's progress
            same_kind = (snap.commit_kind == COMMIT_KIND_COMPACT) == (kind == COMMIT_KIND_COMPACT)
            later = stream and (snap.commit_identifier > identifier or (
                snap.commit_identifier == identifier and snap.commit_kind == COMMIT_KIND_COMPACT))
            if not later and not (snap.commit_identifier == identifier and same_kind):
                if stream and snap.commit_identifier < identifier and (sid == latest.id or self._in_lineage(snap)):
                    return None  # the user's newest snapshot is an earlier commit: this one has not landed
                continue
            if sid != latest.id and not self._in_lineage(snap):
                continue  # a stale claim that a crash kept from being withdrawn: it does not count
            return sid
        return None

    def _in_lineage(self, snap: Snapshot) -> bool:
        """Whether the snapshot after ``snap`` was committed on it (its base holds the files ``snap`` added).
        A snapshot adding no file counts as in lineage (it cannot be told)."""
        try:
            added = {e.identifier for meta in self.table.manifests.manifest_list(snap.delta_manifest_list)
                     for e in self.table.manifests.manifest(meta.file_name) if e.kind == ADD}
        except (CorruptFile, SnapshotNotFound):
            # expired meanwhile (its file goes first): only snapshots in lineage are expired past; a snapshot
            # still there with its own delta missing is broken, not the commit
            return not self.table.snapshot_manager.exists(snap.id)
        if not added:
            return True
        try:
            return self._successor_holds(snap.id, added)
        except (CorruptFile, SnapshotNotFound):
            return False  # no readable successor although a newer snapshot exists: off the table's history

    def _successor_holds(self, sid: int, added: set) -> bool:
        """Whether snapshot ``sid + 1``'s base holds every file identifier in ``added``. Raises CorruptFile or
        SnapshotNotFound when it cannot be read."""
        successor = self.table.snapshot_manager.snapshot(sid + 1)
        return added <= {e.identifier for e in self.table.manifests.base_entries(successor)}

    def _check_strict(self, entries: list[ManifestEntry], latest: Snapshot | None) -> None:
        """``strict_after`` of ``commit``: raise CommitConflict when a snapshot after it changed real-bucket files of
        a partition ``entries`` change, or that partition's index files (a deletion-vector DELETE of an append
        table changes only vectors; Paimon's StrictModeChecker.hasOverlappedIndexPartition). An expired snapshot
        counts as a change."""
        if self._strict_after is None or latest is None or latest.id <= self._strict_after:
            return
        changed = {e.partition for e in entries}
        sm, manifests = self.table.snapshot_manager, self.table.manifests
        for sid in range(self._strict_after + 1, latest.id + 1):
            try:
                snap = sm.snapshot(sid)
                delta = [e for meta in manifests.manifest_list(snap.delta_manifest_list)
                         for e in manifests.manifest(meta.file_name)]
                before = sm.snapshot(sid - 1) if snap.index_manifest and sm.exists(sid - 1) else None
                index_hit = self._index_change(before, snap, changed)
            except (CorruptFile, SnapshotNotFound):
                raise CommitConflict(self.table.name, f"snapshot {sid}, committed since this commit's base "
                                     f"snapshot {self._strict_after}, cannot be read to rule out a conflict") from None
            hit = next((e for e in delta if e.bucket != POSTPONE_BUCKET and e.partition in changed), None)
            if hit is not None:
                raise CommitConflict(self.table.name, f"snapshot {sid} ({snap.commit_kind}), committed since this "
                                     f"commit's base snapshot {self._strict_after}, changed bucket {hit.bucket} of "
                                     f"partition {self.table.scan().partition_values(hit.partition)}")
            if index_hit is not None:
                kind = "deletion vectors" if index_hit["_INDEX_TYPE"] == DV_INDEX else "index"
                raise CommitConflict(self.table.name, f"snapshot {sid} ({snap.commit_kind}), committed since this "
                                     f"commit's base snapshot {self._strict_after}, changed the {kind} of bucket "
                                     f"{index_hit['_BUCKET']} of partition "
                                     f"{self.table.scan().partition_values(index_hit['_PARTITION'])}")

    def _index_change(self, before: Snapshot | None, snap: Snapshot, partitions: set[bytes]) -> dict | None:
        """An index record of one of ``partitions`` that ``snap`` added or removed relative to ``before`` (the
        snapshot preceding it), or None; with ``before`` unknown (expired), any record of ``partitions`` that
        ``snap`` lists, as Paimon's checker does. A snapshot listing no index files changed none that matter (it
        removed them only with their data files). Raises CorruptFile if an index manifest cannot be read."""
        if not snap.index_manifest or (before is not None and snap.index_manifest == before.index_manifest):
            return None
        io, paths = self.table.file_io, self.table.paths

        def keyed(name):
            return {(r["_PARTITION"], r["_BUCKET"], r["_INDEX_TYPE"], r["_FILE_NAME"]): r
                    for r in read_index_manifest(io, paths, name) if r["_PARTITION"] in partitions}
        old, new = ({} if before is None else keyed(before.index_manifest)), keyed(snap.index_manifest)
        return next((r for k, r in {**old, **new}.items() if (k in old) != (k in new)), None)

    def _check_conflicts(self, entries: list[ManifestEntry], latest: Snapshot | None) -> None:
        self._check_strict(entries, latest)
        if any(e.kind == DELETE for e in entries):
            live = [] if latest is None else self.table.manifests.live_entries(latest)
            check_file_changes(self.table, live, entries)
        if latest is None:
            totals: dict[bytes, int] = {}
        else:
            changed = {e.partition for e in entries}
            totals = {}
            live = set()
            for e in self.table.manifests.live_entries(latest):
                if e.partition in changed:
                    if e.bucket != POSTPONE_BUCKET:
                        totals.setdefault(e.partition, e.total_buckets)
                    live.add(e.identifier)
            for e in entries:
                if e.kind == ADD and e.identifier in live:
                    raise CommitConflict(self.table.name, f"file {e.file.file_name} is already in the table")
        for e in entries:
            if e.bucket == POSTPONE_BUCKET:  # postponed files record -2; the real buckets keep their count
                continue
            expected = totals.setdefault(e.partition, e.total_buckets)
            if expected != e.total_buckets:  # Paimon's ConflictDetection: one count per partition unless overwritten
                from engine.write.bucket_layout import bucket_num_mismatch
                values = self.table.scan().partition_values(e.partition)
                raise CommitConflict(self.table.name, bucket_num_mismatch(self.table.schema, values, e.total_buckets,
                                                                          expected))

    def _write_manifest(self, entries: list[ManifestEntry], schema_id: int) -> tuple[str, ManifestFileMeta]:
        t = self.table
        data = encode_manifest(entries)
        name = t.paths.new_manifest_name("manifest")
        t.file_io.mkdirs(t.paths.manifest_dir)
        t.file_io.write_bytes(t.paths.manifest(name), data)
        return name, ManifestFileMeta(
            file_name=name, file_size=len(data), num_added_files=sum(1 for e in entries if e.kind == ADD),
            num_deleted_files=sum(1 for e in entries if e.kind != ADD),
            partition_stats=self._partition_stats(entries), schema_id=schema_id,
            min_bucket=min(e.bucket for e in entries), max_bucket=max(e.bucket for e in entries),
            min_level=min(e.file.level for e in entries), max_level=max(e.file.level for e in entries))

    def _partition_stats(self, entries: list[ManifestEntry]) -> SimpleStats:
        s = self.table.schema
        if not s.partition_keys:
            return SimpleStats.EMPTY
        types = [t.with_nullable(True) for t in s.types_of(s.partition_keys)]
        scan = self.table.scan()
        rows = [scan.partition_values(p) for p in {e.partition for e in entries}]
        mins, maxs, nulls = [], [], []
        for i in range(len(types)):
            vals = [r[i] for r in rows if r[i] is not None]
            mins.append(min(vals) if vals else None)
            maxs.append(max(vals) if vals else None)
            nulls.append(sum(1 for r in rows if r[i] is None))
        return SimpleStats(binary_row.serialize_row(mins, types), binary_row.serialize_row(maxs, types),
                           tuple(nulls))

    def _try_publish(self, latest: Snapshot | None, delta_meta: ManifestFileMeta, entries, user, identifier, kind,
                     schema_id, properties, log_meta: ManifestFileMeta | None = None, changelog=None) -> int | None:
        """Write this attempt's manifest lists and try to claim the next snapshot id. None if the race was lost
        (everything the attempt wrote is deleted then, and on any error before the claim)."""
        t = self.table
        io, paths = t.file_io, t.paths
        staged: list[str] = []  # manifest files of this attempt, referenced only by the snapshot it claims
        won = False
        try:
            base_metas = t.manifests.data_manifests(latest) if latest is not None else []
            merger = ManifestMerger(t, t.manifests.manifest, self._write_manifest,
                                    lambda name: io.delete(paths.manifest(name)))
            try:
                base_metas = merger.merge(base_metas)
            finally:
                staged += merger.created
            base_data = encode_manifest_list(base_metas)
            delta_data = encode_manifest_list([delta_meta] if delta_meta is not None else [])
            base_name = paths.new_manifest_name("manifest-list")
            delta_name = paths.new_manifest_name("manifest-list")
            staged += [base_name, delta_name]
            io.mkdirs(paths.manifest_dir)  # a first snapshot without files wrote no manifest before
            io.write_bytes(paths.manifest(base_name), base_data)
            io.write_bytes(paths.manifest(delta_name), delta_data)
            index_manifest, index_written = self._next_index_manifest(latest, kind)
            if index_written:
                staged.append(index_manifest)
            log_list, log_data = None, b""
            if log_meta is not None:
                log_data = encode_manifest_list([log_meta])
                log_list = paths.new_manifest_name("manifest-list")
                staged.append(log_list)
                io.write_bytes(paths.manifest(log_list), log_data)
            added = sum(e.file.row_count if e.kind == ADD else -e.file.row_count for e in entries)
            new_id = 1 if latest is None else latest.id + 1
            snapshot = Snapshot(
                id=new_id, schema_id=self._snapshot_schema_id(schema_id, latest),
                base_manifest_list=base_name, delta_manifest_list=delta_name, commit_user=user,
                commit_identifier=identifier, commit_kind=kind, time_millis=int(time.time() * 1000),
                total_record_count=(latest.total_record_count if latest else 0) + added, delta_record_count=added,
                base_manifest_list_size=len(base_data), delta_manifest_list_size=len(delta_data),
                changelog_manifest_list=log_list, changelog_manifest_list_size=len(log_data) if log_list else None,
                changelog_record_count=sum(e.file.row_count for e in changelog) if log_list else None,
                properties=properties or None, uuid=str(uuid.uuid4()), writer_version=WRITER_VERSION,
                watermark=latest.watermark if latest else None, index_manifest=index_manifest)
            body = snapshot.to_json().encode()
            if not io.exists(paths.schema_dir):  # its branch was deleted or renamed (or the table dropped) meanwhile
                raise CommitConflict(t.name, f"{paths.meta_root} no longer holds the table's schema (was the "
                                     "branch deleted or renamed, or the table dropped?); nothing was committed")
            io.mkdirs(paths.snapshot_dir)
            path = paths.snapshot(new_id)
            if self._expired(latest):
                return None  # a newer snapshot exists: claiming new_id could only fail or be stale
            crash_point("commit.before-publish")
            won = self._claim(path, body, new_id)
            if won and self._stale_claim(latest, new_id, entries):
                log.warning("table %s: snapshot %s was claimed after a concurrent expiration removed an earlier "
                            "snapshot %s; the claim is withdrawn and the commit retried", t.name, new_id, new_id)
                io.delete(path)
                won = False
        except CommitOutcomeUnknown:
            staged = []  # a snapshot may reference them
            raise
        finally:
            if not won:
                for name in staged:
                    io.delete(paths.manifest(name))
        if not won:
            return None
        crash_point("commit.after-publish")
        try:
            t.snapshot_manager.write_latest_hint(new_id)
            if new_id == 1:
                t.snapshot_manager.write_earliest_hint(new_id)
        except StorageError:
            pass  # the hint is only a hint; readers fall back to listing
        crash_point("commit.after-hint")
        return new_id

    def _claim(self, path: str, body: bytes, new_id: int) -> bool:
        """Put-if-absent ``body`` as snapshot file ``path``: True if this call created it. A storage error is never
        mistaken for a lost race: the name is read back; our bytes there = claimed; absent = the StorageError is
        raised; unreadable = CommitOutcomeUnknown."""
        t = self.table
        try:
            return t.file_io.write_if_absent(path, body)
        except StorageError as e:
            try:
                present = t.file_io.read_bytes(path)
            except FileNotFoundError:
                raise e from None
            except (OSError, StorageError):
                raise CommitOutcomeUnknown(t.name, new_id, e) from e
            if present != body:
                return False
            return True

    # --- overwrite (issue 6) ------------------------------------------------------------------------
    def overwrite(self, messages: Sequence[CommitMessage], partitions: set[bytes] | None = None, *,
                  commit_user: str | None = None, commit_identifier: int | None = None,
                  properties: dict | None = None, base_snapshot_id: int | None = None,
                  strict_after: int | None = None) -> int | None:
        """Publish one OVERWRITE snapshot: every live file of ``partitions`` (serialized partition rows; None =
        the whole table) is deleted and the messages' files are added, atomically.

        The files to delete are taken from the latest snapshot at each attempt, so a concurrent append to an
        overwritten partition is replaced too (Paimon's INSERT OVERWRITE semantics). Buckets of overwritten
        partitions may change count (rescale). Exactly once per (commit user, identifier) like ``commit``.
        ``commit_user``/``commit_identifier`` are needed only when there are no messages (overwrite with nothing);
        ``base_snapshot_id`` then bounds the exactly-once look-back (default: every snapshot for a stream's
        identifier; none for the batch identifier: a new commit, ``_replay_base``). ``partitions`` may be
        any container of serialized partition rows (engine.maintenance.partitions.PartitionMatcher).
        The messages' compaction results (a writer compacts its bucket's old files with the new ones) are not
        published, since the overwrite replaces the files they came from: the files they wrote (data, changelog,
        DV index) are deleted. Nor is the messages' input changelog (``changelog_files``, changelog-producer=input):
        an overwrite commits no changelog (Paimon's FileStoreCommitImpl logs that it drops it), so those files are
        deleted too. ``strict_after`` as in ``commit``: refused when a later snapshot changed real-bucket
        files of an overwritten partition (a rescale, which rewrites what it read, would lose them).
        Raises CommitConflict, CommitRetriesExhausted, CommitOutcomeUnknown.
        """
        t = self.table
        require_writable(t.schema.options, t.name)
        messages = list(messages)
        self._messages = messages
        self._overwritten = partitions
        self._strict_after = strict_after
        self._delete_compaction_outputs(messages)
        self._delete_input_changelog(messages)
        self._check_schemas({m.schema_id for m in messages})
        adds = [ManifestEntry(ADD, m.partition, m.bucket, m.total_buckets, f) for m in messages for f in m.new_files]
        adds = upgrade_overwrite(t, adds)  # Paimon's tryUpgrade: new files alone in their bucket go to the top
        users = {(m.commit_user, m.commit_identifier) for m in messages}
        if commit_user is not None:
            users.add((commit_user, BATCH_COMMIT_IDENTIFIER if commit_identifier is None else int(commit_identifier)))
        if len(users) != 1:
            raise CommitConflict(t.name, "an overwrite needs exactly one commit user/identifier")
        user, identifier = users.pop()
        base_id = self._replay_base(messages, identifier, base_snapshot_id)
        schema_id = max([m.schema_id for m in messages] + [t.schema.id])
        opts = t.schema.table_options
        retries = opts.get(COMMIT_MAX_RETRIES)
        wait = opts.get(COMMIT_MIN_RETRY_WAIT) / 1000.0
        max_wait = opts.get(COMMIT_MAX_RETRY_WAIT) / 1000.0
        for attempt in range(retries + 1):
            latest = t.snapshot_manager.latest()
            done = self._already_committed(user, identifier, base_id, latest, COMMIT_KIND_OVERWRITE)
            if done is not None:
                return done
            if attempt == 0:
                self._require_files(adds, self._index_records(COMMIT_KIND_OVERWRITE))
            try:
                deletes = [] if latest is None else [
                    ManifestEntry(DELETE, e.partition, e.bucket, e.total_buckets, e.file)
                    for e in t.manifests.live_entries(latest) if partitions is None or e.partition in partitions]
            except (CorruptFile, SnapshotNotFound):
                if not self._superseded(latest):
                    raise
                continue  # expired while read: a lost race
            entries = deletes + adds
            if not entries:
                return None if latest is None else latest.id
            self._check_strict(entries, latest)
            self._check_overwrite_buckets(adds)
            delta_name, delta_meta = self._write_manifest(entries, schema_id)
            try:
                published = self._try_publish(latest, delta_meta, entries, user, identifier, COMMIT_KIND_OVERWRITE,
                                              schema_id, properties)
            except CommitOutcomeUnknown:
                raise  # the snapshot may have landed and reference the manifest: keep it
            except BaseException as e:
                t.file_io.delete(t.paths.manifest(delta_name))
                if not isinstance(e, (CorruptFile, SnapshotNotFound)) or not self._superseded(latest):
                    raise
                published = None  # expired while read: a lost race
            if published is not None:
                return published
            t.file_io.delete(t.paths.manifest(delta_name))  # a no-op when already deleted
            time.sleep(min(max_wait, wait * (2 ** attempt)) * (0.5 + random.random()))
        raise CommitRetriesExhausted(t.name, retries + 1)

    def _check_overwrite_buckets(self, adds: list[ManifestEntry]) -> None:
        """New files of one partition must agree on the bucket count (old files of it are all replaced)."""
        totals: dict[bytes, int] = {}
        for e in adds:
            if e.bucket != POSTPONE_BUCKET and totals.setdefault(e.partition, e.total_buckets) != e.total_buckets:
                raise CommitConflict(self.table.name, "files of one partition were written with different "
                                     "bucket counts")
