"""Record-level expiration of primary-key tables (``record-level.expire-time`` + ``record-level.time-field``), as
Paimon's RecordLevelExpire (paimon-core io/RecordLevelExpire.java) applies it.

A row is expired when its time field, in epoch seconds, is older than ``now - expire-time``. Expiration happens
only in compaction, never in reads: every file a compaction rewrites is read without its expired rows, before the
merge (so an older, unexpired record of the key can become the key's value again, and no changelog is produced for
the rows dropped); lookups into deeper levels (changelog-producer lookup, force-lookup) do not find expired rows.
A file whose minimum time statistic is expired is rewritten instead of upgraded by metadata, and a full compaction
of a bucket that already is one top-level run rewrites those files (Paimon's CompactStrategy.pickFullCompaction).

Time field conversion to seconds (Java's ``createFieldGetterAndConvertToSecond``): INT is seconds; BIGINT is
seconds, or milliseconds when >= 10^12; TIMESTAMP / TIMESTAMP_LTZ of any precision are floored to epoch
milliseconds, then divided by 1000 truncating toward zero. A null time never expires.
"""
from __future__ import annotations

import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import InvalidOption
from engine.meta import binary_row
from engine.meta.data_file import DataFileMeta
from engine.options import RECORD_LEVEL_EXPIRE_TIME, RECORD_LEVEL_TIME_FIELD

TIME_FIELD_ROOTS = ("INT", "BIGINT", "TIMESTAMP", "TIMESTAMP_LTZ")
_MILLIS_THRESHOLD = 1_000_000_000_000  # a BIGINT at or above this is epoch milliseconds
_TO_MILLIS = {"s": (1000, 1), "ms": (1, 1), "us": (1, 1000), "ns": (1, 1_000_000)}


def check_record_level_expire(schema, table: str | None = None) -> None:
    """Paimon's SchemaValidation of ``record-level.time-field`` (made when a schema is created or altered): the
    field exists and is INT, BIGINT, TIMESTAMP or TIMESTAMP_LTZ; and, for a primary-key table,
    ``record-level.expire-time`` needs the time field (Java raises that when a primary-key writer starts; lakemerge
    raises it at once; append tables never use the options). Raises InvalidOption."""
    opts = schema.table_options
    field = opts.get(RECORD_LEVEL_TIME_FIELD)
    if opts.get(RECORD_LEVEL_EXPIRE_TIME) is not None and field is None and schema.primary_keys:
        raise InvalidOption(RECORD_LEVEL_EXPIRE_TIME, opts.raw.get(RECORD_LEVEL_EXPIRE_TIME),
                            f"record-level expiration needs {RECORD_LEVEL_TIME_FIELD} too", table=table)
    if field is None:
        return
    if field not in schema.field_names:
        raise InvalidOption(RECORD_LEVEL_TIME_FIELD, field, f"can not find time field {field!r} for record-level "
                            f"expire (columns: {list(schema.field_names)})", table=table)
    dtype = schema.field(field).type
    if dtype.root not in TIME_FIELD_ROOTS:
        raise InvalidOption(RECORD_LEVEL_TIME_FIELD, field, "the record-level time field type should be one of "
                            f"INT, BIGINT or TIMESTAMP, but column {field!r} is {dtype.sql()}", table=table)


def epoch_seconds(values: pa.Array | pa.ChunkedArray, root: str) -> tuple[np.ndarray, np.ndarray]:
    """``(seconds, valid)``: each value of a time field of type ``root`` in epoch seconds (Java's conversion, see
    the module docstring) and whether it is non-null (seconds of nulls are 0)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    valid = values.is_valid().to_numpy(zero_copy_only=False)
    if root in ("TIMESTAMP", "TIMESTAMP_LTZ"):
        mul, div = _TO_MILLIS[values.type.unit]
        raw = pc.cast(values, pa.int64()).fill_null(0).to_numpy().astype(np.int64)
        millis = np.floor_divide(raw, div) * mul
        seconds = np.where(millis < 0, -((-millis) // 1000), millis // 1000)  # Java's long division
    else:
        seconds = pc.cast(values, pa.int64()).fill_null(0).to_numpy().astype(np.int64)
        if root == "BIGINT":
            seconds = np.where(seconds >= _MILLIS_THRESHOLD, seconds // 1000, seconds)
    return seconds, valid


class RecordExpire:
    """The expiration rule of one table at one moment (``now_seconds``, default the current time)."""

    def __init__(self, schema, field: str, expire_seconds: int, now_seconds: int | None = None):
        self.schema = schema
        self.field = field
        self.field_id = schema.field(field).id
        self.expire_seconds = expire_seconds
        self.now = int(time.time()) if now_seconds is None else now_seconds

    @staticmethod
    def of(schema, now_seconds: int | None = None) -> "RecordExpire | None":
        """The table's rule, or None when ``record-level.expire-time`` is not set or the table has no primary key
        (Paimon applies it in primary-key compaction only). Raises InvalidOption when the time field is missing or
        of another type (a table written by a tool that skipped the create-time check)."""
        opts = schema.table_options
        expire_ms = opts.get(RECORD_LEVEL_EXPIRE_TIME)
        if expire_ms is None or not schema.primary_keys:
            return None
        check_record_level_expire(schema)
        return RecordExpire(schema, opts.get(RECORD_LEVEL_TIME_FIELD), expire_ms // 1000, now_seconds)

    def expired(self, rows: pa.Table) -> np.ndarray:
        """Boolean mask of the rows (read in the table's current schema) whose time is expired."""
        seconds, valid = epoch_seconds(rows.column(self.field), self.schema.field(self.field).type.root)
        return valid & (self.now - self.expire_seconds > seconds)

    def keep(self, rows: pa.Table) -> pa.Table:
        """``rows`` without the expired ones (the same object when none is expired)."""
        mask = self.expired(rows)
        return rows.filter(pa.array(~mask)) if mask.any() else rows

    def file_expired(self, f: DataFileMeta, schema_of) -> bool:
        """True when the file's minimum time statistic is expired (Paimon's ``isExpireFile``): such a file is
        rewritten, not upgraded. False when the statistics do not hold the field (stats mode none or counts, a
        column added after the file was written) or cannot be decoded. ``schema_of(id)`` returns schema ``id``."""
        stats = f.value_stats
        if stats.null_counts is None or not stats.min_values:
            return False
        file_schema = self.schema if f.schema_id == self.schema.id else schema_of(f.schema_id)
        mine = [fl for fl in file_schema.fields if fl.id == self.field_id]
        names = file_schema.field_names if f.value_stats_cols is None else f.value_stats_cols
        if not mine or mine[0].name not in names:
            return False
        types = [_stats_type(t) for t in file_schema.types_of(names)]
        try:
            low = binary_row.deserialize_row(stats.min_values, types)[list(names).index(mine[0].name)]
        except Exception:  # noqa: BLE001 - statistics that cannot be decoded prove nothing
            return False
        if low is None:
            return False
        dtype = mine[0].type
        seconds, _ = epoch_seconds(pa.array([low], dtype.to_arrow()), dtype.root)
        return bool(self.now - self.expire_seconds > seconds[0])



def _stats_type(t):
    """The type a statistics row slot is decoded with: nullable; nested columns as BIGINT (their slot only)."""
    from engine.types import DataType
    return DataType("BIGINT", True) if t.is_nested else t.with_nullable(True)
