"""The results of one evaluated configuration, as ``predict`` and ``memory`` return them: a
rejected configuration, the figures (with their 80 % bands in :class:`Prediction`) and one GPU's
memory breakdown. The JSON form and its reading back are :mod:`tokenplan.results`'s
(``to_json``/``from_json``).

Units are in the names (``_bytes``, ``_ms``, ``_tok_s``, ``_days``, ``_usd``), as everywhere below.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from tokenplan.job.evaluate import Evaluation, allocated_requests, kv_and_state
from tokenplan.job.workload import LengthDist
from tokenplan.results import INLINE, Bands, JsonResult
from tokenplan.units import MS_PER_S


@dataclass(frozen=True)
class Rejected(JsonResult):
    """A configuration that cannot run, and why (``predict`` and ``memory``)."""

    SCHEMA_VERSION: ClassVar[int | None] = 1

    rejected: str


@dataclass(frozen=True)
class EvaluationFigures(JsonResult):
    """One evaluated configuration: layout, formats, throughput (tokens/s), latencies (ms),
    memory (bytes, tokens) and the bottleneck. ``ttft_ms`` is the mean over arrivals,
    ``ttft_median_ms`` the median request's (``job.steady.SteadyState``). ``max_concurrency``,
    ``kv_capacity_tokens`` and ``state_slots`` are over all replicas; ``kv_bytes_per_token`` and
    ``state_bytes_per_sequence`` are for the whole model; ``chunk_tokens`` is a replica's token
    budget per step (with DP attention under vLLM and TRT-LLM, its ranks' sum: the launch writes
    each rank's)."""

    layout: str
    tp: int
    pp: int
    ep: int
    dp: int
    attention_dp: bool
    num_gpus: int
    weight_dtype: str
    kv_dtype: str
    engine: str
    spec: str
    output_tok_s_total: float
    output_tok_s_per_gpu: float
    roofline_output_tok_s_total: float
    batch_per_replica: float
    max_concurrency: float
    batch_limit_reason: str
    kv_bytes_per_token: float
    state_bytes_per_sequence: float
    weight_bytes_per_gpu: float
    kv_capacity_tokens: float | None  # None: no full-attention layer (MemoryBreakdown.kv_tokens_reported)
    state_slots: float | None  # sequences the state pools hold (perf.memory: whole slots per rank)
    memory_fraction: float
    chunk_tokens: int
    step_time_ms: float
    tpot_ms: float
    ttft_ms: float
    ttft_median_ms: float
    prefill_share: float
    bottleneck: str
    warnings: tuple[str, ...]


@dataclass(frozen=True)
class Prediction(EvaluationFigures):
    """``predict``'s result: the figures and, with a shipped band table, their 80 % bands;
    ``efficiency``: where the efficiency factors come from (the shipped fit's provenance, or the
    ``--calibration`` profile's path and provenance), as ``plan``'s."""

    SCHEMA_VERSION: ClassVar[int | None] = 1

    bands: Bands | None = field(default=None, metadata=INLINE)
    efficiency: str = ""
    # offline (--concurrency max): every request is sent at once and waits for a slot for as long
    # as the requests queued ahead of it take, which predict is not told; the TTFT figures run from
    # when the slot frees and have no band (the queued regime's are client TTFTs, wait included)
    ttft_from_free_slot: bool = False


@dataclass(frozen=True)
class MemoryResult(JsonResult):
    """One GPU's memory (bytes), with KV capacity in tokens.

    ``kv_bytes_per_token`` and ``state_bytes_per_sequence`` are for the whole model,
    ``kv_bytes_per_token_per_gpu`` for this GPU's share; ``kv_capacity_tokens`` (the KV tokens
    the pool holds beside the running requests' state where the two share one pool) and
    ``state_slots`` are per replica; ``max_sequences`` is how many sequences of
    ``context_tokens`` (ISL + OSL, whole requests) fit in the KV cache; ``running_requests`` is
    the batch limit per replica, ``running_limited_by`` what sets it (``kv cache``, ``state
    slots``, ``kv cache and state`` or ``engine cap``) and ``running_context_tokens`` the context
    each running request is counted at for it (the engine's rule: the running mean ISL + the
    length-biased half output, or ISL + OSL where admission reserves the whole request, as
    TRT-LLM's does); ``allocation`` is what the engine allocates on one GPU at that many running
    requests (term → bytes: weights, kv_cache, draft_kv, state, spec_state, reserve; they sum to
    ``gpu_bytes``); ``draft_weight_bytes_per_gpu`` is an EAGLE/DFlash drafter's part of the
    weights and ``draft_kv_bytes_per_token_per_gpu`` what the draft's attention layers add per
    token on this GPU (MTP's or the drafter's; 0 without speculative decoding), in the KV pool
    where ``draft_kv_shared``; ``pool_bytes_per_token_per_gpu`` is what one more full-attention
    token takes of the pool (the shared draft layers, and SGLang's sliding-window pool sized in
    proportion: ``kv_capacity_tokens`` × it is the pool where no state shares it);
    ``spec_state_pool_bytes`` is what SGLang reserves for the speculative states of its running cap
    before it splits the rest into KV and state pools (0 elsewhere).
    """

    SCHEMA_VERSION: ClassVar[int | None] = 1

    gpu: str
    layout: str
    gpu_bytes: float
    weight_bytes_per_gpu: float
    reserve_bytes: float
    kv_pool_bytes: float
    state_pool_bytes: float
    kv_bytes_per_token: float
    kv_bytes_per_token_per_gpu: float
    state_bytes_per_sequence: float
    kv_capacity_tokens: float | None  # None: no full-attention layer (MemoryBreakdown.kv_tokens_reported)
    state_slots: float | None  # sequences the state pool holds (perf.memory: whole slots per rank)
    max_sequences: float
    context_tokens: float
    memory_fraction: float
    warnings: tuple[str, ...]
    running_requests: float
    running_limited_by: str
    running_context_tokens: float
    allocation: Mapping[str, float]
    draft_weight_bytes_per_gpu: float = 0.0
    draft_kv_bytes_per_token_per_gpu: float = 0.0
    draft_kv_shared: bool = False
    pool_bytes_per_token_per_gpu: float = 0.0
    spec_state_pool_bytes: float = 0.0
    reserves_whole_output: bool = False  # running_context_tokens is ISL + max_tokens (TRT-LLM's admission)
    engine: str = ""  # the engine whose allocation this is (its reserve and pools differ per engine)


def evaluation_figures(ev: Evaluation) -> EvaluationFigures:
    """The figures of an evaluation (units in the field names)."""
    s, m, lay = ev.steady, ev.memory, ev.config.layout
    kv_tok, state_seq = kv_and_state(ev.deployment.spec, ev.config.kv_dtype, ev.config.ssm_dtype)
    kv = m.kv_tokens_reported(s.limits.limit)
    return EvaluationFigures(
        layout=lay.describe(),
        tp=lay.tp,
        pp=lay.pp,
        ep=lay.ep,
        dp=lay.dp,
        attention_dp=lay.attention_dp,
        num_gpus=lay.num_gpus,
        weight_dtype=ev.config.weight_dtype.value,
        kv_dtype=ev.config.kv_dtype.value,
        engine=ev.config.engine.name,
        spec=ev.config.spec.describe() if ev.config.spec else "none",
        output_tok_s_total=ev.output_tok_s_total,
        output_tok_s_per_gpu=ev.output_tok_s_per_gpu,
        roofline_output_tok_s_total=s.roofline_output_tok_s * lay.dp,
        batch_per_replica=s.batch,
        max_concurrency=s.limits.limit * lay.dp,
        batch_limit_reason=s.batch_reason,
        kv_bytes_per_token=kv_tok,
        state_bytes_per_sequence=state_seq,
        weight_bytes_per_gpu=m.weight_bytes_per_gpu,
        kv_capacity_tokens=None if kv is None else kv * lay.dp,  # beside the running requests' state
        state_slots=None if m.state_slots is None else m.state_slots * lay.dp,
        memory_fraction=ev.settings.memory_fraction,
        chunk_tokens=ev.settings.chunk_tokens,
        step_time_ms=s.decode_step.total_s * MS_PER_S,
        tpot_ms=s.tpot_s * MS_PER_S,
        ttft_ms=s.ttft_s * MS_PER_S,
        ttft_median_ms=s.median_ttft_s * MS_PER_S,
        prefill_share=s.prefill_share,
        bottleneck=s.bottleneck,
        warnings=tuple(ev.warnings),
    )


def memory_result(ev: Evaluation, isl: LengthDist, osl: LengthDist, context_tokens: float) -> MemoryResult:
    """The memory of one GPU of an evaluated configuration (:class:`MemoryResult`) on the
    workload's prompt and output lengths (``isl``, ``osl``) and a whole request's ``context_tokens``
    (the stated mean ISL + OSL)."""
    config, m = ev.config, ev.memory
    kv_tok, state_seq = kv_and_state(ev.deployment.spec, config.kv_dtype, config.ssm_dtype)
    running = allocated_requests(ev)
    return MemoryResult(
        gpu=ev.deployment.gpu.key,
        layout=config.layout.describe(),
        gpu_bytes=m.gpu_bytes,
        weight_bytes_per_gpu=m.weight_bytes_per_gpu,
        reserve_bytes=m.reserve_bytes,
        kv_pool_bytes=m.kv_pool_bytes,
        state_pool_bytes=m.state_pool_bytes,
        kv_bytes_per_token=kv_tok,
        kv_bytes_per_token_per_gpu=m.kv_bytes_per_token_per_gpu,
        state_bytes_per_sequence=state_seq,
        kv_capacity_tokens=m.kv_tokens_reported(running),
        state_slots=m.state_slots,
        max_sequences=m.max_sequences(context_tokens),
        context_tokens=context_tokens,
        memory_fraction=ev.settings.memory_fraction,
        warnings=tuple(ev.warnings),
        running_requests=running,
        running_limited_by=ev.steady.limits.reason,
        running_context_tokens=config.engine.running_context_tokens(
            isl.mean, osl.mean, osl.running_mean, osl.max_tokens
        ),
        allocation=m.allocation(running),
        draft_weight_bytes_per_gpu=m.draft_weight_bytes_per_gpu,
        draft_kv_bytes_per_token_per_gpu=m.draft_kv_bytes_per_token_per_gpu,
        draft_kv_shared=m.draft_kv_shared,
        pool_bytes_per_token_per_gpu=m.pool_bytes_per_token_per_gpu,
        spec_state_pool_bytes=m.spec_state_pool_bytes,
        reserves_whole_output=config.engine.reserves_whole_output,
        engine=config.engine.name,
    )
