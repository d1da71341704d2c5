"""A finite closed-loop run's queue (``job.timeline.finite_run_wait_s``): of N requests the client
sends C at once and one more as each ends; the replica runs B and admits in arrival order, so
request j waits ``(min(j, C) − B)⁺ / λ`` (λ = B / cycle requests ending per second), not the steady
state's ``(C − B) / λ`` that a client with endless requests sees. A burst (N = C) drains its queue:
its median request waits half as long."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from tests.support.measured import measured_row

from tokenplan.api.resolve import PredictRequest, resolve, resolve_case
from tokenplan.calibration.validate import predict_case
from tokenplan.job.evaluate import evaluate
from tokenplan.job.timeline import finite_run_wait_s, run_median_ttft_s, steady_wait_s
from tokenplan.measurement import SkippedRow
from tokenplan.perf.efficiency import Efficiency


def _steady(batch: float, cycle_s: float):
    """A steady state with the given running batch and cycle (the rest is never read here)."""
    real = resolve(PredictRequest(model="qwen3-32b", gpu="h100-sxm", isl=1024, osl=128, concurrency=8)).evaluate()
    return replace(real.steady, batch=batch, cycle_s=cycle_s)


def test_a_burst_drains_its_queue_so_its_median_waits_half_the_steady_wait():
    s = _steady(batch=12.0, cycle_s=6.0)  # λ = 12 / 6 = 2 requests/s
    # steady: (500 − 12) / 2 = 244 s for every request behind the batch
    assert steady_wait_s(s, 500.0) == pytest.approx(244.0, rel=1e-12)
    # 500 sent at once, 500 in all: the median request j = 250.5 waits (250.5 − 12) / 2 = 119.25 s
    assert finite_run_wait_s(s, 500.0, 500.0, median=True) == pytest.approx(119.25, rel=1e-12)
    # mean over j = 1..500: Σ (j − 12) for j = 13..500 = 488 · 489 / 2 = 119,316; / (500 · 2) = 119.316 s
    assert finite_run_wait_s(s, 500.0, 500.0) == pytest.approx(119.316, rel=1e-12)


def test_a_long_run_behind_its_opening_burst_waits_the_steady_wait():
    s = _steady(batch=12.0, cycle_s=6.0)
    # C = 100, N = 1,000: the median request (j = 500.5) was sent after the opening burst, so it
    # waits the steady (100 − 12) / 2 = 44 s
    assert finite_run_wait_s(s, 100.0, 1000.0, median=True) == pytest.approx(44.0, rel=1e-12)
    assert steady_wait_s(s, 100.0) == pytest.approx(44.0, rel=1e-12)
    # mean: [88 · 89 / 2 + (1,000 − 100) · 88] / (1,000 · 2) = (3,916 + 79,200) / 2,000 = 41.558 s
    assert finite_run_wait_s(s, 100.0, 1000.0) == pytest.approx(41.558, rel=1e-12)


def test_nothing_waits_where_the_replica_runs_every_request_in_flight():
    s = _steady(batch=12.0, cycle_s=6.0)
    assert finite_run_wait_s(s, 12.0, 500.0) == 0.0 and steady_wait_s(s, 12.0) == 0.0
    assert finite_run_wait_s(s, 500.0, 10.0, median=True) == 0.0  # 10 requests in all: all run


def test_validate_gives_a_burst_row_its_median_requests_wait():
    # gpustack's vLLM random-2K run (dev.csv id 132): 500 prompts at once on one H100 PCIe, a
    # replica that runs far fewer (its KV cache holds a few 2,100-token requests)
    row = measured_row(
        engine="vllm",
        model="qwen3-32b",
        gpu="h100-pcie",
        num_gpus=1,
        tp=1,
        weight_dtype="bf16",
        kv_dtype="bf16",
        isl_tokens=2000,
        osl_tokens=100,
        concurrency=500.0,
        num_requests=500.0,
        latency_statistic="median",
    )
    case = resolve_case(row)
    assert not isinstance(case, SkippedRow)
    eff = Efficiency()
    steady = evaluate(case.model, case.gpu, case.config, eff, case.isl, case.osl, case.concurrency_per_replica).steady
    assert steady.batch < 250  # the median request queues
    want = steady.median_ttft_s - steady_wait_s(steady, 500.0) + finite_run_wait_s(steady, 500.0, 500.0, median=True)
    got = predict_case(case, eff).ttft_s
    assert got == pytest.approx(want, rel=1e-9)
    # the wait it replaces: (500 − B)/λ against (250.5 − B)/λ, so more than half of it goes
    assert got < steady.median_ttft_s - 0.45 * steady_wait_s(steady, 500.0)


def test_offline_runs_send_every_request_at_once():
    s = _steady(batch=12.0, cycle_s=6.0)
    # offline over 500 requests is the 500-request burst above: C = N = 500
    assert finite_run_wait_s(s, None, 500.0, median=True) == pytest.approx(119.25, rel=1e-12)
    assert finite_run_wait_s(s, None, 500.0) == pytest.approx(119.316, rel=1e-12)
    # the steady state of an offline run adds no wait of its own (job.batching.steady_state)
    assert steady_wait_s(s, None) == 0.0
    # a replica that completes nothing never admits the queue
    assert finite_run_wait_s(_steady(batch=12.0, cycle_s=math.inf), 500.0, 500.0) == math.inf


def test_a_burst_whose_median_request_opens_the_run_takes_the_opening_waves_ttft():
    s = replace(_steady(batch=12.0, cycle_s=6.0), opening_ttft_s=2.0, median_ttft_s=0.5)
    # 20 sent at once to a replica that runs 12: the median request, j = 10.5, is in the opening
    # wave of 12 prompts, so its TTFT is the wave's, 2.0 s (not the steady state's 0.5 s)
    assert run_median_ttft_s(s, 20.0, 20.0) == 2.0
    # 30 sent at once: j = 15.5 is past the wave; it waits (15.5 − 12) × 0.5 s = 1.75 s in the queue
    # on top of the steady state's median request without a queue (0.5 − the steady wait of
    # (30 − 12) × 0.5 = 9 s that median_ttft_s would carry at 30 in flight: here set apart)
    s30 = replace(s, median_ttft_s=0.5 + 9.0)
    assert run_median_ttft_s(s30, 30.0, 30.0) == pytest.approx(0.5 + 1.75, rel=1e-12)
    # offline over 30: the same burst
    s_off = replace(s, median_ttft_s=0.5)  # an offline steady state carries no wait
    assert run_median_ttft_s(s_off, None, 30.0) == pytest.approx(0.5 + 1.75, rel=1e-12)
