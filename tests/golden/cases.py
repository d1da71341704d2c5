"""The README's ``--json`` examples whose output is deterministic and fast, and how to run them.

Each case is a name (the output's, as a file would be called) and the arguments after
``tokenplan``. ``test_readme_json.py`` reads each output back into its type and checks its figures
against relations derived by hand (issue 27 replaced the byte-for-byte copies of these outputs).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE.parent.parent / "src"

# file name → arguments; each is a command the README shows (section named in the comment).
CASES: dict[str, list[str]] = {
    # "## Quick start" / "Every figure below is what `tokenplan plan --json`": the default job.
    "plan_default.json": ["plan", "--json"],
    # "## Report": the default job on two GPU options.
    "plan_8xb200_8xh200.json": ["plan", "--gpu", "8xb200", "--gpu", "8xh200", "--json"],
    # "## Commands": one configuration.
    "predict_qwen_b200_fp8.json": [
        "predict",
        "--model",
        "qwen3.6-27b",
        "--gpu",
        "b200",
        "--tp",
        "1",
        "--weight-dtype",
        "fp8",
        "--kv-dtype",
        "fp8",
        "--isl",
        "8192",
        "--osl",
        "1024",
        "--concurrency",
        "1024",
        "--spec",
        "none",
        "--engine",
        "sglang",
        "--json",
    ],
    # "## Commands": memory of DeepSeek-R1 on 8× H200.
    "memory_deepseek_r1_8xh200.json": [
        "memory",
        "--model",
        "deepseek-r1",
        "--gpu",
        "h200",
        "--num-gpus",
        "8",
        "--tp",
        "8",
        "--weight-dtype",
        "fp8",
        "--isl",
        "1024",
        "--osl",
        "1024",
        "--isl-sigma",
        "0",
        "--osl-sigma",
        "0",
        "--json",
    ],
    # Memory of the default model on one B200 in FP8 (the README's default plan's GPU and format).
    "memory_qwen_b200_fp8.json": [
        "memory",
        "--model",
        "qwen3.6-27b",
        "--gpu",
        "b200",
        "--weight-dtype",
        "fp8",
        "--json",
    ],
}


def run_case(args: list[str], cwd: Path) -> str:
    """Run ``tokenplan ARGS`` as a user would (a fresh process on this checkout's ``src``).

    Args:
        args: the arguments after ``tokenplan``.
        cwd: an empty directory, so no job or calibration file lying around changes the answer.

    Returns:
        The command's stdout, exactly as printed.

    Raises:
        AssertionError: the command exits non-zero (its stderr in the message).
    """
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    proc = subprocess.run(
        [sys.executable, "-c", "from tokenplan.cli import main; main()", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, f"tokenplan {' '.join(args)} exited {proc.returncode}: {proc.stderr}"
    return proc.stdout
