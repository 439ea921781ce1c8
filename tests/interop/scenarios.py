"""Table scenarios shared by the two interop directions.

A scenario is a table definition plus a list of commits. Each commit is a list of rows (dicts) that carry
their row kind in the ``rk`` column, so that pypaimon (which can only express deletes through
``rowkind.field``) and lakemerge can write exactly the same thing.
"""
from __future__ import annotations

import datetime as dt
import random
from dataclasses import dataclass, field
from decimal import Decimal

import pyarrow as pa


@dataclass
class Scenario:
    name: str
    schema: pa.Schema
    primary_key: list[str]
    partition_keys: list[str]
    options: dict
    commits: list[list[dict]]
    sequence_fields: list[str] = field(default_factory=list)
    # True when some commit deletes keys that exist nowhere else in their bucket, which makes pypaimon 2.1.0
    # show phantom rows (it records _DELETE_ROW_COUNT=0); the test then asserts the phantom was observed.
    expects_pypaimon_phantoms: bool = False

    @property
    def identifier(self) -> str:
        return f"db.{self.name}"

    def commit_table(self, i: int) -> pa.Table:
        return pa.Table.from_pylist(self.commits[i], schema=self.schema)

    def __repr__(self):  # short ids in pytest output
        return self.name


def _rk_opts(bucket, **extra):
    opts = {"bucket": str(bucket), "merge-engine": "deduplicate", "file.format": "parquet", "rowkind.field": "rk"}
    opts.update(extra)
    return opts


# ---- (a) deduplicate with deletes through rowkind.field ------------------------------------------------
def rowkind_deletes() -> Scenario:
    schema = pa.schema([("id", pa.int64()), ("name", pa.string()), ("v", pa.float64()), ("rk", pa.string())])

    def r(i, name, v, rk="+I"):
        return {"id": i, "name": name, "v": v, "rk": rk}

    commits = [
        # deletes of keys that never existed, in the first file of their bucket: pypaimon shows them as rows
        [r(i, f"n{i}", i * 1.5) for i in range(1, 21)] + [r(50, "never", 0.5, "-D"), r(51, "never2", 0.25, "-D")],
        # delete two keys, update one with +U, retract one with -U, insert a new one
        [r(3, "n3", 4.5, "-D"), r(5, None, None, "-D"), r(4, "n4-upd", 40.0, "+U"), r(6, "n6", 9.0, "-U"),
         r(21, "n21", 31.5)],
        # deletes of keys that never existed and lie beyond every existing key range (a single-file section:
        # Java's reader would show them as phantom rows, pypaimon's does not because the bucket has >1 file)
        [r(1000, "ghost", 0.0, "-D"), r(1001, "ghost2", 1.0, "-D"), r(1002, "ghost3", 2.0, "-D"),
         r(1003, "ghost4", 3.0, "-D")],
        # re-insert a deleted key; duplicates inside one commit (last wins); insert+delete in one commit
        [r(3, "n3-back", 3.3), r(7, "x", 7.0), r(7, "y", 7.7), r(8, "n8", 8.0, "+I"), r(8, "n8", 8.0, "-D"),
         r(9, "n9", 9.0, "-D"), r(9, "n9-again", 9.9, "+I"), r(1000, "alive", 10.0)],
        # delete a key re-inserted earlier and the previously phantom key
        [r(3, None, None, "-D"), r(1001, "real", 11.0), r(2, "n2-upd", 2.2, "+U")],
    ]
    return Scenario("rowkind_deletes", schema, ["id"], [], _rk_opts(2), commits, expects_pypaimon_phantoms=True)


# ---- (b) sequence.field, out-of-order across commits ---------------------------------------------------
def sequence_field() -> Scenario:
    schema = pa.schema([("id", pa.int32()), ("v", pa.string()), ("ts", pa.int64()), ("rk", pa.string())])

    def r(i, v, ts, rk="+I"):
        return {"id": i, "v": v, "ts": ts, "rk": rk}

    commits = [
        [r(i, f"c1-{i}", 10) for i in range(1, 11)],
        # older ts for 1..5 must lose, newer ts for 6..10 must win
        [r(i, f"c2-{i}", 5) for i in range(1, 6)] + [r(i, f"c2-{i}", 20) for i in range(6, 11)],
        # equal ts: the later arrival wins; smaller ts loses; inside one commit the larger ts wins regardless
        # of order
        [r(1, "c3-eq", 10), r(2, "c3-old", 9), r(3, "c3-a", 30), r(3, "c3-b", 25), r(11, "c3-new", 1)],
        # a delete with a smaller ts is ignored; a delete with a larger ts removes the key
        [r(4, "c4-del-old", 1, "-D"), r(5, None, 100, "-D"), r(6, "c4-upd", 21, "+U"), r(7, "c4-old", 19, "+U")],
        [r(12, "c5", 0), r(8, "c5-eq", 20), r(9, "c5-old", 19), r(11, "c5-upd", 2)],
    ]
    return Scenario("sequence_field", schema, ["id"], [], _rk_opts(2, **{"sequence.field": "ts"}), commits,
                    sequence_fields=["ts"])


# ---- (c) partitioned, several buckets ------------------------------------------------------------------
PARTITIONS = ["2024-01-01", "2024-01-02", "2024-01-03", "a/b:c=d", "  "]


def partitioned() -> Scenario:
    schema = pa.schema([("dt", pa.string()), ("id", pa.int32()), ("v", pa.string()), ("amount", pa.int64()),
                        ("rk", pa.string())])

    def r(d, i, v, amount, rk="+I"):
        return {"dt": d, "id": i, "v": v, "amount": amount, "rk": rk}

    c1 = [r(d, i, f"{d}-{i}", i) for d in PARTITIONS[:3] for i in range(0, 24)]
    # same id in different partitions are different keys; update some in two partitions, delete some
    c2 = ([r("2024-01-01", i, f"upd-{i}", 100 + i, "+U") for i in range(0, 24, 3)]
          + [r("2024-01-02", i, None, None, "-D") for i in range(0, 24, 4)]
          + [r("2024-01-04", i, f"new-{i}", i) for i in range(5)]
          # a new partition whose only file holds deletes of never-existing keys: pypaimon phantom rows
          + [r("2024-01-04", i, f"ghost-{i}", -i, "-D") for i in range(100, 104)])
    c3 = ([r("a/b:c=d", i, f"esc-{i}", i) for i in range(8)] + [r("  ", i, f"blank-{i}", i) for i in range(3)]
          + [r("2024-01-03", i, None, None, "-D") for i in range(20, 24)])
    c4 = ([r("2024-01-02", i, f"back-{i}", i) for i in range(0, 8, 4)]
          + [r("a/b:c=d", 3, None, None, "-D"), r("2024-01-01", 0, "again", 0, "+U")])
    return Scenario("partitioned", schema, ["dt", "id"], ["dt"], _rk_opts(4), [c1, c2, c3, c4],
                    expects_pypaimon_phantoms=True)


# ---- (d) many snapshots with overlapping keys ----------------------------------------------------------
def many_snapshots(seed: int = 20240101, commits: int = 7) -> Scenario:
    schema = pa.schema([("k", pa.int64()), ("s", pa.string()), ("n", pa.int32()), ("rk", pa.string())])
    rnd = random.Random(seed)
    out = []
    for c in range(commits):
        rows = []
        for _ in range(rnd.randint(15, 40)):
            k = rnd.randrange(60)
            kind = rnd.choices(["+I", "+U", "-D", "-U"], [60, 15, 20, 5])[0]
            rows.append({"k": k, "s": f"c{c}-{k}-{rnd.randrange(1000)}", "n": rnd.randrange(-50, 50), "rk": kind})
        out.append(rows)
    return Scenario("many_snapshots", schema, ["k"], [], _rk_opts(3), out)


# ---- (e) composite key of many types ---------------------------------------------------------------------
MANY_TYPES_SCHEMA = pa.schema([
    ("k_str", pa.string()),
    ("k_int", pa.int32()),
    ("k_date", pa.date32()),
    ("k_big", pa.int64()),
    ("v_double", pa.float64()),
    ("v_dec10", pa.decimal128(10, 2)),
    ("v_dec38", pa.decimal128(38, 6)),
    ("v_ts3", pa.timestamp("ms")),
    ("v_ts6", pa.timestamp("us")),
    ("v_ltz", pa.timestamp("us", tz="UTC")),
    ("v_bool", pa.bool_()),
    ("v_bytes", pa.binary()),
    ("v_tiny", pa.int8()),
    ("v_small", pa.int16()),
    ("v_float", pa.float32()),
    ("rk", pa.string()),
])
MANY_TYPES_PK = ["k_str", "k_int", "k_date", "k_big"]


def many_types_row(rnd: random.Random, key: tuple, rk: str = "+I", nulls: bool = True) -> dict:
    def maybe(v):
        return None if nulls and rnd.random() < 0.1 else v

    base = dt.datetime(2024, 3, 1, 12, 0, 0)
    return {
        "k_str": key[0], "k_int": key[1], "k_date": key[2], "k_big": key[3],
        "v_double": maybe(rnd.uniform(-1e6, 1e6)),
        "v_dec10": maybe(Decimal(rnd.randrange(-10**9, 10**9)) / 100),
        "v_dec38": maybe(Decimal(rnd.randrange(-10**30, 10**30)) / Decimal(10**6)),
        "v_ts3": maybe(base + dt.timedelta(milliseconds=rnd.randrange(-10**10, 10**10))),
        "v_ts6": maybe(base + dt.timedelta(microseconds=rnd.randrange(-10**13, 10**13))),
        "v_ltz": maybe((base + dt.timedelta(microseconds=rnd.randrange(10**13))).replace(tzinfo=dt.timezone.utc)),
        "v_bool": maybe(rnd.random() < 0.5),
        "v_bytes": maybe(bytes(rnd.randrange(256) for _ in range(rnd.randrange(0, 20)))),
        "v_tiny": maybe(rnd.randrange(-128, 128)),
        "v_small": maybe(rnd.randrange(-32768, 32768)),
        "v_float": maybe(float(rnd.randrange(-10**6, 10**6)) / 8),  # exactly representable in float32
        "rk": rk,
    }


def many_types_keys(rnd: random.Random, n: int) -> list[tuple]:
    strs = ["", "a", "abc", "abcdefg", "abcdefgh", "user_00001", "ünïcødé", "zzz", "a/b:c"]
    keys = set()
    while len(keys) < n:
        keys.add((rnd.choice(strs), rnd.choice([0, 1, -1, 42, 2**31 - 1, -2**31, rnd.randrange(-1000, 1000)]),
                  dt.date(2023, 5, 1) + dt.timedelta(days=rnd.randrange(-3, 3)),
                  rnd.choice([0, -1, 1234567890123, 2**63 - 1, rnd.randrange(-10**12, 10**12)])))
    return sorted(keys)


def many_types(partition_keys: list[str] | None = None, seed: int = 7) -> Scenario:
    rnd = random.Random(seed)
    keys = many_types_keys(rnd, 80)
    commits = []
    for c in range(4):
        rows = []
        for k in rnd.sample(keys, 40 if c == 0 else 25):
            kind = "+I" if c == 0 else rnd.choices(["+I", "+U", "-D"], [50, 30, 20])[0]
            rows.append(many_types_row(rnd, k, kind))
        commits.append(rows)
    name = "many_types" + ("_part_" + "_".join(partition_keys) if partition_keys else "")
    return Scenario(name, MANY_TYPES_SCHEMA, list(MANY_TYPES_PK), list(partition_keys or []), _rk_opts(3), commits)


# ---- (f) bucket keys of the remaining types (exercises BinaryRow var-length parts in the bucket hash) ------
EXOTIC_KEYS_SCHEMA = pa.schema([
    ("k_ts3", pa.timestamp("ms")),
    ("k_ts6", pa.timestamp("us")),
    ("k_dec", pa.decimal128(10, 2)),
    ("k_dec38", pa.decimal128(38, 6)),
    ("k_bool", pa.bool_()),
    ("k_tiny", pa.int8()),
    ("k_small", pa.int16()),
    ("k_bytes", pa.binary()),
    ("v", pa.string()),
    ("rk", pa.string()),
])


def exotic_keys(seed: int = 3) -> Scenario:
    rnd = random.Random(seed)
    base = dt.datetime(2023, 5, 1, 0, 0, 0)
    keys = set()
    while len(keys) < 50:
        keys.add((
            base + dt.timedelta(milliseconds=rnd.choice([0, 1, -1, 999, rnd.randrange(-10**11, 10**11)])),
            base + dt.timedelta(microseconds=rnd.choice([0, 1, -1, 123456, rnd.randrange(-10**14, 10**14)])),
            Decimal(rnd.choice([0, 1, -1, 99999999, -99999999, rnd.randrange(-10**8, 10**8)])) / 100,
            Decimal(rnd.choice([0, 1, -1, 10**37, -10**37, rnd.randrange(-10**20, 10**20)])) / Decimal(10**6),
            rnd.random() < 0.5,
            rnd.choice([-128, 0, 127, rnd.randrange(-128, 128)]),
            rnd.choice([-32768, 0, 32767, rnd.randrange(-32768, 32768)]),
            rnd.choice([b"", b"\x00", b"\xff" * 9, bytes(rnd.randrange(256) for _ in range(rnd.randrange(16)))]),
        ))
    keys = sorted(keys, key=repr)
    names = EXOTIC_KEYS_SCHEMA.names[:8]
    commits = []
    for c in range(4):
        rows = []
        for k in rnd.sample(keys, 30):
            kind = "+I" if c == 0 else rnd.choices(["+I", "+U", "-D"], [50, 30, 20])[0]
            rows.append({**dict(zip(names, k)), "v": f"c{c}", "rk": kind})
        commits.append(rows)
    return Scenario("exotic_keys", EXOTIC_KEYS_SCHEMA, list(names), [], _rk_opts(5), commits)


# ---- (g) random sequence.field over two fields with nulls (nulls sort first) -----------------------------
def sequence_random(seed: int = 11) -> Scenario:
    from tests.interop.dict_model import RETRACT_KINDS, DictModel
    from tests.interop.pypaimon_util import _sortable

    schema = pa.schema([("id", pa.int32()), ("v", pa.string()), ("ts", pa.int64()), ("ts2", pa.int32()),
                        ("rk", pa.string())])
    seq = ["ts", "ts2"]
    rnd = random.Random(seed)
    model = DictModel(schema, ["id"], seq, rowkind_field="rk")
    commits = []
    for c in range(6):
        rows = []
        while len(rows) < 14:
            row = {"id": rnd.randrange(12), "v": f"c{c}-{len(rows)}", "ts": rnd.choice([None, 1, 2, 3, 5, 8]),
                   "ts2": rnd.choice([None, 0, 1]), "rk": rnd.choice(["+I", "+I", "+U", "-D", "-U"])}
            cur = model.state.get((row["id"],))
            if cur is not None and cur[1] in RETRACT_KINDS and \
                    tuple(_sortable(row[f]) for f in seq) < cur[0]:
                continue  # not modelled: an add older than a retained retract (depends on compaction)
            model.apply([row])
            rows.append(row)
        commits.append(rows)
    return Scenario("sequence_random", schema, ["id"], [], _rk_opts(3, **{"sequence.field": "ts,ts2"}), commits,
                    sequence_fields=seq)


def all_scenarios() -> list[Scenario]:
    return [rowkind_deletes(), sequence_field(), partitioned(), many_snapshots(), many_types(),
            many_types(["k_date", "k_int"]), exotic_keys(), sequence_random()]
