"""Automatic tags after commits, as Paimon's TagAutoManager (TagAutoCreation + TagTimeExpire) and TagBatchCreation.

``tag.automatic-creation``:
- ``process-time``: each period (``tag.creation-period`` daily / hourly / two-hours, or
  ``tag.creation-period-duration``) gets one tag, named by the period's start (``tag.period-formatter``: daily
  ``yyyy-MM-dd`` / ``yyyyMMdd``; hourly ``yyyy-MM-dd HH`` / ``yyyyMMdd HH`` / ``yyyyMMddHH``; two-hours always
  ``yyyy-MM-dd HH``; a duration always ``yyyyMMddHHmm``). Snapshot times are read in ``sink.process-time-zone``
  (default: the local zone). Snapshots are visited in id order from the one after the newest automatic tag's
  snapshot (or the earliest snapshot): with no automatic tag yet, the first visited snapshot tags the period before
  its own; afterwards a snapshot tags a period once its time minus ``tag.creation-delay`` reaches the end of the
  period after the last tagged one. The tag is named after the period just before the snapshot's -- or, with
  ``tag.automatic-completion``, after the period following the last tagged one, so missed periods are filled, one
  per later snapshot. The tagged snapshot is that first snapshot (it may hold data committed after the period
  ended, as in Paimon). With ``tag.num-retained-max`` the automatic tags (every tag whose name parses in the
  period's format, manual ones named so included) beyond that count are deleted, those of the oldest snapshots
  first; other tags are never deleted by it.
- ``batch``: after each batch commit the latest snapshot is tagged ``tag.batch.customized-name`` or
  ``batch-write-<yyyy-MM-dd of the snapshot>`` (an existing tag of that name is replaced); with
  ``tag.num-retained-max``, ALL tags beyond that count are deleted, oldest snapshots first and, among the tags of
  one snapshot, the oldest tag files first (Paimon's TagBatchCreation counts manual tags too).
- ``watermark`` needs snapshot watermarks, which lakemerge does not write (a commit carries the latest snapshot's
  on); a schema change cannot turn it on (TableOptions), but a table created elsewhere with it (and altered by
  lakemerge) is served as Paimon does: snapshots without a watermark are skipped.

New tags record ``tag.default-time-retained``; then (``tag.time-expire-enabled``, default true) every commit deletes
the tags, automatic or not, whose create time plus their time retained has passed (Paimon's TagTimeExpire).

Progress (the next snapshot to visit, the next period to tag) is kept between commits in this process, per table
branch, as Paimon's TagAutoCreation keeps it in its long-lived commit object: a commit visits only the snapshots
committed since the previous one, and a period whose tag expired (tag retention shorter than the period) is not
tagged again. A process restores it as Paimon restores a new commit object: from the newest automatic tag (its
snapshot + 1 and the period after it) or, with none, from the earliest snapshot -- so a new process on a table whose
automatic tags all expired tags from the earliest snapshot again, as a restarted Paimon job does. Kept progress is
dropped when the period options change or the last visited snapshot is gone or was replaced (rollback, recreated
table). "Now" is ``time.time()``, so tests fake the clock by patching it.
"""
from __future__ import annotations

import datetime as dt
import logging
import re
import threading
import time

from engine.errors import InvalidInput, SnapshotNotFound
from engine.meta.snapshot import BATCH_COMMIT_IDENTIFIER
from engine.options import (SINK_PROCESS_TIME_ZONE, SINK_WATERMARK_TIME_ZONE, TAG_AUTOMATIC_COMPLETION,
                            TAG_AUTOMATIC_CREATION, TAG_BATCH_CUSTOMIZED_NAME, TAG_CREATION_DELAY,
                            TAG_CREATION_PERIOD, TAG_CREATION_PERIOD_DURATION, TAG_DEFAULT_TIME_RETAINED,
                            TAG_NUM_RETAINED_MAX, TAG_PERIOD_FORMATTER, TAG_TIME_EXPIRE_ENABLED)

log = logging.getLogger("lakemerge.maintenance")

_EPOCH = dt.datetime(1970, 1, 1)
_HOUR, _DAY = 3_600_000, 86_400_000
BATCH_TAG_PREFIX = "batch-write-"


def parse_zone_id(text: str) -> dt.tzinfo:
    """A Java ZoneId text as a tzinfo: 'Z', 'UTC', 'GMT', an offset ('+08:00', '-5', 'UTC+8', 'GMT-08:00') or a
    region ('Asia/Shanghai'). Raises ValueError for anything else."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError
    s = text.strip()
    if s in ("Z", "UTC", "GMT", "UT"):
        return dt.timezone.utc
    m = re.fullmatch(r"(?:UTC|GMT|UT)?([+-])(\d{1,2})(?::?(\d{2}))?", s)
    if m:
        hours, minutes = int(m.group(2)), int(m.group(3) or 0)
        if hours > 18 or minutes > 59:
            raise ValueError(f"zone offset {s!r} is out of range")
        delta = dt.timedelta(hours=hours, minutes=minutes)
        return dt.timezone(-delta if m.group(1) == "-" else delta)
    try:
        return ZoneInfo(s)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {s!r}") from None


class TagPeriod:
    """The period of automatic tags and the format of their names (Paimon's TagPeriodHandler)."""

    # Java patterns of the tag names: y M d H m fields, fixed widths, strict values
    _PATTERNS = {("daily", "with_dashes"): "yyyy-MM-dd", ("daily", "without_dashes"): "yyyyMMdd",
                 ("daily", "without_dashes_and_spaces"): "yyyyMMdd",
                 ("hourly", "with_dashes"): "yyyy-MM-dd HH", ("hourly", "without_dashes"): "yyyyMMdd HH",
                 ("hourly", "without_dashes_and_spaces"): "yyyyMMddHH"}
    _FIELDS = {"yyyy": "year", "MM": "month", "dd": "day", "HH": "hour", "mm": "minute"}

    def __init__(self, period_ms: int, pattern: str, daily: bool = False):
        self.period_ms = period_ms
        self.pattern = pattern
        self.daily = daily
        parts = re.split(r"(yyyy|MM|dd|HH|mm)", pattern)
        self._regex = re.compile("".join(
            f"(?P<{self._FIELDS[p]}>[0-9]{{{len(p)}}})" if p in self._FIELDS else re.escape(p) for p in parts))

    @classmethod
    def of(cls, options) -> TagPeriod:
        """The period the TableOptions ``options`` configure (a duration wins over ``tag.creation-period``)."""
        duration = options.get(TAG_CREATION_PERIOD_DURATION)
        if duration is not None:
            return cls(duration, "yyyyMMddHHmm")
        period = options.get(TAG_CREATION_PERIOD)
        if period == "two-hours":
            return cls(2 * _HOUR, "yyyy-MM-dd HH")
        return cls(_DAY if period == "daily" else _HOUR, cls._PATTERNS[period, options.get(TAG_PERIOD_FORMATTER)],
                   daily=period == "daily")

    def name(self, start: dt.datetime) -> str:
        """The tag name of the period starting at ``start``."""
        text = self.pattern
        for token, field in self._FIELDS.items():
            text = text.replace(token, str(getattr(start, field)).zfill(len(token)))
        return text

    def start_of(self, name: str) -> dt.datetime | None:
        """The period start a tag name stands for, None when the name is not in this format (then the tag is not an
        automatic one). A daily name is read up to its first blank, as Paimon does."""
        if self.daily:
            name = name.split(" ")[0]
        m = self._regex.fullmatch(name)
        if m is None:
            return None
        v = {k: int(x) for k, x in m.groupdict().items()}
        try:
            return dt.datetime(v["year"], v["month"], v["day"], v.get("hour", 0), v.get("minute", 0))
        except ValueError:
            return None

    def previous_start(self, time: dt.datetime) -> dt.datetime:
        """The start of the period before the one holding ``time`` (periods count from 1970-01-01 00:00 of the
        local time, as Paimon reads the local date-time as if it were UTC)."""
        ms = (time - _EPOCH) // dt.timedelta(milliseconds=1)
        return _EPOCH + dt.timedelta(milliseconds=(ms // self.period_ms - 1) * self.period_ms)

    def next(self, start: dt.datetime) -> dt.datetime:
        return start + dt.timedelta(milliseconds=self.period_ms)


def _local(millis: int, zone: dt.tzinfo | None) -> dt.datetime:
    """Epoch milliseconds as a naive date-time in ``zone`` (None: the local zone)."""
    secs, ms = divmod(int(millis), 1000)
    local = dt.datetime.fromtimestamp(secs, zone) if zone is not None else dt.datetime.fromtimestamp(secs)
    return local.replace(tzinfo=None) + dt.timedelta(milliseconds=ms)


def maintain_tags(table, commit_identifier: int = BATCH_COMMIT_IDENTIFIER) -> None:
    """After a commit: create the tags ``tag.automatic-creation`` asks for (batch mode: after a batch commit
    only), then expire tags by time when ``tag.time-expire-enabled``. Raises what tag reads and writes raise."""
    opts = table.schema.table_options
    mode = opts.get(TAG_AUTOMATIC_CREATION)
    if mode in ("process-time", "watermark"):
        create_period_tags(table)
    elif mode == "batch" and commit_identifier == BATCH_COMMIT_IDENTIFIER:
        create_batch_tag(table)
    if opts.get(TAG_TIME_EXPIRE_ENABLED):
        expire_tags_by_time(table)


class _Progress:
    """Where automatic tagging of one table branch stands: the next snapshot to visit, the next period start to tag
    (None: none tagged yet), the options it was made under and the time of the last visited snapshot (to notice a
    rollback or a recreated table)."""

    def __init__(self, next_snapshot: int, next_tag: dt.datetime | None, settings: tuple,
                 visited_millis: int | None = None):
        self.next_snapshot, self.next_tag, self.settings = next_snapshot, next_tag, settings
        self.visited_millis = visited_millis


_PROGRESS: dict[str, _Progress] = {}  # snapshot directory of a table branch -> its progress in this process
_PROGRESS_LOCK = threading.Lock()


def _restore(tags, period: TagPeriod, sm, settings: tuple) -> _Progress:
    """Paimon's TagAutoCreation constructor: after the newest automatic tag, else from the earliest snapshot."""
    auto_names = [n for n in tags.names() if period.start_of(n) is not None]
    if not auto_names:
        return _Progress(sm.earliest_id() or 1, None, settings)
    newest = max(auto_names, key=period.start_of)
    return _Progress(tags.get(newest).id + 1, period.next(period.start_of(newest)), settings)


def _kept(key: str, sm, settings: tuple) -> _Progress | None:
    """This process's progress for ``key`` if it still fits the table: same options, and the last visited snapshot
    neither replaced nor rolled back (an expired one is fine: expiration keeps the newest)."""
    kept = _PROGRESS.get(key)
    if kept is None or kept.settings != settings:
        return None
    visited = kept.next_snapshot - 1
    if kept.visited_millis is None:
        return kept
    latest = sm.latest_id()
    if latest is None or latest < visited:
        return None
    if sm.exists(visited) and sm.snapshot(visited).time_millis != kept.visited_millis:
        return None
    return kept


def create_period_tags(table) -> list[str]:
    """Paimon's TagAutoCreation.run for process-time (or watermark) mode, see the module docstring. Returns the
    names of the tags created. Raises InvalidInput when a snapshot to tag already has an automatic tag (Paimon's
    TagManager refuses that too)."""
    from engine.maintenance.tags import TagManager
    opts = table.schema.table_options
    period, tags, sm = TagPeriod.of(opts), TagManager(table), table.snapshot_manager
    delay = dt.timedelta(milliseconds=opts.get(TAG_CREATION_DELAY))
    watermark = opts.get(TAG_AUTOMATIC_CREATION) == "watermark"
    zone = opts.get(SINK_WATERMARK_TIME_ZONE) if watermark else opts.get(SINK_PROCESS_TIME_ZONE)
    settings = (period.period_ms, period.pattern, watermark, str(zone), delay, opts.get(TAG_AUTOMATIC_COMPLETION))
    key = table.paths.snapshot_dir
    with _PROGRESS_LOCK:
        progress = _kept(key, sm, settings) or _restore(tags, period, sm, settings)
        _PROGRESS[key] = progress
        try:
            return _run(table, tags, period, sm, progress, delay, watermark, zone)
        except BaseException:
            _PROGRESS.pop(key, None)  # a half-done run: restore from the tags next time
            raise


def _run(table, tags, period: TagPeriod, sm, progress: _Progress, delay, watermark: bool, zone) -> list[str]:
    """Visit the snapshots from ``progress`` on, creating tags and advancing ``progress``."""
    opts = table.schema.table_options
    next_snapshot, next_tag = progress.next_snapshot, progress.next_tag
    created = []
    latest = sm.latest_id()
    while latest is not None and next_snapshot <= latest:
        if not sm.exists(next_snapshot):  # expired meanwhile: go on from the earliest
            earliest = sm.earliest_id()
            if earliest is None or earliest <= next_snapshot:
                break
            next_snapshot = earliest
            continue
        try:
            snap = sm.snapshot(next_snapshot)
        except SnapshotNotFound:
            continue  # expired since the check above: go on from the earliest
        next_snapshot += 1
        progress.next_snapshot, progress.visited_millis = next_snapshot, snap.time_millis
        millis = snap.watermark if watermark else snap.time_millis
        if millis is None or millis == -(1 << 63):  # no watermark: not a point in time
            continue
        at = _local(millis, zone)
        if next_tag is not None and at - delay < period.next(next_tag):
            continue
        this_tag = next_tag if opts.get(TAG_AUTOMATIC_COMPLETION) and next_tag is not None \
            else period.previous_start(at)
        name = period.name(this_tag)
        if name not in tags.names():  # an existing tag of that name is kept, as Paimon's ignoreIfExists
            check_no_auto_tag(table, name, snap.id)
            try:
                tags.create_of_live(name, snap, opts.get(TAG_DEFAULT_TIME_RETAINED), automatic=True)
                created.append(name)
            except SnapshotNotFound:
                continue  # expired while tagged (the tag is withdrawn): tag this period on a later snapshot
            except InvalidInput:
                if name not in tags.names():
                    raise  # not a concurrent writer having created it first
        next_tag = progress.next_tag = period.next(this_tag)
        _retain_auto_tags(table, tags, period, opts.get(TAG_NUM_RETAINED_MAX))
    return created


def check_no_auto_tag(table, name: str, snapshot_id: int) -> None:
    """Paimon's TagManager.validateNoAutoTag: while process-time or watermark tags are on, a tag named in their
    format may not go on a snapshot that already has such a tag. Raises InvalidInput."""
    from engine.maintenance.tags import TagManager
    opts = table.schema.table_options
    if opts.get(TAG_AUTOMATIC_CREATION) not in ("process-time", "watermark"):
        return
    period = TagPeriod.of(opts)
    if period.start_of(name) is None:
        return
    others = sorted(n for n, sid in _auto_tags(TagManager(table), period).items() if sid == snapshot_id)
    if others:
        raise InvalidInput(f"snapshot {snapshot_id} is already auto-tagged with {others}; cannot tag it as "
                           f"{name!r}", table=table.name)


def _auto_tags(tags, period: TagPeriod) -> dict[str, int]:
    """Automatic tag name -> its snapshot id (tags removed while listing are skipped)."""
    from engine.errors import TagNotFound
    out = {}
    for name in tags.names():
        if period.start_of(name) is None:
            continue
        try:
            out[name] = tags.get(name).id
        except TagNotFound:
            continue
    return out


def _retain_auto_tags(table, tags, period: TagPeriod, keep: int | None) -> None:
    """Delete the automatic tags beyond ``keep``, those of the oldest snapshots first."""
    from engine.maintenance.tags import delete_tag
    if keep is None:
        return
    auto = _auto_tags(tags, period)
    for name in sorted(auto, key=lambda n: auto[n])[:max(0, len(auto) - keep)]:
        log.info("table %s: deleting tag %s, more than tag.num-retained-max=%d automatic tags", table.name, name,
                 keep)
        delete_tag(table, name)


def create_batch_tag(table) -> str | None:
    """Paimon's TagBatchCreation.createTag: tag the latest snapshot (replacing a tag of the same name), then apply
    ``tag.num-retained-max`` to all tags. Returns the tag name, None without snapshots."""
    from engine.maintenance.tags import TagManager, delete_tag
    from engine.errors import TagNotFound
    opts = table.schema.table_options
    snap = table.snapshot_manager.latest()
    if snap is None:
        return None
    name = opts.get(TAG_BATCH_CUSTOMIZED_NAME) or \
        BATCH_TAG_PREFIX + _local(snap.time_millis, opts.get(SINK_PROCESS_TIME_ZONE)).strftime("%Y-%m-%d")
    tags = TagManager(table)
    try:
        delete_tag(table, name)
    except TagNotFound:
        pass
    tags.create(name, snap, opts.get(TAG_DEFAULT_TIME_RETAINED), automatic=True)
    keep = opts.get(TAG_NUM_RETAINED_MAX)
    if keep is not None:
        by_snapshot = sorted(tags.all().items(), key=lambda item: (item[1].id, _written_millis(tags, item[0])))
        for old, _ in by_snapshot[:max(0, len(by_snapshot) - keep)]:
            log.info("table %s: deleting tag %s, more than tag.num-retained-max=%d tags", table.name, old, keep)
            delete_tag(table, old)
    return name


def _written_millis(tags, name: str) -> int:
    """When tag ``name``'s file was written (Paimon's TagManager.sortTagsOfOneSnapshot orders a snapshot's tags so);
    0 for a tag deleted meanwhile."""
    try:
        return tags.io.modified_millis(tags.path(name))
    except FileNotFoundError:
        return 0


def expire_tags_by_time(table, now: dt.datetime | None = None) -> list[str]:
    """Paimon's TagTimeExpire.expire: delete every tag (automatic or manual) that records a create time and a time
    retained whose sum is before ``now`` (local time; default now). Returns the deleted names."""
    from engine.errors import TagNotFound
    from engine.maintenance.tags import TagManager, delete_tag
    now = dt.datetime.fromtimestamp(time.time()) if now is None else now
    tags, expired = TagManager(table), []
    for name in tags.names():
        try:
            created, retained_ms = tags.retention(name)
        except TagNotFound:
            continue
        if created is None or retained_ms is None or not now > created + dt.timedelta(milliseconds=retained_ms):
            continue
        log.info("table %s: deleting tag %s, created %s and retained for %d ms", table.name, name, created,
                 retained_ms)
        delete_tag(table, name)
        expired.append(name)
    return expired
