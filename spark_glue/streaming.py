"""Exactly-once streaming writes.

Two equivalent ways:
- ``df.writeStream.format("lakemerge").option("checkpointLocation", ck).start(path)``: the Python stream
  writer commits each micro-batch as one snapshot whose commit identifier is the batch id, under a commit user
  derived from the checkpoint location (or option ``commit.user``).
- ``df.writeStream.foreachBatch(stream_batch_writer(path, commit_user)).start()``: the same through
  ``write_table`` (one task per bucket), for pipelines that already use foreachBatch.
A micro-batch replayed after a failure (same batch id, same commit user) is detected and not applied again; a batch
id below the commit user's newest committed one (a query restarted without its checkpoint under the same user) is
refused with InvalidInput rather than skipped.
"""
from __future__ import annotations

from spark_glue.api import write_table


def stream_batch_writer(path: str, commit_user: str, **options):
    """A ``foreachBatch`` function upserting each micro-batch into the table at ``path`` exactly once.
    ``commit_user`` must stay the same across restarts of the query (e.g. the query's name)."""
    def write_batch(batch_df, batch_id: int) -> None:
        write_table(batch_df, path, **{**options, "commit.user": commit_user, "commit.identifier": int(batch_id)})
    return write_batch


__all__ = ["stream_batch_writer"]
