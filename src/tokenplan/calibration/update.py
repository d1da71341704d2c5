"""Calibration as an update of the shipped fit: the factors a user's measurements of one
deployment inform, estimated with the shipped value as the prior, and nothing else.

:func:`update_fit` runs the two stages of :mod:`tokenplan.calibration.from_runs` starting from
(and pulled toward, with :data:`UPDATE_FIT_OPTIONS`) the shipped factors of the measured
``engine/architecture`` group, then:

1. **informed factors** — a step factor counts as informed when the data shrink its prior ±σ by
   at least :data:`INFORMED_SHRINK` (10 %). In the fit's own units (log error per level, prior
   residual ``w·(x − x₀)`` with ``w = σ_obs / PRIOR_SIGMA``: see :data:`UPDATE_FIT_OPTIONS`) the prior variance of ``log x`` is
   ``1/w²`` and the posterior one is ``[(JᵀJ + w²·I)⁻¹]ᵢᵢ`` with ``J`` the Jacobian of the
   levels' log errors (Gaussian linearisation: Bishop, *PRML* §3.3). ``ttft_overhead_s`` is
   informed when a level that does not queue measured TTFT. Factors not informed stay exactly
   at the shipped value; factors outside the fitted set are never touched.
2. **never worse on the user's levels** — the median |predicted/measured − 1| of TPOT (or of
   output tok/s where TPOT was not measured) and of TTFT over the levels is computed with the
   shipped factors and with each candidate, in order: the fitted step factors with the TTFT
   overhead refitted on them, then without; the same with the step factors moved half and a
   quarter of the way from the shipped values (in log space); the TTFT overhead alone. The
   first candidate no worse than the shipped fit on both is kept, else the shipped factors (an
   update that moves nothing). The fit minimises a robust sum over levels, the check a median,
   so a full step can lose on the median where a shorter one does not.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import ClassVar

from tokenplan.bench_schema import LevelErrors, UpdateProfile
from tokenplan.calibration.fit import FitOptions
from tokenplan.calibration.from_runs import (
    STEP_FACTORS,
    RunFit,
    _from_x,
    _step_residual,
    _to_x,
    fit_step_factors,
    fit_ttft_overhead,
    level_fit,
    ttft_gaps,
)
from tokenplan.calibration.validate import Case
from tokenplan.errors import InputError
from tokenplan.perf.efficiency import Efficiency, EfficiencyTable, at_bound
from tokenplan.results import JsonResult
from tokenplan.stats import percentile

INFORMED_SHRINK = 0.9  # posterior σ / prior σ below this: the data inform the factor
_TOL = 1e-9  # "no worse": equal up to float noise
STEP_FRACTIONS = (1.0, 0.5, 0.25)  # how far toward the fitted step factors a candidate goes
# The prior of an update: each factor's log is normal around the shipped value with σ
# PRIOR_SIGMA = 0.5 (as the full fit's group prior, FitOptions.prior_sigma: a group may differ
# from its parent by ~1.6×). A level's log error is normal with σ_obs, estimated from the data
# (empirical Bayes, two passes): the first pass assumes the floor NOISE_FLOOR = 0.01 (a bench
# level's mean TPOT over tens of requests is measured to ~1 %), so it follows the data as far as
# they go; the second uses the robust spread of the first pass's level errors (1.4826 × median
# |log error|, corrected for the factors the first pass fitted to those same levels, at least the
# floor; the prior's σ where the levels leave no residual freedom: :func:`level_noise`). The prior
# residual's weight is σ_obs / PRIOR_SIGMA: rows the
# model cannot follow closely (ten real vLLM H200 rows: σ_obs 0.074, weight 0.15) move a factor they see
# weakly little, while a clean sweep (the floor: 0.02) is followed closely. Optimiser budget and
# loss as RUN_FIT_OPTIONS.
PRIOR_SIGMA = 0.5
NOISE_FLOOR = 0.01
UPDATE_FIT_OPTIONS = FitOptions(prior_sigma=PRIOR_SIGMA, default_prior_scale=NOISE_FLOOR, max_nfev=200, f_scale=0.1)


def _options(noise: float) -> FitOptions:
    """The update's fit options for level noise ``noise`` (σ of a level's log error)."""
    return replace(UPDATE_FIT_OPTIONS, default_prior_scale=noise)


def level_noise(cases: list[Case], eff: Efficiency, fitted: float = 0.0) -> float:
    """σ_obs of the levels' log step error at ``eff``, fitted to those same levels with
    ``fitted`` effective parameters: 1.4826 × median |log(pred/meas)| (the normal-consistent
    median absolute deviation about zero) × √(n / (n − fitted)), the residual degrees-of-freedom
    correction of a fitted model's residual variance (Σr²/(n − p); for a regularised fit p is the
    trace of its hat matrix, Hastie, Tibshirani & Friedman, *The Elements of Statistical
    Learning*, §3.4.1, eq. 3.50), at least :data:`NOISE_FLOOR`. With less than half a level of
    residual freedom the residuals say nothing of the noise (one level is fitted exactly): then
    σ_obs = :data:`PRIOR_SIGMA`, and a level weighs as much as the prior. (Without this one
    vLLM/Blackwell row of dev.csv moved ``step_overhead_s`` +368 %, and two vLLM/CDNA3 rows
    ``attention_fraction`` −69 %.)"""
    errors = [abs(_step_residual(c, eff)) for c in cases if c.measurement.tpot_s or c.measurement.output_tok_s_per_gpu]
    if not errors:
        return UPDATE_FIT_OPTIONS.default_prior_scale
    free = len(errors) - fitted
    if free < 0.5:
        return PRIOR_SIGMA
    return max(1.4826 * percentile(errors, 50) * math.sqrt(len(errors) / free), NOISE_FLOOR)


def effective_parameters(shrink: Mapping[str, float]) -> float:
    """The trace of a ridge fit's hat matrix in the factors' standardised coordinates,
    Σ (1 − (posterior σ / prior σ)²) over the factors (each term the share of a factor's
    prior variance the data remove; ESL §3.4.1)."""
    return sum(1.0 - s * s for s in shrink.values())


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
        kept: which candidate was kept (``step+ttft``, ``step``, ``step×0.5+ttft``, …, ``ttft``,
            ``shipped``).
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
        if mt and math.isfinite(pt):  # a rejected configuration predicts NaN: no error to count
            tpot.append(abs(pt / mt - 1.0))
        elif mo and po is not None and math.isfinite(po):
            tpot.append(abs(po / mo - 1.0))
        if mf and math.isfinite(pf):
            ttft.append(abs(pf / mf - 1.0))
    return {"tpot": percentile(tpot, 50) if tpot else None, "ttft": percentile(ttft, 50) if ttft else None}


def posterior_shrink(
    cases: list[Case],
    eff: Efficiency,
    options: FitOptions = UPDATE_FIT_OPTIONS,
    factors: tuple[str, ...] = STEP_FACTORS,
) -> dict[str, float]:
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
    w2 = (options.default_prior_scale / options.prior_sigma) ** 2
    post = np.linalg.inv(jac.T @ jac + w2 * np.eye(len(factors)))
    return {f: float(math.sqrt(max(post[i, i], 0.0) * w2)) for i, f in enumerate(factors)}


def _no_worse(err: dict[str, float | None], ref: dict[str, float | None]) -> bool:
    for k in ref:
        mine, shipped = err[k], ref[k]
        if mine is not None and shipped is not None and mine > shipped + _TOL:
            return False
    return True


def update_fit(cases: list[Case], shipped: Efficiency) -> UpdateFit:
    """The update of ``shipped`` (the shipped factors of the cases' group) by ``cases`` (see the
    module docstring).

    Raises:
        ValueError: no case has TPOT or throughput measured.
    """
    first, _, _ = fit_step_factors(cases, shipped, options=UPDATE_FIT_OPTIONS)
    p_eff = effective_parameters(posterior_shrink(cases, first, UPDATE_FIT_OPTIONS))
    options = _options(level_noise(cases, first, p_eff))
    stepped, fitted, converged = fit_step_factors(cases, shipped, options=options)
    shrink = posterior_shrink(cases, stepped, options)
    informed = [f for f in STEP_FACTORS if shrink[f] < INFORMED_SHRINK]
    ref = level_errors(cases, shipped)
    kept, eff = "shipped", shipped
    for name, candidate in _candidates(cases, shipped, stepped, informed):
        if _no_worse(level_errors(cases, candidate), ref):
            kept, eff = name, candidate
            break
    moved = [f for f in (*STEP_FACTORS, "ttft_overhead_s") if getattr(eff, f) != getattr(shipped, f)]
    pinned = tuple(f for f in moved if at_bound(f, getattr(eff, f)))  # a bound holds it: no ±σ
    factors = {
        f: (getattr(eff, f), math.nan if f in pinned else fitted[f][1] if f in fitted else _ttft_sigma(cases, eff))
        for f in moved
    }
    run = RunFit(eff, factors, pinned, tuple(level_fit(c, eff) for c in cases), converged)
    return UpdateFit(run, {f: getattr(shipped, f) for f in moved}, shrink, ref, level_errors(cases, eff), kept)


def _candidates(
    cases: list[Case], shipped: Efficiency, stepped: Efficiency, informed: list[str]
) -> Iterator[tuple[str, Efficiency]]:
    """The updates to try, best first (module docstring, step 2): the informed step factors moved
    the whole way, half and a quarter of the way in log space (``step×t``), each with and then
    without the TTFT overhead refitted on it, then the TTFT overhead alone."""
    for t in STEP_FRACTIONS if informed else ():
        step = shipped.with_values(
            **{
                f: _from_x(f, (1 - t) * _to_x(f, getattr(shipped, f)) + t * _to_x(f, getattr(stepped, f)))
                for f in informed
            }
        )
        suffix = "" if t == 1.0 else f"×{t:g}"
        yield f"step{suffix}+ttft", fit_ttft_overhead(cases, step)
        yield f"step{suffix}", step
    yield "ttft", fit_ttft_overhead(cases, shipped)


def _ttft_sigma(cases: list[Case], eff: Efficiency) -> float:
    """±1σ of the TTFT overhead (seconds): the standard error of the median gap the shift takes
    (:func:`~tokenplan.calibration.from_runs.ttft_gaps`, the levels that do not queue), √(π/2) ≈
    1.2533 times the mean's s/√n for normal gaps (the median's asymptotic variance π·σ²/(2n),
    Kendall & Stuart, *The Advanced Theory of Statistics* I, §10.10); NaN with fewer than two.
    It was taken over every level with a TTFT, queued ones too (a wait of seconds, which the
    median leaves out): ±13 s on a 66 ms overhead."""
    gaps = ttft_gaps(cases, eff)
    if len(gaps) < 2:
        return math.nan
    mean = sum(gaps) / len(gaps)
    return math.sqrt(math.pi / 2) * math.sqrt(sum((g - mean) ** 2 for g in gaps) / (len(gaps) - 1) / len(gaps))


@dataclass(frozen=True)
class MovedFactor(JsonResult):
    """A factor an update moved: its shipped and calibrated values, ±1σ (None: the fit cannot tell)
    and whether a bound of the factor holds it (``perf.efficiency.at_bound``: then no ±1σ)."""

    shipped: float
    calibrated: float
    uncertainty: float | None
    at_bound: bool = False


@dataclass(frozen=True)
class UpdatedGroup(JsonResult):
    """One ``engine/architecture`` group of an update: its rows, the candidate kept
    (:attr:`UpdateFit.kept`), the factors moved and the median |error| with the shipped and with
    the calibrated factors."""

    rows: int
    kept: str
    factors: Mapping[str, MovedFactor]
    median_abs_error_shipped: LevelErrors
    median_abs_error_calibrated: LevelErrors


@dataclass(frozen=True)
class CalibrationUpdate(JsonResult):
    """``calibrate FILE.csv`` without ``--refit``: the rows fitted and skipped, per group what
    moved (:class:`UpdatedGroup`) and the update profile
    (:class:`~tokenplan.bench_schema.UpdateProfile`). JSON: ``n``, ``skipped``, ``groups``,
    ``profile``."""

    SCHEMA_VERSION: ClassVar[int | None] = 1

    n: int
    skipped: int
    groups: Mapping[str, UpdatedGroup]
    profile: UpdateProfile


def _group(fit: UpdateFit) -> UpdatedGroup:
    factors = {
        k: MovedFactor(fit.prior[k], v, None if math.isnan(s) else s, at_bound(k, v))
        for k, (v, s) in fit.run.factors.items()
    }
    shipped, calibrated = (LevelErrors(e["tpot"], e["ttft"]) for e in (fit.error_shipped, fit.error_calibrated))
    return UpdatedGroup(len(fit.run.levels), fit.kept, factors, shipped, calibrated)


def update_shipped(
    cases: list[Case], skipped: int, shipped: EfficiencyTable, provenance: str, files: str
) -> CalibrationUpdate:
    """The update of the shipped fit by measured rows of any number of deployments: the rows are
    grouped by ``engine/architecture`` and each group updates its shipped factors
    (:func:`update_fit`); a group whose rows carry neither TPOT nor throughput is left out (the
    shipped fit stands). ``skipped``: rows the files held that could not be predicted; ``files``:
    the files, as the error names them.

    Raises:
        InputError: no group with TPOT or throughput measured.
    """
    by_group: dict[str, list[Case]] = {}
    for c in cases:
        by_group.setdefault(c.group, []).append(c)
    fits: dict[str, UpdateFit] = {}
    for group, rows in sorted(by_group.items()):
        try:
            fits[group] = update_fit(rows, shipped.resolve(rows[0].engine, rows[0].architecture))
        except ValueError:
            continue
    if not fits:
        raise InputError("measurement files", files, "rows with TPOT or output tok/s measured")
    profile = UpdateProfile(
        "shipped",
        {g: {k: v for k, (v, _) in f.run.factors.items()} for g, f in fits.items()},
        {f"{g}.{k}": v for g, f in fits.items() for k, v in f.prior.items()},
        {f"{g}.{k}": s for g, f in fits.items() for k, (_, s) in f.run.factors.items() if not math.isnan(s)},
        provenance,
    )
    return CalibrationUpdate(len(cases), skipped, {g: _group(f) for g, f in fits.items()}, profile)
