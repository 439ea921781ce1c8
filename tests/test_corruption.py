"""Fail closed: damaged or missing files reachable from a snapshot raise CorruptFile naming the file."""
from __future__ import annotations

import os

import pyarrow as pa
import pytest

from engine import Catalog
from engine.errors import CorruptFile


@pytest.fixture
def table(tmp_path):
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    t = cat.create_table("db.t", pa.schema([("id", pa.int64()), ("v", pa.string())]), primary_key=["id"],
                         options={"bucket": "1"})
    t.write(pa.table({"id": list(range(100)), "v": [str(i) for i in range(100)]}))
    t.write(pa.table({"id": list(range(50, 150)), "v": ["x"] * 100}))
    return t


def _data_file(t):
    return sorted(os.path.join(d, f) for d, _, fs in os.walk(t.root) for f in fs if f.endswith(".parquet"))[0]


def test_truncated_data_file(table):
    path = _data_file(table)
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) // 2)
    with pytest.raises(CorruptFile) as err:
        table.read()
    assert os.path.basename(path) in str(err.value)


def test_flipped_bytes_in_data_file(table):
    path = _data_file(table)
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.seek(size // 3)
        chunk = f.read(16)
        f.seek(size // 3)
        f.write(bytes(b ^ 0xFF for b in chunk))
    with pytest.raises(CorruptFile) as err:
        table.read()
    assert os.path.basename(path) in str(err.value)


def test_missing_data_file(table):
    path = _data_file(table)
    os.unlink(path)
    with pytest.raises(CorruptFile, match="missing"):
        table.read()


def test_missing_manifest(table):
    snap = table.snapshot()
    os.unlink(table.paths.manifest(snap.delta_manifest_list))
    fresh = Catalog(os.path.dirname(os.path.dirname(table.root))).get_table("db.t")
    with pytest.raises(CorruptFile, match="manifest"):
        fresh.read()


def test_corrupt_snapshot_json(table):
    with open(table.paths.snapshot(2), "w") as f:
        f.write("{not json")
    fresh = Catalog(os.path.dirname(os.path.dirname(table.root))).get_table("db.t")
    with pytest.raises(CorruptFile, match="snapshot-2"):
        fresh.read()
    assert fresh.read(snapshot_id=1).num_rows == 100
