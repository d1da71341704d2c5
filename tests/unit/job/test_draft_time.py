"""Draft time per verification step (job.draft.draft_s): a chain drafter (MTP, EAGLE) runs k
passes of its head; a DFlash drafter drafts its whole block in one pass ("parallel drafting",
z-lab/dflash README; arXiv:2602.06036), that pass over k + 1 query tokens per sequence."""

from __future__ import annotations

import pytest

from tokenplan.api.resolve import PredictRequest, resolve
from tokenplan.job.draft import draft_s
from tokenplan.job.evaluate import Evaluation
from tokenplan.perf.speculative import SpecDecode
from tokenplan.perf.step import step_time


def _setup(spec: str):
    scenario = resolve(PredictRequest(model="qwen3.6-27b", gpu="b200", weight_dtype="fp8", spec=spec))
    ev = scenario.evaluate()
    assert isinstance(ev, Evaluation)
    return ev.deployment, scenario.efficiency


def test_a_chain_drafter_runs_k_passes_and_dflash_one_over_its_block():
    d, eff = _setup("dflash:7")
    batch, ctx = 32.0, 3_000.0
    layer_share = 5 / 64  # a 5-layer drafter against Qwen3.6-27B's 64 layers
    lm_share = d.lm_head_params / (d.dense_params + d.lm_head_params)

    def pass_s(query_tokens: int, layers: int) -> float:
        one = step_time(d, eff, batch, ctx, query_tokens_per_seq=query_tokens)
        kernel = one.total_s - one.overhead_s
        share = layers / 64
        return kernel * (share + lm_share) + eff.per_sequence_overhead_s * batch + eff.layer_latency_s * layers

    dflash = SpecDecode("dflash", 7, 4.0, 5)
    assert draft_s(d, eff, batch, ctx, dflash) == pytest.approx(pass_s(8, 5), rel=1e-12)
    eagle = SpecDecode("eagle3", 7, 4.0, 1)
    assert draft_s(d, eff, batch, ctx, eagle) == pytest.approx(7 * pass_s(1, 1), rel=1e-12)
    # one pass over 8 tokens a sequence reads the drafter's weights once: it is not 7 passes' worth
    assert layer_share > 0 and draft_s(d, eff, batch, ctx, dflash) < 7 * pass_s(1, 5)


def test_dflash_drafts_k_plus_one_tokens_at_k_1_too():
    # dflash:1 drafts its block of 1 token in one pass over k + 1 = 2 query tokens a sequence (the
    # caller's one-token step was used at k = 1): the formula of the test above with 2 tokens
    d, eff = _setup("dflash:1")
    batch, ctx = 32.0, 3_000.0
    lm_share = d.lm_head_params / (d.dense_params + d.lm_head_params)
    two = step_time(d, eff, batch, ctx, query_tokens_per_seq=2)
    expected = (two.total_s - two.overhead_s) * (5 / 64 + lm_share) + eff.per_sequence_overhead_s * batch
    expected += eff.layer_latency_s * 5
    one = step_time(d, eff, batch, ctx)  # what a caller holding its decode step passes
    assert draft_s(d, eff, batch, ctx, SpecDecode("dflash", 1, 1.5, 5), one) == pytest.approx(expected, rel=1e-12)


def test_before_zero_bubble_the_next_steps_cpu_hides_behind_the_draft_only():
    # vLLM 0.14–0.18 with MTP (vllm PR #29957 / #32951): the verify step charges its CPU work whole
    # (cpu_overlap False) and the draft's kernels hide min(CPU, kernels) of it. At 171 sequences:
    # CPU = step_overhead_s + 171 × per_sequence_overhead_s; kernels = one MTP layer's share of
    # the step's kernel time plus the lm_head's, plus one layer's small-kernel latency.
    from dataclasses import replace

    d, eff = _setup("mtp:1")
    batch, ctx = 171.0, 1_280.0
    mtp = SpecDecode("mtp", 1, 1.8, 1)
    one = step_time(d, eff, batch, ctx)
    lm_share = d.lm_head_params / (d.dense_params + d.lm_head_params)
    kernels = (one.total_s - one.overhead_s) * (1 / 64 + lm_share) + eff.layer_latency_s
    cpu = eff.step_overhead_s + eff.per_sequence_overhead_s * batch
    plain = draft_s(d, eff, batch, ctx, mtp, one)
    assert plain == pytest.approx(kernels + eff.per_sequence_overhead_s * batch, rel=1e-12)
    early = replace(d, cpu_overlap=False, cpu_overlap_draft_only=True)
    assert draft_s(early, eff, batch, ctx, mtp, one) == pytest.approx(plain - min(cpu, kernels), rel=1e-12)
    # the fitted vLLM CPU time (2.0 ms + 171 × 10.2 µs ≈ 3.7 ms) is more than one draft's kernels
    # of Qwen3.6-27B on a B200 (a few ms at most), so the whole draft hides CPU: the draft's own
    # time falls to its per-sequence cost
    assert min(cpu, kernels) == kernels
