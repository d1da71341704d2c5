"""A deployment's per-GPU constants, computed once: parameters per GPU by kind, bytes per token
of KV cache, state per sequence, FLOP rates. Step times (``tokenplan.perf.step``) are cheap
arithmetic on these, which keeps a plan sweep of 10,000+ configurations under a second.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from tokenplan.arch.params import component_bytes, param_counts
from tokenplan.arch.spec import AttentionKind, ModelSpec
from tokenplan.hardware import GemmCurve, Gpu
from tokenplan.perf.gemm import SizeRead, curve_for, size_read
from tokenplan.perf.layout import Layout
from tokenplan.perf.memory import MemoryBreakdown, attention_params_per_gpu
from tokenplan.records import quick_init
from tokenplan.units import Dtype


@dataclass(frozen=True, slots=True)
class Deployment:
    """One replica's per-GPU constants (all per GPU of one pipeline stage unless named).

    Attributes:
        spec, gpu, layout, weight_dtype, kv_dtype: what is deployed.
        memory: the per-GPU memory breakdown.
        dense_params: non-routed matmul parameters per GPU (attention projections,
            linear-attention, dense FFN, shared experts; lm_head counted apart).
        dense_bytes: their bytes.
        mlp_params: the part of ``dense_params`` in dense FFN and shared experts (``/tp/pp``).
            With attention DP these layers see every rank's tokens (TP over the gathered
            batch, or replicated over the rank's own tokens: the same FLOPs per GPU).
        lm_head_params: lm_head parameters per GPU (on the last stage only; the embedding's
            when tied).
        lm_head_bytes: their bytes, at the dtype ``perf.memory`` sizes the lm_head with
            (:func:`tokenplan.arch.params.component_bytes`: BF16 in every shipped format).
        routed_bytes: routed-expert bytes per GPU.
        routed_flops_per_token: routed-expert FLOPs per token per GPU (top_k experts).
        experts_per_gpu: routed experts per GPU per MoE layer.
        attn_flops_per_token_ctx: attention FLOPs per query token per context token per GPU.
        attn_prefill_flops_per_token_ctx: the same for prompt tokens (MLA prefills in the
            non-absorbed form, over ``qk_head_dim + v_head_dim`` per head, DeepSeek-V3 §2.1.1;
            GQA as decode).
        gdn_flops_per_token: linear-attention recurrence FLOPs per token per GPU.
        gemm_flops_per_s: dense tensor FLOP/s for the weight dtype (dequantized rate if not
            native), per GPU.
        attn_flops_per_s: tensor FLOP/s attention runs at (BF16 class).
        lowprec: True when the GEMMs run an FP8/FP4 kernel (kernel-maturity factor applies).
        weight_only: True when the weights are in a format the GPU's tensor cores do not run
            (dequantized to BF16 inside the GEMM; the dequantization factor applies).
        attn_gemm_elements, mlp_gemm_elements, expert_gemm_elements: the mean weight size of
            one GEMM (N·K elements per GPU) of the attention and linear-attention projections,
            of the dense FFN / shared experts / router, and of one routed expert; the measured
            GEMM curves are read at this size (:func:`gemm_sizes`). 0 where the family is absent.
        cpu_overlap: the engine prepares step n+1 on the CPU while the GPU runs step n (SGLang's
            overlap scheduler, vLLM's async scheduling, TensorRT-LLM's overlap scheduler;
            ``engines.overlap``), so a step's CPU time hides behind its kernels (``perf.step``).
        cpu_overlap_draft_only: the engine overlaps a speculative step's CPU work with the
            previous step's draft kernels only (vLLM 0.14–0.18,
            ``engines.overlap.cpu_hidden_behind_draft_only``); ``cpu_overlap`` is then False and
            ``job.batching.draft_s`` hides the CPU time behind the draft.
        gemm_curve: the measured GEMM curve the weight format runs on (``perf.gemm.curve_for``),
            or None (the fitted form stands in). Derived from the fields above on every
            construction, ``dataclasses.replace`` included; not compared.
        gemm_reads: where each family's weight size sits on that curve's size axis
            (``perf.gemm.size_read``), in the order attention, dense FFN, lm_head, routed expert;
            empty without a curve. Derived and not compared, like ``gemm_curve``.
    """

    spec: ModelSpec
    gpu: Gpu
    layout: Layout
    weight_dtype: Dtype
    kv_dtype: Dtype
    memory: MemoryBreakdown
    dense_params: float
    dense_bytes: float
    lm_head_params: float
    lm_head_bytes: float
    routed_bytes: float
    routed_flops_per_token: float
    experts_per_gpu: float
    attn_flops_per_token_ctx: float
    gdn_flops_per_token: float
    gemm_flops_per_s: float
    attn_flops_per_s: float
    lowprec: bool
    weight_only: bool = False
    attn_prefill_flops_per_token_ctx: float = 0.0
    mlp_params: float = 0.0
    attn_gemm_elements: float = 0.0
    mlp_gemm_elements: float = 0.0
    expert_gemm_elements: float = 0.0
    cpu_overlap: bool = False
    cpu_overlap_draft_only: bool = False
    gemm_curve: GemmCurve | None = field(init=False, repr=False, compare=False)
    gemm_reads: tuple[SizeRead, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Located once per deployment: a plan sweep then reads each curve per step at one row
        # count (perf.step) instead of searching its size bands per GEMM family.
        curve, reads = _curve_reads(
            self.gpu.gemm_curves,
            self.weight_dtype,
            self.weight_only,
            (self.attn_gemm_elements, self.mlp_gemm_elements, self.lm_head_params, self.expert_gemm_elements),
        )
        object.__setattr__(self, "gemm_curve", curve)
        object.__setattr__(self, "gemm_reads", reads)


quick_init(Deployment)  # a quicker __init__, same signature (tokenplan.records)


# The curve and size reads of the GEMM weights deployed lately, by the identity of the GPU's curves,
# the weight format and the four weight sizes: the deployments of one search share a few dozen
# (one per layout and format), where each of them searched the curves and size bands anew. Each
# entry holds the curves it was read from, so their id cannot be reused while it lives.
_READS: dict[
    tuple[int, Dtype, bool, tuple[float, ...]],
    tuple[tuple[GemmCurve, ...], GemmCurve | None, tuple[SizeRead, ...]],
] = {}
_READS_KEPT = 4096


def _curve_reads(
    curves: tuple[GemmCurve, ...], weight_dtype: Dtype, weight_only: bool, sizes: tuple[float, ...]
) -> tuple[GemmCurve | None, tuple[SizeRead, ...]]:
    """(``perf.gemm.curve_for``, the ``perf.gemm.size_read`` of each of ``sizes`` on it; empty
    without a curve), kept in :data:`_READS`."""
    key = (id(curves), weight_dtype, weight_only, sizes)
    hit = _READS.get(key)
    if hit is None:
        curve = curve_for(curves, weight_dtype, weight_only)
        reads = () if curve is None else tuple(size_read(curve, n) for n in sizes)
        if len(_READS) >= _READS_KEPT:
            _READS.clear()
        hit = _READS[key] = (curves, curve, reads)
    return hit[1], hit[2]


@lru_cache(maxsize=4096)
def gemm_sizes(spec: ModelSpec, layout: Layout, dense_whole: bool = False) -> tuple[float, float, float]:
    """Mean N·K (weight elements per GPU) of one GEMM in each matmul family: (attention and
    linear-attention projections, dense FFN / shared experts / router, one routed expert).

    GEMM counts per layer, as SGLang and vLLM fuse them: GQA/MHA 2 (fused QKV, O); MLA 3
    (fused q_a + kv_a down-projection, q_b, O; kv_b is absorbed into attention); Gated DeltaNet
    / Mamba 2 (fused in-projection, out-projection); a dense FFN or shared expert 2 (fused
    gate-up, down); the router 1. A routed expert's 2 GEMMs (gate-up, down) are split over
    ``max(tp / ep, 1)`` GPUs (whole on one GPU with EP ≥ TP). The family's parameters per GPU
    divided by its GEMM count is the size its FLOPs run at (``perf/gemm.py``: on B200 an FP8
    block-scaled GEMM of 2 M elements reaches ~0.4 of peak at M = 8,192, one of 128 M ~0.67).
    Raises nothing; a family the model lacks gives 0."""
    p = param_counts(spec)
    tp = layout.tp
    attn_layers = spec.full_attention_layers + spec.sliding_layers
    a = spec.attention
    attn_gemms = attn_layers * (3 if a is not None and a.kind is AttentionKind.MLA else 2)
    lin_tp = 1 if layout.attention_dp else tp
    attn_total = attention_params_per_gpu(spec, layout) * attn_layers + p.linear_attention / lin_tp
    attn_count = attn_gemms + 2 * spec.linear_layers
    shared = spec.moe is not None and spec.moe.shared_intermediate > 0
    mlp_count = 2 * spec.dense_ffn_layers + ((3 if shared else 1) * spec.moe_layers if spec.moe is not None else 0)
    mlp_total = (p.dense_ffn + p.shared_experts) / (1 if dense_whole and layout.attention_dp else tp)
    expert = 0.0
    if spec.moe is not None and spec.moe_layers:
        expert = p.routed_experts / (spec.moe_layers * spec.moe.num_experts * 2) / max(tp / layout.ep, 1.0)
    return (attn_total / attn_count if attn_count else 0.0, mlp_total / mlp_count if mlp_count else 0.0, expert)


@lru_cache(maxsize=4096)
def _param_split(spec: ModelSpec, layout: Layout, weight_dtype: Dtype, dense_whole: bool = False) -> tuple[float, ...]:
    """(dense params, dense bytes, lm_head params, lm_head bytes, routed bytes, routed FLOPs per
    token, dense-FFN and shared-expert params), per GPU of one stage; ``dense_whole``: every
    weight but the routed experts is whole on each GPU under attention DP (vLLM's TP 1 ranks,
    ``perf.memory.weight_bytes_per_gpu``)."""
    p = param_counts(spec)
    pp, gpus = layout.pp, layout.gpus_per_replica
    tp = 1 if dense_whole and layout.attention_dp else layout.tp

    def b(component: str) -> float:
        return component_bytes(spec, weight_dtype, component)

    attn_layers = spec.full_attention_layers + spec.sliding_layers
    attn = attention_params_per_gpu(spec, layout) * attn_layers / pp
    rest = {"linear_attention": p.linear_attention, "dense_ffn": p.dense_ffn, "shared_experts": p.shared_experts}
    dense_params = attn + sum(rest.values()) / tp / pp
    dense_bytes = attn * b("attention") + sum(v * b(k) for k, v in rest.items()) / tp / pp
    lm_head = (p.lm_head or p.embedding) / tp
    routed_bytes = p.routed_experts * b("routed_experts") / gpus
    routed_flops = 2.0 * p.routed_active / gpus
    mlp = (p.dense_ffn + p.shared_experts) / tp / pp
    return dense_params, dense_bytes, lm_head, lm_head * b("lm_head"), routed_bytes, routed_flops, mlp


def build_deployment(
    spec: ModelSpec,
    gpu: Gpu,
    layout: Layout,
    weight_dtype: Dtype,
    kv_dtype: Dtype,
    memory: MemoryBreakdown,
    cpu_overlap: bool = False,
    cpu_overlap_draft_only: bool = False,
    dense_whole: bool = False,
) -> Deployment:
    """Precompute the per-GPU constants of one deployment (all but the memory and the KV format
    from :func:`_weight_side`, kept per model, GPU, layout and weight format; ``cpu_overlap``: the
    engine overlaps a step's CPU work with the previous step's kernels, ``cpu_overlap_draft_only``:
    with the previous step's draft kernels only, ``engines.overlap``; ``dense_whole``: under
    attention DP every weight but the routed experts is whole on each GPU, as vLLM runs its ranks
    at TP 1)."""
    key = (id(spec), id(gpu), id(layout), weight_dtype, dense_whole)
    hit = _WEIGHT_SIDE.get(key)
    if hit is None:
        if len(_WEIGHT_SIDE) >= _WEIGHT_SIDE_KEPT:
            _WEIGHT_SIDE.clear()
        hit = _WEIGHT_SIDE[key] = (spec, gpu, layout, _weight_side(spec, gpu, layout, weight_dtype, dense_whole))
    return Deployment(
        spec,
        gpu,
        layout,
        weight_dtype,
        kv_dtype,
        memory,
        *hit[3],
        cpu_overlap=cpu_overlap,
        cpu_overlap_draft_only=cpu_overlap_draft_only,
    )


# The fields of :class:`Deployment` from ``dense_params`` to ``expert_gemm_elements``, in order
# (eleven rates and sizes, ``lowprec``, ``weight_only``, five more sizes).
WeightSide = tuple[
    float,
    float,
    float,
    float,
    float,
    float,
    float,
    float,
    float,
    float,
    float,
    bool,
    bool,
    float,
    float,
    float,
    float,
    float,
]

# :func:`_weight_side` by the identity of the model, GPU and layout and the weight format: the
# configurations of a search that differ only in KV format, speculative settings or running cap
# share it. Each entry holds its model, GPU and layout, so no id in a key is reused while it lives.
_WEIGHT_SIDE: dict[tuple[int, int, int, Dtype, bool], tuple[ModelSpec, Gpu, Layout, WeightSide]] = {}
_WEIGHT_SIDE_KEPT = 1024


def _weight_side(
    spec: ModelSpec, gpu: Gpu, layout: Layout, weight_dtype: Dtype, dense_whole: bool = False
) -> WeightSide:
    """The fields of :class:`Deployment` after ``memory``, in their order: parameters and bytes
    per GPU, FLOPs per token and context token, FLOP/s, the format's kernel path, GEMM sizes."""
    dense_params, dense_bytes, lm_head, lm_head_bytes, routed_bytes, routed_flops, mlp = _param_split(
        spec, layout, weight_dtype, dense_whole
    )
    a = spec.attention
    attn_per_ctx = attn_pre_per_ctx = 0.0
    if a is not None:
        heads = a.num_heads if layout.attention_dp else a.num_heads / layout.tp
        if a.kind is AttentionKind.MLA:
            # Absorbed MLA: scores over (r_kv + d_rope), values over r_kv (DeepSeek-V3 §2.1.1).
            per_layer = 2 * heads * (2 * a.kv_lora_rank + a.qk_rope_head_dim)
        else:
            per_layer = 2 * heads * (a.head_dim + a.v_head_dim)  # QK^T and PV
        attn_per_ctx = per_layer * (spec.full_attention_layers + spec.sliding_layers) / layout.pp
        attn_pre_per_ctx = attn_per_ctx
        if a.kind is AttentionKind.MLA:
            pre_layer = 2 * heads * (a.head_dim + a.v_head_dim)
            attn_pre_per_ctx = pre_layer * (spec.full_attention_layers + spec.sliding_layers) / layout.pp
    lin = spec.linear
    gdn = 0.0
    if lin is not None:
        tp_lin = 1 if layout.attention_dp else layout.tp
        # Delta-rule update and readout: ~4 multiply-adds per state element per token.
        gdn = 8.0 * lin.num_v_heads * lin.k_head_dim * lin.v_head_dim / tp_lin * spec.linear_layers / layout.pp
    experts = spec.moe.num_experts / layout.gpus_per_replica if spec.moe else 0.0
    attn_size, mlp_size, expert_size = gemm_sizes(spec, layout, dense_whole)
    return (
        dense_params,  # dense_params
        dense_bytes,  # dense_bytes
        lm_head,  # lm_head_params
        lm_head_bytes,  # lm_head_bytes
        routed_bytes,  # routed_bytes
        routed_flops,  # routed_flops_per_token
        experts,  # experts_per_gpu
        attn_per_ctx,  # attn_flops_per_token_ctx
        gdn,  # gdn_flops_per_token
        gpu.flops_per_s(weight_dtype),  # gemm_flops_per_s
        gpu.dense_flops_per_s["bf16"],  # attn_flops_per_s
        gpu.runs_natively(weight_dtype) and weight_dtype.flops_class != "bf16",  # lowprec
        weight_dtype is Dtype.W4A16 or not gpu.runs_natively(weight_dtype),  # weight_only
        attn_pre_per_ctx,  # attn_prefill_flops_per_token_ctx
        mlp,  # mlp_params
        attn_size,  # attn_gemm_elements
        mlp_size,  # mlp_gemm_elements
        expert_size,  # expert_gemm_elements
    )
