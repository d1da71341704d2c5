"""Collective communication over a link: latency + bytes / bandwidth.

Ring all-reduce moves ``2(n−1)/n`` of the message through each GPU in ``2(n−1)`` steps
(Patarasuk & Yuan, "Bandwidth optimal all-reduce algorithms", JPDC 2009; the NCCL
"bus bandwidth" convention in nccl-tests/doc/PERFORMANCE.md). All-to-all sends ``(n−1)/n`` of
each GPU's data to its peers. For all-reduce NCCL picks, per message size, the fastest of ring
and double binary tree (Sanders, Speck & Träff, "Two-tree algorithms for full bandwidth
broadcast, reduction and scan", Parallel Computing 2009; NCCL 2.4 release notes): the tree
pays ``2⌈log2 n⌉`` latencies instead of ``2(n − 1)``, which decides small decode messages.

Inside one NVLink or Infinity Fabric domain the engines do not call NCCL for decode-size
all-reduces: TensorRT-LLM's ``AllReduceStrategy.AUTO`` picks its one-shot kernel for small
messages, vLLM's ``custom_all_reduce`` (PR vllm-project/vllm#2192) runs a one-stage kernel
below ~512 KB on fully connected GPUs, and SGLang uses the same kernel (sgl-kernel) or
FlashInfer's fused all-reduce. One-shot: every GPU writes its message into its peers' buffers
and reads the n − 1 others after a flag barrier, so it pays two latencies and moves
``(n − 1)·msg`` per GPU. Check against a measurement: a fused one-shot all-reduce (+ RMSNorm)
over 8 GB200s, hidden 7,168 BF16, takes 19.1 µs at 64 tokens and 29.4 µs at 128
(lightseekorg/tokenspeed#860); this formula at 3 µs latency, 900 GB/s and 0.70 gives
6 + 7 × 0.918 MB / 630 GB/s = 16.2 µs and 6 + 20.4 = 26.4 µs. The engines gate it off on
PCIe-only GPUs (vLLM: more than two PCIe GPUs fall back to NCCL) and across nodes.

A group larger than one scale-up domain (an 8-GPU HGX node) crosses nodes through each GPU's
scale-out NIC: 400 Gb/s = 50 GB/s per GPU (ConnectX-7, one per GPU in DGX H100/H200/B200, NVIDIA
DGX user guides) at ~5 µs per message step (:data:`NIC_LATENCY_S`).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import NamedTuple

from tokenplan.hardware import Link

NIC_BYTES_PER_S = 50.0e9  # 400 Gb/s ConnectX-7 per GPU (see module docstring)
# Latency of one inter-node message step of a collective: an engineering estimate, not a
# measurement. Its basis: InfiniBand NDR switch-to-HCA small-message latency is 1–2 µs per hop
# (ConnectX-7 / Quantum-2 class), a fat-tree path crosses up to three switches, and NCCL's
# network proxy thread adds host-side posting and completion polling per step; inter-node
# nccl-tests all-reduce latencies of a few µs per step at small sizes are of that order.
NIC_LATENCY_S = 5.0e-6


def group_link(scaleup: Link, n: int, max_gpus_per_scaleup: int) -> Link:
    """The link a collective over ``n`` GPUs runs at: the scale-up fabric inside one domain, else
    the slower of it and the scale-out NIC."""
    if n <= max_gpus_per_scaleup:
        return scaleup
    return replace(
        scaleup,
        name=f"{scaleup.name} + scale-out NIC",
        bytes_per_s=min(scaleup.bytes_per_s, NIC_BYTES_PER_S),
        latency_s=max(scaleup.latency_s, NIC_LATENCY_S),
    )


class AllReduceTerms(NamedTuple):
    """The parts of one all-reduce's time over a group and link that do not depend on the
    message: each algorithm takes ``latency + factor · msg_bytes / rate`` (see the functions below
    and the module docstring), computed once by :func:`allreduce_terms`.

    Attributes:
        rate: achieved link bandwidth, bytes/s × ``comm_fraction`` (bytes/s).
        ring_s, ring_factor: ring ``2(n − 1)`` latencies (seconds) and ``2(n − 1)/n``.
        tree_s: double binary tree ``2⌈log2 n⌉`` latencies (seconds); its factor is 2.
        one_shot_s, one_shot_factor: the engines' one-shot kernel, 2 latencies (seconds; None
            where it does not run) and ``n − 1``.
    """

    rate: float
    ring_s: float
    ring_factor: float
    tree_s: float
    one_shot_s: float | None
    one_shot_factor: int


def allreduce_terms(n: int, link: Link, comm_fraction: float, one_shot: bool = False) -> AllReduceTerms | None:
    """:class:`AllReduceTerms` of an all-reduce across ``n`` GPUs over ``link`` (arguments as
    :func:`allreduce_s`); None when ``n`` ≤ 1 (nothing to reduce)."""
    if n <= 1:
        return None
    lat = link.latency_s
    return AllReduceTerms(
        link.bytes_per_s * comm_fraction,
        2 * (n - 1) * lat,
        2 * (n - 1) / n,
        2 * math.ceil(math.log2(n)) * lat,
        2 * lat if one_shot else None,
        n - 1,
    )


def ring_allreduce_s(msg_bytes: float, n: int, link: Link, comm_fraction: float) -> float:
    """Seconds for one all-reduce of ``msg_bytes`` across ``n`` GPUs (0 when n == 1)."""
    t = allreduce_terms(n, link, comm_fraction)
    return 0.0 if t is None else t.ring_s + t.ring_factor * msg_bytes / t.rate


def one_shot_allreduce_s(msg_bytes: float, n: int, link: Link, comm_fraction: float) -> float:
    """Seconds for the engines' one-shot all-reduce (module docstring):
    ``2·latency + (n − 1)·msg / (bandwidth·comm_fraction)``; 0 when n == 1."""
    t = allreduce_terms(n, link, comm_fraction, one_shot=True)
    return 0.0 if t is None or t.one_shot_s is None else t.one_shot_s + t.one_shot_factor * msg_bytes / t.rate


def allreduce_s(msg_bytes: float, n: int, link: Link, comm_fraction: float, one_shot: bool = False) -> float:
    """Seconds for one all-reduce: the faster of ring (:func:`ring_allreduce_s`) and double
    binary tree (``2⌈log2 n⌉·latency + 2·msg / (bandwidth·comm_fraction)``), as NCCL picks,
    and, where the engines' own kernel runs, the one-shot (:func:`one_shot_allreduce_s`).

    Args:
        msg_bytes: the message each GPU contributes (bytes).
        n: GPUs in the group.
        link: the link the group runs over (bytes/s and seconds per message step).
        comm_fraction: achieved / datasheet link bandwidth (dimensionless, in (0, 1]).
        one_shot: the group shares one NVLink or Infinity Fabric domain (not PCIe, not across
            nodes), where the engines run their one-shot kernel for small messages.

    Returns:
        Seconds; 0 when ``n`` ≤ 1 (nothing to reduce). Raises nothing.
    """
    return allreduce_with(allreduce_terms(n, link, comm_fraction, one_shot), msg_bytes)


def allreduce_with(t: AllReduceTerms | None, msg_bytes: float) -> float:
    """:func:`allreduce_s` from its :class:`AllReduceTerms` (None: 0 seconds); a step computes
    the terms once per deployment (``perf.step_constants``)."""
    if t is None:
        return 0.0
    ring = t.ring_s + t.ring_factor * msg_bytes / t.rate
    tree = t.tree_s + 2 * msg_bytes / t.rate
    best = tree if tree < ring else ring  # min(ring, tree)
    if t.one_shot_s is None:
        return best
    one = t.one_shot_s + t.one_shot_factor * msg_bytes / t.rate
    return one if one < best else best  # min(best, one)


def all_to_all_s(bytes_per_gpu: float, n: int, link: Link, comm_fraction: float) -> float:
    """Seconds for an all-to-all where each GPU holds ``bytes_per_gpu`` to scatter (0 when n == 1)."""
    if n <= 1:
        return 0.0
    return link.latency_s + (n - 1) / n * bytes_per_gpu / (link.bytes_per_s * comm_fraction)


def p2p_s(msg_bytes: float, link: Link, comm_fraction: float) -> float:
    """Seconds to send ``msg_bytes`` to the next pipeline stage."""
    return link.latency_s + msg_bytes / (link.bytes_per_s * comm_fraction)
