"""A stream's position: the last snapshot whose changes it delivered, with that snapshot's commit time.

A rollback deletes the snapshots after its target; later commits then re-use their ids. A stream (the engine's
``Table.stream``, a consumer resumed from its file, Spark's readStream) that had read up to such an id would wait
for the next id and silently skip the snapshots committed anew below it. ``check_position`` recognises that: the
latest snapshot is older than the position (Paimon's NextSnapshotFetcher: "The next expected snapshot is too big"),
or the snapshot at the position has another commit time than when it was read (a lakemerge addition: Paimon's
stream does not notice a re-committed id).
"""
from __future__ import annotations

from engine.errors import SnapshotNotFound


def commit_time(table, snapshot_id: int) -> int | None:
    """The commit time (epoch ms) of snapshot ``snapshot_id`` as its file holds it now (not a cached copy: a
    rollback in another process may have replaced it), or None when there is no such snapshot (id < 1, expired,
    not committed yet)."""
    if snapshot_id < 1:
        return None
    snap = table.snapshot_manager.reload(snapshot_id)
    return None if snap is None else snap.time_millis


def check_position(table, delivered: int, time_millis: int | None, remedy: str, reader: str = "the stream") -> None:
    """Raise SnapshotNotFound (naming ``delivered``, ``reader`` and ending with ``remedy``) when the table no longer
    holds the history ``reader`` delivered up to snapshot ``delivered``: its latest snapshot is older, or snapshot
    ``delivered`` was committed at another time than ``time_millis`` (None: not known, not compared). A position
    whose snapshot expired meanwhile passes: expiry is no rollback."""
    latest = table.snapshot_manager.latest_id() or 0
    if latest < delivered:
        raise SnapshotNotFound(table.name, delivered, f"{reader} has read up to snapshot {delivered} but the latest "
                               f"is {latest} (was the table rolled back?); {remedy}")
    if time_millis is None:
        return
    now = commit_time(table, delivered)
    if now is not None and now != time_millis:
        raise SnapshotNotFound(table.name, delivered, f"the snapshot {reader} read up to was replaced by another "
                               f"commit (the table was rolled back and written again); {remedy}")
