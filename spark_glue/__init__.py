"""Spark integration for lakemerge (everything that imports pyspark lives in this package).

``register(spark)`` adds the ``lakemerge`` data source; ``read_table`` / ``write_table`` are the DataFrame entry
points with filter pushdown and bucket-parallel writes; ``merge_into`` / ``delete_where`` / ``update_where`` are
row-level operations; ``stream_batch_writer`` is the foreachBatch helper for exactly-once streaming writes;
``compact`` is distributed compaction; ``read_stream`` streams a table's changes (``_row_kind``);
``drop_partitions`` drops partitions (Table.drop_partitions, committed from the driver); ``rescale`` rewrites
partitions with a new bucket count (Table.rescale, distributed).
Engine and kernels never import pyspark.
"""
from spark_glue.api import distribute_by_bucket, read_table, register, write_table

__all__ = ["register", "read_table", "write_table", "distribute_by_bucket"]
from spark_glue.dml import delete_where, merge_into, update_where  # noqa: E402

__all__ += ["merge_into", "delete_where", "update_where"]
from spark_glue.streaming import stream_batch_writer  # noqa: E402

__all__ += ["stream_batch_writer"]
from spark_glue.api import drop_partitions, read_stream  # noqa: E402
from spark_glue.compaction import compact  # noqa: E402
from spark_glue.rescale import rescale  # noqa: E402

__all__ += ["read_stream", "compact", "drop_partitions", "rescale"]
