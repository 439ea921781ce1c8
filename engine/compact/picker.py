"""Universal compaction picking, as Paimon picks (paimon-semantics §7.2).

``UniversalPicker.pick(runs)`` takes the sorted runs of one bucket in pick order (``Levels.runs()``) and returns the
``CompactUnit`` to run, or None. Decisions, in order: size amplification (all runs to the max level), size ratio
from one candidate run, then (above the trigger) size ratio from enough runs to get back to the trigger. With
force-up-level-0, an empty pick still takes every level-0 run up.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from engine.compact.levels import SortedRun
from engine.meta.data_file import DataFileMeta
from engine.options import (COMPACTION_SIZE_RATIO, COMPACTION_STOP_TRIGGER, COMPACTION_TRIGGER,
                            FORCE_UP_LEVEL_0, FULL_COMPACTION_DELTA_COMMITS, MAX_SIZE_AMPLIFICATION, NUM_LEVELS,
                            SMALL_FILE_RATIO, TARGET_FILE_SIZE, TableOptions)


@dataclass(frozen=True)
class CompactUnit:
    """Files to compact together and the level their result goes to."""
    output_level: int
    files: tuple[DataFileMeta, ...]

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
        return CompactionSettings(
            trigger=trigger, stop_trigger=trigger + 3 if stop is None else stop,
            num_levels=trigger + 1 if levels is None else levels, max_size_amp=opts.get(MAX_SIZE_AMPLIFICATION),
            size_ratio=opts.get(COMPACTION_SIZE_RATIO), force_up_level0=opts.get(FORCE_UP_LEVEL_0) or needs_lookup,
            small_file_ratio=opts.get(SMALL_FILE_RATIO), target_file_size=opts.get(TARGET_FILE_SIZE),
            full_delta_commits=opts.get(FULL_COMPACTION_DELTA_COMMITS))


class UniversalPicker:
    """Paimon's universal compaction decisions for one bucket whose top level is ``max_level``. Pure: it picks units,
    it never reads or writes files.
    """

    def __init__(self, settings: CompactionSettings, max_level: int):
        self.s = settings
        self.max_level = max_level

    def pick(self, runs: Sequence[SortedRun]) -> CompactUnit | None:
        """The unit universal compaction runs next for these sorted runs, or None."""
        unit = self._pick(list(runs))
        if unit is None and self.s.force_up_level0:
            level0 = sum(1 for r in runs if r.level == 0)
            if level0:
                unit = self._size_ratio(list(runs), level0, forced=True)
        return self._valid(unit)

    def pick_full(self, runs: Sequence[SortedRun]) -> CompactUnit | None:
        """All runs to the max level; None when the bucket already is one max-level run (nothing to rewrite)."""
        runs = list(runs)
        if not runs or (len(runs) == 1 and runs[0].level == self.max_level):
            return None
        return CompactUnit.of_runs(self.max_level, runs)

    # --- Paimon's rules ------------------------------------------------------------------------------
    def _pick(self, runs: list[SortedRun]) -> CompactUnit | None:
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
        for nxt in runs[n:]:
            if candidate * (100.0 + self.s.size_ratio) / 100.0 < nxt.total_size:
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
