"""``tokenplan calibrate FILE.csv [FILE.csv ...] -o PARAMS.json``: update the shipped fit with the
files' rows and print what moved; with ``--refit``, refit the whole table from the built-in
defaults and print the factors with their uncertainty and the leave-one-GPU-out /
leave-one-model-out table.

Options → :class:`PredictRequest` (the served configuration, by keyword) → ``calibrate`` /
``calibrate_from_results`` / ``calibrate_from_run`` → :mod:`tokenplan.report.calibration` and
:mod:`tokenplan.report.fit`.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from tokenplan.api.calibrate import calibrate, calibrate_update, check_outputs, save_json
from tokenplan.api.resolve import PredictRequest
from tokenplan.cli.app import app
from tokenplan.cli.app import console as wide_console
from tokenplan.cli.params import INTEGER, NUMBER, PATH
from tokenplan.errors import InputError, MissingOptionError


@app.command("calibrate", old_spellings={"--config": "--model"})
@click.argument("paths", nargs=-1, help="Measurement CSVs (columns of dev.csv, inferencex-dev.csv or serving-dev.csv).")
@click.option("-o", "--out", type=PATH, help="Where to write the calibration profile JSON.")
@click.option("--cv/--no-cv", default=True, help="Run the leave-one-group-out cross-validation.")
@click.option(
    "--bands",
    type=PATH,
    help="Also write the error-band table (80 % intervals from K-fold cross-validated residuals) to this JSON file; needs --cv.",
)
@click.option("--json", "json_out", is_flag=True, help="Print the result as JSON.")
@click.option("--from-run", help="Fit to a generate run directory (summary.json + manifest.json) instead.")
@click.option("--model", "config", help="--from-run: catalog model, Hugging Face id or config.json the server ran.")
@click.option("--gpu", help="--from-run: catalog GPU key.")
@click.option(
    "--num-gpus",
    type=INTEGER,
    help="--from-run/--from-bench: GPUs the server ran on [default: a tokenplan bench file's, else tp × pp].",
)
@click.option("--tp", type=INTEGER, default=1, help="--from-run: tensor-parallel GPUs per replica (TP).")
@click.option("--engine", default="sglang", help="--from-run: the serving engine: sglang, vllm or trtllm.")
@click.option(
    "--weight-dtype", default="auto", help="--from-run: the served weight format (auto: the checkpoint's released one)."
)
@click.option("--kv-dtype", default="auto", help="--from-run: the KV-cache format (auto: the engine's default).")
@click.option(
    "--concurrency",
    type=INTEGER,
    help="--from-run: total requests in flight [default: the run's own, concurrency per endpoint × endpoints]",
)
@click.option("--isl", type=NUMBER, help="--from-run: mean prompt tokens (default: from the records).")
@click.option(
    "--from-bench",
    multiple=True,
    help="Fit to result files of tokenplan bench --save, vllm bench serve, sglang.bench_serving, AIPerf or GuideLLM (repeatable; with --model, --gpu and the layout).",
)
@click.option("--pp", type=INTEGER, default=1, help="--from-run/--from-bench: pipeline stages per replica (PP).")
@click.option("--ep", type=INTEGER, default=1, help="--from-run/--from-bench: expert-parallel GPUs (EP, MoE).")
@click.option(
    "--refit",
    is_flag=True,
    help="Refit the whole table from the built-in defaults (how the shipped fit is made; needed for --cv and --bands) instead of updating the shipped fit with the files' rows.",
)
def calibrate_command(**o: Any) -> None:
    """Fit the model's efficiency factors to measurements (robust least squares on log error)."""
    out, paths, bands, json_out = o["out"], o["paths"], o["bands"], o["json_out"]
    if not paths and not o["from_bench"] and o["from_run"] is None:
        raise MissingOptionError(["FILES"], "measurement CSV files, --from-bench BENCH.json or --from-run RUN_DIR")
    if out is None:
        raise MissingOptionError(["-o"], "-o PROFILE.json: where to write the calibration profile")
    _check_mode_options(o)
    check_outputs(out, bands, tuple(paths) + tuple(o["from_bench"]))
    if o["from_bench"]:
        _from_bench(o["from_bench"], out, json_out, _served(o), o["num_gpus"] is not None)
        return
    if o["from_run"] is not None:
        isl = o["isl"]
        if isl is not None and not 0 < isl < math.inf:
            raise InputError("isl", isl, "a mean prompt length in tokens > 0 (or leave it out: from the records)")
        _from_run(o["from_run"], out, json_out, replace(_served(o), concurrency=o["concurrency"], isl=isl or 0.0))
        return
    if not o["refit"]:
        if click.get_current_context().get_parameter_source("cv") is ParameterSource.COMMANDLINE:
            raise MissingOptionError(
                ["--refit"], "--refit with --cv/--no-cv: an update of the shipped fit has no folds"
            )
        if bands is not None:
            raise InputError("bands", str(bands), "--bands together with --refit (the bands come from the full refit)")
        _update_csv(paths, out, json_out)
        return
    if bands is not None and not o["cv"]:
        raise InputError("bands", str(bands), "--bands together with --cv (the bands come from cross-validation)")
    _from_csv(paths, out, o["cv"], bands, json_out)


# the options each way of calibrating reads (the rest were ignored without a word: a break-it pass's
# `calibrate rows.csv -o p.json --gpu nope --tp 0` wrote p.json, exit 0)
_SERVED = ("config", "gpu", "num_gpus", "tp", "engine", "weight_dtype", "kv_dtype", "pp", "ep")
_RUN_ONLY = ("concurrency", "isl")
_CSV_ONLY = ("refit", "cv", "bands")


def _check_mode_options(o: dict[str, Any]) -> None:
    """Refuse an option the chosen way of calibrating does not read (CSVs, ``--from-bench`` or
    ``--from-run``), and CSV files beside ``--from-bench``/``--from-run``, in one line naming it.

    Raises:
        InputError: the option (as typed on the command line) and the mode that reads it.
    """
    ctx = click.get_current_context()
    given = [n for n in o if ctx.get_parameter_source(n) is ParameterSource.COMMANDLINE]
    if o["from_bench"] or o["from_run"] is not None:
        mode = "--from-bench" if o["from_bench"] else "--from-run"
        if o["from_bench"] and o["from_run"] is not None:
            raise InputError("from-run", o["from_run"], "either --from-bench or --from-run, not both")
        if o["paths"]:
            raise InputError("FILES", " ".join(o["paths"]), f"no CSV files with {mode} (calibrate them on their own)")
        wrong = [n for n in given if n in _CSV_ONLY or (mode == "--from-bench" and n in _RUN_ONLY)]
        reads = "CSV files" if wrong and wrong[0] in _CSV_ONLY else "--from-run"
    else:
        wrong = [n for n in given if n in _SERVED + _RUN_ONLY]
        reads = "--from-run" if wrong and wrong[0] in _RUN_ONLY else "--from-run or --from-bench"
        reads += " (a CSV row names its own model, GPU and layout)"
    if wrong:
        param = next(p for p in ctx.command.params if p.name == wrong[0])
        if isinstance(param, click.Option) and param.is_flag:  # --refit, --no-cv: the flag as typed
            flag = param.opts[-1] if o[wrong[0]] else param.secondary_opts[-1]
            raise InputError("option", flag, f"only with {reads}")
        value = o[wrong[0]]  # as typed: --isl 100, not 100.0
        shown = f"{value:g}" if isinstance(value, float) else str(value)
        raise InputError(param.opts[-1].lstrip("-"), shown, f"only with {reads}")


def _served(o: dict[str, Any]) -> PredictRequest:
    """What the server ran (``--from-run``/``--from-bench``), by keyword; model and GPU checked by the callers."""
    return PredictRequest(
        model=o["config"] or "",
        gpu=o["gpu"] or "",
        num_gpus=o["num_gpus"] if o["num_gpus"] is not None else o["tp"] * o["pp"],
        tp=o["tp"],
        pp=o["pp"],
        ep=o["ep"],
        engine=o["engine"],
        weight_dtype=o["weight_dtype"],
        kv_dtype=o["kv_dtype"],
    )


def _update_csv(paths: Sequence[str], out: Path, json_out: bool) -> None:
    """Update the shipped fit with the CSVs' rows; write the update profile and print what moved."""
    from tokenplan.api.validate import in_sample_note
    from tokenplan.report.fit import show_update

    result = calibrate_update(list(paths), "tokenplan calibrate " + " ".join(paths) + f" -o {out}")
    for path in paths:
        if in_sample_note(path) is not None:  # its rows are in the shipped fit already
            click.echo(
                f"note: {path} is one of the files the shipped fit was made on: this update counts its rows twice",
                err=True,
            )
    save_json(out, result.profile.to_json(), "-o")
    if json_out:
        print(json.dumps(result.to_json(), indent=2))
        return
    show_update(wide_console(), result, out)


def _from_csv(paths: Sequence[str], out: Path, cv: bool, bands: Path | None, json_out: bool) -> None:
    """Fit to measurement CSVs; write the profile (and the error bands) and print the fit."""
    from tokenplan.report.calibration import show_calibration

    # the paths as typed, so the provenance names the files that reproduce it
    # (e.g. data/ground-truth/dev.csv for the shipped fit)
    command = "tokenplan calibrate --refit " + " ".join(paths) + f" -o {out}" + (f" --bands {bands}" if bands else "")
    result = calibrate(list(paths), command, cv, bands=bands is not None)
    d = result.to_json()
    save_json(out, d["profile"], "-o")
    band_table = result.bands if bands is not None else None
    if bands is not None and band_table is not None:
        save_json(bands, result.bands_json(), "--bands")
    if json_out:
        print(json.dumps(d, indent=2))
        return
    show_calibration(wide_console(), result.summary(), out, band_table, bands)


def _from_bench(paths: Sequence[str], out: Path, json_out: bool, desc: PredictRequest, gpus_stated: bool) -> None:
    from tokenplan.api.bench import calibrate_from_results

    if not desc.model or not desc.gpu:
        missing = [f for f, v in (("--model", desc.model), ("--gpu", desc.gpu)) if not v]
        raise MissingOptionError(missing, "--model MODEL and --gpu GPU with --from-bench")
    command = "tokenplan calibrate " + " ".join(f"--from-bench {Path(p).name}" for p in paths) + f" -o {out.name}"
    _write_fit(calibrate_from_results(list(paths), desc, command, gpus_stated), out, json_out, sources=True)


def _from_run(run_dir: str, out: Path, json_out: bool, desc: PredictRequest) -> None:
    from tokenplan.api.bench import calibrate_from_run

    if not desc.model or not desc.gpu:
        missing = [f for f, v in (("--model", desc.model), ("--gpu", desc.gpu)) if not v]
        raise MissingOptionError(missing, "--model MODEL and --gpu GPU with --from-run")
    outcome = calibrate_from_run(run_dir, desc, f"tokenplan calibrate --from-run {Path(run_dir).name} -o {out.name}")
    _write_fit(outcome, out, json_out, sources=False)


def _write_fit(outcome, out: Path, json_out: bool, sources: bool) -> None:  # noqa: ANN001 - api_bench.FitOutcome
    """Write the fitted profile to ``out``, warn (e.g. a fit that misses the measured throughput
    by > 50 %), then print the fit as JSON or as tables."""
    from tokenplan.report.fit import show_fit

    save_json(out, outcome.profile, "-o")
    for warning in outcome.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if json_out:
        print(json.dumps(outcome.data, indent=2))
        return
    from tokenplan.bench_schema import BenchFit

    show_fit(wide_console(), BenchFit.from_json(outcome.data, "fit"), out, sources=sources)
