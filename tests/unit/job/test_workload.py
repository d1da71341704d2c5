"""Length distributions: fixed lengths, lognormal moments, and the capped-mean solver."""

import math

import pytest

from tokenplan.errors import InputError
from tokenplan.job.workload import LengthDist, fixed, lognormal_with_mean


def test_fixed_length_has_that_mean_and_running_mean():
    # Every request is 1,024 tokens: E[L] = 1,024 and E[L²]/E[L] = 1,024²/1,024 = 1,024.
    d = fixed(1024)
    assert d.mean == 1024
    assert d.running_mean == 1024


def test_uncapped_lognormal_mean_is_the_parameter():
    # Without a cap E[L] = exp(mu + σ²/2) = the given mean, exactly (closed form).
    d = LengthDist(2500, 1.0, None)
    assert d.mean == pytest.approx(2500, rel=1e-12)


def test_running_mean_of_lognormal_is_length_biased():
    # For a lognormal, E[L²]/E[L] = E[L]·exp(σ²): with σ = 0.5, 1000·e^0.25 = 1284.025.
    d = LengthDist(1000, 0.5, None)
    assert d.running_mean == pytest.approx(1000 * math.exp(0.25), rel=1e-12)


def _phi(x: float) -> float:
    return 0.5 * (1 + math.erf(x / math.sqrt(2)))


def test_capped_lognormal_moments_in_closed_form():
    # L = min(X, 32,768), X lognormal with E[X] = 2,500, σ = 1: μ = ln 2,500 − 0.5 = 7.324046,
    # z = (ln 32,768 − μ)/σ = 10.397208 − 7.324046 = 3.073162.
    # E[L] = E[X]·Φ(z − σ) + c·(1 − Φ(z)) = 2,500·0.980921 + 32,768·0.00105902 = 2,452.30 + 34.70
    #      = 2,487.005;
    # E[L²] = exp(2μ + 2σ²)·Φ(z − 2σ) + c²·(1 − Φ(z)) = 16,989,261.4·Φ(1.073162) + 1,073,741,824·0.00105902
    #       = 15,720,706.5; running mean E[L²]/E[L] = 6,321.14.
    # The 256-point quantile grid used before gave 2,483.9 and 6,239.9 (1.3 % low).
    mu, c = math.log(2500) - 0.5, 32768
    z = math.log(c) - mu
    m1 = 2500 * _phi(z - 1) + c * (1 - _phi(z))
    m2 = math.exp(2 * mu + 2) * _phi(z - 2) + c * c * (1 - _phi(z))
    d = LengthDist(2500, 1.0, 32768)
    assert m1 == pytest.approx(2487.005, abs=1e-3)
    assert m2 / m1 == pytest.approx(6321.14, abs=1e-2)
    assert d.mean == pytest.approx(m1, rel=1e-12)
    assert d.running_mean == pytest.approx(m2 / m1, rel=1e-12)


def test_residual_survival_is_the_stop_loss_over_the_mean():
    # E[max(L − s, 0)] / E[L] = (E[L] − E[min(L, s)]) / E[L]; at s = 2,500 for the distribution
    # above, E[min(L, 2,500)] = E[X]·Φ(z' − 1) + 2,500·(1 − Φ(z')) with z' = ln 2,500 − μ = 0.5:
    # 2,500·Φ(−0.5) + 2,500·(1 − Φ(0.5)) = 2,500·2·0.308538 = 1,542.69.
    d = LengthDist(2500, 1.0, 32768)
    expected = (d.mean - 2500 * 2 * (1 - _phi(0.5))) / d.mean
    assert d.capped_moment(1, 2500) == pytest.approx(1542.69, abs=0.01)
    assert dict((round(g), v) for g, v in d.residual_survival).get(0) == 1.0
    assert (d.mean - d.capped_moment(1, 2500)) / d.mean == pytest.approx(expected, rel=1e-12)


def test_capped_mean_solver_hits_the_requested_mean():
    d = lognormal_with_mean(2500, 1.0, 32768)
    assert d.mean == pytest.approx(2500, rel=1e-3)
    # The cap removes mass above 32,768, so the uncapped parameter must be larger than 2,500.
    assert d.mean_tokens > 2500
    assert d.max <= 32768


def test_capped_mean_at_or_above_the_cap_is_refused():
    with pytest.raises(InputError):
        lognormal_with_mean(40000, 1.0, 32768)


def test_sigma_zero_is_a_fixed_length_capped():
    d = lognormal_with_mean(500, 0.0, 32768)
    assert d.mean == 500


def test_the_share_of_requests_past_the_context_and_the_tokens_they_lose():
    from tokenplan.job.workload import past_context

    # Fixed lengths: 1,000 + 3,000 > 3,500, so every request passes; each answer stops 500 tokens
    # short: 500 / 3,000 = 1/6 of the output lost.
    assert past_context(fixed(1000), fixed(3000), 3500) == pytest.approx((1.0, 1 / 6))
    # A prompt alone past the context is refused: all of its answer is lost.
    assert past_context(fixed(5000), fixed(3000), 4096) == pytest.approx((1.0, 1.0))
    # Lognormal answers (mean 2,500, σ 1, no cap) after a fixed 1,000-token prompt, context 4,096:
    # room 3,096; μ = ln 2,500 − ½ = 7.324046; z = (ln 3,096 − μ)/1 = 8.037866 − 7.324046 = 0.713820;
    # P(O > 3,096) = 1 − Φ(0.713820) = 0.237669. Tokens cut: E[O] − E[min(O, 3,096)] with
    # E[min(O, c)] = 2,500·Φ(z − 1) + 3,096·(1 − Φ(z)) = 1,704.249 → (2,500 − 1,704.249)/2,500 = 0.318300.
    share, lost = past_context(fixed(1000), LengthDist(2500, 1.0), 4096)
    assert share == pytest.approx(0.237669, abs=1e-6) and lost == pytest.approx(0.318300, abs=1e-6)
    assert past_context(fixed(1000), fixed(2000), 4096) == (0.0, 0.0)
