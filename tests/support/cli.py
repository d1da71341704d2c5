"""Run the ``tokenplan`` command line in a child process, as a user's shell does, and read its
one-line errors (the project's rule for bad input: one ``error:`` line, exit status 2, no
traceback)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

RUN = "from tokenplan.cli import main; main()"


def tokenplan(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """``tokenplan ARGS`` run in ``cwd`` (stdout, stderr and the exit status kept)."""
    return subprocess.run(
        [sys.executable, "-c", RUN, *args], capture_output=True, text=True, timeout=300, cwd=cwd, check=False
    )


def one_error_line(result: subprocess.CompletedProcess) -> str:
    """The one line a refused command printed (``note:`` lines aside), after checking exit 2 and no traceback."""
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip() and not line.startswith("note:")]
    assert len(lines) == 1, result.stderr
    return lines[0]
