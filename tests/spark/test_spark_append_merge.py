"""spark_glue.merge_into on append tables (spark_glue.append_dml.merge_append, Paimon's performMergeForNonPkTable):
matched update / delete with a matched condition, not-matched insert, not-matched-by-source delete, in ONE
snapshot, compared with a Python model; the cardinality check; pypaimon reads the result."""
from __future__ import annotations

import pyarrow as pa
import pytest

import spark_glue
from engine import Catalog
from engine.errors import InvalidInput, MergeCardinalityViolation
from engine.meta.snapshot import COMMIT_KIND_APPEND, COMMIT_KIND_OVERWRITE

SCHEMA = pa.schema([("dt", pa.string()), ("id", pa.int64()), ("v", pa.string()), ("n", pa.int64())])
DDL = "dt string, id long, v string, n long"
DV = {"deletion-vectors.enabled": "true"}
LAYOUTS = [{}, DV, {"bucket": "2", "bucket-key": "id"}, {"bucket": "2", "bucket-key": "id", **DV}]
IDS = ["unaware", "unaware-dv", "fixed", "fixed-dv"]


def batch(dt, ids, tag="v"):
    return pa.table({"dt": [dt] * len(ids), "id": ids, "v": [f"{tag}{i}" for i in ids],
                     "n": [i % 7 if i % 5 else None for i in ids]}, schema=SCHEMA)


def make(tmp_path, options, name="t", write=True):
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db", ignore_if_exists=True)
    t = cat.create_table(f"db.{name}", SCHEMA, partition_keys=["dt"], options=options)
    if write:
        t.write(batch("a", list(range(20))))
        t.write(batch("a", list(range(20, 40)), "w"))
        t.write(batch("b", list(range(40, 60))))
    return t


def rows(t) -> list[tuple]:
    items = t.to_pylist() if isinstance(t, pa.Table) else t
    return sorted((tuple(r.values()) for r in items), key=repr)


def merge_model(target, source, *, matched=None, cond=None, insert=False, delete_by_source=False):
    """SQL MERGE on ``id`` (a null id never matches) over lists of dicts."""
    out = []
    for r in target:
        hits = [s for s in source if s["id"] is not None and s["id"] == r["id"]]
        if hits and matched is not None:
            s = hits[0]
            if cond is None or cond(r, s):
                if matched != "delete":
                    out.append({**r, **matched(r, s)})
                continue
        elif not hits and delete_by_source:
            continue
        out.append(r)
    if insert:
        ids = {r["id"] for r in target}
        out += [dict(s) for s in source if s["id"] is None or s["id"] not in ids]
    return out


SOURCE = [("a", 1, "s1", 3), ("a", 2, "s2", -1), ("b", 45, "s45", 4), ("a", 25, "s25", None),
          ("c", 100, "s100", 1), ("c", 100, "s100b", 2), ("c", None, "snull", 5)]


@pytest.mark.parametrize("options", LAYOUTS, ids=IDS)
def test_merge_matches_the_model(spark, tmp_path, options):
    t = make(tmp_path, options)
    source = spark.createDataFrame(SOURCE, DDL)
    src = [dict(zip(SCHEMA.names, r)) for r in SOURCE]
    model = t.read().to_pylist()
    before = t.latest_snapshot_id()
    # update matched rows whose source n > 0 (NULL counts as false), insert the unmatched source rows
    sid = spark_glue.merge_into(spark, t.root, source, on="id", when_matched={"v": "s.v", "n": "t.n + s.n"},
                                matched_condition="s.n > 0", when_not_matched="insert")
    model = merge_model(model, src, matched=lambda r, s: {"v": s["v"], "n": None if r["n"] is None else
                                                         r["n"] + s["n"]},
                        cond=lambda r, s: s["n"] is not None and s["n"] > 0, insert=True)
    assert sid == before + 1 and t.snapshot(sid).commit_kind == COMMIT_KIND_OVERWRITE
    assert rows(t.read()) == rows(model)
    # delete matched rows, nothing else
    src2 = [{"dt": "x", "id": i, "v": None, "n": None} for i in (3, 4, 41, 100, 999)]
    sid = spark_glue.merge_into(spark, t.root, spark.createDataFrame([tuple(r.values()) for r in src2], DDL),
                                on="id", when_matched="delete", when_not_matched=None)
    model = merge_model(model, src2, matched="delete")
    assert sid == before + 2 and rows(t.read()) == rows(model)
    # "update" from the source (a partition move), and delete every target row the source does not name
    src3 = [{"dt": "b", "id": 5, "v": "moved", "n": 0}, {"dt": "a", "id": 50, "v": "x50", "n": 50},
            {"dt": "a", "id": 1000, "v": "new", "n": 1}]
    keep = [r["id"] for r in model if r["id"] is not None and r["id"] % 4 == 0]
    src3 += [{"dt": r["dt"], "id": r["id"], "v": r["v"], "n": r["n"]} for r in model if r["id"] in keep]
    sid = spark_glue.merge_into(spark, t.root, spark.createDataFrame([tuple(r.values()) for r in src3], DDL),
                                on="id", when_matched="update", when_not_matched="insert",
                                when_not_matched_by_source="delete")
    model = merge_model(model, src3, matched=lambda r, s: dict(s), insert=True, delete_by_source=True)
    assert sid == before + 3 and rows(t.read()) == rows(model)
    report = t.check()
    assert report.ok and not report.warnings and not report.orphan_files, report.summary()


@pytest.mark.parametrize("options", [{}, DV], ids=["cow", "dv"])
def test_cardinality_violation_writes_nothing(spark, tmp_path, options):
    t = make(tmp_path, options)
    before, data = t.latest_snapshot_id(), rows(t.read())
    dup = spark.createDataFrame([("a", 7, "x", 1), ("a", 7, "y", 2)], DDL)
    with pytest.raises(MergeCardinalityViolation) as e:
        spark_glue.merge_into(spark, t.root, dup, on="id", when_matched="delete")
    assert e.value.key["id"] == 7
    assert t.latest_snapshot_id() == before and rows(t.read()) == data and not t.check().orphan_files
    # as Paimon: checked whatever the matched condition says; without when_matched duplicates are inserted
    with pytest.raises(MergeCardinalityViolation):
        spark_glue.merge_into(spark, t.root, dup, on="id", matched_condition="s.v = 'x'")
    new = spark.createDataFrame([("c", 700, "x", 1), ("c", 700, "y", 2)], DDL)
    sid = spark_glue.merge_into(spark, t.root, new.unionByName(dup), on="id", when_matched=None)
    assert t.snapshot(sid).commit_kind == COMMIT_KIND_APPEND  # nothing deleted: an APPEND snapshot
    assert rows(t.read()) == rows([dict(zip(SCHEMA.names, r)) for r in data]
                                  + [{"dt": "c", "id": 700, "v": v, "n": n} for v, n in (("x", 1), ("y", 2))])


def test_merge_into_an_empty_table_and_nothing_to_do(spark, tmp_path):
    t = make(tmp_path, {}, write=False)
    source = spark.createDataFrame([("a", 1, "x", 1)], DDL)
    assert spark_glue.merge_into(spark, t.root, source, on="id", when_not_matched=None) is None
    sid = spark_glue.merge_into(spark, t.root, source, on="id")
    assert rows(t.read()) == [("a", 1, "x", 1)] and t.latest_snapshot_id() == sid
    assert spark_glue.merge_into(spark, t.root, spark.createDataFrame([("a", 2, "y", 2)], DDL), on="id",
                                 when_not_matched=None) is None
    assert t.latest_snapshot_id() == sid
    with pytest.raises(InvalidInput, match="missing"):
        spark_glue.merge_into(spark, t.root, spark.createDataFrame([(1,)], "id long"), on="id")


def test_pypaimon_reads_the_merged_table(spark, tmp_path):
    from tests.interop.pypaimon_util import pp_get_table, pp_read
    t = make(tmp_path, {"bucket": "2", "bucket-key": "id", **DV})
    spark_glue.merge_into(spark, t.root, spark.createDataFrame(SOURCE[:5], DDL), on="id",
                          when_matched={"v": "s.v"}, when_not_matched="insert")
    t2 = make(tmp_path, {}, name="t2")
    spark_glue.merge_into(spark, t2.root, spark.createDataFrame(SOURCE[:5], DDL), on="id",
                          when_matched="update", when_not_matched_by_source="delete")
    for name, table in (("db.t", t), ("db.t2", t2)):
        pp = pp_get_table(str(tmp_path / "wh"), name)
        assert rows(pp_read(pp)) == rows(table.read())


@pytest.mark.parametrize("options", [{}, DV], ids=["cow", "dv"])
def test_concurrent_compaction_conflicts_and_leaves_no_file(spark, tmp_path, monkeypatch, options):
    """The merge rewrote / marked files and appended inserted rows in its tasks; a compaction published before its
    commit removed a touched file: CommitConflict, the table is the compacted one and every job file is gone."""
    import spark_glue.append_dml as dml
    from engine.append.compact import compact_append
    from engine.errors import CommitConflict
    t = make(tmp_path, options)
    original = dml.commit_changes

    def racing(*args, **kwargs):
        compact_append(t, full=True)
        return original(*args, **kwargs)
    monkeypatch.setattr(dml, "commit_changes", racing)
    before = rows(t.read())
    with pytest.raises(CommitConflict):
        spark_glue.merge_into(spark, t.root, spark.createDataFrame(SOURCE, DDL), on="id",
                              when_matched={"v": "s.v"}, when_not_matched="insert")
    assert t.snapshot().commit_kind == "COMPACT" and rows(t.read()) == before
    assert not t.check(verify_data=False).orphan_files
