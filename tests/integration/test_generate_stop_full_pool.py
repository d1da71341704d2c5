"""Ctrl-C while every slot of the pool is held: the grace starts at the signal, not when a slot
frees (a break-it pass: a 1 s grace took 17 s against 20 s answers, and up to 600 s with every
endpoint ejected, until the dispatcher got a slot back and saw the stop)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from tests.support.fault_jobs import prompts
from tests.support.fault_server import FaultServerProcess
from tests.support.readiness import interrupt_when_logged

CLI = [sys.executable, "-c", "from tokenplan.cli import main; main()", "generate"]


@pytest.mark.slow
def test_ctrl_c_with_every_slot_held_by_a_slow_answer_stops_within_the_grace(tmp_path: Path) -> None:
    prompts(tmp_path / "in.jsonl", 5)
    log = tmp_path / "bodies.jsonl"
    with FaultServerProcess(str(tmp_path), delay_s=60, log_bodies=str(log)) as server:
        command = [*CLI, str(tmp_path / "in.jsonl"), "--out", str(tmp_path / "run"), "--endpoint", server.url]
        command += ["--model", "fault-model", "--max-tokens", "16", "--concurrency", "1", "--grace-s", "1"]
        # SIGINT once the one slot's request is out
        returncode, err, took_s = interrupt_when_logged(command, log, lambda text: text.endswith("\n"), timeout_s=90)
    assert returncode == 130 and "Traceback" not in err, err
    assert took_s < 15, took_s  # the 1 s grace and the shutdown, not the answer's 60 s
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["interrupted"] is True and summary["stored"] == 0, summary
