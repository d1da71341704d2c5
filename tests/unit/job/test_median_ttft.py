"""The median request's TTFT (``SteadyState.median_ttft_s``): of the arrivals a share g
(``prefill_wave_fraction``) waits behind the prompts of its wave, the rest queue as random
arrivals, so the mean TTFT is ``base + g·wave + (1 − g)·queue`` while the median arrival belongs to
the larger part: outside the waves (``base + queue``) while g < 1/2, inside one (``base + wave``)
from g = 1/2 on. InferenceX's ``ttft_ms_median`` is compared with the median, serving-dev.csv's
means with the mean (``calibration.validate.predict_case``).
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from tests.support.measured import measured_row

from tokenplan.api.resolve import PredictRequest, resolve

# SGLang, Qwen3-32B on one H100 at 8 in flight (under its KV limit), 8k prompts: prefill steps are long enough that a
# wave's prompts and a random arrival's queue differ.
REQ = PredictRequest(model="qwen3-32b", gpu="h100-sxm", weight_dtype="fp8", isl=8192, osl=1024, concurrency=8)


def _steady(g: float):
    s = resolve(REQ)
    return replace(s, efficiency=s.efficiency.with_values(prefill_wave_fraction=g)).evaluate().steady


def test_the_median_arrival_is_outside_the_waves_while_they_are_the_minority():
    all_random, all_waves = _steady(0.0), _steady(1.0)
    wave_gap = all_waves.ttft_s - all_random.ttft_s  # wave − queue, the same at every g
    assert wave_gap > 0.01  # a wave's prompts wait longer than a random arrival's queue
    for g in (0.2, 0.45):
        s = _steady(g)
        # the mean moves with g: base + queue + g·(wave − queue)
        assert s.ttft_s == pytest.approx(all_random.ttft_s + g * wave_gap, rel=1e-9)
        # the median stays at the random arrivals' TTFT, base + queue
        assert s.median_ttft_s == pytest.approx(all_random.ttft_s, rel=1e-12)


def test_from_half_the_median_arrival_waits_in_a_wave():
    all_waves = _steady(1.0)
    for g in (0.5, 0.8):
        assert _steady(g).median_ttft_s == pytest.approx(all_waves.ttft_s, rel=1e-12)
    assert all_waves.median_ttft_s == pytest.approx(all_waves.ttft_s, rel=1e-12)


def test_a_queue_in_the_replica_delays_median_and_mean_alike():
    # 512 in flight on a replica that runs fewer (at least twice as many: every freed slot refills
    # from the queue, job.steady.queue_share): every arrival waits (concurrency − batch) / rate
    # before its wave, so mean and median are both the whole-wave figure plus that wait.
    s = replace(resolve(REQ), concurrency=512.0).evaluate().steady
    assert s.batch < 512
    assert s.median_ttft_s == pytest.approx(s.ttft_s, rel=1e-12)


def test_queue_share_is_the_waiting_requests_over_the_batch():
    from tokenplan.job.steady import queue_share

    assert queue_share(None, 406.0) == 1.0  # offline: every freed slot refills from the queue
    assert queue_share(62.0, 62.0) == 0.0  # no request waits
    assert queue_share(64.0, 62.0) == pytest.approx(2.0 / 62.0, rel=1e-15)  # 2 waiting, 62 slots
    assert queue_share(1024.0, 184.0) == 1.0  # (1024 − 184)/184 = 4.6 > 1: every slot


def test_a_client_a_few_requests_above_the_batch_waits_in_a_wave_for_that_share_only():
    # With no unqueued waves (g = 0), k requests above the running batch B put k of every B
    # refills in a wave: TTFT − the queue's wait = (base + queue) + (k/B)·(wave − queue), the two
    # ends read at concurrency B (the same batch, no queue) with g = 0 and g = 1.
    B = replace(resolve(REQ), concurrency=512.0).evaluate().steady.batch
    k = 3.0

    def at(concurrency: float, g: float):
        s = resolve(replace(REQ, concurrency=concurrency))
        return replace(s, efficiency=s.efficiency.with_values(prefill_wave_fraction=g)).evaluate().steady

    random_end, wave_end, s = at(B, 0.0), at(B, 1.0), at(B + k, 0.0)
    assert s.batch == B and wave_end.ttft_s - random_end.ttft_s > 0.01
    wait = k * s.cycle_s / B  # (C − B) / (B / cycle)
    assert s.ttft_s - wait == pytest.approx(random_end.ttft_s + k / B * (wave_end.ttft_s - random_end.ttft_s), rel=1e-9)
    # k/B < 1/2: the median arrival is one of the clients' new requests, outside the waves
    assert s.median_ttft_s - wait == pytest.approx(random_end.ttft_s, rel=1e-9)


def test_validate_compares_a_median_with_the_median_and_a_mean_with_the_mean():
    from tokenplan.api.resolve import resolve_case
    from tokenplan.calibration.validate import predict_case
    from tokenplan.job.evaluate import evaluate
    from tokenplan.measurement import SkippedRow
    from tokenplan.perf.efficiency import Efficiency

    eff = Efficiency().with_values(prefill_wave_fraction=0.3)  # waves the minority of arrivals
    row = measured_row(
        model="qwen3-32b",
        gpu="h100-sxm",
        num_gpus=1,
        tp=1,
        weight_dtype="fp8",
        kv_dtype="fp8",
        isl_tokens=8192,
        osl_tokens=1024,
        concurrency=8.0,
    )
    for statistic in ("median", "mean"):
        case = resolve_case(replace(row, latency_statistic=statistic))
        assert not isinstance(case, SkippedRow)
        steady = evaluate(
            case.model, case.gpu, case.config, eff, case.isl, case.osl, case.concurrency_per_replica
        ).steady
        want = steady.median_ttft_s if statistic == "median" else steady.ttft_s
        assert predict_case(case, eff).ttft_s == pytest.approx(want, rel=1e-12)
    assert steady.median_ttft_s < steady.ttft_s  # at g = 0.3 the waves lift the mean only
