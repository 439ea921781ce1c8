"""``data-file.external-paths`` across engines: lakemerge reads (and compacts) tables whose files pypaimon put
under external roots, and pypaimon reads the external files lakemerge writes (same ``file:/...`` text as Java)."""
from __future__ import annotations

import os

import pyarrow as pa
import pytest

from engine.catalog import Catalog
from engine.data_paths import local_file_path
from tests.interop.pypaimon_util import (
    pp_catalog,
    pp_create_table,
    pp_get_table,
    pp_read,
    pp_write,
)

pytestmark = pytest.mark.interop

SCHEMA = pa.schema([("dt", pa.string()), ("id", pa.int64()), ("v", pa.string())])
KINDS = {"pk": (["dt", "id"], {"bucket": "2"}), "append": ([], {}),
         "pk-dv": (["dt", "id"], {"bucket": "2", "deletion-vectors.enabled": "true"})}


def ext_options(tmp_path):
    return {"data-file.external-paths": f"file://{tmp_path / 'ext1'},file:{tmp_path / 'ext2'}",
            "data-file.external-paths.strategy": "round-robin"}


def batch(dt, ids, tag):
    return pa.table({"dt": [dt] * len(ids), "id": ids, "v": [f"{tag}{i}" for i in ids]}, schema=SCHEMA)


def rows_of(t: pa.Table) -> list[tuple]:
    return sorted((r["dt"], r["id"], r["v"]) for r in t.to_pylist())


def assert_external(table, tmp_path, scheme: bool = True):
    files = [f for sp in table.plan() for f in sp.files]
    assert files
    for f in files:
        assert f.external_path and local_file_path(f.external_path).startswith(f"{tmp_path}/ext")
        assert f.external_path.startswith("file:/") or not scheme
        assert os.path.isfile(local_file_path(f.external_path))


@pytest.mark.parametrize("kind", ["pk", "append"])
def test_pypaimon_writes_external_lakemerge_reads_and_compacts(warehouse, tmp_path, kind):
    pk, opts = KINDS[kind]
    cat = pp_catalog(warehouse)
    pp = pp_create_table(cat, "db.t", SCHEMA, pk, ["dt"], {**opts, **ext_options(tmp_path)})
    for i in range(3):
        pp_write(pp, batch("a" if i % 2 else "b", list(range(i, i + 5)), f"w{i}-"))
    t = Catalog(warehouse).get_table("db.t")
    assert_external(t, tmp_path)
    theirs = rows_of(pp_read(pp_get_table(warehouse, "db.t"), sort_by=["dt", "id", "v"]))
    assert rows_of(t.read()) == theirs and theirs
    assert t.compact(full=True) is not None
    assert_external(t, tmp_path)  # lakemerge's compaction output goes to the external roots too
    assert rows_of(t.read()) == theirs
    assert rows_of(pp_read(pp_get_table(warehouse, "db.t"), sort_by=["dt", "id", "v"])) == theirs
    assert t.check().ok, t.check().summary()


@pytest.mark.parametrize("kind", ["pk", "append", "pk-dv"])
def test_lakemerge_writes_external_pypaimon_reads(catalog, warehouse, tmp_path, kind):
    pk, opts = KINDS[kind]
    t = catalog.create_table("db.t", SCHEMA, primary_key=pk or None, partition_keys=["dt"],
                             options={**opts, **ext_options(tmp_path)})
    for i in range(4):
        t.write(batch("a" if i % 2 else "b", list(range(i, i + 5)), f"w{i}-"))
    t.delete_where([("id", "=", 3)])
    t.compact(full=True)
    assert_external(t, tmp_path)
    mine = rows_of(t.read())
    assert mine and all(r[1] != 3 for r in mine)
    theirs = rows_of(pp_read(pp_get_table(warehouse, "db.t"), sort_by=["dt", "id", "v"]))
    assert theirs == mine
    # pypaimon appends to the same table; lakemerge reads both engines' external files
    pp_write(pp_get_table(warehouse, "db.t"), batch("c", [100, 101], "pp"))
    t = Catalog(warehouse).get_table("db.t")
    mine = rows_of(t.read())
    assert ("c", 100, "pp100") in mine or kind == "pk-dv"  # a DV table's level-0 rows show after compaction
    if kind == "pk-dv":
        t.compact(full=True)
        mine = rows_of(t.read())
        assert ("c", 100, "pp100") in mine
    assert rows_of(pp_read(pp_get_table(warehouse, "db.t"), sort_by=["dt", "id", "v"])) == mine


def test_escaped_partition_names_round_trip(catalog, warehouse, tmp_path):
    """Partition values Paimon escapes (``:`` -> ``%3A``) keep their literal ``%XX`` directory names in
    ``_EXTERNAL_PATH``, both ways."""
    t = catalog.create_table("db.t", SCHEMA, primary_key=["dt", "id"], partition_keys=["dt"],
                             options={"bucket": "1", **ext_options(tmp_path)})
    t.write(batch("2024-01-01 10:00", [1, 2], "x"))
    pp = pp_get_table(warehouse, "db.t")
    pp_write(pp, batch("a:b/c", [3], "y"))
    t = Catalog(warehouse).get_table("db.t")
    # pypaimon 2.1 records this one as a bare path (no "file:"), Java as file:/...; lakemerge reads both
    assert_external(t, tmp_path, scheme=False)
    assert any("%3A" in f.external_path for sp in t.plan() for f in sp.files)
    assert all(f.external_path.startswith("file:/") for sp in t.plan() for f in sp.files if "%3A" not in
               f.external_path)
    mine = rows_of(t.read())
    assert mine == [("2024-01-01 10:00", 1, "x1"), ("2024-01-01 10:00", 2, "x2"), ("a:b/c", 3, "y3")]
    assert rows_of(pp_read(pp_get_table(warehouse, "db.t"), sort_by=["dt", "id", "v"])) == mine
