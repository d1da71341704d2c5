"""``calibrate``: fit the efficiency factors on measured rows, cross-validate and write a
profile — the Python API behind ``tokenplan calibrate``. The rows are resolved as for
``validate`` (``tokenplan.api.resolve``)."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

from tokenplan.api.resolve import read_profile, resolve_file
from tokenplan.calibration.band_file import table_to_json  # noqa: F401 - re-exported (calibrate --bands)
from tokenplan.calibration.bands import BandTable
from tokenplan.calibration.crossval import CrossValidation, loo_refits, summarise
from tokenplan.calibration.fit import FitOptions, FitResult, fit
from tokenplan.calibration.heldout import band_table, fold_refits, fold_residuals, grouped_folds
from tokenplan.calibration.levels import is_ratio_level
from tokenplan.calibration.memo import PredictionMemo
from tokenplan.calibration.parallel import default_workers, run_refits
from tokenplan.calibration.validate import Case
from tokenplan.errors import InputError
from tokenplan.files.measurements import SERVING, read_measurements
from tokenplan.perf.efficiency import Efficiency
from tokenplan.results import JsonResult

SERVING_FIT_STRIDE = 5  # fit on every 5th serving row (in file order)
CV_SERVING_STRIDE = 30  # cross-validation refits on every 30th
# Thinning is for run time on the dev sets only: the full refit weights each kind of file down to
# the smallest one (fit.row_kind: the 2,500 serving rows weigh as much in all as the smallest
# file), so every 5th serving row carries nearly the same pull at a fifth of the cost. A user's
# file of a few dozen rows costs seconds whole, and thinning it would throw most of it away (a
# 10-row file became 2 rows), so files of at most THIN_ABOVE rows are never thinned.
THIN_ABOVE = 500
CV_MAX_NFEV = 4  # optimiser budget of each cross-validation refit (see calibrate)


BAND_FOLDS = 5  # K of the K-fold cross-validation whose held-out residuals make the error bands
# Optimiser budget of each K-fold refit. They start from the full fit's factors, which a fifth
# fewer rows move little; two steps let each fold's factors leave the full optimum.
BAND_MAX_NFEV = 2


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


CV_LATENCY_STRIDE = 6  # cross-validation refits use every 6th row that has throughput and latencies (InferenceX)


def _read_cases(paths: list[str]) -> tuple[list[tuple[str, str, list[Case]]], int]:
    """(path, kind, predictable rows) per file, and the number of rows skipped."""
    files, n_skipped = [], 0
    for path in paths:
        data = read_measurements(path)
        c, s = resolve_file(data)
        n_skipped += len(s)
        both = any(m.tpot_s is not None for m in data.rows) and data.kind != SERVING
        files.append((path, SERVING if data.kind == SERVING else "both" if both else "throughput", c))
    return files, n_skipped


def _subsample(files: list[tuple[str, str, list[Case]]], stride: int, latency_stride: int = 1) -> list[Case]:
    """Serving files every ``stride``-th row, files whose rows carry throughput and latencies
    (InferenceX) every ``latency_stride``-th, others — and any file of at most
    :data:`THIN_ABOVE` predictable rows — whole (the same Case objects for every stride, so the
    fits share one prediction memo)."""
    return [
        c
        for _, kind, rows in files
        for c in (
            rows
            if len(rows) <= THIN_ABOVE
            else rows[::stride]
            if kind == SERVING
            else rows[::latency_stride]
            if kind == "both"
            else rows
        )
    ]


def _fit_cases(paths: list[str], stride: int, latency_stride: int = 1) -> tuple[list[Case], int]:
    """Predictable rows of the files (see :func:`_subsample`) and the number of rows skipped."""
    files, n_skipped = _read_cases(paths)
    return _subsample(files, stride, latency_stride), n_skipped


def calibrate(
    paths: list[str], command: str = "", cross_validation: bool = True, bands: bool = False, workers: int | None = None
) -> CalibrationResult:
    """Fit the efficiency factors on measurement CSVs and cross-validate (leave one GPU out, leave
    one model out). Serving files of more than :data:`THIN_ABOVE` rows are subsampled deterministically (every 5th row for the fit,
    every 30th for the cross-validation refits). With ``bands`` (needs ``cross_validation``),
    also a :data:`BAND_FOLDS`-fold cross-validation whose folds hold out whole configurations
    (model × GPU × engine; :func:`~tokenplan.calibration.heldout.grouped_folds`): its held-out
    residuals make the error-band table. Every fit shares one prediction memo (exact reuse,
    :mod:`tokenplan.calibration.memo`); the full fit's Jacobians and the refits run over
    ``workers`` processes (default: the CPUs this process may use). Raises InputError/ConfigError for bad files."""
    files, n_skipped = _read_cases(paths)
    cases = _subsample(files, SERVING_FIT_STRIDE)
    if not cases:
        raise InputError("measurement files", ", ".join(paths), "files with at least one predictable row")
    memo = PredictionMemo()
    workers = workers or default_workers()
    result = fit(cases, memo=memo, workers=workers)
    cv: list[CrossValidation] = []
    provenance = (
        f"fit by `{command or 'tokenplan calibrate ' + ' '.join(paths)}` on {len(cases)} rows "
        f"({', '.join(_describe(p) for p in paths)})"
    )
    table = None
    if cross_validation:
        cv_cases = _subsample(files, CV_SERVING_STRIDE, CV_LATENCY_STRIDE)
        # Each leave-one-out fold refits from the full fit's default (already near the optimum)
        # with a short budget (CV_MAX_NFEV); each band fold from the full fit's solution.
        light = FitOptions(max_nfev=CV_MAX_NFEV)
        loo = {by: loo_refits(cv_cases, by, result.table.default, light) for by in ("gpu", "model")}
        # Every leave-one-out refit starts at the same point: one Jacobian there on all the rows
        # (its Jacobian evaluations split over the workers) puts the predictions of each refit's
        # first Jacobian in the memo before the refits fork from here.
        fit(cv_cases, result.table.default, replace(light, max_nfev=1), memo=memo, workers=workers)
        band_refits = (
            fold_refits(
                cases, grouped_folds(cases, BAND_FOLDS), result, Efficiency(), FitOptions(max_nfev=BAND_MAX_NFEV)
            )
            if bands
            else []
        )
        held = run_refits(band_refits + loo["gpu"] + loo["model"], memo, workers)
        n_gpu = len(loo["gpu"])
        cv = [
            summarise("gpu", loo["gpu"], held[len(band_refits) : len(band_refits) + n_gpu]),
            summarise("model", loo["model"], held[len(band_refits) + n_gpu :]),
        ]
        if bands:
            sources = {id(c): Path(path).name for path, _, rows in files for c in rows}
            table = band_table(
                fold_residuals(band_refits, held[: len(band_refits)], sources),
                list(cv[0].residuals),
                cases,
                f"{BAND_FOLDS}-fold cross-validated residuals (folds of whole configurations, "
                f"model × GPU × engine) of the {provenance}",
            )
    set_aside = sum(1 for c in cases if c.measurement.throughput_set_aside is not None)
    return CalibrationResult(result, tuple(cv), profile_of(result, provenance), n_skipped, table, set_aside)


@dataclass(frozen=True)
class CalibrationUpdate:
    """``calibrate FILE.csv`` without ``--refit``: an update of the shipped fit by the files'
    rows (:mod:`tokenplan.calibration.update`). ``profile``: the update profile (JSON object);
    ``groups``: per ``engine/architecture`` group the factors moved (shipped → calibrated, ±1σ),
    the candidate kept and the median |error| on the group's rows, shipped and calibrated."""

    n: int
    skipped: int
    profile: dict[str, Any]
    groups: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` form: rows, skipped rows, groups and the profile."""
        return {"n": self.n, "skipped": self.skipped, "groups": self.groups, "profile": self.profile}


def calibrate_update(paths: list[str], command: str = "") -> CalibrationUpdate:
    """Update the shipped fit with the rows of measurement CSVs (no file of at most
    :data:`THIN_ABOVE` rows is thinned). Raises InputError/ConfigError for bad files, InputError
    when no row is predictable or none carries TPOT or throughput."""
    from tokenplan.calibration.update import update_profile

    cases, n_skipped = _fit_cases(paths, SERVING_FIT_STRIDE, CV_LATENCY_STRIDE)
    if not cases:
        raise InputError("measurement files", ", ".join(paths), "files with at least one predictable row")
    provenance = (
        f"update of the shipped fit by `{command or 'tokenplan calibrate ' + ' '.join(paths)}` on "
        f"{len(cases)} rows ({', '.join(_describe(p) for p in paths)})"
    )
    profile, fits = update_profile(cases, read_profile(None).table, provenance)
    if not fits:
        raise InputError("measurement files", ", ".join(paths), "rows with TPOT or output tok/s measured")
    groups = {
        g: {
            "rows": len(f.run.levels),
            "kept": f.kept,
            "factors": {
                k: {"shipped": f.prior[k], "calibrated": v, "uncertainty": None if math.isnan(s) else s}
                for k, (v, s) in f.run.factors.items()
            },
            "median_abs_error_shipped": f.error_shipped,
            "median_abs_error_calibrated": f.error_calibrated,
        }
        for g, f in fits.items()
    }
    return CalibrationUpdate(len(cases), n_skipped, profile, groups)


def _describe(path: str) -> str:
    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()[:12]
    return f"{path} sha256:{digest}"


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
