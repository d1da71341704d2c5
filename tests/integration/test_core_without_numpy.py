"""The core install runs without numpy: numpy comes only with the ``calibrate`` extra.

Each command runs as the real CLI in a subprocess whose import system cannot find numpy
(``sys.modules["numpy"] = None`` makes ``import numpy`` raise ImportError, exactly as an absent
package does): ``plan``, ``validate``, ``generate`` (a first run, then a resume over the stored
records, whose id set sorts with pyarrow) and ``bench`` against the simulated engine, and
``calibrate``, which names its extra in one line.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from tests.support.sim_server import SimServerProcess

ROOT = Path(__file__).resolve().parents[2]
NO_NUMPY = "import sys\nsys.modules['numpy'] = None\nfrom tokenplan.cli import main\n"


def _cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    code = f"{NO_NUMPY}sys.argv = ['tokenplan'] + {args!r}\nmain()\n"
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=600)


def test_plan_and_validate_run_without_numpy(tmp_path: Path) -> None:
    plan = _cli(["plan", "--gpu", "8xb200", "--json"], tmp_path)
    assert plan.returncode == 0, plan.stderr
    assert json.loads(plan.stdout)["recommended"]
    checked = _cli(["validate", str(ROOT / "data" / "ground-truth" / "serving-dev.csv")], tmp_path)
    assert checked.returncode == 0, checked.stderr
    assert "Traceback" not in checked.stderr


@pytest.mark.slow
def test_generate_resume_and_bench_run_without_numpy(tmp_path: Path) -> None:
    rows = tmp_path / "in.jsonl"
    rows.write_text(
        "".join(
            json.dumps({"id": f"r{i}", "messages": [{"role": "user", "content": f"hi {i}"}]}) + "\n" for i in range(40)
        )
    )
    with SimServerProcess(str(tmp_path), a_ms=1.0, b_ms=0.01, cap=16) as server:
        common = ["generate", str(rows), "--endpoint", server.url, "--model", "sim-model", "--max-tokens", "8"]
        first = _cli([*common, "--out", str(tmp_path / "run"), "--limit", "25"], tmp_path)
        assert first.returncode == 0, first.stderr
        # the resume reads the 25 stored ids into the id set and sends the other 15
        resumed = _cli([*common, "--out", str(tmp_path / "run")], tmp_path)
        assert resumed.returncode == 0, resumed.stderr
        summary = json.loads((tmp_path / "run" / "summary.json").read_text())
        assert (summary["units_total"], summary["stored"], summary["errors"]) == (40, 40, 0)
        sweep = _cli(
            [
                "bench",
                "--endpoint",
                server.url,
                "--model",
                "sim-model",
                "--concurrency",
                "2",
                "--num-prompts",
                "4",
                "--json",
            ],
            tmp_path,
        )
        assert sweep.returncode == 0, sweep.stderr
        assert "Traceback" not in sweep.stderr


@pytest.mark.slow
def test_calibrate_without_numpy_names_the_calibrate_extra(tmp_path: Path) -> None:
    csv = ROOT / "data" / "ground-truth" / "serving-dev.csv"
    result = _cli(["calibrate", str(csv), "-o", str(tmp_path / "p.json")], tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "error: this needs numpy, which the core install leaves out: pip install 'tokenplan[calibrate]' "
        "(in a clone of the repository, as the README installs it: pip install '.[calibrate]')"
    ]
    assert not (tmp_path / "p.json").exists()
