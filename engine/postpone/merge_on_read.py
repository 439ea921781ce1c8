"""Batch reads of postpone tables with ``postpone.merge-on-read = true`` (Paimon 2.0's PostponeMergeReadBuilder /
MergeFileSplitRead.createPostponeMergeReader, in Flink and Spark).

Without the option a batch read sees real buckets only; with it, the postponed records (files of the partition's
``bucket-postpone`` directory, not yet compacted) are merged in as a compaction would place them, without writing:

* each postponed record goes to the real bucket of its key under the partition's bucket count (the count its
  real-bucket files record); a partition without real-bucket files has no count yet, and its postponed records are
  merged among themselves (where they go does not change the merged rows: a key's records all meet in one place);
* postponed records are newer than every real-bucket record of their bucket and keep their commit order among
  themselves (files in the order their snapshots added them, rows in file order): they get the sequence numbers
  after the bucket's largest, as the postpone compaction's writer gives them; ``sequence.field`` still orders first;
* they are merged with the table's merge engine like one more sorted run (engine.read.split_read.SplitReader);
* real buckets are read at every level, also the level-0 files a deletion-vector batch scan skips (Paimon plans
  them with a plain snapshot reader, without AbstractBatchTableScan's level filter).

Streaming reads, changelog reads and lookups are not merged on read (Paimon: a batch-scan feature; its lookup
joins refuse such tables, and so does ``Table.lookup``). Contract of ``attach_postponed``: every key of the selected
partitions that has a postponed or real record lands in exactly one returned split.
"""
from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict

import numpy as np
import pyarrow as pa

from engine.postpone import POSTPONE_BUCKET


def merges_on_read(schema) -> bool:
    """True when batch reads of this table merge postponed records (``bucket = -2``, primary key,
    ``postpone.merge-on-read = true``)."""
    from engine.options import POSTPONE_MERGE_ON_READ
    opts = schema.table_options
    return opts.bucket == POSTPONE_BUCKET and bool(schema.primary_keys) and bool(opts.get(POSTPONE_MERGE_ON_READ))


def attach_postponed(splits, batch_views) -> list:
    """The batch splits of a merge-on-read postpone table. ``splits``: a plan's splits (postpone-bucket splits
    included, their files in commit order); ``batch_views``: the plan's real-bucket splits, every level (Paimon's
    postpone merge read does not skip the level-0 files of deletion-vector tables). A partition with postponed
    files gets a split for each of its buckets (an empty one where the plan has none), each carrying the postponed
    split (``Split.postponed``); a partition without real-bucket files gets one split of bucket -2 with no files that
    carries them. Splits left with neither files nor postponed records are dropped."""
    postponed = {sp.partition: sp for sp in splits if sp.bucket == POSTPONE_BUCKET and sp.files}
    by_partition: dict[bytes, list] = {}
    for sp in batch_views:
        by_partition.setdefault(sp.partition, []).append(sp)
    out = []
    for partition, pp in postponed.items():
        real = by_partition.pop(partition, [])
        if not real:
            out.append(dataclasses.replace(pp, files=(), vectors=type(pp.vectors)(), postponed=pp))
            continue
        totals = {sp.total_buckets for sp in real}
        if len(totals) > 1:
            from engine.errors import UnsupportedFeature
            raise UnsupportedFeature(f"partition {tuple(pp.partition_values)} holds real-bucket files of "
                                     f"{len(totals)} bucket counts {sorted(totals)}: postponed records cannot be "
                                     "merged on read; rescale or compact the partition first")
        total = totals.pop()
        have = {sp.bucket: sp for sp in real}
        for bucket in range(total):
            sp = have.pop(bucket, None)
            if sp is None:
                sp = dataclasses.replace(real[0], bucket=bucket, bucket_dir=_bucket_dir(real[0], bucket), files=(),
                                         vectors=type(real[0].vectors)())
            out.append(dataclasses.replace(sp, postponed=pp))
    out += [sp for parts in by_partition.values() for sp in parts if sp.files]
    out.sort(key=lambda sp: (sp.partition, sp.bucket))
    return out


def _bucket_dir(split, bucket: int) -> str:
    import os
    return os.path.join(os.path.dirname(split.bucket_dir), f"bucket-{bucket}")


def postponed_run(reader, split, columns: list[str]) -> pa.Table | None:
    """The postponed records of ``split``'s bucket as one normalized run, merged per key as a writer's buffer
    is (engine.merge.merge_unsorted): read from ``split.postponed`` in commit order, kept where the key's bucket is
    ``split.bucket`` (all of them for bucket -2), numbered after the largest sequence number of ``split``'s files.
    None when no record belongs here. ``reader``: the SplitReader; ``columns``: what it decodes. The reader keeps
    the last partitions' decoded postponed records (and their buckets), so reading a partition's buckets decodes
    its postponed files once (``_decoded_postponed``)."""
    from engine.merge import SEQUENCE_NUMBER, VALUE_KIND, merge_unsorted
    from engine.write.table_write import filter_kinds

    rows, ids = _decoded_postponed(reader, split, columns)
    if rows is None or rows.num_rows == 0:
        return None
    schema = reader.schema
    if ids is not None:
        rows = rows.filter(pa.array(ids == split.bucket))
    kinds = rows.column(VALUE_KIND).to_numpy(zero_copy_only=False).astype(np.int8)
    rows, kinds = filter_kinds(schema.table_options, rows, kinds)
    if rows.num_rows == 0:
        return None
    base = max((f.max_sequence_number for f in split.files), default=-1) + 1
    seq = pa.array(np.arange(base, base + rows.num_rows, dtype=np.int64))
    rows = rows.set_column(rows.column_names.index(SEQUENCE_NUMBER), SEQUENCE_NUMBER, seq)
    return merge_unsorted(rows, schema, drop_retracts=False)



class _PostponedCache:
    """The decoded postponed records of the last few partitions a SplitReader read (bounded: a streaming read's
    memory stays a few partitions' postponed records). Threads reading one partition's buckets decode once."""
    SIZE = 4

    def __init__(self):
        self.lock = threading.Lock()
        self.entries: OrderedDict = OrderedDict()


_CREATE_LOCK = threading.Lock()


def _decoded_postponed(reader, split, columns: list[str]):
    """``(rows, bucket ids or None)`` of ``split.postponed``'s files decoded with ``columns``, in commit order; the
    ids are each record's real bucket under ``split.total_buckets`` (None for bucket -2: no count). Cached on
    ``reader`` (_PostponedCache), so the buckets of one partition decode its postponed files once."""
    from engine.merge import KEY_COLUMN_PREFIX
    with _CREATE_LOCK:
        cache = getattr(reader, "_postponed_cache", None)
        if cache is None:
            cache = reader._postponed_cache = _PostponedCache()
    pp = split.postponed
    key = (pp.partition, tuple(f.file_name for f in pp.files), tuple(columns), split.total_buckets)
    with cache.lock:
        if key in cache.entries:
            cache.entries.move_to_end(key)
            return cache.entries[key]
        parts = [reader.read_file(pp, f, columns) for f in pp.files]
        rows = pa.concat_tables(parts) if parts else None
        ids = None
        if rows is not None and rows.num_rows and split.total_buckets > 0:
            from kernels.hashing import bucket_ids
            ids = np.asarray(bucket_ids([rows.column(KEY_COLUMN_PREFIX + k) for k in reader.schema.bucket_keys],
                                        split.total_buckets))
        cache.entries[key] = (rows, ids)
        while len(cache.entries) > _PostponedCache.SIZE:
            cache.entries.popitem(last=False)
        return rows, ids
