"""``Table.stream``: Paimon's streaming scan modes (paimon-semantics §13) as a generator of pa.RecordBatch.

Each yielded batch holds the requested columns plus ``_row_kind``; its schema metadata ``lakemerge.snapshot_id``
names the snapshot it comes from. One batch per snapshot with changes (a full first read is one batch of +I rows).
When no newer snapshot exists the generator sleeps ``poll_interval`` seconds and looks again; with
``idle_timeout`` it returns after being idle that long (``0``: as soon as it has caught up).

Modes (without one, or ``default``: derived from the start arguments given, as Paimon's CoreOptions.startupMode;
``full`` is latest-full): ``latest-full`` (the latest snapshot in full, then changes), ``latest`` (changes after
the latest), ``from-snapshot`` (changes from ``snapshot_id`` inclusive, or from the earliest readable one if it
expired, as Paimon's ContinuousFromSnapshotStartingScanner),
``from-snapshot-full`` (snapshot ``snapshot_id`` -- the earliest snapshot if it expired -- in full, then changes;
on a table without snapshots the stream waits for one, then reads the earliest snapshot from ``snapshot_id`` on in
full), ``from-timestamp`` (changes of snapshots committed at or after ``timestamp_millis``), ``compacted-full``
(the latest COMPACT snapshot in full -- with full-compaction the latest full compaction -- then changes),
``incremental`` (changes in
(start, end], snapshot ids or tag names; ends there. Between two tags of a primary-key table it is, as in Paimon,
the difference of the two tagged states -- each changed key once, gone keys as -D -- unless
``incremental-between-tag-to-snapshot``).

OVERWRITE snapshots are skipped unless ``streaming-read-overwrite`` (primary-key tables) or
``streaming-read-append-overwrite`` (append tables) is set; then their replaced rows come as -D and their new rows
as +I (engine.changelog.overwrite). Mode ``incremental`` skips them whatever the options, as Paimon does.

``snapshot_id`` may name a tag (a lakemerge extension; Paimon's streams refuse scan.tag-name): from-snapshot-full
reads the tag's own snapshot in full -- the tag keeps it after the snapshot expired -- and both modes raise
SnapshotNotFound when changes they must deliver from the tag on have expired, instead of starting at the earliest.

Full reads follow Paimon: with changelog-producer=lookup level-0 files are skipped (their rows arrive as changelog
later); with full-compaction only max-level files are read.

Consumers: with ``consumer_id`` the stream starts at the consumer's saved ``nextSnapshot`` when there is one
(unless ``consumer.ignore-progress``), and saves ``nextSnapshot = s + 1`` once the batch of snapshot ``s`` was
handed over (the caller asked for the next batch, or closed the generator after receiving it). A restarted
stream therefore neither loses nor repeats a snapshot. Snapshot expiration keeps every snapshot a consumer still
needs; with ``consumer.expiration-time`` a commit removes consumers whose file was not written for that long (a
running stream rewrites its file at least every minute while idle). If a snapshot the stream needs has expired,
SnapshotNotFound is raised.

Rollback: a stream that has read up to snapshot s fails with SnapshotNotFound when the table is rolled back below s
-- the latest snapshot is older than s, or snapshot s was committed anew (another commit time) -- instead of
skipping the snapshots committed after the rollback (engine.changelog.position; the rule Spark's readStream
applies). A consumer's file keeps snapshot s's commit time, so a stream resumed from it checks the same.

Filters: ``filter`` takes ``Table.read``'s forms (engine.read.predicate) over the stream's columns. The full read
is filtered as a batch read (partitions, buckets and files pruned, the merged rows filtered); changes row by row, as
Paimon's streaming reads filter a changelog (the reader's predicate is pushed down for pruning only, the rows are
filtered one by one after it): an update whose old row matches and new row does not gives its -U without the +U,
one whose new row matches but old row does not gives a +U alone. Change files are skipped by partition, bucket, key
statistics and -- read row by row, so a file none of whose rows matches contributes nothing -- value statistics
(Paimon's KeyValueFileStoreScan uses value statistics only for lookup / full-compaction changelog files: the same
rows either way). A row deleted by key alone (``Table.delete``) carries nulls in its other columns, so a filter on
them does not keep its -D.

Schema: a stream reads every snapshot through the table schema it started with, files written after an ALTER TABLE
included (by field id: a renamed column under its old name, a dropped column null, an added one absent).
"""
from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa

from engine.changelog.consumers import ConsumerManager
from engine.changelog.files import ROW_KIND_COLUMN, row_kind_text
from engine.changelog.overwrite import follow_up_changes
from engine.changelog.position import check_position, commit_time
from engine.changelog.reading import check_columns, filter_changes, output_schema, read_columns, snapshot_changes
from engine.changelog import retention
from engine.changelog.retention import changes_snapshot, earliest_change_id
from engine.errors import InvalidInput, SnapshotNotFound
from engine.merge import VALUE_KIND
from engine.meta.snapshot import BATCH_COMMIT_IDENTIFIER, COMMIT_KIND_COMPACT, Snapshot
from engine.options import (
    CHANGELOG_PRODUCER,
    CONSUMER_IGNORE_PROGRESS,
    FULL_COMPACTION_DELTA_COMMITS,
    INCREMENTAL_BETWEEN_TAG_TO_SNAPSHOT,
    parse_timestamp_millis,
)
from engine.postpone import POSTPONE_BUCKET
from engine.read import predicate as pred
from engine.read.file_skips import read_skips
from engine.read.split_read import SplitReader

MODES = ("latest-full", "latest", "from-snapshot", "from-snapshot-full", "from-timestamp", "compacted-full",
         "incremental")
SNAPSHOT_ID_KEY = b"lakemerge.snapshot_id"
CONSUMER_REFRESH_SECONDS = 60.0  # an idle stream rewrites its consumer file this often (as Flink's checkpoints do)
ROLLBACK_REMEDY = ("start a new stream (a consumer's saved progress: Table.reset_consumer, or option "
                   "consumer.ignore-progress)")


def _tagged(table: pa.Table, snapshot_id: int) -> pa.RecordBatch:
    table = table.combine_chunks()
    meta = dict(table.schema.metadata or {})
    meta[SNAPSHOT_ID_KEY] = str(snapshot_id).encode()
    batches = table.replace_schema_metadata(meta).to_batches()
    if len(batches) == 1:
        return batches[0]
    return pa.RecordBatch.from_arrays([table.column(i).combine_chunks() for i in range(table.num_columns)],
                                      schema=table.schema.with_metadata(meta))


def full_read(table, snapshot: Snapshot, columns: list[str], filter=None) -> pa.Table:
    """The merged rows of ``snapshot`` as +I rows, with the producer's file selection (module docstring); with
    ``filter`` (``Table.read``'s forms) those satisfying it, pruned as a batch read prunes. Raises InvalidInput
    for a bad filter."""
    schema = output_schema(table, columns)
    if table.schema.is_append_only:  # append tables: every row in append order, no merge
        from engine.append.read import read_append
        # the table's own rows (no fallback branch)
        rows = read_append(table, None, columns, filter, snapshot=snapshot)
        return pa.Table.from_arrays(rows.columns + [pa.array(["+I"] * rows.num_rows, pa.string())], schema=schema)
    dnf = pred.normalize(filter, table.arrow_schema, table.name)
    read_cols = read_columns(columns, dnf)
    reader = SplitReader(table.file_io, table.schema, table.schema_manager.schema, read_skips(table))
    parts = [rows for split in table.scan().plan(snapshot, dnf)
             if (rows := full_read_split(table, split, read_cols, reader)) is not None]
    rows = pa.concat_tables(parts) if parts else output_schema(table, read_cols).empty_table()
    return filter_changes(rows, dnf, columns)


def full_read_split(table, split, columns: list[str], reader: SplitReader | None = None) -> pa.Table | None:
    """``full_read`` of one split (a scale-out reader's unit); None when the producer selects none of its files."""
    producer = table.schema.table_options.get(CHANGELOG_PRODUCER)
    files = split.files
    if split.bucket == POSTPONE_BUCKET:  # Paimon's DataTableStreamScan: read only without a changelog producer
        return _postponed_rows(table, split, columns, reader) if producer == "none" else None
    if producer == "lookup":
        files = tuple(f for f in files if f.level > 0)
    elif producer == "full-compaction":
        from engine.compact.picker import CompactionSettings
        top = CompactionSettings.of(table.schema.table_options).num_levels - 1
        files = tuple(f for f in files if f.level == top)
    if not files:
        return None
    schema = output_schema(table, columns)
    reader = reader or SplitReader(table.file_io, table.schema, table.schema_manager.schema, read_skips(table))
    rows = reader.read(dataclasses.replace(split, files=files), columns)
    kinds = pa.array(["+I"] * rows.num_rows, pa.string())
    return pa.Table.from_arrays(rows.cast(pa.schema(list(schema)[:-1])).columns + [kinds], schema=schema)


def _postponed_rows(table, split, columns: list[str], reader: SplitReader | None) -> pa.Table:
    """The postpone bucket's records as stored, each with its own row kind (Paimon reads the postpone bucket without
    merging: MergeFileSplitRead's no-merge reader), files in the order their snapshots added them (the split's
    order; Paimon's postpone writers number each file's records from 0, so sequence numbers cannot order them)."""
    schema = output_schema(table, columns)
    reader = reader or SplitReader(table.file_io, table.schema, table.schema_manager.schema, read_skips(table))
    parts = []
    for f in split.files:
        rows = reader.read_file(split, f, columns)
        kinds = row_kind_text(rows.column(VALUE_KIND).to_numpy())
        parts.append(pa.Table.from_arrays(rows.select(columns).cast(pa.schema(list(schema)[:-1])).columns + [kinds],
                                          schema=schema))
    return pa.concat_tables(parts) if parts else schema.empty_table()


def _resolve(table, ref) -> int:
    if isinstance(ref, str):
        return table.tag_snapshot(ref).id
    return int(ref)


def _compacted_snapshot(table) -> Snapshot | None:
    opts = table.schema.table_options
    n = opts.get(FULL_COMPACTION_DELTA_COMMITS)
    full_only = opts.get(CHANGELOG_PRODUCER) == "full-compaction" or bool(n)
    sm = table.snapshot_manager
    for sid in reversed(sm.ids()):
        snap = sm.snapshot(sid)
        if snap.commit_kind != COMMIT_KIND_COMPACT:
            continue
        if not full_only or not n or snap.commit_identifier == BATCH_COMMIT_IDENTIFIER \
                or snap.commit_identifier % n == 0:
            return snap
    return sm.latest()


def _first_not_before(table, timestamp_millis: int) -> int:
    """The first id whose changes were committed at or after ``timestamp_millis``: one after the newest snapshot --
    or decoupled changelog, which keeps an expired snapshot's changes readable -- committed before it, else the
    earliest readable id (Paimon's TimeTravelUtil.earlierThanTimeMills, a binary search over commit times)."""
    snapshots = table.snapshot_manager.ids()
    if not snapshots:
        return 1
    ids = [i for i in retention.ids(table) if i < snapshots[0]] + snapshots  # readable ids (a gap stays a gap)
    if changes_snapshot(table, ids[0]).time_millis >= timestamp_millis:
        return ids[0]
    lo, hi = 0, len(ids) - 1
    while lo < hi:  # invariant: ids[lo] was committed before timestamp_millis
        mid = (lo + hi + 1) // 2
        if changes_snapshot(table, ids[mid]).time_millis < timestamp_millis:
            lo = mid
        else:
            hi = mid - 1
    return ids[lo] + 1


@dataclasses.dataclass(frozen=True)
class PendingFull:
    """A ``from-snapshot-full`` start on a table without snapshots: once the table has one, snapshot
    ``max(snapshot_id, earliest)`` is read in full, then the changes after it (Paimon's
    ContinuousFromSnapshotFullStartingScanner finds no snapshot and is asked again at the next poll)."""
    snapshot_id: int

    def resolve(self, table) -> Snapshot | None:
        """The snapshot to read in full, or None while the table has none. Raises SnapshotNotFound for an id past
        the latest snapshot."""
        earliest = table.snapshot_manager.earliest_id()
        return None if earliest is None else table.snapshot_manager.snapshot(max(self.snapshot_id, earliest))


def _start(table, mode: str, snapshot_id, timestamp_millis) -> tuple[int, Snapshot | PendingFull | None]:
    """(first snapshot id to read changes of, snapshot to read in full first -- PendingFull on a table without
    snapshots -- or None)."""
    sm = table.snapshot_manager
    latest = sm.latest()
    if mode in ("latest-full", "latest"):
        if latest is None:
            return 1, None
        return latest.id + 1, (latest if mode == "latest-full" else None)
    if mode == "compacted-full":
        snap = _compacted_snapshot(table)
        return (1, None) if snap is None else (snap.id + 1, snap)
    if mode in ("from-snapshot", "from-snapshot-full"):
        if snapshot_id is None:
            raise InvalidInput(f"scan mode {mode} needs snapshot_id", table=table.name)
        if isinstance(snapshot_id, str):
            return _tag_start(table, mode, snapshot_id)
        sid = int(snapshot_id)
        if mode == "from-snapshot-full":
            earliest = sm.earliest_id()
            if earliest is None:
                return sid + 1, PendingFull(sid)
            # an expired id reads the earliest snapshot (Paimon's ContinuousFromSnapshotFullStartingScanner)
            sid = max(sid, earliest)
            return sid + 1, sm.snapshot(sid)
        # an expired id starts at the earliest readable one (Paimon's ContinuousFromSnapshotStartingScanner)
        earliest = earliest_change_id(table)
        return max(sid, earliest if earliest is not None else sid), None
    if mode == "from-timestamp":
        if timestamp_millis is None:
            raise InvalidInput("scan mode from-timestamp needs timestamp_millis", table=table.name)
        return _first_not_before(table, parse_timestamp_millis(timestamp_millis, table=table.name)), None
    raise InvalidInput(f"unknown scan mode {mode!r}; modes are {', '.join(MODES)}", table=table.name)


def _tag_start(table, mode: str, tag: str) -> tuple[int, Snapshot | None]:
    """``_start`` of from-snapshot / from-snapshot-full at tag ``tag`` (a lakemerge extension: Paimon's streams
    refuse scan.tag-name). The full read is of the tag's own snapshot, which the tag keeps when the snapshot has
    expired (as Paimon's StaticFromTagStartingScanner reads it); the changes must still be readable from the tag on
    (from-snapshot: the tagged snapshot's own, from-snapshot-full: those after it). Raises TagNotFound, and
    SnapshotNotFound when they expired: starting at the earliest snapshot instead would skip the changes between."""
    tagged = table.tag_snapshot(tag)
    next_id, full = (tagged.id + 1, tagged) if mode == "from-snapshot-full" else (tagged.id, None)
    earliest = earliest_change_id(table)
    if earliest is not None and next_id < earliest:
        raise SnapshotNotFound(table.name, next_id, f"the changes from snapshot {next_id} on, which a stream from tag "
                               f"{tag!r} (snapshot {tagged.id}) reads, have expired (the earliest readable is "
                               f"{earliest})")
    return next_id, full


def startup_mode(mode: str | None, *, snapshot_id=None, timestamp_millis=None, start=None, end=None) -> str:
    """The scan mode a stream runs in: ``default`` (or None) is from-timestamp with ``timestamp_millis``,
    from-snapshot with ``snapshot_id``, incremental with ``start``/``end``, else latest-full; ``full`` is
    latest-full; any other value is returned as given (Paimon's CoreOptions.startupMode)."""
    if mode == "full":
        return "latest-full"
    if mode not in (None, "default"):
        return mode
    if timestamp_millis is not None:
        return "from-timestamp"
    if snapshot_id is not None:
        return "from-snapshot"
    return "incremental" if start is not None or end is not None else "latest-full"


def stream(table, mode: str | None = "default", *, snapshot_id=None, timestamp_millis: int | None = None,
           start=None, end=None, consumer_id: str | None = None, columns: Sequence[str] | None = None,
           poll_interval: float = 1.0, idle_timeout: float | None = None,
           normalize: bool = False, filter=None) -> Iterator[pa.RecordBatch]:
    """See the module docstring (``mode``: see ``startup_mode``; ``filter``: ``Table.read``'s forms, see
    "Filters"). Arguments are checked before the first batch is produced."""
    mode = startup_mode(mode, snapshot_id=snapshot_id, timestamp_millis=timestamp_millis, start=start, end=end)
    if mode not in MODES:
        raise InvalidInput(f"unknown scan mode {mode!r}; modes are {', '.join(MODES)}", table=table.name)
    # the stream keeps the schema it started with (Paimon's stream reads through its table object's schema): an
    # ALTER TABLE of this table object while the generator runs must not change its columns' meaning
    table = table.through_schema(table.schema.id)
    out_cols = check_columns(table, columns)
    dnf = pred.normalize(filter, table.arrow_schema, table.name)
    if poll_interval < 0:
        raise InvalidInput("poll_interval must be >= 0", table=table.name)
    if mode == "incremental":
        if start is None or end is None:
            raise InvalidInput("scan mode incremental needs start and end (snapshot ids or tag names)",
                               table=table.name)
        if isinstance(start, str) and isinstance(end, str) and not table.schema.is_append_only \
                and not table.schema.table_options.get(INCREMENTAL_BETWEEN_TAG_TO_SNAPSHOT):
            before, after = table.tag_snapshot(start), table.tag_snapshot(end)
            if before.id > after.id:
                raise InvalidInput(f"incremental start tag {start!r} (snapshot {before.id}) is after end tag "
                                   f"{end!r} (snapshot {after.id})", table=table.name)
            return _tag_diff(table, before, after, out_cols, dnf)
        lo, hi = _resolve(table, start), _resolve(table, end)
        if lo > hi:
            raise InvalidInput(f"incremental start {start} is after end {end}", table=table.name)
        latest = table.snapshot_manager.latest_id()
        if lo == hi or latest is None:  # Paimon: an empty result
            return iter(())
        # the whole range must be readable before the first batch (Paimon's IncrementalDeltaStartingScanner checks
        # it up front): a failure after some batches were consumed would leave a reader with part of the range
        if hi > latest:
            raise SnapshotNotFound(table.name, hi)
        if lo + 1 < earliest_change_id(table):
            raise SnapshotNotFound(table.name, lo + 1)
        return _incremental(table, lo, hi, out_cols, normalize, dnf)
    consumers = ConsumerManager(table) if consumer_id is not None else None
    if consumers is not None:
        consumers.path(consumer_id)  # validates the id
    next_id, full = _start(table, mode, snapshot_id, timestamp_millis)
    stamp = None  # the commit time of snapshot next_id - 1 as the stream's position (engine.changelog.position)
    resumed = False
    if consumers is not None and not table.schema.table_options.get(CONSUMER_IGNORE_PROGRESS):
        saved = consumers.progress(consumer_id)
        if saved is not None:
            (next_id, stamp), full, resumed = saved, None, True
    # a start id past the latest + 1 would wait there; a consumer's saved position may have been rolled back (a
    # table without snapshots yet is waited on, whatever the start id)
    if table.snapshot_manager.latest_id() is not None:
        check_position(table, next_id - 1, stamp, ROLLBACK_REMEDY)
    if not resumed and not isinstance(full, PendingFull):
        stamp = commit_time(table, next_id - 1)
    if consumers is not None and full is None:
        # nothing is consumed yet; a full first read is recorded only once handed over: nextSnapshot = full.id + 1
        # claims its rows were delivered, so a stream stopped before that would resume after them (Paimon writes
        # the consumer at checkpoints, after the full read)
        consumers.record(consumer_id, next_id, stamp)
    return _follow(table, next_id, stamp, full, out_cols, consumers, consumer_id, poll_interval, idle_timeout,
                   normalize, filter, dnf)


def _incremental(table, lo: int, hi: int, out_cols, normalize, dnf) -> Iterator[pa.RecordBatch]:
    for sid in range(lo + 1, hi + 1):
        rows = snapshot_changes(table, changes_snapshot(table, sid), out_cols, normalize=normalize, dnf=dnf)
        if rows.num_rows:
            yield _tagged(rows, sid)


def _merged_by_partition(table, snapshot: Snapshot, columns: list[str]) -> dict[bytes, pa.Table]:
    """Partition -> the merged record of every key of ``snapshot`` (batch view), retracts kept, with _VALUE_KIND."""
    from engine.read.split_read import batch_splits
    reader = SplitReader(table.file_io, table.schema, table.schema_manager.schema, read_skips(table))
    parts: dict[bytes, list[pa.Table]] = {}
    for split in batch_splits(table.scan().plan(snapshot), table.schema):
        parts.setdefault(split.partition, []).append(reader.read(split, columns, with_kind=True, keep_retracts=True))
    return {p: pa.concat_tables(t).combine_chunks() for p, t in parts.items()}


def _tag_diff(table, before: Snapshot, after: Snapshot, out_cols, dnf) -> Iterator[pa.RecordBatch]:
    """Paimon's incremental read between two tags (IncrementalDiffStartingScanner.betweenTags, read as its audit
    log reads it, deletes kept): per key, the ``after`` record when the key is new or its row or add/retract
    kind changed, and the ``before`` row as -D when the key is gone. Works when the snapshots between the tags
    expired. One batch tagged with the end snapshot's id, rows by partition then key."""
    if before.id == after.id:
        return
    from engine.changelog.emit import DELETE, equal_values, is_add
    from engine.merge import VALUE_KIND
    from kernels.keys import encode_keys
    from kernels.lookup import search_sorted
    from kernels.merge import sort_indices
    columns = list(table.schema.field_names)
    pk = list(table.schema.primary_keys)
    old, new = _merged_by_partition(table, before, columns), _merged_by_partition(table, after, columns)
    pieces = []
    for partition in sorted(set(old) | set(new)):
        b = old.get(partition, table.arrow_schema.empty_table().append_column(VALUE_KIND, pa.array([], pa.int8())))
        a = new.get(partition, b.schema.empty_table())
        b = b.take(pa.array(sort_indices(encode_keys([b.column(k) for k in pk]))))
        pos = search_sorted(encode_keys([b.column(k) for k in pk]), encode_keys([a.column(k) for k in pk])) \
            if b.num_rows and a.num_rows else np.full(a.num_rows, -1, np.int64)
        emit = pos < 0
        both = np.flatnonzero(~emit)
        if len(both):
            old_rows, new_rows = b.take(pa.array(pos[both])), a.take(pa.array(both))
            same = equal_values(old_rows, new_rows, columns) & (
                is_add(old_rows.column(VALUE_KIND).to_numpy()) == is_add(new_rows.column(VALUE_KIND).to_numpy()))
            emit[both[~same]] = True
        matched = np.zeros(b.num_rows, bool)
        matched[pos[pos >= 0]] = True
        gone = np.flatnonzero(~matched & is_add(b.column(VALUE_KIND).to_numpy()))
        rows = pa.concat_tables([a.filter(pa.array(emit)), b.take(pa.array(gone)).set_column(
            len(columns), VALUE_KIND, pa.array(np.full(len(gone), DELETE, np.int8)))])
        if rows.num_rows:
            pieces.append(rows.take(pa.array(sort_indices(encode_keys([rows.column(k) for k in pk])))))
    if not pieces:
        return
    rows = pa.concat_tables(pieces)
    if dnf:  # each row on its own, as a changelog is filtered
        rows = rows.filter(pred.to_expression(dnf))
        if not rows.num_rows:
            return
    kinds = row_kind_text(rows.column(VALUE_KIND).to_numpy())
    yield _tagged(pa.Table.from_arrays(rows.select(out_cols).columns + [kinds], schema=output_schema(table, out_cols)),
                  after.id)


def _follow(table, next_id: int, stamp: int | None, full: Snapshot | None, out_cols, consumers, consumer_id,
            poll_interval, idle_timeout, normalize, filter, dnf) -> Iterator[pa.RecordBatch]:
    """Yield the full read (if any), then each snapshot's changes from ``next_id`` on; ``stamp`` is the commit
    time of snapshot ``next_id - 1`` as the stream's position (None: unknown)."""
    sm = table.snapshot_manager

    recorded = [time.monotonic()]

    def handed_over(nxt: int) -> None:
        if consumers is not None:
            consumers.record(consumer_id, nxt, stamp)
            recorded[0] = time.monotonic()

    idle_since = time.monotonic()
    while isinstance(full, PendingFull):
        resolved = full.resolve(table)
        if resolved is not None:
            full, next_id, stamp = resolved, resolved.id + 1, resolved.time_millis
            break
        if idle_timeout is not None and time.monotonic() - idle_since >= idle_timeout:
            return
        time.sleep(poll_interval)
    if full is not None:
        rows = full_read(table, full, out_cols, filter)
        if rows.num_rows:
            try:
                yield _tagged(rows, full.id)
            except GeneratorExit:
                handed_over(next_id)
                raise
        handed_over(next_id)
    idle_since = time.monotonic()
    while True:
        latest = sm.latest_id()
        if latest is None or next_id > latest:
            if latest is not None:  # rolled back below the position
                check_position(table, next_id - 1, None, ROLLBACK_REMEDY)
            if idle_timeout is not None and time.monotonic() - idle_since >= idle_timeout:
                return
            if time.monotonic() - recorded[0] >= CONSUMER_REFRESH_SECONDS:
                handed_over(next_id)  # an idle stream is alive: keep consumer.expiration-time from removing it
            time.sleep(poll_interval)
            continue
        earliest = earliest_change_id(table)
        if earliest is not None and next_id < earliest:
            raise SnapshotNotFound(table.name, next_id)
        # the snapshot read up to must still be the one read (a rollback re-committing its id and more would
        # otherwise go unnoticed); the next one is read afresh, not from a cache a rollback made stale
        check_position(table, next_id - 1, stamp, ROLLBACK_REMEDY)
        sm.forget(next_id)
        snap = changes_snapshot(table, next_id)
        rows = follow_up_changes(table, snap, out_cols, normalize=normalize, dnf=dnf)
        if rows.num_rows:
            try:
                yield _tagged(rows, next_id)
            except GeneratorExit:
                stamp = snap.time_millis
                handed_over(next_id + 1)
                raise
        next_id, stamp = next_id + 1, snap.time_millis
        handed_over(next_id)
        idle_since = time.monotonic()


__all__ = ["MODES", "ROW_KIND_COLUMN", "SNAPSHOT_ID_KEY", "full_read", "full_read_split", "startup_mode", "stream"]
