"""On-disk format details that Paimon readers rely on (format spec §4, §5, §7, §10, §12)."""
from __future__ import annotations

import datetime as dt
import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine import Catalog
from engine.meta import binary_row
from engine.meta.manifest import decode_manifest
from engine.paths import escape_partition_component, partition_value_text
from engine.types import parse_atomic


def _read(path):
    with open(path, "rb") as f:
        return f.read()


@pytest.fixture
def table(tmp_path):
    cat = Catalog(f"file://{tmp_path}/wh")
    cat.create_database("db")
    schema = pa.schema([("dt", pa.string()), ("id", pa.int64()), ("name", pa.string()), ("op", pa.string())])
    return cat.create_table("db.t", schema, primary_key=["dt", "id"], partition_keys=["dt"],
                            options={"bucket": "2", "rowkind.field": "op"})


def _data_files(root):
    return sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs if f.endswith(".parquet"))


def test_schema_file_is_java_shaped(table):
    obj = json.loads(_read(os.path.join(table.root, "schema", "schema-0")))
    assert obj["version"] == 3 and obj["id"] == 0
    assert obj["options"]["bucket"] == "2"
    assert all(isinstance(v, str) for v in obj["options"].values())
    assert "comment" not in obj
    types = {f["name"]: f["type"] for f in obj["fields"]}
    assert types == {"dt": "STRING NOT NULL", "id": "BIGINT NOT NULL", "name": "STRING", "op": "STRING"}
    assert obj["primaryKeys"] == ["dt", "id"] and obj["partitionKeys"] == ["dt"]
    assert obj["highestFieldId"] == 3


def test_data_file_layout_and_delete_row_count(table):
    table.write(pa.table({"dt": ["d1", "d1", "d1"], "id": [1, 2, 3], "name": ["a", "b", "c"],
                          "op": ["+I", "-D", "+I"]}))
    files = _data_files(table.root)
    assert files and all("/dt=d1/bucket-" in f for f in files)
    pf = pq.ParquetFile(files[0])
    assert pf.schema_arrow.names == ["_KEY_id", "_SEQUENCE_NUMBER", "_VALUE_KIND", "dt", "id", "name", "op"]
    ids = {f.name: f.metadata[b"PARQUET:field_id"] for f in pf.schema_arrow}
    assert ids["_KEY_id"] == str(1 + 1073741823).encode() and ids["_SEQUENCE_NUMBER"] == b"2147483646"
    snap = table.snapshot()
    entries = []
    for m in table.manifests.data_manifests(snap):
        entries += decode_manifest(_read(table.paths.manifest(m.file_name)))
    by_name = {e.file.file_name: e for e in entries}
    total_deletes = 0
    for path in files:
        rows = pq.ParquetFile(path).read()
        e = by_name[os.path.basename(path)]
        kinds = rows.column("_VALUE_KIND").to_pylist()
        assert e.file.delete_row_count == sum(k in (1, 3) for k in kinds)
        assert e.file.row_count == rows.num_rows and e.file.file_size == os.path.getsize(path)
        keys = rows.column("_KEY_id").to_pylist()
        assert keys == sorted(keys)
        key_type = [parse_atomic("BIGINT NOT NULL")]
        assert binary_row.deserialize_row(e.file.min_key, key_type) == [keys[0]]
        assert binary_row.deserialize_row(e.file.max_key, key_type) == [keys[-1]]
        assert e.total_buckets == 2 and e.file.level == 0
        assert binary_row.deserialize_row(e.partition, [parse_atomic("STRING")]) == ["d1"]
        total_deletes += e.file.delete_row_count
    assert total_deletes == 1
    assert sorted(table.read().column("id").to_pylist()) == [1, 3]


def test_sequence_numbers_continue_per_bucket(table):
    for i in range(3):
        table.write(pa.table({"dt": ["d"] * 4, "id": [1, 2, 3, 4], "name": [str(i)] * 4, "op": ["+I"] * 4}))
    by_bucket = {}
    for path in _data_files(table.root):
        bucket = path.split("/bucket-")[1].split("/")[0]
        seq = pq.ParquetFile(path).read().column("_SEQUENCE_NUMBER").to_pylist()
        by_bucket.setdefault(bucket, []).extend(seq)
    for seqs in by_bucket.values():
        assert sorted(seqs) == list(range(len(seqs)))  # no gaps, no repeats: continues from the bucket max


def test_snapshot_json_has_required_keys(table):
    table.write(pa.table({"dt": ["d"], "id": [1], "name": ["a"], "op": ["+I"]}))
    obj = json.loads(_read(table.paths.snapshot(1)))
    for key in ("version", "id", "schemaId", "baseManifestList", "deltaManifestList", "commitUser",
                "commitIdentifier", "commitKind", "timeMillis", "totalRecordCount", "deltaRecordCount"):
        assert key in obj
    assert obj["version"] == 3 and obj["commitKind"] == "APPEND" and "logOffsets" not in obj
    assert _read(os.path.join(table.paths.snapshot_dir, "LATEST")).decode() == "1"
    assert _read(os.path.join(table.paths.snapshot_dir, "EARLIEST")).decode() == "1"
    table.write(pa.table({"dt": ["d"], "id": [2], "name": ["b"], "op": ["+I"]}))
    assert _read(os.path.join(table.paths.snapshot_dir, "LATEST")).decode() == "2"
    assert _read(os.path.join(table.paths.snapshot_dir, "EARLIEST")).decode() == "1"


@pytest.mark.parametrize("value,type_,text", [
    ("20230501", "STRING", "20230501"), (None, "STRING", "__DEFAULT_PARTITION__"),
    ("  ", "STRING", "__DEFAULT_PARTITION__"), (7, "INT", "7"), (True, "BOOLEAN", "true"),
    (dt.date(2023, 5, 1), "DATE", "19478"),
    (dt.datetime(2023, 5, 1, 12, 34, 56, 789000), "TIMESTAMP(3)", "2023-05-01T12:34:56.789"),
    (dt.datetime(2023, 5, 1, 12, 34), "TIMESTAMP(6)", "2023-05-01T12:34"),
    (1.5, "DOUBLE", "1.5"), (1e10, "DOUBLE", "1.0E10"),
])
def test_partition_value_text(value, type_, text):
    assert partition_value_text(value, parse_atomic(type_), "__DEFAULT_PARTITION__") == text


def test_partition_escaping():
    assert escape_partition_component("a/b=c:d%") == "a%2Fb%3Dc%3Ad%25"
    assert escape_partition_component("plain-text_1.2") == "plain-text_1.2"


def _thin_table(tmp_path):
    """A data-file.thin-mode table with two upserts and a delete."""
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    t = cat.create_table("db.thin", pa.schema([("id", pa.int64()), ("v", pa.string())]), primary_key=["id"],
                         options={"bucket": "2", "data-file.thin-mode": "true"})
    t.write(pa.table({"id": [1, 2, 3], "v": ["a", "b", "c"]}))
    t.write(pa.table({"id": [2, 3, 4], "v": ["B", "C", "D"]}))
    t.delete(pa.table({"id": [1]}))
    return t


def test_thin_mode_files_have_no_key_columns_and_read_back(tmp_path):
    """Files without _KEY_* columns (thin mode, or pypaimon's native writer) are read with keys from the values."""
    t = _thin_table(tmp_path)
    for path in _data_files(t.root):
        assert pq.ParquetFile(path).schema_arrow.names == ["_SEQUENCE_NUMBER", "_VALUE_KIND", "id", "v"]
    assert sorted(t.read().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 2, "v": "B"}, {"id": 3, "v": "C"}, {"id": 4, "v": "D"}]
    assert t.lookup(pa.table({"id": [3]})).to_pylist() == [{"id": 3, "v": "C"}]
    assert t.read(columns=["v"], filter=[("id", ">=", 3)]).num_rows == 2


@pytest.mark.interop
def test_pypaimon_reads_thin_mode_tables(tmp_path):
    from pypaimon import CatalogFactory

    t = _thin_table(tmp_path)
    pt = CatalogFactory.create({"warehouse": str(tmp_path / "wh")}).get_table("db.thin")
    rb = pt.new_read_builder()
    theirs = rb.new_read().to_arrow(rb.new_scan().plan().splits())
    assert sorted(theirs.to_pylist(), key=lambda r: r["id"]) == sorted(t.read().to_pylist(), key=lambda r: r["id"])


# --- data file formats (engine.write.formats): ORC and Avro as Paimon writes them --------------------------------
def _fmt_table(tmp_path, schema, options, pk=("id",)):
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db", ignore_if_exists=True)
    return cat.create_table("db.f", schema, primary_key=list(pk) or None, options={"bucket": "1", **options})


def _data_paths(t):
    from engine.data_paths import data_file_path
    return [(f, data_file_path(sp.bucket_dir, f)) for sp in t.plan() for f in sp.files]


ID_V = pa.schema([pa.field("id", pa.int64(), False), ("v", pa.string())])


@pytest.mark.parametrize("codec,orc_name", [("zstd", "ZSTD"), ("snappy", "SNAPPY"), ("lz4", "LZ4"),
                                            ("zlib", "ZLIB"), ("none", "UNCOMPRESSED")])
def test_orc_codecs(tmp_path, codec, orc_name):
    from pyarrow import orc
    t = _fmt_table(tmp_path, ID_V, {"file.format": "orc", "file.compression": codec})
    t.write(pa.table({"id": [1, 2], "v": ["a", None]}, schema=ID_V))
    [(meta, path)] = _data_paths(t)
    f = orc.ORCFile(path)
    assert meta.file_name.endswith(".orc") and f.compression == orc_name
    assert f.schema.names == ["_KEY_id", "_SEQUENCE_NUMBER", "_VALUE_KIND", "id", "v"]


@pytest.mark.parametrize("codec,avro_name", [("zstd", "zstandard"), ("snappy", "snappy"), ("deflate", "deflate"),
                                             ("null", "null"), ("none", "null")])
def test_avro_codecs_and_paimon_schema(tmp_path, codec, avro_name):
    import fastavro
    schema = pa.schema([pa.field("id", pa.int64(), False), ("ts", pa.timestamp("ms")),
                        ("ltz", pa.timestamp("us", tz="UTC")), ("d", pa.decimal128(10, 2)), ("day", pa.date32()),
                        ("r", pa.struct([("a", pa.int32())]))])
    t = _fmt_table(tmp_path, schema, {"file.format": "avro", "file.compression": codec})
    t.write(pa.table({"id": [1], "ts": [dt.datetime(2024, 1, 1)], "ltz": [dt.datetime(2024, 1, 1, tzinfo=dt.UTC)],
                      "d": [None], "day": [dt.date(2024, 1, 1)], "r": [{"a": 1}]}, schema=schema))
    [(meta, path)] = _data_paths(t)
    with open(path, "rb") as fo:
        reader = fastavro.reader(fo)
        ws = reader.writer_schema
        assert reader.metadata["avro.codec"] == avro_name
    assert meta.file_name.endswith(".avro")
    assert ws["name"] == "org.apache.paimon.avro.generated.record"
    types = {f["name"]: f["type"] for f in ws["fields"]}
    assert types["_KEY_id"] == "long" and types["_VALUE_KIND"] == "int"
    assert types["ts"][0] == "null" and types["ts"][1]["logicalType"] == "timestamp-millis"
    assert types["ltz"][1]["logicalType"] == "local-timestamp-micros"
    assert types["d"][1] == {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}
    assert types["day"][1]["logicalType"] == "date"
    assert types["r"][1]["name"] == "org.apache.paimon.avro.generated.record_r"


@pytest.mark.parametrize("options,key", [
    ({"file.format": "orc", "file.compression": "gzip"}, "file.compression"),      # ORC has zlib, not gzip
    ({"file.format": "avro", "file.compression": "lz4"}, "file.compression"),      # Avro has no lz4 codec
    ({"file.format.per.level": "0avro"}, "file.format.per.level"),
    ({"file.format.per.level": "x:avro"}, "file.format.per.level"),
    ({"file.format.per.level": "0:xml"}, "file.format.per.level"),
    ({"file.compression.per.level": "0:brotli9"}, "file.compression.per.level"),
    ({"file.compression.per.level": "0:zlib"}, "file.compression.per.level"),     # zlib is not a parquet codec
    ({"changelog-file.format": "xml"}, "changelog-file.format"),
    ({"changelog-file.format": "avro", "changelog-file.compression": "gzip"}, "changelog-file.compression"),
])
def test_bad_file_format_options_name_the_option(tmp_path, options, key):
    from engine.errors import InvalidOption
    with pytest.raises(InvalidOption, match=key.replace(".", r"\.")):
        _fmt_table(tmp_path, ID_V, options)


@pytest.mark.parametrize("options", [{"file.format": "csv"}, {"file.format.per.level": "1:json"},
                                     {"changelog-file.format": "lance"}])
def test_formats_lakemerge_cannot_write_are_refused(tmp_path, options):
    from engine.errors import UnsupportedFeature
    with pytest.raises(UnsupportedFeature, match="cannot write"):
        _fmt_table(tmp_path, ID_V, options)


def test_per_level_options_parse_as_paimon():
    from engine.options import TableOptions
    opts = TableOptions({"file.format": "orc", "file.format.per.level": "0:AVRO, 5:parquet",
                         "file.compression.per.level": "0:lz4,5:zstd", "changelog-file.format": "avro",
                         "changelog-file.compression": "snappy"})
    assert opts.file_format_of(0) == ("avro", "lz4")
    assert opts.file_format_of(3) == ("orc", "zstd")
    assert opts.file_format_of(5) == ("parquet", "zstd")
    assert opts.file_format_of(5, changelog=True) == ("avro", "snappy")


@pytest.mark.parametrize("fmt,typ,word", [
    ("orc", pa.struct([("t", pa.time32("ms"))]), "TIME"),
])
def test_types_a_format_cannot_hold_are_refused_naming_the_column(tmp_path, fmt, typ, word):
    from engine.errors import UnsupportedFeature
    schema = pa.schema([pa.field("id", pa.int64(), False), ("col_x", typ)])
    t = _fmt_table(tmp_path, schema, {"file.format": fmt})
    with pytest.raises(UnsupportedFeature, match=f"col_x.*{word}|{word}.*col_x"):
        t.write(pa.table({"id": [1], "col_x": pa.nulls(1, typ)}, schema=schema))
    assert t.latest_snapshot_id() is None
    assert not [p for _, _, files in os.walk(str(tmp_path / "wh" / "db.db" / "f")) for p in files
                if p.startswith("data-")]


@pytest.mark.parametrize("options,typ", [
    ({"file.format.per.level": "5:orc"}, pa.struct([("t", pa.time32("ms"))])),
    ({"changelog-producer": "lookup", "changelog-file.format": "orc"}, pa.list_(pa.time32("ms"))),
], ids=["per-level-orc", "lookup-changelog-orc"])
def test_columns_a_level_format_cannot_hold_refuse_the_first_write(tmp_path, options, typ):
    """A column the format of some level (or the changelog files) cannot hold is refused at the first write, not
    at the first compaction to that level (after which every write, compacting first, would fail)."""
    from engine.errors import UnsupportedFeature
    schema = pa.schema([pa.field("id", pa.int64(), False), ("col_x", typ)])
    t = _fmt_table(tmp_path, schema, options)
    with pytest.raises(UnsupportedFeature, match="col_x"):
        t.write(pa.table({"id": [1], "col_x": pa.nulls(1, typ)}, schema=schema))
    assert t.latest_snapshot_id() is None
    assert not [p for _, _, files in os.walk(str(tmp_path / "wh")) for p in files if p.startswith("data-")]


@pytest.mark.parametrize("options", [{"file.format": "avro"}, {"file.format.per.level": "5:avro"}],
                         ids=["avro", "per-level-avro"])
@pytest.mark.parametrize("name,typ", [("my col", pa.int64()), ("ok", pa.struct([("a-b", pa.int64())]))],
                         ids=["column", "nested-field"])
def test_names_avro_refuses_are_refused_before_writing(tmp_path, options, name, typ):
    """Avro names are [A-Za-z_][A-Za-z0-9_]*: Paimon's AvroSchemaConverter (SchemaBuilder) refuses other names and
    Java's Avro reader would refuse such a file, so an Avro level refuses the column at the first write."""
    from engine.errors import UnsupportedFeature
    schema = pa.schema([pa.field("id", pa.int64(), False), (name, typ)])
    t = _fmt_table(tmp_path, schema, options)
    with pytest.raises(UnsupportedFeature, match="Avro field names"):
        t.write(pa.table({"id": [1], name: pa.nulls(1, typ)}, schema=schema))
    assert t.latest_snapshot_id() is None
    assert not [p for _, _, files in os.walk(str(tmp_path / "wh")) for p in files if p.startswith("data-")]


@pytest.mark.parametrize("options,typ", [
    ({"file.format": "avro"}, pa.timestamp("ns")),                  # Paimon's Avro holds timestamps up to micros
    ({"file.format": "avro"}, pa.list_(pa.timestamp("ns", tz="UTC"))),
    ({"file.format.per.level": "5:avro"}, pa.timestamp("ns")),
])
def test_avro_columns_paimon_refuses_are_refused_when_the_schema_is_made(tmp_path, options, typ):
    """Paimon's SchemaValidation refuses TIMESTAMP(7-9) with file.format avro (validateDataFields) or an avro
    file.format.per.level entry, at CREATE and ALTER: else writes succeed and every compaction to that level fails."""
    from engine.errors import InvalidSchema
    schema = pa.schema([pa.field("id", pa.int64(), False), ("col_x", typ)])
    with pytest.raises(InvalidSchema, match="col_x"):
        _fmt_table(tmp_path, schema, options)
    t = _fmt_table(tmp_path, ID_V, options)
    with pytest.raises(InvalidSchema, match="col_x"):
        t.alter().add_column("col_x", typ).commit()
    assert t.schema.id == 0


@pytest.mark.parametrize("typ,value", [
    (pa.timestamp("us"), dt.datetime(9999, 12, 31, 23, 59, 59)),
    (pa.timestamp("ms", tz="UTC"), dt.datetime(1600, 1, 1, tzinfo=dt.timezone.utc)),
    (pa.struct([("a", pa.list_(pa.timestamp("us")))]), {"a": [None, dt.datetime(3000, 1, 1)]}),
    (pa.map_(pa.int32(), pa.timestamp("us")), [(1, dt.datetime(1, 1, 1))]),
], ids=["ts", "ltz", "nested", "map"])
def test_orc_timestamps_pyarrow_cannot_read_back_are_refused(tmp_path, typ, value):
    """pyarrow's ORC reader decodes timestamps as nanoseconds (1677-2262): a value outside would be written fine
    and read back overflowed, leaving a table lakemerge (and pypaimon) cannot read. Refused, nothing written."""
    from engine.errors import UnsupportedFeature
    schema = pa.schema([pa.field("id", pa.int64(), False), ("col_x", typ)])
    t = _fmt_table(tmp_path, schema, {"file.format": "orc"})
    t.write(pa.Table.from_pylist([{"id": 0, "col_x": None}], schema=schema))
    with pytest.raises(UnsupportedFeature, match="col_x"):
        t.write(pa.Table.from_pylist([{"id": 1, "col_x": value}], schema=schema))
    assert t.latest_snapshot_id() == 1
    assert t.read().to_pylist() == [{"id": 0, "col_x": None}]
    assert len([p for _, _, files in os.walk(str(tmp_path / "wh")) for p in files if p.startswith("data-")]) == 1


@pytest.mark.parametrize("fmt,where", [("orc", -12), ("avro", 0.5)], ids=["orc-postscript", "avro-block"])
def test_corrupt_orc_and_avro_files_are_reported_naming_the_file(tmp_path, fmt, where):
    """Damaged ORC postscript / Avro data block -> CorruptFile naming the file. (ORC streams carry no checksums:
    pyarrow 19 decodes some damaged stripes silently and crashes on others, so only structural damage is tested.)"""
    from engine.errors import CorruptFile
    t = _fmt_table(tmp_path, ID_V, {"file.format": fmt})
    t.write(pa.table({"id": list(range(100)), "v": [str(i) for i in range(100)]}, schema=ID_V))
    [(meta, path)] = _data_paths(t)
    data = bytearray(_read(path))
    at = int(len(data) * where) if where > 0 else len(data) + where
    data[at: at + 11] = b"\xff" * 11
    with open(path, "wb") as f:
        f.write(bytes(data))
    with pytest.raises(CorruptFile, match=meta.file_name):
        t.read()


@pytest.mark.parametrize("fmt", ["orc", "avro", "parquet"])
def test_concurrent_writers_of_a_bucket_rebase_files_of_each_format(tmp_path, fmt):
    """Two writers started from the same snapshot write the same key: the later commit wins, its level-0 file
    rewritten (re-sequenced) in the table's format."""
    t = _fmt_table(tmp_path, ID_V, {"file.format": fmt})
    t.write(pa.table({"id": [0], "v": ["base"]}, schema=ID_V))
    w1, w2 = t.new_write(), t.new_write()
    w1.write(pa.table({"id": [1], "v": ["first"]}, schema=ID_V))
    w2.write(pa.table({"id": [1], "v": ["second"]}, schema=ID_V))
    m1, m2 = w1.prepare_commit(), w2.prepare_commit()
    t.commit(m1)
    t.commit(m2)
    assert t.read().sort_by("id").to_pylist() == [{"id": 0, "v": "base"}, {"id": 1, "v": "second"}]
    names = [m.file_name for m, _ in _data_paths(t)]
    assert any("rebased-" in n for n in names) and all(n.endswith("." + fmt) for n in names)


@pytest.mark.parametrize("fmt", ["orc", "avro", "parquet"])
def test_rebased_file_of_an_older_schema_keeps_its_layout(tmp_path, fmt):
    """A level-0 file written before a column rename and committed after it, concurrently with a write of the same
    bucket, is re-sequenced with the columns of the schema it was written with (its schema id stays)."""
    t = _fmt_table(tmp_path, ID_V, {"file.format": fmt})
    t.write(pa.table({"id": [0], "v": ["base"]}, schema=ID_V))
    w1, w2 = t.new_write(), t.new_write()
    w1.write(pa.table({"id": [1], "v": ["first"]}, schema=ID_V))
    w2.write(pa.table({"id": [1], "v": ["second"]}, schema=ID_V))
    m1, m2 = w1.prepare_commit(), w2.prepare_commit()
    t.commit(m1)
    t.alter().rename_column("v", "v2").commit()
    t = Catalog(str(tmp_path / "wh")).get_table("db.f")
    t.commit(m2)
    assert t.read().sort_by("id").to_pylist() == [{"id": 0, "v2": "base"}, {"id": 1, "v2": "second"}]
    rebased = [m for m, _ in _data_paths(t) if "rebased-" in m.file_name]
    assert len(rebased) == 1 and rebased[0].schema_id == 0 and rebased[0].file_name.endswith("." + fmt)


def test_schema_v2_without_file_format_is_written_as_orc(tmp_path):
    """Paimon's default for a version <= 2 schema without file.format is ORC (spec paimon-format.md section 8)."""
    import glob
    t = _fmt_table(tmp_path, ID_V, {})
    [path] = glob.glob(str(tmp_path / "wh" / "db.db" / "f" / "schema" / "schema-0"))
    obj = json.loads(_read(path))
    obj["version"] = 2
    obj["options"].pop("file.format", None)
    with open(path, "w") as f:
        json.dump(obj, f)
    t = Catalog(str(tmp_path / "wh")).get_table("db.f")
    t.write(pa.table({"id": [1], "v": ["a"]}, schema=ID_V))
    [(meta, _)] = _data_paths(t)
    assert meta.file_name.endswith(".orc") and t.read().to_pylist() == [{"id": 1, "v": "a"}]


def test_avro_zstd_level_is_honoured(tmp_path):
    sizes = []
    for level in ("1", "19"):
        t = _fmt_table(tmp_path / level, ID_V, {"file.format": "avro", "file.compression.zstd-level": level})
        t.write(pa.table({"id": list(range(5000)), "v": [f"value {i * 7919 % 1000}" for i in range(5000)]},
                         schema=ID_V))
        [(meta, _)] = _data_paths(t)
        sizes.append(meta.file_size)
    assert sizes[1] < sizes[0]


@pytest.mark.parametrize("options,expected", [
    ({"file.format": "orc", "orc.compress": "SNAPPY"}, "SNAPPY"),
    ({"file.format": "avro", "avro.codec": "deflate", "file.compression": "zstd"}, "deflate"),
])
def test_format_codec_options_override_file_compression(tmp_path, options, expected, caplog):
    """Paimon's ORC / Avro writers take orc.compress / avro.codec over file.compression; such format options are
    known Paimon options (no warning)."""
    import logging

    import fastavro
    from pyarrow import orc
    with caplog.at_level(logging.WARNING, logger="lakemerge.options"):
        t = _fmt_table(tmp_path, ID_V, options)
        t.write(pa.table({"id": [1], "v": ["a"]}, schema=ID_V))
    [(_, path)] = _data_paths(t)
    if path.endswith(".orc"):
        assert orc.ORCFile(path).compression == expected
    else:
        with open(path, "rb") as fo:
            assert fastavro.reader(fo).metadata["avro.codec"] == expected
    assert not [r for r in caplog.records if "orc.compress" in r.getMessage() or "avro.codec" in r.getMessage()]


def test_bad_format_codec_option_is_named(tmp_path):
    from engine.errors import InvalidOption
    with pytest.raises(InvalidOption, match="avro.codec"):
        _fmt_table(tmp_path, ID_V, {"file.format": "avro", "avro.codec": "lz4"})
