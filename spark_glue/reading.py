"""Batch reads of the merged table through the Python Data Source API.

Planning (``partitions``, on the driver's planning worker) resolves the snapshot, prunes with the pushed filters
(partitions, buckets, files by key statistics: engine.read.scan) and packs the (partition, bucket) splits into
input partitions of about ``source.split.target-size`` bytes (large splits alone, small ones together, biggest
first). ``read`` (on executors) merges each split with the engine's SplitReader (an append table's files are read
in append order, unmerged) and yields Arrow record batches.

Pushed filters only prune: every filter is also handed back to Spark as unhandled, so Spark evaluates it exactly
on the rows (the reader also drops rows that fail it, to ship fewer rows). Pruning never drops a matching row.
"""
from __future__ import annotations

import heapq
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import (DataSourceReader, EqualNullSafe, EqualTo, GreaterThan, GreaterThanOrEqual, In,
                                    InputPartition, IsNull, LessThan, LessThanOrEqual, Not)

from engine.data_paths import data_file_path
from engine.errors import InvalidOption, SchemaMismatch
from engine.options import parse_bool, parse_memory_size
from engine.read import predicate as pred
from engine.read.scan import Split
from spark_glue.tables import (
    TIME_TRAVEL_KEYS,
    arrow_of_spark,
    check_planned_zone,
    lower_options,
    open_table,
    resolve_snapshot,
    timestamp_millis,
    travels_schema,
    zone_less_timestamp,
)

TARGET_SPLIT_SIZE = "source.split.target-size"
OPEN_FILE_COST = "source.split.open-file-cost"
PRUNE = "filter-pushdown.prune"
FOLLOW_LATEST = "follow-latest"
# true: read the table's own snapshot only, without the partitions scan.fallback-branch / scan.primary-branch take
# from another branch (the row-level commands of append tables rewrite the table's files, as Paimon's take their
# splits from the table's own snapshot reader)
TABLE_ALONE = "read.table-alone"
# true: a row-level command's read, of every bucket and file whatever the table's read options scan.bucket and
# scan.file-creation-time-millis (which narrow users' reads: engine.read.scan.TableScan.plan) say
EVERY_FILE = "read.every-file"
DEFAULT_TARGET = 128 << 20
DEFAULT_OPEN_COST = 4 << 20
BATCH_ROWS = 64 * 1024


class SplitGroup(InputPartition):
    """The splits one Spark task reads, the snapshot they belong to and, when a zone-less timestamp chose it, that
    timestamp's (key, value, epoch millis) as the planner read it (see tables.check_planned_zone). ``schema_id``:
    the table schema the read was planned under, which the task reads through (None: the table's current one).
    A split of another branch (``scan.fallback-branch`` / ``scan.primary-branch``, ``Split.branch``) is read
    through that branch's schema ``branch_schema_ids[branch]``, its columns by position under the table's.
    ``time_travel``: those schemas are the time-travelled snapshots', read with each table's current options
    restated for them (Table.as_of_schema), not with the options they were committed with."""

    def __init__(self, splits, snapshot_id: int | None, planned_time: tuple[str, str, int] | None = None,
                 schema_id: int | None = None, branch_schema_ids: dict | None = None, time_travel: bool = False):
        self.splits = tuple(splits)
        self.snapshot_id = snapshot_id
        self.planned_time = planned_time
        self.schema_id = schema_id
        self.branch_schema_ids = dict(branch_schema_ids or {})  # fallback reads: branch -> schema id it read
        self.time_travel = time_travel


class LatestSnapshot(InputPartition):
    """Option ``follow-latest``: the only partition of a read whose task resolves the latest snapshot itself, read
    through the table schema ``schema_id`` the relation was planned under."""

    def __init__(self, schema_id: int):
        super().__init__(None)
        self.schema_id = schema_id


def pack_splits(splits: list[Split], target: int, open_cost: int) -> list[list[Split]]:
    """First-fit-decreasing by size: a unit at or above ``target`` is a group of its own; smaller ones share
    the least-filled group that stays within ``target``. Groups come out biggest first. A unit is one split, or
    consecutive splits of one partition that carry its postponed records (``postpone.merge-on-read``), as many as
    fit ``target`` with the postponed files counted once, so that one task decodes the partition's postponed
    files once for them (engine.postpone.merge_on_read) while a big partition is still read by several tasks."""
    def files_size(files) -> int:
        return sum(f.file_size + open_cost for f in files)

    by_partition: dict = {}
    for sp in splits:
        key = ("postponed", sp.branch, sp.partition) if sp.postponed is not None else ("split", id(sp))
        by_partition.setdefault(key, []).append(sp)
    units: dict = {}
    for key, members in by_partition.items():
        if members[0].postponed is None:
            units[key] = members
            continue
        shared = files_size(members[0].postponed.files)
        chunk, filled = [], shared
        for sp in members:
            own = files_size(sp.files)
            if chunk and filled + own > target:
                units[(key, len(units))] = chunk
                chunk, filled = [], shared
            chunk.append(sp)
            filled += own
        units[(key, len(units))] = chunk

    def size(unit: list[Split]) -> int:
        postponed = unit[0].postponed
        return sum(files_size(sp.files) for sp in unit) + (files_size(postponed.files) if postponed else 0)

    groups: list[list[Split]] = []
    heap: list[tuple[int, int]] = []  # (filled bytes, group index) of groups that may take more
    for unit in sorted(units.values(), key=size, reverse=True):
        s = size(unit)
        if heap and heap[0][0] + s <= target:
            filled, i = heapq.heappop(heap)
            groups[i].extend(unit)
            heapq.heappush(heap, (filled + s, i))
        else:
            groups.append(list(unit))
            if s < target:
                heapq.heappush(heap, (s, len(groups) - 1))
    return groups


def spark_filter_to_terms(f) -> list[tuple] | None:
    """A Spark filter as a conjunction of engine DNF terms, or None when it cannot help pruning."""
    if len(getattr(f, "attribute", ())) != 1 and not isinstance(f, Not):
        return None
    if isinstance(f, (EqualTo, EqualNullSafe)):
        return None if f.value is None else [(f.attribute[0], "=", f.value)]
    ops = {GreaterThan: ">", GreaterThanOrEqual: ">=", LessThan: "<", LessThanOrEqual: "<="}
    for cls, op in ops.items():
        if type(f) is cls:
            return None if f.value is None else [(f.attribute[0], op, f.value)]
    if isinstance(f, In):
        values = tuple(v for v in f.value if v is not None)
        return [(f.attribute[0], "in", values)] if values else None
    if isinstance(f, IsNull):
        return [(f.attribute[0], "is null", None)]
    # IsNotNull is never used: Spark infers it on join keys (MERGE's cardinality join), and a pushed filter is
    # read by every scan of the DataFrame (G1 in spark-notes), which would drop a null-key source row's insert.
    if isinstance(f, Not) and isinstance(f.child, EqualTo) and len(f.child.attribute) == 1 \
            and f.child.value is not None:
        return [(f.child.attribute[0], "!=", f.child.value)]
    return None


def _prunable(t: pa.DataType) -> bool:
    return (pa.types.is_integer(t) or pa.types.is_decimal(t) or pa.types.is_string(t) or pa.types.is_large_string(t)
            or pa.types.is_boolean(t) or pa.types.is_date(t))


def to_spark_type(column, t: pa.DataType, *, table: str | None = None, name: str | None = None):
    """``column`` as the Arrow type Spark expects. Spark timestamps hold microseconds: nanoseconds are floored, as
    Paimon's Spark connector does (Timestamp.toMicros); a safe cast refused the whole read. Other types are cast
    safely: a DataFrame or stream keeps the Spark schema it was created with, so after the table's column
    ``name`` was widened (ALTER, write.merge-schema type widening) it reads the values that fit its type exactly
    and raises SchemaMismatch naming ``table`` and ``name`` for a value that does not (Paimon's reader of the old
    schema narrows it with a Java cast, which wraps)."""
    if pa.types.is_timestamp(t) and pa.types.is_timestamp(column.type) and column.type.unit == "ns":
        nanos = pc.cast(column, pa.int64())
        micros = pc.divide(nanos, 1000)  # truncates toward zero
        micros = pc.if_else(pc.less(pc.subtract(nanos, pc.multiply(micros, 1000)), 0), pc.subtract(micros, 1),
                            micros)
        return pc.cast(micros, t)
    try:
        return column.cast(t)
    except pa.ArrowInvalid as e:
        if name is None:
            raise
        raise SchemaMismatch(f"column {name!r} is {column.type} in the table now but {t} in this DataFrame or "
                             f"stream, and holds a value that type cannot ({e}); the column was widened after the "
                             "DataFrame or stream was created: create the DataFrame or stream again to read it",
                             table=table, column=name) from None


class MergedTableReader(DataSourceReader):
    """Reads the merged rows of one snapshot; see the module docstring."""

    def __init__(self, options: dict, schema):
        self.options = lower_options(options)
        self.schema = schema
        self.columns = [f.name for f in schema.fields]
        self.terms: list[tuple] = []

    def _dnf(self, table):
        """The pushed terms the engine can prune with. Only columns whose Spark literals map one-to-one onto the
        stored values take part: integers, decimals, strings, booleans and dates. Timestamps (a Spark literal's
        meaning depends on the session time zone) and floats (Spark orders NaN above everything) never prune."""
        arrow = table.arrow_schema
        terms = [t for t in self.terms if t[0] in arrow.names and _prunable(arrow.field(t[0]).type)]
        if not terms:
            return None
        try:
            return pred.normalize([terms], table.arrow_schema, table.name)
        except Exception:  # a literal the engine cannot cast proves nothing: prune with the terms that fit
            good = []
            for t in terms:
                try:
                    pred.normalize([t], table.arrow_schema, table.name)
                    good.append(t)
                except Exception:
                    pass
            return pred.normalize([good], table.arrow_schema, table.name) if good else None

    def _follow_latest(self, table) -> bool:
        """Option ``follow-latest``: Spark 4.3 keeps a Python source's first plan for every later query of the same
        relation (a reused DataFrame, a ``CREATE TEMPORARY VIEW ... USING lakemerge`` view) unless the query pushes
        a filter, and a task learns nothing that would let several tasks agree on one snapshot per query. So one
        task resolves the latest snapshot when it runs and reads the whole table. Time travel pins a snapshot
        anyway: combined with it the option is refused (InvalidOption)."""
        value = self.options.get(FOLLOW_LATEST, "false")
        try:
            on = parse_bool(value)
        except ValueError:
            raise InvalidOption(FOLLOW_LATEST, value, "expected true or false", table=table.name) from None
        travel = [k for k in TIME_TRAVEL_KEYS if self.options.get(k)]
        if on and travel:
            raise InvalidOption(FOLLOW_LATEST, value, f"reads the latest snapshot; it cannot be combined with "
                                f"time travel ({travel[0]})", table=table.name)
        return on

    def partitions(self):
        table = open_table(self.options.get("path"))
        if self._follow_latest(table):
            return [LatestSnapshot(table.schema.id)]
        snap = resolve_snapshot(table, self.options)
        travel = travels_schema(self.options)
        if travel:  # through the schema the snapshot was committed under, as DataSource.schema (tables.read_view)
            table = table.as_of_snapshot(snap)
        splits, branch_schemas = plan_batch(table, snap, self._dnf(table), self.options)
        target = parse_memory_size(self.options.get(TARGET_SPLIT_SIZE, str(DEFAULT_TARGET)))
        cost = parse_memory_size(self.options.get(OPEN_FILE_COST, str(DEFAULT_OPEN_COST)))
        sid = None if snap is None else snap.id
        # This planner sees no Spark session: a zone-less timestamp was read in the local zone; the tasks check it.
        zone_less = zone_less_timestamp(self.options, table.name)
        planned = None if zone_less is None else (*zone_less, timestamp_millis(*zone_less, None, table.name))
        groups = pack_splits(splits, max(1, target), cost)
        # Spark needs at least one partition; an empty group reads nothing.
        return [SplitGroup(g, sid, planned, table.schema.id, branch_schemas, travel) for g in groups] \
            or [SplitGroup((), sid, planned, table.schema.id, time_travel=travel)]

    def read(self, partition: SplitGroup | LatestSnapshot):

        from engine.append.read import ordered_files, read_append_positions
        from engine.errors import TableNotFound
        from engine.read.fallback_branch import open_branch
        from engine.read.file_skips import FileSkips
        from engine.read.split_read import SplitReader
        from spark_glue.source import FILE_PATH, ROW_INDEX, metadata_columns
        table = open_table(self.options.get("path"))
        if getattr(partition, "time_travel", False):  # the snapshot's schema, as the planner read it
            table = table.as_of_schema(partition.schema_id)
        dnf = self._dnf(table)
        if isinstance(partition, LatestSnapshot):  # resolved now: the snapshot latest when this query runs
            # the reader (and its pushed terms) is the one of the relation's last push, maybe another query's:
            # prune and filter nothing, Spark evaluates this query's filters itself
            dnf = None
            snap = table.snapshot()
            alone = {TABLE_ALONE: self.options.get(TABLE_ALONE, "false")}
            splits, branch_schemas = plan_batch(table, snap, None, alone)
            partition = SplitGroup(splits, None if snap is None else snap.id, schema_id=partition.schema_id,
                                   branch_schema_ids=branch_schemas)
        check_planned_zone(partition.planned_time, table.name)
        if not partition.splits:
            return iter(())
        meta_cols = metadata_columns(self.options, table)
        data_cols = [c for c in self.columns if c not in meta_cols]
        read_cols = list(dict.fromkeys(data_cols + sorted(pred.columns_of(dnf))))
        target = arrow_of_spark(self.schema)
        # read through the schema the relation was planned under (a view outlives ALTER TABLE; files written under
        # a later schema are read by field id, as Paimon's table object of that schema reads them)
        schema = table.schema if partition.schema_id in (None, table.schema.id) else \
            table.schema_manager.schema(partition.schema_id)
        missing = [c for c in read_cols if c not in schema.field_names]
        if missing:
            raise SchemaMismatch(f"column {missing[0]!r} of this read is not in the table's schema "
                                 f"{schema.id}; the schema changed after the view or DataFrame was created: "
                                 "create it again", table=table.name, column=missing[0])
        sides = {}  # Split.branch -> (reader, its schema, the read columns as it names them)
        # scan.ignore-corrupt-files / scan.ignore-lost-files: users' reads only, never a row-level command's
        user_read = not parse_bool(str(self.options.get(EVERY_FILE, "false")))

        def skips(of_schema):
            return FileSkips.of(of_schema.table_options, self.options) if user_read else None

        def side_of(split):
            if split.branch not in sides:
                if split.branch is None:
                    sides[None] = (SplitReader(table.file_io, schema, table.schema_manager.schema,
                                               skips(schema)), schema, read_cols)
                else:
                    other = open_branch(table, split.branch)
                    if other is None:
                        raise TableNotFound(f"{table.name}$branch_{split.branch}", "the branch this read planned "
                                            "splits of was deleted; run the query again")
                    other_id = partition.branch_schema_ids[split.branch]
                    other_schema = other.as_of_schema(other_id).schema if partition.time_travel else \
                        other.schema_manager.schema(other_id)
                    names = dict(zip(schema.field_names, other_schema.field_names))
                    sides[split.branch] = (SplitReader(other.file_io, other_schema, other.schema_manager.schema,
                                                       skips(other_schema)),
                                           other_schema, [names[c] for c in read_cols])
            return sides[split.branch]

        def append_file(split, f):
            reader, _, cols = side_of(split)
            rows, positions = read_append_positions(reader, split, f, cols)
            rows = rows.rename_columns(read_cols)
            if FILE_PATH in meta_cols:
                path = data_file_path(split.bucket_dir, f)
                rows = rows.append_column(FILE_PATH, pa.array([path] * rows.num_rows, pa.string()))
            if ROW_INDEX in meta_cols:
                rows = rows.append_column(ROW_INDEX, pa.array(positions, pa.int64()))
            return rows

        def parts(split):
            reader, side_schema, cols = side_of(split)
            if side_schema.is_append_only:  # nothing to merge: each file's rows, in append order
                return (append_file(split, f) for f in ordered_files(split))
            return [reader.read(split, cols).rename_columns(read_cols)]

        def batches():
            for merged in (part for split in partition.splits for part in parts(split)):
                if dnf:
                    merged = merged.filter(pred.to_expression(dnf))
                merged = merged.select(self.columns)
                out = pa.Table.from_arrays([to_spark_type(merged.column(i), target.field(i).type, table=table.name,
                                                          name=self.columns[i])
                                            for i in range(len(self.columns))], schema=target)
                yield from out.to_batches(max_chunksize=BATCH_ROWS)
        return batches()


def plan_batch(table, snapshot, dnf, options) -> tuple[list[Split], dict]:
    """The splits a batch read of ``table`` at ``snapshot`` reads and, for a table with ``scan.fallback-branch`` /
    ``scan.primary-branch``, the schema id each other branch's splits are read through (engine.read.fallback_branch;
    the other branch's snapshot from the same time-travel ``options``, tables.resolve_other_branch_snapshot, read
    through that snapshot's schema when ``table`` time-travels, tables.travels_schema; option ``read.table-alone``:
    none). ``table`` is the one the read goes through (tables.read_view). The table's read options scan.bucket and
    scan.file-creation-time-millis narrow the splits unless option ``read.every-file`` is true."""
    from engine.read import fallback_branch
    from engine.read.split_read import batch_read_splits
    from spark_glue.tables import resolve_other_branch_snapshot
    alone = parse_bool(str(options.get(TABLE_ALONE, "false")))
    narrow = not parse_bool(str(options.get(EVERY_FILE, "false")))
    sides = None if alone else fallback_branch.resolve(
        table, snapshot, lambda other: resolve_other_branch_snapshot(other, snapshot, options),
        time_travel=travels_schema(options))
    if sides is None:
        return batch_read_splits(table.scan().plan(snapshot, dnf, batch_read=narrow), table.schema), {}
    schema_ids = {s.branch: s.table.schema.id for s in sides if s.branch is not None}
    return fallback_branch.splits(sides, dnf, batch_read=narrow), schema_ids


class PushdownReader(MergedTableReader):
    """MergedTableReader that takes the filters Spark pushes (needs ``spark.sql.python.filterPushdown.enabled``;
    ``spark_glue.read_table`` sets it). Every push re-plans against the table's current snapshot; only with option
    ``filter-pushdown.prune`` do the filters also prune.

    Spark 4.3.0 keeps the read plan of the LAST push on the relation, and every scan of that relation reads with
    it: both sides of ``df.where(a).union(df.where(b))`` or of a self-join, and later queries that push nothing.
    A pruned plan would silently drop the rows the other scans need, so pruning is opt-in for DataFrames scanned
    once per query (read_table(prune=True) adds the guard that makes every query push)."""

    def pushFilters(self, filters):
        self.terms = []  # reset, never accumulate: the same reader state must not leak between pushes
        if parse_bool(self.options.get(PRUNE, "false")):
            for f in filters:
                self.terms.extend(spark_filter_to_terms(f) or ())
        return list(filters)  # Spark evaluates every filter itself; pruning is only an optimization
