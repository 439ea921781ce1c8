"""Maintenance after every successful commit of a lakemerge writer, as Paimon's TableCommitImpl.maintain runs it.

Unless ``write-only=true``, after each commit (Table.commit / write / delete / commit_overwrite / compact, the
commits of spark_glue's driver, which go through them; not drop_partitions, which Paimon does not maintain after
either), in Paimon's order:
0. automatic tags (``tag.automatic-creation``) and tag expiration by time (``tag.time-expire-enabled``, tags with a
   time retained), engine.maintenance.auto_tags;
1. partition expiration, when ``partition.expiration-time`` is set and its check is due
   (engine.maintenance.partition_expire);
2. consumers not updated for ``consumer.expiration-time`` are removed (so they stop holding snapshots back);
3. snapshot expiration with the table's ``snapshot.*`` options, then changelog expiration with ``changelog.*``
   (engine.maintenance.expire; consumers and tags keep protecting what they reference).

The commit has landed when this runs: a failure never fails or undoes it. Each step's error is logged (logger
``lakemerge.maintenance``, with the traceback) and the next step still runs; the next commit tries again. Paimon
differs here: a batch commit runs maintain synchronously and throws its error to the caller after the snapshot
landed; a streaming commit runs it on a thread and throws the error at the next commit. lakemerge always runs
synchronously (``snapshot.expire.execution-mode`` is not read).
"""
from __future__ import annotations

import logging
import time

from engine.meta.snapshot import BATCH_COMMIT_IDENTIFIER
from engine.options import CONSUMER_EXPIRATION_TIME, WRITE_ONLY

log = logging.getLogger("lakemerge.maintenance")


def maintain_after_commit(table, commit_identifier: int = BATCH_COMMIT_IDENTIFIER) -> None:
    """Run the steps of the module docstring for ``table`` after a commit with ``commit_identifier``. Never raises
    an Exception (KeyboardInterrupt and the like still propagate)."""
    opts = table.schema.table_options
    if opts.get(WRITE_ONLY):
        return
    from engine.maintenance.auto_tags import maintain_tags
    from engine.maintenance.partition_expire import expire_partitions_if_due
    _step(table, "tag maintenance", lambda: maintain_tags(table, commit_identifier))
    _step(table, "partition expiration", lambda: expire_partitions_if_due(table, commit_identifier))
    ttl = opts.get(CONSUMER_EXPIRATION_TIME)
    if ttl is not None:
        from engine.changelog.consumers import ConsumerManager
        _step(table, "consumer expiration", lambda: ConsumerManager(table).expire(int(time.time() * 1000) - ttl))
    _step(table, "snapshot expiration", table.expire_snapshots)


def _step(table, what: str, fn) -> None:
    try:
        fn()
    except Exception as e:  # the commit landed; see the module docstring
        log.warning("table %s: %s after commit failed (the commit stands; the next commit retries): %s",
                    table.name, what, e, exc_info=True)
