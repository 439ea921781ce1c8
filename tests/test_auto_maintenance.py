"""Maintenance after commits (engine.maintenance.auto), partition expiration and Table.drop_partitions."""
from __future__ import annotations

import datetime as dt
import logging
import os
import time

import pyarrow as pa
import pytest

from engine import Catalog
from engine.dynamic_bucket.index_files import read_index_manifest
from engine.errors import InvalidInput, InvalidOption
from engine.maintenance import partition_expire
from engine.maintenance.orphans import referenced_files
from engine.maintenance.partition_expire import (expire_partitions_if_due, java_pattern_to_strptime,
                                                 parse_partition_time, partition_time_text)
from engine.meta.snapshot import BATCH_COMMIT_IDENTIFIER
from engine.options import TableOptions

SCHEMA = pa.schema([("dt", pa.string()), ("id", pa.int64()), ("v", pa.string())])
NO_COMPACTION = {"num-sorted-run.compaction-trigger": "100"}  # one snapshot per write


@pytest.fixture
def cat(tmp_path):
    c = Catalog(str(tmp_path / "wh"))
    c.create_database("db")
    return c


def _pk(cat, options=None, name="db.t", partition_keys=("dt",)):
    return cat.create_table(name, SCHEMA, primary_key=["dt", "id"], partition_keys=list(partition_keys),
                            options={"bucket": "1", **(options or {})})


def rows(dts, ids=None, tag="v"):
    ids = list(range(len(dts))) if ids is None else ids
    return pa.table({"dt": dts, "id": pa.array(ids, pa.int64()), "v": [f"{tag}{i}" for i in ids]}, schema=SCHEMA)


def state(t, sid=None):
    return sorted((r["dt"], r["id"], r["v"]) for r in t.read(sid).to_pylist())


def day(k: int, fmt="%Y-%m-%d") -> str:
    return (dt.date.today() - dt.timedelta(days=k)).strftime(fmt)


# --- snapshot expiration after commits -----------------------------------------------------------------------
def test_commits_expire_snapshots_to_num_retained_max_and_delete_their_files(cat):
    t = _pk(cat, {"snapshot.num-retained.min": "1", "snapshot.num-retained.max": "3", **NO_COMPACTION})
    for i in range(6):
        t.write(rows(["a", "b"], [i, i + 1], tag=f"w{i}-"))
    assert t.snapshot_manager.ids() == [4, 5, 6]
    assert len(state(t, 4)) == 8  # the earliest retained snapshot is whole (4 writes of 2 keys)
    assert t.check().ok


def test_append_table_compaction_commit_expires_snapshots(cat):
    t = cat.create_table("db.a", SCHEMA, partition_keys=["dt"],
                         options={"bucket": "-1", "snapshot.num-retained.min": "1", "snapshot.num-retained.max": "2",
                                  "write-only": "true"})
    for i in range(4):
        t.write(rows(["a"], [i]))
    assert t.snapshot_manager.ids() == [1, 2, 3, 4]  # write-only: nothing expired
    t.alter().set_option("write-only", "false").commit()
    t = cat.get_table("db.a")
    sid = t.compact(full=True)
    assert sid == 5 and t.snapshot(sid).commit_kind == "COMPACT"
    assert t.snapshot_manager.ids() == [4, 5]  # the compaction's commit expired the others
    assert sorted(r["id"] for r in t.read().to_pylist()) == [0, 1, 2, 3]
    assert t.check().ok


def test_write_only_skips_every_maintenance(cat):
    t = _pk(cat, {"write-only": "true", "snapshot.num-retained.min": "1", "snapshot.num-retained.max": "1",
                  "partition.expiration-time": "1 d", "partition.expiration-check-interval": "0 s"})
    for i in range(4):
        t.write(rows([day(30)], [i]))
    assert t.snapshot_manager.ids() == [1, 2, 3, 4]
    assert len(state(t)) == 4  # the expired partition was not dropped either


def test_time_retained_with_a_fake_clock(cat, monkeypatch):
    t = _pk(cat, {"snapshot.num-retained.min": "1", "snapshot.time-retained": "1 h", **NO_COMPACTION})
    now = time.time()
    clock = {"t": now - 3 * 3600}
    monkeypatch.setattr(time, "time", lambda: clock["t"])
    for offset in (3, 2, 1.5, 0.5):  # snapshots 1..4 committed that many hours ago
        clock["t"] = now - offset * 3600
        t.write(rows(["a"], [int(offset * 10)]))
    # at "now - 0.5 h": 1 stopped being the latest 1.5 h before (expired), 2 exactly 1 h before (kept)
    assert t.snapshot_manager.ids() == [2, 3, 4]
    clock["t"] = now
    t.write(rows(["a"], [99]))
    assert t.snapshot_manager.ids() == [3, 4, 5]  # 3 was the latest until 0.5 h ago
    assert [r[1] for r in state(t)] == [5, 15, 20, 30, 99]
    assert t.check().ok


def test_consumers_and_tags_keep_protecting_after_commits(cat):
    t = _pk(cat, {"snapshot.num-retained.min": "1", "snapshot.num-retained.max": "1", **NO_COMPACTION})
    t.write(rows(["a"], [1]))
    t.create_tag("first", 1)
    t.write(rows(["a"], [2]))
    t.reset_consumer("reader", 2)  # it will read snapshot 2 next
    for i in range(3, 6):
        t.write(rows(["a"], [i]))
    assert t.snapshot_manager.ids() == [2, 3, 4, 5]
    assert state(t, 2) == [("a", 1, "v1"), ("a", 2, "v2")]
    assert t.read(tag="first").to_pylist() == [{"dt": "a", "id": 1, "v": "v1"}]
    t.reset_consumer("reader", None)
    t.write(rows(["a"], [6]))
    assert t.snapshot_manager.ids() == [6]
    assert t.read(tag="first").to_pylist() == [{"dt": "a", "id": 1, "v": "v1"}]
    assert t.check().ok


def test_a_failing_maintenance_step_never_fails_the_commit(cat, monkeypatch, caplog):
    from engine.maintenance import expire
    t = _pk(cat, {"snapshot.num-retained.min": "1", "snapshot.num-retained.max": "1",
                  "partition.expiration-time": "1 d", "partition.expiration-check-interval": "0 s"})
    t.write(rows([day(0)], [1]))

    def broken(*a, **k):
        raise OSError("disk on fire")
    monkeypatch.setattr(expire, "expire_snapshots", broken)
    with caplog.at_level(logging.WARNING, logger="lakemerge.maintenance"):
        sid = t.write(rows([day(0), day(5)], [2, 3]))
    assert sid == 2 and t.latest_snapshot_id() == 3 and t.snapshot_manager.ids() == [1, 2, 3]
    assert "snapshot expiration after commit failed" in caplog.text and "disk on fire" in caplog.text
    # the partition expiration step before it still ran: the 5-day-old partition is gone (snapshot 3)
    assert state(t) == [(day(0), 1, "v1"), (day(0), 2, "v2")]
    assert t.snapshot(3).commit_kind == "OVERWRITE"


# --- partition expiration -----------------------------------------------------------------------------------
def test_values_time_with_a_formatter_after_commits(cat):
    t = _pk(cat, {"partition.expiration-time": "2 d", "partition.expiration-check-interval": "0 s",
                  "partition.timestamp-formatter": "yyyyMMdd"})
    t.write(rows([day(0, "%Y%m%d"), day(1, "%Y%m%d"), day(3, "%Y%m%d"), day(10, "%Y%m%d"), "unknown"]))
    # the commit itself expired the partitions older than 2 days, in one OVERWRITE snapshot
    assert [s.commit_kind for s in t.snapshots()] == ["APPEND", "OVERWRITE"]
    assert sorted({r[0] for r in state(t)}) == sorted([day(0, "%Y%m%d"), day(1, "%Y%m%d"), "unknown"])  # 'unknown' never expires


def test_values_time_with_a_pattern_over_several_columns(cat):
    schema = pa.schema([("y", pa.string()), ("m", pa.string()), ("d", pa.string()), ("id", pa.int64())])
    t = cat.create_table("db.p", schema, primary_key=["y", "m", "d", "id"], partition_keys=["y", "m", "d"],
                         options={"bucket": "1", "partition.expiration-time": "7 d",
                                  "partition.timestamp-pattern": "$y-$m-$d"})
    t.write(pa.table({"y": ["2024", "2024", "2024"], "m": ["01", "01", "02"], "d": ["05", "20", "01"],
                      "id": pa.array([1, 2, 3], pa.int64())}, schema=schema))
    expired = t.expire_partitions(now=dt.datetime(2024, 1, 26))  # older than 2024-01-19
    assert expired == [{"y": "2024", "m": "01", "d": "05"}]
    assert sorted(r["id"] for r in t.read().to_pylist()) == [2, 3]
    assert t.expire_partitions(now=dt.datetime(2024, 2, 9)) == [{"y": "2024", "m": "01", "d": "20"},
                                                                {"y": "2024", "m": "02", "d": "01"}]
    assert t.read().num_rows == 0


def test_max_num_and_batch_size(cat):
    t = _pk(cat, {"partition.expiration-time": "1 d", "partition.expiration-max-num": "2",
                  "partition.expiration-batch-size": "1"})
    t.write(rows(["2024-01-03", "2024-01-01", "2024-01-02 10:00:00", "2024-03-01"]))
    expired = t.expire_partitions(now=dt.datetime(2024, 2, 1))
    assert expired == [{"dt": "2024-01-01"}, {"dt": "2024-01-02 10:00:00"}]  # sorted, at most 2
    assert [s.commit_kind for s in t.snapshots()] == ["APPEND", "OVERWRITE", "OVERWRITE"]  # one per batch
    assert sorted({r[0] for r in state(t)}) == ["2024-01-03", "2024-03-01"]


def test_update_time_strategy(cat):
    t = _pk(cat, {"partition.expiration-time": "1 d", "partition.expiration-strategy": "update-time"})
    t.write(rows(["x", "y"]))
    assert t.expire_partitions() == []
    t.write(rows(["y"], [5]))
    later = dt.datetime.now() + dt.timedelta(days=1, minutes=1)
    assert sorted(p["dt"] for p in t.expire_partitions(now=later)) == ["x", "y"]
    assert t.read().num_rows == 0


def test_check_interval_is_kept_per_table_in_the_process(cat, monkeypatch):
    monkeypatch.setattr(partition_expire.random, "randrange", lambda n: 0)  # Paimon's random start: at its latest
    t = _pk(cat, {"partition.expiration-time": "1 d", "partition.expiration-check-interval": "1 h"})
    t.write(rows(["2000-01-01"]))  # first sight: the last check is put within the hour before now
    assert t.read().num_rows == 1
    now = dt.datetime.now()
    assert expire_partitions_if_due(t, BATCH_COMMIT_IDENTIFIER, now) is None
    assert expire_partitions_if_due(t, BATCH_COMMIT_IDENTIFIER, now + dt.timedelta(minutes=61)) == [
        {"dt": "2000-01-01"}]
    t.write(rows(["2000-01-02"]))
    assert expire_partitions_if_due(t, BATCH_COMMIT_IDENTIFIER, now + dt.timedelta(minutes=62)) is None
    assert t.read().num_rows == 1


def test_end_input_check_expires_on_batch_commits_only(cat):
    t = _pk(cat, {"partition.expiration-time": "1 d", "end-input.check-partition-expire": "true"})
    with t.new_write(commit_identifier=7) as w:
        w.write(rows(["2000-01-01"]))
        messages = w.prepare_commit()
    t.commit(messages)  # a streaming identifier: the interval (1 h) governs
    assert t.read().num_rows == 1
    t.write(rows(["2000-01-02"]))  # a batch commit: checked at once
    assert t.read().num_rows == 0


def test_partition_time_parsing_follows_paimon():
    assert parse_partition_time("2024-1-5", None) == dt.datetime(2024, 1, 5)
    assert parse_partition_time("2024-01-05 7:08:09.5", None) == dt.datetime(2024, 1, 5, 7, 8, 9, 500000)
    assert parse_partition_time("2024010512", "yyyyMMddHH") == dt.datetime(2024, 1, 5, 12)
    assert parse_partition_time("2024-01-05T12", "yyyy-MM-dd'T'HH") == dt.datetime(2024, 1, 5, 12)
    with pytest.raises(ValueError):
        parse_partition_time("20240105", None)
    assert partition_time_text(["dt", "dt1"], ["a", "b"], "$dt1/$dt") == "b/a"
    with pytest.raises(ValueError):
        java_pattern_to_strptime("yyyy-ww")


def test_formatter_digit_widths_are_javas_so_a_value_paimon_cannot_parse_never_expires(cat):
    """Paimon parses with java.time.DateTimeFormatter.ofPattern: a doubled letter takes exactly two digits, ``S``
    as many fraction digits as letters. JDK 17 fails '20200101 3' for 'yyyyMMdd HH', '2020-1-5' for 'yyyy-MM-dd'
    and '2020011' for 'yyyyMMdd' (strptime read them as dates), so Paimon never expires those partitions; lakemerge
    used to drop them."""
    for formatter, text in [("yyyyMMdd HH", "20200101 3"), ("yyyy-MM-dd", "2020-1-5"), ("yyyyMMdd", "2020011"),
                            ("yyyy-MM-dd HH:mm", "2020-01-05 7:05"), ("yyyy-MM-dd", "20-01-05")]:
        with pytest.raises(ValueError):
            parse_partition_time(text, formatter)
    assert parse_partition_time("2020-1-5", "yyyy-M-d") == dt.datetime(2020, 1, 5)
    assert parse_partition_time("20-01-05", "yy-MM-dd") == dt.datetime(2020, 1, 5)
    assert parse_partition_time("2024-01-05 01:02:03.123", "yyyy-MM-dd HH:mm:ss.SSS") == \
        dt.datetime(2024, 1, 5, 1, 2, 3, 123000)
    with pytest.raises(ValueError):
        java_pattern_to_strptime("yyyy-MMM-dd")  # a text month in Java, not digits
    t = _pk(cat, {"partition.expiration-time": "1 d", "partition.expiration-check-interval": "0 s",
                  "partition.timestamp-formatter": "yyyy-MM-dd"})
    t.write(rows(["2000-1-5", "2000-01-06"], [1, 2]))
    assert state(t) == [("2000-1-5", 1, "v1")]  # Paimon drops 2000-01-06 only


def test_default_partition_time_is_lenient_as_paimons_formatter(cat):
    """Without partition.timestamp-formatter Paimon parses with ResolverStyle.LENIENT (PartitionTimeExtractor):
    out-of-range fields roll over (JDK 17: '2024-02-30' -> 2024-03-01, '2024-13-01' -> 2025-01-01, '2024-00-10' ->
    2023-12-10, '2024-01-05 24:00:00' -> 2024-01-06), so such a partition expires; lakemerge used to keep it."""
    assert parse_partition_time("2024-02-30", None) == dt.datetime(2024, 3, 1)
    assert parse_partition_time("2024-13-01", None) == dt.datetime(2025, 1, 1)
    assert parse_partition_time("2024-00-10", None) == dt.datetime(2023, 12, 10)
    assert parse_partition_time("2024-01-05 24:00:00", None) == dt.datetime(2024, 1, 6)
    t = _pk(cat, {"partition.expiration-time": "1 d", "partition.expiration-check-interval": "0 s"})
    t.write(rows(["2000-02-30", day(0)], [1, 2]))
    assert state(t) == [(day(0), 2, "v2")]


def test_partition_expiration_options_are_validated_and_known(cat, caplog):
    with pytest.raises(InvalidOption):
        TableOptions({"partition.expiration-strategy": "whenever"}).get("partition.expiration-strategy")
    with pytest.raises(InvalidOption):
        TableOptions({"partition.expiration-time": "soon"}).get("partition.expiration-time")
    with caplog.at_level(logging.WARNING, logger="lakemerge.options"):
        opts = TableOptions({"partition.expiration-time": "7 d", "partition.timestamp-formatter": "yyyyMMdd",
                             "partition.expiration-check-interval": "10 min", "snapshot.expire.execution-mode":
                             "async"})
        opts.warn_unknown()
    assert opts.unknown_keys() == [] and "not a Paimon option" not in caplog.text
    assert opts.get("partition.expiration-time") == 7 * 86_400_000
    t = _pk(cat, {"partition.expiration-time": "1 d", "partition.timestamp-formatter": "yyyy-ww"})
    t.write(rows(["2024-01"]))
    with pytest.raises(InvalidOption):
        t.expire_partitions()


# --- drop_partitions ----------------------------------------------------------------------------------------
def _on_disk(t) -> set[str]:
    out = set()
    for d, _, files in os.walk(t.root):
        if os.path.relpath(d, t.root).split(os.sep)[0] in ("schema", "snapshot", "tag", "consumer"):
            continue
        out.update(os.path.normpath(os.path.join(d, f)) for f in files)
    return out


def _expire_all(t):
    while time.time() * 1000 < t.snapshot().time_millis + 1:
        time.sleep(0.001)
    t.expire_snapshots(retain_min=1, retain_max=1, time_retained=0)


def _assert_dropped(t, before_sid, dropped_dt, kept):
    sid = t.latest_snapshot_id()
    snap = t.snapshot(sid)
    assert sid == before_sid + 1 and snap.commit_kind == "OVERWRITE"
    assert sorted(r["id"] for r in t.read().to_pylist()) == kept
    assert all(r["dt"] != dropped_dt for r in t.read().to_pylist())
    assert t.read(before_sid).num_rows > t.read().num_rows  # time travel still sees the dropped rows
    assert t.check().ok
    _expire_all(t)
    assert {os.path.normpath(p) for p in referenced_files(t)} == _on_disk(t)  # the dropped files are gone
    assert not [p for p in _on_disk(t) if f"dt={dropped_dt}" in p]


def test_drop_partitions_of_a_primary_key_table(cat):
    t = _pk(cat, {"bucket": "2"})
    t.write(rows(["a", "a", "b", "c"], [1, 2, 3, 4]))
    t.write(rows(["b"], [5]))
    before = t.latest_snapshot_id()
    assert t.drop_partitions([{"dt": "b"}]) == before + 1
    _assert_dropped(t, before, "b", [1, 2, 4])
    t.write(rows(["b"], [6]))
    assert sorted(r["id"] for r in t.read().to_pylist()) == [1, 2, 4, 6]


def test_drop_partitions_of_an_append_table(cat):
    t = cat.create_table("db.a", SCHEMA, partition_keys=["dt"], options={"bucket": "-1"})
    t.write(rows(["a", "b", "b"], [1, 2, 3]))
    t.write(rows(["b", "c"], [4, 5]))
    before = t.latest_snapshot_id()
    t.drop_partitions({"dt": "b"})
    _assert_dropped(t, before, "b", [1, 5])


def test_drop_partitions_of_a_dynamic_bucket_table_drops_its_hash_index(cat):
    t = _pk(cat, {"bucket": "-1", "dynamic-bucket.target-row-num": "2"})
    t.write(rows(["a"] * 5 + ["b"] * 3, list(range(8))))
    before = t.latest_snapshot_id()
    scan = t.scan()
    hashed = {scan.partition_values(r["_PARTITION"])[0]
              for r in read_index_manifest(t.file_io, t.paths, t.snapshot().index_manifest)}
    assert hashed == {"a", "b"}
    t.drop_partitions({"dt": "a"})
    recs = read_index_manifest(t.file_io, t.paths, t.snapshot().index_manifest)
    assert {scan.partition_values(r["_PARTITION"])[0] for r in recs} == {"b"}
    _assert_dropped(t, before, "a", [5, 6, 7])
    t.write(rows(["a"] * 3, [0, 1, 2], tag="again"))  # a fresh index: no key lands in two buckets
    assert sorted(r["id"] for r in t.read().to_pylist()) == [0, 1, 2, 5, 6, 7]
    t.write(rows(["a"] * 3, [0, 1, 2], tag="upd"))
    assert sorted((r["id"], r["v"]) for r in t.read().to_pylist() if r["dt"] == "a") == [
        (0, "upd0"), (1, "upd1"), (2, "upd2")]


def test_drop_partitions_of_a_deletion_vector_table_drops_its_vectors(cat):
    from engine.deletion_vectors.index_file import DV_INDEX
    t = _pk(cat, {"deletion-vectors.enabled": "true", "num-sorted-run.compaction-trigger": "10",
                  "compaction.max-size-amplification-percent": "100000"})
    for step in range(4):  # a big first run, then small updates: the compactions mark old rows in vectors
        keys = list(range(100)) if step == 0 else list(range(step, step + 10, 2))
        t.write(rows(["a"] * len(keys) + ["b"] * len(keys), keys + keys, tag=f"w{step}-"))
    recs = read_index_manifest(t.file_io, t.paths, t.snapshot().index_manifest)
    scan = t.scan()
    assert {scan.partition_values(r["_PARTITION"])[0] for r in recs if r["_INDEX_TYPE"] == DV_INDEX} == {"a", "b"}
    before = t.latest_snapshot_id()
    t.drop_partitions({"dt": "a"})
    recs = read_index_manifest(t.file_io, t.paths, t.snapshot().index_manifest)
    assert {scan.partition_values(r["_PARTITION"])[0] for r in recs} == {"b"}
    _assert_dropped(t, before, "a", list(range(100)))


def test_drop_partitions_by_a_partial_spec_and_nulls(cat):
    schema = pa.schema([("dt", pa.string()), ("hr", pa.int32()), ("id", pa.int64())])
    t = cat.create_table("db.h", schema, partition_keys=["dt", "hr"], options={"bucket": "-1"})  # append: nulls ok
    t.write(pa.table({"dt": ["a", "a", "b", None, "c"], "hr": pa.array([1, 2, 1, 3, None], pa.int32()),
                      "id": pa.array([1, 2, 3, 4, 5], pa.int64())}, schema=schema))
    t.drop_partitions({"hr": "1"})  # every dt
    assert sorted(r["id"] for r in t.read().to_pylist()) == [2, 4, 5]
    t.drop_partitions([{"dt": None}, {"hr": "__DEFAULT_PARTITION__"}])  # None or the default name: null
    assert sorted(r["id"] for r in t.read().to_pylist()) == [2]
    before = t.latest_snapshot_id()
    assert t.drop_partitions({"dt": "zzz"}) == before  # nothing matched: no snapshot
    t.drop_partitions({"dt": "a", "hr": 2})
    assert t.read().num_rows == 0
    assert [s.commit_kind for s in t.snapshots()] == ["APPEND", "OVERWRITE", "OVERWRITE", "OVERWRITE"]


def test_drop_partitions_of_a_date_partition_by_its_text(cat):
    schema = pa.schema([("d", pa.date32()), ("id", pa.int64())])
    t = cat.create_table("db.d", schema, primary_key=["d", "id"], partition_keys=["d"], options={"bucket": "1"})
    t.write(pa.table({"d": [dt.date(2024, 1, 31), dt.date(2024, 2, 1), dt.date(2024, 2, 2)],
                      "id": pa.array([1, 2, 3], pa.int64())}, schema=schema))
    t.drop_partitions([{"d": "2024-01-31"}, {"d": dt.date(2024, 2, 1)}])
    assert [r["id"] for r in t.read().to_pylist()] == [3]


def test_drop_partitions_parses_a_spec_string_as_the_column_type(cat):
    """Paimon casts a spec string to the partition column's type (TypeUtils.castFromString), so the CLI's
    ``-p ts=2024-01-01 00:00:00`` drops that TIMESTAMP partition; before, only the exact partition-path text
    (``2024-01-01T00:00``) matched and the drop silently did nothing."""
    import decimal
    schema = pa.schema([("ts", pa.timestamp("us")), ("n", pa.int32()), ("m", pa.decimal128(5, 2)),
                        ("b", pa.bool_()), ("id", pa.int64())])
    t = cat.create_table("db.typed", schema, partition_keys=["ts", "n", "m", "b"])
    t.write(pa.table({"ts": [dt.datetime(2024, 1, 1), dt.datetime(2024, 1, 2, 10, 30, 5)] * 2,
                      "n": pa.array([5, 5, 6, 6], pa.int32()),
                      "m": [decimal.Decimal("1.50")] * 2 + [decimal.Decimal("2.00")] * 2,
                      "b": [True, True, False, False], "id": [1, 2, 3, 4]}, schema=schema))
    t.drop_partitions({"ts": "2024-01-01 00:00:00", "n": "05"})
    assert sorted(r["id"] for r in t.read().to_pylist()) == [2, 3, 4]
    t.drop_partitions([{"m": "1.5", "b": "TRUE"}, {"ts": "2024-01-02 10:30:05.000000", "m": "2"}])
    assert [r["id"] for r in t.read().to_pylist()] == [3]
    t.drop_partitions({"n": "6"})
    assert t.read().num_rows == 0


def test_drop_partitions_refuses_bad_specs(cat):
    t = _pk(cat)
    t.write(rows(["a"]))
    for bad in ([], [{}], {"id": 1}, ["dt=a"]):
        with pytest.raises(InvalidInput):
            t.drop_partitions(bad)
    u = cat.create_table("db.u", SCHEMA, primary_key=["id"], options={"bucket": "1"})
    with pytest.raises(InvalidInput, match="not partitioned"):
        u.drop_partitions({"dt": "a"})
    assert t.latest_snapshot_id() == 1


def test_cli_drop_partition(cat, tmp_path):
    from click.testing import CliRunner

    from engine.cli import cli
    t = _pk(cat)
    t.write(rows(["a", "b"]))
    runner = CliRunner()
    env = {"LAKEMERGE_WAREHOUSE": str(tmp_path / "wh")}
    r = runner.invoke(cli, ["drop-partition", "db.t", "-p", "dt=a"], env=env, catch_exceptions=False)
    assert r.exit_code == 0 and "snapshot 2" in r.output, r.output
    assert [x["dt"] for x in cat.get_table("db.t").read().to_pylist()] == ["b"]
    r = runner.invoke(cli, ["drop-partition", "db.t", "-p", "dt=a"], env=env, catch_exceptions=False)
    assert r.exit_code == 0 and "nothing committed" in r.output
    r = runner.invoke(cli, ["drop-partition", "db.t", "-p", "nope=1"], env=env)
    assert r.exit_code == 1


def test_partition_expire_state_is_per_table(cat):
    a = _pk(cat, {"partition.expiration-time": "1 d"}, name="db.a")
    b = _pk(cat, {"partition.expiration-time": "1 d"}, name="db.b")
    now = dt.datetime.now()
    expire_partitions_if_due(a, 5, now)
    assert os.path.realpath(a.root) in partition_expire._last_check
    assert os.path.realpath(b.root) not in partition_expire._last_check
