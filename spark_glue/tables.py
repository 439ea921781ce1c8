"""Opening a lakemerge table from a Spark path option, time travel, and the Spark view of its schema.

Everything here runs in Spark's Python workers as well as on the driver: it takes plain strings (paths, option
values) and returns engine objects, so nothing depends on in-process driver state.
"""
from __future__ import annotations

import os
from typing import Mapping

import pyarrow as pa

from engine.errors import (
    InvalidInput,
    InvalidOption,
    SnapshotNotFound,
    TableNotFound,
    TagNotFound,
    UnsupportedFeature,
)
from engine.io.file_io import LocalFileIO, local_path
from engine.meta.snapshot import Snapshot
from engine.table import Table

SNAPSHOT_ID = "scan.snapshot-id"
TIMESTAMP_MILLIS = "scan.timestamp-millis"
TAG_NAME = "scan.tag-name"
SCAN_VERSION = "scan.version"  # what Paimon's Spark connector makes of VERSION AS OF
# Spark's generic time-travel option names, as Delta and Paimon's connector accept them.
VERSION_AS_OF = "versionasof"
TIMESTAMP_AS_OF = "timestampasof"


def table_name_of(root: str) -> str:
    """``<warehouse>/db.db/orders`` -> ``db.orders`` (the path itself when it is not inside a ``.db`` folder)."""
    parent, name = os.path.split(root.rstrip("/"))
    db = os.path.basename(parent)
    return f"{db[:-3]}.{name}" if db.endswith(".db") else root


def open_table(path: str | None) -> Table:
    """The table at ``path`` (a local path or file: URI). Raises InvalidInput without a path, TableNotFound."""
    if not path:
        raise InvalidInput("the lakemerge data source needs a table path: .load('<warehouse>/<db>.db/<table>')")
    root = local_path(str(path))
    try:
        return Table(table_name_of(root), root, LocalFileIO())
    except TableNotFound:
        raise TableNotFound(f"{table_name_of(root)} (no schema under {root})") from None


PRIMARY_KEY = "primary-key"
PARTITION = "partition"


def open_or_create_table(path: str | None, options: Mapping[str, str], spark_schema_, *,
                         drop_columns=()) -> Table:
    """The table at ``path``; if there is none and ``primary-key`` is given (Paimon's table options
    ``primary-key``, ``partition``, ``bucket``, ...), create it from the Spark schema first, as a first
    DataFrame write into a new Paimon table does. The path must look like ``<warehouse>/<db>.db/<table>``.
    Raises TableNotFound (no table, no primary-key option), InvalidSchema / InvalidOption for a bad definition."""
    try:
        return open_table(path)
    except TableNotFound:
        opts = lower_options(options)
        if not opts.get(PRIMARY_KEY):
            raise TableNotFound(f"{table_name_of(local_path(str(path)))} (no table at {path}; to create it on "
                                "this write, set option 'primary-key' and optionally 'partition' and 'bucket')") \
                from None
    from engine.catalog import Catalog
    from engine.options import TableOptions
    root = local_path(str(path))
    db_dir, name = os.path.split(root.rstrip("/"))
    warehouse, db = os.path.split(db_dir)
    if not db.endswith(".db"):
        raise InvalidInput(f"cannot create a table at {root}: expected <warehouse>/<database>.db/<table>")
    cat = Catalog(warehouse)
    cat.create_database(db[:-3], ignore_if_exists=True)
    arrow = arrow_of_spark(spark_schema_)
    arrow = pa.schema([f for f in arrow if f.name not in set(drop_columns)])
    unknown = set(TableOptions(opts).unknown_keys())
    table_opts = {k: v for k, v in opts.items()
                  if k not in unknown and k not in (PRIMARY_KEY, PARTITION, "path") and not k.startswith("scan.")}
    split = (lambda v: [c.strip() for c in v.split(",") if c.strip()])
    return cat.create_table(f"{db[:-3]}.{name}", arrow, split(opts[PRIMARY_KEY]), split(opts.get(PARTITION, "")),
                            table_opts, ignore_if_exists=True)


def lower_options(options: Mapping[str, str]) -> dict[str, str]:
    """Spark hands options case-insensitively (keys lower-cased); look them up lower-cased."""
    return {str(k).lower(): str(v) for k, v in dict(options).items()}


def resolve_version(table: Table, version: str) -> Snapshot:
    """The snapshot ``version`` names, resolved as Paimon resolves ``VERSION AS OF`` (TimeTravelUtil): a tag of that
    name first (even an all-digit one, which Java Paimon may create), else a snapshot id if ``version`` is all
    digits. Raises TagNotFound for any other name, SnapshotNotFound, UnsupportedFeature for ``watermark-<n>``."""
    try:
        return table.tag_snapshot(version)
    except TagNotFound:
        if version.startswith("watermark-"):
            raise UnsupportedFeature(f"table {table.name!r}: time travel to a watermark ({version!r}) is not "
                                     "supported; use a snapshot id, a tag or a timestamp") from None
        if not version.isdecimal():
            raise
    return table.snapshot(int(version))


def resolve_snapshot(table: Table, options: Mapping[str, str]) -> Snapshot | None:
    """The snapshot a read should see: the time-travel option if one is given, else the latest (None when the
    table has no commits). At most one time-travel option may be set.

    ``scan.snapshot-id`` takes an id, ``scan.tag-name`` a tag, ``versionAsOf`` / ``scan.version`` either (see
    resolve_version).

    Raises SnapshotNotFound, TagNotFound, InvalidInput (timestamp before the first snapshot), InvalidOption.
    """
    opts = lower_options(options)
    given = [k for k in (SNAPSHOT_ID, TIMESTAMP_MILLIS, TAG_NAME, SCAN_VERSION, VERSION_AS_OF, TIMESTAMP_AS_OF)
             if opts.get(k)]
    if len(given) > 1:
        raise InvalidOption(given[1], opts[given[1]], f"only one time-travel option may be set, got {given}",
                            table=table.name)
    if not given:
        return table.snapshot()
    key = given[0]
    value = opts[key]
    if key == TAG_NAME:
        return table.tag_snapshot(value)
    if key in (SCAN_VERSION, VERSION_AS_OF):
        return resolve_version(table, value)
    if key == SNAPSHOT_ID:
        try:
            sid = int(value)
        except ValueError:
            raise InvalidOption(key, value, "expected a snapshot id (integer)", table=table.name) from None
        return table.snapshot(sid)
    millis = _parse_millis(key, value, table.name)
    best = None
    for snap in table.snapshots():
        if snap.time_millis <= millis and (best is None or snap.id > best.id):
            best = snap
    if best is None:
        raise InvalidInput(f"no snapshot was committed at or before {value} ({key})", table=table.name)
    return best


def _parse_millis(key: str, value: str, table: str) -> int:
    try:
        return int(value)
    except ValueError:
        pass
    try:
        import datetime as dt
        parsed = dt.datetime.fromisoformat(value)
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=dt.timezone.utc)
        return int(parsed.timestamp() * 1000)
    except ValueError:
        raise InvalidOption(key, value, "expected epoch milliseconds or an ISO-8601 timestamp", table=table) from None


def nullable(schema: pa.Schema) -> pa.Schema:
    """The same fields, all nullable. Spark sees every column as nullable so that an ``IS NOT NULL`` guard on a
    key column is never optimized away (see ``spark_glue.read_table``)."""
    return pa.schema([f.with_nullable(True) for f in schema])


def spark_schema(arrow_schema: pa.Schema):
    """Spark StructType of a table's Arrow schema (Paimon TIMESTAMP -> TimestampNTZ, LTZ -> Timestamp)."""
    from pyspark.sql.pandas.types import from_arrow_schema
    return from_arrow_schema(nullable(arrow_schema), prefer_timestamp_ntz=True)


def arrow_of_spark(schema) -> pa.Schema:
    """The exact Arrow schema Spark expects from a Python data source reader for ``schema``."""
    from pyspark.sql.pandas.types import to_arrow_schema
    return to_arrow_schema(schema, timezone="UTC")


__all__ = ["open_table", "resolve_snapshot", "resolve_version", "spark_schema", "arrow_of_spark", "lower_options",
           "table_name_of", "SnapshotNotFound"]
