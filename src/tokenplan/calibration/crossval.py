"""Leave-one-group-out cross-validation of the efficiency fit: refit without one GPU type (or one
model), predict its rows, and pool the held-out errors (README "How accurate is it?")."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from tokenplan.calibration.bands import Residual
from tokenplan.calibration.fit import FitOptions
from tokenplan.calibration.memo import PredictionMemo
from tokenplan.calibration.parallel import Refit, run_refits
from tokenplan.calibration.validate import Case
from tokenplan.perf.efficiency import Efficiency
from tokenplan.stats import percentile


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
    residuals: tuple[Residual, ...] = field(default=())  # bands.Residual of every held-out row and metric


def loo_refits(
    cases: list[Case], by: str, base: Efficiency | None = None, options: FitOptions = FitOptions()
) -> list[Refit]:
    """One refit per GPU (``by="gpu"``) or model (``by="model"``): fit on the rest from
    ``base``, predict the held-out rows. A group that holds every row is not held out."""
    key: Callable[[Case], str] = (lambda c: c.measurement.gpu) if by == "gpu" else (lambda c: c.measurement.model)
    base = base or Efficiency()
    refits = []
    for name in sorted({key(c) for c in cases}):
        train = tuple(c for c in cases if key(c) != name)
        if train:
            refits.append(Refit(name, train, tuple(c for c in cases if key(c) == name), base, options))
    return refits


def summarise(by: str, refits: list[Refit], held: list[list[list[Residual]]]) -> CrossValidation:
    """Pool the held-out rows of :func:`loo_refits` (as :func:`~tokenplan.calibration.parallel.run_refits`
    returned them) as relative errors of each row's first measured quantity (throughput, else TPOT)."""
    folds, pooled, residuals = [], [], []
    for refit, per_case in zip(refits, held):
        errors = []
        for c, res in zip(refit.test, per_case):
            residuals += res
            if res:
                errors.append(
                    math.expm1(
                        res[0].log_error if c.measurement.output_tok_s_per_gpu is not None else -res[0].log_error
                    )
                )
        if errors:
            folds.append(CvFold(refit.name, len(errors), percentile([abs(e) for e in errors], 50)))
            pooled += errors
    absolute = [abs(e) for e in pooled]
    return CrossValidation(
        by, tuple(folds), percentile(absolute, 50), percentile(absolute, 90), tuple(pooled), tuple(residuals)
    )


def cross_validate(
    cases: list[Case],
    by: str,
    base: Efficiency | None = None,
    options: FitOptions = FitOptions(),
    memo: PredictionMemo | None = None,
    workers: int | None = None,
) -> CrossValidation:
    """Leave one GPU (``by="gpu"``) or one model (``by="model"``) out at a time: refit on the
    rest, predict the held-out rows, and pool their |log errors| as relative errors. The refits
    run over ``workers`` processes (:func:`~tokenplan.calibration.parallel.run_refits`)."""
    refits = loo_refits(cases, by, base, options)
    return summarise(by, refits, run_refits(refits, memo, workers))
