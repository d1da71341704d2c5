"""Collectives: NCCL's choice of ring or tree for all-reduce, and the scale-out NIC for groups
larger than one scale-up domain."""

from __future__ import annotations

import pytest

from tokenplan.hardware import Link, LinkKind
from tokenplan.perf.comm import NIC_BYTES_PER_S, allreduce_s, group_link

NVSWITCH = Link(LinkKind.NVSWITCH, "NVLink 4", 450e9, 3e-6)


def test_small_messages_take_the_tree_large_ones_the_ring():
    # 8 GPUs, 1 KB: ring = 14 · 3 µs + 1.75 · 1e3 / 450e9 ≈ 42.0 µs; tree = 2 · 3 · 3 µs + 2e3 / 450e9
    # ≈ 18.0 µs → the tree.
    small = allreduce_s(1e3, 8, NVSWITCH, 1.0)
    assert small == pytest.approx(18e-6 + 2e3 / 450e9)
    # 1 GB: ring = 42 µs + 1.75e9 / 450e9 = 3.931 ms; tree = 18 µs + 2e9 / 450e9 = 4.462 ms → the ring.
    assert allreduce_s(1e9, 8, NVSWITCH, 1.0) == pytest.approx(14 * 3e-6 + 1.75e9 / 450e9)
    assert allreduce_s(1e9, 1, NVSWITCH, 1.0) == 0.0


def test_a_group_beyond_one_node_runs_at_the_nic():
    assert group_link(NVSWITCH, 8, 8) is NVSWITCH
    wide = group_link(NVSWITCH, 16, 8)
    assert wide.bytes_per_s == NIC_BYTES_PER_S  # 50 GB/s < 450 GB/s
    assert wide.latency_s >= NVSWITCH.latency_s
