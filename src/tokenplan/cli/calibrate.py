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
from pathlib import Path
from typing import Annotated, Optional

import typer

from tokenplan.api._common import PredictRequest
from tokenplan.api.calibrate import calibrate, calibrate_update, table_to_json
from tokenplan.cli.app import app
from tokenplan.cli.app import console as wide_console
from tokenplan.errors import InputError

_Paths = Annotated[
    Optional[list[str]],
    typer.Argument(help="Measurement CSVs (columns of dev.csv, inferencex-dev.csv or serving-dev.csv)."),
]
_Out = Annotated[Optional[Path], typer.Option("-o", "--out", help="Where to write the calibration profile JSON.")]
_Cv = Annotated[bool, typer.Option("--cv/--no-cv", help="Run the leave-one-group-out cross-validation.")]
_Bands = Annotated[
    Optional[Path],
    typer.Option(
        "--bands",
        help="Also write the error-band table (80 % intervals "
        "from K-fold cross-validated residuals) to this JSON file; needs --cv.",
    ),
]
_Refit = Annotated[
    bool,
    typer.Option(
        "--refit",
        help="Refit the whole table from the built-in defaults (how the "
        "shipped fit is made; needed for --cv and --bands) instead of updating the "
        "shipped fit with the files' rows.",
    ),
]
_Json = Annotated[bool, typer.Option("--json", help="Print the result as JSON.")]
_FromRun = Annotated[
    Optional[str],
    typer.Option("--from-run", help="Fit to a generate run directory (summary.json + manifest.json) instead."),
]
_Model = Annotated[
    Optional[str],
    typer.Option("--model", help="--from-run: catalog model, Hugging Face id or config.json the server ran."),
]
_Gpu = Annotated[Optional[str], typer.Option("--gpu", help="--from-run: catalog GPU key.")]
_NumGpus = Annotated[int, typer.Option("--num-gpus", help="--from-run: GPUs the server ran on.")]
_Tp = Annotated[int, typer.Option("--tp", help="--from-run: tensor-parallel GPUs per replica (TP).")]
_Engine = Annotated[str, typer.Option("--engine", help="--from-run: the serving engine: sglang, vllm or trtllm.")]
_WeightDtype = Annotated[str, typer.Option("--weight-dtype", help="--from-run: the served weight format.")]
_KvDtype = Annotated[
    str, typer.Option("--kv-dtype", help="--from-run: the KV-cache format (auto: the engine's default).")
]
_Concurrency = Annotated[Optional[int], typer.Option("--concurrency", help="--from-run: total requests in flight.")]
_Isl = Annotated[
    Optional[float], typer.Option("--isl", help="--from-run: mean prompt tokens (default: from the records).")
]
_FromBench = Annotated[
    Optional[list[str]],
    typer.Option(
        "--from-bench",
        help="Fit to result files of vllm bench serve, sglang.bench_serving, AIPerf or GuideLLM (repeatable; with --model, --gpu and the layout).",
    ),
]
_Pp = Annotated[int, typer.Option("--pp", help="--from-run/--from-bench: pipeline stages per replica (PP).")]
_Ep = Annotated[int, typer.Option("--ep", help="--from-run/--from-bench: expert-parallel GPUs (EP, MoE).")]


@app.command("calibrate")
def calibrate_command(
    paths: _Paths = None,
    out: _Out = None,
    cv: _Cv = True,
    bands: _Bands = None,
    json_out: _Json = False,
    from_run: _FromRun = None,
    config: _Model = None,
    gpu: _Gpu = None,
    num_gpus: _NumGpus = 1,
    tp: _Tp = 1,
    engine: _Engine = "sglang",
    weight_dtype: _WeightDtype = "bf16",
    kv_dtype: _KvDtype = "auto",
    concurrency: _Concurrency = None,
    isl: _Isl = None,
    from_bench: _FromBench = None,
    pp: _Pp = 1,
    ep: _Ep = 1,
    refit: _Refit = False,
) -> None:
    """Fit the model's efficiency factors to measurements (robust least squares on log error)."""
    if out is None:
        raise InputError("out", "", "-o PROFILE.json: where to write the calibration profile")
    if from_bench:
        _from_bench(
            from_bench,
            out,
            json_out,
            PredictRequest(
                model=config or "",
                gpu=gpu or "",
                num_gpus=num_gpus,
                tp=tp,
                pp=pp,
                ep=ep,
                engine=engine,
                weight_dtype=weight_dtype,
                kv_dtype=kv_dtype,
            ),
        )
        return
    if from_run is not None:
        if isl is not None and not 0 < isl < math.inf:
            raise InputError("isl", isl, "a mean prompt length in tokens > 0 (or leave it out: from the records)")
        _from_run(
            from_run,
            out,
            json_out,
            PredictRequest(
                model=config or "",
                gpu=gpu or "",
                num_gpus=num_gpus,
                tp=tp,
                pp=pp,
                ep=ep,
                engine=engine,
                weight_dtype=weight_dtype,
                kv_dtype=kv_dtype,
                concurrency=concurrency,
                isl=isl or 0.0,
            ),
        )
        return
    if not paths:
        raise InputError("paths", "", "measurement CSV files, or --from-run RUN_DIR")
    if not refit:
        if bands is not None:
            raise InputError("bands", str(bands), "--bands together with --refit (the bands come from the full refit)")
        _update_csv(paths, out, json_out)
        return
    if bands is not None and not cv:
        raise InputError("bands", str(bands), "--bands together with --cv (the bands come from cross-validation)")
    _from_csv(paths, out, cv, bands, json_out)


def _update_csv(paths: list[str], out: Path, json_out: bool) -> None:
    """Update the shipped fit with the CSVs' rows; write the update profile and print what moved."""
    from tokenplan.report.fit import show_update

    result = calibrate_update(paths, "tokenplan calibrate " + " ".join(paths) + f" -o {out}")
    d = result.to_json()
    out.write_text(json.dumps(d["profile"], indent=2) + "\n", encoding="utf-8")
    if json_out:
        print(json.dumps(d, indent=2))
        return
    show_update(wide_console(), d, out)


def _from_csv(paths: list[str], out: Path, cv: bool, bands: Path | None, json_out: bool) -> None:
    """Fit to measurement CSVs; write the profile (and the error bands) and print the fit."""
    from tokenplan.report.calibration import show_calibration

    # the paths as typed, so the provenance names the files that reproduce it
    # (e.g. data/ground-truth/dev.csv for the shipped fit)
    command = "tokenplan calibrate --refit " + " ".join(paths) + f" -o {out}" + (f" --bands {bands}" if bands else "")
    result = calibrate(paths, command, cv, bands=bands is not None)
    d = result.to_json()
    out.write_text(json.dumps(d["profile"], indent=2) + "\n", encoding="utf-8")
    band_table = result.bands if bands is not None else None
    if band_table is not None:
        bands.write_text(json.dumps(table_to_json(band_table), indent=2) + "\n", encoding="utf-8")  # type: ignore[union-attr]
    if json_out:
        print(json.dumps(d, indent=2))
        return
    show_calibration(wide_console(), result.summary(), out, band_table, bands)


def _from_bench(paths: list[str], out: Path, json_out: bool, desc: PredictRequest) -> None:
    from tokenplan.api.bench import calibrate_from_results

    if not desc.model or not desc.gpu:
        raise InputError("config/gpu", f"{desc.model}/{desc.gpu}", "--config MODEL and --gpu GPU with --from-bench")
    command = "tokenplan calibrate " + " ".join(f"--from-bench {Path(p).name}" for p in paths) + f" -o {out.name}"
    _write_fit(calibrate_from_results(paths, desc, command), out, json_out, sources=True)


def _from_run(run_dir: str, out: Path, json_out: bool, desc: PredictRequest) -> None:
    from tokenplan.api.bench import calibrate_from_run

    if not desc.model or not desc.gpu:
        raise InputError("config/gpu", f"{desc.model}/{desc.gpu}", "--model MODEL and --gpu GPU with --from-run")
    outcome = calibrate_from_run(run_dir, desc, f"tokenplan calibrate --from-run {Path(run_dir).name} -o {out.name}")
    _write_fit(outcome, out, json_out, sources=False)


def _write_fit(outcome, out: Path, json_out: bool, sources: bool) -> None:  # noqa: ANN001 - api_bench.FitOutcome
    """Write the fitted profile to ``out``, warn (e.g. a fit that misses the measured throughput
    by > 50 %), then print the fit as JSON or as tables."""
    from tokenplan.report.fit import show_fit

    out.write_text(json.dumps(outcome.profile, indent=2) + "\n", encoding="utf-8")
    for warning in outcome.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if json_out:
        print(json.dumps(outcome.data, indent=2))
        return
    show_fit(wide_console(), outcome.data, out, sources=sources)
