"""Memory per GPU: weights, engine reserve, KV cache and per-sequence state → KV token capacity
→ the most sequences that fit at a given context length.

Weights shard by TP (vocabulary-parallel embedding and lm_head, column/row-parallel linears),
routed experts across all GPUs of the replica (EP or TP inside the experts), and layers by PP;
a multimodal checkpoint's vision tower loads on every rank, its matrices sharded by TP. The MoE
routers are held whole on every rank in 16 bits, and the RoPE cos/sin table loads with the model
(:func:`rope_table_bytes`): both count in the weights the engines log.
KV heads replicate when TP exceeds them; MLA's latent is replicated on every TP rank unless
attention runs data-parallel. Gated DeltaNet / Mamba-2 state shards by TP over its heads.

Engines size their pools against the memory the CUDA runtime reports (``cudaMemGetInfo`` total,
:func:`cuda_visible_bytes`), not the catalog's nominal capacity.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

from tokenplan.arch.draft import draft_fc_params, draft_kv_layers, draft_params
from tokenplan.arch.kv import kv_bytes_per_token_per_layer, state_bytes_per_sequence
from tokenplan.arch.params import ParamCounts, attention_params_per_layer, component_bytes, param_counts
from tokenplan.arch.spec import AttentionKind, ModelSpec
from tokenplan.engines.base import EngineSettings
from tokenplan.hardware import Gpu
from tokenplan.perf.layout import Layout, kv_heads_per_gpu
from tokenplan.perf.pools import MemoryBreakdown as MemoryBreakdown  # re-export: its home before the split
from tokenplan.perf.speculative import SpecDecode
from tokenplan.units import ACTIVATION_BYTES, Dtype

# The share of a GPU's nominal memory (nvidia-smi's total) that the CUDA runtime reports as its total
# (torch.cuda.mem_get_info), the rest being held by the driver. H100 80 GB: vLLM logs "Free memory on
# device (77.78/79.33 GiB)" (vllm-project/vllm#50722) against 81,559 MiB = 79.65 GiB nominal: 0.99598;
# B200: "Total VRAM: 178.35 GB" (torch total_memory / 2^30, unslothai/unsloth#3411) against
# 183,359 MiB = 179.06 GiB: 0.99603.
CUDA_VISIBLE_SHARE = 0.996


def cuda_visible_bytes(nominal_bytes: float) -> float:
    """Device memory the CUDA runtime reports for a GPU of ``nominal_bytes`` (bytes → bytes):
    ``nominal × CUDA_VISIBLE_SHARE`` (H100 80 GB: 79.65 GiB → 79.33 GiB). Raises nothing."""
    return nominal_bytes * CUDA_VISIBLE_SHARE


def _whole(count: float) -> int:
    """``count`` floored to a whole number; a count within 1e-6 under an integer is taken as it (the
    floating-point sum of the memory terms can land a hair under an exact quotient)."""
    return math.floor(count + 1e-6)


def _round_up(x: float, multiple: int) -> float:
    return -(-x // multiple) * multiple if multiple > 1 else x


@lru_cache(maxsize=4096)
def weight_bytes_per_gpu(
    spec: ModelSpec,
    layout: Layout,
    weight_dtype: Dtype,
    with_mtp: bool = False,
    expert_padding: tuple[int, int] = (1, 1),
    dense_whole: bool = False,
) -> float:
    """Weight bytes one GPU holds (see the module docstring for the sharding rules); cached per
    (model, layout, dtype), which a plan sweep evaluates many times.

    ``expert_padding``: (hidden, per-partition intermediate) multiples the engine pads routed
    experts to (``Engine.expert_padding``; vLLM's Marlin MXFP4 path: (256, 128)); the routed
    expert bytes scale by the padded over the true ``hidden × intermediate`` area.
    ``dense_whole``: with attention DP the engine runs each rank at TP 1, so every weight but the
    routed experts is whole on each GPU (vLLM: ``engines.sharding.dense_whole_under_attention_dp``);
    otherwise the dense FFN, shared experts, embedding and lm_head shard by TP (SGLang's
    ``moe_dense_tp_size`` default, vocabulary-parallel embedding).
    """
    p = param_counts(spec)

    def nbytes(component: str, count: float) -> float:
        return count * component_bytes(spec, weight_dtype, component)

    pp = layout.pp
    tp = 1 if dense_whole and layout.attention_dp else layout.tp
    attn_layers = spec.full_attention_layers + spec.sliding_layers
    # With PP the embedding sits on the first stage and lm_head on the last (vLLM/SGLang
    # PPMissingLayer): the heaviest stage holds one of them.
    embed, head = nbytes("embedding", p.embedding), nbytes("lm_head", p.lm_head)
    total = (embed + head if pp == 1 else max(embed, head)) / tp
    total += nbytes("attention", attention_params_per_gpu(spec, layout) * attn_layers) / pp
    total += (
        (
            nbytes("linear_attention", p.linear_attention)
            + nbytes("dense_ffn", p.dense_ffn)
            + nbytes("shared_experts", p.shared_experts - p.router)
        )
        / tp
        / pp
    )
    # The routers: ReplicatedLinear with quant_config=None in vLLM and SGLang (e.g. vLLM
    # models/qwen3_next.py Qwen3NextSparseMoeBlock: self.gate = ReplicatedLinear(hidden_size,
    # num_experts, bias=False)): every TP rank holds them whole, in 16 bits in any checkpoint.
    total += p.router * Dtype.BF16.bytes_per_element / pp
    total += rope_table_bytes(spec)
    total += (
        nbytes("routed_experts", p.routed_experts)
        / layout.gpus_per_replica
        * _expert_pad_factor(spec, layout, expert_padding)
    )
    if with_mtp:
        total += _mtp_bytes(p, weight_dtype) / tp
    # The vision tower loads with the model (vLLM, SGLang), BF16 whatever the weight format (the
    # quantized Qwen3.5/3.6 releases leave it unconverted), its matrices sharded by TP.
    total += (spec.vision_sharded_params / tp + spec.vision_replicated_params) * Dtype.BF16.bytes_per_element
    return total


def rope_table_bytes(spec: ModelSpec) -> float:
    """Bytes of the RoPE cos/sin table one GPU holds: ``max_position_embeddings × rotary_dim``
    entries in 16 bits (vLLM ``rotary_embedding/base.py``: ``cache = torch.cat((cos, sin), dim=-1)``
    over ``max_position_embeddings`` positions and ``rotary_dim / 2`` frequencies, ``.to(dtype)``
    with the model's dtype; ``get_rope`` builds one table per configuration, shared by every
    layer, on the device while the model loads, so the logged weights include it). Qwen3.5-35B-A3B:
    262,144 × 64 × 2 B = 33,554,432 B. 0 without RoPE or a stated context."""
    return float((spec.max_context_tokens or 0) * spec.rotary_dim * Dtype.BF16.bytes_per_element)


def _expert_pad_factor(spec: ModelSpec, layout: Layout, padding: tuple[int, int]) -> float:
    """Padded / true area of one routed expert's matrices on one GPU: the hidden size rounded up
    to ``padding[0]`` and the intermediate size per partition (I / TP inside the experts without
    EP, I with it) to ``padding[1]`` (vLLM mxfp4.py ``Mxfp4MoEMethod.create_weights``)."""
    if spec.moe is None or padding == (1, 1):
        return 1.0
    h, inter = spec.hidden_size, spec.moe.expert_intermediate
    part = inter / (layout.tp // layout.ep)  # the experts' TP inside one pipeline stage (tp // ep ≥ 1)
    return _round_up(h, padding[0]) * _round_up(part, padding[1]) / (h * part)


def attention_params_per_gpu(spec: ModelSpec, layout: Layout) -> float:
    """Parameters of one attention layer held by one GPU (parameters, not bytes).

    GQA: q and o shard by TP; k and v hold ``kv_heads_per_gpu`` heads (replicated when TP
    exceeds the KV heads). MLA: the low-rank down-projections ``q_a`` and ``kv_a`` are
    replicated on every rank (SGLang/vLLM ``ReplicatedLinear``), the rest shards by TP. With
    attention DP every rank holds the whole layer.

    Args:
        spec: the model.
        layout: its parallel layout.

    Returns:
        Parameters per GPU per softmax-attention layer; 0 when the model has none. Raises nothing.
    """
    a, h = spec.attention, spec.hidden_size
    if a is None:
        return 0.0
    whole = attention_params_per_layer(spec)
    if layout.attention_dp:
        return whole
    if a.kind is AttentionKind.MLA:
        replicated = h * a.q_lora_rank + h * (a.kv_lora_rank + a.qk_rope_head_dim)
        return (whole - replicated) / layout.tp + replicated
    kv = h * (a.head_dim + a.v_head_dim) * a.num_kv_heads
    return (whole - kv) / layout.tp + kv * kv_heads_per_gpu(spec, layout) / a.num_kv_heads


def _mtp_bytes(p: ParamCounts, weight_dtype: Dtype) -> float:
    # MTP layers are stored in the checkpoint's weight format (the quantized releases quantize
    # them with the other decoder layers), so they are counted at the weight dtype.
    return p.mtp * weight_dtype.bytes_per_element


def profile_reserve_bytes(spec: ModelSpec, layout: Layout, settings: EngineSettings) -> float:
    """Memory an engine that sizes its KV cache after a profiling run holds back for that run's
    peak and its CUDA graphs, on one GPU (bytes; vLLM ``gpu_worker.determine_available_memory``,
    engine-facts §1 "Budget"):

    - the dummy forward of ``profile_tokens`` tokens peaks in the MLP, with the layer input and
      residual (2·h) and the FFN's up-projection output and its activation (``ffn_matrices`` ×
      I per token, I sharded by TP) live at once; MoE layers count I = top_k × expert
      intermediate (+ shared) and the fused kernel's top_k × h output buffer;
    - the sampler pass over ``profile_seqs`` rows of logits over the whole vocabulary
      (vocabulary-parallel logits are gathered on every rank) at ``sampler_bytes_per_logit``
      (vLLM ``gpu_model_runner._dummy_sampler_run`` runs top-k/top-p, whose sort copies make
      this 24 B; ``catalog/engines.yaml``);
    - the forward and the sampler run one after the other, so the peak is the larger of the two;
    - plus the engine's CUDA-graph memory estimate.

    Qwen3-32B TP1 on an H100 under vLLM: forward 8,192 × 2 B × (2·5,120 + 3·25,600) = 1.43 GB,
    sampler 1,024 × 151,936 × 24 B = 3.73 GB, graphs 51 × 24 MiB = 1.28 GB → 5.02 GB.
    """
    if settings.profile_tokens <= 0:
        return 0.0
    h, tp = spec.hidden_size, layout.tp
    per_token = 0.0
    if spec.dense_ffn_layers > 0:
        per_token = spec.ffn_matrices * spec.dense_intermediate / tp
    if spec.moe is not None and spec.moe_layers > 0:
        m = spec.moe
        routed = spec.ffn_matrices * (m.top_k * m.expert_intermediate + m.shared_intermediate) / tp + m.top_k * h
        per_token = max(per_token, routed)
    forward = settings.profile_tokens * ACTIVATION_BYTES * (2 * h + per_token)
    sampler = settings.profile_seqs * spec.vocab_size * settings.sampler_bytes_per_logit
    return max(forward, sampler) + settings.graph_estimate_bytes


# [model, layout, weight format, (with_mtp, expert_padding, dense_whole), weight bytes] of the last call (held).
_LAST_WEIGHTS: list[Any] = [None, None, None, None, 0.0]


def memory_breakdown(
    spec: ModelSpec,
    gpu: Gpu,
    layout: Layout,
    weight_dtype: Dtype,
    kv_dtype: Dtype,
    settings: EngineSettings,
    state_to_kv_ratio: float | None,
    ssm_dtype: str | None = None,
    spec_state_copies: int = 0,
    max_running: float = 0.0,
    padded_state_slot: bool = False,
    draft_kv_pool: bool = False,
    expert_padding: tuple[int, int] = (1, 1),
    dense_whole: bool = False,
    verify_state_commit: bool = False,
    swa_full_tokens_ratio: float | None = None,
    draft: SpecDecode | None = None,
) -> MemoryBreakdown:
    """Split one GPU's memory into weights, reserve, KV pool and state pool.

    Args:
        settings: the engine's resolved memory fraction and reserve.
        state_to_kv_ratio: SGLang's ``--mamba-full-memory-ratio`` (state pool / KV pool) for
            hybrid models; None where state and KV share one pool (vLLM, TRT-LLM, and SGLang
            with ``--disable-radix-cache --max-running-requests``).
        spec_state_copies: extra state copies per running request under speculative decoding
            (``Engine.spec_state_copies``; 0 = none).
        max_running: with a ratio split, the ``--max-running-requests`` per replica
            whose speculative copies SGLang reserves before the split (S3).
        padded_state_slot: the engine allocates one more state row per tensor (SGLang, S18).
        draft_kv_pool: the draft keeps its own KV pool at the target's token count (SGLang,
            S3); else its layers share the target's pool (vLLM, TRT-LLM).
        draft: the speculative decoding in use, None without: an EAGLE/DFlash drafter's weights
            (BF16, sharded by TP; its ``drafter`` shape read from its config.json, else the one
            ``arch.draft`` takes from the target's) join the weights, and the draft's attention
            layers (MTP's or the drafter's) hold KV.
        expert_padding: the engine's routed-expert padding (``Engine.expert_padding``).
        dense_whole: with attention DP every weight but the routed experts is whole on each GPU
            (:func:`weight_bytes_per_gpu`; vLLM).
        verify_state_commit: the engine copies the accepted state after each verify
            (``CachePools.verify_state_commit``); counted only with speculative copies.
        swa_full_tokens_ratio: sliding-window pool tokens per full-attention token, sized with
            the KV pool (``CachePools.swa_full_tokens_ratio``, SGLang); None: a sliding layer
            holds its window per request.

    The engine sizes against :func:`cuda_visible_bytes` of the GPU; ``reserve_bytes`` of the
    result is everything but weights and pools, the driver's share included.
    """
    method, layers = (draft.method, draft.draft_layers) if draft is not None else ("mtp", 0)
    with_mtp = draft is not None and method == "mtp"  # MTP layers ship with the target
    shape = draft.drafter if draft is not None else None
    last = _LAST_WEIGHTS  # a search sizes one model, layout and format for several KV formats and caps in a row
    shape_key = (with_mtp, expert_padding, dense_whole)
    if last[0] is spec and last[1] is layout and last[2] is weight_dtype and last[3] == shape_key:
        weights = last[4]
    else:  # the lru_cache hashes the whole ModelSpec: about 1 µs a call
        weights = weight_bytes_per_gpu(spec, layout, weight_dtype, with_mtp, expert_padding, dense_whole)
        last[:] = [spec, layout, weight_dtype, shape_key, weights]
    whole = shape.params if shape else draft_params(spec, method, layers)
    fc = shape.replicated_params if shape else draft_fc_params(spec, method)  # held whole on every rank
    drafter = ((whole - fc) / layout.tp + fc) * Dtype.BF16.bytes_per_element
    weights += drafter
    reserve = settings.reserve_bytes + profile_reserve_bytes(spec, layout, settings)
    usable = max(settings.usable_bytes(cuda_visible_bytes(gpu.memory_bytes), weights, reserve), 0.0)
    heads = kv_heads_per_gpu(spec, layout)
    layers_per_stage = 1.0 / layout.pp
    kv_layer = kv_bytes_per_token_per_layer(spec, kv_dtype, heads)
    kv_tok = kv_layer * spec.full_attention_layers * layers_per_stage
    sliding_tok = kv_layer * spec.sliding_layers * layers_per_stage
    state_tp = 1 if layout.attention_dp else layout.tp
    state_seq = state_bytes_per_sequence(spec, ssm_dtype) / state_tp * layers_per_stage
    shards = layout.tp if layout.attention_dp else 1
    copies = spec_state_copies if state_seq > 0 else 0
    state_pool, kv_pool, slots, spec_pool = 0.0, usable, None, 0.0
    if state_seq > 0 and state_to_kv_ratio is not None:
        # S3 handle_max_mamba_cache: the speculative copies come off first, then the split.
        spec_pool = max_running / shards * copies * state_seq
        rest = usable - spec_pool
        state_pool = max(rest, 0.0) * state_to_kv_ratio / (1 + state_to_kv_ratio)
        kv_pool = rest - state_pool
        slots = float(_whole(state_pool / state_seq) * shards)  # whole slots per rank: max_mamba_cache_size
    padding = (1 + copies) * state_seq if padded_state_slot else 0.0
    swa = swa_full_tokens_ratio if spec.sliding_layers else None
    # the draft's KV per token (its layers sit on the last pipeline stage, the heaviest with them)
    a = spec.attention
    if draft is None:
        draft_tok = 0.0
    elif shape is not None:  # its own heads, sharded as the target's (replicated past TP = heads)
        heads = shape.kv_heads if layout.attention_dp else max(shape.kv_heads / layout.tp, 1.0)
        draft_tok = shape.layers * heads * 2 * shape.head_dim * kv_dtype.bytes_per_element
    elif method == "mtp":  # the target's own MTP layers
        draft_tok = kv_layer * draft_kv_layers(spec, method, layers)
    elif a is not None and a.kind is AttentionKind.GQA:  # estimated drafter: the target's K/V heads
        draft_tok = layers * kv_heads_per_gpu(spec, layout) * (a.head_dim + a.v_head_dim) * kv_dtype.bytes_per_element
    else:  # estimated drafter of an MLA or attention-free target: multi-head of width h, split by TP
        draft_tok = (
            layers * 2.0 * spec.hidden_size / (1 if layout.attention_dp else layout.tp) * kv_dtype.bytes_per_element
        )
    per_full_token = kv_tok + (0.0 if draft_kv_pool else draft_tok) + (swa * sliding_tok if swa else 0.0)
    # Each rank's pool holds whole tokens: SGLang floors ``rest / cell_size`` (engine-facts §2 [S3]; then to
    # a page multiple), vLLM allocates whole blocks of tokens (the page and block rounding is not modelled).
    kv_tokens = float(_whole(kv_pool / per_full_token) * shards) if per_full_token > 0 else float("inf")
    return MemoryBreakdown(
        gpu_bytes=gpu.memory_bytes,
        weight_bytes_per_gpu=weights,
        reserve_bytes=gpu.memory_bytes - weights - usable,
        kv_pool_bytes=kv_pool,
        state_pool_bytes=state_pool,
        kv_bytes_per_token_per_gpu=kv_tok,
        sliding_bytes_per_token_per_gpu=sliding_tok,
        state_bytes_per_sequence_per_gpu=state_seq,
        sequence_shards=shards,
        kv_capacity_tokens=kv_tokens,
        state_slots=slots,
        sliding_window=spec.sliding_window,
        spec_state_copies=copies,
        spec_state_pool_bytes=spec_pool,
        padding_state_bytes=padding,
        draft_kv_bytes_per_token_per_gpu=draft_tok,
        draft_kv_shared=not draft_kv_pool,
        draft_weight_bytes_per_gpu=drafter,
        spec_commit_state_transfers=2 if verify_state_commit and copies > 0 else 0,
        swa_full_tokens_ratio=swa,
    )
