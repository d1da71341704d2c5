"""The DSA indexer's kernels (``perf.sparse_indexer``): one more layer latency per sparse-attention
MLA layer, none elsewhere. Configs from the catalog (``catalog/models``, each from its Hugging Face
config.json, SOURCES.md)."""

from __future__ import annotations

from tokenplan.catalog import load_model
from tokenplan.perf.sparse_indexer import INDEXER_LAYER_LATENCIES, indexer_latency_layers


def test_glm_5_adds_one_layer_latency_per_layer():
    # GLM-5's config.json: num_hidden_layers 78, every one MLA with index_topk 2,048 (DSA) → 78 × 1.0.
    assert INDEXER_LAYER_LATENCIES == 1.0
    assert indexer_latency_layers(load_model("glm-5")) == 78.0


def test_dense_mla_block_sparse_and_gqa_models_add_none():
    # DeepSeek-R1: MLA without index_topk; MiniMax-M3: its own block-sparse GQA indexer, not these
    # kernels; Llama-3.1-8B: dense GQA.
    for name in ("deepseek-r1", "minimax-m3", "llama-3.1-8b"):
        assert indexer_latency_layers(load_model(name)) == 0.0
