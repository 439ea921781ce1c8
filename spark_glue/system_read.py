"""Paimon system tables through Spark: ``spark.read.format("lakemerge").load(path + "$snapshots")`` or
``.option("system-table", "snapshots").load(path)``.

Kinds and columns are engine.system_tables' (Paimon's names and types): snapshots, schemas, options, tags,
consumers, files, manifests, partitions, buckets, audit_log. The per-snapshot kinds (files, manifests, partitions,
buckets, audit_log) honour the time-travel options (``scan.snapshot-id``, ``scan.tag-name``,
``scan.timestamp-millis``, ``versionAsOf`` / ``scan.version``, ``timestampAsOf``). System tables are read-only.
Metadata is small: one Spark task builds the whole table.
"""
from __future__ import annotations

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition

from engine.errors import InvalidInput
from spark_glue.reading import to_spark_type
from spark_glue.tables import (
    BRANCH_MARK,
    TIME_TRAVEL_KEYS,
    arrow_of_spark,
    lower_options,
    open_table,
    resolve_snapshot,
)

SYSTEM_TABLE = "system-table"


def split_system_path(options) -> tuple[str | None, str | None]:
    """(table path, system table kind or None) from the ``path`` and ``system-table`` options. A ``$`` in the
    last path component names the kind (``.../orders$snapshots``, ``.../orders$branch_b1$snapshots``; a lone
    ``$branch_<name>`` is a branch, not a kind). Raises InvalidInput if both name a kind."""
    opts = lower_options(options)
    path = opts.get("path")
    kind = opts.get(SYSTEM_TABLE) or None
    last = path.rstrip("/").rsplit("/", 1)[-1] if path else ""
    if "$" in last and not (last.count("$") == 1 and BRANCH_MARK in last):  # ``t$branch_b`` is a table
        path, _, in_path = path.rstrip("/").rpartition("$")
        if kind and kind != in_path:
            raise InvalidInput(f"system table named twice: ${in_path} in the path, {kind!r} in option "
                               f"{SYSTEM_TABLE}")
        kind = in_path
    return path, kind


def system_table_of(options):
    """The engine SystemTable the options name (raises TableNotFound for an unknown kind or table)."""
    from engine.system_tables import SystemTable
    path, kind = split_system_path(options)
    return SystemTable(open_table(path), kind)


def system_snapshot(system, options):
    """The snapshot a per-snapshot system table is read at (the time-travel options: a tag's is the one its tag
    file keeps, also after expiration; None: latest or not per-snapshot). Without a time-travel option None, so
    $audit_log reads through the table's current schema, not the one its latest snapshot was committed under.
    Raises as resolve_snapshot."""
    if not system.snapshot_dependent or not any(options.get(k) for k in TIME_TRAVEL_KEYS):
        return None
    return resolve_snapshot(system.table, options)


def system_schema(options) -> pa.Schema:
    """The Arrow columns of the system table the options name, at the snapshot they travel to ($audit_log of an
    older snapshot has that snapshot's table columns, engine SystemTable.arrow_schema_at). Raises as
    system_table_of and resolve_snapshot."""
    system = system_table_of(options)
    return system.arrow_schema_at(snapshot=system_snapshot(system, lower_options(options)))


class SystemTableReader(DataSourceReader):
    def __init__(self, options, schema):
        self.options = lower_options(options)
        self.schema = schema

    def partitions(self):
        return [InputPartition(0)]

    def read(self, partition):
        system = system_table_of(self.options)
        rows = system.read(columns=[f.name for f in self.schema.fields],
                           snapshot=system_snapshot(system, self.options))
        target = arrow_of_spark(self.schema)
        out = pa.Table.from_arrays([to_spark_type(rows.column(i), target.field(i).type) for i in range(rows.num_columns)],
                                   schema=target)
        return iter(out.to_batches())
