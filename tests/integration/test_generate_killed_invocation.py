"""A run's figures keep an invocation killed with ``kill -9``: it left its figures so far in
``invocation.current.json``, and the next invocation appends them to ``invocations.jsonl`` as
``"ended": "killed"`` (runner/store/invocations.py). Before, a killed invocation's time, requests
and tokens were missing from ``summary.json`` and from ``calibrate --from-run``."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from tests.support.fault_jobs import prompts
from tests.support.fault_server import FaultServerProcess
from tests.support.readiness import wait_for_file

RUNNER = """
import json, sys
from tokenplan.api.generate import GenerateRequest, generate
result = generate(GenerateRequest.build(**json.loads(sys.argv[1])))
print(json.dumps({"notes": result.notes, "summary": result.summary}))
"""


def _start(options: dict) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", RUNNER, json.dumps(options)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def test_a_killed_invocations_figures_are_counted_by_the_next_one(tmp_path: Path) -> None:
    prompts(tmp_path / "in.jsonl", 400)
    run = tmp_path / "run"
    # 400 rows at 4 in flight, 0.05 s an answer: about 5 s, so the kill lands mid-run.
    with FaultServerProcess(str(tmp_path), delay_s=0.05, tokens=8) as server:
        options = {
            "inputs": [str(tmp_path / "in.jsonl")],
            "out_dir": str(run),
            "endpoints": [server.url],
            "model": "fault-model",
            "concurrency": 4,
        }
        proc = _start(options)
        wait_for_file(run / "invocation.current.json", proc)  # written after its first answer
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        checkpoint = json.loads((run / "invocation.current.json").read_text())
        finished = _start(options)
        out, err = finished.communicate(timeout=240)
    assert finished.returncode == 0, err
    result = json.loads(out.strip().splitlines()[-1])
    lines = [json.loads(line) for line in (run / "invocations.jsonl").read_text().splitlines()]
    # One line for the killed invocation (its checkpoint, marked killed), one for the finished one.
    assert [line.get("ended") for line in lines] == ["killed", None]
    assert lines[0] == {**checkpoint, "ended": "killed"} and checkpoint["requests"] >= 1
    assert lines[0]["invocation"] != lines[1]["invocation"]
    # Each answer is 8 tokens: the killed invocation's requests × 8 are its tokens, and the run's
    # totals are the two lines added up.
    assert checkpoint["output_tokens"] == 8 * checkpoint["requests"]
    summary = result["summary"]
    assert summary["invocations"] == 2
    # both kept 4 in flight on their one endpoint: the run's own concurrency, which calibrate
    # --from-run takes where --concurrency is not given (the killed one's from its checkpoint)
    assert checkpoint["requests_in_flight"] == 4 and summary["requests_in_flight"] == 4
    assert summary["requests"] == checkpoint["requests"] + summary["this_invocation"]["requests"]
    assert summary["output_tokens"] == 8 * summary["requests"]
    assert not (run / "invocation.current.json").exists()
    assert any(
        n.startswith("an earlier invocation ended without writing its figures (killed)") for n in result["notes"]
    )


def test_a_run_that_stops_on_an_error_writes_its_own_line_not_a_killed_one(tmp_path: Path) -> None:
    # Endpoint A answers, endpoint B refuses seed: the run stops on B's job-wide refusal after A
    # answered some rows. Its line is appended before the directory's lock is released (a
    # break-it pass found its checkpoint counted as "killed" by the next run, and a racing second
    # run counting a live invocation twice), and no checkpoint is left behind.
    import pytest

    from tokenplan.api.generate import GenerateRequest, generate
    from tokenplan.errors import ServerError

    prompts(tmp_path / "in.jsonl", 200)
    run = tmp_path / "run"
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with (
        FaultServerProcess(str(tmp_path / "a"), delay_s=0.05) as good,
        FaultServerProcess(str(tmp_path / "b"), reject_seed=1) as bad,
    ):
        request = GenerateRequest.build(
            inputs=[str(tmp_path / "in.jsonl")], out_dir=str(run), endpoints=[good.url, bad.url], model="fault-model"
        )
        with pytest.raises(ServerError, match="rows in a row with 400"):
            generate(request)
    stored = sum(shard.read_text().count("\n") for shard in (run / "shards").glob("*.jsonl"))
    lines = [json.loads(line) for line in (run / "invocations.jsonl").read_text().splitlines()]
    assert len(lines) == 1 and "ended" not in lines[0] and lines[0]["requests"] >= stored > 0
    assert not (run / "invocation.current.json").exists()


def test_a_damaged_or_impossible_checkpoint_is_dropped_not_counted(tmp_path: Path) -> None:
    # A hand-edited checkpoint with nan or negative figures made every later summary fail (nan)
    # or report negative tok/s: such a checkpoint, or such a line, counts as damaged.
    from tokenplan.runner.store.invocations import recover_killed, run_totals

    bad = [
        {"invocation": "a", "elapsed_s": float("nan"), "requests": 5, "output_tokens": 10},
        {"invocation": "b", "elapsed_s": 2.0, "requests": -500, "output_tokens": 10},
        {"invocation": "c", "elapsed_s": 2.0, "requests": 5, "output_tokens": -1e9},
        {"invocation": "d", "elapsed_s": "2", "requests": 5, "output_tokens": 10},
    ]
    for entry in bad:
        (tmp_path / "invocation.current.json").write_text(json.dumps(entry))
        assert recover_killed(tmp_path) is None and not (tmp_path / "invocation.current.json").exists()
    good = {"invocation": "e", "elapsed_s": 2.0, "requests": 5, "output_tokens": 40}
    lines = [json.dumps(e) for e in bad] + [json.dumps(good)]
    (tmp_path / "invocations.jsonl").write_text("\n".join(lines) + "\n")
    totals = run_totals(tmp_path)
    assert (totals.invocations, totals.requests, totals.output_tokens, totals.elapsed_s) == (1, 5, 40, 2.0)
