"""Fit the efficiency factors to measurements: robust least squares on log(predicted/measured).

Parameters are :data:`~tokenplan.perf.efficiency.EFFICIENCY_FIELDS` at three levels — the
default (every row), per engine, and per ``engine/architecture`` — where the data holds at
least ``min_rows`` rows for the level. A case uses the most specific value of each factor.
Group factors are pulled toward their parent by a weak prior (a log-normal of width
``prior_sigma``), so a group with little data stays near the default instead of fitting
noise; the default is pulled toward the documented physical defaults the same way. Bounds are
:data:`EFFICIENCY_BOUNDS`.

Residuals: ``w·log(pred/meas)`` per measured quantity (throughput, TPOT, TTFT at weight 0.8),
``w`` from the row's trust and its file's size (so the 2,500 serving rows do not drown the
throughput file). Loss ``soft_l1`` with scale 0.2: errors beyond ~20 % count linearly.

Uncertainty: ``cov = s²·(JᵀJ)⁻¹`` at the solution (``s²`` = residual variance), reported in
the factor's units. Cross-validation refits with one group (a GPU, a model) held out and
scores the held-out rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from tokenplan.calibration.validate import Case, percentile, predict_case
from tokenplan.perf.efficiency import EFFICIENCY_BOUNDS, EFFICIENCY_FIELDS, Efficiency, EfficiencyTable
from tokenplan.units import Dtype

# Which factors each level may move. The engine level holds what the engine's software sets
# (step overhead, per-sequence CPU, its kernels' bandwidth and GEMM efficiency); the
# engine × architecture level holds kernel maturity on that silicon.
DEFAULT_FACTORS = EFFICIENCY_FIELDS
ENGINE_FACTORS = ("hbm_fraction", "step_overhead_s", "per_sequence_overhead_s", "ttft_overhead_s",
                  "prefill_wave_fraction")
ARCH_FACTORS = ("gemm_fraction", "lowprec_fraction", "dequant_fraction")
TRUST_WEIGHT = {"high": 1.0, "medium": 0.7, "low": 0.4}
TTFT_WEIGHT = 0.8


@dataclass(frozen=True, slots=True)
class FitOptions:
    """Fit settings.

    Attributes:
        min_rows: rows a group needs before it gets its own factors.
        prior_sigma: width (log) of the prior pulling a group's factor toward its parent.
        max_nfev: function-evaluation budget of the optimiser.
        loss, f_scale: robust loss and its inlier scale (log error).
    """

    min_rows: int = 25
    prior_sigma: float = 0.5
    max_nfev: int = 30
    loss: str = "soft_l1"
    f_scale: float = 0.2


@dataclass(frozen=True, slots=True)
class FittedFactor:
    """One fitted factor: level (``default``, ``sglang``, ``sglang/hopper``), name, value, ±1σ."""

    level: str
    name: str
    value: float
    uncertainty: float


@dataclass(frozen=True, slots=True)
class FitResult:
    """Fitted factors, the table they make, and the fit's residual statistics.

    Attributes:
        factors: every fitted factor with its uncertainty.
        table: the EfficiencyTable (``engine`` and ``engine/architecture`` groups, merged).
        n_rows: cases used. cost: final robust cost. converged: optimiser status > 0.
    """

    factors: tuple[FittedFactor, ...]
    table: EfficiencyTable
    n_rows: int
    cost: float
    converged: bool


@dataclass(frozen=True, slots=True)
class CvFold:
    """One held-out group: its name, rows and the median |error| on them after refitting."""

    held_out: str
    n: int
    median_abs: float


@dataclass(frozen=True, slots=True)
class CrossValidation:
    """Leave-one-group-out results: ``by`` (``gpu`` or ``model``), folds, and pooled statistics
    over every held-out row."""

    by: str
    folds: tuple[CvFold, ...]
    median_abs: float
    p90_abs: float
    errors: tuple[float, ...] = field(default=())


def _levels(case: Case) -> tuple[str, str, str]:
    return "default", case.engine, case.group


def parameters(cases: list[Case], options: FitOptions) -> list[tuple[str, str]]:
    """(level, factor) pairs the data supports: default factors, then engines and
    engine/architecture groups with at least ``min_rows`` rows. A group's low-precision and
    dequantization factors are fitted only where its rows run such kernels (a factor no row
    touches has nothing to fit and would only cost Jacobian columns)."""
    counts: dict[str, int] = {}
    kernels: dict[str, set[str]] = {}
    for c in cases:
        for level in _levels(c)[1:]:
            counts[level] = counts.get(level, 0) + 1
        kernels.setdefault(c.group, set()).update(_kernel_factors(c))
    params = [("default", f) for f in DEFAULT_FACTORS]
    for level in sorted(counts):
        if counts[level] >= options.min_rows:
            if "/" not in level:
                params += [(level, f) for f in ENGINE_FACTORS]
            else:
                params += [(level, f) for f in ARCH_FACTORS
                           if f not in _KERNEL_FACTORS or f in kernels.get(level, set())]
    return params


_KERNEL_FACTORS = ("lowprec_fraction", "dequant_fraction")


def _kernel_factors(case: Case) -> tuple[str, ...]:
    """Which format-specific GEMM factors the case's weights use (see ``perf.step._gemm_rate``)."""
    w, gpu = case.config.weight_dtype, case.gpu
    if gpu.runs_natively(w) and w.flops_class != "bf16":
        return ("lowprec_fraction",)
    if w is Dtype.W4A16 or not gpu.runs_natively(w):
        return ("dequant_fraction",)
    return ()


def _to_x(name: str, value: float) -> float:
    # Optimise in log space (fractions, token counts and times are all positive scales);
    # per-sequence overhead may be 0, so it is offset by 1 µs.
    return math.log(value + (1e-6 if name == "per_sequence_overhead_s" else 0.0))


def _from_x(name: str, x: float) -> float:
    return math.exp(x) - (1e-6 if name == "per_sequence_overhead_s" else 0.0)


def _bounds_x(name: str) -> tuple[float, float]:
    lo, hi = EFFICIENCY_BOUNDS[name]
    return _to_x(name, lo), _to_x(name, hi)


def efficiency_for(values: dict[tuple[str, str], float], case: Case, base: Efficiency) -> Efficiency:
    """The case's factors: ``base``, overridden by default, engine, then engine/arch fits."""
    merged = base.as_dict()
    for level in _levels(case):
        for name in EFFICIENCY_FIELDS:
            if (level, name) in values:
                merged[name] = values[(level, name)]
    return Efficiency(**merged)


def _row_weight(case: Case, file_weight: dict[str, float]) -> float:
    kind = "serving" if case.measurement.tpot_s is not None else "throughput"
    return TRUST_WEIGHT.get(case.measurement.trust, 0.7) * file_weight[kind]


def log_residuals(case: Case, eff: Efficiency) -> list[float]:
    """Unweighted log(pred/meas) of the case's measured quantities (0 where rejected)."""
    p = predict_case(case, eff)
    m = case.measurement
    if p.rejected is not None:
        return [0.0] * (1 if m.output_tok_s_per_gpu is not None else 2)
    if m.output_tok_s_per_gpu is not None:
        return [math.log(p.output_tok_s_per_gpu / m.output_tok_s_per_gpu)]
    return [math.log(p.tpot_s / m.tpot_s), TTFT_WEIGHT * math.log(p.ttft_s / m.ttft_s)]


def fit(cases: list[Case], base: Efficiency | None = None, options: FitOptions = FitOptions()) -> FitResult:
    """Fit the factors the data supports (see the module docstring)."""
    import numpy as np
    from scipy.optimize import least_squares

    base = base or Efficiency()
    params = parameters(cases, options)
    index = {p: i for i, p in enumerate(params)}
    x0 = np.array([_to_x(name, getattr(base, name)) for _, name in params])
    lo, hi = zip(*(_bounds_x(name) for _, name in params))
    x0 = np.clip(x0, np.array(lo) + 1e-9, np.array(hi) - 1e-9)
    n_kind = {"throughput": 0, "serving": 0}
    for c in cases:
        n_kind["serving" if c.measurement.tpot_s is not None else "throughput"] += 1
    ref = max(min(v for v in n_kind.values() if v) if any(n_kind.values()) else 1, 1)
    file_weight = {k: math.sqrt(ref / v) if v else 1.0 for k, v in n_kind.items()}
    weights = [_row_weight(c, file_weight) for c in cases]

    def parent_x(level: str, name: str, x) -> float:
        if level == "default":
            return x0_default[name]
        up = "default" if "/" not in level else level.split("/")[0]
        if (up, name) in index:
            return x[index[(up, name)]]
        return x[index[("default", name)]]

    x0_default = {name: _to_x(name, getattr(base, name)) for name in EFFICIENCY_FIELDS}

    def residuals(x):
        values = {p: _from_x(p[1], x[i]) for i, p in enumerate(params)}
        out = []
        for c, w in zip(cases, weights):
            out += [w * r for r in log_residuals(c, efficiency_for(values, c, base))]
        for (level, name), i in index.items():
            out.append((x[i] - parent_x(level, name, x)) / options.prior_sigma * (0.3 if level == "default" else 1.0))
        return np.array(out)

    sol = least_squares(residuals, x0, bounds=(np.array(lo), np.array(hi)), loss=options.loss,
                        f_scale=options.f_scale, max_nfev=options.max_nfev, x_scale=1.0, diff_step=1e-3)
    uncertainty = _uncertainty(sol, len(params))
    factors = []
    for (level, name), i in index.items():
        value = _from_x(name, sol.x[i])
        # d value / d x = exp(x) in log space
        factors.append(FittedFactor(level, name, value, math.exp(sol.x[i]) * uncertainty[i]))
    values = {(f.level, f.name): f.value for f in factors}
    return FitResult(tuple(factors), table_from_values(values, cases, base), len(cases), float(sol.cost),
                     bool(sol.status > 0))


def _uncertainty(sol, n_params: int) -> list[float]:
    import numpy as np

    jac = sol.jac
    dof = max(jac.shape[0] - n_params, 1)
    s2 = 2.0 * sol.cost / dof
    try:
        cov = np.linalg.pinv(jac.T @ jac) * s2
    except np.linalg.LinAlgError:
        return [math.nan] * n_params
    return [float(math.sqrt(max(v, 0.0))) for v in np.diag(cov)]


def table_from_values(values: dict[tuple[str, str], float], cases: list[Case], base: Efficiency,
                      provenance: str = "") -> EfficiencyTable:
    """An EfficiencyTable: the fitted default, and one merged group per engine and per
    engine/architecture seen in ``cases``."""
    default = efficiency_for({k: v for k, v in values.items() if k[0] == "default"}, _Dummy(), base)
    groups: dict[str, Efficiency] = {}
    for c in cases:
        groups.setdefault(c.engine, efficiency_for(values, _Dummy(c.engine), base))
        groups.setdefault(c.group, efficiency_for(values, c, base))
    return EfficiencyTable(default, groups, provenance)


class _Dummy:
    """Stand-in with the two level names ``efficiency_for`` reads."""

    def __init__(self, engine: str = "", group: str = ""):
        self.engine, self.group = engine or "-", group or "-/-"


def cross_validate(cases: list[Case], by: str, base: Efficiency | None = None,
                   options: FitOptions = FitOptions(), main_only: bool = True) -> CrossValidation:
    """Leave one GPU (``by="gpu"``) or one model (``by="model"``) out at a time: refit on the
    rest, predict the held-out rows, and pool their |log errors| as relative errors."""
    key = (lambda c: c.measurement.gpu) if by == "gpu" else (lambda c: c.measurement.model)
    names = sorted({key(c) for c in cases})
    folds, pooled = [], []
    for name in names:
        train = [c for c in cases if key(c) != name]
        test = [c for c in cases if key(c) == name]
        if not train:
            continue
        result = fit(train, base, options)
        errors = []
        for c in test:
            eff = result.table.resolve(c.engine, c.architecture)
            r = log_residuals(c, eff)
            if predict_case(c, eff).rejected is None:
                errors.append(math.expm1(r[0]))
        if errors:
            folds.append(CvFold(name, len(errors), percentile([abs(e) for e in errors], 50)))
            pooled += errors
    absolute = [abs(e) for e in pooled]
    return CrossValidation(by, tuple(folds), percentile(absolute, 50), percentile(absolute, 90), tuple(pooled))
