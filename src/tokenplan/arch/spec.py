"""ModelSpec: the counts and shapes of a decoder-only model, per layer kind.

Only counts live here (no dtype, no sharding): ``tokenplan.arch.params`` turns them into
parameter counts, ``tokenplan.arch.kv`` into cache bytes, ``tokenplan.arch.flops`` into work
per token.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class AttentionKind(StrEnum):
    """How the attention layers store their cache."""

    GQA = "gqa"  # MHA and GQA: K and V per KV head (MHA is GQA with kv_heads == heads)
    MLA = "mla"  # multi-head latent attention: one compressed latent per token (DeepSeek-V3)


@dataclass(frozen=True, slots=True)
class Attention:
    """Softmax-attention shapes shared by the model's full and sliding-window layers.

    Attributes:
        kind: GQA (incl. MHA) or MLA.
        num_heads: query heads.
        num_kv_heads: K/V heads (GQA); for MLA the number of heads the latent expands to.
        head_dim: query/key head size (GQA); MLA: ``qk_nope_head_dim + qk_rope_head_dim``.
        v_head_dim: value head size.
        output_gate: Qwen3.5/3.6 ``attn_output_gate``: q_proj emits a gate as wide as the queries.
        kv_lora_rank: MLA latent width (0 for GQA).
        q_lora_rank: MLA query low-rank width (0 = full-rank queries).
        qk_rope_head_dim: MLA decoupled RoPE key width, cached beside the latent.
        sparse_topk_tokens: tokens a sparse-attention layer attends to (0 = dense); an
            approximation (DeepSeek/GLM DSA, MiniMax-M3 block-sparse) flagged in ``ModelSpec``.
        index_bytes_per_token: bytes per token per layer of a sparse-attention indexer key.
    """

    kind: AttentionKind
    num_heads: int
    num_kv_heads: int
    head_dim: int
    v_head_dim: int
    output_gate: bool = False
    kv_lora_rank: int = 0
    q_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    sparse_topk_tokens: int = 0
    index_bytes_per_token: float = 0.0


@dataclass(frozen=True, slots=True)
class LinearAttention:
    """Gated DeltaNet (Qwen3-Next, Qwen3.5/3.6) or Mamba-2 (Nemotron-H) layer shapes.

    Each sequence holds a fixed recurrent state per layer, whatever its length: the SSM state
    ``num_v_heads × k_head_dim × v_head_dim`` and a convolution state of ``conv_kernel − 1``
    past inputs of width ``conv_dim``.

    Attributes:
        kind: ``"gated_deltanet"`` or ``"mamba2"``.
        num_k_heads, num_v_heads, k_head_dim, v_head_dim: state shape (Mamba-2: k_head_dim is
            ``ssm_state_size``, v_head_dim is ``mamba_head_dim``, num_v_heads ``mamba_num_heads``).
        conv_dim: channels of the short convolution.
        conv_kernel: convolution width (tokens).
        in_proj_out: output width of the input projection (parameters = hidden × in_proj_out).
        state_dtype: dtype of the SSM state in the checkpoint's config (``"float32"`` default).
    """

    kind: str
    num_k_heads: int
    num_v_heads: int
    k_head_dim: int
    v_head_dim: int
    conv_dim: int
    conv_kernel: int
    in_proj_out: int
    state_dtype: str = "float32"


@dataclass(frozen=True, slots=True)
class Moe:
    """Mixture-of-experts FFN.

    Attributes:
        num_experts: routed experts per MoE layer.
        top_k: experts each token is routed to.
        expert_intermediate: intermediate width of one routed expert (SwiGLU: 3 matrices).
        shared_intermediate: total intermediate width of the shared expert(s) (0 = none).
    """

    num_experts: int
    top_k: int
    expert_intermediate: int
    shared_intermediate: int = 0


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """A decoder-only transformer as tokenplan models it.

    Layer counts add up: ``full_attention_layers + sliding_layers + linear_layers`` plus
    ``ffn_only_layers`` (Nemotron-H's MoE-only layers) is ``num_layers``; FFN kinds add up as
    ``dense_ffn_layers + moe_layers``.

    Attributes:
        name: catalog key or file stem.
        architecture: the config's ``architectures[0]``.
        hidden_size, vocab_size, num_layers: as in the config.
        tie_word_embeddings: lm_head shares the embedding matrix.
        attention: softmax-attention shapes (None when the model has none).
        full_attention_layers: layers whose KV cache grows with the context.
        sliding_layers: layers that keep at most ``sliding_window`` tokens.
        sliding_window: window size in tokens (0 when none).
        linear: linear-attention shapes (None when absent); ``linear_layers`` of them.
        dense_ffn_layers, dense_intermediate: dense SwiGLU FFN layers and their width.
        moe: routed-expert shapes; ``moe_layers`` of them.
        mtp_layers: multi-token-prediction layers shipped with the model (used as the draft
            for MTP speculative decoding; their weights load only then).
        ffn_matrices: weight matrices per FFN/expert: 3 for gated (SwiGLU) FFNs, 2 for plain
            ones (Nemotron-H's squared-ReLU experts).
        native_weight_dtype: the dtype the checkpoint ships its weights in (``bf16``), or the
            experts' dtype when the release itself is quantized (gpt-oss: ``mxfp4``).
        native_quantized: ``(component, share)`` pairs: the share (0–1, by parameters) of each
            weight component the release stores in ``native_weight_dtype``, where its config says
            (a compressed-tensors ``ignore`` list, ``arch.quant_scope``; Kimi-K2.5: only the
            routed experts), else None (the format's rule, ``arch.params.quantized_fraction``).
        native_component_bytes: ``(component, bytes per parameter)`` pairs where the release
            stores a component in several formats, layer by layer (ModelOpt MIXED_PRECISION:
            NVIDIA's Qwen3.6 NVFP4 releases keep attention in FP8, the MLPs in NVFP4;
            ``arch.quant_scope``), else None; it overrides the share blend of
            ``arch.params.component_bytes`` where the release is served as released.
        native_kv_dtype: the KV-cache format the checkpoint's quantization block states for
            itself (ModelOpt ``kv_cache_quant_algo`` ``FP8``: ``fp8``), which the engines'
            ``--kv-cache-dtype auto`` takes, or None (``arch.quant.native_kv_format``).
        max_context_tokens: ``max_position_embeddings`` (tokens a request may span), or None.
        rotary_dim: the dimensions of each head RoPE turns (``arch.hf_fields.rotary_dim``; 0 =
            no rotary embedding): the engines' cos/sin table holds ``max_context_tokens`` rows of it.
        vision_layers, vision_hidden: the vision tower's depth and width of a multimodal
            checkpoint (0 = text-only); engines hold memory back for it.
        vision_sharded_params, vision_replicated_params: the vision tower's parameters that
            shard by TP (the blocks' qkv, proj and MLP matrices and the patch merger's two) and
            those every rank holds (biases, norms, the patch and position embeddings); 0 for a
            text-only model. vLLM and SGLang load the tower with the language model unless told
            to serve text only, sharded by TP by default (vLLM ``mm_encoder_tp_mode="weights"``).
        approximations: what tokenplan models only approximately (printed as warnings).
    """

    name: str
    architecture: str
    hidden_size: int
    vocab_size: int
    num_layers: int
    tie_word_embeddings: bool
    attention: Attention | None
    full_attention_layers: int
    sliding_layers: int = 0
    sliding_window: int = 0
    linear: LinearAttention | None = None
    linear_layers: int = 0
    dense_ffn_layers: int = 0
    dense_intermediate: int = 0
    moe: Moe | None = None
    moe_layers: int = 0
    mtp_layers: int = 0
    ffn_matrices: int = 3
    native_weight_dtype: str = "bf16"
    native_quantized: tuple[tuple[str, float], ...] | None = None
    native_component_bytes: tuple[tuple[str, float], ...] | None = None
    native_kv_dtype: str | None = None
    max_context_tokens: int | None = None
    rotary_dim: int = 0
    vision_layers: int = 0
    vision_hidden: int = 0
    vision_sharded_params: int = 0
    vision_replicated_params: int = 0
    approximations: tuple[str, ...] = field(default=())

    @property
    def is_hybrid(self) -> bool:
        """True when some layers hold a fixed per-sequence recurrent state."""
        return self.linear_layers > 0

    @property
    def family(self) -> str:
        """A coarse family name for reports: ``dense``, ``moe``, ``hybrid``, ``hybrid-moe``, ``mla-moe``."""
        moe = self.moe is not None
        if self.is_hybrid:
            return "hybrid-moe" if moe else "hybrid"
        if self.attention is not None and self.attention.kind is AttentionKind.MLA:
            return "mla-moe" if moe else "mla"
        return "moe" if moe else "dense"
