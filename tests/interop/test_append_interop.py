"""Append tables across engines: pypaimon reads what lakemerge appends (and compacts), lakemerge reads what
pypaimon appends; fixed-bucket append tables place rows in the buckets pypaimon chooses."""
from __future__ import annotations

import pyarrow as pa
import pytest

from engine.append.compact import compact_append
from tests.interop.pypaimon_util import (
    pp_bucket_extractor,
    pp_catalog,
    pp_get_table,
    pp_read,
    pp_write,
)

pytestmark = pytest.mark.interop

SCHEMA = pa.schema([("dt", pa.string()), ("id", pa.int64()), ("v", pa.string())])
OPTIONS = [{}, {"bucket": "3", "bucket-key": "id"}]


def batch(dt, ids, tag):
    return pa.table({"dt": [dt] * len(ids), "id": ids, "v": [f"{tag}{i}" for i in ids]}, schema=SCHEMA)


def sorted_rows(t: pa.Table) -> list[tuple]:
    return sorted((r["dt"], r["id"], r["v"]) for r in t.to_pylist())


@pytest.mark.parametrize("options", OPTIONS, ids=["unaware", "fixed"])
def test_lakemerge_appends_pypaimon_reads(catalog, warehouse, options):
    t = catalog.create_table("db.t", SCHEMA, partition_keys=["dt"], options={**options,
                                                                             "compaction.min.file-num": "2"})
    for i in range(4):
        t.write(batch("a" if i % 2 else "b", list(range(i, i + 5)), f"w{i}-"))
    compact_append(t)
    t.write(batch("a", [100, 101], "late"))
    mine = t.read()
    pp = pp_get_table(warehouse, "db.t")
    theirs = pp_read(pp, sort_by=["dt", "id", "v"])
    assert sorted_rows(theirs) == sorted_rows(mine)
    assert len(sorted_rows(mine)) == 22
    if options:  # every file sits in the bucket pypaimon would choose for its rows
        extractor = pp_bucket_extractor(pp)
        for sp in t.plan():
            rows = t.read(filter=[("dt", "=", sp.partition_values[0])])
            _, buckets = extractor.extract_partition_bucket_batch(rows.combine_chunks().to_batches()[0])
            expected = {r["id"] for r, b in zip(rows.to_pylist(), buckets) if b == sp.bucket}
            from engine.append.read import read_append_file
            from engine.read.split_read import SplitReader
            got = set()
            for f in sp.files:
                got |= set(read_append_file(SplitReader(t.file_io, t.schema), sp, f, ["id"]).column("id")
                           .to_pylist())
            assert got == expected


@pytest.mark.parametrize("options", OPTIONS, ids=["unaware", "fixed"])
def test_pypaimon_appends_lakemerge_reads_and_appends(warehouse, options):
    from pypaimon import Schema

    from engine import Catalog

    ppc = pp_catalog(warehouse)
    ppc.create_table("db.t", Schema.from_pyarrow_schema(SCHEMA, partition_keys=["dt"], options=options), False)
    pp = ppc.get_table("db.t")
    for i in range(3):
        pp_write(pp, batch("a", [1, 2, i], f"p{i}-"), SCHEMA)
    t = Catalog(warehouse).get_table("db.t")
    assert t.schema.is_append_only
    assert sorted_rows(t.read()) == sorted_rows(pp_read(pp, sort_by=["dt", "id", "v"]))
    t.write(batch("b", [5, 6], "lm"))
    compact_append(t, full=True)
    assert sorted_rows(pp_read(pp_get_table(warehouse, "db.t"), sort_by=["dt", "id", "v"])) == \
        sorted_rows(t.read())
    assert t.read().num_rows == 11
