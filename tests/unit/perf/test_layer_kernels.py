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
