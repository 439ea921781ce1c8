"""Maintenance commands: ``compact``, ``expire``, ``drop-partition``, ``rescale``, ``remove-orphans``, ``tag create|delete|list``,
``branch create|delete|rename|fast-forward|merge|list``, ``rollback``.

They follow the conventions of engine/cli/__init__.py and wrap the Table methods of issue 4 (engine.compact,
engine.maintenance). Each prints a one-line summary (or one JSON document with ``--json``) and shows a spinner on
stderr while it works when stderr is a terminal (compaction: a bar over the bytes of the live files, with rows
and rates). Registered on the ``lakemerge`` group by engine/cli/app.py.
"""
from __future__ import annotations

import datetime as dt
import re
import time

import click

from engine.cli.app import (cli, data_table as _data_table, debug_option, json_option, table_argument,
                            warehouse_option, _emit)
from engine.cli.render import make_console, to_json

_UNITS_MS = {"ms": 1, "milli": 1, "millis": 1, "s": 1000, "sec": 1000, "second": 1000, "seconds": 1000,
             "m": 60_000, "min": 60_000, "mins": 60_000, "minute": 60_000, "minutes": 60_000,
             "h": 3_600_000, "hour": 3_600_000, "hours": 3_600_000, "d": 86_400_000, "day": 86_400_000,
             "days": 86_400_000, "w": 604_800_000, "week": 604_800_000, "weeks": 604_800_000}
_PART = re.compile(r"\s*(\d+)\s*([a-zA-Z]+)")


def parse_duration(text: str) -> dt.timedelta:
    """``'7d'``, ``'1 h'``, ``'1d12h'``, ``'90 min'``, ``'500ms'`` as a timedelta (units ms, s, m/min, h, d, w and
    their long names). Raises ValueError with the reason otherwise (a bare number has no unit and is refused)."""
    pos, total = 0, 0
    for m in _PART.finditer(text):
        if m.start() != pos:
            break
        unit = m.group(2).lower()
        if unit not in _UNITS_MS:
            raise ValueError(f"unknown unit {m.group(2)!r} (use ms, s, min, h, d or w)")
        total += int(m.group(1)) * _UNITS_MS[unit]
        pos = m.end()
    if pos == 0 or text[pos:].strip():
        if re.fullmatch(r"\s*\d+\s*", text):
            raise ValueError("a duration needs a unit, e.g. '7d', '12h' or '30min'")
        raise ValueError("expected a duration such as '7d', '12h', '1d12h' or a date-time such as "
                         "'2024-01-31 12:00:00'")
    return dt.timedelta(milliseconds=total)


class AgeType(click.ParamType):
    """A duration (``7d``, ``12h``, ``1d12h``) or a local date-time (``2024-01-31``, ``2024-01-31 12:00:00``),
    converted to a timedelta or a naive datetime; anything else is a usage error (exit 2)."""

    name = "DURATION"

    def convert(self, value, param, ctx):
        """Convert a date-time (must be in the past; made local and naive) or a duration text into a datetime or
        timedelta.
        Fails the parameter for unparseable or future values."""
        if isinstance(value, (dt.timedelta, dt.datetime)):
            return value
        text = str(value).strip()
        if re.match(r"\d{4}-\d{2}-\d{2}", text):
            try:
                when = dt.datetime.fromisoformat(text)
            except ValueError:
                self.fail(f"{value!r} is not a date-time such as '2024-01-31 12:00:00'", param, ctx)
            if when.tzinfo is not None:
                when = when.astimezone().replace(tzinfo=None)
            if when > dt.datetime.now():
                self.fail(f"{value!r} is in the future", param, ctx)
            return when
        try:
            return parse_duration(text)
        except ValueError as e:
            self.fail(f"{value!r}: {e}", param, ctx)


AGE = AgeType()


def _age_as_timedelta(age) -> dt.timedelta:
    return dt.datetime.now() - age if isinstance(age, dt.datetime) else age


def progress_option(f):
    """``--progress/--no-progress``: force progress on stderr on or off (default: only on a terminal)."""
    return click.option("--progress/--no-progress", default=None,
                        help="Show progress on stderr (default: only on a terminal, never with --json).")(f)


def _show_progress(as_json: bool, progress: bool | None = None):
    """(console on stderr, whether to show progress): as ``--progress`` says, else only on a terminal and never
    with --json."""
    console = make_console(stderr=True)
    return console, (console.is_terminal and not as_json) if progress is None else progress


def _parse_partition_specs(specs: tuple[str, ...]) -> list[dict] | None:
    """``('dt=2024-01-01,hr=3', 'dt=2024-01-02')`` -> list of dicts; a usage error for a part without ``=``."""
    if not specs:
        return None
    out = []
    for spec in specs:
        d = {}
        for item in spec.split(","):
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise click.BadParameter(f"{spec!r} is not COL=VALUE[,COL=VALUE]", param_hint="'--partition'")
            d[key.strip()] = value.strip()
        out.append(d)
    return out


def _live_files(table, snapshot, partitions) -> dict[tuple, object]:
    """(partition, bucket, file name) -> DataFileMeta of the live files of ``snapshot`` within ``partitions``."""
    from engine.compact.manager import partition_matches

    if snapshot is None:
        return {}
    out = {}
    for split in table.scan().plan(snapshot):
        if partition_matches(table.schema, split.partition_values, partitions):
            for f in split.files:
                out[(split.partition, split.bucket, f.file_name)] = f
    return out


# --- compact ---------------------------------------------------------------------------------------------
@cli.command()
@table_argument
@click.option("--full", is_flag=True, help="Rewrite every bucket into one sorted run at the top level.")
@click.option("--partition", "-p", "partitions", multiple=True, metavar="COL=VALUE[,COL=VALUE]",
              help="Only compact this partition (repeatable).")
@progress_option
@warehouse_option()
@json_option
@debug_option
def compact(table, full, partitions, progress, warehouse, as_json):
    """Compact a table's buckets and commit a COMPACT snapshot.

    Without --full each bucket runs what universal compaction picks (as a writer would); with --full each bucket
    becomes one sorted run. On an append table (no primary key) small files are merged instead: runs of at
    least compaction.min.file-num consecutive files below target-file-size, or with --full every bucket's files,
    keeping row order. Prints the new snapshot, or that there was nothing to compact.
    """
    specs = _parse_partition_specs(partitions)
    t = _data_table(warehouse, table)
    before = _live_files(t, t.snapshot_manager.latest(), specs)
    console, show = _show_progress(as_json, progress)
    started = time.monotonic()
    from engine.cli.progress import bytes_progress

    total_bytes = sum(f.file_size for f in before.values())
    with bytes_progress(console, f"{'full ' if full else ''}compaction of {t.name}", total_bytes, show) as report:
        sid = t.compact(full=full, partitions=specs, progress=report)
    seconds = time.monotonic() - started
    after = _live_files(t, t.snapshot(sid), specs) if sid is not None else before
    removed = [f for k, f in before.items() if k not in after]
    added = [f for k, f in after.items() if k not in before]
    upgraded = [f for k, f in after.items() if k in before and before[k].level != f.level]  # moved, not rewritten
    result = {"table": t.name, "snapshot_id": sid, "full": full,
              "files_before": len(before), "files_after": len(after),
              "files_rewritten": len(removed), "files_written": len(added), "files_upgraded": len(upgraded),
              "rows_read": sum(f.row_count for f in removed), "rows_written": sum(f.row_count for f in added),
              "bytes_read": sum(f.file_size for f in removed), "bytes_written": sum(f.file_size for f in added),
              "seconds": round(seconds, 3)}
    if as_json:
        click.echo(to_json(result))
    elif sid is None:
        hint = "" if full else "; --full rewrites every bucket into one run"
        click.echo(f"{t.name}: nothing to compact ({len(before)} live file(s){hint})")
    else:
        rate = result["rows_read"] / max(seconds, 1e-9)
        levels = sorted({f.level for f in upgraded})
        moved = (f"{len(upgraded)} file(s) moved to level {', '.join(map(str, levels))} without a rewrite; "
                 if upgraded else "")
        click.echo(f"compacted {t.name}: snapshot {sid}; {moved}{len(removed)} file(s) ({result['rows_read']:,} rows, "
                   f"{result['bytes_read']:,} bytes) rewritten into {len(added)} ({result['rows_written']:,} rows, "
                   f"{result['bytes_written']:,} bytes); live files {len(before)} -> {len(after)} in "
                   f"{seconds:.2f} s ({rate:,.0f} rows/s)")


def _spinner(console, description: str, enabled: bool):
    from engine.cli.progress import work_progress
    return work_progress(console, description, enabled)


# --- expire ----------------------------------------------------------------------------------------------
@cli.command()
@table_argument
@click.option("--retain-min", type=click.IntRange(min=1), metavar="N",
              help="Keep at least N snapshots (default: option snapshot.num-retained.min).")
@click.option("--retain-max", type=click.IntRange(min=1), metavar="N",
              help="Keep at most N snapshots (default: option snapshot.num-retained.max).")
@click.option("--older-than", type=AGE, metavar="DURATION|TIME",
              help="Expire snapshots that stopped being the latest more than DURATION ago (e.g. 7d, 12h) or "
                   "before a local date-time (default: option snapshot.time-retained); --retain-min still holds.")
@click.option("--max-deletes", type=click.IntRange(min=1), metavar="N",
              help="Expire at most N snapshots in this run (default: option snapshot.expire.limit).")
@progress_option
@warehouse_option()
@json_option
@debug_option
def expire(table, retain_min, retain_max, older_than, max_deletes, progress, warehouse, as_json):
    """Expire old snapshots and delete the files only they referenced.

    The latest snapshot, snapshots younger than the retention time and files a tag still uses are always kept.
    """
    if retain_min is not None and retain_max is not None and retain_max < retain_min:
        raise click.BadParameter(f"--retain-max ({retain_max}) is below --retain-min ({retain_min})",
                                 param_hint="'--retain-max'")
    t = _data_table(warehouse, table)
    console, show = _show_progress(as_json, progress)
    with _spinner(console, f"expiring snapshots of {t.name}", show):
        removal = t.expire_snapshots(retain_min=retain_min, retain_max=retain_max,
                                     time_retained=_age_as_timedelta(older_than) if older_than is not None else None,
                                     max_deletes=max_deletes)
    ids = t.snapshot_manager.ids()
    result = {"table": t.name, "expired_snapshots": list(removal.snapshot_ids),
              "deleted_data_files": len(removal.data_files), "deleted_metadata_files": len(removal.metadata_files),
              "deleted_index_files": len(removal.index_files),
              "earliest_snapshot": ids[0] if ids else None, "latest_snapshot": ids[-1] if ids else None}
    if as_json:
        click.echo(to_json(result))
    elif not removal.snapshot_ids:
        click.echo(f"{t.name}: no snapshot to expire ({len(ids)} retained)")
    else:
        first, last = removal.snapshot_ids[0], removal.snapshot_ids[-1]
        span = f"{first}" if first == last else f"{first}..{last}"
        click.echo(f"expired {len(removal.snapshot_ids)} snapshot(s) of {t.name} ({span}); deleted "
                   f"{len(removal.data_files)} data file(s), {len(removal.index_files)} index file(s) and "
                   f"{len(removal.metadata_files)} metadata file(s); "
                   + (f"snapshot {ids[0]} remains" if len(ids) == 1 else f"snapshots {ids[0]}..{ids[-1]} remain"))


# --- drop-partition --------------------------------------------------------------------------------------
@cli.command(name="drop-partition")
@table_argument
@click.option("--partition", "-p", "partitions", multiple=True, required=True, metavar="COL=VALUE[,COL=VALUE]",
              help="A partition to drop (repeatable); naming only some partition columns drops every partition "
                   "with those values.")
@warehouse_option()
@json_option
@debug_option
def drop_partition(table, partitions, warehouse, as_json):
    """Drop partitions in one OVERWRITE snapshot (Paimon's ALTER TABLE ... DROP PARTITION).

    Their files leave the table now and are deleted from storage when the older snapshots expire. Reports the
    partitions dropped and the specs that matched no partition with data.
    """
    import uuid

    from engine.maintenance.partitions import drop_partitions, dropped_partitions, unmatched_specs
    from engine.write.bucket_layout import partition_text

    t = _data_table(warehouse, table)
    specs = _parse_partition_specs(partitions)
    user = str(uuid.uuid4())  # tells our snapshot from another writer's latest, returned when nothing matched
    sid = drop_partitions(t, specs, commit_user=user)
    ours = sid is not None and t.snapshot(sid).commit_user == user
    dropped = dropped_partitions(t, sid) if ours else []
    unmatched = unmatched_specs(t, specs, dropped)
    names = [partition_text(t.schema, v).removeprefix("partition ") for v in dropped]
    if as_json:
        click.echo(to_json({"table": t.name, "partitions": specs, "snapshot": sid if dropped else None,
                            "dropped_partitions": [dict(zip(t.schema.partition_keys, v)) for v in dropped],
                            "unmatched_partitions": unmatched}))
        return
    spec_text = ", ".join(",".join(f"{k}={v}" for k, v in spec.items()) for spec in unmatched)
    if dropped:
        click.echo(f"dropped {len(dropped)} partition(s) of {t.name} in snapshot {sid}: {', '.join(names)}")
        if unmatched:
            click.echo(f"no partition with data matched: {spec_text}")
    else:
        click.echo(f"{t.name}: no live file in the given partition(s) ({spec_text}); nothing committed")


# --- rescale ---------------------------------------------------------------------------------------------
@cli.command()
@table_argument
@click.option("--bucket-num", "-b", type=click.IntRange(min=1), metavar="N",
              help="Buckets to rewrite the partitions with (default: the table's option 'bucket'; required for "
                   "bucket = -2 tables).")
@click.option("--partition", "-p", "partitions", multiple=True, metavar="COL=VALUE[,COL=VALUE]",
              help="Only rescale this partition (repeatable; default: every partition).")
@warehouse_option()
@json_option
@debug_option
def rescale(table, bucket_num, partitions, warehouse, as_json):
    """Rewrite partitions with a bucket count in one OVERWRITE snapshot (Paimon's rescale procedure).

    After ``lakemerge alter TABLE --set bucket=N`` the existing partitions keep their old count and refuse
    writes until they are rescaled: ``lakemerge rescale TABLE`` rewrites them with N.
    """
    specs = _parse_partition_specs(partitions)
    t = _data_table(warehouse, table)
    sid = t.rescale(bucket_num, specs)
    count = bucket_num or t.schema.table_options.bucket
    if as_json:
        click.echo(to_json({"table": t.name, "bucket_num": count, "partitions": specs, "snapshot": sid}))
    elif sid is None:
        click.echo(f"{t.name}: no data in the given partition(s); nothing to rescale")
    else:
        click.echo(f"rescaled {t.name} to {count} bucket(s) in snapshot {sid}")


# --- remove-orphans --------------------------------------------------------------------------------------
@cli.command(name="remove-orphans")
@table_argument
@click.option("--older-than", type=AGE, default="1d", show_default=True, metavar="DURATION|TIME",
              help="Only files last modified longer ago than this (younger ones may belong to a commit in "
                   "flight).")
@click.option("--dry-run", is_flag=True, help="List the orphan files without deleting them.")
@progress_option
@warehouse_option()
@json_option
@debug_option
def remove_orphans(table, older_than, dry_run, progress, warehouse, as_json):
    """Delete files under the table that no snapshot or tag references.

    Nothing is deleted if any snapshot, tag or manifest cannot be read.
    """
    t = _data_table(warehouse, table)
    console, show = _show_progress(as_json, progress)
    with _spinner(console, f"looking for orphan files of {t.name}", show):
        paths = t.remove_orphan_files(older_than, dry_run=dry_run)
    if as_json:
        click.echo(to_json({"table": t.name, "dry_run": dry_run, "files": paths}))
        return
    verb = "would delete" if dry_run else "deleted"
    click.echo(f"{t.name}: {verb} {len(paths)} orphan file(s)")
    for p in paths:
        click.echo(f"  {p}")


# --- tags ------------------------------------------------------------------------------------------------
@cli.group()
def tag():
    """Create, delete and list tags (named snapshots kept through expiration)."""


@tag.command(name="create")
@table_argument
@click.argument("name")
@click.option("--snapshot", "-s", type=int, metavar="N", help="Snapshot to tag (default: the latest).")
@warehouse_option()
@json_option
@debug_option
def tag_create(table, name, snapshot, warehouse, as_json):
    """Tag a snapshot as NAME (time travel with `show --tag NAME`)."""
    t = _data_table(warehouse, table)
    t.create_tag(name, snapshot)
    snap = t.tag_snapshot(name)
    if as_json:
        click.echo(to_json({"table": t.name, "tag": name, "snapshot_id": snap.id}))
    else:
        click.echo(f"tagged snapshot {snap.id} of {t.name} as {name!r}")


@tag.command(name="delete")
@table_argument
@click.argument("name")
@warehouse_option()
@json_option
@debug_option
def tag_delete(table, name, warehouse, as_json):
    """Delete tag NAME (and the files only it kept alive)."""
    t = _data_table(warehouse, table)
    snap = t.tag_snapshot(name)
    t.delete_tag(name)
    if as_json:
        click.echo(to_json({"table": t.name, "tag": name, "snapshot_id": snap.id, "deleted": True}))
    else:
        click.echo(f"deleted tag {name!r} (snapshot {snap.id}) of {t.name}")


@tag.command(name="list")
@table_argument
@warehouse_option()
@json_option
@debug_option
def tag_list(table, warehouse, as_json):
    """List a table's tags (the $tags system table)."""
    from engine.system_tables import system_table

    rows = system_table(_data_table(warehouse, table), "tags").read()
    _emit(rows, as_json, columns=["tag_name", "snapshot_id", "schema_id", "commit_time", "record_count",
                                  "create_time"])


# --- branches --------------------------------------------------------------------------------------------
@cli.group()
def branch():
    """Create, delete, rename, fast-forward, merge and list branches (TABLE may be a branch: db.t$branch_b)."""


def _branch_done(as_json: bool, result: dict, text: str) -> None:
    click.echo(to_json(result) if as_json else text)


@branch.command(name="create")
@table_argument
@click.argument("name")
@click.option("--tag", "-t", "tag_name", metavar="TAG", help="Start from this tag of TABLE (default: empty, with "
              "TABLE's latest schema).")
@warehouse_option()
@json_option
@debug_option
def branch_create(table, name, tag_name, warehouse, as_json):
    """Create branch NAME, empty or from a tag (data files are shared, not copied)."""
    t = _data_table(warehouse, table)
    t.create_branch(name, tag=tag_name)
    _branch_done(as_json, {"table": t.name, "branch": name, "tag": tag_name},
                 f"created branch {name!r} of {t.name}" + (f" from tag {tag_name!r}" if tag_name else ""))


@branch.command(name="delete")
@table_argument
@click.argument("name")
@warehouse_option()
@json_option
@debug_option
def branch_delete(table, name, warehouse, as_json):
    """Delete branch NAME's metadata (its data files are left to remove-orphans)."""
    t = _data_table(warehouse, table)
    t.delete_branch(name)
    _branch_done(as_json, {"table": t.name, "branch": name, "deleted": True}, f"deleted branch {name!r} of {t.name}")


@branch.command(name="rename")
@table_argument
@click.argument("name")
@click.argument("new_name")
@warehouse_option()
@json_option
@debug_option
def branch_rename(table, name, new_name, warehouse, as_json):
    """Rename branch NAME to NEW_NAME (its snapshots, tags and consumers move with it)."""
    t = _data_table(warehouse, table)
    t.rename_branch(name, new_name)
    _branch_done(as_json, {"table": t.name, "branch": new_name, "renamed_from": name},
                 f"renamed branch {name!r} of {t.name} to {new_name!r}")


@branch.command(name="fast-forward")
@table_argument
@click.argument("name")
@warehouse_option()
@json_option
@debug_option
def branch_fast_forward(table, name, warehouse, as_json):
    """Make branch NAME's history TABLE's (TABLE's snapshots from NAME's earliest on are replaced)."""
    t = _data_table(warehouse, table)
    t.fast_forward(name)
    latest = t.snapshot_manager.latest_id()
    _branch_done(as_json, {"table": t.name, "branch": name, "latest_snapshot": latest},
                 f"fast-forwarded {t.name} to branch {name!r}: snapshot {latest} is the latest")


@branch.command(name="merge")
@table_argument
@click.argument("source")
@click.option("--into", "target", default="main", show_default=True, metavar="BRANCH",
              help="The branch that receives SOURCE's files.")
@warehouse_option()
@json_option
@debug_option
def branch_merge(table, source, target, warehouse, as_json):
    """Add the data files append-table branch SOURCE has and --into lacks, as one APPEND snapshot."""
    t = _data_table(warehouse, table)
    sid = t.merge_branch(source, target)
    _branch_done(as_json, {"table": t.name, "source": source, "target": target, "snapshot_id": sid},
                 f"merged branch {source!r} of {t.name} into {target!r}: snapshot {sid} is its latest")


@branch.command(name="list")
@table_argument
@warehouse_option()
@json_option
@debug_option
def branch_list(table, warehouse, as_json):
    """List a table's branches."""
    t = _data_table(warehouse, table)
    names = t.branches()
    click.echo(to_json({"table": t.name, "branches": names}) if as_json else "\n".join(names))


# --- rollback --------------------------------------------------------------------------------------------
@cli.command()
@table_argument
@click.option("--snapshot", "-s", type=int, metavar="N", help="Snapshot to roll back to.")
@click.option("--tag", "-t", "tag_name", metavar="NAME", help="Tag to roll back to.")
@warehouse_option()
@json_option
@debug_option
def rollback(table, snapshot, tag_name, warehouse, as_json):
    """Make a snapshot or tag the table's latest state.

    Later snapshots, their tags and the files only they referenced are deleted. Do not run it while other
    writers commit to the table.
    """
    from engine.maintenance.rollback import rollback_to

    if (snapshot is None) == (tag_name is None):
        raise click.UsageError("give exactly one of --snapshot or --tag")
    t = _data_table(warehouse, table)
    removal = rollback_to(t, tag_name if tag_name is not None else snapshot)
    latest = t.snapshot_manager.latest_id()
    result = {"table": t.name, "latest_snapshot": latest, "removed_snapshots": list(removal.snapshot_ids),
              "deleted_data_files": len(removal.data_files),
              "deleted_metadata_files": len(removal.metadata_files), "deleted_index_files": len(removal.index_files)}
    if as_json:
        click.echo(to_json(result))
    else:
        target = f"tag {tag_name!r}" if tag_name is not None else f"snapshot {snapshot}"
        click.echo(f"rolled {t.name} back to {target}: snapshot {latest} is the latest; removed "
                   f"{len(removal.snapshot_ids)} snapshot(s), {len(removal.data_files)} data file(s), "
                   f"{len(removal.index_files)} index file(s) and {len(removal.metadata_files)} metadata file(s)")
