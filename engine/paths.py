"""Where a table's files live, named exactly as Paimon names them (format spec §1, §2, §12)."""
from __future__ import annotations

import datetime as dt
import decimal
import math
import os
import uuid

import numpy as np

from engine.data_paths import BucketDir
from engine.types import DataType

_ESCAPED = set(range(0x00, 0x20)) | {ord(c) for c in "\"#%'*/:=?\\{}[]^"} | {0x7F}


def escape_partition_component(text: str) -> str:
    """``text`` with the characters Paimon escapes in partition paths (control characters, ``"#%'*/:=?{}[]^``, the
    backslash and DEL) written as ``%XX`` (upper-case hex), as Java's PartitionPathUtils does."""
    return "".join(f"%{ord(c):02X}" if ord(c) in _ESCAPED else c for c in text)


def _java_float_str(x: float, single: bool) -> str:
    """Java Float/Double.toString (shortest digits; plain between 1e-3 and 1e7, else d.dddEn)."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    v = np.float32(x) if single else np.float64(x)
    if x == 0:
        return "-0.0" if math.copysign(1, x) < 0 else "0.0"
    if 1e-3 <= abs(x) < 1e7:
        text = np.format_float_positional(v, unique=True)
        return text + "0" if text.endswith(".") else text
    mant, _, exp = np.format_float_scientific(v, unique=True).partition("e")
    if mant.endswith("."):
        mant += "0"
    elif "." not in mant:
        mant += ".0"
    return f"{mant}E{int(exp)}"


def _java_local_datetime_str(v: dt.datetime, nanos: int | None = None) -> str:
    text = f"{v.year:04d}-{v.month:02d}-{v.day:02d}T{v.hour:02d}:{v.minute:02d}"  # strftime's %Y does not pad
    nano = nanos if nanos is not None else v.microsecond * 1000
    if v.second or nano:
        text += f":{v.second:02d}"
    if nano:
        if nano % 1_000_000 == 0:
            text += f".{nano // 1_000_000:03d}"
        elif nano % 1000 == 0:
            text += f".{nano // 1000:06d}"
        else:
            text += f".{nano:09d}"
    return text


def _nanos_of_second(v: dt.datetime) -> int:
    return v.microsecond * 1000 + getattr(v, "nanosecond", 0)  # pandas.Timestamp carries sub-microsecond digits


def _java_format_timestamp(v: dt.datetime, precision: int) -> str:
    """DateTimeUtils.formatTimestamp: ``yyyy-MM-dd HH:mm:ss`` and the nine-digit fraction with trailing zeros
    dropped, but never below ``precision`` digits."""
    fraction = f"{_nanos_of_second(v):09d}"
    while len(fraction) > precision and fraction.endswith("0"):
        fraction = fraction[:-1]
    text = f"{v.year:04d}-{v.month:02d}-{v.day:02d} {v.hour:02d}:{v.minute:02d}:{v.second:02d}"
    return f"{text}.{fraction}" if fraction else text


def _java_format_time(ms: int, precision: int) -> str:
    """DateTimeUtils.formatTimestampMillis: ``HH:mm:ss`` and, for precision > 0, the millisecond digits up to the
    last non-zero one (at least one)."""
    h, rest = divmod(ms % 86_400_000, 3_600_000)
    m, rest = divmod(rest, 60_000)
    s, millis = divmod(rest, 1000)
    text = f"{h:02d}:{m:02d}:{s:02d}"
    if precision > 0:
        text += "." + (f"{millis:03d}".rstrip("0") or "0")[:precision]
    return text


_NOT_JAVA_WHITESPACE = frozenset("\x85\xa0\u2007\u202f")  # Python's isspace() says yes, Java's isWhitespace no


def _java_blank(text: str) -> bool:
    """Java's StringUtils.isNullOrWhitespaceOnly (Character.isWhitespace: no-break spaces and NEL are not blank)."""
    return all(c.isspace() and c not in _NOT_JAVA_WHITESPACE for c in text)


def partition_value_text(value, dtype: DataType, default_name: str, legacy: bool = True) -> str:
    """Render one partition value as Paimon does in directory names (before escaping): Java's ``toString`` of
    the internal value with ``partition.legacy-name`` (the default), else Paimon's cast to STRING."""
    if value is None or (isinstance(value, str) and _java_blank(value)):
        return default_name
    root = dtype.root
    if root == "BOOLEAN":
        return "true" if value else "false"
    if root in ("FLOAT", "DOUBLE"):
        return _java_float_str(float(value), root == "FLOAT")
    if root == "DATE":
        if legacy:
            return str((value - dt.date(1970, 1, 1)).days) if isinstance(value, dt.date) else str(int(value))
        return value.isoformat()
    if root == "TIME":
        if isinstance(value, dt.time):
            value = ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + value.microsecond // 1000
        return str(value) if legacy else _java_format_time(int(value), dtype.precision or 0)
    if root in ("TIMESTAMP", "TIMESTAMP_LTZ"):
        if isinstance(value, dt.datetime):
            if value.tzinfo is not None:
                # LTZ values are instants: the legacy name shows UTC wall-clock time, the cast to STRING the JVM's
                # default zone (here: the process's local zone).
                value = value.astimezone(dt.timezone.utc if legacy else None).replace(tzinfo=None)
            if legacy:
                return _java_local_datetime_str(value, _nanos_of_second(value))
            return _java_format_timestamp(value, 6 if dtype.precision is None else dtype.precision)
        return str(value)
    if root == "DECIMAL":
        return format(decimal.Decimal(value), "f")
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


class TablePaths:
    """File layout of one table rooted at ``root`` (``<warehouse>/<db>.db/<table>``). ``meta_root`` (default
    ``root``) holds ``schema/``, ``snapshot/`` and ``tag/``: a branch's directory (``root/branch/branch-<name>``),
    whose manifests and data files stay under ``root``."""

    def __init__(self, root: str, meta_root: str | None = None):
        self.root = root
        self.meta_root = root if meta_root is None else meta_root
        self.schema_dir = os.path.join(self.meta_root, "schema")
        self.snapshot_dir = os.path.join(self.meta_root, "snapshot")
        self.manifest_dir = os.path.join(root, "manifest")

    def schema(self, schema_id: int) -> str:
        """Path of ``schema/schema-<id>``."""
        return os.path.join(self.schema_dir, f"schema-{schema_id}")

    def snapshot(self, snapshot_id: int) -> str:
        """Path of ``snapshot/snapshot-<id>``."""
        return os.path.join(self.snapshot_dir, f"snapshot-{snapshot_id}")

    def manifest(self, name: str) -> str:
        """Path of manifest-directory file ``name`` (manifests and manifest lists)."""
        return os.path.join(self.manifest_dir, name)

    @staticmethod
    def new_manifest_name(kind: str = "manifest") -> str:
        """A fresh, unique file name ``<kind>-<uuid4>-0`` for a manifest (``kind``: manifest, manifest-list...)."""
        return f"{kind}-{uuid.uuid4()}-0"

    @staticmethod
    def partition_dir(names, values, types, default_name: str, legacy: bool = True) -> str:
        """The relative partition directory ``k1=v1/k2=v2`` for ``values`` (rendered as Paimon renders them, nulls
        and blank strings as ``default_name``, each part escaped); empty for an unpartitioned table."""
        parts = [f"{escape_partition_component(n)}="
                 f"{escape_partition_component(partition_value_text(v, t, default_name, legacy))}"
                 for n, v, t in zip(names, values, types)]
        return "/".join(parts)

    def bucket_dir(self, partition_dir: str, bucket: int) -> str:
        """Absolute path of ``bucket-<n>`` (``bucket-postpone`` for bucket -2) under ``partition_dir``, as a
        ``BucketDir`` (it also knows its path relative to the table root)."""
        name = "bucket-postpone" if bucket == -2 else f"bucket-{bucket}"
        return BucketDir(self.root, f"{partition_dir}/{name}" if partition_dir else name)
