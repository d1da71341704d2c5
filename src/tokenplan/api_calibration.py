"""The calibration API: ``validate`` (predict measured rows, summarise the error) and
``calibrate`` (fit the efficiency factors, cross-validate, write a profile).

Names in the measurement rows are resolved through the same ``api.build_config`` as
``tokenplan predict``; rows that cannot be predicted are kept with their reason.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from pathlib import Path

from tokenplan.api import PredictRequest, build_config, efficiency_table
from tokenplan.calibration.bands import BandTable, model_family
from tokenplan.calibration.fit import CrossValidation, FitOptions, FitResult, cross_validate, fit
from tokenplan.calibration.heldout import band_table, kfold_residuals
from tokenplan.calibration.validate import Case, Validation, validate_cases
from tokenplan.errors import InputError, TokenplanError
from tokenplan.job.workload import LengthDist
from tokenplan.measurement import Measurement, SkippedRow
from tokenplan.perf.efficiency import Efficiency
from tokenplan.userfiles_measurements import SERVING, MeasurementFile, read_measurements



def measurement_request(m: Measurement, calibration: str | None = None) -> PredictRequest:
    """The ``tokenplan predict`` request of a measured row (lengths must be known)."""
    return PredictRequest(
        model=m.model, gpu=m.gpu, num_gpus=m.num_gpus, tp=m.tp, pp=m.pp, ep=m.ep, attention_dp=m.attention_dp,
        weight_dtype=m.weight_dtype, kv_dtype=m.kv_dtype, isl=m.isl_tokens or 1.0, osl=m.osl_tokens or 1.0,
        concurrency=m.concurrency, spec=m.spec, engine=m.engine, calibration=calibration,
        max_running=m.max_running,
    )


def resolve_case(m: Measurement) -> Case | SkippedRow:
    """A measurement resolved to a Case, or the reason it cannot be predicted."""
    missing = [name for name, v in (("isl", m.isl_tokens), ("osl", m.osl_tokens)) if v is None]
    if missing:
        return SkippedRow(m.line, m.row_id, f"missing lengths ({', '.join(missing)})")
    req = measurement_request(m)
    try:
        config, model, gpu = build_config(req)
    except TokenplanError as exc:
        return SkippedRow(m.line, m.row_id, str(exc))
    per_replica = None if m.concurrency is None else m.concurrency / config.layout.dp
    return Case(m, model, gpu, config, m.engine, gpu.architecture, model_family(m.model),
                stated_lengths(m.isl_tokens, m.length_low_fraction),
                stated_lengths(m.osl_tokens, m.length_low_fraction), per_replica)


def stated_lengths(mean_tokens: float, low_fraction: float | None) -> LengthDist:
    """The length distribution a row states: fixed at its mean, or uniform on ``[f·L, L]`` with
    mean ``(1 + f)·L/2`` (InferenceX, ``f`` = 0.8) as a lognormal of the same mean and
    coefficient of variation ``(1 − f) / ((1 + f)·√3)`` (the uniform's sd ``(1 − f)·L/√12``
    over its mean; σ = √ln(1 + CV²)), capped at ``L``. For f = 0.8: CV 0.064, σ 0.064, and
    the running mean E[L²]/E[L] is 1.004 × the mean, as for the uniform itself."""
    if low_fraction is None or not 0 < low_fraction < 1:
        return LengthDist(mean_tokens)
    cv = (1 - low_fraction) / ((1 + low_fraction) * math.sqrt(3))
    top = 2 * mean_tokens / (1 + low_fraction)
    return LengthDist(mean_tokens, math.sqrt(math.log1p(cv * cv)), top)


def resolve_file(data: MeasurementFile) -> tuple[list[Case], list[SkippedRow]]:
    """Cases and skipped rows (malformed first, then unpredictable) of a read file."""
    cases, skipped = [], list(data.skipped)
    for m in data.rows:
        r = resolve_case(m)
        (skipped if isinstance(r, SkippedRow) else cases).append(r)
    return cases, skipped


def validate(path: str, calibration: str | None = None) -> Validation:
    """Predict every row of a measurement CSV and summarise the error (see ``tokenplan validate``).

    Raises:
        InputError, ConfigError: the file (or the calibration profile) is missing or malformed.
    """
    table = efficiency_table(calibration)
    data = read_measurements(path)
    cases, skipped = resolve_file(data)
    return validate_cases(data.kind, cases, skipped, table)


def validation_dict(v: Validation) -> dict:
    """The ``--json`` form: ``n``, ``skipped``, ``median_abs_pct_error``, ``p90_abs_pct_error``,
    ``bias`` (fractions, on throughput for throughput files and on TPOT for serving files),
    ``tpot_*``/``ttft_*`` for serving files, ``by_engine``/``by_gpu``/``by_family`` and ``rows``."""
    main = "throughput" if v.kind == "throughput" else "tpot"
    s = v.summary.get(main)
    out: dict = {
        "kind": v.kind, "n": len(v.rows),
        "skipped": [{"line": k.line, "id": k.row_id, "reason": k.reason} for k in v.skipped],
        "median_abs_pct_error": s.median_abs if s else None, "p90_abs_pct_error": s.p90_abs if s else None,
        "bias": s.bias if s else None, "calibration": v.provenance,
    }
    for metric in ("tpot", "ttft"):
        if metric in v.summary:
            t = v.summary[metric]
            out.update({f"{metric}_median_abs_pct_error": t.median_abs, f"{metric}_p90_abs_pct_error": t.p90_abs,
                        f"{metric}_bias": t.bias})
    for dim in ("engine", "gpu", "family"):
        out[f"by_{dim}"] = {g: {"n": e.n, "median_abs_pct_error": e.median_abs, "p90_abs_pct_error": e.p90_abs,
                                "bias": e.bias}
                            for g, e in v.breakdown.get((dim, main), {}).items()}
    out["rows"] = [_row_dict(r) for r in v.rows]
    return out


def _row_dict(r) -> dict:
    m = r.case.measurement
    d = {"line": m.line, "id": m.row_id, "engine": m.engine, "model": m.model, "gpu": m.gpu,
         "num_gpus": m.num_gpus, "layout": r.case.config.layout.describe(), "weight_dtype": m.weight_dtype,
         "isl": m.isl_tokens, "osl": m.osl_tokens, "concurrency": m.concurrency}
    units = {"throughput": ("output_tok_s_per_gpu", 1.0), "tpot": ("tpot_ms", 1e3), "ttft": ("ttft_ms", 1e3)}
    for metric, (pred, meas, err) in r.values.items():
        name, scale = units[metric]
        prefix = "" if metric == "throughput" else f"{metric}_"
        d.update({f"predicted_{name}": pred * scale, f"measured_{name}": meas * scale, f"{prefix}error": err})
    return d


SERVING_FIT_STRIDE = 5  # fit on every 5th serving row (in file order): keeps calibrate under a minute
CV_SERVING_STRIDE = 30  # cross-validation refits on every 30th
CV_MAX_NFEV = 4  # optimiser budget of each cross-validation refit (see calibrate)


BAND_FOLDS = 5  # K of the K-fold cross-validation whose held-out residuals make the error bands
# Optimiser budget of each K-fold refit. They start from the full fit's factors, which a fifth
# fewer rows move little; two steps let each fold's factors leave the full optimum.
BAND_MAX_NFEV = 2


@dataclass(frozen=True)
class CalibrationResult:
    """A fit, its cross-validation, the profile JSON that ``--calibration`` reads, and the
    error-band table (None unless asked for: it needs the cross-validation)."""

    fit: FitResult
    cv: tuple[CrossValidation, ...]
    profile: dict
    skipped: int
    bands: BandTable | None = None


CV_LATENCY_STRIDE = 6  # cross-validation refits use every 6th row that has throughput and latencies (InferenceX)


def _fit_cases(paths: list[str], stride: int, latency_stride: int = 1) -> tuple[list[Case], int]:
    """Predictable rows of the files: serving files every ``stride``-th row, files whose rows
    carry throughput and latencies (InferenceX) every ``latency_stride``-th, others whole."""
    cases, n_skipped = [], 0
    for path in paths:
        data = read_measurements(path)
        c, s = resolve_file(data)
        n_skipped += len(s)
        both = any(m.tpot_s is not None for m in data.rows) and data.kind != SERVING
        cases += c[::stride] if data.kind == SERVING else c[::latency_stride] if both else c
    return cases, n_skipped


def calibrate(paths: list[str], command: str = "", cross_validation: bool = True,
              bands: bool = False) -> CalibrationResult:
    """Fit the efficiency factors on measurement CSVs and cross-validate (leave one GPU out, leave
    one model out). Serving files are subsampled deterministically (every 5th row for the fit,
    every 30th for the cross-validation refits). With ``bands`` (needs ``cross_validation``),
    also a :data:`BAND_FOLDS`-fold cross-validation over the fit rows whose held-out residuals
    make the error-band table. Raises InputError/ConfigError for bad files."""
    cases, n_skipped = _fit_cases(paths, SERVING_FIT_STRIDE)
    if not cases:
        raise InputError("measurement files", ", ".join(paths), "files with at least one predictable row")
    result = fit(cases)
    cv: list[CrossValidation] = []
    provenance = (f"fit by `{command or 'tokenplan calibrate ' + ' '.join(paths)}` on {len(cases)} rows "
                  f"({', '.join(_describe(p) for p in paths)})")
    table = None
    if cross_validation:
        cv_cases, _ = _fit_cases(paths, CV_SERVING_STRIDE, CV_LATENCY_STRIDE)
        base = result.table.default
        # Each fold refits from the full fit's default (already near the optimum) with a short
        # budget: 26 refits at the full budget would take ~20 minutes.
        light = FitOptions(max_nfev=CV_MAX_NFEV)
        cv = [cross_validate(cv_cases, by, base, light) for by in ("gpu", "model")]
        if bands:
            held = kfold_residuals(cases, result, BAND_FOLDS, Efficiency(), FitOptions(max_nfev=BAND_MAX_NFEV))
            table = band_table(held, list(cv[0].residuals), cases,
                               f"{BAND_FOLDS}-fold cross-validated residuals of the {provenance}")
    return CalibrationResult(result, tuple(cv), profile_dict(result, provenance), n_skipped, table)


def _describe(path: str) -> str:
    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()[:12]
    return f"{path} sha256:{digest}"


def profile_dict(result: FitResult, provenance: str) -> dict:
    """The calibration JSON: ``default`` and ``groups`` of factor → value, ``uncertainty`` (±1σ
    of the factors fitted inside their bounds), ``at_bound`` (``level.factor`` of those that
    ended on a bound of ``EFFICIENCY_BOUNDS``: no σ, the bound holds them),
    ``held_at_default`` (factors the fit left at their documented default) and ``provenance``."""
    t = result.table
    return {
        "default": t.default.as_dict(),
        "groups": {g: e.as_dict() for g, e in sorted(t.by_group.items())},
        "uncertainty": {f"{f.level}.{f.name}": f.uncertainty for f in result.factors if not f.at_bound},
        "at_bound": list(result.at_bound),
        "held_at_default": list(result.held),
        "provenance": provenance,
    }


def calibration_dict(r: CalibrationResult) -> dict:
    """The ``--json`` form of a calibration: factors with uncertainty (None for a factor on a
    bound, flagged ``at_bound``), the optimiser's outcome (``converged``, ``status``,
    ``message``, ``nfev``) and the CV tables."""
    return {
        "n": r.fit.n_rows, "skipped": r.skipped, "converged": r.fit.converged,
        "optimizer": {"status": r.fit.status, "message": r.fit.message, "nfev": r.fit.nfev},
        "at_bound": list(r.fit.at_bound), "held": list(r.fit.held),
        "factors": [{"level": f.level, "name": f.name, "value": f.value,
                     "uncertainty": None if f.at_bound else f.uncertainty, "at_bound": f.at_bound}
                    for f in r.fit.factors],
        "cross_validation": {cv.by: {"median_abs_pct_error": cv.median_abs, "p90_abs_pct_error": cv.p90_abs,
                                     "folds": [{"held_out": f.held_out, "n": f.n, "median_abs_pct_error": f.median_abs}
                                               for f in cv.folds]} for cv in r.cv},
        "profile": r.profile,
    }
