"""``tokenplan predict`` and ``tokenplan memory``: one configuration, for scripts."""

from __future__ import annotations

import json
from typing import Optional

import typer

from tokenplan.cli.app import app
from tokenplan.cli.app import console as wide_console
from tokenplan.job.workload import DEFAULT_ISL, DEFAULT_OSL


def _concurrency(text: str) -> float | None:
    """``--concurrency``: a whole number of requests in flight, or ``max`` (None: offline)."""
    from tokenplan.errors import InputError

    if text.strip().lower() == "max":
        return None
    try:
        return float(int(text))
    except ValueError:
        raise InputError("concurrency", text, "a whole number of requests ≥ 1, or max") from None


_MODEL = typer.Option(..., "--model", help="Catalog name or config.json path")
_GPU = typer.Option(..., "--gpu", help="GPU catalog key or alias, e.g. b200 or b200_sxm (tokenplan catalog gpus)")
_FRACTION = (
    "The engine's memory setting: SGLang --mem-fraction-static, vLLM --gpu-memory-utilization, "
    "TRT-LLM free_gpu_memory_fraction [default: the engine's rule]"
)
# Options predict and memory share (one definition each).
_NUM_GPUS = typer.Option(None, "--num-gpus", help="GPUs in all [default: tp × pp]")
_TP = typer.Option(1, "--tp", help="Tensor-parallel GPUs per replica (TP)")
_PP = typer.Option(1, "--pp", help="Pipeline stages per replica (PP)")
_EP = typer.Option(1, "--ep", help="Expert-parallel GPUs (EP, MoE)")
_ATTENTION_DP = typer.Option(False, "--attention-dp", help="Attention data-parallel across the TP ranks (MoE)")
_WEIGHT_DTYPE = typer.Option(
    "auto",
    "--weight-dtype",
    help="auto (the checkpoint's released format: bf16 for Qwen3.6-27B, mxfp4 for gpt-oss; plan instead searches bf16 and fp8 where native), bf16, fp16, fp8, int8, mxfp8, nvfp4, mxfp4, w4a16",
)
_KV_DTYPE = typer.Option("auto", "--kv-dtype", help="auto (the engine's default), bf16, fp16, fp8, nvfp4")
_ENGINE = typer.Option("sglang", "--engine", help="Serving engine: sglang, vllm or trtllm")
_MEMORY_FRACTION = typer.Option(None, "--memory-fraction", help=_FRACTION)
_DISABLE_RADIX_CACHE = typer.Option(
    False,
    "--disable-radix-cache",
    help="SGLang: one state slot per running request (hybrid models; what plan launches with when it raises the running cap)",
)
_SSM_DTYPE = typer.Option(
    None, "--ssm-dtype", help="Recurrent-state dtype: float32, bfloat16 or float16 [default: the config's]"
)
_BATCHED_TOKENS = typer.Option(
    None,
    "--max-num-batched-tokens",
    help="vLLM: tokens per step; sizes its profiling run's activation peak [default: vLLM's, 8192 on ≥70 GiB GPUs]",
)
_CHUNKED_PREFILL = typer.Option(
    None,
    "--chunked-prefill-size",
    help="SGLang: prefill chunk; sizes its activation reserve [default: SGLang's GPU-memory bucket]",
)


# predict's lengths: plan's job (job.workload.DEFAULT_ISL/DEFAULT_OSL)
_P_ISL = typer.Option(
    DEFAULT_ISL.mean,
    "--isl",
    help="Mean input tokens per request (ISL; lognormal with --isl-sigma, capped at --isl-cap; the mean of the capped lengths, as plan's) [default: plan's job: 1024]",
    show_default=False,
)
_P_OSL = typer.Option(
    DEFAULT_OSL.mean,
    "--osl",
    help="Mean output tokens per request (OSL; lognormal with --osl-sigma, capped at --max-tokens; the mean of the capped lengths, as plan's) [default: plan's job: 2500]",
    show_default=False,
)
_P_ISL_SIGMA = typer.Option(
    DEFAULT_ISL.sigma,
    "--isl-sigma",
    help="Lognormal σ of inputs (0 = every input is --isl) [default: plan's job: 0.8]",
    show_default=False,
)
_P_OSL_SIGMA = typer.Option(
    DEFAULT_OSL.sigma,
    "--osl-sigma",
    help="Lognormal σ of outputs (0 = every output is --osl) [default: plan's job: 1.0]",
    show_default=False,
)
_P_ISL_CAP = typer.Option(
    None, "--isl-cap", help="Longest input (tokens) [default: plan's job: 16384; none for an --isl at or above it]"
)
_P_MAX_TOKENS = typer.Option(
    None,
    "--max-tokens",
    help="Longest output: the requests' max_tokens [default: plan's job: 32768; none for an --osl at or above it]",
)


def _default_caps(isl: float, osl: float, isl_cap: float | None, max_tokens: float | None) -> tuple:
    """(input cap, output cap): each given, else plan's default below it; a mean at or above a
    default cap (a long-context point) runs uncapped (None)."""
    return (
        DEFAULT_ISL.cap if isl_cap is None and isl < DEFAULT_ISL.cap else isl_cap,
        DEFAULT_OSL.cap if max_tokens is None and osl < DEFAULT_OSL.cap else max_tokens,
    )


@app.command("predict")
def predict_cmd(
    model: str = _MODEL,
    gpu: str = _GPU,
    num_gpus: Optional[int] = _NUM_GPUS,
    tp: int = _TP,
    pp: int = _PP,
    ep: int = _EP,
    attention_dp: bool = _ATTENTION_DP,
    weight_dtype: str = _WEIGHT_DTYPE,
    kv_dtype: str = _KV_DTYPE,
    isl: float = _P_ISL,
    osl: float = _P_OSL,
    concurrency: str = typer.Option(
        "max",
        "--concurrency",
        help="Requests in flight over all replicas, or max (offline: as many as memory and the engine allow)",
    ),
    spec: str = typer.Option(
        "none",
        "--spec",
        help="none or METHOD[:K[:TAU]] with METHOD mtp, eagle, eagle3 or dflash, e.g. mtp:3:3.3 (K 3 if left out; TAU from the acceptance prior if left out, or a `tokenplan bench --save` or `vllm bench serve` result JSON's measured acceptance, e.g. mtp:3:bench.json)",
    ),
    engine: str = _ENGINE,
    memory_fraction: Optional[float] = _MEMORY_FRACTION,
    max_running: Optional[int] = typer.Option(
        None, "--max-running", help="Running-request cap per replica [default: the engine's]"
    ),
    calibration: Optional[str] = typer.Option(
        None, "--calibration", help="Calibration profile JSON from tokenplan calibrate [default: the shipped fit]"
    ),
    kv_offload_gib: float = typer.Option(0.0, "--kv-offload-gib", help="Host memory per GPU for KV offload (GiB)"),
    isl_sigma: float = _P_ISL_SIGMA,
    osl_sigma: float = _P_OSL_SIGMA,
    isl_cap: Optional[float] = _P_ISL_CAP,
    max_tokens: Optional[float] = _P_MAX_TOKENS,
    disable_radix_cache: bool = _DISABLE_RADIX_CACHE,
    ssm_dtype: Optional[str] = _SSM_DTYPE,
    max_num_batched_tokens: Optional[int] = _BATCHED_TOKENS,
    chunked_prefill_size: Optional[int] = _CHUNKED_PREFILL,
    as_json: bool = typer.Option(False, "--json", help="Print the prediction as JSON"),
) -> None:
    """Predict throughput, TPOT, TTFT (as a client measures it: queueing included), memory and
    the bottleneck of one configuration. Lengths default to plan's job, so a plan's choice predicts
    as the plan did; weights to the released format (auto)."""
    from tokenplan.api._common import PredictRequest
    from tokenplan.api.predict import predict
    from tokenplan.report.tables import predict_table

    isl_cap, max_tokens = _default_caps(isl, osl, isl_cap, max_tokens)
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
            engine=engine,
            memory_fraction=memory_fraction,
            max_running=max_running,
            calibration=calibration,
            kv_offload_gib=kv_offload_gib,
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
    _emit(result, as_json, predict_table)


@app.command("memory")
def memory_cmd(
    model: str = _MODEL,
    gpu: str = _GPU,
    num_gpus: Optional[int] = _NUM_GPUS,
    tp: int = _TP,
    pp: int = _PP,
    ep: int = _EP,
    attention_dp: bool = _ATTENTION_DP,
    weight_dtype: str = _WEIGHT_DTYPE,
    kv_dtype: str = _KV_DTYPE,
    isl: float = typer.Option(1024, "--isl", help="Input tokens per request (ISL)"),
    osl: float = typer.Option(1024, "--osl", help="Output tokens per request (OSL)"),
    spec: str = typer.Option(
        "none",
        "--spec",
        help="none or METHOD[:K[:TAU]] with METHOD mtp, eagle, eagle3 or dflash (draft layers and their memory; K 3 if left out)",
    ),
    engine: str = _ENGINE,
    memory_fraction: Optional[float] = _MEMORY_FRACTION,
    max_running: Optional[int] = typer.Option(
        None, "--max-running", help="Running requests per replica (SGLang --max-running-requests)"
    ),
    disable_radix_cache: bool = _DISABLE_RADIX_CACHE,
    ssm_dtype: Optional[str] = _SSM_DTYPE,
    max_num_batched_tokens: Optional[int] = _BATCHED_TOKENS,
    chunked_prefill_size: Optional[int] = _CHUNKED_PREFILL,
    as_json: bool = typer.Option(False, "--json", help="Print the breakdown as JSON"),
) -> None:
    """Per-GPU memory: weights, engine reserve, KV pool, state pool, KV capacity, and every term
    the engine allocates at the running limit (state, speculative state, draft KV, reserve)."""
    from tokenplan.api._common import PredictRequest
    from tokenplan.api.memory import memory
    from tokenplan.report.tables import memory_table

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
            spec=spec,
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


def _emit(result, as_json: bool, render) -> None:
    """Print the result (table or JSON); a configuration that cannot run exits 2 with its reason."""
    from tokenplan.api.results import Rejected
    from tokenplan.errors import InfeasibleError
    from tokenplan.report.tables import print_warnings

    if as_json:
        print(json.dumps(result.to_json(), indent=2))
    if isinstance(result, Rejected):
        raise InfeasibleError(f"configuration cannot run: {result.rejected}")
    if not as_json:
        console = wide_console()
        console.print(render(result))
        print_warnings(console, list(result.warnings))
