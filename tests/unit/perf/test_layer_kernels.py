"""Small-kernel latency by layer type (``perf.layer_kernels``): an MLA layer launches 4 kernels more
than the 11 of a GQA layer (SGLang's decode path, counted in the module docstring); other layer types
count as one GQA layer; the DSA indexer adds its own. Layer counts from the catalog's configs
(``catalog/models``, each from its Hugging Face config.json, SOURCES.md)."""

from __future__ import annotations

import pytest

from tokenplan.catalog import load_model
from tokenplan.perf.layer_kernels import MLA_LAYER_LATENCIES, latency_layers


def test_an_mla_layer_counts_fifteen_elevenths():
    # 11 kernels of a GQA layer with a dense MLP; MLA adds q_a_layernorm, kv_a_layernorm, q_b_proj and
    # the two absorbed bmm's and drops the query copy: 11 + 5 − 1 = 15 → 4/11 more per layer.
    assert MLA_LAYER_LATENCIES == pytest.approx(4 / 11, rel=1e-12)
    # DeepSeek-R1: num_hidden_layers 61, all MLA, no index_topk → 61 + 61·4/11 = 61 + 22.1818… = 83.1818…
    assert latency_layers(load_model("deepseek-r1")) == pytest.approx(83.181818, rel=1e-6)


def test_gqa_hybrid_and_block_sparse_layers_count_one_each():
    # Llama-3.1-8B: 32 GQA layers; Qwen3.6-27B: 64 layers (48 Gated DeltaNet + 16 GQA), each counted as
    # one; MiniMax-M3's block-sparse GQA has no DSA indexer.
    assert latency_layers(load_model("llama-3.1-8b")) == 32
    assert latency_layers(load_model("qwen3.6-27b")) == 64
    # MiniMax-M3's config.json: num_hidden_layers 60
    assert latency_layers(load_model("minimax-m3")) == 60


def test_a_dsa_layer_adds_its_indexer_on_top_of_the_mla_extra():
    # GLM-5: 78 MLA layers with index_topk 2,048 → 78 + 78·4/11 + 78·1.0 = 156 + 28.3636… = 184.3636…
    assert latency_layers(load_model("glm-5")) == pytest.approx(184.363636, rel=1e-6)


def test_fp8_linears_outside_the_routed_experts_each_add_a_quantization_kernel():
    from tokenplan.perf.layer_kernels import quant_latency_layers
    from tokenplan.units import Dtype

    # DeepSeek-R1 (config.json: 61 layers, first_k_dense_replace 3, n_shared_experts 1): 61 MLA blocks
    # × 3 (fused_qkv_a, q_b, o) + 3 dense FFNs × 2 + 58 shared experts × 2 = 183 + 6 + 116 = 305
    # kernels = 305/11 = 27.727… layers
    assert quant_latency_layers(load_model("deepseek-r1"), Dtype.FP8) == pytest.approx(305 / 11, rel=1e-12)
    # Qwen3.6-27B: 16 GQA blocks × 2 + 48 Gated DeltaNet blocks × 3 + 64 dense FFNs × 2 = 32 + 144 +
    # 128 = 304 kernels
    assert quant_latency_layers(load_model("qwen3.6-27b"), Dtype.FP8) == pytest.approx(304 / 11, rel=1e-12)
    # Qwen3-235B-A22B: 94 GQA blocks × 2, MoE without a shared expert: 188 kernels
    assert quant_latency_layers(load_model("qwen3-235b-a22b"), Dtype.FP8) == pytest.approx(188 / 11, rel=1e-12)
    # BF16 runs no quantization; NVFP4 keeps DeepSeek's attention in BF16 and TensorRT-LLM fuses the
    # FFN's NVFP4 quantization into the all-reduce + RMSNorm: none counted
    for dtype in (Dtype.BF16, Dtype.NVFP4, Dtype.MXFP4):
        assert quant_latency_layers(load_model("deepseek-r1"), dtype) == 0.0
