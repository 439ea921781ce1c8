"""Bucket counts of a Spark batch write into a postpone-bucket table (``bucket = -2``), decided on the driver.

With ``postpone.batch-write-fixed-bucket`` (the default) a batch write puts rows straight into real buckets, one
bucket count per partition, as the engine's FixedBucketPostponeWrite decides it (engine.postpone.write): a
partition keeps the count its real-bucket files in the job's base snapshot record (none for an overwrite, which
decides afresh); another gets ``postpone.default-bucket-num``, else ``engine.postpone.buckets.batch_write_buckets``
of its input rows and estimated bytes. Those sizes come from one Spark aggregation over the input (only when the
default is unset): every task measures its batches as the engine's writer measures its input (rows conformed to
the table, less those the writer drops, each weighing its batch's average Arrow size) and the driver sums them
per partition. The input is then placed by (partition, bucket) with these counts (api.distribute_by_bucket) and
each task writes its real buckets; no row passes through the driver.
"""
from __future__ import annotations

import pyarrow as pa

from engine.options import POSTPONE_DEFAULT_BUCKET_NUM
from engine.postpone.buckets import batch_write_buckets, known_bucket_counts
from spark_glue.tables import open_table


def decide_bucket_counts(df, path: str, base_id: int | None, *, overwrite: bool, kind_column: str | None = None
                         ) -> dict[bytes, int]:
    """Partition (serialized) -> bucket count for writing ``df`` into the postpone table at ``path`` from snapshot
    ``base_id`` (module docstring). With ``postpone.default-bucket-num`` set, only the known counts: every other
    partition takes the default (no pass over ``df``). Raises InvalidOption for a non-positive option, the
    engine's input errors (SchemaMismatch, NullPrimaryKey, ...) from the measuring tasks, wrapped by Spark."""
    table = open_table(path)
    opts = table.schema.table_options
    known = {}
    if base_id is not None and not overwrite:
        known = known_bucket_counts(table.manifests.live_entries(table.snapshot(base_id)), table.root)
    if opts.get(POSTPONE_DEFAULT_BUCKET_NUM) is not None:
        batch_write_buckets(opts, 0, 0)  # validates the default before any task runs
        return known
    if not table.partition_keys and known:  # the only partition has its count: nothing to measure
        return known
    for partition, rows, nbytes in _input_sizes(df, path, kind_column):
        if partition not in known:
            known[partition] = batch_write_buckets(opts, rows, nbytes)
    return known


def _input_sizes(df, path: str, kind_column: str | None) -> list[tuple[bytes, int, int]]:
    """(partition, rows, estimated bytes) of ``df``'s rows per partition: one mapInArrow and a sum per partition;
    only one row per partition reaches the driver."""
    from pyspark.sql import functions as F

    def measure(batches):
        from engine.postpone.write import partition_stats
        from engine.write.table_write import filter_kinds
        from engine.write.validate import conform
        table = open_table(path)
        for batch in batches:
            rows = pa.Table.from_batches([batch])
            kinds = None
            if kind_column and kind_column in rows.column_names:
                kinds = rows.column(kind_column)
                rows = rows.drop_columns([kind_column])
            rows, kinds = conform(rows, table.schema, table.name, row_kinds=kinds)
            rows, _ = filter_kinds(table.schema.table_options, rows, kinds)
            stats = partition_stats(table.schema, rows)
            if stats:
                yield pa.RecordBatch.from_arrays(
                    [pa.array(list(stats), pa.binary()), pa.array([s[0] for s in stats.values()], pa.int64()),
                     pa.array([s[1] for s in stats.values()], pa.int64())], names=["partition", "rows", "bytes"])

    sizes = df.mapInArrow(measure, "partition binary, rows long, bytes long") \
        .groupBy("partition").agg(F.sum("rows").alias("rows"), F.sum("bytes").alias("bytes")).collect()
    return [(bytes(r.partition), int(r.rows), int(r.bytes)) for r in sizes]
