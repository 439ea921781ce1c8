"""scan.ignore-corrupt-files / scan.ignore-lost-files (Paimon's DataFileRecordReader): a user's read skips a data
file it cannot decode -- corrupt if the file exists, lost if it does not -- logging its path; without the option the
read fails. Writes, compaction and row-level operations never skip."""
from __future__ import annotations

import logging
import os

import pyarrow as pa
import pytest

from engine import Catalog
from engine.errors import CorruptFile

CORRUPT, LOST = "scan.ignore-corrupt-files", "scan.ignore-lost-files"


def _files(t) -> list[str]:
    """Data files of the latest snapshot, in commit order (each write below makes one file)."""
    entries = [(f.min_sequence_number, os.path.join(sp.bucket_dir, f.file_name))
               for sp in t.plan() for f in sp.files]
    return [p for _, p in sorted(entries)]


def _pk_table(tmp_path, **options):
    """Primary-key table, one bucket, two level-0 runs: keys 0..9 = 'old', then keys 5..14 = 'new'."""
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    t = cat.create_table("db.t", pa.schema([("id", pa.int64()), ("v", pa.string())]), primary_key=["id"],
                         options={"bucket": "1", **options})
    t.write(pa.table({"id": list(range(10)), "v": ["old"] * 10}))
    t.write(pa.table({"id": list(range(5, 15)), "v": ["new"] * 10}))
    return t


def _append_table(tmp_path, **options):
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    t = cat.create_table("db.a", pa.schema([("id", pa.int64()), ("v", pa.string())]),
                         options={"bucket": "-1", **options})
    t.write(pa.table({"id": [1, 2, 3], "v": ["a", "b", "c"]}))
    t.write(pa.table({"id": [4, 5], "v": ["d", "e"]}))
    return t


def _truncate(path):
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) // 2)


def _garbage(path):
    size = os.path.getsize(path)
    with open(path, "wb") as f:
        f.write(b"\x5a" * size)  # same size as the manifest records: only decoding finds the damage


def _rows(table) -> dict:
    return dict(zip(*table.sort_by("id").to_pydict().values()))


@pytest.mark.parametrize("damage", [_truncate, _garbage])
def test_corrupt_file_fails_without_the_option(tmp_path, damage):
    t = _pk_table(tmp_path, **{LOST: "true"})  # the lost-files option does not cover a file that exists
    damage(_files(t)[1])
    with pytest.raises(CorruptFile):
        t.read()


@pytest.mark.parametrize("damage", [_truncate, _garbage])
def test_corrupt_newest_run_is_skipped_and_older_values_show(tmp_path, damage, caplog):
    """Java merges the runs it could read: a key whose newest record was in the skipped run shows its older value,
    a key only in that run is absent (MergeFileSplitRead over DataFileRecordReaders that return no batch)."""
    t = _pk_table(tmp_path, **{CORRUPT: "true"})
    newest = _files(t)[1]
    damage(newest)
    with caplog.at_level(logging.WARNING, logger="lakemerge.read"):
        rows = _rows(t.read())
    assert rows == {i: "old" for i in range(10)}
    assert any(newest in r.getMessage() and CORRUPT in r.getMessage() for r in caplog.records)
    assert _rows(pa.Table.from_batches(list(t.to_reader()))) == rows
    assert t.lookup(pa.table({"id": [7, 12]})).to_pydict() == {"id": [7], "v": ["old"]}


def test_missing_file_fails_unless_lost_files_are_ignored(tmp_path, caplog):
    t = _pk_table(tmp_path, **{CORRUPT: "true"})  # a missing file is lost, not corrupt
    oldest = _files(t)[0]
    os.unlink(oldest)
    with pytest.raises(CorruptFile, match="missing"):
        t.read()
    t.alter().set_option(LOST, "true").commit()
    with caplog.at_level(logging.WARNING, logger="lakemerge.read"):
        rows = _rows(t.read())
    assert rows == {i: "new" for i in range(5, 15)}
    assert any(oldest in r.getMessage() and LOST in r.getMessage() for r in caplog.records)


def test_append_table_skips_a_corrupt_and_a_lost_file(tmp_path):
    t = _append_table(tmp_path, **{CORRUPT: "true"})
    first, second = _files(t)
    _garbage(first)
    assert _rows(t.read()) == {4: "d", 5: "e"}
    os.unlink(second)
    with pytest.raises(CorruptFile, match="missing"):
        t.read()
    t.alter().set_option(LOST, "true").commit()
    assert t.read().num_rows == 0
    assert t.to_reader().read_all().num_rows == 0


def test_streaming_read_skips(tmp_path):
    t = _append_table(tmp_path, **{CORRUPT: "true"})
    _truncate(_files(t)[0])
    batches = list(t.stream("latest-full", idle_timeout=0, poll_interval=0.01))
    got = pa.Table.from_batches(batches)
    assert sorted(got.column("id").to_pylist()) == [4, 5]


def test_compaction_and_row_level_operations_still_fail(tmp_path):
    """Rewriting a bucket around a file it cannot read would lose that file's rows for good."""
    t = _pk_table(tmp_path, **{CORRUPT: "true", LOST: "true"})
    damaged = _files(t)[0]
    _garbage(damaged)
    before = t.latest_snapshot_id()
    with pytest.raises(CorruptFile):
        t.compact(full=True)
    with pytest.raises(CorruptFile):
        t.delete_where([("id", "=", 3)])
    os.unlink(damaged)
    with pytest.raises(CorruptFile):
        t.compact(full=True)
    assert t.latest_snapshot_id() == before


def test_deletion_vector_index_file_is_not_skipped(tmp_path):
    """Only data files are skipped: a damaged deletion-vector index still fails the read, as in Paimon, where the
    deletion vector is loaded outside DataFileRecordReader."""
    t = _pk_table(tmp_path, **{"deletion-vectors.enabled": "true", CORRUPT: "true", LOST: "true"})
    t.compact(full=True)
    t.write(pa.table({"id": [1], "v": ["newer"]}))
    t.compact()
    index = [os.path.join(d, f) for d, _, fs in os.walk(t.root) for f in fs if f.startswith("index-")]
    assert index, "the compaction should have written a deletion vector"
    for p in index:
        _garbage(p)
    with pytest.raises(CorruptFile):
        t.read()


def test_read_options_override_the_table_options_for_one_read(tmp_path):
    """engine.read.file_skips.with_read_options (Spark streaming reads' dynamic options): the read's value wins, the
    table is unchanged."""
    from engine.errors import InvalidOption
    from engine.read.file_skips import with_read_options
    t = _append_table(tmp_path)
    _garbage(_files(t)[0])
    assert _rows(with_read_options(t, {CORRUPT: "true"}).read()) == {4: "d", 5: "e"}
    with pytest.raises(CorruptFile):
        t.read()
    assert CORRUPT not in t.options
    with pytest.raises(InvalidOption, match=CORRUPT):
        with_read_options(t, {CORRUPT: "yes"})


@pytest.mark.parametrize("pk", [True, False], ids=["pk", "append"])
def test_audit_log_skips_like_the_table_read(tmp_path, pk):
    """$audit_log reads the table's files through the same reader as a batch read (Paimon's AuditLogTable wraps the
    data table's read), so it skips an unreadable data file under the same options, primary-key tables included."""
    from engine.system_tables import system_table
    t = _pk_table(tmp_path, **{LOST: "true"}) if pk else _append_table(tmp_path, **{LOST: "true"})
    os.unlink(_files(t)[0])
    audit = system_table(t, "audit_log").read()
    assert set(audit.column("rowkind").to_pylist()) == {"+I"}
    assert _rows(audit.drop_columns(["rowkind"])) == _rows(t.read())


def test_lookup_of_a_cross_partition_table_skips_too(tmp_path):
    """Table.lookup of a cross-partition-update table (a filtered read of every partition) skips an unreadable data
    file like the lookup of any other primary-key table."""
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    t = cat.create_table("db.x", pa.schema([("id", pa.int64()), ("dt", pa.string()), ("v", pa.string())]),
                         primary_key=["id"], partition_keys=["dt"], options={"bucket": "-1", LOST: "true"})
    t.write(pa.table({"id": [1, 2], "dt": ["a", "a"], "v": ["x", "y"]}))
    t.write(pa.table({"id": [3], "dt": ["b"], "v": ["z"]}))
    [lost] = [os.path.join(sp.bucket_dir, f.file_name) for sp in t.plan() for f in sp.files
              if sp.partition_values == ("a",)]
    os.unlink(lost)
    assert t.lookup(pa.table({"id": [1, 3]})).to_pydict() == {"id": [3], "dt": ["b"], "v": ["z"]}
    with pytest.raises(CorruptFile):
        t.delete_where([("id", "=", 1)])


def _small_row_groups(monkeypatch):
    """Parquet row groups of 1024 rows, Paimon's read.batch-size: a damaged row group fails exactly one batch."""
    import engine.write.formats
    monkeypatch.setattr(engine.write.formats, "ROW_GROUP_ROWS", 1024)


def _damage_last_row_group(path, column):
    """Flip a byte in the last page of ``column`` in the file's last row group (same size: the page checksum
    finds it)."""
    import pyarrow.parquet as pq
    md = pq.ParquetFile(path).metadata
    rg = md.row_group(md.num_row_groups - 1)
    [chunk] = [rg.column(i) for i in range(rg.num_columns) if rg.column(i).path_in_schema == column]
    start = chunk.dictionary_page_offset if chunk.has_dictionary_page else chunk.data_page_offset
    offset = start + chunk.total_compressed_size - 2
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0xFF]))


N = 3000  # three batches of 1024 rows; the third fails


def test_append_read_keeps_the_batches_before_a_part_way_failure(tmp_path, monkeypatch, caplog):
    """Paimon's DataFileRecordReader.readBatch ends the file at the failing batch; the batches it returned are
    kept. Without the option the read still fails."""
    _small_row_groups(monkeypatch)
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    t = cat.create_table("db.a", pa.schema([("id", pa.int64()), ("v", pa.string())]), options={"bucket": "-1"})
    t.write(pa.table({"id": list(range(N)), "v": [f"v{i}" for i in range(N)]}))
    t.write(pa.table({"id": [-1], "v": ["other"]}))
    damaged = _files(t)[0]
    _damage_last_row_group(damaged, "v")
    with pytest.raises(CorruptFile):
        t.read()
    t.alter().set_option(CORRUPT, "true").commit()
    with caplog.at_level(logging.WARNING, logger="lakemerge.read"):
        got = t.read()
    assert sorted(got.column("id").to_pylist()) == [-1] + list(range(2048))
    assert any("2048 rows" in r.getMessage() and damaged in r.getMessage() for r in caplog.records)
    # a projection that does not decode the damaged column reads the whole file, as Paimon's projected readers
    assert t.read(columns=["id"]).num_rows == N + 1
    # lost files are not part-way failures: the lost-files option alone does not keep anything
    t.alter().set_option(CORRUPT, "false").set_option(LOST, "true").commit()
    with pytest.raises(CorruptFile):
        t.read()


def test_merge_read_merges_the_part_of_a_run_read_before_the_failure(tmp_path, monkeypatch):
    """Java's merge (MergeFileSplitRead over DataFileRecordReaders) consumed the newer run up to the failing batch,
    then that run ends: keys read before the failure show the newer value, later keys the older run's value."""
    _small_row_groups(monkeypatch)
    t = _pk_table(tmp_path / "pk", **{CORRUPT: "true"})
    t.write(pa.table({"id": list(range(N)), "v": ["older"] * N}))
    t.write(pa.table({"id": list(range(N)), "v": ["newer"] * N}))
    _damage_last_row_group(_files(t)[-1], "v")
    rows = _rows(t.read())
    assert rows == {i: "newer" if i < 2048 else "older" for i in range(N)}
    assert _rows(pa.Table.from_batches(list(t.to_reader()))) == rows
    assert t.lookup(pa.table({"id": [5, 2500]})).sort_by("id").column("v").to_pylist() == ["newer", "older"]
    with pytest.raises(CorruptFile):  # compaction never skips
        t.compact(full=True)


def test_avro_file_keeps_the_blocks_before_the_failing_one(tmp_path):
    """Paimon's Avro reader returns one Avro block per batch: the blocks before the damaged one are kept."""
    import fastavro
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    t = cat.create_table("db.a", pa.schema([("id", pa.int64()), ("v", pa.string())]),
                         options={"bucket": "-1", "file.format": "avro", CORRUPT: "true"})
    t.write(pa.table({"id": list(range(20000)), "v": [f"value-{i:08d}" for i in range(20000)]}))
    [path] = _files(t)
    with open(path, "rb") as f:
        blocks = list(fastavro.block_reader(f))
    counts = [b.num_records for b in blocks]
    assert len(counts) > 2, "the file should hold several Avro blocks"
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.seek(size - 40)  # inside the last block's data
        byte = f.read(1)
        f.seek(size - 40)
        f.write(bytes([byte[0] ^ 0xFF]))
    assert t.read().column("id").to_pylist() == list(range(sum(counts[:-1])))


def test_deletion_vector_positions_apply_to_the_rows_kept_before_a_failure(tmp_path, monkeypatch):
    """The kept rows are the file's first rows, so its deletion vector drops by the same positions: a deleted key
    before the failure stays deleted, and no kept row is dropped for a deletion past the failure."""
    _small_row_groups(monkeypatch)
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    t = cat.create_table("db.t", pa.schema([("id", pa.int64()), ("v", pa.string())]), primary_key=["id"],
                         options={"bucket": "1", "deletion-vectors.enabled": "true", CORRUPT: "true"})
    t.write(pa.table({"id": list(range(N)), "v": ["x"] * N}))
    t.compact(full=True)  # the file moves up a level as written (1024-row row groups); deletions then go to a DV
    t.delete_where([("id", "in", [5, 2047, 2500])])
    [path] = _files(t)
    _damage_last_row_group(path, "v")
    assert sorted(t.read().column("id").to_pylist()) == [i for i in range(2048) if i not in (5, 2047)]


def test_parquet_batches_do_not_span_row_groups(tmp_path, monkeypatch):
    """Paimon's VectorizedParquetRecordReader.nextBatch reads at most the rest of the current row group: with row
    groups of 1000 rows a damaged last row group fails only its own batch, so both earlier row groups are kept
    (a 1024-row batch spanning row groups would fail at row 1024 and lose rows 1024..1999)."""
    import engine.write.formats
    monkeypatch.setattr(engine.write.formats, "ROW_GROUP_ROWS", 1000)
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    t = cat.create_table("db.a", pa.schema([("id", pa.int64()), ("v", pa.string())]),
                         options={"bucket": "-1", CORRUPT: "true"})
    t.write(pa.table({"id": list(range(N)), "v": [f"v{i}" for i in range(N)]}))
    [path] = _files(t)
    import pyarrow.parquet as pq
    assert pq.ParquetFile(path).metadata.num_row_groups == 3
    _damage_last_row_group(path, "v")
    assert sorted(t.read().column("id").to_pylist()) == list(range(2000))
