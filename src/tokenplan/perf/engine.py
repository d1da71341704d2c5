"""What an inference engine adds to the physics: its memory reserve and fraction, its default
cap on running requests, its prefill chunk, whether prefill mixes with decode, and how it splits
memory between KV cache and hybrid-model state.

The figures come from ``catalog/engines.yaml`` (sourced there) as an :class:`EngineFacts`;
the functions here apply them to one deployment.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from tokenplan.units import GiB, MiB


@dataclass(frozen=True, slots=True)
class SglangBucket:
    """One SGLang GPU-memory bucket: chunk size and decode CUDA-graph max batch (S1)."""

    below_gib: float
    chunk_tokens: int
    graph_bs_small_tp: int
    graph_bs_large_tp: int


@dataclass(frozen=True, slots=True)
class EngineFacts:
    """An engine's defaults (values from ``catalog/engines.yaml``; see its sources)."""

    name: str
    display_name: str
    memory_mode: str
    mixed_prefill: bool
    vendors: tuple[str, ...] = ("nvidia", "amd")
    memory_fraction: float = 0.9
    reserve_fixed_gib: float = 0.0
    reserve_base_mib: float = 0.0
    reserve_per_activation_token_mib: float = 0.0
    reserve_per_8_gpus_mib: float = 0.0
    reserve_graph_mib_per_bs: float = 0.0
    reserve_floor_gib_above_60gib: float = 0.0
    buckets: tuple[SglangBucket, ...] = ()
    max_running_per_context_factor: float = 0.0
    max_running_min: int = 0
    max_running_max: int = 0
    spec_max_running_default: int | None = None
    max_running_default_large_gpu: int = 0
    max_running_default_small_gpu: int = 0
    large_gpu_min_gib: float = 0.0
    chunk_tokens_large_gpu: int = 8192
    chunk_tokens_small_gpu: int = 8192
    graph_max_bs: int = 0
    state_to_kv_memory_ratio: float | None = None
    slots_per_request: int = 1
    slots_per_request_spec: int = 1
    vlm_memory_cut: bool = False
    offline_bench_tuning: bool = False
    reserves_whole_request: bool = False
    profile_activation: bool = False
    sampler_bytes_per_logit: float = 0.0
    graph_estimate_mib_per_size: float = 0.0
    spec_state_copies: str = "none"
    padded_state_slot: bool = False
    draft_kv_pool: bool = False
    tight_memory_fraction: float | None = None
    tight_chunk_tokens: int = 0
    tight_graph_max_bs: int = 0


@dataclass(frozen=True, slots=True)
class EngineSettings:
    """The settings an engine resolves to for one deployment (what a launch command would set).

    Attributes:
        memory_fraction: SGLang ``--mem-fraction-static`` and vLLM ``--gpu-memory-utilization``:
            share of total GPU memory for weights + cache; TRT-LLM
            ``free_gpu_memory_fraction``: share of the memory left after weights and reserve.
        reserve_bytes: memory held back besides the fraction's headroom (activations, CUDA
            graphs, communication buffers); 0 for SGLang, whose fraction already excludes it.
        fraction_of_free: True for TRT-LLM's fraction-of-free-memory rule.
        chunk_tokens: prefill chunk / token budget per step.
        graph_max_bs: largest decode batch captured in a CUDA graph.
        max_running_cap: the engine's cap on running requests (None = derived from KV later).
        profile_tokens, profile_seqs: tokens of the profiling forward and rows of its sampler
            pass whose activation peak the engine holds back (vLLM: ``max_num_batched_tokens``
            and ``max_num_seqs``; 0 = none); the model-dependent bytes are
            ``perf.memory.profile_reserve_bytes``.
        sampler_bytes_per_logit: bytes one vocabulary entry of one row holds in the sampler pass.
        graph_estimate_bytes: the engine's CUDA-graph memory estimate (bytes; 0 = none).
        tight: the launch raises the memory fraction and shrinks the prefill chunk and the
            CUDA-graph batch so that a checkpoint the default reserve leaves no room for fits
            (:func:`tight_settings`); the launch command then sets all three.
    """

    memory_fraction: float
    reserve_bytes: float
    fraction_of_free: bool
    chunk_tokens: int
    graph_max_bs: int
    max_running_cap: int | None
    profile_tokens: int = 0
    profile_seqs: int = 0
    sampler_bytes_per_logit: float = 0.0
    graph_estimate_bytes: float = 0.0
    tight: bool = False


def tight_settings(facts: EngineFacts, settings: EngineSettings, vision_cut: float = 1.0) -> EngineSettings | None:
    """The settings a launch uses when the engine's default reserve leaves no room for a very
    large checkpoint: the engine's ``tight_memory_fraction`` with its ``tight_chunk_tokens``
    prefill chunk and ``tight_graph_max_bs`` CUDA-graph batch (SGLang: InferenceX runs
    DeepSeek-R1 FP8 at TP4 on B200 with ``--mem-fraction-static 0.95 --chunked-prefill-size 8192
    --cuda-graph-max-bs 32``, engine-facts S19), or None where the engine has no such rule or
    the default is already at least as large.

    Args:
        facts: the engine. settings: its default resolution for the deployment.
        vision_cut: SGLang's multiplier for multimodal checkpoints (applied as to the default).

    Returns:
        EngineSettings with ``tight=True``, or None. Raises nothing.
    """
    if facts.tight_memory_fraction is None:
        return None
    fraction = facts.tight_memory_fraction * vision_cut
    if fraction <= settings.memory_fraction:
        return None
    return replace(settings, memory_fraction=fraction, chunk_tokens=min(settings.chunk_tokens, facts.tight_chunk_tokens),
                   graph_max_bs=min(settings.graph_max_bs, facts.tight_graph_max_bs), tight=True)


# How many extra copies of a hybrid model's recurrent state each running request holds under
# speculative decoding, by the rule its engine follows (``catalog/engines.yaml``
# ``hybrid_state.spec_state_copies``):
# - ``verify_tokens``: SGLang's MambaPool allocates an intermediate SSM-state cache and an
#   intermediate conv-window cache of shape (GDN layers, max_running_requests + 1,
#   speculative_num_draft_tokens, state shape) in the state dtypes, i.e. one whole state per
#   verified token = k + 1 copies (sglang ``mem_cache/memory_pool.py`` ``MambaPool.__init__``;
#   reserved before the state/KV split by ``handle_max_mamba_cache``: ``mamba_cache_per_req ×
#   max_running_requests × speculative_num_draft_tokens``, engine-facts S3, S18);
# - ``draft_tokens``: vLLM's ``MambaSpec`` adds ``num_speculative_blocks`` = k state blocks per
#   request (``max_memory_usage_bytes = page × (1 + num_speculative_blocks)``, vllm
#   ``vllm/v1/kv_cache_interface.py``, engine-facts V16);
# - ``none``: no extra state (TensorRT-LLM: not verified).
_SPEC_STATE_COPIES = {"verify_tokens": 1, "draft_tokens": 0}


def speculative_state_copies(facts: EngineFacts, draft_tokens: int | None) -> int:
    """Extra recurrent-state copies one running request holds under speculative decoding.

    Args:
        facts: the engine (its ``spec_state_copies`` rule, see above).
        draft_tokens: k, tokens drafted per step; None or 0 = speculative decoding off.

    Returns:
        Copies of the per-sequence state (0 without speculation): k + 1 for SGLang, k for vLLM.
        Raises nothing; an unknown rule counts as ``none``.
    """
    if not draft_tokens or facts.spec_state_copies not in _SPEC_STATE_COPIES:
        return 0
    return draft_tokens + _SPEC_STATE_COPIES[facts.spec_state_copies]


def _bucket(facts: EngineFacts, gpu_memory_bytes: float) -> SglangBucket:
    gib = gpu_memory_bytes / GiB
    return next(b for b in facts.buckets if gib < b.below_gib)


def resolve_settings(
    facts: EngineFacts,
    gpu_memory_bytes: float,
    gpus_per_replica: int,
    tp: int,
    speculative: bool,
    vision_cut: float = 1.0,
    architecture: str = "",
    memory_fraction: float | None = None,
    max_running: int | None = None,
) -> EngineSettings:
    """Apply an engine's defaults to one deployment.

    Args:
        facts: the engine's documented behaviour (``catalog/engines.yaml``).
        gpu_memory_bytes: memory of one GPU (bytes).
        gpus_per_replica: TP × PP (GPUs).
        tp: tensor-parallel size (GPUs); SGLang picks its CUDA-graph batch by it.
        speculative: True when speculative decoding runs (SGLang then caps running requests).
        vision_cut: SGLang's memory-fraction multiplier for multimodal checkpoints (1 = none).
        architecture: the GPU architecture (``"ampere"``, ``"hopper"``, …); vLLM keeps its
            small-GPU defaults on A100.
        memory_fraction: user override of the memory fraction (share of GPU memory, or of free
            memory for TRT-LLM); None = the engine's default.
        max_running: user override of the running-request cap (requests); None = the default.

    Returns:
        EngineSettings: memory fraction, reserve (bytes), chunk (tokens), CUDA-graph batch
        (sequences), running cap (requests, None = derived from the KV pool later), and for
        engines that profile a forward pass its token and sequence counts.

    Raises:
        StopIteration: a static-fraction engine has no memory bucket covering
            ``gpu_memory_bytes``; the shipped SGLang buckets end at 100,000 GiB, so no catalog
            GPU reaches it.
    """
    if facts.memory_mode == "static_fraction":
        bucket = _bucket(facts, gpu_memory_bytes)
        graph_bs = bucket.graph_bs_small_tp if tp < 4 else bucket.graph_bs_large_tp
        reserve_mib = (facts.reserve_base_mib
                       + facts.reserve_per_activation_token_mib * max(bucket.chunk_tokens, 2048)
                       + facts.reserve_per_8_gpus_mib * gpus_per_replica / 8
                       + facts.reserve_graph_mib_per_bs * graph_bs)
        reserve = reserve_mib * MiB
        if gpu_memory_bytes > 60 * GiB:
            reserve = max(reserve, facts.reserve_floor_gib_above_60gib * GiB)
        fraction = memory_fraction or (gpu_memory_bytes - reserve) / gpu_memory_bytes * vision_cut
        cap = max_running or (facts.spec_max_running_default if speculative else None)
        return EngineSettings(fraction, 0.0, False, bucket.chunk_tokens, graph_bs, cap)
    # vLLM's larger defaults apply to ≥ 70 GiB devices other than A100 (V2).
    large = gpu_memory_bytes >= facts.large_gpu_min_gib * GiB and architecture != "ampere"
    chunk = facts.chunk_tokens_large_gpu if large else facts.chunk_tokens_small_gpu
    cap = max_running or (facts.max_running_default_large_gpu if large else facts.max_running_default_small_gpu)
    if not facts.profile_activation:
        return EngineSettings(memory_fraction or facts.memory_fraction, facts.reserve_fixed_gib * GiB,
                              facts.memory_mode == "free_fraction", chunk, facts.graph_max_bs, cap)
    # vLLM: max_num_seqs is capped by max_num_batched_tokens (V2); CUDA graphs are captured up to
    # min(2 × max_num_seqs, graph_max_bs, max_num_batched_tokens) (V5, V13).
    seqs = min(cap, chunk)
    graph_bs = min(2 * seqs, facts.graph_max_bs, chunk)
    graphs = len(vllm_graph_capture_sizes(graph_bs)) * facts.graph_estimate_mib_per_size * MiB
    return EngineSettings(memory_fraction or facts.memory_fraction, facts.reserve_fixed_gib * GiB,
                          facts.memory_mode == "free_fraction", chunk, graph_bs, cap, profile_tokens=chunk,
                          profile_seqs=seqs, sampler_bytes_per_logit=facts.sampler_bytes_per_logit,
                          graph_estimate_bytes=graphs)


def vllm_graph_capture_sizes(max_size: int) -> list[int]:
    """vLLM's default CUDA-graph batch sizes up to ``max_size``:
    ``[1, 2, 4] + range(8, 256, 8) + range(256, max + 1, 16)`` (V5); 51 sizes at 512."""
    sizes = [1, 2, 4] + list(range(8, 256, 8)) + list(range(256, max_size + 1, 16))
    return [s for s in sizes if s <= max_size]


def sglang_default_running_cap(facts: EngineFacts, kv_tokens: float, context_len: float) -> int:
    """SGLang's ``max_running_requests`` when unset: clamp(KV_tokens / context_len × 512, 2048, 4096) (S3)."""
    raw = kv_tokens / max(context_len, 1.0) * facts.max_running_per_context_factor
    return int(min(max(raw, facts.max_running_min), facts.max_running_max))


def sglang_vision_cut(facts: EngineFacts, vision_layers: int, vision_hidden: int) -> float:
    """SGLang's memory-fraction multiplier for a multimodal checkpoint (S1):
    ``0.95 × clamp(1 − 0.1·(layers·hidden² / (24·1024²) − 1), 0.8, 1.05)``; 1 for text-only
    models or engines without the rule. Qwen3.6-27B (27 × 1152): 0.95 × 0.9576 = 0.910.
    """
    if not facts.vlm_memory_cut or vision_layers == 0:
        return 1.0
    size = vision_layers * vision_hidden**2 / (24 * 1024**2)
    return 0.95 * min(max(1 - 0.1 * (size - 1), 0.8), 1.05)


def trtllm_bench_limits(gpu_memory_bytes: float, weight_bytes_total: float, kv_bytes_per_token: float,
                        state_bytes_per_sequence: float, isl_tokens: float, osl_tokens: float, ranks: int,
                        pp: int, tuned: bool) -> tuple[int, int]:
    """``(max_batch_size, max_num_tokens)`` that ``trtllm-bench throughput`` picks for itself
    (TRT-LLM ``bench/tuning/heuristics.py`` ``calc_engine_setting`` / ``finetune_setting``, T5).

    ``cache = (ranks × device memory − weights) × 0.95`` (squared for hybrid models) holds
    ``cache / (kv_bytes_per_token × (ISL + OSL) + state)`` requests; ``raw_bs = min(that, 4096) / PP``
    and ``raw_tokens = min(raw_bs × (1 + ISL/OSL), 32768)``, rounded up optimistically (batch: 32s
    with a floor of 64 below 256, 128s below 1,024, 256s above; tokens: at least 2,048, 256s below
    4,096, 512s below 8,192, 1,024s above). Hybrids round the batch down to even. Quantization
    modes the heuristic does not know (MXFP4, INT4) keep the LLM-API defaults 2,048 / 8,192.

    Args:
        weight_bytes_total: checkpoint bytes over the ``ranks`` GPUs.
        kv_bytes_per_token: the heuristic's KV bytes per token over the ranks (every attention
            layer, KV heads padded up to TP; MLA latent once).
        ranks: GPUs whose memory the heuristic pools (TP × PP; PP alone with attention DP, where
            it sizes one rank).
        tuned: the weight format is one the heuristic knows (BF16, FP8, NVFP4).
    """
    if not tuned:
        return 2048, 8192
    fraction = 0.95 * (0.95 if state_bytes_per_sequence > 0 else 1.0)
    cache = (ranks * gpu_memory_bytes - weight_bytes_total) * fraction
    per_request = kv_bytes_per_token * (isl_tokens + osl_tokens) + state_bytes_per_sequence
    requests = max(cache / per_request, 1.0) if per_request > 0 else 4096.0
    raw_bs = min(requests, 4096) / pp
    raw_tokens = min(raw_bs * (1 + isl_tokens / osl_tokens), 32768)
    if state_bytes_per_sequence > 0:
        bs = max(2 * math.floor(raw_bs / 2), 1)
    elif raw_bs < 256:
        bs = max(64, 32 * math.ceil(raw_bs / 32))
    elif raw_bs < 1024:
        bs = 128 * math.ceil(raw_bs / 128)
    else:
        bs = 256 * math.ceil(raw_bs / 256)
    if raw_tokens < 4096:
        tokens = max(2048, 256 * math.ceil(raw_tokens / 256))
    elif raw_tokens < 8192:
        tokens = 512 * math.ceil(raw_tokens / 512)
    else:
        tokens = 1024 * math.ceil(raw_tokens / 1024)
    return bs, tokens
