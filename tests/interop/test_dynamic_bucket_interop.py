"""Dynamic bucket mode across engines: both keep the same HASH index, so either engine can continue writing a
table the other wrote without placing a key in two buckets, and both assign the same buckets."""
from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.interop.pypaimon_util import (
    pp_catalog,
    pp_create_table,
    pp_get_table,
    pp_read,
    pp_write,
)

pytestmark = pytest.mark.interop

SCHEMA = pa.schema([("dt", pa.string()), ("id", pa.int64()), ("v", pa.string())])
OPTIONS = {"bucket": "-1", "dynamic-bucket.target-row-num": "4"}
BATCHES = [("a", list(range(10)), "w0-"), ("b", [1, 2, 3], "w1-"), ("a", [3, 11, 12, 13, 0], "w2-"),
           ("a", list(range(20, 30)), "w3-")]


def rows(dt, ids, tag):
    return pa.table({"dt": [dt] * len(ids), "id": ids, "v": [f"{tag}{i}" for i in ids]}, schema=SCHEMA)


def placement(table_dir: str) -> dict:
    """(dt, id) -> set of buckets holding a record of it, over every data file."""
    out: dict = {}
    for root, _, files in os.walk(table_dir):
        for f in files:
            if f.startswith("data-") and f.endswith(".parquet"):
                bucket = int(os.path.basename(root).split("-")[1])
                dt = os.path.basename(os.path.dirname(root)).split("=")[1]
                for i in pq.ParquetFile(os.path.join(root, f)).read(columns=["id"]).column("id").to_pylist():
                    out.setdefault((dt, i), set()).add(bucket)
    return out


def model(batches) -> list[tuple]:
    state = {}
    for dt, ids, tag in batches:
        for i in ids:
            state[(dt, i)] = f"{tag}{i}"
    return sorted((k[0], k[1], v) for k, v in state.items())


def as_rows(t: pa.Table) -> list[tuple]:
    return sorted((r["dt"], r["id"], r["v"]) for r in t.to_pylist())


def test_same_writes_same_buckets_and_each_engine_continues_the_other(tmp_path):
    from engine import Catalog

    # lakemerge writes the first half, pypaimon the second, and vice versa
    lm_first, pp_first = str(tmp_path / "lm_first"), str(tmp_path / "pp_first")
    cat = Catalog(lm_first)
    cat.create_database("db")
    t = cat.create_table("db.d", SCHEMA, ["dt", "id"], ["dt"], options=OPTIONS)
    for b in BATCHES[:2]:
        t.write(rows(*b))
    pp = pp_get_table(lm_first, "db.d")
    for b in BATCHES[2:]:
        pp_write(pp, rows(*b), SCHEMA)

    ppc = pp_catalog(pp_first)
    pp2 = pp_create_table(ppc, "db.d", SCHEMA, ["dt", "id"], ["dt"], OPTIONS)
    for b in BATCHES[:2]:
        pp_write(pp2, rows(*b), SCHEMA)
    t2 = Catalog(pp_first).get_table("db.d")
    for b in BATCHES[2:]:
        t2.write(rows(*b))

    expected = model(BATCHES)
    for wh in (lm_first, pp_first):
        assert as_rows(Catalog(wh).get_table("db.d").read()) == expected
        assert as_rows(pp_read(pp_get_table(wh, "db.d"), sort_by=["dt", "id"])) == expected
        spots = placement(os.path.join(wh, "db.db", "d"))
        assert all(len(b) == 1 for b in spots.values()), "a key landed in two buckets"
    # both engines follow the same assignment rules, whoever wrote which half
    assert placement(os.path.join(lm_first, "db.db", "d")) == placement(os.path.join(pp_first, "db.db", "d"))


def test_pypaimon_reads_cross_partition_moves(tmp_path):
    from engine import Catalog

    wh = str(tmp_path / "wh")
    cat = Catalog(wh)
    cat.create_database("db")
    t = cat.create_table("db.x", SCHEMA, ["id"], ["dt"], options={"bucket": "-1"})
    t.write(rows("a", [1, 2, 3], "v"))
    t.write(pa.table({"dt": ["b", "c"], "id": [1, 2], "v": ["moved1", "moved2"]}))
    t.delete(pa.table({"id": [3]}))
    expected = [("b", 1, "moved1"), ("c", 2, "moved2")]
    assert as_rows(t.read()) == expected
    assert as_rows(pp_read(pp_get_table(wh, "db.x"), sort_by=["id"])) == expected


def test_lakemerge_reads_pypaimon_dynamic_bucket_table(tmp_path):
    from engine import Catalog

    wh = str(tmp_path / "wh")
    pp = pp_create_table(pp_catalog(wh), "db.d", SCHEMA, ["dt", "id"], ["dt"], OPTIONS)
    for b in BATCHES:
        pp_write(pp, rows(*b), SCHEMA)
    t = Catalog(wh).get_table("db.d")
    assert as_rows(t.read()) == model(BATCHES)
    assert t.lookup(pa.table({"dt": ["a", "a"], "id": [3, 25]})).column("v").to_pylist() == ["w2-3", "w3-25"]
    assert as_rows(t.read(filter=[("id", "=", 12)])) == [("a", 12, "w2-12")]


def test_after_a_lakemerge_overwrite_pypaimon_reads_it_and_continues_on_its_fresh_index(tmp_path):
    """lakemerge's overwrite writer indexes only the keys it writes: pypaimon reads the overwritten table, and a
    pypaimon write afterwards (which assigns through the HASH index) places keys exactly as lakemerge does: replaced
    keys are new keys filling the overwrite's buckets, kept keys stay in theirs."""
    from engine import Catalog
    from tests.test_dynamic_bucket import key_buckets

    first = [("a", list(range(10)), "w0-"), ("b", [1, 2, 3], "w1-")]
    later = ("a", [0, 1, 7, 40], "w3-")  # 0, 1: replaced by the overwrite; 7: kept; 40: new
    placements = []
    for continue_with in ("lakemerge", "pypaimon"):
        wh = str(tmp_path / continue_with)
        cat = Catalog(wh)
        cat.create_database("db")
        t = cat.create_table("db.d", SCHEMA, ["dt", "id"], ["dt"], options=OPTIONS)
        for b in first:
            t.write(rows(*b))
        with t.new_write(overwrite=True) as w:
            w.write(rows("a", [7, 8, 9, 30, 31], "o-"))
            t.commit_overwrite(w.prepare_commit(), "dynamic")
        expected = model([("a", [7, 8, 9, 30, 31], "o-"), first[1]])
        assert as_rows(pp_read(pp_get_table(wh, "db.d"), sort_by=["dt", "id"])) == expected
        if continue_with == "pypaimon":
            pp_write(pp_get_table(wh, "db.d"), rows(*later), SCHEMA)
        else:
            t.write(rows(*later))
        expected = model([("a", [7, 8, 9, 30, 31], "o-"), first[1], later])
        t = Catalog(wh).get_table("db.d")
        assert as_rows(t.read()) == expected
        assert as_rows(pp_read(pp_get_table(wh, "db.d"), sort_by=["dt", "id"])) == expected
        placements.append(key_buckets(t))
    assert placements[0] == placements[1]
    # target 4: the overwrite filled bucket 0 with 7, 8, 9, 30 and opened bucket 1 for 31; later keys join 31
    assert {k: v for k, v in placements[0].items() if k[0] == "a"} == {
        ("a", 7): 0, ("a", 8): 0, ("a", 9): 0, ("a", 30): 0, ("a", 31): 1, ("a", 0): 1, ("a", 1): 1, ("a", 40): 1}
