"""Deletion-vector tables between lakemerge and pypaimon 2.1 (which reads Paimon's 32-bit deletion vectors and,
like Java, reads a DV table's files above level 0 without merging and hides level 0).

Before lakemerge wrote deletion vectors, pypaimon read every stale version of an updated key of a lakemerge DV
table. pypaimon never compacts, so it writes DV tables' level 0 only; lakemerge's compaction then writes the
vectors that both read.
"""
from __future__ import annotations

import random

import pyarrow as pa
import pytest

from tests.interop.dict_model import DictModel
from tests.interop.pypaimon_util import (
    assert_rows_equal,
    pp_catalog,
    pp_create_table,
    pp_get_table,
    pp_read,
    pp_write,
    rows_of,
)
from tests.interop.scenarios import Scenario, all_scenarios
from tests.interop.test_lakemerge_writes_pypaimon_reads import lm_catalog

pytestmark = pytest.mark.interop

DV = {"deletion-vectors.enabled": "true"}


def _same_at_every_snapshot(wh, identifier, lm_table, key):
    pp = pp_get_table(wh, identifier)
    for snap in lm_table.snapshots():
        assert_rows_equal(rows_of(pp_read(pp, snap.id), key), rows_of(lm_table.read(snapshot_id=snap.id), key), key,
                          f"{identifier} snapshot {snap.id} ({snap.commit_kind}): pypaimon (actual) vs lakemerge:")


@pytest.mark.parametrize("sc", all_scenarios(), ids=lambda s: s.name)
def test_pypaimon_reads_lakemerge_dv_tables_like_lakemerge(sc: Scenario, tmp_path):
    wh = str(tmp_path / "warehouse")
    t = lm_catalog(wh).create_table(sc.identifier, schema=sc.schema, primary_key=sc.primary_key,
                                    partition_keys=sc.partition_keys, options={**sc.options, **DV})
    model = DictModel(sc.schema, sc.primary_key, sc.sequence_fields, rowkind_field="rk")
    for i in range(len(sc.commits)):
        data = sc.commit_table(i)
        model.apply(data)
        model.commit(t.write(data))
    assert any(f.level > 0 for sp in t.plan() for f in sp.files)
    _same_at_every_snapshot(wh, sc.identifier, t, list(sc.primary_key))
    if not sc.sequence_fields:  # with a sequence field, DV mode drops tombstones a later, older record outlives
        assert_rows_equal(rows_of(t.read(), list(sc.primary_key)), model.live_rows(None), list(sc.primary_key),
                          f"{sc.identifier}: lakemerge (actual) vs model:")


@pytest.mark.parametrize("engine", ["partial-update", "aggregation"])
def test_pypaimon_reads_lakemerge_dv_tables_of_folding_engines(engine, tmp_path):
    wh = str(tmp_path / "warehouse")
    schema = pa.schema([("k", pa.int64()), ("a", pa.int64()), ("b", pa.string())])
    opts = {"bucket": "2", "merge-engine": engine, "num-sorted-run.compaction-trigger": "3",
            "compaction.max-size-amplification-percent": "1000", **DV}
    if engine == "aggregation":
        opts["fields.a.aggregate-function"] = "sum"
    t = lm_catalog(wh).create_table("db.f", schema=schema, primary_key=["k"], options=opts)
    rnd = random.Random(7)
    t.write(pa.table({"k": list(range(300)), "a": [1] * 300, "b": ["x"] * 300}, schema=schema))
    for _ in range(8):
        keys = rnd.sample(range(300), 40)
        t.write(pa.table({"k": keys, "a": [rnd.choice([None, 2, 3]) for _ in keys],
                          "b": [rnd.choice([None, "y", "z"]) for _ in keys]}, schema=schema))
    assert any(r["_INDEX_TYPE"] == "DELETION_VECTORS" for snap in t.snapshots()
               for r in t.manifests.index_records(snap.index_manifest))
    _same_at_every_snapshot(wh, "db.f", t, ["k"])


def test_lakemerge_compacts_what_pypaimon_writes_into_a_dv_table(tmp_path):
    wh = str(tmp_path / "warehouse")
    schema = pa.schema([("k", pa.int64()), ("v", pa.string())])
    pp = pp_create_table(pp_catalog(wh), "db.t", schema, ["k"], options={"bucket": "2", **DV})
    pp_write(pp, pa.table({"k": [1, 2, 3], "v": ["a", "b", "c"]}))
    pp_write(pp, pa.table({"k": [2, 3, 4], "v": ["B", "C", "D"]}))
    lm = lm_catalog(wh).get_table("db.t")
    assert lm.read().num_rows == 0 and pp_read(pp_get_table(wh, "db.t")).num_rows == 0  # level 0 only: hidden
    lm.compact()
    expected = [{"k": 1, "v": "a"}, {"k": 2, "v": "B"}, {"k": 3, "v": "C"}, {"k": 4, "v": "D"}]
    for _ in range(2):
        lm = lm_catalog(wh).get_table("db.t")
        assert rows_of(lm.read(), ["k"]) == expected
        assert rows_of(pp_read(pp_get_table(wh, "db.t")), ["k"]) == expected
        pp_write(pp_get_table(wh, "db.t"), pa.table({"k": [1, 5], "v": ["A", "E"]}))
        lm_catalog(wh).get_table("db.t").compact()
        expected = [{"k": 1, "v": "A"}] + expected[1:] + ([{"k": 5, "v": "E"}] if len(expected) == 4 else [])
    assert lm_catalog(wh).get_table("db.t").check().ok


IN_BUCKET_DIRS = {"index-file-in-data-file-dir": "true"}


def test_index_files_in_bucket_directories_both_ways(tmp_path):
    """``index-file-in-data-file-dir``: index files (deletion vectors, dynamic-bucket HASH indexes) live in the
    bucket directories, not in ``index/`` (Paimon's IndexInDataFileDirPathFactory); lakemerge used to look for them
    in ``index/`` and failed with CorruptFile on such tables."""
    import os
    wh = str(tmp_path / "warehouse")
    schema = pa.schema([("k", pa.int64()), ("v", pa.string())])
    t = lm_catalog(wh).create_table("db.dv", schema=schema, primary_key=["k"],
                                    options={"bucket": "1", **DV, **IN_BUCKET_DIRS})
    t.write(pa.table({"k": list(range(100)), "v": ["a"] * 100}, schema=schema))
    t.write(pa.table({"k": [1, 2], "v": ["b", "b"]}, schema=schema))
    (split,) = t.plan()
    assert any(n.startswith("index-") for n in os.listdir(split.bucket_dir)) and not os.path.exists(t.root + "/index")
    expected = [{"k": k, "v": "b" if k in (1, 2) else "a"} for k in range(100)]
    assert rows_of(t.read(), ["k"]) == expected
    assert rows_of(pp_read(pp_get_table(wh, "db.dv")), ["k"]) == expected
    assert t.check().ok and not t.check().orphan_files

    pp = pp_create_table(pp_catalog(wh), "db.dyn", schema, ["k"], options={"bucket": "-1", **IN_BUCKET_DIRS})
    pp_write(pp, pa.table({"k": [1, 2, 3], "v": ["a", "b", "c"]}))
    lm = lm_catalog(wh).get_table("db.dyn")
    assert rows_of(lm.read(), ["k"]) == [{"k": 1, "v": "a"}, {"k": 2, "v": "b"}, {"k": 3, "v": "c"}]
    lm.write(pa.table({"k": [3, 4], "v": ["C", "d"]}, schema=schema))  # restores pypaimon's HASH index
    expected = [{"k": 1, "v": "a"}, {"k": 2, "v": "b"}, {"k": 3, "v": "C"}, {"k": 4, "v": "d"}]
    assert rows_of(pp_read(pp_get_table(wh, "db.dyn")), ["k"]) == expected
    assert lm_catalog(wh).get_table("db.dyn").check().ok
