"""Data file metadata as stored in a manifest's ``_FILE`` record (format spec §6.3, §7).

Rows (keys, stats minimums and maximums) are kept as the serialized BinaryRow bytes of spec §9.5
(4-byte big-endian arity + row bytes); this module never interprets them. Byte encoding to Avro lives in
:mod:`engine.meta.manifest`.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

FILE_SOURCE_APPEND = 0
"""``_FILE_SOURCE`` of files written by a write-buffer flush (and of all changelog files)."""
FILE_SOURCE_COMPACT = 1
"""``_FILE_SOURCE`` of files written by compaction."""

EMPTY_ROW = bytes.fromhex("00000000" + "00" * 8)
"""Serialized BinaryRow of arity 0: the partition of an unpartitioned table, the key of an append file."""


@dataclass(frozen=True)
class SimpleStats:
    """Per-column min/max/null-count statistics (spec §6.3).

    ``min_values`` / ``max_values`` are serialized BinaryRows whose fields are the described columns, all
    nullable. ``null_counts`` has one entry per described column (an entry may be None = unknown), or is
    None when the file does not record null counts at all.
    """

    min_values: bytes
    max_values: bytes
    null_counts: tuple[int | None, ...] | None

    EMPTY: ClassVar[SimpleStats]
    """Stats over zero columns: arity-0 rows and ``null_counts == ()``."""


SimpleStats.EMPTY = SimpleStats(EMPTY_ROW, EMPTY_ROW, ())


@dataclass(frozen=True)
class DataFileMeta:
    """One data (or changelog) file, the fields of spec §7 in order.

    * ``min_key`` / ``max_key``: serialized BinaryRows of the first and last (trimmed primary) key.
    * ``creation_time_millis``: ``_CREATION_TIME`` as an int, i.e. the local wall-clock time encoded as if
      it were UTC epoch milliseconds (what Java and pypaimon write).
    * ``delete_row_count``: the number of -U/-D rows; must be exact when written (see spec §7 warning).
    * ``value_stats_cols``: None means ``value_stats`` covers all value columns of the file's schema.
    """

    file_name: str
    file_size: int
    row_count: int
    min_key: bytes
    max_key: bytes
    key_stats: SimpleStats
    value_stats: SimpleStats
    min_sequence_number: int
    max_sequence_number: int
    schema_id: int
    level: int
    extra_files: tuple[str, ...] = ()
    creation_time_millis: int | None = None
    delete_row_count: int | None = None
    embedded_index: bytes | None = None
    file_source: int | None = None
    value_stats_cols: tuple[str, ...] | None = None
    external_path: str | None = None
    first_row_id: int | None = None
    write_cols: tuple[str, ...] | None = None
    write_cols_sequences: tuple[int, ...] | None = None

    def upgrade(self, level: int) -> DataFileMeta:
        """Return a copy of this file's metadata at ``level`` (everything else unchanged).

        A commit records an upgrade as DELETE of the old-level entry plus ADD of the new one (spec §6.4).
        """
        return dataclasses.replace(self, level=level)
