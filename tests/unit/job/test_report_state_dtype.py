"""The state bytes per sequence that ``predict`` and ``memory`` report follow the launch's
``--mamba-ssm-dtype`` as the memory model does (they printed the config's dtype whatever the flag)."""

from __future__ import annotations

from tokenplan.api.memory import memory
from tokenplan.api.predict import predict
from tokenplan.api.resolve import PredictRequest


def _req(ssm_dtype: str | None) -> PredictRequest:
    return PredictRequest(
        model="qwen3.5-397b-a17b", gpu="b200", num_gpus=4, tp=4, weight_dtype="fp8", kv_dtype="fp8", ssm_dtype=ssm_dtype
    )


def test_a_bfloat16_ssm_state_is_reported_at_its_size():
    # Qwen3.5-397B-A17B (shared/reference config): 60 layers, 3 of each 4 Gated DeltaNet → 45;
    # linear_num_value_heads 64, linear_num_key_heads 16, key/value head dims 128, conv kernel 4.
    # SSM state per layer 64·128·128 elements: 4 B each (config "mamba_ssm_dtype": "float32")
    # = 4,194,304 B, or 2 B (bfloat16) = 2,097,152 B; conv state (2·16·128 + 64·128 = 12,288)·3·2 B
    # = 73,728 B. float32: 45·(4,194,304 + 73,728) = 192,061,440; bfloat16: 45·2,170,880 = 97,689,600.
    assert 45 * (64 * 128 * 128 * 4 + 12_288 * 3 * 2) == 192_061_440
    assert 45 * (64 * 128 * 128 * 2 + 12_288 * 3 * 2) == 97_689_600
    assert predict(_req(None)).state_bytes_per_sequence == 192_061_440
    assert predict(_req("bfloat16")).state_bytes_per_sequence == 97_689_600
    assert memory(_req("bfloat16")).state_bytes_per_sequence == 97_689_600
