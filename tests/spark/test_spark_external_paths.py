"""Spark jobs on tables with ``data-file.external-paths``: bucket-parallel writes put files under the external
roots, reads find them, and append DML (which groups rows by bucket from ``__paimon_file_path``) maps an external
file back to its bucket."""
from __future__ import annotations

import pyarrow as pa
import pytest

import spark_glue
from engine import Catalog
from engine.data_paths import local_file_path

SCHEMA = pa.schema([("dt", pa.string()), ("id", pa.int64()), ("v", pa.string())])


def batch(dt, ids, tag="v"):
    return pa.table({"dt": [dt] * len(ids), "id": ids, "v": [f"{tag}{i}" for i in ids]}, schema=SCHEMA)


def rows(t: pa.Table) -> list[tuple]:
    return sorted((r["dt"], r["id"], r["v"]) for r in t.to_pylist())


def assert_external(t, tmp_path):
    files = [f for sp in t.plan() for f in sp.files]
    assert files and all(f.external_path and local_file_path(f.external_path).startswith(f"{tmp_path}/ext")
                         for f in files)


@pytest.mark.parametrize("options", [{"bucket": "2", "bucket-key": "id", "deletion-vectors.enabled": "true"},
                                     {"bucket": "2", "bucket-key": "id"}, {}],
                         ids=["fixed-dv", "fixed", "unaware"])
def test_spark_append_dml_on_external_files(spark, tmp_path, options):
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db", ignore_if_exists=True)
    ext = {"data-file.external-paths": f"file:{tmp_path / 'ext1'},file:{tmp_path / 'ext2'}",
           "data-file.external-paths.strategy": "round-robin"}
    t = cat.create_table("db.t", SCHEMA, partition_keys=["dt"], options={**options, **ext})
    spark_glue.write_table(spark.createDataFrame(batch("a", list(range(30))).to_pandas()), t.root)
    spark_glue.write_table(spark.createDataFrame(batch("b", list(range(30, 50))).to_pandas()), t.root)
    assert_external(t, tmp_path)
    model = rows(t.read())
    assert rows(spark_glue.read_table(spark, t.root).toPandas().pipe(pa.Table.from_pandas)) == model
    spark_glue.delete_where(spark, t.root, "id % 4 = 0")
    model = [r for r in model if r[1] % 4]
    assert rows(t.read()) == model
    spark_glue.update_where(spark, t.root, {"v": "concat(v, '!')"}, "id > 20 AND id < 35")
    model = sorted((d, i, v + "!" if 20 < i < 35 else v) for d, i, v in model)
    assert rows(t.read()) == model
    assert_external(t, tmp_path)
    assert t.check().ok, t.check().summary()
