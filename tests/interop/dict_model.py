"""A plain-dict model of a Paimon primary-key table with the deduplicate merge engine.

Semantics modelled (paimon-semantics.md §2.3, §3, §6.1, §10):
* every record of a key is ordered by (sequence.field values, ascending, nulls first) then arrival order;
  the latest record wins, including its row kind;
* +I / +U are adds, -U / -D retracts; a key whose latest record is a retract is absent from reads;
* within one commit the same rules apply in input order (Paimon assigns sequence numbers in input order).

Not modelled on purpose: an add arriving *after* a retained retract but with a smaller sequence.field value.
Whether it wins depends on whether compaction already dropped the retract, so tests must not generate it.
"""
from __future__ import annotations

from typing import Iterable, Sequence

import pyarrow as pa

from tests.interop.pypaimon_util import _sortable, sort_rows

KIND_NAMES = {0: "+I", 1: "-U", 2: "+U", 3: "-D"}
ADD_KINDS = {"+I", "+U"}
RETRACT_KINDS = {"-U", "-D"}


def kind_name(k) -> str:
    if isinstance(k, str):
        if k not in ADD_KINDS | RETRACT_KINDS:
            raise ValueError(f"bad row kind {k!r}")
        return k
    return KIND_NAMES[int(k)]


class DictModel:
    def __init__(self, schema: pa.Schema, primary_key: Sequence[str], sequence_fields: Sequence[str] = (),
                 rowkind_field: str | None = None):
        self.schema = schema
        self.names = list(schema.names)
        self.primary_key = list(primary_key)
        self.sequence_fields = list(sequence_fields)
        self.rowkind_field = rowkind_field
        # key -> (sequence-field sort key, kind, full row dict)
        self.state: dict[tuple, tuple[tuple, str, dict]] = {}
        self.history: dict[int, dict[tuple, tuple[tuple, str, dict]]] = {}

    # ---- mutation -----------------------------------------------------------------------------------
    def key_of(self, row: dict) -> tuple:
        return tuple(_norm(row[k]) for k in self.primary_key)

    def _rows(self, data) -> list[dict]:
        if isinstance(data, pa.RecordBatch):
            data = pa.Table.from_batches([data])
        if isinstance(data, pa.Table):
            data = data.to_pylist()
        elif hasattr(data, "to_dict") and hasattr(data, "columns"):  # pandas
            data = pa.Table.from_pandas(data, preserve_index=False).to_pylist()
        return [{n: r.get(n) for n in self.names} for r in data]

    def apply(self, data, kinds: Iterable | None = None) -> None:
        rows = self._rows(data)
        if kinds is None:
            if self.rowkind_field is not None:
                kinds = [r[self.rowkind_field] for r in rows]
            else:
                kinds = ["+I"] * len(rows)
        kinds = [kind_name(k) for k in kinds]
        assert len(kinds) == len(rows)
        for row, kind in zip(rows, kinds):
            key = self.key_of(row)
            seq = tuple(_sortable(row[f]) for f in self.sequence_fields)
            cur = self.state.get(key)
            if cur is None or seq >= cur[0]:
                self.state[key] = (seq, kind, row)

    def upsert(self, data) -> None:
        self.apply(data)

    def delete(self, data) -> None:
        rows = self._rows(data)
        self.apply(rows, ["-D"] * len(rows))

    def commit(self, snapshot_id: int) -> None:
        """Record the state at ``snapshot_id``. Ids skipped since the previous commit get the same state: a single
        writer's commit may publish an APPEND snapshot followed by a COMPACT one, both showing the same rows."""
        last = max(self.history, default=0)
        for sid in range(last + 1, snapshot_id + 1):
            self.history[sid] = dict(self.state)
        self.history[snapshot_id] = dict(self.state)

    def snapshot_ids(self) -> list[int]:
        return sorted(self.history)

    # ---- views --------------------------------------------------------------------------------------
    def _state(self, snapshot_id: int | None):
        return self.state if snapshot_id is None else self.history[snapshot_id]

    def live_rows(self, snapshot_id: int | None = None) -> list[dict]:
        rows = [r for (_, kind, r) in self._state(snapshot_id).values() if kind in ADD_KINDS]
        return sort_rows(rows, self.primary_key)

    def retracted_rows(self, snapshot_id: int | None = None) -> dict[tuple, dict]:
        """key -> the retract record that is the latest record of that key."""
        return {k: r for k, (_, kind, r) in self._state(snapshot_id).items() if kind in RETRACT_KINDS}

    def live_table(self, snapshot_id: int | None = None) -> pa.Table:
        return pa.Table.from_pylist(self.live_rows(snapshot_id), schema=self.schema)

    def lookup_rows(self, keys: Iterable[tuple], snapshot_id: int | None = None) -> list[dict]:
        st = self._state(snapshot_id)
        out = []
        for k in keys:
            rec = st.get(tuple(_norm(v) for v in k))
            if rec is not None and rec[1] in ADD_KINDS:
                out.append(rec[2])
        return sort_rows(out, self.primary_key)


def _norm(v):
    if isinstance(v, bytearray):
        return bytes(v)
    return v
