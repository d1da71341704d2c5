"""KV-cache bytes per token and recurrent state per sequence, against hand arithmetic.

Every expected value below is derived by hand from the shipped ``config.json``
(src/tokenplan/catalog/models/*.json) with the per-layer rules the literature gives:

- GQA/MHA: layers × KV heads × head_dim × 2 (K and V) × bytes per element.
- MLA (DeepSeek-V3 report, arXiv:2412.19437 §2.1.1): layers × (kv_lora_rank + qk_rope_head_dim)
  × bytes — one compressed latent and one decoupled RoPE key per token per layer.
- Gated DeltaNet / Mamba-2: per layer an SSM state n_v·d_k·d_v in float32 (the configs'
  ``mamba_ssm_dtype``/``mamba_ssm_cache_dtype``) plus a conv state conv_dim·(kernel − 1) in
  BF16 (SGLang ``Mamba2StateShape``); conv_dim = 2·n_k·d_k + n_v·d_v for GDN,
  heads·head_dim + 2·n_groups·state for Mamba-2.

BF16 and FP8 are 2 and 1 bytes per element, so every GQA/MLA figure halves at FP8.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from tokenplan.arch.kv import (
    kv_bytes_per_token,
    sliding_kv_bytes_per_token,
    state_bytes_per_sequence,
)
from tokenplan.catalog import load_model, model_names
from tokenplan.errors import InputError
from tokenplan.perf.memory import MemoryBreakdown
from tokenplan.units import Dtype


def _one_gpu_pool(pool_bytes: float, kv: float, sliding: float, state: float, window: int) -> MemoryBreakdown:
    """A TP1 breakdown holding ``pool_bytes`` of cache, so that max_sequences = pool / per-sequence."""
    return MemoryBreakdown(
        gpu_bytes=0.0,
        weight_bytes_per_gpu=0.0,
        reserve_bytes=0.0,
        kv_pool_bytes=pool_bytes,
        state_pool_bytes=0.0,
        kv_bytes_per_token_per_gpu=kv,
        sliding_bytes_per_token_per_gpu=sliding,
        state_bytes_per_sequence_per_gpu=state,
        sequence_shards=1,
        kv_capacity_tokens=0.0,
        state_slots=None,
        sliding_window=window,
    )


# (model, whole-model BF16 KV bytes per token over the full-attention layers, hand arithmetic)
KV_BF16 = [
    # num_hidden_layers 32, num_key_value_heads 8, head_dim 4096/32 = 128.
    ("llama-3.1-8b", 32 * 8 * 128 * 2 * 2),  # = 131,072
    # 80 layers, 8 KV heads, head_dim 8192/64 = 128: 80·8·128·4 = 327,680.
    ("llama-2-70b", 327_680),
    ("llama-3.3-70b", 327_680),
    # 126 layers, 8 KV heads, head_dim 16384/128 = 128: 126·8·128·4 = 516,096.
    ("llama-3.1-405b", 516_096),
    # 32 layers, 8 KV heads, head_dim 4096/32 = 128; sliding_window null → all full: 131,072.
    ("mixtral-8x7b", 131_072),
    # 36 layers, 8 KV heads, head_dim 128: 36·8·128·4 = 147,456.
    ("qwen3-8b", 147_456),
    # 64 layers, 8 KV heads, head_dim 128: 64·8·128·4 = 262,144.
    ("qwen3-32b", 262_144),
    # 48 layers, 4 KV heads, head_dim 128: 48·4·128·4 = 98,304.
    ("qwen3-30b-a3b", 98_304),
    # 94 layers, 4 KV heads, head_dim 128: 94·4·128·4 = 192,512.
    ("qwen3-235b-a22b", 192_512),
    # 62 layers, 8 KV heads, head_dim 128: 62·8·128·4 = 253,952.
    ("minimax-m2.5", 253_952),
    # MLA: 61 layers × (kv_lora_rank 512 + qk_rope_head_dim 64) × 2 B = 61·1,152 = 70,272.
    ("deepseek-v3", 61 * (512 + 64) * 2),
    ("deepseek-r1", 70_272),
    ("kimi-k2", 70_272),
    ("kimi-k2.5", 70_272),
    # gpt-oss-120b: layer_types 18 full + 18 sliding; 8 KV heads, head_dim 64:
    # full layers 18·8·64·2·2 = 36,864.
    ("gpt-oss-120b", 18 * 8 * 64 * 2 * 2),
    # gpt-oss-20b: 12 full + 12 sliding, 8 KV heads, head_dim 64: 12·8·64·4 = 24,576.
    ("gpt-oss-20b", 24_576),
    # Qwen3.6-27B: 64 layers, full_attention_interval 4 → 16 full-attention layers (48 GDN);
    # 4 KV heads, head_dim 256: 16·4·256·2·2 = 65,536.
    ("qwen3.6-27b", 16 * 4 * 256 * 2 * 2),
    ("qwen3.5-27b", 65_536),
    # Qwen3-Next-80B: 48 layers / 4 → 12 full; 2 KV heads, head_dim 256: 12·2·256·4 = 24,576.
    ("qwen3-next-80b-a3b", 24_576),
    # Qwen3.5-122B: 48/4 = 12 full; 2 KV heads × 256: 12·2·256·4 = 24,576.
    ("qwen3.5-122b-a10b", 24_576),
    # Qwen3.5/3.6-35B-A3B: 40/4 = 10 full; 2 × 256: 10·2·256·4 = 20,480.
    ("qwen3.5-35b-a3b", 20_480),
    ("qwen3.6-35b-a3b", 20_480),
    # Qwen3.5-397B: 60/4 = 15 full; 2 × 256: 15·2·256·4 = 30,720.
    ("qwen3.5-397b-a17b", 30_720),
    # Nemotron-3-Nano: hybrid_override_pattern holds 6 '*' (attention) of 52 layers;
    # 2 KV heads, head_dim 128: 6·2·128·4 = 6,144.
    ("nemotron-3-nano-30b-a3b", 6_144),
]

# Sparse-attention models carry an indexer key per token per layer on top of their KV
# (both named approximations; the index key is stored at a fixed width whatever the KV dtype).
KV_BF16_WITH_INDEX = [
    # GLM-5 (MLA + DSA): 78 layers × ((512 + 64)·2 B latent + index_head_dim 128 × 1 B FP8 key)
    # = 78 × 1,280 = 99,840; at FP8 KV: 78 × (576 + 128) = 54,912.
    ("glm-5", 99_840, 54_912),
    # MiniMax-M3 (GQA + block-sparse): 60 layers × (4 KV heads·128·2·2 = 2,048 + a BF16 index
    # key of 4 index heads × 128 × 2 B = 1,024) = 60 × 3,072 = 184,320; FP8: 60 × (1,024 + 1,024)
    # = 122,880.
    ("minimax-m3", 184_320, 122_880),
]


def test_every_shipped_model_has_a_hand_derived_kv_figure():
    covered = {name for name, _ in KV_BF16} | {name for name, *_ in KV_BF16_WITH_INDEX}
    assert covered == set(model_names())


@pytest.mark.parametrize(("name", "expected"), KV_BF16)
def test_kv_bytes_per_token_bf16_matches_hand_arithmetic(name, expected):
    assert kv_bytes_per_token(load_model(name), Dtype.BF16) == expected


@pytest.mark.parametrize(("name", "expected"), KV_BF16)
def test_fp8_kv_cache_halves_the_bytes_per_token(name, expected):
    # FP8 stores one byte per element against BF16's two.
    assert kv_bytes_per_token(load_model(name), Dtype.FP8) == expected / 2


@pytest.mark.parametrize(("name", "bf16", "fp8"), KV_BF16_WITH_INDEX)
def test_sparse_attention_index_key_adds_fixed_bytes_per_layer(name, bf16, fp8):
    model = load_model(name)
    assert model.approximations  # the index key is part of a named approximation
    assert kv_bytes_per_token(model, Dtype.BF16) == bf16
    assert kv_bytes_per_token(model, Dtype.FP8) == fp8


def test_llama_3_1_8b_bf16_is_131072_bytes_per_token():
    # 32 layers × 8 KV heads × 128 head_dim × 2 (K,V) × 2 bytes = 131,072
    assert kv_bytes_per_token(load_model("llama-3.1-8b"), Dtype.BF16) == 131_072


def test_deepseek_v3_mla_bf16_is_70272_bytes_per_token():
    # (512 + 64) × 61 layers × 2 bytes = 70,272 — not 61·128 heads·(192+128)·2 = 4,997,120 of
    # an uncompressed MHA cache.
    assert kv_bytes_per_token(load_model("deepseek-v3"), Dtype.BF16) == 70_272


def test_gpt_oss_120b_full_and_sliding_layers_are_counted_apart():
    model = load_model("gpt-oss-120b")
    # 18 full layers: 18·8·64·2·2 = 36,864; the 18 sliding layers hold the same per token,
    # but only for the last sliding_window = 128 tokens.
    assert kv_bytes_per_token(model, Dtype.BF16) == 36_864
    assert sliding_kv_bytes_per_token(model, Dtype.BF16) == 36_864
    assert model.sliding_window == 128
    assert model.full_attention_layers == 18 and model.sliding_layers == 18


def test_gpt_oss_sequence_cache_caps_sliding_layers_at_the_window():
    model = load_model("gpt-oss-120b")
    kv, sliding = kv_bytes_per_token(model, Dtype.BF16), sliding_kv_bytes_per_token(model, Dtype.BF16)
    # A 10,000-token sequence holds 36,864·10,000 (full) + 36,864·128 (sliding, capped) + no state
    # = 368,640,000 + 4,718,592 = 373,358,592 B: a pool of exactly that holds one sequence.
    assert _one_gpu_pool(373_358_592, kv, sliding, 0.0, model.sliding_window).max_sequences(10_000) == 1.0
    # 100 tokens (below the window): 36,864·100 + 36,864·100 = 7,372,800 B per sequence.
    assert _one_gpu_pool(7_372_800, kv, sliding, 0.0, model.sliding_window).max_sequences(100) == 1.0


def test_models_without_sliding_layers_have_no_sliding_kv():
    assert sliding_kv_bytes_per_token(load_model("llama-3.1-8b"), Dtype.BF16) == 0


def test_qwen3_6_27b_state_per_sequence_is_153944064_bytes():
    # 48 Gated DeltaNet layers, each: SSM state 48 v-heads × 128 × 128 × 4 B (float32) = 3,145,728
    # plus conv state conv_dim·(kernel−1)·2 B with conv_dim = 2·16·128 + 48·128 = 10,240:
    # 10,240·3·2 = 61,440 → 3,207,168 per layer × 48 = 153,944,064 (≈ 146.8 MiB).
    expected = 48 * (48 * 128 * 128 * 4 + (2 * 16 * 128 + 48 * 128) * 3 * 2)
    assert expected == 153_944_064
    assert state_bytes_per_sequence(load_model("qwen3.6-27b")) == expected


def test_qwen3_6_27b_bf16_state_override_halves_the_ssm_part_only():
    # SSM part 48·(48·128·128·2) = 75,497,472; conv part stays BF16: 48·61,440 = 2,949,120
    # → 78,446,592.
    assert state_bytes_per_sequence(load_model("qwen3.6-27b"), "bfloat16") == 78_446_592


# (model, state bytes per sequence, hand arithmetic in the comment)
STATE = [
    # Qwen3-Next-80B: 36 GDN layers × (32·128·128·4 = 2,097,152 + conv (2·16·128 + 32·128 = 8,192)·3·2
    # = 49,152) = 36 × 2,146,304 = 77,266,944.
    ("qwen3-next-80b-a3b", 77_266_944),
    # Qwen3.5-122B: 36 × (64·128·128·4 = 4,194,304 + (4,096 + 8,192)·6 = 73,728) = 36 × 4,268,032
    # = 153,649,152.
    ("qwen3.5-122b-a10b", 153_649_152),
    # Qwen3.5-397B: 45 × 4,268,032 = 192,061,440.
    ("qwen3.5-397b-a17b", 192_061_440),
    # Qwen3.5/3.6-35B-A3B: 30 × 2,146,304 = 64,389,120.
    ("qwen3.5-35b-a3b", 64_389_120),
    ("qwen3.6-35b-a3b", 64_389_120),
    ("qwen3.5-27b", 153_944_064),
    # Nemotron-3-Nano: 23 Mamba-2 layers ('M' in the pattern) × (64 heads·64 head_dim·128 state·4 B
    # = 2,097,152 + conv (64·64 + 2·8 groups·128 = 6,144)·3·2 = 36,864) = 23 × 2,134,016 = 49,082,368.
    ("nemotron-3-nano-30b-a3b", 49_082_368),
]


@pytest.mark.parametrize(("name", "expected"), STATE)
def test_state_bytes_per_sequence_matches_hand_arithmetic(name, expected):
    assert state_bytes_per_sequence(load_model(name)) == expected


@pytest.mark.parametrize("name", ["llama-3.1-8b", "deepseek-v3", "gpt-oss-120b", "mixtral-8x7b"])
def test_models_without_linear_layers_hold_no_state(name):
    assert state_bytes_per_sequence(load_model(name)) == 0


def test_qwen3_6_27b_state_outweighs_bf16_kv_below_4_7k_tokens():
    # Per decode step a GDN layer reads and writes its state (2 × 153,944,064 B) while attention
    # reads the KV cache once (65,536 B/token × context): equal at 2·153,944,064 / 65,536
    # = 307,888,128 / 65,536 = 4,698 tokens exactly (65,536 × 4,698 = 307,888,128; issue 2:
    # "below ~4.7K tokens of context").
    model = load_model("qwen3.6-27b")
    crossover = 2 * state_bytes_per_sequence(model) / kv_bytes_per_token(model, Dtype.BF16)
    assert crossover == 4_698


def test_sequence_cache_adds_kv_and_fixed_state():
    model = load_model("qwen3.6-27b")
    kv, state = kv_bytes_per_token(model, Dtype.BF16), state_bytes_per_sequence(model)
    # One pool for KV and state (vLLM): 3,000 tokens take 65,536·3,000 + 153,944,064
    # = 196,608,000 + 153,944,064 = 350,552,064 B; twice that holds two sequences.
    assert _one_gpu_pool(2 * 350_552_064, kv, 0.0, state, 0).max_sequences(3_000) == 2.0


def test_an_unknown_ssm_dtype_is_refused_not_taken_as_float32():
    model = load_model("qwen3.6-27b")
    with pytest.raises(InputError, match="ssm_dtype 'fp8'"):
        state_bytes_per_sequence(model, "fp8")
    assert model.linear is not None
    odd = replace(model, linear=replace(model.linear, state_dtype="float64"))
    with pytest.raises(InputError, match="float64"):
        state_bytes_per_sequence(odd)
