"""The ``lakemerge`` commands (click). See engine/cli/__init__.py for the conventions every command follows."""
from __future__ import annotations

import os
import subprocess
import sys
import traceback

import click

from engine.cli.render import make_console, print_arrow, print_pairs, to_json

_DEBUG = "lakemerge.debug"


# --- shared behaviour ------------------------------------------------------------------------------------
class LakemergeGroup(click.Group):
    """Runs a command; any error that is not a usage error prints one ``error: ...`` line and exits 1
    (with ``--debug``, the traceback is printed as well)."""

    def invoke(self, ctx: click.Context):
        """Run the command; click errors pass through, any other exception prints one 'error:' line and exits with
        code 1
        (with --debug the traceback is printed too)."""
        try:
            return super().invoke(ctx)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except Exception as e:  # noqa: BLE001 - every failure becomes one line and exit code 1
            from engine.errors import LakemergeError

            if ctx.meta.get(_DEBUG):
                traceback.print_exc()
            if isinstance(e, LakemergeError):
                message = str(e)
            elif isinstance(e, OSError):
                message = f"{e.filename or ''}{': ' if e.filename else ''}{e.strerror or e}"
            else:
                message = f"unexpected {type(e).__name__}: {e} (rerun with --debug for the traceback)"
            click.echo(f"error: {message}", err=True)
            ctx.exit(1)


def _set_debug(ctx: click.Context, _param, value: bool) -> None:
    if value:
        ctx.meta[_DEBUG] = True


def debug_option(f):
    """``--debug`` (or LAKEMERGE_DEBUG): print the traceback of an error as well as its one-line message."""
    return click.option("--debug", is_flag=True, expose_value=False, is_eager=True, callback=_set_debug,
                        envvar="LAKEMERGE_DEBUG", help="Print tracebacks of errors.")(f)


def warehouse_option(required: bool = True):
    """``--warehouse``/``-w`` PATH, defaulting to LAKEMERGE_WAREHOUSE; a usage error (exit 2) if required and
    missing."""
    def wrap(f):
        return click.option("--warehouse", "-w", envvar="LAKEMERGE_WAREHOUSE", required=required,
                            metavar="PATH", help="Warehouse directory (or set LAKEMERGE_WAREHOUSE).")(f)
    return wrap


def json_option(f):
    """``--json``: print one JSON document on stdout instead of a rich table."""
    return click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts instead of a table.")(f)


def table_argument(f):
    """The ``DB.TABLE`` argument."""
    return click.argument("table", metavar="DB.TABLE")(f)


def open_table(warehouse: str, name: str):
    """The table (or ``db.t$kind`` system table) ``name`` in ``warehouse``. Raises CatalogError if the warehouse
    does not exist, TableNotFound if the table does not."""
    from engine.catalog import Catalog

    if not os.path.isdir(warehouse):
        from engine.errors import CatalogError
        raise CatalogError(f"warehouse {warehouse!r} does not exist")
    return Catalog(warehouse).get_table(name)


def data_table(warehouse: str, name: str):
    """The data table ``name``: a table or one of its branches (``db.t$branch_b``). Raises InvalidInput for a
    system table name (the command needs a data table), CatalogError / TableNotFound as ``open_table``."""
    from engine.errors import InvalidInput
    from engine.table import Table

    table = open_table(warehouse, name)
    if not isinstance(table, Table):
        raise InvalidInput(f"{name!r}: give the data table's name, not a system table")
    return table


def _system(warehouse: str, name: str, kind: str):
    """System table ``kind`` of the data table (or branch) ``name``; InvalidInput if ``name`` is itself a system
    table."""
    from engine.system_tables import system_table

    return system_table(data_table(warehouse, name), kind)


def _emit(table, as_json: bool, *, title: str | None = None, columns: list[str] | None = None,
          total_rows: int | None = None, truncated: bool = False) -> None:
    """Print rows: a JSON array of objects (all columns) with ``as_json``, else a rich table of ``columns``."""
    console = make_console()
    if as_json:
        click.echo(to_json(table.to_pylist()))
    else:
        print_arrow(console, table.select(columns) if columns else table, title=title, total_rows=total_rows,
                    truncated=truncated)


@click.group(cls=LakemergeGroup, context_settings={"help_option_names": ["-h", "--help"],
                                                    "max_content_width": 110})
@debug_option
@click.version_option(package_name="lakemerge", prog_name="lakemerge")
def cli():
    """lakemerge: Apache Paimon primary-key tables from the command line.

    Tables are named DB.TABLE inside a warehouse directory (--warehouse or LAKEMERGE_WAREHOUSE). Add
    $snapshots, $schemas, $options, $files, $manifests, $partitions, $buckets, $tags or $consumers to a table
    name to read its metadata (quote the $ in a shell). Exit codes: 0 ok, 1 failure, 2 usage error.
    """


# --- create ----------------------------------------------------------------------------------------------
@cli.command()
@table_argument
@click.option("--schema", "schema_text", metavar="'COL TYPE, ...'",
              help="Columns as Paimon SQL types, e.g. \"id BIGINT, name STRING, amount DECIMAL(10, 2)\".")
@click.option("--like", "like_file", type=click.Path(exists=True, dir_okay=False),
              help="Take the columns from a Parquet, CSV or JSON-lines file instead of --schema.")
@click.option("--primary-key", "-k", "primary_key", multiple=True, metavar="COL[,COL]",
              help="Primary-key column(s); must include every partition column. Without one the table is an "
                   "append table (rows are kept as written; set bucket=-1 or bucket-key).")
@click.option("--partition", "-p", "partition", multiple=True, metavar="COL[,COL]", help="Partition column(s).")
@click.option("--bucket", type=int, help="Fixed bucket count (Paimon option 'bucket').")
@click.option("--option", "-o", "options", multiple=True, metavar="KEY=VALUE", help="Table option (repeatable).")
@click.option("--comment", help="Table comment.")
@click.option("--if-not-exists", is_flag=True, help="Succeed without change if the table exists.")
@warehouse_option()
@json_option
@debug_option
def create(table, schema_text, like_file, primary_key, partition, bucket, options, comment, if_not_exists,
           warehouse, as_json):
    """Create a primary-key table, or without --primary-key an append table (and its database if needed)."""
    from engine.catalog import Catalog, split_identifier
    from engine.cli.schema_text import arrow_schema_of_file, parse_schema

    if (schema_text is None) == (like_file is None):
        raise click.UsageError("give exactly one of --schema or --like")
    opts = {}
    for item in options:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.UsageError(f"--option {item!r} is not KEY=VALUE")
        opts[key.strip()] = value.strip()
    if bucket is not None:
        opts["bucket"] = str(bucket)
    schema = parse_schema(schema_text) if schema_text is not None else arrow_schema_of_file(like_file)
    split_cols = [c.strip() for group in primary_key for c in group.split(",") if c.strip()]
    part_cols = [c.strip() for group in partition for c in group.split(",") if c.strip()]
    db, _ = split_identifier(table)
    catalog = Catalog(warehouse)
    catalog.create_database(db, ignore_if_exists=True)
    existed = catalog.table_exists(table)
    t = catalog.create_table(table, schema, primary_key=split_cols, partition_keys=part_cols, options=opts,
                             comment=comment, ignore_if_exists=if_not_exists)
    info = {"table": t.name, "path": t.root, "created": not existed, "schema_id": t.schema.id,
            "columns": [f"{f.name} {f.type.sql()}" for f in t.schema.fields],
            "primary_keys": list(t.primary_keys), "partition_keys": list(t.partition_keys), "options": t.options}
    if as_json:
        click.echo(to_json(info))
    else:
        verb = "created" if not existed else "exists:"
        click.echo(f"{verb} table {t.name} at {t.root}")
        print_pairs(make_console(), [("columns", ", ".join(info["columns"])),
                                     ("primary key", ", ".join(t.primary_keys) or "- (append table)"),
                                     ("partitioned by", ", ".join(t.partition_keys) or "-"),
                                     ("options", ", ".join(f"{k}={v}" for k, v in sorted(t.options.items())) or "-")])


# --- ingest ----------------------------------------------------------------------------------------------
@cli.command()
@table_argument
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--format", "fmt", type=click.Choice(["parquet", "csv", "json"]),
              help="File format (default: from each file's extension; json = JSON lines).")
@click.option("--row-kind-column", metavar="COL",
              help="Column holding +I/-U/+U/-D per row (dropped before writing unless it is a table column).")
@click.option("--delete", "delete", is_flag=True, help="Every row deletes its primary key.")
@click.option("--progress/--no-progress", default=None,
              help="Show a progress bar (default: only on a terminal).")
@warehouse_option()
@json_option
@debug_option
def ingest(table, files, fmt, row_kind_column, delete, progress, warehouse, as_json):
    """Upsert Parquet, CSV or JSON-lines FILES (or directories of them) into a table, all in one commit.

    Rows are upserts unless --row-kind-column names a column of +I/-U/+U/-D (or the table has the
    rowkind.field option), or --delete makes each row a delete. Nothing is committed if any row is rejected.
    """
    from engine.cli.ingest import ingest as run_ingest
    from engine.cli.progress import ingest_progress

    if delete and row_kind_column:
        raise click.UsageError("--delete and --row-kind-column cannot be combined")
    from engine.cli.ingest import expand_paths

    t = open_table(warehouse, table)
    files = expand_paths(list(files), fmt)
    total_bytes = sum(os.path.getsize(p) for p in files)
    console = make_console(stderr=True)
    show = console.is_terminal if progress is None else progress
    with ingest_progress(console, total_bytes, enabled=show and not as_json) as report:
        result = run_ingest(t, list(files), fmt=fmt, row_kind_column=row_kind_column, delete=delete,
                            progress=report)
    if as_json:
        click.echo(to_json(result.as_dict()))
    else:
        rate = result.rows / max(result.seconds, 1e-9)
        target = f"snapshot {result.snapshot_id}" if result.snapshot_id is not None else "nothing to commit"
        click.echo(f"ingested {result.rows:,} rows from {result.files} file(s) ({result.bytes:,} bytes) into "
                   f"{result.table}: {target} in {result.seconds:.2f} s ({rate:,.0f} rows/s)")


# --- show ------------------------------------------------------------------------------------------------
@cli.command()
@table_argument
@click.option("--snapshot", "-s", type=int, help="Read this snapshot (time travel); default: latest.")
@click.option("--tag", "-t", "tag_name", metavar="NAME", help="Read the snapshot tagged NAME (time travel).")
@click.option("--where", "wheres", multiple=True, metavar="EXPR",
              help="Filter, e.g. \"dt = '2024-01-02' AND id IN (1, 2)\" (repeatable; ANDed).")
@click.option("--columns", "-c", metavar="COL[,COL]", help="Columns to show.")
@click.option("--limit", "-n", type=click.IntRange(min=0), default=20, show_default=True,
              help="Rows to print (0: all).")
@warehouse_option()
@json_option
@debug_option
def show(table, snapshot, tag_name, wheres, columns, limit, warehouse, as_json):
    """Print rows of a table or system table (DB.TABLE$snapshots, ...)."""
    from engine.cli.where import combine

    if snapshot is not None and tag_name is not None:
        raise click.UsageError("give at most one of --snapshot or --tag")
    t = open_table(warehouse, table)
    if tag_name is not None:
        snapshot, expired = _tagged_snapshot_id(t, tag_name)
        if expired:  # the tag outlived its snapshot file: only Table.read(tag=...) can read it
            rows = t.read(columns=[c.strip() for c in columns.split(",") if c.strip()] if columns else None,
                          filter=combine(list(wheres)) if wheres else None, tag=tag_name)
            _emit(rows.slice(0, limit) if limit else rows, as_json, total_rows=rows.num_rows)
            return
    cols = [c.strip() for c in columns.split(",") if c.strip()] if columns else None
    dnf = combine(list(wheres)) if wheres else None
    if hasattr(t, "schema_manager") and limit:  # a data table: stream, stop once the rows are there
        rows, total = _head(t.to_reader(snapshot_id=snapshot, columns=cols, filter=dnf), limit)
    else:
        rows = t.read(snapshot_id=snapshot, columns=cols, filter=dnf)
        total = rows.num_rows
        if limit:
            rows = rows.slice(0, limit)
    _emit(rows, as_json, total_rows=total, truncated=total is None)


def _tagged_snapshot_id(t, tag_name: str) -> tuple[int, bool]:
    """(snapshot id of tag ``tag_name`` of the table behind ``t``, whether that snapshot has expired). Raises
    TagNotFound; InvalidInput when the tag's snapshot has expired and ``t`` is a system table."""
    from engine.errors import InvalidInput

    data = getattr(t, "table", t)  # a SystemTable reads the metadata of .table
    snap = data.tag_snapshot(tag_name)
    expired = not data.file_io.exists(data.paths.snapshot(snap.id))
    if expired and data is not t:
        raise InvalidInput(f"{t.name}: the snapshot {snap.id} of tag {tag_name!r} has expired; system tables "
                           "can only read existing snapshots")
    return snap.id, expired


def _head(reader, limit: int):
    """First ``limit`` rows of a RecordBatchReader; stops reading as soon as it has them and knows whether more
    rows exist. Returns (rows, total) with total None when more rows exist than were read."""
    import pyarrow as pa

    kept, n = [], 0
    for batch in reader:
        if n >= limit:
            if batch.num_rows:
                return pa.Table.from_batches(kept, schema=reader.schema), None
            continue
        kept.append(batch.slice(0, limit - n))
        n += min(batch.num_rows, limit - n)
        if batch.num_rows > kept[-1].num_rows:
            return pa.Table.from_batches(kept, schema=reader.schema), None
    return pa.Table.from_batches(kept, schema=reader.schema), n


# --- metadata commands -----------------------------------------------------------------------------------
@cli.command()
@table_argument
@warehouse_option()
@json_option
@debug_option
def snapshots(table, warehouse, as_json):
    """List a table's snapshots (the $snapshots system table)."""
    rows = _system(warehouse, table, "snapshots").read()
    _emit(rows, as_json, columns=["snapshot_id", "schema_id", "commit_kind", "commit_time", "total_record_count",
                                  "delta_record_count", "changelog_record_count", "commit_user"])


@cli.command()
@table_argument
@click.option("--snapshot", "-s", type=int, help="Files of this snapshot; default: latest.")
@click.option("--level", "-l", type=click.IntRange(min=0), metavar="N", help="Only files of LSM level N.")
@warehouse_option()
@json_option
@debug_option
def files(table, snapshot, level, warehouse, as_json):
    """List the live data files of a snapshot (the $files system table)."""
    rows = _system(warehouse, table, "files").read(snapshot_id=snapshot,
                                                   filter=[("level", "=", level)] if level is not None else None)
    _emit(rows, as_json, columns=["partition", "bucket", "level", "file_path", "record_count",
                                  "file_size_in_bytes", "min_key", "max_key", "min_sequence_number",
                                  "max_sequence_number"])


@cli.command()
@table_argument
@warehouse_option()
@json_option
@debug_option
def schema(table, warehouse, as_json):
    """Show a table's latest schema: columns, keys, options."""
    t = open_table(warehouse, table)
    if not hasattr(t, "schema_manager"):
        from engine.errors import InvalidInput
        raise InvalidInput(f"{table!r}: give the data table's name, not a system table")
    s = t.schema
    roles = {}
    for k in s.partition_keys:
        roles.setdefault(k, []).append("partition")
    for k in s.primary_keys:
        roles.setdefault(k, []).append("primary key")
    fields = [{"id": f.id, "name": f.name, "type": f.type.sql(), "nullable": f.type.nullable,
               "role": ", ".join(roles.get(f.name, [])) or None, "description": f.description}
              for f in s.fields]
    if as_json:
        click.echo(to_json({"table": t.name, "schema_id": s.id, "fields": fields,
                            "primary_keys": list(s.primary_keys), "partition_keys": list(s.partition_keys),
                            "options": dict(s.options), "comment": s.comment}))
        return
    import pyarrow as pa

    console = make_console()
    print_arrow(console, pa.Table.from_pylist(
        [{k: f[k] for k in ("id", "name", "type", "role")} for f in fields]), title=f"{t.name} (schema {s.id})")
    print_pairs(console, [("primary key", ", ".join(s.primary_keys)),
                          ("partitioned by", ", ".join(s.partition_keys) or "-"),
                          ("options", ", ".join(f"{k}={v}" for k, v in sorted(s.options.items())) or "-"),
                          ("comment", s.comment)])


@cli.command(name="options")
@table_argument
@warehouse_option()
@json_option
@debug_option
def options_cmd(table, warehouse, as_json):
    """Show a table's options (the $options system table)."""
    rows = _system(warehouse, table, "options").read()
    if as_json:
        click.echo(to_json({r["key"]: r["value"] for r in rows.to_pylist()}))
    else:
        _emit(rows, False)


# --- bench, demo -----------------------------------------------------------------------------------------
@cli.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True,
                               "help_option_names": []})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def bench(ctx, args):
    """Run the benchmarks: ARGS go to `python -m benchmarks` (try `lakemerge bench --help`)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ)
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    ctx.exit(subprocess.call([sys.executable, "-m", "benchmarks", *args], env=env))


@cli.command()
@click.option("--rows", type=click.IntRange(min=1), default=200_000, show_default=True,
              help="Change rows in total.")
@click.option("--commits", type=click.IntRange(min=1), default=4, show_default=True, help="Number of commits.")
@click.option("--spark/--no-spark", default=True, show_default=True,
              help="Run the Spark job when it is available; --no-spark runs the engine-only demo.")
@warehouse_option(required=False)
@json_option
@debug_option
def demo(rows, commits, spark, warehouse, as_json):
    """Create a table, upsert a change stream in several commits, read it back (default warehouse: a new
    temporary directory)."""
    from engine.cli.demo import run

    echo = (lambda text: click.echo(text, err=True)) if as_json else click.echo
    result = run(warehouse, rows, commits, echo=echo, spark=spark)
    if as_json:
        click.echo(to_json(result))


def main(argv=None) -> int:
    """Console entry point (``lakemerge``). Returns/exits with 0 ok, 1 failure, 2 usage error."""
    try:
        cli.main(args=argv, prog_name="lakemerge", standalone_mode=True)
    except SystemExit as e:
        code = e.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    return 0


# --- maintenance commands (issue 8): compact, expire, remove-orphans, tag, rollback -----------------------
from engine.cli import maintenance as _maintenance  # noqa: E402,F401  (registers the commands on ``cli``)

# --- fsck, changes, stream, alter (issue 8) ------------------------------------------------------------------
from engine.cli import alter as _alter, changes as _changes, fsck as _fsck  # noqa: E402,F401  (register)
