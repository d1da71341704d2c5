"""The engines layer's floor is enforced: below perf, and under the "physics and planning do no
I/O" contract. Each case copies src/tokenplan and pyproject.toml (the contracts) to a temporary
directory, adds one deliberate import there and runs ``lint-imports`` on the copy; the worktree
is never touched (the same method as tests/test_import_contracts.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def _lint(copy: Path) -> subprocess.CompletedProcess[str]:
    script = Path(sys.executable).with_name("lint-imports")
    exe = str(script) if script.is_file() else shutil.which("lint-imports")
    if exe is None:
        pytest.skip("import-linter is not installed (pip install import-linter)")
    env = {**os.environ, "PYTHONPATH": str(copy / "src")}
    return subprocess.run([exe, "--no-cache"], cwd=copy, env=env, capture_output=True, text=True, timeout=120)


def _copy_with(tmp_path: Path, module: str, line: str) -> Path:
    shutil.copytree(
        ROOT / "src" / "tokenplan",
        tmp_path / "src" / "tokenplan",
        ignore=shutil.ignore_patterns("__pycache__", "*.json", "*.yaml"),
    )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    path = tmp_path / "src" / "tokenplan" / "engines" / module
    path.write_text(path.read_text(encoding="utf-8") + f"\n{line}  # deliberate, for the test\n", encoding="utf-8")
    return tmp_path


def test_an_engine_importing_the_performance_model_fails(tmp_path: Path) -> None:
    proc = _lint(_copy_with(tmp_path, "vllm.py", "import tokenplan.perf.memory"))
    assert proc.returncode != 0
    assert "Every top-level module: one-way layers BROKEN" in proc.stdout
    assert "tokenplan.engines.vllm -> tokenplan.perf.memory" in proc.stdout


def test_an_engine_reading_the_catalog_fails(tmp_path: Path) -> None:
    proc = _lint(_copy_with(tmp_path, "base.py", "import tokenplan.catalog"))
    assert proc.returncode != 0
    assert "The physics and planning do no I/O and draw nothing BROKEN" in proc.stdout
    assert "tokenplan.engines.base -> tokenplan.catalog" in proc.stdout
