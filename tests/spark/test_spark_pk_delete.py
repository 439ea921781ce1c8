"""spark_glue.delete_where on primary-key tables whose merge engine cannot take a delete record (first-row,
aggregation / partial-update without remove-record-on-delete): Spark evaluates the condition on the merged read,
tasks rewrite or mark the files (spark_glue.pk_delete); the result equals the engine's Table.delete_where."""
from __future__ import annotations

import pyarrow as pa
import pytest

import spark_glue
from engine import Catalog
from engine.errors import InvalidInput

SCHEMA = pa.schema([pa.field("dt", pa.string(), False), pa.field("id", pa.int64(), False), ("v", pa.string()),
                    ("n", pa.int64())])
AGG = {"merge-engine": "aggregation", "fields.n.aggregate-function": "sum"}


def make(root, name, options):
    cat = Catalog(str(root))
    cat.create_database("db", ignore_if_exists=True)
    t = cat.create_table(f"db.{name}", SCHEMA, ["dt", "id"], ["dt"], options=options)
    for rnd in range(3):
        ids = list(range(rnd, 30, 2))
        t.write(pa.table({"dt": ["a" if i % 3 else "b" for i in ids], "id": ids,
                          "v": [f"v{rnd}" for _ in ids], "n": [i + rnd for i in ids]}, schema=SCHEMA))
    return t


def state(t) -> dict:
    return {(r["dt"], r["id"]): (r["v"], r["n"]) for r in t.read().to_pylist()}


@pytest.mark.parametrize("options", [{"bucket": "2", **AGG}, {"bucket": "2", "deletion-vectors.enabled": "true", **AGG},
                                     {"bucket": "-1", **AGG}, {"bucket": "2", "merge-engine": "first-row"},
                                     {"bucket": "2", "merge-engine": "partial-update"}],
                         ids=["agg", "agg-dv", "agg-dynamic", "first-row", "partial-update"])
def test_equals_the_engine_path(spark, tmp_path, options):
    engine_t = make(tmp_path / "e", "t", options)
    spark_t = make(tmp_path / "s", "t", options)
    for t in (engine_t, spark_t):
        t.compact(full=True)
    before = state(spark_t)
    assert engine_t.delete_where([("n", ">", 20)]) is not None
    sid = spark_glue.delete_where(spark, spark_t.root, "n > 20")
    assert spark_t.snapshot(sid).commit_kind == "OVERWRITE"
    assert state(spark_t) == state(engine_t) == {k: v for k, v in before.items() if not v[1] > 20}
    assert spark_glue.delete_where(spark, spark_t.root, "n > 1000") is None
    assert spark_t.check().ok and not spark_t.check(verify_data=False).orphan_files


def test_uncompacted_buckets_are_refused(spark, tmp_path):
    t = make(tmp_path, "t", {"bucket": "2", **AGG})
    before, sid = state(t), t.latest_snapshot_id()
    with pytest.raises(InvalidInput, match="COMPACT"):
        spark_glue.delete_where(spark, t.root, "n > 20")
    assert t.latest_snapshot_id() == sid and state(t) == before
    assert not t.check(verify_data=False).orphan_files


def test_a_compaction_before_the_commit_conflicts(spark, tmp_path, monkeypatch):
    """A compaction published between the tasks' rewrite and the driver's commit: CommitConflict, the table
    unchanged and no file of the job left behind."""
    from engine.errors import CommitConflict
    from spark_glue import append_dml
    t = make(tmp_path, "t", {"bucket": "2", **AGG})
    t.compact(full=True)
    other = Catalog(str(tmp_path)).get_table("db.t")
    original = append_dml.commit_changes

    def racing(*args, **kwargs):
        other.write(pa.table({"dt": ["a"], "id": [1], "v": ["z"], "n": [1]}, schema=SCHEMA))
        other.compact(full=True)
        return original(*args, **kwargs)
    monkeypatch.setattr(append_dml, "commit_changes", racing)
    with pytest.raises(CommitConflict):
        spark_glue.delete_where(spark, t.root, "n > 20")
    monkeypatch.undo()
    assert any(n > 20 for _, n in state(t).values())  # nothing deleted
    report = t.check()
    assert report.ok and not report.orphan_files, report.summary()


def test_partition_only_condition_truncates_without_compaction(spark, tmp_path):
    """As the engine (Paimon's metadata-only DELETE): a partition-only condition, or none, truncates; the
    uncompacted buckets are no obstacle."""
    t = make(tmp_path, "t", {"bucket": "2", **AGG})
    before = state(t)
    sid = spark_glue.delete_where(spark, t.root, "dt = 'b'")
    assert t.snapshot(sid).commit_kind == "OVERWRITE"
    assert state(t) == {k: v for k, v in before.items() if k[0] != "b"}
    spark_glue.delete_where(spark, t.root, None)
    assert state(t) == {} and not t.check(verify_data=False).orphan_files


@pytest.mark.parametrize("options", [{"bucket": "2"}, {"bucket": "2", "delete.force-produce-changelog": "true"}],
                         ids=["truncate", "force-produce-changelog"])
def test_deduplicate_partition_only_condition(spark, tmp_path, options):
    """A deduplicate table (it takes delete records) follows the same rule: a partition-only condition truncates
    (OVERWRITE, no -D records), unless delete.force-produce-changelog asks for -D records (APPEND)."""
    t = make(tmp_path, "t", options)
    before = state(t)
    sid = spark_glue.delete_where(spark, t.root, "dt = 'b'")
    forced = "delete.force-produce-changelog" in options
    assert t.snapshot(sid).commit_kind == ("APPEND" if forced else "OVERWRITE")
    assert state(t) == {k: v for k, v in before.items() if k[0] != "b"}
