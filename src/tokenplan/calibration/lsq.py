"""The fit's call of scipy's ``least_squares`` (trust-region reflective, robust loss, bounds),
with the finite-difference Jacobian computed here so that a refit can skip one it never uses.

scipy's ``trf`` computes the Jacobian at every accepted point, also after the step that spends
the evaluation budget (``max_nfev``), and then stops without using it. A cross-validation refit
of two or four evaluations pays for that last Jacobian — one prediction of every row per column
group, ~40 for the three ground-truth files — as much as for all its steps. With
``final_jacobian=False`` that Jacobian is not computed (a zero matrix stands for it; ``trf``
then stops on the budget check it was about to make, at the same ``x``) and the result says so:
``jac`` is None and the status is 0 (budget spent).

The Jacobian is scipy's own forward difference, called as ``least_squares`` calls it with
``jac_sparsity``: :func:`scipy.optimize._numdiff.approx_derivative` with ``method="2-point"``,
``rel_step=diff_step``, the bounds, and the column groups of
:func:`scipy.optimize._numdiff.group_columns` (Curtis–Powell–Reid), so the factors are the same
bit for bit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tokenplan.calibration.forkmap import ForkMap
from tokenplan.calibration.memo import PredictionMemo
from tokenplan.errors import import_extra

if TYPE_CHECKING:  # numpy comes with the calibrate extra; the core install leaves it out
    import numpy as np


@dataclass
class Solution:
    """What the fit reads of ``least_squares``' result (``jac`` None where the last one was skipped)."""

    x: np.ndarray
    cost: float
    status: int
    message: str
    nfev: int
    jac: object | None


def solve(
    residuals: Callable[[np.ndarray], np.ndarray],
    x0: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    sparsity: np.ndarray,
    *,
    loss: str,
    f_scale: float,
    max_nfev: int,
    diff_step: float,
    ftol: float,
    final_jacobian: bool = True,
    workers: int = 1,
    memo: PredictionMemo | None = None,
) -> Solution:
    """Minimise ``Σ loss(residuals(x))`` within ``[lo, hi]`` from ``x0`` (see the module docstring).

    Args:
        residuals: x (n,) → residuals (m,). sparsity: (m, n) bool, which x each residual reads.
        final_jacobian: compute the Jacobian after the step that spends ``max_nfev`` (needed
            only for the covariance of the factors).
        workers: processes a Jacobian's perturbed points are evaluated over
            (:class:`~tokenplan.calibration.forkmap.ForkMap`, which merges the predictions the
            children made into ``memo``).
    """
    least_squares = import_extra("scipy.optimize", "calibrate").least_squares
    numdiff = import_extra("scipy.optimize._numdiff", "calibrate")
    approx_derivative, group_columns = numdiff.approx_derivative, numdiff.group_columns
    csr_matrix = import_extra("scipy.sparse", "calibrate").csr_matrix

    groups = group_columns(sparsity)
    state = {"nfev": 0, "skipped": False}

    def fun(x: Any) -> Any:
        state["nfev"] += 1
        return residuals(x)

    def jac(x: Any) -> Any:
        if not final_jacobian and state["nfev"] >= max_nfev:
            state["skipped"] = True
            return csr_matrix(sparsity.shape)
        f0 = residuals(x)
        return approx_derivative(
            residuals,
            x,
            method="2-point",
            rel_step=diff_step,
            f0=f0,
            bounds=(lo, hi),
            sparsity=(sparsity, groups),
            workers=ForkMap(workers, memo),
        )

    sol = least_squares(
        fun, x0, jac=jac, bounds=(lo, hi), loss=loss, f_scale=f_scale, max_nfev=max_nfev, x_scale=1.0, ftol=ftol
    )
    if state["skipped"]:
        return Solution(
            sol.x,
            float(sol.cost),
            0,
            "The maximum number of function evaluations is exceeded (final Jacobian not computed).",
            int(sol.nfev),
            None,
        )
    return Solution(sol.x, float(sol.cost), int(sol.status), str(sol.message), int(sol.nfev), sol.jac)
