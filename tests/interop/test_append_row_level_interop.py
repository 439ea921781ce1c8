"""pypaimon 2.1 reads what lakemerge's DELETE / UPDATE of append tables leaves, at every snapshot: copy-on-write
rewrites, partition drops, and deletion vectors on append tables (pypaimon applies Paimon's 32-bit vectors to
append-table files), also once lakemerge compacted them away; and lakemerge's DML on files pypaimon wrote."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from engine.append.compact import compact_append
from tests.interop.pypaimon_util import (
    pp_catalog,
    pp_create_table,
    pp_get_table,
    pp_read,
    pp_write,
)
from tests.interop.test_lakemerge_writes_pypaimon_reads import lm_catalog

pytestmark = pytest.mark.interop

SCHEMA = pa.schema([("dt", pa.string()), ("id", pa.int64()), ("v", pa.string())])
LAYOUTS = {"unaware": {}, "fixed": {"bucket": "3", "bucket-key": "id"}}


def batch(dt, ids, tag="v"):
    return pa.table({"dt": [dt] * len(ids), "id": ids, "v": [f"{tag}{i}" for i in ids]}, schema=SCHEMA)


def rows(t: pa.Table) -> list[tuple]:
    return sorted((r["dt"], r["id"], r["v"]) for r in t.to_pylist())


def same_at_every_snapshot(warehouse, t):
    pp = pp_get_table(warehouse, "db.t")
    for snap in t.snapshots():
        assert rows(pp_read(pp, snap.id, sort_by=["id"])) == rows(t.read(snapshot_id=snap.id)), \
            f"snapshot {snap.id} ({snap.commit_kind})"


@pytest.mark.parametrize("dv", [False, True], ids=["cow", "dv"])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_pypaimon_reads_lakemerge_deletes_and_updates(tmp_path, layout, dv):
    wh = str(tmp_path / "warehouse")
    opts = {**LAYOUTS[layout], **({"deletion-vectors.enabled": "true"} if dv else {})}
    t = lm_catalog(wh).create_table("db.t", SCHEMA, partition_keys=["dt"], options=opts)
    t.write(batch("a", list(range(20))))
    t.write(batch("a", list(range(20, 30)), "w"))
    t.write(batch("b", list(range(30, 40))))
    t.delete_where([("id", "in", [1, 5, 22, 31])])
    t.delete_where([("id", ">=", 36)])
    t.update_where({"v": "updated"}, [("id", "<", 4)])
    t.update_where({"dt": "c", "id": lambda r: pc.add(r["id"], 100)}, [("id", "=", 25)])
    t.delete_where([("dt", "=", "b")])
    assert rows(t.read()) == sorted(
        [("a", i, "updated" if i < 4 else f"v{i}") for i in range(20) if i not in (1, 5)]
        + [("a", i, f"w{i}") for i in range(20, 30) if i not in (22, 25)] + [("c", 125, "w25")])
    same_at_every_snapshot(wh, t)
    compact_append(t, full=True)
    same_at_every_snapshot(wh, t)


def test_lakemerge_deletes_rows_pypaimon_wrote(tmp_path):
    wh = str(tmp_path / "warehouse")
    pp = pp_create_table(pp_catalog(wh), "db.t", SCHEMA, [], ["dt"], {"deletion-vectors.enabled": "true"})
    pp_write(pp, batch("a", list(range(10))))
    pp_write(pp, batch("a", list(range(10, 20))))
    t = lm_catalog(wh).get_table("db.t")
    t.delete_where([("id", "in", [3, 13])])
    t.update_where({"v": "x"}, [("id", "=", 4)])
    expected = sorted([("a", i, "x" if i == 4 else f"v{i}") for i in range(20) if i not in (3, 13)])
    assert rows(t.read()) == expected
    assert rows(pp_read(pp_get_table(wh, "db.t"), sort_by=["id"])) == expected


def test_copy_on_write_of_an_orc_table(tmp_path):
    """An ORC append table (pypaimon writes it): copy-on-write DELETE / UPDATE rewrite its files as ORC files, and
    pypaimon reads the result. (Before lakemerge wrote ORC, both were refused.)"""
    wh = str(tmp_path / "warehouse")
    pp = pp_create_table(pp_catalog(wh), "db.t", SCHEMA, [], ["dt"], {"file.format": "orc"})
    pp_write(pp, batch("a", list(range(5))))
    t = lm_catalog(wh).get_table("db.t")
    t.delete_where([("id", "=", 1)])
    t.update_where({"v": "x"}, [("id", "=", 2)])
    expected = [("a", 0, "v0"), ("a", 2, "x"), ("a", 3, "v3"), ("a", 4, "v4")]
    assert rows(t.read()) == expected
    assert rows(pp_read(pp_get_table(wh, "db.t"), sort_by=["id"])) == expected
    assert all(f.file_name.endswith(".orc") for sp in t.plan() for f in sp.files)


def test_deletion_vector_delete_and_update_of_an_orc_table(tmp_path):
    """A DV DELETE writes no data file; an UPDATE appends its new rows as ORC files. Both work on an ORC append table
    pypaimon wrote, and pypaimon reads the result."""
    wh = str(tmp_path / "warehouse")
    pp = pp_create_table(pp_catalog(wh), "db.t", SCHEMA, [], ["dt"],
                         {"file.format": "orc", "deletion-vectors.enabled": "true"})
    pp_write(pp, batch("a", list(range(5))))
    t = lm_catalog(wh).get_table("db.t")
    assert t.delete_where([("id", "in", [1, 3])]) == 2
    expected = [("a", i, f"v{i}") for i in (0, 2, 4)]
    assert rows(t.read()) == expected
    assert rows(pp_read(pp_get_table(wh, "db.t"), sort_by=["id"])) == expected
    assert all(f.file_name.endswith(".orc") for sp in t.plan() for f in sp.files)
    assert t.check().ok
    t.update_where({"v": "x"}, [("id", "=", 2)])
    expected = [("a", 0, "v0"), ("a", 2, "x"), ("a", 4, "v4")]
    assert rows(t.read()) == expected
    assert rows(pp_read(pp_get_table(wh, "db.t"), sort_by=["id"])) == expected
    assert all(f.file_name.endswith(".orc") for sp in t.plan() for f in sp.files) and t.check().ok
