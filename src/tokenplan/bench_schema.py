"""The bench JSON as types: what ``tokenplan bench --json``/``--save`` writes, read back the same.

Each class is a frozen dataclass on :class:`~tokenplan.results.JsonResult`, its JSON keys its field
names in field order, so ``BenchResult.from_json(d).to_json() == d`` for every file bench writes
(:func:`tokenplan.bench.result.bench_result` builds it; its ``to_json()`` is the dict). Units are
in the names: ``_s`` seconds, ``_ms`` milliseconds, ``_tok_s`` tokens/s; rates are 0–1 fractions
unless named ``_rate`` in vLLM's percent. Fields a file written by an older tokenplan may lack
default to None (or empty), so such a file still reads; a fresh sweep writes every key.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from tokenplan.results import BENCH_SCHEMA_VERSION, INLINE, OMIT_NONE, JsonResult


@dataclass(frozen=True, kw_only=True)
class Latency(JsonResult):
    """A latency distribution over a level's answers (seconds); None where not measured."""

    mean: float | None = None
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None


@dataclass(frozen=True, kw_only=True)
class ServerWindow(JsonResult):
    """The servers' ``/metrics`` over a level's window, added up over endpoints
    (:func:`tokenplan.bench.levels.combine_server`): tokens, tok/s, running and waiting requests
    (sums), ``kv_usage_max`` (the highest, fraction), preemptions (count)."""

    generation_tokens: float | None = None
    output_tok_s: float | None = None
    preemptions: float | None = None
    running_mean: float | None = None
    running_max: float | None = None
    waiting_mean: float | None = None
    waiting_max: float | None = None
    samples: float | None = None
    queued_samples: float | None = None  # snapshots after the first with requests waiting
    kv_usage_max: float | None = None


@dataclass(frozen=True, kw_only=True)
class AcceptanceServer(JsonResult):
    """Speculative acceptance in a window from the servers' counters or τ gauge
    (:func:`tokenplan.bench.acceptance.acceptance_dict`): ``tau`` tokens per verification step
    (bonus included), ``acceptance_rate`` and ``per_position`` fractions 0–1, counts in the window."""

    engine: str | None = None
    source: str
    tau: float
    acceptance_rate: float | None = None
    per_position: tuple[float, ...] = ()
    drafts: float | None = None
    draft_tokens: float | None = None
    accepted_tokens: float | None = None
    gauge_readings: float | None = None


@dataclass(frozen=True, kw_only=True)
class ContextBucket(JsonResult):
    """τ over the answers whose context (prompt + completion, tokens) lies in one bucket
    (:func:`tokenplan.bench.acceptance.request_acceptance`)."""

    bucket: str
    min_tokens: int | None = None
    max_tokens: int | None = None
    requests: int
    completion_tokens: float | None = None
    verify_steps: float | None = None
    tau: float
    mean_context_tokens: float | None = None
    mean_decode_context_tokens: float


@dataclass(frozen=True, kw_only=True)
class RequestAcceptance(JsonResult):
    """τ from the answers' own verification counts (SGLang ``meta_info.spec_verify_ct``)."""

    requests: int
    completion_tokens: float
    verify_steps: float
    tau: float
    context_buckets: tuple[ContextBucket, ...] = ()


@dataclass(frozen=True, kw_only=True)
class LevelAcceptance(JsonResult):
    """One level's acceptance (:func:`tokenplan.bench.acceptance.level_acceptance`): ``tau`` and
    where it came from (``source``), the level's mean decode context (tokens), the servers' and
    the answers' readings (None where absent)."""

    tau: float
    source: str
    context_tokens: float | None = None
    server: AcceptanceServer | None = None
    requests: RequestAcceptance | None = None


@dataclass(frozen=True, kw_only=True)
class SweepAcceptance(JsonResult):
    """The sweep's acceptance pooled over its levels (:func:`tokenplan.bench.acceptance_sweep.
    sweep_acceptance`): τ, its source, per draft position (fractions), pooled context buckets and
    how many levels measured it."""

    tau: float
    source: str
    per_position: tuple[float, ...] = ()
    context_buckets: tuple[ContextBucket, ...] = ()
    levels: int | None = None


@dataclass(frozen=True, kw_only=True)
class SpecDecodeFields(JsonResult):
    """The acceptance under ``vllm bench serve``'s names, written only where the counters measured
    it (:func:`tokenplan.bench.acceptance.vllm_fields`); ``spec_decode_acceptance_rate`` in %."""

    spec_decode_acceptance_rate: float | None
    spec_decode_acceptance_length: float
    spec_decode_num_drafts: float | None
    spec_decode_draft_tokens: float | None
    spec_decode_accepted_tokens: float | None
    spec_decode_per_position_acceptance_rates: tuple[float, ...]


def open_loop_in_flight(sent: float, achieved: float | None, limit: float | None) -> float:
    """The requests an open-loop level held in flight (requests): its achieved concurrency where
    measured (Little's law: the sum of request latencies over the level's duration, what the server
    held on average), else its ``--max-concurrency`` limit (an upper bound, reached only where
    arrivals outpaced the server), else the requests it ``sent``. The chart places the level and
    the fit reads its batch at this figure."""
    held = achieved if achieved is not None else limit
    return float(sent if held is None else held)


@dataclass(frozen=True, kw_only=True)
class BenchLevel(JsonResult):
    """One concurrency level (:func:`tokenplan.bench.levels.level_dict`): the client's counts and
    throughputs (None: tokens not countable), latency distributions (seconds), the servers'
    window, the acceptance, then the same figures as ``vllm bench serve`` names them (ms)."""

    concurrency: int
    achieved_concurrency: float | None = None
    requests: int
    errors: int
    error_samples: tuple[str, ...] = ()
    duration_s: float
    request_throughput_per_s: float | None = None
    output_tok_s: float | None
    total_tok_s: float | None = None
    token_count_method: str | None = None
    output_tokens: float | None = None
    input_tokens: float | None = None
    mean_input_tokens: float | None = None
    mean_output_tokens: float | None = None
    window_start_unix_s: float | None = None
    window_end_unix_s: float | None = None
    ttft_s: Latency | None = None
    tpot_s: Latency | None = None
    itl_s: Latency | None = None
    e2e_s: Latency | None = None
    server: ServerWindow | None = None
    acceptance: LevelAcceptance | None = None
    completed: int | None = None
    max_concurrency: int | None = None
    request_rate: float | str | None = None  # requests/s, or "inf" (closed loop) as vLLM writes it
    total_input_tokens: float | None = None
    total_output_tokens: float | None = None
    request_throughput: float | None = None
    output_throughput: float | None = None
    total_token_throughput: float | None = None
    mean_ttft_ms: float | None = None
    median_ttft_ms: float | None = None
    p90_ttft_ms: float | None = None
    p99_ttft_ms: float | None = None
    mean_tpot_ms: float | None = None
    median_tpot_ms: float | None = None
    p90_tpot_ms: float | None = None
    p99_tpot_ms: float | None = None
    mean_itl_ms: float | None = None
    median_itl_ms: float | None = None
    p90_itl_ms: float | None = None
    p99_itl_ms: float | None = None
    mean_e2el_ms: float | None = None
    median_e2el_ms: float | None = None
    p90_e2el_ms: float | None = None
    p99_e2el_ms: float | None = None
    spec_decode: SpecDecodeFields | None = field(default=None, metadata=INLINE)

    @property
    def open_loop_rate(self) -> float | None:
        """The level's arrival rate (requests/s) where it ran open loop at a finite rate, else None
        (a closed loop, or ``inf``: every request at once). Such a level's ``concurrency`` is only
        the requests it sent: what it held in flight is :func:`open_loop_in_flight`."""
        rate = self.request_rate
        return float(rate) if isinstance(rate, (int, float)) and math.isfinite(rate) else None

    @property
    def in_flight(self) -> float:
        """The requests the level held in flight, where a chart places it: its ``concurrency`` in a
        closed loop; for an open-loop level (whose ``concurrency`` is the requests it sent) its
        achieved concurrency (Little's law), else its ``max_concurrency``, else what it sent."""
        if self.open_loop_rate is None:
            return float(self.concurrency)
        return open_loop_in_flight(self.concurrency, self.achieved_concurrency, self.max_concurrency)

    @property
    def label(self) -> str:
        """What the level was run at: ``"concurrency 4"``, or ``"rate 2.5 req/s"`` (``", ≤ 64 in
        flight"`` with a limit) for an open-loop level."""
        rate = self.open_loop_rate
        if rate is None:
            return f"concurrency {self.concurrency}"
        limit = "" if self.max_concurrency is None else f", ≤ {self.max_concurrency} in flight"
        return f"rate {rate:g} req/s{limit}"


@dataclass(frozen=True, kw_only=True)
class BenchServer(JsonResult):
    """Whether any level read ``/metrics``, and the server's own description (its model, engine,
    limits; :func:`tokenplan.bench.server_info.server_info_summary`) where it gave one."""

    metrics: bool = True
    server_info: dict[str, Any] | None = None


@dataclass(frozen=True, kw_only=True)
class BenchCap(JsonResult):
    """Where the server's capacity showed (:func:`tokenplan.bench.server_info.concurrency_cap`);
    None where the sweep does not show it; ``source``: ``"metrics"``, ``"throughput"`` or None."""

    flattens_at_concurrency: int | None = None
    saturated_output_tok_s: float | None = None
    queue_grows_at_concurrency: int | None = None
    max_running_requests: int | None = None
    source: str | None = None


@dataclass(frozen=True, kw_only=True)
class BenchWorkload(JsonResult):
    """The prompts sent: how they were made, the lengths asked for (tokens), the dataset, how many,
    the share of exact lengths, and how requests arrived."""

    method: str
    isl_tokens: int | None = None
    osl_tokens: int | None = None
    dataset: str | None = None
    prompts: int
    exact_fraction: float | None = None
    ignore_eos: bool
    stream: bool
    arrivals: str


@dataclass(frozen=True, kw_only=True)
class BenchResult(JsonResult):
    """A bench sweep: the model and endpoints (credentials masked), the GPU count (None: not
    given), the levels, the servers' metrics, the cap, the acceptance, the workload, the notes and
    why the sweep stopped (None: every level ran). ``fit``: what ``bench --fit`` added (the fit's
    own JSON, drawn by :mod:`tokenplan.report.fit`), absent otherwise."""

    SCHEMA_VERSION: ClassVar[int | None] = BENCH_SCHEMA_VERSION

    model: str
    endpoints: tuple[str, ...] = ()
    num_gpus: int | None
    levels: tuple[BenchLevel, ...]
    server: BenchServer | None = None
    cap: BenchCap | None = None
    acceptance: SweepAcceptance | None = None
    workload: BenchWorkload | None = None
    notes: tuple[str, ...] = ()
    stopped: str | None = None
    fit: dict[str, Any] | None = field(default=None, metadata=OMIT_NONE)


@dataclass(frozen=True, kw_only=True)
class FitFactor(JsonResult):
    """One fitted efficiency factor: its value and 1σ uncertainty (None: the fit cannot tell)."""

    value: float
    uncertainty: float | None = None


@dataclass(frozen=True, kw_only=True)
class FitLevel(JsonResult):
    """One level of a fit: the running batch, predicted and measured TPOT and TTFT (s) and output
    tok/s per GPU (measured None where not measured)."""

    concurrency: float
    batch: float
    predicted_tpot_s: float
    measured_tpot_s: float | None = None
    predicted_ttft_s: float | None = None
    measured_ttft_s: float | None = None
    predicted_output_tok_s_per_gpu: float
    measured_output_tok_s_per_gpu: float | None = None


@dataclass(frozen=True, kw_only=True)
class FitSourceFile(JsonResult):
    """A result file a fit read (``calibrate --from-bench``): its path, format and levels."""

    path: str
    format: str
    levels: int


@dataclass(frozen=True)
class LevelErrors(JsonResult):
    """Median |predicted/measured − 1| over a group's rows or a sweep's levels: TPOT (or output tok/s
    where a row has no TPOT) and TTFT; None where no row measured it."""

    tpot: float | None
    ttft: float | None


@dataclass(frozen=True)
class UpdateProfile(JsonResult):
    """An update profile (read by :mod:`tokenplan.files.calibration`, ``"layered_on": "shipped"``):
    per ``engine/architecture`` group the informed factors, the shipped value each started from
    (``prior``, ``group.factor`` → value) and their ±1σ (``uncertainty``; none where the fit cannot
    tell), the provenance and, for a fit to one measured server, the range it was fitted on
    (:func:`tokenplan.calibration.fitted_range.fitted_on` and the fit's ``median_abs_error``)."""

    layered_on: str
    groups: Mapping[str, Mapping[str, float]]
    prior: Mapping[str, float]
    uncertainty: Mapping[str, float]
    provenance: str
    fitted_on: Mapping[str, Any] | None = field(default=None, metadata=OMIT_NONE)


@dataclass(frozen=True, kw_only=True)
class StepLaw(JsonResult):
    """The measured decode step law ``a + b·B`` (seconds, seconds per sequence) through the
    (running batch, mean TPOT in seconds) ``points`` it was fitted to."""

    a_s: float
    b_s_per_sequence: float
    points: tuple[tuple[float, ...], ...]


@dataclass(frozen=True, kw_only=True)
class StepPoint(JsonResult):
    """A measured (batch, step seconds) point beside the fitted model's step at that batch."""

    batch: float
    measured_step_s: float
    model_step_s: float


@dataclass(frozen=True, kw_only=True)
class FitUpdate(JsonResult):
    """How the fit updated the shipped factors (``tokenplan.calibration.update.UpdateFit``): the
    candidate kept, each informed factor's shipped value, each step factor's posterior σ / prior
    σ, and the median |error| with the shipped and with the kept factors."""

    kept: str
    prior: Mapping[str, float]
    shrink: Mapping[str, float]
    median_abs_error_shipped: LevelErrors
    median_abs_error_calibrated: LevelErrors


@dataclass(frozen=True, kw_only=True)
class BenchFit(JsonResult):
    """A fit of the efficiency factors to one measured server (``bench --fit``, ``calibrate
    --from-bench``/``--from-run``: ``tokenplan.calibration.run_profile.fit_profile`` builds it,
    ``FitOutcome.data`` is its JSON, the bench JSON's ``fit``): the factors (±1σ), those at a bound,
    whether it converged, the running cap, the median |error| of output tok/s per GPU and the
    warnings it earned, the levels predicted vs measured, the measured step law and the model's
    step at its points, the profile written, how it updated the shipped fit and the files read."""

    factors: Mapping[str, FitFactor]
    at_bound: tuple[str, ...] = ()
    converged: bool
    max_running: int | None = None
    median_abs_error: float | None = None
    warnings: tuple[str, ...] = ()
    levels: tuple[FitLevel, ...]
    measured_step_law: StepLaw | None = None
    model_step_s: tuple[StepPoint, ...] = ()
    profile: UpdateProfile | None = None
    update: FitUpdate | None = None
    sources: tuple[FitSourceFile, ...] | None = field(default=None, metadata=OMIT_NONE)
