"""Column statistics of a data file, serialized as Paimon SimpleStats (format spec §6.3, §7).

Guarantee: for every non-null value v of a column, ``min <= v <= max`` under Paimon's order (floats: Java's
Double.compare, where -0.0 < 0.0; a float column holding a NaN gets no min/max), so readers may skip a file whose
range cannot match. Under ``truncate(N)`` long strings keep an N-character prefix as the minimum
and a rounded-up prefix as the maximum (neither, if it cannot be rounded up). Each column's mode is
``metadata.stats-mode`` unless ``fields.<column>.stats-mode`` overrides it (``stats_modes``); a ``none`` column
records no min, max or null count.
"""
from __future__ import annotations

import re

import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import InvalidOption
from engine.meta import binary_row
from engine.meta.data_file import SimpleStats
from engine.types import DataType


def _truncate_max(value, n: int):
    """Smallest value of length <= n that is >= every string with the prefix value[:n]; None if none exists."""
    if isinstance(value, str):
        chars = list(value[:n])
        while chars:
            last = ord(chars[-1])
            if last < 0x10FFFF and not (0xD7FF <= last < 0xE000):
                chars[-1] = chr(last + 1)
                return "".join(chars)
            chars.pop()
        return None
    data = bytearray(value[:n])
    while data:
        if data[-1] < 0xFF:
            data[-1] += 1
            return bytes(data)
        data.pop()
    return None


_MODE = re.compile(r"none|counts|full|truncate\(\d+\)")


def stats_modes(options, names, default: str) -> list[str]:
    """The stats mode of each column of ``names``: ``fields.<name>.stats-mode`` if the table options
    (``TableOptions``) set it, else ``default``, as Paimon's StatsCollectorFactories. Raises InvalidOption for a
    mode that is not none, counts, full or truncate(N)."""
    modes = []
    for name in names:
        key = f"fields.{name}.stats-mode"
        mode = options.raw.get(key, default).strip().lower()
        if not _MODE.fullmatch(mode):
            raise InvalidOption(key, mode, "expected none, counts, full or truncate(N)", table=options.table)
        modes.append(mode)
    return modes


KEY_STATS_MODE = "truncate(128)"


def key_stats_modes(options, key_columns, file_format: str, default: str) -> list[str]:
    """Modes of a primary-key file's key statistics, as Paimon's KeyValueFileWriterFactory picks them: the
    ``fields.<column>.stats-mode`` of each key's column in the file (``_KEY_<k>``, or ``<k>`` in thin mode) if set,
    else truncate(128) -- in an Avro file, else ``default`` (the file's stats mode). Raises like ``stats_modes``."""
    return stats_modes(options, key_columns, default if file_format == "avro" else KEY_STATS_MODE)


def value_stats_modes(options, value_names, key_columns, file_format: str, default: str) -> list[str]:
    """Modes of a primary-key file's value statistics: ``stats_modes``, except that a value column which is also the
    key's column in the file (thin mode: no ``_KEY_`` copy) takes its ``key_stats_modes`` mode, as Paimon's
    StatsCollectorFactories gives such a column truncate(128) unless ``fields.<k>.stats-mode`` is set. Raises like
    ``stats_modes``."""
    keys = dict(zip(key_columns, key_stats_modes(options, key_columns, file_format, default)))
    return [keys.get(n, m) for n, m in zip(value_names, stats_modes(options, value_names, default))]


def column_min_max(col: pa.ChunkedArray | pa.Array, dtype: DataType, mode: str):
    """(min, max, null_count) as Python values for one column under a Paimon stats mode (``none``: all None)."""
    if mode == "none":
        return None, None, None
    nulls = col.null_count
    if mode == "counts" or dtype.is_nested or len(col) == nulls:
        return None, None, nulls
    mm = pc.min_max(col)
    lo, hi = mm["min"].as_py(), mm["max"].as_py()
    m = re.fullmatch(r"truncate\((\d+)\)", mode)
    if m and (dtype.is_string or dtype.is_binary):
        n = int(m.group(1))
        if lo is not None and len(lo) > n:
            lo = lo[:n]
        if hi is not None and len(hi) > n:
            hi = _truncate_max(hi, n)
            if hi is None:  # no upper bound: Paimon's TruncateSimpleColStatsCollector then drops the minimum too
                return None, None, nulls
    if dtype.root in ("FLOAT", "DOUBLE"):
        if pc.any(pc.is_nan(col)).as_py():
            return None, None, nulls  # Java's NaN ordering differs from Arrow's min/max; claim nothing
        # Java orders -0.0 below 0.0 but Arrow's min/max returns either zero: widen, as Parquet's readers do
        lo, hi = -0.0 if lo == 0 else lo, 0.0 if hi == 0 else hi
    return lo, hi, nulls


def simple_stats(table: pa.Table, names, types: list[DataType], mode, *, keep_columns: bool = False) -> SimpleStats:
    """SimpleStats over the named columns under ``mode`` (one mode, or one per column: ``stats_modes``); stats rows
    use the types made nullable. Every column ``none``: no statistics (``SimpleStats.EMPTY``), unless
    ``keep_columns`` (key statistics), which describes every column as unknown."""
    modes = [mode] * len(names) if isinstance(mode, str) else list(mode)
    if not names or (all(m == "none" for m in modes) and not keep_columns):
        return SimpleStats.EMPTY
    mins, maxs, nulls = [], [], []
    for name, dtype, m in zip(names, types, modes):
        lo, hi, nc = column_min_max(table.column(name), dtype, m)
        mins.append(lo)
        maxs.append(hi)
        nulls.append(nc)
    stat_types = [t.with_nullable(True) for t in types]
    mins = [None if t.is_nested else v for v, t in zip(mins, stat_types)]
    maxs = [None if t.is_nested else v for v, t in zip(maxs, stat_types)]
    return SimpleStats(binary_row.serialize_row(mins, _flat(stat_types)),
                       binary_row.serialize_row(maxs, _flat(stat_types)), tuple(nulls))


def value_stats(table: pa.Table, names, types: list[DataType], modes: list[str]):
    """(SimpleStats, value_stats_cols) of a file's value columns stored densely, as Paimon's SimpleStatsConverter
    does under ``metadata.stats-dense-store`` (its default): only the columns whose mode is not ``none``, which
    ``value_stats_cols`` names -- None when that is every column, () with ``SimpleStats.EMPTY`` when it is none."""
    kept = dense_columns(modes)
    if not kept or not names:
        return SimpleStats.EMPTY, ()
    stats = simple_stats(table, [names[i] for i in kept], [types[i] for i in kept], [modes[i] for i in kept])
    return stats, (None if len(kept) == len(names) else tuple(names[i] for i in kept))


def dense_columns(modes: list[str]) -> list[int]:
    """Positions of the columns whose statistics are stored (mode not ``none``)."""
    return [i for i, m in enumerate(modes) if m != "none"]


def _flat(types: list[DataType]) -> list[DataType]:
    """Nested columns carry null stats; encode them as a nullable BIGINT slot (always null)."""
    return [DataType("BIGINT", True) if t.is_nested else t for t in types]
