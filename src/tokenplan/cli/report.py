"""``tokenplan report RUN_DIR... [--plan PLAN.json] [--bench BENCH.json] -o FILE.html``: the plan
and what was measured (``tokenplan generate`` runs, a ``tokenplan bench`` sweep) in one
self-contained HTML file."""

from __future__ import annotations

import click

from tokenplan.cli.app import app


@app.command("report", old_spellings={"--output": "--out"})
@click.argument("run_dirs", nargs=-1, help="tokenplan generate run directories (each holds summary.json)")
@click.option("--plan", "plan_path", help="tokenplan plan --json output to show beside the measurements")
@click.option("--bench", "bench_path", help="tokenplan bench JSON output")
@click.option("-o", "--out", "output", required=True, help="HTML file to write (opens offline: everything inline)")
def report_cmd(run_dirs: tuple[str, ...], plan_path: str | None, bench_path: str | None, output: str) -> None:
    """Plan and measurements together in one HTML report."""
    from tokenplan.api.report import check_report_output, report_inputs, report_warnings
    from tokenplan.report.html import measurements_report_html, write_html

    check_report_output(output)
    inputs = report_inputs(list(run_dirs), plan_path, bench_path)
    for warning in report_warnings(inputs):
        click.echo(f"warning: {warning}", err=True)
    print(f"report: {write_html(measurements_report_html(inputs), output)}")
