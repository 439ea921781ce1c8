"""Progress bars for long commands (rich): bytes read, rows, and their rates; silent when disabled."""
from __future__ import annotations

import time
from contextlib import contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    ProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TransferSpeedColumn,
)
from rich.text import Text


class RowsColumn(ProgressColumn):
    """``1,234,567 rows (456,789 rows/s)``."""

    def render(self, task) -> Text:
        """Return the task's row count, with rows per second once time has elapsed."""
        rows = int(task.fields.get("rows", 0))
        elapsed = task.elapsed or 0.0
        rate = f" ({rows / elapsed:,.0f} rows/s)" if elapsed > 0 else ""
        return Text(f"{rows:,} rows{rate}")


@contextmanager
def ingest_progress(console: Console, total_bytes: int, enabled: bool):
    """Yield ``report(rows=, bytes=, file=)`` that advances a bar over ``total_bytes``; a no-op when not
    ``enabled`` (e.g. stdout is not a terminal)."""
    if not enabled:
        yield lambda **kw: None
        return
    columns = [TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
               RowsColumn(), TimeElapsedColumn()]
    with Progress(*columns, console=console, transient=False) as progress:
        task = progress.add_task("ingest", total=total_bytes, rows=0)
        state = {"rows": 0, "last": 0.0}

        def report(rows: int = 0, bytes: int = 0, file: str | None = None) -> None:
            state["rows"] += rows
            desc = f"ingest {file.rsplit('/', 1)[-1]}" if file else "ingest"
            progress.update(task, advance=bytes, rows=state["rows"], description=desc)
            now = time.monotonic()
            if now - state["last"] > 0.1:
                state["last"] = now
                progress.refresh()

        yield report


@contextmanager
def work_progress(console: Console, description: str, enabled: bool):
    """A spinner with ``description`` and the elapsed time while the block runs (compaction, expiry, orphan
    cleanup: work whose size is not known up front); silent when not ``enabled``. Yields ``update(text)`` to
    change the description."""
    if not enabled:
        yield lambda text: None
        return
    from rich.progress import SpinnerColumn

    # on a terminal the spinner disappears when done; forced on elsewhere (a log) it leaves its last line
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=console,
                  transient=console.is_terminal) as progress:
        task = progress.add_task(description, total=None)
        yield lambda text: progress.update(task, description=text)


@contextmanager
def bytes_progress(console: Console, description: str, total_bytes: int, enabled: bool):
    """Yield ``report(rows=, bytes=)`` advancing a bar over ``total_bytes`` that shows bytes, rows and their
    rates (e.g. compaction, bucket by bucket); a no-op when not ``enabled``."""
    if not enabled:
        yield lambda **kw: None
        return
    columns = [TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
               RowsColumn(), TimeElapsedColumn()]
    with Progress(*columns, console=console, transient=False) as progress:
        task = progress.add_task(description, total=total_bytes, rows=0)
        state = {"rows": 0}

        def report(rows: int = 0, bytes: int = 0) -> None:
            state["rows"] += rows
            progress.update(task, advance=bytes, rows=state["rows"])

        yield report
