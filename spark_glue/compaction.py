"""Distributed compaction: ``compact(spark, path, full=False, partitions=None)``.

Protocol (one call = at most one COMPACT snapshot):
- The driver plans with ``engine.compact.manager.compaction_splits`` (the latest snapshot's (partition, bucket)
  splits), packs the splits into tasks balanced by bytes and draws a job token.
- Each Spark task (``mapInArrow`` over ``spark.range(tasks)``, one row per task) runs ``compact_split`` for each of
  its splits with the engine's kernels, writing files named ``<prefix><token>-...`` (data, changelog and
  deletion-vector index files, see job_files), and returns the pickled ``CommitMessage``s. A split that fails
  deletes its own files (compact_split).
- The driver commits the messages of the successful attempts as ONE COMPACT snapshot, then deletes every file of
  the involved buckets (and of ``index/``) that carries the job token and the snapshot does not list: the leftovers
  of failed, killed or speculative attempts, whose results Spark dropped. If the job or the commit fails, every
  file of the job is deleted and the table stays at its last snapshot. Upgraded files (same file, new level) keep
  their names and are never touched.
"""
from __future__ import annotations

import pickle
import uuid

from engine.errors import CommitConflict, CommitRetriesExhausted
from spark_glue.job_files import job_dirs, remove_tagged_files, tag_files
from spark_glue.tables import open_table


def pack_by_size(splits, tasks: int) -> list[list]:
    """Splits in ``tasks`` groups (fewer if there are fewer splits), biggest first onto the least-loaded group."""
    groups: list[list] = [[] for _ in range(max(1, min(tasks, len(splits))))]
    loads = [0] * len(groups)
    for sp in sorted(splits, key=lambda s: sum(f.file_size for f in s.files), reverse=True):
        i = loads.index(min(loads))
        groups[i].append(sp)
        loads[i] += sum(f.file_size for f in sp.files)
    return [g for g in groups if g]


class CompactionJob:
    """Picklable description of one distributed compaction; ``run(spark)`` executes it (see module docstring)."""

    def __init__(self, path: str, *, full: bool = False, partitions=None, tasks: int | None = None):
        self.path = path
        self.full = full
        self.partitions = partitions
        self.tasks = tasks
        self.token = uuid.uuid4().hex[:16]
        self.commit_user = f"lakemerge-spark-compact-{self.token}"
        self.base_id = None
        self.groups: list[list] = []

    # --- executor side ------------------------------------------------------------------------------
    def job_table(self):
        """The table naming the files it writes with the job token (so the job's files can be found)."""
        return tag_files(open_table(self.path), f"{self.token}-")

    def compact_group(self, index: int) -> list:
        """Compact the splits of task ``index``; their COMMIT messages (buckets with nothing to do give none)."""
        from engine.compact.manager import compact_split, discard_messages
        table = self.job_table()
        messages = []
        try:
            for split in self.groups[index]:
                m = compact_split(table, split, self.base_id, full=self.full, commit_user=self.commit_user)
                if m is not None:
                    messages.append(m)
        except BaseException:
            discard_messages(table, messages)
            raise
        return messages

    def task(self, batches):
        """mapInArrow function: one input row per task (its group index) -> one row per commit message."""
        import pyarrow as pa
        for batch in batches:
            for index in batch.column(0).to_pylist():
                blobs = [pickle.dumps(m) for m in self.compact_group(index)]
                yield pa.RecordBatch.from_arrays([pa.array(blobs, pa.binary())], names=["message"])

    # --- driver side --------------------------------------------------------------------------------
    def run(self, spark) -> int | None:
        """Plan, compact in Spark tasks, commit one COMPACT snapshot; its id, or None if nothing needed work."""
        from engine.compact.manager import compaction_splits
        table = open_table(self.path)
        if table.schema.table_options.bucket == -2:  # postponed files move into real buckets on the driver
            return table.compact(full=self.full, partitions=self.partitions)
        snapshot, splits = compaction_splits(table, self.partitions)
        if not splits:
            return None
        self.base_id = snapshot.id
        tasks = self.tasks or 2 * spark.sparkContext.defaultParallelism
        self.groups = pack_by_size(splits, tasks)
        dirs = job_dirs(table, {table.bucket_dir(sp.partition_values, sp.bucket) for sp in splits})
        n = len(self.groups)
        try:
            rows = (spark.range(0, n, 1, n).mapInArrow(self.task, "message binary").collect())
        except BaseException:
            wait_for_running_tasks(spark)  # tasks of the failed job may still be writing (they are killed async)
            self.remove_files(table, dirs, keep=set())
            raise
        messages = [pickle.loads(bytes(r.message)) for r in rows]
        if not messages:
            self.remove_files(table, dirs, keep=set())
            return None
        try:
            sid = table.commit(messages)
        except (CommitConflict, CommitRetriesExhausted):
            self.remove_files(table, dirs, keep=set())
            raise
        keep = {f.file_name for m in messages for f in (*m.compact_after, *m.compact_changelog)}
        keep |= {r["_FILE_NAME"] for m in messages for r in m.dv_after}
        self.remove_files(table, dirs, keep)
        return sid

    def remove_files(self, table, dirs, keep: set[str]) -> int:
        """Delete the job's files (names carrying its token) in ``dirs`` except ``keep``; how many were deleted."""
        return remove_tagged_files(table, f"{self.token}-", keep, dirs)


def compact(spark, path: str, full: bool = False, partitions=None, *, tasks: int | None = None) -> int | None:
    """Compact the table at ``path`` with Spark: the driver plans, tasks compact (partition, bucket) splits with the
    engine's kernels, the driver commits ONE COMPACT snapshot and returns its id (None when nothing needed work).

    ``full=True`` rewrites every bucket into one run at the top level; otherwise each bucket runs what universal
    compaction picks (as ``Table.compact``). ``partitions``: a dict or list of dicts of partition column -> value.
    ``tasks``: Spark tasks (default two per core; never more than buckets). A postpone table (``bucket = -2``) is
    compacted by ``Table.compact`` on the driver (engine.postpone.compact). A failed or retried task leaves no
    files behind; a failed job or a conflicting concurrent commit raises with the table unchanged.
    Raises InvalidInput for a bad partition spec, CommitConflict.
    """
    return CompactionJob(path, full=full, partitions=partitions, tasks=tasks).run(spark)


__all__ = ["CompactionJob", "compact"]


def wait_for_running_tasks(spark, timeout: float = 60.0) -> None:
    """Block until no task of this Spark application runs and the Python workers of killed tasks are gone (or
    ``timeout`` seconds passed). After a job fails Spark drops its stage at once but kills the other tasks
    asynchronously: their JVM side ends first, and the Python worker of a killed task is destroyed at the latest
    ``spark.python.task.killTimeout`` (default 2 s) later -- until then it may still create files."""
    import time
    sc = spark.sparkContext
    tracker = sc._jsc.sc().statusTracker()  # the JVM tracker: PySpark's has no executor view
    deadline = time.monotonic() + timeout

    def running() -> bool:
        return bool(sc.statusTracker().getActiveStageIds()) or any(
            e.numRunningTasks() for e in tracker.getExecutorInfos())

    while running() and time.monotonic() < deadline:
        time.sleep(0.1)
    grace = _seconds(sc.getConf().get("spark.python.task.killTimeout", "2s")) + 0.5
    time.sleep(max(0.0, min(grace, deadline - time.monotonic())))


def _seconds(value: str) -> float:
    """A Spark time string (``"2s"``, ``"500ms"``, ``"1min"``, bare seconds) in seconds."""
    value = value.strip().lower()
    for suffix, factor in (("ms", 0.001), ("min", 60.0), ("s", 1.0), ("m", 60.0), ("h", 3600.0)):
        if value.endswith(suffix):
            return float(value[: -len(suffix)]) * factor
    return float(value)
