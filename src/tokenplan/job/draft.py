"""The draft's time per verification step of speculative decoding (MTP, EAGLE, DFlash heads).

A draft pass runs the head's layers and the lm_head over the running batch: its kernels take the
target step's kernel time scaled by the head's share of the weights read (the head's layers of
the target's, plus the lm_head), plus the layers' small-kernel latency and the per-sequence CPU
cost of the pass.
"""

from __future__ import annotations

from tokenplan.engines.overlap import hidden_cpu_s
from tokenplan.perf.deployment import Deployment
from tokenplan.perf.efficiency import Efficiency
from tokenplan.perf.speculative import SpecDecode
from tokenplan.perf.step import step_time
from tokenplan.perf.step_record import StepTime


def draft_s(
    d: Deployment, eff: Efficiency, batch: float, ctx: float, spec: SpecDecode, one: StepTime | None = None
) -> float:
    """Draft time per verification step: k passes of a ``draft_layers``-layer head + lm_head,
    each with its layers' kernel latency (``layer_latency_s``) and per-sequence cost; DFlash
    drafts its block of k tokens in one pass ("parallel drafting" of a block diffusion drafter,
    z-lab/dflash README, arXiv:2602.06036), that pass over k + 1 query tokens per sequence.
    ``one``: ``step_time(d, eff, batch, ctx)`` where the caller has it already.

    Where the engine overlaps the next verify step's CPU work with the draft's kernels only
    (``Deployment.cpu_overlap_draft_only``: vLLM 0.14–0.18, ``engines.overlap``), that CPU time —
    the step overhead and the per-sequence cost of ``batch`` sequences, which the verify step
    then charged whole — hides behind the draft's kernels: ``min(cpu, draft kernels)`` comes
    off. E.g. 2.0 ms + 171 × 10.2 µs = 3.76 ms of CPU beside 1.0 ms of draft kernels (Qwen3.5-27B
    FP8 on a B200): 1.0 ms."""
    passes = 1 if spec.method == "dflash" else spec.draft_tokens
    if spec.method == "dflash":  # k + 1 query tokens at any k (dflash:1 too: 2)
        one = step_time(d, eff, batch, ctx, query_tokens_per_seq=spec.draft_tokens + 1)
    elif one is None:
        one = step_time(d, eff, batch, ctx)
    kernel = one.total_s - one.overhead_s
    lm_share = d.lm_head_params / max(d.dense_params + d.lm_head_params, 1.0)
    layer_share = spec.draft_layers / d.spec.num_layers
    kernels = passes * (kernel * (layer_share + lm_share) + eff.layer_latency_s * spec.draft_layers)
    total = kernels + passes * eff.per_sequence_overhead_s * batch
    if d.cpu_overlap_draft_only:
        total -= hidden_cpu_s(eff.step_overhead_s + eff.per_sequence_overhead_s * batch, kernels)
    return total
