"""README.md's Spark examples run as written: every python block in README order (the engine blocks too, which
build the tables the Spark blocks use), in a fresh warehouse, on the tests' session (``local_session()`` in the
README returns it: SparkSession.builder.getOrCreate). Rules: tests/test_readme_examples.py."""
from __future__ import annotations

import tempfile

import pytest

from tests.test_readme_examples import python_blocks, run_python_block

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_spark_examples_run_in_order(spark, tmp_path, monkeypatch):
    monkeypatch.setenv("LAKEMERGE_WAREHOUSE", str(tmp_path / "wh"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the streaming example's sink and checkpoint
    blocks = python_blocks(with_spark=True)
    assert sum(b.uses_spark for b in blocks) >= 2
    namespace: dict = {"__name__": "readme"}
    for block in blocks:
        run_python_block(block, namespace)
    assert namespace["spark"] is spark
    assert str(tmp_path) in namespace["path"] and str(tmp_path) in namespace["events_path"]
    assert namespace["out"].startswith(str(tmp_path)) and namespace["ck"].startswith(str(tmp_path))  # not left in /tmp
