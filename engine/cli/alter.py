"""``lakemerge alter``: schema evolution from the command line (engine.schema_change, Paimon's rules).

Every change given in one invocation goes into one new schema (``schema-<N+1>``), applied in this order: drops,
renames, added columns, type changes, nullability changes, option changes, comment. Nothing is written when any
change is refused. Conventions: engine/cli/__init__.py.
"""
from __future__ import annotations

import re

import click

from engine.cli.app import cli, data_table, debug_option, json_option, table_argument, warehouse_option
from engine.cli.render import make_console, print_arrow, to_json

_POSITION = re.compile(r"\s+(FIRST|(AFTER|BEFORE)\s+(`[^`]+`|[A-Za-z_][A-Za-z0-9_]*))\s*$", re.IGNORECASE)
_NAME_TYPE = re.compile(r"^\s*(`[^`]+`|[A-Za-z_][A-Za-z0-9_]*)\s+(.+?)\s*$", re.DOTALL)


def parse_add_column(text: str):
    """``"name TYPE [FIRST | AFTER col | BEFORE col]"`` -> an AddColumn change (type in Paimon SQL, e.g.
    ``DECIMAL(12, 2)``). Raises click.BadParameter (a usage error) for text that is not of that form, and
    InvalidSchema for an unknown type."""
    from engine.schema_change import Move, SchemaChange
    from engine.types import parse_atomic

    move_kind = reference = None
    m = _POSITION.search(text)
    if m:
        move_kind = m.group(1).split()[0].upper()
        reference = m.group(3).strip("`") if m.group(3) else None
        text = text[:m.start()]
    m = _NAME_TYPE.match(text)
    if not m:
        raise click.BadParameter(f"{text.strip()!r} is not 'NAME TYPE [FIRST | AFTER COL | BEFORE COL]'",
                                 param_hint="'--add-column'")
    name = m.group(1).strip("`")
    data_type = parse_atomic(m.group(2))
    move = None
    if move_kind == "FIRST":
        move = Move.first(name)
    elif move_kind == "AFTER":
        move = Move.after(name, reference)
    elif move_kind == "BEFORE":
        move = Move.before(name, reference)
    return SchemaChange.add_column(name, data_type, None, move)


def _key_value(item: str, option: str) -> tuple[str, str]:
    key, sep, value = item.partition("=")
    if not sep or not key.strip():
        raise click.BadParameter(f"{item!r} is not KEY=VALUE", param_hint=f"'{option}'")
    return key.strip(), value.strip()


@cli.command()
@table_argument
@click.option("--add-column", "adds", multiple=True, metavar="'NAME TYPE [FIRST|AFTER COL|BEFORE COL]'",
              help="Add a nullable column (at the end unless positioned), e.g. \"amount DECIMAL(12, 2) AFTER id\". "
                   "Existing rows read it as null.")
@click.option("--drop-column", "drops", multiple=True, metavar="COL",
              help="Drop a column (not a key or partition column).")
@click.option("--rename-column", "renames", multiple=True, nargs=2, metavar="OLD NEW",
              help="Rename a column; old files are still read by field id.")
@click.option("--set-type", "types", multiple=True, nargs=2, metavar="COL TYPE",
              help="Widen a column's type without loss (INT -> BIGINT, FLOAT -> DOUBLE, DECIMAL(10, 2) -> "
                   "DECIMAL(12, 2), longer VARCHAR...); old files are cast on read.")
@click.option("--nullable", "nullables", multiple=True, metavar="COL", help="Make a column nullable.")
@click.option("--not-null", "not_nulls", multiple=True, metavar="COL",
              help="Make a column NOT NULL (only while the table has no snapshot).")
@click.option("--set-option", "set_options", multiple=True, metavar="KEY=VALUE",
              help="Set a table option (structural options are fixed once there is data; 'bucket' changes for "
                   "new partitions, existing ones keep theirs until 'lakemerge rescale').")
@click.option("--remove-option", "remove_options", multiple=True, metavar="KEY", help="Remove a table option.")
@click.option("--comment", "comment", metavar="TEXT", help="Set the table comment ('' removes it).")
@click.option("--dry-run", is_flag=True, help="Check the changes and print the resulting schema; publish nothing.")
@warehouse_option()
@json_option
@debug_option
def alter(table, adds, drops, renames, types, nullables, not_nulls, set_options, remove_options, comment,
          dry_run, warehouse, as_json):
    """Evolve a table's schema: add, drop, rename or widen columns, change nullability, set or remove options.

    All changes form one new schema (schema-N+1) following Paimon's rules: field ids are kept, so data files
    written before are read under the new schema (renamed columns by id, added columns null, widened types
    cast). Applied in the order: drops, renames, adds, type changes, nullability, options, comment. A refused
    change publishes nothing and names the column.
    """
    from engine.schema_change import SchemaChange, alter_table, apply_changes

    changes = [SchemaChange.drop_column(c) for c in drops]
    changes += [SchemaChange.rename_column(old, new) for old, new in renames]
    changes += [parse_add_column(text) for text in adds]
    changes += [SchemaChange.update_column_type(col, type_text) for col, type_text in types]
    changes += [SchemaChange.update_column_nullability(c, True) for c in nullables]
    changes += [SchemaChange.update_column_nullability(c, False) for c in not_nulls]
    changes += [SchemaChange.set_option(*_key_value(item, "--set-option")) for item in set_options]
    changes += [SchemaChange.remove_option(k.strip()) for k in remove_options]
    if comment is not None:
        changes.append(SchemaChange.update_comment(comment or None))
    if not changes:
        raise click.UsageError("give at least one change (see lakemerge alter --help)")
    t = data_table(warehouse, table)
    before = t.schema
    if dry_run:
        after = apply_changes(before, changes, table=t.name,
                              has_snapshots=t.snapshot_manager.latest_id() is not None)
    else:
        after = alter_table(t, changes)
    _report(t.name, before, after, dry_run, as_json)
    if not as_json and before.options.get("bucket") != after.options.get("bucket") \
            and t.snapshot_manager.latest_id() is not None:
        click.echo(f"  existing partitions keep their bucket count and refuse writes until rescaled: "
                   f"lakemerge rescale {t.name}")


def _report(name: str, before, after, dry_run: bool, as_json: bool) -> None:
    fields = [{"id": f.id, "name": f.name, "type": f.type.sql(), "nullable": f.type.nullable,
               "description": f.description} for f in after.fields]
    if as_json:
        click.echo(to_json({"table": name, "dry_run": dry_run, "previous_schema_id": before.id,
                            "schema_id": after.id, "fields": fields, "primary_keys": list(after.primary_keys),
                            "partition_keys": list(after.partition_keys), "options": dict(after.options),
                            "comment": after.comment}))
        return
    import pyarrow as pa

    verb = "would change" if dry_run else "altered"
    click.echo(f"{verb} {name}: schema {before.id} -> {after.id}" + (" (dry run: nothing published)" if dry_run
                                                                      else ""))
    for line in describe_diff(before, after):
        click.echo(f"  {line}")
    print_arrow(make_console(), pa.Table.from_pylist([{k: f[k] for k in ("id", "name", "type")} for f in fields]),
                title=f"{name} (schema {after.id})")


def describe_diff(before, after) -> list[str]:
    """One line per difference between two schemas, matching columns by field id."""
    old = {f.id: f for f in before.fields}
    new = {f.id: f for f in after.fields}
    lines = []
    for fid, f in old.items():
        if fid not in new:
            lines.append(f"dropped column {f.name}")
    for fid, f in new.items():
        o = old.get(fid)
        if o is None:
            lines.append(f"added column {f.name} {f.type.sql()}")
            continue
        if o.name != f.name:
            lines.append(f"renamed column {o.name} -> {f.name}")
        if o.type != f.type:
            lines.append(f"column {f.name}: {o.type.sql()} -> {f.type.sql()}")
    if [f.id for f in before.fields if f.id in new] != [f.id for f in after.fields if f.id in old]:
        lines.append("reordered columns")
    for key in sorted(set(before.options) | set(after.options)):
        a, b = before.options.get(key), after.options.get(key)
        if a != b:
            lines.append(f"option {key}: removed" if b is None else f"option {key} = {b}")
    if before.comment != after.comment:
        lines.append(f"comment: {after.comment!r}")
    return lines
