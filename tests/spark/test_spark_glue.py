"""The lakemerge Spark data source and helpers on one local SparkSession (see conftest.py)."""
from __future__ import annotations

import glob
import os
import shutil

import pyarrow as pa
import pytest

import spark_glue
from engine import Catalog
from engine.read.split_read import SplitReader

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([("region", pa.string()), ("id", pa.int64()), ("qty", pa.int32()), ("price", pa.float64())])
DDL = "region string, id long, qty int, price double"


def _rows(table_or_rows, keys=("region", "id")):
    rows = table_or_rows.to_pylist() if isinstance(table_or_rows, pa.Table) else [r.asDict() for r in table_or_rows]
    return sorted(rows, key=lambda r: tuple(r[k] for k in keys))


def _files_on_disk(root):
    return {os.path.basename(p) for p in glob.glob(os.path.join(root, "**", "bucket-*", "*"), recursive=True)}


def _live_files(table):
    snap = table.snapshot()
    return {e.file.file_name for e in table.manifests.live_entries(snap)} if snap else set()


@pytest.fixture
def orders(spark, tmp_path):
    spark_glue.register(spark)
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    return cat.create_table("db.orders", SCHEMA, ["region", "id"], ["region"], {"bucket": "4"})


def _initial(spark):
    data = [("eu", i, i % 7, float(i)) for i in range(60)] + [("us", i, 1, 2.0) for i in range(40)]
    return spark.createDataFrame(data, DDL)


@pytest.mark.interop
def test_bucket_parallel_upserts_read_back_like_the_engine_and_pypaimon(spark, orders):
    from tests.interop.pypaimon_util import check_bucket_placement, pp_get_table, pp_read
    s1 = spark_glue.write_table(_initial(spark), orders.root)
    update = spark.createDataFrame([("eu", 1, 100, 9.5), ("us", 39, 0, 0.0), ("asia", 1, 5, 1.0)], DDL)
    s2 = spark_glue.write_table(update, orders.root)
    assert (s1, s2) == (1, 2)
    # one task per (partition, bucket): a commit adds at most one file per bucket
    per_bucket = {}
    for e in orders.manifests.live_entries(orders.snapshot(1)):
        per_bucket[(e.partition, e.bucket)] = per_bucket.get((e.partition, e.bucket), 0) + 1
    assert set(per_bucket.values()) == {1}

    got = _rows(spark.read.format("lakemerge").load(orders.root).collect())
    assert got == _rows(orders.read())
    assert len(got) == 101 and {r["id"]: r for r in got if r["region"] == "eu"}[1]["qty"] == 100
    assert _rows(pp_read(pp_get_table(os.path.dirname(os.path.dirname(orders.root)), "db.orders"))) == got
    check_bucket_placement(pp_get_table(os.path.dirname(os.path.dirname(orders.root)), "db.orders"), orders.root)
    # column subset (Spark 4.3 has no pruning hook: the 'columns' option reads only those columns)
    cols = spark_glue.read_table(spark, orders.root, columns=["id", "qty"]).where("qty = 100").collect()
    assert [r.asDict() for r in cols] == [{"id": 1, "qty": 100}]


def test_time_travel_by_snapshot_timestamp_tag(spark, orders):
    spark_glue.write_table(_initial(spark), orders.root)
    spark_glue.delete_where(spark, orders.root, "region = 'us'")
    first = orders.snapshot(1)
    os.makedirs(os.path.join(orders.root, "tag"), exist_ok=True)
    shutil.copy(orders.snapshot_manager.paths.snapshot(1), os.path.join(orders.root, "tag", "tag-before"))

    def count(**opts):
        reader = spark.read.format("lakemerge")
        for k, v in opts.items():
            reader = reader.option(k, v)
        return reader.load(orders.root).count()

    assert count() == 60
    assert count(**{"scan.snapshot-id": "1"}) == 100
    assert count(versionAsOf="1") == 100
    assert count(**{"scan.timestamp-millis": str(first.time_millis)}) == 100
    assert count(**{"scan.tag-name": "before"}) == 100
    with pytest.raises(Exception, match="SnapshotNotFound.*has no snapshot 9"):
        count(**{"scan.snapshot-id": "9"})
    with pytest.raises(Exception, match="TagNotFound.*has no tag 'nope'"):
        count(**{"scan.tag-name": "nope"})


def test_version_as_of_takes_a_tag_or_a_snapshot_id(spark, orders):
    """versionAsOf took only a snapshot id: versionAsOf='before' (a tag) failed with 'expected a snapshot id', and
    a tag named '2' (Java Paimon allows all-digit tag names) was read as snapshot 2. Paimon resolves VERSION AS OF
    (TimeTravelUtil.adaptScanVersion) to a tag of that name first, else to a snapshot id if it is all digits."""
    spark_glue.write_table(_initial(spark), orders.root)
    spark_glue.delete_where(spark, orders.root, "region = 'us'")
    orders.create_tag("before", 1)
    shutil.copy(os.path.join(orders.root, "tag", "tag-before"), os.path.join(orders.root, "tag", "tag-2"))

    def count(version, key="versionAsOf"):
        return spark.read.format("lakemerge").option(key, version).load(orders.root).count()

    assert (count("1"), count("2"), count("before")) == (100, 100, 100)  # tag '2' wins over snapshot 2
    assert count("before", key="scan.version") == 100
    orders.delete_tag("2")
    assert count("2") == 60
    with pytest.raises(Exception, match="TagNotFound.*has no tag 'nope'"):
        count("nope")
    with pytest.raises(Exception, match="SnapshotNotFound.*has no snapshot 9"):
        count("9")
    with pytest.raises(Exception, match="UnsupportedFeature.*watermark"):
        count("watermark-5")

    def files(**opts):  # a system table travels the same way
        return sorted(r["file_path"] for r in spark.read.format("lakemerge").options(**opts)
                      .load(orders.root + "$files").collect())
    assert files(versionAsOf="before") == files(**{"scan.snapshot-id": "1"}) != files()


def _df_rows(df, keys=("region", "id")):
    """(the DataFrame's columns, its rows sorted by ``keys``)."""
    return df.columns, _rows(df.collect(), keys)


def _arrow_rows(rows: pa.Table, keys=("region", "id")):
    return rows.column_names, _rows(rows, keys)


def test_time_travel_reads_through_the_snapshots_schema(spark, orders):
    """Spark time travel read every snapshot through the LATEST schema (columns added since as nulls, renamed ones
    under their new name, dropped ones missing). As Paimon's time travel (AbstractFileStoreTable.tryTimeTravel)
    and Table.read(snapshot_id=...), a snapshot is read through the schema it was committed under: by snapshot
    id, versionAsOf, tag and timestamp, and read_table (whose IS NOT NULL guard must name an old column)."""
    def write(rows):
        orders.write(pa.Table.from_pylist(rows, schema=orders.arrow_schema))
    write([{"region": "eu", "id": i, "qty": i, "price": float(i)} for i in range(4)])  # snapshot 1: schema 0
    orders.create_tag("first", 1)
    orders.alter().add_column("note", pa.string()).commit()
    write([{"region": "eu", "id": 1, "qty": 10, "price": 1.5, "note": "a"}])  # snapshot 2: + note
    orders.alter().rename_column("qty", "quantity").commit()
    write([{"region": "us", "id": 7, "quantity": 70, "price": 7.5, "note": "b"}])  # snapshot 3: qty -> quantity
    orders.alter().drop_column("price").commit()
    write([{"region": "eu", "id": 2, "quantity": 20, "note": "c"}])  # snapshot 4: - price
    assert [orders.snapshot(i).schema_id for i in (1, 2, 3, 4)] == [0, 1, 2, 3]

    def load(**opts):
        return spark.read.format("lakemerge").options(**opts).load(orders.root)
    for sid in (1, 2, 3, 4):
        want = _arrow_rows(orders.read(snapshot_id=sid))
        assert _df_rows(load(**{"scan.snapshot-id": str(sid)})) == want
        assert _df_rows(load(versionAsOf=str(sid))) == want
        assert _df_rows(spark_glue.read_table(spark, orders.root, prune=True, versionAsOf=str(sid))) == want
    assert _arrow_rows(orders.read(snapshot_id=1))[0] == ["region", "id", "qty", "price"]
    first = _arrow_rows(orders.read(tag="first"))
    assert _df_rows(load(**{"scan.tag-name": "first"})) == _df_rows(load(versionAsOf="first")) == first
    t2 = orders.snapshot(2).time_millis
    at_t2 = max(s.id for s in orders.snapshots() if s.time_millis <= t2)  # a later commit may share the millisecond
    assert _df_rows(load(**{"scan.timestamp-millis": str(t2)})) == _arrow_rows(orders.read(snapshot_id=at_t2))
    assert _df_rows(spark_glue.read_table(spark, orders.root, timestampAsOf=str(t2))) == \
        _arrow_rows(orders.read(snapshot_id=at_t2))
    # option 'columns' and filters name the snapshot's columns
    old = spark_glue.read_table(spark, orders.root, columns=["id", "qty"], prune=True, **{"scan.snapshot-id": "1"})
    assert sorted(r.asDict()["qty"] for r in old.where("qty > 1").collect()) == [2, 3]
    assert _df_rows(load()) == _arrow_rows(orders.read())
    assert load().columns == ["region", "id", "quantity", "note"]


def test_time_travel_reads_with_the_current_options_restated(spark, tmp_path):
    """A Spark task rebuilt the time-travelled table from the snapshot's schema id with that schema's own options;
    Paimon's tryTimeTravel keeps the table's current options (here a sequence.field set since, with a column
    the snapshot lacks): the task reads as
    Table.read(snapshot_id=...) does (Table.as_of_schema)."""
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    schema = pa.schema([pa.field("k", pa.int64(), nullable=False), ("v", pa.string()), ("ts", pa.int64())])
    t = cat.create_table("db.t", schema, ["k"], [], {"bucket": "1"})
    t.write(pa.table({"k": [1], "v": ["new"], "ts": [10]}, schema=t.arrow_schema))
    t.write(pa.table({"k": [1], "v": ["old"], "ts": [5]}, schema=t.arrow_schema))  # snapshot 2: schema 0
    t.alter().set_option("sequence.field", "ts").add_column("x", pa.int32()).commit()
    assert t.read(snapshot_id=2).to_pylist() == [{"k": 1, "v": "new", "ts": 10}]
    got = spark.read.format("lakemerge").option("scan.snapshot-id", "2").load(t.root).collect()
    assert [r.asDict() for r in got] == [{"k": 1, "v": "new", "ts": 10}]


def test_row_level_commands_after_an_alter_read_the_latest_schema(spark, orders, tmp_path):
    """Spark's UPDATE / MERGE / DELETE pin the current snapshot (scan.snapshot-id); after an ALTER with no commit
    since, that snapshot's schema is the old one, yet the commands work on the latest schema (they write it):
    their pinned reads must not time-travel to the old columns (tables.pin_snapshot)."""
    rows = [{"region": "eu", "id": i, "qty": i % 3, "price": float(i)} for i in range(6)]
    orders.write(pa.Table.from_pylist(rows, schema=orders.arrow_schema))
    orders.alter().add_column("note", pa.string()).rename_column("qty", "quantity").commit()
    spark_glue.update_where(spark, orders.root, {"quantity": "quantity + 10", "note": "'u'"}, "id < 2")
    orders.alter().rename_column("price", "cost").commit()
    source = spark.createDataFrame([("eu", 5, 50, 5.5, "m"), ("us", 9, 90, 9.5, "i")],
                                   "region string, id long, quantity int, cost double, note string")
    spark_glue.merge_into(spark, orders.root, source, on=["region", "id"])
    orders.alter().add_column("extra", pa.int32()).commit()
    spark_glue.delete_where(spark, orders.root, "quantity = 2 AND cost > 1")
    want = [("eu", 0, 10, 0.0, "u"), ("eu", 1, 11, 1.0, "u"), ("eu", 3, 0, 3.0, None), ("eu", 4, 1, 4.0, None),
            ("eu", 5, 50, 5.5, "m"), ("us", 9, 90, 9.5, "i")]
    got = orders.read()
    assert got.column_names == ["region", "id", "quantity", "cost", "note", "extra"]
    assert sorted((r["region"], r["id"], r["quantity"], r["cost"], r["note"]) for r in got.to_pylist()) == want

    # an append table (append_dml) and a first-row table (pk_delete rewrites its files)
    cat = Catalog(str(tmp_path / "wh2"))
    cat.create_database("db")
    log = cat.create_table("db.log", SCHEMA, [], [], {"bucket": "-1"})
    first = cat.create_table("db.first", SCHEMA, ["region", "id"], [], {"bucket": "1", "merge-engine": "first-row"})
    for t in (log, first):
        t.write(pa.Table.from_pylist(rows, schema=t.arrow_schema))
        t.alter().rename_column("qty", "quantity").commit()
    spark_glue.update_where(spark, log.root, {"quantity": "quantity + 10"}, "quantity = 1")
    log.alter().add_column("note", pa.string()).commit()
    spark_glue.merge_into(spark, log.root, spark.createDataFrame(
        [("eu", 0, 7, 0.5, "n")], "region string, id long, quantity int, price double, note string"),
        on=["region", "id"], when_not_matched=None)
    log.alter().rename_column("price", "cost").commit()
    spark_glue.delete_where(spark, log.root, "quantity = 2 AND cost > 2")
    assert sorted((r["id"], r["quantity"], r["note"]) for r in log.read().to_pylist()) == \
        [(0, 7, "n"), (1, 11, None), (2, 2, None), (3, 0, None), (4, 11, None)]
    spark_glue.delete_where(spark, first.root, "quantity = 2")
    assert sorted(r["id"] for r in first.read().to_pylist()) == [0, 1, 3, 4]


def test_zone_less_time_travel_uses_the_session_time_zone(spark, orders):
    """timestampAsOf without an offset was read as UTC whatever spark.sql.session.timeZone said; Spark reads a
    zone-less TIMESTAMP AS OF in the session time zone. read_table passes the session's zone (option timeZone); a
    direct read's planner cannot see the session and uses its local zone, so its tasks refuse the read when the
    session's zone puts the timestamp elsewhere. System tables resolve in the task, which sees the session zone."""
    import datetime as dt
    import zoneinfo
    spark_glue.write_table(_initial(spark), orders.root)
    spark_glue.delete_where(spark, orders.root, "region = 'us'")
    t1 = orders.snapshot(1).time_millis

    def at(zone):  # snapshot 1's commit time as wall time in ``zone`` (None: this machine's zone), to the millisecond
        return (dt.datetime.fromtimestamp(t1 // 1000, zone) + dt.timedelta(milliseconds=t1 % 1000)).astimezone(zone)
    # a session zone ahead of the local one: read in the local zone, its wall time is later, so a snapshot is found
    zone = next((z for z in ("Asia/Tokyo", "Pacific/Kiritimati") if at(zoneinfo.ZoneInfo(z)).utcoffset()
                 > at(None).utcoffset()), None)
    if zone is None:
        pytest.skip("this machine's time zone is ahead of every candidate session zone")
    with_offset = at(zoneinfo.ZoneInfo(zone)).isoformat(timespec="milliseconds")
    wall = with_offset[:23].replace("T", " ")

    def direct(value, path=orders.root, **opts):
        return spark.read.format("lakemerge").option("timestampAsOf", value).options(**opts).load(path)

    def files(df):
        return sorted(r["file_path"] for r in df.collect())

    old = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", zone)
    try:
        assert spark.sql(f"SELECT unix_millis(CAST('{wall}' AS TIMESTAMP))").first()[0] == t1  # Spark's reading
        assert spark_glue.read_table(spark, orders.root, timestampAsOf=wall).count() == 100
        assert spark_glue.read_table(spark, orders.root, **{"scan.timestamp": wall}).count() == 100
        assert direct(wall, timeZone=zone).count() == 100
        with pytest.raises(Exception, match=rf"InvalidOption.*spark.sql.session.timeZone \({zone}\)"):
            direct(wall).count()
        assert direct(with_offset).count() == direct(str(t1)).count() == 100  # explicit instants need no zone
        with pytest.raises(Exception, match="at or before 2000-01-01 00:00 .timestampasof, read in the local time"):
            direct("2000-01-01 00:00").count()
        with pytest.raises(Exception, match=f"at or before 2000-01-01 00:00 .timestampasof, read in time zone {zone}"):
            spark_glue.read_table(spark, orders.root, timestampAsOf="2000-01-01 00:00").count()
        assert files(direct(wall, orders.root + "$files")) == files(direct(str(t1), orders.root + "$files")) \
            != files(spark.read.format("lakemerge").load(orders.root + "$files"))
    finally:
        spark.conf.set("spark.sql.session.timeZone", old)


def test_pushdown_prunes_and_never_leaks_into_later_queries(spark, orders):
    spark_glue.write_table(_initial(spark), orders.root)
    df = spark_glue.read_table(spark, orders.root, prune=True, **{"source.split.target-size": "1b"})  # 1 task/split
    assert df.rdd.getNumPartitions() == 8                       # 2 partitions x 4 buckets
    assert df.where("region = 'eu'").rdd.getNumPartitions() == 4  # partition pruning
    assert df.where("region = 'eu' AND id = 3").rdd.getNumPartitions() == 1  # bucket pruning
    assert df.where("region = 'eu' AND id = 3").count() == 1
    assert df.count() == 100                                     # the pushed filter did not stick (G1)
    assert df.where("id > 55").count() == 4                      # file skipping by key stats keeps matches
    spark.createDataFrame([("eu", 1000, 1, 1.0)], DDL).write.format("lakemerge").mode("append").save(orders.root)
    assert df.count() == 101                                     # re-planned: sees the new snapshot


def test_is_null_filters_are_pushed_and_prune_by_null_counts(spark, orders):
    """Spark's IsNull reaches the engine as an 'is null' term: splits whose files hold no null in the column are
    skipped (statistics' null counts), and the rows are the engine's. IsNotNull is left to Spark (see
    spark_glue.reading.spark_filter_to_terms)."""
    spark_glue.write_table(_initial(spark), orders.root)
    orders.write(pa.table({"region": ["us", "us"], "id": [1, 2], "qty": pa.array([None, None], pa.int32()),
                           "price": [5.0, 6.0]}, schema=SCHEMA))
    df = spark_glue.read_table(spark, orders.root, prune=True, **{"source.split.target-size": "1b"})  # 1 task/split
    assert df.rdd.getNumPartitions() == 8
    nulls = df.where("qty IS NULL")
    assert nulls.rdd.getNumPartitions() <= 2  # only the 'us' buckets the second commit wrote
    assert sorted((r.region, r.id) for r in nulls.collect()) == [("us", 1), ("us", 2)]
    assert _rows(df.where("qty IS NOT NULL").collect()) == _rows(orders.read(filter=[("qty", "is not null", None)]))
    assert df.count() == 100  # nothing stuck to the DataFrame


def test_plain_session_reads_without_pushdown_conf(spark, orders):
    spark_glue.write_table(_initial(spark), orders.root)
    old = spark.conf.get("spark.sql.python.filterPushdown.enabled")
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "false")
    try:
        df = spark.read.format("lakemerge").load(orders.root)
        assert df.where("region = 'us' AND id < 5").count() == 5
        assert df.count() == 100
    finally:
        spark.conf.set("spark.sql.python.filterPushdown.enabled", old)


def test_overwrite_dynamic_partitions_and_full(spark, orders):
    spark_glue.write_table(_initial(spark), orders.root)
    spark.createDataFrame([("eu", 7, 7, 7.0)], DDL).write.format("lakemerge").mode("overwrite").save(orders.root)
    assert orders.snapshot().commit_kind == "OVERWRITE"
    got = _rows(orders.read())
    assert [r["id"] for r in got if r["region"] == "eu"] == [7] and sum(r["region"] == "us" for r in got) == 40
    spark_glue.write_table(spark.createDataFrame([("asia", 1, 1, 1.0)], DDL), orders.root, mode="overwrite",
                           dynamic_partition_overwrite=False)
    assert _rows(orders.read()) == [{"region": "asia", "id": 1, "qty": 1, "price": 1.0}]


def test_overwrite_follows_the_table_option_dynamic_partition_overwrite(spark, orders):
    """Paimon's FileStoreCommitImpl reads dynamic-partition-overwrite from the table options, which a write option
    overrides."""
    spark_glue.write_table(_initial(spark), orders.root)
    orders.alter().set_option("dynamic-partition-overwrite", "false").commit()
    spark.createDataFrame([("eu", 7, 7, 7.0)], DDL).write.format("lakemerge").mode("overwrite") \
        .option("dynamic-partition-overwrite", "true").save(orders.root)
    assert sum(r["region"] == "us" for r in _rows(orders.read())) == 40
    spark.createDataFrame([("eu", 8, 8, 8.0)], DDL).write.format("lakemerge").mode("overwrite").save(orders.root)
    assert _rows(orders.read()) == [{"region": "eu", "id": 8, "qty": 8, "price": 8.0}]


def test_temporary_view_select_and_insert(spark, orders):
    spark_glue.write_table(_initial(spark), orders.root)
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW orders_v USING lakemerge OPTIONS (path '{orders.root}')")
    assert spark.sql("SELECT count(*) AS n FROM orders_v WHERE region = 'us'").collect()[0].n == 40
    spark.sql("INSERT INTO orders_v VALUES ('us', 500, 3, 1.5), ('eu', 1, 0, 0.0)")
    assert orders.snapshot().id == 2 and orders.read().num_rows == 101
    # a view keeps the plan of its first query (Spark 4.3); a new view sees the insert
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW orders_v USING lakemerge OPTIONS (path '{orders.root}')")
    row = spark.sql("SELECT qty FROM orders_v WHERE region = 'eu' AND id = 1").collect()
    assert [r.qty for r in row] == [0]


@pytest.mark.interop
def test_unplaced_data_source_write_never_ties_sequence_numbers(spark, tmp_path):
    """``df.write.format("lakemerge")`` cannot repartition its input, so tasks may share a bucket. Each task numbers
    on its own lane: the two records of key 1 (first row of both input partitions) get different sequence numbers,
    and lakemerge and pypaimon read the same winner (the higher lane) before and after compaction."""
    import pyarrow.parquet as pq
    from tests.interop.pypaimon_util import pp_get_table, pp_read
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    t = cat.create_table("db.t", pa.schema([("k", pa.int64()), ("v", pa.int64())]), ["k"], None,
                         {"bucket": "1", "write-only": "true"})
    df = spark.createDataFrame([(1, 10), (2, 10), (1, 20), (3, 20)], "k long, v long").repartition(1)
    df = spark.createDataFrame(df.collect(), df.schema)  # two slices: (1, 10), (2, 10) | (1, 20), (3, 20)
    assert [[r.k for r in part] for part in df.rdd.glom().collect()] == [[1, 2], [1, 3]]
    df.write.format("lakemerge").mode("append").save(t.root)
    seqs = [r["_SEQUENCE_NUMBER"] for f in glob.glob(os.path.join(t.root, "bucket-0", "*.parquet"))
            for r in pq.read_table(f).to_pylist() if r["k"] == 1]
    assert len(seqs) == 2 and seqs[0] != seqs[1]
    want = [{"k": 1, "v": 20}, {"k": 2, "v": 10}, {"k": 3, "v": 20}]
    assert _rows(t.read(), ("k",)) == want
    assert _rows(pp_read(pp_get_table(str(tmp_path / "wh"), "db.t")), ("k",)) == want
    t.compact(full=True)
    assert _rows(t.read(), ("k",)) == want


@pytest.mark.parametrize("producer", ["none", "lookup", "full-compaction"])
def test_unplaced_writes_compact_shared_buckets_on_the_driver(spark, tmp_path, producer):
    """Tasks that share a bucket cannot both compact it (their compactions consume the same files): the driver
    drops those compactions, deletes what they wrote and compacts the bucket itself, so sorted runs stay bounded
    and a lookup changelog is still produced (the same rows as a write through one writer)."""
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    extra = {"full-compaction.delta-commits": "1"} if producer == "full-compaction" else {}
    t = cat.create_table("db.t", pa.schema([("k", pa.int64()), ("v", pa.int64())]), ["k"], None,
                         {"bucket": "1", "changelog-producer": producer, **extra})
    for commit in range(6):
        rows = [(k, commit) for k in range(commit, commit + 40)]
        spark.createDataFrame(rows, "k long, v long").repartition(2).write.format("lakemerge").mode(
            "append").save(t.root)
        assert len(SplitReader(t.file_io, t.schema).runs(t.plan()[0])) < 5  # num-sorted-run.compaction-trigger
    assert "COMPACT" in {s.commit_kind for s in t.snapshots()}
    assert {r["k"]: r["v"] for r in t.read().to_pylist()} == {k: min(k, 5) for k in range(45)}
    referenced = set()
    for snap in t.snapshots():
        referenced |= {e.file.file_name for e in t.manifests.live_entries(snap)}
    data_on_disk = {f for f in _files_on_disk(t.root) if f.startswith("data-")}
    assert data_on_disk == referenced  # the dropped task compactions left no files behind
    if producer != "none":  # every change of every commit, with each key's old and new value
        kinds = t.read_changes().column("_row_kind").to_pylist()
        assert kinds.count("+I") == 45 and kinds.count("+U") == kinds.count("-U") == 5 * 39


@pytest.mark.interop
def test_append_tables_are_written_by_spark(spark, tmp_path):
    """Append tables (no primary key) take Spark writes through both paths: bucket-unaware ones as the tasks get
    the rows, fixed-bucket ones placed by their bucket-key; pypaimon reads the same rows."""
    from tests.interop.pypaimon_util import pp_get_table, pp_read
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    schema = pa.schema([("id", pa.int64()), ("name", pa.string())])
    unaware = cat.create_table("db.log", schema, [], None, {})
    fixed = cat.create_table("db.fixed", schema, [], None, {"bucket": "2", "bucket-key": "id"})
    df = spark.createDataFrame([(i, f"n{i}") for i in range(200)], "id long, name string").repartition(3)
    for t in (unaware, fixed):
        spark_glue.write_table(df, t.root)
        df.write.format("lakemerge").mode("append").save(t.root)
        want = sorted([(i, f"n{i}") for i in range(200)] * 2)
        assert sorted((r["id"], r["name"]) for r in t.read().to_pylist()) == want
        pp = pp_read(pp_get_table(str(tmp_path / "wh"), t.name)).to_pylist()
        assert sorted((r["id"], r["name"]) for r in pp) == want


def test_dynamic_bucket_primary_key_table_is_refused_on_the_driver(spark, tmp_path):
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    t = cat.create_table("db.dyn", pa.schema([("k", pa.int64()), ("v", pa.int64())]), ["k"], None, {"bucket": "-1"})
    df = spark.createDataFrame([(1, 1)], "k long, v long")
    for write in (lambda: spark_glue.write_table(df, t.root),
                  lambda: df.write.format("lakemerge").mode("append").save(t.root)):
        with pytest.raises(Exception, match=r"db\.dyn.*fixed bucket count|fixed bucket count.*db\.dyn"):
            write()
    assert t.latest_snapshot_id() is None


def test_errors_after_a_landed_commit_never_fail_the_job_or_delete_its_data(spark, tmp_path, monkeypatch):
    """Once the data snapshot is committed, a failure in the work after it (here: compacting buckets the tasks
    shared) only logs, and an abort (which Spark calls after any error in commit) deletes none of the job's
    committed files."""
    import engine.compact.manager as manager
    from engine.errors import CorruptFile
    from spark_glue.writing import WriteJob, run_write_job

    def broken(*args, **kwargs):
        raise CorruptFile("bucket-0/some-file.parquet", "injected failure after the commit")

    monkeypatch.setattr(manager, "compact_buckets", broken)
    t = _small_buffer_table(tmp_path, bucket="1", **{"num-sorted-run.compaction-trigger": "1"})
    job = WriteJob({"path": t.root}, overwrite=False)
    # two tasks share the only bucket (input not placed), so the driver compacts after the commit
    sid = run_write_job(spark.range(0, 300, 1, 2).selectExpr("id AS k", "1.0D AS v"), job)
    assert sid == t.latest_snapshot_id() == 1 and t.read().num_rows == 300
    job.abort_job(None)  # as Spark would after an error in commit(): the landed commit's files stay
    assert t.read().num_rows == 300 and t.check().ok


def _small_buffer_table(tmp_path, **options):
    """A (k, v) table with 2 buckets whose writers flush every few rows: a task has files before it fails."""
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    return cat.create_table("db.f", pa.schema([("k", pa.int64()), ("v", pa.float64())]), ["k"], None,
                            {"bucket": "2", "write-buffer-size": "1kb", **options})


def _fail_first_attempt_of_task_0(batches):
    """mapInArrow pass-through whose task 0 fails on its first attempt after two batches (Spark retries it)."""
    from pyspark import TaskContext
    ctx = TaskContext.get()
    for i, batch in enumerate(batches):
        yield batch
        if ctx.partitionId() == 0 and ctx.attemptNumber() == 0 and i >= 1:
            raise RuntimeError("injected failure")


# a write-only table, and one whose writers also write changelog files (the input producer)
RETRY_TABLES = [{"write-only": "true"}, {"write-only": "true", "changelog-producer": "input"}]


def _no_orphans(table) -> bool:
    """Every data and changelog file on disk is referenced (``check`` lists the files no snapshot references)."""
    report = table.check()
    return report.ok and report.orphan_files == []


@pytest.mark.parametrize("options", RETRY_TABLES, ids=["write-only", "input-changelog"])
def test_failed_task_is_retried_without_duplicates_or_orphans(spark, tmp_path, options):
    t = _small_buffer_table(tmp_path, **options)
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "500")
    try:
        df = spark.range(0, 4000, 1, 2).selectExpr("id AS k", "CAST(id AS DOUBLE) AS v")
        df.mapInArrow(_fail_first_attempt_of_task_0, df.schema).write.format("lakemerge").mode("append").save(t.root)
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    assert len(t.snapshots()) == 1
    assert sorted(t.read().column("k").to_pylist()) == list(range(4000))
    assert _no_orphans(t)  # the failed attempt left nothing behind
    if "changelog-producer" in options:
        assert sorted(t.read_changes(0).column("k").to_pylist()) == list(range(4000))


@pytest.mark.parametrize("options", RETRY_TABLES, ids=["write-only", "input-changelog"])
def test_write_table_job_retries_a_failed_task_without_duplicates_or_orphans(spark, tmp_path, options):
    """``write_table`` commits from the driver (writing.run_write_job): a task attempt that failed after writing
    files is dropped, its files deleted, and its retry's rows land once."""
    from spark_glue.api import distribute_by_bucket
    from spark_glue.writing import WriteJob, run_write_job
    t = _small_buffer_table(tmp_path, **options)
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "500")
    try:
        placed = distribute_by_bucket(spark.range(0, 4000, 1, 2).selectExpr("id AS k", "CAST(id AS DOUBLE) AS v"),
                                      t.root, num_tasks=2)
        # the failing step runs after the shuffle, in the writer's stage, so the failed attempt did write files
        sid = run_write_job(placed.mapInArrow(_fail_first_attempt_of_task_0, placed.schema),
                            WriteJob({"path": t.root, "commit.user": "u"}, overwrite=False))
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    assert sid == t.latest_snapshot_id() and [s.commit_user for s in t.snapshots()] == ["u"]
    assert sorted(t.read().column("k").to_pylist()) == list(range(4000))
    assert _no_orphans(t)
    if "changelog-producer" in options:
        assert sorted(t.read_changes(0).column("k").to_pylist()) == list(range(4000))


def test_replayed_commit_identifier_leaves_none_of_its_files_changelog_included(spark, tmp_path):
    """A job that replays an identifier its commit user already published commits nothing and deletes every file
    its tasks wrote: data files and the input producer's changelog files alike."""
    from spark_glue.api import distribute_by_bucket
    from spark_glue.writing import WriteJob, run_write_job
    t = _small_buffer_table(tmp_path, **{"changelog-producer": "input"})
    df = distribute_by_bucket(spark.range(0, 500, 1, 2).selectExpr("id AS k", "1.0D AS v"), t.root, num_tasks=2)
    options = {"path": t.root, "commit.user": "pipeline", "commit.identifier": "7"}
    assert run_write_job(df, WriteJob(options, overwrite=False)) == 1
    files = _files_on_disk(t.root)
    assert any(f.startswith("changelog-") for f in files)
    assert run_write_job(df, WriteJob(options, overwrite=False)) == 1  # the replay: already published
    assert t.latest_snapshot_id() == 1 and _files_on_disk(t.root) == files and _no_orphans(t)



def test_job_file_cleanup_never_deletes_committed_files(tmp_path):
    """The cleanup of a job's tagged files (after a conflict, a replay or an abort) skips every file a snapshot
    references, even one carrying the job's tag, and still deletes the unreferenced ones."""
    from spark_glue.job_files import remove_tagged_files, tag_files
    t = _small_buffer_table(tmp_path, **{"changelog-producer": "input"})
    tagged = tag_files(Catalog(str(tmp_path / "wh")).get_table("db.f"), "job1-")
    tagged.write(pa.table({"k": pa.array(range(50), pa.int64()), "v": [1.0] * 50}))
    with tagged.new_write() as w:  # written, never committed: a failed attempt's leftovers
        w.write(pa.table({"k": pa.array(range(50, 60), pa.int64()), "v": [2.0] * 10}))
        assert w.prepare_commit()
    committed = _files_on_disk(t.root)
    assert remove_tagged_files(t, "job1-", keep=set()) > 0
    assert _live_files(t) <= _files_on_disk(t.root) and _no_orphans(t)
    assert t.read().num_rows == 50 and t.read_changes(0).num_rows == 50
    assert _files_on_disk(t.root) < committed

@pytest.mark.parametrize("options", [{}, {"changelog-producer": "input"}], ids=["no-changelog", "input-changelog"])
def test_write_table_failed_job_leaves_table_and_storage_unchanged(spark, tmp_path, options):
    t = _small_buffer_table(tmp_path, **options)
    spark_glue.write_table(spark.range(0, 100).selectExpr("id AS k", "1.0D AS v"), t.root)
    before, files = t.latest_snapshot_id(), _files_on_disk(t.root)
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "50")
    try:
        bad = spark.range(0, 1000, 1, 1).selectExpr("IF(id = 999, NULL, id) AS k", "2.0D AS v")  # null key last
        with pytest.raises(Exception, match="null"):
            spark_glue.write_table(bad, t.root, num_tasks=1)
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    assert t.latest_snapshot_id() == before and _files_on_disk(t.root) == files
    assert t.read().column("v").to_pylist() == [1.0] * 100
    with pytest.raises(Exception, match="mode must be"):
        spark_glue.write_table(bad, t.root, mode="ignore")


def test_write_table_commit_failure_deletes_every_file_of_the_job(spark, tmp_path, monkeypatch):
    """A commit that fails with an error other than a conflict (here an injected one, before anything is
    published) leaves the table and its storage as they were: the job's files, including those of a failed and
    retried task attempt, are deleted."""
    from engine.table import Table
    t = _small_buffer_table(tmp_path, **{"write-only": "true"})
    spark_glue.write_table(spark.range(0, 100).selectExpr("id AS k", "1.0D AS v"), t.root)
    before, files = t.latest_snapshot_id(), _files_on_disk(t.root)

    def broken(self, messages, **kwargs):
        raise RuntimeError("injected commit failure")

    monkeypatch.setattr(Table, "commit", broken)
    df = spark.range(100, 400, 1, 2).selectExpr("id AS k", "2.0D AS v").mapInArrow(
        _fail_first_attempt_of_task_0, "k long, v double")
    with pytest.raises(RuntimeError, match="injected commit failure"):
        spark_glue.write_table(df, t.root)
    monkeypatch.undo()
    assert t.latest_snapshot_id() == before and _files_on_disk(t.root) == files
    assert t.read().num_rows == 100 and _no_orphans(t)


def test_merge_update_delete_against_a_pandas_model(spark, orders):
    spark_glue.write_table(_initial(spark), orders.root)
    model = orders.read().to_pandas().set_index(["region", "id"])

    spark_glue.delete_where(spark, orders.root, "region = 'eu' AND qty = 0")
    model = model[~((model.index.get_level_values("region") == "eu") & (model.qty == 0))]
    spark_glue.update_where(spark, orders.root, {"price": "price * 2"}, "region = 'us' AND id < 10")
    sel = (model.index.get_level_values("region") == "us") & (model.index.get_level_values("id") < 10)
    model.loc[sel, "price"] *= 2

    source = spark.createDataFrame([("eu", 1, 50, 5.0), ("eu", 2, 0, 0.0), ("eu", 999, 9, 9.0), ("us", 0, 7, 7.0)],
                                   DDL)
    sid = spark_glue.merge_into(spark, orders.root, source, on=["region", "id"],
                                when_matched=lambda t, s: {"qty": t("qty") + s("qty"), "price": s("price")},
                                matched_condition="s.qty > 0", when_not_matched="insert")
    for (r, i, q, p) in [("eu", 1, 50, 5.0), ("us", 0, 7, 7.0)]:
        model.loc[(r, i), ["qty", "price"]] = [model.loc[(r, i), "qty"] + q, p]
    model.loc[("eu", 999), ["qty", "price"]] = [9, 9.0]
    spark_glue.merge_into(spark, orders.root, spark.createDataFrame([("us", 5, 0, 0.0)], DDL), on=["region", "id"],
                          when_matched="delete", when_not_matched=None)
    model = model.drop(index=("us", 5))
    assert orders.snapshot().id == sid + 1 == 5

    expected = model.reset_index().astype({"qty": "int32"})
    expected = _rows(pa.Table.from_pandas(expected[["region", "id", "qty", "price"]], preserve_index=False))
    assert _rows(spark.read.format("lakemerge").load(orders.root).collect()) == expected
    with pytest.raises(Exception, match="2 source rows match the target row"):
        spark_glue.merge_into(spark, orders.root, source.unionAll(source), on=["region", "id"])
    with pytest.raises(Exception, match="cannot be updated"):
        spark_glue.update_where(spark, orders.root, {"id": "id + 1"})


def _merge_model(target: list[dict], source: list[tuple], on, update=None, delete=False, insert=True):
    """MERGE INTO in pandas, as Paimon runs it on a primary-key table: {key: set of rows the table may hold}. Each
    matched target row gets the ``update`` columns of its source row (or is deleted); unmatched source rows are
    inserted, duplicates included (their key may then hold any one of them). Raises ValueError when a matched
    clause is given and one target row matches several source rows."""
    import pandas as pd
    cols, keys = ["region", "id", "qty", "price"], ["region", "id"]
    t = pd.DataFrame(target, columns=cols).assign(_t=range(len(target)))
    src = pd.DataFrame(source, columns=cols).assign(_s=range(len(source)))
    pairs = t.merge(src, on=on, suffixes=("", "_src"))
    if (update or delete) and pairs["_t"].duplicated().any():
        raise ValueError("several source rows match one target row")
    out = {tuple(r[k] for k in keys): {tuple(r[c] for c in cols)} for r in target}
    for r in pairs.to_dict("records") if update or delete else ():
        key = tuple(r[k] for k in keys)
        if delete:
            del out[key]
        else:
            out[key] = {tuple(r[c + "_src"] if c in update else r[c] for c in cols)}
    inserted: dict = {}
    for r in src[~src["_s"].isin(pairs["_s"])].to_dict("records") if insert else ():
        inserted.setdefault(tuple(r[k] for k in keys), set()).add(tuple(r[c] for c in cols))
    out.update(inserted)
    return out


def test_merge_refuses_only_several_source_rows_per_target_row(spark, orders):
    """merge_into refused any duplicate source key, even one matching no target row. As Paimon's MERGE INTO: only
    a target row matched by several source rows (when a matched clause is given) is refused, naming the row;
    unmatched duplicates are all inserted and merge as one write's rows (the table keeps one of them)."""
    from engine.errors import MergeCardinalityViolation
    spark_glue.write_table(_initial(spark), orders.root)

    def check(source, on, model_kwargs, **merge_kwargs):
        expected = _merge_model(orders.read().to_pylist(), source, on, **model_kwargs)
        spark_glue.merge_into(spark, orders.root, spark.createDataFrame(source, DDL), on=on, **merge_kwargs)
        got = {(r["region"], r["id"]): tuple(r.values()) for r in orders.read().to_pylist()}
        assert got.keys() == expected.keys()
        assert all(got[k] in expected[k] for k in got)
        return got

    unmatched_twice = [("asia", 1, 5, 1.0), ("asia", 1, 5, 1.0), ("asia", 2, 6, 2.0), ("asia", 2, 7, 3.0)]
    got = check([("eu", 3, 30, 3.5), ("us", 4, 40, 4.5)] + unmatched_twice, ["region", "id"],
                {"update": ["qty", "price"]})
    assert got[("eu", 3)] == ("eu", 3, 30, 3.5) and got[("asia", 1)] == ("asia", 1, 5, 1.0)
    assert got[("asia", 2)] in {("asia", 2, 6, 2.0), ("asia", 2, 7, 3.0)}
    # without a matched clause, matching duplicates change nothing and are not refused
    check([("eu", 5, 0, 0.0), ("eu", 5, 1, 0.0), ("africa", 9, 9, 9.0), ("africa", 9, 9, 9.0)], ["region", "id"],
          {}, when_matched=None)
    # 'on' without the whole key: one source row may match several target rows (eu 7 and us 7)
    got = check([("xx", 7, 70, 0.0)], ["id"], {"update": ["qty"]}, when_matched={"qty": "s.qty"},
                when_not_matched=None)
    assert got[("eu", 7)][2] == got[("us", 7)][2] == 70

    before = (orders.latest_snapshot_id(), sorted(orders.read().to_pylist(), key=str))
    eu, us = {"region": "eu"}, {"region": "us"}
    refused = [  # (source rows, on, merge_into arguments, the target rows the error may name)
        ([("eu", 8, 1, 1.0), ("eu", 8, 2, 2.0), ("asia", 50, 1, 1.0)], ["region", "id"], {}, [{**eu, "id": 8}]),
        ([("us", 9, 1, 1.0), ("us", 9, 1, 1.0)], ["region", "id"], {"when_matched": "delete",
                                                                     "when_not_matched": None}, [{**us, "id": 9}]),
        ([("eu", 11, 1, 1.0), ("us", 11, 1, 1.0)], ["id"], {"when_matched": {"qty": "s.qty"},
                                                            "when_not_matched": None},
         [{**eu, "id": 11}, {**us, "id": 11}]),
        ([("eu", 12, 1, 1.0), ("eu", 12, 2, 1.0)], ["region", "id"], {"matched_condition": "s.qty > 5"},
         [{**eu, "id": 12}]),  # whatever the matched condition says
    ]
    for rows, on, kwargs, keys in refused:
        with pytest.raises(ValueError):
            _merge_model(orders.read().to_pylist(), rows, on, update=["qty"])
        with pytest.raises(MergeCardinalityViolation, match=r"db\.orders.*2 source rows match the target row") as err:
            spark_glue.merge_into(spark, orders.root, spark.createDataFrame(rows, DDL), on=on, **kwargs)
        assert err.value.key in keys
    assert (orders.latest_snapshot_id(), sorted(orders.read().to_pylist(), key=str)) == before


def test_streaming_write_replayed_batch_is_applied_once(spark, orders, tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    ck = str(tmp_path / "ck")

    def run():
        stream = spark.readStream.schema(DDL).parquet(str(src))
        q = (stream.writeStream.format("lakemerge").option("checkpointLocation", ck)
             .trigger(availableNow=True).start(orders.root))
        q.awaitTermination(120)

    import pyarrow.parquet as pq
    pq.write_table(pa.table({"region": ["eu"] * 3, "id": [1, 2, 3], "qty": pa.array([1, 1, 1], pa.int32()),
                             "price": [1.0] * 3}), str(src / "a.parquet"))
    run()
    pq.write_table(pa.table({"region": ["eu", "us"], "id": [1, 4], "qty": pa.array([5, 5], pa.int32()),
                             "price": [2.0, 2.0]}), str(src / "b.parquet"))
    run()
    ids = [(s.commit_identifier, s.id) for s in orders.snapshots()]
    assert [i for i, _ in ids] == [0, 1]
    # make Spark replay batch 1: drop its entry from the checkpoint's commit log, then restart
    for name in ("1", ".1.crc"):
        path = os.path.join(ck, "commits", name)
        if os.path.exists(path):
            os.remove(path)
    run()
    assert [s.commit_identifier for s in orders.snapshots()] == [0, 1]  # the replay was not committed again
    assert _rows(orders.read()) == _rows(pa.table({"region": ["eu", "eu", "eu", "us"], "id": [1, 2, 3, 4],
                                                   "qty": pa.array([5, 1, 1, 5], pa.int32()),
                                                   "price": [2.0, 1.0, 1.0, 2.0]}))
    assert _files_on_disk(orders.root) == _live_files(orders)  # the replay's files were removed


def test_foreach_batch_helper_is_exactly_once(spark, orders):
    write = spark_glue.stream_batch_writer(orders.root, commit_user="orders-pipeline")
    batch = spark.createDataFrame([("eu", 1, 1, 1.0)], DDL)
    write(batch, 0)
    write(spark.createDataFrame([("eu", 1, 2, 2.0)], DDL), 1)
    write(spark.createDataFrame([("eu", 1, 3, 3.0)], DDL), 1)  # replay of batch 1 with other data: skipped
    assert [s.commit_identifier for s in orders.snapshots()] == [0, 1]
    assert orders.read().column("qty").to_pylist() == [2]
    assert _files_on_disk(orders.root) == _live_files(orders) | {
        e.file.file_name for e in orders.manifests.live_entries(orders.snapshot(1))}


def test_foreach_batch_empty_micro_batch_commits_under_the_stream(spark, orders):
    """snapshot.ignore-empty-commit=false: an empty micro-batch's snapshot carries the stream's commit user and
    batch id (Paimon's TableCommitImpl.commit(identifier, ...)), so its replay is not committed twice and batch-mode
    automatic tags (batch commits only) are not created by the stream."""
    orders.alter().set_option("snapshot.ignore-empty-commit", "false").set_option(
        "tag.automatic-creation", "batch").commit()
    write = spark_glue.stream_batch_writer(orders.root, commit_user="orders-pipeline")
    write(spark.createDataFrame([("eu", 1, 1, 1.0)], DDL), 0)
    empty = spark.createDataFrame([], DDL)
    write(empty, 1)
    write(empty, 1)  # replay of the empty batch
    assert [(s.commit_user, s.commit_identifier) for s in orders.snapshots()] == [
        ("orders-pipeline", 0), ("orders-pipeline", 1)]
    assert orders.tags() == {}
    assert orders.read().column("qty").to_pylist() == [1]
    for _ in range(2):  # batch writes (no identifier) under a fixed commit user: each empty write is a snapshot
        spark_glue.write_table(empty, orders.root, **{"commit.user": "etl"})
    assert len(orders.snapshots()) == 4 and len(orders.tags()) == 1


def test_empty_overwrites_under_a_fixed_commit_user_each_apply(spark, orders):
    """Two Spark overwrite jobs with nothing to write under the same commit.user (no identifier: batch commits,
    which Paimon never filters as already committed): the second empties the table again, it is not taken for a
    replay of the first (the rows written between them were kept)."""
    empty = spark.createDataFrame([], DDL)
    spark_glue.write_table(spark.createDataFrame([("eu", 1, 1, 1.0)], DDL), orders.root)
    spark_glue.write_table(empty, orders.root, mode="overwrite", dynamic_partition_overwrite=False,
                           **{"commit.user": "etl"})
    assert orders.read().num_rows == 0
    spark_glue.write_table(spark.createDataFrame([("us", 2, 2, 2.0)], DDL), orders.root)
    spark_glue.write_table(empty, orders.root, mode="overwrite", dynamic_partition_overwrite=False,
                           **{"commit.user": "etl"})
    assert orders.read().num_rows == 0
    assert [s.commit_kind for s in orders.snapshots()] == ["APPEND", "OVERWRITE", "APPEND", "OVERWRITE"]


def test_demo_runs_small(spark, tmp_path):
    from spark_glue.demo import run_demo
    lines = []
    out = run_demo(str(tmp_path / "wh"), rows=3000, commits=3, echo=lines.append, spark=spark)
    # changelog-producer=lookup: each commit's writer compacts, so a commit is an APPEND then a COMPACT snapshot
    assert out["snapshots"] == [2, 4, 6]
    # 3 x 700 inserts, minus the deletes of commits 2 and 3 (150 requested each, fewer eligible ids exist)
    from engine import Catalog
    table = Catalog(str(tmp_path / "wh")).get_table(out["table"])
    assert out["rows"] == table.read().num_rows and 2100 - 300 <= out["rows"] < 2100
    assert out["rows_at_first_snapshot"] == 700
    assert any("snapshot 6" in line for line in lines) and len(out["sample"]) == 5
    assert out["compact_snapshot"] == 7 and table.snapshot(7).commit_kind == "COMPACT"
    changes = table.read_changes(0)
    kinds = changes.column("_row_kind").to_pylist()
    assert out["changelog"] == {k: kinds.count(k) for k in sorted(set(kinds))}
    assert out["changelog"]["+I"] == 2100 and out["changelog"]["-D"] > 0 and out["changelog"]["+U"] > 0
    assert out["snapshot_kinds"] == {1: "APPEND", 2: "COMPACT", 3: "APPEND", 4: "COMPACT", 5: "APPEND",
                                     6: "COMPACT", 7: "COMPACT"}
    assert any("changelog streamed" in line for line in lines)


def test_first_write_creates_the_table_from_options(spark, tmp_path):
    """Table options come from the write's Paimon options; a per-write choice (dynamic-partition-overwrite) is not
    stored, so it cannot turn the table's later overwrites into full ones."""
    path = str(tmp_path / "wh" / "sales.db" / "events")
    df = spark.createDataFrame([("eu", 1, 2, 3.0), ("us", 2, 1, 1.0)], DDL)
    with pytest.raises(Exception, match="set option 'primary-key'"):
        df.write.format("lakemerge").mode("append").save(path)
    (df.write.format("lakemerge").mode("append").option("primary-key", "region,id").option("partition", "region")
     .option("bucket", "2").option("dynamic-partition-overwrite", "false").save(path))
    table = Catalog(str(tmp_path / "wh")).get_table("sales.events")
    assert table.primary_keys == ("region", "id") and table.partition_keys == ("region",)
    assert table.options == {"bucket": "2"} and table.read().num_rows == 2
    spark_glue.write_table(df.limit(1), str(tmp_path / "wh" / "sales.db" / "other"), **{"primary-key": "id",
                                                                                       "bucket": "1"})
    assert Catalog(str(tmp_path / "wh")).get_table("sales.other").read().num_rows == 1


@pytest.mark.parametrize("fmt", ["orc", "avro"])
def test_spark_upsert_and_compaction_of_orc_and_avro_tables(spark, tmp_path, fmt):
    """Spark tasks write and compact a pypaimon-created ORC / Avro table in its format; pypaimon reads the result."""
    from tests.interop.pypaimon_util import pp_catalog, pp_create_table, pp_get_table, pp_read, pp_write
    wh = str(tmp_path / "wh")
    schema = pa.schema([pa.field("id", pa.int64(), False), ("v", pa.string())])
    pp = pp_create_table(pp_catalog(wh), "db.t", schema, ["id"], options={"bucket": "2", "file.format": fmt})
    pp_write(pp, pa.table({"id": [1, 2, 3], "v": ["a", "b", "c"]}, schema=schema))
    t = Catalog(wh).get_table("db.t")
    spark_glue.write_table(spark.createDataFrame([(2, "B"), (4, "D")], "id long, v string"), t.root)
    spark_glue.compact(spark, t.root, full=True)
    expected = [(1, "a"), (2, "B"), (3, "c"), (4, "D")]
    t = Catalog(wh).get_table("db.t")
    assert sorted((r["id"], r["v"]) for r in t.read().to_pylist()) == expected
    assert sorted((r["id"], r["v"]) for r in pp_read(pp_get_table(wh, "db.t")).to_pylist()) == expected
    assert all(f.file_name.endswith("." + fmt) for sp in t.plan() for f in sp.files)


@pytest.mark.parametrize("pk", [True, False], ids=["pk", "append"])
def test_a_table_lakemerge_cannot_write_is_refused_on_the_driver(spark, tmp_path, pk):
    """A row-tracking table (engine.refused_options) is refused with UnsupportedFeature naming the option before any
    Spark task runs, through write_table and the data source; nothing is committed or left on disk."""
    from engine.errors import UnsupportedFeature
    from tests.test_refused_options import ROWS, SCHEMA, _with_option
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    t = cat.create_table("db.t", SCHEMA, primary_key=["k"] if pk else None, options={"bucket": "1"} if pk else {})
    t.write(ROWS)
    _with_option(cat, t, "row-tracking.enabled", "true")
    before = _files_on_disk(t.root)
    df = spark.createDataFrame([(3, "c")], "k long, v string")
    with pytest.raises(UnsupportedFeature, match="row-tracking.enabled"):
        spark_glue.write_table(df, t.root)
    with pytest.raises(Exception, match="row-tracking.enabled"):
        df.write.format("lakemerge").mode("append").save(t.root)
    assert Catalog(str(tmp_path / "wh")).get_table("db.t").latest_snapshot_id() == 1
    assert _files_on_disk(t.root) == before
