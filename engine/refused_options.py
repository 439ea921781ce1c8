"""Paimon table features lakemerge cannot read or write, and the options that turn them on.

Such a table, created by Paimon or pypaimon, would be silently misread or corrupted if lakemerge ignored the option,
so lakemerge refuses it with ``UnsupportedFeature`` naming the table and the option:

* ``READ`` features change what the files on disk mean (files holding only some columns, columns stored elsewhere,
  files sorted by other columns): opening the table raises.
* ``WRITE`` features need writers to keep extra state (row ids, indexes, clustering levels) that lakemerge does not
  keep: the table opens and reads, and every write, compaction or schema change through lakemerge raises.
* Creating a table with either kind through lakemerge raises, as does altering a table to set one.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

from engine.errors import InvalidOption, UnsupportedFeature

READ = "read"
WRITE = "write"


def _true(value: str) -> bool:
    return value.strip().lower() == "true"


def _set(value: str) -> bool:
    return bool(value.strip())


@dataclass(frozen=True)
class Refusal:
    """Option ``key`` turns on a feature lakemerge does not implement when ``active(value)``; ``scope`` is READ
    (the table cannot be opened) or WRITE (it can be read, not written); ``why`` names the feature."""
    key: str
    scope: str
    why: str
    active: Callable[[str], bool] = _true


_PK_INDEX = "primary-key indexes (Paimon's PrimaryKeyIndexDefinitions) that every write and compaction must update"
# Paimon's TableType values whose data is not a Paimon table's (files of a directory, objects, other formats).
_OTHER_TABLE_TYPES = ("format-table", "object-table", "lance-table", "iceberg-table")
REFUSALS: tuple[Refusal, ...] = (
    Refusal("type", READ, "a table type whose data is not a Paimon table's (TableType format-table, object-table, "
            "lance-table, iceberg-table)", lambda v: v.strip().lower() in _OTHER_TABLE_TYPES),
    Refusal("data-evolution.enabled", READ, "data evolution: a row's columns are spread over several files joined "
            "by row id"),
    Refusal("chain-table.enabled", READ, "chain tables: reads merge the snapshot and delta branches"),
    Refusal("blob-field", READ, "BLOB columns: their values are stored in separate .blob files", _set),
    Refusal("blob-descriptor-field", READ, "BLOB columns stored as serialized blob descriptors", _set),
    Refusal("blob-view-field", READ, "BLOB view columns resolved from other tables at read time", _set),
    Refusal("vector-field", READ, "VECTOR columns", _set),
    Refusal("pk-clustering-override", READ, "data files sorted by clustering.columns instead of the primary key"),
    Refusal("key-value.sequence_number.enabled", READ, "the internal option that prefixes every row read with its "
            "sequence number"),
    Refusal("row-tracking.enabled", WRITE, "row tracking: commits assign row ids to new files"),
    Refusal("clustering.incremental", WRITE, "incremental clustering: compaction keeps clustered files in levels"),
    Refusal("pk-btree.index.columns", WRITE, _PK_INDEX, _set),
    Refusal("pk-bitmap.index.columns", WRITE, _PK_INDEX, _set),
    Refusal("pk-multivalue.index.columns", WRITE, _PK_INDEX, _set),
    Refusal("pk-full-text.index.columns", WRITE, _PK_INDEX, _set),
    Refusal("pk-vector.index.columns", WRITE, _PK_INDEX, _set),
)
REFUSED_KEYS = frozenset(r.key for r in REFUSALS)

# Paimon's audit_log and binlog system tables show a _SEQUENCE_NUMBER column when this is true; lakemerge's
# audit_log does not, so it refuses to serve one.
TABLE_READ_SEQUENCE_NUMBER = "table-read.sequence-number.enabled"


def _active(options: Mapping[str, str], scopes: tuple[str, ...]) -> list[Refusal]:
    return [r for r in REFUSALS if r.scope in scopes and r.key in options and r.active(str(options[r.key]))]


def _raise(refusal: Refusal, options: Mapping[str, str], table: str | None, doing: str) -> None:
    raise UnsupportedFeature(f"table {table!r}: option {refusal.key}={options[refusal.key]}: lakemerge cannot "
                             f"{doing} a table with {refusal.why}")


def require_readable(options: Mapping[str, str], table: str | None) -> None:
    """Raise UnsupportedFeature (naming ``table`` and the option) when ``options`` turn on a READ feature."""
    for refusal in _active(options, (READ,)):
        _raise(refusal, options, table, "read")


def require_writable(options: Mapping[str, str], table: str | None) -> None:
    """Raise UnsupportedFeature (naming ``table`` and the option) when ``options`` turn on a READ or WRITE
    feature."""
    for refusal in _active(options, (READ, WRITE)):
        _raise(refusal, options, table, "write")


def check_new_schema(options: Mapping[str, str], table: str | None, *, has_primary_key: bool) -> None:
    """Checks of a schema lakemerge creates or alters: no READ or WRITE feature (UnsupportedFeature), and
    ``table-read.sequence-number.enabled`` only on a primary-key table (InvalidOption, Paimon's
    SchemaValidation.validateChangelogReadSequenceNumber)."""
    require_writable(options, table)
    value = options.get(TABLE_READ_SEQUENCE_NUMBER)
    if value is not None and _true(str(value)) and not has_primary_key:
        raise InvalidOption(TABLE_READ_SEQUENCE_NUMBER, value, "the sequence number exists only in primary-key "
                            "tables", table=table)


def require_audit_log(options: Mapping[str, str], table: str | None) -> None:
    """Raise UnsupportedFeature when the table's audit log must show sequence numbers, which lakemerge's does not."""
    value = options.get(TABLE_READ_SEQUENCE_NUMBER)
    if value is not None and _true(str(value)):
        raise UnsupportedFeature(f"table {table!r}: option {TABLE_READ_SEQUENCE_NUMBER}={value}: lakemerge's "
                                 "audit_log has no _SEQUENCE_NUMBER column")
