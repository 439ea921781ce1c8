"""pypaimon 2.1.0 reads tables that lakemerge compacted (write-triggered, full, across scenarios), tags lakemerge
created, and tables pypaimon wrote and lakemerge then compacted.

pypaimon never compacts; these tests use it purely as the reader (the oracle). The only merge engine lakemerge
writes in this branch is deduplicate, so that is the engine covered here.
"""
from __future__ import annotations

import pyarrow as pa
import pytest

from tests.conftest import expire_after_latest
from tests.interop.dict_model import DictModel
from tests.interop.oracle import split_pypaimon_phantoms
from tests.interop.pypaimon_util import (
    assert_rows_equal,
    check_file_metadata,
    pp_catalog,
    pp_create_table,
    pp_get_table,
    pp_read,
    pp_write,
    rows_of,
    sort_table,
)
from tests.interop.scenarios import Scenario, all_scenarios
from tests.interop.test_lakemerge_writes_pypaimon_reads import lm_catalog, verify

pytestmark = pytest.mark.interop

COMPACTING = {"num-sorted-run.compaction-trigger": "2", "compaction.read-batch-rows": "5"}


@pytest.mark.parametrize("sc", all_scenarios(), ids=lambda s: s.name)
def test_pypaimon_reads_compacted_tables_at_every_snapshot(sc: Scenario, tmp_path):
    wh = str(tmp_path / "warehouse")
    t = lm_catalog(wh).create_table(sc.identifier, schema=sc.schema, primary_key=sc.primary_key,
                                    partition_keys=sc.partition_keys, options={**sc.options, **COMPACTING})
    model = DictModel(sc.schema, sc.primary_key, sc.sequence_fields, rowkind_field="rk")
    sids = []
    for i in range(len(sc.commits)):
        data = sc.commit_table(i)
        sids.append(t.write(data))
        model.apply(data)
        model.commit(sids[-1])
    sids.append(t.compact(full=True) or sids[-1])
    model.commit(sids[-1])
    kinds = {s.commit_kind for s in t.snapshots()}
    assert "COMPACT" in kinds
    assert any(f.level > 0 for sp in t.plan() for f in sp.files)
    verify(wh, sc.identifier, model, sorted(set(sids)), lm_table=t)


def test_pypaimon_reads_a_lakemerge_tag(tmp_path):
    wh = str(tmp_path / "warehouse")
    schema = pa.schema([("id", pa.int64()), ("v", pa.string())])
    t = lm_catalog(wh).create_table("db.tags", schema=schema, primary_key=["id"], options={"bucket": "2"})
    t.write(pa.table({"id": [1, 2, 3], "v": ["a", "b", "c"]}))
    t.create_tag("v1")
    for i in range(6):
        t.write(pa.table({"id": [2, 10 + i], "v": [f"x{i}", "y"]}))
    t.compact(full=True)
    expire_after_latest(t, retain_min=1, time_retained=0)
    pp = pp_get_table(wh, "db.tags")
    got = pp.copy({"scan.tag-name": "v1"})
    rb = got.new_read_builder()
    rows = sort_table(rb.new_read().to_arrow(rb.new_scan().plan().splits()), ["id"])
    assert rows.to_pylist() == [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}, {"id": 3, "v": "c"}]
    assert rows_of(pp_read(pp), ["id"]) == rows_of(t.read(), ["id"])


def test_lakemerge_compacts_a_pypaimon_table_and_both_keep_writing(tmp_path):
    """pypaimon's files record _DELETE_ROW_COUNT=0 even with -D rows (its bug): a max-level upgrade of such a file
    would keep the deletes, which reads still drop. The model, not pypaimon's phantom rows, is the expectation."""
    wh = str(tmp_path / "warehouse")
    schema = pa.schema([("id", pa.int64()), ("v", pa.string()), ("rk", pa.string())])
    opts = {"bucket": "2", "rowkind.field": "rk"}
    pp = pp_create_table(pp_catalog(wh), "db.mixed", schema, ["id"], [], opts)
    model = DictModel(schema, ["id"], rowkind_field="rk")
    for c in range(4):
        data = pa.table({"id": list(range(c * 3, c * 3 + 8)), "v": [f"p{c}"] * 8,
                         "rk": ["-D" if (i + c) % 5 == 0 else "+I" for i in range(8)]})
        pp_write(pp, data, schema)
        model.apply(data)
    t = lm_catalog(wh).get_table("db.mixed")
    t.compact(full=True)
    assert {f.level for sp in t.plan() for f in sp.files} == {5}
    assert rows_of(t.read(), ["id"]) == model.live_rows()
    pp = pp_get_table(wh, "db.mixed")
    assert split_pypaimon_phantoms(rows_of(pp_read(pp), ["id"]), model, None) == []
    check_file_metadata(pp)
    more = pa.table({"id": [0, 1, 100], "v": ["after"] * 3, "rk": ["+I"] * 3})
    pp_write(pp, more, schema)
    model.apply(more)
    t.write(pa.table({"id": [2], "v": ["lm"], "rk": ["+I"]}))
    model.apply(pa.table({"id": [2], "v": ["lm"], "rk": ["+I"]}))
    assert rows_of(t.read(), ["id"]) == model.live_rows()
    assert_rows_equal(rows_of(pp_read(pp_get_table(wh, "db.mixed")), ["id"]), model.live_rows(), ["id"])


ENGINES_PYPAIMON_READS = ["deduplicate", "first-row", "partial-update"]


@pytest.mark.parametrize("merge_engine", ENGINES_PYPAIMON_READS)
def test_pypaimon_reads_fully_compacted_tables_of_each_merge_engine(merge_engine, tmp_path):
    """After a full compaction every bucket is one top-level run, which pypaimon reads without merging across runs
    (so even first-row, which pypaimon skips at level 0, is readable). Engines this build cannot write are skipped."""
    from engine.options import SUPPORTED_MERGE_ENGINES
    if merge_engine not in SUPPORTED_MERGE_ENGINES:
        pytest.skip(f"merge-engine={merge_engine} is not writable in this build")
    wh = str(tmp_path / "warehouse")
    schema = pa.schema([("id", pa.int64()), ("a", pa.string()), ("b", pa.int64())])
    t = lm_catalog(wh).create_table("db.me", schema=schema, primary_key=["id"],
                                    options={"bucket": "2", "merge-engine": merge_engine, **COMPACTING})
    for c in range(6):
        ids = list(range(c * 3, c * 3 + 10))
        t.write(pa.table({"id": ids, "a": [None if (i + c) % 3 == 0 else f"a{c}" for i in ids],
                          "b": [None if (i + c) % 4 == 0 else c * 100 + i for i in ids]}))
    t.compact(full=True)
    assert {f.level for sp in t.plan() for f in sp.files} == {2}  # trigger 2 -> num-levels 3
    mine = rows_of(t.read(), ["id"])
    assert len(mine) == 25
    assert_rows_equal(rows_of(pp_read(pp_get_table(wh, "db.me")), ["id"]), mine, ["id"],
                      f"{merge_engine}: pypaimon's read of the compacted table (actual) vs lakemerge's")
