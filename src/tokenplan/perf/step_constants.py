"""The per-deployment factors of a step time, computed once per deployment and efficiency table.

A plan sweep steps each deployment a few times per concurrency and ``calibrate`` steps each
measured case once per efficiency table it tries; the factors a step multiplies by (bandwidths ×
efficiency fractions, parameters × 2, the expert keep probability, the TP group's link, the
expected busiest EP rank) do not change between those steps, so :func:`step_constants` computes
them once and keeps the last ones in use. Also the EP load-balance statistics the experts' time
uses (:func:`expected_max_normal`, :func:`ep_busiest_rank`).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from operator import attrgetter
from statistics import NormalDist
from typing import TYPE_CHECKING, Any

from tokenplan.hardware import LinkKind
from tokenplan.perf.comm import allreduce_terms, group_link
from tokenplan.perf.deployment import Deployment
from tokenplan.perf.efficiency import Efficiency, kernel_factor
from tokenplan.perf.gemm import forget_reads
from tokenplan.perf.layer_kernels import latency_layers, quant_latency_layers

if TYPE_CHECKING:
    from tokenplan.perf.step_record import StepTime


def expected_max_normal(n: int) -> float:
    """E[max of n independent standard normals], Blom's approximation
    ``Φ⁻¹((n − 0.375)/(n + 0.25))`` (Blom, "Statistical Estimates and Transformed Beta-Variables",
    1958): 1.434 for n = 8 (exact 1.424), 1.049 for n = 4 (1.029); 0 for n ≤ 1."""
    return NormalDist().inv_cdf((n - 0.375) / (n + 0.25)) if n > 1 else 0.0


def ep_busiest_rank(ep: int, experts: int, top_k: int, tokens: float) -> tuple[float, float]:
    """Load of the busiest of ``ep`` expert-parallel ranks over the mean rank: (expert bytes, rows).

    The MoE layer ends when its slowest rank does. With tokens routed uniformly (the best case:
    real routers are skewed, which is why DeepSeek ships EPLB, github.com/deepseek-ai/EPLB), each
    of a rank's ``m = E/ep`` experts is touched with probability ``q = 1 − (1 − k/E)^T``, so
    the touched count is Binomial(m, q); a rank receives Binomial(T·k, 1/ep) rows. The busiest of
    ``ep`` ranks sits ``z = expected_max_normal(ep)`` standard deviations above the mean:
    bytes ``1 + z·√((1 − q)/(m·q))`` (at most 1/q: every expert of the rank), rows
    ``1 + z·√((ep − 1)/(T·k))`` (at most ep). 1, 1 without EP (each expert is split over the
    TP ranks, every rank reads the same slice)."""
    if ep <= 1 or tokens <= 0:
        return 1.0, 1.0
    z, m = expected_max_normal(ep), experts / ep
    q = 1.0 - (1.0 - top_k / experts) ** tokens
    mem = min(1.0 + z * math.sqrt((1.0 - q) / (m * q)), 1.0 / q)
    rows = min(1.0 + z * math.sqrt((ep - 1) / (tokens * top_k)), float(ep))
    return mem, rows


class StepConstants:
    """What a step of one deployment under one efficiency table computes the same way every time
    (:func:`step_constants`); ``perf.step``'s kernel families read these instead of recomputing
    them per step. Each is named after, and computed exactly as (same operands, same order),
    the expression it stands for in ``perf.step``; seconds, bytes, FLOP/s and bytes/s as there."""

    __slots__ = (
        "attn2",
        "attn_bw",
        "attn_ctx",
        "attn_pre_ctx",
        "attn_rate",
        "comm_a2a",
        "comm_fraction",
        "commit_transfers",
        "cpu_overlap",
        "curve",
        "dequant",
        "ep",
        "experts_per_rank",
        "fitted_fraction",
        "gdn_flops",
        "gemm_bytes",
        "gemm_flops",
        "gemm_mem_s",
        "half_tokens",
        "hbm_bw",
        "hidden_size",
        "keep",
        "kernel_factor",
        "kv_bytes",
        "layer_latency_s",
        "layers2",
        "link",
        "lm2",
        "lowprec_factor",
        "mlp2",
        "moe",
        "moe_kernel_factor",
        "moe_layer_latency_s",
        "moe_layers",
        "moe_layers2",
        "one_shot",
        "allreduce",
        "per_token_moe_layer_s",
        "pp",
        "reads",
        "ridge",
        "routed_bytes",
        "routed_flops",
        "shards",
        "sliding_bytes",
        "sparse",
        "state_bytes",
        "stateless",
        "step_overhead_s",
        "per_sequence_overhead_s",
        "tp",
        "window",
        "z",
        "memos",
    )

    def __init__(self, d: Deployment, eff: Efficiency) -> None:
        pp, m, spec, gpu = d.layout.pp, d.memory, d.spec, d.gpu
        self.pp, self.shards = pp, m.sequence_shards
        self.hbm_bw = gpu.hbm_bytes_per_s * eff.hbm_fraction
        # Dense GEMMs (_gemm): the weights' bytes and time are the same every step.
        self.gemm_bytes = d.dense_bytes + d.lm_head_bytes / pp
        self.gemm_mem_s = self.gemm_bytes / (gpu.hbm_bytes_per_s * eff.hbm_fraction)
        self.attn2, self.mlp2, self.lm2 = (
            2.0 * (d.dense_params - d.mlp_params),
            2.0 * d.mlp_params,
            2.0 * d.lm_head_params,
        )
        self.curve, self.reads = d.gemm_curve, d.gemm_reads
        # The ridge below which a GEMM is bound by its weight read, M* = F·b / (2·B): the curve's
        # own (of the GPU it was measured on), else this GPU's datasheet figures, so the fitted
        # saturating form is not read below it either (at M = 1 it gave H20, 148 TFLOPS, an
        # 11 ms "compute-bound" step for an 8B model whose 16 GFLOP take 0.1 ms at peak; the read
        # is the roofline's bandwidth term, as for the measured curves: perf.gemm)
        if d.gemm_curve is not None:
            self.ridge = d.gemm_curve.ridge_rows
        else:
            per_weight = d.dense_bytes / d.dense_params if d.dense_params > 0 else 2.0
            self.ridge = max(1.0, d.gemm_flops_per_s * per_weight / (2.0 * gpu.hbm_bytes_per_s))
        self.gemm_flops = d.gemm_flops_per_s
        self.kernel_factor = kernel_factor(eff, d.gemm_curve.fmt) if d.gemm_curve is not None else 1.0
        self.dequant = eff.dequant_fraction if d.weight_only else 1.0
        self.fitted_fraction, self.half_tokens = eff.gemm_fraction, eff.gemm_half_tokens
        self.lowprec_factor = eff.lowprec_fraction if d.lowprec else 1.0
        # Routed experts (_experts).
        moe = self.moe = spec.moe
        self.ep = d.layout.ep
        self.keep = 1.0 - moe.top_k / moe.num_experts if moe is not None else 1.0
        self.z = expected_max_normal(self.ep)
        self.experts_per_rank = moe.num_experts / self.ep if moe is not None else 0.0
        self.routed_bytes, self.routed_flops = d.routed_bytes, d.routed_flops_per_token
        self.moe_kernel_factor = eff.moe_kernel_factor
        # Attention (_attention).
        a = spec.attention
        self.sparse = a.sparse_topk_tokens if a is not None else None
        self.kv_bytes, self.sliding_bytes = m.kv_bytes_per_token_per_gpu, m.sliding_bytes_per_token_per_gpu
        self.window = spec.sliding_window
        self.attn_rate = d.attn_flops_per_s * eff.gemm_fraction
        self.attn_ctx, self.attn_pre_ctx = d.attn_flops_per_token_ctx, d.attn_prefill_flops_per_token_ctx
        self.attn_bw = gpu.hbm_bytes_per_s * eff.attention_fraction
        # Linear-attention state (the state family): none without recurrent layers, where every
        # term of the family is 0.
        self.state_bytes, self.gdn_flops = m.state_bytes_per_sequence_per_gpu, d.gdn_flops_per_token
        self.commit_transfers = m.spec_commit_state_transfers
        self.stateless = self.state_bytes == 0 and self.gdn_flops == 0
        # Collectives (the comm family): ``2·layers`` all-reduces, or with attention DP and MoE
        # ``(moe_layers / pp)·2`` all-to-alls, over the TP group's link.
        lay = d.layout
        self.link = link = group_link(gpu.scaleup, lay.tp, gpu.max_gpus_per_scaleup)
        self.tp, self.hidden_size, self.comm_fraction = lay.tp, spec.hidden_size, eff.comm_fraction
        self.comm_a2a = lay.attention_dp and moe is not None
        self.one_shot = lay.tp <= gpu.max_gpus_per_scaleup and link.kind is not LinkKind.PCIE
        self.allreduce = allreduce_terms(lay.tp, link, eff.comm_fraction, self.one_shot)
        self.layers2 = 2 * (spec.num_layers / lay.pp)
        self.moe_layers2 = spec.moe_layers / lay.pp * 2
        # The overhead: fixed, per sequence, per layer, per MoE layer and per routed token-layer.
        self.step_overhead_s, self.per_sequence_overhead_s = eff.step_overhead_s, eff.per_sequence_overhead_s
        # An MLA layer launches 4/11 more small kernels than a GQA layer, a sparse-attention layer's
        # indexer about as many again, an FP8 linear run on FP8 tensor cores one activation
        # quantization kernel (perf.layer_kernels).
        quant = quant_latency_layers(spec, d.weight_dtype, d.weight_only)
        self.layer_latency_s = eff.layer_latency_s * (latency_layers(spec) + quant)
        self.moe_layer_latency_s = eff.moe_layer_latency_s * spec.moe_layers
        self.moe_layers, self.per_token_moe_layer_s = spec.moe_layers, eff.per_token_moe_layer_s
        # Whether the fixed and per-sequence CPU time hides under the previous step's kernels
        # (``engines.overlap``): part of the constants' value, so the step memos keep it apart.
        self.cpu_overlap = d.cpu_overlap
        # The step memos of the constants of this value, looked up on the first kept step
        # (:func:`shared_memos`; ``perf.step.kept_step_time``).
        self.memos: tuple[StepMemo, StepMemo] | None = None


# A memo of step times by ``perf.step.step_time``'s arguments after ``d`` and ``eff``.
StepMemo = dict[tuple[float, float, float, float, float, float], "StepTime"]

# What a step without decoding sequences does not read, each a factor of the decode batch (0):
# the KV bytes per token of full and sliding layers (the KV format) and the state copies after a
# verify. Kept beside the
# ``perf.step`` expressions that read them: a step that comes to read one of them without
# decoding sequences takes it off this list.
PREFILL_FREE = frozenset(("kv_bytes", "sliding_bytes", "commit_transfers"))
# Compared by identity, not value (each memo entry holds its constants, so they live while it
# does): the measured curve and its size reads (large tuples), the model's MoE shape and the TP
# group's link.
_APART = ("curve", "reads", "moe", "link", "memos")
_EVERY = attrgetter(*(n for n in StepConstants.__slots__ if n not in _APART))
_PREFILL = attrgetter(*(n for n in StepConstants.__slots__ if n not in _APART and n not in PREFILL_FREE))
# The step memos by the value of the constants they belong to: the deployments of one search that
# differ only in the KV pool (a running cap) step alike, and those that differ only in the KV
# format, the running cap or the speculative settings prefill alike. A search meets them one
# after another (``planning.space.candidates``: formats, speculative settings and caps vary
# inside one layout), so the last few are kept, the oldest going first: the steps they hold are
# tuples the garbage collector walks for as long as they live.
_SHARED: OrderedDict[tuple[object, ...], tuple[StepConstants, StepMemo]] = OrderedDict()
_SHARED_KEPT = 64


def shared_memos(c: StepConstants) -> tuple[StepMemo, StepMemo]:
    """(the memo of every step, the memo of the steps without decoding sequences) of the
    constants equal to ``c`` (every field by value, the fields of
    :data:`PREFILL_FREE` not for the second): a step is a function of these alone."""
    apart = (id(c.curve), id(c.reads), id(c.moe), id(c.link))
    every = (*_EVERY(c), *apart)
    prefill = (None, *_PREFILL(c), *apart)  # None: never equal to an ``every`` key
    memos = []
    for key in (every, prefill):
        hit = _SHARED.get(key)
        if hit is None:
            if len(_SHARED) >= _SHARED_KEPT:
                _SHARED.popitem(last=False)
            hit = _SHARED[key] = (c, {})
        memos.append(hit[1])
    return memos[0], memos[1]


# The constants of the deployments and efficiency tables stepped lately, by the identity of both:
# a plan sweep steps each deployment a few times per concurrency, calibrate each measured case
# once per efficiency table it tries. Each entry holds its deployment and table, so neither id
# can be reused while the entry lives; the oldest entry goes first. Few are kept: a search steps a
# deployment only while it evaluates its configuration, and each entry holds its step memos, whose
# steps the garbage collector walks for as long as they live (with 1,024 kept, collections took
# 0.04 of a plan sweep's 0.6 CPU-seconds here; with 64, 0.015, as before the memos).
_KEPT_CONSTANTS: OrderedDict[tuple[int, int], tuple[Deployment, Efficiency, StepConstants]] = OrderedDict()
_KEPT_CONSTANTS_KEPT = 64


# The pair stepped last and its constants, [deployment, table, StepConstants], looked at before
# the table (a search steps one deployment several times in a row); ``perf.step`` looks at it
# before it calls :func:`step_constants`.
LAST_STEPPED: list[Any] = [None, None, None]


def step_constants(d: Deployment, eff: Efficiency) -> StepConstants:
    """The :class:`StepConstants` of ``d`` under ``eff``, computed once while they are in use."""
    if LAST_STEPPED[0] is d and LAST_STEPPED[1] is eff:
        return LAST_STEPPED[2]  # type: ignore[no-any-return]
    key = (id(d), id(eff))
    hit = _KEPT_CONSTANTS.get(key)
    if hit is None or hit[0] is not d or hit[1] is not eff:
        hit = (d, eff, StepConstants(d, eff))
        if len(_KEPT_CONSTANTS) >= _KEPT_CONSTANTS_KEPT:
            _KEPT_CONSTANTS.popitem(last=False)  # O(1), where a dict scans past its evicted slots
        _KEPT_CONSTANTS[key] = hit
    LAST_STEPPED[:] = hit
    return hit[2]


def forget_steps() -> None:
    """Forget the steps computed so far and the constants kept, so that the next search steps
    from nothing, as a new process's first search does (``benchmarks/plan_sweep.py`` times each
    repeat so). Figures are the same either way."""
    _SHARED.clear()
    _KEPT_CONSTANTS.clear()
    forget_reads()
    LAST_STEPPED[:] = [None, None, None]
