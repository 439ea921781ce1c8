"""How many real buckets a partition of a postpone table has (Paimon's PostponeUtils).

A partition's bucket count is the ``totalBuckets`` its real-bucket files record; a partition without real-bucket
files gets one when rows first go to real buckets: ``postpone.default-bucket-num`` when set, else an estimate from
``postpone.target-row-num-per-bucket`` (rows) or ``postpone.target-size-per-bucket`` (bytes, default 1 GB).
"""
from __future__ import annotations

from engine.errors import CorruptFile, InvalidOption
from engine.options import (
    POSTPONE_DEFAULT_BUCKET_NUM,
    POSTPONE_MAX_PARALLELISM,
    POSTPONE_RESCALE_LOAD_FACTOR,
    POSTPONE_TARGET_ROW_NUM_PER_BUCKET,
    POSTPONE_TARGET_SIZE_PER_BUCKET,
    TableOptions,
)
from engine.postpone import POSTPONE_BUCKET


def known_bucket_counts(entries, where: str) -> dict[bytes, int]:
    """Partition -> the totalBuckets its live real-bucket ``entries`` record (PostponeUtils.getKnownNumBuckets).
    Raises CorruptFile (naming ``where``) when two files of one partition disagree."""
    known: dict[bytes, int] = {}
    for e in entries:
        if e.bucket == POSTPONE_BUCKET or e.total_buckets <= 0:
            continue
        old = known.setdefault(e.partition, e.total_buckets)
        if old != e.total_buckets:
            raise CorruptFile(where, f"a partition's real-bucket files record both {old} and {e.total_buckets} "
                                     f"total buckets (file {e.file.file_name})")
    return known


def _positive(opts: TableOptions, key: str) -> int | None:
    value = opts.get(key)
    if value is not None and value <= 0:
        raise InvalidOption(key, opts.raw.get(key), "must be greater than 0", table=opts.table)
    return value


def _ceil_div(value: int, divisor: int) -> int:
    return 0 if value <= 0 else (value - 1) // divisor + 1


def batch_write_buckets(opts: TableOptions, rows: int, nbytes: int) -> int:
    """Buckets of a partition that a fixed-bucket batch write gives real buckets first, for its ``rows`` rows of
    about ``nbytes`` bytes (PostponeUtils.decideFixedBucketNum without an existing layout): the default bucket
    count, else the required count rounded up to a power of two and capped by
    ``postpone.batch-write-fixed-bucket.max-parallelism``. Raises InvalidOption for a non-positive option."""
    return decide_fixed_bucket_num(opts, rows, nbytes, None)[0]


def decide_fixed_bucket_num(opts: TableOptions, rows: int, nbytes: int, existing: int | None) -> tuple[int, bool]:
    """``(buckets, rescale)`` for a staged batch of ``rows`` rows / ``nbytes`` file bytes written into a partition
    with ``existing`` real buckets (None: none yet), as PostponeUtils.decideFixedBucketNum (used by Paimon's Spark
    SparkPostponeStagedCommitter only; compaction never rescales). Without a layout: the default bucket count, else
    the required count rounded up to a power of two, capped by max-parallelism. With one: it is kept unless the
    required count exceeds ``existing`` times ``postpone.batch-write-fixed-bucket.rescale-load-factor`` and the
    rounded count is larger; then ``rescale`` is True (the partition's files are rewritten with the new count
    before the batch is written). Raises InvalidOption for a non-positive option."""
    default = _positive(opts, POSTPONE_DEFAULT_BUCKET_NUM)
    if existing is None and default is not None:
        return default, False
    cap = _positive(opts, POSTPONE_MAX_PARALLELISM)
    factor = _positive(opts, POSTPONE_RESCALE_LOAD_FACTOR)
    target_rows = _positive(opts, POSTPONE_TARGET_ROW_NUM_PER_BUCKET)
    if target_rows is not None:
        required = _ceil_div(rows, target_rows)
    else:
        required = _ceil_div(nbytes, _positive(opts, POSTPONE_TARGET_SIZE_PER_BUCKET))
    required = max(required, 1)
    capped = min(required, cap)
    suggested = 1 if capped <= 1 else min(1 << (capped - 1).bit_length(), cap)
    if existing is None:
        return suggested, False
    if required > existing * factor and suggested > existing:
        return suggested, True
    return existing, False


def compaction_buckets(opts: TableOptions, rows: int, nbytes: int) -> int:
    """Buckets of a partition that a postpone compaction gives real buckets first, from its postponed files'
    ``rows`` and ``nbytes`` (file sizes), as PostponeUtils.createPostponeBucketNumResolver: the default bucket
    count, else ceil(rows / target rows) or ceil(bytes / target size), at least 1. Raises InvalidOption."""
    default = _positive(opts, POSTPONE_DEFAULT_BUCKET_NUM)
    if default is not None:
        return default
    target_rows = _positive(opts, POSTPONE_TARGET_ROW_NUM_PER_BUCKET)
    if target_rows is not None:
        return max(1, _ceil_div(rows, target_rows))
    return max(1, _ceil_div(nbytes, _positive(opts, POSTPONE_TARGET_SIZE_PER_BUCKET)))
