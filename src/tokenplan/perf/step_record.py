"""One decode or prefill step's seconds by kernel family (:class:`StepTime`), the record
``perf.step.step_time`` returns and the step memos of ``perf.step_constants`` hold."""

from __future__ import annotations

from typing import NamedTuple


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
