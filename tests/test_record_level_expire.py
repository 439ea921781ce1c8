"""record-level.expire-time / record-level.time-field against Paimon's RecordLevelExpire (RecordLevelExpire.java,
MergeTreeCompactTask.upgrade, CompactStrategy.pickFullCompaction, MergeTreeCompactManagerFactory.createRewriter):

* only compaction drops expired rows, never a read; every compaction input is read without them, before the merge
  (so an older unexpired record of a key becomes its value again) and lookups do not find them;
* a file whose minimum time statistic is expired is rewritten instead of upgraded, and a full compaction of a
  bucket that is one top-level run rewrites such files (none when statistics are off);
* INT is seconds, BIGINT seconds or (>= 10^12) milliseconds, TIMESTAMP / TIMESTAMP_LTZ floored to milliseconds
  then truncated to seconds; a null time never expires; no changelog is produced for the rows dropped.

Expired times here are days old and fresh times seconds old against a one-day expire time, so the real clock
decides nothing close.
"""
from __future__ import annotations

import datetime as dt
import tempfile
import time
from fractions import Fraction

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import Catalog
from engine.compact.record_expire import epoch_seconds
from engine.errors import InvalidOption
from tests.interop.pypaimon_util import pp_get_table, pp_read

NOW = int(time.time())
FRESH, OLD = NOW - 60, NOW - 10 * 86400
EXPIRE = {"record-level.expire-time": "1 d", "record-level.time-field": "ts"}
SCHEMA = pa.schema([pa.field("id", pa.int64(), False), pa.field("ts", pa.int32()), pa.field("a", pa.int64())])


def _table(wh, options=None, schema=SCHEMA, name="db.t"):
    cat = Catalog(str(wh))
    cat.create_database("db", ignore_if_exists=True)
    return cat.create_table(name, schema, primary_key=["id"], options={"bucket": "1", **(options or {})})


def _rows(records, schema=SCHEMA):
    """records: (id, ts, a) triples."""
    return pa.table({"id": [r[0] for r in records], "ts": [r[1] for r in records], "a": [r[2] for r in records]},
                    schema=schema)


def _read(t):
    return sorted((r["id"], r["ts"], r["a"]) for r in t.read().to_pylist())


def _pp_read(wh, name="db.t"):
    return sorted((r["id"], r["ts"], r["a"]) for r in pp_read(pp_get_table(str(wh), name)).to_pylist())


def _file_names(t):
    return sorted(f.file_name for sp in t.plan() for f in sp.files)


# --- the conversion of the time field to seconds ---------------------------------------------------------------
def _java_seconds(raw: int, root: str, unit: str = "s") -> int:
    """Java's createFieldGetterAndConvertToSecond, written with exact fractions: Timestamp.getMillisecond is the
    floor of the epoch milliseconds, and a Java long division truncates toward zero."""
    if root == "INT":
        return raw
    if root == "BIGINT":
        return raw // 1000 if raw >= 1_000_000_000_000 else raw
    per_ms = {"s": Fraction(1, 1000), "ms": Fraction(1), "us": Fraction(1000), "ns": Fraction(1_000_000)}[unit]
    millis = (Fraction(raw) / per_ms).__floor__()
    return int(Fraction(millis, 1000))  # int() truncates toward zero


@settings(deadline=None)
@given(st.lists(st.one_of(st.none(), st.integers(-2**31, 2**31 - 1)), max_size=20))
def test_int_times_are_seconds(values):
    got, valid = epoch_seconds(pa.array(values, pa.int32()), "INT")
    assert list(valid) == [v is not None for v in values]
    assert [int(s) for s, v in zip(got, values) if v is not None] == [v for v in values if v is not None]


@settings(deadline=None)
@given(st.lists(st.integers(-2**62, 2**62), max_size=20))
def test_bigint_times_are_seconds_or_milliseconds_from_10_to_the_12(values):
    got, _ = epoch_seconds(pa.array(values, pa.int64()), "BIGINT")
    assert [int(s) for s in got] == [_java_seconds(v, "BIGINT") for v in values]


@pytest.mark.parametrize("unit", ["s", "ms", "us", "ns"])
@settings(deadline=None)
@given(values=st.lists(st.integers(-2**50, 2**50), max_size=20))
def test_timestamps_are_floored_to_milliseconds_then_truncated_to_seconds(unit, values):
    for root in ("TIMESTAMP", "TIMESTAMP_LTZ"):
        typ = pa.timestamp(unit, tz="UTC" if root == "TIMESTAMP_LTZ" else None)
        got, _ = epoch_seconds(pa.array(values, pa.int64()).cast(typ), root)
        assert [int(s) for s in got] == [_java_seconds(v, root, unit) for v in values]


def test_timestamp_just_before_the_epoch_is_second_zero_as_in_java():
    # -1 ms floors to -1 ms, and Java's -1 / 1000 is 0 (a floor division would say -1)
    got, _ = epoch_seconds(pa.array([-1, -1500, -999_999], pa.int64()).cast(pa.timestamp("us")), "TIMESTAMP")
    assert list(got) == [0, 0, -1]


# --- validation (Paimon's SchemaValidation, at create and alter) ------------------------------------------------
@pytest.mark.parametrize("options,fragment", [
    ({"record-level.time-field": "nope"}, "can not find time field"),
    ({"record-level.time-field": "a", "record-level.expire-time": "1 h"}, None),
    ({"record-level.time-field": "s"}, "should be one of INT, BIGINT or TIMESTAMP"),
    ({"record-level.time-field": "d"}, "should be one of INT, BIGINT or TIMESTAMP"),
    ({"record-level.expire-time": "1 h"}, "needs record-level.time-field"),
    ({"record-level.expire-time": "soon", "record-level.time-field": "a"}, "duration"),
])
def test_time_field_is_checked_when_the_table_is_created(tmp_path, options, fragment):
    schema = pa.schema([pa.field("id", pa.int64(), False), pa.field("a", pa.int64()), pa.field("s", pa.string()),
                        pa.field("d", pa.date32())])
    if fragment is None:
        _table(tmp_path, options, schema)
        return
    with pytest.raises(InvalidOption, match=fragment):
        _table(tmp_path, options, schema)


def test_time_field_is_checked_when_the_table_is_altered(tmp_path):
    t = _table(tmp_path, {"write-only": "true"})
    t.write(_rows([(1, OLD, 1)]))
    with pytest.raises(InvalidOption, match="can not find time field"):
        t.alter().set_option("record-level.time-field", "missing").commit()
    with pytest.raises(InvalidOption, match="record-level.time-field"):
        t.alter().set_option("record-level.expire-time", "1 d").commit()
    t.alter().set_option("record-level.time-field", "ts").set_option("record-level.expire-time", "1 d").commit()
    with pytest.raises(InvalidOption, match="should be one of INT, BIGINT or TIMESTAMP"):
        t.alter().update_column_type("ts", pa.float64()).commit()


# --- compaction against a model ------------------------------------------------------------------------------------
def _expired(ts):
    return ts is not None and NOW - 86400 > ts


def _merge(engine, records):
    """Records (kind, (id, ts, a)) of one key folded in order by the merge engine; the result is a record too."""
    kind, (k, ts, a) = records[0]
    for nkind, (_, nts, na) in records[1:]:
        if engine == "deduplicate":
            kind, ts, a = nkind, nts, na
        elif engine == "partial-update":
            ts, a = (ts if nts is None else nts), (a if na is None else na)
        elif engine == "aggregation":  # a sums, ts keeps the last non-null value
            ts, a = (ts if nts is None else nts), (a if na is None else na if a is None else a + na)
    return kind, (k, ts, a)


def _model(engine, commits):
    """What a full compaction of the un-compacted ``commits`` leaves: each commit's records of a key are merged
    when its write buffer is flushed (no expiration there), then every file record that is expired is dropped and
    the rest merged in write order."""
    history: dict = {}
    for records in commits:
        per_key: dict = {}
        for kind, r in records:
            per_key.setdefault(r[0], []).append((kind, r))
        for k, recs in per_key.items():
            flushed = _merge(engine, recs)
            if not _expired(flushed[1][1]):
                history.setdefault(k, []).append(flushed)
    out = []
    for k, recs in history.items():
        kind, row = _merge(engine, recs)
        if kind != "-D":
            out.append(row)
    return sorted(out)


ENGINES = {"deduplicate": {}, "first-row": {}, "partial-update": {},
           "aggregation": {"fields.a.aggregate-function": "sum"}}
_ts = st.sampled_from([FRESH, OLD, None])
_record = st.tuples(st.integers(0, 6), _ts, st.one_of(st.none(), st.integers(0, 9)))


@pytest.mark.parametrize("engine", list(ENGINES))
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(commits=st.lists(st.lists(st.tuples(st.sampled_from(["+I", "+I", "-D"]), _record), min_size=1, max_size=6),
                        min_size=1, max_size=4))
def test_full_compaction_drops_expired_records_before_merging(engine, commits):
    if engine != "deduplicate":  # only deduplicate takes deletes without further options
        commits = [[("+I", r) for _, r in c] for c in commits]
    with tempfile.TemporaryDirectory() as wh:
        t = _table(wh, {"merge-engine": engine, "write-only": "true", **ENGINES[engine], **EXPIRE})
        for records in commits:
            with t.new_write() as w:
                for kind, r in records:
                    w.write(_rows([r]), row_kinds=[kind])
                t.commit(w.prepare_commit())
        before = _read(t)
        t.compact(full=True)
        assert _read(t) == _model(engine, commits)
        assert _pp_read(wh) == _read(t)  # pypaimon reads the compacted files alike
        if not any(_expired(r[1]) for c in commits for _, r in c):
            assert _read(t) == before


def test_reads_do_not_filter_expired_rows_only_compaction_drops_them(tmp_path):
    t = _table(tmp_path, {"write-only": "true", **EXPIRE})
    t.write(_rows([(1, OLD, 1), (2, FRESH, 2), (3, None, 3)]))
    assert _read(t) == [(1, OLD, 1), (2, FRESH, 2), (3, None, 3)]
    assert _pp_read(tmp_path) == _read(t)
    t.compact(full=True)
    assert _read(t) == [(2, FRESH, 2), (3, None, 3)]


def test_an_expired_newest_record_brings_back_the_older_one(tmp_path):
    # Paimon filters compaction input before merging: the key's older, unexpired record wins the merge
    t = _table(tmp_path, {"write-only": "true", **EXPIRE})
    t.write(_rows([(1, FRESH, 1)]))
    t.write(_rows([(1, OLD, 2)]))
    assert _read(t) == [(1, OLD, 2)]
    t.compact(full=True)
    assert _read(t) == [(1, FRESH, 1)]


@pytest.mark.parametrize("arrow_type,old,fresh", [
    (pa.int64(), OLD, FRESH),
    (pa.int64(), OLD * 1000, FRESH * 1000),  # milliseconds
    (pa.timestamp("ms"), dt.datetime.utcfromtimestamp(OLD), dt.datetime.utcfromtimestamp(FRESH)),
    (pa.timestamp("us"), dt.datetime.utcfromtimestamp(OLD), dt.datetime.utcfromtimestamp(FRESH)),
    (pa.timestamp("s"), dt.datetime.utcfromtimestamp(OLD), dt.datetime.utcfromtimestamp(FRESH)),
    (pa.timestamp("us", tz="UTC"), dt.datetime.fromtimestamp(OLD, dt.timezone.utc),
     dt.datetime.fromtimestamp(FRESH, dt.timezone.utc)),
])
def test_every_time_field_type_expires(tmp_path, arrow_type, old, fresh):
    schema = pa.schema([pa.field("id", pa.int64(), False), pa.field("ts", arrow_type), pa.field("a", pa.int64())])
    t = _table(tmp_path, {"write-only": "true", **EXPIRE}, schema)
    t.write(_rows([(1, old, 1), (2, fresh, 2), (3, None, 3)], schema))
    t.compact(full=True)
    assert [r[0] for r in _read(t)] == [2, 3]
    assert [r[0] for r in _pp_read(tmp_path)] == [2, 3]


def test_append_tables_ignore_record_level_expiration(tmp_path):
    cat = Catalog(str(tmp_path))
    cat.create_database("db", ignore_if_exists=True)
    t = cat.create_table("db.a", SCHEMA, options={"bucket": "-1", **EXPIRE})  # valid, as in Paimon
    for i in range(3):
        t.write(_rows([(i, OLD, i)]))
    t.compact(full=True)
    assert len(t.read()) == 3


def test_append_tables_take_an_expire_time_without_a_time_field(tmp_path):
    # Paimon's SchemaValidation checks only the time field; RecordLevelExpire.create (the one place that needs the
    # field with the expire time) runs in primary-key writers only, so an append table with just an expire time is
    # created, altered and written in Java.
    cat = Catalog(str(tmp_path))
    cat.create_database("db", ignore_if_exists=True)
    t = cat.create_table("db.a", SCHEMA, options={"bucket": "-1", "record-level.expire-time": "1 d"})
    t.write(_rows([(1, OLD, 1)]))
    t.alter().add_column("b", pa.int64()).commit()
    assert len(t.read()) == 1
    with pytest.raises(InvalidOption, match="needs record-level.time-field"):  # primary keys: refused at once
        _table(tmp_path, {"record-level.expire-time": "1 d"})


# --- which files are rewritten ---------------------------------------------------------------------------------------
def _top_level_table(tmp_path, records, **options):
    """A one-bucket table whose rows are one top-level run, written and fully compacted before expiration is on;
    then expiration is switched on by an alter."""
    t = _table(tmp_path, {"write-only": "true", **options})
    t.write(_rows(records))
    t.compact(full=True)
    t.alter().set_option("record-level.time-field", "ts").set_option("record-level.expire-time", "1 d").commit()
    return t


def test_full_compaction_rewrites_top_level_files_whose_minimum_time_is_expired(tmp_path):
    t = _top_level_table(tmp_path, [(1, OLD, 1), (2, FRESH, 2)])
    names = _file_names(t)
    sid = t.compact(full=True)
    assert sid is not None and t.snapshot(sid).commit_kind == "COMPACT"
    assert _read(t) == [(2, FRESH, 2)] and _file_names(t) != names
    assert {f.level for sp in t.plan() for f in sp.files} == {5}
    assert _pp_read(tmp_path) == [(2, FRESH, 2)]
    assert t.compact(full=True) is None  # nothing expired is left


def test_top_level_files_without_expired_minimum_are_left_alone(tmp_path):
    t = _top_level_table(tmp_path, [(1, FRESH, 1), (2, None, 2)])
    assert t.compact(full=True) is None


def test_without_statistics_a_file_never_counts_as_expired(tmp_path):
    # Paimon's isExpireFile reads the minimum from the value statistics; with none it is empty, hence false
    t = _top_level_table(tmp_path, [(1, OLD, 1), (2, FRESH, 2)], **{"metadata.stats-mode": "none"})
    assert t.compact(full=True) is None
    assert _read(t) == [(1, OLD, 1), (2, FRESH, 2)]


def test_a_big_file_with_expired_records_is_rewritten_instead_of_upgraded(tmp_path):
    t = _table(tmp_path, {"num-sorted-run.compaction-trigger": "2", "compaction.small-file-ratio": "0.000001",
                          **EXPIRE})
    t.write(_rows([(i, OLD if i % 2 else FRESH, i) for i in range(10)]))
    t.write(_rows([(i, FRESH, i) for i in range(100, 110)]))
    kept = {f.file_name for sp in t.plan(2) for f in sp.files if f.min_sequence_number >= 10}
    assert t.snapshot(t.latest_snapshot_id()).commit_kind == "COMPACT"
    files = [f for sp in t.plan() for f in sp.files]
    assert {f.level for f in files} == {2}  # num-levels = trigger + 1
    assert kept <= {f.file_name for f in files}  # the fresh file was upgraded by metadata
    assert [r[0] for r in _read(t)] == [0, 2, 4, 6, 8] + list(range(100, 110))


# --- changelog and deletion vectors ------------------------------------------------------------------------------
def _changes(t, start, end):
    return sorted((r["_row_kind"], r["id"], r["ts"], r["a"]) for r in t.read_changes(start, end).to_pylist())


def test_full_compaction_changelog_has_no_delete_for_expired_rows(tmp_path):
    t = _top_level_table(tmp_path, [(1, OLD, 1), (2, FRESH, 2)],
                         **{"changelog-producer": "full-compaction"})
    base = t.latest_snapshot_id()
    t.write(_rows([(3, FRESH, 3)]))
    sid = t.compact(full=True)
    assert _read(t) == [(2, FRESH, 2), (3, FRESH, 3)]
    assert _changes(t, base, sid) == [("+I", 3, FRESH, 3)]  # no -D for the expired key 1


def test_lookup_changelog_does_not_find_an_expired_older_record(tmp_path):
    t = _top_level_table(tmp_path, [(1, OLD, 1), (2, FRESH, 2)], **{"changelog-producer": "lookup"})
    t.alter().set_option("write-only", "false").commit()
    base = t.latest_snapshot_id()
    sid = t.write(_rows([(1, FRESH, 10), (2, FRESH, 20)]))
    assert _changes(t, base, t.latest_snapshot_id()) == [("+I", 1, FRESH, 10), ("+U", 2, FRESH, 20),
                                                         ("-U", 2, FRESH, 2)]
    assert sid and _read(t) == [(1, FRESH, 10), (2, FRESH, 20)]


@pytest.mark.parametrize("options", [{"deletion-vectors.enabled": "true"},
                                     {"deletion-vectors.enabled": "true", "changelog-producer": "lookup"},
                                     {"changelog-producer": "lookup"}])
def test_a_level_0_file_with_expired_rows_but_no_statistics_is_rewritten_not_upgraded(tmp_path, options):
    # Without statistics (stats-mode none here; pypaimon writes none at all) a level-0 file's expired rows show
    # only when it is read. A deduplicate lookup compaction may upgrade such a file after reading it for its
    # lookups; had it kept the expired row, which looked nothing up, the key's older row would stay live next to
    # it (a duplicate key in a deletion-vector read) or be shadowed by it with no changelog saying so. The file is
    # rewritten instead: the expired row goes, the older row stays the key's value, and no changelog is written.
    t = _table(tmp_path, {**EXPIRE, **options, "metadata.stats-mode": "none"})
    t.write(_rows([(1, FRESH, 1), (2, FRESH, 2)]))
    base = t.latest_snapshot_id()
    t.write(_rows([(1, OLD, 10)]))
    assert _read(t) == _pp_read(tmp_path) == [(1, FRESH, 1), (2, FRESH, 2)]
    assert 0 not in {f.level for sp in t.plan() for f in sp.files}
    if "changelog-producer" in options:
        assert _changes(t, base, t.latest_snapshot_id()) == []


@pytest.mark.parametrize("options", [{}, {"merge-engine": "aggregation", "fields.a.aggregate-function": "sum"},
                                     {"changelog-producer": "lookup"}])
def test_deletion_vectors_mark_an_expired_older_record_deleted(tmp_path, options):
    # Java's lookup does not find the expired row, so it would stay live next to the new one in a
    # deletion-vector read; lakemerge marks it deleted instead (a documented difference). The new value is not
    # merged with the expired one (aggregation: 10, not 11), as in Java.
    t = _top_level_table(tmp_path, [(1, OLD, 1), (2, FRESH, 2)], **{"deletion-vectors.enabled": "true", **options})
    t.alter().set_option("write-only", "false").commit()
    t.write(_rows([(1, FRESH, 10)]))
    assert any(f.level == 0 for sp in t.plan() for f in sp.files) is False
    assert _read(t) == [(1, FRESH, 10), (2, FRESH, 2)]
    assert _pp_read(tmp_path) == _read(t)


def test_lakemerge_expires_rows_of_a_table_pypaimon_created_and_wrote(tmp_path):
    from tests.interop.pypaimon_util import pp_catalog, pp_create_table, pp_write
    pp = pp_create_table(pp_catalog(str(tmp_path)), "db.t", SCHEMA, ["id"],
                         options={"bucket": "1", **EXPIRE})
    pp_write(pp, _rows([(1, OLD, 1), (2, FRESH, 2)]))
    pp_write(pp, _rows([(3, OLD, 3), (4, None, 4)]))
    t = Catalog(str(tmp_path)).get_table("db.t")
    assert [r[0] for r in _read(t)] == [1, 2, 3, 4]  # reads keep expired rows
    t.compact(full=True)
    assert _read(t) == _pp_read(tmp_path) == [(2, FRESH, 2), (4, None, 4)]


def test_a_pypaimon_level_0_file_with_an_expired_row_leaves_no_duplicate_key_in_a_deletion_vector_table(tmp_path):
    # pypaimon writes no value statistics: the expired row shows only when lakemerge's lookup compaction reads the
    # file, which is then rewritten without it (see the statistics-less test above)
    from tests.interop.pypaimon_util import pp_catalog, pp_create_table, pp_write
    pp = pp_create_table(pp_catalog(str(tmp_path)), "db.t", SCHEMA, ["id"],
                         options={"bucket": "1", "deletion-vectors.enabled": "true", **EXPIRE})
    pp_write(pp, _rows([(1, FRESH, 1), (2, FRESH, 2)]))
    t = Catalog(str(tmp_path)).get_table("db.t")
    t.compact(full=True)
    pp_write(pp, _rows([(1, OLD, 10)]))
    t.compact()  # level 0 up: a lookup compaction
    assert 0 not in {f.level for sp in t.plan() for f in sp.files}
    assert _read(t) == _pp_read(tmp_path) == [(1, FRESH, 1), (2, FRESH, 2)]
