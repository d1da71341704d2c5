"""``tokenplan predict`` and ``tokenplan memory``: one configuration, for scripts."""

from __future__ import annotations

import json

import click

from tokenplan.cli.app import app
from tokenplan.cli.app import console as wide_console
from tokenplan.cli.params import DRAFT_MODEL, INTEGER, NUMBER
from tokenplan.job.workload import DEFAULT_ISL, DEFAULT_OSL


def _concurrency(text: str) -> float | None:
    """``--concurrency``: a whole number of requests in flight, or ``max`` (None: offline)."""
    from tokenplan.errors import InputError

    if text.strip().lower() == "max":
        return None
    try:
        requests = int(text)
    except ValueError:
        requests = 0
    if requests < 1:  # 0, negative, 0.5 or a word: one message for all
        raise InputError("concurrency", text, "a whole number of requests ≥ 1, or max")
    return float(requests)


# options plan repeats to compare (--gpu b200 --gpu h200); predict and memory take one of each
ONCE = {
    name: f"one {what} (tokenplan plan compares several)"
    for name, what in (("--gpu", "GPU"), ("--spec", "setting"), ("--weight-dtype", "format"), ("--kv-dtype", "format"))
}
_FRACTION = (
    "The engine's memory setting: SGLang --mem-fraction-static, vLLM --gpu-memory-utilization, "
    "TRT-LLM free_gpu_memory_fraction [default: the engine's rule]"
)
# Options predict and memory share (one definition each).
_MODEL = click.option("--model", required=True, help="Catalog name or config.json path")
_GPU = click.option(
    "--gpu", required=True, help="GPU catalog key or alias, e.g. b200 or b200_sxm (tokenplan catalog gpus)"
)
_NUM_GPUS = click.option("--num-gpus", type=INTEGER, help="GPUs in all [default: tp × pp]")
_TP = click.option("--tp", type=INTEGER, default=1, help="Tensor-parallel GPUs per replica (TP)")
_PP = click.option("--pp", type=INTEGER, default=1, help="Pipeline stages per replica (PP)")
_EP = click.option("--ep", type=INTEGER, default=1, help="Expert-parallel GPUs (EP, MoE)")
_ATTENTION_DP = click.option("--attention-dp", is_flag=True, help="Attention data-parallel across the TP ranks (MoE)")
_WEIGHT_DTYPE = click.option(
    "--weight-dtype",
    default="auto",
    help="auto (the checkpoint's released format: bf16 for Qwen3.6-27B, mxfp4 for gpt-oss, a config.json's quantization_config format; plan instead searches bf16 and fp8 where native), bf16, fp16, fp8, int8, mxfp8, nvfp4 (fp4), mxfp4, w4a16 (int4, awq, gptq)",
)
_KV_DTYPE = click.option("--kv-dtype", default="auto", help="auto (the engine's default), bf16, fp16, fp8, nvfp4")
_ENGINE = click.option("--engine", default="sglang", help="Serving engine: sglang, vllm or trtllm")
_MEMORY_FRACTION = click.option("--memory-fraction", type=NUMBER, help=_FRACTION)
_DISABLE_RADIX_CACHE = click.option(
    "--disable-radix-cache",
    is_flag=True,
    help="SGLang: one state slot per running request (hybrid models; what plan launches with when it raises the running cap)",
)
_SSM_DTYPE = click.option(
    "--ssm-dtype", help="Recurrent-state dtype: float32, bfloat16 or float16 [default: the config's]"
)
_MAX_NUM_BATCHED_TOKENS = click.option(
    "--max-num-batched-tokens",
    type=INTEGER,
    help="vLLM: tokens per step; sizes its profiling run's activation peak [default: vLLM's, 8192 on ≥70 GiB GPUs]",
)
_CHUNKED_PREFILL_SIZE = click.option(
    "--chunked-prefill-size",
    type=INTEGER,
    help="SGLang: prefill chunk; sizes its activation reserve [default: SGLang's GPU-memory bucket]",
)


def _default_caps(
    isl: float, osl: float, isl_cap: float | None, max_tokens: float | None, isl_sigma: float, osl_sigma: float
) -> tuple:
    """(input cap, output cap): each given, else plan's default. Fixed lengths (σ = 0) at or
    above a default cap run uncapped (None): a cap does not change a fixed length. A drawn mean
    at or above it is refused as plan refuses it (raise the cap): dropping the cap there turned
    a nearly fixed length at the cap into an uncapped lognormal tail, and one more token of
    --osl cut the throughput 2.6× (843 → 324 tok/s at --osl 32,767 → 32,768, a break-it pass)."""
    from tokenplan.errors import InputError, shown

    caps = []
    for name, option, mean, sigma, cap, default in (
        ("isl", "isl-cap", isl, isl_sigma, isl_cap, DEFAULT_ISL.cap),
        ("osl", "max-tokens", osl, osl_sigma, max_tokens, DEFAULT_OSL.cap),
    ):
        if cap is None and mean >= default and sigma > 0:  # worded as plan's refusal (job.workload)
            raise InputError(
                name,
                shown(mean),
                f"a mean below --{option} {default:g} (its default; raise --{option} for longer "
                f"{'prompts' if name == 'isl' else 'outputs'}, or give --{name}-sigma 0 for fixed lengths)",
            )
        caps.append(None if cap is None and mean >= default else (default if cap is None else cap))
    return tuple(caps)


# The job's lengths, as plan's job draws them (lognormal, capped): predict and memory take the same
# options with the same defaults, so the same configuration gets one answer from both.
_LENGTH_OPTIONS = (
    click.option(
        "--isl",
        type=NUMBER,
        default=DEFAULT_ISL.mean,
        show_default=False,
        help="Mean input tokens per request (ISL; lognormal with --isl-sigma, capped at --isl-cap; the mean of the capped lengths, as plan's) [default: plan's job: 1024]",
    ),
    click.option(
        "--osl",
        type=NUMBER,
        default=DEFAULT_OSL.mean,
        show_default=False,
        help="Mean output tokens per request (OSL; lognormal with --osl-sigma, capped at --max-tokens; the mean of the capped lengths, as plan's) [default: plan's job: 2500]",
    ),
    click.option(
        "--isl-sigma",
        type=NUMBER,
        default=DEFAULT_ISL.sigma,
        show_default=False,
        help="Lognormal σ of inputs (0 = every input is --isl) [default: plan's job: 0.8]",
    ),
    click.option(
        "--osl-sigma",
        type=NUMBER,
        default=DEFAULT_OSL.sigma,
        show_default=False,
        help="Lognormal σ of outputs (0 = every output is --osl) [default: plan's job: 1.0]",
    ),
    click.option(
        "--isl-cap",
        type=NUMBER,
        help="Longest input (tokens) [default: plan's job: 16384; none for a fixed --isl (σ 0) at or above it]",
    ),
    click.option(
        "--max-tokens",
        type=NUMBER,
        help="Longest output: the requests' max_tokens [default: plan's job: 32768; none for a fixed --osl (σ 0) at or above it]",
    ),
)


def _lengths(command):  # noqa: ANN001, ANN202 - a click command function
    for option in reversed(_LENGTH_OPTIONS):
        command = option(command)
    return command


@app.command("predict", once=ONCE)
@_MODEL
@_GPU
@_NUM_GPUS
@_TP
@_PP
@_EP
@_ATTENTION_DP
@_WEIGHT_DTYPE
@_KV_DTYPE
@_lengths
@click.option(
    "--concurrency",
    default="max",
    help="Requests in flight over all replicas, or max (offline: every request sent at once; the replica runs as many "
    "as memory and the engine allow and queues the rest: its tok/s and TPOT bands are a queued run's, and its TTFT "
    "runs from when a slot frees, without the wait for it)",
)
@click.option(
    "--spec",
    default="none",
    help="none or METHOD[:K[:TAU]] with METHOD mtp, eagle, eagle3 or dflash, e.g. mtp:3:3.3 (K 3 if left out; TAU from the acceptance prior if left out, or a `tokenplan bench --save` or `vllm bench serve` result JSON's measured acceptance, e.g. mtp:3:bench.json)",
)
@DRAFT_MODEL
@_ENGINE
@_MEMORY_FRACTION
@click.option("--max-running", type=INTEGER, help="Running-request cap per replica [default: the engine's]")
@click.option("--calibration", help="Calibration profile JSON from tokenplan calibrate [default: the shipped fit]")
@_DISABLE_RADIX_CACHE
@_SSM_DTYPE
@_MAX_NUM_BATCHED_TOKENS
@_CHUNKED_PREFILL_SIZE
@click.option("--json", "as_json", is_flag=True, help="Print the prediction as JSON")
def predict_cmd(
    model: str,
    gpu: str,
    num_gpus: int | None,
    tp: int,
    pp: int,
    ep: int,
    attention_dp: bool,
    weight_dtype: str,
    kv_dtype: str,
    isl: float,
    osl: float,
    concurrency: str,
    spec: str,
    draft_model: str | None,
    engine: str,
    memory_fraction: float | None,
    max_running: int | None,
    calibration: str | None,
    isl_sigma: float,
    osl_sigma: float,
    isl_cap: float | None,
    max_tokens: float | None,
    disable_radix_cache: bool,
    ssm_dtype: str | None,
    max_num_batched_tokens: int | None,
    chunked_prefill_size: int | None,
    as_json: bool,
) -> None:
    """Predict throughput, TPOT, TTFT (as a client measures it: queueing included), memory and
    the bottleneck of one configuration. Lengths default to plan's job, so a plan's choice predicts
    as the plan did; weights to the released format (auto)."""
    from tokenplan.api.predict import predict
    from tokenplan.api.resolve import PredictRequest
    from tokenplan.report.tables import predict_table

    isl_cap, max_tokens = _default_caps(isl, osl, isl_cap, max_tokens, isl_sigma, osl_sigma)
    result = predict(
        PredictRequest(
            model=model,
            gpu=gpu,
            num_gpus=tp * pp if num_gpus is None else num_gpus,
            tp=tp,
            pp=pp,
            ep=ep,
            attention_dp=attention_dp,
            weight_dtype=weight_dtype,
            kv_dtype=kv_dtype,
            isl=isl,
            osl=osl,
            concurrency=_concurrency(concurrency),
            spec=spec,
            draft_model=draft_model,
            engine=engine,
            memory_fraction=memory_fraction,
            max_running=max_running,
            calibration=calibration,
            isl_sigma=isl_sigma,
            osl_sigma=osl_sigma,
            osl_cap=max_tokens,
            isl_cap=isl_cap,
            disable_radix_cache=disable_radix_cache,
            ssm_dtype=ssm_dtype,
            max_num_batched_tokens=max_num_batched_tokens,
            chunked_prefill_size=chunked_prefill_size,
        )
    )
    _emit(result, as_json, predict_table, _job_line(isl, osl, isl_sigma, osl_sigma, isl_cap, max_tokens))


def _job_line(
    isl: float, osl: float, isl_sigma: float, osl_sigma: float, isl_cap: float | None, max_tokens: float | None
) -> str:
    """The lengths the figures assume, as plan's "Job:" line words them (a new-user pass: a user
    who gave --isl 8192 did not see the σ and the cap applied)."""
    shown = (("ISL", isl, isl_sigma, isl_cap), ("OSL", osl, osl_sigma, max_tokens))
    return "Job: " + "; ".join(_length_text(n, m, sg, c) for n, m, sg, c in shown) + "."


def _length_text(name: str, mean: float, sigma: float, cap: float | None) -> str:
    """``ISL lognormal mean 1,024, σ 0.8, cap 16,384`` or ``ISL fixed 1,024`` (job.workload's wording)."""
    if sigma == 0:
        return f"{name} fixed {mean:,.0f}"
    return f"{name} lognormal mean {mean:,.0f}, σ {sigma:g}" + (f", cap {cap:,.0f}" if cap is not None else "")


@app.command("memory", once=ONCE)
@_MODEL
@_GPU
@_NUM_GPUS
@_TP
@_PP
@_EP
@_ATTENTION_DP
@_WEIGHT_DTYPE
@_KV_DTYPE
@_lengths
@click.option(
    "--spec",
    default="none",
    help="none or METHOD[:K[:TAU]] with METHOD mtp, eagle, eagle3 or dflash (draft layers and their memory; K 3 if left out)",
)
@DRAFT_MODEL
@_ENGINE
@_MEMORY_FRACTION
@click.option("--max-running", type=INTEGER, help="Running requests per replica (SGLang --max-running-requests)")
@_DISABLE_RADIX_CACHE
@_SSM_DTYPE
@_MAX_NUM_BATCHED_TOKENS
@_CHUNKED_PREFILL_SIZE
@click.option("--json", "as_json", is_flag=True, help="Print the breakdown as JSON")
def memory_cmd(
    model: str,
    gpu: str,
    num_gpus: int | None,
    tp: int,
    pp: int,
    ep: int,
    attention_dp: bool,
    weight_dtype: str,
    kv_dtype: str,
    isl: float,
    osl: float,
    isl_sigma: float,
    osl_sigma: float,
    isl_cap: float | None,
    max_tokens: float | None,
    spec: str,
    draft_model: str | None,
    engine: str,
    memory_fraction: float | None,
    max_running: int | None,
    disable_radix_cache: bool,
    ssm_dtype: str | None,
    max_num_batched_tokens: int | None,
    chunked_prefill_size: int | None,
    as_json: bool,
) -> None:
    """Per-GPU memory: weights, engine reserve, KV pool, state pool, KV capacity, and every term
    the engine allocates at the running limit (state, speculative state, draft KV, reserve). Lengths
    default to plan's job, as predict's."""
    from tokenplan.api.memory import memory
    from tokenplan.api.resolve import PredictRequest
    from tokenplan.report.memory_table import memory_table

    isl_cap, max_tokens = _default_caps(isl, osl, isl_cap, max_tokens, isl_sigma, osl_sigma)
    result = memory(
        PredictRequest(
            model=model,
            gpu=gpu,
            num_gpus=tp * pp if num_gpus is None else num_gpus,
            tp=tp,
            pp=pp,
            ep=ep,
            attention_dp=attention_dp,
            weight_dtype=weight_dtype,
            kv_dtype=kv_dtype,
            isl=isl,
            osl=osl,
            isl_sigma=isl_sigma,
            osl_sigma=osl_sigma,
            osl_cap=max_tokens,
            isl_cap=isl_cap,
            spec=spec,
            draft_model=draft_model,
            engine=engine,
            memory_fraction=memory_fraction,
            max_running=max_running,
            disable_radix_cache=disable_radix_cache,
            ssm_dtype=ssm_dtype,
            max_num_batched_tokens=max_num_batched_tokens,
            chunked_prefill_size=chunked_prefill_size,
        )
    )
    _emit(result, as_json, memory_table)


def _emit(result, as_json: bool, render, job: str | None = None) -> None:
    """Print the result (table or JSON; ``job``, the lengths assumed, under the table); a
    configuration that cannot run exits 2 with its reason."""
    from tokenplan.errors import InfeasibleError
    from tokenplan.job.results import Rejected
    from tokenplan.report.tables import efficiency_line, print_warnings

    if as_json:
        print(json.dumps(result.to_json(), indent=2))
    if isinstance(result, Rejected):
        raise InfeasibleError(f"configuration cannot run: {result.rejected}")
    if not as_json:
        console = wide_console()
        console.print(render(result))
        if job is not None:
            console.print(job)
        if (line := efficiency_line(result)) is not None:
            console.print(line)
        print_warnings(console, list(result.warnings))
