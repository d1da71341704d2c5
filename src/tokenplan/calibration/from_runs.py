"""Fit the efficiency factors to one measured server: a bench sweep's levels or a generate run.

The data are a few levels of one deployment (one engine, GPU, model, layout) at different
concurrencies, so the fit moves only what a concurrency sweep can tell apart, in two stages:

1. **step time** — :data:`STEP_FACTORS` (fixed step overhead, per-sequence overhead, weight and
   KV bandwidth fractions) by robust least squares on ``log(predicted / measured)`` of TPOT per
   level (the decode step time at that batch; throughput where TPOT was not measured), each
   factor pulled toward its starting value by a weak log-normal prior so factors the data
   cannot see stay put. The optimiser settings are a :class:`~tokenplan.calibration.fit.FitOptions`,
   :data:`RUN_FIT_OPTIONS`, whose values differ from the dev-set fit's for the reasons given
   there;
2. **TTFT overhead** — TTFT is ``ttft_overhead_s`` plus terms that do not depend on it, so the
   value that zeroes the median TTFT error over the levels without queueing (concurrency at or
   below the running batch) is found in closed form, then clipped to its bounds.

:func:`tokenplan.calibration.update.update_fit` runs both stages from the shipped factors of the
measured group and keeps only what the data inform (calibration is an update of the shipped fit,
not a replacement).

Everything here is pure: cases come resolved (:class:`~tokenplan.calibration.validate.Case`),
predictions go through the same ``job.evaluate`` as ``tokenplan predict``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tokenplan.calibration.fit import FitOptions
from tokenplan.calibration.validate import Case, predict_case
from tokenplan.errors import import_extra
from tokenplan.job.evaluate import Rejection, evaluate
from tokenplan.perf.efficiency import EFFICIENCY_BOUNDS, Efficiency
from tokenplan.perf.step import step_time
from tokenplan.stats import percentile

if TYPE_CHECKING:  # numpy is imported where a fit runs (plan imports no numpy)
    import numpy as np
    from numpy.typing import NDArray

STEP_FACTORS = ("step_overhead_s", "per_sequence_overhead_s", "hbm_fraction", "attention_fraction")

# The dev-set fit's knobs, set for a run of one deployment. Why they differ from the defaults:
# - prior_sigma 1.0, default_prior_scale 0.05 (the prior weight): the data are the user's own
#   server, which should win over the catalog defaults; a factor may move e-fold before its
#   prior costs as much as 1/20 of one level's log error. The dev-set fit pools many
#   deployments and keeps groups near their parents (0.5, and 1.0 for groups).
# - f_scale 0.1: the levels of one server are measured with a few % noise, so a level more
#   than 10 % off is an outlier (one engine regime the model misses), not data to chase; the
#   dev-set fit pools heterogeneous public sources and uses 0.2.
# - max_nfev 200: a run has 3–10 levels and 4 factors, so an evaluation costs a few
#   predictions and the budget is not a run-time concern; let it converge.
# trust_weight and ttft_weight are unused here (one source, TTFT fitted in closed form).
RUN_FIT_OPTIONS = FitOptions(prior_sigma=1.0, default_prior_scale=0.05, max_nfev=200, f_scale=0.1)
_OFFSET = {"per_sequence_overhead_s": 1e-6}  # per-sequence overhead may be 0: log(value + 1 µs)


@dataclass(frozen=True, slots=True)
class LevelFit:
    """One level after the fit: concurrency, running batch of the model, and predicted vs
    measured TPOT, TTFT (seconds) and output tok/s per GPU (None where not measured)."""

    concurrency: float
    batch: float
    tpot_s: tuple[float, float | None]
    ttft_s: tuple[float, float | None]
    output_tok_s_per_gpu: tuple[float, float | None]


@dataclass(frozen=True, slots=True)
class RunFit:
    """The fitted factors and how well they reproduce the levels.

    Attributes:
        efficiency: the fitted factors (the others as given).
        factors: fitted name → (value, ±1σ) in the factor's unit.
        at_bound: fitted factors that ended on a bound of :data:`EFFICIENCY_BOUNDS` (the data
            asks for a value the planner considers unphysical for a GPU).
        levels: per-level predictions.
        converged: the optimiser reported success.
    """

    efficiency: Efficiency
    factors: dict[str, tuple[float, float]]
    at_bound: tuple[str, ...]
    levels: tuple[LevelFit, ...]
    converged: bool


def _to_x(name: str, value: float) -> float:
    return math.log(value + _OFFSET.get(name, 0.0))


def _from_x(name: str, x: float) -> float:
    return math.exp(x) - _OFFSET.get(name, 0.0)


def _step_residual(case: Case, eff: Efficiency) -> float:
    p = predict_case(case, eff)
    m = case.measurement
    if p.rejected is not None:
        return 0.0
    if m.tpot_s is not None:
        return math.log(p.tpot_s / m.tpot_s)
    assert m.output_tok_s_per_gpu is not None  # the cases fitted have TPOT or throughput measured
    return math.log(p.output_tok_s_per_gpu / m.output_tok_s_per_gpu)


def fit_step_factors(
    cases: list[Case], base: Efficiency, factors: tuple[str, ...] = STEP_FACTORS, options: FitOptions = RUN_FIT_OPTIONS
) -> tuple[Efficiency, dict[str, tuple[float, float]], bool]:
    """Stage 1 (see the module docstring): the factors, their ±1σ and whether it converged.

    Raises:
        ValueError: no case has TPOT or throughput measured.
    """
    import numpy as np

    least_squares = import_extra("scipy.optimize", "calibrate").least_squares

    usable = [c for c in cases if c.measurement.tpot_s or c.measurement.output_tok_s_per_gpu]
    if not usable:
        raise ValueError("no level has TPOT or throughput measured")
    lo = np.array([_to_x(f, max(EFFICIENCY_BOUNDS[f][0], 0.0)) for f in factors])
    hi = np.array([_to_x(f, EFFICIENCY_BOUNDS[f][1]) for f in factors])
    x0 = np.clip(np.array([_to_x(f, getattr(base, f)) for f in factors]), lo + 1e-9, hi - 1e-9)

    def eff_of(x: NDArray[np.float64]) -> Efficiency:
        return base.with_values(**{f: _from_x(f, v) for f, v in zip(factors, x)})

    def residuals(x: NDArray[np.float64]) -> NDArray[np.float64]:
        eff = eff_of(x)
        data = [_step_residual(c, eff) for c in usable]
        prior = [options.default_prior_scale * (xi - x0i) / options.prior_sigma for xi, x0i in zip(x, x0)]
        return np.array(data + prior)

    sol = least_squares(
        residuals,
        x0,
        bounds=(lo, hi),
        loss=options.loss,
        f_scale=options.f_scale,
        diff_step=options.diff_step,
        max_nfev=options.max_nfev,
    )
    dof = max(len(sol.fun) - len(factors), 1)
    try:
        cov = np.linalg.pinv(sol.jac.T @ sol.jac) * (2.0 * sol.cost / dof)
        sigma_x = [math.sqrt(max(v, 0.0)) for v in np.diag(cov)]
    except np.linalg.LinAlgError:
        sigma_x = [math.nan] * len(factors)
    fitted = {f: (_from_x(f, x), (math.exp(x)) * s) for f, x, s in zip(factors, sol.x, sigma_x)}
    return eff_of(sol.x), fitted, bool(sol.status > 0)


def ttft_gaps(cases: list[Case], eff: Efficiency) -> list[float]:
    """Measured − predicted TTFT (seconds) of the levels that measured TTFT and do not queue
    (their requests in flight per replica fit the running batch): a queued level's TTFT is mostly
    its wait, which no overhead stands for."""
    gaps = []
    for c in cases:
        m = c.measurement
        if m.ttft_s is None:
            continue
        p = predict_case(c, eff)
        ev = evaluate(c.model, c.gpu, c.config, eff, c.isl, c.osl, c.concurrency_per_replica)
        if p.rejected is None and not isinstance(ev, Rejection) and (c.concurrency_per_replica or 0) <= ev.steady.batch:
            gaps.append(m.ttft_s - p.ttft_s)
    return gaps


def fit_ttft_overhead(cases: list[Case], eff: Efficiency) -> Efficiency:
    """Stage 2: shift ``ttft_overhead_s`` by the median of :func:`ttft_gaps`; ``eff`` unchanged if
    no level gives one."""
    gaps = ttft_gaps(cases, eff)
    if not gaps:
        return eff
    lo, hi = EFFICIENCY_BOUNDS["ttft_overhead_s"]
    return eff.with_values(ttft_overhead_s=min(max(eff.ttft_overhead_s + percentile(gaps, 50), lo), hi))


def level_fit(case: Case, eff: Efficiency) -> LevelFit:
    """Predicted vs measured values of one level with ``eff``."""
    p = predict_case(case, eff)
    ev = evaluate(case.model, case.gpu, case.config, eff, case.isl, case.osl, case.concurrency_per_replica)
    batch = math.nan if isinstance(ev, Rejection) else ev.steady.batch
    m = case.measurement
    return LevelFit(
        m.concurrency or math.nan,
        batch,
        (p.tpot_s, m.tpot_s),
        (p.ttft_s, m.ttft_s),
        (p.output_tok_s_per_gpu, m.output_tok_s_per_gpu),
    )


def median_abs_error(levels: tuple[LevelFit, ...] | list[LevelFit]) -> float | None:
    """Median over levels of ``|predicted / measured − 1|`` of output tok/s per GPU: how far the
    fitted model is from what it was fitted on (0.5 = half off; 79.5 = predicts 80.5×). None
    when no level has a measured, positive throughput and a finite prediction."""
    errors = [
        abs(pred / meas - 1.0)
        for pred, meas in (lv.output_tok_s_per_gpu for lv in levels)
        if meas is not None and meas > 0 and pred is not None and math.isfinite(pred)
    ]
    return percentile(errors, 50) if errors else None


def predicted_step_s(case: Case, eff: Efficiency, batch: float) -> float:
    """The model's decode step time (seconds) of the case's deployment at ``batch`` running
    sequences, at the case's running mean context (ISL + OSL/2 for fixed lengths).

    Raises:
        ValueError: the case's configuration is rejected.
    """
    ev = evaluate(case.model, case.gpu, case.config, eff, case.isl, case.osl, max(batch, 1.0))
    if isinstance(ev, Rejection):
        raise ValueError(ev.reason)
    return step_time(ev.deployment, eff, batch, case.isl.mean + case.osl.running_mean / 2).total_s


def linear_step_law(points: list[tuple[float, float]]) -> tuple[float, float] | None:
    """Least-squares line ``step_s = a + b·batch`` through (batch, step seconds) points: (a, b)
    in seconds and seconds per sequence; None with fewer than two distinct batches."""
    if len({b for b, _ in points}) < 2:
        return None
    n = len(points)
    mb = sum(b for b, _ in points) / n
    ms = sum(s for _, s in points) / n
    sxx = sum((b - mb) ** 2 for b, _ in points)
    slope = sum((b - mb) * (s - ms) for b, s in points) / sxx
    return ms - slope * mb, slope
