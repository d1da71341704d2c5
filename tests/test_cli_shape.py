"""The shape rules of the developers' guide and issue 13, checked on the source itself: no
function in ``tokenplan.cli`` is longer than 40 lines and no module under ``tokenplan`` longer
than 400 lines.

A module's length is counted on the formatted source (``ruff format``, line length 120, checked by
``.ci/run``). A CLI function's length is its body: from the first statement (the docstring
included) through its last line (``ast``'s ``end_lineno``). The signature is left out because the
formatter writes a typer command's options one per line, so a command with 30 options would pass
40 lines before its first statement.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "tokenplan"
MAX_FUNCTION_LINES = 40
MAX_MODULE_LINES = 400


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def function_lengths(path: Path) -> dict[str, int]:
    """``{"name@line": lines}`` for every function and method in ``path``, nested ones included."""
    lengths = {}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0].lineno
            lengths[f"{node.name}@{node.lineno}"] = node.end_lineno - first + 1
    return lengths


def test_the_length_rule_counts_the_body_from_its_first_statement(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        '@app.command("x")\ndef f(\n    a: int,\n) -> None:\n    """Doc."""\n    return None\n\n\n'
        "def g():\n    def inner():\n        pass\n",
        encoding="utf-8",
    )
    # f's body: docstring (line 5) and return (line 6) = 2 lines; g's body: inner's def and pass
    # (lines 10-11) = 2; inner's body: pass = 1
    assert function_lengths(sample) == {"f@2": 2, "g@9": 2, "inner@10": 1}


def test_no_cli_function_is_longer_than_40_lines() -> None:
    long = {
        f"{path.relative_to(PACKAGE)}:{name}": n
        for path in sorted((PACKAGE / "cli").rglob("*.py"))
        for name, n in function_lengths(path).items()
        if n > MAX_FUNCTION_LINES
    }
    assert long == {}


def test_no_module_is_longer_than_400_lines() -> None:
    long = {
        str(p.relative_to(PACKAGE)): n for p in sorted(PACKAGE.rglob("*.py")) if (n := _lines(p)) > MAX_MODULE_LINES
    }
    assert long == {}
