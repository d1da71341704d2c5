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
  the step's tokens, not its sequences). Where the engine overlaps its CPU work with the
  previous step's kernels (``Deployment.cpu_overlap``), the fixed and per-sequence CPU time
  counts only where it exceeds the step's GPU time: the step takes max(GPU, CPU).

With PP, the batch runs as PP micro-batches through PP stages: ``step = PP × stage(tokens/PP)``.
"""

from __future__ import annotations

import math

from tokenplan.engines.overlap import hidden_cpu_s
from tokenplan.perf.comm import all_to_all_s, allreduce_with, p2p_s
from tokenplan.perf.deployment import Deployment
from tokenplan.perf.efficiency import Efficiency
from tokenplan.perf.gemm import fractions_at_rows
from tokenplan.perf.step_constants import (  # noqa: F401  (ep_busiest_rank, expected_max_normal: their home was here)
    LAST_STEPPED,
    StepConstants,
    StepMemo,
    ep_busiest_rank,
    expected_max_normal,
    shared_memos,
    step_constants,
)
from tokenplan.perf.step_record import StepTime
from tokenplan.units import ACTIVATION_BYTES

_new_step = tuple.__new__

DISPATCH_BYTES = 1.0  # FP8 token dispatch in DeepEP-style all-to-all (DeepSeek-V3 report §3.3)


# The GEMM families, in the order of ``Deployment.gemm_reads``.
ATTN, MLP, LM_HEAD, EXPERT = range(4)


def _gemm_rate(c: StepConstants, rows: float, measured: float | None) -> float:
    """Achievable GEMM FLOP/s at ``rows`` rows per GEMM for one GEMM family whose fraction on the
    GPU's measured curve there is ``measured`` (at the family's weight size,
    ``perf.gemm.fractions_at_rows``; None without a curve): that fraction × its format's kernel
    factor (as ``perf.gemm.gemm_fraction_at``), else the fitted saturating form
    ``gemm_fraction · rows / (rows + gemm_half_tokens)`` (× ``lowprec_fraction`` for an FP8/FP4
    kernel), the same for every family; a weight-only format also pays the dequantization factor."""
    if measured is None:
        rows = max(rows, c.ridge)  # below the ridge the weight read binds (the roofline's bandwidth term)
        fraction = c.fitted_fraction * rows / (rows + c.half_tokens) * c.lowprec_factor
    else:
        fraction = measured * c.kernel_factor
    rate = c.gemm_flops * fraction
    return rate * c.dequant


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

    Each kernel family is a roofline ``(mem_s, cmp_s, bytes, flops)`` whose time is
    ``max(mem_s, cmp_s)``; the families are written out in one function (a plan sweep makes
    tens of thousands of steps, and a call per family cost a third of each) and read their
    per-deployment factors from :func:`tokenplan.perf.step_constants.step_constants`, computed
    once per deployment and efficiency table with the operands and order of the expressions
    they stand for.
    """
    last = LAST_STEPPED  # the pair stepped last: its constants without a call
    c: StepConstants = last[2] if last[0] is d and last[1] is eff else step_constants(d, eff)
    pp, shards = c.pp, c.shards
    # How the step's work splits per pipeline stage and per attention-DP rank: decoding sequences
    # and their query tokens, prompt tokens, and the busiest rank's tokens (each attention-DP rank
    # holds 1/shards of the sequences; a prompt is prefilled whole on one rank).
    seqs = decode_seqs / pp
    dec = seqs * query_tokens_per_seq
    pre = prefill_tokens / pp
    rank_pre = pre / shards
    if shards > 1 and pre > 0 and prompt_chunk_tokens > 0:
        rank_pre = max(rank_pre, min(pre, prompt_chunk_tokens / pp))
    rank = dec / shards + rank_pre
    tokens = dec + pre

    # Dense GEMMs: every dense weight read once; ``2·params·tokens`` FLOPs, plus the lm_head for
    # the decode tokens and the last token of each prefill (lm_head sits on the last stage only,
    # hence its share ``1/pp`` of a stage). With attention DP, attention runs over the rank's own
    # tokens while the dense FFN and shared experts (``mlp_params``, already ``/tp``) run over the
    # whole stage's tokens. Each family runs at the GEMM rate of its own mean weight size
    # (``attn_gemm_elements``, ``mlp_gemm_elements``; the lm_head is one GEMM of its own size),
    # read on the curve at one row point per step (``perf/gemm.py``: no lower than its ridge).
    rows = 1.0 if 1.0 > rank else rank  # max(rank, 1.0)
    attn_f, mlp_f, lm_f = c.attn2 * rank, c.mlp2 * (dec + pre), c.lm2 * (dec + (1 if pre else 0)) / pp
    curve = c.curve
    ridge = c.ridge
    g_cmp: float = 0  # the families' FLOPs over their rates, summed from 0 as ``sum`` does
    if curve is None:  # the fitted form: one rate for every family, read no lower than the ridge
        at = ridge if ridge > rows else rows
        rate = c.gemm_flops * (c.fitted_fraction * at / (at + c.half_tokens) * c.lowprec_factor) * c.dequant
        if attn_f > 0:  # each family in turn (attention, dense FFN, lm_head), written out
            g_cmp += attn_f / rate
        if mlp_f > 0:
            g_cmp += mlp_f / rate
        if lm_f > 0:
            g_cmp += lm_f / rate
    else:  # each family at its own weight size, all read at one M, max(rows, ridge) (perf.gemm.fractions_at_rows)
        attn_x, mlp_x, lm_x = fractions_at_rows(curve, c.reads, ridge if ridge > rows else rows)[:3]
        gemm_flops, kernel_factor, dequant = c.gemm_flops, c.kernel_factor, c.dequant
        if attn_f > 0:
            g_cmp += attn_f / (gemm_flops * (attn_x * kernel_factor) * dequant)
        if mlp_f > 0:
            g_cmp += mlp_f / (gemm_flops * (mlp_x * kernel_factor) * dequant)
        if lm_f > 0:
            g_cmp += lm_f / (gemm_flops * (lm_x * kernel_factor) * dequant)
    g_mem, g_bytes, g_flops = c.gemm_mem_s, c.gemm_bytes, sum((attn_f, mlp_f, lm_f))

    # Routed experts: the bytes of the experts the replica's tokens touch, ``E·(1 − (1 − k/E)^T)``
    # per layer for T tokens each picking k of E uniformly; FLOPs of top_k experts per token, at
    # the dense GEMM rate of the rows each expert gets and of one expert's weight size
    # (``expert_gemm_elements``) × the engine's ``moe_kernel_factor``; with EP the busiest rank's
    # load (:func:`ep_busiest_rank`, with z and E/ep computed once; q = touched).
    moe = c.moe
    if moe is None or tokens <= 0:
        e_mem = e_cmp = e_bytes = e_flops = 0.0
    else:
        replica_tokens = tokens * pp
        touched = 1.0 - c.keep**replica_tokens
        mem_load, row_load = 1.0, 1.0
        if c.ep > 1:
            mem_load = min(1.0 + c.z * math.sqrt((1.0 - touched) / (c.experts_per_rank * touched)), 1.0 / touched)
            row_load = min(1.0 + c.z * math.sqrt((c.ep - 1) / (replica_tokens * moe.top_k)), float(c.ep))
        e_bytes = c.routed_bytes * touched * mem_load
        e_flops = c.routed_flops * tokens * row_load
        expert_rows = replica_tokens * moe.top_k / moe.num_experts
        expert_rows = 1.0 if 1.0 > expert_rows else expert_rows  # max(rows per expert, 1.0)
        measured = None
        if curve is not None:  # at max(rows per expert, ridge)
            measured = fractions_at_rows(curve, c.reads, ridge if ridge > expert_rows else expert_rows)[EXPERT]
        e_mem = e_bytes / c.hbm_bw
        e_cmp = e_flops / (_gemm_rate(c, expert_rows, measured) * c.moe_kernel_factor)

    # Attention as the engines run it: a decode kernel and a prefill kernel, launched one after
    # the other (FlashInfer/FlashAttention decode and prefill kernels, TRT-LLM's generation and
    # context FMHA), so that in a mixed step their times add rather than one hiding behind the
    # other. Decode reads each running sequence's KV (sliding layers capped at the window) and is
    # bandwidth-bound; prefill is FLOP-bound over the mean context the caller gives. A running
    # request's KV is always in GPU memory: no engine here reads it from host memory.
    attended = context_tokens
    if c.sparse:
        attended = min(context_tokens, c.sparse)
    window = c.window
    windowed = window if window < context_tokens else context_tokens  # min(context_tokens, window)
    d_bytes = seqs / shards * (c.kv_bytes * context_tokens + c.sliding_bytes * windowed)
    attn_rate = c.attn_rate
    d_flops = c.attn_ctx * dec / shards * attended
    p_flops = c.attn_pre_ctx * rank_pre * prefill_context_tokens
    d_mem = d_bytes / c.attn_bw
    d_cmp, p_mem, p_cmp, p_bytes = d_flops / attn_rate, 0.0, p_flops / attn_rate, 0.0

    # Linear-attention state: each decoding sequence's state read once per step and written once
    # per query token — plain decode writes it back once; a speculative verify of k + 1 tokens
    # writes one intermediate state per token (SGLang's intermediate SSM/conv caches, engine-facts
    # S18) — so ``(seqs + query tokens) × state`` bytes; where the engine then copies the accepted
    # intermediate state into the request's slot (SGLang ``update_mamba_state_after_mtp_verify``,
    # S20: a gather-scatter of the SSM and conv state per request) a verify step moves
    # ``spec_commit_state_transfers × seqs`` states more: at k = 1, ``1 + 2 + 2 = 5`` states per
    # sequence per step, 5/τ per output token. Recurrence FLOPs per token.
    if c.stateless:  # no state and no recurrence: every term below is 0
        s_mem = s_cmp = s_bytes = s_flops = 0.0
    else:
        commit = c.commit_transfers * seqs if dec > seqs else 0.0
        s_bytes = c.state_bytes * (seqs + dec + commit) / shards
        s_flops = c.gdn_flops * rank
        s_mem, s_cmp = s_bytes / c.hbm_bw, s_flops / attn_rate

    # Collectives of one stage over the TP group's link (``perf.comm.group_link``): with attention
    # DP and MoE an all-to-all dispatch (FP8) and combine (BF16) per MoE layer, else two TP
    # all-reduces per layer of ``tokens·hidden·2`` bytes (the engines' one-shot kernel inside one
    # NVLink/Infinity Fabric domain); PP sends activations to the next stage.
    link, comm_fraction = c.link, c.comm_fraction
    msg = tokens * c.hidden_size * ACTIVATION_BYTES
    comm_s = 0.0
    if c.comm_a2a:
        assert moe is not None  # comm_a2a needs MoE
        per_gpu = tokens / c.tp * moe.top_k * c.hidden_size * (DISPATCH_BYTES + ACTIVATION_BYTES)
        comm_s += c.moe_layers2 * all_to_all_s(per_gpu / 2, c.tp, link, comm_fraction)
    else:
        comm_s += c.layers2 * allreduce_with(c.allreduce, msg)  # perf.comm.allreduce_s, its terms kept
    if pp > 1:
        comm_s += p2p_s(msg, link, comm_fraction)

    # Each family's time: the larger of its memory and compute times (``max``: the first unless
    # the second is larger).
    gemm_s = g_cmp if g_cmp > g_mem else g_mem
    experts_s = e_cmp if e_cmp > e_mem else e_mem
    attention_s = (d_cmp if d_cmp > d_mem else d_mem) + (p_cmp if p_cmp > p_mem else p_mem)
    state_s = s_cmp if s_cmp > s_mem else s_mem
    stage = gemm_s + experts_s + attention_s + state_s + comm_s
    mem_s: float = 0  # the memory-bound families' time, summed from 0 as ``sum`` does
    if g_mem >= g_cmp:
        mem_s += g_mem
    if e_mem >= e_cmp:
        mem_s += e_mem
    if d_mem >= d_cmp:
        mem_s += d_mem
    if p_mem >= p_cmp:
        mem_s += p_mem
    if s_mem >= s_cmp:
        mem_s += s_mem
    cmp_s = stage - comm_s - mem_s
    # Per-sequence work (bookkeeping, sampling, token routing) is charged on the replica's whole
    # decode batch, also with attention DP. Each ADP rank schedules only its own share, but its
    # MoE layers handle the tokens of every rank (the all-gathered batch of TRT-LLM's ADP MoE
    # communication), and the step waits for the slowest rank. Evidence: charging only a
    # rank's share (÷ TP) and refitting on the dev set gives median 13.6 % / p90 92 % against
    # 10.8 % / 67.6 % this way (session note, issue 3): the measured ADP steps cost more per
    # sequence than one rank's share, a cost not modelled on its own.
    # MoE routing work (top-k, sort, permute into expert order, un-permute and weighted sum) is
    # charged per token of the stage and MoE layer on the busiest GPU, ``tokens × moe_layers``;
    # with attention DP a GPU routes its own rank's share.
    moe_token_layers = 0.0 if moe is None else tokens * pp / shards * c.moe_layers
    overhead = (
        c.step_overhead_s
        + c.per_sequence_overhead_s * decode_seqs
        + c.layer_latency_s  # eff.layer_latency_s × layers
        + c.moe_layer_latency_s  # eff.moe_layer_latency_s × MoE layers: 0 for a dense model
        + c.per_token_moe_layer_s * moe_token_layers
    )
    if c.cpu_overlap:  # the CPU part runs beside the previous step's kernels (engines.overlap)
        cpu = c.step_overhead_s + c.per_sequence_overhead_s * decode_seqs
        overhead -= hidden_cpu_s(cpu, stage * pp + overhead - cpu)
    return _new_step(  # StepTime(...) without its generated __new__'s frame (a sweep makes 20,000)
        StepTime,
        (
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
        ),
    )


def kept_step_time(d: Deployment, eff: Efficiency, args: tuple[float, float, float, float, float, float]) -> StepTime:
    """``step_time(d, eff, *args)``, computed once per value of the deployment's constants and
    ``args`` while they are kept (``perf.step_constants.shared_memos``; the steps without
    decoding sequences do not read the KV format's constants): for a search, whose
    configurations of one layout and weight format step alike. A step is a function of those
    constants and its arguments alone, so the figures are those of :func:`step_time`."""
    memos = kept_memos(d, eff)
    memo = memos[0] if args[0] else memos[1]
    got = memo.get(args)
    return keep_step(memo, d, eff, args) if got is None else got


def kept_memos(d: Deployment, eff: Efficiency) -> tuple[StepMemo, StepMemo]:
    """The memos :func:`kept_step_time` keeps the steps of ``d`` under ``eff`` in, by their
    arguments: (every step, the steps without decoding sequences). A caller that asks for many
    steps of one deployment (``job.batching``) looks them up itself, in the first memo where
    ``args[0]`` (the decoding sequences) is non-zero, else in the second, and stores a step
    it does not find with :func:`keep_step`."""
    last = LAST_STEPPED
    c: StepConstants = last[2] if last[0] is d and last[1] is eff else step_constants(d, eff)
    memos = c.memos
    if memos is None:
        memos = c.memos = shared_memos(c)
    return memos


def keep_step(
    memo: StepMemo, d: Deployment, eff: Efficiency, args: tuple[float, float, float, float, float, float]
) -> StepTime:
    """``step_time(d, eff, *args)``, stored in ``memo`` (one of :func:`kept_memos` ``(d, eff)``,
    chosen as there) under ``args``; the memo is emptied first when it holds :data:`_MEMO_KEPT`."""
    if len(memo) >= _MEMO_KEPT:
        memo.clear()
    got = memo[args] = step_time(d, eff, *args)
    return got


_MEMO_KEPT = 4096  # steps kept per memo (a plan sweep steps a deployment a few dozen ways)


def roofline_step_s(d: Deployment, t: StepTime) -> float:
    """The physical lower bound of a step: max(bytes / peak bandwidth, FLOPs / peak FLOP/s) per GPU."""
    gemm, attn = d.gemm_flops_per_s, d.attn_flops_per_s
    peak = attn if attn > gemm else gemm  # max(gemm, attn), written as the builtin picks
    mem, cmp = t.bytes_moved / d.gpu.hbm_bytes_per_s, t.flops / peak
    return cmp if cmp > mem else mem  # max(mem, cmp)
