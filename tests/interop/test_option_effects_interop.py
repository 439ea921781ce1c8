"""pypaimon 2.1 and lakemerge agree on tables with data-file.path-directory, file.suffix.include.compression and
empty snapshots (snapshot.ignore-empty-commit=false)."""
from __future__ import annotations

import os

import pyarrow as pa

from engine import Catalog
from tests.conftest import list_files
from tests.interop.pypaimon_util import pp_catalog, pp_create_table, pp_get_table, pp_read, pp_write

SCHEMA = pa.schema([("dt", pa.string()), ("k", pa.int64()), ("v", pa.string())])
ROWS = pa.table({"dt": ["a", "a", "b"], "k": [1, 2, 3], "v": ["x", "y", "z"]}, schema=SCHEMA)
OPTIONS = {"bucket": "1", "data-file.path-directory": "data", "file.suffix.include.compression": "true"}


def test_pypaimon_reads_what_lakemerge_wrote(warehouse):
    cat = Catalog(warehouse)
    cat.create_database("db")
    t = cat.create_table("db.t", SCHEMA, primary_key=["dt", "k"], partition_keys=["dt"],
                         options={**OPTIONS, "snapshot.ignore-empty-commit": "false"})
    t.write(ROWS)
    t.commit([])
    assert [s.id for s in t.snapshots()] == [1, 2]
    assert all(f.startswith("data/dt=") and f.endswith(".zst.parquet")
               for f in list_files(t.root) if f.startswith("data/"))
    assert pp_read(pp_get_table(warehouse, "db.t"), sort_by=["k"]).to_pylist() == ROWS.to_pylist()


def test_lakemerge_reads_what_pypaimon_wrote(warehouse):
    pp = pp_create_table(pp_catalog(warehouse), "db.t", SCHEMA, primary_key=["dt", "k"], partition_keys=["dt"],
                         options=OPTIONS)
    pp_write(pp, ROWS)
    t = Catalog(warehouse).get_table("db.t")
    assert os.path.isdir(os.path.join(t.root, "data", "dt=a", "bucket-0"))
    assert t.read().sort_by("k").to_pylist() == ROWS.to_pylist()
    t.write(pa.table({"dt": ["a"], "k": [4], "v": ["w"]}, schema=SCHEMA))
    assert sorted(pp_read(pp_get_table(warehouse, "db.t")).column("k").to_pylist()) == [1, 2, 3, 4]
