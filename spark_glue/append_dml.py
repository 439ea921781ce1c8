"""DELETE / UPDATE / MERGE INTO of append tables with Spark evaluating the condition, as Paimon's Spark connector
does (DeleteFromPaimonTableCommand / UpdatePaimonTableCommand / MergeIntoPaimonTable over PaimonSparkWriter).

Protocol (one call = at most one snapshot, semantics of engine.append.row_level):
- DELETE with no condition, or one that Spark can evaluate over the partition columns alone: the driver evaluates
  it on the table's live partition values and drops the matching partitions (one OVERWRITE snapshot).
- Otherwise the driver pins the latest snapshot and plans its splits; Spark reads the table at that snapshot with
  the metadata columns ``__paimon_file_path`` / ``__paimon_row_index`` (data source option ``metadata-columns``),
  filters by the condition (rows where it is NULL are untouched), computes the new values for UPDATE, and
  repartitions the matching rows by data file (by bucket in deletion-vector mode: a bucket's vectors are one
  index file). Each task applies its files' changes with ``engine.write.file_changes.change_bucket``: it rewrites
  them (copy-on-write) or writes the bucket's new deletion-vector index file, appends updated rows that must be
  appended, and returns the pickled changes. Its files carry the job token (job_files).
- The driver commits all changes as ONE OVERWRITE snapshot (engine.write.file_changes.commit_changes), then
  deletes the job's files the snapshot does not list (leftovers of failed or speculative attempts). If the job or
  the commit fails (CommitConflict: a concurrent commit removed a touched file or changed its vector), every file
  of the job is deleted and the table stays at its last snapshot. Nothing matched: no snapshot.
- MERGE (merge_append) is the same job over the target joined with the source: changed rows carry their new
  values and a DROP flag (deleted instead of updated); inserted rows carry no file path and are appended by the
  tasks. A MERGE that only inserted is an APPEND snapshot.
"""
from __future__ import annotations

import os
import pickle
import threading
import uuid
from contextlib import contextmanager

import pyarrow as pa

from engine.append.row_level import drop_partitions
from engine.data_paths import data_file_path
from engine.dynamic_bucket.index_files import index_dir
from engine.errors import CommitConflict, CommitRetriesExhausted
from engine.write.file_changes import (
    BucketChange,
    FileChange,
    change_bucket,
    commit_changes,
    discard_changes,
)
from spark_glue.job_files import remove_tagged_files, tag_files
from spark_glue.reading import EVERY_FILE, TABLE_ALONE
from spark_glue.source import FILE_PATH, ROW_INDEX
from spark_glue.tables import open_table, pin_snapshot

KEY = "__lakemerge_dml_key"
DROP = "__lakemerge_dml_drop"
SOURCE = "__lakemerge_dml_source"


class AppendDmlJob:
    """Picklable description of one distributed row-level change; ``run`` executes it (module docstring)."""

    def __init__(self, path: str, snapshot_id: int, splits, *, update: bool, merge: bool = False):
        """``update``: the rows carry new values of every column; ``merge`` (with ``update``): they also carry the
        bool column DROP (delete the row instead) and rows without a file path are inserted."""
        table = open_table(path)
        self.path = path
        self.snapshot_id = snapshot_id
        # the pinned snapshot itself: it may expire while the job runs (a concurrent writer's commits), and the
        # commit needs only what was read from it, as Paimon's commit does
        self.snapshot = table.snapshot(snapshot_id)
        self.token = uuid.uuid4().hex[:16]
        self.commit_user = f"lakemerge-spark-dml-{self.token}"
        self.update = update
        self.merge = merge and update
        self.columns = list(table.schema.field_names)
        self.splits = {sp.bucket_dir: sp for sp in splits}
        # files in data-file.external-paths: their folder is not their bucket's directory
        self.bucket_of = {data_file_path(sp.bucket_dir, f): sp.bucket_dir for sp in splits for f in sp.files
                          if f.external_path}
        # a bucket's vectors are written as one index file, so one task must own each bucket that has (or gets) some
        self.by_bucket = table.schema.table_options.deletion_vectors or any(sp.vectors.files for sp in splits)

    # --- executor side ------------------------------------------------------------------------------
    def task(self, batches):
        """mapInArrow function: rows (file path, row index, [updated columns]) -> one pickled result row."""
        table = tag_files(open_table(self.path), f"{self.token}-")
        data = [pa.Table.from_batches([b]) for b in batches if b.num_rows]
        changes: list[BucketChange] = []
        appender = None  # only UPDATE appends rows: a deletion-vector DELETE of an ORC table must not open a writer
        if self.update:
            appender = table.new_write(commit_user=self.commit_user)
            appender.base_snapshot = self.snapshot
        try:
            rows = pa.concat_tables(data) if data else None
            if rows is not None and self.merge:
                import pyarrow.compute as pc
                new = pc.is_null(rows.column(FILE_PATH))
                inserts = rows.filter(new)
                if inserts.num_rows:
                    appender.write(inserts.select(self.columns))
                rows = rows.filter(pc.invert(new))
            if rows is not None and rows.num_rows:
                rows = rows.sort_by([(FILE_PATH, "ascending"), (ROW_INDEX, "ascending")])
                per_bucket: dict[str, dict[str, FileChange]] = {}
                paths = rows.column(FILE_PATH).to_pylist()
                start = 0
                for i in range(1, len(paths) + 1):
                    if i < len(paths) and paths[i] == paths[start]:
                        continue
                    part = rows.slice(start, i - start)
                    positions = part.column(ROW_INDEX).to_numpy()
                    updated = part.select(self.columns) if self.update else None
                    drop = part.column(DROP).to_numpy(zero_copy_only=False) if self.merge else None
                    folder, name = os.path.split(paths[start])
                    bucket_dir = self.bucket_of.get(paths[start], folder)
                    per_bucket.setdefault(bucket_dir, {})[name] = FileChange(positions, updated, drop)
                    start = i
                for bucket_dir, files in per_bucket.items():
                    changes.append(change_bucket(table, self.splits[bucket_dir], files, base_id=self.snapshot_id,
                                                 commit_user=self.commit_user, appender=appender))
            appended = appender.prepare_commit() if appender is not None else []
        except BaseException:
            discard_changes(table, changes, appender)
            raise
        finally:
            if appender is not None:
                appender.close()
        yield pa.RecordBatch.from_arrays([pa.array([pickle.dumps((changes, appended))], pa.binary())],
                                         names=["change"])

    # --- driver side --------------------------------------------------------------------------------
    def run(self, matched) -> int | None:
        """Apply the matching rows ``matched`` (file path, row index, [new values of every column], [DROP]) in
        Spark tasks and commit them as one snapshot; its id, or None when no row matched."""
        from pyspark.sql import functions as F
        spark = matched.sparkSession
        key = F.regexp_extract(F.col(FILE_PATH), r"^(.*)/[^/]*$", 1) if self.by_bucket else F.col(FILE_PATH)
        if self.by_bucket and self.bucket_of:  # an external file's folder is not its bucket
            pairs = [F.lit(x) for item in self.bucket_of.items() for x in item]
            key = F.when(F.col(FILE_PATH).isin(list(self.bucket_of)), F.create_map(*pairs)[F.col(FILE_PATH)]) \
                .otherwise(key)
        tasks = max(1, spark.sparkContext.defaultParallelism)
        if self.merge:  # rows to insert (no file) spread over the tasks by a hash of their values
            hashable = [F.col(f"`{f.name}`") for f in matched.schema.fields  # Spark cannot hash maps
                        if f.name in self.columns and "map<" not in f.dataType.simpleString()]
            spread = (F.abs(F.hash(*hashable)) % tasks) if hashable else F.lit(0)
            key = F.coalesce(key, F.concat(F.lit("+"), spread.cast("string")))
        return self.apply(matched.withColumn(KEY, key).repartition(tasks, KEY).drop(KEY))

    def apply(self, placed) -> int | None:
        """Run ``task`` over the rows of ``placed`` (each bucket's rows in one Spark partition), commit every
        task's changes as one snapshot and delete the job's other files; the snapshot id, or None when nothing
        changed. On failure every file of the job is deleted."""
        from spark_glue.compaction import wait_for_running_tasks
        spark = placed.sparkSession
        try:
            results = [pickle.loads(bytes(r.change)) for r in placed.mapInArrow(self.task, "change binary").collect()]
        except BaseException:
            wait_for_running_tasks(spark)  # tasks of the failed job may still be writing
            self.remove_files(keep=set(), dirs=None)
            raise
        table = open_table(self.path)
        changes = [c for cs, _ in results for c in cs]
        appended = [m for _, ms in results for m in ms]
        dirs = set(self.splits) | {table.bucket_dir(m.partition_values, m.bucket) for m in appended}
        dirs.add(index_dir(table.root))
        try:
            sid = commit_changes(table, self.snapshot, changes, self.commit_user, appended)
        except (CommitConflict, CommitRetriesExhausted):
            self.remove_files(keep=set(), dirs=dirs)
            raise
        keep = {f.file_name for m in [*appended, *(m for c in changes for m in c.messages)] for f in m.new_files}
        keep |= {r["_FILE_NAME"] for c in changes for m in c.messages for r in m.dv_after}
        self.remove_files(keep=keep, dirs=dirs)
        return sid

    def remove_files(self, keep: set[str], dirs) -> int:
        """Delete the job's files (names carrying its token) except ``keep``, in ``dirs`` (None: everywhere)."""
        return remove_tagged_files(open_table(self.path), f"{self.token}-", keep, dirs)


def partition_only_matches(spark, table, condition):
    """The serialized live partitions whose values satisfy ``condition`` when Spark can evaluate it over the
    partition columns alone (Paimon's isPredicatePartitionColumnsOnly), else None."""
    from pyspark.errors import AnalysisException

    from spark_glue.tables import spark_schema
    keys = list(table.partition_keys)
    snap = table.snapshot()
    if not keys or snap is None:
        return None
    parts = sorted({e.partition for e in table.manifests.live_entries(snap)})
    scan = table.scan()
    schema = spark_schema(pa.schema([table.arrow_schema.field(k).with_nullable(True) for k in keys]
                                    + [pa.field("__lakemerge_part", pa.int64())]))
    frame = spark.createDataFrame([(*scan.partition_values(p), i) for i, p in enumerate(parts)], schema)
    try:
        with _quiet_analysis_errors():
            hit = frame.where(condition).select("__lakemerge_part").collect()
    except AnalysisException:
        return None  # the condition names other columns
    return {parts[r[0]] for r in hit}


@contextmanager
def _quiet_analysis_errors():
    """Drop the ERROR records (with a JVM stack trace) PySpark logs for every AnalysisException it raises, while the
    calling thread probes a condition whose failure is an answer, not an error. Only this thread's records are
    dropped (PySpark logs in the raising thread); other threads' errors still reach the log, and concurrent probes
    each add and remove their own filter."""
    from pyspark.logger import PySparkLogger  # creates them as PySpark's loggers (a plain Logger would break them)

    thread = threading.get_ident()

    def other_threads(record) -> bool:
        return record.thread != thread

    loggers = [PySparkLogger.getLogger(name) for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger")]
    for lg in loggers:
        lg.addFilter(other_threads)
    try:
        yield
    finally:
        for lg in loggers:
            lg.removeFilter(other_threads)


def spark_truncate(spark, table, condition) -> tuple[bool, int | None]:
    """(True, new snapshot id or None) when a DELETE with ``condition`` (a Column, None: no condition) is a truncate
    (engine.append.row_level.is_truncate, with Spark evaluating the condition over the partition values) and was
    done; (False, None) when the DELETE must change rows."""
    from engine.options import DELETE_FORCE_PRODUCE_CHANGELOG
    if condition is None:
        return True, drop_partitions(table, None)
    if table.schema.table_options.get(DELETE_FORCE_PRODUCE_CHANGELOG):
        return False, None
    parts = partition_only_matches(spark, table, condition)
    if parts is None:
        return False, None
    return True, drop_partitions(table, parts)


def delete_append(spark, path: str, condition) -> int | None:
    """DELETE on an append table (module docstring); ``condition`` a Column or None."""
    table = open_table(path)
    done, sid = spark_truncate(spark, table, condition)
    if done:
        return sid
    return _run(spark, table, path, condition, None)


def update_append(spark, path: str, assignments: dict, condition) -> int | None:
    """UPDATE on an append table (module docstring); ``assignments`` column -> Column, ``condition`` or None."""
    return _run(spark, open_table(path), path, condition, assignments)


def _run(spark, table, path, condition, assignments) -> int | None:
    from pyspark.sql import functions as F

    from engine.append.row_level import require_rewritable
    from spark_glue.api import read_table
    require_rewritable(table, assignments is not None)
    snap = table.snapshot()
    if snap is None:
        return None
    splits = table.scan().plan(snap)
    job = AppendDmlJob(path, snap.id, splits, update=assignments is not None)
    rows = read_table(spark, path, prune=True, **{**pin_snapshot(snap.id), TABLE_ALONE: "true", EVERY_FILE: "true",
                                                  "metadata-columns": f"{FILE_PATH},{ROW_INDEX}"})
    if condition is not None:
        rows = rows.where(condition)
    meta = [F.col(FILE_PATH), F.col(ROW_INDEX)]
    if assignments is None:
        matched = rows.select(*meta)
    else:
        types = {f.name: f.dataType for f in rows.schema.fields}
        matched = rows.select(*meta, *[(assignments[c].cast(types[c]) if c in assignments else F.col(f"`{c}`"))
                                       .alias(c) for c in table.schema.field_names])
    return job.run(matched)


def merge_append(spark, path: str, source_df, on: list[str], matched, *, matched_condition=None,
                 insert: bool = False, delete_by_source: bool = False) -> int | None:
    """MERGE INTO an append table, as Paimon's MergeIntoPaimonTable.performMergeForNonPkTable (one snapshot; None
    when nothing changed). The target is read at the latest snapshot with its rows' file and position and joined
    with ``source_df`` on equality of the ``on`` columns (a null never matches). ``matched``: None, "delete" or a
    dict column -> Column over ``t.``/``s.`` (the new values; other columns keep the target's);
    ``matched_condition`` (a Column; NULL counts as false) restricts the matched rows changed; ``insert``: source
    rows matching no target row are appended (the source must have every column); ``delete_by_source``: target
    rows matching no source row are deleted. Matched rows are changed in place in copy-on-write mode, or marked in
    deletion vectors and their new values appended (Paimon appends them in both modes); inserted rows are appended.

    Raises MergeCardinalityViolation (naming the target row's file, position and ``on`` values) when a target row
    matches several source rows and ``matched`` is set (whatever ``matched_condition`` says), as Paimon's
    checkMatchRationality, before anything is written; CommitConflict as delete_append."""
    from functools import reduce

    from pyspark.sql import functions as F

    from engine.append.row_level import require_rewritable
    from spark_glue.api import read_table, write_table
    table = open_table(path)
    names = list(table.schema.field_names)
    writes = insert or (matched is not None and matched != "delete")
    require_rewritable(table, writes)
    snap = table.snapshot()
    if snap is None:  # no target row: only inserts
        if not insert or not source_df.limit(1).collect():
            return None
        types = {f.name: f.dataType for f in read_table(spark, path).schema.fields}
        return write_table(source_df.select(*[F.col(f"`{c}`").cast(types[c]).alias(c) for c in names]), path,
                           merge_schema=False)  # the table's types (see dml._write_changes)
    options = {**pin_snapshot(snap.id), TABLE_ALONE: "true", EVERY_FILE: "true",
               "metadata-columns": f"{FILE_PATH},{ROW_INDEX}"}

    def target():  # one DataFrame per Spark job: scans of one source relation share their pushed-down plan
        return read_table(spark, path, prune=True, **options).alias("t")
    s = source_df.withColumn(SOURCE, F.lit(True)).alias("s")
    cond = reduce(lambda a, b: a & b, [F.col(f"t.`{c}`") == F.col(f"s.`{c}`") for c in on])
    if matched is not None:
        _check_merge_cardinality(table, target().join(s, cond, "inner"), on)
    how = {(False, False): "inner", (True, False): "left", (False, True): "right", (True, True): "full"}
    joined = target().join(s, cond, how[(delete_by_source, insert)])
    types = {f.name: f.dataType for f in joined.select("t.*").schema.fields}
    has_t, has_s = F.col(f"t.`{FILE_PATH}`").isNotNull(), F.col(f"s.`{SOURCE}`").isNotNull()
    kind = F.lit(None).cast("string")
    if delete_by_source:
        kind = F.when(has_t & ~has_s, F.lit("D")).otherwise(kind)
    if insert:
        kind = F.when(~has_t & has_s, F.lit("I")).otherwise(kind)
    if matched is not None:
        hit = has_t & has_s
        if matched_condition is not None:
            hit = hit & F.coalesce(matched_condition, F.lit(False))
        kind = F.when(hit, F.lit("D" if matched == "delete" else "U")).otherwise(kind)
    k = "__lakemerge_dml_kind"
    joined = joined.withColumn(k, kind).where(F.col(k).isNotNull())
    meta = [F.col(f"t.`{FILE_PATH}`").alias(FILE_PATH), F.col(f"t.`{ROW_INDEX}`").alias(ROW_INDEX)]
    if not writes:
        rows = joined.select(*meta)
    else:
        new = {} if matched in (None, "delete") else matched

        def value(c):
            old = F.col(f"t.`{c}`")
            v = F.when(F.col(k) == "I", F.col(f"s.`{c}`")) if insert else None
            if c in new:
                v = (F.when(F.col(k) == "U", new[c]) if v is None else v.when(F.col(k) == "U", new[c]))
            return (old if v is None else v.otherwise(old)).cast(types[c]).alias(c)
        rows = joined.select(*meta, *[value(c) for c in names], (F.col(k) == "D").alias(DROP))
    job = AppendDmlJob(path, snap.id, table.scan().plan(snap), update=writes, merge=True)
    return job.run(rows)


def _check_merge_cardinality(table, matched, on: list[str]) -> None:
    """Refuse a MERGE whose ``matched`` pairs (target ``t`` with file/position columns, joined with source ``s``)
    match one target row with several source rows (Paimon's checkMatchRationality)."""
    from pyspark.sql import functions as F

    from engine.errors import MergeCardinalityViolation
    n = "__lakemerge_matches"
    hit = (matched.groupBy(F.col(f"t.`{FILE_PATH}`").alias(FILE_PATH), F.col(f"t.`{ROW_INDEX}`").alias(ROW_INDEX))
           .agg(F.count(F.lit(1)).alias(n), *[F.first(F.col(f"t.`{c}`")).alias(c) for c in on])
           .where(F.col(n) > 1).limit(1).collect())
    if hit:
        row = hit[0].asDict()
        values = {c: row[c] for c in on}
        raise MergeCardinalityViolation(
            f"merge_into: {row[n]} source rows match the target row {values} (row {row[ROW_INDEX]} of data file "
            f"{row[FILE_PATH]}); a MERGE with when_matched may match each target row at most once (make the source "
            "unique on 'on')", table=table.name, key={**values, FILE_PATH: row[FILE_PATH], ROW_INDEX: row[ROW_INDEX]})
