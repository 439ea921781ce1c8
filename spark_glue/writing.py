"""Bucket-parallel writes through the Python Data Source API, committed once on the driver.

Protocol (one write job = one snapshot):
- ``writer()`` runs once per job on the driver side: it pins the base snapshot and draws a job token.
- Each task writes its rows with the engine's ``TableWrite`` (sorted level-0 runs per bucket it sees, sequence
  numbers continuing from the pinned base) into data, changelog and deletion-vector index files whose names carry
  the job token (``job_files``), and returns the pickled ``CommitMessage``s. A task that raises deletes its own
  files.
- ``commit()`` publishes all messages of the successful task attempts as ONE snapshot (APPEND, or OVERWRITE in
  overwrite mode), then deletes every file carrying the job token that the snapshot does not list: the leftovers
  of failed or retried attempts (Spark drops their messages and may never tell ``abort()``). ``abort()`` deletes
  all files of the job. Files of other jobs are never touched (their names carry other tokens).
- Exactly once: with ``commit.identifier`` (or a streaming batch id) a replay of the newest identifier that the
  commit user published is skipped and its files are deleted; an identifier below the user's newest one raises
  InvalidInput (its files deleted, nothing committed): Spark replays only its last batch, so it is new data
  under a reused commit user (a query restarted without its checkpoint).
- Input not placed by bucket (``df.write.format`` cannot repartition): tasks that share a bucket number their
  records on separate sequence lanes (``write_task``), and since their compactions of it would conflict, the
  driver drops them, commits the data, then compacts those buckets itself (``compact_dropped_buckets``). An
  overwrite drops every task's compaction (it replaces the files they started from) and compacts the written
  buckets the same way: in deletion-vector mode batch reads see no level-0 file until it is compacted.
- Postpone-bucket primary-key tables (``bucket = -2``), as Paimon's PaimonSparkWriter (batch jobs and streaming
  micro-batches alike; ``postpone_write_mode``). Without ``postpone.batch-write-fixed-bucket`` (POSTPONED) tasks
  write postponed files (engine.postpone.write.PostponedWrite, on sequence lanes), committed as they are (a
  later compaction moves them into real buckets). With it (the default) rows land in real buckets, one bucket
  count per partition. DIRECT: the counts are known before the tasks run -- decided by ``write_table`` on the
  driver (spark_glue.postpone_buckets, ``use_bucket_counts``), or each partition's known count (its real-bucket
  files in the task's base; none for an overwrite) else ``postpone.default-bucket-num`` -- and the tasks write
  real buckets (engine.postpone.write.FixedBucketPostponeWrite), as a fixed-bucket table's. STAGED (the data
  source without that default, as it cannot measure its input first): tasks write real buckets for partitions
  with a known count and stage postponed files for the others (engine.postpone.staged.PartlyStagedWrite); the
  driver rewrites the staged records into real buckets (engine.postpone.staged.rewrite_staged, one writer, files
  carrying the job tag), as SparkPostponeStagedCommitter, commits them with the tasks' real-bucket files, and
  deletes the staged files with the job's leftovers.
"""
from __future__ import annotations

import logging
import os
import pickle
import uuid
from dataclasses import dataclass, replace

import pyarrow as pa
from pyspark.sql.datasource import (DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage)

from engine.errors import CommitConflict, CommitRetriesExhausted, InvalidInput, SchemaMismatch, UnsupportedFeature
from engine.meta.snapshot import BATCH_COMMIT_IDENTIFIER
from engine.options import POSTPONE_BATCH_WRITE_FIXED_BUCKET, POSTPONE_DEFAULT_BUCKET_NUM, WRITE_ONLY, parse_bool
from engine.postpone import POSTPONE_BUCKET
from engine.table import Table
from engine.types import rebased_offsets
from engine.write.commit_message import CommitMessage
from engine.write.table_write import TableWrite
from spark_glue.epoch_seconds import refused_cast, spark_epoch_seconds
from spark_glue.job_files import remove_tagged_files, tag_files
from spark_glue.spark_text import spark_text
from spark_glue.tables import (
    lower_options,
    open_or_create_table,
    open_table,
    remove_created_table,
    session_time_stamps,
    spark_decimals,
    time_zone,
)

COMMIT_USER = "commit.user"
COMMIT_IDENTIFIER = "commit.identifier"
ROW_KIND_COLUMN = "rowkind.column"  # an input column of +I/-U/+U/-D that is consumed, not stored
DYNAMIC_OVERWRITE = "dynamic-partition-overwrite"
# Paimon's Spark write options (SparkConnectorOptions): schema merging on write, see merge_input_schema
MERGE_SCHEMA = "write.merge-schema"
TYPE_WIDENING = "write.merge-schema.type-widening"
EXPLICIT_CAST = "write.merge-schema.explicit-cast"
# Sequence lanes of data source write tasks: a bucket's numbers grow by this factor per record, which leaves room
# for 2^47 records per bucket (and input partitions 0..65535 never share a lane).
SEQUENCE_LANES = 1 << 16

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TaskFiles(WriterCommitMessage):
    """What one successful task attempt hands to the driver: its commit messages and its files' name tag."""
    messages: tuple[CommitMessage, ...]
    tag: str = ""


class WriteJob:
    """Picklable description of one write job (batch) or one streaming query (stream)."""

    def __init__(self, options, overwrite: bool, *, streaming: bool = False, schema=None):
        opts = lower_options(options)
        self.path = opts.get("path")
        self.created: tuple[str, ...] = ()  # directories this job's first write created (tables.open_or_create_table)
        if schema is None:
            table = open_table(self.path)
        else:
            table, self.created = open_or_create_table(self.path, opts, schema,
                                                       drop_columns=[opts.get(ROW_KIND_COLUMN)])
        try:
            if schema is not None and not self.created:  # on the driver, once, before any task (data source path)
                table = merge_input_schema(table, schema, opts, case_sensitive=None)
            self._plan(table, opts, overwrite, streaming, schema)
        except BaseException:
            remove_created_table(self.created)
            raise

    def _plan(self, table: Table, opts: dict, overwrite: bool, streaming: bool, schema) -> None:
        self.table_name = table.name
        require_spark_writable(table)
        self.postpone = postpone_write_mode(table)
        self.bucket_counts: dict[bytes, int] | None = None
        self.renames: dict[str, str] = {}
        self.absent: list[str] = []
        self.input_schema = schema  # resolved again by the tasks, which know spark.sql.caseSensitive
        self.merge_schema = parse_bool(opts.get(MERGE_SCHEMA, "false"))  # nested fields the input lacks: nulls
        self.case_sensitive = False  # write_table's tasks take the driver's renames (see write_task)
        if schema is not None:
            self.renames, self.absent = check_input_schema(table, schema, opts.get(ROW_KIND_COLUMN),
                                                           case_sensitive=None, merge_schema=self.merge_schema)
        self.base_id = table.latest_snapshot_id()
        self.token = uuid.uuid4().hex[:16]
        self.streaming = streaming
        user = opts.get(COMMIT_USER)
        if streaming and not user:
            location = opts.get("checkpointlocation")
            if not location:
                raise InvalidInput("a streaming write needs a stable commit user for exactly-once commits: set "
                                   "option 'checkpointLocation' or 'commit.user'", table=table.name)
            user = "lakemerge-stream-" + uuid.uuid5(uuid.NAMESPACE_URL, os.path.abspath(location)).hex
        self.commit_user = user or f"lakemerge-spark-{self.token}"
        ident = opts.get(COMMIT_IDENTIFIER)
        try:
            self.identifier = None if ident is None else int(ident)
        except ValueError:
            raise InvalidInput(f"option {COMMIT_IDENTIFIER} must be an integer, got {ident!r}",
                               table=table.name) from None
        self.kind_column = opts.get(ROW_KIND_COLUMN)
        self.overwrite = overwrite
        # a write option, else the table option (Paimon merges the two), else true
        self.dynamic = parse_bool(opts.get(DYNAMIC_OVERWRITE, table.options.get(DYNAMIC_OVERWRITE, "true")))

    def use_bucket_counts(self, counts: dict[bytes, int]) -> None:
        """A fixed-bucket write of a postpone table with the bucket counts the driver decided for its input
        (spark_glue.postpone_buckets): its tasks write real buckets (DIRECT)."""
        if self.postpone not in (DIRECT, STAGED):
            raise InvalidInput("bucket counts are decided only for fixed-bucket writes of a postpone table",
                               table=self.table_name)
        self.postpone, self.bucket_counts = DIRECT, dict(counts)

    # --- executor side ------------------------------------------------------------------------------
    def tag_for(self, batch_id) -> str:
        """The name tag of this job's files (of one micro-batch, for a stream), see ``job_files``."""
        return f"{self.token}-" if batch_id is None else f"{self.token}-b{batch_id}-"

    def write_task(self, batches, *, placed_by_bucket: bool = False) -> TaskFiles:
        """Write this task's rows; its files and messages. Unless the input is ``placed_by_bucket`` (each
        (partition, bucket) in one task, see api.distribute_by_bucket), several tasks may write one bucket, so each
        numbers its records on its own sequence lane (its partition id modulo ``SEQUENCE_LANES``): two records of
        a key from different tasks never tie, and every reader (lakemerge, Paimon) picks the same one."""
        from pyspark import TaskContext
        batch_id = None
        if self.streaming:
            batch_id = TaskContext.get().getLocalProperty("streaming.sql.batchId")
            if batch_id is None:
                raise InvalidInput("streaming write task without a micro-batch id", table=self.table_name)
        tag = self.tag_for(batch_id)
        table = tag_files(open_table(self.path), tag)
        renames, absent, sensitive = self.renames, self.absent, self.case_sensitive
        if self.input_schema is not None:  # now with the query's spark.sql.caseSensitive
            from spark_glue.columns import task_case_sensitive
            sensitive = bool(task_case_sensitive())
            renames, absent = check_input_schema(table, self.input_schema, self.kind_column,
                                                 case_sensitive=sensitive, merge_schema=self.merge_schema)
        schema = table.schema
        identifier = BATCH_COMMIT_IDENTIFIER if self.identifier is None else self.identifier
        lane = (0, 1) if placed_by_bucket else (TaskContext.get().partitionId() % SEQUENCE_LANES, SEQUENCE_LANES)
        if schema.is_append_only:  # no keys to order: tasks may share buckets freely
            writer = table.new_write(commit_user=self.commit_user, commit_identifier=identifier,
                                     overwrite=self.overwrite)
        elif self.postpone == DIRECT:  # real buckets, counts decided before the tasks (module docstring)
            from engine.postpone.write import FixedBucketPostponeWrite
            writer = FixedBucketPostponeWrite(table, overwrite=self.overwrite, decided=self.bucket_counts or {},
                                              commit_user=self.commit_user, commit_identifier=identifier,
                                              sequence_lane=lane)
        elif self.postpone == STAGED:  # real buckets where the count is known, else staged (module docstring)
            from engine.postpone.staged import PartlyStagedWrite
            writer = PartlyStagedWrite(table, overwrite=self.overwrite, commit_user=self.commit_user,
                                       commit_identifier=identifier, sequence_lane=lane)
        elif self.postpone:  # POSTPONED: committed as they are
            from engine.postpone.write import PostponedWrite
            writer = PostponedWrite(table, commit_user=self.commit_user, commit_identifier=identifier,
                                    sequence_lane=lane)
        else:
            # an overwrite ignores the replaced files and places rows by the current 'bucket' (rescale-bucket)
            writer = TableWrite(table, commit_user=self.commit_user, commit_identifier=identifier, sequence_lane=lane,
                                overwrite=self.overwrite)
        if not self.streaming:  # number sequences from the snapshot the job started from
            writer.base_snapshot = None if self.base_id is None else table.snapshot(self.base_id)
        zone = time_zone({})  # the query's session time zone: Spark's store assignment casts timestamps in it
        with writer:
            for batch in batches:
                rows = pa.Table.from_batches([batch])
                if rows.num_rows == 0:
                    continue
                rows = by_table_names(rows, renames, absent, table.arrow_schema, case_sensitive=sensitive)
                rows = session_time_stamps(rows, table.arrow_schema, zone)
                rows = spark_decimals(rows, table.arrow_schema, table.name)
                rows = spark_text(rows, table.arrow_schema, zone)
                rows = spark_epoch_seconds(rows, table.arrow_schema, table.name)
                if self.kind_column:
                    if self.kind_column not in rows.column_names:
                        raise InvalidInput(f"row-kind column {self.kind_column!r} is not in the input",
                                           table=table.name, column=self.kind_column)
                    kinds = rows.column(self.kind_column)
                    writer.write(rows.drop_columns([self.kind_column]), row_kinds=kinds)
                else:
                    writer.write(rows)
            messages = writer.prepare_commit()
        return TaskFiles(tuple(messages), tag)

    # --- driver side --------------------------------------------------------------------------------
    def commit_job(self, task_files, identifier: int | None = None) -> int | None:
        """Publish the messages of all successful tasks as one snapshot; returns its id (or the id that already
        holds this identifier, or the latest id when there was nothing to write)."""
        table = open_table(self.path)
        messages = [m for tf in task_files if tf is not None for m in tf.messages]
        if self.postpone == POSTPONED:  # postponed writers never compact
            dropped = set()
        else:
            dropped = {(m.partition, m.bucket) for m in messages} if self.overwrite else shared_buckets(task_files)
            dropped = {(p, b) for p, b in dropped if b != POSTPONE_BUCKET}  # staged files: rewritten, not compacted
        messages = [without_compaction(table, m) if (m.partition, m.bucket) in dropped else m for m in messages]
        ident = self.identifier if identifier is None else int(identifier)
        tag = self.task_tag(task_files, identifier)
        if ident is not None:
            messages = [replace(m, commit_identifier=ident) for m in messages]
            done = committed_snapshot(table, self.commit_user, ident)
            if done is not None:  # a replayed batch: already applied once
                remove_tagged_files(table, tag, keep=set())
                newest = table.snapshot(done).commit_identifier
                if newest > ident:  # Spark replays only its last batch: an older id is new data under a reused user
                    raise InvalidInput(
                        f"commit user {self.commit_user!r} already committed up to batch {newest}, so batch {ident} "
                        f"is not the replay of a committed batch (only the newest batch {newest} can be): the query "
                        "was restarted without its checkpoint, or another query uses the same commit user; give it "
                        "its own 'commit.user' (or checkpointLocation). Nothing was written", table=self.table_name)
                return done
        if self.postpone == STAGED:  # the staged partitions' messages are replaced by their rewrite's
            self.check_staged_apart(table, messages, tag)
            messages = ([m for m in messages if m.bucket != POSTPONE_BUCKET]
                        + self.rewrite_staged(table, messages, tag, ident))
        try:
            if self.overwrite:
                scope = "dynamic" if (self.dynamic and table.partition_keys) else None
                # base: a job that writes nothing is not the replay of an earlier job of the same commit user
                sid = table.commit_overwrite(messages, scope, commit_user=self.commit_user,
                                             commit_identifier=BATCH_COMMIT_IDENTIFIER if ident is None else ident,
                                             base_snapshot_id=self.base_id)
            elif ident is None:
                sid = table.commit(messages)
            else:  # an empty batch's snapshot (snapshot.ignore-empty-commit=false) is the stream's too
                sid = table.commit(messages, commit_user=self.commit_user, commit_identifier=ident)
        except (CommitConflict, CommitRetriesExhausted):
            remove_tagged_files(table, tag, keep=set())
            raise
        # The data is committed: nothing below may raise, or Spark would report the write as failed.
        try:
            remove_tagged_files(table, tag, keep=message_file_names(messages))
            if dropped and not table.schema.is_append_only and not table.schema.table_options.get(WRITE_ONLY):
                sid = compact_dropped_buckets(table, dropped, self.commit_user,
                                              BATCH_COMMIT_IDENTIFIER if ident is None else ident, sid,
                                              changelog=not self.overwrite)
        except Exception as e:  # noqa: BLE001 - leftovers are orphans for remove_orphan_files, never data
            log.warning("table %s: snapshot %s is committed, but the work after it failed: %s", table.name, sid, e)
        return sid

    def check_staged_apart(self, table: Table, messages, tag: str) -> None:
        """Raise CommitConflict (after deleting every file of the job) when one partition was both staged by a
        task and written to real buckets by another: the tasks saw different base snapshots (a stream's tasks
        each take the latest, and a concurrent commit gave the partition real buckets meanwhile), and the
        rewrite would number the staged records from the latest snapshot, so a key both tasks wrote could get
        one sequence number twice. A replay of the micro-batch sees the partition's count in every task."""
        from engine.postpone.staged import staged_files
        direct = {m.partition for m in messages if m.bucket != POSTPONE_BUCKET and m.new_files}
        both = direct & set(staged_files(messages))
        if both:
            remove_tagged_files(table, tag, keep=set())
            raise CommitConflict(table.name, f"partition {table.scan().partition_values(next(iter(both)))} got "
                                 "real buckets from a concurrent commit while this write ran: some tasks staged "
                                 "its rows, others wrote them to its buckets; retry the write")

    def rewrite_staged(self, table: Table, messages, tag: str, ident: int | None) -> list[CommitMessage]:
        """The fixed-bucket messages of the tasks' staged postponed files (engine.postpone.staged), written here
        with the job's tag from the job's base snapshot (a stream's micro-batch: the latest). On failure every
        file of the job is deleted and the error re-raised."""
        from engine.postpone.staged import rewrite_staged
        base = None if self.streaming or self.base_id is None else table.snapshot(self.base_id)
        try:
            return rewrite_staged(tag_files(open_table(self.path), tag), messages, base=base,
                                  overwrite=self.overwrite, commit_user=self.commit_user,
                                  commit_identifier=BATCH_COMMIT_IDENTIFIER if ident is None else ident)
        except BaseException:
            remove_tagged_files(table, tag, keep=set())
            raise

    def abort_job(self, task_files, batch_id=None) -> None:
        """Delete every file of the job (of the micro-batch ``batch_id`` for a stream), unless its commit landed
        (Spark aborts after any error in commit, including an unknown commit outcome): then the files belong to
        the table and nothing is deleted. A batch job that created the table (a first write) then removes it too
        (tables.remove_created_table: not once another job has written into it). Only snapshots newer than the job's base are read: the job's own commit
        can only be one of them. A commit user reused by a concurrent job can make that job's snapshot look like
        this one's; the files then stay as orphans (``remove_orphan_files``), never as lost data."""
        table = open_table(self.path)
        ident = self.identifier if batch_id is None else int(batch_id)
        landed = committed_snapshot(table, self.commit_user, BATCH_COMMIT_IDENTIFIER if ident is None else ident,
                                    newer_than=self.base_id)
        if landed is not None:
            log.warning("table %s: not deleting the aborted job's files: snapshot %s holds its commit",
                        table.name, landed)
            return
        remove_tagged_files(table, self.task_tag(task_files, batch_id), keep=set())
        if not self.streaming:  # a failed first write leaves no table (a stream's outlives a failed micro-batch)
            remove_created_table(self.created)

    def task_tag(self, task_files, batch_id=None) -> str:
        """The file-name tag the tasks used. Spark may build the committing writer separately from the one it
        shipped to the tasks (streaming does), so the tasks' own tag is read from their messages."""
        for tf in task_files or ():
            if tf is not None and tf.tag:
                return tf.tag
        return self.tag_for(batch_id)


POSTPONED, DIRECT, STAGED = "postponed", "direct", "staged"  # how a job writes a postpone table (module docstring)


def postpone_write_mode(table: Table, bucket_counts=None) -> str | None:
    """How a Spark job writes ``table``: None unless it is a postpone-bucket primary-key table; POSTPONED without
    ``postpone.batch-write-fixed-bucket``; DIRECT (tasks write real buckets) when the driver decided the
    ``bucket_counts`` or ``postpone.default-bucket-num`` is set; STAGED else."""
    opts = table.schema.table_options
    if table.schema.is_append_only or opts.bucket != POSTPONE_BUCKET:
        return None
    if not opts.get(POSTPONE_BATCH_WRITE_FIXED_BUCKET):
        return POSTPONED
    if bucket_counts is not None or opts.get(POSTPONE_DEFAULT_BUCKET_NUM) is not None:
        return DIRECT
    return STAGED


def require_spark_writable(table: Table) -> None:
    """Raise InvalidInput (naming the table) for tables Spark tasks cannot write: primary-key tables in dynamic
    bucket mode (keys are assigned to buckets through an index that parallel tasks would race on). Append tables
    of any bucket mode and postpone-bucket tables (``bucket = -2``) are writable; UnsupportedFeature for a
    postpone table whose primary key lacks partition columns (cross-partition update), which lakemerge does not
    write in that mode, and for a table with a Paimon feature lakemerge cannot write (engine.refused_options: row
    tracking, ...), refused here on the driver before any task starts."""
    from engine.refused_options import require_writable
    require_writable(table.schema.options, table.name)
    nb = table.schema.table_options.bucket
    if not table.schema.is_append_only and nb == POSTPONE_BUCKET:
        if table.schema.cross_partition_update:
            raise UnsupportedFeature(f"table {table.name!r}: bucket=-2 (postpone) with a primary key that lacks "
                                     "partition columns (cross-partition update) cannot be written by lakemerge")
        return
    if not table.schema.is_append_only and nb < 1:
        raise InvalidInput(f"Spark writes to a primary-key table need a fixed bucket count (option 'bucket' > 0), "
                           f"this table has bucket={nb}; write it with the engine (Table.write)", table=table.name)


SESSION_PREFIX = "spark.paimon."  # Paimon's connector reads session conf under it as options (OptionUtils)


def with_session_merge_options(opts: dict, spark) -> dict:
    """``opts`` with ``write.merge-schema`` and its ``.type-widening`` / ``.explicit-cast`` taken from the session's
    ``spark.paimon.<option>`` conf where ``opts`` does not set them (Paimon's OptionUtils: session conf under that
    prefix is a dynamic option, which a write option overrides). Only these options are taken: lakemerge reads no
    other ``spark.paimon.`` conf."""
    given = {k.lower() for k in opts}
    out = dict(opts)
    for key in (MERGE_SCHEMA, TYPE_WIDENING, EXPLICIT_CAST):
        value = spark.conf.get(SESSION_PREFIX + key, None)
        if key not in given and value is not None:
            out[key] = str(value)
    return out


def merge_input_schema(table: Table, spark_schema, opts: dict, case_sensitive: bool | None = False) -> Table:
    """``table``, first evolved to take ``spark_schema``'s columns if option ``write.merge-schema`` is true (with
    ``write.merge-schema.type-widening`` / ``.explicit-cast``: engine.merge_schema, Paimon's SchemaMergingUtils),
    as Paimon's Spark writer does on the driver before its tasks run. Spark types map to Paimon types as on a first
    write (the Arrow schema Spark hands to Python, then the engine's Arrow mapping). A column is new when it names
    no table column (ignoring case unless ``case_sensitive``; a data source planner cannot see
    ``spark.sql.caseSensitive`` and passes None). The ``rowkind.column`` is never added. An input the merged
    schema would refuse too (check_input_schema with ``case_sensitive``) is refused before that schema is
    published. Raises as ``Table.merge_schema`` (SchemaMismatch, UnsupportedFeature, InvalidSchema naming the
    table and column)."""
    opts = {k.lower(): v for k, v in opts.items()}
    if not parse_bool(opts.get(MERGE_SCHEMA, "false")):
        return table
    import copy

    from engine.merge_schema import merge_input_schema as merge
    from spark_glue.tables import arrow_of_spark
    kind_column = opts.get(ROW_KIND_COLUMN)

    def check(merged) -> None:
        view = copy.copy(table)
        view.schema = merged
        check_input_schema(view, spark_schema, kind_column, case_sensitive=case_sensitive, merge_schema=True)
    merge(table, arrow_of_spark(spark_schema), type_widening=parse_bool(opts.get(TYPE_WIDENING, "false")),
          explicit_cast=parse_bool(opts.get(EXPLICIT_CAST, "false")), case_sensitive=bool(case_sensitive),
          ignore=[c for c in (kind_column,) if c], check=check)
    return table


def check_input_schema(table: Table, spark_schema, kind_column: str | None = None, *,
                       case_sensitive: bool | None = False, merge_schema: bool = False
                       ) -> tuple[dict[str, str], list[str]]:
    """Resolve the input's columns against ``table``'s by name before any row is written, as Paimon's Spark writer
    does (PaimonOutputResolver with Spark's resolver: case-insensitive unless ``case_sensitive``, the session's
    ``spark.sql.caseSensitive``, see spark_glue.columns): returns (input name -> table name, for the names that
    differ in case only; the nullable table columns the input lacks, which are written as nulls). ``case_sensitive``
    None (the setting is unknown: a data source planner) accepts what either setting accepts; its tasks check again.
    Refused with SchemaMismatch naming the column and the table: columns the table lacks, an ambiguous name (two
    table columns, or two input columns, equal ignoring case while insensitive), two input columns naming one
    table column, a missing NOT NULL column, and text for a non-text column (Spark's ANSI store assignment refuses
    string -> number, date, boolean; casting by value would pass on '5' and fail later on 'abc'), what
    spark_glue.epoch_seconds.refused_cast refuses (a date-time to or from a number, but a TIMESTAMP to or from an
    integer), and nested struct fields that do not match the table's by name (``_nested_mismatch``: a missing one
    is written as null only with ``merge_schema``, as Paimon's write.merge-schema). Other types are cast safely by
    the writer."""
    if case_sensitive is None:
        try:
            return check_input_schema(table, spark_schema, kind_column, case_sensitive=False,
                                      merge_schema=merge_schema)
        except SchemaMismatch as insensitive:
            try:
                return check_input_schema(table, spark_schema, kind_column, case_sensitive=True,
                                          merge_schema=merge_schema)
            except SchemaMismatch:
                raise insensitive from None
    from spark_glue.columns import HINT, resolve
    from spark_glue.tables import arrow_of_spark
    given = arrow_of_spark(spark_schema)
    target = table.arrow_schema
    names = [n for n in given.names if n != kind_column]
    resolved = {}
    for c in names:
        same = resolve(c, target.names, case_sensitive, table=table.name)
        if same is not None:
            resolved[c] = same
    extra = [c for c in names if c not in resolved]
    if extra:
        hint = f" ({HINT})" if case_sensitive and any(c.lower() in {t.lower() for t in target.names}
                                                      for c in extra) else ""
        raise SchemaMismatch(f"input has columns that are not in the table: {extra}{hint}", table=table.name,
                             column=extra[0])
    seen: dict[str, str] = {}
    for c in names:  # the input's columns, an exact duplicate too
        t = resolved[c]
        if t in seen:
            raise SchemaMismatch(f"input columns {seen[t]!r} and {c!r} both name table column {t!r}",
                                 table=table.name, column=t)
        seen[t] = c
    absent = [t for t in target.names if t not in seen]
    required = [t for t in absent if not target.field(t).nullable or t in table.primary_keys]
    if required:
        raise SchemaMismatch(f"input is missing column(s) {required} (NOT NULL in the table)", table=table.name,
                             column=required[0])
    for c, t in resolved.items():
        have, want = given.field(c).type, target.field(t).type
        if _is_text(have) and not _is_text(want):
            raise SchemaMismatch(f"column {c!r} is {have} in the input but {want} in the table; cast it "
                                 "explicitly", table=table.name, column=c)
        why = refused_cast(have, want)
        if why:
            raise SchemaMismatch(f"column {c!r} is {have} in the input but {want} in the table, and {why}; cast "
                                 "it explicitly", table=table.name, column=c)
        nested = _nested_mismatch(have, want, t, case_sensitive, merge_schema)
        if nested:
            raise SchemaMismatch(f"column {c!r}: {nested}",
                                 table=table.name, column=t)
    return {c: t for c, t in resolved.items() if c != t}, absent


def _nested_mismatch(have: pa.DataType, want: pa.DataType, path: str, case_sensitive: bool,
                     fill_missing: bool) -> str | None:
    """Why the nested struct fields of input type ``have`` cannot be matched to the table's ``want`` by name, or
    None. As Paimon's Spark writer (PaimonOutputResolver, by name): a struct field is found by the resolver's name
    (ignoring case unless ``case_sensitive``) at any position; a field the input lacks is refused unless
    ``fill_missing`` (write.merge-schema: it is written as null) and nullable; a field the table lacks, and a field
    name that is ambiguous, are refused."""
    if pa.types.is_struct(have) and pa.types.is_struct(want):
        got = [have.field(i).name for i in range(have.num_fields)]
        matched = set()
        for k in range(want.num_fields):
            w = want.field(k)
            same = _matching_fields(got, w.name, case_sensitive)
            if len(same) > 1:
                return f"struct field {path}.{w.name} is ambiguous: the input has fields {same}"
            if not same:
                if not fill_missing:
                    return (f"struct field {path}.{w.name} is missing in the input (set write.merge-schema to "
                            "write it as null)")
                if not w.nullable:
                    return f"struct field {path}.{w.name} is missing in the input and NOT NULL in the table"
                continue
            matched.add(same[0])
            why = _nested_mismatch(have.field(same[0]).type, w.type, f"{path}.{w.name}", case_sensitive,
                                   fill_missing)
            if why:
                return why
        extra = [n for n in got if n not in matched]
        if extra:
            return f"struct {path} has fields {extra} in the input that the table lacks"
        return None
    if pa.types.is_map(have) and pa.types.is_map(want):
        return (_nested_mismatch(have.key_type, want.key_type, f"{path}.key", case_sensitive, fill_missing)
                or _nested_mismatch(have.item_type, want.item_type, f"{path}.value", case_sensitive, fill_missing))
    if _is_list(have) and _is_list(want):
        return _nested_mismatch(have.value_type, want.value_type, f"{path}.element", case_sensitive, fill_missing)
    return None


def _matching_fields(names, name: str, case_sensitive: bool) -> list[str]:
    return [n for n in names if (n == name if case_sensitive else n.lower() == name.lower())]


def _is_list(t: pa.DataType) -> bool:
    return pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)


def by_table_names(rows: pa.Table, renames: dict[str, str], absent: list[str], target: pa.Schema, *,
                   case_sensitive: bool = False) -> pa.Table:
    """``rows`` with the table's names for the ``renames``, null columns for the ``absent`` table columns
    (check_input_schema), and nested struct fields in the table's order under the table's names, with nulls for
    the fields the input lacks (``align_nested``)."""
    if renames:
        rows = rows.rename_columns([renames.get(c, c) for c in rows.column_names])
    for c in absent:
        rows = rows.append_column(target.field(c), pa.nulls(rows.num_rows, target.field(c).type))
    for i, name in enumerate(rows.column_names):
        col = rows.column(i)
        if name in target.names and _needs_alignment(col.type, target.field(name).type):
            want = target.field(name).type
            chunks = [align_nested(c, want, case_sensitive) for c in col.chunks]
            rows = rows.set_column(i, name, pa.chunked_array(chunks, _aligned_type(col.type, want, case_sensitive)))
    return rows


def _needs_alignment(have: pa.DataType, want: pa.DataType) -> bool:
    """Whether struct fields somewhere in ``have`` differ from ``want``'s by name or order."""
    if pa.types.is_struct(have) and pa.types.is_struct(want):
        if [f.name for f in have] != [f.name for f in want]:
            return True
        return any(_needs_alignment(h.type, w.type) for h, w in zip(have, want))
    if pa.types.is_map(have) and pa.types.is_map(want):
        return _needs_alignment(have.key_type, want.key_type) or _needs_alignment(have.item_type, want.item_type)
    if _is_list(have) and _is_list(want):
        return _needs_alignment(have.value_type, want.value_type)
    return False


def _aligned_type(have: pa.DataType, want: pa.DataType, case_sensitive: bool) -> pa.DataType:
    """The type ``align_nested`` gives an array of ``have``: ``want``'s struct layout with ``have``'s leaves."""
    if pa.types.is_struct(have) and pa.types.is_struct(want):
        names = [f.name for f in have]
        fields = []
        for w in want:
            same = _matching_fields(names, w.name, case_sensitive)
            t = _aligned_type(have.field(same[0]).type, w.type, case_sensitive) if same else w.type
            fields.append(pa.field(w.name, t, w.nullable))
        return pa.struct(fields)
    if pa.types.is_map(have) and pa.types.is_map(want):
        return pa.map_(_aligned_type(have.key_type, want.key_type, case_sensitive),
                       _aligned_type(have.item_type, want.item_type, case_sensitive))
    if _is_list(have) and _is_list(want):
        element = _aligned_type(have.value_type, want.value_type, case_sensitive)
        return pa.large_list(element) if pa.types.is_large_list(have) else pa.list_(element)
    return have


def align_nested(arr: pa.Array, want: pa.DataType, case_sensitive: bool) -> pa.Array:
    """``arr`` whose structs (at any depth: struct fields, list elements, map keys and values) have the fields of
    ``want``'s structs, in its order and under its names, matched by name (ignoring case unless
    ``case_sensitive``); a field the input lacks is null. Leaf types stay as they are (the writer casts them).
    Expects an input check_input_schema accepted."""
    have = arr.type
    if not _needs_alignment(have, want):
        return arr
    out_type = _aligned_type(have, want, case_sensitive)
    mask = arr.is_null() if arr.null_count else None
    if pa.types.is_struct(have):
        names = [f.name for f in have]
        children = arr.flatten()
        out = []
        for w, f in zip(want, out_type):
            same = _matching_fields(names, w.name, case_sensitive)
            out.append(align_nested(children[names.index(same[0])], w.type, case_sensitive) if same
                       else pa.nulls(len(arr), f.type))
        return pa.StructArray.from_arrays(out, fields=list(out_type), mask=mask)
    if pa.types.is_fixed_size_list(have):
        arr = arr.cast(pa.list_(have.value_field))
    offsets, start, length = rebased_offsets(arr)
    if pa.types.is_map(have):
        keys = align_nested(arr.keys.slice(start, length), want.key_type, case_sensitive)
        items = align_nested(arr.items.slice(start, length), want.item_type, case_sensitive)
        return pa.MapArray.from_arrays(offsets, keys, items, type=out_type, mask=mask)
    values = align_nested(arr.values.slice(start, length), want.value_type, case_sensitive)
    cls = pa.LargeListArray if pa.types.is_large_list(have) else pa.ListArray
    return cls.from_arrays(offsets, values, type=out_type, mask=mask)


def _is_text(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t)


def shared_buckets(task_files) -> set[tuple[bytes, int]]:
    """(partition, bucket) pairs that more than one task wrote data to: input not placed by bucket (the data
    source cannot repartition it). Their tasks' compactions each consumed the same base files, so they conflict."""
    seen: dict[tuple[bytes, int], int] = {}
    for tf in task_files or ():
        if tf is None:
            continue
        for key in {(m.partition, m.bucket) for m in tf.messages if m.new_files}:
            seen[key] = seen.get(key, 0) + 1
    return {key for key, tasks in seen.items() if tasks > 1}


def without_compaction(table: Table, message: CommitMessage) -> CommitMessage:
    """``message`` with its compaction part dropped, and the files that compaction wrote deleted."""
    from engine.compact.manager import discard_messages
    if not (message.compact_before or message.compact_after or message.compact_changelog
            or message.dv_before is not None):
        return message
    discard_messages(table, [message])
    return replace(message, compact_before=(), compact_after=(), compact_changelog=(), dv_before=None, dv_after=())


def compact_dropped_buckets(table: Table, buckets, commit_user: str, identifier: int, sid: int | None, *,
                            changelog: bool = True) -> int | None:
    """After a commit that dropped its tasks' compactions of ``buckets`` (shared buckets, or an overwrite): compact
    those buckets here, as their writers would have (and produce their lookup / full-compaction changelog, unless
    ``changelog`` is False: after an overwrite, which as Paimon's commits none), committed as a COMPACT snapshot
    with the same user and identifier; returns its id, or ``sid`` when nothing needed work or the compaction lost
    to a concurrent one (the data is committed either way; the next write compacts)."""
    from engine.compact.manager import compact_buckets, without_changelog
    messages = compact_buckets(table, buckets, commit_user=commit_user, commit_identifier=identifier)
    if not changelog:
        messages = without_changelog(table, messages)
    if not messages:
        return sid
    try:
        return table.commit(messages)
    except (CommitConflict, CommitRetriesExhausted) as e:  # Table.commit deleted the compaction's files
        log.warning("table %s: data committed as snapshot %s; compacting the buckets its tasks wrote lost to a "
                    "concurrent commit: %s", table.name, sid, e)
        return sid


def committed_snapshot(table: Table, commit_user: str, identifier: int, *, newer_than: int | None = None
                       ) -> int | None:
    """Id of a snapshot by ``commit_user`` whose identifier is >= ``identifier`` (identifiers of one user grow,
    as streaming batch ids do), judged by the user's newest snapshot (only snapshots after ``newer_than`` are
    read); None if there is none."""
    sm = table.snapshot_manager
    for sid in reversed(sm.ids()):
        if newer_than is not None and sid <= newer_than:
            break
        try:
            snap = sm.snapshot(sid)
        except Exception:
            break
        if snap.commit_user == commit_user:
            return sid if snap.commit_identifier >= identifier else None
    return None


def message_file_names(messages) -> set[str]:
    """Every file a commit of ``messages`` can reference: new data files, compaction outputs (a task's writer
    compacts the buckets it touched), changelog files and the compactions' DV index files."""
    names = set()
    for m in messages:
        for group in (m.new_files, m.compact_after, getattr(m, "changelog_files", ()),
                      getattr(m, "compact_changelog", ())):
            names.update(f.file_name for f in group)
        names.update(r["_FILE_NAME"] for r in getattr(m, "dv_after", ()))
    return names


def run_write_job(placed_df, job: WriteJob) -> int | None:
    """Write ``placed_df`` (rows already placed one (partition, bucket) per task, see
    ``api.distribute_by_bucket``) as one batch job: tasks run ``job.write_task`` through ``mapInArrow`` and return
    their pickled ``TaskFiles``; this (driver) process commits them as one snapshot (``commit_job``) and returns its
    id. The same protocol as the data source's writer, without the planner's extra Python workers on the driver.
    A failed job, or a commit that fails, waits until Spark's killed tasks are gone (job) and deletes every file
    carrying the job's token unless the commit landed (``abort_job``), then re-raises: the table is unchanged."""
    from spark_glue.compaction import wait_for_running_tasks

    def task(batches):
        files = job.write_task(batches, placed_by_bucket=True)
        yield pa.RecordBatch.from_arrays([pa.array([pickle.dumps(files)], pa.binary())], names=["files"])

    try:
        rows = placed_df.mapInArrow(task, "files binary").collect()
    except BaseException:
        wait_for_running_tasks(placed_df.sparkSession)  # tasks of the failed job may still be writing
        job.abort_job(None)
        raise
    task_files = [pickle.loads(bytes(r.files)) for r in rows]
    try:
        return job.commit_job(task_files)
    except BaseException:
        # as Spark aborts a data-source write after any error in commit: unless the commit landed (an unknown
        # outcome that did land), every file of the job goes, failed task attempts' leftovers included
        job.abort_job(task_files)
        raise


class LakemergeWriter(DataSourceArrowWriter):
    """``df.write.format("lakemerge").mode("append"|"overwrite").save(path)``."""

    def __init__(self, options, overwrite: bool, schema=None):
        self.job = WriteJob(options, overwrite, schema=schema)

    def write(self, iterator):
        return self.job.write_task(iterator)

    def commit(self, messages):
        self.job.commit_job(messages)

    def abort(self, messages):
        self.job.abort_job(messages)


class LakemergeStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("lakemerge")``: one snapshot per micro-batch, the batch id as commit identifier,
    so a micro-batch replayed after a restart is not applied twice."""

    def __init__(self, options, overwrite: bool, schema=None):
        if overwrite:
            raise InvalidInput("streaming writes append (upsert); output mode 'complete' is not supported")
        self.job = WriteJob(options, False, streaming=True, schema=schema)

    def write(self, iterator):
        return self.job.write_task(iterator)

    def commit(self, messages, batchId):
        self.job.commit_job(messages, identifier=batchId)

    def abort(self, messages, batchId):
        self.job.abort_job(messages, batchId)
