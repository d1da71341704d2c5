"""Speculative-decoding acceptance: the short-context prior and its decline with context length
(perf/speculative.py cites the measurements the constants come from)."""

from __future__ import annotations

import math

import pytest

from tokenplan.perf.speculative import SpecDecode, low_acceptance_ratio, parse_spec, prior_acceptance_length


def test_short_context_prior_for_mtp_k3():
    # p = 0.80: τ = 1 + 0.8 + 0.64 + 0.512 = 2.952 (up to 1,000 tokens of context).
    assert prior_acceptance_length("mtp", 3) == pytest.approx(2.952)
    assert prior_acceptance_length("mtp", 3, 800) == pytest.approx(2.952)


def test_acceptance_declines_with_the_log_of_context():
    # At 2,300 tokens: p = 0.80·(1 − 0.065·ln 2.3) = 0.80·(1 − 0.065·0.832909) = 0.756689;
    # τ(k=3) = 1 + 0.756689 + 0.572578 + 0.433263 = 2.762530.
    p = 0.80 * (1 - 0.065 * math.log(2.3))
    assert p == pytest.approx(0.756689, abs=1e-6)
    assert prior_acceptance_length("mtp", 3, 2300) == pytest.approx(1 + p + p**2 + p**3, rel=1e-12)
    assert prior_acceptance_length("mtp", 3, 2300) == pytest.approx(2.76253, abs=1e-5)
    # At 34,000 tokens the factor is 1 − 0.065·ln 34 = 0.770786, the decline llama.cpp measured
    # from ~1K to ~34K on Qwen3.8-27B's MTP head (80–91 % → ~53 % of drafts, vllm#47602).
    assert prior_acceptance_length("mtp", 1, 34_000) == pytest.approx(1 + 0.8 * (1 - 0.065 * math.log(34)))


def test_a_given_tau_is_kept_and_a_prior_tau_moves_with_context():
    given = parse_spec("mtp:3:3.3")
    assert not given.from_prior and given.at_context(50_000) is given
    prior = parse_spec("mtp:3")
    assert prior.from_prior
    # 4,199 tokens (the default job's mean decoding context, ISL 1,024 + 6,350/2):
    # p = 0.8·(1 − 0.065·ln 4.199) = 0.8·0.906759 = 0.725407 → τ(k=3) = 1 + 0.725407 + 0.526215
    # + 0.381720 = 2.633342 → 2.63.
    assert prior.at_context(4199).acceptance_length == 2.63
    assert prior.at_context(4199).describe() == "mtp k=3 τ=2.63"


def test_the_low_acceptance_ratio_by_hand():
    # MTP k = 1 at 3,000 tokens of context: decay 1 − 0.065·ln 3 = 0.928589; p = 0.80 × that =
    # 0.742871, the low end 0.75 × that = 0.696442 → τ 1.742871 and 1.696442, ratio 0.973361.
    mtp1 = SpecDecode("mtp", 1, 1.74, from_prior=True)
    assert low_acceptance_ratio(mtp1, 3000.0) == pytest.approx(1.696442 / 1.742871, rel=1e-5)
    # k = 3 at short context (no decay): (1 + .75 + .5625 + .421875) / (1 + .8 + .64 + .512)
    # = 2.734375 / 2.952 = 0.926279.
    mtp3 = SpecDecode("mtp", 3, 2.95, from_prior=True)
    assert low_acceptance_ratio(mtp3, 500.0) == pytest.approx(2.734375 / 2.952)
    # A τ the user stated is not a prior: no discount.
    assert low_acceptance_ratio(SpecDecode("mtp", 3, 2.0), 3000.0) == 1.0
    # DFlash's low end is its prior: ratio 1.
    assert low_acceptance_ratio(SpecDecode("dflash", 15, 5.0, 5, from_prior=True), 3000.0) == pytest.approx(1.0)
