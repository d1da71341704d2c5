"""The KV an estimated drafter (no --draft-model config) adds per token follows the attention its
weights are counted with (arch.draft): the target's GQA heads, or for an MLA target a multi-head
layer of width h, not the target's compressed latent."""

from __future__ import annotations

import pytest

from tokenplan.api.memory import memory
from tokenplan.api.resolve import PredictRequest
from tokenplan.job.results import MemoryResult

BASE = dict(model="deepseek-r1", gpu="h200", num_gpus=8, tp=8, engine="vllm", weight_dtype="fp8", kv_dtype="bf16")


def _draft_kv(**kw: object) -> float:
    m = memory(PredictRequest(**{**BASE, **kw}))  # type: ignore[arg-type]
    assert isinstance(m, MemoryResult)
    return m.draft_kv_bytes_per_token_per_gpu


@pytest.mark.parametrize(
    ("kw", "expected"),
    [
        # EAGLE-3's one layer, multi-head at h = 7,168: k and v 2 × 7,168 × 2 B = 28,672 B, over TP8
        ({"spec": "eagle3:3"}, 3_584),
        # with attention DP every rank holds the whole layer for its own sequences
        ({"spec": "eagle3:3", "attention_dp": True, "ep": 8}, 28_672),
        # MTP's layer is the target's own MLA: (512 + 64) × 2 B = 1,152 B, replicated on each rank
        ({"spec": "mtp:3"}, 1_152),
    ],
)
def test_drafter_kv_of_an_mla_target(kw, expected):
    assert _draft_kv(**kw) == expected


def test_drafter_kv_of_a_gqa_target_is_its_kv_heads():
    # Llama-3.1-8B: 8 KV heads × (128 + 128) × 2 B = 4,096 B for the one EAGLE-3 layer, TP1
    m = memory(PredictRequest(model="llama-3.1-8b", gpu="h100-sxm", engine="vllm", kv_dtype="bf16", spec="eagle3:3"))
    assert isinstance(m, MemoryResult) and m.draft_kv_bytes_per_token_per_gpu == 4_096
