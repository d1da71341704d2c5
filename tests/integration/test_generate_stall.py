"""An endpoint that stops answering mid-run (its process stopped with SIGSTOP: connections stay
open, nothing answers) is found by the stall probe and its requests are sent to the other one,
long before their deadline (:mod:`tokenplan.client.stall`)."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest
from tests.support.fault_server import FaultServerProcess
from tests.support.readiness import wait_for_stored

from tokenplan.api.generate import GenerateRequest, generate
from tokenplan.runner.store.appendlog import iter_records, shard_paths


class _Thread:
    """A generate call in a thread, read as a process by ``wait_for_stored`` (``poll``)."""

    def __init__(self, request: GenerateRequest):
        self.result: object = None
        self.thread = threading.Thread(target=self._run, args=(request,), daemon=True)
        self.thread.start()

    def _run(self, request: GenerateRequest) -> None:
        try:
            self.result = generate(request)
        except BaseException as problem:  # noqa: BLE001 - handed to the test to assert on
            self.result = problem

    def poll(self) -> int | None:
        return None if self.thread.is_alive() else 0

    returncode = 0


@pytest.mark.slow
def test_a_frozen_endpoints_requests_go_to_the_other_one_before_their_deadline(tmp_path: Path) -> None:
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps({"id": f"r{i}", "prompt": f"p{i}"}) + "\n" for i in range(40)))
    with (
        FaultServerProcess(str(tmp_path), delay_s=0.2) as live,
        FaultServerProcess(str(tmp_path), delay_s=0.2) as frozen,
    ):
        request = GenerateRequest.build(
            inputs=[str(data)],
            out_dir=tmp_path / "run",
            endpoints=[live.url, frozen.url],
            model="fault-model",
            max_tokens=8,
            concurrency=4,
            deadline_s=600.0,  # the request deadline the watch does not wait for
            stall_probe_after_s=1.0,
            probe_interval_s=0.2,
            retry_base_delay_s=0.01,
        )
        started = time.monotonic()
        run = _Thread(request)
        wait_for_stored(tmp_path / "run", 4, run)  # both endpoints are answering
        os.kill(frozen.proc.pid, signal.SIGSTOP)
        try:
            # quiet 1 s, then GET /models fails at the 10 s health deadline: the frozen endpoint's
            # requests go to the live one, and the run ends within seconds; without the watch
            # they wait for the 600 s request deadline (checked: still running after 90 s)
            run.thread.join(timeout=90)
            finished, took_s = not run.thread.is_alive(), time.monotonic() - started
        finally:
            os.kill(frozen.proc.pid, signal.SIGCONT)
        run.thread.join(timeout=120)
    assert finished, f"still running after {took_s:.0f} s"
    result = run.result
    assert not isinstance(result, BaseException), result
    # every unit stored once: 40 rows, no duplicate record
    ids = [record["id"] for shard in shard_paths(tmp_path / "run" / "shards") for _, record in iter_records(shard)]
    assert sorted(ids) == sorted(f"r{i}" for i in range(40))
    assert (result.stored, result.errors, result.accounting_ok) == (40, 0, True)
    # the frozen endpoint's requests in flight when it stopped (4, its concurrency) failed there
    # and were answered by the live one
    served = {e["endpoint"]: e for e in result.summary["this_invocation"]["endpoints"]}
    assert served[frozen.url]["requests_failed"] == 4
    assert sum(e["requests_answered"] for e in served.values()) == 40


@pytest.mark.slow
def test_a_slow_live_server_at_full_concurrency_is_left_alone(tmp_path: Path) -> None:
    # a second break-it pass: every connection of the endpoint's pool was busy with a chat request,
    # so the probe waited for one, ran out its 10 s and a live server was taken out, its answers
    # thrown away, again and again; the pool keeps one connection beyond the requests in flight
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps({"id": f"r{i}", "prompt": f"p{i}"}) + "\n" for i in range(2)))
    # each answer takes 13 s: longer than the 1 s quiet time and the probe's 10 s deadline together
    with FaultServerProcess(str(tmp_path), delay_s=13.0) as slow:
        result = generate(
            GenerateRequest.build(
                inputs=[str(data)],
                out_dir=tmp_path / "run",
                endpoints=[slow.url],
                model="fault-model",
                max_tokens=8,
                concurrency=2,  # every chat connection busy for 13 s, probed after 1 s quiet
                deadline_s=600.0,
                stall_probe_after_s=1.0,
                probe_interval_s=0.2,
            )
        )
    assert (result.stored, result.errors, result.accounting_ok) == (2, 0, True)
    (served,) = result.summary["this_invocation"]["endpoints"]
    assert (served["requests_answered"], served["requests_failed"]) == (2, 0)
