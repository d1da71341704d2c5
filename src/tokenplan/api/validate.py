"""``validate``: predict measured rows and summarise the error — the Python API behind
``tokenplan validate``.

Errors are fractions: ``predicted / measured − 1`` per row; summaries give the median and 90th
percentile of its absolute value and the median signed error (``bias``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from tokenplan.api._cases import resolve_file
from tokenplan.api._common import efficiency_table
from tokenplan.api.results import INLINE, JsonResult, inline
from tokenplan.calibration.validate import ErrorSummary, RowResult, Validation, validate_cases
from tokenplan.catalog.length_sets import length_set
from tokenplan.files.measurements import read_measurements


@dataclass(frozen=True)
class ErrorStats(JsonResult):
    """The error over a set of rows (fractions; None when no row measures the metric)."""

    median_abs_pct_error: float | None
    p90_abs_pct_error: float | None
    bias: float | None

    @classmethod
    def of(cls, s: ErrorSummary | None) -> ErrorStats:
        """From a summary, or all None without one."""
        return cls(None, None, None) if s is None else cls(s.median_abs, s.p90_abs, s.bias)


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
class MetricError:
    """One metric of one row: predicted and measured (``name`` gives the unit: tok/s per GPU or
    ms) and the relative error, whose JSON key is ``error_key``."""

    name: str
    predicted: float
    measured: float
    error: float
    error_key: str

    def to_json(self) -> dict[str, float]:
        """``{"predicted_<name>", "measured_<name>", <error_key>}``."""
        return {f"predicted_{self.name}": self.predicted, f"measured_{self.name}": self.measured,
                self.error_key: self.error}


@dataclass(frozen=True)
class ValidatedRow(JsonResult):
    """A predicted row: what it measured (lengths in tokens, concurrency over the whole system,
    None = offline ``max``) and, per metric, predicted against measured. ``lengths`` says how the
    lengths spread around ``isl``/``osl`` (their means): ``fixed``, ``U[0.8L, L]`` (uniform, as
    InferenceX draws them) or the name of the prompt set the row ran (``sharegpt``)."""

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
    metrics: tuple[MetricError, ...] = field(metadata=INLINE)


@dataclass(frozen=True)
class ValidationResult(JsonResult):
    """``validate``'s result. ``main`` is the error on throughput for throughput files and on
    TPOT for serving files; ``tpot``/``ttft`` where the rows measure them; the breakdowns are on
    the main metric; ``calibration`` says which profile predicted. ``throughput_set_aside``:
    predicted rows whose measured tok/s contradicts their own TTFT and TPOT (Little's law), with
    the reason; only their TTFT and TPOT are compared."""

    kind: str
    n: int
    skipped: tuple[SkippedEntry, ...]
    throughput_set_aside: tuple[SkippedEntry, ...]
    main: ErrorStats = field(metadata=INLINE)
    calibration: str
    tpot: ErrorStats | None = field(metadata=inline("tpot_"))
    ttft: ErrorStats | None = field(metadata=inline("ttft_"))
    by_engine: Mapping[str, GroupError]
    by_gpu: Mapping[str, GroupError]
    by_family: Mapping[str, GroupError]
    rows: tuple[ValidatedRow, ...]


def validate(path: str, calibration: str | None = None) -> ValidationResult:
    """Predict every row of a measurement CSV and summarise the error (see ``tokenplan validate``):
    a :class:`ValidationResult`, whose ``to_json()`` is what ``--json`` prints.

    Raises:
        InputError, ConfigError: the file (or the calibration profile) is missing or malformed.
    """
    table = efficiency_table(calibration)
    data = read_measurements(path)
    cases, skipped = resolve_file(data)
    return validation_result(validate_cases(data.kind, cases, skipped, table))


_UNITS = {"throughput": ("output_tok_s_per_gpu", 1.0), "tpot": ("tpot_ms", 1e3), "ttft": ("ttft_ms", 1e3)}


def validation_result(v: Validation) -> ValidationResult:
    """The typed result of a validation (its ``to_json()`` is the ``--json`` form)."""
    main = "throughput" if v.kind == "throughput" else "tpot"

    def by(dim: str) -> dict[str, GroupError]:
        return {g: GroupError(e.n, e.median_abs, e.p90_abs, e.bias)
                for g, e in v.breakdown.get((dim, main), {}).items()}

    return ValidationResult(
        kind=v.kind, n=len(v.rows),
        skipped=tuple(SkippedEntry(k.line, k.row_id, k.reason) for k in v.skipped),
        throughput_set_aside=tuple(SkippedEntry(r.case.measurement.line, r.case.measurement.row_id,
                                                r.case.measurement.throughput_set_aside)
                                   for r in v.rows if r.case.measurement.throughput_set_aside is not None),
        main=ErrorStats.of(v.summary.get(main)), calibration=v.provenance,
        tpot=ErrorStats.of(v.summary["tpot"]) if "tpot" in v.summary else None,
        ttft=ErrorStats.of(v.summary["ttft"]) if "ttft" in v.summary else None,
        by_engine=by("engine"), by_gpu=by("gpu"), by_family=by("family"),
        rows=tuple(_row(r) for r in v.rows))


def _row(r: RowResult) -> ValidatedRow:
    m = r.case.measurement
    metrics = []
    for metric, (pred, meas, err) in r.values.items():
        name, scale = _UNITS[metric]
        prefix = "" if metric == "throughput" else f"{metric}_"
        metrics.append(MetricError(name, pred * scale, meas * scale, err, f"{prefix}error"))
    return ValidatedRow(line=m.line, id=m.row_id, engine=m.engine, model=m.model, gpu=m.gpu,
                        num_gpus=m.num_gpus, layout=r.case.config.layout.describe(), weight_dtype=m.weight_dtype,
                        isl=m.isl_tokens, osl=m.osl_tokens, concurrency=m.concurrency,
                        lengths=_lengths(r), metrics=tuple(metrics))


def _lengths(r: RowResult) -> str:
    """How the row's lengths spread around its means (see :class:`ValidatedRow`)."""
    m = r.case.measurement
    if r.case.osl.sigma == 0 and r.case.isl.sigma == 0:
        return "fixed"
    if m.length_set is not None and length_set(m.length_set) is not None:
        return m.length_set
    return f"U[{m.length_low_fraction:g}L, L]"
