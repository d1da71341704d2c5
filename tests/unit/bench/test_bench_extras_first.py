"""``bench --plot`` / ``--fit`` without their optional extra are refused before the sweep
(newuser finding 7: the sweep ran, then the plot failed, and without ``--save`` the measurements
were lost). The endpoint here answers nothing (port 9, discard): before the fix the first error
was the unreachable server, after it the missing extra, because that check comes first.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

UNREACHABLE = "http://127.0.0.1:9/v1"


def _bench(blocked: list[str], *args: str, cwd) -> subprocess.CompletedProcess:
    code = (
        "import sys\n"
        f"for name in {blocked!r}: sys.modules[name] = None\n"  # as if the package were not installed
        "from tokenplan.cli import main\n"
        "main()\n"
    )
    common = ["bench", "--endpoint", UNREACHABLE, "--model", "m", "--concurrency", "1", "--num-prompts", "2"]
    return subprocess.run(
        [sys.executable, "-c", code, *common, *args], capture_output=True, text=True, timeout=300, cwd=cwd, check=False
    )


@pytest.mark.parametrize(
    ("blocked", "args", "extra"),
    [
        (["matplotlib", "matplotlib.pyplot"], ["--plot", "x.png"], "pip install '.[report]')"),
        (
            ["scipy", "scipy.optimize"],
            ["--fit", "-o", "p.json", "--config", "llama-3.1-8b", "--gpu", "h100-sxm"],
            "pip install '.[calibrate]')",
        ),
    ],
)
def test_a_missing_extra_is_refused_before_anything_is_sent(tmp_path, blocked, args, extra):
    done = _bench(blocked, *args, cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    # the line names the extra (pip install 'tokenplan[…]') and ends with the clone's spelling of it
    assert len(lines) == 1 and lines[0].startswith("error: this needs ") and lines[0].endswith(extra)
    assert extra.replace("'.[", "'tokenplan[").removesuffix(")") in lines[0]
    assert not list(tmp_path.iterdir())  # no plot, no profile
