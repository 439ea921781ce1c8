"""Crash at named points (child process killed with os._exit), then re-open, check, recover.

Default run: a representative subset. ``-m reliability``: the full matrix: every write/commit point x arrivals 1..3
x {1, 4} buckets x {deduplicate, partial-update} (aggregation and the deletion-vector tables dv-deduplicate and
dv-aggregation: 2nd arrival); every compaction, expiration, orphan cleanup, tag and rollback point x its arrivals x
{1, 4} buckets x {deduplicate, partial-update} (aggregation and dv-deduplicate: 4 buckets).
"""
from __future__ import annotations

import os

import pyarrow as pa
import pytest

from engine.crash_points import POINTS, crash_point, run_crashing
from engine.errors import TableNotFound
from tests.reliability import scenarios as sc

FULL = [(p, n, b, e) for e in ("deduplicate", "partial-update") for p in sc.WRITE_AND_COMMIT_POINTS
        for n in (1, 2, 3) for b in (1, 4)] + \
       [(p, 2, b, e) for e in ("aggregation", "dv-deduplicate", "dv-aggregation") for p in sc.WRITE_AND_COMMIT_POINTS
        for b in (1, 4)]
DEFAULT = [("write.after-data-file", 2, 4, "deduplicate"), ("commit.before-publish", 2, 4, "partial-update"),
           ("commit.after-publish", 2, 4, "deduplicate")]
MAINTENANCE_FULL = [(op, p, n, b, e) for e in ("deduplicate", "partial-update") for op, p, n in sc.maintenance_points()
                    for b in (1, 4)] + \
                   [(op, p, n, 4, e) for e in ("aggregation", "dv-deduplicate") for op, p, n in sc.maintenance_points()]
MAINTENANCE_DEFAULT = [("compact", "compact.after-output-file", 2, 4, "partial-update"),
                       ("compact", "compact.after-rewrite", 1, 4, "dv-deduplicate"),
                       ("expire", "expire.after-snapshot-file", 1, 4, "deduplicate"),
                       ("rollback", "rollback.after-snapshot-file", 1, 4, "deduplicate"),
                       ("orphans", "orphans.after-delete", 1, 1, "deduplicate")]


def _assert_case(tmp_path, point, occurrence, buckets, engine):
    out = sc.crash_case(str(tmp_path), point, occurrence, buckets, engine=engine)
    assert out.crashed, f"{point} #{occurrence} was never reached"
    assert out.failures == []
    assert out.orphan_bytes_after_cleanup == 0


@pytest.mark.parametrize("point,occurrence,buckets,engine", DEFAULT)
def test_crash_subset(tmp_path, point, occurrence, buckets, engine):
    _assert_case(tmp_path, point, occurrence, buckets, engine)


@pytest.mark.reliability
@pytest.mark.parametrize("point,occurrence,buckets,engine", FULL)
def test_crash_matrix(tmp_path, point, occurrence, buckets, engine):
    _assert_case(tmp_path, point, occurrence, buckets, engine)


def _assert_maintenance_case(tmp_path, operation, point, occurrence, buckets, engine):
    out = sc.maintenance_crash_case(str(tmp_path), operation, point, occurrence, buckets, engine)
    assert out.crashed, f"{operation}: {point} #{occurrence} was never reached"
    assert out.failures == []
    assert out.orphan_bytes_after_cleanup == 0


@pytest.mark.parametrize("operation,point,occurrence,buckets,engine", MAINTENANCE_DEFAULT)
def test_maintenance_crash_subset(tmp_path, operation, point, occurrence, buckets, engine):
    _assert_maintenance_case(tmp_path, operation, point, occurrence, buckets, engine)


@pytest.mark.reliability
@pytest.mark.parametrize("operation,point,occurrence,buckets,engine", MAINTENANCE_FULL)
def test_maintenance_crash_matrix(tmp_path, operation, point, occurrence, buckets, engine):
    _assert_maintenance_case(tmp_path, operation, point, occurrence, buckets, engine)


def test_every_maintenance_point_is_in_the_matrix():
    covered = {p for _, p, _ in sc.maintenance_points()} | set(sc.WRITE_AND_COMMIT_POINTS) | {"commit.after-rebase"}
    assert set(POINTS) - covered == {"catalog.before-schema"}


def test_crash_while_resequencing_onto_a_concurrent_commit(tmp_path):
    out = sc.rebase_crash_case(str(tmp_path))
    assert out.crashed
    assert out.failures == []
    assert out.leftover_files >= 1  # the re-sequenced copy, unreferenced


def _create(warehouse):
    sc.create_table(warehouse, 1)


def test_crash_in_create_table_leaves_no_table(tmp_path):
    warehouse = str(tmp_path / "wh")
    run = run_crashing("catalog.before-schema", _create, warehouse)
    assert run.crashed
    from engine import Catalog
    with pytest.raises(TableNotFound):
        Catalog(warehouse).get_table(sc.IDENT)
    t = sc.create_table(warehouse, 1)
    t.write(pa.table({"p": ["a"], "id": [1], "v": ["x"]}))
    assert t.check().ok


def test_every_point_is_documented():
    for name, text in POINTS.items():
        assert "." in name and text


def test_unregistered_point_raises_when_armed(monkeypatch):
    monkeypatch.setenv("LAKEMERGE_CRASH_POINT", "commit.before-publish")
    with pytest.raises(ValueError, match="not registered"):
        crash_point("commit.no-such-step")
    crash_point("write.after-data-file")  # armed for another point: no effect


def _returns(x):
    return x * 2


def _raises():
    raise RuntimeError("boom")


def test_runner_reports_normal_exit_and_errors():
    ok = run_crashing("commit.after-hint", _returns, 21)
    assert (ok.crashed, ok.exit_code, ok.result) == (False, 0, 42)
    bad = run_crashing(None, _raises)
    assert not bad.crashed and bad.exit_code == 1 and "boom" in bad.error
    assert os.environ.get("LAKEMERGE_CRASH_POINT") is None
