"""``lakemerge fsck``: check one table or every table of a warehouse (engine.check) and report what is wrong.

Follows the conventions of engine/cli/__init__.py. Exit code 0 when no problem was found (warnings and
unreferenced files never fail the check), 1 when any table has a problem or cannot be opened, 2 for usage errors.
The check only reads; it never repairs anything.
"""
from __future__ import annotations

import click

from engine.cli.app import cli, debug_option, json_option, open_table, warehouse_option
from engine.cli.render import to_json

# A table whose schema cannot be read is reported with this problem kind (engine.check cannot open it).
TABLE_UNREADABLE = "table-unreadable"


def _check_one(warehouse: str, name: str, verify_data: bool, listed: bool):
    """The CheckReport of table ``name`` (a branch ``db.t$branch_b``: that branch's snapshots, hints, tags and
    schemas, with main and the other branches checked as far as the files they reference; its unreferenced files
    are the whole table's). A table whose schema cannot be read gives a report with one
    ``table-unreadable`` problem; so does, for a table found by listing the warehouse (``listed``), one whose
    schema files are gone -- ``--all`` goes on with the other tables. A name given by the user that does not
    exist raises TableNotFound."""
    from engine.check import CheckReport, Problem
    from engine.errors import CatalogError, InvalidInput, LakemergeError
    from engine.table import Table

    try:
        table = open_table(warehouse, name)
    except CatalogError as e:
        if not listed:
            raise  # no such warehouse or table: the user's mistake, not a finding
        return CheckReport(name, problems=[Problem(TABLE_UNREADABLE, None, str(e))])
    except LakemergeError as e:
        return CheckReport(name, problems=[Problem(TABLE_UNREADABLE, None, str(e))])
    if not isinstance(table, Table):
        raise InvalidInput(f"{name!r}: give the data table's name, not a system table")
    return table.check(verify_data=verify_data)


def _table_names(warehouse: str) -> list[str]:
    import os

    from engine.catalog import Catalog
    from engine.errors import CatalogError

    if not os.path.isdir(warehouse):
        raise CatalogError(f"warehouse {warehouse!r} does not exist")
    cat = Catalog(warehouse)
    return [f"{db}.{t}" for db in cat.list_databases() for t in cat.list_tables(db)]


@cli.command()
@click.argument("table", metavar="[DB.TABLE]", required=False)
@click.option("--all", "all_tables", is_flag=True, help="Check every table of every database of the warehouse.")
@click.option("--no-data", is_flag=True,
              help="Skip decoding data files (sizes and metadata are still checked): much faster.")
@click.option("--orphans/--no-orphans", default=True, show_default=True,
              help="List files under the table that no snapshot references.")
@warehouse_option()
@json_option
@debug_option
def fsck(table, all_tables, no_data, orphans, warehouse, as_json):
    """Check a table's snapshots, manifests and data files against each other.

    Reports problems (missing, truncated or corrupt files, gaps in snapshot ids, wrong record counts, unsorted
    files, overlapping levels), warnings (stale LATEST/EARLIEST hints) and files no snapshot references (left
    by failed or in-flight commits; `remove-orphans` deletes old ones). A branch (DB.TABLE$branch_NAME) is
    checked as its own table, its unreferenced files are those of the whole table (all branches share its
    directories). Read-only. Exit code 1 if any problem is found.
    """
    if all_tables == (table is not None):
        raise click.UsageError("give a table name or --all (not both)")
    names = _table_names(warehouse) if all_tables else [table]
    reports = []
    for name in names:
        report = _check_one(warehouse, name, verify_data=not no_data, listed=all_tables)
        if not orphans:
            report.orphan_files, report.orphan_bytes = [], 0
        reports.append(report)
    ok = all(r.ok for r in reports)
    if as_json:
        docs = [r.to_dict() for r in reports]
        click.echo(to_json({"ok": ok, "tables": docs} if all_tables else docs[0]))
    else:
        _print_reports(reports, orphans)
    if not ok:
        bad = [r.table for r in reports if not r.ok]
        count = sum(len(r.problems) for r in reports)
        click.echo(f"error: {count} problem(s) found in {', '.join(bad)}", err=True)
        click.get_current_context().exit(1)


def _print_reports(reports, orphans: bool) -> None:
    if not reports:
        click.echo("no tables in the warehouse")
        return
    for r in reports:
        status = "ok" if r.ok else "PROBLEMS"
        click.echo(f"{r.table}: {status}: {len(r.snapshot_ids)} snapshot(s), {r.data_files_checked} data file(s) "
                   f"checked, {len(r.problems)} problem(s), {len(r.warnings)} warning(s)"
                   + (f", {len(r.orphan_files)} unreferenced file(s) ({r.orphan_bytes:,} bytes)" if orphans else "")
                   + (f" of table {r.table.split('$')[0]} (all branches)" if orphans and "$" in r.table else ""))
        for p in r.problems:
            click.echo(f"  problem {p}")
        for w in r.warnings:
            click.echo(f"  warning {w}")
        for path in r.orphan_files:
            click.echo(f"  unreferenced {path}")
