"""Read planning pieces that need no SparkSession: split packing and Spark-filter translation."""
from __future__ import annotations

import pytest

pytest.importorskip("pyspark")

from hypothesis import given, strategies as st  # noqa: E402
from pyspark.sql.datasource import (EqualTo, GreaterThan, In, IsNotNull, IsNull, Not,  # noqa: E402
                                    StringStartsWith)

from engine.read.scan import Split  # noqa: E402
from spark_glue.reading import pack_splits, spark_filter_to_terms  # noqa: E402


class _F:
    def __init__(self, size):
        self.file_size = size


def _split(i, sizes):
    return Split(b"", (), i, 4, f"bucket-{i}", tuple(_F(s) for s in sizes))


@given(st.lists(st.lists(st.integers(0, 300), min_size=1, max_size=3), max_size=30), st.integers(1, 500))
def test_pack_splits_keeps_every_split_once_within_target(sizes, target):
    splits = [_split(i, s) for i, s in enumerate(sizes)]
    groups = pack_splits(splits, target, open_cost=10)
    assert sorted(sp.bucket for g in groups for sp in g) == list(range(len(splits)))
    for g in groups:
        total = sum(f.file_size + 10 for sp in g for f in sp.files)
        assert len(g) == 1 or total <= target  # only a lone split may exceed the target


def test_pack_splits_balances_small_splits():
    groups = pack_splits([_split(i, [100]) for i in range(8)], target=440, open_cost=10)
    assert sorted(len(g) for g in groups) == [4, 4]


def test_pack_splits_keeps_the_splits_of_a_partitions_postponed_records_together():
    """postpone.merge-on-read: every bucket split of a partition carries its postponed records; one task reads them
    all (in bucket order) so the postponed files are decoded once, and counted once in the group's size."""
    import dataclasses
    postponed = Split(b"p", (), -2, -2, "bucket-postpone", (_F(300),))
    merged = [dataclasses.replace(_split(i, [10]), partition=b"p", postponed=postponed) for i in range(4)]
    plain = [_split(i, [340]) for i in range(4, 7)]  # groups with room for a bucket split, not for the partition
    groups = pack_splits(merged + plain, target=400, open_cost=10)
    holding = [g for g in groups if any(sp.postponed is not None for sp in g)]
    assert len(holding) == 1 and [sp.bucket for sp in holding[0]] == [0, 1, 2, 3]
    assert sorted(sp.bucket for g in groups for sp in g) == list(range(7))


def test_pack_splits_spreads_a_big_partition_with_postponed_records_over_tasks():
    """A partition's bucket splits that carry its postponed records share a task only while they fit the target
    (the postponed files counted once per task): a big partition (e.g. an unpartitioned table) is not read by one
    task, its buckets still go to several in bucket order."""
    import dataclasses
    postponed = Split(b"p", (), -2, -2, "bucket-postpone", (_F(10),))
    merged = [dataclasses.replace(_split(i, [150]), partition=b"p", postponed=postponed) for i in range(6)]
    groups = pack_splits(merged, target=400, open_cost=10)
    assert len(groups) == 3 and sorted(sp.bucket for g in groups for sp in g) == list(range(6))
    assert sorted([sp.bucket for sp in g] for g in groups) == [[0, 1], [2, 3], [4, 5]]


def test_spark_filters_translate_to_engine_terms():
    assert spark_filter_to_terms(EqualTo(("k",), 5)) == [("k", "=", 5)]
    assert spark_filter_to_terms(GreaterThan(("k",), 5)) == [("k", ">", 5)]
    assert spark_filter_to_terms(In(("k",), (1, None, 2))) == [("k", "in", (1, 2))]
    assert spark_filter_to_terms(Not(EqualTo(("k",), 5))) == [("k", "!=", 5)]
    assert spark_filter_to_terms(IsNull(("k",))) == [("k", "is null", None)]
    # IsNotNull: Spark infers it on join keys, and a pushed filter leaks into the DataFrame's other scans (G1)
    for unusable in (IsNotNull(("k",)), StringStartsWith(("s",), "a"), EqualTo(("a", "b"), 1),
                     EqualTo(("k",), None)):
        assert spark_filter_to_terms(unusable) is None


def test_float_and_timestamp_terms_never_reach_the_engine():
    """Spark's float comparisons are not Paimon's: Spark normalizes -0.0 to 0.0 ('x = 0.0' keeps -0.0) while the
    engine filters with Java's Double.compare ('x = 0.0' drops -0.0, engine.read.predicate), so a pushed float term
    would make the reader drop rows Spark keeps; timestamp literals depend on the session zone."""
    import pyarrow as pa

    from spark_glue.reading import _prunable
    assert not any(_prunable(t) for t in (pa.float32(), pa.float64(), pa.timestamp("us"), pa.binary()))
    assert all(_prunable(t) for t in (pa.int8(), pa.int64(), pa.decimal128(10, 2), pa.string(), pa.bool_(),
                                      pa.date32()))


def test_timestamps_without_an_offset_are_wall_time_in_the_zone():
    """Zone-less time-travel timestamps were read as UTC; they are wall time in the zone given (Spark's session
    time zone, see spark_glue.tables.time_zone), and an explicit offset or epoch millis ignore it."""
    from engine.errors import InvalidOption
    from spark_glue.tables import timestamp_millis

    def ms(value, zone):
        return timestamp_millis("timestampAsOf", value, zone, "db.t")

    july, january, hour = 1719835200000, 1704110400000, 3600_000  # 2024-07-01 / 2024-01-01 12:00 UTC
    assert ms("2024-07-01 12:00:00", "UTC") == ms("2024-07-01T12:00:00", "Etc/UTC") == july
    assert ms("2024-07-01 12:00:00", "America/New_York") == july + 4 * hour  # EDT
    assert ms("2024-01-01 12:00:00", "America/New_York") == january + 5 * hour  # EST
    assert ms("2024-07-01 12:00:00.250", "Asia/Tokyo") == july - 9 * hour + 250
    assert ms("2024-07-01 12:00", "+02:00") == ms("2024-07-01 12:00", "GMT+2") == july - 2 * hour
    assert ms("2024-07-01 12:00", "-5") == ms("2024-07-01 12:00", "UTC-05:00") == july + 5 * hour
    assert ms("2024-07-01T12:00:00+02:00", "America/New_York") == ms("2024-07-01T10:00:00Z", "Asia/Tokyo") \
        == july - 2 * hour
    assert ms(str(july), "Asia/Tokyo") == july
    # Java's short ids, which Spark accepts as session zones (ZoneId.SHORT_IDS); before, they were refused, and
    # so was every Spark write that converts a timestamp in such a session
    assert ms("2024-07-01 12:00", "PST") == ms("2024-07-01 12:00", "America/Los_Angeles") == july + 7 * hour
    assert ms("2024-07-01 12:00", "EST") == july + 5 * hour  # a fixed offset in java.time, no DST
    assert ms("2024-07-01 12:00", "IST") == july - 5 * hour - 30 * 60_000
    assert ms("2024-07-01 12:00", "UT") == july
    with pytest.raises(InvalidOption, match="'Mars/Olympus' for option 'timeZone'"):
        ms("2024-07-01 12:00", "Mars/Olympus")
    with pytest.raises(InvalidOption, match="'yesterday' for option 'timestampAsOf'.*ISO-8601"):
        ms("yesterday", "UTC")


def test_zone_less_session_takes_the_zone_spark_typed_the_timestamps_with(monkeypatch):
    """A session that never set spark.sql.session.timeZone hands write tasks no zone (tables.time_zone is None),
    but Spark types every TIMESTAMP it hands to Python with its session zone: that zone, not the executor's local
    one, gives a TIMESTAMP's wall time for a Paimon TIMESTAMP column. Before, the process's local zone was used
    (here Tokyo: 00:00 the next day instead of New York's 10:00)."""
    import datetime as dt
    import time

    import pyarrow as pa

    from spark_glue.tables import session_time_stamps
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    try:
        instant = dt.datetime(2024, 1, 1, 15, tzinfo=dt.timezone.utc)
        rows = pa.table({"t": pa.array([instant, None], pa.timestamp("us", tz="America/New_York")),
                         "s": pa.array([{"t": instant}], pa.struct([("t", pa.timestamp("us", tz="+02:00"))]))
                         .take([0, 0])})
        target = pa.schema([("t", pa.timestamp("us")), ("s", pa.struct([("t", pa.timestamp("us"))]))])
        assert session_time_stamps(rows, target, None).to_pylist() == [
            {"t": dt.datetime(2024, 1, 1, 10), "s": {"t": dt.datetime(2024, 1, 1, 17)}},
            {"t": None, "s": {"t": dt.datetime(2024, 1, 1, 17)}}]
    finally:
        monkeypatch.undo()
        time.tzset()
