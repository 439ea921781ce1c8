"""Partition expiration (``partition.expiration-time``), as Paimon's NormalPartitionExpire runs it after commits.

Strategies (``partition.expiration-strategy``):
- ``values-time`` (default): a partition expires when the time read from its values is before ``now -
  partition.expiration-time`` (local wall-clock time, as Java's LocalDateTime.now()). The text is the first
  partition value, or ``partition.timestamp-pattern`` with ``$<column>`` replaced by the values (longer column names
  first); it is parsed with ``partition.timestamp-formatter`` (a Java DateTimeFormatter pattern; letters y u M d H m
  s S and quoted literals are supported) or, without one, as ``yyyy-M-d[ H:m:s[.fraction]]``; a value that does not
  parse (or a null) never expires, as in Paimon (which logs a warning). Values are rendered as Paimon's internal
  ``toString``: a DATE partition column is its day number, so it needs ``update-time``.
- ``update-time``: a partition expires when its newest live file was created before ``now - expiration-time``.

Expired partitions (at most ``partition.expiration-max-num``, in the order of their joined values) are dropped with
engine.maintenance.partitions.drop_partitions, ``partition.expiration-batch-size`` per OVERWRITE snapshot.

The check interval (``partition.expiration-check-interval``) is kept per table path in this process, as Paimon keeps
it in a commit object: the first time a process sees a table its last check is set to a random point within one
interval before now (Paimon's guard against short jobs never expiring, which also means a single short job does not
expire unless the interval is 0 or ``end-input.check-partition-expire`` is set and the commit has the batch
identifier); after that a check runs when the interval has passed since the last one.
"""
from __future__ import annotations

import datetime as dt
import logging
import os
import random
import re
import threading

from engine.errors import InvalidOption
from engine.meta.snapshot import BATCH_COMMIT_IDENTIFIER
from engine.options import (END_INPUT_CHECK_PARTITION_EXPIRE, PARTITION_DEFAULT_NAME, PARTITION_EXPIRATION_BATCH_SIZE,
                            PARTITION_EXPIRATION_CHECK_INTERVAL, PARTITION_EXPIRATION_MAX_NUM,
                            PARTITION_EXPIRATION_STRATEGY, PARTITION_EXPIRATION_TIME, PARTITION_TIMESTAMP_FORMATTER,
                            PARTITION_TIMESTAMP_PATTERN)
from engine.paths import partition_value_text

log = logging.getLogger("lakemerge.maintenance")

_last_check: dict[str, dt.datetime] = {}
_lock = threading.Lock()

_DEFAULT = re.compile(r"(\d{1,10})-(\d{1,2})-(\d{1,2})(?: (\d{1,2}):(\d{1,2}):(\d{1,2})(?:\.(\d{1,9}))?)?")
_JAVA_LETTERS = {"y": "%Y", "u": "%Y", "M": "%m", "d": "%d", "H": "%H", "m": "%M", "s": "%S", "S": "%f"}


def java_pattern_to_strptime(pattern: str) -> str:
    """A Java DateTimeFormatter pattern (``yyyyMMdd``, ``yyyy-MM-dd HH:mm:ss``, ``yyyy-MM-dd'T'HH``) as a strptime
    format. Raises ValueError for a pattern letter other than y u M d H m s S, or M d H m s repeated more than
    twice (a text month, or a width Java refuses)."""
    return _compile(pattern)[0]


def _compile(pattern: str) -> tuple[str, re.Pattern]:
    """(strptime format, regex of the digit widths Java's parser accepts) of a Java pattern: ``yy`` two digits,
    ``y``/``yyy``/``yyyy`` at least that many; a doubled letter (``MM``, ``dd``, ``HH``...) exactly two digits, a
    single one one or more; ``S``... exactly as many fraction digits as letters."""
    out, rx, i = [], [], 0
    while i < len(pattern):
        c = pattern[i]
        if c == "'":
            end = pattern.find("'", i + 1)
            if end < 0:
                raise ValueError("unterminated quote")
            literal = "'" if end == i + 1 else pattern[i + 1:end]
            out.append(literal.replace("%", "%%"))
            rx.append(re.escape(literal))
            i = end + 1
            continue
        j = i
        while j < len(pattern) and pattern[j] == c:
            j += 1
        n = j - i
        if c.isalpha():
            if c not in _JAVA_LETTERS:
                raise ValueError(f"pattern letter {c!r} is not supported")
            if c in "yu":
                out.append("%y" if n == 2 else "%Y")
                rx.append(r"\d{2}" if n == 2 else rf"\d{{{n},}}")
            elif c == "S":
                out.append("%f")
                rx.append(rf"\d{{{n}}}")
            else:
                if n > 2:
                    raise ValueError(f"{c * n!r} is not supported (a text or over-wide field)")
                out.append(_JAVA_LETTERS[c])
                rx.append(r"\d{2}" if n == 2 else r"\d+")
        else:
            out.append((c * n).replace("%", "%%"))
            rx.append(re.escape(c * n))
        i = j
    return "".join(out), re.compile("".join(rx))


def parse_partition_time(text: str, formatter: str | None) -> dt.datetime:
    """Paimon's PartitionTimeExtractor.toLocalDateTime: ``text`` as a date-time with ``formatter`` (a Java pattern;
    a date alone is midnight), or by the default ``yyyy-M-d[ H:m:s[.fraction]]`` (lenient: out-of-range fields
    roll over). Raises ValueError."""
    if formatter is not None:
        fmt, widths = _compile(formatter)
        if widths.fullmatch(text) is None:  # Java's field widths: '2024-1-5' is no 'yyyy-MM-dd' date
            raise ValueError(f"{text!r} does not have the digits of pattern {formatter!r}")
        return dt.datetime.strptime(text, fmt)
    m = _DEFAULT.fullmatch(text)
    if m is None:
        raise ValueError(f"{text!r} is not a date or date-time")
    y, mo, d, h, mi, s, frac = (int(g or 0) if i < 6 else g for i, g in enumerate(m.groups()))
    micros = int((frac or "0").ljust(9, "0")[:6])
    # ResolverStyle.LENIENT, as Paimon's default formatters: out-of-range fields roll over ('2024-02-30' is March 1,
    # month 13 is January of the next year, hour 24 the next day)
    year, month = y + (mo - 1) // 12, (mo - 1) % 12 + 1
    return dt.datetime(year, month, 1) + dt.timedelta(days=d - 1, hours=h, minutes=mi, seconds=s,
                                                      microseconds=micros)


def partition_time_text(keys, texts, pattern: str | None) -> str:
    """The time text of a partition: its first value, or ``pattern`` with ``$<key>`` replaced by the key's value
    (longer keys first, so ``$dt`` does not match inside ``$dt1``)."""
    if pattern is None:
        return texts[0]
    order = sorted(range(len(keys)), key=lambda i: -len(keys[i]))
    out, i = [], 0
    while i < len(pattern):
        if pattern[i] == "$":
            hit = next((k for k in order if pattern.startswith(keys[k], i + 1)), None)
            if hit is not None:
                out.append(texts[hit])
                i += 1 + len(keys[hit])
                continue
        out.append(pattern[i])
        i += 1
    return "".join(out)


def expired_partitions(table, now: dt.datetime | None = None) -> list[tuple]:
    """The partition values (tuples in partition-key order) of the latest snapshot that expire at local time ``now``
    (default: now), sorted by their joined text and cut to ``partition.expiration-max-num``; empty when
    ``partition.expiration-time`` is unset or the table is not partitioned. Raises InvalidOption for an unknown
    strategy or an unsupported formatter, CorruptFile."""
    opts = table.schema.table_options
    ttl = opts.get(PARTITION_EXPIRATION_TIME)
    keys = table.schema.partition_keys
    if ttl is None or not keys:
        return []
    now = dt.datetime.now() if now is None else now
    limit = now - dt.timedelta(milliseconds=ttl)
    strategy = opts.get(PARTITION_EXPIRATION_STRATEGY)
    formatter, pattern = opts.get(PARTITION_TIMESTAMP_FORMATTER), opts.get(PARTITION_TIMESTAMP_PATTERN)
    if strategy == "values-time" and formatter is not None:
        try:
            java_pattern_to_strptime(formatter)
        except ValueError as e:
            raise InvalidOption(PARTITION_TIMESTAMP_FORMATTER, formatter, str(e), table=table.name) from None
    snap = table.snapshot_manager.latest()
    if snap is None:
        return []
    scan = table.scan()
    newest: dict[bytes, int | None] = {}
    for e in table.manifests.live_entries(snap):
        created = e.file.creation_time_millis
        old = newest.get(e.partition, -1)
        newest[e.partition] = None if created is None or old is None else max(old, created)
    types = table.schema.types_of(keys)
    default = opts.get(PARTITION_DEFAULT_NAME)
    out = []
    for partition, created in newest.items():
        values = scan.partition_values(partition)
        texts = [partition_value_text(v, t, default) for v, t in zip(values, types)]
        if strategy == "update-time":
            # _CREATION_TIME is local wall-clock time stored as if it were UTC epoch millis
            local_limit = int(limit.replace(tzinfo=dt.timezone.utc).timestamp() * 1000)
            expired = created is not None and local_limit > created
        else:
            try:
                expired = limit > parse_partition_time(
                    partition_time_text(keys, texts, pattern), formatter)
            except ValueError:
                log.warning("table %s: no date-time in partition %s (partition.timestamp-formatter / "
                            "partition.timestamp-pattern); it does not expire", table.name, dict(zip(keys, texts)))
                expired = False
        if expired:
            out.append((",".join(texts), values))
    out.sort(key=lambda x: x[0])
    return [values for _, values in out[:opts.get(PARTITION_EXPIRATION_MAX_NUM)]]


def expire_partitions(table, now: dt.datetime | None = None) -> list[dict]:
    """Drop the partitions ``expired_partitions`` names, ``partition.expiration-batch-size`` per OVERWRITE snapshot
    (default: all in one); returns them as dicts of partition column -> value. Ignores the check interval."""
    from engine.maintenance.partitions import drop_partitions
    expired = [dict(zip(table.schema.partition_keys, v)) for v in expired_partitions(table, now)]
    if not expired:
        return []
    log.info("table %s: expiring partitions %s", table.name, expired)
    size = table.schema.table_options.get(PARTITION_EXPIRATION_BATCH_SIZE) or len(expired)
    for i in range(0, len(expired), size):
        drop_partitions(table, expired[i:i + size])
    return expired


def expire_partitions_if_due(table, commit_identifier: int = BATCH_COMMIT_IDENTIFIER,
                             now: dt.datetime | None = None) -> list[dict] | None:
    """After a commit: ``expire_partitions`` when the check interval has passed for this table in this process (see
    the module docstring), the interval is 0, or ``end-input.check-partition-expire`` is set and
    ``commit_identifier`` is the batch identifier; None when no check was due or expiration is not configured."""
    opts = table.schema.table_options
    if opts.get(PARTITION_EXPIRATION_TIME) is None or not table.schema.partition_keys:
        return None
    now = dt.datetime.now() if now is None else now
    interval = dt.timedelta(milliseconds=opts.get(PARTITION_EXPIRATION_CHECK_INTERVAL))
    key = os.path.realpath(table.paths.meta_root)  # main and each branch check on their own
    with _lock:
        last = _last_check.get(key)
        if last is None:
            seconds = int(interval.total_seconds())
            last = _last_check[key] = now - dt.timedelta(seconds=random.randrange(seconds) if seconds > 0 else 0)
        due = (not interval or now > last + interval
               or (opts.get(END_INPUT_CHECK_PARTITION_EXPIRE) and commit_identifier == BATCH_COMMIT_IDENTIFIER))
    if not due:
        return None
    expired = expire_partitions(table, now)
    with _lock:
        _last_check[key] = now  # after the check ran, as Paimon: a failed check is retried at the next commit
    return expired
