"""What a writer hands to the committer: picklable, immutable records of the files it staged."""
from __future__ import annotations

from dataclasses import dataclass

from engine.meta.data_file import DataFileMeta


@dataclass(frozen=True)
class CommitMessage:
    """New level-0 files of one (partition, bucket), plus who wrote them.

    ``commit_user`` / ``commit_identifier`` identify the commit: committing the same messages twice applies them
    once. ``base_snapshot_id`` is the snapshot the writer read sequence numbers from (None for an empty table).
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
