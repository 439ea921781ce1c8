"""Table columns for ``lakemerge create``: from Paimon SQL type text, or from a data file's Arrow schema."""
from __future__ import annotations

import re

import pyarrow as pa

from engine.errors import InvalidSchema

_COLUMN = re.compile(r"^\s*(`[^`]+`|[A-Za-z_][A-Za-z0-9_]*)\s+(.+?)\s*$", re.DOTALL)


def _split_top_level(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "(<":
            depth += 1
        elif ch in ")>":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p for p in parts if p.strip()]


def parse_schema(text: str) -> pa.Schema:
    """``"id BIGINT NOT NULL, name STRING, price DECIMAL(10, 2)"`` -> Arrow schema with Paimon's mapping of each
    atomic type. Raises InvalidSchema naming the column whose definition cannot be read."""
    from engine.types import parse_atomic

    fields = []
    for part in _split_top_level(text):
        m = _COLUMN.match(part)
        if not m:
            raise InvalidSchema(f"--schema: cannot read column definition {part.strip()!r}; expected 'name TYPE'")
        name, type_text = m.group(1).strip("`"), m.group(2)
        try:
            dtype = parse_atomic(type_text)
        except InvalidSchema as e:
            raise InvalidSchema(f"--schema: column {name!r}: {e}") from None
        fields.append(pa.field(name, dtype.to_arrow(), nullable=dtype.nullable))
    if not fields:
        raise InvalidSchema("--schema has no columns")
    return pa.schema(fields)


def arrow_schema_of_file(path: str, fmt: str | None = None) -> pa.Schema:
    """The Arrow schema of a Parquet file, or as inferred from the first block of a CSV / JSON-lines file.
    Raises InvalidInput naming the file."""
    from engine.cli.ingest import detect_format, read_batches

    fmt = detect_format(path, fmt)
    if fmt == "parquet":
        import pyarrow.parquet as pq

        from engine.errors import InvalidInput
        try:
            return pq.ParquetFile(path).schema_arrow
        except (pa.ArrowException, OSError) as e:
            raise InvalidInput(f"{path}: cannot read as parquet: {e}") from None
    for batch in read_batches(path, fmt, {}):
        return batch.schema
    raise InvalidSchema(f"{path}: file is empty; cannot infer columns")
