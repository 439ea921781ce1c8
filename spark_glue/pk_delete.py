"""DELETE with Spark evaluating the condition on a primary-key table whose merge engine cannot take a delete
record (first-row, aggregation / partial-update without remove-record-on-delete): the rows are deleted from the
data files, with the semantics of engine.write.pk_rewrite (Paimon's performNonPrimaryKeyDelete).

Protocol (one call = at most one snapshot):
- No condition, or one Spark can evaluate over the partition columns alone: the table or the matching
  partitions are truncated (engine.write.pk_rewrite, Paimon's metadata-only DELETE); no job runs.
- The driver pins the latest snapshot and plans its splits as the table's batch read sees them.
- Spark reads the table at that snapshot (merged), filters by the condition (rows where it is NULL stay) and keeps
  the matching rows' partition and primary-key columns. The keys are placed by (partition, bucket) -- the bucket
  by Paimon's bucket function on fixed-bucket tables; one Spark partition per table partition on dynamic-bucket
  tables, whose bucket only the index knows -- so each bucket (and its deletion-vector index file) has one owner.
- Each task finds its keys' positions in the bucket's files (engine.write.pk_rewrite.locate_keys: the files
  holding them must be raw convertible, else InvalidInput asking to compact first; such a file holds each of its
  keys once, so the merged row Spark filtered is that file's row) and rewrites the files or marks the positions
  in the bucket's deletion vectors (engine.write.file_changes.change_bucket); its files carry the job token.
- The driver commits all changes as ONE OVERWRITE snapshot and removes the job's leftovers, as
  spark_glue.append_dml does (the same job machinery); CommitConflict (table unchanged, the job's files deleted)
  when a concurrent commit compacted a touched file or changed its vector. Nothing matched: no snapshot.
"""
from __future__ import annotations

import pickle

import pyarrow as pa

from engine.errors import InvalidInput
from engine.write.file_changes import (
    BucketChange,
    FileChange,
    change_bucket,
    discard_changes,
)
from engine.write.pk_rewrite import (
    COMPACT_FIRST,
    considered_splits,
    locate_keys,
    require_rewritable,
)
from spark_glue.append_dml import KEY, AppendDmlJob, spark_truncate
from spark_glue.job_files import tag_files
from spark_glue.reading import EVERY_FILE, TABLE_ALONE
from spark_glue.tables import open_table, pin_snapshot


class PkDeleteJob(AppendDmlJob):
    """Picklable description of one distributed file-rewrite DELETE of a primary-key table (module docstring)."""

    def __init__(self, path: str, snapshot_id: int, splits):
        super().__init__(path, snapshot_id, splits, update=False)
        table = open_table(path)
        self.key_columns = list(dict.fromkeys(list(table.partition_keys) + list(table.schema.trimmed_primary_keys)))
        self.types = [table.arrow_schema.field(c).type for c in self.key_columns]
        self.partition_columns = list(table.partition_keys)
        # the bucket is computable (and so a placement key) only when every partition has the same fixed count
        totals = {sp.total_buckets for sp in splits}
        only = next(iter(totals)) if len(totals) == 1 else -1
        self.total_buckets = only if only > 0 else -1

    def _keys(self, batches) -> pa.Table | None:
        data = [pa.Table.from_batches([b]) for b in batches if b.num_rows]
        if not data:
            return None
        rows = pa.concat_tables(data)
        return pa.table([rows.column(c).cast(t) for c, t in zip(self.key_columns, self.types)],
                        names=self.key_columns)

    def with_bucket(self, batches):
        """mapInArrow function: key rows -> the same rows with the bucket (KEY, -1 when not computable)."""
        from kernels.hashing import bucket_ids
        table = open_table(self.path)
        for batch in batches:
            if self.total_buckets > 0 and batch.num_rows:
                keys = self._keys([batch])
                ids = pa.array(bucket_ids([keys.column(k) for k in table.schema.bucket_keys], self.total_buckets),
                               pa.int32())
            else:
                ids = pa.array([-1] * batch.num_rows, pa.int32())
            yield pa.RecordBatch.from_arrays([*batch.columns, ids], names=[*batch.schema.names, KEY])

    def task(self, batches):
        """mapInArrow function: matched key rows of whole buckets -> one pickled result row."""
        table = tag_files(open_table(self.path), f"{self.token}-")
        changes: list[BucketChange] = []
        try:
            keys = self._keys(batches)
            if keys is not None:
                for split, files in locate_keys(table, list(self.splits.values()), keys):
                    changes.append(change_bucket(table, split, {n: FileChange(p) for n, p in files.items()},
                                                 base_id=self.snapshot_id, commit_user=self.commit_user))
        except BaseException:
            discard_changes(table, changes)
            raise
        yield pa.RecordBatch.from_arrays([pa.array([pickle.dumps((changes, []))], pa.binary())], names=["change"])

    def run(self, matched) -> int | None:
        """Delete the rows whose keys ``matched`` (a DataFrame of ``key_columns``, each key once) holds; the new
        snapshot id, or None when it is empty."""
        from pyspark.sql import functions as F
        spark = matched.sparkSession
        tasks = max(1, spark.sparkContext.defaultParallelism)
        from pyspark.sql.types import IntegerType, StructField, StructType
        schema = StructType([*matched.schema.fields, StructField(KEY, IntegerType())])
        with_bucket = matched.mapInArrow(self.with_bucket, schema)
        placed = with_bucket.repartition(tasks, *[F.col(f"`{c}`") for c in self.partition_columns], F.col(KEY))
        try:
            return self.apply(placed.drop(KEY))
        except InvalidInput:
            raise
        except Exception as e:  # a task's refusal reaches the driver wrapped in Spark's error
            text = str(e)
            if COMPACT_FIRST not in text:
                raise
            detail = text[text.index(COMPACT_FIRST):].splitlines()[0]
            raise InvalidInput(f"delete_where: {detail}", table=open_table(self.path).name) from None


def delete_rewrite(spark, path: str, condition) -> int | None:
    """DELETE FROM the primary-key table at ``path`` WHERE ``condition`` (a Column, None: every row) by changing
    its files (module docstring). Returns the new snapshot id, None when nothing matched. Raises InvalidInput (a
    touched bucket that must be compacted first; nothing committed), UnsupportedFeature (data files lakemerge cannot
    write: engine.write.pk_rewrite.require_rewritable), CommitConflict (table unchanged)."""
    from pyspark.sql import functions as F

    from spark_glue.api import read_table
    table = open_table(path)
    done, sid = spark_truncate(spark, table, condition)  # as engine.write.pk_rewrite
    if done:
        return sid
    require_rewritable(table)
    snap = table.snapshot()
    if snap is None:
        return None
    job = PkDeleteJob(path, snap.id, considered_splits(table, snap, None))
    rows = read_table(spark, path, prune=True, **{**pin_snapshot(snap.id), TABLE_ALONE: "true", EVERY_FILE: "true"})
    if condition is not None:
        rows = rows.where(condition)
    return job.run(rows.select(*[F.col(f"`{c}`") for c in job.key_columns]))
