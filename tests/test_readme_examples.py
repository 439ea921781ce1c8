"""README.md's examples run as written (what a data engineer copies must work).

Rules the README follows so its blocks can be run here:
- ```python blocks run in README order in one namespace, in a fresh warehouse: the tour opens
  ``Catalog(os.environ.get("LAKEMERGE_WAREHOUSE", "/tmp/wh"))`` and the test sets LAKEMERGE_WAREHOUSE. A block that
  uses Spark (mentions ``spark``) runs only in tests/spark/test_readme_spark_examples.py.
- An expression statement whose last line ends in ``# -> LITERAL`` is checked: its value (``to_pylist()`` when it
  has one) must equal the literal.
- ```bash blocks run line by line in a temporary directory: ``lakemerge ...`` through click's CliRunner, ``export
  LAKEMERGE_WAREHOUSE=...`` is replaced by the test's warehouse, any other line goes to ``bash -c``; every line must
  exit 0. Blocks without a language are output listings and are not run.
- A block preceded by ``<!-- not run: REASON -->`` is skipped, and the reason is reported.
"""
from __future__ import annotations

import ast
import io
import os
import re
import shlex
import subprocess
import tokenize
from dataclasses import dataclass

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
_NOT_RUN = re.compile(r"<!--\s*not run:\s*(.+?)\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    line: int           # README line of the opening fence
    lang: str
    code: str
    section: str        # the enclosing "## " heading ("" before the first)
    not_run: str | None  # the reason of a preceding <!-- not run: ... --> marker

    @property
    def uses_spark(self) -> bool:
        return re.search(r"\bspark", self.code) is not None


def readme_blocks(path: str = README) -> list[Block]:
    """Every fenced block of the README, in order."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    blocks = []
    for m in _FENCE.finditer(text):
        before = text[:m.start()]
        line = before.count("\n") + 1
        headings = re.findall(r"^## (.+)$", before, re.M)
        previous = before.rstrip("\n").rsplit("\n", 1)[-1]
        marker = _NOT_RUN.search(previous)
        blocks.append(Block(line, m.group(1), m.group(2), headings[-1] if headings else "",
                            marker.group(1) if marker else None))
    return blocks


def python_blocks(with_spark: bool) -> list[Block]:
    """The runnable python blocks in order: all of them with ``with_spark``, else those without Spark."""
    return [b for b in readme_blocks() if b.lang == "python" and b.not_run is None
            and (with_spark or not b.uses_spark)]


def _expected_outputs(code: str) -> dict[int, str]:
    """Line number (1-based, in ``code``) -> the literal text of a trailing ``# -> LITERAL`` comment."""
    out = {}
    for tok in tokenize.generate_tokens(io.StringIO(code).readline):
        if tok.type == tokenize.COMMENT and tok.string.startswith("# ->"):
            out[tok.start[0]] = tok.string[len("# ->"):].strip()
    return out


def run_python_block(block: Block, namespace: dict) -> int:
    """Execute ``block`` statement by statement in ``namespace``; check ``# -> LITERAL`` claims. Returns how many
    claims were checked. A failure names the README line."""
    tree = ast.parse(block.code, filename=f"README.md:{block.line}")
    expected = _expected_outputs(block.code)
    ends = {node.end_lineno for node in tree.body}
    for lineno in expected:
        assert lineno in ends, (f"README.md line {block.line + lineno}: '# ->' is not checked there (it must end a "
                                "top-level expression statement)")
    checked = 0
    for node in tree.body:
        where = f"README.md line {block.line + node.lineno} ({block.section})"
        claim = expected.get(node.end_lineno)
        try:
            if isinstance(node, ast.Expr):
                value = eval(compile(ast.Expression(node.value), where, "eval"), namespace)
            else:
                exec(compile(ast.Module([node], []), where, "exec"), namespace)
                value = None
        except Exception as e:
            raise AssertionError(f"{where}: {ast.get_source_segment(block.code, node)!r} raised "
                                 f"{type(e).__name__}: {e}") from e
        if claim is not None:
            assert isinstance(node, ast.Expr), f"{where}: '# ->' follows a statement, not an expression"
            if hasattr(value, "to_pylist"):
                value = value.to_pylist()
            assert value == ast.literal_eval(claim), f"{where}: the README says {claim}, the code gives {value!r}"
            checked += 1
    return checked


def run_bash_block(block: Block, warehouse: str, cwd: str) -> list[str]:
    """Run ``block`` line by line (see the module docstring); returns the commands run. Fails on a non-zero exit."""
    from click.testing import CliRunner

    from engine.cli import cli

    env = {"LAKEMERGE_WAREHOUSE": warehouse}
    ran = []
    for offset, line in enumerate(block.code.splitlines(), start=1):
        words = shlex.split(line, comments=True)
        if not words:
            continue
        where = f"README.md line {block.line + offset}"
        if words[0] == "export" and all(w.startswith("LAKEMERGE_WAREHOUSE=") for w in words[1:]):
            continue
        if words[0] == "lakemerge":
            result = CliRunner().invoke(cli, words[1:], env=env)
            assert result.exit_code == 0, (f"{where}: {line.strip()!r} exited {result.exit_code}\n{result.output}"
                                           f"{result.exception!r}")
        else:
            proc = subprocess.run(["bash", "-c", line], cwd=cwd, env={**os.environ, **env},
                                  capture_output=True, text=True)
            assert proc.returncode == 0, f"{where}: {line.strip()!r} exited {proc.returncode}\n{proc.stderr}"
        ran.append(words[0] if words[0] != "lakemerge" else " ".join(words[:2]))
    return ran


@pytest.fixture
def readme_warehouse(tmp_path, monkeypatch):
    """A fresh warehouse as LAKEMERGE_WAREHOUSE and a scratch working directory."""
    warehouse = str(tmp_path / "wh")
    monkeypatch.setenv("LAKEMERGE_WAREHOUSE", warehouse)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return warehouse


def test_every_block_is_run_or_marked():
    """Each python/bash block is run by one of the README tests or carries a not-run marker with a reason."""
    for b in readme_blocks():
        assert b.lang in ("python", "bash", ""), f"README.md line {b.line}: unknown block language {b.lang!r}"
        if b.lang == "bash" and b.not_run is None:
            assert b.section == "Command line", f"README.md line {b.line}: a bash block outside 'Command line'"
    assert len(python_blocks(with_spark=False)) >= 8 and any(b.uses_spark for b in python_blocks(with_spark=True))


def test_python_examples_run_in_order(readme_warehouse):
    namespace: dict = {"__name__": "readme"}
    checked = sum(run_python_block(b, namespace) for b in python_blocks(with_spark=False))
    assert checked >= 3
    assert namespace["cat"].table_path("shop.orders").startswith(readme_warehouse)


def test_command_line_examples_run(readme_warehouse):
    blocks = [b for b in readme_blocks() if b.lang == "bash" and b.not_run is None]
    assert [b.section for b in blocks] == ["Command line"]
    ran = run_bash_block(blocks[0], readme_warehouse, os.getcwd())
    assert "lakemerge create" in ran and "lakemerge stream" in ran


def test_a_broken_example_fails(tmp_path):
    """The runner really fails: a wrong argument name, and a false '# ->' claim."""
    bad_call = Block(1, "python", "import pyarrow as pa\npa.table({'a': [1]}, colums=['a'])\n", "x", None)
    with pytest.raises(AssertionError, match="README.md line 3"):
        run_python_block(bad_call, {})
    false_claim = Block(1, "python", "[1, 2]  # -> [2, 1]\n", "x", None)
    with pytest.raises(AssertionError, match="the README says"):
        run_python_block(false_claim, {})
    nested_claim = Block(1, "python", "for i in [1]:\n    i  # -> 2\n    i\n", "x", None)  # no statement ends there
    with pytest.raises(AssertionError, match="README.md line 3: '# ->' is not checked"):
        run_python_block(nested_claim, {})
    bad_cli = Block(1, "bash", "lakemerge show --no-such-option x.y\n", "Command line", None)
    with pytest.raises(AssertionError, match="exited 2"):
        run_bash_block(bad_cli, str(tmp_path), str(tmp_path))


def test_install_commands_match_pyproject_and_ci():
    """The README's first block: install + `lakemerge demo`, install + tests, as pyproject.toml and .ci/run have
    them (not run here: they install the package; the lead runs .ci/run)."""
    tomllib = pytest.importorskip("tomllib")
    first = readme_blocks()[0]
    assert first.line <= 5 and first.not_run
    assert first.code.splitlines() == ["pip install -e . && lakemerge demo", "pip install -e '.[test]' && pytest"]
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        project = tomllib.load(f)["project"]
    assert project["scripts"]["lakemerge"] == "engine.cli:main" and "test" in project["optional-dependencies"]
    with open(os.path.join(ROOT, ".ci", "run"), encoding="utf-8") as f:
        ci = f.read().splitlines()
    assert "pip install -q -e '.[test]'" in ci and "pytest" in ci
