"""Arrow ecosystem: to_arrow / to_reader / to_batches / to_pandas / to_polars, and DuckDB over the reader."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from engine.errors import CorruptFile, InvalidInput, SnapshotNotFound
from engine.read.split_read import SplitReader

SCHEMA = pa.schema([("dt", pa.string()), ("id", pa.int64()), ("amount", pa.float64())])


@pytest.fixture
def table(catalog):
    t = catalog.create_table("db.orders", SCHEMA, primary_key=["dt", "id"], partition_keys=["dt"],
                             options={"bucket": "3"})
    ids = np.arange(3000, dtype=np.int64)
    t.write(pa.table({"dt": pa.array(np.where(ids % 2 == 0, "d0", "d1")), "id": ids,
                      "amount": ids.astype(np.float64)}))
    upd = ids[::3]
    t.write(pa.table({"dt": pa.array(np.where(upd % 2 == 0, "d0", "d1")), "id": upd, "amount": -1.0 * upd}))
    t.delete(pa.table({"dt": ["d0", "d1"], "id": [0, 1]}))
    return t


def _sorted(tbl: pa.Table) -> pa.Table:
    return tbl.sort_by([("dt", "ascending"), ("id", "ascending")])


def test_reader_yields_exactly_read_rows(table):
    reader = table.to_reader()
    assert isinstance(reader, pa.RecordBatchReader) and reader.schema == table.arrow_schema
    streamed = reader.read_all()
    assert _sorted(streamed).equals(_sorted(table.read()))
    assert streamed.num_rows == 2998
    assert _sorted(table.to_arrow()).equals(_sorted(table.read()))
    first = table.to_reader(snapshot_id=1, columns=["id", "amount"], filter=[("dt", "=", "d1"), ("id", "<", 100)])
    got = first.read_all()
    assert got.column_names == ["id", "amount"] and got.num_rows == 50
    assert pc.all(pc.equal(got.column("id").cast(pa.float64()), got.column("amount"))).as_py()


def test_reader_streams_one_split_at_a_time(table, monkeypatch):
    calls = []
    original = SplitReader.read

    def counting(self, split, columns):
        calls.append((split.partition_values, split.bucket))
        return original(self, split, columns)
    monkeypatch.setattr(SplitReader, "read", counting)
    reader = table.to_reader(batch_size=100)
    assert calls == []  # nothing is read before the first batch is pulled
    batch = reader.read_next_batch()
    assert len(calls) == 1 and 0 < batch.num_rows <= 100
    rest = list(reader)
    assert len(calls) == len(table.plan()) == 6  # 2 partitions x 3 buckets, each read once, in order
    assert calls == sorted(calls)
    assert all(b.num_rows <= 100 for b in rest) and batch.num_rows + sum(b.num_rows for b in rest) == 2998
    assert sum(b.num_rows for b in table.to_batches(batch_size=1000)) == 2998


def test_reader_pins_snapshot_and_validates_up_front(table):
    reader = table.to_reader()
    table.write(pa.table({"dt": ["d0"], "id": [10_000], "amount": [1.0]}))
    assert reader.read_all().num_rows == 2998  # snapshot pinned at call time
    with pytest.raises(InvalidInput, match="nope"):
        table.to_reader(columns=["nope"])
    with pytest.raises(InvalidInput):
        table.to_reader(filter=[("nope", "=", 1)])
    with pytest.raises(InvalidInput):
        table.to_reader(batch_size=0)
    with pytest.raises(SnapshotNotFound):
        table.to_reader(snapshot_id=99)


def test_reader_raises_corrupt_file_while_streaming(table):
    import os
    victim = table.plan()[-1]
    os.remove(os.path.join(victim.bucket_dir, victim.files[0].file_name))
    reader = table.to_reader()
    with pytest.raises(CorruptFile):
        reader.read_all()


def test_duckdb_queries_the_reader(table):
    duckdb = pytest.importorskip("duckdb")
    con = duckdb.connect()
    con.register("orders", table.to_reader(batch_size=256))
    got = con.execute("SELECT dt, count(*), sum(amount) FROM orders WHERE id >= 10 GROUP BY dt ORDER BY dt"
                      ).fetchall()
    expected = table.read(filter=[("id", ">=", 10)]).group_by("dt").aggregate([("id", "count"), ("amount", "sum")])
    want = sorted((r["dt"], r["id_count"], r["amount_sum"]) for r in expected.to_pylist())
    assert [(d, n, pytest.approx(s)) for d, n, s in got] == want
    assert want[0][1] == 1495  # d0: 1500 ids, minus deleted 0, minus ids 2..8


def test_pandas_and_polars(table):
    pd_df = table.to_pandas(columns=["id", "amount"], filter=[("dt", "=", "d0")])
    assert list(pd_df.columns) == ["id", "amount"] and len(pd_df) == 1499
    pl = pytest.importorskip("polars")
    pl_df = table.to_polars(snapshot_id=1)
    assert isinstance(pl_df, pl.DataFrame) and pl_df.height == 3000
    assert pl_df.filter(pl.col("id") == 3)["amount"].to_list() == [3.0]
    assert table.to_polars()["amount"].min() < 0  # latest snapshot: updated rows carry negative amounts


def test_reader_of_a_table_without_snapshots(catalog):
    t = catalog.create_table("db.empty", SCHEMA, primary_key=["id"], options={"bucket": "1"})
    reader = t.to_reader(columns=["id"])
    assert reader.schema.names == ["id"] and reader.read_all().num_rows == 0
    pytest.importorskip("polars")
    assert t.to_polars().height == 0


def test_with_schema_reuses_buffers_when_only_nullability_differs():
    """Reads relabel nullability without copying the merged rows (Table.cast would copy every buffer); columns whose
    type differs are still cast."""
    from engine.read.split_read import with_schema

    got = pa.table({"k": pa.array([1, 2], pa.int64()), "n": pa.array([1, None], pa.int32())})
    target = pa.schema([pa.field("k", pa.int64(), nullable=False), pa.field("n", pa.int64())])
    out = with_schema(got, target)
    assert out.schema.equals(target)
    assert out.column("k").chunk(0).buffers()[1].address == got.column("k").chunk(0).buffers()[1].address
    assert out.column("n").to_pylist() == [1, None]
    assert with_schema(got, got.schema) is got
