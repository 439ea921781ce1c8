"""How Spark writes convert their input to the table's types, as Spark's store assignment (and so Paimon's Spark
writer, which receives Spark's cast rows) does."""
from __future__ import annotations

import datetime as dt
import decimal
import os

import pyarrow as pa
import pytest

import spark_glue
from engine import Catalog

pytestmark = pytest.mark.spark

UTC = dt.timezone.utc


@pytest.fixture
def session_zone(spark):
    """The session time zone set to New York (UTC-5 in January) for one test."""
    before = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    yield "America/New_York"
    spark.conf.set("spark.sql.session.timeZone", before)


def test_timestamps_are_written_in_the_session_time_zone(spark, tmp_path, session_zone):
    """A Spark TIMESTAMP (an instant) written into a Paimon TIMESTAMP column (no zone, Spark's TIMESTAMP_NTZ) keeps
    its wall time in the session zone, and a TIMESTAMP_NTZ into a TIMESTAMP_LTZ column is that wall time's instant
    in the session zone: Spark's cast, which Paimon's writer gets. Before, the UTC wall time was stored (15:00
    for a 10:00 New York literal) and an NTZ value was stored as a UTC instant."""
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("ntz", pa.timestamp("us")),
                        ("ltz", pa.timestamp("us", tz="UTC"))])
    t = cat.create_table("db.ts", schema, ["id"], None, {"bucket": "1"})
    spark_glue.register(spark)
    instants = spark.sql("SELECT 1L AS id, TIMESTAMP'2024-01-01 10:00:00' AS ntz, TIMESTAMP'2024-01-01 10:00:00' AS ltz")
    walls = spark.sql("SELECT 2L AS id, TIMESTAMP_NTZ'2024-01-01 10:00:00' AS ntz, "
                      "TIMESTAMP_NTZ'2024-01-01 10:00:00' AS ltz")
    instants.write.format("lakemerge").mode("append").save(t.root)
    spark_glue.write_table(walls, t.root)
    spark_glue.write_table(instants.selectExpr("3L AS id", "ntz", "ltz"), t.root)
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW ts_view USING lakemerge OPTIONS (path '{t.root}')")
    spark.sql("INSERT INTO ts_view SELECT 4L, TIMESTAMP'2024-01-01 10:00:00', TIMESTAMP_NTZ'2024-01-01 10:00:00'")
    wall, instant = dt.datetime(2024, 1, 1, 10), dt.datetime(2024, 1, 1, 15, tzinfo=UTC)
    assert sorted(t.read().to_pylist(), key=lambda r: r["id"]) == [
        {"id": i, "ntz": wall, "ltz": instant} for i in (1, 2, 3, 4)]
    # and Spark reads back what it wrote: the wall time, and the instant shown in the session zone
    row = (spark.read.format("lakemerge").load(t.root).where("id = 1")
           .selectExpr("CAST(ntz AS STRING) AS ntz", "CAST(ltz AS STRING) AS ltz").collect()[0])
    assert (row.ntz, row.ltz) == ("2024-01-01 10:00:00", "2024-01-01 10:00:00")


def test_first_write_without_a_bucket_count_creates_nothing(spark, tmp_path):
    """A first write with ``primary-key`` but no ``bucket`` would define a dynamic-bucket table (Paimon's default
    bucket -1), which Spark tasks cannot write: it is refused before the table is created. Before, the table was
    created and the write then refused, leaving a table no Spark write could fill."""
    path = str(tmp_path / "wh" / "db.db" / "events")
    df = spark.createDataFrame([(1, "a")], "k long, v string")
    for write in (lambda: df.write.format("lakemerge").option("primary-key", "k").mode("append").save(path),
                  lambda: spark_glue.write_table(df, path, **{"primary-key": "k"})):
        with pytest.raises(Exception, match=r"db\.events.*set option 'bucket'"):
            write()
        assert not os.path.exists(path)
    spark_glue.write_table(df, path, **{"primary-key": "k", "bucket": "-2"})  # postpone: created and written
    assert Catalog(str(tmp_path / "wh")).get_table("db.events").read().num_rows == 1


def test_columns_resolve_by_name_ignoring_case_and_missing_nullable_ones_are_null(spark, tmp_path):
    """As Paimon's Spark writer resolves a write's columns (PaimonOutputResolver: by name with Spark's default
    case-insensitive resolver, a missing top-level column filled with NULL): ``K`` writes column ``k``, and a
    nullable column the input lacks is written as null. A missing NOT NULL column, a column the table lacks and two
    columns naming one table column are refused before any task runs, nothing written. Before, any case
    difference or missing column was refused."""
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    schema = pa.schema([pa.field("k", pa.int64(), nullable=False), ("dt", pa.string()), ("v", pa.string()),
                        ("n", pa.int32())])
    t = cat.create_table("db.t", schema, ["k"], None, {"bucket": "2"})
    spark_glue.register(spark)
    spark.createDataFrame([(1, "a", 10)], "K long, V string, N int").write.format("lakemerge").mode("append") \
        .save(t.root)
    spark_glue.write_table(spark.createDataFrame([("b", 2, "x")], "v string, K long, DT string"), t.root)
    assert sorted(t.read().to_pylist(), key=lambda r: r["k"]) == [
        {"k": 1, "dt": None, "v": "a", "n": 10}, {"k": 2, "dt": "x", "v": "b", "n": None}]
    latest = t.latest_snapshot_id()
    bad = {"NOT NULL": spark.createDataFrame([("c",)], "v string"),
           "not in the table": spark.createDataFrame([(3, "c")], "k long, w string"),
           "both name table column": spark.createDataFrame([(3, "c", "d")], "k long, v string, V string"),
           # an exact duplicate too (before: KeyError 'Column v does not exist in schema')
           "'v' and 'v' both name": spark.createDataFrame([(3, "c", "d")], "k long, v string, w string")
           .selectExpr("k", "v", "w AS v")}
    for message, df in bad.items():
        for write in (lambda: df.write.format("lakemerge").mode("append").save(t.root),
                      lambda: spark_glue.write_table(df, t.root)):
            with pytest.raises(Exception, match=message):
                write()
    assert t.latest_snapshot_id() == latest


def test_nested_struct_fields_must_match_the_table(spark, tmp_path):
    """A struct whose fields differ from the table's by name (another field, a missing one) is refused on the
    driver, as Paimon's Spark writer refuses a missing or extra nested field. Before, Arrow's by-name cast wrote
    null for the field silently (data loss). Names resolve as Paimon's resolver does: ``X`` is ``x`` unless
    spark.sql.caseSensitive."""
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    schema = pa.schema([("a", pa.int64()), ("d", pa.struct([("x", pa.int32())])),
                        ("l", pa.list_(pa.struct([("y", pa.string())])))])
    t = cat.create_table("db.ap", schema, [], None, {"bucket": "-1"})
    spark_glue.register(spark)
    spark.sql("SELECT 1L a, named_struct('X', 5L) d, array(named_struct('y', 'q')) l") \
        .write.format("lakemerge").mode("append").save(t.root)
    assert t.read().to_pylist() == [{"a": 1, "d": {"x": 5}, "l": [{"y": "q"}]}]
    for sql, message in (("SELECT 2L a, named_struct('x', 5, 'w', 1) d, array(named_struct('y', 'q')) l",
                          r"struct d has fields \['w'\] in the input that the table lacks"),
                         ("SELECT 2L a, named_struct('x', 5) d, array(named_struct('z', 'q')) l",
                          r"struct field l\.element\.y is missing in the input")):
        with pytest.raises(Exception, match=message):
            spark.sql(sql).write.format("lakemerge").mode("append").save(t.root)
    assert t.read().num_rows == 1


def test_nested_timestamps_are_written_in_the_session_time_zone(spark, tmp_path, session_zone):
    """Spark's store assignment casts timestamps inside structs, arrays and maps in the session zone as it does
    top-level ones: a TIMESTAMP literal of 10:00 New York written into nested Paimon TIMESTAMP values is stored as
    10:00, a nested TIMESTAMP_NTZ into TIMESTAMP_LTZ as 15:00 UTC. Before, only top-level columns were converted
    and nested ones kept the UTC wall time (15:00) / the wall time as a UTC instant (10:00 UTC)."""
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False),
                        ("s", pa.struct([("t", pa.timestamp("us")), ("n", pa.int32())])),
                        ("a", pa.list_(pa.timestamp("us"))),
                        ("m", pa.map_(pa.string(), pa.timestamp("us", tz="UTC")))])
    t = cat.create_table("db.nested", schema, ["id"], None, {"bucket": "1"})
    spark_glue.register(spark)
    df = spark.sql("SELECT 1L id, named_struct('t', TIMESTAMP'2024-01-01 10:00:00', 'n', 1) s, "
                   "array(TIMESTAMP'2024-01-01 10:00:00', NULL) a, map('k', TIMESTAMP_NTZ'2024-01-01 10:00:00') m "
                   "UNION ALL SELECT 2L, NULL, NULL, NULL")
    df.write.format("lakemerge").mode("append").save(t.root)
    spark_glue.write_table(df.selectExpr("id + 2 AS id", "s", "a", "m"), t.root)
    wall, instant = dt.datetime(2024, 1, 1, 10), dt.datetime(2024, 1, 1, 15, tzinfo=UTC)
    full = {"s": {"t": wall, "n": 1}, "a": [wall, None], "m": [("k", instant)]}
    empty = {"s": None, "a": None, "m": None}
    assert sorted(t.read().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, **full}, {"id": 2, **empty}, {"id": 3, **full}, {"id": 4, **empty}]


def test_timestamp_partition_of_a_postpone_table_in_the_session_zone(spark, tmp_path, session_zone):
    """write_table casts a TIMESTAMP written into a Paimon TIMESTAMP partition column in the session zone before
    the driver decides the postpone table's bucket counts, so the counts are decided for the partition the tasks
    write (10:00 New York). Before, the driver keyed them by the UTC wall time (15:00) and the tasks, converting
    their rows, found no count for their partition and failed."""
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    schema = pa.schema([pa.field("k", pa.int64(), nullable=False), pa.field("p", pa.timestamp("us"), nullable=False),
                        ("v", pa.string())])
    t = cat.create_table("db.pp", schema, ["k", "p"], ["p"], {"bucket": "-2"})
    spark_glue.register(spark)
    df = spark.sql("SELECT 1L k, TIMESTAMP'2024-01-01 10:00:00' p, 'a' v UNION ALL "
                   "SELECT 2L, TIMESTAMP'2024-01-01 10:00:00', 'b'")
    spark_glue.write_table(df, t.root)
    assert sorted((r["k"], r["p"], r["v"]) for r in t.read().to_pylist()) == [
        (1, dt.datetime(2024, 1, 1, 10), "a"), (2, dt.datetime(2024, 1, 1, 10), "b")]


def test_failed_first_write_leaves_no_table_and_an_existing_table_untouched(spark, tmp_path):
    """A first write that creates the table (option ``primary-key``, a lakemerge extension: Paimon's SparkSource
    only writes a path holding a table, FileStoreTableFactory throws 'Schema file not found') and then fails in a
    writer task (a null primary key) removes the table it created, and the database directory it created: no
    schema, no files. Before, an empty table was left behind, whose schema later writes would silently take. A table
    that existed before the failed write, even one without any snapshot, is left as it was."""
    spark_glue.register(spark)
    wh = tmp_path / "wh"
    bad = spark.createDataFrame([(1, "a"), (None, "b")], "k long, v string")
    options = {"primary-key": "k", "bucket": "2"}
    writes = {"data source": lambda df, p: df.write.format("lakemerge").options(**options).mode("append").save(p),
              "write_table": lambda df, p: spark_glue.write_table(df, p, **options)}
    for name, write in writes.items():
        path = str(wh / f"{name.replace(' ', '_')}.db" / "events")
        with pytest.raises(Exception, match="null"):
            write(bad, path)
        assert not os.path.exists(path), name
        assert not os.path.exists(os.path.dirname(path)), name  # the database it created too
        # an existing empty table (created by the engine, no snapshot) keeps its schema, and no file is added
        cat = Catalog(str(wh))
        cat.create_database("kept", ignore_if_exists=True)
        t = cat.create_table(f"kept.{name.replace(' ', '_')}", pa.schema(
            [pa.field("k", pa.int64(), nullable=False), ("v", pa.string())]), ["k"], None, {"bucket": "2"})
        before = sorted(os.path.relpath(os.path.join(d, f), t.root) for d, _, fs in os.walk(t.root) for f in fs)
        with pytest.raises(Exception, match="null"):
            write(bad, t.root)
        after = sorted(os.path.relpath(os.path.join(d, f), t.root) for d, _, fs in os.walk(t.root) for f in fs)
        assert after == before and cat.get_table(t.name).latest_snapshot_id() is None, name
        # and a good first write still creates and fills the table
        write(spark.createDataFrame([(1, "a")], "k long, v string"), path)
        assert Catalog(str(wh)).get_table(f"{name.replace(' ', '_')}.events").read().to_pylist() == [
            {"k": 1, "v": "a"}]


@pytest.fixture
def case_sensitive(spark):
    """``spark.sql.caseSensitive=true`` for one test (restored after it)."""
    before = spark.conf.get("spark.sql.caseSensitive", "false")
    spark.conf.set("spark.sql.caseSensitive", "true")
    yield
    spark.conf.set("spark.sql.caseSensitive", before)


def _writes(spark):
    return {"data source": lambda df, p: df.write.format("lakemerge").mode("append").save(p),
            "write_table": lambda df, p: spark_glue.write_table(df, p)}


def _kv_table(tmp_path, name="t", extra=()):
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db", ignore_if_exists=True)
    schema = pa.schema([pa.field("k", pa.int64(), nullable=False), ("v", pa.string()), *extra])
    return cat.create_table(f"db.{name}", schema, ["k"], None, {"bucket": "2"})


def test_case_sensitive_session_matches_write_columns_exactly(spark, tmp_path, case_sensitive):
    """With ``spark.sql.caseSensitive=true`` Spark's resolver (and so Paimon's Spark writer) matches names exactly:
    a write of ``K`` into column ``k`` is refused with an error naming the table and the column, nothing written,
    and the same for merge_into's source / 'on' columns and update_where's assignments. Before, names were matched
    ignoring case whatever the session said."""
    spark_glue.register(spark)
    t = _kv_table(tmp_path)
    for name, write in _writes(spark).items():
        with pytest.raises(Exception, match=r"db\.t.*'K'|'K'.*db\.t|caseSensitive") as err:
            write(spark.createDataFrame([(1, "a")], "K long, v string"), t.root)
        assert "K" in str(err.value) and "db.t" in str(err.value), name
        assert t.latest_snapshot_id() is None, name
    _writes(spark)["data source"](spark.createDataFrame([(1, "a")], "k long, v string"), t.root)
    spark_glue.write_table(spark.createDataFrame([(2, "b")], "k long, v string"), t.root)
    latest = t.latest_snapshot_id()
    with pytest.raises(Exception, match=r"db\.t.*'on' columns \['k'\] must be columns of both"):
        spark_glue.merge_into(spark, t.root, spark.createDataFrame([(1, "x")], "K long, v string"), on="k")
    with pytest.raises(Exception, match="'V'"):
        spark_glue.update_where(spark, t.root, {"V": "'x'"}, "k = 1")
    assert t.latest_snapshot_id() == latest
    assert sorted(t.read().to_pylist(), key=lambda r: r["k"]) == [{"k": 1, "v": "a"}, {"k": 2, "v": "b"}]


def test_case_insensitive_session_resolves_merge_and_update_names_and_refuses_ambiguous_ones(spark, tmp_path):
    """With Spark's default ``spark.sql.caseSensitive=false``, merge_into's source and 'on' columns and update_where's
    assignments resolve to the table's columns ignoring case, as Spark's resolver would (before: merge_into refused
    'on' column ``K`` and update_where refused ``V`` as unknown). A name that is ambiguous ignoring case (a table with
    columns ``v`` and ``V``, or input columns ``x`` and ``X``) is refused clearly, naming the table and the column,
    and under ``spark.sql.caseSensitive=true`` the same write resolves exactly."""
    spark_glue.register(spark)
    assert spark.conf.get("spark.sql.caseSensitive", "false") == "false"
    t = _kv_table(tmp_path)
    spark_glue.write_table(spark.createDataFrame([(1, "a"), (2, "b")], "k long, v string"), t.root)
    spark_glue.merge_into(spark, t.root, spark.createDataFrame([(1, "x"), (3, "c")], "K long, V string"), on="K")
    spark_glue.update_where(spark, t.root, {"V": "upper(v)"}, "k = 2")
    assert sorted(t.read().to_pylist(), key=lambda r: r["k"]) == [
        {"k": 1, "v": "x"}, {"k": 2, "v": "B"}, {"k": 3, "v": "c"}]
    twin = _kv_table(tmp_path, "twin", extra=[("V", pa.string())])
    df = spark.createDataFrame([(1, "a", "b")], "k long, v string, V string")
    for name, write in _writes(spark).items():
        with pytest.raises(Exception, match=r"ambiguous") as err:
            write(spark.createDataFrame([(1, "a")], "k long, v string"), twin.root)
        assert "db.twin" in str(err.value) and "'v'" in str(err.value), name
    with pytest.raises(Exception, match="ambiguous"):
        spark_glue.merge_into(spark, t.root, df, on="k")
    assert twin.latest_snapshot_id() is None
    before = spark.conf.get("spark.sql.caseSensitive", "false")
    spark.conf.set("spark.sql.caseSensitive", "true")
    try:
        for write in _writes(spark).values():
            write(df, twin.root)
    finally:
        spark.conf.set("spark.sql.caseSensitive", before)
    assert twin.read().to_pylist() == [{"k": 1, "v": "a", "V": "b"}]


def test_decimals_are_rounded_to_the_table_scale_as_spark_casts_them(spark, tmp_path):
    """A decimal with more fraction digits than the table's DECIMAL column (``price * qty`` has a wider scale) and a
    double are rounded as Spark's store assignment casts them (ROUND_HALF_UP, a double by its decimal form), the
    value Paimon's Spark writer receives; Spark's own CAST is the oracle. A value too wide for the precision is still
    refused naming the column. Before, any lost digit was refused ('Rescaling Decimal128 value would cause data
    loss') on DataFrame writes, while SQL INSERT INTO a view (cast by Spark) rounded."""
    spark_glue.register(spark)
    t = _kv_table(tmp_path, "dec", extra=[("amt", pa.decimal128(10, 2)), ("f", pa.decimal128(10, 2))])
    df = spark.sql("SELECT id AS k, CAST(id AS STRING) AS v, amt, f FROM VALUES "
                   "(1L, CAST(1.505 AS DECIMAL(6,3)), 5.125D), (2L, CAST(-2.345 AS DECIMAL(6,3)), 1.005D), "
                   "(3L, CAST(0.004 AS DECIMAL(6,3)), -0.125D), (4L, NULL, NULL) AS x(id, amt, f)")
    spark_glue.write_table(df.where("k <= 2"), t.root)
    df.where("k > 2").write.format("lakemerge").mode("append").save(t.root)
    want = {r.k: (r.amt, r.f) for r in df.selectExpr("k", "CAST(amt AS DECIMAL(10,2)) AS amt",
                                                     "CAST(f AS DECIMAL(10,2)) AS f").collect()}
    assert want[1] == (decimal.Decimal("1.51"), decimal.Decimal("5.13"))  # the oracle rounds half up
    assert {r["k"]: (r["amt"], r["f"]) for r in t.read().to_pylist()} == want
    latest = t.latest_snapshot_id()
    wide = spark.sql("SELECT 5L AS k, 'x' AS v, CAST(123456789.125 AS DECIMAL(12,3)) AS amt, 1.0D AS f")
    for write in _writes(spark).values():
        with pytest.raises(Exception, match=r"db\.dec.*'amt'"):
            write(wide, t.root)
    assert t.latest_snapshot_id() == latest


def test_decimal_rounding_that_carries_into_a_new_digit(spark, tmp_path):
    """Rounding can carry into a digit the input's precision has no room for: 9.999 (DECIMAL(4,3)) into a
    DECIMAL(5,2) column is 10.00 as Spark's CAST rounds it (the oracle), -9.995 is -10.00. Before, Arrow's round
    kept the input type DECIMAL(4,3), could not hold 10.000 and silently produced 0.00 -- a wrong stored value."""
    spark_glue.register(spark)
    t = _kv_table(tmp_path, "carry", extra=[("amt", pa.decimal128(5, 2))])
    df = spark.sql("SELECT id AS k, 'x' AS v, amt FROM VALUES (1L, CAST(9.999 AS DECIMAL(4,3))), "
                   "(2L, CAST(-9.995 AS DECIMAL(4,3))), (3L, CAST(0.994 AS DECIMAL(4,3))) AS x(id, amt)")
    want = {r.k: r.amt for r in df.selectExpr("k", "CAST(amt AS DECIMAL(5,2)) AS amt").collect()}
    assert want[1] == decimal.Decimal("10.00") and want[2] == decimal.Decimal("-10.00")
    spark_glue.write_table(df.where("k = 1"), t.root)
    df.where("k > 1").write.format("lakemerge").mode("append").save(t.root)
    assert {r["k"]: r["amt"] for r in t.read().to_pylist()} == want
    from tests.interop.pypaimon_util import pp_get_table, pp_read
    assert {r["k"]: r["amt"] for r in pp_read(pp_get_table(str(tmp_path / "wh"), "db.carry")).to_pylist()} == want


def test_removing_a_failed_first_write_keeps_a_concurrent_writers_files(tmp_path):
    """A first write created the table and failed while another job, which found the table there, had written
    its data files but not committed yet: undoing the first write must not delete the table under that job.
    Before, the whole table directory was deleted (only a snapshot, tag or branch stopped it): the other job's
    data files were gone and its commit then published a snapshot of missing files into a table without schema.
    Now a table holding any file other than its creator's schema stays, and the other job commits normally."""
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    from spark_glue.tables import open_or_create_table, open_table, remove_created_table
    path = str(tmp_path / "wh" / "db.db" / "t")
    schema = StructType([StructField("k", LongType(), False), StructField("v", StringType())])
    _, created = open_or_create_table(path, {"primary-key": "k", "bucket": "2"}, schema)
    assert created == (path, os.path.dirname(path))
    other = open_table(path)  # a concurrent job: the table is there, its files are written, no commit yet
    with other.new_write() as w:
        w.write(pa.table({"k": [1, 2, 3], "v": ["a", "b", "c"]}, schema=other.arrow_schema))
        messages = w.prepare_commit()
    remove_created_table(created)  # the first write failed
    other.commit(messages)
    assert sorted(open_table(path).read().to_pylist(), key=lambda r: r["k"]) == [
        {"k": 1, "v": "a"}, {"k": 2, "v": "b"}, {"k": 3, "v": "c"}]
    # with nothing but its own schema in it, the created table and database directory do go
    path2 = str(tmp_path / "wh" / "db2.db" / "t")
    _, created = open_or_create_table(path2, {"primary-key": "k", "bucket": "2"}, schema)
    os.makedirs(os.path.join(path2, "bucket-0"))  # an empty directory a failed task left
    remove_created_table(created)
    assert not os.path.exists(os.path.dirname(path2))


def test_a_first_write_with_a_bad_definition_keeps_a_table_created_concurrently(tmp_path, monkeypatch):
    """Two first writes race to one path: the first creates the table; the second, whose definition is invalid
    (a primary key naming no column), found no table when it looked and fails in Catalog.create_table. Its failure
    wrote nothing, so it must remove nothing but empty directories. Before, it removed the table directory as
    its own, and the first job's table was gone under it."""
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    from engine.catalog import Catalog as EngineCatalog
    from engine.errors import InvalidSchema
    from spark_glue.tables import open_or_create_table, open_table
    path = str(tmp_path / "wh" / "db.db" / "t")
    schema = StructType([StructField("k", LongType(), False), StructField("v", StringType())])
    create = EngineCatalog.create_table

    def concurrently_created(self, identifier, *args, **kwargs):
        create(self, identifier, pa.schema([pa.field("k", pa.int64(), nullable=False), ("v", pa.string())]),
               ["k"], (), {"bucket": "1"})  # the other job's first write lands first
        return create(self, identifier, *args, **kwargs)

    monkeypatch.setattr(EngineCatalog, "create_table", concurrently_created)
    with pytest.raises(InvalidSchema):
        open_or_create_table(path, {"primary-key": "nope", "bucket": "2"}, schema)
    monkeypatch.undo()
    assert open_table(path).options.get("bucket") == "1"
    alone = str(tmp_path / "wh" / "alone.db" / "t")  # without a concurrent job: no directory is left behind
    with pytest.raises(InvalidSchema):
        open_or_create_table(alone, {"primary-key": "nope", "bucket": "2"}, schema)
    assert not os.path.exists(os.path.dirname(alone))


def test_values_written_into_string_columns_are_spark_cast_text(spark, tmp_path, session_zone):
    """A TIMESTAMP_NTZ, TIMESTAMP, DOUBLE or FLOAT written into a STRING column is stored as Spark's CAST renders it
    (Paimon's Spark writer receives Spark's cast rows): '2024-01-01 10:00:00' (fraction without trailing zeros, a
    TIMESTAMP's wall time in the session zone), '1.0', '1.0E20', 'NaN', 'Infinity'. Spark's own CAST is the oracle.
    Before, Arrow's text was stored: '2024-01-01 10:00:00.000000', '2024-01-01 15:00:00.000000Z', '1', '1e+20'."""
    spark_glue.register(spark)
    t = _kv_table(tmp_path, "text", extra=[("ntz", pa.string()), ("ltz", pa.string()), ("dbl", pa.string()),
                                           ("flt", pa.string())])
    df = spark.sql("SELECT id AS k, 'x' AS v, ntz, ltz, dbl, CAST(dbl AS FLOAT) AS flt FROM VALUES "
                   "(1L, TIMESTAMP_NTZ'2024-01-01 10:00:00', TIMESTAMP'2024-01-01 10:00:00', 1.0D), "
                   "(2L, TIMESTAMP_NTZ'2024-07-01 23:59:59.12', TIMESTAMP'2024-07-01 23:59:59.000001', 1e20D), "
                   "(3L, TIMESTAMP_NTZ'0999-12-31 00:00:00.5', TIMESTAMP'2024-03-10 03:30:00', 0.001D), "
                   "(4L, NULL, NULL, -1.5e-7D), (5L, NULL, NULL, CAST('NaN' AS DOUBLE)), "
                   "(6L, NULL, NULL, CAST('-Infinity' AS DOUBLE)), (7L, NULL, NULL, 1234567.0D), "
                   "(8L, NULL, NULL, 12345678.5D), (9L, NULL, NULL, -0.0D), (10L, NULL, NULL, 0.1D), "
                   "(11L, NULL, NULL, NULL) AS x(id, ntz, ltz, dbl)")
    spark_glue.write_table(df.where("k <= 5"), t.root)
    df.where("k > 5").write.format("lakemerge").mode("append").save(t.root)
    cols = ["ntz", "ltz", "dbl", "flt"]
    want = {r.k: tuple(r[c] for c in cols)
            for r in df.selectExpr("k", *[f"CAST({c} AS STRING) AS {c}" for c in cols]).collect()}
    assert want[1] == ("2024-01-01 10:00:00", "2024-01-01 10:00:00", "1.0", "1.0")  # what the oracle renders
    assert want[2][2] == "1.0E20"
    assert {r["k"]: tuple(r[c] for c in cols) for r in t.read().to_pylist()} == want


def test_timestamps_and_integers_are_written_across_as_seconds_and_other_date_time_numbers_refused(spark, tmp_path):
    """A TIMESTAMP written into a BIGINT column is its seconds since the epoch (floored), and a BIGINT written into
    a TIMESTAMP_LTZ column is read as seconds, as Spark's CAST (and so Paimon's Spark writer) converts them; Spark's
    CAST is the oracle. A DATE or TIMESTAMP_NTZ into a number column and a number into a TIMESTAMP_NTZ or DATE
    column, which Spark cannot cast, are refused naming the table and the column before anything is written.
    Before, Arrow's units were stored silently: microseconds (1704067200000000), days (19723), and a BIGINT of
    seconds became a 1970 timestamp."""
    spark_glue.register(spark)
    t = _kv_table(tmp_path, "secs", extra=[("n", pa.int64()), ("at", pa.timestamp("us", tz="UTC")),
                                           ("ntz", pa.timestamp("us")), ("i", pa.int32())])
    df = spark.sql("SELECT id AS k, 'x' AS v, n, at FROM VALUES "
                   "(1L, TIMESTAMP'2024-01-01 00:00:00.9', 1700000000L), (2L, TIMESTAMP'1969-12-31 23:59:59.5', -1L), "
                   "(3L, NULL, NULL) AS x(id, n, at)")
    spark_glue.write_table(df.where("k <= 2"), t.root)
    df.where("k > 2").write.format("lakemerge").mode("append").save(t.root)
    want = {r.k: (r.n, r.at) for r in df.selectExpr("k", "CAST(n AS BIGINT) AS n",
                                                    "CAST(at AS TIMESTAMP) AS at").collect()}
    assert want[1][0] == 1704067200 and want[2][0] == -1  # the oracle floors to seconds
    got = {r["k"]: (r["n"], r["at"]) for r in t.read().to_pylist()}
    assert {k: n for k, (n, _) in got.items()} == {k: n for k, (n, _) in want.items()}
    assert {k: None if a is None else a.timestamp() for k, (_, a) in got.items()} == \
        {k: None if a is None else a.replace(tzinfo=UTC).timestamp() for k, (_, a) in want.items()}
    latest = t.latest_snapshot_id()
    refused = {"i": "SELECT 9L AS k, DATE'2024-01-01' AS i", "n": "SELECT 9L AS k, TIMESTAMP_NTZ'2024-01-01' AS n",
               "ntz": "SELECT 9L AS k, 1700000000L AS ntz"}
    for column, sql in refused.items():
        for write in _writes(spark).values():
            with pytest.raises(Exception, match=rf"db\.secs.*'{column}'"):
                write(spark.sql(sql), t.root)
    assert t.latest_snapshot_id() == latest


def test_decimals_written_into_string_columns_are_plain_text(spark, tmp_path):
    """A DECIMAL written into a STRING column is stored as Spark's CAST renders it, in plain notation with all the
    scale's digits ('0.000000001', '0.000000100', '0.000000000'); Spark's CAST is the oracle. Before, Arrow's text
    was stored: '1E-9', '1.00E-7', '0E-9'."""
    t = _kv_table(tmp_path, "dectext", extra=[("d", pa.string())])
    df = spark.sql("SELECT id AS k, 'x' AS v, CAST(d AS DECIMAL(10, 9)) AS d FROM VALUES (1L, '0.000000001'), "
                   "(2L, '0.0000001'), (3L, '0'), (4L, '-1.5'), (5L, '0.0001'), (6L, NULL) AS x(id, d)")
    spark_glue.write_table(df.where("k <= 3"), t.root)
    df.where("k > 3").write.format("lakemerge").mode("append").save(t.root)
    want = {r.k: r.d for r in df.selectExpr("k", "CAST(d AS STRING) AS d").collect()}
    assert want[1] == "0.000000001" and want[3] == "0.000000000"  # what the oracle renders
    assert {r["k"]: r["d"] for r in t.read().to_pylist()} == want


def test_seconds_beyond_the_timestamp_range_are_refused_naming_the_column(spark, tmp_path):
    """An integer written into a TIMESTAMP_LTZ column is read as seconds; seconds whose microseconds do not fit a
    64-bit timestamp are refused naming the table and the column, and nothing is committed (Spark's CAST saturates
    them to its largest timestamp, year 294247; lakemerge refuses rather than store that). Before, a bare Arrow
    'overflow' error named neither."""
    t = _kv_table(tmp_path, "farsecs", extra=[("at", pa.timestamp("us", tz="UTC"))])
    spark_glue.write_table(spark.sql("SELECT 1L AS k, 'x' AS v, 1700000000L AS at"), t.root)
    latest = t.latest_snapshot_id()
    for write in _writes(spark).values():
        with pytest.raises(Exception, match=r"db\.farsecs.*'at'.*beyond the timestamp range"):
            write(spark.sql("SELECT 2L AS k, 'y' AS v, 100000000000000L AS at"), t.root)
    assert t.latest_snapshot_id() == latest
    assert [r["at"] for r in t.read().to_pylist()] == [dt.datetime.fromtimestamp(1700000000, UTC)]


def test_dates_written_into_timestamp_ltz_columns_are_midnight_in_the_session_zone(spark, tmp_path, session_zone):
    """A DATE written into a TIMESTAMP_LTZ column is the instant of that day's midnight in the session time zone,
    as Spark's CAST (which Paimon's Spark writer applies) converts it; into a TIMESTAMP column it is the midnight
    wall time. Before, midnight UTC was stored (2024-01-01 00:00Z instead of 05:00Z in New York)."""
    t = _kv_table(tmp_path, "dates", extra=[("ltz", pa.timestamp("us", tz="UTC")), ("ntz", pa.timestamp("us"))])
    df = spark.sql("SELECT id AS k, 'x' AS v, d AS ltz, d AS ntz FROM VALUES (1L, DATE'2024-01-01'), "
                   "(2L, DATE'2024-07-01'), (3L, NULL) AS x(id, d)")
    spark_glue.write_table(df.where("k <= 2"), t.root)
    df.where("k > 2").write.format("lakemerge").mode("append").save(t.root)
    want = {r.k: (r.ltz, r.ntz) for r in df.selectExpr("k", "CAST(unix_micros(CAST(ltz AS TIMESTAMP)) AS BIGINT) ltz",
                                                        "CAST(CAST(ntz AS TIMESTAMP_NTZ) AS STRING) ntz").collect()}
    assert want[1] == (dt.datetime(2024, 1, 1, 5, tzinfo=UTC).timestamp() * 1_000_000, "2024-01-01 00:00:00")
    got = {r["k"]: (None if r["ltz"] is None else int(r["ltz"].timestamp()) * 1_000_000,
                    None if r["ntz"] is None else r["ntz"].strftime("%Y-%m-%d %H:%M:%S")) for r in t.read().to_pylist()}
    assert got == want
