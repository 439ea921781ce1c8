"""Storage failures: a typed error, the previous snapshot intact, never mistaken for a lost race."""
from __future__ import annotations

import errno
import os

import pyarrow as pa
import pytest

from engine import Catalog
from engine.crash_points import run_crashing
from engine.errors import CommitOutcomeUnknown, CommitRetriesExhausted, StorageError
from engine.io.faulty import Fault, FaultyFileIO
from tests.reliability import scenarios as sc

DATA = "*.parquet"
MANIFEST = "*/manifest/manifest-[0-9a-f]*"
MANIFEST_LIST = "*/manifest/manifest-list-*"
SNAPSHOT = "*/snapshot/snapshot-*"


@pytest.fixture
def setup(tmp_path):
    warehouse = str(tmp_path / "wh")
    sc.create_table(warehouse, 2).write(sc._rows([("a", 1), ("b", 2)], ["one", "two"]))
    io = FaultyFileIO()
    return Catalog(warehouse, file_io=io).get_table(sc.IDENT), io


def _messages(t):
    with t.new_write(commit_user="u", commit_identifier=5) as w:
        w.write(sc._rows([("a", 1), ("a", 3)], ["new", "three"]))
        return w.prepare_commit()


BEFORE = {("a", 1): "one", ("b", 2): "two"}
AFTER = {("a", 1): "new", ("b", 2): "two", ("a", 3): "three"}


@pytest.mark.parametrize("kind", ["eio", "enospc"])
def test_error_during_flush(setup, kind):
    t, io = setup
    io.add(Fault("write_bytes", DATA, kind=kind))
    with pytest.raises(StorageError) as err:
        t.write(sc._rows([("a", 1)], ["new"]))
    assert err.value.errno == (errno.EIO if kind == "eio" else errno.ENOSPC)
    assert ".parquet" in str(err.value)
    assert sc.read_state(t) == BEFORE and t.latest_snapshot_id() == 1
    report = t.check()
    assert report.ok and report.orphan_files == []  # the aborted writer removed what it wrote


@pytest.mark.parametrize("op,pattern", [("write_bytes", MANIFEST), ("write_bytes", MANIFEST_LIST),
                                        ("write_if_absent", SNAPSHOT)])
def test_error_during_commit_then_retry_applies_once(setup, op, pattern):
    t, io = setup
    messages = _messages(t)
    io.add(Fault(op, pattern, kind="eio"))
    with pytest.raises(StorageError) as err:
        t.commit(messages)
    assert not isinstance(err.value, CommitRetriesExhausted)
    assert sum(1 for o, p in io.calls if o == "write_if_absent" and "/snapshot/" in p) <= 1, \
        "an I/O error must not be retried as if the race for the snapshot id had been lost"
    assert sc.read_state(t) == BEFORE and t.latest_snapshot_id() == 1
    assert t.check().ok
    sid = t.commit(messages)  # the storage recovered: the same messages land once
    assert sid == 2 and t.commit(messages) == 2
    assert sc.read_state(t) == AFTER
    report = t.check()
    assert report.ok and not [p for p in report.orphan_files if p.endswith(".parquet")]


def test_publish_succeeded_but_reported_failure(setup):
    t, io = setup
    io.add(Fault("write_if_absent", SNAPSHOT, kind="lost-ack"))
    assert t.commit(_messages(t)) == 2  # read back: it landed
    assert [s.id for s in t.snapshots()] == [1, 2] and sc.read_state(t) == AFTER


def test_publish_outcome_unknown_when_it_cannot_be_read_back(setup):
    t, io = setup
    io.add(Fault("write_if_absent", SNAPSHOT, kind="lost-ack"))
    io.add(Fault("read_bytes", "*/snapshot/snapshot-2", kind="eio"))
    messages = _messages(t)
    with pytest.raises(CommitOutcomeUnknown, match="snapshot 2"):
        t.commit(messages)
    io.clear()
    assert t.commit(messages) == 2  # checking again finds it: applied once
    assert [s.id for s in t.snapshots()] == [1, 2]
    assert sc.read_state(t) == AFTER and t.check().ok  # nothing the landed snapshot references was deleted


def test_overwrite_outcome_unknown_keeps_what_the_snapshot_references(setup):
    t, io = setup
    io.add(Fault("write_if_absent", SNAPSHOT, kind="lost-ack"))
    io.add(Fault("read_bytes", "*/snapshot/snapshot-2", kind="eio"))
    messages = _messages(t)
    with pytest.raises(CommitOutcomeUnknown, match="snapshot 2"):
        t.commit_overwrite(messages)
    io.clear()
    assert t.commit_overwrite(messages) == 2
    assert sc.read_state(t) == {("a", 1): "new", ("a", 3): "three"} and t.check().ok


def test_torn_data_file_write(setup):
    t, io = setup
    io.add(Fault("write_bytes", DATA, kind="torn"))
    with pytest.raises(StorageError, match="torn"):
        t.write(sc._rows([("a", 1)], ["new"]))
    report = t.check()
    assert report.ok and sc.read_state(t) == BEFORE
    assert all(p.endswith(".parquet") for p in report.orphan_files)  # the half file is not referenced


def test_torn_latest_hint_is_harmless(setup):
    t, io = setup
    io.add(Fault("overwrite", "*/LATEST", kind="torn"))
    assert t.commit(_messages(t)) == 2  # a failed hint write does not fail the commit
    fresh = Catalog(os.path.dirname(os.path.dirname(t.root))).get_table(sc.IDENT)
    assert fresh.latest_snapshot_id() == 2 and sc.read_state(fresh) == AFTER


def test_read_errors_are_typed(setup):
    t, io = setup
    io.add(Fault("read_bytes", DATA, kind="eio"))
    with pytest.raises(StorageError):
        t.read()
    assert sc.read_state(t) == BEFORE  # the fault fired once


def test_slow_storage_still_commits(setup):
    t, io = setup
    io.add(Fault("write_if_absent", SNAPSHOT, kind="delay", delay=0.05))
    assert t.commit(_messages(t)) == 2


def _write_under_fsize_limit(warehouse: str, limit: int) -> str:
    import resource
    import signal

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # get EFBIG from write() instead of being killed
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    t = Catalog(warehouse).get_table(sc.IDENT)
    n = 200_000
    try:
        t.write(pa.table({"p": ["a"] * n, "id": list(range(10, n + 10)), "v": [os.urandom(16).hex() for _ in range(n)]}))  # incompressible
    except StorageError as e:
        return f"StorageError errno={e.errno}"
    return "no error"


def test_disk_full_for_real_rlimit_fsize(tmp_path):
    warehouse = str(tmp_path / "wh")
    sc.create_table(warehouse, 1).write(sc._rows([("a", 1), ("b", 2)], ["one", "two"]))
    run = run_crashing(None, _write_under_fsize_limit, warehouse, 256 * 1024)
    assert run.result == f"StorageError errno={errno.EFBIG}", run
    t = Catalog(warehouse).get_table(sc.IDENT)
    assert sc.read_state(t) == BEFORE and t.latest_snapshot_id() == 1
    report = t.check()
    assert report.ok and report.orphan_files == []  # the partial file was removed


@pytest.mark.parametrize("name,op,pattern,kind", sc.STORAGE_FAULTS, ids=[f[0] for f in sc.STORAGE_FAULTS])
def test_storage_fault_matrix(tmp_path, name, op, pattern, kind):
    assert sc.storage_case(str(tmp_path), op, pattern, kind) == []
