"""How many layers' worth of small-kernel latency a decode step pays, by the kernels each layer type
launches (``Efficiency.layer_latency_s`` is the latency of one GQA decoder layer's kernels).

At small batch a decode step is a chain of short kernels, each with a minimum duration of its own
under CUDA graphs, so the step's latency grows with the number of kernels a layer launches, not
only with the number of layers. Counted in SGLang's decode path (CUDA-graph replay, BF16 weights):

- a GQA layer with a dense MLP launches 11 (``python/sglang/srt/models/llama.py``,
  ``LlamaDecoderLayer``): the fused residual add + RMSNorm, ``qkv_proj``, rotary, the KV-cache
  write, the copy that makes the query slice contiguous for the decode backend, the decode
  attention, ``o_proj``; then the post-attention add + RMSNorm, ``gate_up_proj``,
  ``silu_and_mul``, ``down_proj``. This is the layer ``layer_latency_s`` stands for.
- an MLA layer in the absorbed decode form launches 4 more
  (``python/sglang/srt/models/deepseek_v2.py`` @3e4a39ee, ``DeepseekV2AttentionMLA``,
  ``forward_absorb_prepare`` / ``forward_absorb_core``): the latent projection
  ``fused_qkv_a_proj_with_mqa`` stands where ``qkv_proj`` does, and the layer adds
  ``q_a_layernorm`` and ``kv_a_layernorm`` (the two compressed latents are normalised),
  ``q_b_proj``, and the two absorbed batched matmuls, ``torch.bmm`` of the query with ``w_kc``
  before the attention and of its output with ``w_vc`` after it; the attention reads the latent
  cache without the query copy. 15 kernels against 11: :data:`MLA_LAYER_LATENCIES` = 4 / 11 more
  per MLA layer.
- FP8 weights add one activation-quantization kernel before each FP8 linear layer outside the
  routed experts (:func:`quant_latency_layers`): the block-scaled path quantizes the activation
  per token group in a kernel of its own (SGLang ``python/sglang/srt/layers/quantization/fp8_utils.py``:
  ``q_input, x_scale = sglang_per_token_group_quant_fp8(input_2d, block_size[1], ...)`` before the
  block-scaled GEMM, ``gemm_fp8_nt_groupwise`` or ``w8a8_block_fp8_matmul``; TensorRT-LLM
  ``per_token_quant_and_transform`` before ``deep_gemm.fp8_gemm_nt`` in ``FP8BlockScalesLinearMethod``,
  ``tensorrt_llm/_torch/modules/linear.py``), counted as one kernel of the 11 each: 2 in a GQA
  attention block (``qkv_proj``, ``o_proj``), 3 in an MLA one (``fused_qkv_a_proj_with_mqa``,
  ``q_b_proj``, ``o_proj``; the absorbed ``w_kc``/``w_vc`` products stay BF16), 3 in a Gated
  DeltaNet block (its input projections and ``out_proj``), 2 in a dense FFN or a shared expert
  (``gate_up_proj``, ``down_proj``). The routed experts' quantization is the MoE block's
  (``Efficiency.moe_layer_latency_s``). BF16 weights need none; NVFP4 and MXFP4 checkpoints keep
  attention in BF16, and TensorRT-LLM fuses the NVFP4 activation quantization into the
  all-reduce + RMSNorm before the FFN (``AllReduceFusionOp.RESIDUAL_RMS_NORM_QUANT_NVFP4``): not
  counted for them. Nor are they where the FP8 weights are weight-only (a GPU without FP8 tensor
  cores, such as A100: vLLM's ``MarlinFp8`` path, ``fp8_marlin.py``, keeps the activation in BF16
  and dequantizes the weight tile inside the GEMM's main loop, so nothing quantizes the input).
- a sparse-attention (DSA) layer's indexer adds about one layer more
  (:mod:`tokenplan.perf.sparse_indexer`).

Other layer types are counted as one GQA layer: Qwen3's GQA layer adds a fused q/k-norm kernel
(12) and a Gated DeltaNet layer launches 12 (Qwen3-Next: ``in_proj_qkvz``, ``in_proj_ba``, the
fused split, ``causal_conv1d_update``, the fused gating and recurrent update, the gated RMSNorm,
``out_proj``, besides the norm and the MLP's four; Qwen3.5's split input projections make it 13),
within a kernel or two of 11 and of the version-to-version spread of these paths (fused q/k-norm,
the fused KV write of newer releases). The MoE block's extra kernels are
``Efficiency.moe_layer_latency_s``.
"""

from __future__ import annotations

from tokenplan.arch.spec import AttentionKind, ModelSpec
from tokenplan.perf.sparse_indexer import indexer_latency_layers
from tokenplan.units import Dtype

GQA_LAYER_KERNELS = 11  # the layer layer_latency_s stands for (module docstring)
MLA_EXTRA_KERNELS = 4  # q_a_layernorm, kv_a_layernorm, q_b_proj, the two absorbed bmm's, less the query copy
MLA_LAYER_LATENCIES = MLA_EXTRA_KERNELS / GQA_LAYER_KERNELS


def latency_layers(spec: ModelSpec) -> float:
    """The step's small-kernel latency of ``spec`` in units of one GQA layer's
    (``Efficiency.layer_latency_s``): ``num_layers``, plus :data:`MLA_LAYER_LATENCIES` per MLA
    layer (DeepSeek-R1: 61 + 61 × 4/11 = 83.18), plus the DSA indexers
    (:func:`~tokenplan.perf.sparse_indexer.indexer_latency_layers`)."""
    a = spec.attention
    mla = spec.full_attention_layers if a is not None and a.kind is AttentionKind.MLA else 0
    return spec.num_layers + MLA_LAYER_LATENCIES * mla + indexer_latency_layers(spec)


# FP8 linear layers per block outside the routed experts, each preceded by its own activation
# quantization kernel (module docstring)
FP8_QUANT_KERNELS_GQA, FP8_QUANT_KERNELS_MLA, FP8_QUANT_KERNELS_LINEAR, FP8_QUANT_KERNELS_FFN = 2, 3, 3, 2


def quant_latency_layers(spec: ModelSpec, weight_dtype: Dtype, weight_only: bool = False) -> float:
    """The step's activation-quantization kernels of FP8 weights in units of one GQA layer's
    kernels (``Efficiency.layer_latency_s``, 11 kernels): one per FP8 linear layer outside the
    routed experts (module docstring), 0 for other formats and for FP8 run weight-only
    (``weight_only``: the GPU has no FP8 tensor cores, the activation stays BF16). DeepSeek-R1 in
    FP8: 61 MLA blocks × 3 + 3 dense FFNs × 2 + 58 shared experts × 2 = 305 kernels = 305 / 11 =
    27.73 layers."""
    if weight_dtype is not Dtype.FP8 or weight_only:
        return 0.0
    a = spec.attention
    mla = a is not None and a.kind is AttentionKind.MLA
    attn_layers = spec.full_attention_layers + spec.sliding_layers
    kernels = attn_layers * (FP8_QUANT_KERNELS_MLA if mla else FP8_QUANT_KERNELS_GQA)
    kernels += spec.linear_layers * FP8_QUANT_KERNELS_LINEAR
    shared = spec.moe_layers if spec.moe is not None and spec.moe.shared_intermediate > 0 else 0
    kernels += (spec.dense_ffn_layers + shared) * FP8_QUANT_KERNELS_FFN
    return kernels / GQA_LAYER_KERNELS
