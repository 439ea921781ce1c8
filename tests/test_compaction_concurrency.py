"""A dedicated compactor racing writers in other processes: nothing acknowledged is lost, conflicts abort cleanly."""
from __future__ import annotations

import multiprocessing as mp
import os

import pyarrow as pa
import pytest

from engine import Catalog
from engine.errors import CommitConflict
from engine.maintenance.orphans import referenced_files

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.int64()), ("w", pa.int64())])


def _writer(args):
    warehouse, worker, commits, write_only = args
    t = Catalog(warehouse).get_table("db.t")
    acknowledged = []
    for i in range(commits):
        # every writer rewrites the shared keys 0..9 with increasing values, plus keys of its own
        ids = list(range(10)) + [10_000 * (worker + 1) + i]
        with t.new_write(commit_user=f"writer-{worker}", commit_identifier=i + 1) as w:
            w.write(pa.table({"id": ids, "v": [i] * len(ids), "w": [worker] * len(ids)}))
            sid = t.commit(w.prepare_commit())
        acknowledged.append((i, sid))
    return acknowledged


@pytest.mark.slow
@pytest.mark.parametrize("write_only", [True, False])
def test_compaction_racing_writers_in_other_processes_loses_nothing(tmp_path, write_only):
    warehouse = str(tmp_path / "wh")
    cat = Catalog(warehouse)
    cat.create_database("db")
    opts = {"bucket": "2", "commit.min-retry-wait": "1 ms", "commit.max-retries": "200",
            "write-only": str(write_only).lower(), "num-sorted-run.compaction-trigger": "3"}
    t = cat.create_table("db.t", SCHEMA, primary_key=["id"], options=opts)
    workers, commits = 1, 25  # one writer per bucket (Paimon's rule), a separate compactor
    ctx = mp.get_context("spawn")
    with ctx.Pool(workers) as pool:
        pending = pool.map_async(_writer, [(warehouse, w, commits, write_only) for w in range(workers)])
        compactions = conflicts = 0
        while not pending.ready():
            try:
                if t.compact(full=write_only is False or compactions % 2 == 1) is not None:
                    compactions += 1
            except CommitConflict:
                conflicts += 1
        results = pending.get()
    t.compact(full=True)
    rows = {r["id"]: (r["v"], r["w"]) for r in t.read().to_pylist()}
    for worker, acked in enumerate(results):
        assert len(acked) == commits
        for i, sid in acked:
            assert rows[10_000 * (worker + 1) + i] == (i, worker)
            assert 10_000 * (worker + 1) + i in t.read(sid).column("id").to_pylist()
    assert all(rows[k] == (commits - 1, 0) for k in range(10))
    assert len(rows) == 10 + workers * commits
    assert compactions > 0
    # every file written by an aborted compaction was deleted: nothing on disk is unreferenced
    referenced = {os.path.normpath(p) for p in referenced_files(t)}
    for d, _, files in os.walk(t.root):
        top = os.path.relpath(d, t.root).split(os.sep)[0]
        if top.startswith("bucket-"):
            for f in files:
                assert os.path.normpath(os.path.join(d, f)) in referenced, f
