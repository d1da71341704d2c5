"""What ``tokenplan plan`` shows on the terminal and writes beside it: the provisioning answer,
the comparison table, the throughput chart and the details under it; the HTML report and the
PNG charts (``--report``/``--png``; their libraries are imported only when asked for). Draws
what ``tokenplan.api.plan.plan_report_data`` returns (:class:`~tokenplan.planning.results.PlanReportData`)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from rich.console import Console

from tokenplan.report.tables import (
    calibration_lines,
    current_table,
    plan_details,
    plan_table,
    provisioning_table,
    throughput_text,
)

if TYPE_CHECKING:
    from tokenplan.planning.results import PlanReportData


def show_plan(console: Console, data: PlanReportData) -> None:
    """Print what a calibration profile moves (``--calibration``: the answer's lines from
    ``files.calibration.moved_lines``, first), the provisioning table (with
    ``--deadline``/``--budget``), the comparison table, the terminal chart of tok/s per GPU
    against requests in flight, and the details."""
    result = data.plan
    for line in calibration_lines(result):
        console.print(line, markup=False)
    provisioning = provisioning_table(result)
    if provisioning is not None:
        console.print(provisioning)
    console.print(plan_table(result))
    walk = current_table(result)
    if walk is not None:
        console.print(walk)
    console.print(throughput_text(data))
    console.print(plan_details(result))


def write_plan_files(data: PlanReportData, report: str | None, png: str | None) -> None:
    """Write the HTML report to ``report`` and/or the PNG charts into the folder ``png``; say
    where on stderr (stdout may be JSON). Raises OSError as the writers do."""
    if report:
        from tokenplan.report.html import plan_report_html, write_html

        print(f"report: {write_html(plan_report_html(data), report)}", file=sys.stderr)
    if png:
        from tokenplan.report.png import write_plan_pngs

        for path in write_plan_pngs(data, png):
            print(f"chart: {path}", file=sys.stderr)
