"""Shared fixtures. Nothing here starts Spark; pypaimon helpers live in tests/interop/pypaimon_util.py."""
from __future__ import annotations

import os

import pytest


@pytest.fixture
def warehouse(tmp_path) -> str:
    """A fresh warehouse directory (as a plain path string); lakemerge creates it on first use."""
    return str(tmp_path / "warehouse")


@pytest.fixture
def catalog(warehouse):
    """A lakemerge Catalog on ``warehouse`` with database "db" created."""
    from engine import (
        Catalog,  # imported lazily so collection works while the engine is being written
    )

    cat = Catalog(warehouse)
    cat.create_database("db")
    return cat


def list_files(root: str) -> list[str]:
    """Every file under ``root``, as sorted relative paths (used to prove a rejected write left nothing)."""
    out = []
    for d, _, files in os.walk(root):
        for f in files:
            out.append(os.path.relpath(os.path.join(d, f), root))
    return sorted(out)


def expire_after_latest(table, **kwargs):
    """``table.expire_snapshots(**kwargs)`` once the clock has left the latest snapshot's millisecond.

    With ``time_retained=0`` Paimon expires a snapshot only when the next one is strictly older than now, so an
    expiry in the same millisecond as the last commit keeps one more snapshot; waiting out that millisecond keeps
    tests deterministic."""
    import time
    latest = table.snapshot_manager.latest()
    while latest is not None and time.time() * 1000 < latest.time_millis + 1:
        time.sleep(0.001)
    return table.expire_snapshots(**kwargs)


def table_with_an_expired_tagged_snapshot(catalog, name: str):
    """Table ``name`` (k BIGINT NOT NULL primary key, v STRING) whose snapshot 1 (row 1 'a') is tagged ``t1`` and
    then expired (only snapshot 2 stays) after column v was renamed to w and rows (1, 'b'), (2, 'c') written."""
    import pyarrow as pa
    t = catalog.create_table(name, pa.schema([pa.field("k", pa.int64(), False), ("v", pa.string())]), ["k"],
                             options={"bucket": "1", "snapshot.num-retained.min": "1",
                                      "snapshot.num-retained.max": "1"})
    t.write(pa.table({"k": [1], "v": ["a"]}, schema=t.arrow_schema))
    t.create_tag("t1", 1)
    t.alter().rename_column("v", "w").commit()
    t.write(pa.table({"k": [1, 2], "w": ["b", "c"]}))
    expire_after_latest(t)
    return t
