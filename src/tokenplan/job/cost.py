"""GPU-hours, dollars and dollars per million output tokens of a job."""

from __future__ import annotations

from dataclasses import dataclass

from tokenplan.units import S_PER_HOUR


@dataclass(frozen=True, slots=True)
class JobCost:
    """Cost of a job.

    Attributes:
        gpu_hours: GPUs × wall hours.
        usd: at the price per GPU-hour (None when no price is known).
        usd_per_mtok: dollars per million output tokens (None without a price).
    """

    gpu_hours: float
    usd: float | None
    usd_per_mtok: float | None


def job_cost(num_gpus: int, wall_s: float, output_tokens: float, usd_per_gpu_hour: float | None) -> JobCost:
    """GPU-hours and dollars of ``num_gpus`` GPUs held for ``wall_s`` seconds."""
    hours = num_gpus * wall_s / S_PER_HOUR
    if usd_per_gpu_hour is None:
        return JobCost(hours, None, None)
    usd = hours * usd_per_gpu_hour
    return JobCost(hours, usd, usd / (output_tokens / 1e6))
