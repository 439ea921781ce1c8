"""Row-level operations a lake-table user expects, as DataFrame helpers (Spark 4.3 refuses SQL MERGE / UPDATE /
DELETE on Python data sources).

On an append table delete_where / update_where / merge_into rewrite the touched files or mark deletion vectors, as
Paimon does (spark_glue.append_dml); they return None when nothing changed.

On a primary-key table every operation is a write of changed rows in ONE snapshot: updated rows are upserted
(+U), deleted rows are written as -D records carrying the old row. Each helper reads the table's current state
(with filter pushdown), computes the changes in Spark and writes them bucket-parallel (``write_table``); it
returns the id of the snapshot it wrote (the latest id if there was nothing to change). As with Paimon, a
concurrent commit to the same keys between the read and the write is overwritten by the newer sequence numbers.
A DELETE from a primary-key table whose merge engine cannot take a delete record changes the data files instead,
as Paimon does (spark_glue.pk_delete); it returns None when nothing matched.
"""
from __future__ import annotations

from functools import reduce
from typing import Mapping

import pyarrow as pa

from engine.errors import InvalidInput, MergeCardinalityViolation, NullPrimaryKey
from engine.options import parse_bool
from spark_glue.api import read_table, write_table
from spark_glue.columns import case_sensitive, resolve, with_table_names
from spark_glue.tables import open_table

KIND = "__lakemerge_row_kind"


def _expr(e):
    from pyspark.sql import functions as F
    return F.expr(e) if isinstance(e, str) else e


def _write_changes(df, path: str, op: str) -> int | None:
    """Write the change rows ``df`` (column KIND) to the table at ``path``; refused first (UnsupportedFeature,
    nothing written) when a delete or update row is one that the other branch of a scan.fallback-branch /
    scan.primary-branch table supplies (engine.read.fallback_branch.other_rows_refused). The rows have the
    table's types: the write never merges the schema, whatever the session's spark.paimon.write.merge-schema (a
    TIMESTAMP(3) column reads as a Spark timestamp, which a merge would widen; Paimon's DML writes with the
    table's schema)."""
    _refuse_other_branch_rows(df, open_table(path), op)
    return write_table(df, path, merge_schema=False, **{"rowkind.column": KIND})


def _refuse_other_branch_rows(df, table, op: str) -> None:
    from pyspark.sql import functions as F

    from engine.read import fallback_branch
    supplied = fallback_branch.other_branch_partitions(table)
    if supplied is None:
        return
    branch, parts = supplied
    keys = list(table.partition_keys)
    changed = df.where(F.col(KIND) != "+I")
    if keys:
        types = {f.name: f.dataType for f in df.schema.fields}
        from pyspark.sql.types import StructField, StructType
        names = [f"__lakemerge_p{i}" for i in range(len(keys))]
        owned = df.sparkSession.createDataFrame(
            [list(p) for p in parts], StructType([StructField(n, types[k]) for n, k in zip(names, keys)]))
        cond = reduce(lambda a, b: a & b, [F.col(f"`{k}`").eqNullSafe(F.col(n)) for k, n in zip(keys, names)])
        changed = changed.join(F.broadcast(owned), cond, "left_semi")
    hit = changed.select(*[F.col(f"`{k}`") for k in keys] or [F.lit(1)]).limit(1).collect()
    if hit:
        raise fallback_branch.refusal(table, op, branch, {tuple(hit[0][k] for k in keys)} if keys else {()})


def delete_where(spark, path: str, condition) -> int | None:
    """Delete the rows matching ``condition`` (SQL string or Column) in one commit. Raises InvalidInput for a
    nanosecond sequence.field (see _check_row_level).

    On an append table (spark_glue.append_dml, Paimon's semantics): a condition over partition columns only, or
    None, drops the matching partitions; otherwise the files holding matching rows are rewritten without them, or
    with deletion vectors the rows are marked deleted. Returns the new snapshot id, None when nothing matched.
    Raises CommitConflict (table unchanged) when a concurrent commit removed a touched file or changed its vector.

    On any table, no condition or one over partition columns only truncates the table or partitions (Paimon's
    metadata-only DELETE; with delete.force-produce-changelog a partition condition deletes rows instead).
    On a primary-key table whose merge engine cannot take a delete record (first-row, aggregation / partial-update
    without remove-record-on-delete) the rows are deleted from the data files as Paimon does (spark_glue.pk_delete;
    no condition or a partition-only one truncates, as on append tables): InvalidInput asking to compact first when
    a touched bucket's files overlap; None when nothing matched; CommitConflict as above."""
    from pyspark.sql import functions as F
    table = open_table(path)
    if table.schema.is_append_only:
        from spark_glue.append_dml import delete_append
        return delete_append(spark, path, None if condition is None else _expr(condition))
    from engine.write.row_level import upsert_deletable
    if not upsert_deletable(table):  # no row is written: a nanosecond sequence.field is fine
        from spark_glue.pk_delete import delete_rewrite
        return delete_rewrite(spark, path, None if condition is None else _expr(condition))
    from spark_glue.append_dml import spark_truncate
    done, sid = spark_truncate(spark, table, None if condition is None else _expr(condition))
    if done:  # as Paimon's metadata-only DELETE: no delete records
        return sid
    _check_row_level(table, "delete_where")
    rows = read_table(spark, path, prune=True, **_pinned(table)).where(_expr(condition))
    return _write_changes(rows.withColumn(KIND, F.lit("-D")), path, "delete_where")


def update_where(spark, path: str, set: Mapping[str, object], condition=None) -> int | None:
    """``UPDATE t SET col = expr, ... [WHERE condition]`` in one commit. Expressions are SQL strings or Columns
    over the table's columns. Raises InvalidInput for unknown columns or primary-key columns in ``set``, for an
    nanosecond sequence.field, and merge-engine aggregation / first-row (as Paimon's Spark UPDATE).

    On an append table (spark_glue.append_dml): the files holding matching rows are rewritten with the new values
    (a row whose partition or bucket changes is appended to its new bucket), or with deletion vectors the old rows
    are marked deleted and the new ones appended. Returns the new snapshot id, None when nothing matched. Raises
    CommitConflict (table unchanged) when a concurrent commit removed a touched file or changed its vector."""
    from pyspark.sql import functions as F
    table = open_table(path)
    set = _by_table_names(table, set, case_sensitive(spark))
    _check_settable(table, set)
    if table.schema.is_append_only:
        from spark_glue.append_dml import update_append
        return update_append(spark, path, {c: _expr(e) for c, e in set.items()},
                             None if condition is None else _expr(condition))
    _check_row_level(table, "update_where")
    rows = read_table(spark, path, prune=True, **_pinned(table))
    if condition is not None:
        rows = rows.where(_expr(condition))
    types = {f.name: f.dataType for f in rows.schema.fields}
    rows = rows.select(*[(_expr(set[c]).cast(types[c]) if c in set else F.col(f"`{c}`")).alias(c)
                         for c in rows.columns])
    return _write_changes(rows.withColumn(KIND, F.lit("+U")), path, "update_where")


def merge_into(spark, target_path: str, source_df, on, when_matched="update", when_not_matched="insert", *,
               matched_condition=None, when_not_matched_by_source=None) -> int | None:
    """MERGE INTO the table at ``target_path`` USING ``source_df`` ON the ``on`` columns, in one commit.

    - ``when_matched``: "update" (source columns replace target columns of the same name), "delete", None, a dict
      ``{column: SQL expression or Column}`` (expressions may use ``t.<col>`` and ``s.<col>``), or a callable
      ``f(t, s) -> dict`` where ``t(name)`` / ``s(name)`` return the target / source Column.
      ``matched_condition`` (SQL over ``t.``/``s.``) restricts which matched rows are changed.
    - ``when_not_matched``: "insert" (the source row must have every table column) or None.
    - ``when_not_matched_by_source``: "delete" or None (target rows with no source row).
    With the session's ``spark.paimon.write.merge-schema`` (and ``.type-widening``), as Paimon's MERGE INTO
    schema evolution, the table first takes the source's new columns (``_evolve_for_merge``).
    As Paimon's MERGE INTO, each target row may match at most one source row when there is a ``when_matched``
    clause (whatever ``matched_condition`` says); source rows that match no target row are all inserted, duplicates
    included, and merge like the rows of any one write (on a deduplicate table one of them is kept, which one is not
    defined). Source rows whose ``on`` key has a null never match.

    Raises MergeCardinalityViolation (naming the target row) when several source rows match one target row and
    ``when_matched`` is set; InvalidInput when ``on`` names unknown columns, when "update" would set a primary-key
    column that is not in ``on`` (as Paimon's MERGE INTO), when a clause value is not one of the above, a
    nanosecond sequence.field or merge-engine aggregation / first-row (as Paimon);
    NullPrimaryKey (naming the column) when a source row to insert has a null key.

    On an append table (spark_glue.append_dml.merge_append, Paimon's performMergeForNonPkTable): a target row is
    one stored row (its file and position), so a row matched by several source rows is a cardinality violation;
    "update" sets every source column of the table's; matched rows are rewritten in place or marked in deletion
    vectors, inserted rows appended, all in one snapshot (None when nothing changed); CommitConflict (table
    unchanged) when a concurrent commit removed a touched file or changed its vector.
    """
    from pyspark.sql import functions as F
    table = open_table(target_path)
    _check_row_level(table, "merge_into")
    sensitive = case_sensitive(spark)  # source and 'on' names resolve to the table's as Spark resolves them

    def check(view, source_df=source_df, on=on):
        return _check_merge_args(view, source_df, on, when_matched, when_not_matched, when_not_matched_by_source,
                                 sensitive)
    table = _evolve_for_merge(spark, table, source_df, when_matched, when_not_matched, sensitive, check)
    names = list(table.arrow_schema.names)
    source_df, on = check(table)
    if table.schema.is_append_only:
        from spark_glue.append_dml import merge_append
        matched = when_matched
        if when_matched not in (None, "delete"):
            matched = _matched_values(table, when_matched, names, source_df)
        return merge_append(spark, target_path, source_df, on, matched,
                            matched_condition=None if matched_condition is None else _expr(matched_condition),
                            insert=when_not_matched == "insert", delete_by_source=when_not_matched_by_source == "delete")
    snap = _pinned(table)
    # One DataFrame per branch, all pinned to one snapshot: in Spark 4.3 scans of one Python-source relation
    # share its pushed-down read plan, so a branch's filters must never reach another branch's scan (each
    # DataFrame is scanned once, so it may prune).
    types = {f.name: f.dataType for f in read_table(spark, target_path, **snap).schema.fields}
    s = source_df.alias("s")

    def target():
        return read_table(spark, target_path, prune=True, **snap).alias("t")
    cond = reduce(lambda a, b: a & b, [F.col(f"t.`{c}`") == F.col(f"s.`{c}`") for c in on])
    # A source key with a null never matches (SQL equality): harmless, unless it is to be inserted.
    null_keys = [c for c in on if c in table.primary_keys] if when_not_matched == "insert" else []
    if null_keys:
        bad = source_df.where(reduce(lambda a, b: a | b, [F.col(f"`{c}`").isNull() for c in null_keys]))
        bad = bad.select(*[F.col(f"`{c}`") for c in on]).limit(1).collect()
        if bad:
            key = bad[0].asDict()
            column = next(c for c in null_keys if key[c] is None)
            raise NullPrimaryKey(f"merge_into: a source row has a null in primary-key column {column!r} "
                                 f"({key}): it matches no target row and cannot be inserted",
                                 table=table.name, column=column)
    if when_matched is not None:
        _check_cardinality(table, target().join(s, cond, "inner"), on)

    def tcol(c):
        return F.col(f"t.`{c}`")

    def scol(c):
        return F.col(f"s.`{c}`")

    parts = []
    if when_matched is not None:
        matched = target().join(s, cond, "inner")
        if matched_condition is not None:
            matched = matched.where(_expr(matched_condition))
        if when_matched == "delete":
            parts.append(matched.select(*[tcol(c).alias(c) for c in names], F.lit("-D").alias(KIND)))
        else:
            new = _matched_values(table, when_matched, names, source_df)
            parts.append(matched.select(*[(new[c] if c in new else tcol(c)).cast(types[c]).alias(c) for c in names],
                                        F.lit("+U").alias(KIND)))
    if when_not_matched == "insert":
        inserts = s.join(target(), cond, "left_anti")
        parts.append(inserts.select(*[scol(c).cast(types[c]).alias(c) for c in names], F.lit("+I").alias(KIND)))
    if when_not_matched_by_source == "delete":
        gone = target().join(s, cond, "left_anti")
        parts.append(gone.select(*[tcol(c).alias(c) for c in names], F.lit("-D").alias(KIND)))
    if not parts:
        return table.latest_snapshot_id()
    return _write_changes(reduce(lambda a, b: a.unionByName(b), parts), target_path, "merge_into")


def _check_merge_args(table, source_df, on, when_matched, when_not_matched, when_not_matched_by_source,
                      sensitive: bool):
    """(source_df under the table's names, the 'on' columns as the table's) for merge_into on ``table``; raises
    merge_into's InvalidInput for its arguments (see merge_into). Runs no Spark job."""
    names = list(table.arrow_schema.names)
    source_df = with_table_names(source_df, table, sensitive)
    on = [on] if isinstance(on, str) else list(on)
    on = [resolve(c, names, sensitive, table=table.name, what="'on' column") or c for c in on]
    missing = [c for c in on if c not in names or c not in source_df.columns]
    if not on or missing:
        raise InvalidInput(f"merge_into: 'on' columns {missing or on} must be columns of both the table and the "
                           f"source", table=table.name)
    if when_not_matched not in ("insert", None):
        raise InvalidInput(f"merge_into: when_not_matched must be 'insert' or None, got {when_not_matched!r}",
                           table=table.name)
    if when_not_matched_by_source not in ("delete", None):
        raise InvalidInput("merge_into: when_not_matched_by_source must be 'delete' or None", table=table.name)
    absent = [c for c in names if c not in source_df.columns]
    if when_not_matched == "insert" and absent:
        raise InvalidInput(f"merge_into: inserting needs every table column in the source; missing {absent}",
                           table=table.name)
    moved = [c for c in table.primary_keys if c in source_df.columns and c not in on]
    if not table.schema.is_append_only and when_matched == "update" and moved:
        # as Paimon's MERGE INTO: "Can't update the primary key column"
        raise InvalidInput(f"merge_into: when_matched='update' would set primary-key column(s) {moved} from the "
                           "source, and a primary key cannot be updated; add them to 'on', or pass a dict of the "
                           "columns to update", table=table.name, column=moved[0])
    return source_df, on


def _evolve_for_merge(spark, table, source_df, when_matched, when_not_matched, sensitive: bool, check):
    """``table``, first evolved for a MERGE INTO as Paimon's (MergeSchemaEvolutionHelper) when the session sets
    ``spark.paimon.write.merge-schema`` (merge_into takes no write options, as SQL's MERGE INTO): with an
    ``UPDATE *`` / ``INSERT *`` clause ("update" / "insert") every source column is merged in (new columns added,
    types widened with ``.type-widening``: engine.merge_schema), with a dict of assignments the source columns
    its keys name that the table lacks; otherwise nothing. The schema change is committed before the merge runs
    (a merge that then fails leaves it, as a merge-schema write does), once ``check(table with the merged
    schema)`` accepted merge_into's arguments (else nothing is published). Raises as
    engine.merge_schema.merge_input_schema and ``check``."""
    import copy
    from engine.merge_schema import merge_input_schema
    from spark_glue.tables import arrow_of_spark
    from spark_glue.writing import EXPLICIT_CAST, MERGE_SCHEMA, TYPE_WIDENING, with_session_merge_options
    opts = with_session_merge_options({}, spark)
    if not parse_bool(opts.get(MERGE_SCHEMA, "false")):
        return table
    if when_matched == "update" or when_not_matched == "insert":
        columns = list(source_df.columns)
    elif isinstance(when_matched, Mapping):
        columns = [c for c in source_df.columns
                   if resolve(c, table.arrow_schema.names, sensitive, table=table.name) is None
                   and any(resolve(k, [c], sensitive, table=table.name) for k in when_matched)]
    else:
        return table
    if not columns:
        return table
    schema = arrow_of_spark(source_df.select(*[f"`{c}`" for c in columns]).schema)

    def check_merged(merged) -> None:
        view = copy.copy(table)
        view.schema = merged
        check(view)
    merge_input_schema(table, schema, type_widening=parse_bool(opts.get(TYPE_WIDENING, "false")),
                       explicit_cast=parse_bool(opts.get(EXPLICIT_CAST, "false")), case_sensitive=sensitive,
                       check=check_merged)
    return table


def _matched_values(table, when_matched, names: list[str], source_df) -> dict:
    """The new values (column -> Column over ``t.``/``s.``) of a MERGE's when_matched clause other than "delete";
    "update" takes every source column of the table's but the primary key. Raises InvalidInput for an unknown
    clause or column, or a primary-key column."""
    from pyspark.sql import functions as F

    def tcol(c):
        return F.col(f"t.`{c}`")

    def scol(c):
        return F.col(f"s.`{c}`")
    if when_matched == "update":
        new = {c: scol(c) for c in names if c in source_df.columns and c not in table.primary_keys}
    elif isinstance(when_matched, Mapping):
        new = {c: _expr(e) for c, e in when_matched.items()}
    elif callable(when_matched) and not isinstance(when_matched, str):
        new = dict(when_matched(tcol, scol))
    else:
        raise InvalidInput(f"merge_into: when_matched must be 'update', 'delete', None, a dict or a "
                           f"callable, got {when_matched!r}", table=table.name)
    new = _by_table_names(table, new, case_sensitive(source_df.sparkSession))
    _check_settable(table, new)
    return new


def _by_table_names(table, assignments: Mapping[str, object], sensitive: bool) -> dict:
    """``assignments`` keyed by the table's spelling of each column (spark_glue.columns.resolve); keys naming no
    column are kept for _check_settable to refuse. Raises SchemaMismatch for an ambiguous or repeated column."""
    out = {}
    for c, e in assignments.items():
        t = resolve(c, table.arrow_schema.names, sensitive, table=table.name, what="assigned column") or c
        if t in out:
            raise InvalidInput(f"column {t!r} is assigned twice ({c!r})", table=table.name, column=t)
        out[t] = e
    return out


def _check_cardinality(table, matched, on: list[str]) -> None:
    """Refuse a MERGE whose ``matched`` pairs (target ``t`` joined with source ``s``) match one target row with
    several source rows, as Paimon's MergeIntoPaimonTable does before writing. A target row is known by its primary
    key (a merged read has one row per key)."""
    from pyspark.sql import functions as F
    key = list(table.primary_keys) + [c for c in on if c not in table.primary_keys]
    n = "__lakemerge_matches"
    hit = (matched.groupBy(*[F.col(f"t.`{c}`").alias(c) for c in key]).agg(F.count(F.lit(1)).alias(n))
           .where(F.col(n) > 1).limit(1).collect())
    if hit:
        row = hit[0].asDict()
        values = {c: row[c] for c in key}
        raise MergeCardinalityViolation(f"merge_into: {row[n]} source rows match the target row {values}; a "
                                        "MERGE with when_matched may match each target row at most once (make the "
                                        "source unique on 'on' for the keys that exist in the table)",
                                        table=table.name, key=values)


def _check_row_level(table, op: str) -> None:
    """Refuse what these helpers cannot do on a primary-key table, before any Spark job runs: tables ordered by a
    nanosecond sequence.field, and what engine.write.row_level.check_row_level refuses as Paimon does: updates of
    aggregation and first-row tables (their merge engine would fold the new value into the old one, or ignore it).
    Append tables pass."""
    if table.schema.is_append_only:
        return
    arrow = table.arrow_schema
    fine = [f for f in table.schema.table_options.sequence_fields
            if pa.types.is_timestamp(arrow.field(f).type) and arrow.field(f).type.unit == "ns"]
    if fine:  # Spark floors nanoseconds: the written rows would order before the stored ones and be dropped
        raise InvalidInput(f"{op} cannot rewrite rows of a table whose sequence.field {fine[0]!r} holds nanoseconds: "
                           "Spark reads them as microseconds, so the rewritten rows would be older than the stored "
                           "ones and lose; use the engine (Table.write / delete)", table=table.name, column=fine[0])
    from engine.write.row_level import check_row_level
    check_row_level(table, op, update=op != "delete_where")


def _pinned(table) -> dict:
    """Read options pinning the table's current snapshot, read through its latest schema (tables.pin_snapshot;
    none for a table without commits), of every bucket and file (reading.EVERY_FILE)."""
    from spark_glue.reading import EVERY_FILE
    from spark_glue.tables import pin_snapshot
    sid = table.latest_snapshot_id()
    return {} if sid is None else {**pin_snapshot(sid), EVERY_FILE: "true"}


def _check_settable(table, assignments: Mapping[str, object]) -> None:
    names = table.arrow_schema.names
    unknown = [c for c in assignments if c not in names]
    if unknown:
        raise InvalidInput(f"unknown column(s) {unknown} in the assignments", table=table.name, column=unknown[0])
    keys = [c for c in assignments if c in table.primary_keys]
    if keys:
        raise InvalidInput(f"primary-key column(s) {keys} cannot be updated (delete and insert instead)",
                           table=table.name, column=keys[0])


__all__ = ["merge_into", "delete_where", "update_where"]
