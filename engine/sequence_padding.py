"""Legacy ``sequence.auto-padding`` (Paimon < 0.8): sequence-field values compared as Java longs.

Old Paimon wrote the sequence field, cast to long, into ``_SEQUENCE_NUMBER``: strings parsed, decimals and
floats truncated, timestamps as epoch millis (seconds with ``second-to-micro``), dates as days. ``row-kind-flag``
appended an add bit (a retract sorts first on equal values), ``millis-to-micro`` / ``second-to-micro`` appended
an arrival counter. lakemerge keeps ``_SEQUENCE_NUMBER`` as the arrival counter and orders records by
(padded value, arrival, retract-before-add), which is the order the padded numbers encoded.
"""
from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc


def padded(col, padding) -> pa.Array:
    """The sequence column as int64 values in the legacy order (nulls stay null, i.e. first)."""
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    t = arr.type
    if pa.types.is_timestamp(t):
        millis = pc.cast(arr, pa.timestamp("ms", tz=t.tz), safe=False).view(pa.int64())
        return pc.divide(millis, 1000) if "second-to-micro" in padding else millis
    if pa.types.is_date32(t):
        return arr.view(pa.int32()).cast(pa.int64())
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return pc.cast(pc.utf8_trim_whitespace(arr), pa.int64())
    if pa.types.is_floating(t) or pa.types.is_decimal(t):
        return pc.cast(pc.trunc(arr.cast(pa.float64()) if pa.types.is_floating(t) else arr), pa.int64(),
                       safe=False)
    return arr.cast(pa.int64())
