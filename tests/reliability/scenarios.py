"""Reliability scenarios shared by the tests (tests/reliability/) and ``python -m benchmarks reliability``.

Each scenario builds a table in a scratch directory, runs work in child processes (crash points armed, several
writers racing, resource limits), re-opens the table and compares it with a plain dict model. Scenarios return
outcome records listing every failed expectation, so tests assert ``failures == []`` and the benchmark counts them.
Child entry points are module-level functions (children are forked from a forkserver and import them by name).
"""
from __future__ import annotations

import os
import pickle
from dataclasses import dataclass, field

import pyarrow as pa

from engine.catalog import Catalog
from engine.crash_points import ENV, reopen_and_check, run_crashing

SCHEMA = pa.schema([("p", pa.string()), ("id", pa.int64()), ("v", pa.string())])
KEY_SCHEMA = pa.schema([SCHEMA.field("p"), SCHEMA.field("id")])
IDENT = "db.t"
USER = "crash-test"

WRITE_AND_COMMIT_POINTS = ["write.before-data-file", "write.after-data-file", "commit.before-manifest",
                           "commit.after-manifest", "commit.before-publish", "commit.after-publish",
                           "commit.after-hint"]


def create_table(warehouse: str, buckets: int, **options):
    cat = Catalog(warehouse)
    cat.create_database("db", ignore_if_exists=True)
    opts = {"bucket": str(buckets), "commit.min-retry-wait": "1 ms", "commit.max-retries": "500"}
    opts.update({k: str(v) for k, v in options.items()})
    return cat.create_table(IDENT, SCHEMA, primary_key=["p", "id"], partition_keys=["p"], options=opts)


def read_state(table, snapshot_id=None) -> dict:
    t = table.read(snapshot_id=snapshot_id)
    return {(r["p"], r["id"]): r["v"] for r in t.to_pylist()}


def _rows(keys, values) -> pa.Table:
    return pa.table({"p": [k[0] for k in keys], "id": [k[1] for k in keys], "v": values}, schema=SCHEMA)


def _keys(keys) -> pa.Table:
    return pa.table({"p": [k[0] for k in keys], "id": [k[1] for k in keys]}, schema=KEY_SCHEMA)


# --- crash matrix ---------------------------------------------------------------------------------------------
def batches(i: int):
    """Commit i: two upsert batches (flushed separately, so each bucket gets two files) and a delete batch."""
    ids = list(range(i * 10, i * 10 + 16))
    keys = [("a" if x % 2 else "b", x) for x in ids]
    half = len(keys) // 2
    up1 = (keys[:half], [f"c{i}-{x}" for _, x in keys[:half]])
    up2 = (keys[half:], [f"c{i}-{x}" for _, x in keys[half:]])
    dels = [("a" if x % 2 else "b", x) for x in range(i * 10 - 10, i * 10 - 6)] if i > 1 else []
    return up1, up2, dels


def model_after(k: int) -> dict:
    state: dict = {}
    for i in range(1, k + 1):
        up1, up2, dels = batches(i)
        for keys, values in (up1, up2):
            state.update(zip(keys, values))
        for key in dels:
            state.pop(key, None)
    return state


def _atomic_write(path: str, data: bytes) -> None:
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def crash_workload(warehouse: str, state_dir: str, commits: int) -> list[int]:
    """Commits 1..``commits`` (user USER, identifier i), resuming where a crashed run stopped: a commit whose
    messages were saved is re-committed from them (exactly once), otherwise written again."""
    t = Catalog(warehouse).get_table(IDENT)
    sids = []
    for i in range(1, commits + 1):
        acked = os.path.join(state_dir, f"acked-{i}")
        if os.path.exists(acked):
            continue
        pending = os.path.join(state_dir, f"pending-{i}.pkl")
        if os.path.exists(pending):
            with open(pending, "rb") as f:
                messages = pickle.load(f)
        else:
            up1, up2, dels = batches(i)
            with t.new_write(commit_user=USER, commit_identifier=i) as w:
                w.write(_rows(*up1))
                w.flush()
                w.write(_rows(*up2))
                if dels:
                    w.delete(_keys(dels))
                messages = w.prepare_commit()
            _atomic_write(pending, pickle.dumps(messages))
        sid = t.commit(messages)
        _atomic_write(acked, str(sid).encode())
        sids.append(sid)
    return sids


@dataclass
class CrashOutcome:
    point: str
    occurrence: int
    buckets: int
    crashed: bool = False
    failures: list[str] = field(default_factory=list)
    leftover_files: int = 0      # unreferenced files the crash left behind
    leftover_bytes: int = 0
    orphan_bytes_after_cleanup: int = 0

    @property
    def survived(self) -> bool:
        return not self.failures


def _acked(state_dir: str) -> dict[int, int]:
    out = {}
    for name in os.listdir(state_dir):
        if name.startswith("acked-") and not name.endswith(".tmp"):
            with open(os.path.join(state_dir, name)) as f:
                out[int(name[len("acked-"):])] = int(f.read())
    return out


def _identifier_snapshots(table, identifier: int) -> list[int]:
    """Data snapshots (not the COMPACT snapshots a writer's compaction adds with the same identifier) of a commit."""
    return [s.id for s in table.snapshots()
            if s.commit_user == USER and s.commit_identifier == identifier and s.commit_kind != "COMPACT"]


def crash_case(workdir: str, point: str, occurrence: int, buckets: int, commits: int = 3) -> CrashOutcome:
    """Crash a run of ``commits`` commits at ``point`` (its ``occurrence``-th arrival), then check: the table
    reads as the model before or after the interrupted commit, check() is clean, every acknowledged commit is
    there, leftovers are unreferenced; re-running applies the interrupted commit exactly once; deleting every
    unreferenced file afterwards changes nothing."""
    out = CrashOutcome(point, occurrence, buckets)
    warehouse, state_dir = os.path.join(workdir, "wh"), os.path.join(workdir, "state")
    os.makedirs(state_dir, exist_ok=True)
    create_table(warehouse, buckets)
    run = run_crashing(point, crash_workload, warehouse, state_dir, commits, occurrence=occurrence)
    out.crashed = run.crashed
    if run.error:
        out.failures.append(f"child raised {run.error}")
    f = out.failures
    table, report = reopen_and_check(warehouse, IDENT)
    f += [f"after crash: {p}" for p in report.problems]
    acked = _acked(state_dir)
    for i, sid in acked.items():
        ids = _identifier_snapshots(table, i)  # commit() returns the COMPACT snapshot when the writer compacted
        if len(ids) != 1 or not ids[0] <= sid:
            f.append(f"acknowledged commit {i} (snapshot {sid}) lost or duplicated")
    k = max(acked, default=0) + 1  # the commit in flight when the process died
    landed = bool(_identifier_snapshots(table, k)) if k <= commits else False
    expected = model_after(k if landed else k - 1) if k <= commits else model_after(commits)
    if read_state(table) != expected:
        f.append(f"after crash: table is neither the state before nor after commit {k}")
    snapshot_names = [p for p in report.orphan_files if os.path.basename(p).startswith("snapshot-")]
    if snapshot_names:
        f.append(f"unreferenced snapshot files: {snapshot_names}")
    if set(report.orphan_files) & report.referenced_files:
        f.append("a leftover file is referenced")
    out.leftover_files, out.leftover_bytes = len(report.orphan_files), report.orphan_bytes

    os.environ.pop(ENV, None)
    crash_workload(warehouse, state_dir, commits)  # recover: re-run (resumes at the interrupted commit)
    table, report = reopen_and_check(warehouse, IDENT)
    f += [f"after recovery: {p}" for p in report.problems]
    for i in range(1, commits + 1):
        n = len(_identifier_snapshots(table, i))
        if n != 1:
            f.append(f"commit {i} applied {n} times")
    if read_state(table) != model_after(commits):
        f.append("after recovery: table differs from the model")
    for p in report.orphan_files:  # what orphan cleanup would delete: the table must not need any of it
        table.file_io.delete(p)
    table, report = reopen_and_check(warehouse, IDENT)
    f += [f"after removing unreferenced files: {p}" for p in report.problems]
    if read_state(table) != model_after(commits):
        f.append("after removing unreferenced files: table differs from the model")
    out.orphan_bytes_after_cleanup = report.orphan_bytes
    return out


# --- crash while re-sequencing onto a concurrent commit of the same bucket ----------------------------------
def rebase_crash_workload(warehouse: str, state_dir: str) -> int:
    t = Catalog(warehouse).get_table(IDENT)
    writers = []
    for n in (1, 2):
        w = t.new_write(commit_user=f"racer-{n}", commit_identifier=1)
        w.write(_rows([("a", 1), ("a", 100 + n)], [f"racer-{n}", f"racer-{n}"]))
        writers.append(w.prepare_commit())
    with open(os.path.join(state_dir, "racer-2.pkl"), "wb") as f:
        pickle.dump(writers[1], f)
    t.commit(writers[0])
    return t.commit(writers[1])  # same bucket, same base: re-sequenced (crash point commit.after-rebase)


def rebase_crash_case(workdir: str) -> CrashOutcome:
    out = CrashOutcome("commit.after-rebase", 1, 1)
    warehouse, state_dir = os.path.join(workdir, "wh"), os.path.join(workdir, "state")
    os.makedirs(state_dir, exist_ok=True)
    create_table(warehouse, 1).write(_rows([("a", 1)], ["base"]))
    run = run_crashing("commit.after-rebase", rebase_crash_workload, warehouse, state_dir)
    out.crashed = run.crashed
    f = out.failures
    table, report = reopen_and_check(warehouse, IDENT)
    f += [str(p) for p in report.problems]
    if read_state(table) != {("a", 1): "racer-1", ("a", 101): "racer-1"}:
        f.append(f"after crash: unexpected state {read_state(table)}")
    out.leftover_files, out.leftover_bytes = len(report.orphan_files), report.orphan_bytes
    with open(os.path.join(state_dir, "racer-2.pkl"), "rb") as fh:
        messages = pickle.load(fh)
    sid = table.commit(messages)
    if table.commit(messages) != sid:
        f.append("re-commit applied twice")
    want = {("a", 1): "racer-2", ("a", 101): "racer-1", ("a", 102): "racer-2"}
    if read_state(table) != want:
        f.append(f"after recovery: {read_state(table)} != {want} (the later commit must win)")
    table, report = reopen_and_check(warehouse, IDENT)
    f += [str(p) for p in report.problems]
    return out


# --- concurrent writers --------------------------------------------------------------------------------------
def keys_for_bucket(bucket: int, buckets: int, count: int, start: int = 0) -> list[int]:
    """``count`` ids whose bucket (of ``buckets``) is ``bucket``."""
    from kernels.hashing import bucket_ids

    out, lo = [], start
    while len(out) < count:
        cand = list(range(lo, lo + 4096))
        ids = bucket_ids([pa.array(cand, pa.int64())], buckets)
        out += [c for c, b in zip(cand, ids) if int(b) == bucket]
        lo += 4096
    return out[:count]


HOT = ("a", -1)


def writer_worker(warehouse: str, worker: int, commits: int, ids: list[int], hot: bool) -> list[tuple]:
    """``commits`` commits, each upserting one key of its own (and the shared HOT key if ``hot``)."""
    t = Catalog(warehouse).get_table(IDENT)
    acked = []
    for i in range(commits):
        value = f"w{worker}-{i}"
        keys, values = [("a", ids[i])], [value]
        if hot:
            keys.append(HOT)
            values.append(value)
        with t.new_write(commit_user=f"w{worker}", commit_identifier=i + 1) as w:
            w.write(_rows(keys, values))
            messages = w.prepare_commit()
        sid = t.commit(messages)
        acked.append((ids[i], sid, value))
    return acked


@dataclass
class ConcurrencyOutcome:
    mode: str
    workers: int
    commits: int
    acknowledged: int = 0
    lost: int = 0
    duplicates: int = 0
    failures: list[str] = field(default_factory=list)


def concurrency_case(workdir: str, workers: int, commits: int, same_bucket: bool) -> ConcurrencyOutcome:
    """N processes x C commits. Same bucket: all write bucket 0 of a 1-bucket table and also the shared HOT key,
    whose value at every snapshot must be the one written by that snapshot's commit (the later commit wins).
    Different buckets: worker w writes only keys of bucket w."""
    from engine.crash_points import _context

    mode = "same-bucket" if same_bucket else "different-buckets"
    out = ConcurrencyOutcome(mode, workers, commits)
    warehouse = os.path.join(workdir, "wh")
    buckets = 1 if same_bucket else workers
    create_table(warehouse, buckets)
    jobs = [(warehouse, w, commits, keys_for_bucket(0 if same_bucket else w, buckets, commits, 10_000 * w),
             same_bucket) for w in range(workers)]
    with _context().Pool(workers) as pool:
        results = pool.starmap(writer_worker, jobs)
    acked = [a for r in results for a in r]
    out.acknowledged = len(acked)
    table, report = reopen_and_check(warehouse, IDENT)
    out.failures += [str(p) for p in report.problems]
    all_snaps = table.snapshots()
    snaps = [s for s in all_snaps if s.commit_kind != "COMPACT"]  # writers' compactions add COMPACT snapshots
    seen: dict[tuple, int] = {}
    for s in snaps:
        seen[(s.commit_user, s.commit_identifier)] = seen.get((s.commit_user, s.commit_identifier), 0) + 1
    out.duplicates = sum(n - 1 for n in seen.values()) + len(acked) - len({sid for _, sid, _ in acked})
    final = read_state(table)
    for key, sid, value in acked:
        if final.get(("a", key)) != value or read_state(table, sid).get(("a", key)) != value:
            out.lost += 1
    if same_bucket:
        expected_hot = None
        for s in all_snaps:  # a COMPACT snapshot keeps the value of the data snapshot before it
            if s.commit_kind != "COMPACT":
                expected_hot = f"{s.commit_user}-{s.commit_identifier - 1}"
            hot = read_state(table, s.id).get(HOT)
            if hot != expected_hot:
                out.failures.append(f"snapshot {s.id}: hot key holds {hot!r}, its commit wrote {expected_hot!r}")
    if len(snaps) != len(acked):
        out.failures.append(f"{len(snaps)} snapshots for {len(acked)} acknowledged commits")
    if out.lost or out.duplicates:
        out.failures.append(f"{out.lost} acknowledged commit(s) lost, {out.duplicates} duplicate(s)")
    return out


def create_worker(warehouse: str, worker: int) -> str:
    from engine.errors import TableAlreadyExists

    cat = Catalog(warehouse)
    cat.create_database("db", ignore_if_exists=True)
    schema = pa.schema([("p", pa.string()), ("id", pa.int64()), (f"v{worker}", pa.string())])
    try:
        cat.create_table(IDENT, schema, primary_key=["p", "id"], partition_keys=["p"], options={"bucket": "1"})
        return f"created v{worker}"
    except TableAlreadyExists:
        return "exists"


# --- corruption ----------------------------------------------------------------------------------------------
CORRUPTION_TARGETS = ["data-file", "manifest", "manifest-list", "snapshot", "latest-hint"]
DAMAGES = ["truncate", "garbage", "bit-flip", "missing"]


def corruption_table(warehouse: str):
    t = create_table(warehouse, 2)
    t.write(_rows([("a", i) for i in range(40)], [f"v{i}" for i in range(40)]))
    t.write(_rows([("a", i) for i in range(20, 60)], [f"w{i}" for i in range(20, 60)]))
    return t


def corruption_target(table, target: str) -> str:
    snap = table.snapshot()
    if target == "data-file":
        split = table.plan()[0]
        return os.path.join(split.bucket_dir, sorted(split.files, key=lambda f: -f.max_sequence_number)[0].file_name)
    if target == "manifest":
        return table.paths.manifest(table.manifests.manifest_list(snap.delta_manifest_list)[0].file_name)
    if target == "manifest-list":
        return table.paths.manifest(snap.base_manifest_list)
    if target == "snapshot":
        return table.paths.snapshot(snap.id)
    if target == "latest-hint":
        return os.path.join(table.paths.snapshot_dir, "LATEST")
    raise ValueError(target)


def damage_file(path: str, damage: str, rng) -> None:
    """Damage ``path`` in place: truncate to a random length, replace by random bytes, flip one random bit,
    or delete it."""
    size = os.path.getsize(path)
    if damage == "missing":
        os.unlink(path)
        return
    with open(path, "r+b") as f:
        if damage == "truncate":
            f.truncate(rng.randrange(0, max(1, size)))
        elif damage == "garbage":
            f.write(bytes(rng.randrange(256) for _ in range(size)))
        elif damage == "bit-flip":
            pos = rng.randrange(size)
            f.seek(pos)
            b = f.read(1)[0]
            f.seek(pos)
            f.write(bytes([b ^ (1 << rng.randrange(8))]))
        else:
            raise ValueError(damage)


@dataclass
class CorruptionOutcome:
    target: str
    damage: str
    verdict: str          # detected | harmless | silently-wrong | untyped-error
    detail: str = ""
    check_flagged: bool = False


def corruption_case(workdir: str, target: str, damage: str, seed: int = 0) -> CorruptionOutcome:
    """Damage one file reachable from the latest snapshot, then read it from a fresh catalog. ``detected``: read
    raised a LakemergeError; ``harmless``: read returned exactly the right rows; otherwise a failure."""
    import random

    from engine.errors import LakemergeError

    warehouse = os.path.join(workdir, "wh")
    t = corruption_table(warehouse)
    expected = read_state(t)
    path = corruption_target(t, target)
    damage_file(path, damage, random.Random(seed))
    fresh = Catalog(warehouse).get_table(IDENT)
    try:
        got = read_state(fresh)
    except LakemergeError as e:
        verdict, detail = "detected", f"{type(e).__name__}: {e}"
    except Exception as e:  # noqa: BLE001 - an untyped error is a failure of its own
        verdict, detail = "untyped-error", repr(e)
    else:
        verdict, detail = ("harmless", "") if got == expected else ("silently-wrong", f"read {len(got)} rows")
    report = Catalog(warehouse).get_table(IDENT).check()
    if verdict == "silently-wrong" and target == "snapshot" and damage == "missing" \
            and "snapshot-missing" in report.kinds() and got == read_state(fresh, fresh.latest_snapshot_id()):
        # The newest snapshot file was deleted: readers see the previous snapshot (Paimon's rule: the listing
        # decides); check() reports the loss. Counted as detected by check(), not by the read.
        verdict, detail = "detected", "read fell back to the previous snapshot; check() reports snapshot-missing"
    return CorruptionOutcome(target, damage, verdict, detail, not report.ok)


# --- bad input -----------------------------------------------------------------------------------------------
BAD_SCHEMA = pa.schema([("p", pa.string()), ("id", pa.int64()), ("ts", pa.int64()),
                        pa.field("v", pa.string(), nullable=False)])


def _bad_rows(**cols):
    base = {"p": ["a"], "id": [1], "ts": [1], "v": ["x"]}
    base.update(cols)
    return base


def _write(data):
    return lambda t: t.write(data)


def _create(options=None, pk=("p", "id"), partition=("p",), schema=BAD_SCHEMA):
    def run(t):
        cat = Catalog(os.path.dirname(os.path.dirname(t.root)))
        cat.create_table("db.other", schema, primary_key=list(pk), partition_keys=list(partition),
                         options={"bucket": "2", **(options or {})})
    return run


def bad_input_cases():
    """(name, operation on a fresh table, expected error type). Every operation must raise that type and leave
    the warehouse byte-for-byte as it was."""
    from engine import errors as E

    return [
        ("missing column", _write({"p": ["a"], "id": [1], "ts": [1]}), E.SchemaMismatch),
        ("extra column", _write(_bad_rows(extra=[1])), E.SchemaMismatch),
        ("wrong type", _write(_bad_rows(id=["one"])), E.SchemaMismatch),
        ("lossy cast", _write(_bad_rows(id=[1.5])), E.SchemaMismatch),
        ("null in NOT NULL column", _write(_bad_rows(v=[None])), E.InvalidInput),
        ("null primary key", _write(_bad_rows(id=[None])), E.NullPrimaryKey),
        ("null partition key", _write(_bad_rows(p=[None])), E.NullPrimaryKey),
        ("delete without key column", lambda t: t.delete({"p": ["a"]}), E.SchemaMismatch),
        ("bad row kind", lambda t: t.write(_bad_rows(), row_kinds=["+X"]), E.InvalidRowKind),
        ("row kinds of wrong length", lambda t: t.write(_bad_rows(), row_kinds=["+I", "+I"]), E.InvalidRowKind),
        ("not a table", _write([1, 2, 3]), E.InvalidInput),
        ("bucket 0", _create({"bucket": "0"}), E.InvalidOption),
        ("sequence.field not a column", _create({"sequence.field": "nope"}), E.InvalidSchema),
        ("bucket-key outside the primary key", _create({"bucket-key": "v"}), E.InvalidSchema),
        ("rowkind.field not a string", _create({"rowkind.field": "id"}), E.InvalidSchema),
        ("bad sort order", _create({"sequence.field": "ts", "sequence.field.sort-order": "up"}), E.InvalidOption),
        ("primary key not a column", _create(pk=("p", "nope")), E.InvalidSchema),
        ("partition key outside the primary key", _create(partition=("v",)), E.InvalidSchema),
        ("postpone bucket mode", _create({"bucket": "-2"}), E.UnsupportedFeature),
    ]


def bad_input_table(warehouse: str, **options):
    cat = Catalog(warehouse)
    cat.create_database("db", ignore_if_exists=True)
    opts = {"bucket": "2", **{k: str(v) for k, v in options.items()}}
    return cat.create_table(IDENT, BAD_SCHEMA, primary_key=["p", "id"], partition_keys=["p"], options=opts)


def tree(root: str) -> dict[str, bytes]:
    out = {}
    for d, _, files in os.walk(root):
        for name in files:
            p = os.path.join(d, name)
            with open(p, "rb") as f:
                out[os.path.relpath(p, root)] = f.read()
    return out


def bad_input_case(workdir: str, name: str, op, expected) -> tuple[bool, bool, str]:
    """Returns (raised the expected type, created or changed files, error text)."""
    warehouse = os.path.join(workdir, "wh")
    t = bad_input_table(warehouse)
    t.write(_bad_rows())
    before = tree(warehouse)
    try:
        op(t)
    except expected as e:
        ok, text = True, str(e)
    except Exception as e:  # noqa: BLE001
        ok, text = False, repr(e)
    else:
        ok, text = False, "accepted"
    return ok, tree(warehouse) != before, text


# --- storage faults ------------------------------------------------------------------------------------------
STORAGE_FAULTS = [  # (name, FileIO op, path glob, kind)
    ("EIO writing a data file (flush)", "write_bytes", "*.parquet", "eio"),
    ("ENOSPC writing a data file (flush)", "write_bytes", "*.parquet", "enospc"),
    ("torn data file", "write_bytes", "*.parquet", "torn"),
    ("EIO writing the manifest", "write_bytes", "*/manifest/manifest-[0-9a-f]*", "eio"),
    ("EIO writing a manifest list", "write_bytes", "*/manifest/manifest-list-*", "eio"),
    ("EIO publishing the snapshot", "write_if_absent", "*/snapshot/snapshot-*", "eio"),
    ("torn snapshot publish", "write_if_absent", "*/snapshot/snapshot-*", "torn"),
    ("publish succeeded but reported EIO", "write_if_absent", "*/snapshot/snapshot-*", "lost-ack"),
    ("torn LATEST hint", "overwrite", "*/LATEST", "torn"),
]


def storage_case(workdir: str, op: str, pattern: str, kind: str) -> list[str]:
    """One injected fault during a commit. Expectations: either the commit succeeds (faults it can see through)
    or it raises a StorageError that is not a lost-race error, the previous snapshot is intact, and re-running
    the same commit afterwards applies it exactly once. check() is clean at the end."""
    from engine.errors import CommitRetriesExhausted, StorageError
    from engine.io.faulty import Fault, FaultyFileIO

    failures = []
    warehouse = os.path.join(workdir, "wh")
    create_table(warehouse, 2).write(_rows([("a", 1), ("b", 2)], ["one", "two"]))
    io = FaultyFileIO(faults=[Fault(op, pattern, kind=kind)])
    t = Catalog(warehouse, file_io=io).get_table(IDENT)
    before = read_state(t)
    after = {**before, ("a", 1): "new", ("a", 3): "three"}
    messages = None
    try:
        with t.new_write(commit_user="u", commit_identifier=1) as w:
            w.write(_rows([("a", 1), ("a", 3)], ["new", "three"]))
            messages = w.prepare_commit()
        t.commit(messages)
    except CommitRetriesExhausted:
        failures.append("an I/O error was treated as a lost race")
    except StorageError:
        publishes = sum(1 for o, p in io.calls if o == "write_if_absent" and "/snapshot/" in p)
        if publishes > 1:
            failures.append("the commit retried the publish after an I/O error")
        fresh = Catalog(warehouse).get_table(IDENT)
        if read_state(fresh) != before or fresh.latest_snapshot_id() != 1:
            failures.append("the previous snapshot is not intact")
    except Exception as e:  # noqa: BLE001
        failures.append(f"untyped error {e!r}")
    io.clear()
    if messages is not None:
        t.commit(messages)
        t.commit(messages)
    else:  # the write itself failed: write again
        t.write(_rows([("a", 1), ("a", 3)], ["new", "three"]))
    fresh = Catalog(warehouse).get_table(IDENT)
    if read_state(fresh) != after or len(fresh.snapshots()) != 2:
        failures.append(f"after retry: {len(fresh.snapshots())} snapshots, state {read_state(fresh)}")
    report = fresh.check()
    failures += [str(p) for p in report.problems]
    return failures
