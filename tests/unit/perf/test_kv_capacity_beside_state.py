"""Where a hybrid model's state shares the pool with its KV (SGLang with --disable-radix-cache and
a running cap), the KV capacity a user reads is what the running requests' state leaves, not the
whole pool: the memory table's "KV cache" term over the bytes per token."""

from __future__ import annotations

import pytest

from tokenplan.api.memory import memory
from tokenplan.api.resolve import PredictRequest
from tokenplan.job.results import MemoryResult


def test_kv_capacity_is_the_kv_term_of_the_allocation_at_the_running_limit():
    m = memory(
        PredictRequest(
            model="qwen3.6-27b",
            gpu="b200",
            weight_dtype="fp8",
            kv_dtype="fp8",
            max_running=406,
            disable_radix_cache=True,
        )
    )
    assert isinstance(m, MemoryResult) and m.state_slots is None  # one pool for state and KV
    # Qwen3.6-27B FP8 KV: 16 full-attention layers × 4 KV heads × 256 × 2 × 1 B = 32,768 B per token
    assert m.kv_bytes_per_token_per_gpu == 16 * 4 * 256 * 2 == 32_768
    assert m.kv_capacity_tokens == pytest.approx(m.allocation["kv_cache"] / 32_768, abs=1)  # whole tokens
    # and less than the whole pool, which the state shares
    assert m.kv_capacity_tokens < m.kv_pool_bytes / 32_768 * 0.6
