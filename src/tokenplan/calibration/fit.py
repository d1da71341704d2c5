"""Fit the efficiency factors to measurements: robust least squares on log(predicted/measured).

Parameters are :data:`~tokenplan.perf.efficiency.EFFICIENCY_FIELDS` at the levels of
:mod:`tokenplan.calibration.levels` — the default (every row), per engine (its overheads, TTFT
path and one GEMM kernel factor per number format), and the silicon ratios per architecture and
vendor — each where rows of at least two models inform it (at most 60 in all on the
ground-truth files; ``tests/unit/calibration/test_factor_budget.py`` lists them). Each
non-default factor is pulled toward its parent (the default's value for an engine's, the
vendor's ratio for an architecture's, 1 for a vendor's) by a log-normal prior of width
``prior_sigma`` — a ridge toward the parent in the least-squares objective, so that a factor
whose own rows are few stays near its parent (its data term grows with its rows, the prior's
does not); the default is pulled toward the documented physical defaults. Bounds are
:data:`EFFICIENCY_BOUNDS` (every GEMM kernel factor 0.7–1.3; ratios:
:data:`~tokenplan.calibration.levels.SILICON_RATIO_BOUNDS`).

Residuals: ``w·log(pred/meas)`` per measured quantity (throughput, TPOT, and TTFT at
:attr:`FitOptions.ttft_weight`; an InferenceX row gives all three), ``w`` from the row's trust
(:attr:`FitOptions.trust_weight`) and its kind's size (:func:`row_kind`: throughput-only,
serving-only, or both; each kind weighs as much in all as the smallest one, so the 2,500
serving rows do not drown the throughput file). Loss
``soft_l1`` with scale 0.2: errors beyond ~20 % count linearly. Every knob, with its reason,
is a field of :class:`FitOptions`.

Uncertainty: ``cov = s²·(JᵀJ)⁻¹`` at the solution (``s²`` = residual variance), reported in
the factor's units. A factor that ends on a bound of :data:`EFFICIENCY_BOUNDS` is listed in
:attr:`FitResult.at_bound` and gets no uncertainty (NaN): the linearised covariance describes
an interior optimum, and at a bound it is either ~0 (the bound, not the data, holds the
value) or meaningless. Cross-validation (refit with one GPU or model held out) is in
:mod:`tokenplan.calibration.crossval`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from tokenplan.calibration.fit_types import FitOptions as FitOptions  # re-exported
from tokenplan.calibration.fit_types import FitResult as FitResult  # re-exported
from tokenplan.calibration.fit_types import FittedFactor as FittedFactor  # re-exported
from tokenplan.calibration.levels import (
    SILICON_RATIO_BOUNDS,
    all_levels,
    bounds_x,
    efficiency_for,
    is_ratio_level,
    parameters,
    ratio_parent_key,
    silicon_key,
    table_from_values,
    value_of,
    x_of,
)
from tokenplan.calibration.lsq import solve
from tokenplan.calibration.memo import PredictionMemo
from tokenplan.calibration.validate import Case, Predicted, predict_case
from tokenplan.errors import import_extra
from tokenplan.perf.efficiency import EFFICIENCY_FIELDS, Efficiency, at_bound

if TYPE_CHECKING:  # numpy is imported where a fit runs (plan imports no numpy)
    import numpy as np
    from numpy.typing import NDArray


def row_kind(case: Case) -> str:
    """``throughput`` (output tok/s only: dev.csv), ``serving`` (TTFT and TPOT only:
    serving-dev.csv) or ``both`` (all three: inferencex-dev.csv, also a row of that file whose
    tok/s was set aside on read); each kind is weighted as one file (see :func:`fit`)."""
    m = case.measurement
    if m.output_tok_s_per_gpu is None and m.throughput_set_aside is None:
        return "serving"
    return "both" if m.tpot_s is not None else "throughput"


def _row_weight(case: Case, file_weight: dict[str, float], options: FitOptions) -> float:
    spec = case.config.spec
    tau_prior = options.prior_acceptance_weight if spec is not None and spec.from_prior else 1.0
    return options.weight_of_trust(case.measurement.trust) * file_weight[row_kind(case)] * tau_prior


def log_residuals(case: Case, eff: Efficiency, ttft_weight: float = FitOptions().ttft_weight) -> list[float]:
    """log(pred/meas) of the case's measured quantities, TTFT times ``ttft_weight`` (0 where
    rejected)."""
    return residuals_of(case, predict_case(case, eff), ttft_weight)


def residuals_of(case: Case, p: Predicted, ttft_weight: float = FitOptions().ttft_weight) -> list[float]:
    """:func:`log_residuals` of a prediction ``p`` already made for the case."""
    m = case.measurement
    measured = [
        (p.output_tok_s_per_gpu, m.output_tok_s_per_gpu, 1.0),
        (p.tpot_s, m.tpot_s, 1.0),
        (p.ttft_s, m.ttft_s, ttft_weight),
    ]
    pairs = [(pr, me, w) for pr, me, w in measured if me is not None]
    if p.rejected is not None:
        return [0.0] * len(pairs)
    return [w * math.log(pr / me) for pr, me, w in pairs]


def fit(
    cases: list[Case],
    base: Efficiency | None = None,
    options: FitOptions = FitOptions(),
    start: dict[tuple[str, str], float] | None = None,
    *,
    start_x: dict[tuple[str, str], float] | None = None,
    memo: PredictionMemo | None = None,
    final_jacobian: bool = True,
    workers: int = 1,
) -> FitResult:
    """Fit the factors the data supports (see the module docstring). ``start``: (level,
    factor) → value to start from (a warm start, e.g. a full fit's factors for a
    cross-validation refit); the priors still pull toward ``base``. ``start_x``: the same in
    the optimiser's coordinates (:attr:`FitResult.x`), which ``start`` would round-trip
    through ``exp``/``log``; it wins over ``start``.

    With :attr:`FitOptions.memo` (the default), predictions are reused exactly through
    ``memo`` (a :class:`~tokenplan.calibration.memo.PredictionMemo`; one of the fit's own when
    None) and, without ``final_jacobian``, the Jacobian after the step that spends the budget
    is skipped (:mod:`tokenplan.calibration.lsq`: a refit whose factor uncertainties are not
    read), and each Jacobian's evaluations are split over ``workers`` processes; the factors
    are the same as without. Raises nothing beyond scipy's errors."""
    import numpy as np

    least_squares = import_extra("scipy.optimize", "calibrate").least_squares

    base = base or Efficiency()
    params = parameters(cases, options.min_rows, options.held)
    if not params:  # no factor has rows of two models: the base factors stand, nothing is fitted
        return FitResult(
            (), table_from_values({}, cases, base), len(cases), 0.0, True, 0, _NOTHING, 0, (), options.held
        )
    index = {p: i for i, p in enumerate(params)}
    start, start_x = start or {}, start_x or {}
    x0 = np.array(
        [
            start_x[(level, name)]
            if (level, name) in start_x
            else x_of(level, name, start.get((level, name), 1.0 if is_ratio_level(level) else getattr(base, name)))
            for level, name in params
        ]
    )
    lo, hi = zip(*(bounds_x(level, name) for level, name in params))
    x0 = np.clip(x0, np.array(lo) + 1e-9, np.array(hi) - 1e-9)
    n_kind = {"throughput": 0, "serving": 0, "both": 0}
    for c in cases:
        n_kind[row_kind(c)] += 1
    ref = max(min(v for v in n_kind.values() if v) if any(n_kind.values()) else 1, 1)
    file_weight = {k: math.sqrt(ref / v) if v else 1.0 for k, v in n_kind.items()}
    weights = [_row_weight(c, file_weight, options) for c in cases]

    def parent_x(level: str, name: str, x: NDArray[np.float64]) -> float:
        if level == "default":
            return x0_default[name]
        if is_ratio_level(level):  # toward the vendor's ratio, or 1: the chip changes nothing
            key = ratio_parent_key(level, name, index)
            return float(x[index[key]]) if key else 0.0  # float(): x holds float64 (same value)
        up = "default" if "/" not in level else level.split("/")[0]
        px = x[index[(up, name)]] if (up, name) in index else x[index[("default", name)]]
        silicon = silicon_key(level, name, index) if "/" in level else None
        return float(px + x[index[silicon]] if silicon else px)

    x0_default = {name: x_of("default", name, getattr(base, name)) for name in EFFICIENCY_FIELDS}

    if options.memo and memo is None:
        memo = PredictionMemo()
    elif not options.memo:
        memo = None

    def residuals(x: NDArray[np.float64]) -> NDArray[np.float64]:
        values = {p: value_of(*p, x[i]) for i, p in enumerate(params)}
        out: list[float] = []
        by_group: dict[object, Efficiency] = {}  # a case's factors depend on its engine/architecture group only
        for c, w in zip(cases, weights):
            eff = by_group.get(c.group)
            if eff is None:
                eff = by_group[c.group] = efficiency_for(values, c, base)
            p = memo.predict(c, eff) if memo is not None else predict_case(c, eff)
            out += [w * r for r in residuals_of(c, p, options.ttft_weight)]
        for (level, name), i in index.items():
            scale = options.default_prior_scale if level == "default" else 1.0
            out.append((x[i] - parent_x(level, name, x)) / options.prior_sigma * scale)
        return np.array(out)

    sparsity = _sparsity(cases, params, index, options)
    if memo is None:  # the reference path: scipy's own finite differences, every row at every point
        sol = least_squares(
            residuals,
            x0,
            bounds=(np.array(lo), np.array(hi)),
            loss=options.loss,
            f_scale=options.f_scale,
            max_nfev=options.max_nfev,
            x_scale=1.0,
            diff_step=options.diff_step,
            ftol=options.ftol,
            jac_sparsity=sparsity,
        )
    else:
        sol = solve(
            residuals,
            x0,
            np.array(lo),
            np.array(hi),
            sparsity,
            loss=options.loss,
            f_scale=options.f_scale,
            max_nfev=options.max_nfev,
            diff_step=options.diff_step,
            ftol=options.ftol,
            final_jacobian=final_jacobian,
            workers=workers,
            memo=memo,
        )
    uncertainty = _uncertainty(sol, len(params)) if sol.jac is not None else [math.nan] * len(params)
    factors = []
    for (level, name), i in index.items():
        value = value_of(level, name, sol.x[i])
        pinned = (
            any(math.isclose(value, b, rel_tol=1e-3) for b in SILICON_RATIO_BOUNDS)
            if is_ratio_level(level)
            else at_bound(name, value)
        )
        # d value / d x = exp(x) in log space; no σ for a factor the bound holds
        sigma = math.nan if pinned else math.exp(sol.x[i]) * uncertainty[i]
        factors.append(FittedFactor(level, name, value, sigma, pinned))
    values = {(f.level, f.name): f.value for f in factors}
    return FitResult(
        tuple(factors),
        table_from_values(values, cases, base),
        len(cases),
        float(sol.cost),
        bool(sol.status > 0),
        int(sol.status),
        str(sol.message),
        int(sol.nfev),
        tuple(f"{f.level}.{f.name}" for f in factors if f.at_bound),
        tuple(options.held),
        {p: float(sol.x[i]) for p, i in index.items()},
    )


_NOTHING = "no factor is informed by rows of two models (levels.MIN_MODELS): the base factors stand"


def _sparsity(
    cases: list[Case], params: list[tuple[str, str]], index: dict[tuple[str, str], int], options: FitOptions
) -> NDArray[np.bool_]:
    """Which parameter each residual can depend on: a row's residuals on the factors of its
    three levels, a prior residual on its factor and its parent's. scipy then perturbs factors
    of disjoint groups together in one finite-difference evaluation (Curtis–Powell–Reid), so a
    Jacobian costs about the default level's factors plus one group's, not one evaluation per
    factor; the Jacobian is the same."""
    import numpy as np

    rows = []
    for c in cases:
        levels = set(all_levels(c))
        cols = [i for (level, _), i in index.items() if level in levels]
        rows += [cols] * len(log_residuals_count(c, options.ttft_weight))
    for (level, name), i in index.items():
        if level == "default" or is_ratio_level(level):
            key = ratio_parent_key(level, name, index) if level != "default" else None
            rows.append([i] + ([index[key]] if key else []))
            continue
        up = "default" if "/" not in level else level.split("/")[0]
        parents = [index[p] for p in ((up, name), ("default", name)) if p in index]
        silicon = silicon_key(level, name, index) if "/" in level else None
        rows.append([i] + parents[:1] + ([index[silicon]] if silicon else []))
    out = np.zeros((len(rows), len(params)), dtype=bool)
    for r, cols in enumerate(rows):
        out[r, cols] = True
    return out


def log_residuals_count(case: Case, ttft_weight: float) -> list[None]:
    """One entry per residual :func:`log_residuals` returns for the case (its measured quantities)."""
    m = case.measurement
    return [None for v in (m.output_tok_s_per_gpu, m.tpot_s, m.ttft_s) if v is not None]


def _uncertainty(sol: Any, n_params: int) -> list[float]:  # sol: scipy's OptimizeResult
    import numpy as np

    jac = sol.jac.toarray() if hasattr(sol.jac, "toarray") else sol.jac  # sparse with jac_sparsity
    dof = max(jac.shape[0] - n_params, 1)
    s2 = 2.0 * sol.cost / dof
    try:
        cov = np.linalg.pinv(jac.T @ jac) * s2
    except np.linalg.LinAlgError:
        return [math.nan] * n_params
    return [float(math.sqrt(max(v, 0.0))) for v in np.diag(cov)]
