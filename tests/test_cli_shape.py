"""The shape rules of the developers' guide and issue 13, checked on the source itself: no
function in ``tokenplan.cli`` is longer than 40 lines and no module under ``tokenplan`` longer
than 400 lines.

A function's length runs from its first decorator (or its ``def`` line) through its last line
(``ast``'s ``end_lineno``), docstring and signature included.
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
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            lengths[f"{node.name}@{node.lineno}"] = node.end_lineno - first + 1
    return lengths


def test_the_length_rule_counts_decorators_signature_and_body(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text('@app.command("x")\ndef f(\n    a: int,\n) -> None:\n    """Doc."""\n    return None\n\n\n'
                      "def g():\n    def inner():\n        pass\n", encoding="utf-8")
    # f: decorator, def, parameter, ") -> None:", docstring, return = 6 lines; g: 3; inner: 2
    assert function_lengths(sample) == {"f@2": 6, "g@9": 3, "inner@10": 2}


def test_no_cli_function_is_longer_than_40_lines() -> None:
    long = {f"{path.relative_to(PACKAGE)}:{name}": n for path in sorted((PACKAGE / "cli").rglob("*.py"))
            for name, n in function_lengths(path).items() if n > MAX_FUNCTION_LINES}
    assert long == {}


def test_no_module_is_longer_than_400_lines() -> None:
    long = {str(p.relative_to(PACKAGE)): n for p in sorted(PACKAGE.rglob("*.py")) if (n := _lines(p)) > MAX_MODULE_LINES}
    assert long == {}
