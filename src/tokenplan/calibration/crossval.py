"""Leave-one-group-out cross-validation of the efficiency fit: refit without one GPU type (or one
model), predict its rows, and pool the held-out errors (README "How accurate is it?")."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from tokenplan.calibration.bands import Residual
from tokenplan.calibration.fit import FitOptions, fit
from tokenplan.calibration.heldout import case_residuals
from tokenplan.calibration.validate import Case, percentile
from tokenplan.perf.efficiency import Efficiency


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


def cross_validate(cases: list[Case], by: str, base: Efficiency | None = None,
                   options: FitOptions = FitOptions(), main_only: bool = True,
                   start: dict[tuple[str, str], float] | None = None) -> CrossValidation:
    """Leave one GPU (``by="gpu"``) or one model (``by="model"``) out at a time: refit on the
    rest, predict the held-out rows, and pool their |log errors| as relative errors."""
    key: Callable[[Case], str] = (lambda c: c.measurement.gpu) if by == "gpu" else (lambda c: c.measurement.model)
    names = sorted({key(c) for c in cases})

    folds, pooled, residuals = [], [], []
    for name in names:
        train = [c for c in cases if key(c) != name]
        test = [c for c in cases if key(c) == name]
        if not train:
            continue
        result = fit(train, base, options, start=start)
        errors = []
        for c in test:
            held = case_residuals(c, result.table.resolve(c.engine, c.architecture))
            residuals += held
            if held:  # the row's first measured quantity: throughput, else TPOT
                errors.append(math.expm1(held[0].log_error if c.measurement.output_tok_s_per_gpu is not None
                                         else -held[0].log_error))
        if errors:
            folds.append(CvFold(name, len(errors), percentile([abs(e) for e in errors], 50)))
            pooled += errors
    absolute = [abs(e) for e in pooled]
    return CrossValidation(by, tuple(folds), percentile(absolute, 50), percentile(absolute, 90), tuple(pooled),
                           tuple(residuals))
