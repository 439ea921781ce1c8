"""Bad input (the issue's list): typed error before any file is created; accepted edge cases round-trip.

Documented rules checked here:
- duplicate keys within one batch (deduplicate engine): the last row in input order wins, including its row kind;
- with ``sequence.field``: a record with a smaller sequence value loses, even if it arrives later or in a later
  commit; a null sequence value is the smallest (ascending order: nulls first), so it never replaces a non-null.
"""
from __future__ import annotations

import os

import pytest

from tests.reliability import scenarios as sc

CASES = sc.bad_input_cases()


@pytest.mark.parametrize("name,op,expected", CASES, ids=[c[0] for c in CASES])
def test_rejected_before_any_file_is_created(tmp_path, name, op, expected):
    ok, changed, text = sc.bad_input_case(str(tmp_path), name, op, expected)
    assert ok, f"{name}: expected {expected.__name__}, got {text}"
    assert not changed, f"{name}: files were created or changed"
    assert "db." in text  # the message names the table


@pytest.fixture
def table(tmp_path):
    return sc.bad_input_table(str(tmp_path / "wh"))


def _state(t):
    return {(r["p"], r["id"]): (r["ts"], r["v"]) for r in t.read().to_pylist()}


def test_duplicate_keys_in_one_batch_last_wins(table):
    table.write({"p": ["a", "a", "a"], "id": [1, 1, 2], "ts": [3, 2, 1], "v": ["first", "second", "x"]})
    assert _state(table) == {("a", 1): (2, "second"), ("a", 2): (1, "x")}
    table.write({"p": ["a", "a"], "id": [2, 2], "ts": [0, 0], "v": ["y", "y"]}, row_kinds=["+U", "-D"])
    assert _state(table) == {("a", 1): (2, "second")}


def test_out_of_order_and_null_sequence_values(tmp_path):
    t = sc.bad_input_table(str(tmp_path / "wh"), **{"sequence.field": "ts"})
    t.write({"p": ["a", "a", "a"], "id": [1, 1, 2], "ts": [5, 3, 7], "v": ["new", "old", "k2"]})
    assert _state(t) == {("a", 1): (5, "new"), ("a", 2): (7, "k2")}
    t.write({"p": ["a", "a"], "id": [1, 2], "ts": [4, None], "v": ["late", "null-ts"]})
    assert _state(t) == {("a", 1): (5, "new"), ("a", 2): (7, "k2")}
    assert t.check().ok


@pytest.mark.slow
def test_64_mib_string(table):
    big = "x" * (64 << 20)
    table.write({"p": ["a"], "id": [7], "ts": [1], "v": [big]})
    got = table.read(filter=None).to_pylist()
    assert got[0]["v"] == big
    assert table.check().ok


PARTITIONS = ["a/b", "x=y", "100%", "..", "../..", "", " ", "日本", "é", "a\\b", "#?*", "__DEFAULT_PARTITION__"]


def test_awkward_partition_and_key_values(table):
    rows = {"p": PARTITIONS, "id": list(range(len(PARTITIONS))), "ts": [0] * len(PARTITIONS),
            "v": ["", "日本語", "\x00nul", "é" * 100] + ["v"] * (len(PARTITIONS) - 4)}
    table.write(rows)
    got = sorted(table.read().to_pylist(), key=lambda r: r["id"])
    assert [r["p"] for r in got][:2] == PARTITIONS[:2]
    # Paimon writes "" and the default-partition name into one directory; the row's partition value comes
    # from the manifest, so each key still reads back with its own value.
    assert {(r["p"], r["id"], r["v"]) for r in got} == set(zip(rows["p"], rows["id"], rows["v"]))
    root = os.path.realpath(table.root)
    for d, _, files in os.walk(os.path.dirname(root)):
        for f in files:
            assert os.path.realpath(os.path.join(d, f)).startswith(root + os.sep), "file outside the table"
    assert table.check().ok
