"""Table.delete_where / update_where on primary-key tables (engine.write.row_level), edge cases of the merge
engine: a sequence.field the UPDATE does not change (ties go to the later record, ascending or descending, null),
partial-update sequence groups and nulls, a filter on values only known after the merge, a cross-partition table
whose merge engine keeps a moved key in its old partition (Paimon's UseOldExistingProcessor), and a commit that
raced a write or a compaction between the read and the write."""
from __future__ import annotations

import pyarrow as pa
import pytest

from engine import Catalog

S = pa.schema([pa.field("id", pa.int64(), False), ("v", pa.string()), ("seq", pa.int64()), ("w", pa.string())])


def make(tmp_path, options, name="t", schema=S, primary_key=("id",), partition_keys=()):
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db", ignore_if_exists=True)
    return cat.create_table(f"db.{name}", schema, list(primary_key), list(partition_keys), options=options)


def rows(t) -> list[tuple]:
    return sorted((tuple(r.values()) for r in t.read().to_pylist()), key=repr)


def batch(ids, v, seq, w) -> pa.Table:
    return pa.table({"id": ids, "v": v, "seq": seq, "w": w}, schema=S)


@pytest.mark.parametrize("options", [{}, {"sequence.field.sort-order": "descending"},
                                     {"deletion-vectors.enabled": "true"}, {"changelog-producer": "lookup"}],
                         ids=["ascending", "descending", "dv", "lookup"])
def test_sequence_field_left_unchanged(tmp_path, options):
    """The +U / -D row carries the row's own sequence.field value: the tie goes to the later record, so the
    UPDATE and the DELETE take effect, before and after a full compaction (and a null sequence value too)."""
    t = make(tmp_path, {"bucket": "1", "sequence.field": "seq", **options})
    t.write(batch([1, 2, 3], ["a", "b", "c"], [5, 5, None], ["x", "y", "z"]))
    t.update_where({"v": "new"}, [("id", "in", [1, 3])])
    assert rows(t) == [(1, "new", 5, "x"), (2, "b", 5, "y"), (3, "new", None, "z")]
    t.delete_where([("id", "in", [2, 3])])
    assert rows(t) == [(1, "new", 5, "x")]
    t.compact(full=True)
    assert rows(t) == [(1, "new", 5, "x")]


def test_partial_update_sequence_group_and_nulls(tmp_path):
    """partial-update: an UPDATE of a grouped field takes its group (equal group sequence), an UPDATE to NULL
    leaves the old value (nulls never overwrite, as in Paimon), a DELETE with remove-record-on-sequence-group
    removes the row."""
    t = make(tmp_path, {"bucket": "1", "merge-engine": "partial-update", "fields.seq.sequence-group": "v",
                        "partial-update.remove-record-on-sequence-group": "seq"})
    t.write(batch([1, 2], ["a", "b"], [5, 5], ["x", "y"]))
    t.update_where({"v": "new", "w": None}, [("id", "=", 1)])
    assert rows(t) == [(1, "new", 5, "x"), (2, "b", 5, "y")]
    t.delete_where([("id", "=", 2)])
    assert rows(t) == [(1, "new", 5, "x")]


def test_filter_on_merged_values(tmp_path):
    """The filter applies to the merged row, not to the records: partial-update fields from two writes match
    together; a deduplicate row's superseded value matches nothing."""
    t = make(tmp_path, {"bucket": "1", "merge-engine": "partial-update",
                        "partial-update.remove-record-on-delete": "true"})
    t.write(batch([1], ["a"], [1], [None]))
    t.write(batch([1], [None], [None], ["z"]))
    assert t.update_where({"v": "q"}, [("w", "=", "z"), ("v", "=", "a")]) is not None
    assert rows(t) == [(1, "q", 1, "z")]
    t.delete_where([("w", "=", "z")])
    assert rows(t) == []
    d = make(tmp_path, {"bucket": "1"}, name="d")
    d.write(batch([1], ["a"], [1], [None]))
    d.write(batch([1], ["b"], [1], [None]))
    assert d.update_where({"w": "q"}, [("v", "=", "a")]) is None
    assert d.delete_where([("v", "=", "a")]) is None


P = pa.schema([pa.field("dt", pa.string(), False), pa.field("id", pa.int64(), False), ("v", pa.string()),
               ("seq", pa.int64())])


@pytest.mark.parametrize("options, moved", [({}, True), ({"sequence.field": "seq"}, True),
                                            ({"deletion-vectors.enabled": "true"}, True),
                                            ({"merge-engine": "partial-update"}, False)],
                         ids=["deduplicate", "sequence-field", "dv", "partial-update"])
def test_cross_partition_update_of_the_partition(tmp_path, options, moved):
    """A cross-partition table moves an updated key to its new partition, except partial-update, which keeps
    the key in its old partition and merges the new values there (Paimon's UseOldExistingProcessor)."""
    t = make(tmp_path, {"bucket": "-1", **options}, schema=P, partition_keys=("dt",))
    t.write(pa.table({"dt": ["a", "a"], "id": [1, 2], "v": ["p", "q"], "seq": [3, 3]}, schema=P))
    t.update_where({"dt": "b", "v": "moved"}, [("id", "=", 1)])
    t.update_where({"v": "again"}, [("id", "=", 1)])
    assert rows(t) == sorted([("a", 2, "q", 3), ("b" if moved else "a", 1, "again", 3)], key=repr)
    if moved:
        t.delete_where([("id", "=", 1)])
        assert rows(t) == [("a", 2, "q", 3)]


Q = pa.schema([pa.field("dt", pa.string(), False), pa.field("id", pa.int64(), False), ("v", pa.string()),
               ("n", pa.int64())])


def qbatch(items: dict) -> pa.Table:
    return pa.table({"dt": [k[0] for k in items], "id": [k[1] for k in items],
                     "v": [v[0] for v in items.values()], "n": [v[1] for v in items.values()]}, schema=Q)


@pytest.mark.parametrize("options", [{"bucket": "1"}, {"bucket": "1", "deletion-vectors.enabled": "true"},
                                     {"bucket": "1", "changelog-producer": "lookup"}, {"bucket": "-1"}],
                         ids=["fixed", "fixed-dv", "lookup", "dynamic"])
@pytest.mark.parametrize("race", ["write", "compact", "both"])
def test_a_write_or_compaction_between_read_and_write(tmp_path, options, race):
    """A write (which on dv / lookup tables compacts) or a full compaction published between the UPDATE's read
    and its write: the UPDATE wins for the keys it read (at the latest after a full compaction: a dv table reads
    no level-0 file, and the UPDATE's own compaction, planned on the snapshot it read, is dropped), the racing
    write's other keys stay, fsck is clean."""
    from engine.errors import CommitConflict
    t = make(tmp_path, options, schema=Q, primary_key=("dt", "id"), partition_keys=("dt",))
    t.write(qbatch({("a", 1): ("x", 1), ("a", 2): ("y", 2)}))
    t.write(qbatch({("a", 3): ("x", 1), ("a", 2): ("y2", 2)}))
    other = Catalog(str(tmp_path / "wh")).get_table("db.t")
    original = t.new_write

    def racing(**kwargs):
        if race in ("write", "both"):
            other.write(qbatch({("a", 1): ("concurrent", 7), ("a", 4): ("c", 3), ("a", 2): ("cc", 9)}))
        if race in ("compact", "both"):
            other.compact(full=True)
        return original(**kwargs)
    t.new_write = racing
    try:
        t.update_where({"v": "u"}, [("id", "<=", 2)])
    except CommitConflict:
        assert t.check().ok
        return
    expected = {("a", 1): ("u", 1), ("a", 2): ("u", 2), ("a", 3): ("x", 1)}
    if race != "compact":
        expected[("a", 4)] = ("c", 3)
    t.compact(full=True)
    assert {(r["dt"], r["id"]): (r["v"], r["n"]) for r in t.read().to_pylist()} == expected
    report = t.check()
    assert report.ok, report.summary()


def test_dv_read_skips_level_0_as_paimon(tmp_path):
    """As Paimon's batch scan of a deletion-vector table (batchScanSkipLevel0), the UPDATE reads no level-0 file:
    with write-only=true a committed but uncompacted write is not seen, and the newer +U of the matched key
    overrides it at the next compaction (documented in engine.write.row_level)."""
    t = make(tmp_path, {"bucket": "1", "deletion-vectors.enabled": "true", "write-only": "true"})
    t.write(batch([1, 2], ["a", "b"], [1, 1], ["x", "y"]))
    t.compact(full=True)
    t.write(batch([1, 2], ["a", "b"], [1, 1], ["NEW", "NEW"]))  # level 0, not compacted
    assert rows(t) == [(1, "a", 1, "x"), (2, "b", 1, "y")]
    t.update_where({"v": "u"}, [("id", "=", 1)])
    t.compact(full=True)
    assert rows(t) == [(1, "u", 1, "x"), (2, "b", 1, "NEW")]
