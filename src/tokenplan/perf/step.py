"""One engine step (a decode batch, optionally with prefill tokens) → its time, with a named
breakdown and the bottleneck.

Each kernel family is a roofline of its own — time = max(bytes / achievable bandwidth,
FLOPs / achievable FLOP/s) — and the families run one after the other, so their times add:

- dense GEMMs: weights read once per step; ``2·params·tokens`` FLOPs;
- routed experts: only the experts the step's tokens touch are read — with ``T`` tokens each
  picking ``k`` of ``E`` experts uniformly, ``E·(1 − (1 − k/E)^T)`` experts per layer; with
  EP the layer waits for the busiest rank (:func:`ep_busiest_rank`);
- attention: decode reads every running sequence's KV cache; prefill is FLOP-bound;
- linear-attention state: each decoding sequence's whole recurrent state is read and written
  every step (Qwen3.6-27B TP1: 2 × 146.8 MiB per sequence per step);
- communication: two TP all-reduces per layer of ``tokens·hidden·2`` bytes (the engines'
  one-shot kernel inside one NVLink/Infinity Fabric domain, NCCL's ring or tree elsewhere); with attention DP
  and EP an all-to-all dispatch (FP8) and combine (BF16) per MoE layer; PP sends activations
  to the next stage;
- a fixed per-step overhead, a per-sequence CPU cost (scheduling), a per-layer kernel
  latency (the small kernels of a layer — norms, rotary, activation, quantization, router —
  each take a few µs however small the batch), the MoE block's own extra kernels per MoE layer,
  and MoE routing work per token and MoE layer (top-k, permute and un-permute: it scales with
  the step's tokens, not its sequences).

With PP, the batch runs as PP micro-batches through PP stages: ``step = PP × stage(tokens/PP)``.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from tokenplan.hardware import Link, LinkKind
from tokenplan.perf.comm import all_to_all_s, allreduce_s, p2p_s
from tokenplan.perf.deployment import Deployment
from tokenplan.perf.efficiency import Efficiency
from tokenplan.perf.gemm import fraction_at_point, row_point
from tokenplan.perf.step_constants import (  # noqa: F401  (ep_busiest_rank, expected_max_normal: their home was here)
    StepConstants,
    ep_busiest_rank,
    expected_max_normal,
    step_constants,
)
from tokenplan.units import ACTIVATION_BYTES

DISPATCH_BYTES = 1.0  # FP8 token dispatch in DeepEP-style all-to-all (DeepSeek-V3 report §3.3)


class StepTime(NamedTuple):
    """Seconds of one step by part, and its bottleneck (a named tuple: a plan sweep makes tens of
    thousands, and a tuple is built in a fifth of a frozen dataclass's time).

    Attributes:
        gemm_s, experts_s, attention_s, state_s: kernel-family times (roofline each).
        comm_s: collectives. overhead_s: fixed + per-sequence cost.
        memory_bound_s, compute_bound_s: the share of the kernel time limited by bytes vs FLOPs.
        bytes_moved, flops: per GPU, for roofline plots and MBU/MFU.
    """

    gemm_s: float
    experts_s: float
    attention_s: float
    state_s: float
    comm_s: float
    overhead_s: float
    memory_bound_s: float
    compute_bound_s: float
    bytes_moved: float
    flops: float

    @property
    def total_s(self) -> float:
        """Whole step time (seconds)."""
        return self.gemm_s + self.experts_s + self.attention_s + self.state_s + self.comm_s + self.overhead_s

    @property
    def bottleneck(self) -> str:
        """The largest contributor: memory bandwidth, compute, communication or overhead."""
        parts = {
            "memory bandwidth": self.memory_bound_s,
            "compute": self.compute_bound_s,
            "communication": self.comm_s,
            "overhead": self.overhead_s,
        }
        return max(parts, key=parts.__getitem__)


class Kernel(NamedTuple):
    """One kernel family of one pipeline stage, per GPU.

    Attributes:
        mem_s: bytes / achievable bandwidth (seconds).
        cmp_s: FLOPs / achievable FLOP/s (seconds).
        bytes: bytes it moves (bytes).
        flops: FLOPs it runs (FLOP).
    """

    mem_s: float
    cmp_s: float
    bytes: float
    flops: float

    @property
    def time_s(self) -> float:
        """The roofline time of the family: the larger of its memory and compute times (seconds)."""
        return max(self.mem_s, self.cmp_s)


IDLE = Kernel(0.0, 0.0, 0.0, 0.0)


class _Tokens(NamedTuple):
    """How one step's work splits per pipeline stage and per attention-DP rank."""

    seqs: float  # decoding sequences per stage (whole replica width)
    dec: float  # decode query tokens per stage
    pre: float  # prompt tokens per stage
    rank_pre: float  # prompt tokens on the busiest attention-DP rank
    rank: float  # tokens on the busiest rank (decode share + rank_pre)


def _split(
    d: Deployment, decode_seqs: float, prefill_tokens: float, query_tokens_per_seq: float, prompt_chunk_tokens: float
) -> _Tokens:
    """Split a step's sequences and tokens into one stage's and one rank's share (see step_time)."""
    pp = d.layout.pp
    seqs = decode_seqs / pp
    dec = seqs * query_tokens_per_seq
    pre = prefill_tokens / pp
    shards = d.memory.sequence_shards  # attention DP: each rank holds 1/shards of the sequences
    rank_pre = pre / shards
    if shards > 1 and pre > 0 and prompt_chunk_tokens > 0:
        rank_pre = max(rank_pre, min(pre, prompt_chunk_tokens / pp))
    return _Tokens(seqs, dec, pre, rank_pre, dec / shards + rank_pre)


# The GEMM families, in the order of ``Deployment.gemm_reads``.
ATTN, MLP, LM_HEAD, EXPERT = range(4)


def _gemm_rate(c: StepConstants, rows: float, point: tuple[int, float] | None, family: int) -> float:
    """Achievable GEMM FLOP/s at ``rows`` rows per GEMM (located on the curve as ``point``, None
    without a curve) for one GEMM ``family`` (its weight size, ``Deployment.gemm_reads``): the
    measured curve of the GPU and format where there is one (× its format's kernel factor, as
    ``perf.gemm.gemm_fraction_at``), else the fitted saturating form
    ``gemm_fraction · rows / (rows + gemm_half_tokens)`` (× ``lowprec_fraction`` for an FP8/FP4
    kernel); a weight-only format also pays the dequantization factor."""
    if point is None:
        rows = max(rows, 1.0)
        fraction = c.fitted_fraction * rows / (rows + c.half_tokens) * c.lowprec_factor
    else:
        fraction = fraction_at_point(c.reads[family], point[0], point[1]) * c.kernel_factor
    rate = c.gemm_flops * fraction
    return rate * c.dequant


def _row_point(c: StepConstants, rows: float) -> tuple[int, float] | None:
    """Where ``rows`` (≥ 1) rows per GEMM sit on the deployment's measured curve, read no lower
    than its ridge (``perf/gemm.py``); None without a curve."""
    return None if c.curve is None else row_point(c.curve, max(rows, c.ridge))


def _gemm(c: StepConstants, t: _Tokens) -> tuple[float, float, float, float]:
    """Dense GEMMs: every dense weight read once; ``2·params·tokens`` FLOPs, plus the lm_head for
    the decode tokens and the last token of each prefill (lm_head sits on the last stage only,
    hence its share ``1/pp`` of a stage). With attention DP, attention runs over the rank's own
    tokens while the dense FFN and shared experts (``mlp_params``, already ``/tp``) run over the
    whole stage's tokens. Each family runs at the GEMM rate of its own mean weight size
    (``attn_gemm_elements``, ``mlp_gemm_elements``; the lm_head is one GEMM of its own size).
    Returns the :class:`Kernel`'s fields (mem_s, cmp_s, bytes, flops)."""
    rows = max(t.rank, 1.0)
    families = (c.attn2 * t.rank, c.mlp2 * (t.dec + t.pre), c.lm2 * (t.dec + (1 if t.pre else 0)) / c.pp)
    point = _row_point(c, rows)
    cmp_s = sum([f / _gemm_rate(c, rows, point, family) for family, f in enumerate(families) if f > 0])
    return c.gemm_mem_s, cmp_s, c.gemm_bytes, sum(families)


def _experts(c: StepConstants, tokens: float) -> tuple[float, float, float, float]:
    """Routed experts: the bytes of the experts the replica's tokens touch, ``E·(1 − (1 − k/E)^T)``
    per layer for T tokens each picking k of E uniformly; FLOPs of top_k experts per token, at
    the dense GEMM rate of the rows each expert gets and of one expert's weight size
    (``expert_gemm_elements``) × the engine's ``moe_kernel_factor``; with EP the busiest rank's
    load (:func:`ep_busiest_rank`). Returns the :class:`Kernel`'s fields."""
    moe = c.moe
    if moe is None or tokens <= 0:
        return IDLE
    replica_tokens = tokens * c.pp
    touched = 1.0 - c.keep**replica_tokens
    mem_load, row_load = 1.0, 1.0
    if c.ep > 1:  # ep_busiest_rank(ep, E, k, replica_tokens) with z and E/ep computed once; q = touched
        mem_load = min(1.0 + c.z * math.sqrt((1.0 - touched) / (c.experts_per_rank * touched)), 1.0 / touched)
        row_load = min(1.0 + c.z * math.sqrt((c.ep - 1) / (replica_tokens * moe.top_k)), float(c.ep))
    nbytes = c.routed_bytes * touched * mem_load
    flops = c.routed_flops * tokens * row_load
    rows_per_expert = replica_tokens * moe.top_k / moe.num_experts
    mem_s = nbytes / c.hbm_bw
    rows = max(rows_per_expert, 1.0)
    rate = _gemm_rate(c, rows, _row_point(c, rows), EXPERT)
    return mem_s, flops / (rate * c.moe_kernel_factor), nbytes, flops


def _attention(
    c: StepConstants, t: _Tokens, context_tokens: float, prefill_context_tokens: float
) -> tuple[tuple[float, float, float, float], ...]:
    """Attention as the engines run it: a decode kernel and a prefill kernel, launched one after
    the other (FlashInfer/FlashAttention decode and prefill kernels, TRT-LLM's generation and
    context FMHA), so that in a mixed step their times add rather than one hiding behind the
    other. Decode reads each running sequence's KV (sliding layers capped at the window) and is
    bandwidth-bound; prefill is FLOP-bound over the mean context the caller gives. KV beyond the
    GPU pool lives in host memory and is read over the host link (PCIe, or NVLink-C2C on Grace)
    every step. Returns (decode, prefill), each the :class:`Kernel`'s fields."""
    attended = context_tokens
    if c.sparse:
        attended = min(context_tokens, c.sparse)
    nbytes = t.seqs / c.shards * (c.kv_bytes * context_tokens + c.sliding_bytes * min(context_tokens, c.window))
    rate = c.attn_rate
    dec_flops = c.attn_ctx * t.dec / c.shards * attended
    pre_flops = c.attn_pre_ctx * t.rank_pre * prefill_context_tokens
    host_kv = max(nbytes - c.kv_pool, 0.0) if c.host_kv else 0.0
    mem_s = (nbytes - host_kv) / c.attn_bw
    mem_s += host_kv / c.host_bw
    return (mem_s, dec_flops / rate, nbytes, dec_flops), (0.0, pre_flops / rate, 0.0, pre_flops)


def _state(d: Deployment, eff: Efficiency, t: _Tokens) -> Kernel:
    """Linear-attention state: each decoding sequence's state read once per step and written once
    per query token — plain decode writes it back once; a speculative verify of k + 1 tokens
    writes one intermediate state per token (SGLang's intermediate SSM/conv caches, engine-facts
    S18) — so ``(seqs + query tokens) × state`` bytes; where the engine then copies the accepted
    intermediate state into the request's slot (SGLang ``update_mamba_state_after_mtp_verify``,
    S20: a gather-scatter of the SSM and conv state per request) a verify step moves
    ``spec_commit_state_transfers × seqs`` states more: at k = 1, ``1 + 2 + 2 = 5`` states per
    sequence per step, 5/τ per output token. Recurrence FLOPs per token."""
    m = d.memory
    commit = m.spec_commit_state_transfers * t.seqs if t.dec > t.seqs else 0.0
    nbytes = m.state_bytes_per_sequence_per_gpu * (t.seqs + t.dec + commit) / m.sequence_shards
    flops = d.gdn_flops_per_token * t.rank
    mem_s = nbytes / (d.gpu.hbm_bytes_per_s * eff.hbm_fraction)
    return Kernel(mem_s, flops / (d.attn_flops_per_s * eff.gemm_fraction), nbytes, flops)


def step_time(
    d: Deployment,
    eff: Efficiency,
    decode_seqs: float,
    context_tokens: float,
    prefill_tokens: float = 0.0,
    prefill_context_tokens: float = 0.0,
    query_tokens_per_seq: float = 1.0,
    prompt_chunk_tokens: float = 0.0,
) -> StepTime:
    """Time of one step of a replica: the kernel families of one stage add up, and with PP the
    batch runs as PP micro-batches through PP stages (``step = PP × stage(tokens/PP)``).

    Args:
        d: the deployment.
        eff: efficiency factors.
        decode_seqs: sequences decoding this step (whole replica).
        context_tokens: mean context length of the decoding sequences (tokens).
        prefill_tokens: prompt tokens prefilled in this step (whole replica).
        prefill_context_tokens: mean context a prefill token attends to (tokens).
        query_tokens_per_seq: tokens each decoding sequence verifies (1, or k+1 with
            speculative decoding).
        prompt_chunk_tokens: tokens of one prompt chunk (0 = prefill spreads evenly). With
            attention DP a prompt is prefilled whole on the rank that holds its sequence, and
            the MoE all-to-all makes every rank wait for the busiest one, which then holds at
            least one chunk.

    Returns:
        StepTime (seconds; bytes and FLOPs per GPU). Raises nothing: zero work gives the
        overhead alone.

    The kernel families read their per-deployment factors from
    :func:`tokenplan.perf.step_constants.step_constants`, computed once per deployment and
    efficiency table with the operands and order of the expressions they stand for.
    """
    c = step_constants(d, eff)
    pp = c.pp
    t = _split(d, decode_seqs, prefill_tokens, query_tokens_per_seq, prompt_chunk_tokens)
    tokens = t.dec + t.pre
    (g_mem, g_cmp, g_bytes, g_flops), (e_mem, e_cmp, e_bytes, e_flops) = _gemm(c, t), _experts(c, tokens)
    (d_mem, d_cmp, d_bytes, d_flops), (p_mem, p_cmp, p_bytes, p_flops) = _attention(
        c, t, context_tokens, prefill_context_tokens
    )
    s_mem, s_cmp, s_bytes, s_flops = _state(d, eff, t)
    comm_s = _comm_s(d, eff, tokens, c.link)
    # Each family's Kernel.time_s.
    gemm_s, experts_s, dec_s, pre_s = max(g_mem, g_cmp), max(e_mem, e_cmp), max(d_mem, d_cmp), max(p_mem, p_cmp)
    state_s = max(s_mem, s_cmp)
    attention_s = dec_s + pre_s
    stage = gemm_s + experts_s + attention_s + state_s + comm_s
    mem_s = sum(
        [m for m, f in ((g_mem, g_cmp), (e_mem, e_cmp), (d_mem, d_cmp), (p_mem, p_cmp), (s_mem, s_cmp)) if m >= f]
    )  # the memory-bound families' time
    cmp_s = stage - comm_s - mem_s
    # Per-sequence work (bookkeeping, sampling, token routing) is charged on the replica's whole
    # decode batch, also with attention DP. Each ADP rank schedules only its own share, but its
    # MoE layers handle the tokens of every rank (the all-gathered batch of TRT-LLM's ADP MoE
    # communication), and the step waits for the slowest rank. Evidence: charging only a
    # rank's share (÷ TP) and refitting on the dev set gives median 13.6 % / p90 92 % against
    # 10.8 % / 67.6 % this way (session note, issue 3): the measured ADP steps cost more per
    # sequence than one rank's share, a cost not modelled on its own.
    overhead = (
        eff.step_overhead_s
        + eff.per_sequence_overhead_s * decode_seqs
        + c.layer_latency_s  # eff.layer_latency_s × layers
        + c.moe_layer_latency_s  # eff.moe_layer_latency_s × MoE layers: 0 for a dense model
        + eff.per_token_moe_layer_s * _moe_token_layers(d, tokens)
    )
    return StepTime(
        gemm_s * pp,
        experts_s * pp,
        attention_s * pp,
        state_s * pp,
        comm_s * pp,
        overhead,
        mem_s * pp,
        cmp_s * pp,
        sum([g_bytes, e_bytes, d_bytes, p_bytes, s_bytes]) * pp,
        sum([g_flops, e_flops, d_flops, p_flops, s_flops]) * pp,
    )


def _moe_token_layers(d: Deployment, stage_tokens: float) -> float:
    """Token-layers of MoE routing work in a step on the busiest GPU: every token of the stage
    is routed (top-k, sort, permute into expert order, un-permute and weighted sum) in every MoE
    layer, ``tokens × moe_layers``; with attention DP a GPU routes its own rank's share."""
    if d.spec.moe is None:
        return 0.0
    shards = d.memory.sequence_shards
    return stage_tokens * d.layout.pp / shards * d.spec.moe_layers


def _comm_s(d: Deployment, eff: Efficiency, tokens: float, link: Link) -> float:
    """Collectives of one stage for ``tokens`` tokens (seconds) over ``link``, the link of the TP
    group (``perf.comm.group_link``)."""
    lay, spec = d.layout, d.spec
    layers = spec.num_layers / lay.pp
    msg = tokens * spec.hidden_size * ACTIVATION_BYTES
    total = 0.0
    if lay.attention_dp and spec.moe is not None:
        local = tokens / lay.tp
        per_gpu = local * spec.moe.top_k * spec.hidden_size * (DISPATCH_BYTES + ACTIVATION_BYTES)
        total += spec.moe_layers / lay.pp * 2 * all_to_all_s(per_gpu / 2, lay.tp, link, eff.comm_fraction)
    else:
        one_shot = lay.tp <= d.gpu.max_gpus_per_scaleup and link.kind is not LinkKind.PCIE
        total += 2 * layers * allreduce_s(msg, lay.tp, link, eff.comm_fraction, one_shot)
    if lay.pp > 1:
        total += p2p_s(msg, link, eff.comm_fraction)
    return total


def roofline_step_s(d: Deployment, t: StepTime) -> float:
    """The physical lower bound of a step: max(bytes / peak bandwidth, FLOPs / peak FLOP/s) per GPU."""
    peak = max(d.gemm_flops_per_s, d.attn_flops_per_s)
    return max(t.bytes_moved / d.gpu.hbm_bytes_per_s, t.flops / peak)
