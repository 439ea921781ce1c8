"""Output of the command line: rich tables for people, JSON for scripts.

Data values are always rendered as plain text (never as rich markup), so a cell such as ``[42]`` prints as is.
"""
from __future__ import annotations

import datetime as dt
import decimal
import json
import os

import pyarrow as pa
from rich.console import Console
from rich.table import Table as RichTable
from rich.text import Text


def make_console(stderr: bool = False) -> Console:
    """A console on the current stdout (or stderr). Off a terminal it does not wrap tables at 80 columns
    (``COLUMNS`` or 200 wide) and emits no colour codes."""
    console = Console(stderr=stderr, highlight=False, soft_wrap=False)
    if not console.is_terminal:
        console = Console(stderr=stderr, highlight=False, soft_wrap=False, no_color=True,
                          width=int(os.environ.get("COLUMNS") or 200))
    return console


def json_default(value):
    """JSON encoding of the values Arrow hands back: date-times as ISO text, decimals as strings, bytes as hex."""
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    raise TypeError(f"cannot encode {type(value).__name__} as JSON")


def to_json(obj) -> str:
    """``obj`` as JSON text (one document, indented) using :func:`json_default`."""
    return json.dumps(obj, default=json_default, indent=2, ensure_ascii=False)


def cell_text(value) -> Text:
    """One cell as plain text: null dimmed, date-times with a space, nested values as JSON."""
    if value is None:
        return Text("null", style="dim")
    if isinstance(value, dt.datetime):
        spec = "milliseconds" if value.microsecond % 1000 == 0 else "auto"
        return Text(value.isoformat(sep=" ", timespec=spec))
    if isinstance(value, (list, dict)):
        return Text(json.dumps(value, default=json_default, ensure_ascii=False))
    if isinstance(value, bool):
        return Text("true" if value else "false")
    if isinstance(value, (bytes, bytearray)):
        return Text(value.hex())
    return Text(str(value))


def print_arrow(console: Console, table: pa.Table, *, title: str | None = None,
                total_rows: int | None = None, truncated: bool = False) -> None:
    """Print ``table`` as a rich table, then a line with the row count: ``total_rows`` if the table is a
    preview of a larger result of known size, ``total_rows=None`` with ``truncated=True`` if of unknown size."""
    out = RichTable(title=title, show_lines=False, header_style="bold")
    for field in table.schema:
        numeric = pa.types.is_integer(field.type) or pa.types.is_floating(field.type) or pa.types.is_decimal(field.type)
        justify = "right" if numeric else "left"
        out.add_column(field.name, justify=justify, overflow="fold")
    for row in table.to_pylist():
        out.add_row(*(cell_text(row[name]) for name in table.column_names))
    console.print(out)
    n = table.num_rows
    if truncated:
        console.print(Text(f"first {n:,} rows shown; there are more (--limit 0 shows all)"))
    elif total_rows is not None and total_rows > n:
        console.print(Text(f"{n:,} of {total_rows:,} rows shown"))
    else:
        console.print(Text(f"{n:,} row{'s' if n != 1 else ''}"))


def print_pairs(console: Console, pairs: list[tuple[str, object]], title: str | None = None) -> None:
    """Print name/value pairs as a two-column table without a header."""
    out = RichTable(title=title, show_header=False, box=None, pad_edge=False)
    out.add_column(style="bold")
    out.add_column(overflow="fold")
    for name, value in pairs:
        out.add_row(Text(name), cell_text(value))
    console.print(out)
