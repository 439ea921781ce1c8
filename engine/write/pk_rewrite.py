"""DELETE from a primary-key table whose merge engine cannot take a delete record -- first-row, aggregation without
``aggregation.remove-record-on-delete``, partial-update without ``partial-update.remove-record-on-delete`` /
``partial-update.remove-record-on-sequence-group`` (Paimon's PrimaryKeyTableUtils.validatePKUpsertDeletable) -- as
Paimon's DeleteFromPaimonTableCommand.performNonPrimaryKeyDelete does: no record is written for the deleted rows;
the data files holding them change instead.

- No condition, or one over partition columns only: the table or the matching partitions are truncated (one
  OVERWRITE snapshot dropping their files and vectors, engine.append.row_level.drop_partitions), as Paimon's
  OptimizeMetadataOnlyDeleteFromPaimonTable turns such a DELETE into a truncate: no compaction needed, and the
  level-0 files a deletion-vector table's read skips go too; with ``delete.force-produce-changelog`` a partition
  condition takes the row-level path, as in Paimon.
- Considered files: per bucket, the files whose key statistics may match the condition (the scan's pruning; value
  statistics prune whole buckets only), without level 0 on a deletion-vector table (its batch read skips level 0
  unless ``deletion-vectors.merge-on-read``, as Paimon's batchScanSkipLevel0).
- Every considered file must be raw convertible (Paimon's MergeTreeSplitGenerator.splitForBatch): the bucket's
  considered files are all off level 0 without delete rows and on one level (any levels in deletion-vector mode;
  for first-row, any levels when no key has records in two of them), or the file is alone in its key-range section
  without delete rows. Otherwise InvalidInput with
  Paimon's hint to compact first, before anything is written. Such a file holds the only record of each of its
  keys among the files that can match, so its rows are the merged rows the table's read shows.
- The condition is evaluated on those rows: their +I / +U rows (a -U / -D row never matches), with
  ``fields.<f>.default-value`` applied and rows a deletion vector marks dropped.
- Deletion-vector table: the matching rows' positions are marked in the bucket's vectors; no data file is
  written. Otherwise every touched file is rewritten without them (engine.write.file_changes).
- All of it lands in ONE OVERWRITE snapshot (engine.commit.row_level); nothing matched: no snapshot. A concurrent
  commit that removed a touched file (compaction) or changed its vector raises CommitConflict; the table stays at
  its last snapshot and the written files are deleted.

Where lakemerge differs from Paimon:
- Paimon writes the kept rows of a touched file as new level-0 files with new sequence numbers (first-row with
  ignore-previous-files, the other engines write-only); here the rewrite replaces the file at its level, each kept
  row with its own sequence number and kind. Reads are the same; the bucket gets no level-0 churn.
- No changelog is written: Paimon with ``changelog-producer=input`` would emit the kept rows as +I records.
- Paimon takes every level of a first-row table as raw convertible once level 0 is empty (its lookup compaction
  drops a level-0 key already in a deeper level, so each key is in one file); lakemerge's compaction does the same
  (engine.changelog.producers), but tables compacted by lakemerge before it did may hold a key in two levels, so
  here the files' keys are compared first and such a bucket is refused (compact first) rather than deleting the
  first record and resurrecting the later one.
- Paimon packs small key-range sections of a bucket into one split, which is then not raw convertible (it refuses
  and asks for a compaction); lakemerge judges each section alone, so it accepts such buckets.
- lakemerge's batch read of a first-row table shows every level (README); the considered files include level 0
  there too, as in Paimon's DELETE (whose candidate scan does not skip level 0), so uncompacted level-0 data that
  overlaps other considered files is refused the same way.
"""
from __future__ import annotations

import uuid
from bisect import bisect_left

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.compact.levels import key_decoder
from engine.compact.rewriter import sections
from engine.errors import InvalidInput
from engine.merge import KEY_COLUMN_PREFIX
from engine.meta import binary_row
from engine.read import predicate as pred
from engine.read.scan import Split
from engine.read.split_read import SplitReader, batch_splits
from engine.schema import VALUE_KIND
from engine.write.file_changes import (
    FileChange,
    change_bucket,
    commit_changes,
    discard_changes,
)

COMPACT_FIRST = "Only compacted table can generate touched files, please use 'COMPACT' procedure first"
POSITION = "__lakemerge_position"
VISIBLE_KINDS = pa.array([0, 2], pa.int8())  # +I, +U


def require_rewritable(table) -> None:
    """Raise UnsupportedFeature when the DELETE would write data files lakemerge cannot write for ``table`` (a
    format lakemerge does not write, ...: TableOptions.require_writable) -- not in deletion-vector mode, which
    writes only index files. A postpone-bucket table qualifies: only files of its real buckets are rewritten."""
    from engine.options import TableOptions
    if not table.schema.table_options.deletion_vectors:
        TableOptions(table.schema.options, table=table.name).require_writable(allow_dynamic_bucket=True,
                                                                              allow_postpone_bucket=True)


def considered_splits(table, snap, dnf) -> list[Split]:
    """The splits of ``snap`` with the files that may hold a row matching ``dnf`` (None: all), as the table's batch
    read sees them (module docstring)."""
    return batch_splits(table.scan().plan(snap, dnf), table.schema)


def require_raw_convertible(table, split: Split) -> None:
    """Raise InvalidInput (naming the table, partition and bucket, with Paimon's hint to compact first) unless every
    file of ``split`` is raw convertible among the split's files (module docstring)."""
    schema = table.schema
    files = list(split.files)
    clean = [not f.delete_row_count for f in files]
    opts = schema.table_options
    if all(clean) and all(f.level > 0 for f in files) and (
            opts.deletion_vectors or len({f.level for f in files}) == 1
            or (opts.merge_engine == "first-row" and _one_record_per_key(table, split))):
        return
    key_types = schema.types_of(schema.trimmed_primary_keys)
    for section in sections(files, key_decoder(key_types), key_decoder(key_types, upper=True)):
        flat = [f for run in section for f in run]
        if len(flat) > 1 or flat[0].delete_row_count:
            what = (f"{len(flat)} data files with overlapping keys ({', '.join(f.file_name for f in flat[:3])})"
                    if len(flat) > 1 else f"data file {flat[0].file_name} with delete records")
            raise InvalidInput(f"delete_where: {COMPACT_FIRST}: bucket {split.bucket} of partition "
                               f"{split.partition_values} holds {what}; merge-engine={opts.merge_engine} cannot take "
                               "delete records, so the rows are deleted from the files, which needs each key in one "
                               "file", table=table.name)


def _one_record_per_key(table, split: Split) -> bool:
    """True when no key has a record in two of the split's files (their key columns read and compared)."""
    from engine.changelog.producers import unique_keys
    reader = SplitReader(table.file_io, table.schema, table.schema_manager.schema)
    keys = [reader.read_file(split, f, [], live_only=False) for f in split.files]
    distinct = unique_keys(keys, table.schema)
    return distinct is None or distinct.num_rows == sum(k.num_rows for k in keys)


def visible_rows(table, reader: SplitReader, split: Split, meta) -> pa.Table:
    """The rows of raw-convertible file ``meta`` the table's read shows (+I / +U rows not marked deleted, defaults
    applied), all table columns plus POSITION (the row's index in the file)."""
    from engine.deletion_vectors.index_file import read_deletion_vector
    from engine.merge_engines import apply_default_values
    schema = table.schema
    columns = list(schema.field_names)
    rows = reader.read_file(split, meta, columns, live_only=False)
    keep = pc.is_in(rows.column(VALUE_KIND), value_set=VISIBLE_KINDS).to_numpy(zero_copy_only=False)
    where = split.deletion_file(meta.file_name)
    if where is not None:
        deleted = read_deletion_vector(reader.io, where)
        keep[deleted[deleted < rows.num_rows]] = False
    out = apply_default_values(rows.select(columns), schema)
    out = out.append_column(POSITION, pa.array(np.arange(rows.num_rows, dtype=np.int64)))
    return out.filter(pa.array(keep))


def delete_by_rewrite(table, filter) -> int | None:
    """DELETE FROM primary-key ``table`` WHERE ``filter`` (Table.read's filter forms; None: every row) by changing
    its files (module docstring); the new snapshot id, or None when no row matched. Raises InvalidInput (bad filter,
    a considered file that is not raw convertible: nothing written), UnsupportedFeature (require_rewritable),
    CommitConflict (table unchanged)."""
    dnf = pred.normalize(filter, table.arrow_schema, table.name)
    snap = table.snapshot()
    if snap is None:
        return None
    from engine.append.row_level import is_truncate, truncate
    if is_truncate(table, dnf):
        return truncate(table, snap, dnf)
    require_rewritable(table)
    splits = considered_splits(table, snap, dnf)
    for split in splits:
        require_raw_convertible(table, split)
    scan = table.scan()
    reader = SplitReader(table.file_io, table.schema, table.schema_manager.schema)
    expr = pred.to_expression(dnf) if dnf else None
    user = str(uuid.uuid4())
    results = []
    try:
        for split in splits:
            changes = {}
            for meta in split.files:
                if dnf and not scan._values_may_match(meta, dnf):  # each key has one record: values prune files
                    continue
                rows = visible_rows(table, reader, split, meta)
                if expr is not None:
                    rows = rows.filter(expr)
                if rows.num_rows:
                    changes[meta.file_name] = FileChange(np.sort(rows.column(POSITION).to_numpy()))
            if changes:
                results.append(change_bucket(table, split, changes, base_id=snap.id, commit_user=user))
    except BaseException:
        discard_changes(table, results)
        raise
    return commit_changes(table, snap, results, user)


def locate_keys(table, splits: list[Split], keys: pa.Table) -> list[tuple[Split, dict[str, np.ndarray]]]:
    """Where the rows with primary keys ``keys`` are (for spark_glue.dml, whose merged read found them): ``keys``
    holds the table's partition and primary-key columns, each key once, every one a row the table's read shows in
    one of ``splits`` (the buckets of its partitions, as ``considered_splits`` gives them). Returns per touched split
    its data file name -> sorted positions. The files whose key range holds one of the keys must be raw convertible
    among their bucket's such files (InvalidInput as ``require_raw_convertible``); a key found in no file raises
    InvalidInput. Fixed buckets are found by the bucket function, dynamic ones by looking in each bucket."""
    from engine.partitioning import partition_groups
    schema = table.schema
    types = schema.types_of(schema.partition_keys)
    by_partition: dict[bytes, list[Split]] = {}
    for sp in splits:
        by_partition.setdefault(sp.partition, []).append(sp)
    out = []
    for values, idx in partition_groups(keys, schema.partition_keys):
        part = keys if idx is None else keys.take(pa.array(idx))
        found = 0
        for split, mine in _by_bucket(schema, by_partition.get(binary_row.serialize_row(list(values), types), []),
                                      part):
            positions, n = _key_positions(table, split, mine)
            found += n
            if positions:
                out.append((split, positions))
        if found != part.num_rows:
            raise InvalidInput(f"{part.num_rows - found} matched key(s) of partition {values} are not live rows of "
                               "the snapshot read", table=table.name)
    return out


def _by_bucket(schema, splits: list[Split], keys: pa.Table):
    """(split, its keys) for the buckets of one partition that may hold ``keys``."""
    if splits and all(sp.total_buckets > 0 for sp in splits):
        from kernels.hashing import bucket_ids
        ids = np.asarray(bucket_ids([keys.column(k) for k in schema.bucket_keys], splits[0].total_buckets))
        for sp in splits:
            hit = np.flatnonzero(ids == sp.bucket)
            if len(hit):
                yield sp, keys.take(pa.array(hit))
        return
    for sp in splits:
        yield sp, keys


def _key_positions(table, split: Split, keys: pa.Table) -> tuple[dict[str, np.ndarray], int]:
    """The positions of ``keys`` in the files of ``split`` (file name -> sorted positions) and how many were
    found. The files whose key range holds a key must be raw convertible among themselves."""
    import dataclasses
    schema = table.schema
    names = list(schema.trimmed_primary_keys)
    types = schema.types_of(names)
    decode, decode_max = key_decoder(types), key_decoder(types, upper=True)
    wanted = sorted(binary_row.order_key(list(k.values()), types) for k in keys.select(names).to_pylist())

    def holds_one(f) -> bool:
        i = bisect_left(wanted, decode(f.min_key))
        return i < len(wanted) and wanted[i] <= decode_max(f.max_key)
    split = dataclasses.replace(split, files=tuple(f for f in split.files if holds_one(f)))
    if not split.files:
        return {}, 0
    require_raw_convertible(table, split)
    reader = SplitReader(table.file_io, schema, table.schema_manager.schema)
    renamed = [KEY_COLUMN_PREFIX + k for k in names]
    probe = keys.select(names).rename_columns(renamed)
    out: dict[str, np.ndarray] = {}
    found = 0
    for meta in split.files:
        rows = visible_rows(table, reader, split, meta).select(names + [POSITION])
        hit = rows.rename_columns(renamed + [POSITION]).join(probe, keys=renamed, join_type="inner")
        if hit.num_rows:
            out[meta.file_name] = np.sort(hit.column(POSITION).to_numpy())
            found += hit.num_rows
    return out, found
