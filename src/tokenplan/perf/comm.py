"""Collective communication over a link: latency + bytes / bandwidth.

Ring all-reduce moves ``2(n−1)/n`` of the message through each GPU in ``2(n−1)`` steps
(Patarasuk & Yuan, "Bandwidth optimal all-reduce algorithms", JPDC 2009; the NCCL
"bus bandwidth" convention in nccl-tests/doc/PERFORMANCE.md). All-to-all sends ``(n−1)/n`` of
each GPU's data to its peers.
"""

from __future__ import annotations

from tokenplan.hardware import Link


def ring_allreduce_s(msg_bytes: float, n: int, link: Link, comm_fraction: float) -> float:
    """Seconds for one all-reduce of ``msg_bytes`` across ``n`` GPUs (0 when n == 1)."""
    if n <= 1:
        return 0.0
    return 2 * (n - 1) * link.latency_s + 2 * (n - 1) / n * msg_bytes / (link.bytes_per_s * comm_fraction)


def all_to_all_s(bytes_per_gpu: float, n: int, link: Link, comm_fraction: float) -> float:
    """Seconds for an all-to-all where each GPU holds ``bytes_per_gpu`` to scatter (0 when n == 1)."""
    if n <= 1:
        return 0.0
    return link.latency_s + (n - 1) / n * bytes_per_gpu / (link.bytes_per_s * comm_fraction)


def p2p_s(msg_bytes: float, link: Link, comm_fraction: float) -> float:
    """Seconds to send ``msg_bytes`` to the next pipeline stage."""
    return link.latency_s + msg_bytes / (link.bytes_per_s * comm_fraction)
