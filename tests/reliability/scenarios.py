"""Reliability scenarios shared by the tests (tests/reliability/) and ``python -m benchmarks reliability``.

Each scenario builds a table in a scratch directory, runs work in child processes (crash points armed, several
writers racing, resource limits), re-opens the table and compares it with a plain dict model. Scenarios return
outcome records listing every failed expectation, so tests assert ``failures == []`` and the benchmark counts them.
Child entry points are module-level functions (children are forked from a forkserver and import them by name).
"""
from __future__ import annotations

import os
import time
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
# The crash matrix runs over merge engines: a table (p, id, v, n) whose commits upsert v for 16 keys, then n alone
# (v null) for half of them, then delete 4 keys of the previous commit. Each engine folds that differently.
ENGINE_SCHEMA = pa.schema([("p", pa.string()), ("id", pa.int64()), ("v", pa.string()), ("n", pa.int64())])
ENGINES = {
    "deduplicate": {},
    "partial-update": {"merge-engine": "partial-update", "partial-update.remove-record-on-delete": "true"},
    "aggregation": {"merge-engine": "aggregation", "fields.v.aggregate-function": "last_non_null_value",
                    "fields.n.aggregate-function": "sum", "aggregation.remove-record-on-delete": "true"},
}
# Deletion-vector tables fold like their engine. They are read with merge-on-read so that the state compared is what
# was committed: a crash between a commit's APPEND and COMPACT snapshots leaves level-0 data that Paimon's batch
# view of a DV table hides until the next compaction.
_DV = {"deletion-vectors.enabled": "true", "deletion-vectors.merge-on-read": "true"}
ENGINES.update({"dv-deduplicate": dict(_DV), "dv-aggregation": {**ENGINES["aggregation"], **_DV}})


def create_engine_table(warehouse: str, buckets: int, engine: str = "deduplicate", **options):
    cat = Catalog(warehouse)
    cat.create_database("db", ignore_if_exists=True)
    opts = {"bucket": str(buckets), "commit.min-retry-wait": "1 ms", "commit.max-retries": "500", **ENGINES[engine]}
    opts.update({k: str(v) for k, v in options.items()})
    return cat.create_table(IDENT, ENGINE_SCHEMA, primary_key=["p", "id"], partition_keys=["p"], options=opts)


def read_engine_state(table, snapshot_id=None, tag=None) -> dict:
    t = table.read(snapshot_id=snapshot_id, tag=tag) if tag else table.read(snapshot_id=snapshot_id)
    return {(r["p"], r["id"]): (r["v"], r["n"]) for r in t.to_pylist()}


def _engine_rows(keys, vs, ns) -> pa.Table:
    return pa.table({"p": [k[0] for k in keys], "id": [k[1] for k in keys], "v": vs, "n": ns},
                    schema=ENGINE_SCHEMA)


def batches(i: int):
    """Commit i: (keys, v values, n values) of two upsert batches (flushed separately, so each bucket gets two
    files), and the keys of a delete batch."""
    ids = list(range(i * 10, i * 10 + 16))
    keys = [("a" if x % 2 else "b", x) for x in ids]
    half = keys[len(keys) // 2:]
    up1 = (keys, [f"c{i}-{x}" for _, x in keys], [None] * len(keys))
    up2 = (half, [None] * len(half), [i * 1000 + x for _, x in half])
    dels = [("a" if x % 2 else "b", x) for x in range(i * 10 - 10, i * 10 - 6)] if i > 1 else []
    return up1, up2, dels


def _fold(engine: str, old, v, n):
    engine = engine.removeprefix("dv-")
    if engine == "deduplicate" or old is None:
        return (v, n)
    if engine == "partial-update":
        return (old[0] if v is None else v, old[1] if n is None else n)
    return (old[0] if v is None else v, old[1] if n is None else n if old[1] is None else old[1] + n)  # aggregation


def model_after(k: int, engine: str = "deduplicate") -> dict:
    """The table after commits 1..k, as the engine folds them."""
    state: dict = {}
    for i in range(1, k + 1):
        up1, up2, dels = batches(i)
        for keys, vs, ns in (up1, up2):
            for key, v, n in zip(keys, vs, ns):
                state[key] = _fold(engine, state.get(key), v, n)
        for key in dels:
            state.pop(key, None)
    return state


def write_commit(table, i: int, **write_args):
    """Write commit i's batches; returns the commit messages."""
    up1, up2, dels = batches(i)
    with table.new_write(**write_args) as w:
        w.write(_engine_rows(*up1))
        w.flush()
        w.write(_engine_rows(*up2))
        if dels:
            w.delete(_keys(dels))
        return w.prepare_commit()


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
            messages = write_commit(t, i, commit_user=USER, commit_identifier=i)
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
    engine: str = "deduplicate"
    operation: str = "commit"
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


def crash_case(workdir: str, point: str, occurrence: int, buckets: int, commits: int = 3,
               engine: str = "deduplicate") -> CrashOutcome:
    """Crash a run of ``commits`` commits at ``point`` (its ``occurrence``-th arrival), then check: the table
    reads as the model before or after the interrupted commit, check() is clean, every acknowledged commit is
    there, leftovers are unreferenced; re-running applies the interrupted commit exactly once; deleting every
    unreferenced file afterwards changes nothing."""
    out = CrashOutcome(point, occurrence, buckets, engine)
    warehouse, state_dir = os.path.join(workdir, "wh"), os.path.join(workdir, "state")
    os.makedirs(state_dir, exist_ok=True)
    create_engine_table(warehouse, buckets, engine)
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
    expected = model_after(k if landed else k - 1, engine) if k <= commits else model_after(commits, engine)
    if read_engine_state(table) != expected:
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
    if read_engine_state(table) != model_after(commits, engine):
        f.append("after recovery: table differs from the model")
    table.remove_orphan_files(older_than=0)  # every leftover: the table must not need any of it
    table, report = reopen_and_check(warehouse, IDENT)
    f += [f"after removing unreferenced files: {p}" for p in report.problems]
    if read_engine_state(table) != model_after(commits, engine):
        f.append("after removing unreferenced files: table differs from the model")
    out.orphan_bytes_after_cleanup = report.orphan_bytes
    if report.orphan_files:
        f.append(f"orphan cleanup left unreferenced files: {report.orphan_files}")
    return out


# --- crash in maintenance: compaction, expiration, orphan cleanup, tags, rollback -----------------------------
MAINTENANCE_POINTS = {  # operation -> (crash point, arrivals to try)
    "compact": [("compact.before-rewrite", (1, 2)), ("compact.after-output-file", (1, 2)),
                ("compact.after-rewrite", (1, 2)), ("compact.before-commit", (1,)),
                ("commit.before-manifest", (1,)), ("commit.before-publish", (1,)), ("commit.after-publish", (1,)),
                ("commit.after-hint", (1,))],
    "expire": [("expire.before-delete", (1,)), ("expire.after-snapshot-file", (1, 2)),
               ("expire.before-earliest-hint", (1,)), ("expire.after-earliest-hint", (1,)),
               ("expire.after-file-delete", (1, 3))],
    "orphans": [("orphans.before-delete", (1,)), ("orphans.after-delete", (1, 2))],
    "tag": [("tag.before-create", (1,)), ("tag.after-create", (1,))],
    "rollback": [("rollback.before-delete", (1,)), ("rollback.after-tag-delete", (1,)),
                 ("rollback.after-latest-hint", (1,)), ("rollback.after-snapshot-file", (1, 2)),
                 ("rollback.after-file-delete", (1, 2))],
    "rollback-tag": [("rollback.after-restore", (1,)), ("rollback.after-tag-delete", (1,)),
                     ("rollback.after-snapshot-file", (1, 2)), ("rollback.after-file-delete", (1,))],
}
MAINTENANCE_COMMITS = 5
ROLLBACK_TARGET = 3      # rollback_to(snapshot of commit 3); tag "keep" on commit 2 stays, tag "drop" on commit 4 goes
# rollback-tag: snapshots expired down to EXPIRE_RETAIN first, then rollback_to("keep") restores commit 2's snapshot
EXPIRE_RETAIN = 2        # expire_snapshots(retain_min=1, retain_max=2); tag "keep" outlives its snapshot
NEW_TAG = "fresh"        # create_tag(NEW_TAG, snapshot of commit 2)


def maintenance_points() -> list[tuple[str, str, int]]:
    return [(op, point, n) for op, points in MAINTENANCE_POINTS.items() for point, ns in points for n in ns]


def maintenance_job(warehouse: str, operation: str, sids: dict) -> object:
    """The maintenance job a user would run (again after a crash): each is safe to repeat."""
    t = Catalog(warehouse).get_table(IDENT)
    if operation == "compact":
        return t.compact(full=True)
    if operation == "expire":
        return t.expire_snapshots(retain_min=1, retain_max=EXPIRE_RETAIN).snapshot_ids
    if operation == "orphans":
        return t.remove_orphan_files(older_than=0)
    if operation == "tag":
        if NEW_TAG not in t.tags():
            t.create_tag(NEW_TAG, sids[2])
        return None
    if operation == "rollback":
        return t.rollback_to(sids[ROLLBACK_TARGET])
    if operation == "rollback-tag":
        return t.rollback_to("keep")
    raise ValueError(operation)


def _prepare_maintenance(warehouse: str, buckets: int, engine: str, operation: str) -> tuple[dict, dict]:
    """MAINTENANCE_COMMITS commits; returns (commit i -> its snapshot id, snapshot id -> model). Tags "keep"
    (commit 2) and "drop" (commit 4). For orphan cleanup, also leftovers: an abandoned write's data files and a
    stray manifest."""
    # writers do not compact here, so a dedicated compaction always has work in every bucket
    t = create_engine_table(warehouse, buckets, engine, **{"write-only": "true"})
    sids, models, last = {}, {}, 0
    for i in range(1, MAINTENANCE_COMMITS + 1):
        sid = t.commit(write_commit(t, i))
        for s in range(last + 1, sid + 1):  # an APPEND and the COMPACT snapshot of a writer's compaction
            models[s] = model_after(i, engine)
        sids[i], last = sid, sid
    t.create_tag("keep", sids[2])
    t.create_tag("drop", sids[4])
    if operation == "rollback-tag":
        t.expire_snapshots(retain_min=1, retain_max=EXPIRE_RETAIN)
    if operation == "orphans":
        write_commit(t, MAINTENANCE_COMMITS + 1)  # never committed: its data files are orphans
        t.file_io.write_bytes(t.paths.manifest("manifest-stray-0"), b"left by a crashed commit")
    return sids, models


def _verify_reads(table, models: dict, tags: dict, f: list, when: str) -> None:
    """Every existing snapshot and every tag reads as the model of its snapshot."""
    for s in table.snapshots():
        if read_engine_state(table, s.id) != models.get(s.id):
            f.append(f"{when}: snapshot {s.id} does not read as its model")
    for name, snap in table.tags().items():
        if tags.get(name) != snap.id:
            f.append(f"{when}: tag {name} names snapshot {snap.id}, expected {tags.get(name)}")
        elif read_engine_state(table, tag=name) != models[snap.id]:
            f.append(f"{when}: tag {name} does not read as its model")


def _expected_after(operation: str, sids: dict, models: dict, done: bool) -> tuple[set | None, dict]:
    """(snapshot ids that must exist, None when any is fine; tag -> snapshot id) once the job finished (``done``)
    or before it ran."""
    tags = {"keep": sids[2], "drop": sids[4]}
    latest = max(models)
    if not done:
        first = latest - EXPIRE_RETAIN + 1 if operation == "rollback-tag" else 1
        return set(range(first, latest + 1)), tags
    if operation == "expire":
        return set(range(latest - EXPIRE_RETAIN + 1, latest + 1)), tags
    if operation == "tag":
        return set(range(1, latest + 1)), {**tags, NEW_TAG: sids[2]}
    if operation == "rollback":
        return set(range(1, sids[ROLLBACK_TARGET] + 1)), {"keep": sids[2]}
    if operation == "rollback-tag":
        return {sids[2]}, {"keep": sids[2]}
    return None, tags  # compact adds snapshots; orphan cleanup changes none


def maintenance_crash_case(workdir: str, operation: str, point: str, occurrence: int, buckets: int,
                           engine: str = "deduplicate") -> CrashOutcome:
    """Crash a maintenance job at ``point``, then: check() is clean; the latest snapshot reads as a committed state
    the job may pass through (compaction and cleanup change no content; expiration keeps the latest; a rollback
    may stop at a snapshot between the target and the old latest, as Paimon's does); every remaining snapshot and
    tag reads as its model. Re-running the job completes it; orphan cleanup with older_than=0 afterwards leaves
    exactly the referenced files and changes no read."""
    out = CrashOutcome(point, occurrence, buckets, engine, operation)
    warehouse = os.path.join(workdir, "wh")
    sids, models = _prepare_maintenance(warehouse, buckets, engine, operation)
    latest_before = max(models)
    run = run_crashing(point, maintenance_job, warehouse, operation, sids, occurrence=occurrence)
    out.crashed = run.crashed
    f = out.failures
    if run.error:
        f.append(f"child raised {run.error}")
    table, report = reopen_and_check(warehouse, IDENT)
    # a rollback to an expired tag restores an older snapshot first: a gap until it is run again (documented)
    f += [f"after crash: {p}" for p in report.problems if not (operation == "rollback-tag" and p.kind == "snapshot-gap")]
    out.leftover_files, out.leftover_bytes = len(report.orphan_files), report.orphan_bytes
    if set(report.orphan_files) & report.referenced_files:
        f.append("after crash: a leftover file is referenced")
    if operation == "compact":  # COMPACT snapshots keep the content of the snapshot before them
        for s in table.snapshots():
            models.setdefault(s.id, models[latest_before])
    latest = table.latest_snapshot_id()
    allowed = range(sids[ROLLBACK_TARGET], latest_before + 1) if operation == "rollback" else \
        [sids[2]] + list(range(latest_before - EXPIRE_RETAIN + 1, latest_before + 1)) \
        if operation == "rollback-tag" else [latest_before] if operation != "compact" else \
        range(latest_before, latest + 1)
    if latest not in allowed:
        f.append(f"after crash: latest snapshot is {latest}, expected one of {list(allowed)}")
    before_tags = _expected_after(operation, sids, models, False)[1]
    after_ids, after_tags = _expected_after(operation, sids, models, True)
    now_tags = {n: s.id for n, s in table.tags().items()}
    if now_tags != before_tags and now_tags != after_tags and not (
            operation.startswith("rollback") and set(now_tags) <= set(before_tags)):
        f.append(f"after crash: tags {now_tags}")
    _verify_reads(table, models, now_tags, f, "after crash")

    os.environ.pop(ENV, None)
    maintenance_job(warehouse, operation, sids)  # re-run: completes the job
    maintenance_job(warehouse, operation, sids)  # and once more: a finished job is safe to repeat
    table, report = reopen_and_check(warehouse, IDENT)
    f += [f"after re-run: {p}" for p in report.problems]
    if operation == "compact":
        for s in table.snapshots():
            models.setdefault(s.id, models[latest_before])
        if not any(s.commit_kind == "COMPACT" for s in table.snapshots()):
            f.append("after re-run: no COMPACT snapshot")
    ids = {s.id for s in table.snapshots()}
    if after_ids is not None and ids != after_ids:
        f.append(f"after re-run: snapshots {sorted(ids)}, expected {sorted(after_ids)}")
    if {n: s.id for n, s in table.tags().items()} != after_tags:
        f.append(f"after re-run: tags {sorted(table.tags())}, expected {sorted(after_tags)}")
    _verify_reads(table, models, after_tags, f, "after re-run")
    table.remove_orphan_files(older_than=0)
    table, report = reopen_and_check(warehouse, IDENT)
    f += [f"after orphan cleanup: {p}" for p in report.problems]
    if report.orphan_files:
        f.append(f"orphan cleanup left unreferenced files: {report.orphan_files}")
    _verify_reads(table, models, after_tags, f, "after orphan cleanup")
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
    compactions: int = 0       # dedicated compactions that landed while the writers ran
    compaction_conflicts: int = 0
    failures: list[str] = field(default_factory=list)


COMPACTOR_USER = "compactor"


def compactor_worker(warehouse: str, stop_path: str, deadline_s: float = 120.0) -> tuple[int, int]:
    """Compact the table over and over (minor and full alternately) until ``stop_path`` exists and at least one
    compaction landed. A compaction whose inputs a concurrent commit replaced raises CommitConflict with nothing
    changed: counted and retried. Returns (compactions landed, conflicts)."""
    import time

    from engine.errors import CommitConflict

    t = Catalog(warehouse).get_table(IDENT)
    landed = conflicts = n = 0
    start = time.monotonic()
    while not (os.path.exists(stop_path) and landed) and time.monotonic() - start < deadline_s:
        n += 1
        try:
            if t.compact(full=n % 2 == 0) is not None:
                landed += 1
        except CommitConflict:
            conflicts += 1
        time.sleep(0.005)
    return landed, conflicts


def concurrency_case(workdir: str, workers: int, commits: int, same_bucket: bool,
                     compactor: bool = False) -> ConcurrencyOutcome:
    """N processes x C commits. Same bucket: all write bucket 0 of a 1-bucket table and also the shared HOT key,
    whose value at every snapshot must be the one written by that snapshot's commit (the later commit wins).
    Different buckets: worker w writes only keys of bucket w. ``compactor``: one more process compacts the table
    all the while (a dedicated compaction job)."""
    from engine.crash_points import _context

    mode = ("same-bucket" if same_bucket else "different-buckets") + (" + compactor" if compactor else "")
    out = ConcurrencyOutcome(mode, workers, commits)
    warehouse = os.path.join(workdir, "wh")
    buckets = 1 if same_bucket else workers
    create_table(warehouse, buckets)
    jobs = [(warehouse, w, commits, keys_for_bucket(0 if same_bucket else w, buckets, commits, 10_000 * w),
             same_bucket) for w in range(workers)]
    stop = os.path.join(workdir, "stop-compactor")
    with _context().Pool(workers + compactor) as pool:
        compacting = pool.apply_async(compactor_worker, (warehouse, stop)) if compactor else None
        results = pool.starmap(writer_worker, jobs)
        with open(stop, "w"):
            pass
        if compacting is not None:
            out.compactions, out.compaction_conflicts = compacting.get()
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


OVERWRITE_KEYS = 12


def overwrite_worker(warehouse: str, worker: int, rounds: int) -> list[tuple[int, str]]:
    """``rounds`` overwrites of partition 'a' with OVERWRITE_KEYS rows valued ``o<worker>-<round>``; returns
    (snapshot id, value) per acknowledged overwrite."""
    t = Catalog(warehouse).get_table(IDENT)
    acked = []
    for r in range(rounds):
        value = f"o{worker}-{r}"
        ids = range(worker * 3, worker * 3 + OVERWRITE_KEYS)  # each writer's own key set: a mix would show
        with t.new_write(commit_user=f"o{worker}", commit_identifier=r + 1) as w:
            w.write(_rows([("a", i) for i in ids], [value] * OVERWRITE_KEYS))
            messages = w.prepare_commit()
        acked.append((t.commit_overwrite(messages, [("a",)]), value))
    return acked


def overwrite_race_case(workdir: str, workers: int = 2, rounds: int = 5, buckets: int = 2) -> ConcurrencyOutcome:
    """Processes overwriting partition 'a' at once. Every acknowledged overwrite lands exactly once; at its
    snapshot partition 'a' holds exactly its rows (never a mix of two overwrites, never rows of an earlier one);
    partition 'b' is never touched; the final table holds the overwrite that landed last."""
    from engine.crash_points import _context

    out = ConcurrencyOutcome("overwrite one partition", workers, rounds)
    warehouse = os.path.join(workdir, "wh")
    t = create_table(warehouse, buckets)
    t.write(_rows([("a", i) for i in range(100, 110)] + [("b", i) for i in range(10)],
                  ["initial"] * 10 + [f"b{i}" for i in range(10)]))
    b_rows = {k: v for k, v in read_state(t).items() if k[0] == "b"}
    with _context().Pool(workers) as pool:
        results = pool.starmap(overwrite_worker, [(warehouse, w, rounds) for w in range(workers)])
    acked = [(w, sid, value) for w, r in enumerate(results) for sid, value in r]
    out.acknowledged = len(acked)
    table, report = reopen_and_check(warehouse, IDENT)
    out.failures += [str(p) for p in report.problems]
    by_sid = {}
    for w, sid, value in acked:
        by_sid.setdefault(sid, []).append(value)
    out.duplicates = sum(len(v) - 1 for v in by_sid.values())
    seen: dict[tuple, int] = {}
    for s in table.snapshots():
        if s.commit_kind == "OVERWRITE":
            seen[(s.commit_user, s.commit_identifier)] = seen.get((s.commit_user, s.commit_identifier), 0) + 1
    out.duplicates += sum(n - 1 for n in seen.values())
    for w, sid, value in acked:
        state = read_state(table, sid)
        want = {("a", i): value for i in range(w * 3, w * 3 + OVERWRITE_KEYS)}
        if seen.get((f"o{w}", int(value.split("-")[1]) + 1)) != 1:
            out.lost += 1
        if {k: v for k, v in state.items() if k[0] == "a"} != want:
            out.failures.append(f"snapshot {sid}: partition a is not exactly overwrite {value}")
        if {k: v for k, v in state.items() if k[0] == "b"} != b_rows:
            out.failures.append(f"snapshot {sid}: partition b changed")
    last = max(acked, key=lambda a: a[1])
    if read_state(table) != {**b_rows, **{("a", i): last[2] for i in range(last[0] * 3, last[0] * 3 + OVERWRITE_KEYS)}}:
        out.failures.append("final table is not the overwrite that landed last")
    if out.lost or out.duplicates:
        out.failures.append(f"{out.lost} acknowledged overwrite(s) lost, {out.duplicates} duplicate(s)")
    return out


def expiring_writer_worker(warehouse: str, worker: int, commits: int) -> tuple[int, list[int], list[str]]:
    """Commit ``commits`` times, expiring down to one retained snapshot after each. Returns (snapshots expired,
    the commits acknowledged, errors); an error ends the worker."""
    t = Catalog(warehouse).get_table(IDENT)
    expired, acknowledged = 0, []
    for i in range(commits):
        try:
            t.write(_rows([("a", 1000 * (worker + 1) + i)], [f"e{worker}-{i}"]))
            acknowledged.append(i)
            expired += len(t.expire_snapshots(retain_min=1, retain_max=1).snapshot_ids)
        except Exception as e:  # noqa: BLE001 - reported, not raised: the race must be judged as a whole
            import traceback
            where = " <- ".join(f"{os.path.basename(f.filename)}:{f.lineno} {f.name}"
                                for f in reversed(traceback.extract_tb(e.__traceback__)[-6:]))
            return expired, acknowledged, [f"worker {worker}, commit {i}: {e!r} at {where}"]
    return expired, acknowledged, []


@dataclass
class PinnedReaderOutcome:
    """What ``pinned_reader_case`` saw: reads of the pinned snapshot, snapshots expired by the writers, commits they
    had acknowledged, acknowledged commits missing from the table afterwards, and every failure as text."""
    reads: int = 0
    expired: int = 0
    acknowledged: int = 0
    lost: int = 0
    failures: list[str] = field(default_factory=list)


def pinned_reader_case(workdir: str, pin: str, workers: int = 2, commits: int = 8) -> PinnedReaderOutcome:
    """A reader pinned to snapshot 3 (``pin``: "tag" -- read through a tag; "consumer" -- a consumer whose next
    snapshot is 3 holds it) reads over and over while other processes commit and expire snapshots down to one.
    Every read must return snapshot 3's rows, without error; every commit must succeed and, once acknowledged, be
    in the latest snapshot afterwards (a commit claiming a snapshot id that expiration had already freed would be
    lost); check() must be clean."""
    from engine.crash_points import _context

    warehouse = os.path.join(workdir, "wh")
    t = create_table(warehouse, 2)
    for i in range(3):
        t.write(_rows([("a", i), ("b", i)], [f"s{i}", f"s{i}"]))
    if pin == "tag":
        t.create_tag("pinned", 3)
        def read(tb):
            return {(r["p"], r["id"]): r["v"] for r in tb.read(tag="pinned").to_pylist()}
    else:
        t.reset_consumer("reader", 3)

        def read(tb):
            return read_state(tb, 3)
    pinned = read(t)
    out = PinnedReaderOutcome()
    with _context().Pool(workers) as pool:
        pending = pool.starmap_async(expiring_writer_worker, [(warehouse, w, commits) for w in range(workers)])
        deadline = time.monotonic() + 300  # a lost worker must fail the test, not hang it
        while not pending.ready() or out.reads == 0:
            if time.monotonic() > deadline:
                pool.terminate()
                out.failures.append("writers did not finish within 300 s")
                return out
            time.sleep(0.005)  # leave the writers CPU on a 2-core machine
            for tb in (t, Catalog(warehouse).get_table(IDENT)):  # a long-lived and a fresh table object
                try:
                    got = read(tb)
                except Exception as e:  # noqa: BLE001 - any error is a disturbed reader
                    out.failures.append(f"read {out.reads}: {e!r}")
                    continue
                if got != pinned:
                    out.failures.append(f"read {out.reads}: {len(got)} rows differ from the pinned snapshot")
            out.reads += 1
        results = pending.get()
    fresh = Catalog(warehouse).get_table(IDENT)
    if read(fresh) != pinned:
        out.failures.append("after the race: the pinned snapshot reads differently")
    final = read_state(fresh)
    lost = []
    for w, (expired, acknowledged, errors) in enumerate(results):
        out.expired += expired
        out.acknowledged += len(acknowledged)
        out.failures += errors
        lost += [(w, i) for i in acknowledged if final.get(("a", 1000 * (w + 1) + i)) != f"e{w}-{i}"]
    out.lost = len(lost)
    if lost:
        out.failures.append(f"acknowledged commits lost (worker, commit): {lost}")
    out.failures += [str(p) for p in fresh.check().problems]
    return out


def tagging_worker(warehouse: str, stop_path: str, deadline_s: float = 120.0) -> tuple[int, int, list[str]]:
    """Until ``stop_path`` exists: tag the latest snapshot, delete the tag made two rounds before, and read every
    remaining tag. A tag of a snapshot that expired while it was written raises SnapshotNotFound (the tag is
    withdrawn): counted, not an error. Returns (tags created, tags deleted, errors)."""
    from engine.errors import SnapshotNotFound

    t = Catalog(warehouse).get_table(IDENT)
    created, deleted, errors, n = [], 0, [], 0
    start = time.monotonic()
    while not os.path.exists(stop_path) and time.monotonic() - start < deadline_s:
        if t.latest_snapshot_id() is None:  # the writers have not committed yet
            time.sleep(0.005)
            continue
        n += 1
        try:
            t.create_tag(f"churn-{n}")
            created.append(n)
        except SnapshotNotFound:
            pass
        except Exception as e:  # noqa: BLE001 - reported, not raised: the race is judged as a whole
            errors.append(f"create_tag churn-{n}: {e!r}")
        while len(created) > 2:
            old = created.pop(0)
            try:
                t.delete_tag(f"churn-{old}")
                deleted += 1
            except Exception as e:  # noqa: BLE001
                errors.append(f"delete_tag churn-{old}: {e!r}")
        for name in list(t.tags()):
            try:
                t.read(tag=name)
            except Exception as e:  # noqa: BLE001
                errors.append(f"read of tag {name}: {e!r}")
        time.sleep(0.005)
    return n, deleted, errors


def tag_churn_case(workdir: str, workers: int = 2, commits: int = 8) -> PinnedReaderOutcome:
    """Writers commit and expire snapshots down to one (``expiring_writer_worker``) while another process creates
    and deletes tags (``tagging_worker``) and automatic tags are created and retained (process-time, at most 2).
    Afterwards: no error anywhere, every acknowledged commit in the table, every tag readable, check() without
    problems and without unreferenced files (every process finished: nothing is in flight) but for data files a
    withdrawn tag's snapshot added (see below)."""
    from engine.crash_points import _context

    warehouse = os.path.join(workdir, "wh")
    create_table(warehouse, 2, **{"tag.automatic-creation": "process-time", "tag.creation-period": "hourly",
                                  "tag.num-retained-max": "2"})
    stop = os.path.join(workdir, "stop-tagging")
    out = PinnedReaderOutcome()
    with _context().Pool(workers + 1) as pool:
        tagging = pool.apply_async(tagging_worker, (warehouse, stop))
        results = pool.starmap(expiring_writer_worker, [(warehouse, w, commits) for w in range(workers)])
        with open(stop, "w"):
            pass
        tags_made, _, tag_errors = tagging.get()
    out.failures += tag_errors
    out.reads = tags_made
    fresh = Catalog(warehouse).get_table(IDENT)
    final = read_state(fresh)
    for w, (expired, acknowledged, errors) in enumerate(results):
        out.expired += expired
        out.acknowledged += len(acknowledged)
        out.failures += errors
        out.lost += sum(1 for i in acknowledged if final.get(("a", 1000 * (w + 1) + i)) != f"e{w}-{i}")
    for name in fresh.tags():
        try:
            fresh.read(tag=name)
        except Exception as e:  # noqa: BLE001
            out.failures.append(f"tag {name} unreadable after the race: {e!r}")
    report = fresh.check()
    out.failures += [str(p) for p in report.problems]
    # Rare races leave a data file to orphan cleanup, on purpose (about one run in 30): a tag withdrawn because its
    # snapshot expired while it was written keeps the files that snapshot added, since it may have been a stale
    # claim whose committer publishes them again (TagManager.create_of_live); a delete_tag planned while the
    # earliest snapshot changes keeps what that snapshot held. Any other unreferenced file (manifests, manifest
    # lists, index files) is a leak.
    out.failures += [f"unreferenced file {p}" for p in report.orphan_files
                     if not os.path.basename(p).startswith("data-") or "/bucket-" not in p]
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
        ("postpone bucket mode without primary key", _create({"bucket": "-2"}, pk=()), E.InvalidOption),
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
