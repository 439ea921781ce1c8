"""Universal compaction picking against hand-worked cases of Paimon's rules (paimon-semantics §7.2)."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.compact.levels import Levels, SortedRun
from engine.compact.picker import CompactionSettings, UniversalPicker
from engine.meta.data_file import DataFileMeta, SimpleStats
from engine.options import TableOptions
from engine.meta import binary_row
from engine.types import DataType

INT = DataType("INT", False)
_n = iter(range(10**6))


def f(size: int, level: int = 0, lo: int = 0, hi: int = 0, seq: int = 0) -> DataFileMeta:
    key = lambda v: binary_row.serialize_row([v], [INT])  # noqa: E731
    return DataFileMeta(f"f{next(_n)}", size, 1, key(lo), key(hi), SimpleStats.EMPTY, SimpleStats.EMPTY, seq, seq, 0,
                        level)


def runs(*spec) -> list[SortedRun]:
    """spec: (level, size) pairs in pick order (level-0 newest first)."""
    return [SortedRun(level, (f(size, level),)) for level, size in spec]


def picker(trigger=5, **kw) -> UniversalPicker:
    s = CompactionSettings(trigger=trigger, num_levels=trigger + 1, **kw)
    return UniversalPicker(s, s.num_levels - 1)


def sizes(unit):
    return [x.file_size for x in unit.files]


def test_defaults_follow_the_trigger():
    s = CompactionSettings.of(TableOptions({}))
    assert (s.trigger, s.stop_trigger, s.num_levels, s.max_size_amp, s.size_ratio) == (5, 8, 6, 200, 1)
    s = CompactionSettings.of(TableOptions({"num-sorted-run.compaction-trigger": "3"}))
    assert (s.stop_trigger, s.num_levels) == (6, 4)
    s = CompactionSettings.of(TableOptions({"num-sorted-run.stop-trigger": "20", "num-levels": "9"}))
    assert (s.stop_trigger, s.num_levels) == (20, 9)
    assert CompactionSettings.of(TableOptions({"merge-engine": "first-row"})).force_up_level0


def test_fewer_runs_than_the_trigger_pick_nothing():
    assert picker().pick(runs((0, 1), (0, 1), (0, 1), (0, 1))) is None


def test_size_amplification_compacts_everything_to_the_max_level():
    # 4 newer runs of 1 against an oldest run of 1: 400% > 200%
    unit = picker().pick(runs((0, 1), (0, 1), (0, 1), (0, 1), (0, 1)))
    assert unit.output_level == 5 and len(unit.files) == 5
    # 100 * (1+1+1+1+100) = 10400 > 200 * 40 -> full
    unit = picker().pick(runs((0, 1), (0, 1), (0, 1), (0, 100), (5, 40)))
    assert unit.output_level == 5 and len(unit.files) == 5


def test_size_ratio_takes_similar_newest_runs_and_stops_before_a_big_high_level():
    # no size amplification (4 * 100 <= 200 * 1000); 1,1,1,1 snowball; level 5 is far bigger -> out = 5 - 1
    unit = picker().pick(runs((0, 1), (0, 1), (0, 1), (0, 1), (5, 1000)))
    assert unit.output_level == 4 and sizes(unit) == [1, 1, 1, 1]


def test_size_ratio_does_not_trigger_when_each_run_is_much_bigger():
    assert picker().pick(runs((0, 1), (0, 10), (0, 100), (0, 1000), (5, 100000))) is None


def test_size_ratio_slack_is_a_percent():
    # 100 * 1.01 = 101 >= 101: absorbed; with size-ratio 0 it is not
    spec = ((0, 100), (0, 101), (3, 100000), (4, 100000), (5, 10**9))
    unit = picker().pick(runs(*spec))
    assert sizes(unit) == [100, 101] and unit.output_level == 2
    assert picker(size_ratio=0).pick(runs(*spec)) is None


def test_more_runs_than_the_trigger_compacts_enough_runs_and_absorbs_level0():
    # 7 runs, trigger 5: start with 7 - 5 + 1 = 3 candidates (1+10+100); once triggered, level-0 runs are taken
    # whatever their size; the level-5 run stops it: output level 4.
    unit = picker().pick(runs((0, 1), (0, 10), (0, 100), (0, 1000), (0, 10000), (0, 100000), (5, 10**12)))
    assert sizes(unit) == [1, 10, 100, 1000, 10000, 100000] and unit.output_level == 4


def test_snowball_stops_at_a_bigger_run_above_level_one():
    unit = picker().pick(runs((0, 1), (0, 1), (2, 1000), (3, 10**5), (4, 10**7), (5, 10**9)))
    # 1 + 1 snowball; the next level-2 run of 1000 is bigger and above level 1 -> stop; out = 2 - 1
    assert sizes(unit) == [1, 1] and unit.output_level == 1


def test_level1_runs_are_absorbed_once_triggered():
    unit = picker(trigger=3).pick(runs((0, 1), (0, 1), (1, 100), (3, 10**6)))
    assert sizes(unit) == [1, 1, 100] and unit.output_level == 2


def test_taking_every_run_goes_to_the_max_level():
    unit = picker().pick(runs((0, 1), (0, 1), (0, 1), (0, 1), (1, 2), (2, 3)))
    assert unit.output_level == 5 and len(unit.files) == 6


def test_force_up_level0_takes_level0_files_up_when_nothing_else_is_picked():
    spec = ((0, 1), (5, 1000))
    assert picker().pick(runs(*spec)) is None
    unit = picker(force_up_level0=True).pick(runs(*spec))
    assert sizes(unit) == [1] and unit.output_level == 4
    assert picker(force_up_level0=True).pick(runs((5, 1000))) is None


def test_a_single_file_already_at_the_output_level_is_not_a_unit():
    p = picker()
    assert p.pick_full(runs((5, 10))) is None
    unit = p.pick_full(runs((0, 1), (5, 10)))
    assert unit.output_level == 5 and len(unit.files) == 2


def test_levels_order_level0_newest_first_and_refuse_overlaps():
    a, b, c = f(1, 0, seq=5), f(1, 0, seq=9), f(1, 0, seq=7)
    lv = Levels([a, b, c, f(5, 2, 0, 4), f(5, 2, 5, 9)], 6, [INT])
    assert [r.files[0] for r in lv.runs()[:3]] == [b, c, a]
    assert [r.level for r in lv.runs()] == [0, 0, 0, 2] and lv.number_of_sorted_runs() == 4
    import pytest
    from engine.errors import CorruptFile
    with pytest.raises(CorruptFile, match="overlapping"):
        Levels([f(5, 1, 0, 5), f(5, 1, 5, 9)], 6, [INT])




@st.composite
def lsm_runs(draw):
    """Sorted runs in pick order: 0..6 level-0 runs, then some distinct levels 1..5, random sizes."""
    level0 = draw(st.integers(0, 6))
    levels = sorted(draw(st.sets(st.integers(1, 5), max_size=5)))
    spec = [(0, draw(st.integers(1, 10**6))) for _ in range(level0)]
    spec += [(lv, draw(st.integers(1, 10**9))) for lv in levels]
    return runs(*spec)


@settings(max_examples=300, deadline=None)
@given(rs=lsm_runs(), trigger=st.integers(2, 6), ratio=st.integers(0, 20), amp=st.integers(50, 400),
       force=st.booleans())
def test_picked_units_keep_the_lsm_order(rs, trigger, ratio, amp, force):
    """Whatever is picked: a prefix of the runs (newest data), written above level 0 and below the first run left
    out, or to the max level when everything is taken; with at least trigger+1 runs something is always picked."""
    p = picker(trigger=trigger, size_ratio=ratio, max_size_amp=amp, force_up_level0=force)
    unit = p.pick(rs)
    if len(rs) > trigger:
        assert unit is not None
    if unit is None:
        return
    n = 0
    files = list(unit.files)
    while files[:len(rs[n].files)] == list(rs[n].files):
        files = files[len(rs[n].files):]
        n += 1
        if not files:
            break
    assert not files, "the unit is not a prefix of whole runs"
    assert unit.output_level >= 1
    if n == len(rs):
        assert unit.output_level == p.max_level
    else:
        assert unit.output_level < rs[n].level


# --- early full compaction, off-peak hours, full-compaction picks (Paimon's EarlyFullCompaction, OffPeakHours,
# CompactStrategy.pickFullCompaction) ------------------------------------------------------------------------
def test_total_size_threshold_turns_a_pick_below_the_trigger_into_a_full_compaction():
    spec = ((0, 10), (0, 10), (5, 100))  # 3 runs: below the trigger, universal alone picks nothing
    assert picker().pick(runs(*spec)) is None
    unit = picker(total_size_threshold=121).pick(runs(*spec))
    assert unit.output_level == 5 and sizes(unit) == [10, 10, 100]
    assert picker(total_size_threshold=120).pick(runs(*spec)) is None  # total 120 is not below 120
    assert picker(total_size_threshold=10**9).pick(runs((5, 100))) is None  # one run: nothing to merge


def test_incremental_size_threshold_counts_only_runs_below_the_max_level():
    spec = ((0, 10), (3, 15), (5, 1000))
    assert picker(incremental_size_threshold=25).pick(runs(*spec)) is None  # 10 + 15 is not above 25
    unit = picker(incremental_size_threshold=24).pick(runs(*spec))
    assert unit.output_level == 5 and sizes(unit) == [10, 15, 1000]


def test_optimization_interval_compares_the_last_full_compaction_with_now():
    spec = ((0, 10), (5, 1000))
    s = CompactionSettings(optimization_interval_ms=60_000)
    due = UniversalPicker(s, 5, now_ms=200_000, last_full_ms=100_000).pick(runs(*spec))
    assert due is not None and due.output_level == 5 and sizes(due) == [10, 1000]
    assert UniversalPicker(s, 5, now_ms=160_000, last_full_ms=100_000).pick(runs(*spec)) is None
    assert UniversalPicker(s, 5, now_ms=0, last_full_ms=None).pick(runs(*spec)) is not None  # never: due


def test_a_picker_reports_full_units_so_the_bucket_records_the_last_full_compaction():
    p = picker(total_size_threshold=10**9)
    rs = runs((0, 1), (5, 2))
    assert p.is_full(p.pick(rs), rs)
    rs = runs((0, 1), (0, 1), (0, 1), (0, 1), (5, 1000))
    unit = picker().pick(rs)
    assert unit.output_level == 4 and not picker().is_full(unit, rs)  # the level-5 run is not in it


@settings(deadline=None)
@given(st.lists(st.integers(1, 1000), min_size=2, max_size=9), st.integers(0, 200), st.integers(0, 200),
       st.integers(0, 23), st.integers(-1, 23), st.integers(-1, 23))
def test_off_peak_hours_add_their_ratio_to_the_size_ratio(sizes_, ratio, extra, hour, start, end):
    spec = [(0, s) for s in sizes_[:-1]] + [(5, sizes_[-1])]
    s = CompactionSettings(size_ratio=ratio, offpeak_start=start, offpeak_end=end, offpeak_ratio=extra)
    off = start != -1 and end != -1 and start != end and (
        start <= hour < end if start <= end else (hour < end or start <= hour))
    expected = UniversalPicker(CompactionSettings(size_ratio=ratio + (extra if off else 0)), 5, hour=hour)
    got = UniversalPicker(s, 5, hour=hour).pick(runs(*spec))
    want = expected.pick(runs(*spec))
    assert (None if got is None else (got.output_level, sizes(got))) == \
        (None if want is None else (want.output_level, sizes(want)))


def test_off_peak_settings_come_from_the_options():
    s = CompactionSettings.of(TableOptions({"compaction.offpeak.start.hour": "22", "compaction.offpeak.end.hour": "6",
                                            "compaction.offpeak-ratio": "30"}))
    assert [s.offpeak_extra_ratio(h) for h in (21, 22, 23, 0, 5, 6, 12)] == [0, 30, 30, 30, 30, 0, 0]
    assert CompactionSettings.of(TableOptions({"compaction.offpeak-ratio": "30"})).offpeak_extra_ratio(3) == 0


def test_full_pick_of_one_top_level_run_rewrites_only_the_files_that_need_it():
    top = runs((5, 10))[0]
    top = SortedRun(5, top.files + (f(20, 5, lo=1, hi=1),))
    assert picker().pick_full([top]) is None
    unit = picker().pick_full([top], rewrite_file=lambda x: x.file_size == 20)
    assert unit.file_rewrite and unit.output_level == 5 and sizes(unit) == [20]
    unit = picker(force_rewrite_all=True).pick_full([top])
    assert unit.file_rewrite and sizes(unit) == [10, 20]
    unit = picker(force_rewrite_all=True).pick_full(runs((0, 1), (5, 10)))
    assert not unit.file_rewrite and unit.output_level == 5 and sizes(unit) == [1, 10]


def test_gentle_lookup_compaction_interval_defaults_to_twice_the_trigger():
    gentle = {"changelog-producer": "lookup", "lookup-compact": "gentle"}
    assert CompactionSettings.of(TableOptions(gentle)).lookup_max_interval == 10
    assert CompactionSettings.of(TableOptions({**gentle, "lookup-compact.max-interval": "7"})).lookup_max_interval == 7
    assert CompactionSettings.of(TableOptions({**gentle, "lookup-compact.max-interval": "2"})).lookup_max_interval == 5
    assert CompactionSettings.of(TableOptions({"lookup-compact": "gentle"})).lookup_max_interval is None  # no lookup
    assert CompactionSettings.of(TableOptions({"changelog-producer": "lookup"})).lookup_max_interval is None
