"""What ``plan`` and ``plan_report_data`` return: frozen, typed, with ``to_json()`` (the dict
``tokenplan plan --json`` prints; keys are the field names, and ``from_json`` reads it back, see
:mod:`tokenplan.results`).

Units are in the names: tokens/s, days, hours, US dollars, milliseconds, bytes.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from tokenplan.planning.curves import CostPoint, MemoryBars, SpeedupCurve, ThroughputCurve
from tokenplan.results import INLINE, OMIT_NONE, Bands, JsonResult, bounded
from tokenplan.units import S_PER_DAY

# A figure read back from a plan file: a rate must be > 0 and below 10¹² tok/s (the search's
# largest option, 512 GPUs, stays under 10⁸), a GPU count > 0, a duration > 0 and small enough that
# its seconds stay finite (``report`` draws them; -1 days, 0 tok/s or 1e308 tok/s never come from ``plan``).
POSITIVE = bounded(gt=0, le=1e12)
GPUS = bounded(gt=0)
DAYS = bounded(gt=0, le=sys.float_info.max / S_PER_DAY)


@dataclass(frozen=True)
class Alternative(JsonResult):
    """A runner-up configuration of an option, with its job throughput, days and cost."""

    configuration: str
    output_tok_s_total: float = field(metadata=POSITIVE)
    wall_days: float = field(metadata=DAYS)
    usd: float | None


@dataclass(frozen=True)
class ChosenConfiguration(JsonResult):
    """An option's best configuration: what it runs, how fast, how long and at what cost the
    whole job takes, its memory at the running limit, launch commands and the runners-up.
    ``usd``/``usd_per_mtok`` are None without a price; ``bands`` holds the 80 % intervals.
    ``kv_capacity_tokens`` is over all replicas, as ``predict``'s; ``batch_per_replica`` and
    ``max_running_requests`` are per replica, ``memory_allocation`` per GPU (bytes)."""

    best: str
    layout: str
    weight_dtype: str
    kv_dtype: str
    spec: str
    output_tok_s_total: float = field(metadata=POSITIVE)
    output_tok_s_per_gpu: float = field(metadata=POSITIVE)
    wall_days: float = field(metadata=DAYS)
    drain_hours: float
    gpu_hours: float
    usd: float | None
    usd_per_mtok: float | None
    bottleneck: str
    batch_per_replica: float
    batch_limit_reason: str
    tpot_ms: float
    ttft_ms: float
    ttft_median_ms: float
    weight_bytes_per_gpu: float
    kv_capacity_tokens: float | None  # None: no full-attention layer (MemoryBreakdown.kv_tokens_reported)
    warnings: tuple[str, ...]
    non_default_settings: bool
    concurrency_per_endpoint: int
    max_running_requests: int
    memory_allocation: Mapping[str, float]
    gpu_bytes: float
    launch: Mapping[str, str]
    alternatives: tuple[Alternative, ...]
    bands: Bands | None = field(default=None, metadata=INLINE)


@dataclass(frozen=True)
class PlanOption(JsonResult):
    """One hardware option searched: the GPUs, its price, why configurations were rejected
    (reason → count), formats not searched, and the chosen configuration (None: nothing runs)."""

    option: str
    gpu: str
    count: int = field(metadata=GPUS)
    usd_per_gpu_hour: float | None
    rejected: Mapping[str, int]
    not_searched: tuple[str, ...]
    configurations: int
    chosen: ChosenConfiguration | None = field(default=None, metadata=INLINE)


@dataclass(frozen=True)
class Recommended(JsonResult):
    """The recommended option (the fastest; with a deadline or budget, the fastest that meets it)
    and what a client of it should keep in flight per endpoint: the planned launch runs
    ``num_servers`` endpoints (one per replica, or one per host of DP replicas; None in plans
    written before it was stated)."""

    option: str
    concurrency_per_endpoint: int
    output_tok_s_total: float
    num_replicas: int
    configuration: str
    num_servers: int | None = None


@dataclass(frozen=True)
class PlanJob(JsonResult):
    """The job as planned: requests, length distributions (text and mean tokens), the output
    cap ``generate --plan`` sends as ``max_tokens``, the output tokens in all, and the servers'
    start-up (seconds) every option's days and dollars count (``plan --startup``)."""

    samples: int
    isl: str
    osl: str
    isl_mean_tokens: float
    osl_mean_tokens: float
    osl_cap_tokens: float | None
    output_tokens: float
    startup_s: float = 0.0


@dataclass(frozen=True)
class ProvisionTry(JsonResult):
    """One GPU count the provisioning search tried, and whether it met the target: ``meets``
    judges ``checked_wall_days`` and ``checked_usd``, the job's figures at the low end of a prior
    τ's published acceptance where the count's configuration speculates on one (else the same as
    ``wall_days`` and ``usd``), so $292.71 under a $300 budget can read ``meets: false``."""

    gpus: int
    wall_days: float | None = field(metadata=DAYS)
    usd: float | None
    meets: bool
    checked_wall_days: float | None = field(default=None, metadata=DAYS)
    checked_usd: float | None = None


@dataclass(frozen=True)
class ProvisionRow(JsonResult):
    """Per GPU type: the fewest GPUs (whole rental units) that meet the target and the job at
    that count, or why none does (``why``); the counts tried; 80 % bands on days and dollars."""

    gpu: str
    unit_gpus: int
    usd_per_gpu_hour: float | None
    meets: bool
    gpus: int | None
    nodes: int | None
    wall_days: float | None = field(metadata=DAYS)
    usd: float | None
    configuration: str | None
    why: str | None
    tried: tuple[ProvisionTry, ...]
    bands: Bands | None = field(default=None, metadata=INLINE)


@dataclass(frozen=True)
class Provisioning(JsonResult):
    """``plan``'s answer to "how many GPUs": the targets (days, US dollars) and a row per type."""

    # days whose seconds are a finite float: the report words the deadline from its seconds
    deadline_days: float | None = field(metadata=DAYS)
    budget_usd: float | None
    options: tuple[ProvisionRow, ...]


@dataclass(frozen=True)
class WalkRow(JsonResult):
    """One step from the current setup to the recommended one (``plan --current``): what changed,
    the layout after it, its steady-state output tokens/s over all GPUs and the gain over the step
    before (None where it does not run), its batch per replica and what caps it (or why it does
    not run)."""

    change: str
    layout: str
    output_tok_s_total: float | None
    gain: float | None
    batch_per_replica: float | None
    limited_by: str


@dataclass(frozen=True)
class CurrentSetup(JsonResult):
    """``plan --current``: the setup a team runs, predicted (output tokens/s over all GPUs, with
    its 80 % interval), beside what it measured; where the measurement lies outside the band,
    the acceptance length τ (and per-position acceptance) and the running cap per replica that
    would reproduce it (None where none does); and the walk to the recommended setup."""

    description: str
    option: str
    configuration: str
    predicted_tok_s: float
    predicted_low_tok_s: float | None
    predicted_high_tok_s: float | None
    measured_tok_s: float | None
    measured_inside_band: bool | None
    implied_tau: float | None
    implied_acceptance_per_position: float | None
    implied_running_cap: int | None
    batch_per_replica: float
    batch_limit_reason: str
    walk: tuple[WalkRow, ...]


@dataclass(frozen=True)
class PlanResult(JsonResult):
    """The comparison ``plan`` returns: the job, every option, the recommendation, the answer
    in sentences, and how many configurations were evaluated."""

    SCHEMA_VERSION: ClassVar[int | None] = 1

    model: str
    engine: str
    efficiency: str
    provisioning: Provisioning | None
    job: PlanJob
    options: tuple[PlanOption, ...]
    recommended: Recommended | None
    answer: tuple[str, ...]
    configurations_evaluated: int
    current: CurrentSetup | None = field(default=None, metadata=OMIT_NONE)


@dataclass(frozen=True)
class AssumedOption(JsonResult):
    """What the plan assumed for one option: datasheet figures (bytes, bytes/s, FLOP/s), the
    price and where it comes from, and the efficiency factors applied."""

    option: str
    gpu: str
    count: int
    usd_per_gpu_hour: float | None
    price_source: str
    memory_bytes: float
    hbm_bytes_per_s: float
    dense_flops_per_s: Mapping[str, float]
    scaleup: str
    scaleup_bytes_per_s: float
    efficiency: Mapping[str, float]


@dataclass(frozen=True)
class Assumptions(JsonResult):
    """The engine, where the efficiency factors come from, and each option's assumptions."""

    engine: str
    efficiency_source: str
    options: tuple[AssumedOption, ...]


@dataclass(frozen=True)
class PlanReportData(JsonResult):
    """``plan``'s result and the numbers behind its charts (see ``plan_report_data``); a chart
    not asked for is None and left out of the JSON."""

    SCHEMA_VERSION: ClassVar[int | None] = 1

    plan: PlanResult
    assumptions: Assumptions
    throughput: tuple[ThroughputCurve, ...] | None = field(default=None, metadata=OMIT_NONE)
    cost_time: tuple[CostPoint, ...] | None = field(default=None, metadata=OMIT_NONE)
    memory: tuple[MemoryBars, ...] | None = field(default=None, metadata=OMIT_NONE)
    speedup: tuple[SpeedupCurve, ...] | None = field(default=None, metadata=OMIT_NONE)
