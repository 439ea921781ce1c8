"""DynamicBucketWrite: a TableWrite whose bucket of each row comes from the partition's key-hash index, and
which publishes the updated HASH index files of the buckets it touched.

Contract:
- Buckets follow engine.dynamic_bucket.assigner; the index is restored from the writer's base snapshot.
- ``prepare_commit`` writes one complete HASH index file per bucket that got new keys and attaches it to that
  bucket's commit message; the committer replaces the bucket's HASH record in the index manifest.
- A commit is refused (CommitConflict, files removed) if another writer changed the HASH index of one of the
  written partitions since the base snapshot: two writers could otherwise place one key in two buckets.
- Refuses (UnsupportedFeature) a partition holding data files in a bucket without HASH index (written by a writer
  that kept no index): assignments could not be known.
- ``overwrite=True`` (the messages go to Table.commit_overwrite): every partition's index starts empty, as Paimon's
  overwrite writer assigns with a SimpleHashBucketAssigner and restores no previous files, so the HASH index it
  writes holds only the keys it writes (buckets fill from 0 again; a replaced key written later is a new key). Its
  messages are marked ``index_fresh``; the committer replaces the partition's whole HASH index with them.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from engine.dynamic_bucket.assigner import PartitionIndex
from engine.dynamic_bucket.index_files import (
    HASH_INDEX,
    hash_record,
    read_hashes,
    read_index_manifest,
    write_hashes,
)
from engine.errors import UnsupportedFeature
from engine.meta import binary_row
from engine.options import (
    DYNAMIC_BUCKET_INITIAL_BUCKETS,
    DYNAMIC_BUCKET_MAX_BUCKETS,
    DYNAMIC_BUCKET_TARGET_ROW_NUM,
    TableOptions,
)
from engine.write.commit_message import CommitMessage
from engine.write.table_write import TableWrite


@dataclass(frozen=True)
class DynamicBucketCommitMessage(CommitMessage):
    """A CommitMessage that also carries the bucket's new HASH index record and the partition's HASH index
    files (bucket, file name) as the writer saw them (for conflict detection); ``index_fresh``: written by an
    overwrite writer, whose index of the partition started empty."""
    index_records: tuple = ()
    index_base: tuple = ()
    index_paths: tuple = ()
    index_fresh: bool = False


class DynamicBucketWrite(TableWrite):
    """Writer for dynamic-bucket (bucket = -1) tables: assigns buckets by key hash and writes hash index files
    with the data."""
    def __init__(self, table, *, overwrite: bool = False, **kw):
        super().__init__(table, **kw)
        self.overwrite = overwrite
        opts = self.options
        self.target_rows = opts.get(DYNAMIC_BUCKET_TARGET_ROW_NUM)
        self.num_assigners = opts.get(DYNAMIC_BUCKET_INITIAL_BUCKETS) or 1
        self.max_buckets = opts.get(DYNAMIC_BUCKET_MAX_BUCKETS)
        self._index_records = None
        self._indexes: dict[bytes, PartitionIndex] = {}
        self._index_paths: list[str] = []

    def _require_writable(self) -> None:
        TableOptions(self.schema.options, table=self.table.name).require_writable(allow_dynamic_bucket=True)

    # --- bucket assignment --------------------------------------------------------------------------
    def _bucket_ids(self, partition: bytes, key_cols) -> np.ndarray:
        from kernels.hashing import hash_codes
        return self._index(partition).assign(hash_codes(key_cols))

    def _base_records(self) -> list[dict]:
        if self._index_records is None:
            name = None if self.base_snapshot is None else self.base_snapshot.index_manifest
            self._index_records = [r for r in read_index_manifest(self.table.file_io, self.table.paths, name)
                                   if r["_INDEX_TYPE"] == HASH_INDEX]
        return self._index_records

    def _index(self, partition: bytes) -> PartitionIndex:
        idx = self._indexes.get(partition)
        if idx is not None:
            return idx
        if self._max_seq is None:
            self._load_base()  # fixes the base snapshot before its index manifest is read
        if self.overwrite:
            idx = PartitionIndex(binary_row.hash_code(partition[4:]), np.zeros(0, np.int32), np.zeros(0, np.int32),
                                 {}, self.target_rows, self.num_assigners, self.max_buckets)
            self._indexes[partition] = idx
            return idx
        records = [r for r in self._base_records() if r["_PARTITION"] == partition]
        with_index = {r["_BUCKET"] for r in records}
        missing = sorted(b for (p, b) in self._max_seq if p == partition and b not in with_index)
        if missing:
            raise UnsupportedFeature(
                f"table {self.table.name!r}: partition {self.table.scan().partition_values(partition)} has data "
                f"files in buckets {missing} without a HASH index, so the bucket of existing keys is unknown; "
                "rewrite the partition with a writer that maintains the dynamic-bucket index")
        scan = self.table.scan()
        hashes = [read_hashes(self.table.file_io, scan.index_file_path(r), r) for r in records]
        buckets = [np.full(len(h), r["_BUCKET"], np.int32) for r, h in zip(records, hashes)]
        idx = PartitionIndex(binary_row.hash_code(partition[4:]),
                             np.concatenate(hashes) if hashes else np.zeros(0, np.int32),
                             np.concatenate(buckets) if buckets else np.zeros(0, np.int32),
                             {r["_BUCKET"]: int(r["_ROW_COUNT"]) for r in records},
                             self.target_rows, self.num_assigners, self.max_buckets)
        self._indexes[partition] = idx
        return idx

    # --- commit -------------------------------------------------------------------------------------
    def prepare_commit(self) -> list[CommitMessage]:
        """Flush, write hash index files for the touched buckets and return the commit messages carrying them."""
        messages = super().prepare_commit()
        records: dict[tuple[bytes, int], dict] = {}
        paths: dict[tuple[bytes, int], str] = {}
        for partition, idx in self._indexes.items():
            for bucket in sorted(idx.touched):
                hashes = idx.hashes_of(bucket)
                directory = self.table.scan().index_file_dir(partition, bucket)
                name, size = write_hashes(self.table.file_io, directory, hashes)
                path = f"{directory}/{name}"
                self._index_paths.append(path)
                records[(partition, bucket)] = hash_record(partition, bucket, name, size, len(hashes))
                paths[(partition, bucket)] = path
        out = []
        for m in messages:
            key = (m.partition, m.bucket)
            base = () if self.overwrite else tuple(sorted((r["_BUCKET"], r["_FILE_NAME"]) for r in self._base_records()
                                                          if r["_PARTITION"] == m.partition))
            out.append(DynamicBucketCommitMessage(
                **{f.name: getattr(m, f.name) for f in fields(CommitMessage)},
                index_records=(records[key],) if key in records else (), index_base=base,
                index_paths=(paths[key],) if key in paths else (), index_fresh=self.overwrite))
        return out

    def abort(self) -> None:
        """Delete the written data files and every index file this writer wrote."""
        super().abort()
        for p in self._index_paths:
            self.table.file_io.delete(p)
        self._index_paths.clear()


def delete_index_files(table, messages) -> None:
    """Delete the index files listed in the messages' ``index_paths`` (messages without any are skipped)."""
    for m in messages:
        for p in getattr(m, "index_paths", ()):
            table.file_io.delete(p)
