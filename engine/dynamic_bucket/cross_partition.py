"""Cross-partition upsert: a primary key that does not contain every partition field (dynamic bucket mode only).

A key lives in exactly one (partition, bucket). Like Paimon, the key -> (partition, bucket) index is not stored:
each writer bootstraps it from the live rows of its base snapshot (only from data files created within
``cross-partition-upsert.index-ttl``, when set: older keys count as new, as in Paimon). Per merge engine, a record
whose key already lives in another partition is handled as Paimon does:
- deduplicate: -D of the key in the old (partition, bucket), then the record in its new partition (the row moves);
- partial-update / aggregation: the record goes to the old partition (its partition fields are ignored);
- first-row: the record is dropped (the first row is kept).
Retracts (-U/-D) go to the partition and bucket holding the key (a -D removes it from the index); a retract of an
unknown key is dropped. New keys get a bucket in their partition by the dynamic-bucket rules (target row number).

Contract: records are routed in input order, so several versions of a key in one batch behave as if written one by
one. A commit is refused (CommitConflict) if another writer committed data after this writer's base snapshot: its
index could be stale and a key could end up in two partitions.
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace

import numpy as np
import pyarrow as pa

from engine.dynamic_bucket.assigner import PartitionIndex
from engine.meta import binary_row
from engine.meta.snapshot import COMMIT_KIND_COMPACT
from engine.options import (
    CROSS_PARTITION_INDEX_TTL,
    DYNAMIC_BUCKET_MAX_BUCKETS,
    DYNAMIC_BUCKET_TARGET_ROW_NUM,
    TableOptions,
)
from engine.read.split_read import SplitReader
from engine.write.commit_message import CommitMessage
from engine.write.table_write import TableWrite
from engine.write.validate import conform

RETRACT = (1, 3)
DELETE = 3


@dataclass(frozen=True)
class CrossPartitionCommitMessage(CommitMessage):
    """Marks messages of a cross-partition writer (its key index was built from ``base_snapshot_id``)."""


class CrossPartitionWrite(TableWrite):
    """Writer for dynamic-bucket tables whose primary key does not contain all partition keys: routes each key
    to the partition and bucket already holding it."""
    def __init__(self, table, **kw):
        super().__init__(table, **kw)
        s = self.schema
        self.part_keys = list(s.partition_keys)
        self.part_types = s.types_of(self.part_keys)
        self.trimmed = list(s.trimmed_primary_keys)
        self.pk_in_part = [k for k in s.primary_keys if k in s.partition_keys]
        self.target_rows = self.options.get(DYNAMIC_BUCKET_TARGET_ROW_NUM)
        self.max_buckets = self.options.get(DYNAMIC_BUCKET_MAX_BUCKETS)
        self._key_index: dict[tuple, tuple[bytes, int]] | None = None
        self._buckets: dict[bytes, PartitionIndex] = {}
        self._routes: dict[bytes, dict[tuple, int]] = {}
        self._part_values: dict[bytes, tuple] = {}

    def _require_writable(self) -> None:
        TableOptions(self.schema.options, table=self.table.name).require_writable(allow_dynamic_bucket=True)

    # --- public -------------------------------------------------------------------------------------
    def write(self, data, row_kinds=None) -> None:
        """Validate ``data`` (with optional ``row_kinds``) and buffer it routed by key; raises if the writer is
        closed or prepared."""
        self._check_open()
        rows, kinds = conform(data, self.schema, self.table.name, row_kinds=row_kinds)
        self._route_and_add(rows, kinds)

    def delete(self, keys) -> None:
        """Delete by primary key (partition columns are not needed: the key index knows the partition)."""
        self._check_open()
        rows, kinds = conform(keys, self.schema, self.table.name, delete=True)
        self._route_and_add(rows, kinds)

    def prepare_commit(self) -> list[CommitMessage]:
        """Flush and return the commit messages as CrossPartitionCommitMessage instances."""
        return [CrossPartitionCommitMessage(**{f.name: getattr(m, f.name) for f in fields(CommitMessage)})
                for m in super().prepare_commit()]

    # --- routing ------------------------------------------------------------------------------------
    def _bucket_ids(self, partition: bytes, key_cols) -> np.ndarray:
        routes = self._routes[partition]
        keys = zip(*[c.to_pylist() for c in key_cols])
        return np.fromiter((routes[k] for k in keys), dtype=np.int32)

    def _route_and_add(self, rows: pa.Table, kinds: np.ndarray) -> None:
        rows, kinds = self._filter_kinds(rows, kinds)
        if rows.num_rows == 0:
            return
        index = self._index()
        engine = self.options.merge_engine
        parts = self._serialize_partitions(rows)
        trimmed = list(zip(*[rows.column(k).to_pylist() for k in self.trimmed]))
        pk_part_pos = [self.part_keys.index(k) for k in self.pk_in_part]
        take, out_parts, out_kinds = [], [], []

        def emit(i: int, part: bytes, bucket: int, kind: int) -> None:
            take.append(i)
            out_parts.append(part)
            out_kinds.append(kind)
            self._routes.setdefault(part, {})[trimmed[i]] = bucket

        for i, (part, kind) in enumerate(zip(parts, kinds.tolist())):
            key = trimmed[i] + tuple(self._part_values[part][p] for p in pk_part_pos)
            old = index.get(key)
            if kind in RETRACT:
                if old is not None:
                    emit(i, old[0], old[1], kind)
                    if kind == DELETE:
                        del index[key]
                continue
            if old is not None and old[0] == part:
                emit(i, part, old[1], kind)
            elif old is not None and engine in ("partial-update", "aggregation"):
                emit(i, old[0], old[1], kind)
            elif old is not None and engine == "first-row":
                continue
            else:
                if old is not None:  # deduplicate: the row moves
                    emit(i, old[0], old[1], DELETE)
                bucket = self._routes.get(part, {}).get(trimmed[i])  # re-added in this write: same bucket
                if bucket is None:
                    bucket = int(self._bucket_index(part)._place(0, 1)[0])
                index[key] = (part, bucket)
                emit(i, part, bucket, kind)
        if not take:
            return
        out = rows.take(pa.array(take, pa.int64()))
        for j, name in enumerate(self.part_keys):
            col = pa.array([self._part_values[p][j] for p in out_parts], out.schema.field(name).type)
            out = out.set_column(out.schema.get_field_index(name), out.schema.field(name), col)
        self._add(out, np.asarray(out_kinds, dtype=np.int8))

    def _serialize_partitions(self, rows: pa.Table) -> list[bytes]:
        cols = [rows.column(k).to_pylist() for k in self.part_keys]
        out = []
        cache: dict[tuple, bytes] = {}
        for values in zip(*cols):
            b = cache.get(values)
            if b is None:
                b = cache[values] = binary_row.serialize_row(list(values), self.part_types)
                self._part_values.setdefault(b, values)
            out.append(b)
        return out

    # --- the key index ------------------------------------------------------------------------------
    def _bucket_index(self, part: bytes) -> PartitionIndex:
        idx = self._buckets.get(part)
        if idx is None:
            idx = PartitionIndex(0, np.zeros(0, np.int32), np.zeros(0, np.int32), {}, self.target_rows, 1,
                                 self.max_buckets)
            self._buckets[part] = idx
        return idx

    def _index(self) -> dict[tuple, tuple[bytes, int]]:
        """Bootstrap key -> (partition, bucket) from the live rows of the base snapshot."""
        if self._key_index is not None:
            return self._key_index
        index: dict[tuple, tuple[bytes, int]] = {}
        counts: dict[bytes, dict[int, int]] = {}
        ttl = self.options.get(CROSS_PARTITION_INDEX_TTL)
        min_created = None
        if ttl is not None:
            from engine.write.file_writer import local_millis_as_utc
            min_created = local_millis_as_utc() - ttl
        if self._max_seq is None:
            self._load_base()  # fixes the base snapshot before the index is built from it
        reader = SplitReader(self.table.file_io, self.schema, self.table.schema_manager.schema)
        pk_part_pos = [self.part_keys.index(k) for k in self.pk_in_part]
        for split in self.table.scan().plan(self.base_snapshot):
            files = split.files if min_created is None else tuple(
                f for f in split.files if (f.creation_time_millis or 0) >= min_created)
            if not files:
                continue
            live = reader.read(replace(split, files=files), self.trimmed)
            self._part_values.setdefault(split.partition, split.partition_values)
            suffix = tuple(split.partition_values[p] for p in pk_part_pos)
            for key in zip(*[live.column(k).to_pylist() for k in self.trimmed]):
                index[key + suffix] = (split.partition, split.bucket)
            per_part = counts.setdefault(split.partition, {})
            per_part[split.bucket] = per_part.get(split.bucket, 0) + live.num_rows
        for part, buckets in counts.items():
            self._buckets[part] = PartitionIndex(0, np.zeros(0, np.int32), np.zeros(0, np.int32),
                                                 dict(sorted(buckets.items())), self.target_rows, 1,
                                                 self.max_buckets)
        self._key_index = index
        return index


def check_cross_partition_commit(table, latest, messages) -> None:
    """CommitConflict if a cross-partition writer's base is not the latest data snapshot (see module doc)."""
    from engine.errors import CommitConflict

    mine = [m for m in messages if isinstance(m, CrossPartitionCommitMessage)]
    if not mine or latest is None:
        return
    base = min((m.base_snapshot_id or 0) for m in mine)
    users = {m.commit_user for m in mine}
    for sid in range(latest.id, base, -1):
        snap = table.snapshot_manager.snapshot(sid)
        if snap.commit_kind != COMMIT_KIND_COMPACT and snap.commit_user not in users:
            raise CommitConflict(table.name, f"snapshot {sid} was committed by another writer after this "
                                             "cross-partition write started (its key index may be stale); "
                                             "write again")


def lookup_cross_partition(table, keys, snapshot_id=None, columns=None, *, snapshot=None,
                           exclude: frozenset[str] = frozenset(), every_level: bool = False) -> pa.Table:
    """Rows for the given primary keys (partition columns not needed), via a filtered read of every partition.
    ``snapshot`` (a resolved Snapshot instead of ``snapshot_id``), ``exclude`` and ``every_level`` as in
    engine.read.lookup.lookup_rows."""
    from engine.errors import InvalidInput
    from engine.write.validate import to_arrow_table

    schema = table.schema
    probes = to_arrow_table(keys, table.name)
    missing = [k for k in schema.primary_keys if k not in probes.column_names]
    if missing:
        raise InvalidInput(f"lookup keys need the primary-key column(s) {missing}", table=table.name,
                           column=missing[0])
    out_cols = list(columns) if columns is not None else list(schema.field_names)
    if probes.num_rows == 0:
        return schema.arrow_schema.empty_table().select(out_cols)
    pk = list(schema.primary_keys)
    flt = [(k, "in", list(dict.fromkeys(probes.column(k).to_pylist()))) for k in pk]
    snap = snapshot if snapshot is not None else table.snapshot(snapshot_id)
    rows = table._read_merged(snap, list(dict.fromkeys(out_cols + pk)), flt, exclude=exclude,
                              every_level=every_level, user_read=True)  # a user's lookup: may skip files
    wanted = set(zip(*[probes.column(k).to_pylist() for k in pk]))
    keep = [i for i, key in enumerate(zip(*[rows.column(k).to_pylist() for k in pk])) if key in wanted]
    return rows.take(pa.array(keep, pa.int64())).select(out_cols)
