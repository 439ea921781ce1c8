"""Differential test of a table's history across schema evolution.

A seeded random history of upserts, deletes, ALTER TABLE (add / rename / drop columns, INT->BIGINT, FLOAT->DOUBLE,
DECIMAL precision, nested ROW fields added), merge-schema writes, compactions, tags and snapshot expiration runs
against a Python model that keeps every row by field id. Every snapshot's state is recorded together with the schema
it was committed under, and at the end every read API is checked against the model:

* time travel (``read(snapshot_id=)``, ``read(tag=)``, ``lookup(snapshot_id=)``, ``$audit_log`` of a snapshot) has
  the columns of the snapshot's own schema (Paimon's AbstractFileStoreTable.tryTimeTravel) and the model's values;
* ``read_changes`` of each snapshot, and ``Table.stream`` from the first snapshot, read through the current schema:
  the stream hands over exactly what ``read_changes`` gives snapshot by snapshot (nothing skipped or repeated); with
  ``changelog-producer=input`` the changes are the input rows; with lookup / full-compaction each retract carries
  the values last emitted for its key and the folded changelog is the model's state;
* ``$snapshots`` names each snapshot's schema, ``$schemas`` lists every schema.

Paimon semantics relied on: old data files are read by field id into the reading schema (SchemaEvolutionUtil), a
field added after a file was written reads as null, a renamed field keeps its values, a dropped and re-added name is
a new field (null in old files).
"""
from __future__ import annotations

import copy
import os
import random
from decimal import Decimal

import pyarrow as pa
import pyarrow.compute  # noqa: F401
import pytest

from tests.interop.pypaimon_util import sort_rows

WIDER = {"i32": "i64", "f32": "f64", "d52": "d82"}
ARROW = {"i32": pa.int32(), "i64": pa.int64(), "f32": pa.float32(), "f64": pa.float64(),
         "d52": pa.decimal128(5, 2), "d82": pa.decimal128(8, 2), "s": pa.string()}

# name -> (options, whether deletes are allowed); the first value column, c1 (INT), is the sequence field or the
# summed field where the options name it
CONFIGS = {
    "dedup-none": ({"bucket": "2"}, True),
    "dedup-input": ({"bucket": "1", "changelog-producer": "input"}, True),
    "dedup-lookup": ({"bucket": "2", "changelog-producer": "lookup"}, True),
    "dedup-lookup-dv": ({"bucket": "1", "changelog-producer": "lookup", "deletion-vectors.enabled": "true"}, True),
    "dedup-full": ({"bucket": "1", "changelog-producer": "full-compaction"}, True),
    "dedup-lookup-rowdedup": ({"bucket": "2", "changelog-producer": "lookup",
                               "changelog-producer.row-deduplicate": "true"}, True),
    "dedup-full-rowdedup": ({"bucket": "2", "changelog-producer": "full-compaction",
                             "changelog-producer.row-deduplicate": "true"}, True),
    "dedup-seq-lookup": ({"bucket": "1", "changelog-producer": "lookup", "sequence.field": "c1"}, False),
    "dedup-seq-none": ({"bucket": "2", "sequence.field": "c1"}, False),
    "partial-lookup": ({"bucket": "2", "changelog-producer": "lookup", "merge-engine": "partial-update"}, False),
    "agg-sum-lookup": ({"bucket": "1", "changelog-producer": "lookup", "merge-engine": "aggregation",
                        "fields.c1.aggregate-function": "sum"}, False),
    "agg-sum-none": ({"bucket": "2", "merge-engine": "aggregation", "fields.c1.aggregate-function": "sum"}, False),
    "first-row-lookup": ({"bucket": "1", "changelog-producer": "lookup", "merge-engine": "first-row"}, False),
}


class Column:
    """A column of the model: Paimon field id stand-in ``fid``, current name, type tag, ROW sub-fields."""

    def __init__(self, fid: int, name: str, tag: str, subs: list | None = None):
        self.fid, self.name, self.tag, self.subs = fid, name, tag, subs

    def arrow(self) -> pa.DataType:
        if self.tag == "row":
            return pa.struct([(s.name, s.arrow()) for s in self.subs])
        return ARROW[self.tag]


class History:
    """Runs one random history on a lakemerge table and keeps the model."""

    def __init__(self, catalog, config: str, seed: int):
        self.rng = random.Random(seed)
        self.options, self.deletes = CONFIGS[config]
        engine = self.options.get("merge-engine", "deduplicate")
        self.partial = engine in ("partial-update", "aggregation")     # later non-null values win per column
        self.first_row = engine == "first-row"
        self.summed = "fields.c1.aggregate-function" in self.options
        self.sequenced = "sequence.field" in self.options
        self.producer = self.options.get("changelog-producer", "none")
        self.dv = self.options.get("deletion-vectors.enabled") == "true"
        self.next_fid = 0
        self.next_name = 0
        self.cols = [self._new_col("i32"), self._new_col("s"), self._new_col("row")]
        schema = pa.schema([pa.field("k", pa.int64(), False)] + [pa.field(c.name, c.arrow()) for c in self.cols])
        self.key_name = "k"   # the primary key may be renamed (Paimon renames it in the primary keys too)
        self.catalog = catalog
        self.table = catalog.create_table("db.t", schema, ["k"], options=dict(self.options))
        self.state: dict[int, dict] = {}                 # key -> fid -> value (a ROW: sub fid -> value)
        self.snapshots: dict[int, tuple] = {}           # snapshot id -> (state, columns)
        self.inputs: dict[int, list] = {}               # snapshot id -> [(kind, key, values by fid)]
        self.complete: list[int] = []                   # snapshots whose changelog so far folds to their state
        self.tags: dict[str, int] = {}
        self.rebase: dict[int, dict] = {}               # OVERWRITE snapshot id -> the rows it rewrote
        self.log: list[str] = []

    # ---- schema --------------------------------------------------------------------------------------------
    def _fid(self) -> int:
        self.next_fid += 1
        return self.next_fid

    def _name(self, prefix="c") -> str:
        self.next_name += 1
        return f"{prefix}{self.next_name}"

    def _new_col(self, tag: str) -> Column:
        subs = [Column(self._fid(), self._name("f"), "i32")] if tag == "row" else None
        return Column(self._fid(), self._name(), tag, subs)

    def alter(self) -> None:
        rng = self.rng
        ops = ["add", "rename", "widen", "nested"] + (["drop"] if len(self.cols) > 2 else [])
        op = rng.choice(ops)
        alter = self.table.alter()
        if op == "add":
            col = self._new_col(rng.choice(["i32", "f32", "d52", "s", "row"]))
            if rng.random() < 0.3 and self._dropped_names:   # re-add a dropped name: a new field, null in old files
                col.name = self._dropped_names.pop()
            alter.add_column(col.name, col.arrow())
            self.cols.append(col)
            desc = f"add {col.name} {col.tag}"
        elif op == "rename" and rng.random() < 0.25:
            new = self._name("k")
            alter.rename_column(self.key_name, new)
            desc = f"rename key {self.key_name} -> {new}"
            self.key_name = new
        elif op == "rename":
            col = rng.choice(self.cols)
            new = self._name()
            alter.rename_column(col.name, new)
            desc = f"rename {col.name} -> {new}"
            col.name = new
        elif op == "drop" and not self.partial:
            col = rng.choice(self.cols[1:] if self.sequenced else self.cols)
            alter.drop_column(col.name)
            self.cols.remove(col)
            self._dropped_names.append(col.name)
            desc = f"drop {col.name}"
        elif op == "widen" and (cands := [c for c in self.cols if c.tag in WIDER]):
            col = rng.choice(cands)
            col.tag = WIDER[col.tag]
            alter.update_column_type(col.name, col.arrow())
            desc = f"widen {col.name} {col.tag}"
        elif op == "nested" and (cands := [c for c in self.cols if c.tag == "row"]):
            col = rng.choice(cands)
            sub = Column(self._fid(), self._name("f"), rng.choice(["i32", "s"]))
            alter.add_column((col.name, sub.name), sub.arrow())
            col.subs.append(sub)
            desc = f"nested {col.name}.{sub.name} {sub.tag}"
        else:
            return
        alter.commit()
        self.log.append(desc)

    _dropped_names: list

    # ---- values --------------------------------------------------------------------------------------------
    def _value(self, tag: str, subs=None):
        rng = self.rng
        if rng.random() < 0.15:
            return None
        if tag == "i32":
            return rng.randint(-1000, 1000)
        if tag == "i64":
            return rng.choice([rng.randint(-1000, 1000), rng.randint(2 ** 31, 2 ** 40)])
        if tag in ("f32", "f64"):
            return rng.randint(-400, 400) / 4
        if tag in ("d52", "d82"):
            return Decimal(rng.randint(-99999, 99999)).scaleb(-2) if tag == "d52" else \
                Decimal(rng.randint(-9999999, 9999999)).scaleb(-2)
        if tag == "s":
            return rng.choice(["a", "bb", "é", ""]) + str(rng.randint(0, 9))
        return {s.fid: self._value(s.tag) for s in subs}

    def _to_arrow_value(self, col: Column, v):
        if col.tag == "row" and v is not None:
            return {s.name: v.get(s.fid) for s in col.subs}
        return v

    def _batch(self, rows: list[tuple[int, dict]], cols: list[Column]) -> pa.Table:
        schema = pa.schema([pa.field(self.key_name, pa.int64(), False)] + [pa.field(c.name, c.arrow()) for c in cols])
        return pa.Table.from_pylist(
            [dict({self.key_name: k}, **{c.name: self._to_arrow_value(c, vals.get(c.fid)) for c in cols})
             for k, vals in rows], schema=schema)

    # ---- operations ----------------------------------------------------------------------------------------
    def upsert(self, merge_schema: bool = False) -> None:
        keys = self.rng.sample(range(10), self.rng.randint(1, 5))
        cols = list(self.cols)
        if merge_schema:   # a write whose input has one more column: merge-schema adds it (engine/merge_schema.py)
            col = self._new_col(self.rng.choice(["i32", "s"]))
            cols.append(col)
        rows = [(k, {c.fid: self._value(c.tag, c.subs) for c in cols}) for k in keys]
        seq = self.cols[0].fid
        if self.sequenced:   # sequence values are never null; some older than the key's current one
            for _, vals in rows:
                if vals[seq] is None:
                    vals[seq] = self.rng.randint(-1000, 1000)
        sid = self.table.write(self._batch(rows, cols), merge_schema=merge_schema)
        if merge_schema:
            self.cols.append(col)
            self.log.append(f"merge-schema write adds {col.name} {col.tag}")
        for k, vals in rows:
            cur = self.state.get(k)
            if cur is None:
                self.state[k] = vals
            elif self.first_row:
                pass
            elif self.partial:
                merged = dict(cur)
                merged.update({f: v for f, v in vals.items() if v is not None})
                if self.summed and cur.get(seq) is not None and vals[seq] is not None:
                    merged[seq] = cur[seq] + vals[seq]
                self.state[k] = merged
            elif not self.sequenced or vals[seq] >= cur[seq]:
                self.state[k] = vals
        self.log.append(f"upsert {keys} -> {sid}")
        self._committed(sid, [("+I", k, vals) for k, vals in rows])

    def delete(self) -> None:
        keys = self.rng.sample(range(10), self.rng.randint(1, 3))
        sid = self.table.delete(pa.table({self.key_name: pa.array(keys, pa.int64())}))
        for k in keys:
            self.state.pop(k, None)
        self.log.append(f"delete {keys} -> {sid}")
        self._committed(sid, [("-D", k, {}) for k in keys])

    def compact(self) -> None:
        full = self.rng.random() < 0.6
        before = self.table.latest_snapshot_id()
        sid = self.table.compact(full=full)
        self.log.append(f"compact full={full} -> {sid}")
        if sid is not None and sid != before:
            self._committed(sid, [], changelog_complete=full or self.producer == "lookup")

    def set_options(self) -> None:
        """ALTER TABLE SET options that change the layout of what is written next, not the rows: the data file
        format, or the bucket number followed by a rescale (an OVERWRITE snapshot of the same rows)."""
        if self.rng.random() < 0.5:
            fmt = self.rng.choice(["parquet", "orc", "avro"])
            self.table.alter().set_option("file.format", fmt).commit()
            self.log.append(f"file.format={fmt}")
            return
        buckets = self.rng.choice([1, 2, 3])
        self.table.alter().set_option("bucket", str(buckets)).commit()
        before = self.table.latest_snapshot_id()
        overwrite = self.table.rescale()
        sid = self.table.latest_snapshot_id()   # the OVERWRITE may be followed by the compaction of its level 0
        self.log.append(f"bucket={buckets}, rescale -> {overwrite}, {sid}")
        if overwrite is None or sid == before:
            return
        # streams skip OVERWRITE snapshots (Paimon's streaming-read-overwrite=false), so a consumer's changelog
        # continues from the rewritten state: the rows themselves
        self.rebase[overwrite] = copy.deepcopy(self.state)
        if self.dv and sid != overwrite:   # all level-0 files, which a deletion-vector batch read skips
            self.snapshots[overwrite] = ({}, copy.deepcopy(self.cols), self.key_name)
        self._committed(sid, [], changelog_complete=self.producer == "lookup")

    def tag(self) -> None:
        sid = self.table.latest_snapshot_id()
        if sid is None:
            return
        name = f"tag{len(self.tags)}"
        self.table.create_tag(name, sid)
        self.tags[name] = sid
        self.log.append(f"tag {name} = {sid}")

    def _committed(self, sid: int, inputs: list, changelog_complete: bool | None = None) -> None:
        """Record the model at every snapshot up to ``sid`` (a write may publish APPEND then COMPACT)."""
        last = max(self.snapshots, default=0)
        assert sid > last, (sid, last, self.log)
        # the table's own cols at commit time: copies, so later renames do not change them
        frozen = (copy.deepcopy(self.state), copy.deepcopy(self.cols), self.key_name)
        # with deletion vectors a batch read skips level 0 (Paimon's DV mode): the APPEND snapshot before the
        # writer's own COMPACT snapshot still shows the previous state
        before = (self.snapshots[last][0] if last else {},) + frozen[1:] if self.dv else frozen
        for s in range(last + 1, sid):
            self.snapshots.setdefault(s, before)
        self.snapshots[sid] = frozen
        self.inputs[last + 1] = inputs   # a write's input is its first (APPEND) snapshot's
        if changelog_complete is None:
            changelog_complete = self.producer in ("input", "lookup")
        if changelog_complete:
            self.complete.append(sid)

    def drain_consumer(self) -> None:
        """A consumer restarted after every operation (a fresh table object: the current schema) continues where
        it stopped: it gets what ``read_changes`` gives from its saved position to the latest snapshot."""
        t = self.catalog.get_table("db.t")
        latest = t.latest_snapshot_id()
        start = t.consumers().get("c")
        if latest is None or (start is not None and start > latest):
            return
        got = [r for b in t.stream("from-snapshot", snapshot_id=start or 1, consumer_id="c", poll_interval=0,
                                   idle_timeout=0) for r in b.to_pylist()]
        want = t.read_changes((start or 1) - 1, latest).to_pylist()
        assert got == want, (start, latest, self.log)
        assert t.consumers()["c"] == latest + 1, (t.consumers(), latest, self.log)

    def run(self, steps: int) -> None:
        self._dropped_names = []
        self.upsert()
        # a stream opened now on the table object every ALTER goes through keeps the schema it started with
        self.early_cols = copy.deepcopy(self.cols)
        self.early = self.table.stream("from-snapshot", snapshot_id=1, poll_interval=0, idle_timeout=0)
        self.early_rows = [r for r in next(self.early).to_pylist()] if self.producer in ("none", "input") else []
        for _ in range(steps):
            if self.rng.random() < 0.3:
                self.drain_consumer()
            r = self.rng.random()
            if r < 0.40:
                self.upsert()
            elif r < 0.47:
                self.upsert(merge_schema=True)
            elif r < 0.60 and self.deletes:
                self.delete()
            elif r < 0.75:
                self.alter()
            elif r < 0.84:
                self.compact()
            elif r < 0.89:
                self.set_options()
            else:
                self.tag()

    # ---- expectations --------------------------------------------------------------------------------------
    @staticmethod
    def project(state: dict, cols: list[Column]) -> list[dict]:
        """The rows of ``state`` as a read through the schema of ``cols`` returns them (by field id)."""
        out = []
        for k, vals in state.items():
            row = {"k": k}
            for c in cols:
                v = vals.get(c.fid)
                if c.tag == "row" and v is not None:
                    v = {s.name: v.get(s.fid) for s in c.subs}
                row[c.name] = v
            out.append(row)
        return sort_rows(out, ["k"])

    def expected(self, sid: int, cols: list[Column] | None = None) -> list[dict]:
        state, at, _ = self.snapshots[sid]
        return self.project(state, at if cols is None else cols)

    def names(self, sid: int) -> list[str]:
        return [self.snapshots[sid][2]] + [c.name for c in self.snapshots[sid][1]]


def canon(table):
    """``table`` (or a batch) with its first column, the primary key under whichever name it had, named k."""
    return table.rename_columns(["k"] + table.column_names[1:])


def _rows(table: pa.Table) -> list[dict]:
    return sort_rows(canon(table).to_pylist(), ["k"])


def check_history(h: History) -> None:
    t = h.catalog.get_table("db.t")
    where = "\n".join(h.log)
    snaps = {s.id: s for s in t.snapshots()}
    # time travel: the snapshot's own schema and the model's values
    for sid in sorted(h.snapshots):
        if sid not in snaps:
            continue
        got = t.read(snapshot_id=sid)
        assert got.column_names == h.names(sid), (sid, where)
        assert _rows(got) == h.expected(sid), (sid, where)
        keys = pa.table({h.names(sid)[0]: pa.array(range(10), pa.int64())})
        assert _rows(t.lookup(keys, snapshot_id=sid)) == h.expected(sid), (sid, where)
        assert _rows(t.to_reader(snapshot_id=sid).read_all()) == h.expected(sid), (sid, where)
        some = h.names(sid)[:1] + h.rng.sample(h.names(sid)[1:], min(2, len(h.names(sid)) - 1))
        assert _rows(t.lookup(keys, snapshot_id=sid, columns=some)) == \
            [{c: r[c] for c in ["k"] + some[1:]} for r in h.expected(sid)], (sid, some, where)
        audit = h.catalog.get_table("db.t$audit_log").read(snapshot_id=sid)
        assert audit.column_names[1:] == h.names(sid), (sid, where)
        # Paimon's AuditLogRead keeps retracts (forceKeepDelete): a deleted key not yet compacted away shows -D
        live = audit.filter(pa.compute.is_in(audit.column(0), pa.array(["+I", "+U"])))
        assert _rows(live.drop_columns([audit.column_names[0]])) == h.expected(sid), (sid, where)
    for name, sid in h.tags.items():
        if sid in h.snapshots:
            got = t.read(tag=name)
            assert got.column_names == h.names(sid), (name, where)
            assert _rows(got) == h.expected(sid), (name, where)
    # latest read and system tables
    latest = max(h.snapshots)
    assert _rows(t.read()) == h.project(h.state, h.cols), where
    sys_snaps = h.catalog.get_table("db.t$snapshots").read().to_pylist()
    for r in sys_snaps:
        assert r["schema_id"] == snaps[r["snapshot_id"]].schema_id
    assert len(h.catalog.get_table("db.t$schemas").read()) == t.schema.id + 1
    check_filters(h, t, where)
    check_early_stream(h, where)
    check_changes(h, t, latest, where)
    check_pypaimon(h, where)
    check_expired(h, where)


_OPS = {"=": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b, "<=": lambda a, b: a <= b,
        ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}


def random_filter(h: History, rows: list[dict], cols: list[Column]):
    """A random single-column filter over a scalar column of ``cols`` and the model's answer on ``rows``."""
    scalar = [c for c in cols if c.tag != "row"]
    col = h.rng.choice(scalar)
    seen = [r[col.name] for r in rows if r[col.name] is not None]
    op = h.rng.choice(list(_OPS) + ["is null", "is not null", "in"])
    if op in ("is null", "is not null"):
        want = [r for r in rows if (r[col.name] is None) == (op == "is null")]
        return (col.name, op, None), want
    lit = h.rng.choice(seen) if seen and h.rng.random() < 0.7 else h._value(col.tag)
    if lit is None:
        lit = h._value(col.tag) or (0 if col.tag != "s" else "a")
    if col.tag in ("f32", "f64", "d52", "d82") and isinstance(lit, int):
        lit = float(lit) if col.tag in ("f32", "f64") else Decimal(lit)
    if op == "in":
        lits = [lit] + [v for v in seen[:2]]
        want = [r for r in rows if r[col.name] is not None and r[col.name] in lits]
        return (col.name, "in", lits), want
    want = [r for r in rows if r[col.name] is not None and _OPS[op](r[col.name], lit)]
    return (col.name, op, lit), want


def check_filters(h: History, t, where: str) -> None:
    """Filtered reads (pruned by file statistics written under older types and names) return exactly the model's
    matching rows, at the latest snapshot and by time travel."""
    sids = [max(h.snapshots)] + h.rng.sample(sorted(h.snapshots), min(4, len(h.snapshots)))
    for sid in sids:
        if t.snapshot(sid) is None:
            continue
        rows = h.expected(sid)
        for _ in range(6):
            f, want = random_filter(h, rows, h.snapshots[sid][1])
            got = _rows(t.read(snapshot_id=sid, filter=[f]))
            assert got == sort_rows(want, ["k"]), (sid, f, where)


def check_early_stream(h: History, where: str) -> None:
    """The stream opened after the first write reads every later change through that first schema (by field id:
    renamed columns keep their values, dropped ones read null, added ones are absent); a value a widened column
    holds beyond its first type raises SchemaMismatch (tests/test_stream_schema_evolution.py)."""
    from engine.errors import SchemaMismatch
    if h.producer not in ("none", "input"):
        return
    try:
        rows = h.early_rows + [r for b in h.early for r in b.to_pylist()]
    except SchemaMismatch:
        assert any(e.startswith("widen") for e in h.log), where
        return
    want = [(kind, k, h.project({k: vals}, h.early_cols)[0] if kind != "-D" else None)
            for sid in sorted(h.inputs) for kind, k, vals in h.inputs[sid]]
    got = [(r["_row_kind"], r["k"], {n: v for n, v in r.items() if n != "_row_kind"} if r["_row_kind"] != "-D"
            else None) for r in rows]
    key = lambda e: (e[0], e[1], repr(e[2]))  # noqa: E731
    assert sorted(got, key=key) == sorted(want, key=key), where


def check_normalized(h: History, t, first: int, latest: int, where: str) -> None:
    """``read_changes(normalize=True)`` of each snapshot of a changelog-producer=none table: the difference between
    the model's states before and after it, through the current schema (Flink's ChangelogNormalize)."""
    def state(sid):
        return {r["k"]: r for r in h.expected(sid, h.cols)} if sid in h.snapshots else {}

    for sid in range(first, latest + 1):
        if t.snapshot(sid).commit_kind != "APPEND":
            continue
        old, new = state(sid - 1), state(sid)
        want = []
        for k in sorted(set(old) | set(new)):
            if k not in old:
                want.append(dict(new[k], _row_kind="+I"))
            elif k not in new:
                want.append(dict(old[k], _row_kind="-D"))
            elif old[k] != new[k]:
                want += [dict(old[k], _row_kind="-U"), dict(new[k], _row_kind="+U")]
        got = canon(t.read_changes(sid - 1, sid, normalize=True)).to_pylist()
        key = lambda r: (r["k"], r["_row_kind"] != "-U")  # noqa: E731
        assert sorted(got, key=key) == sorted(want, key=key), (sid, where)


def check_tag_diffs(h: History, t, where: str) -> None:
    """An incremental read between two tags (through the current schema) turns the older tag's state into the
    newer one's: each changed key's new row, -D for a key gone (Paimon's IncrementalDiffStartingScanner)."""
    tags = sorted(h.tags.items(), key=lambda kv: kv[1])
    for (a, sa), (b, sb) in zip(tags, tags[1:]):
        state = {r["k"]: r for r in h.expected(sa, h.cols)}
        for batch in t.stream("incremental", start=a, end=b, poll_interval=0, idle_timeout=0):
            for r in canon(batch).to_pylist():
                kind = r.pop("_row_kind")
                if kind in ("-U", "-D"):
                    state.pop(r["k"], None)
                else:
                    state[r["k"]] = r
        assert sort_rows(list(state.values()), ["k"]) == h.expected(sb, h.cols), (a, b, where)


def check_pypaimon(h: History, where: str) -> None:
    """pypaimon (the oracle) reads every snapshot through the schema it was committed under, as Paimon does."""
    from tests.interop.pypaimon_util import pp_get_table, pp_read
    if h.first_row:   # pypaimon's batch read of first-row waits for compaction (README: a deliberate difference)
        return
    if h.summed and h.producer == "lookup":
        # a lookup compaction writes a key's full sum to the lower level and leaves the older sum above it; Paimon
        # reads only the newest record above level 0 (PrimaryKeyFileStoreTable wraps LookupMergeFunction), pypaimon
        # 2.1 sums both levels
        return
    pp = pp_get_table(h.catalog.warehouse, "db.t")
    for sid in sorted(h.snapshots):
        if (h.summed or h.sequenced) and h.snapshots[sid][1][0].name != h.cols[0].name:
            continue   # pypaimon keeps the current options naming c1's new name (engine.schema_change.options_as_of)
        got = canon(pp_read(pp, sid, sort_by=h.names(sid)[:1])).to_pylist()
        assert sort_rows(got, ["k"]) == h.expected(sid), (sid, where)


def check_expired(h: History, where: str) -> None:
    """After expiring all but a few snapshots the retained snapshots and the tags still read as the model says,
    and a stream from the earliest retained snapshot is its read_changes."""
    from tests.conftest import expire_after_latest
    t = h.catalog.get_table("db.t")
    expire_after_latest(t, retain_min=1, retain_max=h.rng.randint(1, 4), time_retained=0)
    t = h.catalog.get_table("db.t")
    kept = [s.id for s in t.snapshots()]
    for sid in kept:
        assert _rows(t.read(snapshot_id=sid)) == h.expected(sid), (sid, where)
    for name, sid in h.tags.items():
        assert _rows(t.read(tag=name)) == h.expected(sid), (name, where)
    first = kept[0]
    streamed = [r for b in t.stream("from-snapshot", snapshot_id=first, poll_interval=0, idle_timeout=0)
                for r in b.to_pylist()]
    assert streamed == t.read_changes(first - 1, kept[-1]).to_pylist(), where
    full = [r for b in t.stream("from-snapshot-full", snapshot_id=first, poll_interval=0, idle_timeout=0)
            for r in canon(b).to_pylist()]
    if h.producer in ("lookup", "full-compaction") or h.partial or h.sequenced:
        return
    folded = {}
    for r in full:
        kind = r.pop("_row_kind")
        if kind in ("-U", "-D"):
            folded.pop(r["k"], None)
        else:
            folded[r["k"]] = r
    assert sort_rows(list(folded.values()), ["k"]) == h.project(h.state, h.cols), where


def check_changes(h: History, t, latest: int, where: str) -> None:
    """read_changes per snapshot and the stream, through the current schema."""
    first = min(h.snapshots)
    per_snapshot = {sid: canon(t.read_changes(sid - 1, sid)).to_pylist() for sid in range(first, latest + 1)}
    batches = list(t.stream("from-snapshot", snapshot_id=first, poll_interval=0, idle_timeout=0))
    streamed = [r for b in batches for r in canon(b).to_pylist()]
    assert streamed == [r for sid in sorted(per_snapshot) for r in per_snapshot[sid]], where
    # one batch per snapshot with changes, each named by its snapshot: none skipped, none repeated
    assert [int(b.schema.metadata[b"lakemerge.snapshot_id"]) for b in batches] == \
        [sid for sid in sorted(per_snapshot) if per_snapshot[sid]], where
    check_tag_diffs(h, t, where)
    all_at_once = canon(t.read_changes(first - 1, latest)).to_pylist()
    assert all_at_once == streamed, where
    cols = h.cols
    if h.producer == "none" and not (h.partial or h.first_row):
        check_normalized(h, t, first, latest, where)
    if h.producer in ("none", "input"):   # the records as written (none: the APPEND snapshots' new files)
        for sid, rows in per_snapshot.items():
            want = sorted((kind, k, tuple(sorted(h.project({k: vals}, cols)[0].items())) if kind != "-D" else None)
                          for kind, k, vals in h.inputs.get(sid, []))
            got = sorted((r["_row_kind"], r["k"],
                          tuple(sorted((n, v) for n, v in r.items() if n != "_row_kind")) if r["_row_kind"] != "-D"
                          else None) for r in rows)
            assert got == want, (sid, where)
    if h.producer in ("lookup", "full-compaction"):
        rowdedup = h.options.get("changelog-producer.row-deduplicate") == "true"
        folded: dict[int, dict] = {}
        for sid in range(first, latest + 1):
            if sid in h.rebase:
                folded = {r["k"]: r for r in h.project(h.rebase[sid], cols)}
            retracted: dict[int, dict] = {}
            for r in per_snapshot[sid]:
                kind = r.pop("_row_kind")
                k = r["k"]
                if kind in ("-U", "-D"):
                    assert folded.get(k) == r, (sid, kind, r, folded.get(k), where)
                    retracted[k] = folded.pop(k)
                else:
                    # +I for a new key, +U right after the key's -U; row-deduplicate drops a -U/+U of equal rows
                    assert k not in folded and (kind == "+I") != (k in retracted), (sid, kind, r, where)
                    assert not (rowdedup and retracted.get(k) == r), (sid, r, where)
                    folded[k] = r
            if sid in h.complete:
                assert sort_rows(list(folded.values()), ["k"]) == h.expected(sid, cols), (sid, where)


# Long variants: one seed per configuration in the test run (CI); LAKEMERGE_HISTORY_SEEDS=<n> runs n seeds each
# (a soak run: 40 x 13 + 30 x 5 cases take over an hour on 2 cores).
LONG_SEEDS = range(100, 100 + int(os.environ.get("LAKEMERGE_HISTORY_SEEDS", "1")))


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_history_across_schema_evolution(catalog, config):
    h = History(catalog, config, 0)
    h.run(18)
    check_history(h)


@pytest.mark.slow
@pytest.mark.parametrize("seed", LONG_SEEDS)
@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_history_across_schema_evolution_long(catalog, config, seed):
    h = History(catalog, config, seed)
    h.run(60)
    check_history(h)


# ---- partitioned tables, options changed mid-history, streams from a timestamp ---------------------------------
# name -> (options, primary keys); every table is partitioned by p. "xpart": bucket=-1 with a key without p (Paimon's
# cross-partition update: a key lives in one partition, an upsert into another moves it).
PART_CONFIGS = {
    "xpart": ({"bucket": "-1"}, ["k"]),
    "xpart-lookup": ({"bucket": "-1", "changelog-producer": "lookup"}, ["k"]),
    "fixed": ({"bucket": "2"}, ["p", "k"]),
    "fixed-lookup": ({"bucket": "2", "changelog-producer": "lookup"}, ["p", "k"]),
    "dynamic": ({"bucket": "-1"}, ["p", "k"]),
}
PART_SCHEMA = pa.schema([pa.field("p", pa.int32(), False), pa.field("k", pa.int64(), False),
                         pa.field("v", pa.int32(), False), pa.field("s", pa.string())])
PRODUCERS = ["none", "lookup", "full-compaction"]


class PartHistory:
    """A random history of a partitioned table: upserts (moving keys between partitions on a cross-partition
    table), deletes by key, partition-only DELETEs, DROP PARTITION, INSERT OVERWRITE of a partition, compactions,
    tags, and ALTER TABLE SET of changelog-producer, ``ignore-delete`` and ``sequence.field``. The model: key ->
    row; per snapshot the state and the options it was committed under.

    Options that change how already written records merge (ignore-delete on, sequence.field) are set right after
    a full compaction, when every key has one record (Paimon reads a snapshot with its schema's options: an older
    -D record would otherwise be ignored and an older record win by its sequence field, retroactively)."""

    def __init__(self, catalog, config: str, seed: int):
        self.rng = random.Random(seed)
        options, self.pk = PART_CONFIGS[config]
        self.cross = self.pk == ["k"]
        self.catalog = catalog
        self.table = catalog.create_table("db.p", PART_SCHEMA, self.pk, ["p"], options=dict(options))
        self.producer = options.get("changelog-producer", "none")
        self.ignore_delete = False
        self.sequenced = False
        self.state: dict = {}                      # key -> row dict
        self.snapshots: dict[int, dict] = {}       # snapshot id -> state
        self.producers: dict[int, str] = {}        # snapshot id -> changelog producer it was committed under
        self.complete: list[int] = []              # snapshots whose changelog so far folds to their state
        self.replaced: dict[int, tuple] = {}       # OVERWRITE snapshot id -> (partition, its new rows)
        self.inputs: dict[int, list] = {}          # APPEND snapshot id -> [(kind, row)] as written
        self.tags: dict[str, int] = {}
        self.stable_from = 1                       # snapshots before it may read otherwise now (see check_part_history)
        self.full: set[int] = set()                # snapshots of a full compaction: one record per key
        self.tombs: dict = {}                      # key -> sequence value of its -D (with sequence.field)
        self.log: list[str] = []

    def key(self, row: dict):
        return row["k"] if self.cross else (row["p"], row["k"])

    def _committed(self, sid, inputs=None, complete=False, replaced=None) -> None:
        if sid is None:
            return
        last = max(self.snapshots, default=0)
        if sid == last:
            return
        assert sid > last, (sid, last, self.log)
        for s in range(last + 1, sid + 1):
            self.snapshots[s] = copy.deepcopy(self.state)
            self.producers[s] = self.producer
        if inputs is not None:
            self.inputs[last + 1] = inputs
        if replaced is not None:
            self.replaced[last + 1] = replaced
        if complete:
            self.complete.append(sid)

    # ---- operations ----------------------------------------------------------------------------------------
    def upsert(self) -> None:
        rng = self.rng
        rows, seen = [], set()
        for _ in range(rng.randint(1, 6)):
            row = {"p": rng.randint(0, 2), "k": rng.randint(0, 7), "v": rng.randint(0, 50),
                   "s": rng.choice([None, "a", "b", "c"])}
            if self.key(row) not in seen:
                seen.add(self.key(row))
                rows.append(row)
            # a deleted key's -D keeps its sequence value until a compaction to the top level drops it: an older
            # row would lose to it (in Paimon too); not modelled, such rows are not written
            row["v"] = max(row["v"], self.tombs.get(self.key(row), 0))
        sid = self.table.write(pa.Table.from_pylist(rows, schema=PART_SCHEMA))
        for row in rows:
            cur = self.state.get(self.key(row))
            if cur is None or not self.sequenced or row["v"] >= cur["v"]:
                self.state[self.key(row)] = row
        self.log.append(f"upsert {[(r['p'], r['k'], r['v']) for r in rows]} -> {sid}")
        self._committed(sid, [("+I", r) for r in rows], complete=self.producer == "lookup")

    def delete(self) -> None:
        if self.cross:
            keys = pa.table({"k": pa.array(self.rng.sample(range(8), 2), pa.int64())})
        else:
            pairs = self.rng.sample([(p, k) for p in range(3) for k in range(8)], 3)
            keys = pa.table({"p": pa.array([p for p, _ in pairs], pa.int32()),
                             "k": pa.array([k for _, k in pairs], pa.int64())})
            if self.sequenced:
                # a -D carrying only the key has a null sequence field, the oldest (Paimon compares sequence
                # fields with nulls first): it would lose to the row. As Paimon's DELETE FROM, carry the row.
                keys = pa.Table.from_pylist([self.state.get(k, {"p": k[0], "k": k[1], "v": 0, "s": None})
                                             for k in pairs], schema=PART_SCHEMA)
        sid = self.table.delete(keys)
        asked = keys.column("k").to_pylist() if self.cross else pairs
        # a cross-partition table finds a key's partition in its index: a key it does not hold writes no -D
        written = [k for k in asked if k in self.state] if self.cross else [k[1] for k in asked]
        if not self.ignore_delete:   # ignore-delete: the writer drops the -D records
            for k in asked:
                self.state.pop(k, None)
            if self.sequenced:
                for r in keys.to_pylist():
                    self.tombs[self.key(r)] = max(r["v"], self.tombs.get(self.key(r), 0))
        self.log.append(f"delete {keys.to_pylist()} -> {sid}")
        self._committed(sid, [] if self.ignore_delete else [("-D", k) for k in written],
                        complete=self.producer == "lookup")

    def drop_partition(self) -> None:
        """DROP PARTITION, or a DELETE whose condition names only the partition (a truncate): OVERWRITE."""
        p = self.rng.randint(0, 2)
        before = {k: r for k, r in self.state.items() if r["p"] != p}
        if self.rng.random() < 0.5:
            sid = self.table.drop_partitions({"p": p})
            how = "drop partition"
        else:
            sid = self.table.delete_where([("p", "=", p)])
            how = "delete where p ="
        self.log.append(f"{how} {p} -> {sid}")
        if sid is None or sid == max(self.snapshots, default=0):
            assert before == self.state, self.log
            return
        self.state = before
        self._committed(sid, replaced=(p, []))

    def overwrite(self) -> None:
        """INSERT OVERWRITE of one partition (fixed buckets / dynamic buckets with the key holding p)."""
        p = self.rng.randint(0, 2)
        rows = [{"p": p, "k": k, "v": self.rng.randint(0, 50), "s": "o"} for k in self.rng.sample(range(8), 3)]
        with self.table.new_write(overwrite=True) as w:
            w.write(pa.Table.from_pylist(rows, schema=PART_SCHEMA))
            messages = w.prepare_commit()
        sid = self.table.commit_overwrite(messages, [(p,)])
        # the stream skips the OVERWRITE, whose files (no retracts, no overlapping keys) the commit puts at the top
        # level (Paimon's FileStoreCommitImpl.tryUpgrade, overwrite.upgrade): no later compaction reports the new
        # rows as changes
        self.state = {k: r for k, r in self.state.items() if r["p"] != p}
        self.state.update({self.key(r): r for r in rows})
        self.log.append(f"overwrite p={p} {[r['k'] for r in rows]} -> {sid}")
        self._committed(sid, replaced=(p, rows))

    def compact(self, full: bool | None = None) -> None:
        full = self.rng.random() < 0.6 if full is None else full
        before = self.table.latest_snapshot_id()
        sid = self.table.compact(full=full)
        self.log.append(f"compact full={full} -> {sid}")
        if sid is not None and sid != before:
            self._committed(sid, complete=full)
            if full:
                self.full.add(sid)

    def set_options(self) -> None:
        rng = self.rng
        # not ignore-delete on a cross-partition table: it drops the -D a moved key's old partition gets too
        # (Paimon's RowKindFilter in TableWriteImpl sees the DeleteExistingProcessor's retract), leaving the key's
        # old row in place -- a key then has rows in two partitions, which this model does not follow
        choices = ["producer"] + ([] if self.cross else ["ignore-delete"] + ([] if self.sequenced else ["sequence"]))
        what = rng.choice(choices)
        if what == "producer":
            new = rng.choice([p for p in PRODUCERS if p != self.producer])
            if new != "none":
                # a fold of the changelog starts from a compacted table: the lookup / full-compaction changelog of
                # records written before the switch is relative to what the compaction finds in the files
                self.compact(full=True)
            self.table.alter().set_option("changelog-producer", new).commit()
            self.producer = new
            self.log.append(f"changelog-producer={new}")
            self.switches.append((max(self.snapshots) + 1, copy.deepcopy(self.state)))
        elif what == "ignore-delete":
            if not self.ignore_delete:
                self.compact(full=True)
            self.ignore_delete = not self.ignore_delete
            if self.ignore_delete:
                self.stable_from = max(self.snapshots) + 1
            self.table.alter().set_option("ignore-delete", str(self.ignore_delete).lower()).commit()
            self.log.append(f"ignore-delete={self.ignore_delete}")
        else:
            self.compact(full=True)
            self.table.alter().set_option("sequence.field", "v").commit()
            self.sequenced = True
            self.stable_from = max(self.snapshots) + 1
            self.log.append("sequence.field=v")

    def tag(self) -> None:
        sid = self.table.latest_snapshot_id()
        if sid is not None:
            name = f"tag{len(self.tags)}"
            self.table.create_tag(name, sid)
            self.tags[name] = sid

    def run(self, steps: int) -> None:
        self.switches = [(1, {})]   # (first snapshot id, state) at each change of changelog-producer
        self.upsert()
        for _ in range(steps):
            r = self.rng.random()
            if r < 0.40:
                self.upsert()
            elif r < 0.52:
                self.delete()
            elif r < 0.60:
                self.drop_partition()
            elif r < 0.67 and not self.cross:
                self.overwrite()
            elif r < 0.77:
                self.compact()
            elif r < 0.90:
                self.set_options()
            else:
                self.tag()

    def expected(self, sid: int | None = None) -> list[dict]:
        state = self.state if sid is None else self.snapshots[sid]
        return sort_rows(list(state.values()), ["p", "k"])


def check_part_history(h: PartHistory) -> None:
    t = h.catalog.get_table("db.p")
    where = "\n".join(h.log)
    rows = lambda tbl: sort_rows(tbl.to_pylist(), ["p", "k"])  # noqa: E731
    assert rows(t.read()) == h.expected(), where
    snaps = {s.id: s for s in t.snapshots()}
    keys = pa.table({"p": pa.array([p for p in range(3) for _ in range(8)], pa.int32()),
                     "k": pa.array(list(range(8)) * 3, pa.int64())})
    if h.cross:
        keys = keys.select(["k"]).slice(0, 8)
    for sid in sorted(h.snapshots):
        # a time-travel read merges with the current options (Paimon's AbstractFileStoreTable.tryTimeTravel copies
        # them into the old schema): since ignore-delete was turned on / sequence.field set, an older snapshot
        # whose files still hold a -D record or several records of a key may read otherwise than it did
        if sid not in snaps or (sid < h.stable_from and sid not in h.full):
            continue
        assert rows(t.read(snapshot_id=sid)) == h.expected(sid), (sid, where)
        assert rows(t.lookup(keys, snapshot_id=sid)) == h.expected(sid), (sid, where)
        for p in range(3):   # partition-pruned reads
            assert rows(t.read(snapshot_id=sid, filter=[("p", "=", p)])) == \
                [r for r in h.expected(sid) if r["p"] == p], (sid, p, where)
    for name, sid in h.tags.items():
        if sid >= h.stable_from or sid in h.full:
            assert rows(t.read(tag=name)) == h.expected(sid), (name, where)
    check_part_changes(h, t, where)
    check_from_timestamp(h, t, where)
    check_part_pypaimon(h, where)


def check_part_changes(h: PartHistory, t, where: str) -> None:
    """The stream from the first snapshot is read_changes snapshot by snapshot; APPEND snapshots committed under
    changelog-producer=none hold the records as written; from each switch to lookup / full-compaction (after a
    full compaction) the changelog folds, retract by retract, to the model's state at every full compaction."""
    latest = max(h.snapshots)
    per = {sid: t.read_changes(sid - 1, sid).to_pylist() for sid in range(1, latest + 1)}
    streamed = [r for b in t.stream("from-snapshot", snapshot_id=1, poll_interval=0, idle_timeout=0)
                for r in b.to_pylist()]
    assert streamed == [r for sid in sorted(per) for r in per[sid]], where
    if h.producer == "none":   # the APPEND snapshots' level-0 files: the records as written
        for sid, inputs in h.inputs.items():
            got = sorted((r["_row_kind"], r["k"], r["p"] if r["_row_kind"] == "+I" else None) for r in per[sid])
            want = sorted((kind, r["k"], r["p"]) if kind == "+I" else ("-D", r, None) for kind, r in inputs)
            if h.cross:   # an upsert moving a key also writes the -D of its old partition
                got = [g for g in got if g[0] == "+I"] + [g for g in got if g[0] == "-D" and g in want]
            assert got == want, (sid, got, want, where)
        return
    # read_changes follows the current producer: fold its changelog from the last switch to it (made after a full
    # compaction) or from the start
    first, state = h.switches[-1]
    # keyed by (p, k): a moved key's -D and +I are in different buckets, whose changelogs may come in different
    # snapshots (full-compaction: a bucket's changelog comes with its full compaction)
    pk = lambda r: (r["p"], r["k"])  # noqa: E731
    folded = {pk(r): r for r in state.values()}
    for sid in range(first, latest + 1):
        if sid in h.replaced:   # streams skip the OVERWRITE: the partition's rows are replaced without a change
            p, new = h.replaced[sid]
            folded = {k: r for k, r in folded.items() if r["p"] != p}
            folded.update({(r["p"], r["k"]): r for r in new})
        changes = [(r.pop("_row_kind"), r) for r in per[sid]]
        # retracts first: a moved key's -D and +I are in different partitions, in no particular order
        for kind, r in [c for c in changes if c[0] in ("-U", "-D")]:
            assert folded.pop(pk(r), None) == r, (sid, kind, r, where)
        for kind, r in [c for c in changes if c[0] in ("+I", "+U")]:
            assert pk(r) not in folded, (sid, kind, r, where)
            folded[pk(r)] = r
        if sid in h.complete:
            assert sort_rows(list(folded.values()), ["p", "k"]) == h.expected(sid), (sid, where)


def check_from_timestamp(h: PartHistory, t, where: str) -> None:
    """A stream from a timestamp reads the changes of the snapshots committed at or after it (Paimon's
    ContinuousFromTimestampStartingScanner: after the newest snapshot committed before it)."""
    snaps = t.snapshots()
    for s in h.rng.sample(snaps, min(4, len(snaps))):
        for ts in (s.time_millis, s.time_millis + 1):
            first = next((x.id for x in snaps if x.time_millis >= ts), snaps[-1].id + 1)
            got = [r for b in t.stream("from-timestamp", timestamp_millis=ts, poll_interval=0, idle_timeout=0)
                   for r in b.to_pylist()]
            assert got == t.read_changes(first - 1, snaps[-1].id).to_pylist(), (ts, first, where)


def check_part_pypaimon(h: PartHistory, where: str) -> None:
    from tests.interop.pypaimon_util import pp_get_table, pp_read
    pp = pp_get_table(h.catalog.warehouse, "db.p")
    for sid in sorted(h.snapshots):
        if sid < h.stable_from and sid not in h.full:
            continue
        got = pp_read(pp, sid, sort_by=["p", "k"]).to_pylist()
        assert sort_rows(got, ["p", "k"]) == h.expected(sid), (sid, where)


@pytest.mark.parametrize("config", sorted(PART_CONFIGS))
def test_partitioned_history_with_options_changed(catalog, config):
    h = PartHistory(catalog, config, 0)
    h.run(25)
    check_part_history(h)


@pytest.mark.slow
@pytest.mark.parametrize("seed", LONG_SEEDS)
@pytest.mark.parametrize("config", sorted(PART_CONFIGS))
def test_partitioned_history_with_options_changed_long(catalog, config, seed):
    h = PartHistory(catalog, config, seed)
    h.run(60)
    check_part_history(h)
