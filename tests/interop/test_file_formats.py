"""Data files in ORC and Avro (written by pypaimon) are readable by lakemerge with the same rows."""
from __future__ import annotations

import datetime as dt
import decimal

import pyarrow as pa
import pytest

from engine import Catalog
from tests.interop.pypaimon_util import pp_catalog, pp_create_table, pp_read, pp_write

pytestmark = pytest.mark.interop

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("amount", pa.decimal128(10, 2)),
                    ("ts", pa.timestamp("us")), ("day", pa.date32()), ("ok", pa.bool_()), ("x", pa.float64())])


def _batch(ids):
    return pa.table({
        "id": ids, "name": [f"n{i}" if i % 3 else None for i in ids],
        "amount": [decimal.Decimal(i) / 4 for i in ids],
        "ts": [dt.datetime(2024, 1, 1, 12, 0, 0, i) for i in ids],
        "day": [dt.date(2024, 1, 1 + i % 28) for i in ids], "ok": [i % 2 == 0 for i in ids],
        "x": [i * 0.5 for i in ids]}, schema=SCHEMA)


@pytest.mark.parametrize("fmt", ["orc", "avro", "parquet"])
def test_lakemerge_reads_pypaimon_files_of_each_format(tmp_path, fmt):
    wh = str(tmp_path / "wh")
    pt = pp_create_table(pp_catalog(wh), f"db.t_{fmt}", SCHEMA, ["id"], options={"bucket": "2", "file.format": fmt})
    for ids in ([1, 2, 3, 4], [3, 4, 5, 6], [6, 7]):
        pp_write(pt, _batch(ids))
    ours = Catalog(wh).get_table(f"db.t_{fmt}")
    for sid in (1, 2, 3):
        theirs = pp_read(pt, sid)
        mine = ours.read(snapshot_id=sid).sort_by("id")
        assert mine.to_pylist() == theirs.to_pylist()
