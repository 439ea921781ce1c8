"""Committing a row-level DELETE / UPDATE / MERGE of an append table (or the file-rewrite DELETE of a primary-key
table, engine.write.pk_rewrite) as ONE snapshot, as Paimon's FileStoreCommitImpl does:
an append commit that deletes data files or changes deletion vectors is an OVERWRITE snapshot (ConflictDetection.
shouldBeOverwriteCommit) and is conflict-checked; one that only adds files (a MERGE that only inserted) is an
APPEND snapshot.

The snapshot holds: DELETE entries of the rewritten files, ADD entries of their rewrites and of appended rows, and
the touched buckets' new deletion-vector records (``CommitMessage.dv_before`` / ``dv_after``, at most one message
per bucket carries them). A snapshot that only changes deletion vectors has an empty delta manifest list.

Refused with CommitConflict (nothing published) when, since the base snapshot the change was computed from:
- a rewritten file is no longer live (a concurrent compaction, overwrite or row-level change replaced it);
- a file given new deletion marks is no longer live;
- the deletion vector of a rewritten or marked file changed, or the DV index files of a touched bucket are not the
  base's any more (engine.commit.index_changes).
Rewritten files keep the sequence numbers of the file they replace (they take its place in append order, or its
rows keep theirs at its level); only appended rows go through the sequence guard.
"""
from __future__ import annotations

from engine.commit.committer import Committer
from engine.commit.conflicts import check_vectors_unchanged
from engine.commit.index_changes import next_index_manifest
from engine.commit.sequence_guard import rebase_sequences
from engine.errors import CommitConflict
from engine.meta.manifest import ADD, ManifestEntry
from engine.meta.snapshot import (
    BATCH_COMMIT_IDENTIFIER,
    COMMIT_KIND_APPEND,
    COMMIT_KIND_OVERWRITE,
)


class RowLevelCommitter(Committer):
    """Publishes one row-level change (see the module docstring)."""

    def __init__(self, table, base, deleted: list[ManifestEntry], marked, rewrites: set[str]):
        """``base``: the snapshot the change was computed from; ``deleted``: DELETE entries of the rewritten files;
        ``marked``: (partition, bucket, file name) of files given new deletion marks; ``rewrites``: names of the
        files written in place of rewritten ones (kept out of the sequence guard)."""
        super().__init__(table)
        self.base = base
        self.deleted = list(deleted)
        self.marked = list(marked)
        self.rewrites = set(rewrites)

    def commit_change(self, messages, commit_user: str) -> int | None:
        """Publish the change as one OVERWRITE snapshot; its id, or None when it changes nothing. Raises
        CommitConflict, CommitRetriesExhausted, CommitOutcomeUnknown."""
        messages = list(messages)
        self._messages = messages
        entries = self._entries(messages)
        if not entries and not any(m.dv_before is not None for m in messages):
            return None
        self._check_schemas({m.schema_id for m in messages})
        base_id = self.base.id if self.base is not None else 0
        schema_id = max([m.schema_id for m in messages] + [self.table.schema.id])
        # as ConflictDetection.shouldBeOverwriteCommit: only deleted files or changed vectors make it an OVERWRITE
        overwrite = bool(self.deleted) or any(m.dv_before is not None for m in messages)
        return self._commit_entries(entries, commit_user, BATCH_COMMIT_IDENTIFIER, base_id,
                                    COMMIT_KIND_OVERWRITE if overwrite else COMMIT_KIND_APPEND,
                                    schema_id, None, guard_base=base_id)

    def _entries(self, messages):
        return self.deleted + super()._entries(messages)

    def _check_conflicts(self, entries, latest):
        super()._check_conflicts(entries, latest)  # every DELETE entry must still be live
        if self.marked:
            live = {(e.partition, e.bucket, e.file.file_name) for e in self.table.manifests.live_entries(latest)} \
                if latest is not None else set()
            gone = [name for p, b, name in self.marked if (p, b, name) not in live]
            if gone:
                raise CommitConflict(self.table.name, f"data file {gone[0]} was removed by a concurrent commit "
                                     "(compaction or overwrite) after this change marked rows of it deleted; "
                                     "nothing was committed, run it again")
        check_vectors_unchanged(self.table, self.base, latest,
                                [(e.partition, e.bucket, e.file.file_name) for e in self.deleted] + self.marked)

    def _rebase(self, entries, latest, guard_base):
        fixed = [e for e in entries if not (e.kind == ADD and e.file.file_name in self.rewrites)]
        moved, written = rebase_sequences(self.table, fixed, latest, guard_base)
        if moved is fixed:
            return entries, written
        return moved + [e for e in entries if e.kind == ADD and e.file.file_name in self.rewrites], written

    def _next_index_manifest(self, latest, kind):
        return next_index_manifest(self.table, latest, self._messages, deletion_vectors=True,
                                   dv_operation="row-level DELETE / UPDATE / MERGE")

    def _index_records(self, commit_kind: str) -> list[dict]:
        return [r for m in self._messages for r in m.dv_after]
