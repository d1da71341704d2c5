"""trtllm-bench's own limits for offline runs (TRT-LLM ``bench/tuning/heuristics.py``
``calc_engine_setting`` / ``finetune_setting``), and the KV dtype ``auto`` resolves to."""

from __future__ import annotations

from tokenplan.api.resolve import PredictRequest, resolve
from tokenplan.engines.trtllm import trtllm_bench_limits
from tokenplan.units import Dtype


def test_bench_limits_round_a_mid_batch_to_128s_and_tokens_to_the_2048_floor():
    # cache = (100e9 − 10e9) × 0.95 = 85.5e9 B; a request holds 1e5 B/token × 2,000 tokens = 2e8 B
    # → 427.5 requests → 256 ≤ bs < 1024: 128 · ceil(427.5/128) = 128 · 4 = 512;
    # tokens = 427.5 × (1 + 1000/1000) = 855 < 4096 → max(2048, 256 · ceil(855/256) = 1024) = 2048.
    assert trtllm_bench_limits(100e9, 10e9, 1e5, 0.0, 1000, 1000, 1, 1, True) == (512, 2048)


def test_bench_limits_cap_the_batch_at_4096_and_round_tokens_to_1024s():
    # 85.5e9 / (1e4 × 256) = 33,398 requests → min(·, 4096) = 4096 → 256 · 16 = 4096;
    # tokens = 4096 × (1 + 128/128) = 8192 ≥ 8192 → 1024 · 8 = 8192.
    assert trtllm_bench_limits(100e9, 10e9, 1e4, 0.0, 128, 128, 1, 1, True) == (4096, 8192)


def test_bench_limits_divide_by_pipeline_stages():
    # 427.5 requests / PP2 = 213.75 < 256 → max(64, 32 · ceil(213.75/32) = 224) = 224;
    # tokens 213.75 × 2 = 427.5 → 2048.
    assert trtllm_bench_limits(100e9, 10e9, 1e5, 0.0, 1000, 1000, 1, 2, True) == (224, 2048)


def test_bench_limits_for_hybrids_square_the_fraction_and_round_down_to_even():
    # cache = 90e9 × 0.95² = 81.225e9; a request holds 2e8 + 1e8 B → 270.75 → 2 · floor(135.375) = 270.
    assert trtllm_bench_limits(100e9, 10e9, 1e5, 1e8, 1000, 1000, 1, 1, True) == (270, 2048)


def test_bench_keeps_the_llm_api_defaults_for_formats_it_does_not_tune():
    # MXFP4 (gpt-oss) is not in TUNED_QUANTS: max_batch_size 2048, max_num_tokens 8192.
    assert trtllm_bench_limits(100e9, 10e9, 1e5, 0.0, 1000, 1000, 1, 1, False) == (2048, 8192)


def test_kv_auto_is_fp8_for_trtllm_with_quantized_checkpoints_and_bf16_otherwise():
    def kv(engine: str, weight: str) -> Dtype:
        return resolve(
            PredictRequest(model="llama-3.1-8b", gpu="h200", engine=engine, weight_dtype=weight)
        ).config.kv_dtype

    assert kv("trtllm", "fp8") is Dtype.FP8
    assert kv("trtllm", "nvfp4") is Dtype.FP8
    assert kv("trtllm", "bf16") is Dtype.BF16
    assert kv("sglang", "fp8") is Dtype.BF16
    assert kv("vllm", "fp8") is Dtype.BF16
