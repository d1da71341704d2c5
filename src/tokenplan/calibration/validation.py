"""``validate``'s typed result: measured rows against their predictions, the error summaries and
breakdowns, and — with a band table — each row's 80 % interval per metric and each metric's
coverage (the share of rows whose measurement lies inside).

Errors are fractions: ``predicted / measured − 1`` per row; summaries give the median and 90th
percentile of its absolute value and the median signed error (``bias``). The intervals are those
``tokenplan predict`` would give each predicted figure (``calibration.bands``); a file the bands
were not made from tests whether they hold.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from tokenplan.calibration.bands import BandTable, interval, queue_regime, spec_regime, ttft_metric
from tokenplan.calibration.validate import Case, ErrorSummary, RowResult, Validation, measured_pairs, predict_case
from tokenplan.measurement import Measurement
from tokenplan.perf.efficiency import EfficiencyTable
from tokenplan.results import INLINE, Interval, JsonResult, inline, renamed


@dataclass(frozen=True)
class ErrorStats(JsonResult):
    """The error over a set of rows (fractions; None when no row measures the metric),
    ``coverage``: the share of those rows whose measurement lies inside its 80 % interval (None
    without error bands), and ``rows_compared``: how many rows measure the metric (the file's
    ``n`` counts every predicted row, whichever metrics it measures)."""

    median_abs_pct_error: float | None
    p90_abs_pct_error: float | None
    bias: float | None
    coverage: float | None = None
    rows_compared: int = 0

    @classmethod
    def of(cls, s: ErrorSummary | None, coverage: float | None = None) -> ErrorStats:
        """From a summary, or all None without one."""
        return cls(None, None, None) if s is None else cls(s.median_abs, s.p90_abs, s.bias, coverage, s.n)


@dataclass(frozen=True)
class GroupError(JsonResult):
    """The error over the ``n`` rows of one engine, GPU or model family (fractions)."""

    n: int
    median_abs_pct_error: float
    p90_abs_pct_error: float
    bias: float


@dataclass(frozen=True)
class SkippedEntry(JsonResult):
    """A row that was not predicted: its file line, id and why."""

    line: int
    id: str
    reason: str


@dataclass(frozen=True)
class MetricError(JsonResult):
    """One metric of one row: predicted and measured (tok/s per GPU or ms) and the relative error; with error bands, the 80 % interval around the
    prediction (``low``, ``high``, same unit) and whether the measurement lies inside it. Each
    metric's JSON keys carry its name, so each metric is its own subclass
    (:class:`ThroughputError`, :class:`TpotError`, :class:`TtftError`)."""

    predicted: float
    measured: float
    error: float
    low: float | None = None
    high: float | None = None
    inside: bool | None = None

    @classmethod
    def of(cls, predicted: float, measured: float, error: float, low: float | None, high: float | None) -> MetricError:
        """The metric, ``inside`` set where there is an interval."""
        inside = None if low is None or high is None else low <= measured <= high
        return cls(predicted, measured, error, low, high, inside)


def _keys(name: str, error: str) -> dict[str, Any]:
    """The JSON keys of a metric whose figure is ``name`` and whose error key is ``error``:
    ``predicted_<name>``, ``measured_<name>``, ``<error>``, ``<name>_low``, ``<name>_high`` and
    ``<error with "inside" for "error">``; the interval's keys only where there is one."""
    return {
        "predicted": renamed(f"predicted_{name}"),
        "measured": renamed(f"measured_{name}"),
        "error": renamed(error),
        "low": renamed(f"{name}_low", omit_none=True),
        "high": renamed(f"{name}_high", omit_none=True),
        "inside": renamed(error.replace("error", "inside"), omit_none=True),
    }


_THROUGHPUT, _TPOT, _TTFT = (
    _keys("output_tok_s_per_gpu", "error"),
    _keys("tpot_ms", "tpot_error"),
    _keys("ttft_ms", "ttft_error"),
)


@dataclass(frozen=True)
class ThroughputError(MetricError):
    """Output tok/s per GPU (:class:`MetricError`)."""

    predicted: float = field(metadata=_THROUGHPUT["predicted"])
    measured: float = field(metadata=_THROUGHPUT["measured"])
    error: float = field(metadata=_THROUGHPUT["error"])
    low: float | None = field(default=None, metadata=_THROUGHPUT["low"])
    high: float | None = field(default=None, metadata=_THROUGHPUT["high"])
    inside: bool | None = field(default=None, metadata=_THROUGHPUT["inside"])


@dataclass(frozen=True)
class TpotError(MetricError):
    """Time per output token, ms (:class:`MetricError`)."""

    predicted: float = field(metadata=_TPOT["predicted"])
    measured: float = field(metadata=_TPOT["measured"])
    error: float = field(metadata=_TPOT["error"])
    low: float | None = field(default=None, metadata=_TPOT["low"])
    high: float | None = field(default=None, metadata=_TPOT["high"])
    inside: bool | None = field(default=None, metadata=_TPOT["inside"])


@dataclass(frozen=True)
class TtftError(MetricError):
    """Time to first token, ms (:class:`MetricError`)."""

    predicted: float = field(metadata=_TTFT["predicted"])
    measured: float = field(metadata=_TTFT["measured"])
    error: float = field(metadata=_TTFT["error"])
    low: float | None = field(default=None, metadata=_TTFT["low"])
    high: float | None = field(default=None, metadata=_TTFT["high"])
    inside: bool | None = field(default=None, metadata=_TTFT["inside"])


@dataclass(frozen=True)
class ValidatedRow(JsonResult):
    """A predicted row: what it measured (lengths in tokens, concurrency over the whole system,
    None = offline ``max``) and, per metric, predicted against measured. ``lengths`` says how the
    lengths spread around ``isl``/``osl`` (their means): ``fixed``, ``U[0.8L, L]`` (uniform, as
    InferenceX draws them) or the name of the prompt set the row ran (``sharegpt``).
    ``gpu_variant_stated`` False: the source names only the GPU family; the row's interval then
    spans the family's variants (:func:`variant_span`). ``spec``: the speculative decoding the row
    ran as it was predicted (``none``, or the method, k and τ)."""

    line: int
    id: str
    engine: str
    model: str
    gpu: str
    num_gpus: int
    layout: str
    weight_dtype: str
    isl: float | None
    osl: float | None
    concurrency: float | None
    lengths: str
    throughput: ThroughputError | None = field(default=None, metadata=INLINE)
    tpot: TpotError | None = field(default=None, metadata=INLINE)
    ttft: TtftError | None = field(default=None, metadata=INLINE)
    gpu_variant_stated: bool = True
    spec: str = "none"  # the speculative decoding the row ran, as predicted (``mtp k=3 τ=2.63``)

    def metric(self, name: str) -> MetricError | None:
        """The row's ``throughput``, ``tpot`` or ``ttft`` (None where it does not measure it)."""
        value: MetricError | None = getattr(self, name)
        return value


# (row, metric) -> (lowest, highest) prediction of the metric over the family's GPU variants, for a
# row whose source names only the family; None where it states the variant
VariantSpan = Callable[[RowResult, str], "tuple[float, float] | None"]


def variant_span(table: EfficiencyTable, variant_cases: Callable[[Measurement], list[Case]]) -> VariantSpan:
    """The :data:`VariantSpan` of rows whose source names only a GPU family ("H100" without SXM,
    PCIe or NVL): the (lowest, highest) prediction of a metric (``throughput``, ``tpot``,
    ``ttft``; tok/s per GPU or seconds) over the row's GPU and the same row on the family's other
    catalog variants (``variant_cases``: those that resolve); variants that reject the
    configuration (e.g. it does not fit in their memory) are left out. The row is predicted on
    the variant its ``gpu`` column guesses (usually SXM) and never scored as if the guess were
    known: its 80 % interval spans every variant's."""

    def span(r: RowResult, metric: str) -> tuple[float, float] | None:
        m = r.case.measurement
        if m.gpu_variant_stated or metric not in r.values:
            return None
        values = [r.values[metric][0]]
        for case in variant_cases(m):
            p = predict_case(case, table.resolve(case.engine, case.architecture))
            if p.rejected is None and metric in (pairs := measured_pairs(case, p)):
                values.append(pairs[metric][0])
        return min(values), max(values)

    return span


@dataclass(frozen=True)
class ValidationResult(JsonResult):
    """``validate``'s result. ``main`` is the error on throughput for throughput files and on
    TPOT for serving files; ``tpot``/``ttft`` always (their figures None and ``rows_compared`` 0
    where no row measures them, so every file's JSON has the same keys); the breakdowns are on
    the main metric; ``calibration`` says which profile predicted. ``throughput_set_aside``:
    predicted rows whose measured tok/s contradicts their own TTFT and TPOT (Little's law), with
    the reason; only their TTFT and TPOT are compared. ``layout_read_as_launched``: serving rows
    whose replica is the engine's launch rather than the layout columns as written (a squared
    export or a ``launch_layout`` cell: :mod:`tokenplan.files.aic_layout`), with the reason."""

    SCHEMA_VERSION: ClassVar[int | None] = 1

    kind: str
    n: int
    skipped: tuple[SkippedEntry, ...]
    throughput_set_aside: tuple[SkippedEntry, ...]
    layout_read_as_launched: tuple[SkippedEntry, ...]
    main: ErrorStats = field(metadata=INLINE)
    calibration: str
    tpot: ErrorStats = field(metadata=inline("tpot_"))
    ttft: ErrorStats = field(metadata=inline("ttft_"))
    by_engine: Mapping[str, GroupError]
    by_gpu: Mapping[str, GroupError]
    by_family: Mapping[str, GroupError]
    rows: tuple[ValidatedRow, ...]


# metric → (its type, the scale from the model's unit: tok/s per GPU, or seconds to ms)
_METRICS: dict[str, tuple[type[MetricError], float]] = {
    "throughput": (ThroughputError, 1.0),
    "tpot": (TpotError, 1e3),
    "ttft": (TtftError, 1e3),
}
# metric → (band metric, the figure scales as 1 / the band metric's quantity): see calibration.bands
_BAND_OF = {"throughput": ("rate", False), "tpot": ("rate", True), "ttft": ("ttft", False)}


def row_interval(bands: BandTable, r: RowResult, metric: str) -> Interval | None:
    """The 80 % interval of a row's predicted ``metric`` (``throughput``, ``tpot``, ``ttft``;
    in the metric's own unit: tok/s per GPU or seconds), looked up as ``tokenplan predict``
    looks up a configuration's (engine, architecture, family, GPU, running batch per replica,
    speculative-decoding regime, and whether requests queue: :func:`queue_regime`). None where the table holds no band of the metric."""
    c = r.case
    band_metric, inverse = _BAND_OF[metric]
    if metric == "ttft" and bands.bands.get(own := ttft_metric(c.measurement.latency_statistic)):
        band_metric = own  # a run's mean TTFT against the means' band (tables before it: the medians')
    return interval(
        bands,
        r.values[metric][0],
        band_metric,
        inverse,
        c.engine,
        c.architecture,
        c.family,
        c.measurement.gpu,
        r.batch,
        spec_regime(c.config.spec),
        weight_format=c.config.weight_dtype.flops_class,
        queue=queue_regime(c.concurrency_per_replica, r.batch),
        pp=c.config.layout.pp,
    )


def _coverage(rows: list[ValidatedRow], metric: str) -> float | None:
    """Share of the rows measuring ``metric`` whose measurement lies inside its interval."""
    hits = [m.inside for row in rows if (m := row.metric(metric)) is not None and m.inside is not None]
    return sum(hits) / len(hits) if hits else None


def validation_result(
    v: Validation,
    bands: BandTable | None = None,
    named_sets: Collection[str] = (),
    variant_span: VariantSpan | None = None,
) -> ValidationResult:
    """The typed result of a validation (its ``to_json()`` is the ``--json`` form); with
    ``bands``, each row's 80 % interval per metric and each metric's coverage. ``named_sets``:
    the prompt sets the rows name that are known (``catalog/length_sets.yaml``), whose names
    describe a row's lengths. With ``variant_span``, the interval of a row whose GPU variant is
    not stated spans the family's variants."""
    main = "throughput" if v.kind == "throughput" else "tpot"
    rows = tuple(_row(r, bands, named_sets, variant_span) for r in v.rows)

    def by(dim: str) -> dict[str, GroupError]:
        return {
            g: GroupError(e.n, e.median_abs, e.p90_abs, e.bias) for g, e in v.breakdown.get((dim, main), {}).items()
        }

    return ValidationResult(
        kind=v.kind,
        n=len(v.rows),
        skipped=tuple(SkippedEntry(k.line, k.row_id, k.reason) for k in v.skipped),
        throughput_set_aside=tuple(
            SkippedEntry(r.case.measurement.line, r.case.measurement.row_id, r.case.measurement.throughput_set_aside)
            for r in v.rows
            if r.case.measurement.throughput_set_aside is not None
        ),
        layout_read_as_launched=tuple(
            SkippedEntry(r.case.measurement.line, r.case.measurement.row_id, r.case.measurement.layout_note)
            for r in v.rows
            if r.case.measurement.layout_note is not None
        ),
        main=ErrorStats.of(v.summary.get(main), _coverage(list(rows), main)),
        calibration=v.provenance,
        # every metric's keys in every file's JSON: None and 0 rows where no row measures it
        tpot=ErrorStats.of(v.summary.get("tpot"), _coverage(list(rows), "tpot")),
        ttft=ErrorStats.of(v.summary.get("ttft"), _coverage(list(rows), "ttft")),
        by_engine=by("engine"),
        by_gpu=by("gpu"),
        by_family=by("family"),
        rows=rows,
    )


def _row(
    r: RowResult, bands: BandTable | None, named_sets: Collection[str], variant_span: VariantSpan | None = None
) -> ValidatedRow:
    m = r.case.measurement
    metrics = {}
    for metric, (pred, meas, err) in r.values.items():
        kind, scale = _METRICS[metric]
        iv = None if bands is None else row_interval(bands, r, metric)
        low, high = (None, None) if iv is None else (iv.low * scale, iv.high * scale)
        span = None if variant_span is None or low is None or high is None else variant_span(r, metric)
        if low is not None and high is not None and span is not None:  # every variant's interval
            low, high = min(low, low * span[0] / pred), max(high, high * span[1] / pred)
        metrics[metric] = kind.of(pred * scale, meas * scale, err, low, high)
    return ValidatedRow(
        line=m.line,
        id=m.row_id,
        engine=m.engine,
        model=m.model,
        gpu=m.gpu,
        num_gpus=m.num_gpus,
        layout=r.case.config.layout.describe(),
        weight_dtype=m.weight_dtype,
        isl=m.isl_tokens,
        osl=m.osl_tokens,
        concurrency=m.concurrency,
        lengths=_lengths(r, named_sets),
        **metrics,  # type: ignore[arg-type]  # each metric's own type, by _METRICS
        gpu_variant_stated=m.gpu_variant_stated,
        spec=r.case.config.spec.describe() if r.case.config.spec is not None else "none",
    )


def _lengths(r: RowResult, named_sets: Collection[str]) -> str:
    """How the row's lengths spread around its means (see :class:`ValidatedRow`)."""
    m = r.case.measurement
    if r.case.osl.sigma == 0 and r.case.isl.sigma == 0:
        return "fixed"
    if m.length_set is not None and m.length_set in named_sets:
        return m.length_set
    return f"U[{m.length_low_fraction:g}L, L]"
