"""Parallel layouts of one replica and the rules that reject them.

A layout is TP (tensor parallel) × PP (pipeline parallel) GPUs per replica, EP (expert
parallel) across a pipeline stage's TP ranks for MoE layers, optional attention data parallelism
(attention replicated per rank, each rank holding its own sequences — SGLang
``--enable-dp-attention``, TRT-LLM "DEP"), and DP whole-model replicas side by side.
"""

from __future__ import annotations

from dataclasses import dataclass

from tokenplan.arch.spec import ModelSpec


@dataclass(frozen=True, slots=True)
class Layout:
    """GPU counts of a deployment.

    Attributes:
        tp: tensor-parallel degree inside a replica.
        pp: pipeline stages inside a replica.
        ep: expert-parallel degree of the MoE layers (1 = experts TP-sharded).
        dp: whole-model replicas.
        attention_dp: attention runs data-parallel across the TP ranks.
    """

    tp: int = 1
    pp: int = 1
    ep: int = 1
    dp: int = 1
    attention_dp: bool = False

    @property
    def gpus_per_replica(self) -> int:
        """GPUs one replica uses (TP × PP)."""
        return self.tp * self.pp

    @property
    def num_gpus(self) -> int:
        """GPUs of the whole deployment."""
        return self.tp * self.pp * self.dp

    def describe(self) -> str:
        """Short name, e.g. ``TP2×DP4`` or ``TP4 EP4 DP-attn``."""
        parts = [f"TP{self.tp}"]
        if self.pp > 1:
            parts.append(f"PP{self.pp}")
        if self.ep > 1:
            parts.append(f"EP{self.ep}")
        if self.attention_dp:
            parts.append("DP-attn")
        text = "×".join(parts[:2]) + ("".join(" " + p for p in parts[2:]))
        return f"{text}×DP{self.dp}" if self.dp > 1 else text


def layout_rejection(spec: ModelSpec, layout: Layout) -> str | None:
    """Why ``layout`` cannot run ``spec``, or None when it can.

    Rules (what SGLang, vLLM and TRT-LLM enforce at start-up):
    TP divides the attention heads; KV heads divide TP or TP divides them (replication);
    TP divides the linear-attention heads; EP divides the routed experts and TP (the experts of a
    pipeline stage split over its TP ranks); PP does not exceed the layer count.
    """
    tp = layout.tp
    if min(layout.tp, layout.pp, layout.ep, layout.dp) < 1:
        return "every parallel degree must be ≥ 1"
    why = _tp_rejection(spec, tp, layout.attention_dp)
    if why is not None:
        ok = [t for t in range(1, MAX_LISTED_TP + 1) if _tp_rejection(spec, t, layout.attention_dp) is None]
        return f"{why} (allowed TP: {', '.join(map(str, ok))})"
    if layout.ep > 1:
        if spec.moe is None:
            return "EP needs a mixture-of-experts model (allowed EP: 1)"
        if spec.moe.num_experts % layout.ep:
            ok = [e for e in range(1, tp + 1) if tp % e == 0 and spec.moe.num_experts % e == 0]
            return (
                f"EP{layout.ep} does not divide the {spec.moe.num_experts} experts "
                f"(allowed EP at TP{tp}: {', '.join(map(str, ok))})"
            )
        if layout.tp % layout.ep:
            # Every engine builds its expert groups inside one pipeline stage's TP group: SGLang
            # moe_tp_size = tp_size // ep_size (python/sglang/srt/distributed/parallel_state.py
            # initialize_model_parallel: EP groups are strided ranks of each TP group); vLLM's EP
            # spans TP × DP (vllm/config/parallel.py enable_expert_parallel), never PP; TRT-LLM's
            # Mapping splits tp_size into moe_tp × moe_ep.
            return (
                f"EP{layout.ep} must divide TP{layout.tp} (EP splits the experts over one pipeline stage's "
                f"TP ranks: e.g. tp {layout.ep} with ep {layout.ep})"
            )
    if layout.attention_dp and spec.moe is None:
        return "attention data parallelism is for MoE models (dense layers would be replicated)"
    if layout.pp > spec.num_layers:
        return f"PP{layout.pp} exceeds the {spec.num_layers} layers"
    return None


# The largest TP a rejection lists among the allowed ones (NVL72 spans 72 GPUs; 64 heads is the
# widest attention of the catalog's models).
MAX_LISTED_TP = 64


def _tp_rejection(spec: ModelSpec, tp: int, attention_dp: bool) -> str | None:
    """Why TP ``tp`` cannot split ``spec``'s heads (see :func:`layout_rejection`), or None."""
    a, lin = spec.attention, spec.linear
    if a is not None and not attention_dp:
        if a.num_heads % tp:
            return f"TP{tp} does not divide the {a.num_heads} attention heads"
        if a.num_kv_heads % tp and tp % a.num_kv_heads:
            return f"TP{tp} and the {a.num_kv_heads} KV heads do not divide one another"
    if lin is not None and lin.num_v_heads % tp:
        return f"TP{tp} does not divide the {lin.num_v_heads} linear-attention value heads"
    if lin is not None and lin.num_k_heads % tp and tp % lin.num_k_heads:
        return f"TP{tp} and the {lin.num_k_heads} linear-attention key heads do not divide one another"
    return None


def kv_heads_per_gpu(spec: ModelSpec, layout: Layout) -> float:
    """GQA KV heads one GPU holds (heads, a count): n_kv / TP, or 1 when TP exceeds n_kv (each
    head then replicated on TP / n_kv GPUs); all n_kv with attention DP, where every rank runs
    whole attention layers for its own sequences.

    Args:
        spec: the model (``spec.attention`` None → 0).
        layout: its parallel layout (TP, attention DP).

    Returns:
        KV heads per GPU (a float: n_kv / TP need not be whole). Raises nothing.
    """
    a = spec.attention
    if a is None:
        return 0.0
    if layout.attention_dp:
        return float(a.num_kv_heads)
    return max(a.num_kv_heads / layout.tp, 1.0)


def kv_replication(spec: ModelSpec, layout: Layout) -> int:
    """How many GPUs hold a copy of each KV head (1 = no replication)."""
    a = spec.attention
    if a is None or layout.attention_dp or layout.tp <= a.num_kv_heads:
        return 1
    return layout.tp // a.num_kv_heads
