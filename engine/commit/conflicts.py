"""Conflict checks of commits that delete files (COMPACT, OVERWRITE), paimon-semantics §11.3.

``check_file_changes`` folds the latest snapshot's live entries of the changed partitions with the commit's entries
and raises ``CommitConflict`` when the commit deletes a file that is no longer live (a concurrent compaction or
overwrite removed it), adds a file that is already live, or leaves two files of one bucket's level >= 1 with
overlapping key ranges.
"""
from __future__ import annotations

from typing import Sequence

from engine.compact.levels import find_overlap, key_decoder
from engine.errors import CommitConflict
from engine.meta.manifest import DuplicateFileError, ManifestEntry, fold_entries


def check_file_changes(table, latest_live: Sequence[ManifestEntry], entries: Sequence[ManifestEntry]) -> None:
    """Raise CommitConflict if ``entries`` add a file already live or delete one no longer live in the touched
    partitions,
    or otherwise conflict with ``latest_live``; returns None when the change applies cleanly."""
    changed = {e.partition for e in entries}
    base = [e for e in latest_live if e.partition in changed]
    try:
        live, missing = fold_entries(list(base) + list(entries))
    except DuplicateFileError as e:
        raise CommitConflict(table.name, f"file {e.file_name} is already in the table") from None
    if missing:
        names = sorted(ident[3] for ident in missing)
        raise CommitConflict(table.name, f"file deletion conflicts detected: {names[:5]} are no longer live "
                             "(a concurrent compaction or overwrite removed them); give up committing and retry")
    touched = {(e.partition, e.bucket) for e in entries}
    decode = key_decoder(table.schema.types_of(table.schema.trimmed_primary_keys))
    by_level: dict[tuple[bytes, int, int], list] = {}
    for e in live.values():
        if (e.partition, e.bucket) in touched and e.file.level > 0:
            by_level.setdefault((e.partition, e.bucket, e.file.level), []).append(e.file)
    for (partition, bucket, level), files in by_level.items():
        clash = find_overlap(files, decode)
        if clash is not None:
            raise CommitConflict(table.name, f"LSM conflicts detected: bucket {bucket} level {level} would hold "
                                 f"overlapping files {clash[0].file_name} and {clash[1].file_name}")


def check_vectors_unchanged(table, base, latest, files) -> None:
    """Raise CommitConflict if the deletion vector of a data file in ``files`` ((partition, bucket, file name)
    triples) in ``latest`` is not the one it had in ``base``, the snapshot the commit's change was computed from: a
    concurrent commit marked rows of the file deleted (or dropped its vector) meanwhile, and a commit rewriting or
    re-marking the file from ``base`` would bring those rows back (Paimon's conflict check of append DV tables
    compares each file's DV index file the same way)."""
    files = list(files)
    if not files or base is None or latest is None or base.index_manifest == latest.index_manifest:
        return
    scan = table.scan()
    before, now = scan.vectors(base), scan.vectors(latest)
    for partition, bucket, name in files:
        old = dict(before[(partition, bucket)].files).get(name) if (partition, bucket) in before else None
        new = dict(now[(partition, bucket)].files).get(name) if (partition, bucket) in now else None
        if old != new:
            raise CommitConflict(table.name, f"a concurrent commit changed the deletion vector of data file {name} "
                                 "since this change read it; nothing was committed, run it again")
