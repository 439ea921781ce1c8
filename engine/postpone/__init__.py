"""Postpone bucket mode (``bucket = -2``) of primary-key tables, as Paimon runs it.

* Postponed writes put files in the partition's ``bucket-postpone`` directory (bucket -2, total buckets -2); they
  are not merged and batch reads do not see them (Paimon's AbstractBatchTableScan reads only real buckets).
* A postpone compaction (engine.postpone.compact) moves them into the partition's real buckets.
* Batch writes with ``postpone.batch-write-fixed-bucket`` (the default) go straight to real buckets
  (engine.postpone.write).
* A partition's real bucket count is the ``totalBuckets`` its real-bucket files record (engine.postpone.buckets).
"""
from __future__ import annotations

POSTPONE_BUCKET = -2  # the bucket id (and total bucket count) of postponed files


def require_batch_readable(schema, table_name: str) -> None:
    """Raise UnsupportedFeature for batch-read settings lakemerge does not honour, rather than return incomplete
    rows: ``postpone.merge-on-read = true`` (Paimon then merges postponed records into batch reads, routing them to
    their real buckets)."""
    from engine.errors import UnsupportedFeature
    from engine.options import POSTPONE_MERGE_ON_READ
    opts = schema.table_options
    if opts.bucket == POSTPONE_BUCKET and opts.get(POSTPONE_MERGE_ON_READ):
        raise UnsupportedFeature(f"table {table_name!r}: postpone.merge-on-read=true (batch reads merging postponed "
                                 "records) is not supported; compact the table and read with it false")


def real_bucket_splits(splits) -> list:
    """``splits`` without the postpone bucket's: what Paimon's batch reads and lookups see of a postpone table."""
    return [sp for sp in splits if sp.bucket != POSTPONE_BUCKET]
