"""Calibration as an update of the shipped fit: the factors a user's measurements of one
deployment inform, estimated with the shipped value as the prior, and nothing else.

:func:`update_fit` runs the two stages of :mod:`tokenplan.calibration.from_runs` starting from
(and pulled toward) the shipped factors of the measured ``engine/architecture`` group, then:

1. **informed factors** — a step factor counts as informed when the data shrink its prior ±σ by
   at least :data:`INFORMED_SHRINK` (10 %). In the fit's own units (log error per level, prior
   residual ``w·(x − x₀)`` with ``w = default_prior_scale / prior_sigma`` of
   :data:`~tokenplan.calibration.from_runs.RUN_FIT_OPTIONS`) the prior variance of ``log x`` is
   ``1/w²`` and the posterior one is ``[(JᵀJ + w²·I)⁻¹]ᵢᵢ`` with ``J`` the Jacobian of the
   levels' log errors (Gaussian linearisation: Bishop, *PRML* §3.3). ``ttft_overhead_s`` is
   informed when a level that does not queue measured TTFT. Factors not informed stay exactly
   at the shipped value; factors outside the fitted set are never touched.
2. **never worse on the user's levels** — the median |predicted/measured − 1| of TPOT (or of
   output tok/s where TPOT was not measured) and of TTFT over the levels is computed with the
   shipped factors and with each candidate, in order: step factors and TTFT overhead, step
   factors only, TTFT overhead only; the first candidate no worse than the shipped fit on both
   is kept, else the shipped factors (an update that moves nothing).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tokenplan.calibration.from_runs import (RUN_FIT_OPTIONS, STEP_FACTORS, RunFit, _from_x, _step_residual, _to_x,
                                             fit_step_factors, fit_ttft_overhead, level_fit)
from tokenplan.calibration.validate import Case, percentile
from tokenplan.perf.efficiency import Efficiency, at_bound

INFORMED_SHRINK = 0.9  # posterior σ / prior σ below this: the data inform the factor
_TOL = 1e-9  # "no worse": equal up to float noise


@dataclass(frozen=True, slots=True)
class UpdateFit:
    """An update of the shipped factors of one deployment.

    Attributes:
        run: the fit (``run.efficiency``: the shipped factors with the informed ones replaced;
            ``run.factors``: informed name → (value, ±1σ; NaN where the fit cannot tell)).
        prior: informed name → its shipped value (the prior the update started from).
        shrink: fitted step factor → posterior σ / prior σ (1 = the data say nothing).
        error_shipped, error_calibrated: metric (``tpot``, ``ttft``) → median |predicted /
            measured − 1| over the levels with the shipped and with the kept factors (None when
            no level measured it).
        kept: which candidate was kept (``step+ttft``, ``step``, ``ttft``, ``shipped``).
    """

    run: RunFit
    prior: dict[str, float]
    shrink: dict[str, float]
    error_shipped: dict[str, float | None]
    error_calibrated: dict[str, float | None]
    kept: str


def level_errors(cases: list[Case], eff: Efficiency) -> dict[str, float | None]:
    """Median over levels of |predicted/measured − 1|: ``tpot`` (TPOT, or output tok/s per GPU
    where a level has no TPOT) and ``ttft``; None where no level measured it."""
    tpot, ttft = [], []
    for c in cases:
        lf = level_fit(c, eff)
        (pt, mt), (pf, mf), (po, mo) = lf.tpot_s, lf.ttft_s, lf.output_tok_s_per_gpu
        if mt:
            tpot.append(abs(pt / mt - 1.0))
        elif mo:
            tpot.append(abs(po / mo - 1.0))
        if mf:
            ttft.append(abs(pf / mf - 1.0))
    return {"tpot": percentile(tpot, 50) if tpot else None, "ttft": percentile(ttft, 50) if ttft else None}


def posterior_shrink(cases: list[Case], eff: Efficiency, factors: tuple[str, ...] = STEP_FACTORS) -> dict[str, float]:
    """Posterior σ / prior σ of each factor's log at ``eff`` (see the module docstring, step 1);
    the Jacobian by central differences of 1e-3 in log space."""
    import numpy as np

    usable = [c for c in cases if c.measurement.tpot_s or c.measurement.output_tok_s_per_gpu]
    h = 1e-3
    cols = []
    for f in factors:
        x = _to_x(f, getattr(eff, f))
        hi = eff.with_values(**{f: _from_x(f, x + h)})
        lo = eff.with_values(**{f: _from_x(f, x - h)})
        cols.append([(_step_residual(c, hi) - _step_residual(c, lo)) / (2 * h) for c in usable])
    jac = np.array(cols).T
    w2 = (RUN_FIT_OPTIONS.default_prior_scale / RUN_FIT_OPTIONS.prior_sigma) ** 2
    post = np.linalg.inv(jac.T @ jac + w2 * np.eye(len(factors)))
    return {f: float(math.sqrt(max(post[i, i], 0.0) * w2)) for i, f in enumerate(factors)}


def _no_worse(err: dict[str, float | None], ref: dict[str, float | None]) -> bool:
    return all(err[k] is None or ref[k] is None or err[k] <= ref[k] + _TOL for k in ref)


def update_fit(cases: list[Case], shipped: Efficiency) -> UpdateFit:
    """The update of ``shipped`` (the shipped factors of the cases' group) by ``cases`` (see the
    module docstring).

    Raises:
        ValueError: no case has TPOT or throughput measured.
    """
    stepped, fitted, converged = fit_step_factors(cases, shipped)
    shrink = posterior_shrink(cases, stepped)
    informed = [f for f in STEP_FACTORS if shrink[f] < INFORMED_SHRINK]
    step_eff = shipped.with_values(**{f: getattr(stepped, f) for f in informed})
    both = fit_ttft_overhead(cases, step_eff)
    ttft_only = fit_ttft_overhead(cases, shipped)
    ref = level_errors(cases, shipped)
    kept, eff = "shipped", shipped
    for name, candidate in (("step+ttft", both), ("step", step_eff), ("ttft", ttft_only)):
        if _no_worse(level_errors(cases, candidate), ref):
            kept, eff = name, candidate
            break
    moved = [f for f in (*STEP_FACTORS, "ttft_overhead_s") if getattr(eff, f) != getattr(shipped, f)]
    factors = {f: (getattr(eff, f), fitted[f][1] if f in fitted else _ttft_sigma(cases, eff)) for f in moved}
    pinned = tuple(f for f in moved if at_bound(f, getattr(eff, f)))
    run = RunFit(eff, factors, pinned, tuple(level_fit(c, eff) for c in cases), converged)
    return UpdateFit(run, {f: getattr(shipped, f) for f in moved}, shrink, ref, level_errors(cases, eff), kept)


def _ttft_sigma(cases: list[Case], eff: Efficiency) -> float:
    """±1σ of the TTFT overhead: the standard error of the mean TTFT gap (measured − predicted)
    over the levels that measured TTFT; NaN with fewer than two."""
    gaps = [c.measurement.ttft_s - level_fit(c, eff).ttft_s[0] for c in cases if c.measurement.ttft_s]
    if len(gaps) < 2:
        return math.nan
    mean = sum(gaps) / len(gaps)
    return math.sqrt(sum((g - mean) ** 2 for g in gaps) / (len(gaps) - 1) / len(gaps))
