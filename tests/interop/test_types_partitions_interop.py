"""Types, partition directory names and statistics across engines (pypaimon 2.1 is the oracle; where it departs
from Java Paimon the test says so and follows Java)."""
from __future__ import annotations

import datetime as dt
import decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.interop.pypaimon_util import data_files, pp_catalog, pp_create_table, pp_get_table, pp_read, pp_write

pytestmark = pytest.mark.interop

D = decimal.Decimal


def _dirs(warehouse, name):
    return sorted({rel for rel, _ in data_files(f"{warehouse}/db.db/{name}")})


def test_partition_names_without_legacy_naming_match_paimon(warehouse):
    """partition.legacy-name=false renders values with Paimon's cast to STRING (``2023-11-14 22:13:20.000000``,
    TIME as ``HH:mm:ss``, DATE as ISO), not Java's toString: both engines must name (and find) the same
    directories."""
    from engine import Catalog

    schema = pa.schema([("t3", pa.timestamp("ms")), ("t6", pa.timestamp("us")), ("t0", pa.timestamp("s")),
                        ("d", pa.date32()), ("tm", pa.time32("ms")), ("id", pa.int64()), ("v", pa.int32())])
    rows = pa.table({"t3": pa.array([1_700_000_000_500, 0, -1500], pa.timestamp("ms")),
                     "t6": pa.array([1_700_000_000_000_000, 1_000_010, -1], pa.timestamp("us")),
                     "t0": pa.array([0, 1, -1], pa.timestamp("s")), "d": pa.array([0, 19000, -1], pa.date32()),
                     "tm": pa.array([0, 1500, 86399999], pa.time32("ms")), "id": [1, 2, 3],
                     "v": pa.array([1, 2, 3], pa.int32())})
    parts = ["t3", "t6", "t0", "d", "tm"]
    opts = {"bucket": "1", "partition.legacy-name": "false"}
    cat = Catalog(warehouse)
    cat.create_database("db", ignore_if_exists=True)
    mine = cat.create_table("db.mine", schema, primary_key=parts + ["id"], partition_keys=parts, options=opts)
    mine.write(rows)
    pp_write(pp_create_table(pp_catalog(warehouse), "db.theirs", schema, parts + ["id"], parts, opts), rows, schema)

    assert _dirs(warehouse, "mine") == _dirs(warehouse, "theirs")
    assert "t3=1970-01-01 00%3A00%3A00.000/t6=1970-01-01 00%3A00%3A01.000010/t0=1970-01-01 00%3A00%3A01/" \
           "d=2022-01-08/tm=00%3A00%3A01/bucket-0" in _dirs(warehouse, "mine")
    expected = rows.to_pylist()
    assert cat.get_table("db.theirs").read().sort_by("id").to_pylist() == expected
    assert pp_read(pp_get_table(warehouse, "db.mine"), sort_by=["id"]).to_pylist() == expected


def test_nanosecond_timestamp_partition_directory_keeps_every_digit(warehouse):
    """Java names a TIMESTAMP(9) partition with LocalDateTime.toString (``...20.123456789``) and finds the files
    there; lakemerge dropped the last three digits. pypaimon 2.1 drops them too (it serializes timestamps through
    datetime), so it names the directory ``...20.123456`` and cannot read this table: Paimon wins."""
    from engine import Catalog

    schema = pa.schema([("p", pa.timestamp("ns")), ("id", pa.int64()), ("v", pa.int32())])
    rows = pa.table({"p": pa.array([1_700_000_000_123_456_789, -1], pa.timestamp("ns")), "id": [1, 2],
                     "v": pa.array([1, 2], pa.int32())})
    cat = Catalog(warehouse)
    cat.create_database("db", ignore_if_exists=True)
    t = cat.create_table("db.t", schema, primary_key=["p", "id"], partition_keys=["p"], options={"bucket": "1"})
    t.write(rows)
    assert _dirs(warehouse, "t") == ["p=1969-12-31T23%3A59%3A59.999999999/bucket-0",
                                     "p=2023-11-14T22%3A13%3A20.123456789/bucket-0"]
    assert t.read().sort_by("id").to_pylist() == rows.to_pylist()
    assert t.read(filter=[("p", "=", rows.column("p")[0])]).column("id").to_pylist() == [1]
    pp_dir = pp_get_table(warehouse, "db.t").path_factory().relative_bucket_path(
        (rows.column("p")[0].as_py(),), 0, canonical_partition=True)
    assert pp_dir.endswith("p=2023-11-14T22%3A13%3A20.123456/bucket-0")  # pypaimon 2.1's truncated name


def _schema_json(warehouse, schema_id: int) -> dict:
    import json

    with open(f"{warehouse}/db.db/t/schema/schema-{schema_id}") as f:
        return json.load(f)


def _all_field_ids(fields) -> list[int]:
    out = []
    for f in fields:
        out.append(f["id"])
        t = f["type"]
        while isinstance(t, dict):
            if "fields" in t:
                out += _all_field_ids(t["fields"])
                break
            t = t.get("element") or t.get("value")
    return out


def test_nested_row_fields_get_their_own_ids(warehouse):
    """Fields inside ROW columns were numbered 0, 1, ... again, repeating top-level ids (Java's RowType rejects a
    schema with duplicated ids: 'Broken schema, field id 0 is duplicated') and highestFieldId left them out. Ids
    now follow Java's Schema builder: a column, then the fields nested in it; an added ROW column likewise."""
    from engine import Catalog

    schema = pa.schema([("id", pa.int64()), ("r", pa.struct([("x", pa.int32()), ("y", pa.struct([("a", pa.string())]))])),
                        ("m", pa.map_(pa.string(), pa.struct([("z", pa.int64())]))), ("v", pa.int32())])
    rows = [{"id": 1, "r": {"x": 1, "y": {"a": "p"}}, "m": [("k", {"z": 5})], "v": 7},
            {"id": 2, "r": None, "m": None, "v": None}]
    cat = Catalog(warehouse)
    cat.create_database("db", ignore_if_exists=True)
    t = cat.create_table("db.t", schema, primary_key=["id"], options={"bucket": "1"})
    t.write(pa.Table.from_pylist(rows, schema=schema))
    t.alter().add_column("n", pa.struct([("q", pa.bool_())])).commit()
    t.write(pa.Table.from_pylist([{"id": 3, "r": None, "m": None, "v": None, "n": {"q": True}}],
                                 schema=t.schema.arrow_schema))

    for sid in (0, 1):
        doc = _schema_json(warehouse, sid)
        ids = _all_field_ids(doc["fields"])
        assert len(ids) == len(set(ids)) and doc["highestFieldId"] == max(ids), (sid, ids)
    doc0 = _schema_json(warehouse, 0)
    # Java order: id 0, r 1, x 2, a 3, y 4, m 5, z 6, v 7
    assert _all_field_ids(doc0["fields"]) == [0, 1, 2, 4, 3, 5, 6, 7]
    assert doc["highestFieldId"] == 9  # n 8, q 9

    expected = [dict(r, n=None) for r in rows] + [{"id": 3, "r": None, "m": None, "v": None, "n": {"q": True}}]
    assert t.read().sort_by("id").to_pylist() == expected
    theirs = pp_read(pp_get_table(warehouse, "db.t"), sort_by=["id"]).to_pylist()
    assert [dict(r, m=r["m"] and list(r["m"])) for r in theirs] == expected


def test_lakemerge_reads_pypaimon_timestamp_partitions_before_year_1000(warehouse):
    """pypaimon (like Java) names year-1 partitions '0001-01-01T00:00'; lakemerge looked for '1-01-01T00:00'."""
    from engine import Catalog

    schema = pa.schema([("p", pa.timestamp("us")), ("k", pa.int64())])
    rows = pa.table({"p": pa.array([dt.datetime(1, 1, 1), dt.datetime(2020, 1, 1)], pa.timestamp("us")),
                     "k": [1, 2]})
    pp_write(pp_create_table(pp_catalog(warehouse), "db.p", schema, ["p", "k"], ["p"], {"bucket": "1"}), rows,
             schema)
    assert Catalog(warehouse).get_table("db.p").read().sort_by("k").to_pylist() == rows.to_pylist()


@pytest.mark.parametrize("file_format", ["parquet", "orc"])
def test_filters_on_nanosecond_columns_of_pypaimon_tables_find_every_row(warehouse, file_format):
    """pypaimon 2.1 records the min/max statistics of TIMESTAMP(9) columns (keys and values) at microsecond
    precision, floored: a file holding -5 ns and -1 ns says max = -1000 ns (Java records the exact values). Trusting
    that max, ``ts = -1 ns`` skipped the file. lakemerge now reads a sub-microsecond-free TIMESTAMP(7..9) max as up
    to 999 ns larger, which never skips a matching file (and only loosens pruning by under a microsecond)."""
    from engine import Catalog

    ns = pa.timestamp("ns")
    schema = pa.schema([("k", ns), ("v", ns), ("n", pa.int64())])
    rows = pa.table({"k": pa.array([-5, -1, 1_700_000_000_000_000_001], ns),
                     "v": pa.array([-1, 7, 1_700_000_000_000_000_999], ns), "n": [1, 2, 3]})
    pp_write(pp_create_table(pp_catalog(warehouse), "db.t", schema, ["k"], [], {"bucket": "1",
                                                                                  "file.format": file_format}),
             rows, schema)
    t = Catalog(warehouse).get_table("db.t")
    stored = t.read().sort_by("n")
    for col in ("k", "v"):
        for i, value in enumerate(stored.column(col).to_pylist()):
            assert t.read(filter=[(col, "=", value)]).column("n").to_pylist() == [i + 1], (col, value)
            assert t.read(filter=[(col, ">=", value)]).num_rows == 3 - i, (col, value)


def test_compacting_pypaimon_nanosecond_keys_merges_overlapping_files(warehouse):
    """pypaimon 2.1 records a TIMESTAMP(9) key's _MIN_KEY/_MAX_KEY floored to microseconds: its file holding keys
    1 ns and 900 ns says [0 ns, 0 ns]. Compaction took that range for the truth, saw no overlap with lakemerge's file
    holding 500 ns and 900 ns, and concatenated the two into one file with key 900 ns twice (read then returned
    both versions). Compaction and key lookups now treat such a max as reaching up to the next microsecond."""
    from engine import Catalog

    ns = pa.timestamp("ns")
    schema = pa.schema([("k", ns), ("v", pa.int64())])
    pp = pp_create_table(pp_catalog(warehouse), "db.t", schema, ["k"], [], {"bucket": "1"})
    pp_write(pp, pa.table({"k": pa.array([1, 900], ns), "v": [1, 1]}), schema)
    t = Catalog(warehouse).get_table("db.t")
    t.write(pa.table({"k": pa.array([500, 900], ns), "v": [2, 2]}))
    expected = [(1, 1), (500, 2), (900, 2)]

    def rows(table):
        return sorted((pa.scalar(r["k"], ns).value, r["v"]) for r in table.to_pylist())
    assert rows(t.lookup(pa.table({"k": pa.array([1, 500, 900], ns)}))) == expected
    t.compact(full=True)
    assert rows(t.read()) == expected
    assert rows(pp_read(pp_get_table(warehouse, "db.t"))) == expected  # one file now: pypaimon reads it raw


def test_nanosecond_bucket_keys_hash_as_java(warehouse):
    """Java's BinaryRow keeps a TIMESTAMP(9)'s nano-of-millisecond in the fixed part (AbstractBinaryWriter
    .writeTimestamp), so the bucket hash sees every digit; lakemerge does the same. pypaimon 2.1 hashes the value
    with its sub-microsecond digits dropped and so puts such keys in other buckets: Paimon wins, and a table written
    by both engines can then hold a key in two buckets (the random interop test keeps such keys out)."""
    from engine import Catalog
    from engine.meta import binary_row
    from engine.types import parse_atomic
    from tests.interop.pypaimon_util import pp_expected_partitions_buckets

    ns = pa.timestamp("ns")
    schema = pa.schema([("k", ns), ("v", pa.int64())])
    values = [-1, 1, 1_700_000_000_123_456_789, 5_000]
    rows = pa.table({"k": pa.array(values, ns), "v": [1, 2, 3, 4]})
    cat = Catalog(warehouse)
    cat.create_database("db", ignore_if_exists=True)
    t = cat.create_table("db.t", schema, primary_key=["k"], options={"bucket": "7"})
    t.write(rows)
    ts9 = parse_atomic("TIMESTAMP(9) NOT NULL")
    java = {v: binary_row.bucket_of(binary_row.hash_code(binary_row.encode_row([v], [ts9])), 7) for v in values}
    mine = {}
    for rel, path in data_files(f"{warehouse}/db.db/t"):
        for v in pq.ParquetFile(path).read().column("k").cast(pa.int64()).to_pylist():
            mine[v] = int(rel.rpartition("bucket-")[2])
    assert mine == java
    theirs = dict(zip(values, pp_expected_partitions_buckets(pp_get_table(warehouse, "db.t"), rows)[1]))
    assert theirs[5_000] == java[5_000]  # whole microseconds: the same bucket
    assert [v for v in values if theirs[v] != java[v]], "pypaimon now hashes nanosecond keys as Java: update"


@pytest.mark.parametrize("options", [{"deletion-vectors.enabled": "true"}, {"merge-engine": "first-row"},
                                     {"changelog-producer": "lookup"}])
def test_lookups_into_pypaimon_nanosecond_key_files_find_the_key(warehouse, options):
    """The lookups of deletion vectors, first-row and the lookup changelog producer (engine.changelog.lookup_index)
    bounded their probes by a file's raw _MAX_KEY: pypaimon's file holding keys 1 ns and 900 ns, moved to the top
    level as it is (its range says [0 ns, 0 ns]), did not hold 900 ns for them. With deletion vectors the old row
    of 900 ns was not marked deleted and the key was read twice; first-row kept the later row of a key; the lookup
    changelog said +I for an update."""
    from engine import Catalog

    ns = pa.timestamp("ns")
    schema = pa.schema([("k", ns), ("v", pa.int64())])
    pp = pp_create_table(pp_catalog(warehouse), "db.t", schema, ["k"], [], {"bucket": "1", **options})
    pp_write(pp, pa.table({"k": pa.array([1, 900], ns), "v": [1, 1]}), schema)
    t = Catalog(warehouse).get_table("db.t")
    t.compact(full=True)
    before = t.snapshot().id
    t.write(pa.table({"k": pa.array([900], ns), "v": [2]}))
    t.compact()  # the new level-0 file goes to a level above pypaimon's file, looking keys up there
    new = 1 if options.get("merge-engine") == "first-row" else 2
    assert sorted((pa.scalar(r["k"], ns).value, r["v"]) for r in t.read().to_pylist()) == [(1, 1), (900, new)]
    if options.get("merge-engine") == "first-row":
        assert len([f for s in t.scan().plan(t.snapshot()) for f in s.files]) == 1  # the later row dropped
    if options.get("changelog-producer") == "lookup":
        kinds = [(pa.scalar(k, ns).value, kind) for b in t.stream("incremental", start=before, end=t.snapshot().id)
                 for k, kind in zip(b.column(0).cast(pa.int64()).to_pylist(), b.column("_row_kind").to_pylist())]
        assert kinds == [(900, "-U"), (900, "+U")], kinds


def test_pypaimon_nanosecond_keys_in_the_last_microsecond_of_arrows_range(warehouse):
    """A floored TIMESTAMP(9) max in the last microsecond Arrow's nanosecond timestamps hold (pypaimon's file with
    keys 2**63 - 1 - 900 ns and 2**63 - 1 ns says max = 2262-04-11 23:47:16.854775) cannot be raised by a whole
    microsecond as a nanosecond value: binary_row.upper_bound_of_floored left it as it was, so ``k = 2**63 - 1 ns``
    skipped the file and full compaction concatenated it with lakemerge's file (that key twice). It is raised to
    the largest nanosecond value instead."""
    from engine import Catalog

    ns = pa.timestamp("ns")
    top = 2**63 - 1
    schema = pa.schema([("k", ns), ("v", pa.int64())])
    pp = pp_create_table(pp_catalog(warehouse), "db.t", schema, ["k"], [], {"bucket": "1"})
    pp_write(pp, pa.table({"k": pa.array([top - 900, top], ns), "v": [1, 1]}), schema)
    t = Catalog(warehouse).get_table("db.t")
    assert t.read(filter=[("k", "=", pa.scalar(top, ns).as_py())]).column("v").to_pylist() == [1]
    t.write(pa.table({"k": pa.array([top - 100, top], ns), "v": [2, 2]}))
    t.compact(full=True)
    assert sorted((pa.scalar(r["k"], ns).value - top, r["v"]) for r in t.read().to_pylist()) == \
        [(-900, 1), (-100, 2), (0, 2)]
