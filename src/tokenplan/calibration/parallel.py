"""Refits over held-out folds, run side by side in worker processes.

A cross-validation refit is independent of the others, so :func:`run_refits` maps them over a
``fork`` process pool (as many workers as CPUs this process may use, at most ``workers``). The
workers inherit the parent's cases and its :class:`~tokenplan.calibration.memo.PredictionMemo`
at the fork (copy on write): a refit that starts where the full fit ended finds its first
Jacobian's predictions there. Each refit is a pure function of its inputs, so the results, in
the order given, do not depend on the number of workers. Without ``fork`` (not Linux/macOS)
or with one worker the refits run here, one after another.
"""

from __future__ import annotations

import multiprocessing
import os
from dataclasses import dataclass
from typing import Any

from tokenplan.calibration.bands import Residual
from tokenplan.calibration.fit import FitOptions, fit
from tokenplan.calibration.memo import PredictionMemo
from tokenplan.calibration.residuals import case_residuals
from tokenplan.calibration.validate import Case
from tokenplan.perf.efficiency import Efficiency


@dataclass(frozen=True)
class Refit:
    """One held-out fold: fit on ``train`` (from ``start_x`` where given, else from ``base``),
    then predict ``test``. ``name`` says what was held out."""

    name: str
    train: tuple[Case, ...]
    test: tuple[Case, ...]
    base: Efficiency
    options: FitOptions
    start_x: dict[tuple[str, str], float] | None = None


def held_out(refit: Refit, memo: PredictionMemo | None = None) -> list[list[Residual]]:
    """The residuals of each test case (in order; empty for a rejected configuration) under a
    fit that did not see it. The refit skips its last Jacobian (its uncertainties are unused)."""
    result = fit(list(refit.train), refit.base, refit.options, start_x=refit.start_x, memo=memo, final_jacobian=False)
    return [case_residuals(c, result.table.resolve(c.engine, c.architecture)) for c in refit.test]


_JOB: dict[str, Any] = {}


def _run(i: int) -> list[list[Residual]]:
    return held_out(_JOB["refits"][i], _JOB["memo"])


def default_workers() -> int:
    """CPUs this process may run on (``os.sched_getaffinity`` where it exists), at least 1."""
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except AttributeError:  # macOS, Windows
        return max(os.cpu_count() or 1, 1)


def run_refits(
    refits: list[Refit], memo: PredictionMemo | None = None, workers: int | None = None
) -> list[list[list[Residual]]]:
    """:func:`held_out` of every refit, in order, over up to ``workers`` processes (default:
    :func:`default_workers`)."""
    n = min(workers or default_workers(), len(refits))
    if n <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        return [held_out(r, memo) for r in refits]
    _JOB.update(refits=refits, memo=memo)
    try:
        with multiprocessing.get_context("fork").Pool(n) as pool:
            return pool.map(_run, range(len(refits)), chunksize=1)
    finally:
        _JOB.clear()
