"""``tokenplan calibrate FILE.csv [FILE.csv ...] -o PARAMS.json``: fit the efficiency factors,
print them with their uncertainty and the leave-one-GPU-out / leave-one-model-out table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from tokenplan.api_calibration import calibrate, calibration_dict
from tokenplan.cli.app import app


def _factors_table(d: dict) -> Table:
    t = Table(title=f"fitted factors ({d['n']} rows{'' if d['converged'] else ', not converged'})")
    for col in ("level", "factor", "value", "± 1σ"):
        t.add_column(col, justify="right" if col in ("value", "± 1σ") else "left")
    for f in d["factors"]:
        t.add_row(f["level"], f["name"], f"{f['value']:.4g}", f"{f['uncertainty']:.2g}")
    return t


def _cv_table(d: dict) -> Table:
    t = Table(title="cross-validation: |predicted/measured − 1| on held-out rows")
    for col in ("held out", "n", "median"):
        t.add_column(col, justify="left" if col == "held out" else "right")
    for by, cv in d["cross_validation"].items():
        t.add_row(f"[bold]each {by} (pooled)[/bold]", str(sum(f["n"] for f in cv["folds"])),
                  f"{cv['median_abs_pct_error'] * 100:.0f}% (p90 {cv['p90_abs_pct_error'] * 100:.0f}%)")
        for f in cv["folds"]:
            t.add_row(f"  {by} {f['held_out']}", str(f["n"]), f"{f['median_abs_pct_error'] * 100:.0f}%")
    return t


@app.command("calibrate")
def calibrate_command(
    paths: Annotated[list[str], typer.Argument(help="Measurement CSVs (columns of dev.csv or serving-dev.csv).")],
    out: Annotated[Path, typer.Option("-o", "--out", help="Where to write the calibration profile JSON.")],
    cv: Annotated[bool, typer.Option("--cv/--no-cv", help="Run the leave-one-group-out cross-validation.")] = True,
    json_out: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Fit the model's efficiency factors to measurements (robust least squares on log error)."""
    command = "tokenplan calibrate " + " ".join(Path(p).name for p in paths) + f" -o {out.name}"
    d = calibration_dict(calibrate(paths, command, cv))
    out.write_text(json.dumps(d["profile"], indent=2) + "\n", encoding="utf-8")
    if json_out:
        print(json.dumps(d, indent=2))
        return
    console = Console()
    console.print(_factors_table(d))
    if d["cross_validation"]:
        console.print(_cv_table(d))
    console.print(f"wrote {out}", markup=False)
