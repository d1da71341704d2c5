"""How a hardware option's configurations are ranked: speculative decoding whose τ is a prior
is counted at the low end of published acceptance (planning.search.ranking_wall_s)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tokenplan.job.workload import fixed
from tokenplan.perf.speculative import SpecDecode
from tokenplan.planning.search import ranking_wall_s


def _candidate(wall_s: float, spec: SpecDecode | None) -> SimpleNamespace:
    return SimpleNamespace(wall_s=wall_s, evaluation=SimpleNamespace(config=SimpleNamespace(spec=spec)))


def _job(isl: float, osl: float) -> SimpleNamespace:
    return SimpleNamespace(isl=fixed(isl), osl=fixed(osl))


def test_a_prior_tau_is_ranked_at_the_low_end_and_a_stated_one_as_it_is():
    # Fixed ISL 1,000 and OSL 4,000: mean decoding context 1,000 + 4,000/2 = 3,000 tokens, where
    # MTP k = 1 has low/prior τ = 1.696442 / 1.742871 = 0.973361 (test_speculative).
    job = _job(1000.0, 4000.0)
    assert ranking_wall_s(_candidate(100.0, None), job) == 100.0
    prior = _candidate(100.0, SpecDecode("mtp", 1, 1.74, from_prior=True))
    assert ranking_wall_s(prior, job) == pytest.approx(100.0 / 0.973361, rel=1e-5)
    stated = _candidate(100.0, SpecDecode("mtp", 1, 1.74))
    assert ranking_wall_s(stated, job) == 100.0
    # So MTP 1 % faster on the prior (99 s against 100 s) ranks behind plain decode (101.7 s),
    # and 5 % faster (95 s → 97.6 s) ahead of it.
    assert ranking_wall_s(_candidate(99.0, prior.evaluation.config.spec), job) > 100.0
    assert ranking_wall_s(_candidate(95.0, prior.evaluation.config.spec), job) < 100.0


def test_the_plan_says_why_a_faster_prior_tau_configuration_does_not_lead():
    from tokenplan.perf.layout import Layout
    from tokenplan.planning.rank import _speculation_note
    from tokenplan.units import Dtype

    def cand(wall_s, spec, tok_s):
        cfg = SimpleNamespace(spec=spec, layout=Layout(tp=1, dp=8), weight_dtype=Dtype.FP8, kv_dtype=Dtype.FP8,
                              lift_running_cap=True)
        return SimpleNamespace(wall_s=wall_s, evaluation=SimpleNamespace(config=cfg, output_tok_s_total=tok_s))

    job = _job(1000.0, 4000.0)  # mean decoding context 3,000 tokens: low/prior τ ratio 0.973361
    prior = SpecDecode("mtp", 1, 1.74, from_prior=True)
    option = SimpleNamespace(label="8× b200")
    best, mtp = cand(100.0, None, 50_000.0), cand(99.0, prior, 50_505.0)
    note = _speculation_note(SimpleNamespace(option=option, best=best, ranked=[best, mtp]), job)
    # 50,505 / 50,000 − 1 = 1.0 % more tok/s; τ at the low end 1.74 × 0.973361 = 1.6937 → 1.69.
    assert note.startswith("8× b200: TP1×DP8, fp8 weights, fp8 KV, mtp k=1 τ=1.74, running cap raised gives "
                           "50,505 tok/s, 1.0% more than without it, at τ=1.74")
    assert "(τ≈1.69)" in note and "--spec none --spec mtp:1:TAU" in note
    # A stated τ, or a slower speculative configuration, needs no note.
    stated = cand(99.0, SpecDecode("mtp", 1, 1.74), 50_505.0)
    assert _speculation_note(SimpleNamespace(option=option, best=best, ranked=[best, stated]), job) is None
    slower = cand(101.0, prior, 49_500.0)
    assert _speculation_note(SimpleNamespace(option=option, best=best, ranked=[best, slower]), job) is None
