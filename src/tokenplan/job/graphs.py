"""Steps outside CUDA graphs: the host time vLLM adds to a step of a hybrid (Gated DeltaNet) model
that it cannot replay from a captured graph.

vLLM replays a decode step from a CUDA graph only up to its largest capture size,
``max_cudagraph_capture_size = min(max_num_seqs × (1 + k) × 2, 512)`` tokens (engine-facts V5;
``EngineSettings.graph_max_bs``). A step of more tokens runs without a graph: every kernel is
launched from Python. That includes the decode steps of a batch past the capture size, and every
step carrying a prompt chunk past it (a 1,024-token prompt alone). For a GDN hybrid that launch
time is not hidden behind the GPU: the GDN metadata build and chunk kernels synchronise host and
device within the step (vllm-project/vllm#37239: three stream syncs in ``prepare_chunk_indices``;
#38047: boolean-mask indexing on the GPU in ``GDNAttentionMetadata.build``, +7 % throughput once
removed; #38361: "for prefill_size=1000, GDN CPU part takes 2x+ longer then GPU part, and default
cudagraph_max_capture_size is 512, so we don't hide CPU in this case").

The size, per layer of the model, is measured in vllm-project/vllm#27222 (B200, Qwen3-Next-80B-A3B,
48 layers, TP4, decode at batch 1,024): 13,900 output tok/s with graphs up to 512 (the steps of
1,024 run without one) against 21,000 with ``--cuda-graph-sizes=1024``, i.e. steps of
1,024 / 13,900 = 73.7 ms against 1,024 / 21,000 = 48.8 ms: 24.9 ms more per step outside a
graph, 24.9 / 48 = 0.52 ms per layer (``EngineSettings.uncaptured_gdn_layer_s``, catalog/engines.yaml).
SGLang keeps prompts in steps of their own and TensorRT-LLM has no GDN host path here: 0 for both.
With PP, vLLM runs a step as one microbatch per stage, each held against the capture size
(:func:`outside_s`); the planner tries a running cap that keeps the decode steps inside the graphs
(:func:`graph_running_cap`).
"""

from __future__ import annotations

import math
from typing import NamedTuple

from tokenplan.arch.spec import ModelSpec
from tokenplan.engines.base import EngineSettings
from tokenplan.perf.deployment import Deployment
from tokenplan.perf.speculative import SpecDecode


def _gdn_layer_s(model: ModelSpec, settings: EngineSettings) -> float:
    """The host time per layer (seconds) a step outside CUDA graphs adds: the engine's
    ``uncaptured_gdn_layer_s`` on a Gated DeltaNet hybrid, 0 on any other model."""
    linear = model.linear
    return settings.uncaptured_gdn_layer_s if linear is not None and linear.kind == "gated_deltanet" else 0.0


class Eager(NamedTuple):
    """What a step outside CUDA graphs costs (:func:`uncaptured`): ``step_s`` the host time of a
    whole step whose every microbatch runs outside them (seconds), ``captured_tokens`` the most
    tokens a microbatch replayed from a graph holds, ``microbatches`` the microbatches of a step
    (vLLM with PP: one per stage, each with 1/PP of the running requests), ``ranks`` the engine
    ranks a step runs on (vLLM with DP attention: each TP rank an engine core capturing its own
    graphs; ``captured_tokens`` is then their sum, as ``EngineSettings.graph_max_bs`` is)."""

    step_s: float
    captured_tokens: float
    microbatches: int = 1
    ranks: int = 1


NO_HOST_TIME = Eager(0.0, math.inf)


def uncaptured(d: Deployment, settings: EngineSettings, spec: SpecDecode | None = None) -> Eager:
    """The cost of a step outside CUDA graphs for ``d`` under ``settings`` with ``spec``'s draft
    tokens (:class:`Eager`); :data:`NO_HOST_TIME` where none is known (no GDN layer, or an engine
    that adds none).

    With k draft tokens vLLM captures up to ``min(max_num_seqs × (1 + k) × 2, 512,
    max_num_batched_tokens)`` tokens: ``graph_max_bs`` (the same without the 1 + k) times
    1 + k, within ``graph_cap_tokens`` (the 512 and the token budget), since
    ``min(min(2s, 512, c) × q, 512, c) = min(2s·q, 512, c)`` for q ≥ 1. A running cap of 100
    with MTP k = 3 captures steps of 100 × 4 = 400 tokens (min(800, 512) = 512), not 200."""
    per_layer_s = _gdn_layer_s(d.spec, settings)
    if per_layer_s <= 0:
        return NO_HOST_TIME
    captured = settings.graph_max_bs
    if spec is not None and settings.graph_cap_tokens:
        captured = min(captured * (1 + spec.draft_tokens), settings.graph_cap_tokens)
    ranks = d.layout.tp if d.layout.attention_dp else 1
    return Eager(per_layer_s * d.spec.num_layers, float(captured), d.layout.pp, ranks)


def outside_s(eager: Eager, decode_tokens: float, prompt_tokens: float = 0.0) -> float:
    """The host time (seconds) a step of ``decode_tokens`` decode and ``prompt_tokens`` prompt
    tokens adds. Its ``m`` microbatches each hold ``decode_tokens / m`` decode tokens, one of them
    the prompt tokens too. Each stage runs every microbatch in turn over its L/m layers, so a
    microbatch past ``captured_tokens`` adds L/m layers' host time, ``step_s / m``, to the step.
    With PP1: ``step_s`` past the capture size, else 0. With R attention-DP ranks each rank holds
    1/R of the decode tokens against its own 1/R of ``captured_tokens``, and the prompt tokens sit
    on one rank (a prompt is prefilled whole on the rank that holds its sequence, ``perf.step``),
    whose step past its graphs every rank waits for (the MoE all-to-all): 8 ranks of 512 with
    1,024 decodes (128 a rank) and a 1,024-token prompt run 128 + 1,024 > 512 outside the graphs."""
    if eager.step_s == 0.0:
        return 0.0
    m, r = eager.microbatches, eager.ranks
    share, captured = decode_tokens / m / r, eager.captured_tokens / r
    past = (share + prompt_tokens > captured) + (m - 1) * (share > captured)
    return eager.step_s / m * past


def graph_running_cap(model: ModelSpec, settings: EngineSettings, spec: SpecDecode | None) -> int | None:
    """The running cap per replica (requests) at which every decode step stays inside the CUDA
    graphs, where a step past them costs host time (:func:`uncaptured`) and the engine's default
    cap lets the batch pass them; else None. vLLM on Qwen3.6-27B: 512 tokens / (1 + k) per step,
    512 requests without speculation, 256 with MTP k = 1, under its default ``max_num_seqs`` of
    1,024. ``planning.space`` evaluates this cap beside the default: at the default the batch runs
    past the graphs (vllm#27222: 13,900 against 21,000 tok/s at 1,024), at the cap it runs fewer
    requests in them, and the faster of the two is planned."""
    if _gdn_layer_s(model, settings) <= 0:
        return None
    cap = (settings.graph_cap_tokens or settings.graph_max_bs) // (1 + (spec.draft_tokens if spec else 0))
    return cap if cap >= 1 and (settings.max_running is None or cap < settings.max_running) else None
