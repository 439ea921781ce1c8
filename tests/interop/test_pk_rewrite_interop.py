"""pypaimon 2.1 reads what lakemerge's file-rewrite DELETE leaves on primary-key tables whose merge engine cannot
take a delete record (engine.write.pk_rewrite): rewritten files at their level (copy-on-write) and deletion-vector
marks, at every snapshot. The tables are fully compacted first (the DELETE asks for it), which also keeps
pypaimon's known limits out of the way: it skips level-0 files of first-row tables, and its reads of a
first-row table whose key is in two levels above level 0 show both records (README)."""
from __future__ import annotations

import pyarrow as pa
import pytest

from tests.interop.pypaimon_util import pp_get_table, pp_read
from tests.interop.test_lakemerge_writes_pypaimon_reads import lm_catalog

pytestmark = pytest.mark.interop

S = pa.schema([pa.field("dt", pa.string(), False), pa.field("id", pa.int64(), False), ("v", pa.string()),
               ("n", pa.int64())])
AGG = {"merge-engine": "aggregation", "fields.n.aggregate-function": "sum"}
ENGINES = {"aggregation": AGG, "aggregation-dv": {**AGG, "deletion-vectors.enabled": "true"},
           "partial-update": {"merge-engine": "partial-update"}, "first-row": {"merge-engine": "first-row"}}


def rows(t: pa.Table) -> list[tuple]:
    return sorted((r["dt"], r["id"], r["v"], r["n"]) for r in t.to_pylist())


def batch(rnd: int) -> pa.Table:
    ids = list(range(rnd, 40, rnd + 1))
    return pa.table({"dt": ["a" if i % 2 else "b" for i in ids], "id": ids,
                     "v": [None if i % 3 == 0 else f"v{rnd}" for i in ids], "n": [i + rnd for i in ids]}, schema=S)


@pytest.mark.parametrize("engine", list(ENGINES))
def test_pypaimon_reads_lakemerge_pk_deletes(tmp_path, engine):
    wh = str(tmp_path / "warehouse")
    t = lm_catalog(wh).create_table("db.t", S, ["dt", "id"], ["dt"], options={"bucket": "2", **ENGINES[engine]})
    for rnd in range(3):
        t.write(batch(rnd))
    t.compact(full=True)
    compacted = t.latest_snapshot_id()
    assert t.delete_where([("n", ">", 25)]) is not None
    assert t.delete_where([("dt", "=", "b"), ("id", "<", 10)]) is not None
    assert all(r["n"] <= 25 and not (r["dt"] == "b" and r["id"] < 10) for r in t.read().to_pylist())
    pp = pp_get_table(wh, "db.t")
    for snap in t.snapshots():
        if snap.id < compacted:  # first-row data still in level 0 reads empty in pypaimon
            continue
        assert rows(pp_read(pp, snap.id)) == rows(t.read(snapshot_id=snap.id)), f"snapshot {snap.id}"


@pytest.mark.parametrize("options", [{"bucket": "1", "file.format": "orc"}, {"bucket": "1", "file.format": "avro"},
                                     {"bucket": "-2"}], ids=["orc", "avro", "postpone"])
def test_tables_lakemerge_cannot_write_are_refused(tmp_path, options):
    """A file-rewrite DELETE writes data files: on a table lakemerge cannot write them for (pypaimon-written ORC /
    Avro, a postpone bucket) it raises UnsupportedFeature and changes nothing, as the other writes do, instead of
    putting a Parquet file in an ORC table or an ordinary file in the postpone bucket."""
    from engine.errors import UnsupportedFeature
    from tests.interop.pypaimon_util import pp_catalog, pp_create_table, pp_write
    wh = str(tmp_path / "warehouse")
    schema = pa.schema([pa.field("id", pa.int64(), False), ("n", pa.int64())])
    pt = pp_create_table(pp_catalog(wh), "db.t", schema, ["id"], options={**options, **AGG})
    pp_write(pt, pa.table({"id": [1, 2, 3], "n": [1, 2, 3]}, schema=schema))
    t = lm_catalog(wh).get_table("db.t")
    sid, before = t.latest_snapshot_id(), t.read().to_pylist()
    with pytest.raises(UnsupportedFeature, match="db.t"):
        t.delete_where([("id", "=", 2)])
    assert t.latest_snapshot_id() == sid and t.read().to_pylist() == before
