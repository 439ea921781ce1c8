"""The index manifest of a new snapshot: the latest one with the commit's index changes applied.

Two kinds of change, each landing with its own snapshot:
- HASH records of dynamic-bucket writers (engine.dynamic_bucket.write) land with the APPEND snapshot of the data
  they index; refused (CommitConflict) if another writer changed a written partition's HASH index since the base.
  An overwrite writer's records (``index_fresh``) replace the partition's whole HASH index, unchecked: its index
  started empty and the OVERWRITE snapshot replaces the partition's files whatever was committed meanwhile.
- DELETION_VECTORS records of compactions (engine.deletion_vectors) land with the COMPACT snapshot: a vector marks
  rows deleted because the compaction's output holds their newer version, so it must never land without it.
  Refused (CommitConflict) if the bucket's DV index files are no longer the ones the compaction started from
  (another compaction changed the bucket's vectors: applying ours would drop its marks).

Records of other index types, and of untouched buckets, are carried over unchanged (Paimon's BucketedCombiner).
"""
from __future__ import annotations

from engine.deletion_vectors.index_file import DV_INDEX
from engine.dynamic_bucket.index_files import HASH_INDEX, read_index_manifest, write_index_manifest
from engine.errors import CommitConflict


def next_index_manifest(table, latest, messages, *, deletion_vectors: bool, overwritten=False,
                        dv_operation: str = "compaction") -> tuple[str | None, bool]:
    """The index manifest for a snapshot on top of ``latest`` publishing ``messages``: the latest one when nothing
    changes, else a new one written now (the bool says so). ``deletion_vectors`` selects which changes this
    snapshot carries: the messages' DV changes (COMPACT snapshot) or their HASH changes (APPEND and OVERWRITE
    snapshots). ``overwritten`` (OVERWRITE snapshots): the serialized partitions whose files the snapshot deletes
    (any container of them), None for the whole table; their DV and HASH records go with their files (Paimon's
    OverwriteChangesProvider deletes every index entry of an overwritten partition), replaced by the HASH records
    the snapshot writes for them (an overwrite writer's index started empty: it holds only the written keys).
    ``dv_operation`` names the operation that changed the vectors in conflict messages (a compaction, or an append
    table's row-level change). Raises CommitConflict as the module docstring says."""
    current = latest.index_manifest if latest is not None else None
    if deletion_vectors:
        dv_changes, hash_changes = [m for m in messages if m.dv_before is not None], []
    else:
        from engine.dynamic_bucket.cross_partition import check_cross_partition_commit
        from engine.dynamic_bucket.write import DynamicBucketCommitMessage
        check_cross_partition_commit(table, latest, messages)
        dv_changes, hash_changes = [], [m for m in messages if isinstance(m, DynamicBucketCommitMessage)]
    if not dv_changes and not hash_changes and overwritten is False:
        return current, False
    records = read_index_manifest(table.file_io, table.paths, current)
    new = records
    if overwritten is not False:
        written = {m.partition for m in hash_changes if not m.index_fresh}  # these keep their untouched buckets
        new = [r for r in new if not ((overwritten is None or r["_PARTITION"] in overwritten)
                                      and (r["_INDEX_TYPE"] == DV_INDEX
                                           or (r["_INDEX_TYPE"] == HASH_INDEX and r["_PARTITION"] not in written)))]
    if dv_changes:
        new = _apply_dv_changes(table, new, dv_changes, dv_operation)
    if hash_changes:
        new = _apply_hash_changes(table, new, hash_changes)
    if new == records:
        return current, False
    return write_index_manifest(table.file_io, table.paths, new), True


def _apply_hash_changes(table, records: list[dict], messages) -> list[dict]:
    for m in messages:
        if m.index_fresh:
            continue
        now = tuple(sorted((r["_BUCKET"], r["_FILE_NAME"]) for r in records
                           if r["_INDEX_TYPE"] == HASH_INDEX and r["_PARTITION"] == m.partition))
        if now != m.index_base:
            raise CommitConflict(table.name, f"another writer changed the dynamic-bucket index of partition "
                                             f"{m.partition_values} since this write started; write again")
    adds = [r for m in messages for r in m.index_records]
    replaced = {(r["_PARTITION"], r["_BUCKET"]) for r in adds}
    fresh = {m.partition for m in messages if m.index_fresh}
    return [r for r in records if not (r["_INDEX_TYPE"] == HASH_INDEX and (
        (r["_PARTITION"], r["_BUCKET"]) in replaced or r["_PARTITION"] in fresh))] + adds


def _apply_dv_changes(table, records: list[dict], messages, operation: str) -> list[dict]:
    buckets = {}
    for m in messages:
        key = (m.partition, m.bucket)
        if key in buckets:
            raise CommitConflict(table.name, f"two changes ({operation}) of bucket {m.bucket} of partition "
                                             f"{m.partition_values} in one commit changed its deletion vectors")
        buckets[key] = m
        now = tuple(sorted(r["_FILE_NAME"] for r in records
                           if r["_INDEX_TYPE"] == DV_INDEX and (r["_PARTITION"], r["_BUCKET"]) == key))
        if now != tuple(sorted(m.dv_before)):
            raise CommitConflict(table.name, f"another commit changed the deletion vectors of bucket {m.bucket} of "
                                             f"partition {m.partition_values} since this {operation} started")
    kept = [r for r in records if not (r["_INDEX_TYPE"] == DV_INDEX and (r["_PARTITION"], r["_BUCKET"]) in buckets)]
    return kept + [r for m in messages for r in m.dv_after]

