"""Model-based test of compaction and maintenance: random write / delete / compact / expire / tag / rollback /
orphan-cleanup sequences against a dict model.

Checked after every step: the table read at every retained snapshot and at every tag equals the model at that
point (so no file a retained snapshot or tag references was deleted); after orphan cleanup with older_than=0, the
files on disk are exactly the referenced ones.
"""
from __future__ import annotations

import os
import shutil
import tempfile

import pyarrow as pa
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from tests.conftest import expire_after_latest

SCHEMA = pa.schema([("k", pa.int32()), ("v", pa.string())])
KEYS = st.integers(min_value=0, max_value=30)
TAGS = st.sampled_from(["t1", "t2", "t3"])


def _rows(t) -> dict:
    return {r["k"]: r["v"] for r in t.to_pylist()}


class MaintenanceModel(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.dir = None
        self.table = None
        self.state: dict[int, str] = {}
        self.history: dict[int, dict] = {}  # snapshot id -> state
        self.tags: dict[str, tuple[int, dict]] = {}
        self.counter = 0

    @initialize(bucket=st.sampled_from([1, 2]), write_only=st.booleans(), trigger=st.sampled_from([2, 3, 5]),
                manifest_full=st.booleans())
    def create(self, bucket, write_only, trigger, manifest_full):
        from engine import Catalog
        self.dir = tempfile.mkdtemp(prefix="lakemerge-maint-")
        cat = Catalog(self.dir + "/wh")
        cat.create_database("db")
        opts = {"bucket": str(bucket), "write-only": str(write_only).lower(),
                "num-sorted-run.compaction-trigger": str(trigger), "compaction.read-batch-rows": "3",
                "manifest.merge-min-count": "2", "target-file-size": "4 kb"}
        if manifest_full:
            opts["manifest.full-compaction-threshold-size"] = "1 b"
        self.table = cat.create_table("db.t", SCHEMA, primary_key=["k"], options=opts)

    def _record(self, before: int | None):
        latest = self.table.latest_snapshot_id()
        for sid in range((before or 0) + 1, (latest or 0) + 1):
            self.history[sid] = dict(self.state)

    @rule(ks=st.lists(KEYS, min_size=1, max_size=15))
    def upsert(self, ks):
        self.counter += 1
        before = self.table.latest_snapshot_id()
        vals = [f"{k}-{self.counter}" for k in ks]
        self.table.write(pa.table({"k": pa.array(ks, pa.int32()), "v": vals}))
        for k, v in zip(ks, vals):
            self.state[k] = v
        self._record(before)

    @rule(ks=st.lists(KEYS, min_size=1, max_size=6))
    def delete(self, ks):
        before = self.table.latest_snapshot_id()
        self.table.delete(pa.table({"k": pa.array(ks, pa.int32())}))
        if before is None and self.table.latest_snapshot_id() is None:
            return
        for k in ks:
            self.state.pop(k, None)
        self._record(before)

    @rule(full=st.booleans())
    def compact(self, full):
        before = self.table.latest_snapshot_id()
        self.table.compact(full=full)
        self._record(before)

    @rule(retain=st.integers(min_value=1, max_value=4))
    def expire(self, retain):
        removal = expire_after_latest(self.table, retain_min=retain, time_retained=0)
        for sid in removal.snapshot_ids:
            del self.history[sid]
        assert sorted(self.history) == [s.id for s in self.table.snapshots()]

    @precondition(lambda self: self.history)
    @rule(name=TAGS, back=st.integers(min_value=0, max_value=3))
    def create_tag(self, name, back):
        if name in self.tags:
            return
        ids = sorted(self.history)
        sid = ids[max(0, len(ids) - 1 - back)]
        self.table.create_tag(name, sid)
        self.tags[name] = (sid, self.history[sid])

    @rule(name=TAGS)
    def delete_tag(self, name):
        if name in self.tags:
            self.table.delete_tag(name)
            del self.tags[name]

    @precondition(lambda self: self.history or self.tags)
    @rule(data=st.data())
    def rollback(self, data):
        targets = [("s", sid) for sid in sorted(self.history)] + [("t", n) for n in sorted(self.tags)]
        kind, target = data.draw(st.sampled_from(targets))
        if kind == "s":
            sid, state = target, self.history[target]
        else:
            sid, state = self.tags[target]
        if kind == "t" and sid not in self.history:
            self.history = {}
        self.table.rollback_to(target)
        self.history = {i: s for i, s in self.history.items() if i < sid}
        self.history[sid] = dict(state)
        self.state = dict(state)
        self.tags = {n: v for n, v in self.tags.items() if v[0] <= sid}
        assert sorted(self.tags) == sorted(self.table.tags())

    @rule()
    def remove_orphans(self):
        from engine.maintenance.orphans import referenced_files
        self.table.remove_orphan_files(older_than=0)
        referenced = {os.path.normpath(p) for p in referenced_files(self.table)}
        on_disk = set()
        for d, _, files in os.walk(self.table.root):
            if os.path.relpath(d, self.table.root).split(os.sep)[0] in ("schema", "snapshot", "tag"):
                continue
            on_disk.update(os.path.normpath(os.path.join(d, f)) for f in files)
        assert on_disk == referenced

    @invariant()
    def every_retained_snapshot_and_tag_reads_as_the_model(self):
        if self.table is None:
            return
        assert sorted(self.history) == [s.id for s in self.table.snapshots()]
        for sid, state in self.history.items():
            got = _rows(self.table.read(sid))
            assert got == state, f"snapshot {sid}"
        for name, (_, state) in self.tags.items():
            assert _rows(self.table.read(tag=name)) == state, f"tag {name}"

    @invariant()
    def newer_data_sits_in_lower_levels(self):
        """The LSM order universal compaction keeps: each sorted run (level-0 files newest first, then levels 1..)
        holds only records older than every record of the runs before it."""
        if self.table is None or not self.history:
            return
        from engine.compact.levels import Levels
        for sp in self.table.plan():
            runs = Levels(sp.files, 1, self.table.schema.types_of(["k"])).runs()
            for newer, older in zip(runs, runs[1:]):
                assert min(f.min_sequence_number for f in newer.files) > \
                    max(f.max_sequence_number for f in older.files), (newer, older)

    def teardown(self):
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)


MaintenanceModel.TestCase.settings = settings(
    max_examples=int(os.environ.get("LM_MODEL_EXAMPLES", "12")), stateful_step_count=14, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
test_maintenance_model = MaintenanceModel.TestCase

