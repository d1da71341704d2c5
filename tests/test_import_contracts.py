"""The import-linter contracts in pyproject.toml catch what issue 13 says they must.

Each case copies ``src/tokenplan`` and the contracts to a temporary directory, makes one deliberate
change there and runs ``lint-imports`` on the copy (PYTHONPATH points at it): the unmodified copy
passes, and a cli -> runner import, a cycle between two api command modules (tokenplan.api.*), or
a new top-level module in no layer each fail with the contract that names the rule. The worktree itself is never touched.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _lint_imports() -> list[str]:
    script = Path(sys.executable).with_name("lint-imports")
    if script.is_file():
        return [str(script)]
    found = shutil.which("lint-imports")
    if found is None:
        pytest.skip("import-linter is not installed (pip install import-linter)")
    return [found]


@pytest.fixture()
def copy(tmp_path: Path) -> Path:
    """A copy of the package and pyproject.toml (the contracts) under ``tmp_path``."""
    shutil.copytree(
        ROOT / "src" / "tokenplan",
        tmp_path / "src" / "tokenplan",
        ignore=shutil.ignore_patterns("__pycache__", "*.json", "*.yaml"),
    )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def _run(copy: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(copy / "src")}
    return subprocess.run(
        [*_lint_imports(), "--no-cache"], cwd=copy, env=env, capture_output=True, text=True, timeout=120
    )


def _append(path: Path, line: str) -> None:
    path.write_text(path.read_text(encoding="utf-8") + f"\n{line}  # deliberate, for the test\n", encoding="utf-8")


def test_the_unmodified_copy_keeps_every_contract(copy: Path) -> None:
    proc = _run(copy)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "BROKEN" not in proc.stdout


def test_a_cli_module_importing_the_runner_fails(copy: Path) -> None:
    _append(copy / "src/tokenplan/cli/plan.py", "import tokenplan.runner")
    proc = _run(copy)
    assert proc.returncode != 0
    assert "The CLI does not import the runner" in proc.stdout
    assert "tokenplan.cli.plan -> tokenplan.runner " in proc.stdout


def test_a_cycle_between_two_api_modules_fails(copy: Path) -> None:
    _append(copy / "src/tokenplan/api/plan.py", "import tokenplan.api.report")
    _append(copy / "src/tokenplan/api/report.py", "import tokenplan.api.plan")
    proc = _run(copy)
    assert proc.returncode != 0
    assert "The api command modules do not import one another BROKEN" in proc.stdout
    assert "The api package: commands over their shared helpers BROKEN" in proc.stdout


def test_a_top_level_module_in_no_layer_fails(copy: Path) -> None:
    (copy / "src/tokenplan/stray.py").write_text('"""A module placed in no layer."""\n', encoding="utf-8")
    proc = _run(copy)
    assert proc.returncode != 0
    assert "tokenplan.stray" in proc.stdout


def test_a_cli_module_importing_a_file_format_fails(copy: Path) -> None:
    _append(copy / "src/tokenplan/cli/plan.py", "import tokenplan.files.measurements")
    proc = _run(copy)
    assert proc.returncode != 0
    assert "tokenplan.cli.plan -> tokenplan.files.measurements " in proc.stdout


def test_an_api_module_in_no_layer_fails(copy: Path) -> None:
    (copy / "src/tokenplan/api/stray.py").write_text('"""An api module placed in no layer."""\n', encoding="utf-8")
    proc = _run(copy)
    assert proc.returncode != 0
    assert "tokenplan.api.stray" in proc.stdout
