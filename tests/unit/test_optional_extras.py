"""A command that needs an optional extra names it in one line when the extra is missing.

The core install (``pip install tokenplan``) leaves out plotly and matplotlib (extra ``report``)
and scipy (extra ``calibrate``); pyproject.toml lists them. Each test runs the real CLI in a
subprocess whose import system cannot find the extra's package (``sys.modules[name] = None``
makes ``import name`` raise ImportError, exactly as an absent package does).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _cli(blocked: list[str], args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    code = (
        "import sys\n"
        f"for name in {blocked!r}: sys.modules[name] = None\n"
        "from tokenplan.cli import main\n"
        f"sys.argv = ['tokenplan'] + {args!r}\n"
        "main()\n"
    )
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def plan(tmp_path_factory) -> Path:
    """A real plan to render (``plan --gpu 8xb200 --json``, the core install's own CLI), made once."""
    folder = tmp_path_factory.mktemp("plan")
    made = _cli([], ["plan", "--gpu", "8xb200", "--json"], folder)
    assert made.returncode == 0, made.stderr
    json.loads(made.stdout)
    path = folder / "plan.json"
    path.write_text(made.stdout)
    return path


@pytest.mark.slow
def test_report_without_plotly_names_the_report_extra(tmp_path, plan):
    result = _cli(
        ["plotly", "plotly.graph_objects", "plotly.offline"],
        ["report", "--plan", str(plan), "-o", str(tmp_path / "r.html")],
        tmp_path,
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "error: this needs plotly, which the core install leaves out: pip install 'tokenplan[report]' "
        "(in a clone of the repository, as the README installs it: pip install '.[report]')"
    ]
    assert not (tmp_path / "r.html").exists()


@pytest.mark.slow
def test_report_without_plotly_says_so_before_any_warning_about_its_inputs(tmp_path, plan):
    # new-user pass: a run of another model than the plan's printed its warning first, then the
    # extra's line: two lines where the README promises one, and the warning was moot
    run = tmp_path / "run"
    run.mkdir()
    (run / "summary.json").write_text(json.dumps({"model": "another-model"}))
    result = _cli(
        ["plotly", "plotly.graph_objects", "plotly.offline"],
        ["report", str(run), "--plan", str(plan), "-o", "r.html"],
        tmp_path,
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "error: this needs plotly, which the core install leaves out: pip install 'tokenplan[report]' "
        "(in a clone of the repository, as the README installs it: pip install '.[report]')"
    ]


@pytest.mark.parametrize(
    ("blocked", "option", "path"),
    [(["matplotlib", "matplotlib.pyplot"], "--png", "charts"), (["plotly", "plotly.offline"], "--report", "r/p.html")],
)
def test_plan_without_the_report_extra_refuses_before_making_its_folder(tmp_path, blocked, option, path):
    # newuser finding 14: plan --png DIR without matplotlib left DIR created and empty
    result = _cli(blocked, ["plan", "--gpu", "8xb200", option, str(tmp_path / path)], tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].endswith("pip install '.[report]')")
    assert not list(tmp_path.iterdir())


@pytest.mark.slow
def test_calibrate_without_scipy_names_the_calibrate_extra(tmp_path):
    csv = ROOT / "data" / "ground-truth" / "serving-dev.csv"
    result = _cli(["scipy", "scipy.optimize"], ["calibrate", str(csv), "-o", str(tmp_path / "p.json")], tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        "error: this needs scipy, which the core install leaves out: pip install 'tokenplan[calibrate]' "
        "(in a clone of the repository, as the README installs it: pip install '.[calibrate]')"
    )
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "p.json").exists()


def test_python_dash_m_runs_the_cli(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "tokenplan", "--gpuu"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1
    assert "--gpuu" in result.stderr


def test_package_ships_py_typed():
    assert (ROOT / "src" / "tokenplan" / "py.typed").is_file()


def test_generate_backend_ray_without_ray_makes_no_run_directory(tmp_path):
    # newuser finding 14: generate --out g4 --backend ray without Ray left an empty g4/
    (tmp_path / "in.jsonl").write_text('{"messages": [{"role": "user", "content": "hi"}]}\n')
    args = ["generate", "in.jsonl", "--out", "g4", "--endpoint", "http://127.0.0.1:9/v1", "--model", "m"]
    result = _cli(["ray"], [*args, "--backend", "ray"], tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        "error: --backend 'ray' is not allowed (allowed: local, or ray after `pip install 'tokenplan[ray]'` "
        "(Ray is not installed))"
    )
    assert not (tmp_path / "g4").exists()
