"""``tokenplan validate FILE.csv``: predict every measured row with the planner's own model and
show predicted vs measured, then the error summary and its breakdown
(:mod:`tokenplan.report.validation`)."""

from __future__ import annotations

import json

import click

from tokenplan.cli.app import app
from tokenplan.cli.app import console as wide_console


@app.command("validate")
@click.argument("path", help="Measurement CSV (columns of dev.csv, inferencex-dev.csv or serving-dev.csv).")
@click.option("--calibration", help="Calibration profile JSON [default: the shipped fit].")
@click.option("--rows/--no-rows", default=True, help="Print the per-row table.")
@click.option("--json", "json_out", is_flag=True, help="Print the result as JSON.")
def validate_command(path: str, calibration: str | None, rows: bool, json_out: bool) -> None:
    """Predict measured points and report the error: per row, median, p90, bias, breakdowns."""
    from tokenplan.api.validate import in_sample_note, validate
    from tokenplan.errors import ConfigError, InputError
    from tokenplan.report.validation import show_validation

    result = validate(path, calibration)
    if json_out:
        print(json.dumps(result.to_json(), indent=2))
    else:
        show_validation(wide_console(), result, rows)
        note = in_sample_note(path, calibration)
        if note:
            click.echo(f"note: {note}", err=True)
    malformed = [row for row in result.skipped if row.reason.startswith("malformed")]
    if malformed and result.n > 0:
        # bad input: the rows that could be read are reported above, and the run still fails
        # (a row the planner cannot predict, an unknown model or a missing length, is not bad input)
        first = malformed[0]
        others = f" and {len(malformed) - 1} more" if len(malformed) > 1 else ""
        raise ConfigError(
            path,
            f"line {first.line} (id {first.id})",
            f"{first.reason}{others}: skipped, the well-formed rows are reported above",
        )
    if result.n == 0:  # nothing was checked; any skipped rows and their reasons are printed above
        found = (
            f"{len(result.skipped)} row(s) skipped, each with its reason above"
            if result.skipped
            else "the file has a header and no data rows"
        )
        raise InputError("measurements", path, f"a file with at least one predictable row ({found})")
