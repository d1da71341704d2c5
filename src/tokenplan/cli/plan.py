"""``tokenplan plan``: compare hardware options for a generation job.

Options → :func:`plan_request` (by keyword, under a ``--job`` YAML) → ``plan`` /
``plan_report_data`` → :mod:`tokenplan.report.plan_output`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click

from tokenplan.cli.app import app, exit_status
from tokenplan.cli.app import console as wide_console
from tokenplan.cli.params import DRAFT_MODEL, INTEGER, NUMBER


@app.command("plan", old_spellings={"--isl-mean": "--isl", "--osl-mean": "--osl"})
@click.option("--model", help="Catalog name or config.json path [default: qwen3.6-27b]")
@click.option(
    "--gpu",
    multiple=True,
    help="Hardware option COUNTxKEY (8xb200), or KEY for one node or, with --deadline/--budget, the count to find; repeatable [default: 4xrtx-pro-6000, 8xb200]",
)
@click.option("--samples", type=INTEGER, help="Requests in the job [default: 914000]")
@click.option(
    "--isl", "isl_mean", type=NUMBER, help="Mean input tokens (ISL; lognormal with --isl-sigma) [default: 1024]"
)
@click.option("--isl-sigma", type=NUMBER, help="Lognormal σ of inputs [default: 0.8]")
@click.option("--isl-cap", type=NUMBER, help="Longest input (tokens) [default: 16384]")
@click.option(
    "--osl", "osl_mean", type=NUMBER, help="Mean output tokens (OSL; lognormal with --osl-sigma) [default: 2500]"
)
@click.option("--osl-sigma", type=NUMBER, help="Lognormal σ of outputs [default: 1.0]")
@click.option("--max-tokens", type=NUMBER, help="Longest output: the requests' max_tokens [default: 32768]")
@click.option("--engine", help="Serving engine: sglang, vllm or trtllm [default: sglang]")
@click.option(
    "--price",
    multiple=True,
    help="GPU=USD per GPU-hour, repeatable (e.g. b200=4.5) [default: the GPU catalog's typical price]",
)
@click.option(
    "--spec",
    multiple=True,
    help="Speculative settings to try: none or METHOD[:K[:TAU]] with METHOD mtp, eagle, eagle3, dflash (K 3 if left out; TAU from the acceptance prior if left out, or a `tokenplan bench --save` or `vllm bench serve` result JSON whose measured acceptance gives it, e.g. mtp:3:bench.json; repeatable) [default: none, mtp:1, mtp:3]",
)
@DRAFT_MODEL
@click.option(
    "--weight-dtype",
    multiple=True,
    help="Weight formats to search: bf16, fp16, fp8, int8, mxfp8, nvfp4 (fp4), mxfp4, w4a16 (int4, awq, gptq) (repeatable) [default: bf16 and fp8 where native, or the released format]",
)
@click.option(
    "--kv-dtype",
    multiple=True,
    help="KV-cache formats to search: bf16, fp16, fp8, nvfp4 (repeatable) [default: bf16 and fp8 where native]",
)
@click.option(
    "--deadline",
    help="Provisioning: finish the whole job within this time (2d, 36h, 90m); each --gpu then answers the fewest GPUs (whole nodes) that do it [default: none]",
)
@click.option(
    "--startup",
    help="Server start-up each option's days and dollars count before the first request (weights loaded, compiled, CUDA graphs captured): 10min, 90s, or 0 to leave it out [default: 215s, vLLM's Llama-70B FP8 TP8 start-up in vllm#19824]",
)
@click.option(
    "--budget",
    type=NUMBER,
    help="Provisioning: spend at most this many US dollars on the job; alone, each --gpu answers the count that finishes soonest within it; with --deadline, the fewest that meet both [default: none]",
)
@click.option(
    "--job",
    help="Job YAML with model, samples, isl, osl, gpus, engine, prices, spec, draft_model, current, measured_tok_s, tp, pp, dp, ep, max_running (options given here override it) [default: none]",
)
@click.option("--calibration", help="Calibration profile JSON from tokenplan calibrate [default: the shipped fit]")
@click.option(
    "--json", "as_json", is_flag=True, help="Print machine-readable JSON (tokenplan generate --plan reads it)"
)
@click.option(
    "--report",
    help="Also write a self-contained HTML report to this file (charts inline, opens offline) [default: none]",
)
@click.option("--png", help="Also write the report's charts as PNG files into this folder [default: none]")
@click.option(
    "--current",
    help="The setup you run now on the first --gpu, as KEY=VALUE,…: engine, tp, pp, ep, attention-dp, weight-dtype, kv-dtype, spec, max-running, memory-fraction, disable-radix-cache (e.g. engine=sglang,tp=4,weight-dtype=bf16,spec=mtp:3,max-running=48); the plan predicts it and walks from it to its recommendation [default: none]",
)
@click.option(
    "--measured-tok-s",
    type=NUMBER,
    help="Output tok/s you measured on the --current setup (all its GPUs): set beside the prediction, and the acceptance it implies is carried to the other options [default: none]",
)
@click.option(
    "--tp", type=INTEGER, help="Search only layouts with this tensor-parallel size per replica (TP) [default: every TP]"
)
@click.option("--pp", type=INTEGER, help="Search only layouts with this many pipeline stages (PP) [default: every PP]")
@click.option("--dp", type=INTEGER, help="Search only layouts with this many replicas (DP) [default: every DP]")
@click.option(
    "--ep",
    type=INTEGER,
    help="Search only layouts with this expert-parallel size (EP, MoE; 1 = experts TP-sharded) [default: every EP]",
)
@click.option(
    "--max-running",
    type=INTEGER,
    help="Fix the engine's running-request cap per replica (SGLang --max-running-requests, vLLM --max-num-seqs, TRT-LLM --max_batch_size) for every candidate; the launch sets it [default: the engine's, and a raised cap where the engine's caps below memory]",
)
def plan_cmd(**options: Any) -> None:
    """Compare hardware options: best layout and settings, tok/s, days, $ and $/Mtok, and why.

    Exit status 1 when no option runs the job, or none meets --deadline/--budget.
    """
    from tokenplan.api.plan import check_plan_outputs

    report, png, as_json = options.pop("report"), options.pop("png"), options.pop("as_json")
    check_plan_outputs(report, png)
    request = _request(options)
    with _named_by_job_file(options):
        _plan_out(request, report, png, as_json)


def _plan_out(request: Any, report: str | None, png: str | None, as_json: bool) -> None:
    """Plan ``request`` and print it (the table, or ``--json``); write ``--report``/``--png``."""
    from tokenplan.api.plan import REPORT_CHARTS, plan, plan_report_data
    from tokenplan.report.plan_output import show_plan, write_plan_files

    if as_json and not (report or png):
        result = plan(request).to_json()
        print(json.dumps(result, indent=2))
        exit_status(no_answer_status(result))
        return
    data = plan_report_data(request, REPORT_CHARTS if report or png else ("throughput",))
    write_plan_files(data, report, png)
    if as_json:
        print(json.dumps(data.plan.to_json(), indent=2))
    else:
        show_plan(wide_console(), data)
    exit_status(no_answer_status(data.plan.to_json()))


# job-file keys checked only once the plan runs, against other keys: each an error's field
# (as api.plan names it) → the key as the file spells it; every one is None unless given
_CROSS_CHECKED = {"measured-tok-s": "measured_tok_s", "current": "current", "draft_model": "draft_model"}


@contextmanager
def _named_by_job_file(options: dict[str, Any]) -> Iterator[None]:
    """Name the ``--job`` file and its key in a refusal of a value the file gave (``j.yaml:
    measured_tok_s: 1600 is not allowed …``), as the file's own checks do; a value the command
    line gave keeps its option's name."""
    from tokenplan.errors import ConfigError, InputError

    try:
        yield
    except InputError as exc:
        key = _CROSS_CHECKED.get(exc.field) if isinstance(exc.field, str) else None
        job = options.get("job")
        if not job or key is None or options.get(key) is not None or not str(exc).startswith(exc.field + " "):
            raise
        problem = str(exc).removeprefix(exc.field + " ").replace("with --current", "with current:")
        raise ConfigError(job, key, problem) from None


# PlanRequest's field for each option whose name differs; a repeatable option given no time is None
_FIELDS = {
    "gpu": "gpus",
    "budget": "budget_usd",
    "max_tokens": "osl_cap",
    "spec": "specs",
    "weight_dtype": "weight_dtypes",
    "kv_dtype": "kv_dtypes",
}


def _request(options: dict[str, Any]):  # noqa: ANN202 - api.plan.PlanRequest (imported on use)
    """The plan request: the ``--job`` YAML under the options given (by keyword; None = not given)."""
    from tokenplan.api.plan import plan_request
    from tokenplan.cli.options import parse_duration, parse_prices

    fields: dict[str, Any] = {_FIELDS.get(k, k): (v or None) if isinstance(v, tuple) else v for k, v in options.items()}
    prices, deadline, startup = fields.pop("price"), fields.pop("deadline"), fields.pop("startup")
    return plan_request(
        fields.pop("job"),
        prices=parse_prices(list(prices)) if prices else None,
        deadline_s=parse_duration(deadline) if deadline is not None else None,
        startup_s=None if startup is None else _startup_s(startup),
        **fields,
    )


def _startup_s(text: str) -> float:
    """``--startup``: a duration up to a day (``10min``, ``90s``), or ``0`` for none (seconds).
    Raises InputError naming the option and the text given."""
    from tokenplan.api.plan import MAX_STARTUP_S
    from tokenplan.cli.options import parse_duration
    from tokenplan.errors import InputError

    allowed = "0, or a duration up to 1d with its unit: s, m or min, h, or d (e.g. 10min, 90s)"
    if text.strip() in ("0", "0s", "0min"):
        return 0.0
    try:
        seconds = parse_duration(text, "startup")
    except InputError:
        raise InputError("startup", text, allowed) from None
    if seconds > MAX_STARTUP_S:
        raise InputError("startup", text, allowed)
    return seconds


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
