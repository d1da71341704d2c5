"""``report``: read what was measured — ``tokenplan generate`` run directories (their
``summary.json``), a ``tokenplan bench`` JSON and a ``tokenplan plan --json`` file — for
:mod:`tokenplan.report.html`, so that the plan and the measurements are seen together. The files
are read and checked by :mod:`tokenplan.files.reports`.

Usage::

    from tokenplan.api.report import report_inputs
    inputs = report_inputs(["run1"], plan_path="plan.json", bench_path="bench.json")
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from tokenplan.bench_schema import BenchResult
from tokenplan.errors import InputError
from tokenplan.files.reports import load_bench, load_plan, load_run_summary
from tokenplan.planning.results import PlanResult
from tokenplan.results import JsonResult
from tokenplan.run_summary import RunSummary


@dataclass(frozen=True)
class ReportInputs(JsonResult):
    """What ``tokenplan report`` draws: ``runs`` (run summaries, in the order given, each with
        its ``run_dir``, read into :class:`~tokenplan.run_summary.RunSummary`), ``bench`` (a bench JSON read back into its
    types, or None) and
        ``plan`` (the plan file read back into its types, or None)."""

    SCHEMA_VERSION: ClassVar[int | None] = 1

    runs: tuple[RunSummary, ...]
    bench: BenchResult | None
    plan: PlanResult | None


def report_inputs(run_dirs: list[str], plan_path: str | None = None, bench_path: str | None = None) -> ReportInputs:
    """Everything ``tokenplan report`` draws (:class:`ReportInputs`).

    Raises:
        InputError: nothing to report on.
        RunDirError, ConfigError: as the loaders above.
    """
    if not run_dirs and plan_path is None and bench_path is None:
        raise InputError("report inputs", "none given", "one or more RUN_DIR, --plan PLAN.json or --bench BENCH.json")
    return ReportInputs(
        runs=tuple(load_run_summary(d) for d in run_dirs),
        bench=load_bench(bench_path) if bench_path else None,
        plan=load_plan(plan_path) if plan_path else None,
    )


def report_warnings(inputs: ReportInputs) -> list[str]:
    """Lines to print beside a report whose plan was made for another model than a run or the
    bench measured (:func:`~tokenplan.files.plan_hint.plan_model_mismatch`, as ``generate --plan``
    warns): its planned figures do not describe those measurements."""
    if inputs.plan is None:
        return []
    from tokenplan.files.plan_hint import plan_model_mismatch

    measured = [(f"run {r.run_dir}", r.model) for r in inputs.runs]
    if inputs.bench is not None:
        measured.append(("the bench", inputs.bench.model))
    return [
        f"the plan was made for model {inputs.plan.model!r}, but {what} measured {model!r}: "
        "its planned figures do not describe that measurement"
        for what, model in measured
        if plan_model_mismatch(inputs.plan.model, model)
    ]


def check_report_output(path: str) -> None:
    """Refuse an ``-o`` HTML path that cannot be written, before the report is built (missing
    parent folders are created, as the writer would create them).

    Raises:
        InputError: naming ``--out``, the path and what is allowed.
        MissingExtraError: the report extra (plotly) is not installed, said before any warning
            about the inputs.
    """
    from tokenplan.errors import import_extra
    from tokenplan.runner.paths import check_output_file

    import_extra("plotly", "report")  # report/html.py draws with it
    check_output_file(path, "--out", "an HTML file path", create_parent=True)
