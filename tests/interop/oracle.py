"""Comparing reads against pypaimon while accounting for pypaimon 2.1.0's known phantom-row bug.

pypaimon 2.1.0 records ``_DELETE_ROW_COUNT = 0`` for every primary-key data file. Readers (pypaimon
included) then treat a single-file section as "raw convertible" and return its -D/-U rows as if they were
inserts. Paimon's documented behaviour (paimon-semantics.md §6.1, §10) is that a key whose latest record is a
retract is absent. So when pypaimon's read differs from the dict model, the difference must consist only of
such phantom rows, and lakemerge must then match the model (pypaimon is the side that is wrong).
"""
from __future__ import annotations

from tests.interop.dict_model import DictModel
from tests.interop.pypaimon_util import _fmt, diff_rows


def split_pypaimon_phantoms(pp_rows: list[dict], model: DictModel, snapshot_id: int | None) -> list[dict]:
    """Return the phantom rows in pypaimon's read (empty if pypaimon agrees with the model).

    Raises AssertionError if pypaimon differs from the model in any way other than the known bug.
    """
    expected = model.live_rows(snapshot_id)
    if pp_rows == expected:
        return []
    pk = model.primary_key
    retracted = model.retracted_rows(snapshot_id)
    live_keys = {model.key_of(r) for r in expected}
    phantoms, normal = [], []
    for r in pp_rows:
        k = model.key_of(r)
        (normal if k in live_keys else phantoms).append(r)
    bad = []
    for r in phantoms:
        k = model.key_of(r)
        rec = retracted.get(k)
        if rec is None or {c: _fmt(v) for c, v in rec.items()} != {c: _fmt(v) for c, v in r.items()}:
            bad.append(r)
    d = diff_rows(normal, expected, pk)
    assert not bad and not d, (
        f"pypaimon's own read at snapshot {snapshot_id} differs from the model beyond the known "
        f"_DELETE_ROW_COUNT phantom-row bug:\nnon-phantom unexpected rows: {bad[:5]}\n{d}")
    return phantoms
