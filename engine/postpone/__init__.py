"""Postpone bucket mode (``bucket = -2``) of primary-key tables, as Paimon runs it.

* Postponed writes put files in the partition's ``bucket-postpone`` directory (bucket -2, total buckets -2); they
  are not merged and batch reads do not see them (Paimon's AbstractBatchTableScan reads only real buckets), unless
  ``postpone.merge-on-read`` (engine.postpone.merge_on_read).
* A postpone compaction (engine.postpone.compact) moves them into the partition's real buckets.
* Batch writes with ``postpone.batch-write-fixed-bucket`` (the default) go straight to real buckets
  (engine.postpone.write).
* A partition's real bucket count is the ``totalBuckets`` its real-bucket files record (engine.postpone.buckets).
"""
from __future__ import annotations

POSTPONE_BUCKET = -2  # the bucket id (and total bucket count) of postponed files


def require_lookup_readable(schema, table_name: str) -> None:
    """Raise UnsupportedFeature for a point lookup of a ``postpone.merge-on-read`` table: its batch reads merge
    postponed records in (engine.postpone.merge_on_read), which lookups do not; Paimon's lookup reads refuse such
    tables too (DataTableSource: "not supported for lookup reads")."""
    from engine.errors import UnsupportedFeature
    from engine.postpone.merge_on_read import merges_on_read
    if merges_on_read(schema):
        raise UnsupportedFeature(f"table {table_name!r}: lookups of a postpone.merge-on-read table are not "
                                 "supported (as in Paimon); read with a key filter instead")


def real_bucket_splits(splits) -> list:
    """``splits`` without the postpone bucket's: what Paimon's batch reads and lookups see of a postpone table."""
    return [sp for sp in splits if sp.bucket != POSTPONE_BUCKET]
