"""Dropping partitions (Paimon's ALTER TABLE ... DROP PARTITION / Spark TRUNCATE PARTITION).

Paimon's FileStoreCommitImpl.dropPartitions commits ONE snapshot of kind OVERWRITE that deletes every live data file
of the partitions matched by the specs (each a map of partition column -> value; a spec naming only some partition
columns matches every partition with those values) and every index file record of them (dynamic-bucket HASH
indexes, deletion vectors), and adds nothing. The specs are matched against the latest snapshot at each commit
attempt, so a file a concurrent commit adds to a matched partition is dropped too. Nothing is deleted from storage:
the files stay referenced by the older snapshots and go when those expire. Partitions without live files publish
no snapshot (the latest id is returned).
"""
from __future__ import annotations

import uuid

import pyarrow as pa

from engine.errors import InvalidInput
from engine.meta.snapshot import BATCH_COMMIT_IDENTIFIER
from engine.options import PARTITION_DEFAULT_NAME
from engine.paths import partition_value_text


def normalize_specs(table, partitions) -> list[dict]:
    """``partitions`` (a dict, or an iterable of dicts, of partition column -> value) as a list of dicts. Raises
    InvalidInput for an unpartitioned table, no spec, an empty spec or a column that is not a partition key."""
    keys = table.schema.partition_keys
    if not keys:
        raise InvalidInput("the table is not partitioned: it has no partition to drop", table=table.name)
    specs = [partitions] if isinstance(partitions, dict) else list(partitions or ())
    if not specs:
        raise InvalidInput("no partition to drop was given (Paimon: 'Partitions list cannot be empty')",
                           table=table.name)
    for spec in specs:
        if not isinstance(spec, dict) or not spec:
            raise InvalidInput(f"a partition spec is a non-empty dict of partition column -> value, not {spec!r}",
                               table=table.name)
        bad = [k for k in spec if k not in keys]
        if bad:
            raise InvalidInput(f"{bad[0]!r} is not a partition key (partition keys: {list(keys)})",
                               table=table.name, column=bad[0])
    return specs


class PartitionMatcher:
    """Serialized partition rows (``bytes``) matching any of the specs, as a container: ``row in matcher``.

    A spec value matches a partition value equal to it, or whose text equals ``str(value)``: as Paimon renders it
    in partition paths (``partition.default-name`` for null), or as its cast to STRING (a DATE as ``2024-01-31``);
    a string spec also matches the value it parses to as the column's type, as Paimon casts a spec string
    (TypeUtils.castFromString: TIMESTAMP ``2024-01-01 00:00:00``, INT ``05``, DECIMAL ``1.5``, BOOLEAN ``TRUE``);
    None matches null."""

    def __init__(self, table, specs: list[dict]):
        self._scan = table.scan()
        schema = table.schema
        self._keys = schema.partition_keys
        self._types = schema.types_of(self._keys)
        self._arrow = {k: table.arrow_schema.field(k).type for k in self._keys}
        self._default = schema.table_options.get(PARTITION_DEFAULT_NAME)
        self._specs = specs
        self._memo: dict[bytes, bool] = {}

    def __contains__(self, partition: bytes) -> bool:
        hit = self._memo.get(partition)
        if hit is None:
            hit = self._memo[partition] = self.matches(self._scan.partition_values(partition))
        return hit

    def matches(self, values: tuple) -> bool:
        """Whether partition ``values`` (in partition-key order) match one of the specs."""
        by_name = {k: (v, t, self._arrow[k]) for k, v, t in zip(self._keys, values, self._types)}
        return any(all(self._equal(by_name[k], want) for k, want in spec.items()) for spec in self._specs)

    def _equal(self, have, want) -> bool:
        value, dtype, arrow = have
        if want is None:
            return value is None
        if value is not None and type(value) is type(want) and value == want:
            return True
        if isinstance(want, str) and value is not None and _parses_to(want, arrow, value):
            return True
        want = str(want)
        return want in (partition_value_text(value, dtype, self._default),
                        partition_value_text(value, dtype, self._default, legacy=False))


def _parses_to(text: str, arrow: pa.DataType, value) -> bool:
    """Whether ``text`` cast to ``arrow`` (not a string, binary or zoned timestamp column) equals ``value``."""
    if pa.types.is_string(arrow) or pa.types.is_large_string(arrow) or pa.types.is_binary(arrow) \
            or pa.types.is_large_binary(arrow) or pa.types.is_fixed_size_binary(arrow) \
            or (pa.types.is_timestamp(arrow) and arrow.tz is not None):
        return False
    try:
        return pa.scalar(text).cast(arrow).as_py() == value
    except (pa.ArrowException, ValueError, TypeError):
        return False


def drop_partitions(table, partitions, *, commit_user: str | None = None,
                    commit_identifier: int = BATCH_COMMIT_IDENTIFIER) -> int | None:
    """Drop the partitions matching ``partitions`` in one OVERWRITE snapshot (see the module docstring); returns its
    id, or the latest snapshot id when no live file matched (None for a table without snapshots). Raises
    InvalidInput (see ``normalize_specs``), CommitConflict, CommitRetriesExhausted, CommitOutcomeUnknown."""
    from engine.commit.committer import Committer
    matcher = PartitionMatcher(table, normalize_specs(table, partitions))
    base = table.snapshot_manager.latest_id()
    return Committer(table).overwrite([], matcher, commit_user=commit_user or str(uuid.uuid4()),
                                      commit_identifier=commit_identifier, base_snapshot_id=base)


def dropped_partitions(table, snapshot_id: int) -> list[tuple]:
    """The partitions (values in partition-key order, sorted by their text) whose files snapshot ``snapshot_id``
    deleted: for a drop's OVERWRITE snapshot, the partitions it dropped. Raises SnapshotNotFound, CorruptFile."""
    from engine.meta.manifest import DELETE
    snap = table.snapshot(snapshot_id)
    scan, manifests = table.scan(), table.manifests
    rows = {e.partition for meta in manifests.manifest_list(snap.delta_manifest_list)
            for e in manifests.manifest(meta.file_name) if e.kind == DELETE}
    return sorted((scan.partition_values(r) for r in rows), key=str)


def unmatched_specs(table, specs: list[dict], partitions: list[tuple]) -> list[dict]:
    """Those of ``specs`` that match none of ``partitions`` (values in partition-key order)."""
    return [spec for spec in specs if not any(PartitionMatcher(table, [spec]).matches(v) for v in partitions)]
