"""Corruption of every kind of file reachable from the latest snapshot: detected (typed error) or harmless,
never silently wrong. ``check()`` flags every damage that reads detect."""
from __future__ import annotations

import pytest

from tests.reliability import scenarios as sc


@pytest.mark.parametrize("target", sc.CORRUPTION_TARGETS)
@pytest.mark.parametrize("damage", sc.DAMAGES)
def test_damage_is_detected_or_harmless(tmp_path, target, damage):
    out = sc.corruption_case(str(tmp_path), target, damage, seed=7)
    assert out.verdict in ("detected", "harmless"), out
    if out.verdict == "detected":
        assert out.check_flagged, f"check() missed what the read detected: {out.detail}"
    if target == "latest-hint":
        assert out.verdict == "harmless"  # only a hint


@pytest.mark.reliability
@pytest.mark.parametrize("target", sc.CORRUPTION_TARGETS)
@pytest.mark.parametrize("seed", range(25))
def test_random_bit_flips(tmp_path, target, seed):
    out = sc.corruption_case(str(tmp_path), target, "bit-flip", seed=seed)
    assert out.verdict in ("detected", "harmless"), out


def test_detected_error_names_the_file(tmp_path):
    out = sc.corruption_case(str(tmp_path), "manifest", "truncate", seed=1)
    assert out.verdict == "detected" and "manifest-" in out.detail
