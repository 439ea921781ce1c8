"""merge-engine=first-row (paimon-semantics §6.4): the oldest add record of each key wins.

Retract records are rejected at write (unless ``ignore-delete``, which drops them); in files they are skipped
when ``ignore-delete`` is set and raise otherwise. A key with only retracts keeps its newest retract, which
readers drop. lakemerge's batch read merges every level, level 0 included, so rows are visible as soon as they
are committed (Paimon's Java reader and pypaimon skip level 0 for first-row tables).
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from engine.errors import MergeFunctionError
from engine.merge_engines.segments import Segments
from kernels import aggregate as K


def reduce(seg: Segments, cfg, value_names: list[str]) -> pa.Table:
    """Keep each key's first added row (its last row if none was added).
    Raises MergeFunctionError on retract records unless ignore-delete is set."""
    if not cfg.ignore_delete and seg.retract.any():
        raise MergeFunctionError((f"table {seg.table_name!r}: " if seg.table_name else "")
                                 + "first-row cannot take retract records (-U/-D); set ignore-delete=true")
    first = K.segment_pick(seg.order, seg.key_starts, seg.add, True)
    return seg.table.take(pa.array(np.where(first < 0, seg.last_rows, first)))


def lone_add_is_unchanged(cfg) -> bool:
    """Always True: under first-row a key's single added row is its merge result."""
    return True
