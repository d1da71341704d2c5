"""Whole-job time: a burst of requests that end at different lengths."""

import pytest

from tokenplan.api import PredictRequest, efficiency_table, evaluate_request
from tokenplan.job.timeline import job_time
from tokenplan.job.workload import LengthDist, fixed
from tokenplan.perf.step import step_time


def _llama_h100():
    ev = evaluate_request(PredictRequest("llama-3.1-8b", "h100-sxm", isl=512, osl=1000, concurrency=1))
    return ev, efficiency_table(None).resolve("sglang", "hopper")


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
