"""The ``lakemerge`` Python data source: ``spark.read/write(Stream).format("lakemerge")``.

Options (keys are case-insensitive):
- read: ``scan.snapshot-id`` | ``scan.tag-name`` | ``versionAsOf`` (or ``scan.version``: a tag name, else a
  snapshot id, as Paimon's ``VERSION AS OF``) | ``timestampAsOf`` (or ``scan.timestamp`` /
  ``scan.timestamp-millis``: epoch milliseconds or ISO-8601) for time travel, which reads through the schema that
  snapshot was committed under (its columns, with the table's current options restated for it, as Paimon's time
  travel; not with an option only streams use, such as ``scan.mode``: tables.travels_schema); ``timeZone``: the zone of a timestamp
  without an offset (default: the Spark session's, which only ``read_table`` and Spark tasks can see; a read
  planner without it uses its local zone, and the tasks fail the read if the session's differs there, see
  tables.check_planned_zone); ``columns`` (comma list) to read only some columns (Spark 4.3 has no column-pruning
  hook for Python sources); ``filter-pushdown`` (true/false, default false; needs
  ``spark.sql.python.filterPushdown.enabled``: each query that pushes filters re-plans against the current
  snapshot) and ``filter-pushdown.prune`` (true/false, default false: also prune by them; wrong rows when one
  DataFrame or view is scanned twice in a query, or queried later without filters, see reading.PushdownReader);
  ``source.split.target-size`` / ``source.split.open-file-cost``; ``follow-latest`` (true/false, default false:
  every query of the DataFrame or of a ``CREATE TEMPORARY VIEW ... USING lakemerge`` view reads the snapshot that
  is latest when it runs, read by ONE Spark task, since Spark 4.3 reuses the relation's first plan; not with time
  travel; pushed filters then prune nothing, see reading.MergedTableReader._follow_latest);
  ``metadata-columns`` (comma list, append tables only): add Paimon's metadata columns ``__paimon_file_path``
  (the data file's full path) and ``__paimon_row_index`` (the row's position in that file, which deletion vectors
  mark) after the table's columns.
- system tables: ``load(path + "$snapshots")`` or option ``system-table`` (see spark_glue.system_read).
- branches: ``load(path + "$branch_b1")`` or option ``branch`` (as Paimon's): reads, writes, streams and system
  tables of that branch (engine.branch_table); a write never creates a branch (``Table.create_branch``).
- streaming read (``spark.readStream``): ``scan.mode``, ``scan.snapshot-id``, ``scan.timestamp-millis`` /
  ``scan.timestamp``,
  ``read.changelog`` (adds ``_row_kind``), ``changelog.normalize``, ``consumer-id``,
  ``read.stream.max-snapshots-per-trigger`` and Paimon's rate limits (``read.stream.maxFilesPerTrigger`` ...,
  spark_glue.stream_limits); see spark_glue.stream_read.
- write: ``primary-key`` / ``partition`` / ``bucket`` and other Paimon table options create the table on the
  first write if there is none at the path (and remove it again if that write fails); ``commit.user``, ``commit.identifier`` (exactly-once retries), ``rowkind.column`` (input column of
  +I/-U/+U/-D that is consumed, not stored), ``dynamic-partition-overwrite`` (default true; false = overwrite the
  whole table in ``mode("overwrite")``), ``write.merge-schema`` (true: add the input's new columns and struct
  fields to the table first, once, on the driver; ``write.merge-schema.type-widening`` also widens column types,
  see writing.merge_input_schema and engine.merge_schema; nested struct fields the input lacks are then written
  as null). Only the write option counts here: the planner of a Python data source is handed the options and the
  input schema, not the session's ``spark.paimon.write.merge-schema`` (write_table reads that).
"""
from __future__ import annotations

from pyspark.sql.datasource import DataSource

from engine.errors import InvalidInput, LakemergeError
from engine.options import parse_bool
from spark_glue.tables import open_table, read_view, spark_schema, with_branch

FILTER_PUSHDOWN = "filter-pushdown"
READ_CHANGELOG = "read.changelog"
ROW_KIND_COLUMN = "_row_kind"
COLUMNS = "columns"
METADATA_COLUMNS = "metadata-columns"
FILE_PATH = "__paimon_file_path"
ROW_INDEX = "__paimon_row_index"


def metadata_columns(opts: dict, table) -> list[str]:
    """The metadata columns option ``metadata-columns`` asks for, in the order given. Raises InvalidInput for an
    unknown name or a primary-key table (a merged row has no single file position)."""
    names = [c.strip() for c in opts.get(METADATA_COLUMNS, "").split(",") if c.strip()]
    unknown = [c for c in names if c not in (FILE_PATH, ROW_INDEX)]
    if unknown:
        raise InvalidInput(f"unknown metadata column(s) {unknown} in option '{METADATA_COLUMNS}' (known: "
                           f"{FILE_PATH}, {ROW_INDEX})", table=table.name, column=unknown[0])
    if names and not table.schema.is_append_only:
        raise InvalidInput(f"option '{METADATA_COLUMNS}' needs an append table: a primary-key table's merged rows "
                           "have no single file position", table=table.name)
    return names


class LakemergeDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "lakemerge"

    def _opts(self) -> dict:
        return with_branch(self.options)

    def _system_kind(self):
        from spark_glue.system_read import split_system_path
        return split_system_path(self._opts())[1]

    def schema(self):
        opts = self._opts()
        if self._system_kind():
            from spark_glue.system_read import system_schema
            return spark_schema(system_schema(opts))
        # a time-travel read has the columns of the schema its snapshot was committed under (reading.plan_batch)
        table = open_table(opts.get("path"))
        try:
            table = read_view(table, opts)
        except LakemergeError:  # as Paimon's tryTimeTravel: the latest schema here (a stream may start from a tag
            pass                # given as scan.snapshot-id); a batch read raises the error when it plans
        arrow = table.arrow_schema
        if opts.get(COLUMNS):
            cols = [c.strip() for c in opts[COLUMNS].split(",") if c.strip()]
            unknown = [c for c in cols if c not in arrow.names]
            if unknown:
                raise InvalidInput(f"unknown column(s) {unknown} in option 'columns'", table=table.name,
                                   column=unknown[0])
            arrow = pa_select(arrow, cols)
        meta = metadata_columns(opts, table)
        if meta:
            import pyarrow as pa
            types = {FILE_PATH: pa.string(), ROW_INDEX: pa.int64()}
            arrow = pa.schema(list(arrow) + [pa.field(c, types[c], nullable=False) for c in meta])
        if parse_bool(opts.get(READ_CHANGELOG, "false")):  # streaming reads: the change's row kind
            import pyarrow as pa
            arrow = arrow.append(pa.field(ROW_KIND_COLUMN, pa.string()))
        return spark_schema(arrow)

    def reader(self, schema):
        from spark_glue.reading import MergedTableReader, PushdownReader
        opts = self._opts()
        if self._system_kind():
            from spark_glue.system_read import SystemTableReader
            return SystemTableReader(opts, schema)
        if ROW_KIND_COLUMN in schema.fieldNames() and parse_bool(opts.get(READ_CHANGELOG, "false")):
            raise InvalidInput(f"option {READ_CHANGELOG} applies to streaming reads (spark.readStream); for a batch "
                               "read of changes use Table.read_changes or the $audit_log system table")
        if parse_bool(opts.get(FILTER_PUSHDOWN, "false")):
            return PushdownReader(opts, schema)
        return MergedTableReader(opts, schema)

    def streamReader(self, schema):
        from spark_glue.stream_read import ChangeStreamReader
        if self._system_kind():
            raise InvalidInput(f"system table ${self._system_kind()} cannot be read as a stream; stream the table's "
                               "changes with spark.readStream on the table path")
        return ChangeStreamReader(self._opts(), schema)

    def _check_writable(self):
        kind = self._system_kind()
        if kind:
            raise InvalidInput(f"system table ${kind} is read-only")

    def writer(self, schema, overwrite: bool):
        from spark_glue.writing import LakemergeWriter
        self._check_writable()
        return LakemergeWriter(self._opts(), overwrite, schema)

    def streamWriter(self, schema, overwrite: bool):
        from spark_glue.writing import LakemergeStreamWriter
        self._check_writable()
        return LakemergeStreamWriter(self._opts(), overwrite, schema)


def pa_select(schema, cols):
    import pyarrow as pa
    return pa.schema([schema.field(c) for c in cols])
