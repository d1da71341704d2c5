"""``tokenplan validate FILE.csv``: predict every measured row with the planner's own model and
show predicted vs measured, then the error summary and its breakdown."""

from __future__ import annotations

import json
from typing import Annotated, Optional

import typer
from rich.table import Table

from tokenplan.api.validate import validate
from tokenplan.cli.app import console as wide_console
from tokenplan.cli.app import app


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{x * 100:+.0f}%"


def _abs_pct(x: float | None) -> str:
    return "–" if x is None else f"{x * 100:.0f}%"


def _rows_table(d: dict) -> Table:
    serving = d["kind"] == "serving"
    t = Table(title=f"{d['n']} rows predicted", show_lines=False)
    for col in ("line", "engine", "model", "gpu", "layout", "w", "isl/osl", "conc"):
        t.add_column(col)
    metrics = [("tpot_ms", "tpot_error", "TPOT ms"), ("ttft_ms", "ttft_error", "TTFT ms")] if serving \
        else [("output_tok_s_per_gpu", "error", "tok/s/GPU")]
    for _, _, label in metrics:
        t.add_column(f"pred {label}", justify="right")
        t.add_column(f"meas {label}", justify="right")
        t.add_column("err", justify="right")
    for r in d["rows"]:
        conc = "max" if r["concurrency"] is None else f"{r['concurrency']:g}"
        cells = [str(r["line"]), r["engine"], r["model"], r["gpu"], r["layout"], r["weight_dtype"],
                 f"{r['isl']:g}/{r['osl']:g}", conc]
        for name, err, _ in metrics:
            cells += [f"{r['predicted_' + name]:,.1f}", f"{r['measured_' + name]:,.1f}", _pct(r[err])]
        t.add_row(*cells)
    return t


def _summary_table(d: dict) -> Table:
    t = Table(title="error |predicted/measured − 1|")
    for col in ("over", "n", "median", "p90", "bias"):
        t.add_column(col, justify="right" if col != "over" else "left")
    label = "throughput" if d["kind"] == "throughput" else "TPOT"
    t.add_row(f"all rows ({label})", str(d["n"]), _abs_pct(d["median_abs_pct_error"]),
              _abs_pct(d["p90_abs_pct_error"]), _pct(d["bias"]))
    if d["kind"] == "throughput" and "tpot_median_abs_pct_error" in d:  # InferenceX rows also measure TPOT
        t.add_row("all rows (TPOT)", str(d["n"]), _abs_pct(d["tpot_median_abs_pct_error"]),
                  _abs_pct(d["tpot_p90_abs_pct_error"]), _pct(d["tpot_bias"]))
    if "ttft_median_abs_pct_error" in d:
        t.add_row("all rows (TTFT)", str(d["n"]), _abs_pct(d["ttft_median_abs_pct_error"]),
                  _abs_pct(d["ttft_p90_abs_pct_error"]), _pct(d["ttft_bias"]))
    for dim in ("engine", "gpu", "family"):
        for g, e in d[f"by_{dim}"].items():
            t.add_row(f"{dim} {g}", str(e["n"]), _abs_pct(e["median_abs_pct_error"]),
                      _abs_pct(e["p90_abs_pct_error"]), _pct(e["bias"]))
    return t


@app.command("validate")
def validate_command(
    path: Annotated[str, typer.Argument(help="Measurement CSV (columns of dev.csv or serving-dev.csv).")],
    calibration: Annotated[Optional[str], typer.Option(help="Calibration profile JSON "
                                                       "[default: the shipped fit].")] = None,
    rows: Annotated[bool, typer.Option(help="Print the per-row table.")] = True,
    json_out: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Predict measured points and report the error: per row, median, p90, bias, breakdowns."""
    d = validate(path, calibration).to_json()
    if json_out:
        print(json.dumps(d, indent=2))
        return
    console = wide_console()
    if rows:
        console.print(_rows_table(d))
    console.print(_summary_table(d))
    if d["skipped"]:
        console.print(f"[bold]{len(d['skipped'])} rows skipped[/bold]")
        for s in d["skipped"]:
            console.print(f"  line {s['line']} (id {s['id']}): {s['reason']}", markup=False)
    console.print(f"calibration: {d['calibration']}", markup=False)
