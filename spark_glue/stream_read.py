"""Streaming reads of a table's changes: ``spark.readStream.format("lakemerge").load(path)``.

Offsets are snapshot ids: ``{"snapshot": s}`` means "every change up to and including snapshot s was delivered";
a query's initial offset of a ``*-full`` mode is ``{"snapshot": s, "full": true}`` ("snapshot s in full is still to
be read"). A micro-batch from ``start`` to ``end`` delivers (the full rows of the start snapshot, if pending, then)
the changes of snapshots start+1 .. end, as the engine's ``read_changes`` / ``stream`` define them. With rate
limits (spark_glue.stream_limits) a batch may end inside a snapshot, which is cut into splits in a fixed order:
``{"snapshot": s, "index": i}`` (+ ``"full": true`` for the full first snapshot) means "snapshots before s and
splits 0..i of s were delivered" (Paimon's PaimonSourceOffset: snapshot id, index, scanSnapshot); the offsets of
whole snapshots stay as they were, so checkpoints of earlier versions keep working. Spark keeps the offsets in the
query's checkpoint, so a restarted query continues after the last delivered split: nothing is lost, nothing
repeated. A snapshot the query still needs that has expired fails the query (SnapshotNotFound)
instead of skipping data; so does a rollback of the table below the query's offset (offsets carry their snapshot's
commit time, so a snapshot rolled back and committed anew under the same id is recognised).

Options (case-insensitive): ``scan.mode`` = latest-full | latest | from-snapshot | from-snapshot-full |
from-timestamp | compacted-full, with ``scan.snapshot-id`` (id or tag name) / ``scan.timestamp-millis``; without a
mode (or ``default``) it is, as Paimon's, from-timestamp when ``scan.timestamp-millis`` or ``scan.timestamp`` (a
date-time, in option ``timeZone`` when it has no offset; ignored when the millis are given) is, from-snapshot when
``scan.snapshot-id`` is, else latest-full (``full`` is latest-full too);
``read.changelog`` = true adds the ``_row_kind`` column (+I/-U/+U/-D; as Paimon's Spark connector, without it
the rows of every kind come without their kind); ``changelog.normalize`` = true (changelog-producer none: look
keys up before/after each snapshot, ``read_changes(normalize=True)``); ``consumer-id`` saves progress in the
table's consumer files whenever Spark commits a batch's offsets (Spark does so when it starts the next batch, so
the consumer trails the query by one batch; a batch ending inside the full first snapshot records nothing, as
Paimon's, since a consumer cannot say "the rest of a full read"): expiration keeps every snapshot not yet
committed, and a new query
with the same id and no checkpoint starts at the consumer's next snapshot (it may re-read the last batch of the
old query; the checkpoint, not the consumer, is what makes a restarted query exactly-once; the consumer file keeps
the commit time of the snapshot before its next one, as the engine's streams do, and a rollback that re-committed
that id fails the new query; ``consumer.ignore-progress``, as a read or table option, starts a new query from its
scan mode instead);
``read.stream.max-snapshots-per-trigger`` (lakemerge's; Paimon's Spark source has none) caps the snapshots of
changes a batch reaches into (the full first snapshot not counted); Paimon's ``read.stream.maxFilesPerTrigger`` /
``maxBytesPerTrigger`` / ``maxRowsPerTrigger`` / ``minRowsPerTrigger`` + ``maxTriggerDelayMs`` cut batches by splits
(spark_glue.stream_limits); with both, a batch stops at whichever is reached first.
``streaming-read-overwrite`` (primary-key tables) / ``streaming-read-append-overwrite`` (append tables), as a
table option or a read option, makes OVERWRITE snapshots deliver their replaced rows (-D) and new rows (+I)
instead of nothing (engine.changelog.overwrite).
``scan.mode`` = from-snapshot-full on a table without snapshots waits for the first commit (as the engine's stream
does; its initial offset is ``{"snapshot": 0, "pending_full": id}``).
``Trigger.AvailableNow`` reads up to the snapshot that was latest when the query started, in as many batches as
the limits make; ``Trigger.Once`` (ReadAllAvailable) ignores the rate limits, as Paimon's.
Schema: a query reads every micro-batch through the table schema matching its DataFrame's columns when it started
(files written after an ALTER TABLE by field id), as Paimon's stream keeps the table object it was created from; a
query restarted from its checkpoint with a new DataFrame reads through that DataFrame's (current) schema.
"""
from __future__ import annotations

import time

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

from engine.changelog.files import ROW_KIND_COLUMN
from engine.errors import InvalidOption, SnapshotNotFound
from engine.options import parse_bool
from spark_glue.reading import to_spark_type
from spark_glue.stream_limits import Guard, ReadLimits, StreamSplit, change_splits, full_splits
from spark_glue.tables import arrow_of_spark, lower_options, open_table, time_zone, timestamp_millis

SCAN_MODE = "scan.mode"
SNAPSHOT_ID = "scan.snapshot-id"
TIMESTAMP_MILLIS = "scan.timestamp-millis"
TIMESTAMP = "scan.timestamp"  # a date-time (or epoch ms), read when scan.timestamp-millis is not given, as Paimon's
TAG_NAME = "scan.tag-name"
READ_CHANGELOG = "read.changelog"
NORMALIZE = "changelog.normalize"
CONSUMER_ID = "consumer-id"
MAX_SNAPSHOTS = "read.stream.max-snapshots-per-trigger"
STREAM_MODES = ("latest-full", "latest", "from-snapshot", "from-snapshot-full", "from-timestamp", "compacted-full")


class FullSplit(InputPartition):
    """One (partition, bucket) split of the start snapshot, read in full as +I rows through table schema
    ``schema_id``."""

    def __init__(self, snapshot_id: int, split, schema_id: int):
        self.snapshot_id = snapshot_id
        self.split = split
        self.schema_id = schema_id


class SnapshotChanges(InputPartition):
    """The changes one snapshot made, read through table schema ``schema_id``; with ``buckets`` (a frozenset of
    (partition bytes, bucket)) only those buckets' changes (a batch ending or starting inside the snapshot)."""

    def __init__(self, snapshot_id: int, schema_id: int, buckets: frozenset | None = None):
        self.snapshot_id = snapshot_id
        self.schema_id = schema_id
        self.buckets = buckets


class OrderedParts(InputPartition):
    """Several parts of one micro-batch (FullSplit / SnapshotChanges), read one after the other by one task, so
    that every key's rows come in snapshot order within one Spark partition (see ChangeStreamReader.partitions)."""

    def __init__(self, parts: tuple):
        self.parts = parts
        self.schema_id = parts[0].schema_id


def offset(snapshot: int, full: bool = False, table=None) -> dict:
    """The offset at ``snapshot``; with ``table``, stamped with that snapshot's commit time (when it exists), by
    which a later batch recognises a snapshot rolled back and committed anew under the same id."""
    from engine.changelog.position import commit_time
    out = {"snapshot": int(snapshot), "full": True} if full else {"snapshot": int(snapshot)}
    stamp = None if table is None else commit_time(table, int(snapshot))
    if stamp is not None:
        out["time"] = stamp
    return out


def cursor(off: dict) -> tuple[int, bool, int]:
    """Where the query is after offset ``off``: (snapshot id, whether that snapshot is read in full, how many of
    its splits -- stream_limits -- were delivered)."""
    s = int(off["snapshot"])
    if "index" in off:
        return s, bool(off.get("full")), int(off["index"]) + 1
    return (s, True, 0) if off.get("full") else (s + 1, False, 0)


def offset_at(pos: tuple[int, bool, int], table) -> dict:
    """The offset of position ``pos`` (``cursor``'s inverse): at a snapshot boundary the whole-snapshot offsets,
    else ``{"snapshot": s, "index": i}`` (+ ``"full": true``), as Paimon's PaimonSourceOffset: splits 0..i of
    snapshot s were delivered."""
    s, full, done = pos
    if done == 0:
        return offset(s, True, table) if full else offset(s - 1, table=table)
    out = offset(s, table=table)
    out["index"] = done - 1
    if full:
        out["full"] = True
    return out


def check_position(table, start: dict) -> None:
    """Raise SnapshotNotFound when the table no longer holds the history the query delivered up to ``start``:
    its latest snapshot is older than ``start`` (a rollback below the checkpoint: the query would wait, then skip
    the snapshots committed anew under the ids it already read; the engine's stream and Paimon's
    NextSnapshotFetcher refuse that too), or snapshot ``start`` has another commit time than when it was read.
    Checked for every new batch (latestOffset) and for every batch planned (partitions: a batch replayed from the
    offset log after a restart, with its start and end)."""
    from engine.changelog import position  # the rule the engine's Table.stream applies
    position.check_position(table, int(start["snapshot"]), start.get("time"),
                            "restart it without its checkpoint", reader="the query")


class ChangeStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """See the module docstring."""

    def __init__(self, options, schema):
        self.options = lower_options(options)
        self.schema = schema
        self.path = self.options.get("path")
        table = open_table(self.path)
        self.table_name = table.name
        self.mode = _startup_mode(self.options)
        if self.mode not in STREAM_MODES:
            raise InvalidOption(SCAN_MODE, self.mode, f"streaming reads support {', '.join(STREAM_MODES)}",
                                table=table.name)
        self.normalize = parse_bool(self.options.get(NORMALIZE, "false"))
        self.consumer_id = self.options.get(CONSUMER_ID)
        if TAG_NAME in self.options:  # Paimon: "Cannot scan from tag in streaming mode"; ignoring it would read
            # latest-full
            raise InvalidOption(TAG_NAME, self.options[TAG_NAME], "a streaming read cannot start from a tag (as in "
                                f"Paimon); start at its snapshot with {SCAN_MODE}=from-snapshot and {SNAPSHOT_ID}=<tag name>",
                                table=table.name)
        self.limits = ReadLimits.of(self.options, table.name, table.schema.options)
        self.last_trigger_ms = 0  # when latestOffset last returned a new offset (minRows / maxTriggerDelayMs)
        self._split_cache: dict[tuple, list[StreamSplit]] = {}
        limit = self.options.get(MAX_SNAPSHOTS)
        try:
            self.max_snapshots = None if limit is None else int(limit)
        except ValueError:
            raise InvalidOption(MAX_SNAPSHOTS, limit, "expected a positive integer", table=table.name) from None
        if self.max_snapshots is not None and self.max_snapshots < 1:
            raise InvalidOption(MAX_SNAPSHOTS, limit, "expected a positive integer", table=table.name)
        self.read_overwrite = _reads_overwrite(table, self.options)
        self.columns = [f.name for f in schema.fields if f.name != ROW_KIND_COLUMN]
        self.with_kind = ROW_KIND_COLUMN in schema.fieldNames()
        self.schema_id = _stream_schema_id(table, self.columns)
        self.target = None  # the AvailableNow bound

    # --- driver side ------------------------------------------------------------------------------------
    def initialOffset(self) -> dict:
        from engine.changelog.consumers import ConsumerManager
        from engine.changelog.streaming import PendingFull, _start
        table = open_table(self.path)
        if self.consumer_id and not self._ignore_progress(table):
            saved = ConsumerManager(table).progress(self.consumer_id)
            if saved is not None:
                nxt, previous = saved
                if previous is not None:  # recorded by commit() or an engine stream: a rollback re-committed it?
                    from engine.changelog import position
                    position.check_position(table, nxt - 1, previous, "reset the consumer (Table.reset_consumer) "
                                            "or set consumer.ignore-progress", reader=f"consumer {self.consumer_id!r}")
                return offset(nxt - 1, table=table)
        sid = self.options.get(SNAPSHOT_ID)
        if sid is not None and sid.lstrip("-").isdigit():
            sid = int(sid)
        ts = self.options.get(TIMESTAMP_MILLIS)
        if ts is None and self.options.get(TIMESTAMP) is not None:
            ts = timestamp_millis(TIMESTAMP, self.options[TIMESTAMP], time_zone(self.options), table.name)
        next_id, full = _start(table, self.mode, sid, ts)  # the engine parses it (InvalidOption naming it)
        if isinstance(full, PendingFull):  # no snapshot yet: latestOffset resolves it once there is one
            return {"snapshot": 0, "pending_full": full.snapshot_id}
        return offset(full.id, True, table) if full is not None else offset(next_id - 1, table=table)

    def _ignore_progress(self, table) -> bool:
        """``consumer.ignore-progress``, as a read option or else the table's (Paimon's dynamic options)."""
        from engine.options import CONSUMER_IGNORE_PROGRESS
        raw = self.options.get(CONSUMER_IGNORE_PROGRESS)
        return parse_bool(raw) if raw is not None else bool(table.schema.table_options.get(CONSUMER_IGNORE_PROGRESS))

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = open_table(self.path).snapshot_manager.latest_id() or 0

    def getDefaultReadLimit(self):
        return self.limits.spark_limit()

    def latestOffset(self, start: dict, limit=None) -> dict:
        """The end of the next batch: ``start`` when there is nothing to read (or a minRows batch is put off).
        With rate limits (unless Spark asks for ReadAllAvailable, e.g. Trigger.Once) the end may be inside a
        snapshot (stream_limits); else it is a whole snapshot, at most max-snapshots-per-trigger past ``start``."""
        from pyspark.sql.streaming.datasource import ReadAllAvailable
        s = int(start["snapshot"])
        table = open_table(self.path)
        check_position(table, start)
        latest = table.snapshot_manager.latest_id() or 0
        if self.target is not None:
            latest = min(latest, self.target)
        if "pending_full" in start:  # from-snapshot-full started on an empty table (engine PendingFull)
            from engine.changelog.streaming import PendingFull
            snap = PendingFull(int(start["pending_full"])).resolve(table) if latest else None
            # an empty batch moves the query to "snapshot snap in full is still to be read"
            return start if snap is None else offset(snap.id, True, table)
        limited = self.limits.any and not isinstance(limit, ReadAllAvailable)
        if limited or "index" in start:
            guard = Guard(self.limits, self.last_trigger_ms, may_defer=self.target is None) if limited else None
            here = cursor(start)
            pos = self._walk(table.through_schema(self.schema_id), here, latest, guard)
            if pos == here or (guard is not None and guard.skip_batch):
                return start
            self.last_trigger_ms = int(time.time() * 1000)
            return offset_at(pos, table)
        end = max(s, latest)
        if self.max_snapshots is not None:
            end = min(end, s + self.max_snapshots)
        if end == s and not start.get("full"):
            return start
        return offset(end, table=table)

    def _walk(self, table, pos: tuple[int, bool, int], latest: int, guard: Guard | None) -> tuple[int, bool, int]:
        """The position after the splits a batch from ``pos`` admits: splits in stream order up to snapshot
        ``latest``, while ``guard`` admits them, reaching into at most max-snapshots-per-trigger snapshots of
        changes (the full first snapshot not counted, as for whole-snapshot batches)."""
        s, full, done = pos
        reached = 0
        while full or s <= latest:
            if not full:
                if self.max_snapshots is not None and reached >= self.max_snapshots:
                    break
                reached += 1
            splits = self._splits(table, s, full)
            taken = 0
            for split in splits[done:]:
                if guard is not None and not guard.admit(split):
                    break
                taken += 1
            if done + taken < len(splits):
                return s, full, done + taken
            s, full, done = s + 1, False, 0
        return s, full, done

    def _splits(self, table, snapshot_id: int, full: bool) -> list[StreamSplit]:
        """The splits of snapshot ``snapshot_id`` (its full read, or its changes) in stream order, cached by id
        and commit time (a snapshot rolled back and committed anew is planned again). Raises SnapshotNotFound
        when it has expired."""
        from engine.changelog.retention import changes_snapshot
        snap = table.snapshot(snapshot_id) if full else changes_snapshot(table, snapshot_id)
        key = (snapshot_id, full, snap.time_millis)
        if key not in self._split_cache:
            if len(self._split_cache) > 256:
                self._split_cache.clear()
            self._split_cache[key] = (full_splits(table, snap) if full else
                                      change_splits(table, snap, read_overwrite=self.read_overwrite,
                                                    normalize=self.normalize))
        return self._split_cache[key]

    def partitions(self, start: dict, end: dict):
        """The batch's parts (``parts``) as Spark partitions, so that each key's rows reach the sink in the order
        the table made them (Spark keeps no order between partitions: a downstream writer or foreachBatch could
        apply a key's older change after its newer one). A batch with changes and more than one part is one
        partition per (partition, bucket) it reads, holding that bucket's full split (a full start) then its
        changes snapshot after snapshot (a key stays in its bucket); when a key may change bucket within the batch
        (``_bucket_groups``) it is one OrderedParts partition reading every part in order."""
        parts = self.parts(start, end)
        if len(parts) > 1 and any(isinstance(p, SnapshotChanges) for p in parts):
            groups = self._bucket_groups(parts)
            return groups if groups is not None else [OrderedParts(tuple(parts))]
        return parts

    def _bucket_groups(self, parts: list[InputPartition]) -> list[InputPartition] | None:
        """``parts`` regrouped by (partition, bucket), each group's parts in batch order; None when a key's changes
        may span buckets: a postpone-bucket table (records move from the postpone bucket into real ones), a
        dynamic-bucket table with cross-partition updates (a key moves partition, and a deleted key is dropped
        from the index), an OVERWRITE snapshot in the batch (a rescale or a partition written anew places keys
        afresh, and a dynamic-bucket index starts empty), or normalized changes (one split per snapshot, keys
        looked up across buckets)."""
        from engine.changelog.retention import changes_snapshot
        from engine.meta.snapshot import COMMIT_KIND_OVERWRITE
        latest = open_table(self.path)
        bucket = latest.schema.table_options.bucket
        if bucket == -2 or (bucket == -1 and latest.schema.cross_partition_update):
            return None
        table = latest.through_schema(self.schema_id)
        groups: dict[tuple, list[InputPartition]] = {}
        for part in parts:
            if isinstance(part, FullSplit):
                groups.setdefault((part.split.partition, part.split.bucket), []).append(part)
                continue
            if part.snapshot_id < 0:
                continue
            if changes_snapshot(table, part.snapshot_id).commit_kind == COMMIT_KIND_OVERWRITE:
                return None
            keys = part.buckets
            if keys is None:
                keys = [split.key for split in self._splits(table, part.snapshot_id, False)]
            if None in keys:
                return None
            for key in sorted(keys, key=repr) if isinstance(keys, frozenset) else keys:
                groups.setdefault(key, []).append(SnapshotChanges(part.snapshot_id, part.schema_id,
                                                                  frozenset([key])))
        if len(groups) < 2:
            return None
        return [group[0] if len(group) == 1 else OrderedParts(tuple(group)) for group in groups.values()]

    def parts(self, start: dict, end: dict) -> list[InputPartition]:
        """The full splits and snapshots of changes the batch from ``start`` to ``end`` delivers, in order."""
        from engine.changelog.retention import earliest_change_id
        table = open_table(self.path).through_schema(self.schema_id)
        # a batch replayed from the offset log on restart comes here without latestOffset: check it too
        check_position(table, start)
        check_position(table, end)
        parts: list[InputPartition] = []
        if "pending_full" in start:  # the batch that resolved a pending full start delivers nothing
            return [SnapshotChanges(-1, self.schema_id)]
        (s, full, done), (e, _, end_done) = cursor(start), cursor(end)
        earliest = earliest_change_id(table) if s < e else None
        while s < e or (s == e and done < end_done):
            if not full and earliest is not None and s < earliest:
                raise SnapshotNotFound(table.name, s)
            if not full and done == 0 and s < e:  # every change of the snapshot
                parts.append(SnapshotChanges(s, self.schema_id))
            else:
                splits = self._splits(table, s, full)[done:end_done if s == e else None]
                if full:
                    parts += [FullSplit(s, split.split, self.schema_id) for split in splits]
                elif splits:
                    parts.append(SnapshotChanges(s, self.schema_id, frozenset(split.key for split in splits)))
            s, full, done = s + 1, False, 0
        return parts or [SnapshotChanges(-1, self.schema_id)]

    def commit(self, end: dict) -> None:
        # an end inside (or before) a full read leaves the consumer as it was, as Paimon's commit: a consumer
        # records where changes resume, so "the rest of snapshot s in full" would read as s's changes only
        if self.consumer_id and "pending_full" not in end and not end.get("full"):
            from engine.changelog.consumers import ConsumerManager
            s = int(end["snapshot"])
            if "index" in end:  # an end inside snapshot s of changes: (the rest of) s is still to be read
                ConsumerManager(open_table(self.path)).record(self.consumer_id, s)
            else:  # with snapshot s's commit time as the offset stamped it (engine.changelog.consumers)
                ConsumerManager(open_table(self.path)).record(self.consumer_id, s + 1, end.get("time"))

    # --- executor side ----------------------------------------------------------------------------------
    def read(self, partition):
        if isinstance(partition, OrderedParts):
            for part in partition.parts:
                yield from self._read_part(part)
        else:
            yield from self._read_part(partition)

    def _read_part(self, partition):
        from engine.changelog.overwrite import follow_up_changes
        from engine.changelog.retention import changes_snapshot
        from engine.changelog.streaming import full_read_split
        from engine.read.file_skips import with_read_options
        # the query's schema, whatever ALTER TABLE did since it started (files are read by field id); the read's
        # scan.ignore-corrupt-files / scan.ignore-lost-files over the table's
        table = with_read_options(open_table(self.path).through_schema(partition.schema_id), self.options)
        if isinstance(partition, FullSplit) and table.schema.is_append_only:
            rows = _full_append_split(table, partition.split, self.columns)
        elif isinstance(partition, FullSplit):
            rows = full_read_split(table, partition.split, self.columns)
        elif partition.snapshot_id < 0:
            rows = None
        else:
            rows = follow_up_changes(table, changes_snapshot(table, partition.snapshot_id), self.columns,
                                     normalize=self.normalize, read_overwrite=self.read_overwrite,
                                     buckets=partition.buckets)
        if rows is None or rows.num_rows == 0:
            return iter(())
        target = arrow_of_spark(self.schema)
        names = target.names
        out = pa.Table.from_arrays([to_spark_type(rows.column(n), target.field(n).type, table=table.name, name=n)
                                    for n in names], schema=target)
        return iter(out.to_batches(max_chunksize=64 * 1024))


def _startup_mode(options: dict[str, str]) -> str:
    """The scan mode of ``options`` (engine.changelog.streaming.startup_mode: Paimon's CoreOptions.startupMode)."""
    from engine.changelog.streaming import startup_mode
    return startup_mode(options.get(SCAN_MODE), snapshot_id=options.get(SNAPSHOT_ID),
                        timestamp_millis=options.get(TIMESTAMP_MILLIS) or options.get(TIMESTAMP))


def _stream_schema_id(table, columns: list[str]) -> int:
    """The table schema a query over ``columns`` reads every micro-batch through, fixed when the query starts (as
    Paimon's stream reads through the table object it was created from): the newest schema whose columns are
    exactly ``columns`` (the DataFrame's schema; it may predate an ALTER TABLE run before the query started), else
    the newest that has them all (option ``columns``). Raises SchemaMismatch naming the table and a column no
    schema has."""
    from engine.errors import SchemaMismatch
    sm = table.schema_manager
    candidates = [table.schema] + [sm.schema(i) for i in reversed(sm.ids()) if i != table.schema.id]
    for schema in candidates:
        if list(schema.field_names) == columns:
            return schema.id
    for schema in candidates:
        if set(columns) <= set(schema.field_names):
            return schema.id
    missing = [c for c in columns if c not in table.schema.field_names]
    raise SchemaMismatch(f"column {missing[0]!r} of this stream is in no schema of the table; create the streaming "
                         "DataFrame again", table=table.name, column=missing[0])


def _reads_overwrite(table, options: dict[str, str]) -> bool:
    """Whether the query emits OVERWRITE snapshots: the table's ``streaming-read-overwrite`` (primary-key tables) /
    ``streaming-read-append-overwrite`` (append tables), which a read option of the same name overrides (as
    Paimon's dynamic options do). Raises InvalidOption for a value Paimon's schema validation refuses."""
    from engine.changelog.overwrite import reads_overwrite
    from engine.options import (
        STREAMING_READ_APPEND_OVERWRITE,
        STREAMING_READ_OVERWRITE,
        TableOptions,
    )
    raw = dict(table.schema.options)
    raw.update({k: v for k, v in options.items() if k in (STREAMING_READ_OVERWRITE, STREAMING_READ_APPEND_OVERWRITE)})
    opts = TableOptions(raw, table=table.name)
    opts.check_streaming_read_overwrite(has_primary_key=not table.schema.is_append_only)
    return reads_overwrite(table, opts)


def _full_append_split(table, split, columns: list[str]) -> pa.Table:
    """An append table's split for a full first read: its files' rows in append order, all +I (the engine's
    ``full_read_split`` merges by key, and append files have none)."""
    from engine.append.read import ordered_files, read_append_file
    from engine.read.file_skips import read_skips
    from engine.read.split_read import SplitReader
    reader = SplitReader(table.file_io, table.schema, table.schema_manager.schema, read_skips(table))
    rows = pa.concat_tables([read_append_file(reader, split, f, columns) for f in ordered_files(split)])
    return rows.append_column(ROW_KIND_COLUMN, pa.array(["+I"] * rows.num_rows, pa.string()))
