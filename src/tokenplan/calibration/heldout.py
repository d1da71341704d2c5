"""Held-out residuals and the error-band table made from them.

:func:`kfold_residuals` predicts every fit row with a refit that did not see it (K folds,
assigned round-robin in file order); :func:`band_table` turns those residuals, and the
leave-one-GPU-out ones of :func:`tokenplan.calibration.crossval.cross_validate`, into the
:class:`~tokenplan.calibration.bands.BandTable` that ``tokenplan calibrate --bands`` writes, and
checks its coverage by nested cross-validation (each fold's band from the other folds only).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tokenplan.calibration.bands import (COVERAGE, MIN_POINTS, BandTable, Residual, conformal_band, covered,
                                         lookup_keys, quantile_bands, spec_regime)
from tokenplan.calibration.fit import FitOptions, FitResult, fit
from tokenplan.calibration.validate import Case, predict_case
from tokenplan.perf.efficiency import Efficiency


def case_residuals(case: Case, eff: Efficiency) -> list[Residual]:
    """The case's residuals: ``rate`` (log pred/meas of output tok/s, and −log pred/meas of
    TPOT) and ``ttft``; none where the configuration is rejected."""
    p = predict_case(case, eff)
    if p.rejected is not None:
        return []
    m = case.measurement
    pairs = []
    if m.output_tok_s_per_gpu is not None:
        pairs.append(("rate", math.log(p.output_tok_s_per_gpu / m.output_tok_s_per_gpu)))
    if m.tpot_s is not None:
        pairs.append(("rate", -math.log(p.tpot_s / m.tpot_s)))
    if m.ttft_s is not None:
        pairs.append(("ttft", math.log(p.ttft_s / m.ttft_s)))
    spec = spec_regime(case.config.spec)
    return [Residual(case.engine, case.architecture, case.family, m.gpu, p.batch, metric, r, spec)
            for metric, r in pairs]


@dataclass(frozen=True, slots=True)
class FoldResidual:
    """A held-out residual and the fold that held it out."""

    fold: int
    residual: Residual


def kfold_residuals(cases: list[Case], full: FitResult, folds: int, base: Efficiency,
                    options: FitOptions) -> list[FoldResidual]:
    """Refit without each fold (warm-started from the full fit's factors, ``options.max_nfev``
    evaluations) and predict the fold. Folds are ``index % folds`` in the given order."""
    start = {(f.level, f.name): f.value for f in full.factors}
    out: list[FoldResidual] = []
    for k in range(folds):
        train = [c for i, c in enumerate(cases) if i % folds != k]
        test = [c for i, c in enumerate(cases) if i % folds == k]
        table = fit(train, base, options, start=start).table
        for c in test:
            out += [FoldResidual(k, r) for r in case_residuals(c, table.resolve(c.engine, c.architecture))]
    return out


def nested_coverage(held: list[FoldResidual], coverage: float = COVERAGE,
                    min_points: int = MIN_POINTS) -> dict[str, float]:
    """metric → share of each fold's residuals inside the band made from the *other* folds."""
    hits: dict[str, list[bool]] = {}
    for k in sorted({h.fold for h in held}):
        bands = quantile_bands([h.residual for h in held if h.fold != k], coverage, min_points)
        for h in (h for h in held if h.fold == k):
            r = h.residual
            levels = bands[r.metric]
            key = next(k2 for k2 in lookup_keys(r.engine, r.architecture, r.family, r.batch, r.spec) if k2 in levels)
            hits.setdefault(r.metric, []).append(covered(levels[key], r.log_error))
    return {m: sum(v) / len(v) for m, v in sorted(hits.items())}


def band_table(held: list[FoldResidual], gpu_out: list[Residual], cases: list[Case], provenance: str,
               coverage: float = COVERAGE) -> BandTable:
    """The shipped table: regime bands from the K-fold residuals, the extrapolation band from the
    leave-one-GPU-out residuals, the measured batch range per engine/architecture, the GPUs seen
    and the nested-CV coverage."""
    residuals = [h.residual for h in held]
    extrapolation = {metric: conformal_band([r.log_error for r in gpu_out if r.metric == metric], coverage)
                     for metric in sorted({r.metric for r in gpu_out})}
    max_batch: dict[str, float] = {}
    for r in residuals:
        key = f"{r.engine}/{r.architecture}"
        max_batch[key] = max(max_batch.get(key, 0.0), r.batch)
    return BandTable(coverage, quantile_bands(residuals, coverage), extrapolation, max_batch,
                     tuple(sorted({c.measurement.gpu for c in cases})), nested_coverage(held, coverage), provenance)
