"""Tables written by pypaimon 2.1.0 are read by lakemerge exactly as pypaimon reads them, at every snapshot.

Where pypaimon itself is wrong (its _DELETE_ROW_COUNT=0 phantom rows, see tests/interop/oracle.py), lakemerge must
follow Paimon's documented behaviour instead, computed from a plain dict model of the writes.

pypaimon time travel: ``table.copy({"scan.snapshot-id": "N"})`` (verified in test_pypaimon_time_travel_works).
"""
from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pytest

from tests.interop.dict_model import DictModel
from tests.interop.oracle import split_pypaimon_phantoms
from tests.interop.pypaimon_util import (
    assert_rows_equal,
    pp_arrow_schema,
    pp_catalog,
    pp_create_table,
    pp_read,
    pp_snapshot_ids,
    pp_write,
    rows_of,
    sort_rows,
)
from tests.interop.scenarios import Scenario, all_scenarios, partitioned, sequence_field

pytestmark = pytest.mark.interop


@dataclass
class Written:
    scenario: Scenario
    warehouse: str
    pp_table: object
    model: DictModel
    snapshot_ids: list[int]


def write_with_pypaimon(sc: Scenario, warehouse: str) -> Written:
    cat = pp_catalog(warehouse)
    t = pp_create_table(cat, sc.identifier, sc.schema, sc.primary_key, sc.partition_keys, sc.options)
    model = DictModel(sc.schema, sc.primary_key, sc.sequence_fields, rowkind_field="rk")
    sids = []
    for i in range(len(sc.commits)):
        data = sc.commit_table(i)
        sid = pp_write(t, data, sc.schema)
        model.apply(data)
        model.commit(sid)
        sids.append(sid)
    return Written(sc, warehouse, cat.get_table(sc.identifier), model, sids)


@pytest.fixture(scope="module", params=all_scenarios(), ids=lambda s: s.name)
def written(request, tmp_path_factory) -> Written:
    sc = request.param
    return write_with_pypaimon(sc, str(tmp_path_factory.mktemp("pp-" + sc.name) / "warehouse"))


def lm_table(w: Written):
    from engine import Catalog

    return Catalog(w.warehouse).get_table(w.scenario.identifier)


# ------------------------------------------------------------------------------------------------------
# oracle self-checks (pypaimon only; these run without lakemerge)
# ------------------------------------------------------------------------------------------------------
def test_pypaimon_reads_its_own_table_at_every_snapshot(written):
    w = written
    assert pp_snapshot_ids(w.pp_table) == w.snapshot_ids == list(range(1, len(w.scenario.commits) + 1))
    phantom_total = 0
    for sid in w.snapshot_ids:
        pp_rows = rows_of(pp_read(w.pp_table, sid), w.scenario.primary_key)
        phantom_total += len(split_pypaimon_phantoms(pp_rows, w.model, sid))
    if w.scenario.expects_pypaimon_phantoms:
        # Documents the pypaimon 2.1.0 bug (_DELETE_ROW_COUNT=0): deletes of keys absent elsewhere in their
        # bucket show up as rows. If this fails, pypaimon was fixed and this scenario no longer covers it.
        assert phantom_total > 0


def test_pypaimon_time_travel_works(tmp_path):
    """pypaimon's time travel is ``table.copy({"scan.snapshot-id": "N"})``; each snapshot shows its own state."""
    sc = sequence_field()  # no phantom rows in this scenario, so pypaimon must equal the model exactly
    w = write_with_pypaimon(sc, str(tmp_path / "wh"))
    seen = []
    for sid in w.snapshot_ids:
        rows = rows_of(pp_read(w.pp_table, sid), sc.primary_key)
        assert_rows_equal(rows, w.model.live_rows(sid), sc.primary_key, f"pypaimon at snapshot {sid}")
        assert rows not in seen, f"snapshot {sid} reads the same as an earlier snapshot"
        seen.append(rows)
    assert rows_of(pp_read(w.pp_table), sc.primary_key) == seen[-1]
    assert len(seen[0]) == 10 and {r["v"] for r in seen[0]} == {f"c1-{i}" for i in range(1, 11)}


# ------------------------------------------------------------------------------------------------------
# lakemerge reads
# ------------------------------------------------------------------------------------------------------
def test_lakemerge_reads_pypaimon_table_at_every_snapshot(written):
    w = written
    sc = w.scenario
    t = lm_table(w)
    assert [s.id for s in t.snapshots()] == w.snapshot_ids
    expected_types = [(f.name, f.type) for f in pp_arrow_schema(w.pp_table)]
    for sid in w.snapshot_ids:
        got = t.read(snapshot_id=sid)
        assert [(f.name, f.type) for f in got.schema] == expected_types, f"snapshot {sid}: Arrow schema"
        lm_rows = rows_of(got, sc.primary_key)
        pp_rows = rows_of(pp_read(w.pp_table, sid), sc.primary_key)
        phantoms = split_pypaimon_phantoms(pp_rows, w.model, sid)
        if phantoms:
            assert_rows_equal(
                lm_rows, w.model.live_rows(sid), sc.primary_key,
                f"{sc.name} snapshot {sid}: pypaimon is WRONG here (phantom rows {phantoms[:3]} from its "
                f"_DELETE_ROW_COUNT=0 bug); lakemerge must return Paimon's documented result (deleted keys gone) "
                f"and differs from it:")
        else:
            assert_rows_equal(lm_rows, pp_rows, sc.primary_key,
                              f"{sc.name} snapshot {sid}: lakemerge (actual) vs pypaimon (expected):")
    latest = rows_of(t.read(), sc.primary_key)
    assert_rows_equal(latest, w.model.live_rows(w.snapshot_ids[-1]), sc.primary_key,
                      f"{sc.name}: read() without snapshot_id must be the latest snapshot")


def test_lakemerge_snapshot_metadata_matches_pypaimon(written):
    w = written
    t = lm_table(w)
    pp_snaps = {s.id: s for s in w.pp_table.snapshot_manager().list_snapshots()}
    for s in t.snapshots():
        p = pp_snaps[s.id]
        assert s.schema_id == p.schema_id
        assert s.commit_kind == p.commit_kind
        assert s.time_millis == p.time_millis
        assert s.total_record_count == p.total_record_count


def test_lakemerge_lookup_on_pypaimon_table(written):
    w = written
    sc = w.scenario
    t = lm_table(w)
    all_keys = sorted({w.model.key_of(r) for c in sc.commits for r in c},
                      key=lambda k: tuple((v is None, str(v)) for v in k))
    probe = all_keys[::2]  # distinct keys: live ones and deleted ones
    keys = pa.Table.from_pylist([dict(zip(sc.primary_key, k)) for k in probe],
                                schema=pa.schema([sc.schema.field(c) for c in sc.primary_key]))
    for sid in (w.snapshot_ids[0], w.snapshot_ids[-1]):
        got = rows_of(t.lookup(keys, snapshot_id=sid), sc.primary_key)
        assert_rows_equal(got, w.model.lookup_rows(probe, sid), sc.primary_key,
                          f"{sc.name} lookup at snapshot {sid}:")


def _matches(row, conj):
    ops = {"=": lambda a, b: a == b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b,
           ">": lambda a, b: a > b, ">=": lambda a, b: a >= b, "<": lambda a, b: a < b,
           "<=": lambda a, b: a <= b, "in": lambda a, b: a in b, "not in": lambda a, b: a not in b}
    for col, op, val in conj:
        v = row[col]
        if v is None or not ops[op](v, val):
            return False
    return True


@pytest.mark.parametrize("flt", [
    [("dt", "=", "2024-01-01"), ("id", ">", 10)],
    [[("dt", "=", "2024-01-02")], [("id", "<", 3), ("dt", "!=", "2024-01-01")]],
    [("v", "=", "upd-3")],  # a value column: must be applied after the merge
    [("dt", "in", ["a/b:c=d", "  "])],
])
def test_lakemerge_projection_and_filter_on_pypaimon_table(tmp_path, flt):
    sc = partitioned()
    w = write_with_pypaimon(sc, str(tmp_path / "wh"))
    t = lm_table(w)
    disjuncts = flt if isinstance(flt[0], list) else [flt]
    for sid in w.snapshot_ids:
        expected = [r for r in w.model.live_rows(sid) if any(_matches(r, c) for c in disjuncts)]
        got = t.read(snapshot_id=sid, filter=flt)
        assert_rows_equal(rows_of(got, sc.primary_key), expected, sc.primary_key,
                          f"snapshot {sid} filter {flt}:")
        cols = ["dt", "id", "v"]
        got = t.read(snapshot_id=sid, columns=cols, filter=flt)
        assert got.column_names == cols
        assert_rows_equal(rows_of(got, ["dt", "id"]),
                          sort_rows([{c: r[c] for c in cols} for r in expected], ["dt", "id"]), ["dt", "id"],
                          f"snapshot {sid} columns {cols} filter {flt}:")


def test_lakemerge_check_finds_pypaimon_tables_consistent(written):
    """fsck on a table pypaimon wrote: no problem, in particular every snapshot's base is the state of the one before
    it (the lineage check that flags a stale snapshot claim)."""
    report = lm_table(written).check()
    assert report.problems == []
