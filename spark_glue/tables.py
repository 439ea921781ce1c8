"""Opening a lakemerge table from a Spark path option, time travel, and the Spark view of its schema.

Everything here runs in Spark's Python workers as well as on the driver: it takes plain strings (paths, option
values) and returns engine objects, so nothing depends on in-process driver state (only time_zone looks at the
Spark task it may run in).
"""
from __future__ import annotations

import datetime as dt
import os
import re
import zoneinfo
from typing import Mapping

import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import (
    InvalidInput,
    InvalidOption,
    SnapshotNotFound,
    TableAlreadyExists,
    TableNotFound,
    TagNotFound,
    UnsupportedFeature,
)
from engine.branch_table import BRANCH_SUFFIX
from engine.io.file_io import LocalFileIO, local_path
from engine.meta.snapshot import Snapshot
from engine.table import Table

SNAPSHOT_ID = "scan.snapshot-id"
TIMESTAMP_MILLIS = "scan.timestamp-millis"
TIMESTAMP = "scan.timestamp"
TAG_NAME = "scan.tag-name"
SCAN_VERSION = "scan.version"  # what Paimon's Spark connector makes of VERSION AS OF
# Spark's generic time-travel option names, as Delta and Paimon's connector accept them.
VERSION_AS_OF = "versionasof"
TIMESTAMP_AS_OF = "timestampasof"
TIME_KEYS = (TIMESTAMP_MILLIS, TIMESTAMP, TIMESTAMP_AS_OF)
TIME_TRAVEL_KEYS = (SNAPSHOT_ID, TAG_NAME, SCAN_VERSION, VERSION_AS_OF) + TIME_KEYS
# Internal option of Spark's own row-level commands (dml, pk_delete, append_dml): the snapshot they pin with
# ``scan.snapshot-id`` is read through the table's latest schema, not the one it was committed under.
LATEST_SCHEMA = "read.latest-schema"
# Options only a streaming read uses (spark_glue.stream_read): Spark asks a source for its schema before it knows
# whether the read is a batch or a stream, so with one of them a time-travel option keeps the latest schema.
STREAM_ONLY_KEYS = ("scan.mode", "read.changelog", "consumer-id")
# Option timeZone: the zone of a time-travel timestamp written without one (read_table passes the session's).
TIME_ZONE = "timezone"
SESSION_TIME_ZONE = "spark.sql.session.timeZone"


def table_name_of(root: str) -> str:
    """``<warehouse>/db.db/orders`` -> ``db.orders`` (the path itself when it is not inside a ``.db`` folder)."""
    parent, name = os.path.split(root.rstrip("/"))
    db = os.path.basename(parent)
    return f"{db[:-3]}.{name}" if db.endswith(".db") else root


BRANCH = "branch"  # data source option, as Paimon's: read and write that branch of the table
BRANCH_MARK = "$" + BRANCH_SUFFIX  # ``.../orders$branch_b1``: the branch in the path, as the catalog's ``db.orders$branch_b1``


def split_branch(path: str) -> tuple[str, str | None]:
    """``.../orders$branch_b1`` -> (``.../orders``, ``b1``); a path without a branch -> (path, None)."""
    head, sep, name = str(path).rstrip("/").rpartition("/")
    table, mark, branch = name.partition(BRANCH_MARK)
    if not mark:
        return path, None
    return f"{head}{sep}{table}", branch


def with_branch(options: Mapping[str, str]) -> dict[str, str]:
    """Lower-cased ``options`` whose ``path`` carries the ``branch`` option (none: the path as given). A system
    table in the path stays last: ``t$snapshots`` with branch ``b1`` -> ``t$branch_b1$snapshots``. Raises
    InvalidInput when the option and the path name different branches (``main`` against ``t$branch_b1`` too)."""
    opts = lower_options(options)
    branch = opts.get(BRANCH)
    if not branch or not opts.get("path"):
        return opts
    head, sep, name = opts["path"].rstrip("/").rpartition("/")
    table, dollar, rest = name.partition("$")
    parts = rest.split("$") if dollar else []
    in_path = parts[0][len(BRANCH_SUFFIX):] if parts and parts[0].startswith(BRANCH_SUFFIX) else None
    if in_path is not None:
        parts = parts[1:]
    if in_path is not None and in_path != branch:
        raise InvalidInput(f"branch named twice: {BRANCH_MARK}{in_path} in the path, {branch!r} in option {BRANCH!r}")
    if branch == "main":
        return opts
    kind = "".join("$" + p for p in parts)
    return {**opts, "path": f"{head}{sep}{table}{BRANCH_MARK}{branch}{kind}"}


def open_table(path: str | None) -> Table:
    """The table at ``path`` (a local path or file: URI), or its branch when the last path component is
    ``<table>$branch_<name>`` (engine.branch_table). Raises InvalidInput without a path, TableNotFound (no table,
    no such branch)."""
    if not path:
        raise InvalidInput("the lakemerge data source needs a table path: .load('<warehouse>/<db>.db/<table>')")
    path, branch = split_branch(str(path))
    root = local_path(path)
    try:
        table = Table(table_name_of(root), root, LocalFileIO())
    except TableNotFound:
        raise TableNotFound(f"{table_name_of(root)} (no schema under {root})") from None
    return table.branch(branch) if branch is not None else table


PRIMARY_KEY = "primary-key"
PARTITION = "partition"


def open_or_create_table(path: str | None, options: Mapping[str, str], spark_schema_, *,
                         drop_columns=()) -> tuple[Table, tuple[str, ...]]:
    """(the table at ``path``, the directories this call created: the table's root, then its database's if that
    was created too; empty when the table existed). If there is no table and ``primary-key`` is given (Paimon's
    table options ``primary-key``, ``partition``, ``bucket``, ...), it is created from the Spark schema first: a
    lakemerge extension (Paimon's SparkSource only writes a path that holds a table). A write that fails after
    creating the table removes it with ``remove_created_table``. The path must look like
    ``<warehouse>/<db>.db/<table>``. Raises TableNotFound (no table, no primary-key option), InvalidSchema /
    InvalidOption for a bad definition, InvalidInput (nothing created) for a dynamic-bucket definition (no option
    ``bucket``), which Spark cannot write."""
    try:
        return open_table(path), ()
    except TableNotFound:
        opts = lower_options(options)
        if split_branch(str(path))[1] is not None:
            raise  # a branch is made with Table.create_branch, never by a write
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
    arrow = arrow_of_spark(spark_schema_)
    arrow = pa.schema([f for f in arrow if f.name not in set(drop_columns)])
    unknown = set(TableOptions(opts).unknown_keys())
    # dynamic-partition-overwrite is a Paimon table option, but on a write it is that write's choice: kept out
    table_opts = {k: v for k, v in opts.items()
                  if k not in unknown and k not in (PRIMARY_KEY, PARTITION, "path", "dynamic-partition-overwrite")
                  and not k.startswith("scan.")}
    split = (lambda v: [c.strip() for c in v.split(",") if c.strip()])
    bucket = TableOptions(table_opts).bucket
    if bucket < 1 and bucket != -2:  # dynamic bucket mode: Spark tasks cannot write it (writing.require_spark_writable)
        raise InvalidInput(f"cannot create primary-key table {db[:-3]}.{name} with bucket={bucket} on a Spark write: "
                           "Spark writes need a fixed bucket count; set option 'bucket' (> 0, or -2 for postpone)")
    # what this call creates: the table directory (only its schema directory if the directory was there), the db's
    created = [root if not os.path.exists(root) else os.path.join(root, "schema")]
    created += [] if os.path.isdir(db_dir) else [db_dir]
    cat.create_database(db[:-3], ignore_if_exists=True)
    try:
        table = cat.create_table(f"{db[:-3]}.{name}", arrow, split(opts[PRIMARY_KEY]),
                                 split(opts.get(PARTITION, "")), table_opts)
    except TableAlreadyExists:  # a concurrent first write created it: not ours to remove
        return open_table(path), ()
    except BaseException:  # nothing was written: remove only the directories that are still empty (another
        for directory in created:  # first write may have created the table in them meanwhile)
            _rmdir(directory)
        raise
    return table, tuple(created)


def remove_created_table(created) -> None:
    """Undo ``open_or_create_table`` after a failed first write (its data files already deleted by the job): delete
    the table directory it created (or the schema directory it wrote into a directory that was there), then the
    database directory it created if that is empty. The table stays as it is when it holds any file but the
    ``schema-0`` this write created: another job's snapshot, tag, branch, schema change or data files not yet
    committed (a job that found the table there), or leftovers it cannot tell from those. Empty directories go
    first and the schema last, each with ``rmdir`` (which fails on a directory something was written into
    meanwhile), so a concurrent job that writes a file during the removal keeps its table; only one that starts
    writing in the instant between the last check and the schema's deletion is not seen. A directory already gone
    is fine; nothing here raises for a directory that cannot be removed."""
    for directory in created:
        if not os.path.isdir(directory):
            continue
        if directory.rstrip("/").endswith(".db"):
            _rmdir(directory)
            continue
        ours = os.path.basename(directory) != "schema"  # the whole table directory is this write's
        root = directory if ours else os.path.dirname(directory)
        schema_dir = os.path.join(root, "schema")
        own = os.path.join(schema_dir, "schema-0")
        subdirs = []
        for parent, dirs, files in os.walk(root):
            if any(os.path.join(parent, f) != own for f in files):
                return  # not only this write's schema: another job's (or unknown) files, keep the table
            subdirs += [os.path.join(parent, d) for d in dirs if os.path.join(parent, d) != schema_dir]
        for d in sorted(subdirs, key=len, reverse=True) if ours else ():  # the deepest first
            if not _rmdir(d):
                return  # written into meanwhile
        if any(f != "schema-0" for f in _names(schema_dir)) or (ours and _names(root) != ["schema"]):
            return  # written into meanwhile
        try:
            os.unlink(own)
        except FileNotFoundError:
            pass
        _rmdir(schema_dir)
        if ours:
            _rmdir(root)


def _names(directory: str) -> list[str]:
    try:
        return os.listdir(directory)
    except FileNotFoundError:
        return []


def _rmdir(directory: str) -> bool:
    """Remove ``directory`` if it is empty; True when it is gone."""
    try:
        os.rmdir(directory)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


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
    resolve_version); ``timestampAsOf`` / ``scan.timestamp`` / ``scan.timestamp-millis`` epoch milliseconds or an
    ISO-8601 timestamp, read in the session time zone when it has no offset (see time_zone), and pick the latest
    snapshot committed at or before it.

    A user's time travel on a table with ``scan.file-creation-time-millis`` is refused as the engine refuses it
    (Table.check_time_travel); a row-level command's pin (``pin_snapshot``) is not.

    Raises SnapshotNotFound, TagNotFound, InvalidInput (timestamp before the first snapshot), InvalidOption.
    """
    opts = lower_options(options)
    given = [k for k in TIME_TRAVEL_KEYS if opts.get(k)]
    if len(given) > 1:
        raise InvalidOption(given[1], opts[given[1]], f"only one time-travel option may be set, got {given}",
                            table=table.name)
    if not given:
        return table.snapshot()
    key = given[0]
    value = opts[key]
    if opts.get(LATEST_SCHEMA, "false").strip().lower() != "true":  # a row-level command's own pin reads all files
        table.check_time_travel(f"{key}={value}")
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
    zone = time_zone(opts)
    millis = timestamp_millis(key, value, zone, table.name)
    best = None
    for snap in table.snapshots():
        if snap.time_millis <= millis and (best is None or snap.id > best.id):
            best = snap
    if best is None:
        read_in = f"time zone {zone}" if zone else \
            "the local time zone (spark.sql.session.timeZone is out of sight here: set option timeZone)"
        where = f", read in {read_in}" if _without_offset(key, value, table.name) else ""
        raise InvalidInput(f"no snapshot was committed at or before {value} ({key}{where})", table=table.name)
    return best


def pin_snapshot(snapshot_id: int) -> dict[str, str]:
    """Read options of Spark's row-level commands: snapshot ``snapshot_id`` read through the table's latest schema
    (the one the command writes), whatever schema it was committed under."""
    return {SNAPSHOT_ID: str(snapshot_id), LATEST_SCHEMA: "true"}


def travels_schema(options: Mapping[str, str]) -> bool:
    """Whether a read with ``options`` goes through the schema of the snapshot it time-travels to (Paimon's
    AbstractFileStoreTable.tryTimeTravel): any time-travel option, unless the read is a row-level command's pin
    (``pin_snapshot``) or carries an option only streams use (``STREAM_ONLY_KEYS``: streams keep the latest)."""
    opts = lower_options(options)
    if not any(opts.get(k) for k in TIME_TRAVEL_KEYS) or any(opts.get(k) for k in STREAM_ONLY_KEYS):
        return False
    return opts.get(LATEST_SCHEMA, "false").strip().lower() != "true"


def read_view(table: Table, options: Mapping[str, str]) -> Table:
    """The table a batch read of ``table`` with ``options`` reads through: with time travel (``travels_schema``)
    the schema of the snapshot it reads, with the table's current options restated for it (Table.as_of_snapshot);
    else ``table`` (no snapshot is resolved). Raises as resolve_snapshot, InvalidSchema (Table.as_of_snapshot)."""
    return table.as_of_snapshot(resolve_snapshot(table, options)) if travels_schema(options) else table


def resolve_other_branch_snapshot(other: Table, snapshot: Snapshot | None, options: Mapping[str, str]
                                  ) -> Snapshot | None:
    """The snapshot of branch table ``other`` that a fallback-branch read (engine.read.fallback_branch) of the
    table at ``snapshot`` (resolved from ``options``) reads, as Paimon's FallbackReadFileStoreTable passes the
    read's options on: ``scan.snapshot-id`` is mapped by time (the branch's latest snapshot committed at or
    before, else its snapshot 1); every other option (tag, version, timestamp) is resolved by the branch itself.
    Raises SnapshotNotFound, TagNotFound, InvalidInput, InvalidOption as resolve_snapshot."""
    opts = lower_options(options)
    if opts.get(SNAPSHOT_ID) and snapshot is not None:
        from engine.read.fallback_branch import snapshot_at_or_before
        return snapshot_at_or_before(other, snapshot.time_millis)
    return resolve_snapshot(other, opts)


def time_zone(options: Mapping[str, str]) -> str | None:
    """The zone of a time-travel timestamp written without one: option ``timeZone``, else the query's
    ``spark.sql.session.timeZone`` when this runs in a Spark task and the session set one (Spark hands SQL settings to
    tasks as local properties; the planner of a Python data source runs in a worker that sees no session), else
    None: this process's local zone (on the driver host the JVM's default zone, Spark's default session zone)."""
    zone = lower_options(options).get(TIME_ZONE)
    if zone:
        return zone
    from pyspark import TaskContext
    task = TaskContext.get()
    return None if task is None else task.getLocalProperty(SESSION_TIME_ZONE)


def _parse_time(key: str, value: str, table: str) -> int | dt.datetime:
    """Epoch milliseconds, or the datetime of an ISO-8601 timestamp (naive when it has no offset)."""
    try:
        return int(value)
    except ValueError:
        pass
    try:
        return dt.datetime.fromisoformat(value)
    except ValueError:
        raise InvalidOption(key, value, "expected epoch milliseconds or an ISO-8601 timestamp", table=table) from None


def timestamp_millis(key: str, value: str, zone: str | None, table: str) -> int:
    """Epoch milliseconds of a time-travel ``value``: epoch milliseconds, or an ISO-8601 timestamp, which without an
    offset is wall time in ``zone`` (a Spark zone id; None: this process's local zone). Raises InvalidOption."""
    parsed = _parse_time(key, value, table)
    if isinstance(parsed, int):
        return parsed
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=zone_info(zone, table)) if zone else parsed.astimezone()
    return (parsed - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)) // dt.timedelta(milliseconds=1)


_OFFSET = re.compile(r"(?:UTC|GMT|UT)?([+-])(\d{1,2})(?::?(\d{2}))?(?::?(\d{2}))?")
# java.time.ZoneId.SHORT_IDS: Spark resolves a session zone with ZoneId.of(id, SHORT_IDS), so 'PST' is valid there
JAVA_SHORT_IDS = {
    "ACT": "Australia/Darwin", "AET": "Australia/Sydney", "AGT": "America/Argentina/Buenos_Aires",
    "ART": "Africa/Cairo", "AST": "America/Anchorage", "BET": "America/Sao_Paulo", "BST": "Asia/Dhaka",
    "CAT": "Africa/Harare", "CNT": "America/St_Johns", "CST": "America/Chicago", "CTT": "Asia/Shanghai",
    "EAT": "Africa/Addis_Ababa", "ECT": "Europe/Paris", "EST": "-05:00", "HST": "-10:00",
    "IET": "America/Indiana/Indianapolis", "IST": "Asia/Kolkata", "JST": "Asia/Tokyo", "MIT": "Pacific/Apia",
    "MST": "-07:00", "NET": "Asia/Yerevan", "NST": "Pacific/Auckland", "PLT": "Asia/Karachi",
    "PNT": "America/Phoenix", "PRT": "America/Puerto_Rico", "PST": "America/Los_Angeles",
    "SST": "Pacific/Guadalcanal", "VST": "Asia/Ho_Chi_Minh",
}


def zone_info(zone: str, table: str | None = None) -> dt.tzinfo:
    """A Spark time-zone id as a tzinfo: a region id (``Europe/Berlin``, ``UTC``), an offset (``+02:00``, ``-5``,
    ``GMT+8``, ``Z``) or a short id as java.time reads it (``PST`` is America/Los_Angeles, ``EST`` -05:00).
    Raises InvalidOption for anything else."""
    zone = JAVA_SHORT_IDS.get(zone, zone)
    match = _OFFSET.fullmatch(zone)
    try:
        if match:
            sign, hours, minutes, seconds = match.groups()
            offset = dt.timedelta(hours=int(hours), minutes=int(minutes or 0), seconds=int(seconds or 0))
            return dt.timezone(-offset if sign == "-" else offset)
        return dt.timezone.utc if zone in ("Z", "z", "UT") else zoneinfo.ZoneInfo(zone)
    except (ValueError, zoneinfo.ZoneInfoNotFoundError):
        raise InvalidOption("timeZone", zone, "expected a region id (Europe/Berlin) or an offset (+02:00)",
                            table=table) from None


def zone_less_timestamp(options: Mapping[str, str], table: str) -> tuple[str, str] | None:
    """(key, value) of the time-travel option when it is an ISO timestamp without an offset and option ``timeZone``
    is not set: where the session's zone is out of sight (a read planner), its instant rests on the local zone."""
    opts = lower_options(options)
    key = next((k for k in TIME_KEYS if opts.get(k)), None)
    if key is None or opts.get(TIME_ZONE):
        return None
    return (key, opts[key]) if _without_offset(key, opts[key], table) else None


def _without_offset(key: str, value: str, table: str) -> bool:
    parsed = _parse_time(key, value, table)
    return isinstance(parsed, dt.datetime) and parsed.tzinfo is None


def check_planned_zone(planned: tuple[str, str, int] | None, table: str) -> None:
    """In a Spark task: raise InvalidOption when the planner read a zone-less timestamp ``(key, value, millis)`` in
    its local zone and the query's session time zone puts it at another instant (the snapshot may be wrong)."""
    if planned is None:
        return
    key, value, millis = planned
    zone = time_zone({})
    if zone is not None and timestamp_millis(key, value, zone, table) != millis:
        raise InvalidOption(key, value, f"a timestamp without an offset is read in spark.sql.session.timeZone "
                            f"({zone}), which the lakemerge read planner cannot see (it used its local zone); add "
                            "an offset, set option timeZone or read with spark_glue.read_table", table=table)


def session_time_stamps(rows: pa.Table, target: pa.Schema, zone: str | None) -> pa.Table:
    """``rows`` whose timestamps are converted, as Spark's store assignment casts them in the session time zone
    ``zone`` (None: a TIMESTAMP's Arrow zone, which Spark sets to the session's, and for a TIMESTAMP_NTZ this
    process's local zone), where the input and the table type differ in kind, at any depth
    (a struct field, a list element, a map key or value): a Spark TIMESTAMP (an instant) into a type without a
    time zone becomes its wall time in ``zone``; a TIMESTAMP_NTZ (a wall time) into a type with one becomes the
    instant of that wall time in ``zone`` (a wall time a DST gap skips moves later by the gap, an ambiguous one
    takes the earlier instant, as java.time does); a top-level DATE into a type with one becomes the instant of its
    midnight in ``zone``. Other values are returned as they are; nested struct fields are matched by name
    (writing.check_input_schema has made them the table's)."""
    for i, name in enumerate(rows.column_names):
        if name not in target.names:
            continue
        col, want = rows.column(i), target.field(name).type
        if col.num_chunks and _needs_zone(col.type, want):
            chunks = [_in_zone(c, want, zone) for c in col.chunks]
            rows = rows.set_column(i, name, pa.chunked_array(chunks))
        elif col.num_chunks and pa.types.is_date(col.type) and pa.types.is_timestamp(want) and want.tz is not None:
            chunks = [_to_instant(c.cast(pa.timestamp("us")), zone) for c in col.chunks]
            rows = rows.set_column(i, name, pa.chunked_array(chunks))
    return rows


def spark_decimals(rows: pa.Table, target: pa.Schema, table: str) -> pa.Table:
    """``rows`` whose top-level decimal and floating-point columns written into a DECIMAL column of ``target`` are
    rounded to its scale as Spark's store assignment casts them (Decimal.changePrecision with ROUND_HALF_UP: ties
    away from zero; a double by its shortest decimal form, as BigDecimal(double) reads it), instead of the writer's
    safe cast refusing any lost digit. A value still too wide for the precision is left for the writer to refuse
    (as Spark's ANSI cast does); NaN and infinities raise InvalidInput naming the column. Nested values are left
    to the writer's safe cast."""
    for i, name in enumerate(rows.column_names):
        if name not in target.names or not pa.types.is_decimal(target.field(name).type):
            continue
        col, want = rows.column(i), target.field(name).type
        if pa.types.is_decimal(col.type) and col.type.scale > want.scale:
            col = _round_decimals(col, want.scale, table, name)
        elif pa.types.is_floating(col.type):
            col = _floats_to_decimal(col, want.scale, table, name)
        else:
            continue
        rows = rows.set_column(i, name, col)
    return rows


def _round_decimals(col, scale: int, table: str, name: str):
    """Decimals rounded HALF_UP to ``scale`` (spark_decimals), one digit wider first so that a carry (9.999 ->
    10.00) fits; raises InvalidInput naming the column when even 38 digits cannot hold it."""
    wider = pa.decimal128(min(col.type.precision + 1, 38), col.type.scale)
    try:
        return pc.round(col.cast(wider), ndigits=scale, round_mode="half_towards_infinity")
    except pa.ArrowInvalid:
        raise InvalidInput(f"column {name!r}: a value rounded to scale {scale} does not fit a decimal",
                           table=table, column=name) from None


def _floats_to_decimal(col, scale: int, table: str, name: str) -> pa.Array:
    """Doubles as decimal(38, ``scale``) values rounded HALF_UP from their shortest decimal form (spark_decimals)."""
    import decimal
    quantum = decimal.Decimal(1).scaleb(-scale)
    context = decimal.Context(prec=80, rounding=decimal.ROUND_HALF_UP)
    out = []
    for v in col.to_pylist():
        if v is None:
            out.append(None)
            continue
        d = decimal.Decimal(repr(float(v)))
        if not d.is_finite():
            raise InvalidInput(f"column {name!r}: {v} cannot be written into a DECIMAL column", table=table,
                               column=name)
        out.append(d.quantize(quantum, context=context))
    try:
        return pa.array(out, pa.decimal128(38, scale))
    except (pa.ArrowInvalid, OverflowError):  # wider than any decimal: refused as the writer refuses an overflow
        raise InvalidInput(f"column {name!r}: a value does not fit a decimal of scale {scale}", table=table,
                           column=name) from None


def _children(have: pa.DataType, want: pa.DataType) -> list[tuple[pa.DataType, pa.DataType]]:
    """(input, table) types of the nested values of ``have`` and ``want`` (structs by field name)."""
    if pa.types.is_struct(have) and pa.types.is_struct(want):
        names = {want.field(j).name for j in range(want.num_fields)}
        return [(have.field(j).type, want.field(have.field(j).name).type) for j in range(have.num_fields)
                if have.field(j).name in names]
    if pa.types.is_map(have) and pa.types.is_map(want):
        return [(have.key_type, want.key_type), (have.item_type, want.item_type)]
    lists = (pa.types.is_list, pa.types.is_large_list)
    if any(f(have) for f in lists) and any(f(want) for f in lists + (pa.types.is_fixed_size_list,)):
        return [(have.value_type, want.value_type)]
    return []


def _needs_zone(have: pa.DataType, want: pa.DataType) -> bool:
    if pa.types.is_timestamp(have) and pa.types.is_timestamp(want):
        return (have.tz is None) != (want.tz is None)
    return any(_needs_zone(h, w) for h, w in _children(have, want))


def _in_zone(arr: pa.Array, want: pa.DataType, zone: str | None) -> pa.Array:
    """``arr`` with its timestamps converted for the table type ``want`` (session_time_stamps)."""
    if not _needs_zone(arr.type, want):
        return arr
    if pa.types.is_timestamp(arr.type):
        return _to_wall(arr, zone) if want.tz is None else _to_instant(arr, zone)
    if arr.offset:  # Arrow cannot rebuild a sliced list with nulls: copy the slice first
        arr = pa.concat_arrays([arr])
    mask = arr.is_null() if arr.null_count else None
    if pa.types.is_struct(arr.type):
        fields = [arr.type.field(j) for j in range(arr.type.num_fields)]
        names = {want.field(j).name for j in range(want.num_fields)}
        children = [_in_zone(arr.field(j), want.field(f.name).type, zone) if f.name in names else arr.field(j)
                    for j, f in enumerate(fields)]
        return pa.StructArray.from_arrays(children, fields=[f.with_type(c.type) for f, c in zip(fields, children)],
                                          mask=mask)
    if pa.types.is_map(arr.type):
        keys, items = _in_zone(arr.keys, want.key_type, zone), _in_zone(arr.items, want.item_type, zone)
        return pa.MapArray.from_arrays(arr.offsets, keys, items, mask=mask)
    values = _in_zone(arr.values, want.value_type, zone)
    build = pa.LargeListArray if pa.types.is_large_list(arr.type) else pa.ListArray
    return build.from_arrays(arr.offsets, values, mask=mask)


def _to_wall(col: pa.Array, zone: str | None) -> pa.Array:
    unit = col.type.unit
    zone = zone or col.type.tz  # Spark hands a TIMESTAMP to Python typed with its session zone
    tz = None if zone is None else zone_info(zone)
    if isinstance(tz, zoneinfo.ZoneInfo):
        return pc.local_timestamp(col.cast(pa.timestamp(unit, tz=tz.key)))
    values = [None if v is None else v.astimezone(tz).replace(tzinfo=None) for v in col.to_pylist()]
    return pa.array(values, pa.timestamp(unit))


def _to_instant(col: pa.Array, zone: str | None) -> pa.Array:
    unit = col.type.unit
    tz = None if zone is None else zone_info(zone)
    if isinstance(tz, zoneinfo.ZoneInfo):
        first = pc.assume_timezone(col, tz.key, ambiguous="earliest", nonexistent="earliest")
        # in a gap 'earliest' is the last instant before it: move on by what the wall time lies past it
        return pc.add(first, pc.subtract(col, pc.local_timestamp(first))).cast(pa.timestamp(unit, tz="UTC"))
    values = [None if v is None else (v.replace(tzinfo=tz) if tz is not None else v.astimezone())
              for v in col.to_pylist()]
    return pa.array(values, pa.timestamp(unit, tz="UTC"))


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
