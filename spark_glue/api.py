"""DataFrame-level entry points: register the source, read with pushdown safely, write bucket-parallel."""
from __future__ import annotations

import uuid

import numpy as np
import pyarrow as pa

from engine.errors import InvalidInput
from engine.options import parse_bool
from engine.postpone import POSTPONE_BUCKET
from spark_glue.tables import (
    BRANCH,
    SESSION_TIME_ZONE,
    TIME_ZONE,
    open_or_create_table,
    open_table,
    read_view,
    remove_created_table,
    spark_schema,
    with_branch,
)

FORMAT = "lakemerge"
PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"
SLOT = "__lakemerge_slot"


def register(spark) -> None:
    """Register the ``lakemerge`` data source on ``spark`` (idempotent). Needs no other configuration."""
    from spark_glue.source import LakemergeDataSource
    spark.dataSource.register(LakemergeDataSource)


def read_table(spark, path: str, *, columns=None, filter_pushdown: bool = True, prune: bool = False, **options):
    """A DataFrame over the merged table at ``path`` that re-plans every query against the table's current
    snapshot (or the time-travel option).

    Spark 4.3 caches a Python source's read plan per relation (a reused DataFrame would see a stale snapshot).
    This DataFrame therefore carries an always-true ``<first key> IS NOT NULL`` guard: every query on it pushes a
    filter, so every query re-plans. A temporary view made from it (``createOrReplaceTempView``) re-plans too.
    An append table without NOT NULL columns has no such guard: reuse keeps the first query's snapshot there.
    Enables ``spark.sql.python.filterPushdown.enabled``.

    ``prune=True`` also prunes partitions, buckets and files by the pushed filters. Only for a DataFrame that a
    query scans ONCE: Spark 4.3.0 reads every scan of one DataFrame in a query with the plan of the last filter
    push, so ``df.where(a).union(df.where(b))`` or a self-join of a pruning DataFrame loses rows.

    ``options`` are the data source's (time travel: ``versionAsOf``, ``timestampAsOf``, ...). Option ``timeZone``
    defaults to the session's ``spark.sql.session.timeZone`` as it is now, so a timestamp without an offset is read
    in it, as Spark reads ``TIMESTAMP AS OF``.
    """
    register(spark)
    path = on_branch(path, options)
    if not any(k.lower() == TIME_ZONE for k in options):
        options = {**options, "timeZone": spark.conf.get(SESSION_TIME_ZONE)}
    table = read_view(open_table(path), options)  # time travel: the snapshot's schema has the guard column
    filter_pushdown = filter_pushdown or prune
    # The guard must be pushable, so a single never-null column: a key column (else a NOT NULL column), read
    # even when ``columns`` leaves it out (``a IS NOT NULL OR a IS NULL`` is never pushed: no re-plan).
    from engine.read.fallback_branch import never_null_columns
    not_null = never_null_columns(table)  # with a fallback/primary branch: NOT NULL on both branches
    guard = next(iter([k for k in table.primary_keys if k in not_null] + not_null), None) if filter_pushdown \
        else None
    read_cols = None if columns is None else list(columns) + ([guard] if guard and guard not in columns else [])
    reader = spark.read.format(FORMAT)
    if read_cols is not None:
        reader = reader.option("columns", ",".join(read_cols))
    if filter_pushdown:
        spark.conf.set(PUSHDOWN_CONF, "true")
        reader = reader.option("filter-pushdown", "true").option("filter-pushdown.prune", str(bool(prune)).lower())
    for k, v in options.items():
        reader = reader.option(k, str(v))
    df = reader.load(path)
    if guard is not None:
        df = df.where(f"`{guard}` IS NOT NULL")  # never null: always true
        if read_cols != columns:
            df = df.select(*[f"`{c}`" for c in columns])
    return df


def on_branch(path: str, options) -> str:
    """``path`` of the branch that option ``branch`` (any case) among ``options`` names, as the data source reads
    it (tables.with_branch; raises InvalidInput when the path names another branch)."""
    return with_branch({**options, "path": path})["path"]


def distribute_by_bucket(df, path: str, num_tasks: int | None = None, *, bucket_counts: dict | None = None,
                         bucket_num: int | None = None):
    """``df`` repartitioned so every (partition, bucket) of the table lands in exactly one task (so a commit
    writes one sorted run per bucket): the bucket is Paimon's hash as Spark expressions for a single INT/BIGINT
    key of an unpartitioned table (spark_glue.bucketing), else the engine's hashing kernel in an Arrow UDF over the
    bucket (and partition) columns; then ``repartitionById``. A bucket-unaware append table takes ``df`` as it is.
    A postpone-bucket primary-key table has one bucket count per partition: ``bucket_counts`` (serialized
    partition -> count, spark_glue.postpone_buckets; default: the counts the latest snapshot's real-bucket files
    record), ``postpone.default-bucket-num`` for a partition it lacks, else 1 (placement only); without
    ``postpone.batch-write-fixed-bucket`` (rows stay postponed) by the key hash with the task count as bucket count.
    ``bucket_num`` places every partition by that count instead, whatever the table's bucket mode (a rescale, see
    spark_glue.rescale). Default task count: one per core (at most one per bucket of an unpartitioned table);
    ``num_tasks = bucket`` gives exactly one bucket per task.

    The slot only decides placement: the writer recomputes buckets itself, so a wrong slot can never put a row
    in the wrong bucket.
    """
    from pyspark.sql import functions as F
    from spark_glue.writing import require_spark_writable
    table = open_table(path)
    require_spark_writable(table)
    nb = table.schema.table_options.bucket if bucket_num is None else bucket_num
    postpone = nb == POSTPONE_BUCKET and not table.schema.is_append_only
    if nb < 1 and not postpone:  # a bucket-unaware append table: any task may write any row
        return df
    parts = list(table.partition_keys)
    per_partition = None
    from engine.options import POSTPONE_BATCH_WRITE_FIXED_BUCKET
    postponed = postpone and not table.schema.table_options.get(POSTPONE_BATCH_WRITE_FIXED_BUCKET)
    if postpone and not postponed:  # one count per partition
        from engine.options import POSTPONE_DEFAULT_BUCKET_NUM
        default = table.schema.table_options.get(POSTPONE_DEFAULT_BUCKET_NUM) or 1
        if bucket_counts is None:
            from engine.postpone.buckets import known_bucket_counts
            snapshot = table.snapshot_manager.latest()
            bucket_counts = {} if snapshot is None else \
                known_bucket_counts(table.manifests.live_entries(snapshot), table.root)
        counts = dict(bucket_counts)
        nb = max([default, *counts.values()]) if parts else next(iter(counts.values()), default)
        if parts:  # keyed by the serialized partition, computed as the writer computes it
            per_partition = (counts, default, table.schema.types_of(parts))
    if num_tasks is None:  # one wave of tasks: each task's Python start-up and table load is per-commit overhead;
        # on local[2] one task per core upserts 1M rows ~10% faster than two (benchmarks/spark_bench)
        num_tasks = max(1, df.sparkSession.sparkContext.defaultParallelism)
        if not parts and not postponed:
            num_tasks = min(num_tasks, nb)
    if postponed:  # rows stay in bucket -2: place by the key hash modulo the task count
        nb = num_tasks
    bucket_keys = list(table.schema.bucket_keys)
    types = [table.arrow_schema.field(k).type for k in bucket_keys + parts]
    from spark_glue.bucketing import with_bucket_column
    slotted = with_bucket_column(df, bucket_keys[0], types[0], nb, SLOT, modulo=num_tasks) \
        if not parts and len(bucket_keys) == 1 else None
    if slotted is None:  # only the bucket and partition columns travel to Python and back; the rows stay in the JVM
        slotted = df.withColumn(SLOT, F.arrow_udf(
            _slot_function(types, len(bucket_keys), nb, num_tasks, per_partition), "int")(
            *[df[c] for c in bucket_keys + parts]))
    return slotted.repartitionById(num_tasks, SLOT).drop(SLOT)


def _slot_function(types: list, num_bucket_keys: int, num_buckets: int, num_tasks: int, per_partition=None):
    """Arrow UDF body: (bucket key columns..., partition columns...) -> the task slot of each row's
    (partition, bucket), computed with the engine's Paimon hashing kernel. ``per_partition`` = (serialized
    partition -> bucket count, count of other partitions, partition types) replaces ``num_buckets`` (postpone
    tables)."""
    def slots(*columns):
        from kernels.hashing import (  # import in the worker: keeps Numba's disk cache
            bucket_ids,
            hash_codes,
        )
        n = len(columns[0])
        try:
            cast = [c.cast(t) for c, t in zip(columns, types)]
            if per_partition is None:
                slot = bucket_ids(cast[:num_bucket_keys], num_buckets).astype(np.int64)
            else:
                slot = _postpone_buckets(cast[:num_bucket_keys], cast[num_bucket_keys:], *per_partition)
            if len(cast) > num_bucket_keys:
                h = hash_codes(cast[num_bucket_keys:]).astype(np.int64)
                slot = np.abs(h) * num_buckets + slot
        except (pa.ArrowException, ValueError, TypeError):
            slot = np.zeros(n, np.int64)  # the writer reports the bad value with context
        return pa.array((slot % num_tasks).astype(np.int32))
    return slots


def _postpone_buckets(keys: list, parts: list, counts: dict, default: int, types: list) -> np.ndarray:
    """Bucket of each row, each partition hashed with its count in ``counts`` (keyed by the partition serialized
    with ``types``, as TableWrite keys it) or ``default``."""
    from engine.meta.binary_row import serialize_row
    from engine.partitioning import partition_groups
    from kernels.hashing import bucket_ids
    names = [f"p{i}" for i in range(len(parts))]
    out = np.zeros(len(keys[0]), np.int64)
    for values, idx in partition_groups(pa.table(parts, names=names), names):
        count = counts.get(serialize_row(list(values), types), default)
        out[idx] = bucket_ids([k.take(pa.array(idx)) for k in keys], count)
    return out


# write_table keyword arguments that stand for write options
_KEYWORD_OPTIONS = {"dynamic_partition_overwrite": "dynamic-partition-overwrite", "merge_schema": "write.merge-schema",
                    "type_widening": "write.merge-schema.type-widening",
                    "explicit_cast": "write.merge-schema.explicit-cast"}


def write_table(df, path: str, mode: str = "append", *, num_tasks: int | None = None, **options) -> int | None:
    """Upsert (``mode="append"``) or overwrite ``df`` into the table at ``path`` in one snapshot, one task per
    (partition, bucket) group; returns the id of the last snapshot published (the COMPACT one when the writers
    compacted; the latest id when ``df`` was empty; None for an empty table left empty).

    A postpone-bucket table (``bucket = -2``) with ``postpone.batch-write-fixed-bucket`` gets its partitions' bucket
    counts decided here first (spark_glue.postpone_buckets: one Spark aggregation of ``df`` when
    ``postpone.default-bucket-num`` is unset), then its tasks write real buckets.

    Options as for ``df.write.format("lakemerge")`` (with ``primary-key`` etc. the table is created if missing);
    ``dynamic_partition_overwrite=False`` overwrites the whole table; ``merge_schema=True`` (option
    ``write.merge-schema``; ``type_widening`` / ``explicit_cast`` for ``write.merge-schema.type-widening`` /
    ``.explicit-cast``; else the session's ``spark.paimon.write.merge-schema`` etc., as Paimon's connector reads
    them) first adds the input's new columns to the table (writing.merge_input_schema). Same commit
    protocol as the data source (spark_glue.writing), run from this process: the tasks' messages are collected
    and committed here, which saves the data source's planner round trips (about 0.1 s per commit on local[2]).
    Raises InvalidInput for another ``mode``, SchemaMismatch before any job for columns that do not fit the table
    (writing.check_input_schema), the engine's errors (wrapped by Spark) for bad values; a failed job leaves the
    table unchanged, and a failed first write that created the table leaves no table
    (tables.remove_created_table).
    """
    from spark_glue.columns import case_sensitive
    from spark_glue.writing import merge_input_schema, run_write_job, with_session_merge_options
    if mode not in ("append", "overwrite"):
        raise InvalidInput(f"write_table mode must be 'append' or 'overwrite', got {mode!r}")
    path = on_branch(path, options)
    opts = {_KEYWORD_OPTIONS.get(k, k): str(v) for k, v in options.items() if k.lower() != BRANCH}
    opts = with_session_merge_options(opts, df.sparkSession)
    table, created = open_or_create_table(path, opts, df.schema, drop_columns=[opts.get("rowkind.column")])
    try:
        if not created:  # schema merging (write.merge-schema) happens here, once, before the job is planned
            table = merge_input_schema(table, df.schema, opts, case_sensitive(df.sparkSession))
        job, placed = _plan_write(df, table, path, mode, num_tasks, opts)
    except BaseException:  # a failed first write leaves no table
        remove_created_table(created)
        raise
    job.created = created
    sid = run_write_job(placed, job)
    return sid if sid is not None else open_table(path).latest_snapshot_id()


def _plan_write(df, table, path: str, mode: str, num_tasks: int | None, opts: dict):
    """write_table's job and its input placed by bucket (see write_table for the errors)."""
    from spark_glue.writing import DIRECT, MERGE_SCHEMA, STAGED, WriteJob, check_input_schema
    from spark_glue.columns import case_sensitive
    sensitive = case_sensitive(df.sparkSession)
    renames, absent = check_input_schema(table, df.schema, opts.get("rowkind.column"), case_sensitive=sensitive,
                                         merge_schema=parse_bool(opts.get(MERGE_SCHEMA, "false")))
    if renames or absent:  # by the table's names, with nulls for missing nullable columns (placement needs them)
        from pyspark.sql import functions as F
        types = {f.name: f.dataType for f in spark_schema(table.arrow_schema).fields}
        df = df.select(*[F.col(f"`{c}`").alias(renames.get(c, c)) for c in df.columns],
                       *[F.lit(None).cast(types[c]).alias(c) for c in absent])
    df = in_table_time_stamps(df, table)
    opts.setdefault("commit.user", f"lakemerge-spark-{uuid.uuid4().hex}")
    job = WriteJob({**opts, "path": path}, overwrite=mode == "overwrite")
    job.case_sensitive = sensitive  # the tasks match nested struct fields as the session does
    counts = None
    if job.postpone in (DIRECT, STAGED):  # fixed-bucket postpone write: counts decided here, tasks write buckets
        from spark_glue.postpone_buckets import decide_bucket_counts
        counts = decide_bucket_counts(df, path, job.base_id, overwrite=job.overwrite,
                                      kind_column=opts.get("rowkind.column"))
        job.use_bucket_counts(counts)
    return job, distribute_by_bucket(df, path, num_tasks, bucket_counts=counts)


def in_table_time_stamps(df, table):
    """``df`` whose top-level timestamp columns of the other kind than the table's (TIMESTAMP for a Paimon
    TIMESTAMP, TIMESTAMP_NTZ for a TIMESTAMP_LTZ) are cast by Spark in its session zone, as its store assignment
    does: the driver's bucket counts and the tasks' placement then see the values that are written (a partition
    or bucket key is top-level). Nested values are converted by the tasks (tables.session_time_stamps)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import TimestampNTZType, TimestampType
    want = {f.name: f.dataType for f in spark_schema(table.arrow_schema).fields}
    kinds = (TimestampType, TimestampNTZType)

    def differs(f):
        w = want.get(f.name)
        return (isinstance(f.dataType, kinds) and isinstance(w, kinds)
                and isinstance(f.dataType, TimestampType) != isinstance(w, TimestampType))
    if not any(differs(f) for f in df.schema.fields):
        return df
    return df.select(*[F.col(f"`{f.name}`").cast(want[f.name]).alias(f.name) if differs(f) else F.col(f"`{f.name}`")
                       for f in df.schema.fields])


def drop_partitions(spark, path: str, partitions) -> int | None:
    """Spark's ``ALTER TABLE ... DROP PARTITION`` / ``TRUNCATE TABLE ... PARTITION`` for the table at ``path``:
    one OVERWRITE snapshot, committed from the driver, deleting every file of the partitions matching
    ``partitions`` (a dict or list of dicts of partition column -> value); see Table.drop_partitions. ``spark`` is
    not used (no job runs); it keeps the signature of the other helpers. Returns the snapshot id."""
    return open_table(path).drop_partitions(partitions)


def read_stream(spark, path: str, *, changelog: bool = True, **options):
    """A streaming DataFrame of the table's changes (``spark.readStream.format("lakemerge")``), with the
    ``_row_kind`` column unless ``changelog=False``. Options as in spark_glue.stream_read (``scan.mode``, ...)."""
    register(spark)
    reader = spark.readStream.format(FORMAT).option("read.changelog", str(bool(changelog)).lower())
    for k, v in options.items():
        reader = reader.option(k, str(v))
    return reader.load(path)
