"""Postpone bucket mode (``bucket = -2``) across engines.

pypaimon 2.1 facts relied on: ``new_batch_write_builder`` on a postpone table writes every row to the partition's
``bucket-postpone`` directory (avro files, bucket and totalBuckets -2); ``new_postpone_fixed_bucket_write_builder``
writes to real buckets with the partition's bucket count recorded as totalBuckets; its batch read shows real
buckets only (as Paimon's AbstractBatchTableScan.onlyReadRealBuckets).
"""
from __future__ import annotations

import pyarrow as pa
import pytest

from tests.interop.pypaimon_util import (
    pp_catalog,
    pp_create_table,
    pp_get_table,
    pp_read,
    pp_write,
    pp_write_fixed_bucket,
)

pytestmark = pytest.mark.interop

SCHEMA = pa.schema([("dt", pa.string()), ("id", pa.int64()), ("v", pa.string())])


def rows(dt, ids, tag):
    return pa.table({"dt": [dt] * len(ids), "id": ids, "v": [f"{tag}{i}" for i in ids]}, schema=SCHEMA)


def as_rows(t: pa.Table) -> list[tuple]:
    return sorted((r["dt"], r["id"], r["v"]) for r in t.to_pylist())


def pp_table(tmp_path, options=None):
    cat = pp_catalog(str(tmp_path))
    return pp_create_table(cat, "db.t", SCHEMA, ["dt", "id"], ["dt"], {"bucket": "-2", **(options or {})})


def test_batch_read_sees_only_real_buckets(tmp_path):
    from engine import Catalog
    pp = pp_table(tmp_path)
    pp_write(pp, rows("a", [1, 2, 3], "post-"), SCHEMA)            # postponed: invisible to batch reads
    pp_write_fixed_bucket(pp, rows("a", [2, 5], "fix-"), SCHEMA)   # real buckets
    pp_write(pp, rows("b", [7], "post-"), SCHEMA)
    t = Catalog(str(tmp_path)).get_table("db.t")
    expected = [("a", 2, "fix-2"), ("a", 5, "fix-5")]
    assert as_rows(pp_read(pp_get_table(str(tmp_path), "db.t"), sort_by=["dt", "id"])) == expected
    assert as_rows(t.read()) == expected
    assert as_rows(pa.Table.from_batches(list(t.to_batches()), schema=t.arrow_schema)) == expected
    assert t.lookup(pa.table({"dt": ["a", "a", "b"], "id": [1, 2, 7]})).to_pylist() == [
        {"dt": "a", "id": 2, "v": "fix-2"}]
    assert as_rows(t.read(filter=[("dt", "=", "b")])) == []


@pytest.mark.parametrize("producer", ["none", "input"])
def test_streaming_full_read_reads_postponed_records_only_without_changelog_producer(tmp_path, producer):
    """Paimon's DataTableStreamScan reads the postpone bucket (unmerged) unless a changelog producer is set."""
    from engine import Catalog
    pp = pp_table(tmp_path, {"changelog-producer": producer})
    pp_write_fixed_bucket(pp, rows("a", [1, 2], "fix-"), SCHEMA)
    pp_write(pp, rows("a", [2, 3], "post-"), SCHEMA)
    t = Catalog(str(tmp_path)).get_table("db.t")
    full = pa.Table.from_batches(list(t.stream("latest-full", idle_timeout=0)))
    got = sorted((r["id"], r["v"], r["_row_kind"]) for r in full.to_pylist())
    if producer == "none":
        assert got == [(1, "fix-1", "+I"), (2, "fix-2", "+I"), (2, "post-2", "+I"), (3, "post-3", "+I")]
    else:
        assert got == [(1, "fix-1", "+I"), (2, "fix-2", "+I")]
