"""check() on tables pypaimon wrote: a healthy Paimon table reports no problem (check() follows the format,
not lakemerge's own habits)."""
from __future__ import annotations

import pytest

from tests.interop.scenarios import all_scenarios
from tests.interop.test_pypaimon_writes_lakemerge_reads import write_with_pypaimon

pytestmark = [pytest.mark.interop, pytest.mark.slow]


@pytest.mark.parametrize("scenario", all_scenarios(), ids=lambda s: s.name)
def test_check_accepts_pypaimon_tables(tmp_path, scenario):
    from engine import Catalog

    w = write_with_pypaimon(scenario, str(tmp_path / "wh"))
    report = Catalog(w.warehouse).get_table(scenario.identifier).check()
    assert report.ok, report.summary()
    assert report.snapshot_ids == w.snapshot_ids
