"""A `not in` filter gives pypaimon's answer (Paimon's NotIn: a null is never NOT IN) on a pypaimon-written table
whose null rows sit both in a file of only nulls (pruned by stats) and in a file read row by row."""
from __future__ import annotations

import pyarrow as pa
import pytest

from engine import Catalog
from tests.interop.pypaimon_util import pp_catalog, pp_create_table, pp_write

pytestmark = pytest.mark.interop

SCHEMA = pa.schema([pa.field("p", pa.string(), False), pa.field("id", pa.int32(), False), pa.field("v", pa.int64())])


def test_not_in_excludes_nulls_like_pypaimon(tmp_path):
    wh = str(tmp_path / "wh")
    pt = pp_create_table(pp_catalog(wh), "db.t", SCHEMA, ["p", "id"], partition_keys=["p"],
                         options={"bucket": "1", "metadata.stats-mode": "full"})
    pp_write(pt, [{"p": "A", "id": 1, "v": None}, {"p": "B", "id": 2, "v": None}, {"p": "B", "id": 3, "v": 30}])
    rb = pt.new_read_builder()
    rb = rb.with_filter(rb.new_predicate_builder().is_not_in("v", [10]))
    theirs = rb.new_read().to_arrow(rb.new_scan().plan().splits()).to_pylist()
    ours = Catalog(wh).get_table("db.t").read(filter=[("v", "not in", [10])]).to_pylist()
    assert ours == theirs == [{"p": "B", "id": 3, "v": 30}]
