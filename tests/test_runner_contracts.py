"""The runner's partitions hold: each case copies the package and the contracts, makes one
deliberate import there and runs ``lint-imports`` on the copy (as tests/test_import_contracts.py
does); the worktree itself is never touched."""

from __future__ import annotations

from pathlib import Path

from tests.test_import_contracts import _append, _run, copy  # noqa: F401 - copy is a fixture

RUNNER_LAYERS = "The runner: backend selector over the backends, over sending, over input and store"


def _said(tree: Path) -> str:
    """lint-imports' report on the copy, its wrapped lines joined (it wraps long contract names)."""
    proc = _run(tree)
    assert proc.returncode != 0, proc.stdout
    return " ".join(proc.stdout.split())


def test_the_store_importing_the_input_fails(copy: Path) -> None:  # noqa: F811 - the fixture
    _append(copy / "src/tokenplan/runner/store/rundir.py", "import tokenplan.runner.input.rows")
    said = _said(copy)
    assert f"{RUNNER_LAYERS} BROKEN" in said
    assert "tokenplan.runner.store.rundir -> tokenplan.runner.input.rows" in said


def test_the_local_backend_importing_the_ray_backend_fails(copy: Path) -> None:  # noqa: F811
    _append(copy / "src/tokenplan/runner/local.py", "import tokenplan.runner.ray.work")
    said = _said(copy)
    assert "runner.ray is imported only by the backend selector BROKEN" in said
    assert "tokenplan.runner.local -> tokenplan.runner.ray.work" in said


def test_a_run_spec_that_imports_its_backend_fails(copy: Path) -> None:  # noqa: F811
    # the circle this layout opened (backend -> local -> backend) may not close again
    _append(copy / "src/tokenplan/runner/spec.py", "import tokenplan.runner.backend")
    said = _said(copy)
    assert f"{RUNNER_LAYERS} BROKEN" in said
    assert "tokenplan.runner.spec -> tokenplan.runner.backend" in said


def test_ray_imported_outside_the_driver_fails(copy: Path) -> None:  # noqa: F811
    _append(copy / "src/tokenplan/runner/ray/actor.py", "import ray")
    said = _said(copy)
    assert "Ray is imported by the Ray driver only (the core install runs without it) BROKEN" in said
    assert "tokenplan.runner.ray.actor -> ray" in said
