"""Output paths that cannot be written fail before any work, as one ``error:`` line and exit 2
(a new-user trial found tracebacks for each of these)."""

from __future__ import annotations

import subprocess
import sys

import pytest

CMD = [sys.executable, "-c", "from tokenplan.cli import main; main()"]


def _cases(tmp_path):
    folder = tmp_path / "a-folder"
    folder.mkdir()
    a_file = tmp_path / "a-file"
    a_file.write_text("x", encoding="utf-8")
    return {
        "report_is_a_folder": (["plan", "--report", str(folder)], "this path is a directory"),
        "report_empty": (["plan", "--report", ""], "--report '' is not allowed"),
        "report_under_proc": (["plan", "--report", "/proc/no-such/x.html"], "--report"),
        "png_is_a_file": (["plan", "--png", str(a_file)], "this path is an existing file"),
        "png_empty": (["plan", "--png", ""], "--png '' is not allowed"),
        "report_cmd_out_is_a_folder": (["report", "-o", str(folder)], "this path is a directory"),
        "disk_full": (["plan", "--report", "/dev/full"], "No space left on device"),
    }


@pytest.mark.parametrize(
    "case",
    [
        "report_is_a_folder",
        "report_empty",
        "report_under_proc",
        "png_is_a_file",
        "png_empty",
        "report_cmd_out_is_a_folder",
        "disk_full",
    ],
)
def test_an_output_path_that_cannot_be_written_is_one_line(case, tmp_path):
    args, needle = _cases(tmp_path)[case]
    if case == "disk_full" and not __import__("os").path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    done = subprocess.run(CMD + args, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], done.stderr
    assert "Traceback" not in done.stderr
