"""Resolving the column names of a Spark write or row-level operation against a table's, as Spark's resolver does:
case-insensitively unless the session sets ``spark.sql.caseSensitive`` (Paimon's Spark writer resolves by name
with that resolver, PaimonOutputResolver / PaimonAnalysis).

The session's setting is known on the driver (``case_sensitive(spark)``) and in Spark tasks, which get the
explicitly set SQL confs as local properties (``task_case_sensitive``). The planner of a Python data source sees
neither, so the data source checks leniently there and again, with the setting, in its write tasks.
"""
from __future__ import annotations

from engine.errors import SchemaMismatch

CASE_SENSITIVE = "spark.sql.caseSensitive"
HINT = f"{CASE_SENSITIVE} is true: names must match exactly"


def case_sensitive(spark) -> bool:
    """The session's ``spark.sql.caseSensitive`` (default false)."""
    return str(spark.conf.get(CASE_SENSITIVE, "false")).strip().lower() == "true"


def task_case_sensitive() -> bool | None:
    """``spark.sql.caseSensitive`` of the query the current Spark task runs for (false unless set); None outside a
    Spark task (a data source planner, plain Python)."""
    from pyspark import TaskContext
    task = TaskContext.get()
    if task is None:
        return None
    return str(task.getLocalProperty(CASE_SENSITIVE) or "false").strip().lower() == "true"


def resolve(name: str, columns, case_sensitive_: bool, *, table: str, what: str = "input column") -> str | None:
    """The column of ``columns`` that ``name`` names: the same name when case-sensitive, else the one column equal
    to it ignoring case; None if there is none. Raises SchemaMismatch (naming ``table`` and the column) when, ignoring
    case, ``name`` names several columns: Spark's resolver calls that ambiguous, even with one exact match."""
    if case_sensitive_:
        return name if name in columns else None
    same = [c for c in columns if c.lower() == name.lower()]
    if len(same) > 1:
        raise SchemaMismatch(f"{what} {name!r} is ambiguous: it names columns {same} ignoring case ({CASE_SENSITIVE} "
                             "is false); rename it, or set it to true to match names exactly", table=table,
                             column=name)
    return same[0] if same else None


def check_unique(names, case_sensitive_: bool, *, table: str, what: str = "input") -> None:
    """Raise SchemaMismatch when two of ``names`` are one name to the resolver (ignoring case unless
    ``case_sensitive_``): a reference to either would be ambiguous."""
    seen: dict[str, str] = {}
    for n in names:
        key = n if case_sensitive_ else n.lower()
        if key in seen:
            raise SchemaMismatch(f"{what} columns {seen[key]!r} and {n!r} are ambiguous"
                                 + ("" if case_sensitive_ else f" ignoring case ({CASE_SENSITIVE} is false)"),
                                 table=table, column=n)
        seen[key] = n


def with_table_names(df, table, case_sensitive_: bool, *, what: str = "source column"):
    """``df`` with each column that names a table column (see ``resolve``) renamed to the table's spelling; other
    columns are kept as they are. Raises SchemaMismatch for ambiguous names."""
    from pyspark.sql import functions as F
    names = table.arrow_schema.names
    check_unique(df.columns, case_sensitive_, table=table.name, what=what.split()[0])
    renames = {}
    for c in df.columns:
        t = resolve(c, names, case_sensitive_, table=table.name, what=what)
        if t is not None and t != c:
            renames[c] = t
    if not renames:
        return df
    return df.select(*[F.col(f"`{c}`").alias(renames.get(c, c)) for c in df.columns])


def table_column(name: str, table, case_sensitive_: bool, *, what: str = "column") -> str:
    """The table column ``name`` names; raises SchemaMismatch naming the table and the column when there is none
    (or it is ambiguous)."""
    t = resolve(name, table.arrow_schema.names, case_sensitive_, table=table.name, what=what)
    if t is None:
        hint = f" ({HINT})" if case_sensitive_ and any(c.lower() == name.lower() for c in table.arrow_schema.names) \
            else ""
        raise SchemaMismatch(f"unknown {what} {name!r}: the table's columns are {table.arrow_schema.names}{hint}",
                             table=table.name, column=name)
    return t
