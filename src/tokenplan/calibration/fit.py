"""Fit the efficiency factors to measurements: robust least squares on log(predicted/measured).

Parameters are :data:`~tokenplan.perf.efficiency.EFFICIENCY_FIELDS` at three levels — the
default (every row), per engine, and per ``engine/architecture`` — where the data holds at
least ``min_rows`` rows for the level. A case uses the most specific value of each factor.
The factors the silicon sets for every engine (:data:`~tokenplan.calibration.levels.SILICON_FACTORS`) have a fourth level,
``*/architecture``: a ratio to the engine's value shared by all engines on that architecture,
which an engine × architecture pair without a group of its own inherits, and above it the
vendor's ratio (``*:amd``, ``*:nvidia``), which a chip no row measured takes. Group factors are
pulled toward their parent (the engine's value, times the silicon ratio where there is one) by
a weak prior (a log-normal of width ``prior_sigma``), a silicon ratio toward its vendor's and a
vendor's toward 1 the same way, so
a group with little data stays near its parent instead of fitting noise; the default is pulled
toward the documented physical defaults. Bounds are :data:`EFFICIENCY_BOUNDS` (ratios:
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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

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
from tokenplan.perf.efficiency import EFFICIENCY_FIELDS, Efficiency, EfficiencyTable, at_bound

if TYPE_CHECKING:  # numpy is imported where a fit runs (plan imports no numpy)
    import numpy as np
    from numpy.typing import NDArray


@dataclass(frozen=True, slots=True)
class FitOptions:
    """Fit settings, each with the reason for its value.

    Attributes:
        min_rows: rows a group needs before it gets its own factors (25: with ~5 factors per
            group, five rows per factor before a group may leave its parent).
        prior_sigma: width (log) of the prior pulling a group's factor toward its parent (0.5:
            a group may differ from its parent by ~1.6× before the prior costs as much as one
            row at the 20 % inlier scale).
        default_prior_scale: weight of the prior that pulls the *default* level toward the
            documented physical defaults, relative to a group's prior (0.3: the default is fitted
            on every row, so the data should win; the prior only keeps factors no row touches
            near their documented value).
        trust_weight: residual weight per ``trust`` value of a row (``dev.csv`` README: high =
            vendor tables and MLPerf, medium, low = single third-party runs "weigh them less").
            1.0 / 0.7 / 0.4 give a low-trust row the pull of ~0.4² = 1/6 of a high-trust one in
            the squared loss. Rows are validated on read, so every trust here is known.
        prior_acceptance_weight: residual weight of a row run with speculative decoding whose
            acceptance length it does not state, so that τ comes from the prior
            (``perf/speculative.py``): 0, i.e. such a row is predicted and validated like any
            other but does not move the factors. Its decode rate is τ × (one verify step), and
            τ is unknown for it: the prior's own sources span p = 0.65 (Qwen3.8-27B MTP,
            teacher-forced, pooled over four domains: tenstorrent/vllm#442) to 0.87 (vLLM on
            Qwen3.6-27B) per draft position, τ at k = 3 from 2.3 to 3.3 (1 + p + p² + p³), and InferenceX drafts on
            random-token prompts with ``--ignore-eos``, where no acceptance is published. A
            τ-scaled row cannot tell a wrong τ from a wrong GEMM or bandwidth factor, so fitting
            on it lets the prior's error into factors every other row shares (with weight 1 the
            InferenceX SGLang DeepSeek-R1 MTP rows, still 30–36 % too fast, pinned SGLang's
            Blackwell ``gemm_kernel_factor`` at its 0.25 bound; weights 0.71 and 0.4 left it at
            0.26 and 0.30).
        ttft_weight: weight of a serving row's TTFT residual next to its TPOT residual (0.8):
            TTFT at a fixed concurrency carries queueing noise the model only approximates
            (arrival waves), so TPOT, the cleaner step-time measurement, leads.
        max_nfev: function-evaluation budget of the optimiser (60). Each evaluation also
            costs one finite-difference Jacobian, i.e. every fit row predicted once per
            parameter, so the budget bounds the run time. The dev-set fit meets ``ftol`` in
            well under 30 evaluations; 60 leaves room for other data without letting a fit
            that does not converge run for long, and :attr:`FitResult.converged`/``status``
            say which it was.
        loss, f_scale: robust loss and its inlier scale (log error 0.2: errors beyond ~20 %
            count linearly, so a few rows the model cannot describe do not drag every factor).
        ftol: relative change of the robust cost below which the optimiser stops (1e-4). On
            the dev set the cost falls from 17.8 to 13.48 in seven evaluations, then by under
            0.003 % per step while the factors move by < 0.2 % in all (step norm in log
            space), far inside their ±1σ of 5–15 %; scipy's default 1e-8 spends ~50 more
            evaluations (two more minutes) on those digits.
        diff_step: relative finite-difference step of the Jacobian in log space (1e-3: a
            0.1 % change of a factor moves predictions well above float noise while staying
            inside the model's piecewise regimes — batch caps and chunk sizes are steps).
        held: factors not fitted at any level but held at their documented default (the
            ``base`` of :func:`fit`), because the data do not identify them. ``comm_fraction``:
            fitted freely it ends on its physical bound (0.85, NCCL's ~80 % of NVLink line
            rate), yet holding it at its 0.70 prior moves the dev-set medians by under half a
            point — the few TP rows that push it up ask for a faster collective than NCCL's
            ring/tree (custom one-shot all-reduce, NVLS, overlap with compute), which a
            bandwidth fraction cannot stand for.
        memo: reuse a row's prediction where the factors its evaluation read are unchanged
            (:class:`~tokenplan.calibration.memo.PredictionMemo`: exact, the same residuals
            bit for bit; False evaluates every row at every point, the reference the tests
            compare it with).
    """

    min_rows: int = 25
    prior_sigma: float = 0.5
    default_prior_scale: float = 0.3
    trust_weight: tuple[tuple[str, float], ...] = (("high", 1.0), ("medium", 0.7), ("low", 0.4))
    prior_acceptance_weight: float = 0.0
    ttft_weight: float = 0.8
    max_nfev: int = 60
    loss: str = "soft_l1"
    f_scale: float = 0.2
    ftol: float = 1e-4
    diff_step: float = 1e-3
    held: tuple[str, ...] = ("comm_fraction",)
    memo: bool = True

    def weight_of_trust(self, trust: str) -> float:
        """The residual weight of a row of ``trust``.

        Raises:
            ValueError: ``trust`` has no weight (the measurement reader skips rows whose trust
                is not high, medium or low, so this is a programming error).
        """
        weights = dict(self.trust_weight)
        if trust not in weights:
            raise ValueError(f"trust {trust!r} is not one of {', '.join(weights)}")
        return weights[trust]


@dataclass(frozen=True, slots=True)
class FittedFactor:
    """One fitted factor: level (``default``, ``sglang``, ``sglang/hopper``), name, value, ±1σ
    (NaN where the value is on a bound: see ``at_bound``)."""

    level: str
    name: str
    value: float
    uncertainty: float
    at_bound: bool = False


@dataclass(frozen=True, slots=True)
class FitResult:
    """Fitted factors, the table they make, and the fit's residual statistics.

    Attributes:
        factors: every fitted factor with its uncertainty.
        table: the EfficiencyTable (``engine`` and ``engine/architecture`` groups, merged).
        n_rows: cases used. cost: final robust cost.
        converged: the optimiser met a tolerance (scipy ``status`` 1–4); False when it stopped
            on the evaluation budget (``status`` 0).
        status, message, nfev: scipy's ``least_squares`` status code, its message and the
            function evaluations used.
        at_bound: ``level.factor`` names of the factors that ended on a bound.
        held: factors held at their documented default, not fitted (``FitOptions.held``).
        x: (level, factor) → the optimiser's coordinate at the solution (log space), the exact
            warm start of a refit (``fit(start_x=...)``).
    """

    factors: tuple[FittedFactor, ...]
    table: EfficiencyTable
    n_rows: int
    cost: float
    converged: bool
    status: int = 0
    message: str = ""
    nfev: int = 0
    at_bound: tuple[str, ...] = ()
    held: tuple[str, ...] = ()
    x: dict[tuple[str, str], float] = field(default_factory=dict)


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
