"""pypaimon 2.1 reads lakemerge's changelog-producer=input changelog incrementally (streaming scan over the
changelogManifestList of each snapshot), with equal rows and row kinds."""
from __future__ import annotations

import pyarrow as pa
import pytest

from tests.interop.pypaimon_util import pp_catalog

pytestmark = pytest.mark.interop

SCHEMA = pa.schema([pa.field("k", pa.int64(), False), pa.field("v", pa.string())])


def test_pypaimon_streams_our_input_changelog(catalog, warehouse):
    t = catalog.create_table("db.t", SCHEMA, ["k"], options={"bucket": "2", "changelog-producer": "input"})
    t.write(pa.table({"k": [1, 2, 3], "v": ["a", "b", "c"]}, schema=SCHEMA))
    with t.new_write() as w:
        w.write(pa.table({"k": [1, 1], "v": ["a", "A"]}, schema=SCHEMA), row_kinds=["-U", "+U"])
        w.delete(pa.table({"k": [3]}))
        t.commit(w.prepare_commit())
    t.write(pa.table({"k": [4], "v": ["d"]}, schema=SCHEMA))
    ours = t.read_changes(0, 3)
    t.reset_consumer("pp", 1)  # pypaimon resumes a consumer at its nextSnapshot, in the same file format

    table = pp_catalog(warehouse).get_table("db.t")
    builder = table.new_stream_read_builder().with_include_row_kind(True).with_consumer_id("pp")
    scan = builder.new_streaming_scan()
    read = builder.new_read()
    got = []
    plans = scan.stream_sync()
    for _ in range(3):
        got.append(read.to_arrow(next(plans).splits()))
    plans.close()
    theirs = pa.concat_tables(got)

    def as_set(tbl):
        return sorted((r["_row_kind"], r["k"], r["v"]) for r in tbl.to_pylist())

    assert as_set(theirs) == as_set(ours)
    assert ("-U", 1, "a") in as_set(theirs) and ("-D", 3, None) in as_set(theirs)


@pytest.mark.parametrize("producer,extra", [("lookup", {}),
                                            ("full-compaction", {"full-compaction.delta-commits": "1"})])
def test_pypaimon_reads_tables_and_changelog_of_compaction_producers(catalog, warehouse, producer, extra):
    """Paimon-format changelog of COMPACT snapshots: pypaimon's batch read of the data and its streaming read of
    the changelog both equal ours (pypaimon itself writes no changelog for these producers)."""
    from tests.interop.pypaimon_util import pp_get_table, pp_read
    t = catalog.create_table("db.t", SCHEMA, ["k"], options={"bucket": "1", "changelog-producer": producer,
                                                             **extra})
    t.write(pa.table({"k": [1, 2], "v": ["a", "b"]}, schema=SCHEMA))
    t.write(pa.table({"k": [1, 3], "v": ["A", "c"]}, schema=SCHEMA))
    t.delete(pa.table({"k": [2]}))
    pp = pp_get_table(warehouse, "db.t")
    assert pp_read(pp, sort_by=["k"]).to_pylist() == sorted(t.read().to_pylist(), key=lambda r: r["k"])
    ours = t.read_changes()
    t.reset_consumer("pp", 1)
    builder = pp.new_stream_read_builder().with_include_row_kind(True).with_consumer_id("pp")
    scan, read = builder.new_streaming_scan(), builder.new_read()
    plans = scan.stream_sync()
    got = [read.to_arrow(next(plans).splits()) for _ in range(3)]  # the three COMPACT snapshots
    plans.close()
    assert [(r["_row_kind"], r["k"], r["v"]) for r in pa.concat_tables(got).to_pylist()] == \
        [(r["_row_kind"], r["k"], r["v"]) for r in ours.to_pylist()]
