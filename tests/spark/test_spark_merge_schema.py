"""Spark writes with Paimon's write.merge-schema: the data source, write_table and the streaming writers add the
input's new columns (and, with write.merge-schema.type-widening, widen types) once on the driver before the
tasks run; the tasks' files carry the merged schema id. Checked against a dict-of-rows model."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import spark_glue
from engine import Catalog
from engine.errors import SchemaMismatch

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), ("qty", pa.int32())])


@pytest.fixture
def table(tmp_path):
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    t = cat.create_table("db.t", SCHEMA, ["id"], options={"bucket": "2"})
    t.write(pa.table({"id": [1, 2], "qty": pa.array([10, 20], pa.int32())}, schema=SCHEMA))
    return t


def _fresh(t):
    return Catalog(t.root.rsplit("/", 2)[0]).get_table("db.t")


def _rows(t) -> list[dict]:
    return sorted(_fresh(t).read().to_pylist(), key=lambda r: r["id"])


def _model(rows_by_id: dict, columns) -> list[dict]:
    return [{c: r.get(c) for c in columns} for _, r in sorted(rows_by_id.items())]


def _file_schema_ids(t) -> set[int]:
    t = _fresh(t)
    return {e.file.schema_id for e in t.manifests.live_entries(t.snapshot_manager.latest())}


def test_data_source_write_adds_columns_once_on_the_driver(spark, table):
    model = {1: {"id": 1, "qty": 10}, 2: {"id": 2, "qty": 20}}
    df = spark.createDataFrame([(2, "b", 2.5), (3, "c", None)], "id bigint, note string, score double")
    with pytest.raises(Exception, match="not in the table"):  # without the option: refused as before
        df.write.format("lakemerge").mode("append").save(table.root)
    df.write.format("lakemerge").option("write.merge-schema", "true").mode("append").save(table.root)
    for r in ({"id": 2, "note": "b", "score": 2.5}, {"id": 3, "note": "c", "score": None}):
        model[r["id"]] = {**model.get(r["id"], {}), "qty": None, **r}  # qty is written null (not in the input)
    t = _fresh(table)
    assert [s.id for s in t.schemas()] == [0, 1]  # one schema change, not one per task
    assert t.schema.field_names == ("id", "qty", "note", "score")
    assert _rows(table) == _model(model, t.schema.field_names)
    assert 1 in _file_schema_ids(table)  # the tasks wrote under the merged schema


def test_write_table_merges_and_widens_types(spark, table):
    df = spark.createDataFrame([(3, 2 ** 40, "x")], "id bigint, qty bigint, tag string")
    # types kept: the tasks' safe cast refuses a BIGINT value INT cannot hold (a Spark task failure)
    with pytest.raises(Exception, match="'qty' has type int64, which cannot be cast safely"):
        spark_glue.write_table(df, table.root, merge_schema=True)
    assert _fresh(table).schema.field_names == ("id", "qty", "tag")  # the schema commit came first and stays
    spark_glue.write_table(df, table.root, merge_schema=True, type_widening=True)
    t = _fresh(table)
    assert t.schema.field("qty").type.root == "BIGINT" and t.schema.id == 2
    assert _rows(table) == [{"id": 1, "qty": 10, "tag": None}, {"id": 2, "qty": 20, "tag": None},
                            {"id": 3, "qty": 2 ** 40, "tag": "x"}]


def test_type_widening_refuses_narrowing_in_spark(spark, table):
    df = spark.createDataFrame([(3, 1)], "id bigint, qty smallint")
    with pytest.raises(Exception, match="SchemaMismatch: table 'db.t': column 'qty' is INT in the table and SMALLINT"):
        (df.write.format("lakemerge").option("write.merge-schema", "true")
         .option("write.merge-schema.type-widening", "true").mode("append").save(table.root))
    assert _fresh(table).schema.id == 0
    with pytest.raises(SchemaMismatch, match="'qty' is INT in the table and SMALLINT"):  # write_table: on the driver
        spark_glue.write_table(df, table.root, merge_schema=True, type_widening=True)


def test_streaming_writers_merge_the_schema(spark, table, tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    pq.write_table(pa.table({"id": [5], "qty": pa.array([50], pa.int32()), "city": ["rome"]}),
                   str(src / "a.parquet"))
    stream = spark.readStream.schema("id bigint, qty int, city string").parquet(str(src))
    q = (stream.writeStream.format("lakemerge").option("checkpointLocation", str(tmp_path / "ck"))
         .option("write.merge-schema", "true").trigger(availableNow=True).start(table.root))
    q.awaitTermination(120)
    assert _fresh(table).schema.field_names == ("id", "qty", "city")
    write = spark_glue.stream_batch_writer(table.root, commit_user="pipe", merge_schema=True)
    write(spark.createDataFrame([(6, "oslo", True)], "id bigint, city string, vip boolean"), 0)
    t = _fresh(table)
    assert t.schema.field_names == ("id", "qty", "city", "vip")
    assert _rows(table) == [{"id": 1, "qty": 10, "city": None, "vip": None},
                            {"id": 2, "qty": 20, "city": None, "vip": None},
                            {"id": 5, "qty": 50, "city": "rome", "vip": None},
                            {"id": 6, "qty": None, "city": "oslo", "vip": True}]


def test_struct_fields_are_merged_in(spark, tmp_path):
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    schema = pa.schema([pa.field("id", pa.int64(), False), ("r", pa.struct([("x", pa.int32())]))])
    t = cat.create_table("db.t", schema, ["id"], options={"bucket": "1"})
    t.write(pa.Table.from_pylist([{"id": 1, "r": {"x": 1}}], schema=schema))
    df = spark.createDataFrame([(2, (2, "b"))], "id bigint, r struct<x: int, y: string>")
    df.write.format("lakemerge").option("write.merge-schema", "true").mode("append").save(t.root)
    r = _fresh(t).schema.field("r").type
    assert [f.name for f in r.fields] == ["x", "y"]
    assert _rows(t) == [{"id": 1, "r": {"x": 1, "y": None}}, {"id": 2, "r": {"x": 2, "y": "b"}}]


def test_an_input_the_merged_schema_would_refuse_publishes_nothing(spark, table):
    """Text for the INT column 'qty' is refused by the columns alone (as Paimon's writer refuses it while
    resolving the write, before its schema commit): the new column 'note' is not added either."""
    df = spark.createDataFrame([(3, "7", "n")], "id bigint, qty string, note string")
    with pytest.raises(Exception, match="'qty' is string in the input"):
        df.write.format("lakemerge").option("write.merge-schema", "true").mode("append").save(table.root)
    with pytest.raises(SchemaMismatch, match="'qty' is string in the input"):
        spark_glue.write_table(df, table.root, merge_schema=True)
    t = _fresh(table)
    assert [s.id for s in t.schemas()] == [0] and t.schema.field_names == ("id", "qty")


NESTED = pa.schema([pa.field("id", pa.int64(), False),
                    ("r", pa.struct([("x", pa.int32()), ("y", pa.string())])),
                    ("rs", pa.list_(pa.struct([("a", pa.int32()), ("b", pa.string())]))),
                    ("m", pa.map_(pa.string(), pa.struct([("p", pa.int32()), ("q", pa.string())])))])


def _nested_table(tmp_path):
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    return cat.create_table("db.t", NESTED, ["id"], options={"bucket": "2"})


def test_struct_fields_are_matched_by_name_as_paimon_does(spark, tmp_path):
    """Paimon's Spark writer (PaimonOutputResolver) finds a struct field by name, at any depth and position, with
    Spark's resolver (ignoring case by default): the fields are written in the table's order under its names."""
    t = _nested_table(tmp_path)
    ddl = ("id bigint, r struct<Y: string, x: int>, rs array<struct<b: string, A: int>>, "
           "m map<string, struct<q: string, p: int>>")
    df = spark.createDataFrame([(1, ("one", 1), [("b1", 10)], {"k": ("q1", 100)}),
                                (2, None, None, None)], ddl)
    df.write.format("lakemerge").mode("append").save(t.root)
    spark_glue.write_table(spark.createDataFrame([(3, ("three", 3), [("b3", 30), None], {"k": None})], ddl), t.root)
    assert _rows(t) == [
        {"id": 1, "r": {"x": 1, "y": "one"}, "rs": [{"a": 10, "b": "b1"}], "m": [("k", {"p": 100, "q": "q1"})]},
        {"id": 2, "r": None, "rs": None, "m": None},
        {"id": 3, "r": {"x": 3, "y": "three"}, "rs": [{"a": 30, "b": "b3"}, None], "m": [("k", None)]}]
    assert [s.id for s in _fresh(t).schemas()] == [0]


def test_missing_struct_fields_need_merge_schema(spark, tmp_path):
    """A struct field the input lacks is refused (Paimon: 'is missing in source', strict without merge-schema);
    with write.merge-schema it is written as null, and a new field of the input is added to the table."""
    t = _nested_table(tmp_path)
    ddl = ("id bigint, r struct<y: string, z: double>, rs array<struct<a: int, b: string>>, "
           "m map<string, struct<q: string>>")
    df = spark.createDataFrame([(1, ("one", 1.5), [(1, "b")], {"k": ("q1",)})], ddl)
    with pytest.raises(Exception, match=r"struct field r\.x is missing in the input"):
        df.write.format("lakemerge").mode("append").save(t.root)
    with pytest.raises(SchemaMismatch, match=r"struct field r\.x is missing in the input"):
        spark_glue.write_table(df, t.root)
    assert _fresh(t).latest_snapshot_id() is None and _fresh(t).schema.id == 0
    df.write.format("lakemerge").option("write.merge-schema", "true").mode("append").save(t.root)
    r = _fresh(t).schema.field("r").type
    assert [f.name for f in r.fields] == ["x", "y", "z"]
    df2 = spark.createDataFrame([(2, ("two", 2.5), None, {"j": ("q2",)})], ddl)
    spark_glue.write_table(df2, t.root, merge_schema=True)
    assert _rows(t) == [
        {"id": 1, "r": {"x": None, "y": "one", "z": 1.5}, "rs": [{"a": 1, "b": "b"}],
         "m": [("k", {"p": None, "q": "q1"})]},
        {"id": 2, "r": {"x": None, "y": "two", "z": 2.5}, "rs": None, "m": [("j", {"p": None, "q": "q2"})]}]


def test_session_conf_spark_paimon_write_merge_schema(spark, table, tmp_path):
    """Paimon's connector reads session conf spark.paimon.<option> as a dynamic option (OptionUtils), which a write
    option overrides: write_table and stream_batch_writer honour it. A Python data source's planner cannot see
    session conf, so df.write.format("lakemerge") needs the write option."""
    df = spark.createDataFrame([(3, 2 ** 40, "x")], "id bigint, qty bigint, tag string")
    spark.conf.set("spark.paimon.write.merge-schema", "true")
    spark.conf.set("spark.paimon.write.merge-schema.type-widening", "true")
    try:
        with pytest.raises(Exception, match="not in the table"):
            df.write.format("lakemerge").mode("append").save(table.root)
        with pytest.raises(SchemaMismatch, match="not in the table"):  # the write option wins over the session
            spark_glue.write_table(df, table.root, merge_schema=False)
        assert _fresh(table).schema.id == 0
        spark_glue.write_table(df, table.root)
        t = _fresh(table)
        assert t.schema.field_names == ("id", "qty", "tag") and t.schema.field("qty").type.root == "BIGINT"
        write = spark_glue.stream_batch_writer(table.root, commit_user="pipe")
        write(spark.createDataFrame([(4, True)], "id bigint, vip boolean"), 0)
    finally:
        spark.conf.unset("spark.paimon.write.merge-schema")
        spark.conf.unset("spark.paimon.write.merge-schema.type-widening")
    assert _rows(table) == [{"id": 1, "qty": 10, "tag": None, "vip": None},
                            {"id": 2, "qty": 20, "tag": None, "vip": None},
                            {"id": 3, "qty": 2 ** 40, "tag": "x", "vip": None},
                            {"id": 4, "qty": None, "tag": None, "vip": True}]


def test_a_dataframe_or_stream_older_than_a_widening_reads_values_that_fit(spark, table, tmp_path):
    """A DataFrame (or readStream) keeps the Spark schema it was created with. Run after a merge widened 'qty'
    INT -> BIGINT, it reads the values that fit the old type exactly; a value that does not fit fails with a
    SchemaMismatch naming the table and column. (Paimon's reader, whose table object keeps the old schema, casts
    BIGINT -> INT with Number::intValue and silently wraps such a value.)"""
    df = spark.read.format("lakemerge").load(table.root)
    late = spark.read.format("lakemerge").load(table.root)  # first run later (a run DataFrame keeps its plan)
    stream = spark_glue.read_stream(spark, table.root, changelog=False)
    t = _fresh(table)
    t.write(pa.table({"id": [3], "qty": pa.array([30], pa.int64())}), merge_schema=True, type_widening=True)
    assert _fresh(table).schema.field("qty").type.root == "BIGINT"
    assert sorted(df.collect()) == [(1, 10), (2, 20), (3, 30)]
    t.write(pa.table({"id": [4], "qty": pa.array([2 ** 40], pa.int64())}))
    with pytest.raises(Exception, match=r"SchemaMismatch: table 'db.t'.*column 'qty'.*create the DataFrame"):
        late.collect()
    out = str(tmp_path / "out")
    q = (stream.writeStream.format("parquet").option("checkpointLocation", str(tmp_path / "ck"))
         .option("path", out).trigger(availableNow=True).start())
    with pytest.raises(Exception, match=r"SchemaMismatch: table 'db.t'.*column 'qty'"):
        q.awaitTermination(120)


def test_merge_into_evolves_the_schema_with_the_session_conf(spark, table):
    """Paimon's MERGE INTO schema evolution (MergeSchemaEvolutionHelper, spark.paimon.write.merge-schema): with
    UPDATE * / INSERT * the source's new columns are added before the merge; without the setting they are
    ignored, as before; an explicit assignment adds the source column its key names."""
    source = spark.createDataFrame([(2, 21, "two"), (5, 50, "five")], "id bigint, qty int, note string")
    spark_glue.merge_into(spark, table.root, source, on="id")
    assert _fresh(table).schema.field_names == ("id", "qty")
    spark.conf.set("spark.paimon.write.merge-schema", "true")
    try:
        spark_glue.merge_into(spark, table.root, source, on="id")
        assert _fresh(table).schema.field_names == ("id", "qty", "note")
        assert _rows(table) == [{"id": 1, "qty": 10, "note": None}, {"id": 2, "qty": 21, "note": "two"},
                                {"id": 5, "qty": 50, "note": "five"}]
        tagged = spark.createDataFrame([(1, "gold")], "id bigint, tier string")
        spark_glue.merge_into(spark, table.root, tagged, on="id", when_matched={"tier": "s.tier"},
                              when_not_matched=None)
    finally:
        spark.conf.unset("spark.paimon.write.merge-schema")
    t = _fresh(table)
    assert t.schema.field_names == ("id", "qty", "note", "tier") and [s.id for s in t.schemas()] == [0, 1, 2]
    assert _rows(table)[0] == {"id": 1, "qty": 10, "note": None, "tier": "gold"}


def test_merge_into_refused_arguments_publish_no_schema(spark, table):
    """merge_into's arguments are checked against the merged schema before it is published: a refused merge
    (an INSERT * whose source lacks a table column, an unknown clause, an 'on' column the source lacks, UPDATE *
    setting a primary key) leaves the table's schema as it was, with no new schema file."""
    source = spark.createDataFrame([(2, "two")], "id bigint, note string")  # no 'qty': INSERT * cannot insert
    spark.conf.set("spark.paimon.write.merge-schema", "true")
    try:
        with pytest.raises(Exception, match=r"inserting needs every table column in the source; missing \['qty'\]"):
            spark_glue.merge_into(spark, table.root, source, on="id")
        with pytest.raises(Exception, match="when_not_matched must be 'insert' or None"):
            spark_glue.merge_into(spark, table.root, source, on="id", when_not_matched="upsert")
        with pytest.raises(Exception, match="'on' columns"):
            spark_glue.merge_into(spark, table.root, source, on="key", when_not_matched=None)
    finally:
        spark.conf.unset("spark.paimon.write.merge-schema")
    t = _fresh(table)
    assert [s.id for s in t.schemas()] == [0] and t.schema.field_names == ("id", "qty")
    assert _rows(table) == [{"id": 1, "qty": 10}, {"id": 2, "qty": 20}]


def test_row_level_dml_never_merges_the_schema(spark, tmp_path):
    """A DELETE / UPDATE writes the table's own rows: as Paimon's (which write with the table's schema), it
    never evolves the schema, whatever spark.paimon.write.merge-schema(.type-widening) the session sets. A
    TIMESTAMP(3) column reads as a Spark timestamp (microseconds), which a merging write would widen to
    TIMESTAMP(6)."""
    import datetime
    schema = pa.schema([pa.field("id", pa.int64(), False), ("ts", pa.timestamp("ms")), ("v", pa.int32())])
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    t = cat.create_table("db.t", schema, ["id"], options={"bucket": "2"})
    day = datetime.datetime(2024, 1, 1)
    t.write(pa.table({"id": [1, 2, 3], "ts": pa.array([day] * 3, pa.timestamp("ms")),
                      "v": pa.array([1, 2, 3], pa.int32())}, schema=schema))
    spark.conf.set("spark.paimon.write.merge-schema", "true")
    spark.conf.set("spark.paimon.write.merge-schema.type-widening", "true")
    try:
        spark_glue.delete_where(spark, t.root, "id = 1")
        spark_glue.update_where(spark, t.root, {"v": "v + 10"}, "id = 2")
    finally:
        spark.conf.unset("spark.paimon.write.merge-schema")
        spark.conf.unset("spark.paimon.write.merge-schema.type-widening")
    fresh = _fresh(t)
    assert [s.id for s in fresh.schemas()] == [0] and fresh.schema.field("ts").type.precision == 3
    assert _rows(t) == [{"id": 2, "ts": day, "v": 12}, {"id": 3, "ts": day, "v": 3}]
