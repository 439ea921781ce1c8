"""Automatic tags after commits (engine.maintenance.auto_tags), as Paimon's TagAutoManagerTest drives them: each
commit happens at a faked time (``time.time`` patched; it gives the snapshot time and "now"), the tags are checked
after it. Times are UTC (``sink.process-time-zone``)."""
from __future__ import annotations

import datetime as dt
import json
import os
import time

import pyarrow as pa
import pytest

from engine import Catalog
from engine.errors import InvalidInput, InvalidOption
from engine.maintenance.auto_tags import TagPeriod, parse_zone_id
from engine.options import TableOptions
from engine.system_tables import system_table

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])
HOURLY = {"tag.automatic-creation": "process-time", "tag.creation-period": "hourly", "sink.process-time-zone": "UTC"}


@pytest.fixture
def cat(tmp_path):
    c = Catalog(str(tmp_path / "wh"))
    c.create_database("db")
    return c


@pytest.fixture
def clock(monkeypatch):
    """``clock("2023-07-18T12:00:00")`` sets the UTC time every later commit (and tag creation) sees."""
    now = {"t": time.time()}
    monkeypatch.setattr(time, "time", lambda: now["t"])

    def set_time(iso: str) -> None:
        now["t"] = dt.datetime.fromisoformat(iso).replace(tzinfo=dt.timezone.utc).timestamp()
    return set_time


def _table(cat, options, name="db.t"):
    return cat.create_table(name, SCHEMA, primary_key=["id"],
                            options={"bucket": "1", "num-sorted-run.compaction-trigger": "100", **options})


def _commit_at(t, clock, iso, i=None):
    clock(iso)
    i = t.latest_snapshot_id() or 0 if i is None else i
    return t.write(pa.table({"id": [i], "v": [iso]}, schema=SCHEMA))


def _tags(t):
    return {name: snap.id for name, snap in t.tags().items()}


def test_hourly_tags_and_num_retained_max(cat, clock):
    """Paimon's TagAutoManagerTest.testTag with process time: the first commit tags the previous hour, a period is
    tagged by the first snapshot at or after its end, and only 3 automatic tags stay."""
    t = _table(cat, {**HOURLY, "tag.num-retained-max": "3"})
    _commit_at(t, clock, "2023-07-18T12:12:00")
    assert _tags(t) == {"2023-07-18 11": 1}
    _commit_at(t, clock, "2023-07-18T12:59:00")
    assert _tags(t) == {"2023-07-18 11": 1}
    _commit_at(t, clock, "2023-07-18T13:00:00")  # just in time: snapshot 3 closes hour 12
    assert _tags(t) == {"2023-07-18 11": 1, "2023-07-18 12": 3}
    _commit_at(t, clock, "2023-07-18T14:00:00")
    _commit_at(t, clock, "2023-07-18T15:00:00")
    assert _tags(t) == {"2023-07-18 12": 3, "2023-07-18 13": 4, "2023-07-18 14": 5}
    # the tag is the snapshot that closed the period, and reads as it
    assert sorted(r["id"] for r in t.read(tag="2023-07-18 12").to_pylist()) == [0, 1, 2]


def test_restart_after_snapshot_expiration(cat, clock):
    """State comes back from the newest automatic tag; snapshots expired meanwhile are skipped (testTag's
    second half). The expired tagged snapshots stay readable through their tags."""
    t = _table(cat, {**HOURLY, "tag.num-retained-max": "3", "snapshot.num-retained.min": "1",
                     "snapshot.num-retained.max": "1"})
    for iso in ("2023-07-18T12:12:00", "2023-07-18T13:00:00", "2023-07-18T14:00:00", "2023-07-18T15:00:00",
                "2023-07-18T15:01:00", "2023-07-18T15:02:00", "2023-07-18T16:00:00"):
        _commit_at(t, clock, iso)
    assert t.snapshot_manager.ids() == [7]
    assert _tags(t) == {"2023-07-18 13": 3, "2023-07-18 14": 4, "2023-07-18 15": 7}
    assert sorted(r["id"] for r in t.read(tag="2023-07-18 13").to_pylist()) == [0, 1, 2]
    assert t.check().ok


def test_creation_delay(cat, clock):
    """testTagDelay: the first commit tags anyway; later a period is tagged once time - delay reaches its end."""
    t = _table(cat, {**HOURLY, "tag.creation-delay": "10 s"})
    _commit_at(t, clock, "2023-07-18T12:00:09")
    assert list(_tags(t)) == ["2023-07-18 11"]
    _commit_at(t, clock, "2023-07-18T13:00:09")
    assert list(_tags(t)) == ["2023-07-18 11"]
    _commit_at(t, clock, "2023-07-18T13:00:10")
    assert _tags(t) == {"2023-07-18 11": 1, "2023-07-18 12": 3}


def test_at_most_one_tag_per_period_and_skipped_periods_without_completion(cat, clock):
    t = _table(cat, {**HOURLY})
    _commit_at(t, clock, "2024-06-26T16:12:00")
    _commit_at(t, clock, "2024-06-26T18:05:00")  # hours 16 and 17 passed: only the hour before is tagged
    _commit_at(t, clock, "2024-06-26T18:10:00")
    assert _tags(t) == {"2024-06-26 15": 1, "2024-06-26 17": 2}


def test_automatic_completion(cat, clock):
    """testAutoCompleteTags: missed periods are tagged one per later snapshot."""
    t = _table(cat, {**HOURLY, "tag.automatic-completion": "true", "tag.num-retained-max": "3"})
    _commit_at(t, clock, "2024-06-26T16:12:00")
    assert _tags(t) == {"2024-06-26 15": 1}
    _commit_at(t, clock, "2024-06-26T18:05:00")
    assert _tags(t) == {"2024-06-26 15": 1, "2024-06-26 16": 2}
    _commit_at(t, clock, "2024-06-26T18:10:00")
    assert _tags(t) == {"2024-06-26 15": 1, "2024-06-26 16": 2, "2024-06-26 17": 3}


@pytest.mark.parametrize("options,times,names", [
    ({"tag.creation-period": "daily"}, ["2023-07-18T12:00:01", "2023-07-19T00:00:00"], ["2023-07-17", "2023-07-18"]),
    ({"tag.creation-period": "daily", "tag.period-formatter": "without_dashes"},
     ["2023-07-18T12:00:01", "2023-07-19T03:00:00"], ["20230717", "20230718"]),
    ({"tag.period-formatter": "without_dashes"}, ["2023-07-18T12:00:01"], ["20230718 11"]),
    ({"tag.period-formatter": "without_dashes_and_spaces"}, ["2023-07-18T12:00:01", "2023-07-18T13:30:00"],
     ["2023071811", "2023071812"]),
    ({"tag.creation-period": "two-hours", "tag.period-formatter": "without_dashes"},
     ["2023-07-18T12:00:01", "2023-07-18T13:59:00", "2023-07-18T14:00:00"], ["2023-07-18 10", "2023-07-18 12"]),
    ({"tag.creation-period-duration": "15 min", "tag.creation-period": "daily"},
     ["2023-07-18T12:20:00", "2023-07-18T12:31:00"], ["202307181200", "202307181215"]),
])
def test_periods_and_name_formats(cat, clock, options, times, names):
    t = _table(cat, {**HOURLY, **options})
    for iso in times:
        _commit_at(t, clock, iso)
    assert sorted(_tags(t)) == names


def test_process_time_zone(cat, clock):
    t = _table(cat, {**HOURLY, "sink.process-time-zone": "GMT+08:00"})
    _commit_at(t, clock, "2023-07-18T20:10:00")  # 04:10 on the 19th in +08:00
    assert list(_tags(t)) == ["2023-07-19 03"]


def test_num_retained_max_keeps_manual_tags(cat, clock):
    """testOnlyExpireAutoCreatedTag: only tags named in the period format count (and go)."""
    t = _table(cat, {**HOURLY, "tag.num-retained-max": "1"})
    _commit_at(t, clock, "2023-07-18T12:12:00")
    t.create_tag("many-tags-test")
    assert _tags(t) == {"2023-07-18 11": 1, "many-tags-test": 1}
    _commit_at(t, clock, "2023-07-18T13:13:00")
    _commit_at(t, clock, "2023-07-18T14:13:00")
    assert _tags(t) == {"2023-07-18 13": 3, "many-tags-test": 1}


def test_a_second_auto_tag_on_one_snapshot_is_refused(cat, clock):
    """testMultiAutoTagsOnOneSnapshot: a manual tag in the automatic format on an auto-tagged snapshot fails."""
    t = _table(cat, {**HOURLY, "tag.creation-period": "daily"})
    _commit_at(t, clock, "2023-07-18T12:00:01")
    assert list(_tags(t)) == ["2023-07-17"]
    with pytest.raises(InvalidInput, match="already auto-tagged"):
        t.create_tag("2023-07-18", 1)
    t.create_tag("eod", 1)  # other names are fine
    assert sorted(_tags(t)) == ["2023-07-17", "eod"]


def test_changing_the_period_keeps_going_from_the_old_tags(cat, clock):
    """testModifyTagPeriod: hourly tags are not in the daily format, so daily starts afresh."""
    t = _table(cat, HOURLY)
    _commit_at(t, clock, "2023-07-18T12:00:09")
    t.alter().set_option("tag.creation-period", "daily").commit()
    t = cat.get_table("db.t")
    _commit_at(t, clock, "2023-07-20T12:00:01")
    assert {"2023-07-18 11", "2023-07-19"} <= set(_tags(t))


def test_time_retained_expires_tags_after_commits(cat, clock):
    """testAutoCreateTagNotExpiredByTimeRetained and Paimon's TagTimeExpire: after a commit (its tags created
    first), tags with a create time and a time retained go once it has passed, manual ones too
    (tag.default-time-retained applies to create_tag); tags without a retention stay."""
    t = _table(cat, {**HOURLY, "tag.num-retained-max": "3"})
    _commit_at(t, clock, "2023-07-18T12:12:00")
    t.create_tag("forever")
    t.alter().set_option("tag.default-time-retained", "30 min").commit()
    t = cat.get_table("db.t")
    t.create_tag("manual-with-default")
    t.create_tag("explicit", time_retained=dt.timedelta(hours=5))
    _commit_at(t, clock, "2023-07-18T13:00:00")
    assert _tags(t) == {"2023-07-18 11": 1, "2023-07-18 12": 2, "explicit": 1, "forever": 1}
    rows = {r["tag_name"]: r for r in system_table(t, "tags").read().to_pylist()}
    assert rows["2023-07-18 12"]["time_retained"] == "PT30M" and rows["explicit"]["time_retained"] == "PT5H"
    assert rows["2023-07-18 12"]["create_time"] == dt.datetime.fromtimestamp(time.time())
    assert rows["forever"]["create_time"] is None and rows["forever"]["time_retained"] is None
    clock("2023-07-18T13:31:00")
    t.expire_snapshots()  # not a commit: tags stay
    assert "2023-07-18 12" in _tags(t)
    _commit_at(t, clock, "2023-07-18T14:00:00")  # tags hour 13, then expires hour 12's tag
    assert _tags(t) == {"2023-07-18 11": 1, "2023-07-18 13": 3, "explicit": 1, "forever": 1}
    assert sorted(r["id"] for r in t.read(tag="2023-07-18 13").to_pylist()) == [0, 1, 2]


def test_a_period_whose_tag_expired_is_not_tagged_again(cat, clock):
    """Paimon's TagAutoCreation keeps its progress in the commit object: once every automatic tag expired (retention
    shorter than the period), later commits of the same process tag only new periods; a new process restores as a
    new Paimon commit object does (no automatic tag: from the earliest snapshot, tagging its previous period)."""
    from engine.maintenance import auto_tags
    t = _table(cat, {**HOURLY, "tag.default-time-retained": "30 min"})
    _commit_at(t, clock, "2023-07-18T12:12:00")
    assert _tags(t) == {"2023-07-18 11": 1}
    _commit_at(t, clock, "2023-07-18T12:50:00")  # hour 11's tag expires
    assert _tags(t) == {}
    _commit_at(t, clock, "2023-07-18T12:55:00")
    assert _tags(t) == {}
    _commit_at(t, clock, "2023-07-18T13:00:00")
    assert _tags(t) == {"2023-07-18 12": 4}
    _commit_at(t, clock, "2023-07-18T13:40:00")  # hour 12's tag expires
    assert _tags(t) == {}
    auto_tags._PROGRESS.clear()  # as a new process
    _commit_at(t, clock, "2023-07-18T13:45:00")
    assert _tags(t) == {"2023-07-18 11": 1, "2023-07-18 12": 4}


def test_a_commit_reads_only_the_snapshots_since_the_previous_one(cat, clock, monkeypatch):
    """The progress kept between commits spares each commit re-reading every snapshot since the newest automatic
    tag (the commit reads the new snapshot, and the last visited one to check it is still there)."""
    from engine.maintenance import auto_tags
    from engine.snapshots import SnapshotManager
    t = _table(cat, HOURLY)
    for minute in range(10, 20):
        _commit_at(t, clock, f"2023-07-18T12:{minute}:00")
    assert _tags(t) == {"2023-07-18 11": 1}
    real, real_create, read, tagging = SnapshotManager.snapshot, auto_tags.create_period_tags, [], [False]

    def spy(self, sid):
        if tagging[0]:
            read.append(sid)
        return real(self, sid)

    def create(table):
        tagging[0] = True
        try:
            return real_create(table)
        finally:
            tagging[0] = False
    monkeypatch.setattr(SnapshotManager, "snapshot", spy)
    monkeypatch.setattr(auto_tags, "create_period_tags", create)
    assert auto_tags.create_period_tags(t) == [] and read == [10]  # nothing new: only the last visited is checked
    read.clear()
    clock("2023-07-18T13:00:00")
    t.write(pa.table({"id": [7], "v": ["x"]}, schema=SCHEMA))  # snapshot 11 closes hour 12
    assert read == [10, 11]
    assert _tags(t) == {"2023-07-18 11": 1, "2023-07-18 12": 11}


def test_create_tag_with_default_time_retained_but_expiration_disabled(cat, clock):
    t = _table(cat, {"tag.default-time-retained": "1 min", "tag.time-expire-enabled": "false"})
    _commit_at(t, clock, "2023-07-18T12:00:00")
    t.create_tag("short")
    _commit_at(t, clock, "2023-07-18T13:00:00")
    assert list(_tags(t)) == ["short"]
    with open(os.path.join(t.root, "tag", "tag-short")) as f:
        raw = json.load(f)
    assert raw["tagCreateTime"][:5] == list(dt.datetime.fromtimestamp(
        dt.datetime(2023, 7, 18, 12, tzinfo=dt.timezone.utc).timestamp()).timetuple())[:5]
    assert raw["tagTimeRetained"] == 60


def test_batch_mode_tags_the_latest_snapshot_after_each_batch_commit(cat, clock):
    """Paimon's TagBatchCreation: batch-write-<date>, replaced by the next batch commit of that day."""
    t = _table(cat, {"tag.automatic-creation": "batch", "sink.process-time-zone": "UTC"})
    _commit_at(t, clock, "2023-07-18T12:00:00")
    assert _tags(t) == {"batch-write-2023-07-18": 1}
    _commit_at(t, clock, "2023-07-18T23:00:00")
    assert _tags(t) == {"batch-write-2023-07-18": 2}
    _commit_at(t, clock, "2023-07-19T01:00:00")
    assert _tags(t) == {"batch-write-2023-07-18": 2, "batch-write-2023-07-19": 3}
    assert sorted(r["id"] for r in t.read(tag="batch-write-2023-07-18").to_pylist()) == [0, 1]


def test_batch_mode_customized_name_and_num_retained_max_counts_every_tag(cat, clock):
    """TagBatchCreation.expireTag counts all tags, manual ones included (unlike process-time mode)."""
    t = _table(cat, {"sink.process-time-zone": "UTC"})
    _commit_at(t, clock, "2023-07-18T12:00:00")
    t.create_tag("manual")
    t.alter().set_option("tag.automatic-creation", "batch").set_option("tag.batch.customized-name", "daily-load") \
        .set_option("tag.num-retained-max", "1").commit()
    t = cat.get_table("db.t")
    _commit_at(t, clock, "2023-07-19T12:00:00")
    assert _tags(t) == {"daily-load": 2}


def test_success_files(cat, clock):
    """tag.create-success-file: tag/tag-success-file/<name>_SUCCESS (Paimon's SuccessFileTagCallback); that
    directory is no tag for listing, $tags or check, and deleting the tag deletes its success file."""
    t = _table(cat, {**HOURLY, "tag.create-success-file": "true"})
    _commit_at(t, clock, "2023-07-18T12:12:00")
    path = os.path.join(t.root, "tag", "tag-success-file", "2023-07-18 11_SUCCESS")
    ms = int(time.time() * 1000)
    with open(path) as f:
        assert json.load(f) == {"creationTime": ms, "modificationTime": ms}
    t.create_tag("manual")
    assert os.path.exists(os.path.join(t.root, "tag", "tag-success-file", "manual_SUCCESS"))
    assert sorted(_tags(t)) == ["2023-07-18 11", "manual"]
    assert sorted(r["tag_name"] for r in system_table(t, "tags").read().to_pylist()) == ["2023-07-18 11", "manual"]
    report = t.check()
    assert report.ok and report.orphan_files == []  # success files are tag metadata, not orphans
    t.delete_tag("manual")
    assert not os.path.exists(os.path.join(t.root, "tag", "tag-success-file", "manual_SUCCESS"))


def test_write_only_creates_no_tags(cat, clock):
    t = _table(cat, {**HOURLY, "write-only": "true"})
    _commit_at(t, clock, "2023-07-18T12:12:00")
    assert _tags(t) == {}


@pytest.mark.parametrize("options,key", [
    ({"tag.automatic-creation": "sometimes"}, "tag.automatic-creation"),
    ({"tag.automatic-creation": "watermark"}, "tag.automatic-creation"),
    ({"tag.creation-period": "weekly"}, "tag.creation-period"),
    ({"tag.period-formatter": "with_slashes"}, "tag.period-formatter"),
    ({"tag.creation-period-duration": "0 s"}, "tag.creation-period-duration"),
    ({"tag.num-retained-max": "-1"}, "tag.num-retained-max"),
    ({"tag.default-time-retained": "soon"}, "tag.default-time-retained"),
    ({"sink.process-time-zone": "Mars/Olympus"}, "sink.process-time-zone"),
    ({"tag.automatic-creation": "process-time", "tag.creation-period": "hourly", "tag.creation-delay": "1 h"},
     "tag.creation-delay"),
])
def test_invalid_options_are_refused_at_create_and_alter(cat, options, key):
    with pytest.raises(InvalidOption) as e:
        _table(cat, options)
    assert e.value.key == key
    t = _table(cat, {}, name="db.ok")
    change = t.alter()
    for k, v in options.items():
        change = change.set_option(k, v)
    with pytest.raises(InvalidOption):
        change.commit()


def test_tag_options_are_known():
    opts = TableOptions({**HOURLY, "tag.num-retained-max": "3", "tag.creation-delay": "10 min",
                         "tag.batch.customized-name": "x", "tag.create-success-file": "true"})
    assert opts.unknown_keys() == []


def test_period_names_parse_strictly():
    daily = TagPeriod.of(TableOptions({"tag.creation-period": "daily"}))
    assert daily.start_of("2023-07-18") == dt.datetime(2023, 7, 18)
    assert daily.start_of("2023-07-18 10") == dt.datetime(2023, 7, 18)  # Paimon reads a daily name up to a blank
    assert daily.start_of("2023-02-30") is None and daily.start_of("2023-7-18") is None
    hourly = TagPeriod.of(TableOptions({"tag.creation-period": "hourly"}))
    assert hourly.start_of("2023-07-18 24") is None and hourly.start_of("2023-07-18") is None
    assert hourly.previous_start(dt.datetime(2023, 7, 18, 0, 30)) == dt.datetime(2023, 7, 17, 23)
    assert parse_zone_id("-05:30").utcoffset(None) == -dt.timedelta(hours=5, minutes=30)


def test_branch_auto_tags_with_success_files_fast_forward(cat, clock):
    """A branch's commits tag into the branch's tag/ (its own success files too); fast-forwarding main to it copies
    the tags, not the success-file directory."""
    t = _table(cat, {**HOURLY, "tag.create-success-file": "true"})
    _commit_at(t, clock, "2023-07-18T12:12:00")
    t.create_branch("b1", "2023-07-18 11")
    b = t.branch("b1")
    _commit_at(b, clock, "2023-07-18T13:05:00", i=7)
    assert _tags(b) == {"2023-07-18 11": 1, "2023-07-18 12": 2}
    assert os.path.exists(os.path.join(b.paths.meta_root, "tag", "tag-success-file", "2023-07-18 12_SUCCESS"))
    assert t.check().orphan_files == []
    t.fast_forward("b1")
    t = cat.get_table("db.t")
    assert _tags(t) == {"2023-07-18 11": 1, "2023-07-18 12": 2}
    assert sorted(r["id"] for r in t.read(tag="2023-07-18 12").to_pylist()) == [0, 7]



def test_a_watermark_table_created_elsewhere_stays_alterable(cat, clock):
    """Paimon validates tag.automatic-creation at no schema change, so a Flink job may have created a table with
    watermark tags; lakemerge refuses to switch a table to watermark, but other alters of such a table work."""
    t = _table(cat, {"sink.process-time-zone": "UTC"})
    _commit_at(t, clock, "2023-07-18T12:00:00")
    path = os.path.join(t.root, "schema", "schema-0")
    with open(path) as f:
        js = json.load(f)
    js["options"]["tag.automatic-creation"] = "watermark"
    with open(path, "w") as f:
        json.dump(js, f)
    t = cat.get_table("db.t")
    _commit_at(t, clock, "2023-07-18T13:00:00")  # no snapshot has a watermark: no tag, no error
    assert _tags(t) == {}
    t.alter().set_option("snapshot.num-retained.max", "50").add_column("w", pa.string()).commit()
    t = cat.get_table("db.t")
    assert t.schema.options["tag.automatic-creation"] == "watermark" and "w" in t.schema.field_names
    u = _table(cat, {}, name="db.u")
    with pytest.raises(InvalidOption):
        u.alter().set_option("tag.automatic-creation", "watermark").commit()


def test_a_tag_cannot_take_the_success_file_directory_name(cat, clock):
    """``tag/tag-success-file`` is the success-file directory (Paimon's SuccessFileTagCallback), never listed as a
    tag: a tag named ``success-file`` would be invisible to listing and to snapshot expiration, so it is refused."""
    t = _table(cat, {})
    _commit_at(t, clock, "2023-07-18T12:00:00")
    with pytest.raises(InvalidInput, match="success-file"):
        t.create_tag("success-file")
    assert _tags(t) == {}
    t.alter().set_option("tag.automatic-creation", "batch").set_option("tag.batch.customized-name", "success-file") \
        .commit()
    t = cat.get_table("db.t")
    _commit_at(t, clock, "2023-07-18T13:00:00")  # the batch tag is refused too (logged), nothing is written
    assert not os.path.exists(os.path.join(t.root, "tag", "tag-success-file"))


def test_batch_retention_deletes_the_older_tag_file_of_a_snapshot_first(cat, clock):
    """TagBatchCreation.expireTag: among tags of one snapshot, the oldest tag files (modification time) go first --
    here the automatic tag written before the manual one, whatever their names sort as."""
    t = _table(cat, {"tag.automatic-creation": "batch", "sink.process-time-zone": "UTC", "tag.num-retained-max": "2"})
    _commit_at(t, clock, "2023-07-18T12:00:00")
    t.create_tag("a-release")
    os.utime(os.path.join(t.root, "tag", "tag-batch-write-2023-07-18"), (1_000_000, 1_000_000))
    os.utime(os.path.join(t.root, "tag", "tag-a-release"), (2_000_000, 2_000_000))
    _commit_at(t, clock, "2023-07-19T12:00:00")
    assert _tags(t) == {"a-release": 1, "batch-write-2023-07-19": 2}


def test_a_tag_with_retention_keeps_a_commit_user_that_looks_like_the_json_placeholder(cat):
    """The tag JSON writes the retention as Jackson's decimal seconds through a placeholder; a commit user equal to
    an old fixed placeholder text is kept as written."""
    t = _table(cat, {})
    with t.new_write(commit_user="@retained@") as w:
        w.write(pa.table({"id": [1], "v": ["a"]}, schema=SCHEMA))
        messages = w.prepare_commit()
    t.commit(messages)
    t.create_tag("kept", time_retained=dt.timedelta(hours=5))
    path = os.path.join(t.root, "tag", "tag-kept")
    with open(path) as f:
        text = f.read()
    doc = json.loads(text)
    assert doc["commitUser"] == "@retained@"
    assert doc["tagTimeRetained"] == 18000.0 and "18000.000000000" in text
