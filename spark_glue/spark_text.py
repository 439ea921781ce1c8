"""Values written into a STRING column as Spark's CAST renders them as text.

Paimon's Spark writer receives rows Spark has already cast to the table's types (PaimonOutputResolver adds a Cast in
the session time zone). lakemerge's tasks receive the input's own types, and Arrow's cast to text differs from
Spark's for timestamps, floating-point numbers and decimals (Arrow writes '1E-9', Spark '0.000000001'); integers,
booleans, dates and strings read the same in both.
"""
from __future__ import annotations

import decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def spark_text(rows: pa.Table, target: pa.Schema, zone: str | None) -> pa.Table:
    """``rows`` whose top-level timestamp, float, double and decimal columns written into a STRING column of
    ``target`` are the text Spark's CAST gives: a timestamp as ``yyyy-MM-dd HH:mm:ss`` with its fraction of a
    second without trailing zeros (none when it is zero), a TIMESTAMP (with a zone) as its wall time in the session
    zone ``zone`` (None: the zone Spark typed the column with); a double or float as Java's ``toString`` writes it
    (``1.0``, ``1.0E20``, ``NaN``, ``-Infinity``) with the shortest digits that read back, as JDK 19+ prints them
    (JDK 17's prints more digits for some values, e.g. a float ``-6.6926479E13`` where this gives ``-6.692648E13``);
    a decimal in plain notation with all its scale's digits (``0.000000100``,
    never Arrow's ``1.00E-7``). Other columns are returned as they are (the writer casts them; nested
    values too)."""
    for i, name in enumerate(rows.column_names):
        if name not in target.names or not pa.types.is_string(target.field(name).type):
            continue
        col = rows.column(i)
        if pa.types.is_timestamp(col.type):
            text = pa.chunked_array([_timestamp_text(c, zone) for c in col.chunks], pa.string())
        elif pa.types.is_floating(col.type):
            single = pa.types.is_float32(col.type) or pa.types.is_float16(col.type)
            text = pa.array([None if v is None else java_float_text(v, single) for v in col.to_pylist()], pa.string())
        elif pa.types.is_decimal(col.type):
            text = pa.array([None if v is None else format(v, "f") for v in col.to_pylist()], pa.string())
        else:
            continue
        rows = rows.set_column(i, name, text)
    return rows


def _timestamp_text(arr: pa.Array, zone: str | None) -> pa.Array:
    if arr.type.tz is not None:  # an instant: its wall time in the session zone
        from spark_glue.tables import _to_wall
        arr = _to_wall(arr, zone)
    micros = arr.cast(pa.timestamp("us"))
    whole = pc.floor_temporal(micros, unit="second")
    seconds = pc.strftime(whole.cast(pa.timestamp("s")), format="%Y-%m-%d %H:%M:%S")
    fraction = pc.subtract(micros.cast(pa.int64()), whole.cast(pa.int64()))
    digits = pc.utf8_rtrim(pc.utf8_lpad(fraction.cast(pa.string()), width=6, padding="0"), characters="0")
    tail = pc.if_else(pc.equal(fraction, 0), "", pc.binary_join_element_wise(".", digits, ""))
    return pc.binary_join_element_wise(seconds, tail, "")


def java_float_text(value: float, single: bool = False) -> str:
    """``value`` as Java's Double.toString (``single``: Float.toString) writes it: the shortest digits that read
    back as the same number, in plain notation with at least one fraction digit for 1e-3 <= |value| < 1e7, else
    as ``d.dddE<exponent>``."""
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    shortest = str(np.float32(value)) if single else repr(float(value))
    d = decimal.Decimal(shortest)
    sign = "-" if d.is_signed() else ""
    if d == 0:
        return sign + "0.0"
    d = abs(d)
    if decimal.Decimal("1e-3") <= d < decimal.Decimal("1e7"):
        text = format(d, "f")
        return sign + (text if "." in text else text + ".0")
    digits = "".join(map(str, d.as_tuple().digits)).rstrip("0") or "0"
    exponent = d.adjusted()
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{exponent}"
