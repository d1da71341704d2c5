"""A run's mean TTFT carries its opening wave (``job.timeline.run_mean_ttft_s``): a client started
with ``--max-concurrency C --request-rate inf`` sends its first C prompts at once to an idle server
(InferenceX's ``benchmark_serving.py``: every request is created at start and a semaphore of C
admits them), so those C wait for a whole wave's prompts; the other N − C arrive as requests end.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from tests.support.measured import measured_row

from tokenplan.api.resolve import PredictRequest, resolve, resolve_case
from tokenplan.calibration.validate import predict_case
from tokenplan.job.timeline import run_mean_ttft_s
from tokenplan.measurement import SkippedRow
from tokenplan.perf.efficiency import Efficiency

BASE = {
    "model": "deepseek-r1",
    "gpu": "b200",
    "num_gpus": 8,
    "tp": 8,
    "weight_dtype": "fp8",
    "isl": 1024,
    "osl": 1024,
}


def test_the_mean_weighs_the_opening_wave_by_its_share_of_the_run():
    steady = resolve(PredictRequest(**BASE, concurrency=64)).evaluate().steady
    s = replace(steady, ttft_s=0.2, opening_ttft_s=1.0)  # figures chosen for the arithmetic
    # 64 in flight, 640 requests (InferenceX's 10 × CONC): (64 × 1.0 + 576 × 0.2) / 640 = (64 + 115.2)
    # / 640 = 0.28 s
    assert s.batch == 64
    assert run_mean_ttft_s(s, 64, 640) == pytest.approx(0.28, rel=1e-12)
    # a run no longer than its opening wave is that wave
    assert run_mean_ttft_s(s, 64, 64) == 1.0
    # offline over 640: all sent at once; the first 64 open the run, request j = 65..640 waits
    # (j − 64) × cycle / 64 = (j − 64) × 0.1 s: 576 · 577 / 2 × 0.1 = 16,617.6 s in all, so the mean
    # is (64 × 1.0 + 576 × 0.2 + 16,617.6) / 640 = 16,796.8 / 640 = 26.245 s
    assert run_mean_ttft_s(replace(s, cycle_s=6.4), None, 640) == pytest.approx(26.245, rel=1e-12)


def test_only_the_replicas_batch_opens_at_once():
    steady = resolve(PredictRequest(**BASE, concurrency=64)).evaluate().steady
    # 100 in flight on a replica that runs 64 and ends 64 / 6.4 s = 10 requests/s: the steady
    # state at 100 waits (100 − 64) / 10 = 3.6 s in the queue on top of its 0.2 s TTFT
    s = replace(steady, batch=64.0, cycle_s=6.4, ttft_s=0.2 + 3.6, opening_ttft_s=1.0)
    # The first 64 open; request j = 65..100 of the opening burst waits (j − 64) / 10 s, the 900
    # sent later 3.6 s each (job.timeline.finite_run_wait_s): 36 · 37 / 2 / 10 + 900 · 3.6 = 66.6
    # + 3,240 = 3,306.6 s of waiting in all. Mean: (64 × 1.0 + 936 × 0.2 + 3,306.6) / 1,000 =
    # (64 + 187.2 + 3,306.6) / 1,000 = 3.5578 s
    assert run_mean_ttft_s(s, 100, 1000) == pytest.approx(3.5578, rel=1e-12)


def test_the_opening_wave_waits_longer_than_the_steady_states_arrival():
    # At 64 in flight the steady state's arrivals are partly spread (prefill_wave_fraction < 1, and
    # the waves decay with the lengths' spread): the opening wave, all 64 prompts at once with no
    # receive wait, waits longer than the steady arrival's own prompt.
    steady = resolve(PredictRequest(**BASE, concurrency=64)).evaluate().steady
    assert math.isfinite(steady.opening_ttft_s)
    assert steady.opening_ttft_s > steady.ttft_s


def _ttft_s(**figures: object) -> float:
    """The predicted TTFT (seconds) of a DeepSeek-R1 TP8 B200 run stated as ``figures``, at the
    default efficiency factors."""
    m = measured_row(
        model="deepseek-r1",
        gpu="b200",
        num_gpus=8,
        tp=8,
        weight_dtype="fp8",
        kv_dtype="fp8",
        isl_tokens=1024,
        osl_tokens=1024,
        **figures,
    )
    case = resolve_case(m)
    assert not isinstance(case, SkippedRow)
    return predict_case(case, Efficiency()).ttft_s


def test_a_run_shorter_than_its_concurrency_is_one_burst_of_its_requests():
    # 16 requests with 128 allowed in flight: only 16 ever exist, all sent at once: the same run as
    # 16 at concurrency 16, and shorter than a wave of 128 prompts
    short = _ttft_s(concurrency=128.0, num_requests=16.0)
    assert short == pytest.approx(_ttft_s(concurrency=16.0, num_requests=16.0), rel=1e-12)
    assert short < _ttft_s(concurrency=128.0, num_requests=128.0)


def test_an_open_loop_run_has_no_opening_wave():
    closed = _ttft_s(concurrency=64.0, num_requests=640.0)
    open_loop = _ttft_s(concurrency=64.0, num_requests=640.0, closed_loop=False)
    steady = _ttft_s(concurrency=64.0)  # no request count: the steady state
    assert open_loop == steady < closed
