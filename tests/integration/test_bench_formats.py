"""Issue 15, bench: vLLM's flags and field names, open-loop arrivals, and a server that sends no
usage in its streams — against the simulated engine (tests/support/sim_server.py).

The law: step(B) = 10 ms + 0.15 ms·B, one token per running sequence per step, cap 32.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.support.sim_server import SimServerProcess  # noqa: E402

from tokenplan.api.bench import BenchRequest, bench  # noqa: E402

CLI = [sys.executable, "-c", "import sys; from tokenplan.cli import main; sys.argv[0] = 'tokenplan'; main()"]


def test_a_server_without_stream_usage_gets_tokens_counted_from_chunks_and_says_so(tmp_path: Path) -> None:
    with SimServerProcess(str(tmp_path), a_ms=2.0, b_ms=0.1, cap=32, stream_usage=False) as server:
        outcome = bench(BenchRequest((server.url,), "sim-model", (4,), 32, 16, num_prompts=16, warmup_requests=0))
    (level,) = outcome.data["levels"]
    # the sim streams one chunk per token and every answer is exactly --osl 16 tokens: 16 × 16 = 256
    assert level["token_count_method"] == "stream chunks"
    assert level["output_tokens"] == 16 * 16 and level["output_tok_s"] > 0
    assert level["input_tokens"] is None and level["total_tok_s"] is None  # unknown, not 0
    assert any("no usage in its streams" in n for n in outcome.data["notes"])


def test_open_loop_poisson_arrivals_with_vllm_field_names(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    with SimServerProcess(str(tmp_path), a_ms=2.0, b_ms=0.1, cap=32) as server:
        done = subprocess.run(
            [
                *CLI,
                "bench",
                "--endpoint",
                server.url,
                "--model",
                "sim-model",
                "--request-rate",
                "20",
                "--burstiness",
                "1",
                "--max-concurrency",
                "8",
                "--dataset-name",
                "random",
                "--random-input-len",
                "32",
                "--random-output-len",
                "8",
                "--num-prompts",
                "24",
                "--warmup",
                "0",
                "--save",
                str(out),
            ],
            capture_output=True,
            text=True,
            timeout=180,
        )
    assert done.returncode == 0, done.stderr
    data = json.loads(out.read_text())
    (level,) = data["levels"]
    assert (level["completed"], level["request_rate"], level["max_concurrency"]) == (24, 20.0, 8)
    assert data["workload"]["arrivals"] == "open loop, gamma gaps, burstiness 1"
    # vllm bench serve's names carry the same figures in its units (ms, req/s, tok/s)
    assert level["request_throughput"] == level["request_throughput_per_s"]
    assert (
        level["output_throughput"] == level["output_tok_s"] and level["total_token_throughput"] == level["total_tok_s"]
    )
    assert level["median_ttft_ms"] == pytest.approx(level["ttft_s"]["p50"] * 1e3)
    assert level["p99_e2el_ms"] == pytest.approx(level["e2e_s"]["p99"] * 1e3)
    assert level["mean_tpot_ms"] == pytest.approx(level["tpot_s"]["mean"] * 1e3)
    assert level["total_output_tokens"] == 24 * 8
    # 24 arrivals at 20/s take about 23 gaps × 50 ms ≈ 1.15 s: an open loop spreads them out,
    # where a closed loop of 8 would finish 3 rounds of ~10 steps × ~2.5 ms in well under 0.5 s
    assert level["duration_s"] > 0.5


def test_a_rate_of_inf_is_written_as_vllm_writes_it_and_keeps_the_sweep(tmp_path: Path) -> None:
    # --request-rate 20,inf: the second level sends all 8 at once; JSON has no inf, vLLM writes "inf"
    with SimServerProcess(str(tmp_path), a_ms=2.0, b_ms=0.1, cap=32) as server:
        outcome = bench(
            BenchRequest(
                (server.url,),
                "sim-model",
                (8,),
                32,
                8,
                num_prompts=8,
                warmup_requests=0,
                request_rates=(20.0, math.inf),
            )
        )
    first, second = outcome.data["levels"]
    assert (first["request_rate"], second["request_rate"]) == (20.0, "inf")
    assert first["completed"] == second["completed"] == 8
