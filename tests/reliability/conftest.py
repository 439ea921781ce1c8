"""Tests marked ``reliability`` (the full crash/concurrency matrix) run only when selected: ``pytest -m reliability``.
The default run keeps a representative subset (unmarked tests)."""
from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config, items):
    if "reliability" in (config.option.markexpr or ""):
        return
    skip = pytest.mark.skip(reason="full reliability matrix: run with -m reliability")
    for item in items:
        if item.get_closest_marker("reliability") is not None:
            item.add_marker(skip)
