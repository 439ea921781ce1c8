"""What a writer hands to the committer: picklable, immutable records of the files it staged."""
from __future__ import annotations

from dataclasses import dataclass

from engine.meta.data_file import DataFileMeta


@dataclass(frozen=True)
class CommitMessage:
    """New level-0 files of one (partition, bucket), plus who wrote them, plus what compaction did to the bucket.

    ``commit_user`` / ``commit_identifier`` identify the commit: committing the same messages twice applies them
    once. ``base_snapshot_id`` is the snapshot the writer read sequence numbers from (None for an empty table).

    ``compact_before`` / ``compact_after`` (issue 4) are a compaction's input files (at their old levels) and its
    output files (new files, and upgraded inputs: same file name at a higher level). They commit as a COMPACT snapshot
    (DELETE before + ADD after) after the APPEND snapshot of ``new_files``. Both default to empty.

    ``changelog_files`` (issue 5) are changelog files written with ``new_files`` (changelog-producer=input); they go
    to the APPEND snapshot's changelog manifest list. ``compact_changelog`` are changelog files a compaction produced
    (lookup / full-compaction producers); they go to the COMPACT snapshot's changelog manifest list.

    ``dv_before`` / ``dv_after`` (deletion-vector mode) are set when the compaction changed the bucket's deletion
    vectors: the bucket's DV index files in the base snapshot (names) and the index-manifest records that replace
    them (none when no vector is left). They land with the COMPACT snapshot, never without it.

    ``overwrite_only``: written by an overwrite writer (``new_write(overwrite=True)``) that ignored the partition's
    files, so its sequence numbers start afresh; only ``Table.commit_overwrite`` may publish it.
    """
    partition: bytes
    partition_values: tuple
    bucket: int
    total_buckets: int
    new_files: tuple[DataFileMeta, ...]
    commit_user: str
    commit_identifier: int
    base_snapshot_id: int | None
    schema_id: int
    compact_before: tuple[DataFileMeta, ...] = ()
    compact_after: tuple[DataFileMeta, ...] = ()
    changelog_files: tuple[DataFileMeta, ...] = ()
    compact_changelog: tuple[DataFileMeta, ...] = ()
    dv_before: tuple[str, ...] | None = None
    dv_after: tuple[dict, ...] = ()
    overwrite_only: bool = False
