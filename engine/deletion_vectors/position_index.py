"""Position-only lookup for deletion-vector compaction (Paimon's PersistPositionProcessor / FilePosition).

A deletion-vector table's lookup compaction looks up, in the levels below the output level, the previous record of
each key that has level-0 records, and marks that row deleted. When the merge result of a key does not depend on
that record, only WHERE it lies (file, row position) matters: Paimon's MergeTreeCompactManagerFactory then persists
positions only (``PersistPositionProcessor``) -- deletion vectors on, no lookup changelog, merge engine deduplicate,
no ``sequence.field`` -- and ``LookupChangelogMergeFunctionWrapper`` marks the ``FilePosition`` without merging it.

``positions_suffice(options)`` is that table-level rule. ``PositionIndex`` is the matching ``LookupIndex``: the cache
entry of a deeper file is its encoded keys only (``FileCache`` keys-only entry; only the key, sequence and kind
columns are decoded, and only the keys kept), and ``locate(probes, found)`` reports positions, never rows.

lakemerge takes the position path per compaction unit only when it gives exactly the full-value result
(``unit_allows_positions``, from file metadata): every deeper file's sequence numbers are below those of the unit's
level-0 files (else a deeper record could be the newest, which merge-on-read keeps and a position-only merge would
lose: Paimon takes the position path regardless), and with ``ignore-delete`` no level-0 input holds a retract (the
deduplicate merge skips it, so the deeper record is the result; Paimon would drop the key). Otherwise the unit uses
the full-value ``LookupIndex``.

The first-row merge engine's lookup compaction needs even less: whether a deeper level holds the key at all
(Paimon's FirstRowMergeFunctionWrapper over PersistEmptyProcessor): ``PositionIndex.contains``.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from engine.changelog.emit import key_columns
from engine.changelog.lookup_index import LookupIndex
from kernels.keys import encode_keys


def positions_suffice(options) -> bool:
    """True when the table's lookup compaction needs only the position of a key's previous record (Paimon's
    choice of PersistPositionProcessor): deletion vectors, changelog-producer not lookup, merge-engine
    deduplicate and no sequence.field."""
    from engine.options import CHANGELOG_PRODUCER
    return (options.deletion_vectors and options.get(CHANGELOG_PRODUCER) != "lookup"
            and options.merge_engine == "deduplicate" and not options.sequence_fields)


def unit_allows_positions(options, unit_files, levels, from_level: int) -> bool:
    """True when, for a compaction unit over ``unit_files`` looking up levels >= ``from_level`` of ``levels``, each
    key's merge result is its newest level-0 record whatever it finds deeper: every deeper file's max sequence
    number is below every level-0 input's min sequence number, and (``ignore-delete``) no level-0 input may hold a
    retract."""
    level0 = [f for f in unit_files if f.level == 0]
    if not level0:
        return True
    if options.ignore_delete and any(f.delete_row_count != 0 for f in level0):  # None (unknown) counts as some
        return False
    deeper = [f for lv, files in levels.levels.items() if lv >= from_level for f in files]
    if not deeper:
        return True
    return max(f.max_sequence_number for f in deeper) < min(f.min_sequence_number for f in level0)


class PositionIndex(LookupIndex):
    """A LookupIndex that keeps and returns positions only: ``locate(probes, found)`` calls ``found(file name,
    row positions)`` for the keys of ``probes`` found in the deeper levels (lower levels first, rows a deletion
    vector marks deleted skipped), exactly the calls ``LookupIndex.get`` makes, and returns no rows."""

    positions_only = True

    def __init__(self, table, split, reader, levels, from_level: int, deleted=None):
        super().__init__(table, split, reader, levels, from_level, [], deleted=deleted)

    def _load(self, f) -> list:
        """[None, encoded keys] of file ``f``: a cached entry's keys (encoded from writer-cached rows if need be),
        else the file's key columns decoded (with sequence and kind, never values) and encoded, cached as a
        keys-only entry."""
        def load():
            return self._encode(self.reader.read_file(self.split, f, [], live_only=False))
        return [None, self.cache.get_keys(f"{self.split.bucket_dir}/{f.file_name}", load, self._encode)]

    def _encode(self, rows: pa.Table):
        return encode_keys(key_columns(rows, self.schema))

    def locate(self, probes: pa.Table | None, found) -> int:
        """Report where the keys of ``probes`` (normalized, sorted, unique) lie in the deeper levels; return how
        many were found."""
        if probes is None or probes.num_rows == 0 or not self.by_level:
            return 0
        count = 0
        for f, _, positions, _ in self._matches(probes):
            found(f.file_name, positions)
            count += len(positions)
        return count

    def contains(self, probes: pa.Table | None) -> np.ndarray:
        """For each key of ``probes`` (normalized, sorted, unique): True when a deeper level holds it (any record,
        as Paimon's first-row lookup, which keeps no values: PersistEmptyProcessor)."""
        n = 0 if probes is None else probes.num_rows
        hit = np.zeros(n, bool)
        if n and self.by_level:
            for _, at, _, _ in self._matches(probes):
                hit[at] = True
        return hit

    def get(self, probes, found=None):
        raise TypeError("a PositionIndex holds no rows: use locate()")


def release_inputs(table, bucket_dir: str, before, after) -> None:
    """After a position-only unit: drop the cached rows of its input files. A rewritten input leaves the tree
    (its entry goes); an upgraded one stays as a deeper file, where only its keys are looked up (its entry keeps
    its encoded keys only)."""
    from engine.changelog.lookup_index import table_cache
    cache = table_cache(table)
    kept = {f.file_name for f in after}
    schema = table.schema

    def encode(rows):
        return encode_keys(key_columns(rows, schema))
    for f in before:
        path = f"{bucket_dir}/{f.file_name}"  # the cache's name for the file, external or not
        if f.file_name in kept:
            cache.keep_keys_only(path, encode)
        else:
            cache.forget(path)

