"""Table.delete_where on primary-key tables whose merge engine cannot take a delete record (first-row; aggregation
and partial-update without remove-record-on-delete): Paimon's file-rewrite path (engine.write.pk_rewrite). Against
a dict model of the merged rows, with and without deletion vectors; the compact-first refusal; first-row and
deletion-vector level-0 semantics as Paimon's DeleteFromTableTestBase; a compaction racing the delete."""
from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest

from engine import Catalog
from engine.errors import CommitConflict, InvalidInput
from engine.meta.manifest import ADD, DELETE

S = pa.schema([pa.field("dt", pa.string(), False), pa.field("id", pa.int64(), False), ("v", pa.string()),
               ("n", pa.int64())])
AGG = {"merge-engine": "aggregation", "fields.n.aggregate-function": "sum"}
PARTIAL = {"merge-engine": "partial-update"}
FIRST = {"merge-engine": "first-row"}
DV = {"deletion-vectors.enabled": "true"}
ENGINES = {"aggregation": AGG, "aggregation-dv": {**AGG, **DV}, "partial-update": PARTIAL,
           "partial-update-dv": {**PARTIAL, **DV}, "first-row": FIRST}


def make(tmp_path, options, name="t", bucket="2"):
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db", ignore_if_exists=True)
    return cat.create_table(f"db.{name}", S, ["dt", "id"], ["dt"], options={"bucket": bucket, **options})


def batch(items: dict) -> pa.Table:
    return pa.table({"dt": [k[0] for k in items], "id": [k[1] for k in items],
                     "v": [v[0] for v in items.values()], "n": [v[1] for v in items.values()]}, schema=S)


def state(t) -> dict:
    return {(r["dt"], r["id"]): (r["v"], r["n"]) for r in t.read().to_pylist()}


def merge(engine: str, model: dict, items: dict) -> None:
    """The dict model of the three merge engines (no sequence field: later writes are newer)."""
    for k, (v, n) in items.items():
        old = model.get(k)
        if old is None:
            model[k] = (v, n)
        elif engine.startswith("aggregation"):  # v: last_non_null_value (the default), n: sum
            model[k] = (v if v is not None else old[0], n if old[1] is None else old[1] + (n or 0))
        elif engine.startswith("partial-update"):  # nulls do not overwrite
            model[k] = (v if v is not None else old[0], n if n is not None else old[1])
        # first-row keeps the first


def delta(t, sid):
    snap = t.snapshot(sid)
    return [e for m in t.manifests.manifest_list(snap.delta_manifest_list) for e in t.manifests.manifest(m.file_name)]


@pytest.mark.parametrize("engine", list(ENGINES))
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_delete_after_compaction_matches_the_model(tmp_path, engine, seed):
    """Random upserts, a full compaction, a DELETE by a value condition: exactly the matching merged rows go,
    the others keep their merged values, and later upserts still merge on top of the kept rows."""
    rng = random.Random(seed)
    t = make(tmp_path, ENGINES[engine])
    model: dict = {}

    def upsert(rounds):
        for _ in range(rounds):
            items = {(rng.choice("ab"), rng.randrange(40)): (rng.choice(["x", "y", None]),
                                                             rng.choice([None, *range(-3, 10)]))
                     for _ in range(rng.randrange(1, 25))}
            t.write(batch(items))
            merge(engine, model, items)
    upsert(4)
    t.compact(full=True)
    assert state(t) == model
    limit = rng.randrange(0, 8)
    gone = {k for k, (v, n) in model.items() if n is not None and n >= limit and k[0] == "a"}
    sid = t.delete_where([("n", ">=", limit), ("dt", "=", "a")])
    assert (sid is None) == (not gone)
    for k in gone:
        del model[k]
    assert state(t) == model
    if sid is not None:
        assert t.snapshot(sid).commit_kind == "OVERWRITE"
        entries = delta(t, sid)
        if "dv" in engine:  # positions marked in the deletion vectors: no data file written or removed
            assert entries == [] and t.snapshot(sid).index_manifest
        else:  # touched files replaced at their level, kept rows with their own sequence numbers
            removed = {e.file.level for e in entries if e.kind == DELETE}
            assert removed and {e.file.level for e in entries if e.kind == ADD} <= removed
    assert t.delete_where([("n", ">", 10_000)]) is None
    upsert(3)
    t.compact(full=True)
    assert state(t) == model
    report = t.check()
    assert report.ok and not report.orphan_files, report.summary()


def test_aggregation_keeps_summing_the_kept_keys(tmp_path):
    t = make(tmp_path, AGG, bucket="1")
    t.write(batch({("a", 1): ("x", 1), ("a", 2): ("y", 2), ("a", 3): ("z", 3)}))
    t.write(batch({("a", 1): (None, 10), ("a", 2): (None, 20)}))
    t.compact(full=True)
    t.delete_where([("id", "=", 2)])
    assert state(t) == {("a", 1): ("x", 11), ("a", 3): ("z", 3)}
    t.write(batch({("a", 1): (None, 100), ("a", 2): ("new", 5)}))  # a deleted key starts again from nothing
    assert state(t) == {("a", 1): ("x", 111), ("a", 2): ("new", 5), ("a", 3): ("z", 3)}


@pytest.mark.parametrize("engine", ["aggregation", "partial-update", "first-row"])
def test_uncompacted_data_is_refused_as_paimon(tmp_path, engine):
    """Paimon's "test delete with merge engine": write-only inserts (level 0) make DELETE refuse with the hint to
    compact first, nothing changes; after a compaction the DELETE goes through."""
    t = make(tmp_path, {**ENGINES[engine], "write-only": "true"}, bucket="1")
    t.write(batch({("a", 1): ("a", None)}))
    t.write(batch({("a", 2): ("b", None)}))
    t.write(batch({("a", 1): (None, 16)}))
    before, sid = state(t), t.latest_snapshot_id()
    with pytest.raises(InvalidInput, match="COMPACT' procedure first") as e:
        t.delete_where([("id", "=", 1)])
    assert e.value.table == "db.t" and "bucket 0" in str(e.value)
    assert t.latest_snapshot_id() == sid and state(t) == before and not t.check().orphan_files
    t.compact(full=True)
    t.delete_where([("id", "=", 1)])
    assert state(t) == {("a", 2): ("b", None)}


def test_only_the_considered_files_must_be_compacted(tmp_path):
    """Candidate files are those whose key statistics may match: an uncompacted bucket the condition's keys
    cannot reach does not block the DELETE."""
    t = make(tmp_path, {**AGG, "write-only": "true"}, bucket="1")
    t.write(batch({("a", 1): ("x", 1), ("b", 1): ("y", 1)}))
    t.compact(full=True)
    t.write(batch({("b", 1): ("y", 1)}))  # level 0 in partition b, overlapping its compacted file
    t.delete_where([("dt", "=", "a"), ("id", "=", 1)])
    assert state(t) == {("b", 1): ("y", 2)}
    with pytest.raises(InvalidInput, match="COMPACT"):
        t.delete_where([("dt", "=", "b"), ("n", ">", 0)])  # (a partition-only condition truncates)


def test_first_row_table_as_paimon(tmp_path):
    """Paimon's "Paimon Delete: first-row table": a first-row writer compacts level 0 up, so DELETE works at once."""
    t = make(tmp_path, FIRST, bucket="1")
    t.write(batch({("a", 1): ("a", 0), ("a", 2): ("b", 0), ("a", 3): ("c", 0)}))
    assert t.delete_where([("id", "=", 3)]) is not None
    assert state(t) == {("a", 1): ("a", 0), ("a", 2): ("b", 0)}


def test_first_row_levels_with_disjoint_keys_as_paimon(tmp_path):
    """First-row compaction drops a level-0 key already deeper, so each key is in one file above level 0 and,
    as Paimon, files of several levels with overlapping key ranges are raw convertible: no compaction needed."""
    t = make(tmp_path, FIRST, bucket="1")
    t.write(batch({("a", 1): ("first", 1), ("a", 3): ("first", 3)}))
    t.write(batch({("a", 1): ("later", 9), ("a", 2): ("first", 2)}))
    files = [f for sp in t.plan() for f in sp.files]
    assert 0 not in {f.level for f in files} and len({f.level for f in files}) == 2  # ranges [1, 3] and [2, 2]
    t.delete_where([("n", "=", 1)])  # a value condition: every file of the bucket is considered
    assert state(t) == {("a", 2): ("first", 2), ("a", 3): ("first", 3)}


def test_first_row_refuses_a_key_in_two_files(tmp_path, monkeypatch):
    """A table compacted by an older lakemerge (no lookup) can hold a later record of a key in a lower level (the
    read merges it away); such a bucket is refused rather than deleting the first record and resurrecting the
    later one, until a full compaction repairs it."""
    from engine.deletion_vectors.position_index import PositionIndex
    t = make(tmp_path, FIRST, bucket="1")
    with monkeypatch.context() as m:
        m.setattr(PositionIndex, "contains", lambda self, probes: np.zeros(probes.num_rows, bool))
        t.write(batch({("a", 1): ("first", 1), ("a", 2): ("first", 2)}))
        t.write(batch({("a", 1): ("later", 9)}))
    assert 0 not in {f.level for sp in t.plan() for f in sp.files}
    with pytest.raises(InvalidInput, match="COMPACT"):
        t.delete_where([("id", "=", 1)])
    t.compact(full=True)
    t.delete_where([("id", "=", 1)])
    assert state(t) == {("a", 2): ("first", 2)}


def test_deletion_vector_delete_skips_level_0_as_paimon(tmp_path):
    """A deletion-vector table's batch read skips level 0, and so does the DELETE: an uncompacted newer record of
    a deleted key shows up once compacted, as in Paimon."""
    t = make(tmp_path, {**AGG, **DV, "write-only": "true"}, bucket="1")
    t.write(batch({("a", 1): ("x", 1), ("a", 2): ("y", 2)}))
    t.compact(full=True)
    t.write(batch({("a", 1): ("l0", 5), ("a", 3): ("l0", 7)}))  # level 0: not read
    assert state(t) == {("a", 1): ("x", 1), ("a", 2): ("y", 2)}
    sid = t.delete_where([("v", "=", "x")])
    assert delta(t, sid) == []  # only deletion vectors changed
    assert state(t) == {("a", 2): ("y", 2)}
    assert t.delete_where([("v", "=", "l0")]) is None  # level-0 rows are not seen
    t.compact(full=True)
    assert state(t) == {("a", 1): ("l0", 5), ("a", 2): ("y", 2), ("a", 3): ("l0", 7)}


@pytest.mark.parametrize("engine", ["aggregation", "aggregation-dv", "first-row"])
def test_a_compaction_between_read_and_commit_conflicts(tmp_path, monkeypatch, engine):
    from engine.write import pk_rewrite
    t = make(tmp_path, ENGINES[engine], bucket="1")
    t.write(batch({("a", i): ("x", i) for i in range(10)}))
    t.compact(full=True)
    t.write(batch({("a", i): ("y", 1) for i in range(5, 15)}))
    t.compact(full=True)
    before = state(t)
    other = Catalog(str(tmp_path / "wh")).get_table("db.t")
    original = pk_rewrite.commit_changes

    def racing(*args, **kwargs):
        other.write(batch({("a", 20): ("z", 1)}))
        other.compact(full=True)
        return original(*args, **kwargs)
    monkeypatch.setattr(pk_rewrite, "commit_changes", racing)
    with pytest.raises(CommitConflict):
        t.delete_where([("n", ">", 3)])
    monkeypatch.undo()
    before[("a", 20)] = ("z", 1)
    assert state(t) == before
    report = t.check()
    assert report.ok and not report.orphan_files, report.summary()


def test_update_is_still_refused(tmp_path):
    """Paimon's UPDATE supports only deduplicate and partial-update (it writes +U rows)."""
    for engine in ("aggregation", "first-row"):
        t = make(tmp_path, ENGINES[engine], name=engine.replace("-", "_"))
        t.write(batch({("a", 1): ("x", 1)}))
        with pytest.raises(InvalidInput, match="merge-engine"):
            t.update_where({"n": 5})


def test_rewritten_file_keeps_level_and_sequence_numbers_and_evolves_schema(tmp_path):
    """A file written under an older schema (before a rename and an added column) is rewritten in the current
    layout, at its level, its kept rows with their own sequence numbers."""
    t = make(tmp_path, AGG, bucket="1")
    t.write(batch({("a", i): ("x", i) for i in range(6)}))
    t.compact(full=True)
    (old,) = [f for sp in t.plan() for f in sp.files]
    t.alter().rename_column("v", "label").add_column("extra", pa.int32()).commit()
    t = Catalog(str(tmp_path / "wh")).get_table("db.t")
    sid = t.delete_where([("n", "in", [1, 4])])
    (new,) = [f for sp in t.plan() for f in sp.files]
    assert new.level == old.level and new.schema_id == t.schema.id != old.schema_id
    assert old.min_sequence_number <= new.min_sequence_number <= new.max_sequence_number <= old.max_sequence_number
    assert new.row_count == 4 and t.snapshot(sid).commit_kind == "OVERWRITE"
    assert sorted((r["id"], r["label"], r["n"], r["extra"]) for r in t.read().to_pylist()) == \
        [(i, "x", i, None) for i in (0, 2, 3, 5)]


def test_rewrite_after_deletion_vectors_switched_off_keeps_marked_rows_deleted(tmp_path):
    """Rows a deletion vector marked stay deleted when their file is later rewritten on a table whose deletion
    vectors were switched off (the vectors stay live until the file is rewritten or compacted)."""
    t = make(tmp_path, {**AGG, **DV}, bucket="1")
    t.write(batch({("a", i): ("x", i) for i in range(6)}))
    t.compact(full=True)
    t.delete_where([("id", "=", 1)])  # marked in the vector
    t.alter().set_option("deletion-vectors.modifiable", "true").set_option("deletion-vectors.enabled", "false") \
        .commit()
    t = Catalog(str(tmp_path / "wh")).get_table("db.t")
    assert not t.schema.table_options.deletion_vectors and any(sp.vectors.files for sp in t.plan())
    t.delete_where([("id", "=", 2)])  # copy-on-write of the marked file
    assert state(t) == {("a", i): ("x", i) for i in (0, 3, 4, 5)}
    assert not any(sp.vectors.files for sp in t.plan())
    report = t.check()
    assert report.ok and not report.orphan_files, report.summary()


@pytest.mark.parametrize("engine", ["aggregation", "aggregation-dv", "first-row"])
def test_no_condition_or_partition_only_truncates_as_paimon(tmp_path, engine):
    """Paimon turns a DELETE without condition or with a partition-only one into a truncate
    (OptimizeMetadataOnlyDeleteFromPaimonTable): it needs no compaction, and on a deletion-vector table the
    level-0 rows its read skips go too (they do not come back with the next compaction)."""
    t = make(tmp_path, {**ENGINES[engine], "write-only": "true"}, bucket="1")
    t.write(batch({("a", 1): ("x", 1), ("b", 1): ("y", 1)}))
    t.compact(full=True)
    t.write(batch({("a", 1): ("x", 2), ("a", 2): ("l0", 2), ("b", 2): ("l0", 2)}))  # level 0, uncompacted
    sid = t.delete_where([("dt", "=", "a")])
    assert t.snapshot(sid).commit_kind == "OVERWRITE"
    t.compact(full=True)
    assert {k for k in state(t)} == {("b", 1), ("b", 2)}
    assert t.delete_where([("dt", "=", "a")]) is None
    t.write(batch({("b", 3): ("l0", 3)}))
    t.delete_where(None)
    t.compact(full=True)
    assert state(t) == {}
    report = t.check()
    assert report.ok and not report.orphan_files, report.summary()


@pytest.mark.parametrize("engine", ["aggregation", "first-row"])
def test_condition_on_a_column_with_a_default_value(tmp_path, engine):
    """A null read as ``fields.<f>.default-value`` matches a condition on the default although the file's
    statistics say null (Paimon's DefaultValueAssigner keeps such columns out of stats pruning): the DELETE and
    the filtered read both find it."""
    t = make(tmp_path, {**ENGINES[engine], "fields.v.default-value": "dflt"}, bucket="1")
    t.write(batch({("a", 1): (None, 1), ("a", 2): ("x", 2)}))
    t.compact(full=True)
    assert [r["id"] for r in t.read(filter=[("v", "=", "dflt")]).to_pylist()] == [1]
    assert t.delete_where([("v", "=", "dflt")]) is not None
    assert state(t) == {("a", 2): ("x", 2)}


@pytest.mark.parametrize("engine", ["aggregation", "first-row"])
def test_postpone_bucket_table_rewrites_its_real_buckets(tmp_path, engine):
    """A postpone-bucket table (bucket=-2): the DELETE rewrites the files of its real buckets (what batch reads
    show) and leaves postponed files alone; later compaction brings the postponed rows in on top."""
    t = make(tmp_path, {**ENGINES[engine], "postpone.default-bucket-num": "2"}, bucket="-2")
    model: dict = {}
    first = {("a", i): (f"v{i}", i) for i in range(20)}
    t.write(batch(first))
    merge(engine, model, first)
    t.compact(full=True)
    with t.new_write(commit_identifier=1) as postponed:  # a streaming write: postponed, invisible to batch reads
        postponed.write(batch({("a", 3): ("late", 100)}))
        t.commit(postponed.prepare_commit())
    assert t.delete_where([("n", ">=", 10)]) is not None
    model = {k: v for k, v in model.items() if v[1] < 10}
    assert state(t) == model
    # rewritten real-bucket files in the table's format; the postponed file untouched (Avro, as Paimon writes it)
    assert all(f.file_name.endswith(".avro" if sp.bucket == -2 else ".parquet") for sp in t.plan() for f in sp.files)
    t.compact(full=True)
    merge(engine, model, {("a", 3): ("late", 100)})
    assert state(t) == model
