"""``tokenplan generate`` as a user runs it: one-line errors, exit codes, Ctrl-C and resume."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.fault_server import FaultServerProcess

CLI = [sys.executable, "-c", "from tokenplan.cli import main; main()", "generate"]


def _rows(path: Path, n: int) -> Path:
    path.write_text("".join(json.dumps({"id": f"r{i}", "prompt": f"p{i}"}) + "\n" for i in range(n)))
    return path


@pytest.mark.parametrize(("option", "message"), [
    (["--mode", "sideways"], "error: mode 'sideways' is not allowed (allowed: Input should be 'regenerate' or 'complete')"),
    (["--on-length", "truncate"], "error: on_length 'truncate' is not allowed"),
    (["--thinking", "maybe"], "error: thinking 'maybe' is not allowed"),
    (["--extra-body", "[1]"], "error: extra-body '[1]' is not allowed (allowed: a JSON object"),
    (["--concurrency", "0"], "error: concurrency 0 is not allowed"),
])
def test_a_bad_option_is_one_line_naming_it_and_exit_2(tmp_path: Path, option: list[str], message: str) -> None:
    data = _rows(tmp_path / "in.jsonl", 1)
    done = subprocess.run([*CLI, str(data), "--out", str(tmp_path / "run"), "--endpoint", "http://127.0.0.1:9/v1",
                           "--model", "m", *option], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.startswith(message) and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


def test_an_unreachable_endpoint_is_one_line_and_exit_2(tmp_path: Path) -> None:
    data = _rows(tmp_path / "in.jsonl", 1)
    done = subprocess.run([*CLI, str(data), "--out", str(tmp_path / "run"), "--endpoint", "http://127.0.0.1:9/v1",
                           "--model", "m"], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr) == (
        2, "error: no endpoint is ready for model 'm': http://127.0.0.1:9/v1 (transport: ConnectError)\n")


@pytest.mark.slow
def test_ctrl_c_stops_resumably_and_the_same_command_finishes(tmp_path: Path) -> None:
    data = _rows(tmp_path / "in.jsonl", 2000)
    with FaultServerProcess(str(tmp_path), delay_s=0.05) as server:
        command = [*CLI, str(data), "--out", str(tmp_path / "run"), "--endpoint", server.url, "--model", "fault-model",
                   "--concurrency", "4", "--grace-s", "5"]
        first = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(3)
        first.send_signal(signal.SIGINT)
        out, _ = first.communicate(timeout=30)
        assert first.returncode == 130 and "interrupted: rerun the same command to resume" in out
        second = subprocess.run([*command[:-4], "--concurrency", "64"], capture_output=True, text=True, timeout=120)
    assert second.returncode == 0, second.stderr
    assert "2,000 = 2,000 stored + 0 skipped + 0 errors  [ok]" in second.stdout
