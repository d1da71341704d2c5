"""The kernels a sparse-attention layer's indexer adds to each step (DeepSeek Sparse Attention).

A DSA layer (DeepSeek-V3.2, GLM-5: ``index_topk``, ``index_n_heads``, ``index_head_dim`` in the
config) picks the ``index_topk`` tokens each query attends to with a "lightning indexer" that runs
before the attention in every layer and every step. Its decode path in SGLang
(``python/sglang/srt/layers/attention/nsa/nsa_indexer.py``, ``Indexer._get_q_k_bf16`` and
``forward``) and in LightLLM's DeepSeek-V3.2 port launches, per layer: the ``wq_b`` and ``wk``
projections and ``weights_proj`` (three small GEMMs, two when ``wk`` and ``weights_proj`` are
fused), the key's LayerNorm, the indexer's RoPE on query and key, a Hadamard rotation of each
(``rotate_activation``, two kernels), the FP8 quantization of each (two), the write of the key
into the index cache, DeepGEMM's paged-MQA-logits metadata and logits kernels, the head-gate
weights, and the top-k selection (``fast_topk_transform_fused``) — about 13 kernels, as many as
the rest of a layer's small kernels and GEMM launches together (the ~10 of
``Efficiency.layer_latency_s`` plus the layer's GEMMs and attention). At small batch each is as
short as a kernel can be, so the indexer costs about one more layer's ``layer_latency_s`` per
sparse-attention layer. Its bytes (the FP8 index keys, ``Attention.index_bytes_per_token``) are
read with the KV cache (``arch.kv``); the logits' FLOPs are small beside the attention's.

DSA sits on MLA layers (its config's ``index_topk``); MiniMax-M3's block-sparse attention on GQA
layers picks blocks with an indexer of its own (4 index heads, blocks of 128 tokens, on some
layers only: ``sparse_attention_freq``) whose kernels are not these, and gets no such term.
"""

from __future__ import annotations

from tokenplan.arch.spec import AttentionKind, ModelSpec

# Per-layer kernel latencies the indexer of one sparse-attention layer adds, in units of one
# layer's ``layer_latency_s``: ~13 indexer kernels against the ~10 small kernels plus GEMM and
# attention launches that ``layer_latency_s`` stands for (module docstring) — about one.
INDEXER_LAYER_LATENCIES = 1.0


def indexer_latency_layers(spec: ModelSpec) -> float:
    """Layer latencies the sparse-attention indexers of ``spec`` add per step: one per layer
    with a DSA indexer (``INDEXER_LAYER_LATENCIES`` × its full-attention layers), 0 for a model
    without DSA (dense attention, or MiniMax-M3's block-sparse GQA)."""
    a = spec.attention
    if a is None or not a.sparse_topk_tokens or a.kind is not AttentionKind.MLA:
        return 0.0
    return INDEXER_LAYER_LATENCIES * spec.full_attention_layers
