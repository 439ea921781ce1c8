"""Plain-text results table, environment lines, and benchmarks/RESULTS.md."""
from __future__ import annotations

import datetime as _dt
import os
import platform
import sys
from importlib import metadata

from benchmarks.harness import Row

PACKAGES = ["pyarrow", "numpy", "numba", "polars", "duckdb", "pandas", "pypaimon", "pypaimon-rust", "deltalake",
            "pyiceberg", "sqlalchemy"]
RESULTS_MD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "RESULTS.md")
HEADER = ["case", "contender", "best s", "median s", "rows/s", "ratio to lakemerge", "peak RSS MB"]


# ---- environment ------------------------------------------------------------------------------------------

def machine() -> str:
    model = "unknown cpu"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = ""
    try:
        with open("/proc/meminfo") as f:
            kb = int(f.readline().split()[1])
            mem = f", {kb / 2**20:.0f} GiB RAM"
    except (OSError, ValueError, IndexError):
        pass
    return f"{model}, {os.cpu_count()} cores{mem}, {platform.system()} {platform.release()}"


def versions() -> str:
    parts = [f"python {platform.python_version()}"]
    for p in PACKAGES:
        try:
            parts.append(f"{p} {metadata.version(p)}")
        except metadata.PackageNotFoundError:
            parts.append(f"{p} (not installed)")
    return ", ".join(parts)


# ---- table ----------------------------------------------------------------------------------------------------

def _fmt_s(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}" if x < 10 else f"{x:.1f}"


def _fmt_rate(rows: int, t: float | None) -> str:
    if not t:
        return "-"
    r = rows / t
    return f"{r / 1e6:.2f} M" if r >= 1e6 else f"{r / 1e3:.0f} k"


def table_lines(rows: list[Row]) -> list[list[str]]:
    """Cells per row; the ratio is contender median / the case's lakemerge baseline median."""
    base = {r.case: r for r in rows if r.baseline and r.times}
    out = []
    for r in rows:
        if r.error:
            out.append([r.case, r.contender, "EXCLUDED" if r.error.startswith("EXCLUDED") else "ERROR", "", "", "",
                        ""])
            continue
        b = base.get(r.case)
        ratio = f"{r.median / b.median:.2f}x" if b and r.median else "-"
        if r.baseline:
            ratio = "1.00 (baseline)"
        out.append([r.case, r.contender, _fmt_s(r.best), _fmt_s(r.median), _fmt_rate(r.rows, r.best), ratio,
                    "-" if r.peak_rss_mb is None else f"{r.peak_rss_mb:,.0f}"])
    return out


def render_text(rows: list[Row]) -> str:
    cells = [HEADER] + table_lines(rows)
    widths = [max(len(c[i]) for c in cells) for i in range(len(HEADER))]
    right = {2, 3, 4, 5, 6}

    def fmt(c):
        return "  ".join(c[i].rjust(widths[i]) if i in right else c[i].ljust(widths[i]) for i in range(len(c)))
    lines = [fmt(cells[0]), "  ".join("-" * w for w in widths)]
    prev_case = None
    for c in cells[1:]:
        if prev_case is not None and c[0] != prev_case:
            lines.append("")
        prev_case = c[0]
        lines.append(fmt(c))
    return "\n".join(lines)


def render_markdown(rows: list[Row]) -> str:
    lines = ["| " + " | ".join(HEADER) + " | threads |",
             "|" + "|".join(["---", "---"] + ["---:"] * 5 + ["---"]) + "|"]
    for r, c in zip(rows, table_lines(rows)):
        lines.append("| " + " | ".join(c) + f" | {r.threads} |")
    return "\n".join(lines)


def notes_text(rows: list[Row]) -> list[str]:
    out = []
    for r in rows:
        if r.error:
            out.append(f"{r.case} / {r.contender}: ERROR: {r.error}")
        elif r.note:
            out.append(f"{r.case} / {r.contender} [threads: {r.threads}; {len(r.times)} timed runs]: {r.note}")
    return out


def breakdown(rows: list[Row]) -> list[str]:
    """Computed observations: where lakemerge's time goes, and who is faster than lakemerge."""
    by = {(r.case, r.contender): r for r in rows if r.times and not r.error}
    out = []
    e2e = by.get(("merge in memory", "lakemerge: encode + kernel + gather"))
    parts = {p: by.get(("merge in memory", f"lakemerge: {p} only")) for p in ("encode", "kernel", "gather")}
    if e2e and all(parts.values()):
        total = sum(parts[p].median for p in parts)
        out.append("lakemerge in-memory merge, share of the end-to-end median: " + ", ".join(
            f"{p} {parts[p].median:.3f} s ({100 * parts[p].median / total:.0f}%)" for p in parts))
    for case in dict.fromkeys(r.case for r in rows):
        base = next((r for r in rows if r.case == case and r.baseline and r.times), None)
        if not base:
            continue
        faster = [f"{r.contender} ({base.median / r.median:.2f}x faster)" for r in rows
                  if r.case == case and not r.contender.startswith("lakemerge") and r.times
                  and r.median < base.median]
        if faster:
            out.append(f"{case}: faster than {base.contender}: " + ", ".join(faster))
    return out


def write_results_md(rows: list[Row], header_lines: list[str], command: str, observations: str = "") -> str:
    date = _dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    body = [
        "# lakemerge benchmarks",
        "",
        f"Command: `{command}`  ",
        f"Date: {date}  ",
        f"Machine: {machine()}  ",
        f"Versions: {versions()}",
        "",
        *[f"- {h}" for h in header_lines if not h.startswith(("machine:", "versions:"))],
        "",
        render_markdown(rows),
        "",
        "Columns: best / median of the timed runs in seconds; rows/s = input rows (all runs) / best time; ratio to "
        "lakemerge = contender median / lakemerge median of the same case (> 1: lakemerge is faster); peak RSS = "
        "the worker process's maximum resident set (ru_maxrss), which includes the input data it holds (about "
        "570 MB right after loading for the merge cases). Each contender runs in its own process; in-memory and "
        "kernel contenders get one thread, "
        "table contenders their default threading on this 2-core machine. A table contender whose ingest + read "
        "took longer than --slow-limit (120 s) is timed once.",
        "",
        "Notes per line (errors in full):",
        "",
        *[f"- {n}" for n in notes_text(rows) + breakdown(rows)],
        "",
    ]
    if observations:
        body += ["## Observations", "", observations.strip(), ""]
    text = "\n".join(body)
    with open(RESULTS_MD, "w") as f:
        f.write(text)
    return RESULTS_MD


def command_line() -> str:
    exe = os.path.basename(sys.executable) if sys.executable else "python"
    return " ".join([exe if exe.startswith("python") else "python", "-m", "benchmarks", *sys.argv[1:]])
