"""Memory as the engines allocate it, against what they print (issue 28, item 5).

Each test quotes an engine's log line from a public thread, derives the planner's figure by hand
from the model's config.json and the engine's rules, and checks that the two agree within 3 %
(or says where, and why, they do not). The rules and their sources:

- the CUDA runtime reports 0.996 of nvidia-smi's total (``perf.memory.CUDA_VISIBLE_SHARE``): H100
  80 GB 85,520,809,984 B → 85,178,726,744.064 B = 79.33 GiB;
- SGLang takes ``--mem-fraction-static`` of the memory free after start-up, 0.5 GiB of CUDA
  context + 2.0 GiB of communicators at TP > 1 (``model_runner`` ``profile_max_num_token``;
  catalog/engines.yaml ``startup_*``);
- vLLM: ``total × utilization − weights − max(profiling forward, sampler pass) − non-torch
  (0.13 GiB) − CUDA-graph estimate (51 sizes × 24 MiB = 1,283,457,024 B at 512)``, the sampler
  at 24 B per row per vocabulary entry (``gpu_worker.determine_available_memory``,
  ``_dummy_sampler_run`` + ``apply_top_k_top_p_pytorch``); MXFP4 experts on Hopper through
  Marlin padded to hidden % 256, intermediate % 128 (``mxfp4.py`` ``create_weights``); no start
  when one request of ``max_model_len`` does not fit (``check_enough_kv_cache_memory``).
"""

from __future__ import annotations

import pytest

from tokenplan.api.memory import memory
from tokenplan.api.resolve import PredictRequest, resolve
from tokenplan.catalog import load_engine, load_gpu, load_model
from tokenplan.errors import InputError
from tokenplan.job.evaluate import Evaluation, Rejection
from tokenplan.job.results import MemoryResult
from tokenplan.perf.layout import Layout
from tokenplan.perf.memory import profile_reserve_bytes
from tokenplan.units import GiB

H100_VISIBLE = 85_520_809_984 * 0.996  # = 85,178,726,744.064 B = 79.33 GiB
NON_TORCH = 0.13 * GiB  # = 139,586,437.12 B
GRAPHS = 51 * 24 * 2**20  # = 1,283,457,024 B


def _within(got: float, logged: float, share: float = 0.03) -> bool:
    return abs(got / logged - 1) <= share


def test_sglang_qwen3_235b_fp8_tp4_h100_kv_tokens_match_the_log():
    # vllm-project/vllm#21348 (https://github.com/vllm-project/vllm/issues/21348), SGLang,
    # Qwen3-235B-A22B-FP8, --tp 4, --mem-fraction-static 0.93, 4× H100:
    #   "KV Cache is allocated. #tokens: 367404, K size: 8.23 GB, V size: 8.23 GB"
    # Weights per GPU (TP4; 94 layers, h 4,096, 128 experts of 1,536, 64 q / 4 KV heads of 128):
    #   embedding + lm_head BF16 2·151,936·4,096·2 B / 4 = 622,329,856;
    #   attention FP8 94·(4,096·8,192 + 2·4,096·512 + 8,192·4,096) / 4 = 6,702,497,792 / 4 = 1,675,624,448;
    #   routed experts FP8 94·128·3·4,096·1,536 / 4 = 227,096,395,776 / 4 = 56,774,098,944;
    #   routers whole on each GPU in BF16 (ReplicatedLinear, quant_config=None) 94·128·4,096·2 B
    #   = 98,566,144; the RoPE table 40,960·128·2 B = 10,485,760 → 59,181,105,152 B.
    # Pool: (85,178,726,744.064 − 2.5 GiB 2,684,354,560) × 0.93 − 59,181,105,152
    #   = 76,719,766,131.18 − 59,181,105,152 = 17,538,660,979.18 B;
    # KV per token per GPU: 94 layers · 1 KV head · 128 · 2 (K, V) · 2 B = 48,128 B
    #   → 364,416.99: 364,416 whole tokens (SGLang floors), −0.81 % from 367,404 (the planner said 424,908 before; −0.27 % with the
    #   routers sharded in FP8 and no RoPE table).
    m = memory(
        PredictRequest(
            model="qwen3-235b-a22b",
            gpu="h100-sxm",
            num_gpus=4,
            tp=4,
            weight_dtype="fp8",
            engine="sglang",
            memory_fraction=0.93,
        )
    )
    assert isinstance(m, MemoryResult)
    assert m.weight_bytes_per_gpu == 59_181_105_152
    assert m.kv_bytes_per_token_per_gpu == 48_128
    assert m.kv_pool_bytes == pytest.approx(17_538_660_979.18, abs=0.01)
    assert m.kv_capacity_tokens == 364_416
    assert _within(m.kv_capacity_tokens, 367_404)


def test_vllm_gpt_oss_120b_marlin_weights_match_the_log():
    # vllm-project/vllm#23278 (https://github.com/vllm-project/vllm/issues/23278), one H100:
    #   "[marlin_utils_fp4.py:196] ... Weight-only FP4 compression will be used leveraging the
    #    Marlin kernel." / "Model loading took 65.9651 GiB"
    # Unpadded: embedding + lm_head BF16 2·201,088·2,880·2 B = 2,316,533,760; attention BF16
    #   955,514,880·2 = 1,911,029,760; routers BF16 13,271,040·2 = 26,542,080; experts MXFP4
    #   36·128·3·2,880·2,880 = 114,661,785,600 params × 0.53125 B = 60,914,073,600 → 65,168,179,200 B.
    # Marlin pads hidden 2,880 → 3,072 (% 256) and intermediate 2,880 → 2,944 (% 128):
    #   experts × 3,072·2,944 / (2,880·2,880) = 60,914,073,600 × 9,043,968 / 8,294,400 = 66,418,900,992;
    #   total 70,673,006,592 B; + the RoPE table 131,072·64·2 B = 16,777,216 → 70,689,783,808 B
    #   = 65.835 GiB, −0.20 % from 65.9651 GiB (60.69 GiB before).
    m = memory(
        PredictRequest(model="gpt-oss-120b", gpu="h100-sxm", weight_dtype="auto", engine="vllm", memory_fraction=0.98)
    )
    assert isinstance(m, MemoryResult)
    assert m.weight_bytes_per_gpu == 70_689_783_808
    assert _within(m.weight_bytes_per_gpu / GiB, 65.9651, 0.005)


def test_vllm_gpt_oss_120b_on_one_h100_does_not_start_at_the_default_utilization():
    # vllm-project/vllm#27508 (https://github.com/vllm-project/vllm/issues/27508) and #33155
    # (https://github.com/vllm-project/vllm/issues/33155): gpt-oss-120b does not start on one H100;
    # #27508 at --gpu-memory-utilization 0.95 --max-num-batched-tokens 1024 logs
    #   "Available KV cache memory: 1.71 GiB" and the engine asks for a shorter max_model_len.
    # At the default 0.92: 85,178,726,744.064 × 0.92 = 78,364,428,604.54 B requested;
    #   weights 70,689,783,808 (above); sampler 1,024 rows × 201,088 × 24 B = 4,941,938,688
    #   (the profiling forward, 8,192·2·(2·2,880 + 3·4·2,880 + 4·2,880) = 849,346,560, is smaller);
    #   graphs 1,283,457,024; non-torch 139,586,437.12
    #   → KV 1,309,662,647.42 B = 1.22 GiB = 35,526.99, i.e. 35,526 whole tokens of 18 layers · 8 · 64 · 2 · 2 B
    #   = 36,864 B each,
    #   short of one 131,072-token request (4.5 GiB): vLLM refuses to start.
    ev = resolve(PredictRequest(model="gpt-oss-120b", gpu="h100-sxm", weight_dtype="auto", engine="vllm")).evaluate()
    assert isinstance(ev, Rejection) and ev.kind == "kv"
    assert "does not start" in ev.reason and "131,072-token context" in ev.reason
    assert "1.22 GiB KV cache" in ev.reason and "35,526 tokens" in ev.reason


def test_vllm_gpt_oss_120b_at_0_9_has_no_kv_memory_at_all():
    # vllm-project/vllm#23278 (v0.10.1, default --gpu-memory-utilization 0.9):
    #   "Available KV cache memory: -2.14 GiB" / "EngineCore failed to start."
    # 85,178,726,744.064 × 0.9 = 76,660,854,069.66 − 70,689,783,808 − 4,941,938,688 − 1,283,457,024
    #   − 139,586,437.12 = −393,911,887.46 B = −0.37 GiB: negative, the configuration does not fit.
    # (v0.10.1 did not profile CUDA graphs before sizing the cache and its sampler kept a non-in-place
    #  re-sort, so its figure is not this build's; the sign is.)
    ev = resolve(
        PredictRequest(model="gpt-oss-120b", gpu="h100-sxm", weight_dtype="auto", engine="vllm", memory_fraction=0.9)
    ).evaluate()
    assert isinstance(ev, Rejection) and ev.kind == "memory"
    assert "does not fit" in ev.reason


def test_vllm_qwen3_5_35b_a3b_tp4_profile_terms_and_kv_match_the_log():
    # vllm-project/vllm#50722 (https://github.com/vllm-project/vllm/issues/50722), vLLM 0.26, TP4:
    #   "Free memory on device (77.78/79.33 GiB) on startup. Desired GPU memory utilization is
    #    (0.85, 67.43 GiB). Actual usage is 16.92 GiB for weight, 5.66 GiB for peak activation,
    #    0.13 GiB for non-torch memory, and 1.34 GiB for CUDAGraph memory. ... Current kv cache
    #    memory in use is 43.4 GiB."  (--max-num-batched-tokens 40000)
    # Requested: 85,178,726,744.064 × 0.85 = 72,401,917,732.45 B = 67.43 GiB (as logged).
    # Weights per GPU (TP4, 2 KV heads replicated ×2): embedding + lm_head 2·248,320·2,048·2 B / 4
    #   = 508,559,360; 10 attention layers 10·((27,262,976 − 2,097,152)/4 + 2,097,152/2)·2 B
    #   = 146,800,640; 30 GDN layers 1,011,548,160·2/4 = 505,774,080; shared experts
    #   40·3·2,048·512·2/4 = 62,914,560; the routers whole on each rank (ReplicatedLinear,
    #   vllm/model_executor/models/qwen3_next.py) 40·256·2,048·2 = 41,943,040; routed
    #   40·256·3·2,048·512·2/4 = 16,106,127,360; vision tower (441,741,312/4 + 4,829,936)·2 = 230,530,528;
    #   the RoPE table 262,144·64·2 = 33,554,432 → 17,636,204,000 B = 16.42 GiB.
    # Peak activation: sampler 1,024 rows × 248,320 × 24 B = 6,102,712,320 B = 5.68 GiB (+0.4 % from
    #   5.66); the 40,000-token forward 40,000·2·(4,096 + 3·(8·512 + 512)/4 + 8·2,048) = 1,914,880,000.
    # KV: 72,401,917,732.45 − 17,636,204,000 − 6,102,712,320 − 1,283,457,024 − 139,586,437.12
    #   = 47,239,957,951.33 B = 44.00 GiB, +1.4 % from 43.4 GiB (47.49 GiB before).
    model, gpu, engine = load_model("qwen3.5-35b-a3b"), load_gpu("h100-sxm"), load_engine("vllm")
    settings = engine.settings(gpu, Layout(tp=4), speculative=False, memory_fraction=0.85, chunk_tokens=40_000)
    assert (settings.profile_tokens, settings.profile_seqs) == (40_000, 1024)
    assert profile_reserve_bytes(model, Layout(tp=4), settings) == 6_102_712_320 + GRAPHS
    assert _within(6_102_712_320 / GiB, 5.66)
    m = memory(
        PredictRequest(
            model="qwen3.5-35b-a3b",
            gpu="h100-sxm",
            num_gpus=4,
            tp=4,
            engine="vllm",
            memory_fraction=0.85,
            max_num_batched_tokens=40_000,
        )
    )
    assert isinstance(m, MemoryResult)
    assert m.weight_bytes_per_gpu == 17_636_204_000
    assert m.kv_pool_bytes == pytest.approx(47_239_957_951.33, abs=0.01)
    assert _within(m.kv_pool_bytes / GiB, 43.4)
    # The weights are 2.9 % under the logged 16.92 GiB (3.3 % with the routers sharded and no RoPE
    # table), and the thread does not say what fills the rest. Its non-default args (turn 5, the 08-12 run at utilization 0.9) show a fine-tuned
    # merged checkpoint served under the name Qwen/Qwen3.5-35B-A3B ('model':
    # '/output/sprint2_0615/v1-20260708-145220/checkpoint-279-merged', TP4, prefix caching,
    # max_num_batched_tokens 40000, moe_backend triton), not the published one; the quoted 0.85 run
    # (08-14) shows no args. The DFlash draft of the issue text (hidden 2,048, head_dim 256,
    # draft_vocab_size 24,576, 8 aux hidden-state layers) gives no layer count or FFN width, so its
    # bytes cannot be derived. Candidates, not modelled for want of the launch: a vision tower held
    # whole on each rank (--mm-encoder-tp-mode data; the default is "weights", vllm/config/multimodal.py)
    # would add 441,741,312·2·3/4 = 662,611,968 B → 18,298,815,968 B = 17.04 GiB (+0.7 %).
    assert _within(m.weight_bytes_per_gpu / GiB, 16.92)
    assert m.weight_bytes_per_gpu / GiB / 16.92 - 1 == pytest.approx(-0.0293, abs=0.0005)


def test_sglang_deepseek_r1_fp4_tp4_b200_weights_match_the_log():
    # sgl-project/sglang#9162 (https://github.com/sgl-project/sglang/issues/9162), 4× B200, TP4:
    #   "Load weight end. ... mem usage=94.50 GB"
    # Per GPU: embedding + lm_head BF16 2·926,679,040·2 / 4 = 926,679,040; MLA BF16 61 layers of
    #   q_a 7,168·1,536 + kv_a 7,168·576 (replicated) + (q_b 1,536·128·192 + kv_b 512·128·256
    #   + o 16,384·7,168) / 4 = 58,130,432 params → 61·58,130,432·2 = 7,091,912,704; NVFP4 (0.5625 B a
    #   weight: ModelOpt quantizes every FFN of DeepSeek, attention stays BF16, arch.params.quantized_components):
    #   3 dense FFNs 1,189,085,184 × 0.5625 / 4 = 167,215,104; shared experts (the routers apart)
    #   (2,660,761,600 − 106,430,464) × 0.5625 / 4 = 359,202,816; routed 653,908,770,816 × 0.5625 / 4
    #   = 91,955,920,896; the routers whole on each rank in BF16, 58·256·7,168·2 = 212,860,928; the RoPE
    #   table 163,840·64·2 = 20,971,520 → 100,734,763,008 B = 93.82 GiB (−0.72 %; −0.94 % with the
    #   routers in NVFP4 and sharded and no RoPE table; 94.90 GiB, +0.42 %, with the dense and shared
    #   FFNs read as BF16).
    ev = resolve(PredictRequest(model="deepseek-r1", gpu="b200", num_gpus=4, tp=4, weight_dtype="nvfp4")).evaluate()
    assert isinstance(ev, Evaluation)
    assert ev.memory.weight_bytes_per_gpu == 100_734_763_008
    assert _within(ev.memory.weight_bytes_per_gpu / GiB, 94.50)


def test_the_token_budget_options_belong_to_their_engine():
    # --max-num-batched-tokens is vLLM's, --chunked-prefill-size SGLang's; each moves that engine's
    # reserve. SGLang's activation term is 1.5 MiB × max(chunk, 2,048) (S1): a 16,384-token chunk
    # instead of the H100 bucket's 8,192 takes the reserve (TP1, graph batch 256) from
    # 512 + 12,288 + 128 + 512 = 13,440 MiB to 512 + 24,576 + 128 + 512 = 25,728 MiB.
    sg = load_engine("sglang").settings(load_gpu("h100-sxm"), Layout(), speculative=False, chunk_tokens=16_384)
    assert sg.chunk_tokens == 16_384 and sg.chunk_set
    assert sg.memory_fraction == pytest.approx((81_559 - 25_728) / 81_559, rel=1e-12)
    with pytest.raises(InputError, match="chunked_prefill_size"):
        resolve(
            PredictRequest(model="llama-3.1-8b", gpu="h100-sxm", engine="vllm", chunked_prefill_size=4096)
        ).evaluate()
    with pytest.raises(InputError, match="max_num_batched_tokens"):
        resolve(
            PredictRequest(model="llama-3.1-8b", gpu="h100-sxm", engine="sglang", max_num_batched_tokens=4096)
        ).evaluate()
    with pytest.raises(InputError, match="max_num_batched_tokens"):
        resolve(
            PredictRequest(model="llama-3.1-8b", gpu="h100-sxm", engine="vllm", max_num_batched_tokens=0)
        ).evaluate()
