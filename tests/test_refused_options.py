"""Paimon options turning on features lakemerge cannot read or write (engine.refused_options): tables carrying them,
as Paimon or pypaimon create them, are refused with UnsupportedFeature naming the table and the option."""
from __future__ import annotations

import dataclasses

import pyarrow as pa
import pytest

from engine import Catalog
from engine.errors import InvalidOption, InvalidSchema, UnsupportedFeature
from engine.refused_options import READ, REFUSALS, WRITE
from engine.system_tables import system_table

SCHEMA = pa.schema([("k", pa.int64()), ("v", pa.string())])
ROWS = pa.table({"k": [1, 2], "v": ["a", "b"]})


def _value(refusal) -> str:
    return next(v for v in ("true", "v", "format-table") if refusal.active(v))


def _table(catalog, name: str, pk: bool):
    opts = {"bucket": "1"} if pk else {}
    t = catalog.create_table(f"db.{name}", SCHEMA, primary_key=["k"] if pk else None, options=opts)
    t.write(ROWS)
    return t


def _with_option(catalog, t, key: str, value: str):
    """Commit a schema carrying ``key=value`` as Java or pypaimon would (no lakemerge check runs) and reopen."""
    s = t.schema
    new = dataclasses.replace(s, id=s.id + 1, options={**s.options, key: value})
    t.file_io.write_bytes(t.paths.schema(new.id), new.to_json().encode())
    return new


@pytest.mark.parametrize("refusal", [r for r in REFUSALS if r.scope == READ], ids=lambda r: r.key)
def test_a_read_feature_cannot_be_opened(catalog, refusal):
    t = _table(catalog, "t", pk=True)
    _with_option(catalog, t, refusal.key, _value(refusal))
    with pytest.raises(UnsupportedFeature) as e:
        catalog.get_table("db.t")
    assert "'db.t'" in str(e.value) and refusal.key in str(e.value)


@pytest.mark.parametrize("refusal", [r for r in REFUSALS if r.scope == WRITE], ids=lambda r: r.key)
@pytest.mark.parametrize("pk", [True, False], ids=["pk", "append"])
def test_a_write_feature_reads_but_refuses_writes_and_compaction(catalog, refusal, pk):
    t = _table(catalog, "t", pk=pk)
    _with_option(catalog, t, refusal.key, _value(refusal))
    t = catalog.get_table("db.t")
    assert sorted(t.to_arrow().to_pylist(), key=lambda r: r["k"]) == ROWS.to_pylist()
    latest = t.latest_snapshot_id()
    for action in (lambda: t.write(ROWS), lambda: t.compact(full=True), lambda: t.delete_where(None)):
        with pytest.raises(UnsupportedFeature) as e:
            action()
        assert "'db.t'" in str(e.value) and refusal.key in str(e.value)
    assert t.latest_snapshot_id() == latest


@pytest.mark.parametrize("refusal", REFUSALS, ids=lambda r: r.key)
def test_creating_or_altering_to_a_refused_feature_is_refused(catalog, refusal):
    with pytest.raises(UnsupportedFeature, match=refusal.key):
        catalog.create_table("db.n", SCHEMA, primary_key=["k"], options={"bucket": "1",
                                                                         refusal.key: _value(refusal)})
    assert not catalog.table_exists("db.n")
    t = catalog.create_table("db.t", SCHEMA, primary_key=["k"], options={"bucket": "1"})  # empty: immutable
    expected = InvalidSchema if refusal.key == "type" else UnsupportedFeature  # type can never change
    with pytest.raises(expected, match=refusal.key):  # other options may still change on an empty table
        t.alter().set_option(refusal.key, _value(refusal)).commit()
    assert catalog.get_table("db.t").schema.id == t.schema.id


def test_inactive_values_are_not_refused(catalog):
    """Boolean features set to false, and blank column lists, are the defaults: nothing to refuse."""
    t = catalog.create_table("db.t", SCHEMA, primary_key=["k"],
                             options={"bucket": "1", "data-evolution.enabled": "false",
                                      "row-tracking.enabled": "false", "blob-field": " "})
    t.write(ROWS)
    assert t.to_arrow().num_rows == 2


def test_a_vector_file_format_without_vector_columns_is_not_refused(catalog):
    """vector.file.format only moves VECTOR columns to their own files (Paimon's VectorType.fieldsInVectorFile); a
    table without one (a catalog's table-default may set it on every table) reads and writes as any other. A VECTOR
    column itself is a type lakemerge cannot read (InvalidSchema)."""
    t = _table(catalog, "t", pk=False)
    _with_option(catalog, t, "vector.file.format", "lance")
    t = catalog.get_table("db.t")
    t.write(ROWS)
    assert sorted(t.to_arrow().column("k").to_pylist()) == [1, 1, 2, 2]
    u = catalog.create_table("db.u", SCHEMA, primary_key=["k"], options={"bucket": "1", "vector.file.format": "lance"})
    u.write(ROWS)
    assert u.to_arrow().num_rows == 2


def test_audit_log_with_sequence_numbers_is_refused(catalog):
    """Paimon's AuditLogTable adds _SEQUENCE_NUMBER after rowkind when table-read.sequence-number.enabled;
    lakemerge's audit_log has no such column, so it refuses; the table itself reads and writes."""
    t = _table(catalog, "t", pk=True)
    assert system_table(t, "audit_log").to_arrow().num_rows == 2
    t.alter().set_option("table-read.sequence-number.enabled", "true").commit()
    t = catalog.get_table("db.t")
    t.write(ROWS)
    with pytest.raises(UnsupportedFeature, match="table-read.sequence-number.enabled"):
        system_table(t, "audit_log").to_arrow()


def test_sequence_numbers_in_reads_need_a_primary_key(catalog):
    """Paimon's SchemaValidation.validateChangelogReadSequenceNumber."""
    with pytest.raises(InvalidOption, match="table-read.sequence-number.enabled"):
        catalog.create_table("db.a", SCHEMA, options={"table-read.sequence-number.enabled": "true"})


def _pp_table(warehouse, name, options):
    from pypaimon import CatalogFactory, Schema
    cat = CatalogFactory.create({"warehouse": warehouse})
    cat.create_database("db", True)
    schema = pa.schema([("k", pa.int64()), ("v", pa.string())])
    cat.create_table(f"db.{name}", Schema.from_pyarrow_schema(schema, options=options), False)
    t = cat.get_table(f"db.{name}")
    wb = t.new_batch_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    w.write_arrow(pa.table({"k": [1, 2], "v": ["a", "b"]}, schema=schema))
    c.commit(w.prepare_commit())
    w.close()
    c.close()


def test_pypaimon_row_tracking_table_reads_but_refuses_writes(warehouse):
    """pypaimon 2.1 writes row-tracking append tables (it assigns first_row_id at commit)."""
    _pp_table(warehouse, "rt", {"row-tracking.enabled": "true"})
    t = Catalog(warehouse).get_table("db.rt")
    assert sorted(t.to_arrow().column("k").to_pylist()) == [1, 2]
    with pytest.raises(UnsupportedFeature, match="row-tracking.enabled"):
        t.write(ROWS)


def test_pypaimon_data_evolution_table_is_refused(warehouse):
    _pp_table(warehouse, "de", {"row-tracking.enabled": "true", "data-evolution.enabled": "true"})
    with pytest.raises(UnsupportedFeature, match="data-evolution.enabled"):
        Catalog(warehouse).get_table("db.de")
