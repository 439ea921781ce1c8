"""Rate limits of a streaming read, as Paimon's Spark connector (SparkConnectorOptions, PaimonReadLimits).

A snapshot a query reads is cut into *splits*, in a fixed order, so that a micro-batch may end inside it:
- the snapshot a ``*-full`` mode reads first: the splits its scan plans (one per bucket of a partition, or what
  the table's split options make of it);
- any other snapshot: the (partition, bucket) pairs its changes come from (engine.changelog.overwrite
  .follow_up_files); normalized changes (``changelog.normalize`` without a changelog producer) look keys up across
  buckets and stay one split per snapshot.
Splits are ordered by partition path, then bucket (Paimon's StreamHelper), so a batch replayed after a crash covers
the same splits. A split's rows and bytes are its files' row counts and sizes.

Options (Paimon's keys; Spark lower-cases them): ``read.stream.maxFilesPerTrigger`` (splits per batch: Paimon counts
its DataSplits, not their files), ``read.stream.maxBytesPerTrigger``, ``read.stream.maxRowsPerTrigger``, and
``read.stream.minRowsPerTrigger`` with ``read.stream.maxTriggerDelayMs`` (both or neither). As Paimon's
PaimonReadLimitGuard, every limit set applies at once: a split is admitted while the batch is under all the max
limits *before* it, so a batch always holds at least one split and may overshoot the row/byte limit by its last
split; a batch with fewer than minRows rows is put off (no new offset) until ``maxTriggerDelayMs`` have passed since
the last batch. Unlike Paimon, a Trigger.AvailableNow query never puts a batch off (Spark ends such a query at the
first trigger without data, which would leave the rest unread).
"""
from __future__ import annotations

import dataclasses
import time

from engine.errors import InvalidOption
from engine.options import parse_int

MAX_FILES = "read.stream.maxfilespertrigger"
MAX_BYTES = "read.stream.maxbytespertrigger"
MAX_ROWS = "read.stream.maxrowspertrigger"
MIN_ROWS = "read.stream.minrowspertrigger"
MAX_DELAY = "read.stream.maxtriggerdelayms"
KEYS = {MAX_FILES: "read.stream.maxFilesPerTrigger", MAX_BYTES: "read.stream.maxBytesPerTrigger",
        MAX_ROWS: "read.stream.maxRowsPerTrigger", MIN_ROWS: "read.stream.minRowsPerTrigger",
        MAX_DELAY: "read.stream.maxTriggerDelayMs"}


@dataclasses.dataclass(frozen=True)
class ReadLimits:
    """The rate limits of a query's options (None: not set)."""
    max_files: int | None = None
    max_bytes: int | None = None
    max_rows: int | None = None
    min_rows: int | None = None
    max_delay_ms: int | None = None

    @property
    def any(self) -> bool:
        return any(v is not None for v in dataclasses.astuple(self))

    @classmethod
    def of(cls, options: dict[str, str], table: str, table_options: dict[str, str] | None = None) -> ReadLimits:
        """The limits in the read ``options`` (lower-cased keys), else in ``table_options`` (the table's, as Paimon
        reads them from the table copied with the read options). Raises InvalidOption, naming the option, for a
        value that is not a positive integer, or for only one of minRowsPerTrigger / maxTriggerDelayMs (as
        Paimon's PaimonMicroBatchStream)."""
        options = {**{k.lower(): v for k, v in (table_options or {}).items() if k.lower() in KEYS}, **options}
        values = {}
        for key, name in KEYS.items():
            raw = options.get(key)
            if raw is None:
                continue
            try:
                value = parse_int(str(raw))
            except ValueError:
                value = 0
            if value < 1:
                raise InvalidOption(name, raw, "expected a positive integer", table=table)
            values[key] = value
        if (MIN_ROWS in values) != (MAX_DELAY in values):
            given, missing = (MIN_ROWS, MAX_DELAY) if MIN_ROWS in values else (MAX_DELAY, MIN_ROWS)
            raise InvalidOption(KEYS[given], options[given], f"needs {KEYS[missing]} too (as in Paimon, a minimum of "
                                "rows per batch comes with the longest delay between batches)", table=table)
        return cls(values.get(MAX_FILES), values.get(MAX_BYTES), values.get(MAX_ROWS), values.get(MIN_ROWS),
                   values.get(MAX_DELAY))

    def spark_limit(self):
        """The ReadLimit Spark passes back to latestOffset (getDefaultReadLimit): ReadAllAvailable without limits,
        else one of the limits set (PySpark has no composite limit; the source applies all of its own)."""
        from pyspark.sql.streaming.datasource import (
            ReadAllAvailable,
            ReadMaxBytes,
            ReadMaxFiles,
            ReadMaxRows,
            ReadMinRows,
        )
        if self.max_files is not None:
            return ReadMaxFiles(self.max_files)
        if self.max_rows is not None:
            return ReadMaxRows(self.max_rows)
        if self.max_bytes is not None:
            return ReadMaxBytes(self.max_bytes)
        if self.min_rows is not None:
            return ReadMinRows(self.min_rows)
        return ReadAllAvailable()


@dataclasses.dataclass(frozen=True)
class StreamSplit:
    """One split of a snapshot (module docstring): ``key`` = (partition bytes, bucket); ``split``: the scan's
    split for a full read, None for changes."""
    key: tuple[bytes, int]
    rows: int
    bytes: int
    split: object = None


class Guard:
    """Admission of one batch's splits under ``limits`` (Paimon's PaimonReadLimitGuard)."""

    def __init__(self, limits: ReadLimits, last_trigger_ms: int, may_defer: bool):
        self.limits = limits
        self.files = self.rows = self.bytes = 0
        self.has_capacity = True
        now = int(time.time() * 1000)
        self.may_skip = (may_defer and limits.min_rows is not None
                         and now - last_trigger_ms <= limits.max_delay_ms)

    def admit(self, split: StreamSplit) -> bool:
        """Whether ``split`` joins the batch: the batch is under every max limit before it. Once refused, every
        later split is refused."""
        if not self.has_capacity:
            return False
        lim = self.limits
        self.has_capacity = ((lim.max_files is None or self.files < lim.max_files)
                             and (lim.max_rows is None or self.rows < lim.max_rows)
                             and (lim.max_bytes is None or self.bytes < lim.max_bytes))
        # as Paimon's guard, the refused split counts towards minRows too
        self.files += 1
        self.rows += split.rows
        self.bytes += split.bytes
        if self.may_skip:
            self.may_skip = self.rows < lim.min_rows
        return self.has_capacity

    @property
    def skip_batch(self) -> bool:
        """True when the batch is put off: under minRows while maxTriggerDelayMs has not passed."""
        return self.may_skip


def _ordered(table, splits: list[StreamSplit]) -> list[StreamSplit]:
    """``splits`` by partition path, then bucket (Paimon's StreamHelper); stable, so a bucket's splits keep their
    order."""
    from engine.options import PARTITION_DEFAULT_NAME, PARTITION_LEGACY_NAME
    from engine.paths import TablePaths
    s = table.schema
    opts = s.table_options
    scan = table.scan()
    types = s.types_of(s.partition_keys)
    order = {}
    for partition, bucket in {sp.key for sp in splits}:
        path = TablePaths.partition_dir(s.partition_keys, scan.partition_values(partition), types,
                                        opts.get(PARTITION_DEFAULT_NAME), opts.get(PARTITION_LEGACY_NAME))
        order[(partition, bucket)] = (path, bucket)
    return sorted(splits, key=lambda sp: order[sp.key])


def full_splits(table, snapshot) -> list[StreamSplit]:
    """The splits of a full read of ``snapshot``, in stream order."""
    return _ordered(table, [StreamSplit((sp.partition, sp.bucket), sum(f.row_count for f in sp.files),
                                        sum(f.file_size for f in sp.files), sp) for sp in table.scan().plan(snapshot)])


def change_splits(table, snapshot, *, read_overwrite: bool, normalize: bool) -> list[StreamSplit]:
    """The splits of ``snapshot``'s changes, in stream order; one whole-snapshot split (key None) for normalized
    changes of a table without changelog producer."""
    from engine.changelog.overwrite import follow_up_files
    from engine.meta.snapshot import COMMIT_KIND_OVERWRITE
    from engine.options import CHANGELOG_PRODUCER
    entries = follow_up_files(table, snapshot, read_overwrite=read_overwrite)
    if not entries:
        return []
    groups: dict[tuple[bytes, int], list] = {}
    for e in entries:
        groups.setdefault((e.partition, e.bucket), []).append(e.file)
    whole = (normalize and not table.schema.is_append_only
             and table.schema.table_options.get(CHANGELOG_PRODUCER) == "none"
             and not (read_overwrite and snapshot.commit_kind == COMMIT_KIND_OVERWRITE))
    if whole:
        files = [f for fs in groups.values() for f in fs]
        return [StreamSplit(None, sum(f.row_count for f in files), sum(f.file_size for f in files))]
    out = [StreamSplit(k, sum(f.row_count for f in fs), sum(f.file_size for f in fs)) for k, fs in groups.items()]
    return _ordered(table, out)
