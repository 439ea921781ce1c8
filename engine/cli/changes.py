"""``lakemerge changes`` (what snapshots changed, Table.read_changes) and ``lakemerge stream`` (a streaming read
that prints batches as snapshots are committed, Table.stream).

Both print the table's columns plus ``_row_kind`` (+I, -U, +U, -D) and ``_snapshot_id`` (the snapshot the change
belongs to). ``changes`` prints one table (or a JSON array); ``stream`` prints one table per batch (or, with
``--json``, one JSON object per row and line -- JSON lines, flushed per batch). Conventions: engine/cli/__init__.py.
"""
from __future__ import annotations

import datetime as dt

import click
import pyarrow as pa

from engine.cli.app import (_emit, cli, data_table as _data_table, debug_option, json_option, table_argument,
                            warehouse_option)
from engine.cli.render import make_console, print_arrow

SNAPSHOT_COLUMN = "_snapshot_id"


def _columns(text: str | None) -> list[str] | None:
    return [c.strip() for c in text.split(",") if c.strip()] if text else None


def with_snapshot_id(rows: pa.Table | pa.RecordBatch, snapshot_id: int) -> pa.Table:
    """``rows`` with a leading ``_snapshot_id`` column holding ``snapshot_id``."""
    rows = rows if isinstance(rows, pa.Table) else pa.Table.from_batches([rows])
    return rows.add_column(0, pa.field(SNAPSHOT_COLUMN, pa.int64()),
                           pa.array([snapshot_id] * rows.num_rows, pa.int64())).replace_schema_metadata(None)


# --- changes -------------------------------------------------------------------------------------------------
@cli.command()
@table_argument
@click.option("--from", "start", type=click.IntRange(min=0), metavar="N",
              help="Start after snapshot N (exclusive; default: from the first snapshot).")
@click.option("--to", "end", type=click.IntRange(min=1), metavar="M",
              help="End with snapshot M (inclusive; default: the latest).")
@click.option("--normalize", is_flag=True,
              help="With changelog-producer=none, build a full changelog (-U/+U pairs, -D with old values) by "
                   "looking up every touched key before and after each snapshot.")
@click.option("--columns", "-c", metavar="COL[,COL]", help="Columns to show (default: all).")
@click.option("--limit", "-n", type=click.IntRange(min=0), default=20, show_default=True,
              help="Changes to print (0: all).")
@warehouse_option()
@json_option
@debug_option
def changes(table, start, end, normalize, columns, limit, warehouse, as_json):
    """Print the changes committed by snapshots N+1..M.

    With a changelog producer (input, lookup, full-compaction) these are the changelog files; with the default
    `none` the rows each APPEND snapshot wrote as stored (--normalize for a full changelog); for an append
    table the rows each commit appended. Compaction snapshots add no changes unless their producer writes a
    changelog. Fails if a snapshot in the range has expired.
    """
    from engine.errors import InvalidInput

    t = _data_table(warehouse, table)
    cols = _columns(columns)
    latest = t.latest_snapshot_id()
    last = latest if end is None else end
    if end is not None and (latest is None or end > latest):
        raise InvalidInput(f"--to {end} is after the latest snapshot ({latest if latest is not None else 'none'})",
                           table=t.name)
    first = start if start is not None else 0
    if last is not None and first > last:
        raise InvalidInput(f"--from {first} is after --to {last}", table=t.name)
    empty = with_snapshot_id(t.read_changes(0, 0, cols), 0)  # the output schema; also checks the columns
    parts, n, truncated = [], 0, False
    for sid in range(first + 1, (last or 0) + 1):
        if limit and n > limit:
            truncated = True
            break
        rows = t.read_changes(sid - 1, sid, cols, normalize=normalize)
        if rows.num_rows:
            parts.append(with_snapshot_id(rows, sid))
            n += rows.num_rows
    out = pa.concat_tables(parts) if parts else empty
    if limit and out.num_rows > limit:
        out, truncated = out.slice(0, limit), True
    _emit(out, as_json, title=f"changes of {t.name}", total_rows=None if truncated else out.num_rows,
          truncated=truncated)


# --- stream --------------------------------------------------------------------------------------------------
def _timestamp_millis(value: str | None) -> int | None:
    """Epoch milliseconds, or a local date-time such as '2024-01-31 12:00:00', as epoch milliseconds."""
    if value is None:
        return None
    text = value.strip()
    if text.isdigit():
        return int(text)
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        raise click.BadParameter(f"{value!r} is neither epoch milliseconds nor a date-time such as "
                                 "'2024-01-31 12:00:00'", param_hint="'--timestamp'") from None
    return int(when.timestamp() * 1000)


def _snapshot_ref(value: str | None):
    """A snapshot id (digits) or a tag name."""
    if value is None:
        return None
    return int(value) if value.strip().isdigit() else value


_NEEDS = {"from-snapshot": ("snapshot",), "from-snapshot-full": ("snapshot",), "from-timestamp": ("timestamp",),
          "incremental": ("start", "end")}


@cli.command()
@table_argument
@click.option("--mode", "-m", type=click.Choice(["latest-full", "latest", "from-snapshot", "from-snapshot-full",
                                                 "from-timestamp", "compacted-full", "incremental"]),
              default="latest-full", show_default=True,
              help="Where to start (Paimon's scan.mode): latest-full reads the latest snapshot in full, then "
                   "follows new commits; latest only follows new commits.")
@click.option("--snapshot", "-s", type=click.IntRange(min=1), metavar="N",
              help="Snapshot to start at (from-snapshot: its changes; from-snapshot-full: its rows).")
@click.option("--timestamp", metavar="MILLIS|TIME",
              help="from-timestamp: changes committed at or after this time (epoch ms or local date-time).")
@click.option("--start", metavar="N|TAG", help="incremental: start after this snapshot or tag (exclusive).")
@click.option("--end", metavar="N|TAG", help="incremental: end with this snapshot or tag (inclusive); then stop. "
                                            "Two tags give the difference of the tagged states.")
@click.option("--consumer-id", metavar="ID",
              help="Save progress as consumer ID: a restarted stream resumes after the last batch printed, and "
                   "expiration keeps the snapshots it still needs.")
@click.option("--columns", "-c", metavar="COL[,COL]", help="Columns to print (default: all).")
@click.option("--normalize", is_flag=True, help="With changelog-producer=none, emit a full changelog.")
@click.option("--poll-interval", type=click.FloatRange(min=0), default=1.0, show_default=True, metavar="S",
              help="Seconds between looks for new snapshots.")
@click.option("--idle-timeout", type=click.FloatRange(min=0), metavar="S",
              help="Stop after S seconds without a new snapshot (0: as soon as caught up; default: never).")
@warehouse_option()
@json_option
@debug_option
def stream(table, mode, snapshot, timestamp, start, end, consumer_id, columns, normalize, poll_interval,
           idle_timeout, warehouse, as_json):
    """Print a table's changes as they are committed, batch by batch (Ctrl-C stops).

    Each batch holds one snapshot's changes (a full first read is one batch of +I rows). With --json every
    row is one line of JSON (JSON lines), flushed per batch, for piping into other tools.
    """
    given = {"snapshot": snapshot, "timestamp": timestamp, "start": start, "end": end}
    for name in _NEEDS.get(mode, ()):
        if given[name] is None:
            raise click.UsageError(f"--mode {mode} needs --{name}")
    extra = [name for name, value in given.items() if value is not None and name not in _NEEDS.get(mode, ())]
    if extra:
        raise click.UsageError(f"--{extra[0]} does not apply to --mode {mode}")
    t = _data_table(warehouse, table)
    batches = t.stream(mode, snapshot_id=snapshot, timestamp_millis=_timestamp_millis(timestamp),
                       start=_snapshot_ref(start), end=_snapshot_ref(end), consumer_id=consumer_id,
                       columns=_columns(columns), poll_interval=poll_interval, idle_timeout=idle_timeout,
                       normalize=normalize)
    console = None if as_json else make_console()
    count = rows = 0
    try:
        for batch in batches:
            sid = int((batch.schema.metadata or {}).get(b"lakemerge.snapshot_id", b"0"))
            out = with_snapshot_id(batch, sid)
            if as_json:
                _print_json_lines(out)
            else:
                print_arrow(console, out, title=f"snapshot {sid}: {out.num_rows:,} change(s)")
            count, rows = count + 1, rows + out.num_rows
    except KeyboardInterrupt:
        pass
    finally:
        batches.close()  # records the consumer's progress for the last batch handed over
    click.echo(f"{t.name}: stream stopped after {count} batch(es), {rows:,} change(s)", err=True)


def _print_json_lines(rows: pa.Table) -> None:
    """One JSON object per row and line; flushed, so a consumer downstream sees each batch at once."""
    import json

    from engine.cli.render import json_default

    if rows.num_rows:
        click.echo("".join(json.dumps(row, default=json_default, ensure_ascii=False) + "\n"
                           for row in rows.to_pylist()), nl=False)
