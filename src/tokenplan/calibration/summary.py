"""The typed results of a full refit (``tokenplan calibrate --refit``): the profile that
``--calibration`` reads (:class:`CalibrationProfile`, :func:`profile_of`) and what ``--json``
prints (:class:`CalibrationSummary`, from a :class:`CalibrationResult`). The refit that makes them
is :func:`tokenplan.calibration.refit.refit`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from tokenplan.calibration.band_file import table_to_json
from tokenplan.calibration.bands import BandTable
from tokenplan.calibration.crossval import CrossValidation
from tokenplan.calibration.fit_types import FitResult
from tokenplan.calibration.levels import is_ratio_level
from tokenplan.results import JsonResult


@dataclass(frozen=True)
class CalibrationProfile(JsonResult):
    """The calibration JSON that ``--calibration`` reads: ``default`` and ``groups`` of factor →
    value, ``ratios`` (the fitted silicon and vendor ratios, ``*/architecture.factor`` and
    ``*:vendor.factor`` → ratio, already folded into ``groups``; a record, not read back),
    ``uncertainty`` (±1σ of the factors fitted inside their bounds, ``level.factor`` →
    σ), ``at_bound`` (``level.factor`` of those that ended on a bound of ``EFFICIENCY_BOUNDS``:
    no σ, the bound holds them), ``held_at_default`` (factors the fit left at their documented
    default) and ``provenance``."""

    default: Mapping[str, float]
    groups: Mapping[str, Mapping[str, float]]
    ratios: Mapping[str, float]
    uncertainty: Mapping[str, float]
    at_bound: tuple[str, ...]
    held_at_default: tuple[str, ...]
    provenance: str


@dataclass(frozen=True)
class Optimizer(JsonResult):
    """scipy ``least_squares``'s outcome: status code, message, function evaluations."""

    status: int
    message: str
    nfev: int


@dataclass(frozen=True)
class FittedFactor(JsonResult):
    """One fitted factor at its level (``default``, an engine or ``engine/architecture``), its
    ±1σ (None for a factor on a bound, flagged ``at_bound``)."""

    level: str
    name: str
    value: float
    uncertainty: float | None
    at_bound: bool


@dataclass(frozen=True)
class FoldError(JsonResult):
    """One cross-validation fold: what was held out, its rows and the median |error| on them."""

    held_out: str
    n: int
    median_abs_pct_error: float


@dataclass(frozen=True)
class CrossValidationSummary(JsonResult):
    """A leave-one-group-out cross-validation: median and p90 |error| (fractions), per fold."""

    median_abs_pct_error: float
    p90_abs_pct_error: float
    folds: tuple[FoldError, ...]


@dataclass(frozen=True)
class CalibrationSummary(JsonResult):
    """The ``--json`` form of a calibration: rows fitted and skipped (``tokenplan validate`` lists
    each skipped row and each row whose tok/s was set aside, with its reason), the optimiser's outcome,
    factors with uncertainty, the cross-validations (by ``gpu``/``model``) and the profile."""

    SCHEMA_VERSION: ClassVar[int | None] = 1

    n: int
    skipped: int
    throughput_set_aside: int
    converged: bool
    optimizer: Optimizer
    at_bound: tuple[str, ...]
    held: tuple[str, ...]
    factors: tuple[FittedFactor, ...]
    cross_validation: Mapping[str, CrossValidationSummary]
    profile: CalibrationProfile


@dataclass(frozen=True)
class CalibrationResult:
    """A fit, its cross-validation, the profile that ``--calibration`` reads, and the
    error-band table (None unless asked for: it needs the cross-validation)."""

    fit: FitResult
    cv: tuple[CrossValidation, ...]
    profile: CalibrationProfile
    skipped: int
    bands: BandTable | None = None
    throughput_set_aside: int = 0

    def summary(self) -> CalibrationSummary:
        """What ``--json`` prints, typed (see :class:`CalibrationSummary`)."""
        f = self.fit
        return CalibrationSummary(
            n=f.n_rows,
            skipped=self.skipped,
            throughput_set_aside=self.throughput_set_aside,
            converged=f.converged,
            optimizer=Optimizer(f.status, f.message, f.nfev),
            at_bound=tuple(f.at_bound),
            held=tuple(f.held),
            factors=tuple(
                FittedFactor(x.level, x.name, x.value, None if x.at_bound else x.uncertainty, x.at_bound)
                for x in f.factors
            ),
            cross_validation={
                cv.by: CrossValidationSummary(
                    cv.median_abs, cv.p90_abs, tuple(FoldError(d.held_out, d.n, d.median_abs) for d in cv.folds)
                )
                for cv in self.cv
            },
            profile=self.profile,
        )

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` form: ``summary().to_json()``."""
        return self.summary().to_json()

    def bands_json(self) -> dict[str, Any] | None:
        """The error-band table as ``--bands`` writes it (None without one)."""
        return None if self.bands is None else table_to_json(self.bands)


def profile_of(result: FitResult, provenance: str) -> CalibrationProfile:
    """The calibration profile of a fit (see :class:`CalibrationProfile`)."""
    t = result.table
    return CalibrationProfile(
        default=t.default.as_dict(),
        groups={g: e.as_dict() for g, e in sorted(t.by_group.items())},
        ratios={f"{f.level}.{f.name}": f.value for f in result.factors if is_ratio_level(f.level)},
        uncertainty={f"{f.level}.{f.name}": f.uncertainty for f in result.factors if not f.at_bound},
        at_bound=tuple(result.at_bound),
        held_at_default=tuple(result.held),
        provenance=provenance,
    )
