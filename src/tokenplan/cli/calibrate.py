"""``tokenplan calibrate FILE.csv [FILE.csv ...] -o PARAMS.json``: fit the efficiency factors,
print them with their uncertainty and the leave-one-GPU-out / leave-one-model-out table."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from tokenplan.api import PredictRequest
from tokenplan.api_calibration import calibrate, calibration_dict
from tokenplan.calibration.bands import table_to_json
from tokenplan.cli.app import console as wide_console
from tokenplan.cli.app import app
from tokenplan.errors import InputError


def _factors_table(d: dict) -> Table:
    opt = d["optimizer"]
    state = "converged" if d["converged"] else "not converged"
    t = Table(title=f"fitted factors ({d['n']} rows; optimiser {state}: status {opt['status']}, "
                    f"{opt['nfev']} evaluations)")
    for col in ("level", "factor", "value", "± 1σ", "note"):
        t.add_column(col, justify="right" if col in ("value", "± 1σ") else "left")
    for f in d["factors"]:
        unc = f["uncertainty"]
        t.add_row(f["level"], f["name"], f"{f['value']:.4g}", "–" if unc is None else f"{unc:.2g}",
                  "at bound" if f["at_bound"] else "")
    return t


def _at_bound_line(d: dict) -> str | None:
    """One line naming the factors that ended on a physical bound, or None."""
    if not d["at_bound"]:
        return None
    return ("at a bound of EFFICIENCY_BOUNDS (the data asks for more than the bound allows, or cannot "
            f"identify the factor; no σ): {', '.join(d['at_bound'])}")


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


def _coverage_line(table) -> str:
    """One line: the nested cross-validation coverage of the 80 % bands, per metric."""
    parts = [f"{m} {c * 100:.0f} %" for m, c in table.checked_coverage.items()]
    return (f"error bands: nominal {table.coverage * 100:.0f} %, held-out coverage in nested cross-validation: "
            + ", ".join(parts))


@app.command("calibrate")
def calibrate_command(
    paths: Annotated[Optional[list[str]], typer.Argument(help="Measurement CSVs (columns of dev.csv or serving-dev.csv).")] = None,
    out: Annotated[Optional[Path], typer.Option("-o", "--out", help="Where to write the calibration profile JSON.")] = None,
    cv: Annotated[bool, typer.Option("--cv/--no-cv", help="Run the leave-one-group-out cross-validation.")] = True,
    bands: Annotated[Optional[Path], typer.Option("--bands", help="Also write the error-band table (80 % intervals "
                                                  "from K-fold cross-validated residuals) to this JSON file; needs --cv.")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
    from_run: Annotated[Optional[str], typer.Option("--from-run", help="Fit to a generate run directory (summary.json + manifest.json) instead.")] = None,
    config: Annotated[Optional[str], typer.Option("--model", help="--from-run: catalog model, Hugging Face id or config.json the server ran.")] = None,
    gpu: Annotated[Optional[str], typer.Option("--gpu", help="--from-run: catalog GPU key.")] = None,
    num_gpus: Annotated[int, typer.Option("--num-gpus", help="--from-run: GPUs the server ran on.")] = 1,
    tp: Annotated[int, typer.Option("--tp", help="--from-run: tensor-parallel GPUs per replica (TP).")] = 1,
    engine: Annotated[str, typer.Option("--engine", help="--from-run: the serving engine: sglang, vllm or trtllm.")] = "sglang",
    weight_dtype: Annotated[str, typer.Option("--weight-dtype", help="--from-run: the served weight format.")] = "bf16",
    kv_dtype: Annotated[str, typer.Option("--kv-dtype", help="--from-run: the KV-cache format (auto: the engine's default).")] = "auto",
    concurrency: Annotated[Optional[int], typer.Option("--concurrency", help="--from-run: total requests in flight.")] = None,
    isl: Annotated[Optional[float], typer.Option("--isl", help="--from-run: mean prompt tokens (default: from the records).")] = None,
    from_bench: Annotated[Optional[list[str]], typer.Option("--from-bench", help="Fit to result files of vllm bench serve, sglang.bench_serving, AIPerf or GuideLLM (repeatable; with --model, --gpu and the layout).")] = None,
    pp: Annotated[int, typer.Option("--pp", help="--from-run/--from-bench: pipeline stages per replica (PP).")] = 1,
    ep: Annotated[int, typer.Option("--ep", help="--from-run/--from-bench: expert-parallel GPUs (EP, MoE).")] = 1,
) -> None:
    """Fit the model's efficiency factors to measurements (robust least squares on log error)."""
    if out is None:
        raise InputError("out", "", "-o PROFILE.json: where to write the calibration profile")
    if from_bench:
        _from_bench(from_bench, out, json_out, PredictRequest(
            model=config or "", gpu=gpu or "", num_gpus=num_gpus, tp=tp, pp=pp, ep=ep, engine=engine,
            weight_dtype=weight_dtype, kv_dtype=kv_dtype))
        return
    if from_run is not None:
        _from_run(from_run, out, json_out, PredictRequest(
            model=config or "", gpu=gpu or "", num_gpus=num_gpus, tp=tp, engine=engine, weight_dtype=weight_dtype,
            kv_dtype=kv_dtype, concurrency=concurrency, isl=isl or 0.0))
        return
    if not paths:
        raise InputError("paths", "", "measurement CSV files, or --from-run RUN_DIR")
    # the paths as typed, so the provenance names the files that reproduce it
    # (e.g. data/ground-truth/dev.csv for the shipped fit)
    if bands is not None and not cv:
        raise InputError("bands", str(bands), "--bands together with --cv (the bands come from cross-validation)")
    command = "tokenplan calibrate " + " ".join(paths) + f" -o {out}" + (f" --bands {bands}" if bands else "")
    result = calibrate(paths, command, cv, bands=bands is not None)
    d = calibration_dict(result)
    out.write_text(json.dumps(d["profile"], indent=2) + "\n", encoding="utf-8")
    if result.bands is not None and bands is not None:
        bands.write_text(json.dumps(table_to_json(result.bands), indent=2) + "\n", encoding="utf-8")
    if json_out:
        print(json.dumps(d, indent=2))
        return
    console = wide_console()
    console.print(_factors_table(d))
    bound_line = _at_bound_line(d)
    if bound_line:
        console.print(bound_line, markup=False)
    if d["held"]:
        console.print(f"held at their documented defaults (not identified by the data): {', '.join(d['held'])}",
                      markup=False)
    if d["cross_validation"]:
        console.print(_cv_table(d))
    if result.bands is not None and bands is not None:
        console.print(_coverage_line(result.bands), markup=False)
        console.print(f"wrote {bands}", markup=False)
    console.print(f"wrote {out}", markup=False)


def _from_bench(paths: list[str], out: Path, json_out: bool, desc: PredictRequest) -> None:
    from tokenplan.api_bench import calibrate_from_results
    from tokenplan.cli.bench import fit_levels_table, fit_table

    if not desc.model or not desc.gpu:
        raise InputError("config/gpu", f"{desc.model}/{desc.gpu}", "--config MODEL and --gpu GPU with --from-bench")
    command = "tokenplan calibrate " + " ".join(f"--from-bench {Path(p).name}" for p in paths) + f" -o {out.name}"
    outcome = calibrate_from_results(paths, desc, command)
    out.write_text(outcome.profile_json(), encoding="utf-8")
    for warning in outcome.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if json_out:
        print(outcome.to_json())
        return
    console = wide_console()
    for source in outcome.data["sources"]:
        console.print(f"read {source['path']}: {source['format']}, {source['levels']} level(s)", markup=False)
    console.print(fit_table(outcome.data))
    console.print(fit_levels_table(outcome.data))
    console.print(f"wrote {out}", markup=False)


def _from_run(run_dir: str, out: Path, json_out: bool, desc: PredictRequest) -> None:
    from tokenplan.api_bench import calibrate_from_run
    from tokenplan.cli.bench import fit_levels_table, fit_table

    if not desc.model or not desc.gpu:
        raise InputError("config/gpu", f"{desc.model}/{desc.gpu}", "--model MODEL and --gpu GPU with --from-run")
    outcome = calibrate_from_run(run_dir, desc, f"tokenplan calibrate --from-run {Path(run_dir).name} -o {out.name}")
    out.write_text(outcome.profile_json(), encoding="utf-8")
    for warning in outcome.warnings:  # e.g. a fit that misses the run's throughput by > 50 %
        print(f"warning: {warning}", file=sys.stderr)
    if json_out:
        print(outcome.to_json())
        return
    console = wide_console()
    console.print(fit_table(outcome.data))
    console.print(fit_levels_table(outcome.data))
    console.print(f"wrote {out}", markup=False)
