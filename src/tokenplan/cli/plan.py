"""``tokenplan plan``: compare hardware options for a generation job.

Options → :func:`plan_request` (by keyword, under a ``--job`` YAML) → ``plan`` /
``plan_report_data`` → :mod:`tokenplan.report.plan_output`.
"""

from __future__ import annotations

import json
from typing import Optional

import typer

from tokenplan.cli.app import app
from tokenplan.cli.app import console as wide_console

_MODEL = typer.Option(None, "--model", help="Catalog name or config.json path [default: qwen3.6-27b]")
_GPU = typer.Option(
    None,
    "--gpu",
    help="Hardware option COUNTxKEY (8xb200), or KEY for one node or, with --deadline/--budget, the count to find; repeatable [default: 4xrtx-pro-6000, 8xb200]",
)
_SAMPLES = typer.Option(None, "--samples", help="Requests in the job [default: 914000]")
_ISL = typer.Option(None, "--isl", help="Mean input tokens (ISL; lognormal with --isl-sigma) [default: 1024]")
_ISL_SIGMA = typer.Option(None, "--isl-sigma", help="Lognormal σ of inputs [default: 0.8]")
_ISL_CAP = typer.Option(None, "--isl-cap", help="Longest input (tokens) [default: 16384]")
_OSL = typer.Option(None, "--osl", help="Mean output tokens (OSL; lognormal with --osl-sigma) [default: 2500]")
_OSL_SIGMA = typer.Option(None, "--osl-sigma", help="Lognormal σ of outputs [default: 1.0]")
_MAX_TOKENS = typer.Option(None, "--max-tokens", help="Longest output: the requests' max_tokens [default: 32768]")
_ENGINE = typer.Option(None, "--engine", help="Serving engine: sglang, vllm or trtllm [default: sglang]")
_PRICE = typer.Option(
    None, "--price", help="GPU=USD per GPU-hour, repeatable (e.g. b200=4.5) [default: the GPU catalog's typical price]"
)
_SPEC = typer.Option(
    None,
    "--spec",
    help="Speculative settings to try: none or METHOD[:K[:TAU]] with METHOD mtp, eagle, eagle3, dflash (K 3 if left out; TAU from the acceptance prior if left out, or a `tokenplan bench --save` or `vllm bench serve` result JSON whose measured acceptance gives it, e.g. mtp:3:bench.json; repeatable) [default: none, mtp:1, mtp:3]",
)
_WEIGHT_DTYPE = typer.Option(
    None,
    "--weight-dtype",
    help="Weight formats to search: bf16, fp16, fp8, int8, mxfp8, nvfp4, mxfp4, w4a16/int4 (repeatable) [default: bf16 and fp8 where native, or the released format]",
)
_KV_DTYPE = typer.Option(
    None,
    "--kv-dtype",
    help="KV-cache formats to search: bf16, fp16, fp8, nvfp4 (repeatable) [default: bf16 and fp8 where native]",
)
_DEADLINE = typer.Option(
    None,
    "--deadline",
    help="Provisioning: finish the whole job within this time (2d, 36h, 90m); each --gpu then answers the fewest GPUs (whole nodes) that do it [default: none]",
)
_BUDGET = typer.Option(
    None,
    "--budget",
    help="Provisioning: spend at most this many US dollars on the job; alone, each --gpu answers the count that finishes soonest within it; with --deadline, the fewest that meet both [default: none]",
)
_CURRENT = typer.Option(
    None,
    "--current",
    help="The setup you run now on the first --gpu, as KEY=VALUE,…: engine, tp, pp, ep, attention-dp, weight-dtype, kv-dtype, spec, max-running, memory-fraction, disable-radix-cache (e.g. engine=sglang,tp=4,weight-dtype=bf16,spec=mtp:3,max-running=48); the plan predicts it and walks from it to its recommendation [default: none]",
)
_MEASURED = typer.Option(
    None,
    "--measured-tok-s",
    help="Output tok/s you measured on the --current setup (all its GPUs): set beside the prediction, and the acceptance it implies is carried to the other options [default: none]",
)
_TP = typer.Option(
    None, "--tp", help="Search only layouts with this tensor-parallel size per replica (TP) [default: every TP]"
)
_DP = typer.Option(None, "--dp", help="Search only layouts with this many replicas (DP) [default: every DP]")
_EP = typer.Option(
    None,
    "--ep",
    help="Search only layouts with this expert-parallel size (EP, MoE; 1 = experts TP-sharded) [default: every EP]",
)
_MAX_RUNNING = typer.Option(
    None,
    "--max-running",
    help="Fix the engine's running-request cap per replica (SGLang --max-running-requests, vLLM --max-num-seqs, TRT-LLM --max_batch_size) for every candidate; the launch sets it [default: the engine's, and a raised cap where the engine's caps below memory]",
)
_JOB = typer.Option(
    None,
    "--job",
    help="Job YAML with model, samples, isl, osl, gpus, engine, prices, tp, dp, ep, max_running (options given here override it) [default: none]",
)
_CALIBRATION = typer.Option(
    None, "--calibration", help="Calibration profile JSON from tokenplan calibrate [default: the shipped fit]"
)
_JSON = typer.Option(False, "--json", help="Print machine-readable JSON (tokenplan generate --plan reads it)")
_REPORT = typer.Option(
    None,
    "--report",
    help="Also write a self-contained HTML report to this file (charts inline, opens offline) [default: none]",
)
_PNG = typer.Option(None, "--png", help="Also write the report's charts as PNG files into this folder [default: none]")


@app.command("plan")
def plan_cmd(
    model: Optional[str] = _MODEL,
    gpu: Optional[list[str]] = _GPU,
    samples: Optional[int] = _SAMPLES,
    isl_mean: Optional[float] = _ISL,
    isl_sigma: Optional[float] = _ISL_SIGMA,
    isl_cap: Optional[float] = _ISL_CAP,
    osl_mean: Optional[float] = _OSL,
    osl_sigma: Optional[float] = _OSL_SIGMA,
    max_tokens: Optional[float] = _MAX_TOKENS,
    engine: Optional[str] = _ENGINE,
    price: Optional[list[str]] = _PRICE,
    spec: Optional[list[str]] = _SPEC,
    weight_dtype: Optional[list[str]] = _WEIGHT_DTYPE,
    kv_dtype: Optional[list[str]] = _KV_DTYPE,
    deadline: Optional[str] = _DEADLINE,
    budget: Optional[float] = _BUDGET,
    job: Optional[str] = _JOB,
    calibration: Optional[str] = _CALIBRATION,
    as_json: bool = _JSON,
    report: Optional[str] = _REPORT,
    png: Optional[str] = _PNG,
    current: Optional[str] = _CURRENT,
    measured_tok_s: Optional[float] = _MEASURED,
    tp: Optional[int] = _TP,
    dp: Optional[int] = _DP,
    ep: Optional[int] = _EP,
    max_running: Optional[int] = _MAX_RUNNING,
) -> None:
    """Compare hardware options: best layout and settings, tok/s, days, $ and $/Mtok, and why.

    Exit status 1 when no option runs the job, or none meets --deadline/--budget.
    """
    from tokenplan.api.plan import REPORT_CHARTS, check_plan_outputs, plan, plan_report_data, plan_request
    from tokenplan.cli.options import parse_duration, parse_prices
    from tokenplan.report.plan_output import show_plan, write_plan_files

    check_plan_outputs(report, png)
    request = plan_request(
        job,
        model=model,
        gpus=tuple(gpu) if gpu else None,
        samples=samples,
        isl_mean=isl_mean,
        isl_sigma=isl_sigma,
        isl_cap=isl_cap,
        osl_mean=osl_mean,
        osl_sigma=osl_sigma,
        osl_cap=max_tokens,
        engine=engine,
        prices=parse_prices(price) if price else None,
        specs=tuple(spec) if spec else None,
        weight_dtypes=tuple(weight_dtype) if weight_dtype else None,
        kv_dtypes=tuple(kv_dtype) if kv_dtype else None,
        calibration=calibration,
        deadline_s=parse_duration(deadline) if deadline is not None else None,
        budget_usd=budget,
        current=current,
        measured_tok_s=measured_tok_s,
        tp=tp,
        dp=dp,
        ep=ep,
        max_running=max_running,
    )
    if as_json and not (report or png):
        result = plan(request).to_json()
        print(json.dumps(result, indent=2))
        raise typer.Exit(no_answer_status(result))
    data = plan_report_data(request, REPORT_CHARTS if report or png else ("throughput",))
    write_plan_files(data, report, png)
    if as_json:
        print(json.dumps(data.plan.to_json(), indent=2))
    else:
        show_plan(wide_console(), data)
    raise typer.Exit(no_answer_status(data.plan.to_json()))


NO_ANSWER_EXIT = 1  # the plan ran, but no option runs the job, or none meets the deadline and budget


def no_answer_status(result: dict) -> int:
    """The exit status of a plan (``plan --json`` output): 0 when an option runs the job (and,
    with ``--deadline``/``--budget``, at least one GPU type meets them), else
    :data:`NO_ANSWER_EXIT`, so that a script can tell without reading the output."""
    if result.get("recommended") is None:
        return NO_ANSWER_EXIT
    prov = result.get("provisioning")
    if prov and not any(row["meets"] for row in prov["options"]):
        return NO_ANSWER_EXIT
    return 0
