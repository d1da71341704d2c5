"""``tokenplan report RUN_DIR... [--plan PLAN.json] [--bench BENCH.json] -o FILE.html``: the plan
and what was measured (``tokenplan generate`` runs, a ``tokenplan bench`` sweep) in one
self-contained HTML file."""

from __future__ import annotations

from typing import Optional

import typer

from tokenplan.cli.app import app


@app.command("report")
def report_cmd(
    run_dirs: Optional[list[str]] = typer.Argument(
        None, help="tokenplan generate run directories (each holds summary.json)"
    ),
    plan_path: Optional[str] = typer.Option(
        None, "--plan", help="tokenplan plan --json output to show beside the measurements"
    ),
    bench_path: Optional[str] = typer.Option(None, "--bench", help="tokenplan bench JSON output"),
    output: str = typer.Option(..., "-o", "--out", help="HTML file to write (opens offline: everything inline)"),
) -> None:
    """Plan and measurements together in one HTML report."""
    from tokenplan.api.report import check_report_output, report_inputs
    from tokenplan.report.html import measurements_report_html, write_html

    check_report_output(output)
    inputs = report_inputs(list(run_dirs or []), plan_path, bench_path)
    print(f"report: {write_html(measurements_report_html(inputs), output)}")
