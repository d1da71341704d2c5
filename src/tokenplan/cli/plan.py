"""``tokenplan plan``: compare hardware options for a generation job."""

from __future__ import annotations

import json
from typing import Optional

import typer

from tokenplan.cli.app import console as wide_console
from tokenplan.cli.app import app


@app.command("plan")
def plan_cmd(
    model: Optional[str] = typer.Option(None, "--model", help="Catalog name or config.json path [default: qwen3.6-27b]"),
    gpu: Optional[list[str]] = typer.Option(None, "--gpu", help="Hardware option COUNTxKEY (8xb200), or KEY for one node or, with --deadline/--budget, the count to find; repeatable [default: 4xrtx-pro-6000, 8xb200]"),
    samples: Optional[int] = typer.Option(None, "--samples", help="Requests in the job [default: 914000]"),
    isl_mean: Optional[float] = typer.Option(None, "--isl", help="Mean input tokens (ISL; lognormal with --isl-sigma) [default: 1024]"),
    isl_sigma: Optional[float] = typer.Option(None, "--isl-sigma", help="Lognormal σ of inputs [default: 0.8]"),
    isl_cap: Optional[float] = typer.Option(None, "--isl-cap", help="Longest input (tokens) [default: 16384]"),
    osl_mean: Optional[float] = typer.Option(None, "--osl", help="Mean output tokens (OSL; lognormal with --osl-sigma) [default: 2500]"),
    osl_sigma: Optional[float] = typer.Option(None, "--osl-sigma", help="Lognormal σ of outputs [default: 1.0]"),
    max_tokens: Optional[float] = typer.Option(None, "--max-tokens", help="Longest output: the requests' max_tokens [default: 32768]"),
    engine: Optional[str] = typer.Option(None, "--engine", help="Serving engine: sglang, vllm or trtllm [default: sglang]"),
    price: Optional[list[str]] = typer.Option(None, "--price", help="GPU=USD per GPU-hour, repeatable (e.g. b200=4.5) [default: the GPU catalog's typical price]"),
    spec: Optional[list[str]] = typer.Option(None, "--spec", help="Speculative settings to try: none or METHOD:K[:TAU] with METHOD mtp, eagle, eagle3, dflash (repeatable) [default: none, mtp:1, mtp:3]"),
    weight_dtype: Optional[list[str]] = typer.Option(None, "--weight-dtype", help="Weight formats to search: bf16, fp16, fp8, int8, mxfp8, nvfp4, mxfp4, w4a16/int4 (repeatable) [default: bf16 and fp8 where native, or the released format]"),
    kv_dtype: Optional[list[str]] = typer.Option(None, "--kv-dtype", help="KV-cache formats to search: bf16, fp16, fp8, nvfp4 (repeatable) [default: bf16 and fp8 where native]"),
    deadline: Optional[str] = typer.Option(None, "--deadline", help="Provisioning: finish the whole job within this time (2d, 36h, 90m); each --gpu then answers the fewest GPUs (whole nodes) that do it [default: none]"),
    budget: Optional[float] = typer.Option(None, "--budget", help="Provisioning: spend at most this many US dollars on the job; alone or with --deadline [default: none]"),
    job: Optional[str] = typer.Option(None, "--job", help="Job YAML with model, samples, isl, osl, gpus, engine, prices (options given here override it) [default: none]"),
    calibration: Optional[str] = typer.Option(None, "--calibration", help="Calibration profile JSON from tokenplan calibrate [default: the shipped fit]"),
    as_json: bool = typer.Option(False, "--json", help="Print machine-readable JSON (tokenplan generate --plan reads it)"),
    report: Optional[str] = typer.Option(None, "--report", help="Also write a self-contained HTML report to this file (charts inline, opens offline) [default: none]"),
    png: Optional[str] = typer.Option(None, "--png", help="Also write the report's charts as PNG files into this folder [default: none]"),
) -> None:
    """Compare hardware options: best layout and settings, tok/s, days, $ and $/Mtok, and why."""
    from tokenplan.api.plan import REPORT_CHARTS, PlanRequest, plan, plan_report_data
    from tokenplan.cli.options import parse_duration, parse_prices, plan_request_fields
    from tokenplan.report.tables import plan_details, plan_table, provisioning_table, throughput_text

    fields = plan_request_fields(job, dict(
        model=model, gpus=tuple(gpu) if gpu else None, samples=samples, isl_mean=isl_mean, isl_sigma=isl_sigma,
        isl_cap=isl_cap, osl_mean=osl_mean, osl_sigma=osl_sigma, osl_cap=max_tokens, engine=engine,
        prices=parse_prices(price) if price else None, specs=tuple(spec) if spec else None,
        weight_dtypes=tuple(weight_dtype) if weight_dtype else None,
        kv_dtypes=tuple(kv_dtype) if kv_dtype else None, calibration=calibration,
        deadline_s=parse_duration(deadline) if deadline is not None else None, budget_usd=budget))
    request = PlanRequest(**fields)
    if as_json and not (report or png):
        print(json.dumps(plan(request).to_json(), indent=2))
        return
    data = plan_report_data(request, REPORT_CHARTS if report or png else ("throughput",)).to_json()
    result = data["plan"]
    _write_reports(data, report, png)
    if as_json:
        print(json.dumps(result, indent=2))
        return
    console = wide_console()
    if result.get("provisioning"):
        console.print(provisioning_table(result))
    console.print(plan_table(result))
    console.print(throughput_text(data))
    console.print(plan_details(result))


def _write_reports(data: dict, report: str | None, png: str | None) -> None:
    """Write the HTML report and/or the PNG charts; say where on stderr (stdout may be JSON)."""
    import sys

    if report:
        from tokenplan.report.html import plan_report_html, write_html

        print(f"report: {write_html(plan_report_html(data), report)}", file=sys.stderr)
    if png:
        from tokenplan.report.png import write_plan_pngs

        for path in write_plan_pngs(data, png):
            print(f"chart: {path}", file=sys.stderr)
