"""Reading one split (all files of a bucket) as merged rows.

Contract: ``SplitReader.read`` returns, for each key in the split, its records merged by the table's merge engine
in merge order (paimon-semantics §2.3, §6; every level of the split, level 0 included) unless the merged record is
a retract (-U/-D), projected to the requested columns. Rows a deletion vector marks deleted are never read. A
deletion-vector table's split whose files are all above level 0 without retract rows holds each key once and is
read without merging, as Paimon reads it (raw convertible). ``batch_view`` gives the split a batch read sees (level
0 hidden in deletion-vector mode). Files are checked against their manifest size first; a missing, truncated or
unreadable file raises ``CorruptFile`` naming it (fail closed: never a partial answer), unless the reader was given
``FileSkips`` (engine.read.file_skips: user reads with ``scan.ignore-corrupt-files`` / ``scan.ignore-lost-files``),
which then reads such a file as holding only the rows decoded before the failure (``rows_before_failure``), or
none; a merge read merges them with the other runs, as Paimon's merge goes on with the part of the run it read.
"""
from __future__ import annotations

import dataclasses
import logging

import pyarrow as pa
import pyarrow.parquet as pq

from engine.data_paths import data_file_path
from engine.deletion_vectors.index_file import read_deletion_vector
from engine.deletion_vectors.maintainer import drop_deleted
from engine.errors import CorruptFile, SchemaMismatch, StorageError, UnsupportedFeature
from engine.io.file_io import FileIO
from engine.merge import KEY_COLUMN_PREFIX, merge_runs
from engine.meta import binary_row
from engine.meta.data_file import DataFileMeta
from engine.read.file_skips import FileSkips
from engine.read.scan import Split
from engine.schema import KEY_FIELD_PREFIX, SEQUENCE_NUMBER, VALUE_KIND, TableSchema
from engine.types import evolve_nested, fit_length
from engine.write.formats import PAIMON_FORMATS

RETRACT_KINDS = pa.array([1, 3], pa.int8())


def read_data_file(io: FileIO, path: str, meta: DataFileMeta, choose_columns=None) -> pa.Table:
    """Read a data file (parquet, orc or avro) through ``io``; ``choose_columns(names in file)`` picks the columns
    (None: every column, in file order).
    Raises CorruptFile (missing, size differs from the manifest, undecodable); StorageError for I/O failures."""
    if choose_columns is None:
        def choose_columns(_present):
            return None
    try:
        data = io.read_bytes(path)
    except FileNotFoundError:
        raise CorruptFile(path, "data file referenced by the snapshot is missing") from None
    if len(data) != meta.file_size:
        raise CorruptFile(path, f"file has {len(data)} bytes but the manifest records {meta.file_size}")
    fmt = meta.file_name.rsplit(".", 1)[-1].lower()
    try:
        if fmt == "parquet":
            pf = pq.ParquetFile(pa.BufferReader(data), page_checksum_verification=True)
            table = pf.read(columns=choose_columns(set(pf.schema_arrow.names)), use_threads=False)
        elif fmt == "orc":
            import pyarrow.orc as orc
            f = orc.ORCFile(pa.BufferReader(data))
            table = f.read(columns=choose_columns(set(f.schema.names)))
        elif fmt == "avro":
            from engine.read.avro_file import read_avro
            try:
                table = read_avro(data, choose_columns)
            except Exception as e:  # noqa: BLE001 - fastavro reports damage as IndexError, EOFError, codec errors...
                raise CorruptFile(path, f"undecodable Avro data: {type(e).__name__}: {e}") from None
        elif fmt in PAIMON_FORMATS:
            raise UnsupportedFeature(f"data file {path}: lakemerge cannot read {fmt} data files")
        else:
            raise CorruptFile(path, f"unknown data file format {fmt!r}")
    except (CorruptFile, UnsupportedFeature):
        raise
    except (OSError, pa.ArrowException, ValueError) as e:
        raise CorruptFile(path, str(e)) from None
    if table.num_rows != meta.row_count:
        raise CorruptFile(path, f"file has {table.num_rows} rows but the manifest records {meta.row_count}")
    return table


READ_BATCH_ROWS = 1024  # Paimon's read.batch-size default: the rows of one batch its vectorized readers return


def rows_before_failure(io: FileIO, path: str, meta: DataFileMeta, choose_columns=None) -> pa.Table | None:
    """The rows of a data file that fails to decode part-way which Paimon's DataFileRecordReader keeps under
    ``scan.ignore-corrupt-files``: those of the batches read before the failing one (its readBatch then ends the
    file). Batches are ``READ_BATCH_ROWS`` rows of a Parquet row group (the rest of the group when fewer: a batch
    never spans two groups, as Paimon's VectorizedParquetRecordReader; a batch is only returned whole), an ORC stripe
    (coarser than Paimon's batches: fewer rows may be kept, never other ones), an Avro block (as Paimon's). None
    when nothing decodes before the failure, when the file cannot be read or its size differs from the manifest
    (Paimon fails to open such a file), and when the whole file decodes (the failure was not part-way: a row
    count that differs from the manifest's) -- the file is then skipped whole."""
    try:
        data = io.read_bytes(path)
    except (OSError, StorageError):
        return None
    if len(data) != meta.file_size:
        return None
    if choose_columns is None:
        def choose_columns(_present):
            return None
    fmt = meta.file_name.rsplit(".", 1)[-1].lower()
    parts: list[pa.Table] = []
    failed = False
    try:
        if fmt == "parquet":
            pf = pq.ParquetFile(pa.BufferReader(data), page_checksum_verification=True)
            chosen = choose_columns(set(pf.schema_arrow.names))
            for group in range(pf.num_row_groups):  # one group at a time: Paimon's batches never span two
                for batch in pf.iter_batches(batch_size=READ_BATCH_ROWS, row_groups=[group], columns=chosen,
                                             use_threads=False):
                    parts.append(pa.Table.from_batches([batch]))
        elif fmt == "orc":
            import pyarrow.orc as orc
            f = orc.ORCFile(pa.BufferReader(data))
            chosen = choose_columns(set(f.schema.names))
            for i in range(f.nstripes):
                parts.append(pa.Table.from_batches([f.read_stripe(i, columns=chosen)]))
        elif fmt == "avro":
            from engine.read.avro_file import read_avro_blocks_before_failure
            return read_avro_blocks_before_failure(data, choose_columns)
        else:
            return None
    except Exception:  # noqa: BLE001 - any decoding failure ends the file, as DataFileRecordReader.readBatch
        failed = True
    if not failed or not parts:
        return None
    return pa.concat_tables(parts)


class SplitReader:
    """Reads the data files of a split, adapting files written under older schemas when ``schema_of`` is given."""
    def __init__(self, io: FileIO, schema: TableSchema, schema_of=None, skips: FileSkips | None = None):
        """``schema_of(schema_id)`` returns an older TableSchema; with it, files written under another schema are
        read by field id (renamed columns found, dropped ones ignored, added ones null, widened ones cast).
        ``skips``: which unreadable data files ``decode`` skips, keeping only the rows decoded before the failure
        (``rows_before_failure``; None: every one raises)."""
        self.io = io
        self.skips = skips
        self.schema = schema
        self.schema_of = schema_of
        self._renames: dict[int, dict[str, str]] = {}
        self.key_names = list(schema.trimmed_primary_keys)
        self.seq_fields = list(schema.table_options.sequence_fields)
        self.descending = schema.table_options.sequence_descending
        self.raw_reads = schema.table_options.deletion_vectors

    def physical_columns(self, columns: list[str], present: set[str]) -> list[str]:
        """Columns to decode. A key column that is also requested as a value column is decoded once: the value
        column holds the same data as ``_KEY_<k>``. Thin-mode files (no ``_KEY_`` columns) carry keys there too."""
        wanted = []
        for k in self.key_names:
            wanted.append(k if (k in columns or KEY_FIELD_PREFIX + k not in present) else KEY_FIELD_PREFIX + k)
        wanted += [SEQUENCE_NUMBER, VALUE_KIND] + self.seq_fields + list(columns)
        return [c for c in dict.fromkeys(wanted) if c in present]

    def read_file(self, split: Split, meta: DataFileMeta, columns: list[str], *, live_only: bool = True) -> pa.Table:
        """One file, normalized to: key columns named by the table's key names, seq, kind, then ``columns``.
        Rows the split's deletion vector of the file marks deleted are dropped unless ``live_only`` is False (then
        row i is the file's row i)."""
        path = self.file_path(split, meta)
        rename = self.file_to_table_names(meta.schema_id)
        raw = self.decode(path, meta, lambda present: self._choose(columns, present, rename))
        if raw is None:
            rows = self._no_rows(columns)
        else:
            rows = self.normalize(raw.rename_columns([rename[c] for c in raw.column_names]), path, columns,
                                  declared=set(rename.values()), schema_id=meta.schema_id)
        return self.live_rows(split, meta, rows, 0) if live_only else rows

    def decode(self, path: str, meta: DataFileMeta, choose_columns) -> pa.Table | None:
        """``read_data_file``; for a file this reader's ``skips`` skip (logged), the rows of the batches that
        decoded before the failure (``rows_before_failure``), or None when there are none. Raises like
        ``read_data_file`` otherwise."""
        try:
            return read_data_file(self.io, path, meta, choose_columns)
        except StorageError as e:
            if self.skips is not None and self.skips.skip(self.io, path, e):
                rows = rows_before_failure(self.io, path, meta, choose_columns)
                if rows is not None:
                    logging.getLogger("lakemerge.read").warning(
                        "kept the %d rows of data file %s read before it failed", rows.num_rows, path)
                return rows
            raise

    def _no_rows(self, columns: list[str]) -> pa.Table:
        """An empty table in ``normalize``'s layout (a skipped file)."""
        arrow = self.schema.arrow_schema
        fields = [pa.field(KEY_COLUMN_PREFIX + k, arrow.field(k).type) for k in self.key_names]
        fields += [pa.field(SEQUENCE_NUMBER, pa.int64()), pa.field(VALUE_KIND, pa.int8())]
        fields += [pa.field(c, arrow.field(c).type) for c in dict.fromkeys(self.seq_fields + list(columns))]
        return pa.schema(fields).empty_table()

    def live_rows(self, split: Split, meta: DataFileMeta, rows: pa.Table, start: int) -> pa.Table:
        """``rows`` (the file's rows ``start``.. in order) without those the split's deletion vector of the file
        marks deleted. Raises CorruptFile for a missing or damaged DV index file."""
        where = split.deletion_file(meta.file_name)
        return rows if where is None else drop_deleted(rows, read_deletion_vector(self.io, where), start)

    def _choose(self, columns: list[str], present: set[str], rename: dict[str, str]) -> list[str]:
        """File column names to decode: ``physical_columns`` matched through the field-id rename map."""
        by_table_name = {rename[c]: c for c in present if c in rename}
        return [by_table_name[c] for c in self.physical_columns(columns, set(by_table_name))]

    def file_path(self, split: Split, meta: DataFileMeta) -> str:
        """The file's local path (engine.data_paths.data_file_path: its external path if set, else its path in the
        split's bucket directory)."""
        return data_file_path(split.bucket_dir, meta)

    def iter_file(self, split: Split, meta: DataFileMeta, columns: list[str], batch_rows: int):
        """Like ``read_file`` (live rows only), but yields the file as normalized tables of at most ``batch_rows`` rows
        (fewer where a deletion vector drops rows), decoding a
        Parquet file a batch at a time (bounded memory: the encoded file plus one batch). Raises CorruptFile like
        ``read_file``."""
        path = self.file_path(split, meta)
        if not meta.file_name.lower().endswith(".parquet"):
            table = self.read_file(split, meta, columns)
            for start in range(0, table.num_rows, batch_rows):
                yield table.slice(start, batch_rows)
            return
        try:
            data = self.io.read_bytes(path)
        except FileNotFoundError:
            raise CorruptFile(path, "data file referenced by the snapshot is missing") from None
        if len(data) != meta.file_size:
            raise CorruptFile(path, f"file has {len(data)} bytes but the manifest records {meta.file_size}")
        rename = self.file_to_table_names(meta.schema_id)
        seen = 0
        try:
            pf = pq.ParquetFile(pa.BufferReader(data), page_checksum_verification=True)
            if pf.metadata.num_rows != meta.row_count:
                raise CorruptFile(path, f"file has {pf.metadata.num_rows} rows but the manifest records "
                                  f"{meta.row_count}")
            wanted = self._choose(columns, set(pf.schema_arrow.names), rename)
            for batch in pf.iter_batches(batch_size=batch_rows, columns=wanted, use_threads=False):
                start, seen = seen, seen + batch.num_rows
                raw = pa.Table.from_batches([batch])
                rows = self.normalize(raw.rename_columns([rename[c] for c in raw.column_names]), path, columns,
                                      declared=set(rename.values()), schema_id=meta.schema_id)
                yield self.live_rows(split, meta, rows, start)
        except CorruptFile:
            raise
        except (OSError, pa.ArrowException, ValueError) as e:
            raise CorruptFile(path, str(e)) from None
        if seen != meta.row_count:
            raise CorruptFile(path, f"file has {seen} rows but the manifest records {meta.row_count}")

    def normalize(self, raw: pa.Table, path: str, columns: list[str], declared: set[str] = frozenset(),
                  schema_id: int | None = None) -> pa.Table:
        """Raw file columns (already renamed to this schema's names) -> the normalized run layout. A column the
        file's schema declares (``declared``, this schema's names) but the file lacks raises CorruptFile: only
        columns added after the file was written read as null."""
        arrow = self.schema.arrow_schema
        out = {}
        for k in self.key_names:
            src = KEY_FIELD_PREFIX + k if KEY_FIELD_PREFIX + k in raw.column_names else k
            if src not in raw.column_names:
                raise CorruptFile(path, f"has neither {KEY_FIELD_PREFIX + k} nor {k}")
            out[KEY_COLUMN_PREFIX + k] = _as_type(raw.column(src), arrow.field(k).type)
        for sys_col, sys_type in ((SEQUENCE_NUMBER, pa.int64()), (VALUE_KIND, pa.int8())):
            if sys_col not in raw.column_names:
                raise CorruptFile(path, f"has no {sys_col} column")
            out[sys_col] = _as_type(raw.column(sys_col), sys_type)  # Avro stores TINYINT as int
        for c in dict.fromkeys(self.seq_fields + list(columns)):
            if c in raw.column_names:
                out[c] = self.as_table_type(raw.column(c), c, schema_id, path)
            elif c in declared:
                raise CorruptFile(path, f"has no column {c!r} although the schema it was written under declares it")
            else:  # a column added after the file was written
                out[c] = pa.nulls(raw.num_rows, arrow.field(c).type)
        return pa.table(out)

    def as_table_type(self, col, name: str, schema_id: int | None, path: str = ""):
        """Column ``name`` (the table's name) of a file written under ``schema_id`` as the table's type; nested
        columns are matched field by field by id (engine.types.evolve_nested), the lengths of character and binary
        values of an older file are fitted to the table's type (engine.types.fit_length). Raises SchemaMismatch
        naming the file and column when the file was written under a newer schema whose wider type holds a value
        this reader's type cannot (a table object or stream opened before a widening, e.g. a merge-schema write)."""
        try:
            return self._cast_to_table_type(col, name, schema_id)
        except pa.ArrowInvalid as e:
            if schema_id is None or schema_id <= self.schema.id:
                raise
            raise SchemaMismatch(
                f"data file {path or '?'} was written under schema {schema_id}, newer than this read's schema "
                f"{self.schema.id}, and its column {name!r} holds a value the read's type "
                f"{self.schema.field(name).type.to_arrow()} cannot ({e}); open the table again to read it",
                column=name) from None

    def _cast_to_table_type(self, col, name: str, schema_id: int | None):
        target = self.schema.field(name).type
        if schema_id is None or schema_id == self.schema.id or self.schema_of is None or not (
                target.is_nested or target.root in ("CHAR", "VARCHAR", "BINARY", "VARBINARY")):
            return _as_type(col, target.to_arrow())
        fid = self.schema.field(name).id
        src = next((f.type for f in self.schema_of(schema_id).fields if f.id == fid), None)
        if src is None or src == target:
            return _as_type(col, target.to_arrow())
        # a file older than the read's schema reads through Java's cast (a CHAR lengthened since reads padded); a
        # newer one (a reader opened before the change) keeps its values
        older = schema_id < self.schema.id
        if target.is_nested:
            return evolve_nested(col, src, target, fit_lengths=older)
        col = _as_type(col, target.to_arrow())
        return fit_length(col, src, target) if older else col

    def file_to_table_names(self, schema_id: int) -> dict[str, str]:
        """Column name in a file written under ``schema_id`` -> this table's name for it, matched by field id
        (system columns map to themselves; columns of dropped fields are absent)."""
        cached = self._renames.get(schema_id)
        if cached is None:
            file_schema = self.schema
            if schema_id != self.schema.id and self.schema_of is not None:
                file_schema = self.schema_of(schema_id)
            now = {f.id: f.name for f in self.schema.fields}
            cached = {SEQUENCE_NUMBER: SEQUENCE_NUMBER, VALUE_KIND: VALUE_KIND}
            for f in file_schema.fields:
                if f.id in now:
                    cached[f.name] = now[f.id]
                    cached[KEY_FIELD_PREFIX + f.name] = KEY_FIELD_PREFIX + now[f.id]
            self._renames[schema_id] = cached
        return cached

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
            files.sort(key=lambda f: binary_row.order_key(binary_row.deserialize_row(f.min_key, key_types),
                                                          key_types))
            runs.append(files)
        return runs

    def read(self, split: Split, columns: list[str], *, with_kind: bool = False,
             keep_retracts: bool = False) -> pa.Table:
        """Merged live rows of the split projected to ``columns``, in no particular order. Every column the
        merge engine needs is decoded (``required_columns``); defaults (``fields.<f>.default-value``) fill nulls.
        ``with_kind`` appends the merged records' ``_VALUE_KIND`` (issue 5, audit_log); ``keep_retracts`` also
        returns keys whose merged record is a retract (-U/-D), as Paimon's reads with ``forceKeepDelete`` do."""
        from engine.merge_engines import apply_default_values, required_columns
        if self._raw_readable(split):
            rows = pa.concat_tables([self.read_file(split, f, list(columns)) for f in split.files])
            out = apply_default_values(rows.select(list(columns)), self.schema)
            return out.append_column(VALUE_KIND, rows.column(VALUE_KIND)) if with_kind else out
        decode = required_columns(self.schema, columns)
        runs = self.runs(split)
        tables = [pa.concat_tables([self.read_file(split, f, decode) for f in run]) for run in runs]
        if _lookup_merge(self.schema) and sum(1 for run in runs if run[0].level > 0) > 1:
            # a level of a lookup-compaction table holds each key's full state, so (as Paimon's
            # LookupMergeFunction) only the newest record from levels > 0 joins the level-0 records
            from engine.changelog.producers import newest_per_key
            high = newest_per_key([t for t, run in zip(tables, runs) if run[0].level > 0], self.schema)
            tables = [t for t, run in zip(tables, runs) if run[0].level == 0] + ([high] if high is not None else [])
        if split.postponed is not None:  # postpone.merge-on-read: the bucket's postponed records, newest
            from engine.postpone.merge_on_read import postponed_run
            extra = postponed_run(self, split, decode)
            if extra is not None:
                tables.append(extra)
        merged = merge_runs(tables, self.schema, project=list(columns),  # consumes tables: frees inputs early
                            drop_retracts=not keep_retracts)
        if merged is None:
            empty = self.schema.arrow_schema.empty_table().select(list(columns))
            return empty.append_column(VALUE_KIND, pa.array([], pa.int8())) if with_kind else empty
        out = apply_default_values(merged.select(list(columns)), self.schema)
        return out.append_column(VALUE_KIND, merged.column(VALUE_KIND)) if with_kind else out


    def _raw_readable(self, split: Split) -> bool:
        """Deletion-vector tables keep one live record per key above level 0 and drop retracts there: such a split
        with no level-0 file and no retract row is read file by file (Paimon's raw-convertible split)."""
        return self.raw_reads and bool(split.files) and split.postponed is None \
            and all(f.level > 0 and f.delete_row_count == 0 for f in split.files)


def batch_view(split: Split, schema: TableSchema) -> Split:
    """The split a batch read sees: in deletion-vector mode level-0 files stay invisible until compaction moves them
    up (unless ``deletion-vectors.merge-on-read``), as in Paimon's batch scans; otherwise the split itself. Streaming
    and changelog reads, compaction and lookups by writers see every level."""
    from engine.options import DELETION_VECTORS_MERGE_ON_READ
    opts = schema.table_options
    if not opts.deletion_vectors or opts.get(DELETION_VECTORS_MERGE_ON_READ) or schema.is_append_only \
            or all(f.level > 0 for f in split.files):
        return split
    return dataclasses.replace(split, files=tuple(f for f in split.files if f.level > 0))


def batch_splits(splits, schema: TableSchema) -> list[Split]:
    """``batch_view`` of each split, without the splits it leaves empty and without the postpone bucket's (a batch
    read of a ``bucket = -2`` table sees only real buckets, as Paimon's; engine.postpone)."""
    from engine.postpone import real_bucket_splits
    views = [batch_view(sp, schema) for sp in real_bucket_splits(splits)]
    return [sp for sp in views if sp.files]


def batch_read_splits(splits, schema: TableSchema) -> list[Split]:
    """What a batch read of the rows merges: ``batch_splits``, and with ``postpone.merge-on-read`` the real-bucket
    splits at every level (no ``batch_view``: Paimon's PostponeMergeReadBuilder plans them with a plain snapshot
    reader, which keeps the level-0 files a deletion-vector batch scan skips) with the postponed records attached to
    the splits of their buckets (engine.postpone.merge_on_read)."""
    from engine.postpone import real_bucket_splits
    from engine.postpone.merge_on_read import attach_postponed, merges_on_read
    if not merges_on_read(schema):
        return batch_splits(splits, schema)
    return attach_postponed(splits, real_bucket_splits(splits))


def with_schema(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` (same column order) with ``schema``'s fields. Columns whose type already matches are kept without a
    copy (``Table.cast`` copies every buffer even when only nullability differs); the others are cast."""
    if table.schema.equals(schema):
        return table
    columns = [c if c.type.equals(f.type) else c.cast(f.type) for c, f in zip(table.columns, schema)]
    return pa.Table.from_arrays(columns, schema=schema)


def _as_type(col, target: pa.DataType):
    """``col`` as the table's Arrow type ``target``: a file may store a type in another physical form (BINARY(n) as
    fixed_size_binary, TIMESTAMP(0) as milliseconds, ORC TIME as int32, widened columns of older schemas). NOT NULL
    fields nested in ``target`` are taken as declared: a reader may drop nested nullability (pyarrow's ORC reader
    does), and Arrow refuses to cast a nullable field to a NOT NULL one."""
    if col.type.equals(target):
        return col
    relaxed = _nested_nullable(target)
    if relaxed.equals(target):
        return col.cast(target)
    col = col if col.type.equals(relaxed) else col.cast(relaxed)
    if isinstance(col, pa.ChunkedArray):
        return pa.chunked_array([_retyped(c, target) for c in col.chunks], target)
    return _retyped(col, target)


def _retyped(arr: pa.Array, target: pa.DataType) -> pa.Array:
    """``arr`` (of ``target``'s layout with nested fields nullable) typed as ``target``, sharing its buffers
    (``Array.view`` refuses nulls under a null parent, which is how pyarrow's ORC reader returns them)."""
    if arr.offset:
        arr = pa.concat_arrays([arr])
    bufs = arr.buffers()
    if pa.types.is_struct(target):
        children = [_retyped(arr.field(i), f.type) for i, f in enumerate(target)]
        return pa.Array.from_buffers(target, len(arr), bufs[:1], arr.null_count, 0, children)
    if pa.types.is_map(target):
        entries = pa.struct([target.key_field, target.item_field])
        return pa.Array.from_buffers(target, len(arr), bufs[:2], arr.null_count, 0, [_retyped(arr.values, entries)])
    if pa.types.is_list(target) or pa.types.is_large_list(target):
        return pa.Array.from_buffers(target, len(arr), bufs[:2], arr.null_count, 0,
                                     [_retyped(arr.values, target.value_type)])
    return arr


def _nested_nullable(t: pa.DataType) -> pa.DataType:
    """``t`` with every nested field nullable (same physical layout)."""
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _nested_nullable(f.type), True) for f in t])
    if pa.types.is_map(t):
        return pa.map_(pa.field("key", _nested_nullable(t.key_type), False),
                       pa.field("value", _nested_nullable(t.item_type), True))
    if pa.types.is_list(t):
        return pa.list_(pa.field(t.value_field.name, _nested_nullable(t.value_type), True))
    if pa.types.is_large_list(t):
        return pa.large_list(pa.field(t.value_field.name, _nested_nullable(t.value_type), True))
    return t


def _lookup_merge(schema: TableSchema) -> bool:
    """Tables whose levels hold full states (lookup compaction: changelog-producer=lookup, deletion vectors,
    force-lookup) with an engine that folds records."""
    opts = schema.table_options
    return opts.lookup_compaction and opts.merge_engine in ("partial-update", "aggregation")
