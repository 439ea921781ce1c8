"""One bucket's deletion vectors while compactions change them (Paimon's BucketedDvMaintainer), and where a
snapshot keeps them.

In deletion-vector mode (paimon-semantics §9) a compaction that writes a key's newest record above level 0 finds the
key's previous record by lookup in a deeper level and marks that row deleted in its file's deletion vector; files a
compaction rewrites lose their vectors (their live rows moved to the new files). So every key has at most one live
row above level 0, and reads need no merge.

Guarantees:
- ``BucketDeletionVectors`` changes only through ``apply`` (one successful compaction unit at a time), so a failed
  unit leaves the vectors as they were.
- ``changes()`` writes the bucket's vectors as one new index file only when something changed, once, and names the
  index files of the base snapshot it replaces: the commit refuses it (CommitConflict) if another commit replaced
  them meanwhile (engine.commit.index_changes).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from engine.deletion_vectors.codec import normalize_positions
from engine.deletion_vectors.index_file import (DV_INDEX, DeletionFile, deletion_files, read_deletion_vector,
                                                write_dv_index)


@dataclass(frozen=True)
class BucketVectors:
    """Where one bucket's deletion vectors are in a snapshot: its DV index files (names) and, per data file, the
    range of its vector."""
    index_files: tuple[str, ...] = ()
    files: tuple[tuple[str, DeletionFile], ...] = ()


def vectors_by_bucket(records: list[dict], path_of) -> dict[tuple[bytes, int], BucketVectors]:
    """The DELETION_VECTORS records of an index manifest grouped by (partition, bucket); ``path_of(record)`` is the
    index file's path. Raises CorruptFile when a data file has two vectors in one bucket."""
    grouped: dict[tuple[bytes, int], list[dict]] = {}
    for r in records:
        if r["_INDEX_TYPE"] == DV_INDEX:
            grouped.setdefault((r["_PARTITION"], r["_BUCKET"]), []).append(r)
    return {key: BucketVectors(tuple(sorted(r["_FILE_NAME"] for r in recs)),
                               tuple(sorted(deletion_files(recs, path_of).items())))
            for key, recs in grouped.items()}


def read_vectors(file_io, files: dict[str, DeletionFile]) -> dict[str, np.ndarray]:
    """Every vector of ``files`` (data file name -> sorted deleted positions). Raises CorruptFile for a missing or
    damaged index file."""
    return {name: read_deletion_vector(file_io, where) for name, where in files.items()}


def drop_deleted(rows: pa.Table, deleted: np.ndarray | None, start: int = 0) -> pa.Table:
    """``rows`` (rows ``start``.. of a data file, in order) without those at the sorted positions ``deleted``."""
    if deleted is None or not len(deleted):
        return rows
    inside = deleted[(deleted >= start) & (deleted < start + rows.num_rows)] - start
    if not len(inside):
        return rows
    keep = np.ones(rows.num_rows, dtype=bool)
    keep[inside] = False
    return rows.filter(pa.array(keep))


def bucket_vectors(table, partition: bytes, bucket: int, base: BucketVectors | None):
    """The BucketDeletionVectors a compaction of the bucket maintains (starting from ``base``, the bucket's vectors
    in the snapshot it started from), or None when the table is not in deletion-vector mode."""
    from engine.options import DELETION_VECTORS_BITMAP64, DELETION_VECTORS_INDEX_PREFIX
    opts = table.schema.table_options
    if not opts.deletion_vectors:
        return None
    return BucketDeletionVectors(table, partition, bucket, base, bitmap64=opts.get(DELETION_VECTORS_BITMAP64),
                                 prefix=opts.get(DELETION_VECTORS_INDEX_PREFIX))


class BucketDeletionVectors:
    """The deletion vectors of one bucket, loaded lazily from the base snapshot and changed by compactions."""

    def __init__(self, table, partition: bytes, bucket: int, base: BucketVectors | None, *, bitmap64: bool,
                 prefix: str = "index-"):
        self.file_io = table.file_io
        self.scan = table.scan()
        self.partition = partition
        self.bucket = bucket
        self.base = base or BucketVectors()
        self.bitmap64 = bitmap64
        self.prefix = prefix  # of the index file's name
        self._vectors: dict[str, np.ndarray] | None = None
        self.modified = False
        self._written: tuple[dict, ...] | None = None

    def _all(self) -> dict[str, np.ndarray]:
        if self._vectors is None:
            self._vectors = read_vectors(self.file_io, dict(self.base.files))
        return self._vectors

    def deleted(self, file_name: str) -> np.ndarray | None:
        """The sorted deleted row positions of data file ``file_name``, or None."""
        if self._vectors is None and not self.base.files:
            return None
        return self._all().get(file_name)

    def apply(self, deletions: dict[str, list[np.ndarray]], rewritten) -> None:
        """Record one successful compaction unit: rows newly marked deleted (data file name -> position arrays) and
        the names of the files it rewrote (their vectors go)."""
        vectors = self._all()
        for name in rewritten:
            if vectors.pop(name, None) is not None:
                self.modified = True
        for name, parts in deletions.items():
            old = vectors.get(name)
            merged = normalize_positions(np.concatenate(([] if old is None else [old]) + list(parts)), self.bitmap64)
            if old is None or len(merged) != len(old):
                vectors[name] = merged
                self.modified = True
        assert self._written is None, "deletion vectors changed after they were written"

    def changes(self) -> tuple[tuple[str, ...], tuple[dict, ...]] | None:
        """``(index files of the base replaced, index-manifest records of the new file)`` when the vectors
        changed (the new file is written on the first call; no record when no vector is left), else None."""
        if not self.modified:
            return None
        if self._written is None:
            live = {name: v for name, v in self._all().items() if len(v)}
            directory = self.scan.index_file_dir(self.partition, self.bucket)
            self._written = (write_dv_index(self.file_io, directory, live, bitmap64=self.bitmap64,
                                            partition=self.partition, bucket=self.bucket, prefix=self.prefix),
                             ) if live else ()
        return self.base.index_files, self._written

    def discard(self) -> None:
        """Delete the index file ``changes()`` wrote (for changes that will not commit)."""
        for record in self._written or ():
            self.file_io.delete(self.scan.index_file_path(record))
        self._written = None
