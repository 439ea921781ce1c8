"""Streaming reads of a table's changes: ``spark.readStream.format("lakemerge").load(path)``.

Offsets are snapshot ids: ``{"snapshot": s}`` means "every change up to and including snapshot s was delivered";
a query's initial offset of a ``*-full`` mode is ``{"snapshot": s, "full": true}`` ("snapshot s in full is still to
be read"). A micro-batch from ``start`` to ``end`` delivers (the full rows of the start snapshot, if pending, then)
the changes of snapshots start+1 .. end, as the engine's ``read_changes`` / ``stream`` define them. Spark keeps the
offsets in the query's checkpoint, so a restarted query continues after the last delivered snapshot: nothing is
lost, nothing repeated. A snapshot the query still needs that has expired fails the query (SnapshotNotFound)
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
the consumer trails the query by one batch): expiration keeps every snapshot not yet committed, and a new query
with the same id and no checkpoint starts at the consumer's next snapshot (it may re-read the last batch of the
old query; the checkpoint, not the consumer, is what makes a restarted query exactly-once; the consumer file keeps
the commit time of the snapshot before its next one, as the engine's streams do, and a rollback that re-committed
that id fails the new query; ``consumer.ignore-progress``, as a read or table option, starts a new query from its scan mode instead);
``read.stream.max-snapshots-per-trigger`` caps snapshots per batch (Paimon's ``read.stream.maxFilesPerTrigger`` /
``maxBytesPerTrigger`` / ``maxRowsPerTrigger`` / ``minRowsPerTrigger`` / ``maxTriggerDelayMs`` are refused with
InvalidOption, not ignored).
``streaming-read-overwrite`` (primary-key tables) / ``streaming-read-append-overwrite`` (append tables), as a
table option or a read option, makes OVERWRITE snapshots deliver their replaced rows (-D) and new rows (+I)
instead of nothing (engine.changelog.overwrite).
``scan.mode`` = from-snapshot-full on a table without snapshots waits for the first commit (as the engine's stream
does; its initial offset is ``{"snapshot": 0, "pending_full": id}``).
``Trigger.AvailableNow`` reads up to the snapshot that was latest when the query started.
Schema: a query reads every micro-batch through the table schema matching its DataFrame's columns when it started
(files written after an ALTER TABLE by field id), as Paimon's stream keeps the table object it was created from; a
query restarted from its checkpoint with a new DataFrame reads through that DataFrame's (current) schema.
"""
from __future__ import annotations

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

from engine.changelog.files import ROW_KIND_COLUMN
from engine.errors import InvalidOption, SnapshotNotFound
from engine.options import parse_bool
from spark_glue.reading import to_spark_type
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
# Paimon's Spark rate limits (SparkConnectorOptions), which split a snapshot's files over micro-batches: not
# implemented here (a batch holds whole snapshots), so they are refused rather than ignored
PAIMON_RATE_LIMITS = ("read.stream.maxfilespertrigger", "read.stream.maxbytespertrigger",
                      "read.stream.maxrowspertrigger", "read.stream.minrowspertrigger", "read.stream.maxtriggerdelayms")
STREAM_MODES = ("latest-full", "latest", "from-snapshot", "from-snapshot-full", "from-timestamp", "compacted-full")


class FullSplit(InputPartition):
    """One (partition, bucket) split of the start snapshot, read in full as +I rows through table schema
    ``schema_id``."""

    def __init__(self, snapshot_id: int, split, schema_id: int):
        self.snapshot_id = snapshot_id
        self.split = split
        self.schema_id = schema_id


class SnapshotChanges(InputPartition):
    """The changes one snapshot made, read through table schema ``schema_id``."""

    def __init__(self, snapshot_id: int, schema_id: int):
        self.snapshot_id = snapshot_id
        self.schema_id = schema_id


def offset(snapshot: int, full: bool = False, table=None) -> dict:
    """The offset at ``snapshot``; with ``table``, stamped with that snapshot's commit time (when it exists), by
    which a later batch recognises a snapshot rolled back and committed anew under the same id."""
    from engine.changelog.position import commit_time
    out = {"snapshot": int(snapshot), "full": True} if full else {"snapshot": int(snapshot)}
    stamp = None if table is None else commit_time(table, int(snapshot))
    if stamp is not None:
        out["time"] = stamp
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
        for key in PAIMON_RATE_LIMITS:
            if key in self.options:
                raise InvalidOption(key, self.options[key], f"not supported by lakemerge's streaming source (a "
                                    f"micro-batch holds whole snapshots); use {MAX_SNAPSHOTS}", table=table.name)
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

    def latestOffset(self, start: dict, limit=None) -> dict:
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
        end = max(s, latest)
        if self.max_snapshots is not None:
            end = min(end, s + self.max_snapshots)
        if end == s and not start.get("full"):
            return start
        return offset(end, table=table)

    def partitions(self, start: dict, end: dict):
        from engine.changelog.retention import earliest_change_id
        table = open_table(self.path).through_schema(self.schema_id)
        s, e = int(start["snapshot"]), int(end["snapshot"])
        # a batch replayed from the offset log on restart comes here without latestOffset: check it too
        check_position(table, start)
        check_position(table, end)
        parts: list[InputPartition] = []
        if "pending_full" in start:  # the batch that resolved a pending full start delivers nothing
            return [SnapshotChanges(-1, self.schema_id)]
        if start.get("full"):
            snap = table.snapshot(s)
            parts += [FullSplit(s, split, self.schema_id) for split in table.scan().plan(snap)]
        if e > s:
            earliest = earliest_change_id(table)
            if earliest is not None and s + 1 < earliest:
                raise SnapshotNotFound(table.name, s + 1)
            parts += [SnapshotChanges(sid, self.schema_id) for sid in range(s + 1, e + 1)]
        return parts or [SnapshotChanges(-1, self.schema_id)]

    def commit(self, end: dict) -> None:
        if self.consumer_id and "pending_full" not in end:
            from engine.changelog.consumers import ConsumerManager
            s = int(end["snapshot"])  # a full end: snapshot s in full is still to be read, so s on is needed
            # with snapshot s's commit time as the offset stamped it (engine.changelog.consumers)
            ConsumerManager(open_table(self.path)).record(self.consumer_id, s if end.get("full") else s + 1,
                                                          None if end.get("full") else end.get("time"))

    # --- executor side ----------------------------------------------------------------------------------
    def read(self, partition):
        from engine.changelog.overwrite import follow_up_changes
        from engine.changelog.retention import changes_snapshot
        from engine.changelog.streaming import full_read_split
        # the query's schema, whatever ALTER TABLE did since it started (files are read by field id)
        table = open_table(self.path).through_schema(partition.schema_id)
        if isinstance(partition, FullSplit) and table.schema.is_append_only:
            rows = _full_append_split(table, partition.split, self.columns)
        elif isinstance(partition, FullSplit):
            rows = full_read_split(table, partition.split, self.columns)
        elif partition.snapshot_id < 0:
            rows = None
        else:
            rows = follow_up_changes(table, changes_snapshot(table, partition.snapshot_id), self.columns,
                                     normalize=self.normalize, read_overwrite=self.read_overwrite)
        if rows is None or rows.num_rows == 0:
            return iter(())
        target = arrow_of_spark(self.schema)
        names = target.names
        out = pa.Table.from_arrays([to_spark_type(rows.column(n), target.field(n).type) for n in names], schema=target)
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
    from engine.read.split_read import SplitReader
    reader = SplitReader(table.file_io, table.schema, table.schema_manager.schema)
    rows = pa.concat_tables([read_append_file(reader, split, f, columns) for f in ordered_files(split)])
    return rows.append_column(ROW_KIND_COLUMN, pa.array(["+I"] * rows.num_rows, pa.string()))
