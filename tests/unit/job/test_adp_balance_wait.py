"""TensorRT-LLM's attention-DP context balancing wait (``job.prefill_wait.adp_balance_wait_s``) and
its place in the TTFT (``job.batching.steady_state``)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from tokenplan.api.resolve import PredictRequest, resolve
from tokenplan.catalog import load_engine, shipped_efficiency
from tokenplan.job.batching import steady_state
from tokenplan.job.prefill_wait import adp_balance_wait_s
from tokenplan.job.workload import fixed


def test_low_arrival_rate_waits_the_whole_timeout() -> None:
    """One request every 2 s on 8 ranks: the other 7 ranks need 8/0.5 · H(7) = 16 × 2.593 = 41.5 s
    to each receive one, half of it 20.7 s, far above the timeout: 60 steps of 20 ms = 1.2 s."""
    assert adp_balance_wait_s(60, 8.0, 0.020, 0.5) == pytest.approx(1.2)


def test_high_arrival_rate_waits_for_the_ranks_to_fill() -> None:
    """100 requests/s on 4 ranks: 4/100 · H(3) = 0.04 × (1 + 1/2 + 1/3) = 0.07333 s of window, a
    request waits half: 0.036667 s, below 60 × 20 ms."""
    assert adp_balance_wait_s(60, 4.0, 0.020, 100.0) == pytest.approx(0.04 * (1 + 0.5 + 1 / 3) / 2)


@pytest.mark.parametrize(
    ("iters", "ranks", "arrivals"),
    [(0, 8.0, 1.0), (60, 1.0, 1.0), (60, 8.0, math.inf), (60, 8.0, 0.0)],
)
def test_no_wait_without_balancing_ranks_or_arrivals(iters: int, ranks: float, arrivals: float) -> None:
    """No balancing (timeout 0), no attention DP (one rank), a queue that keeps every rank supplied
    (offline: arrivals ∞) or no arrivals at all: nothing to wait for."""
    assert adp_balance_wait_s(iters, ranks, 0.020, arrivals) == 0.0


def _r1_adp(concurrency: int | None, timeout: int | None = None):
    ev = resolve(
        PredictRequest(
            "deepseek-r1",
            "h200",
            engine="trtllm",
            num_gpus=8,
            tp=8,
            ep=8,
            attention_dp=True,
            weight_dtype="fp8",
            isl=8192,
            osl=1024,
            concurrency=concurrency,
        )
    ).evaluate()
    settings = ev.settings if timeout is None else replace(ev.settings, adp_balance_timeout_iters=timeout)
    eff = shipped_efficiency().resolve("trtllm", "hopper")
    st = steady_state(ev.deployment, eff, load_engine("trtllm"), settings, fixed(8192), fixed(1024), concurrency)
    return ev, st


def test_trtllm_attention_dp_ttft_carries_the_wait() -> None:
    """DeepSeek-R1 FP8 on 8 H200 as TP8×EP8 with attention DP at concurrency 8 (serving-dev.csv's
    TensorRT-LLM rows measure 6.4 s TTFT there at 8K prompts, 2–5 s more than the prefill): the
    launch sets the recipe's 60-iteration timeout, and the TTFT is longer than with balancing off
    by exactly ``adp_balance_wait_s`` at the replica's arrival rate (batch / cycle) and decode step;
    throughput and TPOT do not change."""
    ev, on = _r1_adp(8)
    assert ev.settings.adp_balance_timeout_iters == 60
    _, off = _r1_adp(8, timeout=0)
    wait = adp_balance_wait_s(60, 8.0, on.decode_step.total_s, on.batch / on.cycle_s)
    assert wait > 0.5  # 8 requests over ~10 s lifetimes: far fewer arrivals than 60 steps need
    assert on.ttft_s - off.ttft_s == pytest.approx(wait, rel=1e-12)
    assert on.output_tok_s == off.output_tok_s and on.tpot_s == off.tpot_s


def test_offline_attention_dp_does_not_wait() -> None:
    """Offline (trtllm-bench) every rank has prompts queued: no balancing wait."""
    _, on = _r1_adp(None)
    _, off = _r1_adp(None, timeout=0)
    assert on.ttft_s == off.ttft_s
