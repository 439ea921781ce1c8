"""Rescaling the bucket count of a table with data, as Paimon (docs/maintenance/rescale-bucket.md).

``ALTER TABLE SET ('bucket' = M)`` only changes metadata (SchemaManager.checkAlterTableOption refuses only -1 and
resetting); each file keeps the count it records and reads prune buckets per file. Writing a partition whose files
have another count fails (AbstractFileStoreWrite / ConflictDetection: "Try to write ... with a new bucket num");
an overwrite rescales it; ``rescale`` is Paimon's RescaleProcedure.
"""
from __future__ import annotations

import pyarrow as pa
import pytest

from engine.errors import CommitConflict, InvalidInput, InvalidSchema, UnsupportedFeature
from tests.conftest import list_files

SCHEMA = pa.schema([("dt", pa.string()), ("k", pa.int64()), ("v", pa.string())])
MISMATCH = r"Try to write partition \{dt=a\} with a new bucket num 4, but the previous bucket num is 2"


def rows(dt, keys, tag="v"):
    return pa.table({"dt": [dt] * len(keys), "k": list(keys), "v": [f"{tag}{k}" for k in keys]})


def counts(t) -> dict:
    """Partition value -> the set of bucket counts its live files record."""
    out: dict = {}
    for e in t.manifests.live_entries(t.snapshot()):
        out.setdefault(t.scan().partition_values(e.partition)[0], set()).add(e.total_buckets)
    return out


def content(t) -> list:
    return sorted((r["dt"], r["k"], r["v"]) for r in t.read().to_pylist())


def _rescaled_messages(t, plan, user: str) -> list:
    """What a rescale's writers hand the commit: every planned split's rows, rewritten by the new count."""
    from engine.maintenance.rescale import _rows, rescale_writer
    with rescale_writer(t, plan, commit_user=user) as w:
        for parts in plan.splits.values():
            for split in parts:
                w.write(_rows(t, [split]))
        return w.prepare_commit()


@pytest.fixture
def table(catalog):
    """Partitions a and b written with 2 buckets, then ``bucket`` altered to 4."""
    t = catalog.create_table("db.t", SCHEMA, ["dt", "k"], ["dt"], {"bucket": "2"})
    t.write(pa.concat_tables([rows("a", range(20)), rows("b", range(20))]))
    t.alter().set_option("bucket", "4").commit()
    return t


def test_alter_changes_metadata_only_and_reads_filters_lookups_still_work(table):
    assert table.schema.table_options.bucket == 4
    assert counts(table) == {"a": {2}, "b": {2}}
    assert len(content(table)) == 40
    for k in range(20):  # a key filter prunes buckets by each file's own count
        assert table.read(filter=[("dt", "=", "a"), ("k", "=", k)]).to_pylist() == [{"dt": "a", "k": k, "v": f"v{k}"}]
    found = table.lookup(pa.table({"dt": ["a", "b", "b"], "k": [3, 7, 99]}))
    assert sorted(found.column("k").to_pylist()) == [3, 7]


def test_write_into_an_old_layout_partition_is_refused_and_leaves_the_table_unchanged(table, warehouse):
    before, sid = list_files(warehouse), table.latest_snapshot_id()
    with pytest.raises(InvalidInput, match=MISMATCH):
        table.write(pa.concat_tables([rows("c", [1]), rows("a", [100])]))  # c is new, a is not: all refused
    assert list_files(warehouse) == before and table.latest_snapshot_id() == sid
    table.write(rows("c", range(5)))  # a new partition takes the new count
    assert counts(table)["c"] == {4}


def test_unpartitioned_message_names_the_table(catalog):
    t = catalog.create_table("db.u", pa.schema([("k", pa.int64()), ("v", pa.string())]), ["k"],
                             options={"bucket": "1"})
    t.write(pa.table({"k": [1, 2], "v": ["x", "y"]}))
    t.alter().set_option("bucket", "3").commit()
    with pytest.raises(InvalidInput, match="Try to write table with a new bucket num 3, but the previous bucket num is 1"):
        t.write(pa.table({"k": [3], "v": ["z"]}))


def test_overwrite_rescales_the_partition_then_writes_work(table):
    with table.new_write(overwrite=True) as w:
        w.write(rows("a", range(0, 20, 2), "n"))
        msgs = w.prepare_commit()
    table.commit_overwrite(msgs, [("a",)])
    assert counts(table) == {"a": {4}, "b": {2}}
    table.write(rows("a", [1]))
    assert [r for r in content(table) if r[0] == "a"] == sorted(
        [("a", k, f"n{k}") for k in range(0, 20, 2)] + [("a", 1, "v1")])


def test_a_writer_from_before_the_alter_commits_into_unrescaled_partitions_only(catalog):
    t = catalog.create_table("db.t", SCHEMA, ["dt", "k"], ["dt"], {"bucket": "2"})
    t.write(pa.concat_tables([rows("a", range(10)), rows("b", range(10))]))
    old_a, old_b = t.new_write(), t.new_write()  # started under bucket = 2
    old_a.write(rows("a", [50]))
    old_b.write(rows("b", [50]))
    msgs_a, msgs_b = old_a.prepare_commit(), old_b.prepare_commit()
    t.alter().set_option("bucket", "4").commit()
    t.rescale(partitions={"dt": "a"})
    sid = t.latest_snapshot_id()
    with pytest.raises(CommitConflict, match=r"\{dt=a\} with a new bucket num 2, but the previous bucket num is 4"):
        t.commit(msgs_a)
    assert t.latest_snapshot_id() == sid and counts(t)["a"] == {4}
    t.commit(msgs_b)  # running writes are not influenced by the rescale (Paimon's docs)
    assert counts(t) == {"a": {4}, "b": {2}} and ("b", 50, "v50") in content(t)


def test_compaction_and_append_table_row_level_dml_keep_the_old_count(catalog, table):
    table.write(rows("c", range(3)))
    table.compact(full=True)
    assert counts(table) == {"a": {2}, "b": {2}, "c": {4}}
    assert len(content(table)) == 43
    a = catalog.create_table("db.app", SCHEMA, partition_keys=["dt"], options={"bucket": "2", "bucket-key": "k"})
    a.write(pa.concat_tables([rows("a", range(6)), rows("a", range(6))]))
    a.alter().set_option("bucket", "4").commit()
    a.delete_where([("k", "=", 3)])  # copy-on-write of the old layout's files
    assert counts(a) == {"a": {2}} and a.read().num_rows == 10
    with pytest.raises(InvalidInput, match=MISMATCH):
        a.write(rows("a", [9]))
    a.rescale()
    assert counts(a) == {"a": {4}} and sorted(a.read().column("k").to_pylist()) == sorted(
        [k for k in range(6) if k != 3] * 2)
    a.write(rows("a", [9]))


def test_bucket_option_rules(catalog, table):
    with pytest.raises(InvalidSchema, match="Cannot change bucket to -1"):
        table.alter().set_option("bucket", "-1").commit()
    with pytest.raises(InvalidSchema, match="Cannot reset bucket"):
        table.alter().remove_option("bucket").commit()
    dyn = catalog.create_table("db.dyn", SCHEMA, ["dt", "k"], ["dt"], {"bucket": "-1"})
    dyn.write(rows("a", [1]))
    with pytest.raises(InvalidSchema, match="Cannot change bucket when it is -1"):
        dyn.alter().set_option("bucket", "4").commit()
    table.alter().set_option("bucket", "-2").commit()  # fixed -> postpone: partitions keep their counts
    table.write(rows("a", [100]))
    assert counts(table)["a"] == {2}


def test_leaving_postpone_mode_with_postponed_files_is_refused(catalog):
    t = catalog.create_table("db.pp", SCHEMA, ["dt", "k"], ["dt"],
                             {"bucket": "-2", "postpone.batch-write-fixed-bucket": "false"})
    t.write(rows("a", range(4)))
    with pytest.raises(InvalidSchema, match="postponed file"):
        t.alter().set_option("bucket", "2").commit()
    t.alter().set_option("postpone.default-bucket-num", "2").commit()
    t.compact()
    t.alter().set_option("bucket", "2").commit()
    assert counts(t) == {"a": {2}} and len(content(t)) == 4


def test_rescale_whole_table_and_partitions(table):
    before = content(table)
    assert table.rescale(partitions={"dt": "b"}) == table.latest_snapshot_id()
    assert table.snapshot().commit_kind == "OVERWRITE" and counts(table) == {"a": {2}, "b": {4}}
    assert table.rescale(partitions={"dt": "zzz"}) is None  # no data there: no snapshot
    table.rescale()
    assert counts(table) == {"a": {4}, "b": {4}} and content(table) == before
    table.alter().set_option("bucket", "2").commit()  # scale down again
    table.rescale(2)
    assert counts(table) == {"a": {2}, "b": {2}} and content(table) == before


def test_rescale_to_another_count_than_the_option_leaves_the_schema(table):
    """Paimon rescales with a copy of the table whose 'bucket' is bucket_num: the schema keeps its option."""
    table.rescale(8, partitions={"dt": "a"})
    assert counts(table)["a"] == {8} and table.schema.table_options.bucket == 4
    with pytest.raises(InvalidInput, match="new bucket num 4, but the previous bucket num is 8"):
        table.write(rows("a", [1]))


def test_rescale_errors(catalog, table):
    empty = catalog.create_table("db.e", SCHEMA, ["dt", "k"], ["dt"], {"bucket": "2"})
    with pytest.raises(InvalidInput, match="has no snapshot, no need to rescale"):
        empty.rescale(4)
    with pytest.raises(InvalidInput, match="positive"):
        table.rescale(0)
    with pytest.raises(InvalidInput, match="partition key"):
        table.rescale(partitions={"k": 1})
    dyn = catalog.create_table("db.dyn", SCHEMA, ["dt", "k"], ["dt"], {"bucket": "-1"})
    dyn.write(rows("a", [1]))
    with pytest.raises(UnsupportedFeature, match="bucket = -1"):
        dyn.rescale(4)


def test_rescale_reads_level_0_files_of_a_deletion_vector_table(catalog):
    """Paimon's RescaleProcedureTest: rows still in level-0 files (which a batch read of a deletion-vector table
    skips) are rescaled too, and the result needs no deletion vector."""
    t = catalog.create_table("db.dv", SCHEMA, ["dt", "k"], ["dt"], {"bucket": "1", "deletion-vectors.enabled": "true"})
    t.write(rows("a", [1, 2, 3]))
    t.write(rows("a", [2], "updated"))
    t.alter().set_option("write-only", "true").commit()
    t.write(rows("a", [4], "level0"))
    assert t.read(filter=[("k", "=", 4)]).num_rows == 0
    t.alter().set_option("bucket", "2").set_option("write-only", "false").commit()
    t.rescale(2)
    assert counts(t) == {"a": {2}}
    assert content(t) == [("a", 1, "v1"), ("a", 2, "updated2"), ("a", 3, "v3"), ("a", 4, "level04")]
    assert all(e.file.level > 0 for e in t.manifests.live_entries(t.snapshot()))


def test_rescale_refuses_a_commit_to_the_partitions_meanwhile(table, monkeypatch):
    """Strict mode (commit.strict-mode.last-safe-snapshot = the snapshot read): a write that landed while the
    rescale ran would be lost by its overwrite, so the rescale fails instead."""
    import engine.maintenance.rescale as rescale_mod
    real = rescale_mod._rows

    def rows_then_concurrent_write(t, splits):
        out = real(t, splits)
        if not getattr(rows_then_concurrent_write, "done", False):
            rows_then_concurrent_write.done = True
            t.write(rows("c", [1]))  # another partition: no conflict
            t.compact(full=True, partitions={"dt": "a"})  # a concurrent change of a
        return out
    monkeypatch.setattr(rescale_mod, "_rows", rows_then_concurrent_write)
    sid_before = None
    with pytest.raises(CommitConflict):
        sid_before = table.rescale(partitions={"dt": "a"})
    assert sid_before is None and counts(table)["a"] == {2}


def test_rescale_postpone_table(catalog):
    t = catalog.create_table("db.pp", SCHEMA, ["dt", "k"], ["dt"],
                             {"bucket": "-2", "postpone.default-bucket-num": "1"})
    t.write(pa.concat_tables([rows("a", range(10)), rows("b", range(10))]))  # batch: real buckets, 1 each
    with pytest.raises(InvalidInput, match="you must provide the resulting bucket number"):
        t.rescale()
    t.rescale(3, partitions={"dt": "a"})
    assert counts(t) == {"a": {3}, "b": {1}} and len(content(t)) == 20
    t.write(rows("a", [50]))  # the postpone writer keeps the partition's new count
    assert counts(t)["a"] == {3}
    t.alter().set_option("postpone.batch-write-fixed-bucket", "false").commit()
    t.write(rows("b", [50]))  # postponed: b holds real and postponed files
    with pytest.raises(InvalidInput, match="postponed files"):
        t.rescale(2, partitions={"dt": "b"})
    t.write(rows("c", [1]))  # c holds postponed files only: nothing to rescale (Paimon reads real buckets only)
    assert t.rescale(2, partitions={"dt": "c"}) is None


def test_rescale_postpone_table_writes_the_requested_count_whatever_the_defaults(catalog):
    """The rescale writer of a postpone table is handed the planned partitions' count (``decided``): every file of
    a rescaled partition records bucket_num and holds only buckets below it, with no postpone.default-bucket-num
    and whatever count the partition had; partitions outside the plan keep theirs."""
    from engine.maintenance.rescale import plan_rescale, rescale_writer
    t = catalog.create_table("db.pp", SCHEMA, ["dt", "k"], ["dt"], {"bucket": "-2"})
    t.write(pa.concat_tables([rows("a", range(40)), rows("b", range(10))]))  # counts decided by size: 1 each
    before_b = sorted(e.file.file_name for e in t.manifests.live_entries(t.snapshot()) if e.bucket >= 0
                      and t.scan().partition_values(e.partition)[0] == "b")
    plan = plan_rescale(t, 5, {"dt": "a"})
    with rescale_writer(t, plan, commit_user="u") as w:  # a partition outside the plan has no count: refused
        with pytest.raises(InvalidInput, match="no bucket count was decided"):
            w.write(rows("b", [1]))
    assert t.rescale(5, partitions={"dt": "a"}) == t.latest_snapshot_id()
    live = t.manifests.live_entries(t.snapshot())
    a_entries = [e for e in live if t.scan().partition_values(e.partition)[0] == "a"]
    assert {e.total_buckets for e in a_entries} == {5} and {e.bucket for e in a_entries} <= set(range(5))
    assert len({e.bucket for e in a_entries}) > 1  # 40 keys over 5 buckets
    assert sorted(e.file.file_name for e in live if t.scan().partition_values(e.partition)[0] == "b") == before_b
    assert content(t) == sorted([("a", k, f"v{k}") for k in range(40)] + [("b", k, f"v{k}") for k in range(10)])


def test_primary_key_row_level_dml_on_an_old_layout_partition(table):
    """DELETE / UPDATE of a primary-key table write -D / +U records through the writer, so an old-layout partition
    refuses them as Paimon's writer does; a partition-only DELETE (a truncate) needs no writer."""
    sid = table.latest_snapshot_id()
    with pytest.raises(InvalidInput, match=MISMATCH):
        table.delete_where([("dt", "=", "a"), ("k", "=", 3)])
    with pytest.raises(InvalidInput, match=MISMATCH):
        table.update_where({"v": "z"}, [("dt", "=", "a"), ("k", "=", 3)])
    assert table.latest_snapshot_id() == sid
    table.delete_where([("dt", "=", "a")])
    assert counts(table) == {"b": {2}}
    table.rescale()
    table.delete_where([("dt", "=", "b"), ("k", "=", 3)])
    assert counts(table) == {"b": {4}} and len(content(table)) == 19


def test_rescale_of_a_lookup_changelog_table_emits_no_changelog(catalog):
    """A rescale only moves rows: a streaming reader must see no change. Paimon's overwrite commits the writer's
    compaction without its changelog (FileStoreCommitImpl.overwritePartition: "Overwrite mode currently does not
    commit any changelog"), so the deletion-vector table's compaction after the OVERWRITE emits none either."""
    t = catalog.create_table("db.lk", SCHEMA, ["dt", "k"], ["dt"],
                             {"bucket": "2", "deletion-vectors.enabled": "true", "changelog-producer": "lookup"})
    t.write(rows("a", range(5)))
    t.compact(full=True)
    sid = t.latest_snapshot_id()
    t.alter().set_option("bucket", "4").commit()
    t.rescale()
    assert [s.commit_kind for s in t.snapshots()[-2:]] == ["OVERWRITE", "COMPACT"]
    assert t.read_changes(sid).num_rows == 0
    assert len(content(t)) == 5 and counts(t) == {"a": {4}}
    t.write(rows("a", [1], "new"))  # later changes still produce changelog
    assert t.read_changes(t.latest_snapshot_id() - 2).column("_row_kind").to_pylist() == ["-U", "+U"]


def test_rescale_of_a_postpone_lookup_changelog_table_emits_no_changelog(catalog):
    t = catalog.create_table("db.pl", SCHEMA, ["dt", "k"], ["dt"],
                             {"bucket": "-2", "postpone.default-bucket-num": "1", "deletion-vectors.enabled": "true",
                              "changelog-producer": "lookup"})
    t.write(rows("a", range(5)))
    t.compact(full=True)
    sid = t.latest_snapshot_id()
    t.rescale(3)
    assert [s.commit_kind for s in t.snapshots()[-2:]] == ["OVERWRITE", "COMPACT"]
    assert t.read_changes(sid).num_rows == 0
    assert len(content(t)) == 5 and counts(t) == {"a": {3}}


@pytest.mark.parametrize("pk", [["dt", "k"], None], ids=["primary-key", "append"])
def test_messages_of_an_overwrite_writer_cannot_be_committed_as_an_append(catalog, warehouse, pk):
    """An overwrite writer ignores the partitions' files (it restores no sequence numbers): published by a plain
    commit its records would number below the rows they update, which would win (a lost update). Refused as for
    the dynamic-bucket overwrite writer; its files are deleted, the table unchanged."""
    options = {"bucket": "2"} if pk else {"bucket": "2", "bucket-key": "k"}
    t = catalog.create_table("db.o", SCHEMA, pk, ["dt"], options)
    t.write(rows("a", range(5)))
    t.write(rows("a", range(5), "w"))
    before, sid = list_files(warehouse), t.latest_snapshot_id()
    with t.new_write(overwrite=True) as w:
        w.write(rows("a", [1], "new"))
        msgs = w.prepare_commit()
    with pytest.raises(InvalidInput, match="can only be committed with commit_overwrite"):
        t.commit(msgs)
    assert list_files(warehouse) == before and t.latest_snapshot_id() == sid
    with t.new_write(overwrite=True) as w:
        w.write(rows("a", [1], "new"))
        msgs = w.prepare_commit()
    t.commit_overwrite(msgs, [("a",)])
    assert content(t) == [("a", 1, "new1")]


def test_rescale_reads_one_old_bucket_at_a_time(table, monkeypatch):
    """A partition is never held whole: each read hands the writer one old bucket's rows (the writer spills runs
    past write-buffer-size), and the result is the whole partition at the new count."""
    import engine.maintenance.rescale as rescale_module
    seen = []
    real = rescale_module._rows

    def one_bucket(t, splits):
        seen.append(sorted((sp.partition, sp.bucket) for sp in splits))
        return real(t, splits)

    monkeypatch.setattr(rescale_module, "_rows", one_bucket)
    before = content(table)
    table.rescale(partitions={"dt": "a"})
    assert seen and all(len(s) == 1 for s in seen) and len(seen) == 2  # partition a's two old buckets
    assert counts(table) == {"a": {4}, "b": {2}} and content(table) == before


def test_rescale_of_an_input_changelog_table_leaves_no_changelog_files(catalog):
    """An overwrite commits no changelog (Paimon's FileStoreCommitImpl warns "Overwrite mode currently does not
    commit any changelog"): the changelog files an overwrite writer wrote (changelog-producer=input) are deleted
    with it, not left unreferenced on disk."""
    from engine.check import check_table
    t = catalog.create_table("db.t", SCHEMA, ["dt", "k"], ["dt"], {"bucket": "2", "changelog-producer": "input"})
    t.write(pa.concat_tables([rows("a", range(20)), rows("b", range(5))]))
    before, sid = content(t), t.latest_snapshot_id()
    assert t.rescale(3) == sid + 1
    assert content(t) == before and counts(t) == {"a": {3}, "b": {3}}
    assert t.read_changes(sid).num_rows == 0
    report = check_table(t)
    assert report.ok and report.orphan_files == []


def test_rescale_fails_on_a_concurrent_deletion_vector_delete(catalog):
    """A DELETE of a deletion-vector append table changes only the buckets' vectors (an OVERWRITE snapshot without
    data-file entries). Committed while a rescale ran, it must fail the rescale as Paimon's StrictModeChecker does
    (hasOverlappedIndexPartition), or the overwrite would bring the deleted rows back."""
    import uuid

    from engine.check import check_table
    from engine.maintenance.rescale import commit_rescale, plan_rescale
    t = catalog.create_table("db.log", SCHEMA, [], ["dt"], {"bucket": "2", "bucket-key": "k",
                                                            "deletion-vectors.enabled": "true"})
    t.write(pa.concat_tables([rows("a", range(20)), rows("b", range(5))]))
    plan = plan_rescale(t, 3, {"dt": "a"})
    user = str(uuid.uuid4())
    messages = _rescaled_messages(t, plan, user)
    t.delete_where([("dt", "=", "a"), ("k", "=", 5)])  # lands while the rescale runs: vectors only
    sid = t.latest_snapshot_id()
    with pytest.raises(CommitConflict, match="deletion vectors"):
        commit_rescale(t, plan, messages, commit_user=user)
    assert t.latest_snapshot_id() == sid and ("a", 5, "v5") not in content(t) and len(content(t)) == 24
    report = check_table(t)
    assert report.ok and report.orphan_files == []
    t.delete_where([("dt", "=", "b"), ("k", "=", 1)])  # vectors of another partition: no conflict
    plan = plan_rescale(t, 3, {"dt": "a"})
    messages = _rescaled_messages(t, plan, user)
    t.delete_where([("dt", "=", "b"), ("k", "=", 2)])
    assert commit_rescale(t, plan, messages, commit_user=user) == t.latest_snapshot_id()
    assert content(t) == sorted([("a", k, f"v{k}") for k in range(20) if k != 5]
                                + [("b", k, f"v{k}") for k in (0, 3, 4)])


def test_rescale_commits_after_its_planned_snapshot_expired(catalog):
    """The strict-mode check needs no expired snapshot when the later ones changed other partitions only (the
    planned snapshot itself may expire while the rescale runs)."""
    import uuid

    from engine.maintenance.rescale import commit_rescale, plan_rescale
    t = catalog.create_table("db.t", SCHEMA, ["dt", "k"], ["dt"], {"bucket": "2", "snapshot.num-retained.min": "1",
                                                                  "snapshot.num-retained.max": "1"})
    t.write(pa.concat_tables([rows("a", range(20)), rows("b", range(5))]))
    plan = plan_rescale(t, 3, {"dt": "a"})
    user = str(uuid.uuid4())
    messages = _rescaled_messages(t, plan, user)
    t.write(rows("b", [7]))
    assert not t.snapshot_manager.exists(plan.snapshot_id)
    assert commit_rescale(t, plan, messages, commit_user=user) == t.latest_snapshot_id()
    assert counts(t) == {"a": {3}, "b": {2}} and len(content(t)) == 26
