"""calibrate: the fit recovers factors from points the model itself generated, with noise."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import pytest

from tokenplan.api.resolve import resolve_case
from tokenplan.calibration.fit import FitOptions, fit
from tokenplan.calibration.levels import parameters
from tokenplan.calibration.validate import Case, predict_case
from tokenplan.measurement import Measurement
from tokenplan.perf.efficiency import Efficiency

TRUE = Efficiency(hbm_fraction=0.62, step_overhead_s=3.5e-3)


def _cases() -> list[Case]:
    cases = []
    line = 2
    for model, gpu, dtype in (("llama-3.1-8b", "h100-sxm", "bf16"), ("qwen3-32b", "h200", "fp8")):
        for conc in (1, 2, 4, 8, 16, 32, 64, 128):
            m = Measurement(  # vLLM 0.13: steps back to back, so a fixed step cost shows (engines.overlap)
                line,
                str(line),
                "vllm",
                model,
                gpu,
                1,
                1,
                1,
                1,
                False,
                dtype,
                "auto",
                512.0,
                1024.0,
                float(conc),
                output_tok_s_per_gpu=1.0,
                engine_version="0.13.0",
            )
            case = resolve_case(m)
            assert isinstance(case, Case)
            cases.append(case)
            line += 1
    return cases


def _measured(c: Case, output_tok_s_per_gpu: float) -> Case:
    """``c`` with its measured output tok/s per GPU set to ``output_tok_s_per_gpu``."""
    return replace(c, measurement=replace(c.measurement, output_tok_s_per_gpu=output_tok_s_per_gpu))


def test_fit_recovers_bandwidth_and_step_overhead_from_synthetic_points():
    rng = random.Random(7)
    synthetic = []
    for c in _cases():
        truth = predict_case(c, TRUE).output_tok_s_per_gpu
        noisy = truth * math.exp(rng.gauss(0.0, 0.03))  # 3 % log-normal measurement noise
        synthetic.append(_measured(c, noisy))
    # min_rows above the row count: only the default level is fitted; start from the defaults
    # (hbm_fraction 0.80, step_overhead_s 2 ms), far from the truth.
    result = fit(synthetic, Efficiency(), FitOptions(min_rows=1000, max_nfev=40, prior_sigma=2.0))
    got = {f.name: f for f in result.factors if f.level == "default"}
    # Small batches are weight-streaming plus a fixed step cost: both are identified.
    assert got["hbm_fraction"].value == pytest.approx(0.62, rel=0.10)
    assert got["step_overhead_s"].value == pytest.approx(3.5e-3, rel=0.30)
    assert got["hbm_fraction"].uncertainty > 0


def test_removing_a_row_moves_its_own_prediction_less_than_cross_validation_error():
    # Issue rule: a row's own influence on the fit stays within what held-out rows show.
    # Fit the noisy synthetic points with and without one row; its prediction may move by no
    # more than the 90th percentile of the leave-one-model-out error on the same points.
    from tokenplan.calibration.crossval import cross_validate

    rng = random.Random(11)
    synthetic = []
    for c in _cases():
        truth = predict_case(c, TRUE).output_tok_s_per_gpu
        synthetic.append(_measured(c, truth * math.exp(rng.gauss(0.0, 0.05))))
    options = FitOptions(min_rows=1000, max_nfev=20)
    full = fit(synthetic, Efficiency(), options)
    cv = cross_validate(synthetic, "model", Efficiency(), options)
    for held in (synthetic[0], synthetic[-1]):
        rest = fit([c for c in synthetic if c is not held], Efficiency(), options)
        with_row = predict_case(held, full.table.default).output_tok_s_per_gpu
        without_row = predict_case(held, rest.table.default).output_tok_s_per_gpu
        assert abs(without_row / with_row - 1) <= cv.p90_abs


def test_fit_options_weigh_trust_and_refuse_unknown_trust():
    options = FitOptions()
    assert options.weight_of_trust("high") == 1.0
    assert options.weight_of_trust("low") < options.weight_of_trust("medium") < 1.0
    with pytest.raises(ValueError, match="trust"):
        options.weight_of_trust("very")


def test_a_factor_pinned_on_its_bound_is_reported_without_sigma():
    # Points generated with hbm_fraction at its upper bound: the fit ends there, says so and
    # gives no σ (a linearised covariance at a bound is not an uncertainty).
    from tokenplan.perf.efficiency import EFFICIENCY_BOUNDS

    top = EFFICIENCY_BOUNDS["hbm_fraction"][1]
    truth = Efficiency(hbm_fraction=top, step_overhead_s=2.0e-3)
    synthetic = []
    for c in _cases():
        # measured 20 % faster than the model can go at the bound
        value = predict_case(c, truth).output_tok_s_per_gpu * 1.2
        synthetic.append(_measured(c, value))
    result = fit(synthetic, Efficiency(), FitOptions(min_rows=1000, max_nfev=40, prior_sigma=2.0))
    got = {f.name: f for f in result.factors if f.level == "default"}
    assert got["hbm_fraction"].at_bound and math.isnan(got["hbm_fraction"].uncertainty)
    assert "default.hbm_fraction" in result.at_bound
    assert result.nfev > 0 and isinstance(result.status, int)


def test_held_factors_are_not_fitted_at_any_level():

    cases = _cases()
    assert ("default", "comm_fraction") not in parameters(cases, FitOptions().min_rows, FitOptions().held)
    assert ("default", "comm_fraction") in parameters(cases, FitOptions().min_rows, held=())
    result = fit(cases[:4], Efficiency(comm_fraction=0.7), FitOptions(min_rows=1000, max_nfev=2))
    assert result.table.default.comm_fraction == 0.7 and result.held == ("comm_fraction",)


def test_a_row_planned_at_the_prior_acceptance_weighs_less():
    # Same row twice: once with "mtp" (no τ given → the prior, from_prior) and once with "mtp:3:2.5"
    # (τ stated). Trust "high" (1.0) and one row kind, so the file weight is 1.0 for both.
    # The stated-τ row weighs 1.0 × 1.0 × 1.0 = 1.0; the prior-τ row 1.0 × 1.0 × 0 = 0
    # (FitOptions.prior_acceptance_weight: τ unknown, so the row does not move the factors).
    from tokenplan.calibration.fit import _row_weight, row_kind

    def case(spec: str) -> Case:
        m = Measurement(
            2,
            "2",
            "sglang",
            "qwen3.6-27b",
            "b200",
            1,
            1,
            1,
            1,
            False,
            "fp8",
            "fp8",
            1024.0,
            1024.0,
            16.0,
            spec=spec,
            output_tok_s_per_gpu=1.0,
        )
        c = resolve_case(m)
        assert isinstance(c, Case)
        return c

    prior, stated = case("mtp"), case("mtp:3:2.5")
    assert prior.config.spec.from_prior and not stated.config.spec.from_prior
    file_weight = {row_kind(prior): 1.0}
    assert _row_weight(stated, file_weight, FitOptions()) == pytest.approx(1.0)
    assert _row_weight(prior, file_weight, FitOptions()) == 0.0
    assert _row_weight(prior, file_weight, FitOptions(prior_acceptance_weight=0.5)) == pytest.approx(0.5)
