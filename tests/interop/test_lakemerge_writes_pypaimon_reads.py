"""Tables written by lakemerge are read by pypaimon 2.1.0 with the expected rows at every snapshot.

Expected rows come from a plain dict model of the writes (lakemerge writes correct _DELETE_ROW_COUNTs, so
pypaimon has no excuse for phantom rows here). Every data file must also sit where pypaimon would put it: the
bucket of each row is recomputed with pypaimon's FixedBucketRowKeyExtractor and the partition directory
with pypaimon's path factory.
"""
from __future__ import annotations

import os
import pickle
import random

import pyarrow as pa
import pytest

from tests.interop.dict_model import DictModel
from tests.interop.pypaimon_util import (
    SYSTEM_DIRS,
    assert_rows_equal,
    check_bucket_placement,
    check_file_metadata,
    pp_arrow_schema,
    pp_get_table,
    pp_partition_dir,
    pp_read,
    pp_snapshot_ids,
    pp_write,
    rows_of,
    table_path,
)
from tests.interop.scenarios import (
    MANY_TYPES_PK,
    MANY_TYPES_SCHEMA,
    PARTITIONS,
    Scenario,
    all_scenarios,
    many_types_keys,
    many_types_row,
)

pytestmark = pytest.mark.interop


def lm_catalog(warehouse):
    from engine import Catalog

    cat = Catalog(warehouse)
    cat.create_database("db", ignore_if_exists=True)
    return cat


def verify(warehouse: str, identifier: str, model: DictModel, snapshot_ids: list[int], lm_table=None,
           files: bool = True):
    """pypaimon (and lakemerge) read every snapshot as the model says; files sit where pypaimon expects."""
    pk = model.primary_key
    pp = pp_get_table(warehouse, identifier)
    assert set(snapshot_ids) <= set(model.snapshot_ids())
    snapshot_ids = model.snapshot_ids()  # with the COMPACT snapshots that writes' compactions published
    assert pp_snapshot_ids(pp) == snapshot_ids, "pypaimon sees a different list of snapshots"
    for sid in snapshot_ids:
        expected = model.live_rows(sid)
        got = pp_read(pp, sid)
        assert_rows_equal(rows_of(got, pk), expected, pk,
                          f"{identifier} snapshot {sid}: pypaimon's read of the lakemerge table (actual) vs model:")
        if files:
            check_file_metadata(pp, sid)
        if lm_table is not None:
            mine = lm_table.read(snapshot_id=sid)
            assert [(f.name, f.type) for f in mine.schema] == [(f.name, f.type) for f in model.schema], \
                f"{identifier} snapshot {sid}: lakemerge's read does not return the table's Arrow schema"
            assert_rows_equal(rows_of(mine, pk), expected, pk,
                              f"{identifier} snapshot {sid}: lakemerge's own read (actual) vs model:")
    if files:
        check_bucket_placement(pp, table_path(warehouse, identifier))
    return pp


# ------------------------------------------------------------------------------------------------------
# the shared scenarios (deletes via rowkind.field, sequence.field, partitions, buckets, many snapshots, types)
# ------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module", params=all_scenarios(), ids=lambda s: s.name)
def lm_written(request, tmp_path_factory):
    sc: Scenario = request.param
    wh = str(tmp_path_factory.mktemp("lm-" + sc.name) / "warehouse")
    cat = lm_catalog(wh)
    t = cat.create_table(sc.identifier, schema=sc.schema, primary_key=sc.primary_key,
                         partition_keys=sc.partition_keys, options=sc.options)
    model = DictModel(sc.schema, sc.primary_key, sc.sequence_fields, rowkind_field="rk")
    sids = []
    for i in range(len(sc.commits)):
        data = sc.commit_table(i)
        if i % 2 == 1:
            data = data.to_batches(max_chunksize=data.num_rows)[0] if data.num_rows else data
        sid = t.write(data)
        model.apply(sc.commit_table(i))
        model.commit(sid)
        sids.append(sid)
    return sc, wh, t, model, sids


def test_pypaimon_reads_lakemerge_table_at_every_snapshot(lm_written):
    sc, wh, t, model, sids = lm_written
    assert sids == sorted(set(sids)) and len(sids) == len(sc.commits)
    assert [s.id for s in t.snapshots()] == model.snapshot_ids()
    pp = verify(wh, sc.identifier, model, sids, lm_table=t)
    # pypaimon derives the same Arrow schema from lakemerge's schema file
    assert [(f.name, f.type) for f in pp_arrow_schema(pp)] == [(f.name, f.type) for f in sc.schema]
    assert list(pp.table_schema.primary_keys) == sc.primary_key
    assert list(pp.table_schema.partition_keys) == sc.partition_keys
    for k, v in sc.options.items():
        assert pp.table_schema.options.get(k) == v


def test_partition_directory_names_match_pypaimon(lm_written):
    sc, wh, t, model, sids = lm_written
    pp = pp_get_table(wh, sc.identifier)
    root = table_path(wh, sc.identifier)
    if not sc.partition_keys:
        top = {d for d in os.listdir(root) if d not in SYSTEM_DIRS}
        assert top and all(d.startswith("bucket-") for d in top), f"unpartitioned table has {sorted(top)}"
        return
    written_parts = {tuple(r[k] for k in sc.partition_keys) for c in sc.commits for r in c}
    expected = {pp_partition_dir(pp, p) for p in written_parts}
    actual = set()
    for d, dirs, files in os.walk(root):
        rel = os.path.relpath(d, root).replace(os.sep, "/")
        if rel == ".":
            dirs[:] = [x for x in dirs if x not in SYSTEM_DIRS]
            continue
        if any(x.startswith("bucket-") for x in dirs):
            actual.add(rel)
    assert actual == expected
    if sc.name == "partitioned":
        assert {"dt=a%2Fb%3Ac%3Dd", "dt=__DEFAULT_PARTITION__", "dt=2024-01-01"} <= actual
    if sc.partition_keys == ["k_date", "k_int"]:
        assert any(p.startswith("k_date=19478/k_int=") for p in actual)  # DATE as days since epoch


# ------------------------------------------------------------------------------------------------------
# lakemerge-only ways to write: row_kinds=, delete(), new_write()
# ------------------------------------------------------------------------------------------------------
SIMPLE = pa.schema([("dt", pa.string()), ("id", pa.int64()), ("name", pa.string()), ("score", pa.float64())])
SIMPLE_PK = ["dt", "id"]


def _simple(rows):
    return pa.Table.from_pylist([dict(zip(SIMPLE.names, r)) for r in rows], schema=SIMPLE)


def test_row_kinds_argument(warehouse):
    cat = lm_catalog(warehouse)
    t = cat.create_table("db.kinds", schema=SIMPLE, primary_key=SIMPLE_PK, partition_keys=["dt"],
                         options={"bucket": "3"})
    model = DictModel(SIMPLE, SIMPLE_PK)
    sids = []

    def step(data, kinds=None, model_kinds=None):
        sid = t.write(data) if kinds is None else t.write(data, row_kinds=kinds)
        model.apply(data, model_kinds if model_kinds is not None else kinds)
        model.commit(sid)
        sids.append(sid)

    step(_simple([("d1", i, f"a{i}", i / 2) for i in range(30)] + [("d2", i, f"b{i}", -i) for i in range(10)]))
    step(_simple([("d1", 1, "x", 1.0), ("d1", 2, "y", 2.0), ("d1", 3, "z", 3.0), ("d2", 4, "w", 4.0),
                  ("d3", 99, "never", 0.0)]),
         ["-D", "+U", "-U", "+I", "-D"])
    codes = [3, 2, 0, 1, 0, 3]
    data = _simple([("d1", 2, "y2", 2.5), ("d1", 3, "z2", 3.5), ("d1", 1, "back", 1.5), ("d2", 5, "g", 5.0),
                    ("d3", 7, "new", 7.0), ("d3", 7, "new", 7.0)])
    step(data, codes, [{0: "+I", 1: "-U", 2: "+U", 3: "-D"}[c] for c in codes])
    codes = pa.array([0, 3, 2], pa.int8())
    step(_simple([("d2", 6, "h", 6.0), ("d2", 0, None, None), ("d1", 29, "last", 29.0)]), codes,
         ["+I", "-D", "+U"])
    verify(warehouse, "db.kinds", model, sids, lm_table=t)


def test_delete_by_keys(warehouse):
    cat = lm_catalog(warehouse)
    t = cat.create_table("db.del", schema=SIMPLE, primary_key=SIMPLE_PK, partition_keys=["dt"],
                         options={"bucket": "2"})
    model = DictModel(SIMPLE, SIMPLE_PK)
    sids = []
    data = _simple([(d, i, f"{d}-{i}", float(i)) for d in ("d1", "d2") for i in range(25)])
    sids.append(t.write(data))
    model.apply(data)
    model.commit(sids[-1])
    # keys only (just the primary-key columns), including keys that do not exist
    keys = pa.table({"dt": ["d1", "d1", "d2", "d9", "d1"], "id": pa.array([0, 7, 24, 1, 1000], pa.int64())})
    sids.append(t.delete(keys))
    model.delete(keys)
    model.commit(sids[-1])
    # full rows are accepted too
    rows = _simple([("d2", 3, "ignored", 0.0), ("d2", 4, None, None)])
    sids.append(t.delete(rows))
    model.delete(rows)
    model.commit(sids[-1])
    # re-insert a deleted key, then delete everything left in d1
    sids.append(t.write(_simple([("d1", 7, "again", 7.7)])))
    model.apply(_simple([("d1", 7, "again", 7.7)]))
    model.commit(sids[-1])
    left = pa.table({"dt": pa.array(["d1"] * 25), "id": pa.array(range(25), pa.int64())})
    sids.append(t.delete(left))
    model.delete(left)
    model.commit(sids[-1])
    assert sids == sorted(set(sids)) and len(sids) == 5
    verify(warehouse, "db.del", model, sids, lm_table=t)
    assert all(r["dt"] == "d2" for r in model.live_rows())


def test_new_write_several_batches_one_commit(warehouse):
    cat = lm_catalog(warehouse)
    t = cat.create_table("db.batches", schema=SIMPLE, primary_key=SIMPLE_PK, partition_keys=["dt"],
                         options={"bucket": "4"})
    model = DictModel(SIMPLE, SIMPLE_PK)
    sids = []
    first = _simple([(d, i, "v0", 0.0) for d in ("d1", "d2", "d3") for i in range(20)])
    sids.append(t.write(first))
    model.apply(first)
    model.commit(sids[-1])

    before = len(t.snapshots())
    with t.new_write() as w:
        b1 = _simple([("d1", i, "b1", 1.0) for i in range(0, 20, 2)])
        b2 = _simple([("d1", i, "b2", 2.0) for i in range(0, 20, 4)] + [("d4", 1, "b2", 2.0)])
        b3 = pa.table({"dt": ["d1", "d2", "d4"], "id": pa.array([4, 5, 1], pa.int64())})
        b4 = _simple([("d1", 4, "b4", 4.0), ("d2", 19, "b4", 4.0)])
        w.write(b1)
        w.write(b2.to_batches()[0])
        w.delete(b3)
        w.write(b4)
        messages = w.prepare_commit()
    assert len(t.snapshots()) == before, "prepare_commit must not publish a snapshot"
    messages = pickle.loads(pickle.dumps(messages))  # commit messages are picklable
    sids.append(t.commit(messages))
    for b in (b1, b2):
        model.apply(b)
    model.delete(b3)
    model.apply(b4)
    model.commit(sids[-1])
    assert sids == sorted(set(sids)) and len(sids) == 2
    assert len(t.snapshots()) == 2

    # two batches touching the same key in one commit: the later one wins
    with t.new_write() as w:
        w.write(_simple([("d3", 0, "first", 1.0)]))
        w.write(_simple([("d3", 0, "second", 2.0)]))
        sids.append(t.commit(w.prepare_commit()))
    model.apply(_simple([("d3", 0, "first", 1.0), ("d3", 0, "second", 2.0)]))
    model.commit(sids[-1])
    verify(warehouse, "db.batches", model, sids, lm_table=t)


def test_input_types(warehouse):
    pd = pytest.importorskip("pandas")
    cat = lm_catalog(warehouse)
    t = cat.create_table("db.inputs", schema=SIMPLE, primary_key=SIMPLE_PK, partition_keys=["dt"],
                         options={"bucket": "2"})
    model = DictModel(SIMPLE, SIMPLE_PK)
    sids = []
    a = _simple([("d1", i, f"t{i}", float(i)) for i in range(10)])
    b = _simple([("d1", i, f"rb{i}", -float(i)) for i in range(5, 15)])
    c = _simple([("d2", i, f"pd{i}", 0.5) for i in range(3)] + [("d1", 0, "pd", 9.0)])
    sids.append(t.write(a))
    sids.append(t.write(b.to_batches()[0]))
    sids.append(t.write(pd.DataFrame(c.to_pylist())))
    for data, sid in zip((a, b, c), sids):
        model.apply(data)
        model.commit(sid)
    verify(warehouse, "db.inputs", model, sids, lm_table=t)


def test_many_types_with_row_kinds_and_deletes(warehouse):
    """Composite key of many types written with row_kinds= and delete() (no rowkind.field column)."""
    schema = pa.schema([f for f in MANY_TYPES_SCHEMA if f.name != "rk"])
    cat = lm_catalog(warehouse)
    t = cat.create_table("db.types", schema=schema, primary_key=MANY_TYPES_PK, partition_keys=["k_date"],
                         options={"bucket": "4"})
    rnd = random.Random(11)
    keys = many_types_keys(rnd, 60)
    model = DictModel(schema, MANY_TYPES_PK)
    sids = []
    for c in range(5):
        rows = [many_types_row(rnd, k) for k in rnd.sample(keys, 30)]
        for r in rows:
            del r["rk"]
        data = pa.Table.from_pylist(rows, schema=schema)
        kinds = ["+I"] * len(rows) if c == 0 else [rnd.choice(["+I", "+U", "-D", "-U"]) for _ in rows]
        sids.append(t.write(data, row_kinds=kinds))
        model.apply(data, kinds)
        model.commit(sids[-1])
        gone = pa.Table.from_pylist([dict(zip(MANY_TYPES_PK, k)) for k in rnd.sample(keys, 5)],
                                    schema=pa.schema([schema.field(n) for n in MANY_TYPES_PK]))
        sids.append(t.delete(gone))
        model.delete(gone)
        model.commit(sids[-1])
    verify(warehouse, "db.types", model, sids, lm_table=t)


# ------------------------------------------------------------------------------------------------------
# both writers on one table: sequence numbers must continue per bucket across writers
# ------------------------------------------------------------------------------------------------------
def test_mixed_writers_on_one_table(warehouse):
    schema = pa.schema([("dt", pa.string()), ("id", pa.int32()), ("v", pa.string()), ("rk", pa.string())])
    pk = ["dt", "id"]
    cat = lm_catalog(warehouse)
    lm = cat.create_table("db.mixed", schema=schema, primary_key=pk, partition_keys=["dt"],
                          options={"bucket": "2", "rowkind.field": "rk"})
    model = DictModel(schema, pk, rowkind_field="rk")
    sids = []
    for c in range(6):
        # every commit rewrites the same keys, so a writer restarting sequence numbers would lose its updates
        rows = [{"dt": PARTITIONS[i % 2], "id": i, "v": f"c{c}-{'lm' if c % 2 == 0 else 'pp'}-{i}",
                 "rk": "-D" if (i + c) % 7 == 0 else "+I"} for i in range(12)]
        data = pa.Table.from_pylist(rows, schema=schema)
        if c % 2 == 0:
            sid = lm.write(data)
        else:
            sid = pp_write(pp_get_table(warehouse, "db.mixed"), data, schema)
        model.apply(data)
        model.commit(sid)
        sids.append(sid)
        pp_rows = rows_of(pp_read(pp_get_table(warehouse, "db.mixed")), pk)
        lm_rows = rows_of(cat.get_table("db.mixed").read(), pk)
        assert_rows_equal(lm_rows, model.live_rows(), pk, f"commit {c}: lakemerge read (actual) vs model")
        # pypaimon may only deviate by its own phantom rows, which this data does not produce
        assert_rows_equal(pp_rows, model.live_rows(), pk, f"commit {c}: pypaimon read (actual) vs model")
    assert sids == sorted(set(sids)) and len(sids) == 6
    # files of both writers coexist; pypaimon's files have _DELETE_ROW_COUNT=0, so skip that one check
    pp = pp_get_table(warehouse, "db.mixed")
    for sid in sids:
        check_file_metadata(pp, sid, check_delete_count=False)
        assert_rows_equal(rows_of(cat.get_table("db.mixed").read(snapshot_id=sid), pk), model.live_rows(sid), pk,
                          f"snapshot {sid}: lakemerge time travel on a mixed table")
    check_bucket_placement(pp, table_path(warehouse, "db.mixed"))


# ------------------------------------------------------------------------------------------------------
# warehouse given as a file:// URI; many rows with small files and a small write buffer
# ------------------------------------------------------------------------------------------------------
def test_file_uri_warehouse(tmp_path):
    from engine import Catalog

    wh = str(tmp_path / "uri-wh")
    cat = Catalog("file://" + wh)
    cat.create_database("db")
    t = cat.create_table("db.u", schema=SIMPLE, primary_key=SIMPLE_PK, partition_keys=["dt"], options={"bucket": "2"})
    model = DictModel(SIMPLE, SIMPLE_PK)
    data = _simple([("d1", i, "x", 1.0) for i in range(5)])
    sid = t.write(data)
    model.apply(data)
    model.commit(sid)
    assert os.path.isdir(os.path.join(wh, "db.db", "u", "snapshot"))
    verify(wh, "db.u", model, [sid], lm_table=t)
    assert "db" in Catalog(wh).list_databases()
    assert rows_of(Catalog(wh).get_table("db.u").read(), SIMPLE_PK) == model.live_rows()


def test_many_rows_small_files_small_buffer(warehouse):
    """Rolling files and several flushes inside one commit: later records of a key must still win."""
    schema = pa.schema([("id", pa.int64()), ("payload", pa.string()), ("rk", pa.string())])
    cat = lm_catalog(warehouse)
    t = cat.create_table("db.big", schema=schema, primary_key=["id"],
                         options={"bucket": "3", "rowkind.field": "rk", "target-file-size": "32 kb",
                                  "write-buffer-size": "64 kb"})
    model = DictModel(schema, ["id"], rowkind_field="rk")
    rnd = random.Random(5)
    sids = []
    for c in range(3):
        rows = [{"id": rnd.randrange(6000), "payload": f"c{c}-" + "x" * rnd.randrange(40),
                 "rk": rnd.choices(["+I", "-D"], [85, 15])[0]} for _ in range(8000)]
        data = pa.Table.from_pylist(rows, schema=schema)
        sids.append(t.write(data))
        model.apply(data)
        model.commit(sids[-1])
    verify(warehouse, "db.big", model, sids, lm_table=t)


def test_pypaimon_reads_tags_lakemerge_created_automatically(warehouse, monkeypatch):
    """tag.automatic-creation=process-time: pypaimon time-travels to the tag lakemerge created after a commit and
    reads its create time and time retained (Paimon's Tag JSON: LocalDateTime array, Duration seconds)."""
    import datetime as dt
    import time

    clock = {"t": dt.datetime(2023, 7, 18, 12, 12, tzinfo=dt.timezone.utc).timestamp()}
    monkeypatch.setattr(time, "time", lambda: clock["t"])
    schema = pa.schema([("id", pa.int64()), ("v", pa.string())])
    t = lm_catalog(warehouse).create_table(
        "db.auto_tags", schema=schema, primary_key=["id"],
        options={"bucket": "2", "tag.automatic-creation": "process-time", "tag.creation-period": "daily",
                 "tag.period-formatter": "without_dashes", "sink.process-time-zone": "UTC",
                 "tag.default-time-retained": "7 d"})
    t.write(pa.table({"id": [1, 2], "v": ["a", "b"]}, schema=schema))
    clock["t"] += 86400  # the next day: snapshot 2 closes 2023-07-18
    t.write(pa.table({"id": [2, 3], "v": ["B", "c"]}, schema=schema))
    clock["t"] += 3600
    t.write(pa.table({"id": [4], "v": ["d"]}, schema=schema))
    assert {n: s.id for n, s in t.tags().items()} == {"20230717": 1, "20230718": 2}

    pp = pp_get_table(warehouse, "db.auto_tags")
    got = pp_read(pp.copy({"scan.tag-name": "20230718"}), sort_by=["id"]).to_pylist()
    assert got == [{"id": 1, "v": "a"}, {"id": 2, "v": "B"}, {"id": 3, "v": "c"}]
    tag = pp.tag_manager().get("20230718")
    assert tag.id == 2 and tag.tag_time_retained == dt.timedelta(days=7)
    assert tag.tag_create_time == dt.datetime.fromtimestamp(clock["t"] - 3600)
    assert sorted(pp.list_tags()) == ["20230717", "20230718"]
