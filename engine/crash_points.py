"""Named crash points: places in write, commit (and later compaction, expiry) where a test can kill the process.

``crash_point("commit.before-publish")`` does nothing unless the environment variable ``LAKEMERGE_CRASH_POINT``
names that point. Then the process ends at once with ``os._exit(CRASH_EXIT_CODE)``: no ``finally`` block, context
manager exit or atexit handler runs, as with ``kill -9`` right after the step before. This models a process crash:
what was written stays (it is in the kernel). It does not model a power loss, which could also drop data that was
never fsynced (only snapshot and schema files and their directory are fsynced).

The variable's value is ``<name>`` (die the first time the point is reached) or ``<name>:<n>`` (die the n-th time,
counting every arrival in this process, e.g. the 3rd data file of a write). Use it from a shell::

    LAKEMERGE_CRASH_POINT=commit.before-publish python my_job.py

or from Python with ``run_crashing(point, fn, *args)``, which runs ``fn(*args)`` in a fresh child process with the
point armed and reports whether the child died there; ``reopen_and_check(warehouse, identifier)`` then opens the
table afresh and returns ``(table, table.check())``.

Every point is listed in ``POINTS`` (name -> what has happened when the process dies there). A point that is not
listed raises ``ValueError`` when reached, so a typo cannot silently disarm a test. New work adds its points here
and places one ``crash_point(name)`` line at each step.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

ENV = "LAKEMERGE_CRASH_POINT"
CRASH_EXIT_CODE = 86

POINTS: dict[str, str] = {
    # --- write (engine/write) ---
    "write.before-data-file": "the writer is about to write a data file; earlier files of the write exist",
    "write.after-data-file": "a data file is complete on storage; it is not referenced by any manifest",
    # --- commit (engine/commit/committer.py) ---
    "commit.before-manifest": "all data files of the commit exist; no manifest was written yet",
    "commit.after-manifest": "the commit's manifest exists; no manifest list was written yet",
    "commit.after-rebase": "sequence numbers were re-based onto a concurrent commit of the same bucket: the "
                           "rewritten data files exist next to the originals",
    "commit.before-publish": "manifest and manifest lists exist; snapshot-N does not (the commit did not land)",
    "commit.after-publish": "snapshot-N exists (the commit landed); the LATEST hint still names N-1",
    "commit.after-hint": "snapshot-N and the LATEST hint exist; commit() has not returned yet",
    # --- catalog ---
    "catalog.before-schema": "create_table validated the definition; schema-0 does not exist yet",
    # --- compaction (engine/compact; its commit then passes the commit.* points) ---
    "compact.before-rewrite": "a compaction picked its input files and is about to merge them; no output exists",
    "compact.after-output-file": "a compaction output file is complete; no manifest references it",
    "compact.after-rewrite": "every output file of a compaction unit exists; nothing is committed",
    "compact.before-commit": "a dedicated compaction rewrote all its buckets; its COMPACT messages are built, "
                             "nothing is committed",
    # --- snapshot expiration (engine/maintenance/expire.py) ---
    "expire.before-delete": "expiration decided what to remove; nothing is deleted yet",
    "expire.after-snapshot-file": "one expired snapshot file is deleted (oldest first); its files are not",
    "expire.before-earliest-hint": "every expired snapshot file is deleted; the EARLIEST hint names an old one",
    "expire.after-earliest-hint": "the EARLIEST hint names the first retained snapshot; no data or manifest file "
                                  "of the expired snapshots is deleted yet",
    "expire.after-file-delete": "one data or manifest file only expired snapshots referenced is deleted",
    # --- orphan file cleanup (engine/maintenance/orphans.py) ---
    "orphans.before-delete": "orphan cleanup listed the files to delete; nothing is deleted yet",
    "orphans.after-delete": "one orphan file is deleted",
    # --- tags (engine/maintenance/tags.py) ---
    "tag.before-create": "the tag name is valid; tag/tag-<name> does not exist yet",
    "tag.after-create": "tag/tag-<name> is published; create_tag has not returned yet",
    # --- rollback (engine/maintenance/rollback.py) ---
    "rollback.after-restore": "rolling back to a tag whose snapshot expired: the snapshot file is restored from "
                              "the tag, every later snapshot still exists",
    "rollback.before-delete": "rollback decided what to remove; nothing is deleted yet",
    "rollback.after-tag-delete": "one tag of a rolled-back snapshot is deleted",
    "rollback.after-latest-hint": "the LATEST hint names the target; no snapshot file is deleted yet",
    "rollback.after-snapshot-file": "one rolled-back snapshot file is deleted (newest first): the latest "
                                    "snapshot is an earlier one, not yet the target",
    "rollback.after-file-delete": "every rolled-back snapshot file is gone; one file only they referenced is "
                                  "deleted",
}


def crash_point(name: str) -> None:
    """Die here if ``LAKEMERGE_CRASH_POINT`` arms this point (see module docstring); otherwise do nothing."""
    armed = os.environ.get(ENV)
    if not armed:
        return
    if name not in POINTS:
        raise ValueError(f"crash point {name!r} is not registered in engine.crash_points.POINTS")
    target, _, nth = armed.partition(":")
    if target != name:
        return
    _arrivals[name] = _arrivals.get(name, 0) + 1
    if _arrivals[name] >= int(nth or 1):
        os._exit(CRASH_EXIT_CODE)


_arrivals: dict[str, int] = {}


# --- runner ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CrashRun:
    """How a child run under an armed crash point ended."""
    point: str
    occurrence: int
    crashed: bool       # the child died at the point
    exit_code: int      # CRASH_EXIT_CODE if crashed, 0 if the function returned, 1 if it raised
    result: object      # fn's return value when it returned
    error: str | None   # repr of the exception when it raised


def _child(conn, spec: str | None, fn, args):
    if spec:
        os.environ[ENV] = spec
    else:
        os.environ.pop(ENV, None)
    try:
        result = fn(*args)
    except BaseException as e:  # report, then exit non-zero
        conn.send(("error", repr(e)))
        conn.close()
        os._exit(1)
    conn.send(("ok", result))
    conn.close()
    os._exit(0)


def run_crashing(point: str | None, fn, *args, occurrence: int = 1, timeout: float = 300.0) -> CrashRun:
    """Run ``fn(*args)`` in a child process with ``point`` armed to fire on its ``occurrence``-th arrival
    (``point=None``: nothing armed, e.g. for a child that sets resource limits).

    ``fn`` must be importable (a module-level function) and ``args`` picklable. Children are forked from a
    forkserver (fast, and safe with the parent's threads). Raises ValueError for an unknown point, TimeoutError
    if the child hangs.
    """
    if point is not None and point not in POINTS:
        raise ValueError(f"unknown crash point {point!r}; registered: {sorted(POINTS)}")
    ctx = _context()
    parent, child = ctx.Pipe(duplex=False)
    spec = None if point is None else f"{point}:{occurrence}"
    proc = ctx.Process(target=_child, args=(child, spec, fn, args))
    proc.start()
    child.close()
    status, payload = None, None
    if parent.poll(timeout):
        try:
            status, payload = parent.recv()
        except EOFError:  # died without reporting
            pass
    proc.join(timeout)
    if proc.exitcode is None:
        proc.kill()
        proc.join()
        raise TimeoutError(f"child running {fn.__name__} under crash point {point} did not finish")
    parent.close()
    return CrashRun(point, occurrence, proc.exitcode == CRASH_EXIT_CODE, proc.exitcode,
                    payload if status == "ok" else None, payload if status == "error" else None)


def reopen_and_check(warehouse: str, identifier: str, **check_options):
    """Open the table afresh (no state carried over from the crashed process) and check it.
    Returns ``(table, CheckReport)``."""
    from engine.catalog import Catalog

    table = Catalog(warehouse).get_table(identifier)
    return table, table.check(**check_options)


_ctx = None


def _context():
    global _ctx
    if _ctx is None:
        import multiprocessing as mp
        _ctx = mp.get_context("forkserver")
        _ctx.set_forkserver_preload(["engine.table", "engine.catalog", "pyarrow.parquet", "engine._child_warm_up"])
    return _ctx
