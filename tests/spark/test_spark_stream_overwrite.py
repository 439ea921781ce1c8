"""The Spark streaming source and OVERWRITE snapshots: ``streaming-read-overwrite`` as a table or read option."""
from __future__ import annotations


import pyarrow as pa
import pytest

from engine import Catalog
from tests.spark.stream_sink import run_available_now as _run
from tests.spark.stream_sink import sink_rows

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([("p", pa.int32()), ("k", pa.int64()), ("v", pa.string())])


def _data(rows):
    return pa.table({"p": pa.array([r[0] for r in rows], pa.int32()), "k": [r[1] for r in rows],
                     "v": [r[2] for r in rows]}, schema=SCHEMA)


def _out(out):
    return sorted((r["p"], r["k"], r["v"], r["_row_kind"]) for r in sink_rows(out))


def test_spark_stream_reads_overwrites_with_the_option_across_a_checkpoint_restart(spark, tmp_path):
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    t = cat.create_table("db.t", SCHEMA, ["p", "k"], ["p"], {"bucket": "2"})
    t.write(_data([(1, 1, "a"), (1, 2, "b"), (2, 3, "c")]))
    start = {"scan.mode": "from-snapshot", "scan.snapshot-id": "1"}
    with_opt, without = (str(tmp_path / "o1"), str(tmp_path / "c1")), (str(tmp_path / "o2"), str(tmp_path / "c2"))
    _run(spark, t.root, *with_opt, **start, **{"streaming-read-overwrite": "true"})
    _run(spark, t.root, *without, **start)
    inserted = [(1, 1, "a", "+I"), (1, 2, "b", "+I"), (2, 3, "c", "+I")]
    assert _out(with_opt[0]) == _out(without[0]) == inserted
    with t.new_write() as w:  # dynamic partition overwrite of p=1: k=2 unchanged, k=1 gone, k=9 new
        w.write(_data([(1, 2, "b"), (1, 9, "z")]))
        msgs = w.prepare_commit()
    t.commit_overwrite(msgs, "dynamic")
    t.write(_data([(2, 4, "d")]))
    # restarted from their checkpoints: the overwrite's removed rows as -D and new rows as +I with the read
    # option, nothing without it (Paimon skips OVERWRITE snapshots by default); both then get the append
    _run(spark, t.root, *with_opt, **start, **{"streaming-read-overwrite": "true"})
    _run(spark, t.root, *without, **start)
    assert _out(with_opt[0]) == sorted(inserted + [(1, 1, "a", "-D"), (1, 2, "b", "-D"), (1, 2, "b", "+I"),
                                                   (1, 9, "z", "+I"), (2, 4, "d", "+I")])
    assert _out(without[0]) == sorted(inserted + [(2, 4, "d", "+I")])
    # an append table reads overwrites with streaming-read-append-overwrite; Paimon refuses the other option
    a = cat.create_table("db.a", SCHEMA, [], ["p"], {})
    a.write(_data([(1, 1, "a")]))
    with pytest.raises(Exception, match="streaming-read-append-overwrite"):
        _run(spark, a.root, str(tmp_path / "o3"), str(tmp_path / "c3"), **{"streaming-read-overwrite": "true"})
