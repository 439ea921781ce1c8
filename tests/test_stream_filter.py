"""``Table.stream(filter=...)``: the stream's rows are those of the unfiltered stream that satisfy the filter, each
change row judged on its own (Paimon's streaming reads filter a changelog row by row), for full and delta phases,
on partition columns, keys and value columns; change files that cannot hold a matching row are not read."""
from __future__ import annotations

import pyarrow as pa
import pytest

from engine.errors import InvalidInput

SCHEMA = pa.schema([pa.field("p", pa.string(), False), pa.field("k", pa.int64(), False), pa.field("a", pa.int64()),
                    pa.field("v", pa.string())])

# (filter, the same test in Python on a row dict: a null satisfies no comparison)
FILTERS = [
    (("p", "=", "x"), lambda r: r["p"] == "x"),
    (("k", "in", [1, 3]), lambda r: r["k"] in (1, 3)),
    (("a", "<", 3), lambda r: r["a"] is not None and r["a"] < 3),
    ([("p", "=", "y"), ("a", ">=", 2)], lambda r: r["p"] == "y" and r["a"] is not None and r["a"] >= 2),
    ([[("k", "=", 2)], [("v", "=", "u")]], lambda r: r["k"] == 2 or r["v"] == "u"),
    (("v", "is null", None), lambda r: r["v"] is None),
]


def rows(*quads):
    return pa.table({"p": [q[0] for q in quads], "k": [q[1] for q in quads], "a": [q[2] for q in quads],
                     "v": [q[3] for q in quads]}, schema=SCHEMA)


def batches(stream) -> list[tuple[int, list[dict]]]:
    return [(int(b.schema.metadata[b"lakemerge.snapshot_id"]), b.to_pylist()) for b in stream]


def python_filtered(unfiltered, test) -> list[tuple[int, list[dict]]]:
    """The unfiltered stream's batches with only the rows ``test`` accepts (batches left empty dropped)."""
    out = [(sid, [r for r in rs if test(r)]) for sid, rs in unfiltered]
    return [(sid, rs) for sid, rs in out if rs]


def history(t):
    t.write(rows(("x", 1, 1, "a"), ("x", 2, 5, "b"), ("y", 3, 2, "c"), ("y", 4, 7, None)))
    t.write(rows(("x", 1, 4, "u"), ("y", 3, 1, "u")))  # a crosses a < 3 both ways
    t.delete(pa.table({"p": ["x"], "k": [2]}))
    t.write(rows(("y", 5, 0, "e"), ("x", 6, 9, None)))


def make(catalog, name, producer, **extra):
    return catalog.create_table(f"db.{name}", SCHEMA, ["p", "k"], partition_keys=["p"],
                                options={"bucket": "2", "changelog-producer": producer, **extra})


@pytest.mark.parametrize("producer", ["none", "input", "lookup"])
def test_filtered_stream_is_the_unfiltered_stream_filtered_row_by_row(catalog, producer):
    t = make(catalog, producer, producer)
    history(t)
    mid = t.snapshot_manager.latest_id()
    t.write(rows(("x", 1, 2, "w"), ("y", 4, 1, "u")))
    if producer == "lookup":
        t.compact(full=True)
    for flt, test in FILTERS:
        for kwargs in ({"mode": "from-snapshot", "snapshot_id": 1}, {"mode": "from-snapshot-full", "snapshot_id": mid},
                       {"mode": "latest-full"}):
            unfiltered = batches(t.stream(idle_timeout=0, **kwargs))
            got = batches(t.stream(idle_timeout=0, filter=flt, **kwargs))
            assert got == python_filtered(unfiltered, test), (flt, kwargs)
        # columns the filter names need not be returned
        got = batches(t.stream("from-snapshot", snapshot_id=1, columns=["k"], idle_timeout=0, filter=flt))
        expected = python_filtered(batches(t.stream("from-snapshot", snapshot_id=1, idle_timeout=0)), test)
        assert got == [(sid, [{"k": r["k"], "_row_kind": r["_row_kind"]} for r in rs]) for sid, rs in expected]


def test_an_update_out_of_the_filter_keeps_its_before_row_only(catalog):
    """Row by row, as Paimon's (Flink's) filter after a changelog source: -U of an old row that matches is kept,
    the +U of the new row that does not is dropped; the reverse gives a lone +U."""
    t = make(catalog, "t", "lookup")
    t.write(rows(("x", 1, 1, "a"), ("x", 2, 9, "b")))  # snapshots 1 (APPEND) and 2 (COMPACT with the changelog)
    t.write(rows(("x", 1, 8, "a"), ("x", 2, 2, "b")))
    got = [(r["_row_kind"], r["k"], r["a"]) for _, rs in batches(t.stream("from-snapshot", snapshot_id=3,
                                                                          idle_timeout=0, filter=("a", "<", 3)))
           for r in rs]
    assert sorted(got) == [("+U", 2, 2), ("-U", 1, 1)]


def test_normalized_stream_filters_the_looked_up_rows(catalog):
    """changelog-producer none, normalized: the -U row comes from a lookup, not from the delta file, so a delta file
    whose values do not match the filter must still be read."""
    t = make(catalog, "t", "none")
    t.write(rows(("x", 1, 1, "a")))
    t.write(rows(("x", 1, 9, "a")))  # the delta file holds only a = 9
    got = batches(t.stream("from-snapshot", snapshot_id=2, idle_timeout=0, normalize=True, filter=("a", "<", 3)))
    assert [(r["_row_kind"], r["a"]) for _, rs in got for r in rs] == [("-U", 1)]


def test_append_table_stream_filter(catalog):
    t = catalog.create_table("db.ap", SCHEMA, partition_keys=["p"], options={"bucket": "-1"})
    t.write(rows(("x", 1, 1, "a"), ("y", 2, 5, "b")))
    t.write(rows(("y", 3, 2, "c"), ("x", 4, 7, None)))
    for flt, test in FILTERS:
        for kwargs in ({"mode": "from-snapshot", "snapshot_id": 1}, {"mode": "latest-full"}):
            unfiltered = batches(t.stream(idle_timeout=0, **kwargs))
            assert batches(t.stream(idle_timeout=0, filter=flt, **kwargs)) == python_filtered(unfiltered, test)


def test_files_that_cannot_match_are_not_read(catalog, monkeypatch):
    """Change files are pruned by partition, key statistics and value statistics (read row by row, a file none of
    whose rows matches adds nothing)."""
    from engine.read.split_read import SplitReader
    t = make(catalog, "t", "input")
    t.write(rows(("x", 1, 1, "a")))
    t.write(rows(("y", 2, 100, "b")))
    t.write(rows(("x", 3, 200, "c")))
    read = []
    original = SplitReader.read_file

    def spy(self, split, meta, *args, **kwargs):
        read.append(split.partition_values)
        return original(self, split, meta, *args, **kwargs)

    monkeypatch.setattr(SplitReader, "read_file", spy)
    for flt, expected in [(("p", "=", "y"), [("y",)]), (("k", "=", 3), [("x",)]), (("a", ">", 150), [("x",)])]:
        read.clear()
        list(t.stream("from-snapshot", snapshot_id=1, idle_timeout=0, filter=flt))
        assert read == expected, flt


def test_bad_filter_is_refused_before_the_first_batch(catalog):
    t = make(catalog, "t", "input")
    with pytest.raises(InvalidInput, match="nope"):
        t.stream("latest", idle_timeout=0, filter=("nope", "=", 1))
    with pytest.raises(InvalidInput):
        t.stream("latest", idle_timeout=0, filter=("a", "=", "not a number"))


def test_incremental_between_tags_filters_the_difference(catalog):
    t = make(catalog, "t", "input")
    history(t)
    t.create_tag("t1", 1)
    t.create_tag("t2")
    unfiltered = batches(t.stream("incremental", start="t1", end="t2"))
    for flt, test in FILTERS:
        assert batches(t.stream("incremental", start="t1", end="t2", filter=flt)) == python_filtered(unfiltered, test)


@pytest.mark.interop
def test_filtered_stream_of_a_pypaimon_written_table(warehouse, catalog):
    from tests.interop.pypaimon_util import pp_catalog, pp_create_table, pp_write
    pp = pp_create_table(pp_catalog(warehouse), "db.pp", SCHEMA, ["p", "k"], ["p"],
                         {"bucket": "2", "changelog-producer": "input"})
    pp_write(pp, rows(("x", 1, 1, "a"), ("x", 2, 5, "b"), ("y", 3, 2, "c")))
    pp_write(pp, rows(("x", 1, 4, "u"), ("y", 3, 1, "u"), ("y", 4, None, None)))
    pp_write(pp, rows(("x", 2, 0, "z")))
    t = catalog.get_table("db.pp")
    for flt, test in FILTERS:
        for kwargs in ({"mode": "from-snapshot", "snapshot_id": 1}, {"mode": "from-snapshot-full", "snapshot_id": 2}):
            unfiltered = batches(t.stream(idle_timeout=0, **kwargs))
            assert unfiltered
            assert batches(t.stream(idle_timeout=0, filter=flt, **kwargs)) == python_filtered(unfiltered, test)
