"""Parameter counts per component, and weight bytes for a dtype and a sharding.

Counts follow the Hugging Face module shapes (biases and norms are below 0.1 % and left out):

- GQA attention: q ``h·n_h·d`` (×2 with Qwen3.5's output gate), k and v ``h·n_kv·d`` each,
  o ``n_h·d_v·h``.
- MLA (DeepSeek-V3 report, arXiv:2412.19437 §2.1): q ``h·r_q + r_q·n_h·(d_nope+d_rope)``
  (full-rank ``h·n_h·(d_nope+d_rope)`` when r_q = 0), kv_a ``h·(r_kv+d_rope)``,
  kv_b ``r_kv·n_h·(d_nope+d_v)``, o ``n_h·d_v·h``.
- Gated DeltaNet / Mamba-2: in_proj ``h·in_proj_out``, conv ``conv_dim·kernel``,
  out_proj ``n_v·d_v·h``.
- SwiGLU FFN (dense, each routed or shared expert): ``3·h·I`` (``2·h·I`` for ungated FFNs such
  as Nemotron-H's squared ReLU); router ``h·E``.
- MTP layer (DeepSeek-V3 report §2.2): one decoder layer plus the ``2h·h`` projection.
"""

from __future__ import annotations

from dataclasses import dataclass

from tokenplan.arch.spec import AttentionKind, ModelSpec
from tokenplan.units import Dtype


@dataclass(frozen=True, slots=True)
class ParamCounts:
    """Parameter counts of one model (parameters, not bytes).

    Attributes:
        embedding: input embedding.
        lm_head: output projection (0 when tied to the embedding).
        attention: all softmax-attention layers (full and sliding).
        linear_attention: all Gated DeltaNet / Mamba-2 layers.
        dense_ffn: all dense FFN layers.
        shared_experts: shared experts and routers of all MoE layers.
        router: the routers' part of ``shared_experts`` (``h·E`` per MoE layer), which the
            engines hold whole on every TP rank and unquantized (``perf.memory``).
        routed_experts: all routed experts of all MoE layers.
        routed_active: routed-expert parameters one token uses (top_k of them per layer).
        mtp: the multi-token-prediction layers.
    """

    embedding: float
    lm_head: float
    attention: float
    linear_attention: float
    dense_ffn: float
    shared_experts: float
    routed_experts: float
    routed_active: float
    mtp: float
    router: float = 0.0

    @property
    def total(self) -> float:
        """Every parameter of the main model (MTP layers excluded)."""
        return (
            self.embedding
            + self.lm_head
            + self.attention
            + self.linear_attention
            + self.dense_ffn
            + self.shared_experts
            + self.routed_experts
        )

    @property
    def active_matmul(self) -> float:
        """Parameters one token multiplies through (embedding lookup excluded, lm_head included)."""
        return (
            (self.lm_head or self.embedding)
            + self.attention
            + self.linear_attention
            + self.dense_ffn
            + self.shared_experts
            + self.routed_active
        )


def attention_params_per_layer(spec: ModelSpec) -> float:
    """Parameters of one softmax-attention layer (0 when the model has none)."""
    a, h = spec.attention, spec.hidden_size
    if a is None:
        return 0.0
    if a.kind is AttentionKind.MLA:
        nope = a.head_dim - a.qk_rope_head_dim
        q = (
            (h * a.q_lora_rank + a.q_lora_rank * a.num_heads * a.head_dim)
            if a.q_lora_rank
            else h * a.num_heads * a.head_dim
        )
        kv = h * (a.kv_lora_rank + a.qk_rope_head_dim) + a.kv_lora_rank * a.num_heads * (nope + a.v_head_dim)
        return float(q + kv + a.num_heads * a.v_head_dim * h)
    q = h * a.num_heads * a.head_dim * (2 if a.output_gate else 1)
    kv = h * a.num_kv_heads * (a.head_dim + a.v_head_dim)
    return float(q + kv + a.num_heads * a.v_head_dim * h)


def linear_params_per_layer(spec: ModelSpec) -> float:
    """Parameters of one Gated DeltaNet / Mamba-2 layer (0 when the model has none)."""
    lin, h = spec.linear, spec.hidden_size
    if lin is None:
        return 0.0
    return float(h * lin.in_proj_out + lin.conv_dim * lin.conv_kernel + lin.num_v_heads * lin.v_head_dim * h)


def _ffn_params(spec: ModelSpec) -> tuple[float, float, float, float]:
    """(dense FFN per layer, shared+router per MoE layer, routed per MoE layer, routed active per layer)."""
    h = spec.hidden_size
    m = spec.ffn_matrices
    dense = m * h * spec.dense_intermediate
    moe = spec.moe
    if moe is None:
        return dense, 0.0, 0.0, 0.0
    shared = m * h * moe.shared_intermediate + h * moe.num_experts
    expert = m * h * moe.expert_intermediate
    return dense, shared, expert * moe.num_experts, expert * moe.top_k


def param_counts(spec: ModelSpec) -> ParamCounts:
    """Count every parameter of ``spec`` by component (see the module docstring)."""
    h, v = spec.hidden_size, spec.vocab_size
    dense, shared, routed, active = _ffn_params(spec)
    attn = attention_params_per_layer(spec)
    mtp_ffn = (shared + routed) if spec.moe is not None else dense
    mtp_layer = attn + mtp_ffn + 2.0 * h * h
    return ParamCounts(
        embedding=float(h * v),
        lm_head=0.0 if spec.tie_word_embeddings else float(h * v),
        attention=attn * (spec.full_attention_layers + spec.sliding_layers),
        linear_attention=linear_params_per_layer(spec) * spec.linear_layers,
        dense_ffn=dense * spec.dense_ffn_layers,
        shared_experts=shared * spec.moe_layers,
        routed_experts=routed * spec.moe_layers,
        routed_active=active * spec.moe_layers,
        mtp=mtp_layer * spec.mtp_layers,
        router=float(h * spec.moe.num_experts * spec.moe_layers) if spec.moe is not None else 0.0,
    )


def quantized_components(spec: ModelSpec, weight_dtype: Dtype) -> tuple[str, ...]:
    """Which components a checkpoint in ``weight_dtype`` stores in that dtype.

    FP8/INT8/W4A16 checkpoints quantize every linear layer of the decoder blocks. NVFP4 on MoE
    models (NVIDIA's ModelOpt checkpoints) quantizes every FFN — routed experts, shared experts
    and the dense FFN layers — and keeps attention in BF16: ModelOpt's DeepSeek script disables
    quantization only for ``*attn*`` and ``*head*`` (NVIDIA/TensorRT-Model-Optimizer
    ``examples/deepseek/ptq.py``), nvidia/DeepSeek-R1-0528-FP4 stores dense layer 0's
    ``mlp.down_proj`` as U8 with F8_E4M3 scales, and TensorRT-LLM's DeepSeek-R1 tech blog 1
    lists "3x Dense FFN Layers nvfp4", "64x Attention Modules bf16". (The -v2 checkpoint also
    quantizes attention's ``o_proj``; not modelled.) MXFP4 on MoE models quantizes the routed
    experts only, as gpt-oss's own ``modules_to_not_convert`` says. Embeddings and lm_head stay
    BF16 in every case.

    A release served in its own format keeps the layers its config leaves out at 16 bits
    (``ModelSpec.native_quantized``: Kimi-K2.5's INT4 covers the routed experts only); here a
    component counts as quantized when at least half its parameters are
    (:func:`quantized_fraction` gives the share).
    """
    return tuple(c for c in WEIGHT_COMPONENTS if quantized_fraction(spec, weight_dtype, c) >= 0.5)


# the decoder's weight components a format may quantize (embedding and lm_head stay 16-bit)
WEIGHT_COMPONENTS = ("attention", "linear_attention", "dense_ffn", "shared_experts", "routed_experts")


def quantized_fraction(spec: ModelSpec, weight_dtype: Dtype, component: str) -> float:
    """The share (0–1, by parameters) of ``component`` a checkpoint in ``weight_dtype`` stores in
    that dtype: the release's own scope where it is served in its own format
    (``ModelSpec.native_quantized``, ``arch.quant_scope``), else the format's rule
    (:func:`quantized_components`' docstring): 1 or 0."""
    if weight_dtype in (Dtype.BF16, Dtype.FP16):
        return 0.0
    if spec.native_quantized is not None and weight_dtype.value == spec.native_weight_dtype:
        return dict(spec.native_quantized).get(component, 0.0)
    return 1.0 if component in _format_components(spec, weight_dtype) else 0.0


def _format_components(spec: ModelSpec, weight_dtype: Dtype) -> tuple[str, ...]:
    if weight_dtype is Dtype.NVFP4 and spec.moe is not None:
        return ("dense_ffn", "shared_experts", "routed_experts")
    if weight_dtype is Dtype.MXFP4 and spec.moe is not None:
        return ("routed_experts",)
    return WEIGHT_COMPONENTS


def component_dtype(spec: ModelSpec, weight_dtype: Dtype, component: str) -> Dtype:
    """The dtype most of ``component`` is stored in: ``weight_dtype`` for the components
    :func:`quantized_components` lists, BF16 for the rest (embeddings, lm_head, and the BF16-kept
    layers of 4-bit MoE checkpoints)."""
    return weight_dtype if component in quantized_components(spec, weight_dtype) else Dtype.BF16


def component_bytes(spec: ModelSpec, weight_dtype: Dtype, component: str) -> float:
    """Bytes per parameter of ``component`` (bytes): its quantized share at ``weight_dtype``'s
    bytes, the rest at BF16's 2 (:func:`quantized_fraction`); a release that stores it in
    several formats, served as released, gives its own figure (``ModelSpec.native_component_bytes``). Memory (``perf.memory``) and step
    bytes (``perf.deployment``) both size weights through this one rule."""
    if spec.native_component_bytes is not None and weight_dtype.value == spec.native_weight_dtype:
        return dict(spec.native_component_bytes).get(component, Dtype.BF16.bytes_per_element)
    share = quantized_fraction(spec, weight_dtype, component)
    return share * weight_dtype.bytes_per_element + (1.0 - share) * Dtype.BF16.bytes_per_element
