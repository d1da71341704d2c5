"""TTFT's wait behind other prompts (synchronised waves vs random arrivals), MLA prefill FLOPs, and
the busiest attention-DP rank."""

from __future__ import annotations

import pytest

from tokenplan.api.resolve import PredictRequest, resolve
from tokenplan.job.evaluate import Evaluation, evaluate
from tokenplan.job.prefill_wait import length_spread_tokens, prefill_queue_s, wave_persistence, wave_steps_mean
from tokenplan.job.workload import LengthDist
from tokenplan.perf.efficiency import Efficiency
from tokenplan.perf.step import step_time


def test_a_wave_is_prefilled_in_whole_steps():
    # 16 prompts of 1,024 tokens fill one 16,384-token step: each waits for all of it.
    assert wave_steps_mean(16, 1024, 16384) == (0.0, 1.0, 16384.0)
    # 64 of them take 4 steps; prompts 1–16 end in step 1, 17–32 in step 2, …: the mean step is
    # (1 + 2 + 3 + 4)/4 = 2.5, so 1.5 whole steps before a prompt's last one; 16/64 end in the
    # last step.
    assert wave_steps_mean(64, 1024, 16384) == (pytest.approx(1.5), pytest.approx(0.25), 16384.0)
    # 5 prompts of 3,000 tokens in 4,096-token steps end at tokens 3,000, 6,000, 9,000, 12,000 and
    # 15,000: steps ⌈·/4,096⌉ = 1, 2, 3, 3, 4 → (0 + 1 + 2 + 2 + 3)/5 = 1.6 steps before, 1/5 in the
    # fourth, partly filled step (15,000 − 3 × 4,096 = 2,712 tokens).
    assert wave_steps_mean(5, 3000, 4096) == (pytest.approx(1.6), pytest.approx(0.2), 2712.0)
    # 3 prompts of 8,192 tokens in 2,048-token chunks end in steps 4, 8 and 12: (3 + 7 + 11)/3 = 7.
    assert wave_steps_mean(3, 8192, 2048) == (pytest.approx(7.0), pytest.approx(1 / 3), 2048.0)
    # A lone request has no wave: its own prompt's steps only (⌈8,192/2,048⌉ = 4, 3 before the last).
    assert wave_steps_mean(1, 8192, 2048) == (pytest.approx(3.0), 1.0, 2048.0)


def test_md1_wait_at_half_utilisation_is_half_a_service_time():
    # W = ρS / (2(1 − ρ)) = 0.5 · 0.2 / 1 = 0.1 s.
    assert prefill_queue_s(0.2, 0.5) == pytest.approx(0.1)


def _evaluate(eff: Efficiency, concurrency: float, **kw) -> Evaluation:
    req = PredictRequest(model="llama-3.1-8b", gpu="h200", weight_dtype="fp8", isl=4096, osl=512, **kw)
    scenario = resolve(req)
    config, model, gpu = scenario.config, scenario.model, scenario.gpu
    ev = evaluate(model, gpu, config, eff, LengthDist(4096), LengthDist(512), concurrency)
    assert isinstance(ev, Evaluation)
    return ev


def test_synchronised_waves_make_ttft_grow_with_concurrency():
    # Every factor given (the shipped defaults' values), so the hand figure below is ours.
    waves = Efficiency(
        hbm_fraction=0.8,
        attention_fraction=0.6,
        gemm_fraction=0.7,
        gemm_half_tokens=64.0,
        lowprec_fraction=1.0,
        dequant_fraction=0.7,
        comm_fraction=0.7,
        step_overhead_s=2e-3,
        per_sequence_overhead_s=1e-5,
        ttft_overhead_s=0.05,
        prefill_wave_fraction=1.0,
    )
    random_arrivals = waves.with_values(prefill_wave_fraction=0.02)
    # One request in flight has no wave to wait behind.
    assert _evaluate(waves, 1).steady.ttft_s <= _evaluate(random_arrivals, 1).steady.ttft_s
    low, high = _evaluate(waves, 4).steady, _evaluate(waves, 64).steady
    # The wave term grows by (64 − 1)/2 − (4 − 1)/2 = 30 prompts × 4,096 tokens = 122,880 prompt
    # tokens at the batched prefill rate (8,192-token chunks, SGLang on an H200, FP8 weights):
    # - GEMMs: 2 × 6.979e9 dense params = 1.3959e10 FLOP/token at 1.9789e15 FP8 FLOP/s × 0.7
    #   × 8,192/(8,192 + 64) = 1.3745e15 → 1.0156e-5 s;
    # - attention: 2 × 32 heads × (128 + 128) × 32 layers = 524,288 FLOP per context token × 2,048
    #   (mean causal context) = 1.0737e9 FLOP at 0.9894e15 BF16 × 0.7 = 6.926e14 → 1.550e-6 s;
    # - step overhead 2 ms / 8,192 tokens = 2.44e-7 s;
    # → 1.1950e-5 s/token × 122,880 = 1.468 s. The decode step's own growth with the batch (half a
    # step in TTFT) adds a few ms, under 1 %.
    assert high.ttft_s - low.ttft_s == pytest.approx(1.468, rel=0.2)


def test_mla_prefills_in_the_non_absorbed_form():
    # DeepSeek-V3, TP8: 128/8 = 16 heads per GPU, 61 MLA layers.
    # decode (absorbed): 2 · 16 · (2·512 + 64) · 61 = 2,123,776 FLOP per query token per context token;
    # prefill: 2 · 16 · (192 + 128) · 61 = 624,640.
    req = PredictRequest(model="deepseek-v3", gpu="h200", num_gpus=8, tp=8, weight_dtype="fp8")
    scenario = resolve(req)
    config, model, gpu = scenario.config, scenario.model, scenario.gpu
    ev = evaluate(model, gpu, config, Efficiency(), LengthDist(1024), LengthDist(1024), 8.0)
    assert isinstance(ev, Evaluation)
    assert ev.deployment.attn_flops_per_token_ctx == pytest.approx(2_123_776)
    assert ev.deployment.attn_prefill_flops_per_token_ctx == pytest.approx(624_640)


def test_with_attention_dp_the_step_waits_for_the_rank_that_prefills_a_whole_prompt():
    def step(attention_dp: bool, chunk: float) -> float:
        req = PredictRequest(
            model="deepseek-v3",
            gpu="h200",
            num_gpus=8,
            tp=8,
            ep=8 if attention_dp else 1,
            attention_dp=attention_dp,
            weight_dtype="fp8",
        )
        scenario = resolve(req)
        config, model, gpu = scenario.config, scenario.model, scenario.gpu
        ev = evaluate(model, gpu, config, Efficiency(), LengthDist(8192), LengthDist(1024), 64.0)
        assert isinstance(ev, Evaluation)
        return step_time(ev.deployment, Efficiency(), 64.0, 8192.0, 8192.0, 4096.0, prompt_chunk_tokens=chunk).total_s

    assert step(True, 8192.0) > step(True, 0.0)  # one rank holds the whole 8,192-token prompt
    assert step(False, 8192.0) == step(False, 0.0)  # without attention DP every rank shares it


def test_trtllm_reserves_the_whole_request_vllm_the_running_context():
    # TRT-LLM GUARANTEED_NO_EVICT holds ISL + OSL = 4,096 + 4,096 = 8,192 tokens per running request;
    # vLLM (no reservation) holds the running mean context ISL + OSL/2 = 4,096 + 2,048 = 6,144.
    for engine, held in (("trtllm", 8192), ("vllm", 6144)):
        req = PredictRequest(
            model="llama-3.1-8b", gpu="h100-sxm", weight_dtype="fp8", engine=engine, isl=4096, osl=4096
        )
        scenario = resolve(req)
        config, model, gpu = scenario.config, scenario.model, scenario.gpu
        ev = evaluate(model, gpu, config, Efficiency(), LengthDist(4096), LengthDist(4096), 10_000.0)
        assert isinstance(ev, Evaluation)
        assert ev.steady.limits.kv == pytest.approx(ev.memory.kv_capacity_tokens / held)


def test_a_wave_of_spread_output_lengths_arrives_spread_and_queues_less():
    # Fixed lengths keep the whole wave; a spread W against the wave's prefill P = 2 × mean wait:
    # wait 1 s (P = 2 s), W = 0.5 s → 1 − 0.5/2 = 0.75; W ≥ P → 0.
    assert wave_persistence(1.0, 0.0) == 1.0
    assert wave_persistence(1.0, 0.5) == pytest.approx(0.75)
    assert wave_persistence(1.0, 2.5) == 0.0
    # Fixed length: no spread. A lognormal of σ = 0.0641 around 922 (InferenceX's U[0.8 L, L]):
    # sd = 922 × 0.0642 = 59.2 tokens → √12 × 59.2 = 205 tokens = 0.2 × 1,024 (the uniform's width),
    # within 6 % (the cap at L trims the lognormal's upper tail: 194.6 tokens).
    assert length_spread_tokens(LengthDist(1000)) == 0.0
    assert length_spread_tokens(LengthDist(922, 0.06409, 1024.44)) == pytest.approx(204.9, rel=0.06)


def test_a_closed_loop_waits_behind_at_most_its_other_requests():
    # M/D/1 at ρ = 0.5, S = 0.2 s: 0.5 × 0.2 / (2 × 0.5) = 0.1 s. With one other request in
    # flight at most 1 × 0.2 s is ahead (no cap binds); with 0.25 of one (a fractional mean batch)
    # 0.05 s; at concurrency 1 (no other request) no wait at all.
    assert prefill_queue_s(0.2, 0.5, others=1.0) == pytest.approx(0.1)
    assert prefill_queue_s(0.2, 0.5, others=0.25) == pytest.approx(0.05)
    assert prefill_queue_s(0.2, 0.95, others=0.0) == 0.0


def test_one_request_prefills_its_whole_prompt_once_per_cycle():
    # SGLang (prefill apart from decode) on an H200 at concurrency 1: the 4,096-token prompt fits
    # one 8,192-token chunk, so each cycle is 512 decode steps plus one prefill step of 4,096
    # tokens, not half of one (4,096 / 8,192 chunks of the 4,096-token step, as the cycle counted
    # before).
    eff = Efficiency()
    ev = _evaluate(eff, 1)
    assert ev.settings.chunk_tokens == 8192
    pre = step_time(ev.deployment, eff, 0.0, 0.0, 4096.0, 2048.0, prompt_chunk_tokens=4096.0)
    assert ev.steady.cycle_s == pytest.approx(512 * ev.steady.decode_step.total_s + pre.total_s, rel=1e-9)


def test_a_wave_that_fits_one_prefill_step_waits_for_the_whole_step():
    # SGLang on an H200, 2 requests of 4,096 tokens in flight, every arrival in a wave: both
    # prompts ride one 8,192-token prefill step, so the wave's TTFT is that whole step. The
    # token-by-token wait (own prompt + (2 − 1)/2 of the other) gave three quarters of it.
    eff = Efficiency(prefill_wave_fraction=1.0)
    ev = _evaluate(eff, 2)
    assert ev.settings.chunk_tokens == 8192
    both = step_time(ev.deployment, eff, 0.0, 0.0, 8192.0, 2048.0, prompt_chunk_tokens=4096.0).total_s
    half_decode = ev.steady.decode_step.total_s / 2
    assert ev.steady.ttft_s == pytest.approx(eff.ttft_overhead_s + half_decode + both, rel=1e-9)
