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


def test_uncapped_lognormal_grid_mean_is_close_to_the_parameter():
    # Without a cap the quantile grid estimates E[L] = exp(mu + σ²/2) = the given mean; the
    # 256-bin mid-point grid under-samples the far tail, so allow 2 %.
    d = LengthDist(2500, 1.0, None)
    assert d.mean == pytest.approx(2500, rel=0.02)


def test_running_mean_of_lognormal_is_length_biased():
    # For a lognormal, E[L²]/E[L] = E[L]·exp(σ²): with σ = 0.5, 1000·e^0.25 = 1284.0.
    d = LengthDist(1000, 0.5, None)
    assert d.running_mean == pytest.approx(1000 * math.exp(0.25), rel=0.02)


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
