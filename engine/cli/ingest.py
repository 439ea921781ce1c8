"""``lakemerge ingest``: stream Parquet, CSV and JSON-lines files into a table in one commit.

Contract: every file is read in batches (bounded memory per file besides the table writer's buffer); rows are
upserts (+I) unless a row-kind column gives +I/-U/+U/-D per row, or ``delete=True`` makes every row a delete of its
key. All files land in ONE snapshot, or, if anything fails (unreadable file, a row that does not fit the table),
nothing is committed and the written data files are removed. Raises InvalidInput / SchemaMismatch naming the file.
"""
from __future__ import annotations

import io
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pyarrow as pa

from engine.errors import InvalidInput, LakemergeError

FORMATS = ("parquet", "csv", "json")
_EXTENSIONS = {".parquet": "parquet", ".pq": "parquet", ".parq": "parquet", ".csv": "csv", ".tsv": "csv",
               ".json": "json", ".jsonl": "json", ".ndjson": "json"}
BLOCK_BYTES = 16 << 20
BATCH_ROWS = 256 * 1024


def detect_format(path: str, explicit: str | None = None) -> str:
    """The file format of ``path``: ``explicit`` if given, else from the extension (.gz etc. not supported).
    Raises InvalidInput for an unknown extension."""
    if explicit:
        return explicit
    ext = os.path.splitext(path)[1].lower()
    fmt = _EXTENSIONS.get(ext)
    if fmt is None:
        raise InvalidInput(f"{path}: cannot tell the file format from {ext or 'no extension'!r}; "
                           f"pass --format ({'/'.join(FORMATS)})")
    return fmt


def expand_paths(paths: list[str], fmt: str | None = None) -> list[str]:
    """Files to ingest: each file as given; each directory replaced by the data files directly inside it, in name
    order (a Spark/Hive output directory: ``part-*.parquet``), skipping hidden and ``_``-prefixed files such as
    ``_SUCCESS``. Raises InvalidInput for a directory without data files."""
    out = []
    for path in paths:
        if not os.path.isdir(path):
            out.append(path)
            continue
        found = [os.path.join(path, n) for n in sorted(os.listdir(path))
                 if not n.startswith((".", "_")) and os.path.isfile(os.path.join(path, n))
                 and (fmt is not None or os.path.splitext(n)[1].lower() in _EXTENSIONS)]
        if not found:
            raise InvalidInput(f"{path}: directory holds no data files ({', '.join(sorted(_EXTENSIONS))})")
        out.extend(found)
    return out


def read_batches(path: str, fmt: str, types: dict[str, pa.DataType],
                 on_bytes: Callable[[int], None] = lambda n: None) -> Iterator[pa.Table]:
    """Yield the file as a sequence of Arrow tables. ``types`` (column -> type) guides CSV parsing of columns that
    the file has; ``on_bytes(n)`` is told about each ``n`` bytes consumed. Raises InvalidInput naming the file."""
    try:
        if fmt == "parquet":
            yield from _parquet(path, on_bytes)
        elif fmt == "csv":
            yield from _csv(path, types, on_bytes)
        elif fmt == "json":
            yield from _json_lines(path, types, on_bytes)
        else:
            raise InvalidInput(f"{path}: unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    except LakemergeError:
        raise
    except (pa.ArrowException, OSError, ValueError) as e:
        raise InvalidInput(f"{path}: cannot read as {fmt}: {e}") from None


def _parquet(path: str, on_bytes) -> Iterator[pa.Table]:
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(path)
    size = os.path.getsize(path)
    total = max(pf.metadata.num_rows, 1)
    done = 0
    for batch in pf.iter_batches(batch_size=BATCH_ROWS, use_threads=False):
        before = size * done // total
        done += batch.num_rows
        on_bytes(size * done // total - before)
        yield pa.Table.from_batches([batch])
    if pf.metadata.num_rows == 0:
        on_bytes(size)


def _csv(path: str, types: dict[str, pa.DataType], on_bytes) -> Iterator[pa.Table]:
    from pyarrow import csv

    delimiter = "\t" if path.lower().endswith(".tsv") else ","
    with open(path, "rb") as fh:
        reader = csv.open_csv(fh, read_options=csv.ReadOptions(block_size=BLOCK_BYTES),
                              parse_options=csv.ParseOptions(delimiter=delimiter),
                              convert_options=csv.ConvertOptions(column_types=types, strings_can_be_null=True))
        seen = 0
        for batch in reader:
            pos = fh.tell()
            on_bytes(pos - seen)
            seen = pos
            yield pa.Table.from_batches([batch])
        on_bytes(os.path.getsize(path) - seen)


def _json_lines(path: str, types: dict[str, pa.DataType], on_bytes) -> Iterator[pa.Table]:
    """JSON lines read in blocks of whole lines, each parsed on its own. Types are inferred per block (and
    conformed to the table by the writer), except that columns the table holds as strings are parsed as strings:
    inference would turn '2024-01-02' into a timestamp."""
    import pyarrow.json as pj

    def parse(block: bytes) -> pa.Table:
        inferred = pj.read_json(io.BytesIO(block))
        fix = [pa.field(n, pa.string()) for n in inferred.column_names
               if n in types and pa.types.is_string(types[n]) and not pa.types.is_string(inferred.schema.field(n).type)
               and not pa.types.is_null(inferred.schema.field(n).type)]
        if not fix:
            return inferred
        return pj.read_json(io.BytesIO(block), parse_options=pj.ParseOptions(explicit_schema=pa.schema(fix)))

    with open(path, "rb") as fh:
        rest = b""
        while True:
            chunk = fh.read(BLOCK_BYTES)
            data = rest + chunk
            if not chunk:
                block, rest = data, b""
            else:
                cut = data.rfind(b"\n")
                if cut < 0:
                    rest = data
                    continue
                block, rest = data[: cut + 1], data[cut + 1:]
            if block.strip():
                yield parse(block)
            on_bytes(len(chunk))
            if not chunk:
                break


def widen_for_decimals(batch: pa.Table, types: dict[str, pa.DataType]) -> pa.Table:
    """Prepare inferred numbers for decimal columns: integers become decimal(38, s) and floats go through their
    shortest text (so 2.675 stays 2.675); the writer's safe cast then checks precision and scale exactly."""
    for i, name in enumerate(batch.column_names):
        target = types.get(name)
        if target is None or not pa.types.is_decimal(target):
            continue
        col = batch.column(i)
        if pa.types.is_integer(col.type):
            batch = batch.set_column(i, name, col.cast(pa.decimal128(38, target.scale)))
        elif pa.types.is_floating(col.type):
            batch = batch.set_column(i, name, col.cast(pa.string()))
    return batch


@dataclass
class IngestResult:
    """What ``ingest`` did: snapshot id (None if nothing was written), rows and bytes read, elapsed seconds."""
    table: str
    snapshot_id: int | None
    rows: int
    files: int
    bytes: int
    seconds: float

    def as_dict(self) -> dict:
        """Return the result as a JSON-ready dict (seconds rounded to milliseconds)."""
        return {"table": self.table, "snapshot_id": self.snapshot_id, "rows": self.rows, "files": self.files,
                "bytes": self.bytes, "seconds": round(self.seconds, 3)}


def ingest(table, paths: list[str], *, fmt: str | None = None, row_kind_column: str | None = None,
           delete: bool = False, progress=None) -> IngestResult:
    """Write every row of ``paths`` into ``table`` in one commit (see the module docstring).

    ``progress``, if given, is called as ``progress(rows=dn, bytes=dn, file=path)`` while reading.
    """
    started = time.perf_counter()
    paths = expand_paths(paths, fmt)
    schema = table.arrow_schema
    types = {f.name: f.type for f in schema}
    if row_kind_column is not None and row_kind_column not in types:
        types[row_kind_column] = pa.string()
    report = progress or (lambda **kw: None)
    rows = nbytes = 0
    with table.new_write() as writer:
        for path in paths:
            file_fmt = detect_format(path, fmt)

            def on_bytes(n, _path=path):
                nonlocal nbytes
                nbytes += n
                report(rows=0, bytes=n, file=_path)

            for batch in read_batches(path, file_fmt, types, on_bytes):
                batch = widen_for_decimals(batch, types)
                kinds = None
                if row_kind_column is not None:
                    if row_kind_column not in batch.column_names:
                        raise InvalidInput(f"{path}: has no row-kind column {row_kind_column!r}",
                                           table=table.name, column=row_kind_column)
                    kinds = batch.column(row_kind_column)
                    if row_kind_column not in schema.names:
                        batch = batch.drop_columns([row_kind_column])
                try:
                    if delete:
                        writer.delete(batch)
                    else:
                        writer.write(batch, row_kinds=kinds)
                except InvalidInput as e:
                    raise type(e)(f"{path}: {e}", column=getattr(e, "column", None)) from None
                rows += batch.num_rows
                report(rows=batch.num_rows, bytes=0, file=path)
        messages = writer.prepare_commit()
    # Committed outside the writer: a commit whose outcome is unknown must not have its files removed.
    snapshot_id = table.commit(messages) if messages else None
    return IngestResult(table.name, snapshot_id, rows, len(paths), nbytes, time.perf_counter() - started)
