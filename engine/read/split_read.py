"""Reading one split (all files of a bucket) as merged rows.

Contract: ``SplitReader.read`` returns, for each key in the split, the newest record by merge order
(paimon-semantics §2.3) unless that record is a retract (-U/-D), projected to the requested columns. Files are
checked against their manifest size first; a missing, truncated or unreadable file raises ``CorruptFile`` naming
it (fail closed: never a partial answer).
"""
from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq

from engine.errors import CorruptFile
from engine.io.file_io import FileIO
from engine.merge import KEY_COLUMN_PREFIX, merge_runs
from engine.meta import binary_row
from engine.meta.data_file import DataFileMeta
from engine.read.scan import Split
from engine.schema import KEY_FIELD_PREFIX, SEQUENCE_NUMBER, VALUE_KIND, TableSchema

RETRACT_KINDS = pa.array([1, 3], pa.int8())


def read_data_file(io: FileIO, path: str, meta: DataFileMeta, choose_columns) -> pa.Table:
    """Read a data file (parquet, orc or avro); ``choose_columns(names in file)`` picks the columns.
    Raises CorruptFile."""
    try:
        size = io.size(path)
    except FileNotFoundError:
        raise CorruptFile(path, "data file referenced by the snapshot is missing") from None
    if size != meta.file_size:
        raise CorruptFile(path, f"file has {size} bytes but the manifest records {meta.file_size}")
    fmt = meta.file_name.rsplit(".", 1)[-1].lower()
    try:
        if fmt == "parquet":
            pf = pq.ParquetFile(path, page_checksum_verification=True)
            table = pf.read(columns=choose_columns(set(pf.schema_arrow.names)), use_threads=False)
        elif fmt == "orc":
            import pyarrow.orc as orc
            f = orc.ORCFile(path)
            table = f.read(columns=choose_columns(set(f.schema.names)))
        elif fmt == "avro":
            import fastavro
            with open(path, "rb") as fh:
                records = list(fastavro.reader(fh))
            table = pa.Table.from_pylist(records) if records else pa.table({})
            table = table.select(choose_columns(set(table.column_names)))
        else:
            raise CorruptFile(path, f"unknown data file format {fmt!r}")
    except CorruptFile:
        raise
    except (OSError, pa.ArrowException, ValueError) as e:
        raise CorruptFile(path, str(e)) from None
    if table.num_rows != meta.row_count:
        raise CorruptFile(path, f"file has {table.num_rows} rows but the manifest records {meta.row_count}")
    return table


class SplitReader:
    def __init__(self, io: FileIO, schema: TableSchema):
        self.io = io
        self.schema = schema
        self.key_names = list(schema.trimmed_primary_keys)
        self.seq_fields = list(schema.table_options.sequence_fields)
        self.descending = schema.table_options.sequence_descending

    def physical_columns(self, columns: list[str], present: set[str]) -> list[str]:
        """Columns to decode. A key column that is also requested as a value column is decoded once: the value
        column holds the same data as ``_KEY_<k>``. Thin-mode files (no ``_KEY_`` columns) carry keys there too."""
        wanted = []
        for k in self.key_names:
            wanted.append(k if (k in columns or KEY_FIELD_PREFIX + k not in present) else KEY_FIELD_PREFIX + k)
        wanted += [SEQUENCE_NUMBER, VALUE_KIND] + self.seq_fields + list(columns)
        return [c for c in dict.fromkeys(wanted) if c in present]

    def read_file(self, split: Split, meta: DataFileMeta, columns: list[str]) -> pa.Table:
        """One file, normalized to: key columns named by the table's key names, seq, kind, then ``columns``."""
        path = os.path.join(split.bucket_dir, meta.file_name) if meta.external_path is None else meta.external_path
        raw = read_data_file(self.io, path, meta, lambda present: self.physical_columns(columns, present))
        arrow = self.schema.arrow_schema
        out = {}
        for k in self.key_names:
            src = KEY_FIELD_PREFIX + k if KEY_FIELD_PREFIX + k in raw.column_names else k
            if src not in raw.column_names:
                raise CorruptFile(path, f"has neither {KEY_FIELD_PREFIX + k} nor {k}")
            out[KEY_COLUMN_PREFIX + k] = raw.column(src)
        for sys_col in (SEQUENCE_NUMBER, VALUE_KIND):
            if sys_col not in raw.column_names:
                raise CorruptFile(path, f"has no {sys_col} column")
            out[sys_col] = raw.column(sys_col)
        for c in dict.fromkeys(self.seq_fields + list(columns)):
            if c in raw.column_names:
                col = raw.column(c)
                target = arrow.field(c).type
                out[c] = col if col.type.equals(target) else col.cast(target)
            else:  # a column added after the file was written
                out[c] = pa.nulls(raw.num_rows, arrow.field(c).type)
        return pa.table(out)

    def runs(self, split: Split) -> list[list[DataFileMeta]]:
        """Sorted runs: every level-0 file alone; each higher level is one run ordered by min key."""
        key_types = self.schema.types_of(self.key_names)
        by_level: dict[int, list[DataFileMeta]] = {}
        runs = []
        for f in split.files:
            if f.level == 0:
                runs.append([f])
            else:
                by_level.setdefault(f.level, []).append(f)
        for level in sorted(by_level):
            files = by_level[level]
            files.sort(key=lambda f: _sort_key(binary_row.deserialize_row(f.min_key, key_types)))
            runs.append(files)
        return runs

    def read(self, split: Split, columns: list[str], *, with_kind: bool = False) -> pa.Table:
        """Merged live rows of the split projected to ``columns``, in no particular order. Every column the
        merge engine needs is decoded (``required_columns``); defaults (``fields.<f>.default-value``) fill nulls.
        ``with_kind`` appends the merged records' ``_VALUE_KIND`` (issue 5, audit_log)."""
        from engine.merge_engines import apply_default_values, required_columns
        decode = required_columns(self.schema, columns)
        runs = self.runs(split)
        tables = [pa.concat_tables([self.read_file(split, f, decode) for f in run]) for run in runs]
        if _lookup_merge(self.schema) and sum(1 for run in runs if run[0].level > 0) > 1:
            # issue 5: with changelog-producer=lookup a level holds each key's full state, so (as Paimon's
            # LookupMergeFunction) only the newest record from levels > 0 joins the level-0 records
            from engine.changelog.producers import newest_per_key
            high = newest_per_key([t for t, run in zip(tables, runs) if run[0].level > 0], self.schema)
            tables = [t for t, run in zip(tables, runs) if run[0].level == 0] + ([high] if high is not None else [])
        merged = merge_runs(tables, self.schema)
        if merged is None:
            empty = self.schema.arrow_schema.empty_table().select(list(columns))
            return empty.append_column(VALUE_KIND, pa.array([], pa.int8())) if with_kind else empty
        out = apply_default_values(merged.select(list(columns)), self.schema)
        return out.append_column(VALUE_KIND, merged.column(VALUE_KIND)) if with_kind else out


def _sort_key(values: list):
    return tuple((v is not None, v) for v in values)


def _lookup_merge(schema: TableSchema) -> bool:
    """Tables whose levels hold full states (changelog-producer=lookup) with an engine that folds records."""
    from engine.options import CHANGELOG_PRODUCER
    opts = schema.table_options
    return opts.get(CHANGELOG_PRODUCER) == "lookup" and opts.merge_engine in ("partial-update", "aggregation")
