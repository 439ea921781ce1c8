"""Column statistics of a data file, serialized as Paimon SimpleStats (format spec §6.3, §7).

Guarantee: for every non-null value v of a column, ``min <= v <= max`` under Paimon's order (floats: Java's
Double.compare, where -0.0 < 0.0; a float column holding a NaN gets no min/max), so readers may skip a file whose
range cannot match. Under ``truncate(N)`` long strings keep an N-character prefix as the minimum
and a rounded-up prefix as the maximum (neither, if it cannot be rounded up). Each column's mode is
``metadata.stats-mode`` (a primary-key file: its level's mode, ``TableOptions.stats_mode_of``) unless
``fields.<column>.stats-mode`` overrides it or ``metadata.stats-keep-first-n-columns``
turns it off (``stats_modes``); a ``none`` column records no min, max or null count, and is left out of the stored
statistics unless ``metadata.stats-dense-store`` is false (``value_stats``).
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


_MODE = re.compile(r"none|counts|full|truncate\((\d+)\)")
KEY_STATS_MODE = "truncate(128)"
_SYSTEM_FIELDS = frozenset({"_SEQUENCE_NUMBER", "_VALUE_KIND", "_LEVEL", "rowkind", "_ROW_ID"})


def _parse_mode(options, key: str, value: str) -> str:
    """``value`` of option ``key`` as a stats mode, lower-cased. Raises InvalidOption for a mode that is not none,
    counts, full or truncate(N) with N > 0 (Paimon's TruncateSimpleColStatsCollector refuses a zero length when a
    writer is created, so a table with ``truncate(0)`` opens and reads but cannot be written)."""
    mode = value.strip().lower()
    m = _MODE.fullmatch(mode)
    if not m:
        raise InvalidOption(key, mode, "expected none, counts, full or truncate(N)", table=options.table)
    if m.group(1) is not None and int(m.group(1)) == 0:
        raise InvalidOption(key, mode, "the truncate length must be larger than zero", table=options.table)
    return mode


def stats_modes(options, names, default: str, *, default_key: str = "metadata.stats-mode", avro: bool = False,
                truncated=frozenset()) -> list[str]:
    """The stats mode of each column of a file whose columns are ``names``, in file order, as Paimon's
    StatsCollectorFactories picks them (``options``: ``TableOptions``):

    * ``fields.<name>.stats-mode`` when set;
    * else, outside Avro files, truncate(128) for a system column (``_KEY_*``, ``_SEQUENCE_NUMBER``, ...) and for
      the ``truncated`` columns (thin mode: the key's own columns);
    * else ``none`` once ``metadata.stats-keep-first-n-columns`` (N >= 0) columns have been counted -- every column
      of an Avro file counts, elsewhere every column but those of the previous rule;
    * else ``default`` (the value of option ``default_key``).

    Raises InvalidOption naming the option whose mode is bad (``_parse_mode``)."""
    from engine.options import STATS_KEEP_FIRST_N_COLUMNS
    keep = options.get(STATS_KEEP_FIRST_N_COLUMNS)
    counted = 0
    modes = []
    for name in names:
        key = f"fields.{name}.stats-mode"
        if key in options.raw:
            modes.append(_parse_mode(options, key, options.raw[key]))
        elif not avro and (name.startswith("_KEY_") or name in _SYSTEM_FIELDS or name in truncated):
            modes.append(KEY_STATS_MODE)
            continue
        elif 0 <= keep <= counted:
            modes.append("none")
        else:
            modes.append(_parse_mode(options, default_key, default))
        counted += 1
    return modes


def kv_stats_modes(options, key_columns, value_names, file_format: str, default: str, *,
                   default_key: str = "metadata.stats-mode") -> tuple[list[str], list[str]]:
    """(key modes, value modes) of a primary-key data file, as Paimon's KeyValueFileWriterFactory picks them over
    the file's columns (``_KEY_<k>`` or, in thin mode, ``<k>``; ``_SEQUENCE_NUMBER``, ``_VALUE_KIND``; the value
    columns) with ``stats_modes``: Avro files use the file's stats mode ``default`` for every column without an
    override (createStatsFactoriesForAvro), other formats truncate(128) for the keys (thin mode: the key's own
    value columns, whose value statistics are then the key statistics). Raises like ``stats_modes``."""
    thin = [k for k in key_columns if not k.startswith("_KEY_")]
    names = [k for k in key_columns if k.startswith("_KEY_")] + ["_SEQUENCE_NUMBER", "_VALUE_KIND"] + list(value_names)
    by_name = dict(zip(names, stats_modes(options, names, default, default_key=default_key,
                                          avro=file_format == "avro", truncated=frozenset(thin))))
    return [by_name[k] for k in key_columns], [by_name[n] for n in value_names]


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


def value_stats(table: pa.Table, names, types: list[DataType], modes: list[str], dense: bool = True):
    """(SimpleStats, value_stats_cols) of a file's value columns, as Paimon's SimpleStatsConverter stores them.
    ``dense`` (``metadata.stats-dense-store``, Paimon's default): only the columns whose mode is not ``none``, which
    ``value_stats_cols`` names -- None when that is every column, () with ``SimpleStats.EMPTY`` when it is none.
    Not ``dense``: every column (value_stats_cols None), a ``none`` column with null min, max and null count."""
    if not dense:
        return (simple_stats(table, names, types, modes, keep_columns=True) if names else SimpleStats.EMPTY), None
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
