"""One engine step (a decode batch, optionally with prefill tokens) → its time, with a named
breakdown and the bottleneck.

Each kernel family is a roofline of its own — time = max(bytes / achievable bandwidth,
FLOPs / achievable FLOP/s) — and the families run one after the other, so their times add:

- dense GEMMs: weights read once per step; ``2·params·tokens`` FLOPs;
- routed experts: only the experts the step's tokens touch are read — with ``T`` tokens each
  picking ``k`` of ``E`` experts uniformly, ``E·(1 − (1 − k/E)^T)`` experts per layer;
- attention: decode reads every running sequence's KV cache; prefill is FLOP-bound;
- linear-attention state: each decoding sequence's whole recurrent state is read and written
  every step (Qwen3.6-27B TP1: 2 × 146.8 MiB per sequence per step);
- communication: two TP all-reduces per layer of ``tokens·hidden·2`` bytes; with attention DP
  and EP an all-to-all dispatch (FP8) and combine (BF16) per MoE layer; PP sends activations
  to the next stage;
- a fixed per-step overhead plus a per-sequence CPU cost.

With PP, the batch runs as PP micro-batches through PP stages: ``step = PP × stage(tokens/PP)``.
"""

from __future__ import annotations

from dataclasses import dataclass

from tokenplan.perf.comm import all_to_all_s, allreduce_s, group_link, p2p_s
from tokenplan.perf.deployment import Deployment
from tokenplan.perf.efficiency import Efficiency

ACTIVATION_BYTES = 2.0  # BF16 activations on the wire (all-reduce, PP send, MoE combine)
DISPATCH_BYTES = 1.0  # FP8 token dispatch in DeepEP-style all-to-all (DeepSeek-V3 report §3.3)


@dataclass(frozen=True, slots=True)
class StepTime:
    """Seconds of one step by part, and its bottleneck.

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
        parts = {"memory bandwidth": self.memory_bound_s, "compute": self.compute_bound_s,
                 "communication": self.comm_s, "overhead": self.overhead_s}
        return max(parts, key=parts.__getitem__)


def _gemm_rate(d: Deployment, eff: Efficiency, tokens: float) -> float:
    """Achievable GEMM FLOP/s at ``tokens`` rows per GEMM."""
    rate = d.gemm_flops_per_s * eff.gemm_fraction * tokens / (tokens + eff.gemm_half_tokens)
    if d.lowprec:
        return rate * eff.lowprec_fraction
    return rate * (eff.dequant_fraction if d.weight_only else 1.0)


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
    """Time of one step of a replica.

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
        StepTime (seconds).
    """
    pp = d.layout.pp
    seqs = decode_seqs / pp
    dec_tokens = seqs * query_tokens_per_seq
    pre_tokens = prefill_tokens / pp
    tokens = dec_tokens + pre_tokens
    hbm = d.gpu.hbm_bytes_per_s
    shards = d.memory.sequence_shards  # attention DP: each rank holds 1/shards of the sequences
    rank_pre = pre_tokens / shards  # prompt tokens on the busiest rank
    if shards > 1 and pre_tokens > 0 and prompt_chunk_tokens > 0:
        rank_pre = max(rank_pre, min(pre_tokens, prompt_chunk_tokens / pp))
    rank_tokens = dec_tokens / shards + rank_pre

    # Dense GEMMs (and lm_head for decode tokens and the last prefill token of each prompt).
    gemm_flops = 2.0 * d.dense_params * rank_tokens
    gemm_flops += 2.0 * d.lm_head_params * (dec_tokens + (1 if pre_tokens else 0)) / pp
    gemm_bytes = d.dense_bytes + d.lm_head_bytes / pp
    gemm_mem_s = gemm_bytes / (hbm * eff.hbm_fraction)
    gemm_cmp_s = gemm_flops / _gemm_rate(d, eff, max(rank_tokens, 1.0))
    gemm_s = max(gemm_mem_s, gemm_cmp_s)

    # Routed experts: bytes of the experts touched, FLOPs of top_k per token.
    experts_s = exp_mem_s = exp_cmp_s = exp_bytes = exp_flops = 0.0
    moe = d.spec.moe
    if moe is not None and tokens > 0:
        replica_tokens = tokens * pp
        touched = 1.0 - (1.0 - moe.top_k / moe.num_experts) ** replica_tokens
        exp_bytes = d.routed_bytes * touched
        exp_flops = d.routed_flops_per_token * tokens
        rows_per_expert = replica_tokens * moe.top_k / moe.num_experts
        exp_mem_s = exp_bytes / (hbm * eff.hbm_fraction)
        exp_cmp_s = exp_flops / _gemm_rate(d, eff, max(rows_per_expert, 1.0))
        experts_s = max(exp_mem_s, exp_cmp_s)

    # Attention: decode reads KV; prefill is FLOP-bound (causal: mean context given by caller).
    m = d.memory
    a = d.spec.attention
    window = d.spec.sliding_window
    attended = context_tokens
    if a is not None and a.sparse_topk_tokens:
        attended = min(context_tokens, a.sparse_topk_tokens)
    kv_bytes = seqs / shards * (m.kv_bytes_per_token_per_gpu * context_tokens
                                + m.sliding_bytes_per_token_per_gpu * min(context_tokens, window))
    attn_flops = (d.attn_flops_per_token_ctx * dec_tokens / shards * attended
                  + d.attn_prefill_flops_per_token_ctx * rank_pre * prefill_context_tokens)
    # KV beyond the GPU pool lives in host memory and is read over the host link (PCIe, or
    # NVLink-C2C on Grace) every decode step.
    host_kv = max(kv_bytes - m.kv_pool_bytes, 0.0) if m.host_kv_bytes > 0 else 0.0
    attn_mem_s = (kv_bytes - host_kv) / (hbm * eff.attention_fraction)
    attn_mem_s += host_kv / (d.gpu.host_link.bytes_per_s * eff.comm_fraction)
    attn_cmp_s = attn_flops / (d.attn_flops_per_s * eff.gemm_fraction)
    attention_s = max(attn_mem_s, attn_cmp_s)

    # Linear-attention state: read + write per decoding sequence; recurrence FLOPs per token.
    state_bytes = 2.0 * m.state_bytes_per_sequence_per_gpu * seqs / shards
    state_flops = d.gdn_flops_per_token * rank_tokens
    state_mem_s = state_bytes / (hbm * eff.hbm_fraction)
    state_cmp_s = state_flops / (d.attn_flops_per_s * eff.gemm_fraction)
    state_s = max(state_mem_s, state_cmp_s)

    comm_s = _comm_s(d, eff, tokens)
    stage = gemm_s + experts_s + attention_s + state_s + comm_s
    mem_s = sum(mem for mem, cmp in ((gemm_mem_s, gemm_cmp_s), (exp_mem_s, exp_cmp_s),
                                     (attn_mem_s, attn_cmp_s), (state_mem_s, state_cmp_s)) if mem >= cmp)
    cmp_s = stage - comm_s - mem_s
    # Per-sequence CPU work (bookkeeping, sampling, detokenization) runs in each rank's own
    # scheduler process: with attention DP the ranks share the sequences and work in parallel.
    overhead = eff.step_overhead_s + eff.per_sequence_overhead_s * decode_seqs
    return StepTime(
        gemm_s=gemm_s * pp, experts_s=experts_s * pp, attention_s=attention_s * pp, state_s=state_s * pp,
        comm_s=comm_s * pp, overhead_s=overhead, memory_bound_s=mem_s * pp, compute_bound_s=cmp_s * pp,
        bytes_moved=(gemm_bytes + exp_bytes + kv_bytes + state_bytes) * pp,
        flops=(gemm_flops + exp_flops + attn_flops + state_flops) * pp,
    )


def _comm_s(d: Deployment, eff: Efficiency, tokens: float) -> float:
    """Collectives of one stage for ``tokens`` tokens (seconds)."""
    lay, spec = d.layout, d.spec
    link = group_link(d.gpu.scaleup, lay.tp, d.gpu.max_gpus_per_scaleup)
    layers = spec.num_layers / lay.pp
    msg = tokens * spec.hidden_size * ACTIVATION_BYTES
    total = 0.0
    if lay.attention_dp and spec.moe is not None:
        local = tokens / lay.tp
        per_gpu = local * spec.moe.top_k * spec.hidden_size * (DISPATCH_BYTES + ACTIVATION_BYTES)
        total += spec.moe_layers / lay.pp * 2 * all_to_all_s(per_gpu / 2, lay.tp, link, eff.comm_fraction)
    else:
        total += 2 * layers * allreduce_s(msg, lay.tp, link, eff.comm_fraction)
    if lay.pp > 1:
        total += p2p_s(msg, link, eff.comm_fraction)
    return total


def roofline_step_s(d: Deployment, t: StepTime) -> float:
    """The physical lower bound of a step: max(bytes / peak bandwidth, FLOPs / peak FLOP/s) per GPU."""
    peak = max(d.gemm_flops_per_s, d.attn_flops_per_s)
    return max(t.bytes_moved / d.gpu.hbm_bytes_per_s, t.flops / peak)
