"""``tokenplan bench --api-key-env VAR`` sends ``Authorization: Bearer $VAR`` with every request.

Against the simulated engine of ``tests/support/sim_server.py`` started with ``--log-headers``: the
server writes down the Authorization header of each request it receives, so the test sees what
arrived — on the chat requests (tokenplan.client) and on the side requests (``/v1/models``,
``/tokenize``, ``/detokenize``, ``/metrics``, ``/get_server_info``: tokenplan.bench.http). A
named variable that is unset is a one-line error with exit status 2, before anything is sent.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.support.sim_server import SimServerProcess  # noqa: E402

from tokenplan.api.bench import BenchRequest, bench  # noqa: E402

KEY = "sk-test-bench-1234"
# Every kind of request one closed-loop level makes on this server (it has /tokenize and /metrics;
# /get_server_info and /server_info answer 404 and are still asked).
EXPECTED_PATHS = {
    "/v1/models",
    "/v1/chat/completions",
    "/tokenize",
    "/detokenize",
    "/metrics",
    "/get_server_info",
    "/server_info",
}


def _log(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from tokenplan.cli import main; main()", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    work = tmp_path_factory.mktemp("sim-auth")
    log = work / "headers.jsonl"
    with SimServerProcess(str(work), a_ms=1.0, b_ms=0.1, cap=8, log_headers=str(log)) as proc:
        yield proc, log


SMALL = (
    "--model",
    "sim-model",
    "--concurrency",
    "2",
    "--num-prompts",
    "4",
    "--warmup",
    "0",
    "--isl",
    "16",
    "--osl",
    "4",
    "--json",
)


def test_every_request_carries_the_bearer_key(server):
    proc, log = server
    log.unlink(missing_ok=True)
    env = {**os.environ, "BENCH_KEY": KEY}
    env.pop("OPENAI_API_KEY", None)
    r = _cli("bench", "--endpoint", proc.url, *SMALL, "--api-key-env", "BENCH_KEY", env=env)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["levels"][0]["errors"] == 0
    requests = _log(log)
    assert {q["path"] for q in requests} == EXPECTED_PATHS
    assert {q["authorization"] for q in requests} == {f"Bearer {KEY}"}
    assert KEY not in r.stdout + r.stderr  # sent, never printed


def test_an_unset_named_variable_is_one_line_exit_2_and_nothing_is_sent(server):
    proc, log = server
    log.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "BENCH_KEY_UNSET"}
    r = _cli("bench", "--endpoint", proc.url, *SMALL, "--api-key-env", "BENCH_KEY_UNSET", env=env)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("error: --api-key-env 'BENCH_KEY_UNSET'")
    assert "Traceback" not in r.stderr and r.stdout == ""
    assert _log(log) == []


def test_without_a_key_no_authorization_header_is_sent(server, monkeypatch):
    proc, log = server
    log.unlink(missing_ok=True)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    outcome = bench(
        BenchRequest(
            endpoints=(proc.url,),
            model="sim-model",
            concurrencies=(2,),
            isl=16,
            osl=4,
            num_prompts=4,
            warmup_requests=0,
        )
    )
    assert outcome.stopped is None
    requests = _log(log)
    assert requests and {q["authorization"] for q in requests} == {None}
