"""From a configuration to a deployment that fits, or the reason it cannot run at any
concurrency: the engine on the GPU, the job's context, the layout, the formats, the engine's
settings and memory (with its tighter launch where the default leaves no room), vLLM's
whole-context start-up check, MTP layers, and τ at the job's context. ``job.evaluate`` keeps what
this computes per configuration and adds the efficiency factors and the batch.
"""

from __future__ import annotations

import math
from dataclasses import replace

from tokenplan.arch.spec import ModelSpec
from tokenplan.engines.base import Engine, EngineSettings
from tokenplan.engines.mtp_support import mtp_pp_refusal, mtp_refusal
from tokenplan.engines.overlap import cpu_hidden_behind_draft_only, cpu_overlapped
from tokenplan.engines.sharding import dense_whole_under_attention_dp
from tokenplan.hardware import Gpu
from tokenplan.job.config import Config, Rejection
from tokenplan.job.workload import LengthDist
from tokenplan.perf.deployment import Deployment, build_deployment
from tokenplan.perf.layout import layout_rejection
from tokenplan.perf.memory import MemoryBreakdown, cuda_visible_bytes, memory_breakdown, profile_reserve_bytes
from tokenplan.records import quick_replace
from tokenplan.units import Dtype, GiB

# What ``job.evaluate.prepare`` computes before the efficiency factors and the offline sizing
# enter: (config with τ at the job's context, engine settings, memory, deployment, warnings so far).
Deployed = tuple[Config, EngineSettings, MemoryBreakdown, Deployment, tuple[str, ...]]


# A KV pool below this is within the planner's error of none: vLLM's own profile left −2.14 GiB
# for gpt-oss-120b on one H100 where the planner has 1.22 GiB (vllm#23278, tests/unit/perf/
# test_memory_engine_logs.py), 3.4 GiB apart. Such a deployment is not launched with a
# --max-model-len cut to the job: it may not start at all.
MIN_KV_FOR_MAX_MODEL_LEN_BYTES = 4 * GiB

# what a request past the context is told to change, where options set the lengths (plan, predict);
# a measured row's lengths are its own (calibration.validate takes it off)
CONTEXT_HINT = ": lower --isl or --osl"


def format_issues(
    model: ModelSpec, gpu: Gpu, weight: Dtype, kv: Dtype, engine: Engine | None = None
) -> tuple[str | None, list[str]]:
    """(rejection reason or None, warnings) for running these formats on this GPU (and engine).

    NVFP4 needs Blackwell tensor cores (sm_100/103/120) and no engine runs it on AMD; below
    Blackwell only an engine with a weight-only FP4 path runs it (``Engine.nvfp4_weight_only``:
    vLLM's Marlin; SGLang and TensorRT-LLM refuse it); an NVFP4 KV cache needs Blackwell.
    Other formats without native tensor-core support run weight-only, dequantized to BF16 in
    the GEMM (Marlin-style kernels in vLLM/SGLang: FP8 on A100, MXFP4 on Hopper), at the BF16
    compute rate. Each engine runs an NVFP4 KV cache on its own Blackwell parts only
    (``Engine.nvfp4_kv_architectures``: vLLM and TensorRT-LLM not on SM120). A checkpoint
    that states its own KV format (``ModelSpec.native_kv_dtype``), served as released, runs
    only that one: the launch commands leave ``--kv-cache-dtype`` to the checkpoint.
    """
    if weight is Dtype.NVFP4 and gpu.vendor == "amd":
        return f"NVFP4 weights: no engine runs NVFP4 on {gpu.architecture}", []
    if model.native_kv_dtype and weight.value == model.native_weight_dtype and kv.value != model.native_kv_dtype:
        # the engines' --kv-cache-dtype auto takes the checkpoint's own KV format
        # (engines.auto_kv), and the launch commands write no flag that overrides it
        return (
            f"{kv.value} KV cache: this checkpoint's quantization config sets an {model.native_kv_dtype} KV cache "
            f"(kv_cache_quant_algo), which the engines take; use --kv-dtype {model.native_kv_dtype}"
        ), []
    if (
        weight is Dtype.NVFP4
        and Dtype.NVFP4 not in gpu.native_dtypes
        and engine is not None
        and not engine.nvfp4_weight_only
    ):
        return (
            f"NVFP4 weights: {engine.display_name} runs NVFP4 only on Blackwell FP4 tensor cores; {gpu.key} is "
            f"{gpu.architecture} (vLLM runs it weight-only through Marlin; or use --weight-dtype fp8)"
        ), []
    if (
        weight is Dtype.W4A16
        and model.native_weight_dtype == "w4a16"
        and engine is not None
        and engine.name == "trtllm"
    ):
        # a released 4-bit checkpoint (AWQ, GPTQ, bitsandbytes, compressed-tensors W4A16:
        # arch.quant): TensorRT-LLM's PyTorch backend reads modelopt, fp8, mxfp4, mxfp8, nvfp4 and
        # 8-bit/FP4 compressed-tensors only (tensorrt_llm/_torch/model_config.py
        # ModelConfig.load_hf_quant_config; models/quant_config_utils.py), so it builds the model
        # unquantized and the weights fail to load
        return (
            "w4a16 checkpoint: TensorRT-LLM does not load AWQ, GPTQ, bitsandbytes or compressed-tensors "
            "W4A16 checkpoints (export it with ModelOpt as W4A16_AWQ, or use vLLM or SGLang)"
        ), []
    if kv is Dtype.NVFP4 and Dtype.NVFP4 not in gpu.native_dtypes:
        return f"NVFP4 KV cache needs Blackwell; {gpu.key} is {gpu.architecture}", []
    if kv is Dtype.NVFP4 and engine is not None and gpu.architecture not in engine.nvfp4_kv_architectures:
        return (
            f"NVFP4 KV cache: {engine.display_name} runs it only on {', '.join(engine.nvfp4_kv_architectures)}; "
            f"{gpu.key} is {gpu.architecture} (use --kv-dtype fp8)"
        ), []
    warnings = []
    if weight.compute_dtype not in gpu.native_dtypes:
        warnings.append(
            f"{weight.value} weights are not native on {gpu.architecture}: they run weight-only "
            f"(dequantized to BF16) at the BF16 compute rate"
        )
    if weight is Dtype.W4A16:
        warnings.append("w4a16 weights run 16-bit math (weight-only INT4)")
    return None, warnings


def mtp_engine_rejection(config: Config, model: ModelSpec) -> str | None:
    """Why the configuration's engine cannot run ``model``'s MTP layers as the draft
    (``engines.mtp_support.mtp_refusal``; vLLM's Qwen3.5/Qwen3-Next drafts at PP > 1, ``mtp_pp_refusal``),
    or None (not MTP, or nothing says it cannot)."""
    if config.spec is None or config.spec.method != "mtp":
        return None
    name = config.engine.name
    return mtp_refusal(name, model.architecture) or mtp_pp_refusal(name, model.architecture, config.layout.pp)


def spec_layout_rejection(config: Config) -> str | None:
    """Why the engine cannot start this speculative method on this layout, or None. SGLang refuses
    every speculative algorithm with pipeline parallelism on a server that is not a PD-disaggregated
    prefill node (``check_pipeline_parallel_compat`` in
    ``python/sglang/srt/arg_groups/validation_hook.py``: "PP + speculative decoding (MTP) is only
    supported on prefill nodes (disaggregation-mode=prefill)"; the older ``check_server_args``
    asserted ``speculative_algorithm is None`` for ``pp_size > 1``). Its DFLASH also refuses DP
    attention (``_handle_dflash`` in ``python/sglang/srt/arg_groups/speculative_hook.py``: it raises
    for ``pp_size != 1`` and for ``enable_dp_attention``)."""
    spec, lay = config.spec, config.layout
    if spec is None or config.engine.name != "sglang":
        return None
    if lay.pp > 1 and spec.method != "dflash":
        return (
            f"SGLang does not run speculative decoding ({spec.method}) with pipeline parallelism "
            "outside a PD-disaggregated prefill server; use TP or DP without PP, or vLLM"
        )
    if spec.method != "dflash":
        return None
    if lay.pp > 1:
        return f"SGLang's DFLASH does not run with pipeline parallelism (PP{lay.pp}); use TP or DP, or vLLM"
    if lay.attention_dp:
        return "SGLang's DFLASH does not run with DP attention; use TP or DP replicas, or vLLM"
    return None


def deploy(model: ModelSpec, gpu: Gpu, config: Config, isl: LengthDist, osl: LengthDist) -> Deployed | Rejection:
    """What ``job.evaluate.prepare`` computes before the efficiency factors and the offline sizing
    enter (see :data:`Deployed`), or the Rejection of a configuration that runs at no concurrency
    (the engine does not run on the GPU, the request exceeds the context, the layout does not
    divide, the formats do not run, the weights or the engine's whole-context KV do not fit, MTP
    without MTP layers). Raises nothing."""
    lay = config.layout
    if gpu.vendor not in config.engine.vendors:
        return Rejection(
            config,
            f"{config.engine.display_name} does not run on {gpu.vendor.upper()} GPUs "
            f"({gpu.key}); it runs on {', '.join(v.upper() for v in config.engine.vendors)}",
            "engine",
        )
    ctx = model.max_context_tokens
    # a relative 1e-9 spares a request that exactly fills the context: σ = 0 lengths' means
    # carry ~1e-7 tokens of float rounding (1,024 + 1,024 read 2,048.000001 > 2,048, a break-it pass)
    if ctx is not None and isl.mean + osl.mean > ctx * (1 + 1e-9):
        return Rejection(
            config,
            f"a request of {isl.mean + osl.mean:,.0f} tokens (mean prompt {isl.mean:,.0f} + mean output "
            f"{osl.mean:,.0f}) exceeds {model.name}'s context of {ctx:,} tokens (max_position_embeddings, "
            f"times a rope_scaling factor where set){CONTEXT_HINT}",
            "context",
        )
    why = layout_rejection(model, lay)
    if why:
        return Rejection(config, why, "layout")
    why, warnings = format_issues(model, gpu, config.weight_dtype, config.kv_dtype, config.engine)
    if why:
        return Rejection(config, why, "format")
    why = mtp_engine_rejection(config, model)  # every layout (or every PP split) alike: said before memory
    if why:
        return Rejection(config, why, "spec")
    why = spec_layout_rejection(config)  # after the formats: a format no engine runs is said first
    if why:  # DFLASH's reasons name the split; SGLang's PP refusal holds for every PP split, said once
        return Rejection(
            config, why, "layout" if config.spec is not None and config.spec.method == "dflash" else "spec"
        )
    engine = config.engine
    settings = _settings(gpu, config)
    ratio = engine.state_to_kv_ratio(model.is_hybrid, config.max_running)
    mem = engine_memory(model, gpu, config, settings, ratio)
    tight = None  # asked for only where the default does not fit
    if not mem.fits and config.memory_fraction is None and config.chunk_tokens is None:  # the user's stand
        tight = engine.tight_settings(settings, config.vision_cut)
    if tight is not None:
        # A checkpoint the default reserve leaves no room for: launch as InferenceX does (S19).
        tight_mem = engine_memory(model, gpu, config, tight, ratio)
        if tight_mem.fits:
            settings, mem = tight, tight_mem
            warnings.append(
                f"the default memory fraction leaves no room for the weights and the cache: the launch raises it "
                f"to {tight.memory_fraction:.3f} with a {tight.chunk_tokens:,}-token prefill chunk and "
                f"CUDA graphs up to batch {tight.graph_max_bs}"
            )
    if not mem.fits:
        weights, spec_state = mem.weight_bytes_per_gpu, mem.spec_state_pool_bytes
        reserve = settings.reserve_bytes + profile_reserve_bytes(model, lay, settings)
        visible = cuda_visible_bytes(gpu.memory_bytes)
        # the weights the engine could hold, where its cache would be 0: TensorRT-LLM takes its fraction
        # of what weights and reserve leave (so up to gpu − reserve); SGLang and vLLM their fraction's share
        usable = (
            visible - reserve
            if settings.fraction_of_free
            else weights + settings.usable_bytes(visible, weights, reserve)
        )
        extra = f" + {spec_state / GiB:.1f} GiB of speculative state" if spec_state > 0 else ""
        advice = fit_advice(config, spec_state)
        if config.chunk_tokens is not None and usable < weights:  # the user's chunk: its reserve alone
            held = cuda_visible_bytes(gpu.memory_bytes) - usable  # what the engine keeps outside weights and pools
            advice = (
                f"the engine keeps {held / GiB:,.1f} GiB for the activations of the {config.chunk_tokens:,}-token "
                "prefill chunk set (--chunked-prefill-size / --max-num-batched-tokens): set a smaller one, or leave it "
                "to the engine"
            )
        return Rejection(
            config,
            f"does not fit ({advice}): "
            f"{weights / GiB:.1f} GiB of weights{extra} per GPU "
            f"vs {max(usable, 0.0) / GiB:.1f} GiB usable on {gpu.key}",
            "memory",
            weights,
            usable,
            spec_state,
        )
    launched, warning, refusal = startup_context(engine, model, mem, isl, osl, config.max_model_len)
    if refusal is not None:
        return Rejection(config, refusal, "kv")
    if warning is not None:  # the launch writes --max-model-len for the job's longest request
        config = quick_replace(config, max_model_len=launched)
        warnings.append(warning)
    if config.spec is not None and config.spec.method == "mtp" and model.mtp_layers == 0:
        return Rejection(config, f"MTP needs MTP layers; {model.name} ships none", "spec")
    if config.spec is not None and config.spec.from_prior:
        # τ of the prior at the decoding sequences' mean context (perf.speculative): a long
        # answer is not planned at a short-context acceptance.
        config = quick_replace(config, spec=config.spec.at_context(isl.mean + osl.running_mean / 2))
    speculative = config.spec is not None
    overlap = cpu_overlapped(engine.name, config.engine_version, speculative, lay.pp)
    draft_only = cpu_hidden_behind_draft_only(engine.name, config.engine_version, speculative)
    dense_whole = dense_whole_under_attention_dp(engine.name)
    dep = build_deployment(model, gpu, lay, config.weight_dtype, config.kv_dtype, mem, overlap, draft_only, dense_whole)
    return config, settings, mem, dep, tuple(warnings)


# The engine settings resolved lately, by the identity of the engine, GPU and layout and the value
# of the rest: the configurations of a search that differ only in their formats share them. Each
# entry holds its engine, GPU and layout, so no id in a key is reused while it lives.
_SETTINGS: dict[tuple[object, ...], tuple[object, object, object, EngineSettings]] = {}


def _settings(gpu: Gpu, config: Config) -> EngineSettings:
    """``config.engine.settings`` for ``config`` on ``gpu``, from :data:`_SETTINGS` where it is."""
    engine, lay, speculative = config.engine, config.layout, config.spec is not None and not config.max_running.lifted
    key: tuple[object, ...] = (id(engine), id(gpu), id(lay), speculative, config.vision_cut, config.memory_fraction)
    key += (config.max_running.requests, config.chunk_tokens, config.scheduler_recv_interval)
    hit = _SETTINGS.get(key)
    if hit is None:
        got = engine.settings(
            gpu,
            lay,
            speculative=speculative,
            vision_cut=config.vision_cut,
            memory_fraction=config.memory_fraction,
            max_running=config.max_running.requests,
            chunk_tokens=config.chunk_tokens,
        )
        if config.scheduler_recv_interval is not None:  # SGLang's --scheduler-recv-interval (api.resolve)
            got = replace(got, recv_interval=config.scheduler_recv_interval)
        if len(_SETTINGS) >= 1024:
            _SETTINGS.clear()
        hit = _SETTINGS[key] = (engine, gpu, lay, got)
    return hit[3]


def engine_memory(
    model: ModelSpec, gpu: Gpu, config: Config, settings: EngineSettings, ratio: float | None
) -> MemoryBreakdown:
    """The per-GPU memory of ``config`` under ``settings`` with the engine's hybrid-state and
    speculative-decoding terms (``perf.memory.memory_breakdown``)."""
    copies = config.engine.spec_state_copies(config.spec.draft_tokens if config.spec else None)
    return memory_breakdown(
        model,
        gpu,
        config.layout,
        config.weight_dtype,
        config.kv_dtype,
        settings,
        ratio,
        ssm_dtype=config.ssm_dtype,
        spec_state_copies=copies,
        max_running=float(settings.max_running or 0),
        padded_state_slot=config.engine.pools.padded_state_slot,
        draft_kv_pool=config.engine.pools.draft_kv_pool,
        verify_state_commit=config.engine.pools.verify_state_commit,
        swa_full_tokens_ratio=config.engine.pools.swa_full_tokens_ratio,
        expert_padding=config.engine.expert_padding(gpu, config.weight_dtype),
        dense_whole=dense_whole_under_attention_dp(config.engine.name),
        draft=config.spec,
    )


def fit_advice(config: Config, spec_state_bytes: float) -> str:
    """What to try when a configuration's weights (and the speculative state the engine sizes for
    its running cap) do not fit: a lower ``--max-running`` where the user fixed a cap and the
    speculative state grows with it, else more GPUs per replica or a smaller weight format."""
    cap = config.max_running.requests
    if cap is not None and spec_state_bytes > 0:
        return f"the speculative state is sized for the running cap of {cap:,}: try a lower --max-running"
    return "try more GPUs per replica or a smaller weight format"


def startup_context(
    engine: Engine,
    model: ModelSpec,
    mem: MemoryBreakdown,
    isl: LengthDist,
    osl: LengthDist,
    max_model_len: int | None,
) -> tuple[int | None, str | None, str | None]:
    """vLLM's start-up check (V18): one request of ``max_model_len`` tokens (default: the
    model's whole context) must fit the KV cache of each engine core; every attention-DP rank is
    one and checks its own share (``vllm/v1/core/kv_cache_utils.py``
    ``check_enough_kv_cache_memory``), not the replica's sum.

    Where the whole context does not fit but the job's longest request does (a prompt up to its
    cap with the output cap as ``max_tokens``: ``generate --plan`` sends it, and vLLM refuses
    prompt + ``max_tokens`` past ``max_model_len``) in a pool of at least
    :data:`MIN_KV_FOR_MAX_MODEL_LEN_BYTES`, the launch writes ``--max-model-len`` for it.

    Args:
        engine: the engine (only one whose ``context_must_fit`` checks). model: the model.
        mem: the engine's memory at the launch's fraction and cap. isl, osl: the job's lengths
            (tokens). max_model_len: the launch's, or None (the engine's default).

    Returns:
        (the ``max_model_len`` the launch writes, or None: unchanged; the warning that says so;
        why the engine does not start, or None). Raises nothing.
    """
    ctx = model.max_context_tokens
    served = max_model_len if max_model_len is not None else ctx
    if served is None or not engine.context_must_fit():
        return None, None, None

    def one_fits(tokens: float) -> bool:  # one request of ``tokens`` in one rank's KV cache
        return mem.max_sequences(tokens) / mem.sequence_shards >= 1

    # the longest request the job sends (tokens; inf without caps), not the grid's top quantile
    longest = (isl.cap_tokens if isl.cap_tokens is not None else isl.max) + (
        osl.cap_tokens if osl.cap_tokens is not None else osl.max
    )
    if (
        max_model_len is None
        and not one_fits(served)
        and longest < served
        and mem.kv_pool_bytes >= MIN_KV_FOR_MAX_MODEL_LEN_BYTES
        and one_fits(longest)
    ):
        launched = math.ceil(longest)
        return (
            launched,
            f"{engine.display_name}'s default max_model_len, {model.name}'s whole {served:,}-token context, does "
            f"not fit one rank's KV cache: the launch sets --max-model-len {launched:,} (the job's longest "
            "request); a longer request is refused",
            None,
        )
    if one_fits(served):
        return None, None, None
    whole = (
        f"{model.name}'s whole {served:,}-token context (its default max_model_len)"
        if max_model_len is None
        else f"max_model_len {served:,}"
    )
    return (
        None,
        None,
        f"{engine.display_name} does not start: its {mem.kv_pool_bytes / GiB:.2f} GiB KV cache per "
        f"GPU holds {mem.kv_capacity_tokens / mem.sequence_shards:,.0f} tokens, less than one request of {whole}",
    )
