"""Whole-job time: a burst of requests that end at different lengths."""

import pytest
from tests.support.our_numbers import EFF, ours

from tokenplan.api.resolve import PredictRequest, read_profile, resolve
from tokenplan.job.timeline import job_time
from tokenplan.job.workload import LengthDist, fixed
from tokenplan.perf.step import step_time


def _llama_h100():
    ev = resolve(PredictRequest("llama-3.1-8b", "h100-sxm", isl=512, osl=1000, concurrency=1)).evaluate()
    return ev, read_profile(None).table.resolve("sglang", "hopper")


def test_one_fixed_request_decodes_osl_steps_at_batch_one():
    ev, eff = _llama_h100()
    osl = fixed(1000)
    t = job_time(ev.deployment, eff, ev.settings, ev.steady, fixed(512), osl, 1)
    # 1,000 decode steps at batch 1; the step barely changes over the context 512 → 1,512
    # (8 B params in BF16 = 16 GB per step against 131 KB × 1,000 tokens = 0.13 GB of KV).
    one = step_time(ev.deployment, eff, 1, 512 + 500).total_s
    assert t.drain_s == pytest.approx(1000 * one, rel=0.02)


def test_one_lognormal_request_takes_its_mean_length_not_the_longest():
    ev, eff = _llama_h100()
    osl = LengthDist(1000, 1.0, 32768)
    t = job_time(ev.deployment, eff, ev.settings, ev.steady, fixed(512), osl, 1)
    one = step_time(ev.deployment, eff, 1, 512 + 500).total_s
    # A single request runs E[L] ≈ 1,000 steps on average (the survival integral ∫P(L > s) ds
    # = E[L]); the longest on the grid is ~10× that. Context grows, so allow 15 % above.
    assert osl.mean * one * 0.98 < t.drain_s < osl.mean * one * 1.15
    assert t.drain_s < 0.5 * osl.max * one


def test_drain_of_one_running_request_is_half_its_length_of_constant_steps():
    from dataclasses import replace

    ev, _ = _llama_h100()
    assert ev.steady.batch == 1 and ev.deployment.layout.tp == 1  # no collective
    # Our own numbers (tests/support/our_numbers.py): 4 TB/s HBM, 1 PFLOP/s, 8e9 + 1e9 bytes of
    # weights, no KV or attention work, so a decode step is the same at every context.
    d = ours(ev.deployment)
    eff = replace(EFF, per_sequence_overhead_s=1e-5)
    # Step: 9e9 B / (4e12 × 0.8) = 2.8125 ms (FLOPs 2 × 8.5e9 = 1.7e10 at 5e14 × 1/9 FLOP/s = 0.306 ms,
    # below) + 1 ms fixed + 10 µs for the one sequence = 3.8225 ms.
    # Drain: the one running request has a residual length uniform on [0, 1,000] (fixed OSL,
    # length-biased = itself), so it decodes E[residual] = 1,000/2 = 500 more steps:
    # 500 × 3.8225 ms = 1.91125 s.
    t = job_time(d, eff, ev.settings, ev.steady, fixed(512), fixed(1000), 10)
    assert t.drain_s == pytest.approx(1.91125)


def test_a_dp_job_ends_with_the_longest_tail_of_all_its_replicas():
    from dataclasses import replace

    ev, _ = _llama_h100()
    d = ours(ev.deployment)
    eff = replace(EFF, per_sequence_overhead_s=1e-5)
    # The constant 3.8225 ms step of the test above; one request running per replica, each with a
    # residual uniform on [0, 1,000]. The job lasts while any of the R residuals runs:
    # ∫₀¹⁰⁰⁰ (1 − (s/1,000)^R) ds = 1,000·R/(R + 1) steps: 500 for R = 1, 750 for R = 3
    # (750 × 3.8225 ms = 2.866875 s), 999 for R = 999. Before, every R gave one replica's 500 (a
    # break-it pass: 100,000 B200s "finished" 914,000 requests before one 32,768-token answer could).
    one = job_time(d, eff, ev.settings, ev.steady, fixed(512), fixed(1000), 10)
    three = job_time(d, eff, ev.settings, ev.steady, fixed(512), fixed(1000), 10, replicas=3)
    many = job_time(d, eff, ev.settings, ev.steady, fixed(512), fixed(1000), 10, replicas=999)
    assert one.drain_s == pytest.approx(1.91125)
    assert three.drain_s == pytest.approx(2.866875, rel=1e-3)
    assert many.drain_s == pytest.approx(999 * 3.8225e-3, rel=1e-2)
