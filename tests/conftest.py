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
