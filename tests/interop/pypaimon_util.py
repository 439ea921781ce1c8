"""Helpers around pypaimon 2.1.0, the interop oracle.

Everything here uses only pypaimon and pyarrow, never lakemerge, so it can be checked on its own.

pypaimon facts these helpers rely on (verified by running 2.1.0):
* time travel: ``table.copy({"scan.snapshot-id": "N"})`` returns a table pinned to snapshot N; its read
  builder then plans and reads that snapshot (pypaimon resolves the option in
  ``FileStoreTable._try_time_travel`` / ``TimeTravelUtil``).
* bucket choice: ``pypaimon.write.row_key_extractor.FixedBucketRowKeyExtractor(table.table_schema)``;
  ``extract_partition_bucket_batch(batch)`` gives (partition tuple, bucket) per row.
* partition directory: ``table.path_factory().relative_bucket_path(partition, bucket, canonical_partition=True)``
  (Java's escaped names; pypaimon's writer and reader both use the canonical form).
* primary-key columns become NOT NULL in the Paimon schema, so pypaimon's read returns them as non-nullable
  Arrow fields. Compare rows, not nullability.
"""
from __future__ import annotations

import os
from typing import Iterable, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

DB = "db"


# --------------------------------------------------------------------------------------------------------
# catalog / table
# --------------------------------------------------------------------------------------------------------
def pp_catalog(warehouse: str, database: str = DB):
    """A pypaimon filesystem catalog on ``warehouse`` with ``database`` created (if missing)."""
    from pypaimon import CatalogFactory

    catalog = CatalogFactory.create({"warehouse": str(warehouse)})
    catalog.create_database(database, True)
    return catalog


def pp_create_table(catalog, identifier: str, schema: pa.Schema, primary_key: Sequence[str],
                    partition_keys: Sequence[str] | None = None, options: dict | None = None):
    from pypaimon import Schema

    pschema = Schema.from_pyarrow_schema(
        schema,
        partition_keys=list(partition_keys or []),
        primary_keys=list(primary_key),
        options=dict(options or {}),
    )
    catalog.create_table(identifier, pschema, False)
    return catalog.get_table(identifier)


def pp_get_table(warehouse: str, identifier: str):
    """Open a table (possibly written by lakemerge) through a fresh pypaimon catalog."""
    from pypaimon import CatalogFactory

    return CatalogFactory.create({"warehouse": str(warehouse)}).get_table(identifier)


# --------------------------------------------------------------------------------------------------------
# write
# --------------------------------------------------------------------------------------------------------
def _as_arrow(data, schema: pa.Schema | None = None) -> pa.Table:
    if isinstance(data, pa.RecordBatch):
        data = pa.Table.from_batches([data])
    if isinstance(data, list):
        data = pa.Table.from_pylist(data, schema=schema)
    if schema is not None:
        data = data.select(schema.names).cast(schema)
    return data


def pp_write(table, data, schema: pa.Schema | None = None) -> int:
    """Write one pa.Table / RecordBatch / list of dicts with pypaimon in ONE commit; return the snapshot id."""
    data = _as_arrow(data, schema if schema is not None else pp_arrow_schema(table))
    wb = table.new_batch_write_builder()
    write = wb.new_write()
    commit = wb.new_commit()
    try:
        write.write_arrow(data)
        commit.commit(write.prepare_commit())
    finally:
        write.close()
        commit.close()
    return pp_latest_snapshot_id(table)


def pp_write_batches(table, batches: Iterable, schema: pa.Schema | None = None) -> list[int]:
    """One commit per batch; returns the snapshot ids in order."""
    return [pp_write(table, b, schema) for b in batches]


# --------------------------------------------------------------------------------------------------------
# snapshots / read
# --------------------------------------------------------------------------------------------------------
def pp_latest_snapshot_id(table) -> int | None:
    snap = table.snapshot_manager().get_latest_snapshot()
    return None if snap is None else snap.id


def pp_snapshot_ids(table) -> list[int]:
    return sorted(s.id for s in table.snapshot_manager().list_snapshots())


def pp_arrow_schema(table) -> pa.Schema:
    from pypaimon.schema.data_types import PyarrowFieldParser

    return PyarrowFieldParser.from_paimon_schema(table.table_schema.fields)


def pp_at(table, snapshot_id: int | None):
    """The table pinned to ``snapshot_id`` (pypaimon time travel), or the table itself for None."""
    if snapshot_id is None:
        return table
    return table.copy({"scan.snapshot-id": str(int(snapshot_id))})


def pp_read(table, snapshot_id: int | None = None, sort_by: Sequence[str] | None = None) -> pa.Table:
    """pypaimon's merged read at ``snapshot_id`` (latest if None), sorted by ``sort_by`` (default: the pk)."""
    t = pp_at(table, snapshot_id)
    rb = t.new_read_builder()
    splits = rb.new_scan().plan().splits()
    result = rb.new_read().to_arrow(splits)
    if result is None:
        result = pp_arrow_schema(table).empty_table()
    keys = list(sort_by if sort_by is not None else table.table_schema.primary_keys)
    return sort_table(result, keys)


# --------------------------------------------------------------------------------------------------------
# bucket / partition expectations
# --------------------------------------------------------------------------------------------------------
def pp_bucket_extractor(table):
    from pypaimon.write.row_key_extractor import FixedBucketRowKeyExtractor

    return FixedBucketRowKeyExtractor(table.table_schema)


def pp_expected_partitions_buckets(table, rows: pa.Table) -> tuple[list[tuple], list[int]]:
    """(partition tuple, bucket) that pypaimon's writer would choose for each row of ``rows``."""
    extractor = pp_bucket_extractor(table)
    partitions: list[tuple] = []
    buckets: list[int] = []
    for batch in rows.to_batches():
        p, b = extractor.extract_partition_bucket_batch(batch)
        partitions.extend(tuple(x) for x in p)
        buckets.extend(b)
    return partitions, buckets


def pp_bucket_dir(table, partition: tuple, bucket: int) -> str:
    """Relative directory (from the table root) pypaimon uses for (partition, bucket), e.g. ``dt=x/bucket-3``."""
    rel = table.path_factory().relative_bucket_path(tuple(partition), bucket, canonical_partition=True)
    if rel.startswith("./"):
        rel = rel[2:]
    return rel


def pp_partition_dir(table, partition: tuple) -> str:
    """Relative partition directory pypaimon names for ``partition`` ('' if unpartitioned)."""
    return pp_bucket_dir(table, partition, 0).rpartition("bucket-0")[0].rstrip("/")


def table_path(warehouse: str, identifier: str) -> str:
    db, name = identifier.split(".")
    return os.path.join(str(warehouse), f"{db}.db", name)


SYSTEM_DIRS = {"schema", "snapshot", "manifest", "index", "statistics", "changelog", "consumer", "tag",
               "branch"}


def data_files(table_dir: str) -> list[tuple[str, str]]:
    """All data files under the table: list of (relative bucket directory, absolute file path)."""
    out = []
    for root, dirs, files in os.walk(table_dir):
        rel = os.path.relpath(root, table_dir)
        if rel == ".":
            dirs[:] = [d for d in dirs if d not in SYSTEM_DIRS]
            continue
        for f in files:
            if f.startswith("data-") and not f.endswith(".index"):
                out.append((rel.replace(os.sep, "/"), os.path.join(root, f)))
    return sorted(out)


def check_bucket_placement(pp_table, table_dir: str) -> dict:
    """Assert that every row of every data file under ``table_dir`` sits in the directory pypaimon would choose.

    Returns {relative dir: number of rows checked}. Raises AssertionError naming file, row and key on mismatch.
    """
    names = [f.name for f in pp_table.table_schema.fields]
    schema = pp_arrow_schema(pp_table)
    checked: dict[str, int] = {}
    files = data_files(table_dir)
    assert files, f"no data files under {table_dir}"
    for rel_dir, path in files:
        if not path.endswith(".parquet"):
            raise AssertionError(f"unexpected data file format: {path}")
        physical = pq.ParquetFile(path).read()  # not read_table: it would infer hive partitions from the path
        missing = [n for n in names if n not in physical.column_names]
        assert not missing, f"{path}: table columns {missing} missing from the data file"
        rows = physical.select(names).cast(schema)
        partitions, buckets = pp_expected_partitions_buckets(pp_table, rows)
        for i, (part, bucket) in enumerate(zip(partitions, buckets)):
            expected_dir = pp_bucket_dir(pp_table, part, bucket)
            if expected_dir != rel_dir:
                key = {k: rows.column(k)[i].as_py() for k in pp_table.table_schema.primary_keys}
                raise AssertionError(
                    f"row {i} of {path} with key {key} is in {rel_dir!r}, "
                    f"pypaimon would put it in {expected_dir!r}")
        checked[rel_dir] = checked.get(rel_dir, 0) + rows.num_rows
    return checked


# --------------------------------------------------------------------------------------------------------
# comparison helpers (also used by the non-interop tests)
# --------------------------------------------------------------------------------------------------------
def _sortable(v):
    # total order over None and mixed python values of one column
    if v is None:
        return (0,)
    if isinstance(v, float) and v != v:
        return (2,)
    return (1, v)


def sort_rows(rows: list[dict], keys: Sequence[str]) -> list[dict]:
    return sorted(rows, key=lambda r: tuple(_sortable(r[k]) for k in keys))


def sort_table(table: pa.Table, keys: Sequence[str]) -> pa.Table:
    if table.num_rows == 0 or not keys:
        return table
    rows = table.to_pylist()
    order = sorted(range(len(rows)), key=lambda i: tuple(_sortable(rows[i][k]) for k in keys))
    return table.take(pa.array(order, pa.int64()))


def rows_of(table: pa.Table, keys: Sequence[str]) -> list[dict]:
    return sort_rows(table.to_pylist(), keys)


def _fmt(v):
    if isinstance(v, (bytes, bytearray)):
        return bytes(v)
    return v


def diff_rows(actual: list[dict], expected: list[dict], keys: Sequence[str], limit: int = 8) -> str:
    """Human-readable difference between two row lists keyed by ``keys``; '' if equal."""
    def key(r):
        return tuple(_fmt(r[k]) for k in keys)

    a = {key(r): r for r in actual}
    e = {key(r): r for r in expected}
    lines = []
    if len(a) != len(actual):
        lines.append(f"actual has duplicate keys ({len(actual)} rows, {len(a)} distinct keys)")
    missing = [k for k in e if k not in a]
    extra = [k for k in a if k not in e]
    changed = [k for k in e if k in a and a[k] != e[k]]
    if missing:
        lines.append(f"{len(missing)} missing keys, e.g. " + "; ".join(repr(e[k]) for k in missing[:limit]))
    if extra:
        lines.append(f"{len(extra)} unexpected keys, e.g. " + "; ".join(repr(a[k]) for k in extra[:limit]))
    for k in changed[:limit]:
        cols = [c for c in e[k] if a[k].get(c) != e[k][c]]
        lines.append(f"key {k}: " + ", ".join(f"{c}: got {a[k].get(c)!r} expected {e[k][c]!r}" for c in cols))
    if len(changed) > limit:
        lines.append(f"... {len(changed) - limit} more changed keys")
    if not lines and actual != expected:
        lines.append("same rows, different order")
    return "\n".join(lines)


def assert_rows_equal(actual: list[dict], expected: list[dict], keys: Sequence[str], what: str = ""):
    d = diff_rows(actual, expected, keys)
    assert not d, f"{what}\n{d}"



def check_file_metadata(pp_table, snapshot_id: int | None = None, check_delete_count: bool = True) -> int:
    """Check, as pypaimon plans it, every live data file of a snapshot against the file's content.

    * the file exists where pypaimon looks for it (table root + canonical partition dir + bucket-N);
    * the partition columns of every row equal the manifest's partition, and every row's bucket (pypaimon's
      extractor) equals the manifest's bucket;
    * _ROW_COUNT, _DELETE_ROW_COUNT (rows with _VALUE_KIND -U/-D: must be exact and not null), min/max
      _SEQUENCE_NUMBER and _FILE_SIZE match the file; rows are sorted by the trimmed key with unique keys.

    Returns the number of files checked. Meant for tables written by lakemerge (pypaimon's own files fail
    the _DELETE_ROW_COUNT check, see its known bug).
    """
    t = pp_at(pp_table, snapshot_id)
    names = [f.name for f in pp_table.table_schema.fields]
    schema = pp_arrow_schema(pp_table)
    part_keys = list(pp_table.table_schema.partition_keys)
    trimmed = [k for k in pp_table.table_schema.primary_keys if k not in part_keys]
    n = 0
    for split in t.new_read_builder().new_scan().plan().splits():
        for f in split.files:
            path = f.file_path
            where = f"{path} (partition {split.partition.values}, bucket {split.bucket})"
            assert os.path.exists(path), f"{where}: file listed in the manifest is missing"
            physical = pq.ParquetFile(path).read()
            assert physical.num_rows == f.row_count, f"{where}: _ROW_COUNT {f.row_count} != {physical.num_rows}"
            kinds = physical.column("_VALUE_KIND").to_pylist()
            retracts = sum(1 for k in kinds if k in (1, 3))
            assert not check_delete_count or f.delete_row_count == retracts, \
                f"{where}: _DELETE_ROW_COUNT {f.delete_row_count!r} but the file has {retracts} -U/-D rows"
            seqs = physical.column("_SEQUENCE_NUMBER").to_pylist()
            assert (min(seqs), max(seqs)) == (f.min_sequence_number, f.max_sequence_number), \
                f"{where}: sequence range {(min(seqs), max(seqs))} != manifest " \
                f"{(f.min_sequence_number, f.max_sequence_number)}"
            assert os.path.getsize(path) == f.file_size, f"{where}: _FILE_SIZE"
            keys = list(zip(*[physical.column("_KEY_" + k).to_pylist() for k in trimmed])) if trimmed else []
            assert all(keys[i] < keys[i + 1] for i in range(len(keys) - 1)), \
                f"{where}: rows are not sorted by key with unique keys"
            if trimmed:
                assert list(keys[0]) == list(f.min_key.values) and list(keys[-1]) == list(f.max_key.values), \
                    f"{where}: _MIN_KEY/_MAX_KEY {f.min_key.values}/{f.max_key.values} vs {keys[0]}/{keys[-1]}"
            rows = physical.select(names).cast(schema)
            partitions, buckets = pp_expected_partitions_buckets(pp_table, rows)
            for i, (p, b) in enumerate(zip(partitions, buckets)):
                assert list(p) == list(split.partition.values), \
                    f"{where}: row {i} has partition {p}"
                assert b == split.bucket, f"{where}: row {i} belongs in bucket {b}"
            n += 1
    return n


def pp_write_fixed_bucket(table, data, schema: pa.Schema | None = None) -> int:
    """Write with pypaimon's postpone fixed-bucket builder (rows go to real buckets of a ``bucket = -2`` table) in
    ONE commit; return the snapshot id."""
    data = _as_arrow(data, schema if schema is not None else pp_arrow_schema(table))
    wb = table.new_postpone_fixed_bucket_write_builder()
    write = wb.new_write()
    commit = wb.new_commit()
    try:
        write.write_arrow(data)
        commit.commit(write.prepare_commit())
    finally:
        write.close()
        commit.close()
    return pp_latest_snapshot_id(table)
