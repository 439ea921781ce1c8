"""One bucket count per partition of a fixed-bucket table, as Paimon keeps it after ``ALTER ... SET ('bucket')``.

Changing option ``bucket`` only changes metadata: each data file records the count it was placed by
(``totalBuckets``), reads prune buckets per file, and a partition moves to the new count only when it is
overwritten (``Table.rescale``, or an overwrite writer). Until then a writer must not add files with the new count
next to the old ones: Paimon's AbstractFileStoreWrite refuses it when the writer restores the bucket, and
ConflictDetection refuses a non-overwrite commit that leaves two counts in one partition, both with the message of
``bucket_num_mismatch``.
"""
from __future__ import annotations

from engine.errors import InvalidInput
from engine.paths import partition_value_text


def partition_text(schema, values: tuple) -> str:
    """Paimon's name of a partition in the bucket-count messages: ``partition {k=v, ...}``, or ``table`` for an
    unpartitioned table (values rendered as in directory names)."""
    if not schema.partition_keys:
        return "table"
    from engine.options import PARTITION_DEFAULT_NAME, PARTITION_LEGACY_NAME
    opts = schema.table_options
    types = schema.types_of(schema.partition_keys)
    parts = [f"{k}={partition_value_text(v, t, opts.get(PARTITION_DEFAULT_NAME), opts.get(PARTITION_LEGACY_NAME))}"
             for k, v, t in zip(schema.partition_keys, values, types)]
    return "partition {" + ", ".join(parts) + "}"


def bucket_num_mismatch(schema, values: tuple, new: int, previous: int) -> str:
    """Paimon's message for writing a partition with another bucket count than its files record, with lakemerge's
    way to rescale it."""
    return (f"Try to write {partition_text(schema, values)} with a new bucket num {new}, but the previous bucket num "
            f"is {previous}. Please switch to batch mode, and perform INSERT OVERWRITE to rescale current data layout "
            "first. (lakemerge: Table.rescale, or an overwrite: new_write(overwrite=True) + commit_overwrite)")


def fixed_bucket_counts(entries) -> dict[bytes, int]:
    """Partition -> the bucket count its live fixed-bucket ``entries`` record (entries recording no count, such as
    bucket-unaware, dynamic or postponed files, are skipped). Where files disagree (only possible in a damaged
    table) the first count wins; the commit-time check then refuses writes to it."""
    counts: dict[bytes, int] = {}
    for e in entries:
        if e.total_buckets > 0 and e.bucket >= 0:
            counts.setdefault(e.partition, e.total_buckets)
    return counts


def check_partition_count(table, counts: dict[bytes, int], partition: bytes, values: tuple, num_buckets: int) -> None:
    """Raise InvalidInput (Paimon's message) when ``partition`` already has files placed by a bucket count other
    than ``num_buckets``, the count a writer would place its rows by."""
    previous = counts.get(partition)
    if num_buckets > 0 and previous is not None and previous != num_buckets:
        raise InvalidInput(bucket_num_mismatch(table.schema, values, num_buckets, previous), table=table.name)
