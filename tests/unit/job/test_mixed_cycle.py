"""The cycle of an engine that mixes prompt chunks into decode steps (vLLM, TRT-LLM)."""

from types import SimpleNamespace

import pytest
from tests.support.our_numbers import EFF, ours

from tokenplan.api.resolve import PredictRequest, resolve
from tokenplan.job.batching import _mixed_cycle
from tokenplan.job.graphs import Eager
from tokenplan.job.workload import fixed


def _dense():
    """Our own numbers: 4 TB/s HBM, 1 PFLOP/s, 8e9 dense params in 8e9 bytes, a 5e8-param lm_head
    in 1e9 bytes, no KV or attention work, TP1 (no collective)."""
    ev = resolve(
        PredictRequest("llama-3.1-8b", "h100-sxm", engine="trtllm", isl=7000, osl=1000, concurrency=4)
    ).evaluate()
    d = ev.deployment
    assert d.layout.tp == 1 and d.spec.moe is None
    return ours(d)


def test_a_prompt_rides_whole_in_one_step_and_the_other_steps_decode_alone():
    # Decode step at batch 4: weights 9e9 B / (4e12 × 0.8) = 2.8125 ms (FLOPs 2 × 8.5e9 × 4 = 6.8e10
    # at 5e14 × 4/12 → 0.41 ms, below) + 1 ms fixed = 3.8125 ms.
    # Budget 8,192 − 4 decodes = 8,188 ≥ 7,000: each of the 4 prompts rides whole in one step with the
    # 4 decodes: FLOPs 2 × 8e9 × 7,004 = 1.12064e14 (+ lm_head 2 × 5e8 × 5 = 5e9, 0.004 %) at
    # 5e14 × 7,004/7,012 = 4.99429e14 FLOP/s = 224.4 ms, compute-bound, + 1 ms = 225.4 ms.
    # Cycle: 4 × 225.4 ms + (1,000 − 4) × 3.8125 ms = 0.9016 + 3.7973 = 4.6989 s.
    dec = 3.8125e-3
    piece = (2 * 8e9 * 7004 + 5e9) / (5e14 * 7004 / 7012) + 1e-3
    cyc = _mixed_cycle(
        _dense(), EFF, SimpleNamespace(chunk_tokens=8192), 4.0, 7500.0, fixed(7000), 1000.0, 1.0, dec, dec
    )
    assert cyc.cycle_s == pytest.approx(4 * piece + 996 * dec, rel=1e-4)
    # Prefill share: 1 − 1,000 × 3.8125 ms / cycle = 1 − 3.8125/4.6989 = 0.1886.
    assert cyc.prefill_share == pytest.approx(1 - 1000 * dec / (4 * piece + 996 * dec), rel=1e-4)


def test_prompts_that_need_more_steps_than_the_cycle_has_spread_over_every_step():
    # Batch 400 of 7,000-token prompts and 10 decode steps per cycle: the budget 8,192 − 400 = 7,792
    # holds one prompt per step, so 400 prompts need 400 steps > 10: the cycle is
    # 2.8e6 / 7,792 = 359.3 steps, each carrying 7,792 prompt tokens and 400 × 10/359.3 = 11.1 decodes.
    # FLOPs per step 2 × 8e9 × (7,792 + 11.13) = 1.2485e14 at 5e14 × 7,803/7,811 → 249.9 ms + 1 ms.
    n_steps = 400 * 7000 / 7792
    tokens = 7792 + 400 * 10 / n_steps
    step = 2 * 8e9 * tokens / (5e14 * tokens / (tokens + 8)) + 1e-3
    dec = 3.8125e-3  # unused by this branch except through the draft overhead (0 here)
    cyc = _mixed_cycle(
        _dense(), EFF, SimpleNamespace(chunk_tokens=8192), 400.0, 7500.0, fixed(7000), 10.0, 1.0, dec, dec
    )
    # lm_head: 11 decodes + ~1.1 prompt last tokens × 1e9 FLOPs ≈ 1.2e10, 0.01 % of the step.
    assert cyc.cycle_s == pytest.approx(n_steps * step, rel=1e-3)


def test_a_step_past_the_graph_capture_size_pays_the_host_time_once_per_step():
    # The first test's cycle with eager = (20 ms, 512 tokens): each of the 4 prompt steps carries
    # 7,004 tokens > 512 and pays 20 ms more; the 996 decode-only steps of 4 tokens stay in a graph.
    # Cycle: 4 × (225.4 + 20) ms + 996 × 3.8125 ms.
    dec = 3.8125e-3
    piece = (2 * 8e9 * 7004 + 5e9) / (5e14 * 7004 / 7012) + 1e-3
    cyc = _mixed_cycle(
        _dense(), EFF, SimpleNamespace(chunk_tokens=8192), 4.0, 7500.0, fixed(7000), 1000.0, 1.0, dec, dec,
        eager=Eager(0.020, 512.0),
    )  # fmt: skip
    assert cyc.cycle_s == pytest.approx(4 * (piece + 0.020) + 996 * dec, rel=1e-4)
    # own prefill (TTFT's share): one piece step, host time included
    assert cyc.own_s == pytest.approx(piece + 0.020, rel=1e-4)


def test_vllm_adds_the_uncaptured_host_time_on_a_gdn_hybrid_only():
    from tokenplan.job.graphs import NO_HOST_TIME, outside_s, uncaptured

    def eager(model: str, engine: str) -> Eager:
        ev = resolve(
            PredictRequest(model, "b200", engine=engine, weight_dtype="fp8", isl=1024, osl=512, concurrency=171)
        ).evaluate()
        return uncaptured(
            ev.deployment, ev.config.engine.settings(ev.deployment.gpu, ev.config.layout, speculative=False)
        )

    # Qwen3.5-27B: 64 layers (48 Gated DeltaNet) × 0.52 ms (vllm#27222: (1,024/13,900 − 1,024/21,000) s
    # over 48 layers) = 33.28 ms, past vLLM's 512-token capture size (min(2 × 1,024 seqs, 512, 8,192))
    assert eager("qwen3.5-27b", "vllm") == pytest.approx((64 * 0.00052, 512.0, 1, 1))
    assert eager("qwen3.5-27b", "sglang") == NO_HOST_TIME  # prompts in steps of their own
    assert eager("llama-3.1-8b", "vllm") == NO_HOST_TIME  # no GDN layer
    one = Eager(0.03328, 512.0)
    assert outside_s(one, 512.0) == 0.0 and outside_s(one, 513.0) == 0.03328
    assert outside_s(one, 342.0, 1024.0) == 0.03328  # a 1,024-token prompt riding with 342 decodes


def test_with_pp_each_microbatch_past_the_capture_size_pays_its_share():
    from tokenplan.job.graphs import outside_s

    # PP2: two microbatches of half the decodes each; one past 512 tokens adds step_s / 2
    pp2 = Eager(0.064, 512.0, 2)
    assert outside_s(pp2, 1000.0) == 0.0  # 500 + 500: both captured
    assert outside_s(pp2, 1026.0) == 0.064  # 513 + 513: both past
    assert outside_s(pp2, 1000.0, 100.0) == 0.032  # 500 + 100 = 600 past, the other 500 captured


def test_with_dp_attention_the_rank_holding_a_prompt_runs_past_its_own_graphs():
    from tokenplan.job.graphs import outside_s, uncaptured

    # Qwen3.5-397B-A17B TP8 DP-attn on vLLM: each of the 8 ranks an engine core capturing up to
    # min(2 × 1,024, 512, 8,192) = 512 tokens; the settings hold the ranks' sum, 8 × 512 = 4,096
    ev = resolve(
        PredictRequest(
            "qwen3.5-397b-a17b", "b200", num_gpus=8, tp=8, ep=8, attention_dp=True, engine="vllm", weight_dtype="fp8"
        )
    ).evaluate()
    eager = uncaptured(ev.deployment, ev.settings)
    assert (eager.captured_tokens, eager.microbatches, eager.ranks) == (4096.0, 1, 8)
    step = eager.step_s
    # 1,024 decodes alone: 128 a rank ≤ 512, captured; 4,104: 513 a rank, past
    assert outside_s(eager, 1024.0) == 0.0 and outside_s(eager, 4104.0) == step
    # a 1,024-token prompt piece with the 1,024 decodes sits on one rank: 128 + 1,024 = 1,152 > 512,
    # past (the sums, 1,024 + 1,024 = 2,048 ≤ 4,096, read it as captured); 128 + 384 = 512 stays in
    assert outside_s(eager, 1024.0, 1024.0) == step and outside_s(eager, 1024.0, 384.0) == 0.0


def test_with_draft_tokens_vllm_captures_steps_of_running_cap_times_one_plus_k():
    # vLLM's capture size is min(max_num_seqs × (1 + k) × 2, 512, max_num_batched_tokens) (V5); the
    # host time was charged past min(2 × max_num_seqs, 512, …) whatever k, so --max-running 100 with
    # MTP k = 3 (verify steps of 100 × 4 = 400 tokens, captured) cut the prediction by half.
    from tokenplan.job.graphs import uncaptured
    from tokenplan.perf.speculative import parse_spec

    ev = resolve(
        PredictRequest("qwen3.5-27b", "b200", engine="vllm", weight_dtype="fp8", isl=1024, osl=512, concurrency=100)
    ).evaluate()

    def captured(max_running: int, spec: str, chunk: int | None = None) -> float:
        settings = ev.config.engine.settings(
            ev.deployment.gpu, ev.config.layout, speculative=True, max_running=max_running, chunk_tokens=chunk
        )
        return uncaptured(ev.deployment, settings, parse_spec(spec))[1]

    assert captured(100, "none") == 200.0  # min(100 × 2, 512, 8,192)
    assert captured(100, "mtp:3") == 512.0  # min(100 × 4 × 2 = 800, 512, 8,192)
    assert captured(50, "mtp:1") == 200.0  # min(50 × 2 × 2, 512, 8,192)
    assert captured(100, "mtp:3", chunk=384) == 384.0  # min(800, 512, 384)


def test_a_prompt_wave_pays_the_host_time_in_each_of_its_prefill_steps():
    # The opening wave's prefill steps (8,192 tokens each, > 512) ran without a graph but the wave's
    # TTFT counted them at their kernel time only (job_time's ramp paid the host time). 64 prompts of
    # 1,024 tokens fill 8 steps of 8,192, 8 prompts each: prompt i ends in step ⌈i/8⌉, so the mean
    # request waits (1 + … + 8)/8 = 4.5 steps, and 4.5 × the host time more than without it.
    from dataclasses import replace

    from tokenplan.job.batching import steady_state

    ev = resolve(
        PredictRequest("qwen3.5-27b", "b200", engine="vllm", weight_dtype="fp8", isl=1024, osl=1024, concurrency=64)
    ).evaluate()

    def opening_s(per_layer_s: float) -> float:
        settings = replace(ev.settings, uncaptured_gdn_layer_s=per_layer_s)
        args = (ev.deployment, EFF, ev.config.engine, settings, fixed(1024), fixed(1024), 64.0)
        return steady_state(*args, limits=ev.steady.limits).opening_ttft_s

    assert ev.settings.chunk_tokens == 8192 and ev.deployment.spec.num_layers == 64
    # 4.5 steps × 64 layers × 0.52 ms = 149.76 ms
    assert opening_s(0.00052) - opening_s(0.0) == pytest.approx(4.5 * 64 * 0.00052, rel=1e-6)


def test_the_running_cap_that_keeps_every_decode_step_in_vllms_cuda_graphs():
    from tokenplan.job.graphs import graph_running_cap
    from tokenplan.perf.speculative import SpecDecode

    def cap(model: str, engine: str, k: int) -> int | None:
        ev = resolve(PredictRequest(model, "b200", engine=engine, weight_dtype="fp8", concurrency=64)).evaluate()
        settings = ev.config.engine.settings(ev.deployment.gpu, ev.config.layout, speculative=k > 0)
        spec = SpecDecode("mtp", k, 1.5, 1) if k else None
        return graph_running_cap(ev.deployment.spec, settings, spec)

    # capture size min(2 × 1,024 × (1 + k), 512, 8,192) = 512 tokens (V5) over 1 + k tokens per
    # request: 512, 256, 128 requests, each under vLLM's default max_num_seqs of 1,024
    assert [cap("qwen3.6-27b", "vllm", k) for k in (0, 1, 3)] == [512, 256, 128]
    assert cap("qwen3.6-27b", "sglang", 1) is None  # prompts in steps of their own: no such cost
    assert cap("llama-3.1-8b", "vllm", 0) is None  # no GDN layer


def test_a_vllm_plan_on_a_gdn_hybrid_caps_the_batch_inside_the_graphs_where_that_is_faster():
    # 4× B200 at TP4: at vLLM's default cap the KV-limited batch passes 512 requests, so every
    # decode step runs without a graph (+64 × 0.52 ms); the cap of 512 keeps them in (a break-it
    # pass: the plan recommended --max-num-seqs 1024 at 14,253 tok/s where 512 gives 17,228)
    from tokenplan.api.plan import PlanRequest, plan

    o = plan(PlanRequest(gpus=("4xb200",), engine="vllm", tp=4, specs=("none",))).to_json()["options"][0]
    assert o["best"].endswith("running cap 512") and o["batch_per_replica"] == 512
    assert "--max-num-seqs 512" in o["launch"]["vllm"]
    default = [a for a in o["alternatives"] if a["configuration"] == "TP4, fp8 weights, fp8 KV"]
    assert default and default[0]["output_tok_s_total"] < o["output_tok_s_total"]


def test_the_plan_says_why_it_caps_the_batch_at_the_graphs():
    # the recommended TP4 configuration on 4× B200 runs cap 512; the answer says why and what the
    # default cap gives (the break-it case above: 17,228 against 14,253 tok/s)
    from tokenplan.api.plan import PlanRequest, plan

    answer = plan(PlanRequest(gpus=("4xb200",), engine="vllm", tp=4, specs=("none",))).answer
    (line,) = [a for a in answer if a.startswith("running cap 512 on 4× b200:")]
    # 64 layers × 0.52 ms = 33.28 ms → "~33 ms"; 512 running × 1 token = the 512-token capture size
    assert "up to 512 tokens" in line and "~33 ms of host time" in line and "512 running × 1 token per step" in line
    assert "at vLLM's default cap (batch 1,024/replica)" in line


def test_the_plan_does_not_credit_the_graphs_where_the_default_batch_was_inside_them():
    # 4× RTX PRO 6000, TP1×PP2×DP2: at vLLM's default max_num_seqs of 1,024 the KV pool holds
    # 486 per replica, 486 / 2 microbatches = 243 tokens a decode step, under the 512-token capture
    # size, so the graphs are not what the cap of 512 buys. It buys memory: the profiling run's
    # sampler pass takes (1,024 − 512) rows × 248,320 vocabulary × 24 B = 3.05 GB less per GPU,
    # and the KV pool holds 506 per replica (a break-it pass: the answer said the cap "keeps every
    # decode step inside them" against a default batch that already was). PP2 is fixed: the plan
    # leads with the measured TP1×DP4 unless told (planning.measured)
    from tokenplan.api.plan import PlanRequest, plan

    answer = plan(PlanRequest(gpus=("4xrtx-pro-6000",), engine="vllm", pp=2)).answer
    (line,) = [a for a in answer if a.startswith("running cap 512 on 4× rtx-pro-6000:")]
    assert "at vLLM's default cap of 1,024 the batch (486/replica, kv cache and state) already decodes" in line
    assert "room for 506/replica" in line and "keeps every decode step inside them" not in line


def test_with_dp_attention_a_prompt_is_cut_by_its_own_ranks_budget():
    from tokenplan.perf.step import step_time

    # DeepSeek-R1 TP8 DP-attn on TensorRT-LLM: the settings hold the ranks' sum of max_num_tokens,
    # 8 × 8,192 = 65,536. At 512 running, each rank decodes 512 / 8 = 64 and has 8,192 − 64 =
    # 8,128 tokens left for a prompt: an 8,192-token prompt takes ⌈8,192 / 8,128⌉ = 2 pieces of
    # 4,096 on its rank (the replica's 65,536 − 512 would have taken it whole). 512 prompts × 2
    # pieces = 1,024 piece steps ≤ 2,000 decode steps: the cycle is 1,024 piece steps + 976 decode
    # steps, and a request waits for its own 2 pieces.
    scenario = resolve(
        PredictRequest("deepseek-r1", "b200", num_gpus=8, tp=8, ep=8, attention_dp=True, engine="trtllm")
    )
    d, eff = scenario.evaluate().deployment, scenario.efficiency
    assert d.memory.sequence_shards == 8
    ctx, dec = 9_000.0, 0.02
    piece = step_time(d, eff, 512.0, ctx, 4096.0, 4096.0, 1.0, 8192.0).total_s
    cyc = _mixed_cycle(d, eff, SimpleNamespace(chunk_tokens=65_536), 512.0, ctx, fixed(8192), 2000.0, 1.0, dec, dec)
    assert cyc.own_s == pytest.approx(2 * piece, rel=1e-12)
    assert cyc.cycle_s == pytest.approx(1024 * piece + 976 * dec, rel=1e-12)


def test_sglang_with_dp_attention_prefills_a_prompt_in_its_ranks_share_of_the_chunk():
    from tokenplan.job.batching import _separate_cycle
    from tokenplan.perf.step import step_time

    # SGLang divides --chunked-prefill-size among the --dp-size ranks (server_args.py:
    # chunked_prefill_size // dp_size): a chunk of 16,384 over 8 ranks is 2,048 a rank, so a
    # request's own 8,192-token prompt takes 8,192 / 2,048 = 4 prefill steps of 2,048 tokens on its
    # rank (the replica's 16,384 would have taken it in one step of 8,192).
    scenario = resolve(
        PredictRequest(
            "deepseek-r1", "b200", num_gpus=8, tp=8, ep=8, attention_dp=True, engine="sglang", weight_dtype="fp8"
        )
    )
    d, eff = scenario.evaluate().deployment, scenario.efficiency
    one = step_time(d, eff, 0.0, 0.0, 2048.0, 4096.0, 1.0, 2048.0).total_s
    cyc = _separate_cycle(d, eff, SimpleNamespace(chunk_tokens=16_384), 64.0, fixed(8192), 1000.0, 0.02, 0.5)
    assert cyc.own_s == pytest.approx(4 * one, rel=1e-12)
    # the cycle's prompt work is the replica's: 64 × 8,192 / 16,384 = 32 prefill steps of 0.5 s
    assert cyc.cycle_s == pytest.approx(1000 * 0.02 + 32 * 0.5, rel=1e-12)
