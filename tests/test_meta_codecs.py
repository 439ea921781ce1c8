"""Codecs of snapshot JSON, manifests and manifest lists (engine.meta), including interop with pypaimon."""
from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path

import fastavro
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.errors import CorruptFile
from engine.meta.data_file import EMPTY_ROW, FILE_SOURCE_APPEND, FILE_SOURCE_COMPACT, DataFileMeta, SimpleStats
from engine.meta.manifest import (
    ADD,
    DELETE,
    MANIFEST_ENTRY_SCHEMA,
    DuplicateFileError,
    ManifestEntry,
    ManifestFileMeta,
    decode_manifest,
    decode_manifest_list,
    encode_manifest,
    encode_manifest_list,
    fold_entries,
)
from engine.meta.snapshot import BATCH_COMMIT_IDENTIFIER, COMMIT_KINDS, Snapshot

# --- strategies ----------------------------------------------------------------------------------------
INT = st.integers(-(2**31), 2**31 - 1)
LONG = st.integers(-(2**63), 2**63 - 1)
NAME = st.text(max_size=12)
ROW = st.binary(max_size=40)
MILLIS = st.integers(-62135596800000, 253402300799999)


def opt(strategy):
    return st.none() | strategy


def tuples(strategy, max_size=4):
    return st.lists(strategy, max_size=max_size).map(tuple)


STATS = st.builds(SimpleStats, ROW, ROW, opt(tuples(opt(LONG))))
FILES = st.builds(
    DataFileMeta,
    file_name=NAME, file_size=LONG, row_count=LONG, min_key=ROW, max_key=ROW, key_stats=STATS,
    value_stats=STATS, min_sequence_number=LONG, max_sequence_number=LONG, schema_id=LONG, level=INT,
    extra_files=tuples(NAME), creation_time_millis=opt(MILLIS), delete_row_count=opt(LONG),
    embedded_index=opt(st.binary(max_size=16)), file_source=opt(INT), value_stats_cols=opt(tuples(NAME)),
    external_path=opt(NAME), first_row_id=opt(LONG), write_cols=opt(tuples(NAME)),
    write_cols_sequences=opt(tuples(LONG)),
)
ENTRIES = st.builds(ManifestEntry, st.sampled_from([ADD, DELETE]), ROW, INT, INT, FILES)
METAS = st.builds(
    ManifestFileMeta, NAME, LONG, LONG, LONG, STATS, LONG, opt(INT), opt(INT), opt(INT), opt(INT), opt(LONG),
    opt(LONG),
)
SNAPSHOTS = st.builds(
    Snapshot,
    version=st.just(3), id=LONG, schema_id=LONG, base_manifest_list=NAME, delta_manifest_list=NAME,
    changelog_manifest_list=opt(NAME), commit_user=NAME, commit_identifier=LONG,
    commit_kind=st.sampled_from(sorted(COMMIT_KINDS)), time_millis=LONG, total_record_count=LONG,
    delta_record_count=LONG, changelog_record_count=opt(LONG), watermark=opt(LONG), index_manifest=opt(NAME),
    statistics=opt(NAME), properties=opt(st.dictionaries(NAME, NAME, min_size=1, max_size=3)),
    base_manifest_list_size=opt(LONG), delta_manifest_list_size=opt(LONG),
    changelog_manifest_list_size=opt(LONG), next_row_id=opt(LONG), operation=opt(NAME), uuid=opt(NAME),
    writer_version=opt(NAME),
)


def data_file(name="data-a-0.parquet", level=0, **kw) -> DataFileMeta:
    base = dict(file_name=name, file_size=100, row_count=3, min_key=EMPTY_ROW, max_key=EMPTY_ROW,
                key_stats=SimpleStats.EMPTY, value_stats=SimpleStats.EMPTY, min_sequence_number=0,
                max_sequence_number=2, schema_id=0, level=level)
    base.update(kw)
    return DataFileMeta(**base)


def entry(kind=ADD, name="data-a-0.parquet", level=0, bucket=0, **kw) -> ManifestEntry:
    return ManifestEntry(kind, EMPTY_ROW, bucket, 2, data_file(name, level, **kw))


def snapshot(**kw) -> Snapshot:
    base = dict(id=1, schema_id=0, base_manifest_list="manifest-list-x-0", delta_manifest_list="manifest-list-x-1",
                commit_user="u", commit_identifier=BATCH_COMMIT_IDENTIFIER, commit_kind="APPEND",
                time_millis=1700000000000, total_record_count=3, delta_record_count=3)
    base.update(kw)
    return Snapshot(**base)


def avro_bytes(schema: dict, records: list[dict]) -> bytes:
    buf = io.BytesIO()
    fastavro.writer(buf, fastavro.parse_schema(schema), records, codec="zstandard")
    return buf.getvalue()


def writer_schema(data: bytes) -> dict:
    return json.loads(fastavro.reader(io.BytesIO(data)).metadata["avro.schema"])


# --- data files and stats ------------------------------------------------------------------------------
def test_empty_stats_and_constants():
    assert SimpleStats.EMPTY == SimpleStats(bytes.fromhex("00000000" + "00" * 8), EMPTY_ROW, ())
    assert len(EMPTY_ROW) == 12
    assert (FILE_SOURCE_APPEND, FILE_SOURCE_COMPACT, ADD, DELETE) == (0, 1, 0, 1)
    assert BATCH_COMMIT_IDENTIFIER == 9223372036854775807


def test_upgrade_changes_only_level():
    f = data_file(extra_files=("x.index",), delete_row_count=0)
    up = f.upgrade(3)
    assert up.level == 3 and f.level == 0
    assert dataclasses.replace(up, level=0) == f


# --- manifest codecs -----------------------------------------------------------------------------------
@settings(deadline=None)
@given(st.lists(ENTRIES, max_size=5))
def test_manifest_round_trip(entries):
    data = encode_manifest(entries)
    decoded = decode_manifest(data, "m")
    assert decoded == entries
    for e in decoded:
        assert isinstance(e.file.extra_files, tuple)
        assert e.file.creation_time_millis is None or type(e.file.creation_time_millis) is int


@settings(deadline=None)
@given(st.lists(METAS, max_size=5))
def test_manifest_list_round_trip(metas):
    assert decode_manifest_list(encode_manifest_list(metas), "ml") == metas


def test_manifest_uses_java_schema_and_zstandard():
    data = encode_manifest([entry(creation_time_millis=1_700_000_000_123)])
    reader = fastavro.reader(io.BytesIO(data))
    assert reader.codec == "zstandard"
    schema = writer_schema(data)
    assert schema["name"] == "org.apache.paimon.avro.generated.record"
    assert [f["name"] for f in schema["fields"]] == [
        "_VERSION", "_KIND", "_PARTITION", "_BUCKET", "_TOTAL_BUCKETS", "_FILE"]
    file_rec = schema["fields"][5]["type"]
    assert file_rec["name"] == "org.apache.paimon.avro.generated.record__FILE"
    by_name = {f["name"]: f for f in file_rec["fields"]}
    assert by_name["_KEY_STATS"]["type"]["name"] == "org.apache.paimon.avro.generated.record__FILE__KEY_STATS"
    assert by_name["_CREATION_TIME"]["type"][1] == {"type": "long", "logicalType": "timestamp-millis"}
    assert len(file_rec["fields"]) == 21
    # the raw long on disk is the stored millis
    raw = fastavro.reader(io.BytesIO(data))
    assert next(iter(raw))["_VERSION"] == 2
    assert decode_manifest(data)[0].file.creation_time_millis == 1_700_000_000_123

    ml = writer_schema(encode_manifest_list([]))
    assert ml["name"] == "org.apache.paimon.avro.generated.record"
    assert [f["name"] for f in ml["fields"]][-2:] == ["_MIN_ROW_ID", "_MAX_ROW_ID"]
    assert ml["fields"][5]["type"]["name"] == "org.apache.paimon.avro.generated.record__PARTITION_STATS"


def test_decode_by_name_with_other_record_names_extra_and_missing_fields():
    """A file with other record names, an extra field and no optional fields still decodes."""
    stats = {"type": "record", "name": "S", "fields": [
        {"name": "_MIN_VALUES", "type": "bytes"}, {"name": "_MAX_VALUES", "type": "bytes"}]}
    schema = {"type": "record", "name": "Entry", "fields": [
        {"name": "_VERSION", "type": "int"}, {"name": "_KIND", "type": "int"},
        {"name": "_PARTITION", "type": "bytes"}, {"name": "_BUCKET", "type": "int"},
        {"name": "_TOTAL_BUCKETS", "type": "int"}, {"name": "_SOMETHING_NEW", "type": "string"},
        {"name": "_FILE", "type": {"type": "record", "name": "F", "fields": [
            {"name": "_FILE_NAME", "type": "string"}, {"name": "_FILE_SIZE", "type": "long"},
            {"name": "_ROW_COUNT", "type": "long"}, {"name": "_MIN_KEY", "type": "bytes"},
            {"name": "_MAX_KEY", "type": "bytes"}, {"name": "_KEY_STATS", "type": stats},
            {"name": "_VALUE_STATS", "type": "S"}, {"name": "_MIN_SEQUENCE_NUMBER", "type": "long"},
            {"name": "_MAX_SEQUENCE_NUMBER", "type": "long"}, {"name": "_SCHEMA_ID", "type": "long"},
            {"name": "_LEVEL", "type": "int"}, {"name": "_EXTRA_FILES", "type": {"type": "array", "items": "string"}},
            {"name": "_CREATION_TIME", "type": ["null", "long"]},
        ]}},
    ]}
    row = {"_MIN_VALUES": EMPTY_ROW, "_MAX_VALUES": EMPTY_ROW}
    rec = {"_VERSION": 2, "_KIND": 1, "_PARTITION": EMPTY_ROW, "_BUCKET": 3, "_TOTAL_BUCKETS": 4,
           "_SOMETHING_NEW": "x", "_FILE": {
               "_FILE_NAME": "f", "_FILE_SIZE": 1, "_ROW_COUNT": 2, "_MIN_KEY": b"a", "_MAX_KEY": b"b",
               "_KEY_STATS": row, "_VALUE_STATS": row, "_MIN_SEQUENCE_NUMBER": 5, "_MAX_SEQUENCE_NUMBER": 6,
               "_SCHEMA_ID": 0, "_LEVEL": 1, "_EXTRA_FILES": ["e"], "_CREATION_TIME": 42}}
    [e] = decode_manifest(avro_bytes(schema, [rec]), "m")
    assert e == ManifestEntry(DELETE, EMPTY_ROW, 3, 4, DataFileMeta(
        "f", 1, 2, b"a", b"b", SimpleStats(EMPTY_ROW, EMPTY_ROW, None), SimpleStats(EMPTY_ROW, EMPTY_ROW, None),
        5, 6, 0, 1, ("e",), creation_time_millis=42))


def _minimal_schema(version_field_type="int", with_name=True):
    fields = [{"name": "_VERSION", "type": version_field_type}]
    if with_name:
        fields.append({"name": "_FILE_NAME", "type": "string"})
    return {"type": "record", "name": "r", "fields": fields}


def test_decode_rejects_bad_input():
    with pytest.raises(CorruptFile, match="m1"):
        decode_manifest(b"not avro at all", "m1")
    good = encode_manifest([entry()])
    with pytest.raises(CorruptFile):
        decode_manifest(good[: len(good) - 20], "m2")
    with pytest.raises(CorruptFile, match="_VERSION 1"):
        decode_manifest_list(avro_bytes(_minimal_schema(), [{"_VERSION": 1, "_FILE_NAME": "x"}]), "ml")
    with pytest.raises(CorruptFile, match="_FILE_SIZE"):
        decode_manifest_list(avro_bytes(_minimal_schema(), [{"_VERSION": 2, "_FILE_NAME": "x"}]), "ml")
    with pytest.raises(CorruptFile, match="_KIND"):
        decode_manifest(avro_bytes(_minimal_schema(with_name=False), [{"_VERSION": 2}]), "m3")
    assert decode_manifest(encode_manifest([])) == []


def test_encode_rejects_unreadable_creation_time():
    with pytest.raises(ValueError, match="creation time"):
        encode_manifest([entry(creation_time_millis=2**62)])


# --- fold ----------------------------------------------------------------------------------------------
def test_fold_add_delete_pending_and_upgrade():
    a, b, c = entry(name="a"), entry(name="b"), entry(name="c", bucket=1)
    live, pending = fold_entries([a, b, c, entry(DELETE, "b"), entry(DELETE, "gone")])
    assert list(live.values()) == [a, c]
    assert pending == {entry(DELETE, "gone").identifier}
    # an upgrade is DELETE(level 0) + ADD(level 1) of the same file name
    up = ManifestEntry(ADD, a.partition, a.bucket, a.total_buckets, a.file.upgrade(1))
    live, pending = fold_entries([a, ManifestEntry(DELETE, a.partition, 0, 2, a.file), up])
    assert list(live.values()) == [up] and not pending
    # identifier distinguishes bucket, level, partition and extra files
    assert len({entry(name="a").identifier, entry(name="a", bucket=1).identifier, entry(name="a", level=1).identifier,
                entry(name="a", extra_files=("i",)).identifier,
                ManifestEntry(ADD, b"\x00\x00\x00\x01" + bytes(8), 0, 2, a.file).identifier}) == 5
    assert entry(name="a").identifier == (EMPTY_ROW, 0, 0, "a", (), None, None)


def test_fold_duplicate_add_raises():
    with pytest.raises(DuplicateFileError, match="'a'") as info:
        fold_entries([entry(name="a"), entry(name="b"), entry(name="a")])
    assert isinstance(info.value, ValueError) and info.value.file_name == "a"
    with pytest.raises(DuplicateFileError):
        fold_entries([entry(DELETE, "a"), entry(ADD, "a")])
    with pytest.raises(ValueError, match="kind"):
        fold_entries([entry(kind=7)])


# --- snapshot ------------------------------------------------------------------------------------------
@settings(deadline=None)
@given(SNAPSHOTS)
def test_snapshot_round_trip(snap):
    text = snap.to_json()
    assert Snapshot.from_json(text, "s") == snap
    keys = json.loads(text).keys()
    assert "logOffsets" not in keys and all(v is not None for v in json.loads(text).values())


def test_snapshot_json_keys_and_order():
    s = snapshot(properties={}, watermark=None, changelog_record_count=5, uuid="u-1", writer_version="w")
    assert s.properties is None
    data = json.loads(s.to_json())
    assert list(data) == ["version", "uuid", "id", "schemaId", "baseManifestList", "deltaManifestList",
                          "commitUser", "writerVersion", "commitIdentifier", "commitKind", "timeMillis",
                          "totalRecordCount", "deltaRecordCount", "changelogRecordCount"]
    assert data["commitIdentifier"] == 2**63 - 1 and data["version"] == 3


def test_snapshot_tolerant_read_and_errors():
    data = json.loads(snapshot().to_json())
    data.update({"logOffsets": {}, "somethingNew": [1, 2], "watermark": None})
    assert Snapshot.from_json(json.dumps(data)) == snapshot()
    assert Snapshot.from_json(json.dumps(data).encode()) == snapshot()
    for bad in ("{", "[]", "null"):
        with pytest.raises(CorruptFile, match="snapshot-9"):
            Snapshot.from_json(bad, "snapshot-9")
    for key, value in [("commitUser", None), ("id", "1"), ("commitKind", "MERGE"), ("timeMillis", True),
                       ("properties", {"a": 1})]:
        broken = dict(data, **{key: value})
        with pytest.raises(CorruptFile, match=key):
            Snapshot.from_json(json.dumps(broken), "p")
    del data["deltaManifestList"]
    with pytest.raises(CorruptFile, match="deltaManifestList"):
        Snapshot.from_json(json.dumps(data), "p")
    with pytest.raises(ValueError):
        snapshot(commit_kind="append")


# --- interop with pypaimon -----------------------------------------------------------------------------
PA_SCHEMA = pa.schema([pa.field("dt", pa.string(), nullable=False), pa.field("id", pa.int64(), nullable=False),
                       pa.field("name", pa.string())])


def _catalog(warehouse: Path):
    from pypaimon import CatalogFactory
    return CatalogFactory.create({"warehouse": str(warehouse)})


def _make_table(warehouse: Path, partitioned: bool) -> Path:
    """Two commits into a 2-bucket PK table (keys overlap, so reads must merge). Returns the table dir."""
    from pypaimon import Schema
    cat = _catalog(warehouse)
    cat.create_database("db", True)
    schema = Schema.from_pyarrow_schema(PA_SCHEMA, primary_keys=["dt", "id"],
                                        partition_keys=["dt"] if partitioned else [], options={"bucket": "2"})
    cat.create_table("db.t", schema, False)
    table = cat.get_table("db.t")
    for start in (0, 5):
        ids = list(range(start, start + 10))
        wb = table.new_batch_write_builder()
        w, c = wb.new_write(), wb.new_commit()
        w.write_arrow(pa.table({"dt": ["2024-01-01"] * 10, "id": ids, "name": [f"v{start}-{i}" for i in ids]},
                               schema=PA_SCHEMA))
        c.commit(w.prepare_commit())
        w.close()
        c.close()
    return warehouse / "db.db" / "t"


def _read_rows(warehouse: Path) -> pa.Table:
    table = _catalog(warehouse).get_table("db.t")
    rb = table.new_read_builder()
    return rb.new_read().to_arrow(rb.new_scan().plan().splits()).sort_by("id")


def _latest(table_dir: Path) -> Snapshot:
    path = table_dir / "snapshot" / "snapshot-2"
    return Snapshot.from_json(path.read_text(encoding="utf-8"), str(path))


@pytest.mark.interop
@pytest.mark.parametrize("partitioned", [False, True])
def test_decode_pypaimon_table(tmp_path, partitioned):
    table_dir = _make_table(tmp_path, partitioned)
    snap = _latest(table_dir)
    assert (snap.id, snap.schema_id, snap.commit_kind) == (2, 0, "APPEND")
    assert snap.commit_identifier == BATCH_COMMIT_IDENTIFIER
    assert (snap.total_record_count, snap.delta_record_count) == (20, 10)
    assert snap.writer_version.startswith("python-2.1.0")

    mdir = table_dir / "manifest"
    entries = []
    for list_name, size in [(snap.base_manifest_list, snap.base_manifest_list_size),
                            (snap.delta_manifest_list, snap.delta_manifest_list_size)]:
        data = (mdir / list_name).read_bytes()
        assert len(data) == size
        for meta in decode_manifest_list(data, list_name):
            manifest = (mdir / meta.file_name).read_bytes()
            assert meta.file_size == len(manifest)
            decoded = decode_manifest(manifest, meta.file_name)
            assert meta.num_added_files == sum(e.kind == ADD for e in decoded)
            assert meta.num_deleted_files == sum(e.kind == DELETE for e in decoded)
            buckets = [e.bucket for e in decoded]
            assert (meta.min_bucket, meta.max_bucket) == (min(buckets), max(buckets))
            entries += decoded
    live, pending = fold_entries(entries)
    assert not pending and len(live) == len(entries) == 4
    assert sum(e.file.row_count for e in live.values()) == snap.total_record_count

    if partitioned:
        part_dir = table_dir / "dt=2024-01-01"
        # arity 1 | header | (len 10, offset 16) | "2024-01-01" padded to 16
        expected_partition = bytes.fromhex("00000001") + bytes(8) + (10).to_bytes(4, "little") \
            + (16).to_bytes(4, "little") + b"2024-01-01" + bytes(6)
    else:
        part_dir, expected_partition = table_dir, EMPTY_ROW
    for e in live.values():
        f = e.file
        assert e.partition == expected_partition
        assert e.bucket in (0, 1) and e.total_buckets == 2
        assert (part_dir / f"bucket-{e.bucket}" / f.file_name).stat().st_size == f.file_size
        assert f.level == 0 and f.extra_files == () and f.file_source == FILE_SOURCE_APPEND
        # key = primary key minus partition keys. Partitioned: (id BIGINT) = arity prefix + 8-byte header +
        # one slot. Unpartitioned: (dt STRING, id) = prefix + header + two slots + "2024-01-01" padded to 16.
        arity, key_len = (1, 20) if partitioned else (2, 44)
        assert len(f.min_key) == len(f.max_key) == key_len and f.min_key[:4] == arity.to_bytes(4, "big")
        assert len(f.key_stats.min_values) == len(f.key_stats.max_values) == key_len
        assert f.key_stats.null_counts == (0,) * arity
        assert f.min_key == f.key_stats.min_values and f.max_key == f.key_stats.max_values
        assert 0 <= f.min_sequence_number <= f.max_sequence_number
        assert f.max_sequence_number - f.min_sequence_number + 1 == f.row_count
        # local wall clock encoded as UTC: within a time-zone offset of the commit time
        assert abs(f.creation_time_millis - snap.time_millis) < 15 * 3600 * 1000


@pytest.mark.interop
@pytest.mark.parametrize("partitioned", [False, True])
def test_pypaimon_reads_re_encoded_metadata(tmp_path, partitioned):
    """Rewrite every manifest, manifest list and the latest snapshot with our codecs; pypaimon reads the same."""
    table_dir = _make_table(tmp_path, partitioned)
    before = _read_rows(tmp_path)
    assert before.num_rows == 15

    mdir = table_dir / "manifest"
    new_sizes = {}
    for path in mdir.glob("manifest-*"):
        if not path.name.startswith("manifest-list-"):
            original = path.read_bytes()
            entries = decode_manifest(original, str(path))
            data = encode_manifest(entries)
            assert decode_manifest(data) == entries
            path.write_bytes(data)
            new_sizes[path.name] = len(data)
    for path in mdir.glob("manifest-list-*"):
        metas = [dataclasses.replace(m, file_size=new_sizes[m.file_name])
                 for m in decode_manifest_list(path.read_bytes(), str(path))]
        path.write_bytes(encode_manifest_list(metas))
    snap = _latest(table_dir)
    snap = dataclasses.replace(
        snap, base_manifest_list_size=(mdir / snap.base_manifest_list).stat().st_size,
        delta_manifest_list_size=(mdir / snap.delta_manifest_list).stat().st_size)
    (table_dir / "snapshot" / "snapshot-2").write_text(snap.to_json(), encoding="utf-8")

    assert writer_schema((mdir / snap.delta_manifest_list).read_bytes())["name"].startswith("org.apache.paimon")
    after = _read_rows(tmp_path)
    assert after.equals(before)


@pytest.mark.interop
def test_pypaimon_reads_snapshot_written_by_to_json(tmp_path):
    table_dir = _make_table(tmp_path, partitioned=False)
    before = _read_rows(tmp_path)
    path = table_dir / "snapshot" / "snapshot-2"
    original = path.read_text(encoding="utf-8")
    snap = Snapshot.from_json(original, str(path))
    assert Snapshot.from_json(snap.to_json()) == snap
    assert json.loads(snap.to_json()) == json.loads(original)
    path.write_text(snap.to_json(), encoding="utf-8")
    assert _read_rows(tmp_path).equals(before)
    # pypaimon's own snapshot parser agrees on every field
    latest = _catalog(tmp_path).get_table("db.t").snapshot_manager().get_latest_snapshot()
    for field in ("id", "schema_id", "base_manifest_list", "delta_manifest_list", "total_record_count",
                  "commit_identifier", "commit_kind", "time_millis", "uuid", "writer_version"):
        assert getattr(latest, field) == getattr(snap, field)


def test_manifest_schema_constant_is_parsed_once():
    assert isinstance(MANIFEST_ENTRY_SCHEMA, dict) and "__fastavro_parsed" in MANIFEST_ENTRY_SCHEMA
