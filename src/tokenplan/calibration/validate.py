"""Predict resolved measurements with the planner's own evaluation and summarise the error.

A :class:`Case` is one measurement made ready to predict: its model spec, GPU, configuration,
lengths and concurrency per replica. :func:`predict_case` runs the same
``job.evaluate.evaluate`` that ``tokenplan predict`` runs, plus the job timeline (ramp-up,
steady state, drain) for rows that state their number of requests N, and returns what was
measured: output tok/s per GPU for throughput rows, TPOT and TTFT for serving rows.

Errors are ``predicted / measured − 1`` (0.12 = 12 % too high); summaries take the median and
90th percentile of their absolute value and the median of the signed value (bias).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from tokenplan.arch.spec import ModelSpec
from tokenplan.hardware import Gpu
from tokenplan.job.deploy import CONTEXT_HINT
from tokenplan.job.evaluate import Config, Evaluation, Rejection, evaluate
from tokenplan.job.timeline import job_time, run_mean_ttft_s, run_median_ttft_s
from tokenplan.job.workload import LengthDist
from tokenplan.measurement import Measurement, SkippedRow
from tokenplan.perf.efficiency import Efficiency, EfficiencyTable
from tokenplan.stats import percentile


@dataclass(frozen=True, slots=True)
class Case:
    """A measurement resolved to values the model takes.

    Attributes:
        measurement: the row.
        model, gpu, config: resolved model spec, GPU and configuration.
        group: the efficiency group, ``engine/architecture``.
        family: model family for breakdowns (the model key's prefix before the size).
        isl, osl: length distributions (tokens).
        concurrency_per_replica: requests in flight per replica (None = offline max).
    """

    measurement: Measurement
    model: ModelSpec
    gpu: Gpu
    config: Config
    engine: str
    architecture: str
    family: str
    isl: LengthDist
    osl: LengthDist
    concurrency_per_replica: float | None

    @property
    def group(self) -> str:
        """``engine/architecture``."""
        return f"{self.engine}/{self.architecture}"


@dataclass(frozen=True, slots=True)
class Predicted:
    """What the model predicts for one case (None where the configuration is rejected).

    Attributes:
        output_tok_s_per_gpu: output tokens/s divided by every GPU of the system.
        tpot_s, ttft_s: time per output token and to first token (seconds).
        rejected: the rejection reason, or None.
    """

    output_tok_s_per_gpu: float
    tpot_s: float
    ttft_s: float
    rejected: str | None = None
    batch: float = math.nan


def predict_case(case: Case, eff: Efficiency, screen: bool = False) -> Predicted:
    """Predict one case with efficiency ``eff`` (the same evaluation as ``tokenplan predict``);
    ``batch`` is the steady running batch per replica. With ``screen`` (a measurement file's row,
    as ``validate`` and ``calibrate`` read it; not a bench level, whose server may be simulated)
    a row beyond the roofline bound (:func:`beyond_physics`) is rejected. A closed-loop run of fewer requests than
    its stated concurrency never had more than them in flight: one burst, evaluated at its
    requests for every figure (its TPOT was taken at the stated concurrency while its tok/s and
    TTFT followed the burst: a break-it pass, 500 in flight with 1 request)."""
    m, in_flight = case.measurement, case.concurrency_per_replica
    requests = None if m.num_requests is None or not m.closed_loop else m.num_requests / case.config.layout.dp
    if requests is not None and in_flight is not None and requests < in_flight:
        in_flight = requests
    ev = evaluate(case.model, case.gpu, case.config, eff, case.isl, case.osl, in_flight)
    if isinstance(ev, Rejection):
        # a row's lengths are its own: no options to lower (a break-it pass)
        return Predicted(math.nan, math.nan, math.nan, ev.reason.removesuffix(CONTEXT_HINT))
    impossible = beyond_physics(case, ev, in_flight) if screen else None
    if impossible is not None:
        return Predicted(math.nan, math.nan, math.nan, impossible)
    steady = ev.steady
    # A run of stated length (a closed loop of N requests, or offline over N): its median or mean
    # request's TTFT with the opening wave and the finite queue (job.timeline); otherwise the
    # steady state's median arrival (SteadyState.median_ttft_s) or its mean over arrivals.
    median = m.latency_statistic == "median"
    if requests is not None:
        run = run_median_ttft_s if median else run_mean_ttft_s
        ttft = run(steady, in_flight, requests)
    else:
        ttft = steady.median_ttft_s if median else steady.ttft_s
    return Predicted(_output_per_gpu(case, ev, eff), steady.tpot_s, ttft, None, steady.batch)


# How far past the roofline bound a measurement must lie to be called impossible rather than a
# modelling error: the bound counts only the dense weights and lm_head read at the datasheet
# bandwidth, so a real run sits above it (every ground-truth row's TPOT is ≥ 1.29× it, its tok/s
# ≤ 1/2.1 of the ceiling; tests/unit/calibration/test_validate.py).
IMPOSSIBLE_FACTOR = 2.0


def beyond_physics(case: Case, ev: Evaluation, in_flight: float | None) -> str | None:
    """Why the row's measured TPOT or tok/s cannot be, or None. Each decode step reads at least
    the dense weights and lm_head of one GPU (``Deployment.dense_bytes + lm_head_bytes``) at no more
    than its HBM bandwidth, and yields at most k + 1 tokens per running request (k drafted), with
    at most the in-flight requests running: TPOT ≥ floor / (k + 1), tok/s per GPU ≤ in-flight ×
    (k + 1) / floor / GPUs per replica. A row beyond :data:`IMPOSSIBLE_FACTOR` × either is a
    mistyped unit or cell (a break-it pass: TPOT 0.001 ms was fitted, and the plausible tok/s
    beside it set aside)."""
    d, m, spec = ev.deployment, case.measurement, case.config.spec
    floor_s = (d.dense_bytes + d.lm_head_bytes) / d.gpu.hbm_bytes_per_s
    tokens = 1 + (spec.draft_tokens if spec is not None else 0)
    what = (
        f"reading {(d.dense_bytes + d.lm_head_bytes) / 1e9:.3g} GB per GPU at {d.gpu.hbm_bytes_per_s / 1e12:.3g} TB/s"
    )
    if m.tpot_s is not None and m.tpot_s * IMPOSSIBLE_FACTOR < floor_s / tokens:
        return (
            f"measured TPOT {m.tpot_s * 1e3:.3g} ms is under half the {floor_s / tokens * 1e3:.3g} ms a step needs "
            f"({what}, {tokens} token{'s' if tokens > 1 else ''} per step): check its unit"
        )
    requests = None if m.num_requests is None else m.num_requests / case.config.layout.dp
    running = in_flight if in_flight is not None else requests  # per replica
    if m.output_tok_s_per_gpu is not None and running is not None:
        ceiling = running * tokens / floor_s / case.config.layout.gpus_per_replica
        if m.output_tok_s_per_gpu > IMPOSSIBLE_FACTOR * ceiling:
            return (
                f"measured {m.output_tok_s_per_gpu:,.0f} tok/s per GPU is over twice the {ceiling:,.0f} that "
                f"{running:g} requests in flight allow ({what}): check its unit"
            )
    return None


def _output_per_gpu(case: Case, ev: Evaluation, eff: Efficiency) -> float:
    m = case.measurement
    if not m.is_finite_job:
        return ev.output_tok_s_per_gpu
    lay = case.config.layout
    assert m.num_requests is not None  # is_finite_job: the row states its requests
    job = job_time(
        ev.deployment,
        eff,
        ev.settings,
        ev.steady,
        case.isl,
        case.osl,
        m.num_requests / lay.dp,
        case.config.spec,
        lay.dp,
    )
    return job.output_tok_s * lay.dp / lay.num_gpus


def measured_pairs(case: Case, p: Predicted) -> dict[str, tuple[float, float]]:
    """Metric → (predicted, measured) for the quantities the row measured."""
    m = case.measurement
    out = {}
    if m.output_tok_s_per_gpu is not None:
        out["throughput"] = (p.output_tok_s_per_gpu, m.output_tok_s_per_gpu)
    if m.tpot_s is not None:
        out["tpot"] = (p.tpot_s, m.tpot_s)
    if m.ttft_s is not None:
        out["ttft"] = (p.ttft_s, m.ttft_s)
    return out


def relative_error(predicted: float, measured: float) -> float:
    """``predicted / measured − 1`` (0.12 = 12 % too high)."""
    return predicted / measured - 1.0


@dataclass(frozen=True, slots=True)
class ErrorSummary:
    """Error statistics over a set of rows (fractions: 0.12 = 12 %).

    Attributes:
        n: rows.
        median_abs: median |pred/meas − 1|. p90_abs: its 90th percentile.
        bias: median signed error (> 0: the model predicts too high).
    """

    n: int
    median_abs: float
    p90_abs: float
    bias: float


def summarise(errors: list[float]) -> ErrorSummary:
    """Summary statistics of signed relative errors."""
    absolute = [abs(e) for e in errors]
    return ErrorSummary(len(errors), percentile(absolute, 50), percentile(absolute, 90), percentile(errors, 50))


@dataclass(frozen=True, slots=True)
class RowResult:
    """One predicted row: metric → (predicted, measured, error), and the steady running batch
    per replica of the prediction (sequences; where its error band is looked up)."""

    case: Case
    values: dict[str, tuple[float, float, float]]
    batch: float = math.nan


@dataclass(frozen=True, slots=True)
class Validation:
    """The result of validating a measurement file.

    Attributes:
        kind: ``throughput`` or ``serving``.
        rows: predicted rows.
        skipped: rows not predicted, with their reason.
        summary: metric → summary over every row.
        breakdown: ``(dimension, metric)`` → {value → summary}, dimensions engine, gpu, family.
        provenance: the efficiency table used.
    """

    kind: str
    rows: tuple[RowResult, ...]
    skipped: tuple[SkippedRow, ...]
    summary: dict[str, ErrorSummary]
    breakdown: dict[tuple[str, str], dict[str, ErrorSummary]] = field(default_factory=dict)
    provenance: str = ""


def _key(case: Case, dimension: str) -> str:
    return {"engine": case.engine, "gpu": case.measurement.gpu, "family": case.family}[dimension]


def validate_cases(kind: str, cases: list[Case], skipped: list[SkippedRow], table: EfficiencyTable) -> Validation:
    """Predict every case with ``table`` and summarise; rejected configurations join ``skipped``."""
    rows, skipped = [], list(skipped)
    for case in cases:
        p = predict_case(case, table.resolve(case.engine, case.architecture), screen=True)
        if p.rejected is not None:
            skipped.append(SkippedRow(case.measurement.line, case.measurement.row_id, f"rejected: {p.rejected}"))
            continue
        values = {k: (pr, me, relative_error(pr, me)) for k, (pr, me) in measured_pairs(case, p).items()}
        rows.append(RowResult(case, values, p.batch))
    metrics = sorted({k for r in rows for k in r.values})
    summary = {k: summarise([r.values[k][2] for r in rows if k in r.values]) for k in metrics}
    breakdown: dict[tuple[str, str], dict[str, ErrorSummary]] = {}
    for dim in ("engine", "gpu", "family"):
        for k in metrics:
            groups: dict[str, list[float]] = {}
            for r in rows:
                if k in r.values:
                    groups.setdefault(_key(r.case, dim), []).append(r.values[k][2])
            breakdown[(dim, k)] = {g: summarise(v) for g, v in sorted(groups.items())}
    skipped.sort(key=lambda s: s.line)
    return Validation(kind, tuple(rows), tuple(skipped), summary, breakdown, table.provenance)
