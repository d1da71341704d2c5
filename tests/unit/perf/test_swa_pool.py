"""SGLang sizes a sliding-window model's two pools together: every full-attention token of the
pool brings ``--swa-full-tokens-ratio`` (0.8) tokens of sliding-window KV (HybridSWAPoolConfigurator:
"bytes_per_full_token = F * n_full + r * S * n_swa"), so its KV capacity is the pool over that sum;
vLLM's sliding layers hold only their window per request."""

from __future__ import annotations

import pytest

from tokenplan.api.memory import memory
from tokenplan.api.resolve import PredictRequest
from tokenplan.job.results import MemoryResult


def _memory(engine: str, gpu: str = "h100-sxm") -> MemoryResult:
    m = memory(PredictRequest(model="gpt-oss-120b", gpu=gpu, engine=engine, kv_dtype="fp8", weight_dtype="auto"))
    assert isinstance(m, MemoryResult)
    return m


def test_sglang_charges_the_sliding_pool_in_proportion_to_the_full_one():
    m = _memory("sglang")
    # gpt-oss-120b (config.json): 36 layers alternating sliding (window 128) and full attention,
    # 8 KV heads × head_dim 64; FP8 KV: 8·64·2·1 B = 1,024 B per layer and token.
    # F = 18 full layers × 1,024 = 18,432 B; S = 18 sliding layers × 1,024 = 18,432 B
    assert m.kv_bytes_per_token_per_gpu == 18 * 1024 == 18_432
    # per full token: 18,432 + 0.8 × 18,432 = 33,177.6 B
    assert m.kv_capacity_tokens == m.kv_pool_bytes // 33_177.6  # whole tokens
    # sequences of ISL + OSL = 2,048 tokens: capacity / 2,048 (the sliding pool never binds first)
    assert m.max_sequences == pytest.approx(m.kv_capacity_tokens / 2048, rel=1e-12)


def test_vllm_holds_only_the_window_of_the_sliding_layers():
    m = _memory("vllm", "h200")  # on one H100 vLLM does not start (its whole-context check)
    # the pool over the full layers' 18,432 B per token; each sequence adds 128 sliding tokens:
    # max sequences = pool / (18,432·2,048 + 18,432·128)
    assert m.kv_capacity_tokens == m.kv_pool_bytes // 18_432  # whole tokens
    assert m.max_sequences == pytest.approx(m.kv_pool_bytes / (18_432 * 2048 + 18_432 * 128), rel=1e-12)


def test_the_memory_result_states_what_the_pool_takes_per_token():
    # FP8 KV (above): F = 18,432 B, and the sliding pool sized with it takes 0.8 · 18,432 B more:
    # 33,177.6 B of the pool a token, so the KV capacity × that is the pool (no state shares it).
    # vLLM's sliding layers hold only their window: its pool takes F per token.
    m = _memory("sglang")
    assert m.kv_bytes_per_token_per_gpu == 18_432
    assert m.pool_bytes_per_token_per_gpu == pytest.approx(18_432 * 1.8)
    # the pool holds whole tokens: under one token's bytes are left over
    assert 0 <= m.kv_pool_bytes - m.kv_capacity_tokens * m.pool_bytes_per_token_per_gpu < m.pool_bytes_per_token_per_gpu
    assert _memory("vllm", "h200").pool_bytes_per_token_per_gpu == 18_432  # on an H100 vLLM does not start
