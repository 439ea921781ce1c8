"""OVERWRITE snapshots in streaming reads: ``streaming-read-overwrite`` (primary-key tables) and
``streaming-read-append-overwrite`` (append tables), against a model of what Paimon's DataTableStreamScan emits.

Model (Paimon's FollowUpScanner.getOverwriteChangesPlan): without the option an OVERWRITE snapshot gives nothing
(it is not APPEND and has no changelog); with it a primary-key table gives every merged row of the overwritten
partitions as -D, then the new rows merged by key as +I (no diff: an unchanged row comes as -D and +I); an append
table gives the new rows as +I. Incremental reads skip OVERWRITE snapshots whatever the option.
"""
from __future__ import annotations

import pyarrow as pa
import pytest

from engine.errors import InvalidOption
from engine.options import TableOptions

SCHEMA = pa.schema([("p", pa.int32()), ("k", pa.int64()), ("v", pa.string())])


def _data(rows):
    return pa.table({"p": pa.array([r[0] for r in rows], pa.int32()), "k": [r[1] for r in rows],
                     "v": [r[2] for r in rows]}, schema=SCHEMA)


class Model:
    """The table's rows and what a streaming read emits per snapshot."""

    def __init__(self, pk: bool, reads_overwrite: bool):
        self.pk, self.reads_overwrite = pk, reads_overwrite
        self.rows: list[tuple] = []  # append order; for a pk table one row per (p, k)

    def append(self, rows) -> list[tuple]:
        if self.pk:
            for r in rows:
                self.rows = [x for x in self.rows if x[:2] != r[:2]] + [r]
        else:
            self.rows += rows
        return [r + ("+I",) for r in rows]

    def overwrite(self, rows, partitions) -> list[tuple]:
        """``partitions``: a set of p values, or None for the whole table."""
        gone = [r for r in self.rows if partitions is None or r[0] in partitions]
        self.rows = [r for r in self.rows if not (partitions is None or r[0] in partitions)]
        new = {}
        for r in rows:
            new[r[:2] if self.pk else len(new)] = r
        self.rows += list(new.values())
        if not self.reads_overwrite:
            return []
        removed = [r + ("-D",) for r in sorted(gone)] if self.pk else []
        return removed + [r + ("+I",) for r in (sorted(new.values()) if self.pk else rows)]


def _staged(t, rows):
    with t.new_write() as w:
        w.write(_data(rows))
        return w.prepare_commit()


def _batches(t, **kw):
    return [(int(b.schema.metadata[b"lakemerge.snapshot_id"]), [tuple(r.values()) for r in b.to_pylist()])
            for b in t.stream(idle_timeout=0, **kw)]


def _bag(rows):
    return sorted(rows, key=repr)


def _scenario(t, model: Model) -> dict[int, list[tuple]]:
    """Appends, a dynamic-partition overwrite (p=1, with a changed, an unchanged and a new key), an append, a
    full overwrite, an empty full overwrite (a truncate); returns snapshot id -> the model's emitted rows."""
    expected = {}
    steps = [
        ("append", [(1, 1, "a"), (1, 2, "b"), (2, 3, "c"), (2, 4, "d")]),
        ("append", [(1, 2, "b2"), (3, 5, "e")]),
        ("dynamic", [(1, 2, "b2"), (1, 1, "A"), (1, 9, "z"), (1, 9, "z2")]),
        ("append", [(2, 3, "c2")]),
        ("full", [(2, 7, "x"), (4, 8, "y")]),
        ("full", []),
        ("append", [(5, 1, "q")]),
    ]
    for op, rows in steps:
        if op == "append":
            sid = t.write(_data(rows))
            expected[sid] = model.append(rows)
        elif op == "dynamic":
            sid = t.commit_overwrite(_staged(t, rows), "dynamic")
            expected[sid] = model.overwrite(rows, {r[0] for r in rows})
        else:
            sid = (t.commit_overwrite(_staged(t, rows), None) if rows
                   else t.commit_overwrite([], None, commit_user="truncate"))
            expected[sid] = model.overwrite(rows, None)
        assert t.snapshot(sid).commit_kind == ("APPEND" if op == "append" else "OVERWRITE")
    return expected


@pytest.mark.parametrize("reads", [False, True])
@pytest.mark.parametrize("producer", ["none", "input"])
def test_primary_key_table_streams_overwrites_as_the_model(catalog, reads, producer):
    opts = {"bucket": "2", "changelog-producer": producer}
    if reads:
        opts["streaming-read-overwrite"] = "true"
    t = catalog.create_table("db.t", SCHEMA, ["p", "k"], ["p"], opts)
    model = Model(pk=True, reads_overwrite=reads)
    expected = _scenario(t, model)
    got = dict(_batches(t, mode="from-snapshot", snapshot_id=1))
    assert set(got) == {sid for sid, rows in expected.items() if rows}
    for sid, rows in got.items():
        assert _bag(rows) == _bag(expected[sid]), sid
        if t.snapshot(sid).commit_kind == "OVERWRITE":  # every removal before the new rows
            kinds = [r[-1] for r in rows]
            assert kinds == sorted(kinds, key=lambda k: k != "-D")
    assert sorted(tuple(r.values()) for r in t.read().to_pylist()) == sorted(model.rows)
    # the truncate (an OVERWRITE with deletes only) gives every row as -D with the option, nothing without
    truncate = max(s.id for s in t.snapshots() if s.commit_kind == "OVERWRITE")
    assert (truncate in got) == reads and all(r[-1] == "-D" for r in got.get(truncate, []))
    # incremental reads skip OVERWRITE snapshots whatever the option (IncrementalDeltaStartingScanner)
    appends = [r for sid in sorted(expected) if t.snapshot(sid).commit_kind == "APPEND" for r in expected[sid]]
    assert _bag(tuple(r.values()) for r in t.read_changes().to_pylist()) == _bag(appends)
    inc = [r for _, rows in _batches(t, mode="incremental", start=0, end=t.latest_snapshot_id()) for r in rows]
    assert _bag(inc) == _bag(appends)


@pytest.mark.parametrize("reads", [False, True])
def test_append_table_streams_overwrites_as_the_model(catalog, reads):
    opts = {"streaming-read-append-overwrite": "true"} if reads else {}
    t = catalog.create_table("db.a", SCHEMA, [], ["p"], opts)
    model = Model(pk=False, reads_overwrite=reads)
    expected = _scenario(t, model)
    got = dict(_batches(t, mode="from-snapshot", snapshot_id=1))
    assert set(got) == {sid for sid, rows in expected.items() if rows}
    for sid, rows in got.items():
        assert _bag(rows) == _bag(expected[sid]), sid
    assert _bag(tuple(r.values()) for r in t.read().to_pylist()) == _bag(model.rows)


def test_append_table_ignores_the_primary_key_option_and_vice_versa(catalog):
    """Paimon reads an append table's overwrites only with streaming-read-append-overwrite, a primary-key table's
    only with streaming-read-overwrite."""
    t = catalog.create_table("db.t", SCHEMA, ["p", "k"], ["p"],
                             {"bucket": "1", "streaming-read-append-overwrite": "true"})
    t.write(_data([(1, 1, "a")]))
    sid = t.commit_overwrite(_staged(t, [(1, 2, "b")]), "dynamic")
    assert _batches(t, mode="from-snapshot", snapshot_id=sid) == []


def test_overwrite_rows_are_merged_by_the_merge_engine(catalog):
    """Removed and added files are each merged (partial-update here): one -D per key with its merged row, one +I
    per written key, as Paimon's merge reader gives them."""
    t = catalog.create_table("db.t", SCHEMA, ["p", "k"], ["p"],
                             {"bucket": "1", "merge-engine": "partial-update", "streaming-read-overwrite": "true"})
    t.write(_data([(1, 1, "a")]))
    t.write(pa.table({"p": pa.array([1], pa.int32()), "k": [1], "v": pa.array([None], pa.string())}))
    t.write(_data([(1, 2, "b")]))
    with t.new_write() as w:
        w.write(_data([(1, 3, "c")]))
        w.write(pa.table({"p": pa.array([1], pa.int32()), "k": [3], "v": pa.array([None], pa.string())}))
        msgs = w.prepare_commit()
    sid = t.commit_overwrite(msgs, "dynamic")
    assert _batches(t, mode="from-snapshot", snapshot_id=sid) == [
        (sid, [(1, 1, "a", "-D"), (1, 2, "b", "-D"), (1, 3, "c", "+I")])]


def test_overwrite_keeps_the_stored_kind_of_new_rows_unless_normalized(catalog):
    """The added files' merged records keep their kind (+U stays +U, as Paimon's unwrap gives it); a normalized
    stream (ChangelogNormalize after the source) sees +I, the key's state having been cleared by the -D."""
    t = catalog.create_table("db.t", SCHEMA, ["p", "k"], ["p"], {"bucket": "1", "streaming-read-overwrite": "true"})
    t.write(_data([(1, 1, "a")]))
    with t.new_write() as w:
        w.write(_data([(1, 1, "b")]), row_kinds=["+U"])
        msgs = w.prepare_commit()
    sid = t.commit_overwrite(msgs, "dynamic")
    assert _batches(t, mode="from-snapshot", snapshot_id=sid) == [(sid, [(1, 1, "a", "-D"), (1, 1, "b", "+U")])]
    assert _batches(t, mode="from-snapshot", snapshot_id=sid, normalize=True) == [
        (sid, [(1, 1, "a", "-D"), (1, 1, "b", "+I")])]


def test_removed_rows_are_read_without_deletion_vectors_as_paimon_does(catalog):
    """A streaming split carries no deletion vectors (SnapshotReaderImpl.toIncrementalPlan reads them only for
    batch), so a key deleted through a deletion vector, whose -D record compaction dropped, comes back as a -D of
    its old row."""
    t = catalog.create_table("db.t", SCHEMA, ["p", "k"], ["p"],
                             {"bucket": "1", "deletion-vectors.enabled": "true", "streaming-read-overwrite": "true"})
    t.write(_data([(1, 1, "a"), (1, 2, "b")]))
    t.compact(full=True)
    t.delete(pa.table({"p": pa.array([1], pa.int32()), "k": [1]}))
    t.write(_data([(1, 2, "B")]))
    t.compact()
    assert [tuple(r.values()) for r in t.read().to_pylist()] == [(1, 2, "B")]
    assert all(e.file.delete_row_count == 0 for e in t.manifests.live_entries(t.snapshot()))
    sid = t.commit_overwrite(_staged(t, [(1, 9, "z")]), "dynamic")
    assert _batches(t, mode="from-snapshot", snapshot_id=sid) == [
        (sid, [(1, 1, "a", "-D"), (1, 2, "B", "-D"), (1, 9, "z", "+I")])]


def test_consumer_restarts_across_an_overwrite_snapshot(catalog):
    """A stream with a consumer id stopped before an OVERWRITE snapshot gets it after the restart, once; a stream
    stopped right after receiving it continues after it."""
    t = catalog.create_table("db.t", SCHEMA, ["p", "k"], ["p"], {"bucket": "2", "streaming-read-overwrite": "true"})
    t.write(_data([(1, 1, "a"), (2, 2, "b")]))
    first = _batches(t, mode="latest-full", consumer_id="etl")
    assert [sid for sid, _ in first] == [1] and t.consumers() == {"etl": 2}
    ow = t.commit_overwrite(_staged(t, [(1, 1, "A")]), "dynamic")
    after = t.write(_data([(2, 3, "c")]))
    stream = t.stream(consumer_id="etl", idle_timeout=0)
    batch = next(stream)
    assert int(batch.schema.metadata[b"lakemerge.snapshot_id"]) == ow
    assert [tuple(r.values()) for r in batch.to_pylist()] == [(1, 1, "a", "-D"), (1, 1, "A", "+I")]
    stream.close()  # handed over: the consumer moves past the overwrite
    assert t.consumers() == {"etl": ow + 1}
    assert _batches(t, consumer_id="etl") == [(after, [(2, 3, "c", "+I")])]
    assert t.consumers() == {"etl": after + 1}
    # without the option the same restart skips the overwrite and goes on with the next append
    t.reset_consumer("etl", ow)
    t.alter().set_option("streaming-read-overwrite", "false").commit()
    assert _batches(t, consumer_id="etl") == [(after, [(2, 3, "c", "+I")])]


def test_options_are_registered_and_validated_as_paimon_does(catalog):
    assert TableOptions({"streaming-read-overwrite": "true",
                         "streaming-read-append-overwrite": "true"}).unknown_keys() == []
    with pytest.raises(InvalidOption, match="streaming-read-overwrite"):
        TableOptions({"streaming-read-overwrite": "yes"})
    for producer in ("lookup", "full-compaction"):
        with pytest.raises(InvalidOption, match=f"streaming-read-overwrite.*{producer}"):
            catalog.create_table(f"db.{producer.replace('-', '_')}", SCHEMA, ["p", "k"], ["p"],
                                 {"bucket": "1", "changelog-producer": producer, "streaming-read-overwrite": "true"})
    with pytest.raises(InvalidOption, match="streaming-read-append-overwrite"):
        catalog.create_table("db.a", SCHEMA, [], ["p"], {"streaming-read-overwrite": "true"})
    t = catalog.create_table("db.l", SCHEMA, ["p", "k"], ["p"], {"bucket": "1", "changelog-producer": "lookup"})
    with pytest.raises(InvalidOption, match="streaming-read-overwrite"):
        t.alter().set_option("streaming-read-overwrite", "true").commit()
    assert "streaming-read-overwrite" not in catalog.get_table("db.l").options


def test_removed_files_of_an_older_schema_are_read_by_field_id(catalog):
    """Rows replaced by an overwrite after a rename and an added column come under today's names, the new column
    null; a column subset is projected."""
    t = catalog.create_table("db.t", SCHEMA, ["p", "k"], ["p"], {"bucket": "1", "streaming-read-overwrite": "true"})
    t.write(_data([(1, 1, "a"), (1, 2, "b")]))
    t.alter().add_column("x", pa.int32()).rename_column("v", "w").commit()
    with t.new_write() as w:
        w.write(pa.table({"p": pa.array([1], pa.int32()), "k": [3], "w": ["c"], "x": pa.array([7], pa.int32())}))
        msgs = w.prepare_commit()
    sid = t.commit_overwrite(msgs, "dynamic")
    assert _batches(t, mode="from-snapshot", snapshot_id=sid) == [
        (sid, [(1, 1, "a", None, "-D"), (1, 2, "b", None, "-D"), (1, 3, "c", 7, "+I")])]
    assert _batches(t, mode="from-snapshot", snapshot_id=sid, columns=["x", "k"]) == [
        (sid, [(None, 1, "-D"), (None, 2, "-D"), (7, 3, "+I")])]


@pytest.mark.parametrize("pk,producer", [(True, "none"), (True, "input"), (False, "none")])
def test_changes_restricted_to_buckets_add_up_to_the_snapshots_changes(catalog, pk, producer):
    """follow_up_changes(buckets=...) over the (partition, bucket) pairs of follow_up_files, one pair at a time,
    gives exactly the rows of the whole snapshot (appends and overwrites), which a rate-limited Spark stream relies
    on to cut a snapshot's changes over batches; normalized changes look keys up across buckets and refuse it."""
    from engine.changelog.overwrite import follow_up_changes, follow_up_files
    from engine.errors import UnsupportedFeature
    opts = {"changelog-producer": producer, "streaming-read-overwrite" if pk else "streaming-read-append-overwrite":
            "true"}
    t = (catalog.create_table("db.t", SCHEMA, ["p", "k"], ["p"], {"bucket": "2", **opts}) if pk
         else catalog.create_table("db.a", SCHEMA, [], ["p"], opts))
    _scenario(t, Model(pk=pk, reads_overwrite=True))
    cut = 0
    for snap in t.snapshots():
        whole = follow_up_changes(t, snap).to_pylist()
        keys = {(e.partition, e.bucket) for e in follow_up_files(t, snap)}
        parts = [r for key in keys for r in follow_up_changes(t, snap, buckets={key}).to_pylist()]
        assert _bag(tuple(r.values()) for r in parts) == _bag(tuple(r.values()) for r in whole), snap.id
        cut += len(keys) > 1
        assert bool(whole) <= bool(keys)
    assert cut >= 2
    if pk and producer == "none":
        first = t.snapshot(1)
        with pytest.raises(UnsupportedFeature, match="whole snapshot"):
            follow_up_changes(t, first, normalize=True, buckets={(e.partition, e.bucket)
                                                                 for e in follow_up_files(t, first)})
