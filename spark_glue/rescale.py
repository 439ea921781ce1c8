"""Distributed rescale: ``rescale(spark, path, bucket_num=None, partitions=None)``, Paimon's Spark ``rescale``
procedure (paimon-spark RescaleProcedure) with Table.rescale's semantics (engine.maintenance.rescale).

Protocol (one call = at most one OVERWRITE snapshot):
- The driver plans with ``engine.maintenance.rescale.plan_rescale`` (the same validation and the real-bucket splits
  of every level of the matched partitions at the latest snapshot), packs the splits into read tasks
  (reading.pack_splits) and draws a job token.
- Read tasks merge-read their (partition, old bucket) splits with the data source's reader
  (reading.MergedTableReader: merged rows of every level; an append table's files in append order).
- The rows are placed by the new count (api.distribute_by_bucket, ``bucket_num``): each (partition, new bucket)
  in exactly one write task.
- Write tasks write their rows with ``rescale_writer`` (an overwrite writer by the new count, sequence numbers from
  the planned snapshot) into files whose names carry the job token (job_files), and return their pickled messages.
- The driver commits them with ``commit_rescale`` (strict mode: CommitConflict when a commit changed a rescaled
  partition after the planned snapshot), then deletes the job's files the snapshot does not list (failed or
  retried attempts). A failed job or commit deletes every file of the job: the table stays at its last snapshot.
"""
from __future__ import annotations

import pickle
import uuid

import pyarrow as pa

from engine.errors import UnsupportedFeature
from engine.maintenance.rescale import RescalePlan, commit_rescale, plan_rescale, rescale_writer
from spark_glue.job_files import job_dirs, remove_tagged_files, tag_files
from spark_glue.tables import open_table, spark_schema


class RescaleJob:
    """Picklable description of one distributed rescale; ``run(spark)`` executes it (module docstring)."""

    def __init__(self, path: str, plan: RescalePlan, schema_id: int, *, read_groups, num_tasks: int | None = None):
        self.path = path
        self.plan = plan
        self.schema_id = schema_id
        self.read_groups = [tuple(g) for g in read_groups]
        self.num_tasks = num_tasks
        self.token = uuid.uuid4().hex[:16]
        self.commit_user = f"lakemerge-spark-rescale-{self.token}"

    @classmethod
    def for_table(cls, path: str, bucket_num: int | None = None, partitions=None, *, num_tasks: int | None = None):
        """The job rescaling the table at ``path`` (see ``rescale``), or None when there is nothing to rescale.
        Raises as ``rescale`` before any job runs."""
        from spark_glue.reading import DEFAULT_OPEN_COST, DEFAULT_TARGET, pack_splits
        table = open_table(path)
        plan = plan_rescale(table, bucket_num, partitions)
        if plan is None:
            return None
        check_spark_representable(table)
        splits = [sp for parts in plan.splits.values() for sp in parts]
        groups = pack_splits(splits, DEFAULT_TARGET, DEFAULT_OPEN_COST)
        return cls(path, plan, table.schema.id, read_groups=groups, num_tasks=num_tasks)

    @property
    def tag(self) -> str:
        return f"{self.token}-"

    # --- executor side ------------------------------------------------------------------------------
    def read_task(self, schema):
        """mapInArrow function: input rows are read-group indexes -> the merged rows of those groups."""
        from spark_glue.reading import MergedTableReader, SplitGroup

        def task(batches):
            reader = MergedTableReader({"path": self.path}, schema)
            for batch in batches:
                for index in batch.column(0).to_pylist():
                    group = SplitGroup(self.read_groups[index], self.plan.snapshot_id, schema_id=self.schema_id)
                    yield from reader.read(group)
        return task

    def write_task(self, batches):
        """mapInArrow function: this task's rows (whole new buckets) -> one row holding its pickled messages."""
        table = tag_files(open_table(self.path), self.tag)
        writer = rescale_writer(table, self.plan, commit_user=self.commit_user)
        writer.base_snapshot = table.snapshot(self.plan.snapshot_id)
        with writer:
            for batch in batches:
                if batch.num_rows:
                    writer.write(pa.Table.from_batches([batch]))
            messages = writer.prepare_commit()
        yield pa.RecordBatch.from_arrays([pa.array([pickle.dumps(messages)], pa.binary())], names=["messages"])

    # --- driver side --------------------------------------------------------------------------------
    def run(self, spark) -> int:
        """Read, place, write and commit (module docstring); the OVERWRITE snapshot's id."""
        from spark_glue.api import distribute_by_bucket
        from spark_glue.compaction import wait_for_running_tasks
        from spark_glue.writing import message_file_names
        table = open_table(self.path)
        schema = spark_schema(table.arrow_schema)
        n = len(self.read_groups)
        rows = spark.range(0, n, 1, n).mapInArrow(self.read_task(schema), schema)
        count = self.plan.bucket_num or table.schema.table_options.bucket
        placed = distribute_by_bucket(rows, self.path, self.num_tasks, bucket_num=count)
        dirs = job_dirs(table, {table.bucket_dir(parts[0].partition_values, b)
                                for parts in self.plan.splits.values() for b in range(count)})
        try:
            collected = placed.mapInArrow(self.write_task, "messages binary").collect()
        except BaseException:
            wait_for_running_tasks(spark)  # tasks of the failed job may still be writing (killed asynchronously)
            remove_tagged_files(table, self.tag, keep=set(), dirs=dirs)
            raise
        messages = [m for r in collected for m in pickle.loads(bytes(r.messages))]
        try:
            sid = commit_rescale(table, self.plan, messages, commit_user=self.commit_user)
        except BaseException:
            # the commit deleted the messages' files; failed attempts' leftovers go too, unless the commit landed
            if not any(s.commit_user == self.commit_user for s in _snapshots_after(table, self.plan.snapshot_id)):
                remove_tagged_files(table, self.tag, keep=set(), dirs=dirs)
            raise
        remove_tagged_files(table, self.tag, keep=message_file_names(messages), dirs=dirs)
        return sid


def _snapshots_after(table, snapshot_id: int):
    sm = table.snapshot_manager
    return [sm.snapshot(i) for i in sm.ids() if i > snapshot_id]


def check_spark_representable(table) -> None:
    """Raise UnsupportedFeature (naming the column) for a table with nanosecond timestamps: Spark holds
    microseconds, so rows passing through Spark would lose digits; Table.rescale keeps them."""
    def nanos(t: pa.DataType) -> bool:
        if pa.types.is_timestamp(t):
            return t.unit == "ns"
        if pa.types.is_struct(t):
            return any(nanos(t.field(i).type) for i in range(t.num_fields))
        if pa.types.is_map(t):
            return nanos(t.key_type) or nanos(t.item_type)
        if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
            return nanos(t.value_type)
        return False
    fine = next((f.name for f in table.arrow_schema if nanos(f.type)), None)
    if fine is not None:
        raise UnsupportedFeature(f"table {table.name!r}: column {fine!r} holds nanosecond timestamps, which Spark "
                                 "reads as microseconds; a Spark rescale would truncate them: use Table.rescale "
                                 "(lakemerge rescale)")


def rescale(spark, path: str, bucket_num: int | None = None, partitions=None, *,
            num_tasks: int | None = None) -> int | None:
    """Rescale the table at ``path`` (a branch as ``<table>$branch_<name>``) with Spark: the partitions matching
    ``partitions`` (a dict or list of dicts of partition column -> value; None: all) are rewritten with
    ``bucket_num`` buckets (default: the table's ``bucket``; required for a postpone table) in ONE OVERWRITE
    snapshot, as Table.rescale; returns its id, or None when no matched partition holds real-bucket files.
    ``num_tasks``: write tasks (default one per core). Raises what Table.rescale raises (InvalidInput,
    UnsupportedFeature, CommitConflict when the partitions changed while it ran), and UnsupportedFeature for
    nanosecond timestamp columns; on any failure the table is unchanged and the job's files are deleted."""
    job = RescaleJob.for_table(path, bucket_num, partitions, num_tasks=num_tasks)
    return None if job is None else job.run(spark)


__all__ = ["RescaleJob", "rescale"]
