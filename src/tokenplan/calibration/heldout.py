"""Held-out residuals and the error-band table made from them.

:func:`grouped_kfold_residuals` predicts every fit row with a refit that saw no row of its
*configuration* (model × GPU × engine): the folds hold out whole configurations, never random
rows. A random-row fold keeps the siblings of every held-out row (the same configuration at
other concurrencies and lengths), so its residuals are nearly in-sample ones and the bands made
from them cover ~65–72 % of new configurations instead of 80 % (issue 28).
:func:`band_table` turns those residuals, and the leave-one-GPU-out ones of
:func:`tokenplan.calibration.crossval.cross_validate`, into the
:class:`~tokenplan.calibration.bands.BandTable` that ``tokenplan calibrate --bands`` writes, and
checks its coverage by nested cross-validation (each fold's band from the other folds only),
overall per metric and per file × measured quantity.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from tokenplan.calibration.band_quantiles import COVERAGE, conformal_band
from tokenplan.calibration.bands import (
    MIN_POINTS,
    QUEUE_METRICS,
    BandTable,
    Residual,
    covered,
    lookup_keys,
    quantile_bands,
)
from tokenplan.calibration.fit import FitOptions, FitResult
from tokenplan.calibration.memo import PredictionMemo
from tokenplan.calibration.parallel import Refit, run_refits
from tokenplan.calibration.residuals import configuration
from tokenplan.calibration.validate import Case
from tokenplan.perf.efficiency import Efficiency


@dataclass(frozen=True, slots=True)
class FoldResidual:
    """A held-out residual and the fold that held it out."""

    fold: int
    residual: Residual


def grouped_folds(cases: list[Case], folds: int) -> list[int]:
    """The fold of each case: whole configurations (:func:`configuration`) per fold, the largest
    first, each into the fold with the fewest rows so far (ties: the lowest fold), so the folds
    hold about as many rows each. Deterministic: configurations of equal size go in sorted order."""
    sizes: dict[tuple[str, str, str], int] = {}
    for c in cases:
        sizes[configuration(c)] = sizes.get(configuration(c), 0) + 1
    load = [0] * folds
    fold_of: dict[tuple[str, str, str], int] = {}
    for key, n in sorted(sizes.items(), key=lambda kv: (-kv[1], kv[0])):
        k = min(range(folds), key=lambda j: (load[j], j))
        fold_of[key] = k
        load[k] += n
    return [fold_of[configuration(c)] for c in cases]


def fold_refits(
    cases: list[Case], fold: list[int], full: FitResult, base: Efficiency, options: FitOptions
) -> list[Refit]:
    """One refit per fold (``fold``: each case's, e.g. :func:`grouped_folds`), warm-started at
    the full fit's solution (``options.max_nfev`` evaluations); a fold that holds every row
    (one configuration in all) is not refitted."""
    refits = []
    for k in sorted(set(fold)):
        train = tuple(c for c, f in zip(cases, fold) if f != k)
        if train:
            refits.append(
                Refit(f"fold {k}", train, tuple(c for c, f in zip(cases, fold) if f == k), base, options, dict(full.x))
            )
    return refits


def fold_residuals(
    refits: list[Refit], held: list[list[list[Residual]]], sources: dict[int, str] | None = None
) -> list[FoldResidual]:
    """The residuals of :func:`~tokenplan.calibration.parallel.run_refits`, tagged with their
    fold (the refit's position) and, from ``sources`` (``id(case)`` → file), their file."""
    out: list[FoldResidual] = []
    for k, (refit, per_case) in enumerate(zip(refits, held)):
        for case, residuals in zip(refit.test, per_case):
            source = (sources or {}).get(id(case), "")
            out += [FoldResidual(k, replace(r, source=source) if source else r) for r in residuals]
    return out


def grouped_kfold_residuals(
    cases: list[Case],
    full: FitResult,
    folds: int,
    base: Efficiency,
    options: FitOptions,
    memo: PredictionMemo | None = None,
    workers: int | None = None,
) -> list[FoldResidual]:
    """Refit without each fold of whole configurations (:func:`grouped_folds`) and predict it."""
    refits = fold_refits(cases, grouped_folds(cases, folds), full, base, options)
    return fold_residuals(refits, run_refits(refits, memo, workers))


def nested_coverage(
    held: list[FoldResidual],
    coverage: float = COVERAGE,
    min_points: int = MIN_POINTS,
    by: Callable[[Residual], str] = lambda r: r.metric,
) -> dict[str, float]:
    """``by(residual)`` (default: the metric) → share of each fold's residuals inside the band made
    from the *other* folds."""
    hits: dict[str, list[bool]] = {}
    for k in sorted({h.fold for h in held}):
        bands = quantile_bands([h.residual for h in held if h.fold != k], coverage, min_points)
        for h in (h for h in held if h.fold == k):
            r = h.residual
            levels, queue = bands[r.metric], r.queue if r.metric in QUEUE_METRICS else ""
            where = (r.engine, r.architecture, r.family, r.batch, r.spec, queue)
            key = next(k2 for k2 in lookup_keys(*where) if k2 in levels)
            hits.setdefault(by(r), []).append(covered(levels[key], r.log_error))
    return {m: sum(v) / len(v) for m, v in sorted(hits.items())}


def coverage_by_file(
    held: list[FoldResidual], coverage: float = COVERAGE, min_points: int = MIN_POINTS
) -> dict[str, dict[str, float]]:
    """file → measured quantity (``throughput``, ``tpot``, ``ttft``) → nested coverage
    (:func:`nested_coverage` split by the residual's source and quantity)."""
    flat = nested_coverage(held, coverage, min_points, by=lambda r: f"{r.source}\t{r.quantity}")
    out: dict[str, dict[str, float]] = {}
    for key, share in flat.items():
        source, quantity = key.split("\t")
        out.setdefault(source, {})[quantity] = share
    return out


def band_table(
    held: list[FoldResidual], gpu_out: list[Residual], cases: list[Case], provenance: str, coverage: float = COVERAGE
) -> BandTable:
    """The shipped table: regime bands from the grouped K-fold residuals, the extrapolation band from the
    leave-one-GPU-out residuals, the measured batch range per engine/architecture, the GPUs seen
    and the nested-CV coverage (per metric, and per file × quantity)."""
    residuals = [h.residual for h in held]
    extrapolation = {
        metric: conformal_band([r.log_error for r in gpu_out if r.metric == metric], coverage)
        for metric in sorted({r.metric for r in gpu_out})
    }
    max_batch: dict[str, float] = {}
    for r in residuals:
        key = f"{r.engine}/{r.architecture}"
        max_batch[key] = max(max_batch.get(key, 0.0), r.batch)
    return BandTable(
        coverage,
        quantile_bands(residuals, coverage),
        extrapolation,
        max_batch,
        tuple(sorted({c.measurement.gpu for c in cases})),
        nested_coverage(held, coverage),
        provenance,
        coverage_by_file(held, coverage),
        tuple(sorted({f"{c.group}/{c.config.weight_dtype.flops_class}" for c in cases})),
        tuple(sorted({c.engine for c in cases if c.config.layout.pp > 1})),
    )
