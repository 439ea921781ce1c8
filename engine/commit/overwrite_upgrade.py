"""Upgrading an overwrite's new files to the top level (Paimon's FileStoreCommitImpl.tryUpgrade, option
``overwrite-upgrade``, default true).

An overwrite replaces every file of the partitions it writes, so in each bucket its new files are the only ones.
When they do not overlap in key range, Paimon commits them at the top level (``num-levels - 1``) instead of level
0: nothing older remains to merge with, and a deletion-vector table (whose reads skip level 0) sees them without
a compaction. Paimon does so when the overwrite carries no compaction -- in lakemerge a deletion-vector table that
is not write-only compacts after the overwrite instead (Table.commit_overwrite), as Paimon's writer compacts there.

``upgrade_overwrite(table, adds)`` returns the ADD entries to commit. Every entry stays at level 0 when the table
has no primary key, the option is off, the table is a deletion-vector one that compacts after the overwrite, or any
entry is not a level-0 file of a bucket >= 0 (Paimon's rule); per bucket, the files stay at level 0 when two
overlap. lakemerge also keeps a bucket at level 0 when a file may hold retracts (a delete-row count other than 0):
top-level files of a deletion-vector table are read without merging, where a retract would read as a live row.
"""
from __future__ import annotations

import dataclasses

from engine.compact.levels import find_overlap, key_decoder
from engine.compact.picker import CompactionSettings
from engine.meta.manifest import ManifestEntry
from engine.options import OVERWRITE_UPGRADE, WRITE_ONLY


def upgrade_overwrite(table, adds: list[ManifestEntry]) -> list[ManifestEntry]:
    """``adds`` with each bucket's files at the top level where Paimon's tryUpgrade would put them (module doc)."""
    schema = table.schema
    opts = schema.table_options
    if (not adds or not schema.primary_keys or not opts.get(OVERWRITE_UPGRADE)
            or (opts.deletion_vectors and not opts.get(WRITE_ONLY))):
        return adds
    if any(e.file.level > 0 or e.bucket < 0 for e in adds):
        return adds
    decode = key_decoder(schema.types_of(schema.trimmed_primary_keys))
    top = CompactionSettings.of(opts).num_levels - 1
    buckets: dict[tuple[bytes, int], list[ManifestEntry]] = {}
    for e in adds:
        buckets.setdefault((e.partition, e.bucket), []).append(e)
    out = []
    for entries in buckets.values():
        files = [e.file for e in entries]
        if any(f.delete_row_count != 0 for f in files) or find_overlap(files, decode) is not None:
            out.extend(entries)
        else:
            out.extend(dataclasses.replace(e, file=e.file.upgrade(top)) for e in entries)
    return out


__all__ = ["upgrade_overwrite"]
