"""The full refit behind ``tokenplan calibrate --refit``: which rows each fit sees (thinning), the
fit, the leave-one-GPU-out / leave-one-model-out cross-validations and the K-fold error bands,
and the typed result (:class:`~tokenplan.calibration.summary.CalibrationResult`).

Cases arrive resolved, one :class:`CaseFile` per measurement file (``api.calibrate`` reads and
resolves the files); the provenance names the command and the files as the caller describes them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from tokenplan.calibration.crossval import CrossValidation, loo_refits, summarise
from tokenplan.calibration.fit import FitOptions, fit
from tokenplan.calibration.heldout import band_table, fold_refits, fold_residuals, grouped_folds
from tokenplan.calibration.memo import PredictionMemo
from tokenplan.calibration.parallel import default_workers, run_refits
from tokenplan.calibration.summary import CalibrationResult, profile_of
from tokenplan.calibration.validate import Case
from tokenplan.errors import InputError
from tokenplan.perf.efficiency import Efficiency

SERVING_FIT_STRIDE = 5  # fit on every 5th serving row (in file order)
CV_SERVING_STRIDE = 30  # cross-validation refits on every 30th
CV_LATENCY_STRIDE = 6  # cross-validation refits use every 6th row that has throughput and latencies (InferenceX)
# Thinning is for run time on the dev sets only: the full refit weights each kind of file down to
# the smallest one (fit.row_kind: the 2,500 serving rows weigh as much in all as the smallest
# file), so every 5th serving row carries nearly the same pull at a fifth of the cost. A user's
# file of a few dozen rows costs seconds whole, and thinning it would throw most of it away (a
# 10-row file became 2 rows), so files of at most THIN_ABOVE rows are never thinned.
THIN_ABOVE = 500
CV_MAX_NFEV = 4  # optimiser budget of each cross-validation refit (see refit)

BAND_FOLDS = 5  # K of the K-fold cross-validation whose held-out residuals make the error bands
# Optimiser budget of each K-fold refit. They start from the full fit's factors, which a fifth
# fewer rows move little; two steps let each fold's factors leave the full optimum.
BAND_MAX_NFEV = 2

SERVING, BOTH, THROUGHPUT = "serving", "both", "throughput"  # what a file's rows measure


@dataclass(frozen=True)
class CaseFile:
    """One measurement file's predictable rows: its path, what its rows measure (:data:`SERVING`
    latencies, :data:`BOTH` throughput and latencies as InferenceX, or :data:`THROUGHPUT` only)
    and the resolved cases, in file order."""

    path: str
    kind: str
    cases: list[Case]

    @classmethod
    def of(cls, path: str, serving: bool, has_tpot: bool, cases: list[Case]) -> CaseFile:
        """A serving file's rows, or a throughput file's (with latencies where any row has TPOT)."""
        return cls(path, SERVING if serving else BOTH if has_tpot else THROUGHPUT, cases)


def subsample(files: list[CaseFile], stride: int, latency_stride: int = 1) -> list[Case]:
    """Serving files every ``stride``-th row, files whose rows carry throughput and latencies
    (InferenceX) every ``latency_stride``-th, others — and any file of at most
    :data:`THIN_ABOVE` predictable rows — whole (the same Case objects for every stride, so the
    fits share one prediction memo)."""
    steps = {SERVING: stride, BOTH: latency_stride}
    return [c for f in files for c in (f.cases if len(f.cases) <= THIN_ABOVE else f.cases[:: steps.get(f.kind, 1)])]


def fit_rows(files: list[CaseFile], paths: list[str], stride: int, latency_stride: int = 1) -> list[Case]:
    """:func:`subsample`, refusing files with no predictable row (InputError naming ``paths``)."""
    cases = subsample(files, stride, latency_stride)
    if not cases:
        raise InputError("measurement files", ", ".join(paths), "files with at least one predictable row")
    return cases


def refit(
    files: list[CaseFile],
    command: str,
    described: list[str],
    skipped: int,
    cross_validation: bool = True,
    bands: bool = False,
    workers: int | None = None,
) -> CalibrationResult:
    """Fit the efficiency factors on the files' rows and cross-validate (leave one GPU out, leave
    one model out). Serving files of more than :data:`THIN_ABOVE` rows are subsampled
    deterministically (every 5th row for the fit, every 30th for the cross-validation refits).
    With ``bands`` (needs ``cross_validation``), also a :data:`BAND_FOLDS`-fold cross-validation
    whose folds hold out whole configurations (model × GPU × engine;
    :func:`~tokenplan.calibration.heldout.grouped_folds`): its held-out residuals make the
    error-band table. Every fit shares one prediction memo (exact reuse,
    :mod:`tokenplan.calibration.memo`); the full fit's Jacobians and the refits run over
    ``workers`` processes (default: the CPUs this process may use).

    Args:
        command: the command line named in the provenance; described: one text per file
            (path and digest); skipped: rows the files held that could not be predicted.

    Raises:
        InputError: no predictable row.
    """
    paths = [f.path for f in files]
    cases = fit_rows(files, paths, SERVING_FIT_STRIDE)
    memo = PredictionMemo()
    workers = workers or default_workers()
    result = fit(cases, memo=memo, workers=workers)
    cv: list[CrossValidation] = []
    provenance = f"fit by `{command}` on {len(cases)} rows ({', '.join(described)})"
    table = None
    if cross_validation:
        cv_cases = subsample(files, CV_SERVING_STRIDE, CV_LATENCY_STRIDE)
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
        n_bands, n_gpu = len(band_refits), len(loo["gpu"])
        cv = [
            summarise("gpu", loo["gpu"], held[n_bands : n_bands + n_gpu]),
            summarise("model", loo["model"], held[n_bands + n_gpu :]),
        ]
        if bands:
            sources = {id(c): Path(f.path).name for f in files for c in f.cases}
            table = band_table(
                fold_residuals(band_refits, held[:n_bands], sources),
                list(cv[0].residuals),
                cases,
                f"{BAND_FOLDS}-fold cross-validated residuals (folds of whole configurations, "
                f"model × GPU × engine) of the {provenance}",
            )
    set_aside = sum(1 for c in cases if c.measurement.throughput_set_aside is not None)
    return CalibrationResult(result, tuple(cv), profile_of(result, provenance), skipped, table, set_aside)
