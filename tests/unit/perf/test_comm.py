"""Collectives: NCCL's choice of ring or tree for all-reduce, and the scale-out NIC for groups
larger than one scale-up domain."""

from __future__ import annotations

import pytest

from tokenplan.hardware import Link, LinkKind
from tokenplan.perf.comm import NIC_BYTES_PER_S, allreduce_s, group_link, one_shot_allreduce_s

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


def test_inside_one_nvlink_domain_the_one_shot_kernel_wins_for_decode_messages():
    # 8 GPUs, 16 tokens × 8,192 hidden × 2 B = 262,144 B at comm_fraction 0.7 (315 GB/s):
    # tree = 2·3·3 µs + 2 · 262,144 / 315e9 = 18 µs + 1.664 µs = 19.66 µs;
    # one-shot = 2·3 µs + 7 · 262,144 / 315e9 = 6 µs + 5.825 µs = 11.83 µs → the one-shot.
    msg = 16 * 8192 * 2
    assert allreduce_s(msg, 8, NVSWITCH, 0.7) == pytest.approx(18e-6 + 2 * msg / 315e9)
    assert allreduce_s(msg, 8, NVSWITCH, 0.7, one_shot=True) == pytest.approx(6e-6 + 7 * msg / 315e9)
    # 1 GB: one-shot = 6 µs + 7e9 / 450e9 = 15.56 ms, ring = 42 µs + 1.75e9 / 450e9 = 3.931 ms → the ring.
    assert allreduce_s(1e9, 8, NVSWITCH, 1.0, one_shot=True) == pytest.approx(14 * 3e-6 + 1.75e9 / 450e9)
    # 2 GPUs: one-shot = 6 µs + msg/bw = the tree's 2·1·3 µs + 2·msg/bw less one msg/bw.
    assert one_shot_allreduce_s(1e3, 2, NVSWITCH, 1.0) == pytest.approx(6e-6 + 1e3 / 450e9)
    assert one_shot_allreduce_s(1e3, 1, NVSWITCH, 1.0) == 0.0
