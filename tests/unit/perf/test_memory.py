"""Per-GPU memory: weights by dtype and sharding, the engine's reserve and memory fraction, and
the KV capacity left — each against hand arithmetic.

Sources of the rules: SGLang ``arg_groups/memory_hook.py`` (reserve = 512 MiB + 1.5 MiB ×
max(chunked_prefill_size, 2048) + TP·PP/8 × 1024 MiB + 2 MiB × cuda-graph max_bs, at least
10 GiB on GPUs above 60 GiB; mem_fraction_static = (total − reserve) / total), vLLM
``CacheConfig.gpu_memory_utilization`` = 0.92; see src/tokenplan/catalog/engines.yaml.
GPU memory sizes are nvidia-smi's memory.total in src/tokenplan/catalog/gpus.yaml
(H100 SXM: 81,559 MiB = 85,520,809,984 B); the engines size against the total the CUDA runtime
reports, 0.996 of it (perf.memory.CUDA_VISIBLE_SHARE: 85,178,726,744.064 B on the H100), and
SGLang against that less its start-up (0.5 GiB of CUDA context, + 2.0 GiB of communicators at
TP × PP > 1; catalog/engines.yaml).
"""

from __future__ import annotations

import dataclasses

import pytest

from tokenplan.catalog import load_engine, load_gpu, load_model
from tokenplan.perf.layout import Layout
from tokenplan.perf.memory import memory_breakdown, weight_bytes_per_gpu
from tokenplan.perf.speculative import SpecDecode
from tokenplan.units import Dtype, GiB, MiB

# Llama-3.1-8B parameters without norms (tests/unit/arch/test_params.py):
# embedding 128,256·4096 = 525,336,576 (lm_head the same), attention 32·41,943,040 =
# 1,342,177,280, FFN 32·3·4096·14,336 = 5,637,144,576 → 8,029,995,008.
LLAMA_PARAMS = 8_029_995_008
LLAMA_EMBEDDINGS = 2 * 525_336_576  # embedding + lm_head = 1,050,673,152
LLAMA_BF16_BYTES = LLAMA_PARAMS * 2  # = 16,059,990,016
LLAMA_KV_PER_TOKEN = 131_072  # 32 · 8 · 128 · 2 · 2
# The RoPE cos/sin table every GPU holds whole (perf.memory.rope_table_bytes): 131,072 positions
# × 128 rotated dimensions × 2 B = 33,554,432.
LLAMA_ROPE = 33_554_432

H100_MIB = 81_559
H100_VISIBLE = 85_520_809_984 * 0.996  # = 85,178,726,744.064 B
CONTEXT = 536_870_912  # 0.5 GiB


# ---------------------------------------------------------------- weights
def test_llama_8b_bf16_weights_on_one_gpu_are_two_bytes_per_parameter():
    # 16,059,990,016 + the RoPE table 33,554,432 = 16,093,544,448
    assert LLAMA_BF16_BYTES == 16_059_990_016
    got = weight_bytes_per_gpu(load_model("llama-3.1-8b"), Layout(tp=1), Dtype.BF16)
    assert got == LLAMA_BF16_BYTES + LLAMA_ROPE == 16_093_544_448


def test_llama_8b_tp2_halves_every_component():
    # vocabulary-parallel embedding and lm_head, column/row-parallel linears, and 8 KV heads split
    # 4 + 4: no parameter is replicated at TP2 → 16,059,990,016 / 2 = 8,029,995,008, + the RoPE
    # table each GPU holds whole (33,554,432) = 8,063,549,440.
    assert weight_bytes_per_gpu(load_model("llama-3.1-8b"), Layout(tp=2), Dtype.BF16) == 8_063_549_440


def test_llama_8b_pp2_puts_embedding_on_the_first_stage_and_lm_head_on_the_last():
    # PP2: 16 decoder layers per stage, (1,342,177,280 + 5,637,144,576) / 2 = 3,489,660,928
    # params; the first stage adds the embedding, the last the lm_head (525,336,576 each; untied),
    # so each stage holds 4,014,997,504 params × 2 B = 8,029,995,008 B, + its RoPE table.
    got = weight_bytes_per_gpu(load_model("llama-3.1-8b"), Layout(tp=1, pp=2), Dtype.BF16)
    assert got == (525_336_576 + (1_342_177_280 + 5_637_144_576) / 2) * 2 + LLAMA_ROPE


def test_llama_8b_fp8_keeps_embeddings_and_lm_head_in_bf16():
    # embedding + lm_head 1,050,673,152 × 2 B = 2,101,346,304; decoder linears
    # 1,342,177,280 + 5,637,144,576 = 6,979,321,856 × 1 B → 9,080,668,160; + the RoPE table
    # (16 bits in any format) 33,554,432 = 9,114,222,592.
    assert weight_bytes_per_gpu(load_model("llama-3.1-8b"), Layout(), Dtype.FP8) == 9_114_222_592


def test_qwen3_6_27b_tp8_replicates_its_four_kv_heads():
    # Qwen3.6-27B (params in test_params.py) at TP8, BF16:
    #   embeddings 2·1,271,398,400 / 8 = 317,849,600;
    #   attention per layer: q (with gate) 62,914,560 + o 31,457,280 = 94,371,840 / 8 = 11,796,480,
    #   k and v: 4 KV heads < TP8, so each GPU holds 1 whole head: 2·5120·256 = 2,621,440
    #   → 14,417,920 × 16 layers = 230,686,720;
    #   GDN 5,562,040,320 / 8 = 695,255,040; FFN 17,112,760,320 / 8 = 2,139,095,040.
    #   Sum 3,382,886,400 params × 2 B = 6,765,772,800.
    # Vision tower (test_memory_engine_logs: 27 blocks of 1,152, out 5,120): 455,897,088 sharded
    #   / 8 + 4,833,008 replicated = 61,820,144 params × 2 B = 123,640,288 → 6,889,413,088.
    # RoPE table: 262,144 positions × 64 rotated dimensions (256 × 0.25) × 2 B = 33,554,432
    #   → 6,922,967,520.
    got = weight_bytes_per_gpu(load_model("qwen3.6-27b"), Layout(tp=8), Dtype.BF16)
    assert got == 6_922_967_520
    # Without replication k, v would shard to 1,310,720 per layer: 16 × 1,310,720 × 2 B = 41,943,040 less.
    assert got - 41_943_040 - 123_640_288 - 33_554_432 == pytest.approx(26_895_319_040 * 2 / 8)


def test_gpt_oss_mxfp4_quantizes_the_routed_experts_only():
    # gpt-oss-120b TP1: experts 36·128·3·2880·2880 = 114,661,785,600 params × (0.5 + 1/32) B
    # = 60,914,073,600; in BF16: embeddings 1,158,266,880 + attention 955,514,880 + routers
    # 13,271,040 = 2,127,052,800 × 2 = 4,254,105,600 → 65,168,179,200 bytes; + the RoPE table
    # 131,072 × 64 × 2 B = 16,777,216 → 65,184,956,416.
    got = weight_bytes_per_gpu(load_model("gpt-oss-120b"), Layout(), Dtype.MXFP4)
    assert got == 65_184_956_416


def test_moe_experts_shard_across_every_gpu_of_the_replica():
    # gpt-oss-120b MXFP4 at TP4: the parameters above / 4 = 16,292,044,800, but the routers
    # (13,271,040 × 2 B = 26,542,080, ReplicatedLinear) and the RoPE table (16,777,216) are whole on
    # each GPU: + 26,542,080 × 3/4 + 16,777,216 = 16,328,728,576.
    got = weight_bytes_per_gpu(load_model("gpt-oss-120b"), Layout(tp=4, ep=4), Dtype.MXFP4)
    assert got == 65_168_179_200 / 4 + 26_542_080 * 3 / 4 + 16_777_216 == 16_328_728_576


# ---------------------------------------------------------------- engine reserve and fraction
def test_sglang_reserve_on_h100_80gb_is_13440_mib():
    gpu = load_gpu("h100-sxm")
    assert gpu.memory_bytes == H100_MIB * MiB
    s = load_engine("sglang").settings(gpu, Layout(), speculative=False)
    # 81,559 MiB is in SGLang's 60–90 GiB bucket: chunked_prefill_size 8192, cuda-graph max_bs 256
    # (TP < 4). reserve = max(512 + 1.5·8192 + 1024·1/8 + 2·256, 10 GiB = 10,240)
    #                   = max(512 + 12,288 + 128 + 512, 10,240) = 13,440 MiB.
    assert s.memory_fraction == pytest.approx((H100_MIB - 13_440) / H100_MIB, rel=1e-12)  # 0.83521...
    assert s.reserve_bytes == 0  # SGLang's fraction already excludes it
    assert s.chunk_tokens == 8192
    assert s.graph_max_bs == 256


def test_sglang_reserve_grows_with_tp_and_graph_batch():
    # H100 TP8: max_bs 512 (TP ≥ 4), TP·PP/8 = 1: 512 + 12,288 + 1,024 + 1,024 = 14,848 MiB.
    s = load_engine("sglang").settings(load_gpu("h100-sxm"), Layout(tp=8), speculative=False)
    assert s.memory_fraction == pytest.approx((H100_MIB - 14_848) / H100_MIB, rel=1e-12)


def test_sglang_reserve_on_b200_uses_the_largest_bucket():
    # B200 183,359 MiB (179 GiB) ≥ 160 GiB: chunk 16,384, max_bs 512:
    # 512 + 1.5·16,384 + 128 + 2·512 = 512 + 24,576 + 128 + 1,024 = 26,240 MiB.
    gpu = load_gpu("b200")
    s = load_engine("sglang").settings(gpu, Layout(), speculative=False)
    assert s.memory_fraction == pytest.approx((183_359 - 26_240) / 183_359, rel=1e-12)
    assert s.chunk_tokens == 16_384


def test_sglang_small_gpu_has_no_10_gib_floor():
    # RTX 5090 32,607 MiB (< 35 GiB bucket): chunk 4096, max_bs 48:
    # 512 + 1.5·4096 + 128 + 2·48 = 512 + 6,144 + 128 + 96 = 6,880 MiB (below 10 GiB, kept:
    # the floor applies above 60 GiB only).
    s = load_engine("sglang").settings(load_gpu("rtx-5090"), Layout(), speculative=False)
    assert s.memory_fraction == pytest.approx((32_607 - 6_880) / 32_607, rel=1e-12)


def test_sglang_caps_running_requests_at_48_with_speculative_decoding():
    s = load_engine("sglang").settings(load_gpu("h100-sxm"), Layout(), speculative=True)
    assert s.max_running == 48
    assert load_engine("sglang").settings(load_gpu("h100-sxm"), Layout(), speculative=False).max_running is None


def test_user_memory_fraction_overrides_the_default():
    s = load_engine("sglang").settings(load_gpu("h100-sxm"), Layout(), speculative=False, memory_fraction=0.7)
    assert s.memory_fraction == 0.7


# ---------------------------------------------------------------- KV capacity
def _breakdown(model, gpu_key, engine, layout=Layout(), weight=Dtype.BF16, kv=Dtype.BF16, ratio=None):
    gpu = load_gpu(gpu_key)
    settings = load_engine(engine).settings(gpu, layout, speculative=False)
    return memory_breakdown(load_model(model), gpu, layout, weight, kv, settings, ratio)


def test_llama_8b_kv_capacity_on_h100_under_sglang():
    m = _breakdown("llama-3.1-8b", "h100-sxm", "sglang")
    # fraction = (81,559 − 13,440) / 81,559 = 68,119 / 81,559; SGLang takes it of the memory free
    # after start-up (TP1: the 0.5 GiB CUDA context only):
    # (85,178,726,744.064 − 536,870,912) × 68,119 / 81,559 − 16,093,544,448 (weights + RoPE table)
    #   = 70,693,836,087.06 − 16,093,544,448 = 54,600,291,639.06 B → / 131,072 = 416,567.17, floored
    #   to whole tokens as SGLang does: 416,567.
    pool = (H100_VISIBLE - CONTEXT) * 68_119 / 81_559 - 16_093_544_448
    assert pool == pytest.approx(54_600_291_639.06, abs=0.01)
    assert m.weight_bytes_per_gpu == LLAMA_BF16_BYTES + LLAMA_ROPE
    assert m.kv_pool_bytes == pytest.approx(pool, rel=1e-12)
    assert m.kv_capacity_tokens == pool // LLAMA_KV_PER_TOKEN == 416_567


def test_llama_8b_fp8_kv_doubles_the_token_capacity():
    bf16 = _breakdown("llama-3.1-8b", "h100-sxm", "sglang")
    fp8 = _breakdown("llama-3.1-8b", "h100-sxm", "sglang", kv=Dtype.FP8)
    # Same pool, 65,536 B per token instead of 131,072.
    assert fp8.kv_capacity_tokens == pytest.approx(2 * bf16.kv_capacity_tokens, rel=1e-12)


def test_llama_8b_max_sequences_is_capacity_over_context():
    m = _breakdown("llama-3.1-8b", "h100-sxm", "sglang")
    # the pool's 416,567 whole tokens / 4,096 tokens per sequence = 101.70 sequences.
    assert m.max_sequences(4096) == pytest.approx(416_567 / 4096, rel=1e-12)
    assert m.max_sequences(4096) == pytest.approx(101.70, abs=0.01)


def test_llama_8b_kv_capacity_on_h100_under_vllm():
    m = _breakdown("llama-3.1-8b", "h100-sxm", "vllm")
    # vLLM: total × 0.92 − weights − non-torch − profiling peak − CUDA-graph estimate (engine-facts
    # §1 "Budget"). H100 ≥ 70 GiB: max_num_batched_tokens 8,192, max_num_seqs 1,024 (V2).
    #   profiling forward: 8,192 tokens × 2 B × (2·4,096 residual + input
    #                      + 3·14,336 gate/up output and SiLU·mul output) = 8,192·2·51,200 = 838,860,800 B;
    #   sampler pass:      1,024 rows × 128,256 vocab × 24 B (BF16 logits 2 + FP32 copy 4 + sort
    #                      values 4 + int64 indices 8 + two bool masks 2 + FP32 probs 4)
    #                      = 3,152,019,456 B; the two run one after the other → peak 3,152,019,456 B;
    #   CUDA graphs:       capture sizes up to min(2·1,024, 512) = 512: [1, 2, 4] + 8..248 step 8
    #                      (31) + 256..512 step 16 (17) = 51 sizes × 24 MiB = 1,283,457,024 B;
    #   non-torch:         0.13 GiB = 139,586,437.12 B.
    # reserve = 3,152,019,456 + 1,283,457,024 + 139,586,437.12 = 4,575,062,917.12 B;
    # pool = 85,178,726,744.064 × 0.92 − 16,093,544,448 (weights + RoPE table) − 4,575,062,917.12
    #      = 78,364,428,604.54 − 20,668,607,365.12 = 57,695,821,239.42 B → / 131,072 = 440,184.18:
    #      440,184 whole tokens.
    reserve = 3_152_019_456 + 1_283_457_024 + 0.13 * 2**30
    assert reserve == pytest.approx(4_575_062_917.12, abs=0.01)
    pool = H100_VISIBLE * 0.92 - 16_093_544_448 - reserve
    assert m.kv_pool_bytes == pytest.approx(pool, rel=1e-12)
    assert m.kv_capacity_tokens == 440_184


def test_vllm_reserve_scales_with_the_model_and_the_token_budget():
    # Qwen3-32B (h 5,120, FFN 25,600, vocab 151,936) TP1 on H100 under vLLM:
    #   forward 8,192 × 2 × (2·5,120 + 3·25,600) = 8,192·2·87,040 = 1,426,063,360 B;
    #   sampler 1,024 × 151,936 × 24 = 3,733,979,136 B (the larger: the peak);
    #   + graphs 1,283,457,024 + non-torch 0.13 GiB 139,586,437.12 → 5,157,022,597.12 B.
    gpu = load_gpu("h100-sxm")
    settings = load_engine("vllm").settings(gpu, Layout(), speculative=False)
    assert (settings.profile_tokens, settings.profile_seqs) == (8192, 1024)
    m = memory_breakdown(load_model("qwen3-32b"), gpu, Layout(), Dtype.BF16, Dtype.BF16, settings, None)
    reserve = 3_733_979_136 + 1_283_457_024 + 0.13 * 2**30
    assert reserve == pytest.approx(5_157_022_597.12, abs=0.01)
    assert m.kv_pool_bytes == pytest.approx(H100_VISIBLE * 0.92 - m.weight_bytes_per_gpu - reserve, rel=1e-12)
    # A smaller token budget (A100 80 GB: 2,048 tokens, 256 seqs, V2) shrinks both terms:
    #   forward 2,048·2·87,040 = 356,515,840; sampler 256 × 151,936 × 24 = 933,494,784 (peak);
    #   graphs up to min(2·256, 512, 2,048) = 512 → 51 sizes, the same 1,283,457,024.
    small = load_engine("vllm").settings(dataclasses.replace(gpu, architecture="ampere"), Layout(), speculative=False)
    a100 = memory_breakdown(load_model("qwen3-32b"), gpu, Layout(), Dtype.BF16, Dtype.BF16, small, None)
    assert a100.kv_pool_bytes - m.kv_pool_bytes == pytest.approx(3_733_979_136 - 933_494_784, rel=1e-12)


def test_tp2_kv_capacity_counts_both_gpus():
    # TP2 on H100: reserve = 512 + 12,288 + 1024·2/8 + 512 = 13,568 MiB; each GPU holds half the
    # weights (8,029,995,008 B) + the whole RoPE table (33,554,432 B) and half the KV heads (65,536 B
    # per token); start-up 0.5 + 2.0 GiB:
    # (85,178,726,744.064 − 2,684,354,560) × 67,991 / 81,559 − 8,063,549,440
    #   = 68,770,765,447.92 − 8,063,549,440 = 60,707,216,007.92 → / 65,536 = 926,318.60: 926,318 whole
    #   tokens per replica.
    m = _breakdown("llama-3.1-8b", "h100-sxm", "sglang", layout=Layout(tp=2))
    assert m.kv_bytes_per_token_per_gpu == 65_536
    assert m.kv_capacity_tokens == 926_318


def test_a_model_larger_than_the_gpu_does_not_fit():
    # Llama-3.1-405B BF16 ≈ 811 GB of weights against 80 GB.
    assert not _breakdown("llama-3.1-405b", "h100-sxm", "sglang").fits


def test_hybrid_state_pool_under_sglang_splits_at_the_memory_ratio():
    # Qwen3.6-27B BF16 on B200, SGLang, --mamba-full-memory-ratio 0.9 (state pool / KV pool):
    # B200: 183,359 MiB = 192,265,846,784 B nominal, 191,496,783,396.864 B visible (× 0.996);
    # weights 26,895,319,040·2 B + the vision tower (455,897,088 + 4,833,008)·2 B = 921,460,192
    #        + the RoPE table 262,144·64·2 B = 33,554,432 → 54,745,652,704 B;
    # usable = (191,496,783,396.864 − 536,870,912) × 157,119 / 183,359 − 54,745,652,704
    #        = 163,632,166,895.05 − 54,745,652,704 = 108,886,514,191.05 B;
    # state pool = usable·0.9/1.9, KV pool = usable/1.9;
    # slots = state pool / 153,944,064 B per sequence = 51,577,822,511.55 / 153,944,064 = 335.04: 335;
    # KV tokens = 57,308,691,679.50 / 65,536 = 874,461.2: 874,461 (whole slots and tokens).
    m = _breakdown("qwen3.6-27b", "b200", "sglang", ratio=0.9)
    usable = (192_265_846_784 * 0.996 - CONTEXT) * 157_119 / 183_359 - 54_745_652_704
    assert usable == pytest.approx(108_886_514_191.05, abs=0.01)
    assert m.state_pool_bytes == pytest.approx(usable * 0.9 / 1.9, rel=1e-12)
    assert m.kv_pool_bytes == pytest.approx(usable / 1.9, rel=1e-12)
    assert m.state_slots == (usable * 0.9 / 1.9) // 153_944_064 == 335
    assert m.kv_capacity_tokens == (usable / 1.9) // 65_536 == 874_461


def test_hybrid_state_shares_one_pool_without_a_ratio():
    # vLLM-style single pool: a 4,000-token sequence holds 65,536·4,000 + 153,944,064
    # = 262,144,000 + 153,944,064 = 416,088,064 B.
    m = _breakdown("qwen3.6-27b", "b200", "vllm")
    assert m.state_slots is None
    assert m.max_sequences(4000) == pytest.approx(m.kv_pool_bytes / 416_088_064, rel=1e-12)


# ------------------------------------------- hybrid state under speculative decoding (issue 10)


def test_sglang_qwen3_6_27b_fp8_b200_mtp3_allocates_term_by_term():
    # SGLang, Qwen3.6-27B (catalog/models/qwen3.6-27b.json), FP8 weights and KV, one B200, MTP k=3
    # (--speculative-num-steps 3 --speculative-num-draft-tokens 4), --disable-radix-cache
    # --max-running-requests 128. Every figure from the config.json and the B200's memory:
    #
    # GPU: nvidia-smi 183,359 MiB = 192,265,846,784 B.
    # Fraction: reserve 512 + 1.5·16,384 + 1,024·1/8 + 2·512 = 26,240 MiB (≥ 160 GiB bucket);
    #   vision cut 0.95·(1 − 0.1·(27·1152²/(24·1024²) − 1)) = 0.95·(1 − 0.1·0.423828125)
    #   = 0.95·0.9576171875 = 0.909736328125 → mem_fraction_static = 157,119/183,359·0.909736328125,
    #   taken of the visible memory less the 0.5 GiB CUDA context (TP1):
    #   (191,496,783,396.864 − 536,870,912) × 157,119/183,359 × 0.909736328125 = 148,862,126,674.24 B.
    # Weights (TP1): embedding and lm_head BF16, 2·248,320·5,120·2 B = 5,085,593,600;
    #   16 attention layers FP8 (q with its output gate, k, v, o),
    #   16·(5,120·2·24·256 + 5,120·2·4·256 + 24·256·5,120) = 16·(62,914,560 + 10,485,760 + 31,457,280) = 1,677,721,600;
    #   48 GDN layers FP8, 48·(5,120·(2·2,048 + 2·6,144) + 5,120·96 + 10,240·4 + 6,144·5,120)
    #   = 48·115,875,840 = 5,562,040,320; 64 FFNs FP8, 64·3·5,120·17,408 = 17,112,760,320;
    #   MTP layer FP8, 104,857,600 + 267,386,880 + 10,240·5,120 = 424,673,280
    #   → 29,862,789,120 B; the vision tower BF16, (455,897,088 + 4,833,008)·2 = 921,460,192;
    #   the RoPE table 262,144·64·2 B = 33,554,432 → 30,817,803,744 B.
    # Pool budget (S3 profile_max_num_token): 148,862,126,674.24 − 30,817,803,744
    #   = 118,044,322,930.24 B.
    # State per request (fp32 SSM, bf16 conv): 48·(48·128·128·4 + (2·16·128 + 48·128)·3·2)
    #   = 48·(3,145,728 + 61,440) = 153,944,064 B; under MTP SGLang holds 1 + 4 copies per
    #   running request (its slot, and the intermediate SSM and conv-window caches of
    #   speculative_num_draft_tokens = 4 rows): 5·153,944,064 = 769,720,320 B.
    # KV pool = budget − 128·769,720,320 = 118,044,322,930.24 − 98,524,200,960
    #   = 19,520,121,970.24 B = 595,706.8 tokens of 16·4·(256 + 256)·1 B = 32,768 B.
    # Draft KV (1 MTP layer, same tokens): 19,520,121,970.24 / 16 = 1,220,007,623.14 B.
    # State pool = (128 + 1)·153,944,064 = 19,858,784,256 B (slot 0 is the padded slot);
    # speculative caches = 4·(128 + 1)·153,944,064 = 79,435,137,024 B.
    # Left for activations, CUDA graphs, the context and the driver: 192,265,846,784 − 30,817,803,744
    #   − 19,520,121,970.24 − 1,220,007,623.14 − 19,858,784,256 − 79,435,137,024 = 41,413,992,166.62 B.
    model, gpu, engine = load_model("qwen3.6-27b"), load_gpu("b200"), load_engine("sglang")
    settings = engine.settings(
        gpu, Layout(), speculative=False, vision_cut=engine.vision_cut(27, 1152), max_running=128
    )
    m = memory_breakdown(
        model,
        gpu,
        Layout(tp=1),
        Dtype.FP8,
        Dtype.FP8,
        settings,
        None,
        draft=SpecDecode("mtp", 3, 2.0),
        spec_state_copies=engine.spec_state_copies(3),
        padded_state_slot=True,
        draft_kv_pool=True,
    )
    assert m.weight_bytes_per_gpu == 30_817_803_744
    assert m.kv_pool_bytes == pytest.approx(118_044_322_930.24, abs=0.01)
    assert m.state_bytes_per_running_sequence == 769_720_320
    a = m.allocation(128)
    assert a["kv_cache"] == pytest.approx(19_520_121_970.24, abs=0.01)
    assert a["kv_cache"] / m.kv_bytes_per_token_per_gpu == pytest.approx(595_706.8, abs=0.1)
    assert a["draft_kv"] == pytest.approx(1_220_007_623.14, abs=0.01)
    assert a["state"] == 19_858_784_256
    assert a["spec_state"] == 79_435_137_024
    assert a["reserve"] == pytest.approx(41_413_992_166.62, abs=0.01)
    assert sum(a.values()) == pytest.approx(gpu.memory_bytes, rel=1e-12)
    assert m.allocates(128)


def test_sglang_intermediate_state_makes_413_requests_unallocatable_on_one_b200():
    # The plan before issue 10 launched --max-running-requests 413 per B200: state alone is
    # 413·769,720,320 = 317,894,492,160 B, above the 118,044,322,930.24 B pool budget (above).
    model, gpu, engine = load_model("qwen3.6-27b"), load_gpu("b200"), load_engine("sglang")
    settings = engine.settings(
        gpu, Layout(), speculative=False, vision_cut=engine.vision_cut(27, 1152), max_running=413
    )
    m = memory_breakdown(
        model,
        gpu,
        Layout(tp=1),
        Dtype.FP8,
        Dtype.FP8,
        settings,
        None,
        draft=SpecDecode("mtp", 3, 2.0),
        spec_state_copies=engine.spec_state_copies(3),
        padded_state_slot=True,
        draft_kv_pool=True,
    )
    assert m.allocation(413)["kv_cache"] == pytest.approx(118_044_322_930.24 - 317_894_492_160, abs=0.01)
    assert not m.allocates(413)


def test_sglang_ratio_split_reserves_the_speculative_copies_first():
    # Radix cache on (ratio split 0.9), MTP k=3, the default cap of 48 (S5): S3 reserves
    # 48·4·153,944,064 = 29,557,260,288 B before the split; BF16 weights and KV, no vision cut:
    # usable 108,886,514,191.05 B (test above) − 29,557,260,288 = 79,329,253,903.05 B,
    # state pool 79,329,253,903.05·0.9/1.9, KV pool 79,329,253,903.05/1.9.
    model, gpu, engine = load_model("qwen3.6-27b"), load_gpu("b200"), load_engine("sglang")
    settings = engine.settings(gpu, Layout(), speculative=True)
    m = memory_breakdown(
        model,
        gpu,
        Layout(tp=1),
        Dtype.BF16,
        Dtype.BF16,
        settings,
        0.9,
        spec_state_copies=engine.spec_state_copies(3),
        max_running=settings.max_running,
    )
    assert m.spec_state_pool_bytes == 29_557_260_288
    assert m.state_pool_bytes == pytest.approx(79_329_253_903.05 * 0.9 / 1.9, rel=1e-11)
    assert m.kv_pool_bytes == pytest.approx(79_329_253_903.05 / 1.9, rel=1e-11)


def test_vllm_holds_k_extra_state_blocks_per_request_under_mtp():
    # vLLM MambaSpec: page × (1 + num_speculative_blocks), num_speculative_blocks = k = 3 (V16):
    # a 4,000-token sequence holds 65,536·4,000 + 4·153,944,064 = 262,144,000 + 615,776,256
    # = 877,920,256 B of the shared pool.
    model, gpu, engine = load_model("qwen3.6-27b"), load_gpu("b200"), load_engine("vllm")
    assert engine.spec_state_copies(3) == 3
    assert load_engine("trtllm").spec_state_copies(3) == 0
    settings = engine.settings(gpu, Layout(), speculative=True)
    m = memory_breakdown(model, gpu, Layout(tp=1), Dtype.BF16, Dtype.BF16, settings, None, spec_state_copies=3)
    assert m.max_sequences(4000) == pytest.approx(m.kv_pool_bytes / 877_920_256, rel=1e-12)


def test_deepseek_r1_fp8_tp4_on_b200_fits_with_the_tight_launch():
    # DeepSeek-R1 FP8 at TP4 holds 157.5 GiB of weights per GPU: 157.3 GiB of sharded weights (the
    # predict output before the routers and the RoPE table were counted whole) + the routers, whole
    # and in BF16 instead of FP8 / 4 (58·256·7,168 = 106,430,464 params: 212,860,928 − 26,607,616
    # = 186,253,312 B) + the RoPE table (163,840·64·2 B = 20,971,520) = +0.193 GiB; SGLang's
    # default fraction on a B200 at TP4 is (183,359 − (512 + 1.5·16,384 + 4/8·1,024 + 2·512))/183,359
    # = (183,359 − 26,624)/183,359 → 156,735 MiB = 153.1 GiB for weights and cache: no room.
    # InferenceX runs it with --mem-fraction-static 0.95 (S19): 0.95·183,359 MiB = 174,191 MiB
    # = 170.1 GiB of the nominal memory; SGLang takes it of the visible memory less its start-up at
    # TP4 (0.5 + 2.0 GiB): 0.95·(183,359/1,024·0.996 − 2.5) = 0.95·175.844 = 167.05 GiB, which
    # leaves 9.55 GiB of cache.
    from tokenplan.api.resolve import PredictRequest, resolve
    from tokenplan.job.evaluate import Evaluation

    ev = resolve(
        PredictRequest(
            model="deepseek-r1",
            gpu="b200",
            num_gpus=4,
            tp=4,
            weight_dtype="fp8",
            kv_dtype="fp8",
            isl=7373,
            osl=922,
            concurrency=8,
        )
    ).evaluate()
    assert isinstance(ev, Evaluation)
    assert ev.settings.tight and ev.settings.memory_fraction == 0.95
    assert (ev.settings.chunk_tokens, ev.settings.graph_max_bs) == (8192, 32)
    assert ev.memory.weight_bytes_per_gpu / GiB == pytest.approx(157.3 + 0.193, abs=0.05)
    assert ev.memory.kv_pool_bytes / GiB == pytest.approx(0.95 * (183_359 / 1024 * 0.996 - 2.5) - 157.5, abs=0.1)


def test_the_memory_tables_start_up_rows_add_up_with_sglangs_speculative_state_pool():
    # SGLang with its radix cache on and MTP k=3 reserves the speculative states of its running cap
    # before splitting the rest into KV and state pools (S3): weights, reserve, the KV, state and
    # speculative state pools are the whole GPU, each a row of the table
    from tokenplan.api.memory import memory
    from tokenplan.api.resolve import PredictRequest
    from tokenplan.job.results import MemoryResult
    from tokenplan.report.memory_table import memory_table

    m = memory(PredictRequest(model="qwen3.6-27b", gpu="b200", spec="mtp:3", engine="sglang"))
    assert isinstance(m, MemoryResult) and m.spec_state_pool_bytes > 0
    parts = m.weight_bytes_per_gpu + m.reserve_bytes + m.kv_pool_bytes + m.state_pool_bytes + m.spec_state_pool_bytes
    assert parts == pytest.approx(m.gpu_bytes, rel=1e-12)
    labels = [str(row) for row in memory_table(m).columns[0].cells]
    assert "speculative state pool (for the running cap)" in labels
