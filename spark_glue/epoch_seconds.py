"""Numbers and date-times written across each other, as Spark's CAST (which Paimon's Spark writer applies) does.

Spark casts a TIMESTAMP (an instant) to an integer as whole seconds since the epoch (floored) and an integer to a
TIMESTAMP as that many seconds; it cannot cast (ANSI mode) a DATE or TIMESTAMP_NTZ to a number, a number to either,
or a boolean or binary to or from any date-time. Arrow's cast works in the stored units instead (microseconds,
days), which would store values a thousand or a million times off.
"""
from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import InvalidInput

MICROS = 1_000_000


def _datetime(t: pa.DataType) -> bool:
    return pa.types.is_timestamp(t) or pa.types.is_date(t)


def _instant(t: pa.DataType) -> bool:
    return pa.types.is_timestamp(t) and t.tz is not None


def _number(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)


def refused_cast(have: pa.DataType, want: pa.DataType) -> str | None:
    """Why a top-level input value of type ``have`` cannot be written into a table column of type ``want``, or None.
    Refused: what Spark's CAST refuses (a DATE or TIMESTAMP_NTZ to or from a number, a boolean or binary to or from
    a date-time) and, where Spark converts by seconds, a TIMESTAMP to or from a floating-point or decimal number
    (lakemerge converts integers only)."""
    if not (_datetime(have) or _datetime(want)) or (_datetime(have) and _datetime(want)):
        return None
    other = want if _datetime(have) else have
    if not (_number(other) or pa.types.is_boolean(other) or pa.types.is_binary(other)
            or pa.types.is_large_binary(other)):
        return None  # text, or a nested type (left to the writer)
    instant = _instant(have) or _instant(want)
    if instant and pa.types.is_integer(other):
        return None
    if instant and _number(other):
        return "lakemerge converts a TIMESTAMP to or from whole seconds (an integer column) only"
    return "Spark cannot cast it"


def spark_epoch_seconds(rows: pa.Table, target: pa.Schema, table: str) -> pa.Table:
    """``rows`` whose top-level TIMESTAMP columns written into an integer column of ``target`` are seconds since
    the epoch (floored), and whose integer columns written into a TIMESTAMP column (with a zone) are read as seconds
    since the epoch. Other columns are returned as they are; an integer too wide for its column is left for the
    writer's safe cast to refuse, naming the column. Raises InvalidInput naming ``table`` and the column for seconds
    beyond what a timestamp holds in microseconds (Spark's CAST saturates them to its largest timestamp)."""
    for i, name in enumerate(rows.column_names):
        if name not in target.names:
            continue
        col, want = rows.column(i), target.field(name).type
        if _instant(col.type) and pa.types.is_integer(want):
            micros = col.cast(pa.timestamp("us", tz=col.type.tz)).cast(pa.int64())
            seconds = pc.divide(micros, MICROS)  # truncates toward zero: floor the negative ones
            floor = pc.if_else(pc.less(pc.subtract(micros, pc.multiply(seconds, MICROS)), 0),
                               pc.subtract(seconds, 1), seconds)
            rows = rows.set_column(i, name, floor)
        elif pa.types.is_integer(col.type) and _instant(want):
            try:
                micros = pc.multiply_checked(col.cast(pa.int64()), MICROS)
            except pa.ArrowInvalid:
                raise InvalidInput(f"column {name!r}: a value read as seconds since the epoch is beyond the "
                                   "timestamp range", table=table, column=name) from None
            rows = rows.set_column(i, name, micros.cast(pa.timestamp("us", tz="UTC")))
    return rows
