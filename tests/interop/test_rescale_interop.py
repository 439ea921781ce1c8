"""pypaimon 2.1.0 reads a lakemerge table whose partitions have different bucket counts (ALTER 'bucket', then
Table.rescale of one partition and a new partition at the new count): every row, and key filters, which pypaimon
prunes by each file's totalBuckets as Paimon does.

pypaimon 2.1.0's writer does not check the count a partition's files record (it would add files with the new count
next to the old ones); Paimon's AbstractFileStoreWrite.checkNumBuckets refuses, and so does lakemerge."""
from __future__ import annotations

import pyarrow as pa
import pytest

from engine import Catalog
from engine.errors import InvalidInput
from tests.interop.pypaimon_util import pp_get_table, pp_read, pp_write, rows_of

pytestmark = pytest.mark.interop

SCHEMA = pa.schema([("dt", pa.string()), ("id", pa.int64()), ("v", pa.string())])


def _rows(dt, ids, tag="v"):
    return pa.table({"dt": [dt] * len(ids), "id": pa.array(ids, pa.int64()), "v": [f"{tag}{i}" for i in ids]},
                    schema=SCHEMA)


@pytest.mark.parametrize("pk, options", [
    (["dt", "id"], {"bucket": "2"}),
    (["dt", "id"], {"bucket": "2", "deletion-vectors.enabled": "true"}),
    (None, {"bucket": "2", "bucket-key": "id"}),
], ids=["pk", "deletion-vectors", "append"])
def test_pypaimon_reads_a_table_with_mixed_bucket_counts(tmp_path, pk, options):
    warehouse = str(tmp_path / "wh")
    cat = Catalog(warehouse)
    cat.create_database("db")
    t = cat.create_table("db.t", SCHEMA, primary_key=pk, partition_keys=["dt"], options=options)
    t.write(pa.concat_tables([_rows("a", list(range(12))), _rows("b", list(range(12)))]))
    t.alter().set_option("bucket", "5").commit()
    t.rescale(partitions={"dt": "a"})
    t.write(_rows("c", list(range(7)), "c"))
    totals = {(t.scan().partition_values(e.partition)[0], e.total_buckets)
              for e in t.manifests.live_entries(t.snapshot())}
    assert totals == {("a", 5), ("b", 2), ("c", 5)}
    with pytest.raises(InvalidInput, match="new bucket num 5, but the previous bucket num is 2"):
        t.write(_rows("b", [99]))
    pp = pp_get_table(warehouse, "db.t")
    keys = ["dt", "id", "v"]
    want = rows_of(t.read().sort_by([(k, "ascending") for k in keys]), keys)
    assert len(want) == 31 and rows_of(pp_read(pp, sort_by=keys), keys) == want
    for dt, k in [("a", 3), ("a", 11), ("b", 4), ("b", 9), ("c", 6)]:
        rb = pp.new_read_builder()
        pb = rb.new_predicate_builder()
        rb = rb.with_filter(pb.and_predicates([pb.equal("dt", dt), pb.equal("id", k)]))
        got = rb.new_read().to_arrow(rb.new_scan().plan().splits()).to_pylist()
        assert [(r["dt"], r["id"]) for r in got] == [(dt, k)]


def test_check_reports_the_mixed_partition_pypaimon_writes_and_rescale_repairs_it(tmp_path):
    """pypaimon 2.1.0 writes new-count files into an old-count partition after ALTER 'bucket' (Paimon refuses);
    lakemerge's check() reports the partition (a key may then live in two buckets) and a rescale repairs it."""
    warehouse = str(tmp_path / "wh")
    cat = Catalog(warehouse)
    cat.create_database("db")
    t = cat.create_table("db.t", SCHEMA, primary_key=["dt", "id"], partition_keys=["dt"], options={"bucket": "2"})
    t.write(pa.concat_tables([_rows("a", list(range(12))), _rows("b", list(range(12)))]))
    t.alter().set_option("bucket", "5").commit()
    assert t.check().ok
    pp_write(pp_get_table(warehouse, "db.t"), _rows("b", list(range(12)), "new"))  # pypaimon's bug
    report = t.check()
    assert report.kinds() == {"bucket-count-mixed"}
    assert "dt=b" in str(report) and "[2, 5]" in str(report)
    assert t.read().num_rows > 24  # keys of dt=b in two buckets, read twice
    t.rescale(partitions={"dt": "b"})
    assert t.check().ok
    rows = t.read().to_pylist()
    # one row per key again; which of the two wins depends on the sequence numbers pypaimon gave its new buckets
    assert sorted((r["dt"], r["id"]) for r in rows) == sorted((dt, i) for dt in "ab" for i in range(12))
