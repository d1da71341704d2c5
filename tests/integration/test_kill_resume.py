"""Exactly once under ``kill -9``: SIGKILL the runner at random moments, restart the server mid-run,
then finish; every input id must be stored exactly once with the answer the server gives for it.

The fault server's answer is a pure function of the request (``reply-`` + 12 hex digits of
SHA-256 over the messages JSON, tests/support/fault_server.py), so every stored turn can be
recomputed here from the conversation stored before it.
"""

from __future__ import annotations

import hashlib
import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.support.fault_server import FaultServerProcess
from tests.support.readiness import wait_for_stored

pytestmark = pytest.mark.slow

RUNNER = """
import json, sys
from tokenplan.api.generate import GenerateRequest, generate
result = generate(GenerateRequest.build(**json.loads(sys.argv[1])))
print(json.dumps({"stored": result.stored, "interrupted": result.interrupted, "ok": result.accounting_ok}))
"""

ROWS = 3000
KILLS = 12


def _input(path: Path) -> Path:
    rng = random.Random(7)
    with path.open("w") as fh:
        for i in range(ROWS):
            if i % 3 == 0:  # two user turns → two requests, the second over the first answer
                fh.write(
                    json.dumps(
                        {
                            "id": f"c{i}",
                            "conversations": [
                                {"role": "user", "content": f"q{i} " + "x" * rng.randint(0, 400)},
                                {"role": "assistant", "content": "old"},
                                {"role": "user", "content": f"again {i}"},
                            ],
                        }
                    )
                    + "\n"
                )
            else:
                fh.write(json.dumps({"id": f"p{i}", "prompt": f"prompt {i} " + "y" * rng.randint(0, 2000)}) + "\n")
    return path


def _expected_reply(messages: list[dict]) -> str:
    prompt = [{"role": m["role"], "content": m["content"]} for m in messages]
    return "reply-" + hashlib.sha256(json.dumps(prompt, sort_keys=True).encode()).hexdigest()[:12]


def _start(options: dict) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", RUNNER, json.dumps(options)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def test_sigkill_at_random_moments_stores_every_id_exactly_once(tmp_path: Path) -> None:
    data = _input(tmp_path / "in.jsonl")
    rng = random.Random(2024)
    with FaultServerProcess(str(tmp_path), p500=0.03, p429=0.03, pdrop=0.02, delay_s=0.05, tokens=8) as server:
        options = {
            "inputs": [str(data)],
            "out_dir": str(tmp_path / "run"),
            "endpoints": [server.url],
            "model": "fault-model",
            "concurrency": 8,
            "max_attempts": 30,
            "retry_base_delay_s": 0.01,
            "probe_interval_s": 0.2,
            "shard_max_bytes": 200_000,
        }
        kill_times_s: list[float] = []
        stored_after_kill: list[int] = []
        for k in range(KILLS):
            proc = _start(options)
            # Kill at a random moment after this run stored its first record (imports and start-up
            # take from 0.7 s to several seconds on a loaded machine): every kill lands mid-run.
            wait_for_stored(tmp_path / "run", _lines(tmp_path / "run") if k else 0, proc)
            delay_s = rng.uniform(0.0, 0.6)
            if k == KILLS // 2:
                time.sleep(delay_s / 2)
                server.restart()  # the server dies and comes back while the runner is sending
                time.sleep(delay_s / 2)
            else:
                time.sleep(delay_s)
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            kill_times_s.append(round(delay_s, 2))
            stored_after_kill.append(_lines(tmp_path / "run"))
        finished = _start({**options, "concurrency": 64})  # not part of the job's identity
        out, err = finished.communicate(timeout=240)
    assert finished.returncode == 0, err
    assert json.loads(out.strip().splitlines()[-1]) == {"stored": ROWS, "interrupted": False, "ok": True}
    # Every kill landed while units were still missing, and the runs between kills made progress.
    assert stored_after_kill[-1] < ROWS and stored_after_kill[0] < stored_after_kill[-1], stored_after_kill

    seen: dict[str, int] = {}
    for shard in sorted((tmp_path / "run" / "shards").glob("part-*.jsonl")):
        for line in shard.read_text().splitlines():
            record = json.loads(line)
            seen[record["id"]] = seen.get(record["id"], 0) + 1
            conversation = record["conversations"]
            for i, message in enumerate(conversation):
                if message["role"] == "assistant":
                    assert message["content"] == _expected_reply(conversation[:i]), record["id"]
    expected_ids = {f"c{i}" if i % 3 == 0 else f"p{i}" for i in range(ROWS)}
    assert set(seen) == expected_ids, f"kills at {kill_times_s} s"
    assert all(count == 1 for count in seen.values()), f"kills at {kill_times_s} s"
    assert len(list((tmp_path / "run" / "shards").glob("part-*.jsonl"))) > 1  # rotation happened
    assert not (tmp_path / "run" / "errors.jsonl").read_text()


def test_sigterm_stops_sending_and_the_rerun_finishes_exactly_once(tmp_path: Path) -> None:
    data = _input(tmp_path / "in.jsonl")
    with FaultServerProcess(str(tmp_path), delay_s=0.05, tokens=8) as server:
        options = {
            "inputs": [str(data)],
            "out_dir": str(tmp_path / "run"),
            "endpoints": [server.url],
            "model": "fault-model",
            "concurrency": 8,
            "grace_s": 5,
        }
        proc = _start(options)
        wait_for_stored(tmp_path / "run", 0, proc)  # its handlers are installed once it stores
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        first = json.loads(out.strip().splitlines()[-1])
        assert first["interrupted"] and 0 < first["stored"] < ROWS
        finished = _start({**options, "concurrency": 64})
        out, err = finished.communicate(timeout=240)
    assert json.loads(out.strip().splitlines()[-1]) == {"stored": ROWS, "interrupted": False, "ok": True}
    ids = [
        json.loads(line)["id"]
        for shard in sorted((tmp_path / "run" / "shards").glob("*.jsonl"))
        for line in shard.read_text().splitlines()
    ]
    assert len(ids) == len(set(ids)) == ROWS


def _lines(run_dir: Path) -> int:
    """Complete lines in the shards (a torn last line is not counted)."""
    return sum(p.read_bytes().count(b"\n") for p in (run_dir / "shards").glob("part-*.jsonl"))
