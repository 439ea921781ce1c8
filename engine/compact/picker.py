"""Universal compaction picking, as Paimon picks (paimon-semantics §7.2).

``UniversalPicker.pick(runs)`` takes the sorted runs of one bucket in pick order (``Levels.runs()``) and returns the
``CompactUnit`` to run, or None. Decisions, in order: early full compaction (compaction.optimization-interval,
compaction.total-size-threshold, compaction.incremental-size-threshold: Paimon's EarlyFullCompaction), size
amplification (all runs to the max level), size ratio from one candidate run (compaction.size-ratio, plus
compaction.offpeak-ratio during off-peak hours), then (above the trigger) size ratio from enough runs to get back to
the trigger. With force-up-level-0, an empty pick still takes every level-0 run up.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence
import time

from engine.compact.levels import SortedRun
from engine.meta.data_file import DataFileMeta
from engine.options import (COMPACTION_SIZE_RATIO, COMPACTION_STOP_TRIGGER, COMPACTION_TRIGGER,
                            FORCE_REWRITE_ALL_FILES, FORCE_UP_LEVEL_0, FULL_COMPACTION_DELTA_COMMITS,
                            INCREMENTAL_SIZE_THRESHOLD, LOOKUP_COMPACT, LOOKUP_COMPACT_MAX_INTERVAL,
                            MAX_SIZE_AMPLIFICATION, NUM_LEVELS, OFFPEAK_END_HOUR, OFFPEAK_RATIO, OFFPEAK_START_HOUR,
                            OPTIMIZATION_INTERVAL, SMALL_FILE_RATIO, TARGET_FILE_SIZE, TOTAL_SIZE_THRESHOLD,
                            TableOptions)


@dataclass(frozen=True)
class CompactUnit:
    """Files to compact together and the level their result goes to. ``file_rewrite``: each file is rewritten on
    its own at its level (Paimon's FileRewriteCompactTask: a full compaction of a bucket that is one top-level run,
    for files with expired records, deletion vectors, or compaction.force-rewrite-all-files)."""
    output_level: int
    files: tuple[DataFileMeta, ...]
    file_rewrite: bool = False

    @staticmethod
    def of_runs(output_level: int, runs: Sequence[SortedRun]) -> "CompactUnit":
        """The unit compacting every file of ``runs`` to ``output_level``."""
        return CompactUnit(output_level, tuple(f for r in runs for f in r.files))


@dataclass(frozen=True)
class CompactionSettings:
    """The compaction options of a table, with Paimon's derived defaults."""
    trigger: int = 5
    stop_trigger: int = 8
    num_levels: int = 6
    max_size_amp: int = 200
    size_ratio: int = 1
    force_up_level0: bool = False
    small_file_ratio: float = 0.7
    target_file_size: int = 128 << 20
    full_delta_commits: int | None = None
    force_rewrite_all: bool = False
    total_size_threshold: int | None = None
    incremental_size_threshold: int | None = None
    optimization_interval_ms: int | None = None
    offpeak_start: int = -1
    offpeak_end: int = -1
    offpeak_ratio: int = 0
    lookup_max_interval: int | None = None  # gentle lookup compaction: forced level-0 picks every N empty picks

    @property
    def early_full(self) -> bool:
        """True when an option can turn a pick into a full compaction (Paimon's EarlyFullCompaction)."""
        return (self.total_size_threshold is not None or self.incremental_size_threshold is not None
                or self.optimization_interval_ms is not None)

    def offpeak_extra_ratio(self, hour: int) -> int:
        """compaction.offpeak-ratio when local ``hour`` is off-peak ([start, end), wrapping past midnight), else 0;
        0 when off-peak hours are disabled (either hour -1, or start == end), as Paimon's OffPeakHours."""
        start, end = self.offpeak_start, self.offpeak_end
        if start == -1 or end == -1 or start == end:
            return 0
        off = start <= hour < end if start <= end else (hour < end or start <= hour)
        return self.offpeak_ratio if off else 0

    @staticmethod
    def of(opts: TableOptions) -> "CompactionSettings":
        """The settings of a table's options with Paimon's derived defaults: stop trigger = trigger + 3, levels =
        trigger + 1, and level 0 always compacted up when reads need lookups (first-row, changelog-producer lookup,
        deletion vectors, force-lookup).
        """
        trigger = opts.get(COMPACTION_TRIGGER)
        stop = opts.get(COMPACTION_STOP_TRIGGER)
        levels = opts.get(NUM_LEVELS)
        needs_lookup = opts.merge_engine == "first-row" or opts.lookup_compaction
        gentle = None
        if needs_lookup and opts.get(LOOKUP_COMPACT) == "gentle":  # CoreOptions.lookupCompactMaxInterval
            interval = opts.get(LOOKUP_COMPACT_MAX_INTERVAL)
            gentle = max(trigger, 2 * trigger if interval is None else interval)
        return CompactionSettings(
            trigger=trigger, stop_trigger=trigger + 3 if stop is None else stop,
            num_levels=trigger + 1 if levels is None else levels, max_size_amp=opts.get(MAX_SIZE_AMPLIFICATION),
            size_ratio=opts.get(COMPACTION_SIZE_RATIO), force_up_level0=opts.get(FORCE_UP_LEVEL_0) or needs_lookup,
            small_file_ratio=opts.get(SMALL_FILE_RATIO), target_file_size=opts.get(TARGET_FILE_SIZE),
            full_delta_commits=opts.get(FULL_COMPACTION_DELTA_COMMITS),
            force_rewrite_all=opts.get(FORCE_REWRITE_ALL_FILES), total_size_threshold=opts.get(TOTAL_SIZE_THRESHOLD),
            incremental_size_threshold=opts.get(INCREMENTAL_SIZE_THRESHOLD),
            optimization_interval_ms=opts.get(OPTIMIZATION_INTERVAL), offpeak_start=opts.get(OFFPEAK_START_HOUR),
            offpeak_end=opts.get(OFFPEAK_END_HOUR), offpeak_ratio=opts.get(OFFPEAK_RATIO),
            lookup_max_interval=gentle)


class UniversalPicker:
    """Paimon's universal compaction decisions for one bucket whose top level is ``max_level``. Pure: it picks units,
    it never reads or writes files. ``hour`` (local hour for off-peak hours, default now), ``now_ms`` (default now)
    and ``last_full_ms`` (when the bucket was last fully compacted, None if unknown: see ``last_full_compaction``)
    feed the options that depend on them.
    """

    def __init__(self, settings: CompactionSettings, max_level: int, *, hour: int | None = None,
                 now_ms: int | None = None, last_full_ms: int | None = None):
        self.s = settings
        self.max_level = max_level
        self.hour = time.localtime().tm_hour if hour is None else hour
        self.now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        self.last_full_ms = last_full_ms

    def pick(self, runs: Sequence[SortedRun], *, force_level0: bool | None = None) -> CompactUnit | None:
        """The unit universal compaction runs next for these sorted runs, or None. ``force_level0`` (default
        the settings' force-up-level-0): when nothing else is picked, take every level-0 run up."""
        unit = self._pick(list(runs))
        force = self.s.force_up_level0 if force_level0 is None else force_level0
        if unit is None and force:
            level0 = sum(1 for r in runs if r.level == 0)
            if level0:
                unit = self._size_ratio(list(runs), level0, forced=True)
        return self._valid(unit)

    def pick_full(self, runs: Sequence[SortedRun], rewrite_file=None) -> CompactUnit | None:
        """All runs to the max level. When the bucket already is one max-level run, a ``file_rewrite`` unit of its
        files that must still be rewritten: all of them with compaction.force-rewrite-all-files, else those for
        which ``rewrite_file(file)`` is true (expired records, deletion vectors); None when there are none
        (Paimon's CompactStrategy.pickFullCompaction)."""
        runs = list(runs)
        if not runs:
            return None
        if len(runs) == 1 and runs[0].level == self.max_level:
            files = tuple(f for f in runs[0].files
                          if self.s.force_rewrite_all or (rewrite_file is not None and rewrite_file(f)))
            return CompactUnit(self.max_level, files, file_rewrite=True) if files else None
        return CompactUnit.of_runs(self.max_level, runs)

    def is_full(self, unit: CompactUnit | None, runs: Sequence[SortedRun]) -> bool:
        """True when ``unit`` (a normal pick) takes every run to the max level: Paimon then records the time of
        the last full compaction (compaction.optimization-interval)."""
        return unit is not None and unit.output_level == self.max_level \
            and len(unit.files) == sum(len(r.files) for r in runs)

    # --- Paimon's rules ------------------------------------------------------------------------------
    def _pick(self, runs: list[SortedRun]) -> CompactUnit | None:
        if self.s.early_full:
            unit = self._early_full(runs)
            if unit is not None:
                return unit
        if len(runs) >= self.s.trigger:
            unit = self._size_amplification(runs)
            if unit is not None:
                return unit
            unit = self._size_ratio(runs, 1, forced=False)
            if unit is not None:
                return unit
        if len(runs) > self.s.trigger:
            return self._size_ratio(runs, len(runs) - self.s.trigger + 1, forced=False)
        return None

    def _early_full(self, runs: list[SortedRun]) -> CompactUnit | None:
        """Paimon's EarlyFullCompaction: all runs to the max level when the last full compaction is older than
        compaction.optimization-interval (or unknown), the runs total less than compaction.total-size-threshold,
        or the runs below the max level total more than compaction.incremental-size-threshold."""
        if len(runs) <= 1:
            return None
        interval = self.s.optimization_interval_ms
        if interval is not None and (self.last_full_ms is None or self.now_ms - self.last_full_ms > interval):
            return CompactUnit.of_runs(self.max_level, runs)
        total = self.s.total_size_threshold
        if total is not None and sum(r.total_size for r in runs) < total:
            return CompactUnit.of_runs(self.max_level, runs)
        incremental = self.s.incremental_size_threshold
        if incremental is not None and sum(r.total_size for r in runs if r.level != self.max_level) > incremental:
            return CompactUnit.of_runs(self.max_level, runs)
        return None

    def _size_amplification(self, runs: list[SortedRun]) -> CompactUnit | None:
        candidate = sum(r.total_size for r in runs[:-1])
        earliest = runs[-1].total_size
        if candidate * 100 > self.s.max_size_amp * earliest:
            return CompactUnit.of_runs(self.max_level, runs)
        return None

    def _size_ratio(self, runs: list[SortedRun], n: int, forced: bool) -> CompactUnit | None:
        n = min(n, len(runs))
        candidate = sum(r.total_size for r in runs[:n])
        triggered = forced or n > 1
        ratio = self.s.size_ratio + self.s.offpeak_extra_ratio(self.hour)
        for nxt in runs[n:]:
            if candidate * (100.0 + ratio) / 100.0 < nxt.total_size:
                if not triggered or nxt.level > 1:
                    break
            candidate += nxt.total_size
            n += 1
            triggered = True
        return self._unit(runs, n) if triggered else None

    def _unit(self, runs: list[SortedRun], n: int) -> CompactUnit:
        out = self.max_level if n == len(runs) else max(0, runs[n].level - 1)
        if out == 0:  # never write level 0: extend to the next run above level 0
            for run in runs[n:]:
                n += 1
                if run.level != 0:
                    out = run.level
                    break
        if n == len(runs):
            out = self.max_level
        return CompactUnit.of_runs(out, runs[:n])

    @staticmethod
    def _valid(unit: CompactUnit | None) -> CompactUnit | None:
        if unit is None or not unit.files:
            return None
        if len(unit.files) == 1 and unit.files[0].level == unit.output_level:
            return None
        return unit
