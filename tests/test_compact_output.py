"""The streaming compaction writer records exactly the metadata write_sorted_run records for the same rows."""
from __future__ import annotations

import dataclasses
import math
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.compact.output import RollingRunWriter
from engine.io.file_io import LocalFileIO
from engine.schema import TableSchema
from engine.write.file_writer import physical_table, write_sorted_run

SCHEMA = pa.schema([pa.field("k", pa.string(), nullable=False), pa.field("i", pa.int32(), nullable=False),
                    ("f", pa.float64()), ("s", pa.string()), ("d", pa.date32()), ("b", pa.binary())])

texts = st.one_of(st.none(), st.text(alphabet="ab\U0010ffffzé", max_size=20))
values = st.tuples(st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True)), texts,
                   st.one_of(st.none(), st.integers(0, 20000)), st.one_of(st.none(), st.binary(max_size=20)))


def _schema(mode: str) -> TableSchema:
    return TableSchema.create(SCHEMA, primary_keys=["k", "i"], options={"bucket": "1", "metadata.stats-mode": mode})


def _rows(keys, vals, kinds) -> pa.Table:
    import datetime as dt
    return pa.table({
        "k": pa.array([k[0] for k in keys], pa.string()), "i": pa.array([k[1] for k in keys], pa.int32()),
        "f": pa.array([v[0] for v in vals], pa.float64()), "s": pa.array([v[1] for v in vals], pa.string()),
        "d": pa.array([None if v[2] is None else dt.date(1970, 1, 1) + dt.timedelta(days=v[2]) for v in vals],
                      pa.date32()),
        "b": pa.array([v[3] for v in vals], pa.binary())})


def _same(a, b):
    a = dataclasses.replace(a, file_name="", file_size=0, creation_time_millis=0, file_source=0)
    b = dataclasses.replace(b, file_name="", file_size=0, creation_time_millis=0, file_source=0)
    return a == b


@settings(max_examples=40, deadline=None)
@given(data=st.data(), mode=st.sampled_from(["full", "truncate(16)", "counts", "none"]))
def test_streamed_file_metadata_equals_write_sorted_run(tmp_path_factory, data, mode):
    keys = sorted(set(data.draw(st.lists(st.tuples(st.text(alphabet="xyz", max_size=3), st.integers(-5, 5)),
                                         min_size=1, max_size=40))))
    vals = data.draw(st.lists(values, min_size=len(keys), max_size=len(keys)))
    kinds = np.array(data.draw(st.lists(st.sampled_from([0, 1, 2, 3]), min_size=len(keys), max_size=len(keys))),
                     np.int8)
    seq = np.array(data.draw(st.lists(st.integers(0, 10**6), min_size=len(keys), max_size=len(keys))), np.int64)
    schema = _schema(mode)
    phys = physical_table(_rows(keys, vals, kinds), seq, kinds, schema)
    d = str(tmp_path_factory.mktemp("out"))
    (want,) = write_sorted_run(LocalFileIO(), d + "/a", phys, schema, level=3)
    w = RollingRunWriter(LocalFileIO(), d + "/b", schema, 3)
    cuts = sorted(set(data.draw(st.lists(st.integers(0, len(keys)), max_size=4))))
    for lo, hi in zip([0] + cuts, cuts + [len(keys)]):
        w.add(phys.slice(lo, hi - lo))
    (got,) = w.finish()
    assert _same(got, want), (got, want)
    table = pq.ParquetFile(f"{d}/b/{got.file_name}").read()
    assert table.equals(phys) or all(
        (x is None and y is None) or x == y or (isinstance(x, float) and math.isnan(x) and math.isnan(y))
        for c in phys.column_names for x, y in zip(table.column(c).to_pylist(), phys.column(c).to_pylist()))


class _NoStreamingIO:
    """A FileIO without the optional open_new capability: the writer encodes each file in memory."""

    def __init__(self):
        self.inner = LocalFileIO()

    def __getattr__(self, name):
        if name == "open_new":
            raise AttributeError(name)
        return getattr(self.inner, name)


@pytest.mark.parametrize("io_factory", [LocalFileIO, _NoStreamingIO], ids=["streamed", "in-memory"])
def test_rolls_at_the_target_size_of_encoded_bytes(tmp_path, io_factory):
    schema = TableSchema.create(SCHEMA, primary_keys=["k", "i"], options={"bucket": "1", "target-file-size": "32 kb"})
    n = 600_000
    rows = pa.table({"k": pa.array(["k"] * n), "i": pa.array(np.arange(n, dtype=np.int32)),
                     "f": pa.array(np.random.default_rng(1).random(n)), "s": pa.nulls(n, pa.string()),
                     "d": pa.nulls(n, pa.date32()), "b": pa.nulls(n, pa.binary())})
    phys = physical_table(rows, np.arange(n, dtype=np.int64), np.zeros(n, np.int8), schema)
    w = RollingRunWriter(io_factory(), str(tmp_path), schema, 1)
    for start in range(0, n, 100_000):
        w.add(phys.slice(start, 100_000))
    files = w.finish()
    assert len(files) >= 2 and sum(f.row_count for f in files) == n
    assert all(a.max_sequence_number < b.min_sequence_number for a, b in zip(files, files[1:]))
    for f in files:
        assert pq.ParquetFile(str(tmp_path / f.file_name)).metadata.num_rows == f.row_count
        assert (tmp_path / f.file_name).stat().st_size == f.file_size


def test_abort_deletes_written_files(tmp_path):
    import os
    schema = TableSchema.create(SCHEMA, primary_keys=["k", "i"], options={"bucket": "1", "target-file-size": "1 b"})
    phys = physical_table(_rows([("a", 1)], [(1.0, "x", 1, b"")], [0]), np.array([1]), np.array([0], np.int8),
                          schema)
    w = RollingRunWriter(LocalFileIO(), str(tmp_path), schema, 1)
    w.add(phys)
    w.finish()
    assert os.listdir(tmp_path)
    w.abort()
    assert os.listdir(tmp_path) == []



@pytest.mark.parametrize("fmt", ["orc", "avro"])
@pytest.mark.parametrize("io_factory", [LocalFileIO, _NoStreamingIO], ids=["streamed", "in-memory"])
def test_orc_and_avro_output_equals_write_sorted_run(tmp_path, fmt, io_factory, monkeypatch):
    """The streaming writer of an ORC / Avro table writes files of the level's format, with the rows and the
    metadata write_sorted_run records for them, rolling at the target size (checked after each group of rows)."""
    from engine.compact import output
    from engine.read.split_read import read_data_file
    monkeypatch.setattr(output, "ROW_GROUP_ROWS", 4_000)
    schema, ref = (TableSchema.create(SCHEMA, primary_keys=["k", "i"], options={
        "bucket": "1", "file.format": fmt, "target-file-size": size}) for size in ("16 kb", "128 mb"))
    n = 30_000
    keys = [("k", i) for i in range(n)]
    vals = [(i * 0.5, None if i % 7 else "s" * (i % 5), i % 300, b"\x00" * (i % 3)) for i in range(n)]
    kinds = np.array([i % 4 for i in range(n)], np.int8)
    phys = physical_table(_rows(keys, vals, kinds), np.arange(n, dtype=np.int64), kinds, schema)
    w = RollingRunWriter(io_factory(), str(tmp_path / "b"), schema, 2)
    for start in range(0, n, 7_000):
        w.add(phys.slice(start, 7_000))
    files = w.finish()
    assert len(files) >= 2 and all(f.file_name.endswith("." + fmt) for f in files)
    start = 0
    for f in files:
        path = str(tmp_path / "b" / f.file_name)
        assert os.path.getsize(path) == f.file_size
        part = phys.slice(start, f.row_count)
        (want,) = write_sorted_run(LocalFileIO(), str(tmp_path / "a" / f.file_name), part, ref, level=2)
        assert _same(f, want)
        got = read_data_file(LocalFileIO(), path, f)
        assert got.column_names == phys.column_names
        assert got.column("_SEQUENCE_NUMBER").to_pylist() == part.column("_SEQUENCE_NUMBER").to_pylist()
        assert got.column("s").to_pylist() == part.column("s").to_pylist()
        start += f.row_count
    assert start == n
