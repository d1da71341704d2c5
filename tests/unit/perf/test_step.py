"""One engine step against hand arithmetic.

Each case starts from a catalog deployment and replaces every number the step reads with a
round one of ours (bandwidth, FLOP/s, bytes, parameters, efficiency), so that the expected time
follows from the roofline rules of ``tokenplan.perf.step`` by hand:

- a kernel family takes max(bytes / (bandwidth × fraction), FLOPs / achievable FLOP/s);
- a GEMM at T rows reaches FLOP/s × gemm_fraction × T / (T + gemm_half_tokens) on a GPU without
  a measured GEMM curve (``_ours`` removes the catalog's curves), and FLOP/s × curve(max(T, ridge))
  × the kernel factor of the curve's format on one with a curve (the last tests);
- the families and the overhead (fixed + per sequence) add.

The deployments are TP1/PP1, so no collective runs (an all-reduce over one GPU takes 0 s).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from tokenplan.api.resolve import PredictRequest, resolve
from tokenplan.hardware import GemmCurve, LinkKind
from tokenplan.job.evaluate import Evaluation, evaluate
from tokenplan.job.workload import LengthDist
from tokenplan.perf.deployment import Deployment
from tokenplan.perf.efficiency import Efficiency
from tokenplan.perf.step import ep_busiest_rank, expected_max_normal, step_time

# Every field given, so the numbers below are ours and not the shipped defaults.
EFF = Efficiency(
    hbm_fraction=0.8,
    attention_fraction=0.5,
    gemm_fraction=0.5,
    gemm_half_tokens=8.0,
    lowprec_fraction=1.0,
    dequant_fraction=1.0,
    comm_fraction=0.5,
    step_overhead_s=1e-3,
    per_sequence_overhead_s=1e-5,
    ttft_overhead_s=0.05,
    prefill_wave_fraction=0.5,
    layer_latency_s=0.0,
    moe_layer_latency_s=0.0,
    per_token_moe_layer_s=0.0,
)


def _catalog(model: str) -> Deployment:
    scenario = resolve(PredictRequest(model=model, gpu="h200", weight_dtype="fp8"))
    config, spec, gpu = scenario.config, scenario.model, scenario.gpu
    ev = evaluate(spec, gpu, config, EFF, LengthDist(1000), LengthDist(100), 1.0)
    assert isinstance(ev, Evaluation)
    assert ev.deployment.layout.tp == 1 and ev.deployment.layout.pp == 1
    return ev.deployment


def _ours(model: str = "llama-3.1-8b", kv_pool_bytes: float = 1e11) -> Deployment:
    """A synchronous engine step on 4 TB/s HBM, 1 PFLOP/s, 64 GB/s host link; 8e9 dense params in 8e9 bytes, a 5e8-param
    lm_head in 1e9 bytes; 1e5 KV bytes and 1e5 attention FLOPs per token per context token."""
    d = _catalog(model)
    gpu = replace(d.gpu, hbm_bytes_per_s=4e12, host_link=replace(d.gpu.host_link, bytes_per_s=64e9), gemm_curves=())
    mem = replace(
        d.memory,
        kv_bytes_per_token_per_gpu=1e5,
        sliding_bytes_per_token_per_gpu=0.0,
        state_bytes_per_sequence_per_gpu=0.0,
        sequence_shards=1,
        kv_pool_bytes=kv_pool_bytes,
    )
    return replace(
        d,
        gpu=gpu,
        memory=mem,
        dense_params=8e9,
        dense_bytes=8e9,
        lm_head_params=5e8,
        lm_head_bytes=1e9,
        gemm_flops_per_s=1e15,
        attn_flops_per_s=1e15,
        attn_flops_per_token_ctx=1e5,
        attn_prefill_flops_per_token_ctx=1e5,
        gdn_flops_per_token=0.0,
        lowprec=False,
        weight_only=False,
        cpu_overlap=False,  # the synchronous step: the overhead adds (the overlapped one: test_overlap)
    )


def test_small_batch_decode_is_memory_bound():
    t = step_time(_ours(), EFF, decode_seqs=8, context_tokens=1000)
    # GEMM bytes: 8e9 + 1e9 = 9e9 over 4e12 × 0.8 = 3.2e12 B/s → 2.8125 ms; its FLOPs
    # 2·8e9·8 + 2·5e8·8 = 1.36e11 at 1e15 × 0.5 × 8/(8 + 8) = 2.5e14 FLOP/s → 0.544 ms < 2.8125.
    assert t.gemm_s == pytest.approx(2.8125e-3)
    # KV: 8 sequences × 1,000 tokens × 1e5 B = 8e8 B over 4e12 × 0.5 = 2e12 B/s → 0.4 ms
    # (FLOPs 1e5·8·1,000 = 8e8 at 5e14 → 1.6 µs).
    assert t.attention_s == pytest.approx(4e-4)
    # Overhead 1 ms + 8 × 10 µs = 1.08 ms; total 2.8125 + 0.4 + 1.08 = 4.2925 ms.
    assert t.overhead_s == pytest.approx(1.08e-3)
    assert t.total_s == pytest.approx(4.2925e-3)
    assert t.bottleneck == "memory bandwidth"
    assert t.bytes_moved == pytest.approx(9.8e9)  # 9e9 weights + 8e8 KV


def test_an_overlapping_engine_hides_its_cpu_time_behind_the_kernels():
    overlapped = replace(_ours(), cpu_overlap=True)
    # The kernels of test_small_batch_decode_is_memory_bound take 2.8125 + 0.4 = 3.2125 ms; its
    # CPU time 1 ms + 8 × 10 µs = 1.08 ms runs beside the previous step's kernels: the step takes
    # max(3.2125, 1.08) = 3.2125 ms, no overhead shows.
    t = step_time(overlapped, EFF, decode_seqs=8, context_tokens=1000)
    assert t.overhead_s == pytest.approx(0.0, abs=1e-15)
    assert t.total_s == pytest.approx(3.2125e-3)
    # With 100 µs per sequence the CPU time is 1 ms + 8 × 0.1 ms = 1.8 ms, still hidden; at
    # 400 µs it is 1 + 3.2 = 4.2 ms > 3.2125 ms of kernels: the step takes 4.2 ms, 0.9875 ms shows.
    slow_cpu = replace(EFF, per_sequence_overhead_s=4e-4)
    t = step_time(overlapped, slow_cpu, decode_seqs=8, context_tokens=1000)
    assert t.overhead_s == pytest.approx(0.9875e-3)
    assert t.total_s == pytest.approx(4.2e-3)
    # The synchronous engine adds them: 3.2125 + 4.2 = 7.4125 ms.
    assert step_time(_ours(), slow_cpu, decode_seqs=8, context_tokens=1000).total_s == pytest.approx(7.4125e-3)


def test_a_long_prefill_is_compute_bound():
    t = step_time(_ours(), EFF, decode_seqs=0, context_tokens=0, prefill_tokens=4096, prefill_context_tokens=2048)
    # GEMM FLOPs: 2·8e9·4,096 + 2·5e8·1 (lm_head for the prompt's last token) = 6.5537e13 at
    # 1e15 × 0.5 × 4,096/(4,096 + 8) FLOP/s → 6.5537e13 × 4,104 / (5e14 × 4,096) = 0.131330 s,
    # far above the 2.8125 ms weight read.
    gemm = 6.5537e13 * 4104 / (5e14 * 4096)
    assert t.gemm_s == pytest.approx(gemm)
    assert gemm == pytest.approx(0.131330, rel=1e-5)
    # Attention FLOPs 1e5 × 4,096 × 2,048 = 8.388608e11 at 5e14 → 1.6777 ms; no KV read (no decode).
    assert t.attention_s == pytest.approx(8.388608e11 / 5e14)
    # Overhead 1 ms (no decoding sequence). Total ≈ 0.131330 + 0.0016777 + 0.001 = 0.134008 s.
    assert t.total_s == pytest.approx(gemm + 8.388608e11 / 5e14 + 1e-3)
    assert t.bottleneck == "compute"


def test_moe_decode_reads_only_the_experts_its_tokens_touch():
    d = replace(_ours("mixtral-8x7b"), routed_bytes=8e9, routed_flops_per_token=2e9)
    assert d.spec.moe is not None and (d.spec.moe.num_experts, d.spec.moe.top_k) == (8, 2)
    t = step_time(d, EFF, decode_seqs=2, context_tokens=1000)
    # T = 2 tokens each picking k = 2 of E = 8: E·(1 − (1 − 2/8)²) = 8 × (1 − 0.5625) = 3.5 experts
    # of 1e9 B → 3.5e9 B over 3.2e12 B/s = 1.09375 ms. FLOPs 2 × 2e9 = 4e9 at 0.5 rows per expert
    # (taken as 1): 5e14 × 1/(1 + 8) = 5.5556e13 FLOP/s → 72 µs < 1.09375 ms.
    assert t.experts_s == pytest.approx(1.09375e-3)


def test_expected_max_of_normals_follows_blom():
    # n = 8: Φ⁻¹((8 − 0.375)/(8 + 0.25)) = Φ⁻¹(0.924242) = 1.4338 (table of the normal quantile:
    # Φ(1.43) = 0.92364, Φ(1.44) = 0.92507 → 1.43 + 0.01 × (0.924242 − 0.92364)/0.00143 = 1.4342).
    assert expected_max_normal(8) == pytest.approx(1.434, abs=2e-3)
    assert expected_max_normal(1) == 0.0


def test_expert_parallel_waits_for_its_busiest_rank():
    # EP4, E = 8, k = 2, T = 2 tokens: q = 1 − (1 − 2/8)² = 0.4375, m = 8/4 = 2 experts per rank;
    # z = Φ⁻¹(3.625/4.25 = 0.852941) = 1.0494. Bytes: 1 + 1.0494·√(0.5625/(2 × 0.4375)) =
    # 1 + 1.0494 × 0.80178 = 1.8414, under the cap 1/q = 2.2857. Rows: 1 + 1.0494·√(3/(2 × 2)) =
    # 1 + 1.0494 × 0.86603 = 1.9088, under the cap 4.
    z = expected_max_normal(4)
    assert z == pytest.approx(1.0494, abs=1e-3)
    mem, rows = ep_busiest_rank(4, 8, 2, 2.0)
    assert mem == pytest.approx(1 + z * (0.5625 / 0.875) ** 0.5)
    assert rows == pytest.approx(1 + z * 0.75**0.5)
    assert ep_busiest_rank(1, 8, 2, 2.0) == (1.0, 1.0)
    # One token on EP8 over 8 experts, k = 1: q = 1/8, m = 1 → bytes 1 + 1.4338·√((7/8)/(1/8)) =
    # 1 + 1.4338 × 2.6458 = 4.7935 and rows 1 + 1.4338·√(7/1) the same, both under the caps 8
    # (exactly, one rank reads its expert and the others idle: 8; the normal approximation of a
    # one-expert rank stays below it).
    mem1, rows1 = ep_busiest_rank(8, 8, 1, 1.0)
    assert mem1 == pytest.approx(4.7935, abs=2e-3) and rows1 == pytest.approx(mem1)
    # In a step: the Mixtral case above on EP4 reads 3.5e9 × 1.8414 B → 1.09375 ms × 1.8414.
    d = replace(_ours("mixtral-8x7b"), routed_bytes=8e9, routed_flops_per_token=2e9)
    d = replace(d, layout=replace(d.layout, ep=4))
    assert step_time(d, EFF, decode_seqs=2, context_tokens=1000).experts_s == pytest.approx(1.09375e-3 * mem)


def test_mixed_step_decode_and_prefill_attention_add():
    # Decode: 8 × 1,000 × 1e5 B = 8e8 B over 2e12 B/s = 0.4 ms (its FLOPs 8e8 → 1.6 µs). Prefill:
    # 1e5 × 1,024 prompt tokens × 1,024 context = 1.048576e11 FLOPs at 5e14 → 0.2097 ms. Two
    # kernels one after the other: 0.4 + 0.2097 = 0.6097 ms (one roofline over both would give
    # max(0.4, (8e8 + 1.048576e11) / 5e14 = 0.2113) = 0.4 ms).
    t = step_time(_ours(), EFF, decode_seqs=8, context_tokens=1000, prefill_tokens=1024, prefill_context_tokens=1024)
    assert t.attention_s == pytest.approx(4e-4 + 1.048576e11 / 5e14)


def test_layer_latency_and_moe_routing_add_to_the_overhead():
    # Llama-3.1-8B in FP8 (``_catalog``): 32 layers, and 32 × (2 attention + 2 MLP) FP8 linears each
    # preceded by an activation-quantization kernel, 128 kernels = 128/11 of a layer's 11
    # (perf.layer_kernels): (32 + 11.6364) × 20 µs = 0.87273 ms on top of 1 ms + 8 × 10 µs:
    # 1.95273 ms; a dense model has no routing work.
    eff = replace(EFF, layer_latency_s=20e-6, per_token_moe_layer_s=1e-6)
    llama = 1e-3 + 8 * 10e-6 + (32 + 128 / 11) * 20e-6
    assert llama == pytest.approx(1.952727e-3, rel=1e-6)
    assert step_time(_ours(), eff, decode_seqs=8, context_tokens=1000).overhead_s == pytest.approx(llama)
    # Mixtral-8x7B: 32 layers, all MoE without a shared expert, so only the 2 attention linears
    # quantize (64 kernels = 64/11 layers): (32 + 5.8182) × 20 µs = 0.75636 ms, plus 8 decode
    # tokens × 32 MoE layers × 1 µs = 0.256 ms, plus 1.08 ms → 2.09236 ms.
    mixtral = 1e-3 + 8 * 10e-6 + (32 + 64 / 11) * 20e-6 + 8 * 32 * 1e-6
    assert mixtral == pytest.approx(2.092364e-3, rel=1e-6)
    t = step_time(_ours("mixtral-8x7b"), eff, decode_seqs=8, context_tokens=1000)
    assert t.overhead_s == pytest.approx(mixtral)
    # The MoE block's own kernels: 32 MoE layers × 5 µs = 0.16 ms more; the dense model has no
    # MoE layer, so its overhead stays as it was.
    eff = replace(eff, moe_layer_latency_s=5e-6)
    t = step_time(_ours("mixtral-8x7b"), eff, decode_seqs=8, context_tokens=1000)
    assert t.overhead_s == pytest.approx(mixtral + 32 * 5e-6)
    assert step_time(_ours(), eff, decode_seqs=8, context_tokens=1000).overhead_s == pytest.approx(llama)


def test_decode_reads_every_running_token_from_hbm_whatever_the_pool():
    # A running request's KV is in GPU memory (no engine reads it from host memory): 8 sequences ×
    # 1,000 tokens × 1e5 B = 8e8 B over 4e12 B/s × 0.5 = 2e12 B/s → 0.4 ms, with a 5e8 B pool as with 1e11.
    small = step_time(_ours(kv_pool_bytes=5e8), EFF, decode_seqs=8, context_tokens=1000)
    assert small.attention_s == pytest.approx(0.4e-3)
    assert small == step_time(_ours(), EFF, decode_seqs=8, context_tokens=1000)


def test_lm_head_bytes_follow_the_memory_rule_bf16():
    # Llama-3.1-8B FP8 TP1: the lm_head stays BF16 in every format (arch.params.quantized_components):
    # 128,256 × 4,096 = 525,336,576 params × 2 B = 1,050,673,152 B.
    d = _catalog("llama-3.1-8b")
    assert d.lm_head_params == 525_336_576
    assert d.lm_head_bytes == 1_050_673_152


def test_a_speculative_verify_writes_one_state_per_query_token():
    # A hybrid's state of 1e8 B per sequence, 8 sequences: plain decode reads and writes it once,
    # 8 · (1 + 1) · 1e8 = 1.6e9 B over 4e12 × 0.8 = 3.2e12 B/s → 0.5 ms; a verify of 4 query
    # tokens per sequence (MTP k = 3) reads it once and writes 4 intermediate states (SGLang's
    # intermediate SSM cache): 8 · (1 + 4) · 1e8 = 4e9 B → 1.25 ms. GDN FLOPs are 0 here.
    d = _ours("qwen3.6-27b")
    d = replace(d, memory=replace(d.memory, state_bytes_per_sequence_per_gpu=1e8))
    plain = step_time(d, EFF, decode_seqs=8, context_tokens=1000)
    verify = step_time(d, EFF, decode_seqs=8, context_tokens=1000, query_tokens_per_seq=4)
    assert plain.state_s == pytest.approx(0.5e-3)
    assert verify.state_s == pytest.approx(1.25e-3)


# A measured FP8 (block-scaled) curve of our own: 0.4 of peak at 256 rows, 0.6 at 4,096.
# Its ridge: 1e15 FLOP/s × 1 B / (2 × 4e12 B/s) = 125 rows (the GPU of ``_ours``).
CURVE = GemmCurve("fp8_block", rows=(256.0, 4096.0), fraction=(0.4, 0.6), bytes_per_weight=1.0, ridge_rows=125.0)


def _with_curve() -> Deployment:
    d = _ours()
    assert d.weight_dtype.flops_class == "fp8"  # H200 FP8 (an FP8 kernel) runs the fp8_block curve
    return replace(d, lowprec=True, gpu=replace(d.gpu, gemm_curves=(CURVE,)))


def test_a_long_prefill_runs_at_the_measured_curve_times_the_engine_factor():
    # 4,096 rows: the curve's last point, 0.6; × fp8_kernel_factor 0.5 (the factor of the
    # fp8_block curve; gemm_kernel_factor, BF16's, does not apply) → 1e15 × 0.3 = 3e14 FLOP/s.
    # FLOPs as in the prefill test above, 6.5537e13 → 0.218457 s. lowprec_fraction (0.25 here)
    # does not apply: the measured FP8 curve holds the format's kernel maturity.
    eff = replace(EFF, fp8_kernel_factor=0.5, gemm_kernel_factor=0.9, lowprec_fraction=0.25)
    t = step_time(_with_curve(), eff, decode_seqs=0, context_tokens=0, prefill_tokens=4096, prefill_context_tokens=2048)
    assert t.gemm_s == pytest.approx(6.5537e13 / 3e14)


def test_the_curve_is_read_between_its_points_in_log_rows():
    # 1,024 rows sit at log(1024/256) / log(4096/256) = 2/4 = 0.5 of the way: 0.4 + 0.5 × 0.2 = 0.5
    # → 5e14 FLOP/s. FLOPs 2·8e9·1,024 + 2·5e8·1 = 1.6385e13 → 32.77 ms, above the 2.8125 ms read.
    t = step_time(_with_curve(), EFF, decode_seqs=0, context_tokens=0, prefill_tokens=1024, prefill_context_tokens=512)
    assert t.gemm_s == pytest.approx(1.6385e13 / 5e14)


def test_below_the_ridge_the_weight_read_rules_not_the_curve():
    # The curve's ridge, 125 rows: the curve is read at 125 rows,
    # held at its first point 0.4 → 4e14 FLOP/s: 8 decode rows' 1.36e11 FLOPs take 0.34 ms, below
    # the weight read 9e9 B / 3.2e12 B/s = 2.8125 ms, which sets the GEMM time.
    t = step_time(_with_curve(), EFF, decode_seqs=8, context_tokens=1000)
    assert t.gemm_s == pytest.approx(2.8125e-3)


def test_with_attention_dp_the_dense_ffn_runs_over_every_ranks_tokens():
    # TP4 with attention DP: 8e9 dense params per GPU of which 6e9 are dense FFN / shared experts
    # (already /tp). A 4,096-token prefill spread over the 4 ranks: 1,024 tokens each.
    d = _ours()
    d = replace(
        d,
        layout=replace(d.layout, tp=4, attention_dp=True),
        mlp_params=6e9,
        memory=replace(d.memory, sequence_shards=4),
    )
    t = step_time(d, EFF, decode_seqs=0, context_tokens=0, prefill_tokens=4096, prefill_context_tokens=100)
    # FLOPs: attention 2 × 2e9 × 1,024 = 4.096e12; FFN 2 × 6e9 × 4,096 = 4.9152e13; lm_head for the
    # prompt's last token 2 × 5e8 = 1e9 → 5.3249e13 at 1e15 × 0.5 × 1,024/(1,024 + 8) = 4.96124e14
    # FLOP/s = 107.33 ms (weights: 9e9 B / 3.2e12 B/s = 2.8 ms, so compute-bound).
    assert t.gemm_s == pytest.approx(5.3249e13 / (1e15 * 0.5 * 1024 / 1032))


def test_tp_all_reduce_runs_one_shot_on_nvlink_and_nccl_over_pcie():
    scenario = resolve(PredictRequest(model="llama-3.1-8b", gpu="h200", num_gpus=8, tp=8, weight_dtype="fp8"))
    config, spec, gpu = scenario.config, scenario.model, scenario.gpu
    ev = evaluate(spec, gpu, config, EFF, LengthDist(1000), LengthDist(100), 8.0)
    assert isinstance(ev, Evaluation)
    d = ev.deployment
    link = d.gpu.scaleup
    assert (link.bytes_per_s, link.latency_s, d.spec.num_layers, d.spec.hidden_size) == (450e9, 3e-6, 32, 4096)
    # 8 tokens × 4,096 × 2 B = 65,536 B per all-reduce, 2 per layer × 32 layers, at 450e9 × 0.5 B/s:
    # one-shot 2 × 3 µs + 7 × 65,536 / 225e9 = 8.039 µs; NCCL tree 2·3·3 µs + 2 × 65,536 / 225e9
    # = 18.583 µs (ring 14 × 3 µs + … is slower).
    one_shot, tree = 6e-6 + 7 * 65536 / 225e9, 18e-6 + 2 * 65536 / 225e9
    assert step_time(d, EFF, 8, 1000).comm_s == pytest.approx(64 * one_shot)
    pcie = replace(d, gpu=replace(d.gpu, scaleup=replace(link, kind=LinkKind.PCIE)))
    assert step_time(pcie, EFF, 8, 1000).comm_s == pytest.approx(64 * tree)
