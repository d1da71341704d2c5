"""The calibration profile fitted to one measured server, and what ``--json`` says about the fit.

:func:`fit_profile` runs :func:`~tokenplan.calibration.update.update_fit` over resolved cases (a
bench sweep's levels, or a generate run's one point) and writes the result in two shapes: the
profile ``tokenplan plan/predict --calibration`` reads (an update of the shipped fit: the
informed factors of the measured group, their shipped prior and uncertainty, provenance and the
range it was fitted on) and the fit report (factors, levels
predicted vs measured, the measured step-time law against the model's). A fit whose median
|predicted / measured − 1| of output tok/s per GPU exceeds :data:`POOR_FIT` earns a warning.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tokenplan.bench_schema import (
    BenchFit,
    FitFactor,
    FitLevel,
    FitSourceFile,
    FitUpdate,
    LevelErrors,
    StepLaw,
    StepPoint,
    UpdateProfile,
)
from tokenplan.calibration.fitted_range import POOR_FIT, fitted_on
from tokenplan.calibration.from_runs import LevelFit, RunFit, linear_step_law, median_abs_error, predicted_step_s
from tokenplan.calibration.update import update_fit
from tokenplan.calibration.validate import Case
from tokenplan.errors import InfeasibleError, InputError
from tokenplan.job.evaluate import Rejection, evaluate
from tokenplan.perf.efficiency import Efficiency


def poor_fit_warning(error: float | None, levels: int) -> str | None:
    """The warning for a fit whose median |predicted / measured − 1| (output tok/s per GPU)
    over ``levels`` levels exceeds :data:`POOR_FIT`; None for a fit within it (or no figure)."""
    if error is None or error <= POOR_FIT:
        return None
    return (
        f"the fitted profile reproduces the measured throughput poorly: median |predicted/measured − 1| "
        f"= {error * 100:,.0f} % over {levels} level{'s' if levels != 1 else ''} (output tok/s per GPU); "
        "check --config, --gpu, --num-gpus, the layout and dtypes against the server. The profile is "
        "written anyway, its fitted_on.median_abs_error says so"
    )


@dataclass(frozen=True)
class FitOutcome:
    """A fit to measured levels: the cases, the fit, the fit report (:class:`~tokenplan.bench_schema.BenchFit`:
    ``data`` is its JSON, what ``--json`` prints; ``profile`` the profile's) and warnings (a fit
    that does not reproduce the levels it was fitted on)."""

    cases: list[Case]
    fit: RunFit
    report: BenchFit
    warnings: list[str] = field(default_factory=list)

    @property
    def data(self) -> dict[str, Any]:
        """The fit report's JSON object."""
        return self.report.to_json()

    @property
    def profile(self) -> dict[str, Any]:
        """The profile's JSON object (what ``-o`` writes)."""
        assert self.report.profile is not None  # fit_profile always writes one
        return self.report.profile.to_json()

    def model_step_s(self, batch: float) -> float:
        """The fitted model's decode step time (seconds) at ``batch`` running sequences."""
        return predicted_step_s(self.cases[0], self.fit.efficiency, batch)

    def to_json(self) -> dict[str, Any]:
        """The fit report object as ``--json`` prints it (like every api result's ``to_json``)."""
        return self.data

    def profile_json(self) -> str:
        """The profile file's text (indented by 2, one trailing newline)."""
        return json.dumps(self.profile, indent=2) + "\n"


@dataclass(frozen=True, slots=True)
class FitSource:
    """Where the measurements came from: ``source`` (``bench sweep``, ``generate run``), the
    command that fits, what was served (``"qwen3-8b on 1× h100"``), the deployment's identity
    (engine, GPU, model, layout, dtypes, ``max_running``) and, after a fit to files, one entry per file."""

    source: str
    command: str
    served: str
    identity: Mapping[str, object]
    sources: tuple[FitSourceFile, ...] | None = None


def fit_profile(
    cases: list[Case], origin: FitSource, step_points: list[tuple[float, float]], shipped: Efficiency
) -> FitOutcome:
    """Fit ``cases`` as an update of ``shipped`` (the shipped factors of their engine and
    architecture; see :mod:`tokenplan.calibration.update`); ``step_points`` are measured (batch,
    TPOT in seconds) pairs for the step-time law (none for a generate run). The profile is an
    update (``"layered_on": "shipped"``, read by :mod:`tokenplan.files.calibration`): only the
    informed factors of the cases' group, the shipped value each started from (``prior``) and
    their ±1σ.

    Raises:
        InputError: no case, or cases that carry neither TPOT nor throughput.
        InfeasibleError: the server as described cannot run (a measured server did: the
            description is wrong, e.g. ``--model`` names another model than the one served).
    """
    if not cases:
        raise InputError("levels", 0, "at least one level with answers to fit")
    for c in cases:
        ev = evaluate(c.model, c.gpu, c.config, shipped, c.isl, c.osl, c.concurrency_per_replica)
        if isinstance(ev, Rejection):
            raise InfeasibleError(
                f"the server described ({c.engine} serving {origin.served}) is one the planner says cannot "
                f"run: {ev.reason}; it was measured running, so check --model, --gpu, --num-gpus, the "
                "layout, dtypes and --engine against it"
            )
    try:
        update = update_fit(cases, shipped)
    except ValueError as exc:
        raise InputError("levels", len(cases), f"levels with TPOT or throughput ({exc})") from None
    run = update.run
    eff, case0 = run.efficiency, cases[0]
    identity = {
        "engine": case0.engine,
        "gpu": case0.gpu.key,
        "architecture": case0.architecture,
        "model": case0.model.name,
        **origin.identity,
    }
    # concurrency per replica, as predict and plan see it
    ranges = [
        {
            "concurrency": c.concurrency_per_replica,
            "isl_tokens": c.measurement.isl_tokens,
            "osl_tokens": c.measurement.osl_tokens,
        }
        for c in cases
    ]
    provenance = (
        f"fit by `{origin.command}` on {len(cases)} levels ({origin.source}) of {case0.engine} serving {origin.served}"
    )
    error = median_abs_error(run.levels)
    group = case0.group
    profile = UpdateProfile(
        layered_on="shipped",
        groups={group: {k: v for k, (v, _) in run.factors.items()}},
        prior={f"{group}.{k}": v for k, v in update.prior.items()},
        uncertainty={f"{group}.{k}": s for k, (_, s) in run.factors.items() if not math.isnan(s)},
        provenance=provenance,
        fitted_on={**fitted_on(ranges, identity, origin.source), "median_abs_error": error},
    )
    warning = poor_fit_warning(error, len(run.levels))
    warnings = [] if warning is None else [warning]
    law = linear_step_law(step_points)
    max_running = origin.identity.get("max_running")
    report = BenchFit(
        factors={k: FitFactor(value=v, uncertainty=None if math.isnan(s) else s) for k, (v, s) in run.factors.items()},
        at_bound=tuple(run.at_bound),
        converged=run.converged,
        max_running=max_running if isinstance(max_running, int) else None,
        median_abs_error=error,
        warnings=tuple(warnings),
        levels=tuple(_level(lf) for lf in run.levels),
        measured_step_law=None
        if law is None
        else StepLaw(a_s=law[0], b_s_per_sequence=law[1], points=tuple(tuple(p) for p in step_points)),
        model_step_s=tuple(
            StepPoint(batch=b, measured_step_s=s, model_step_s=predicted_step_s(case0, eff, b)) for b, s in step_points
        ),
        profile=profile,
        update=FitUpdate(
            kept=update.kept,
            prior=update.prior,
            shrink=update.shrink,
            median_abs_error_shipped=LevelErrors(**update.error_shipped),
            median_abs_error_calibrated=LevelErrors(**update.error_calibrated),
        ),
        sources=origin.sources,
    )
    return FitOutcome(cases, run, report, warnings)


def _level(lf: LevelFit) -> FitLevel:
    return FitLevel(
        concurrency=lf.concurrency,
        batch=lf.batch,
        predicted_tpot_s=lf.tpot_s[0],
        measured_tpot_s=lf.tpot_s[1],
        predicted_ttft_s=lf.ttft_s[0],
        measured_ttft_s=lf.ttft_s[1],
        predicted_output_tok_s_per_gpu=lf.output_tok_s_per_gpu[0],
        measured_output_tok_s_per_gpu=lf.output_tok_s_per_gpu[1],
    )
