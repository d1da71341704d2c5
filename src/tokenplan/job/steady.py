"""The record of one replica in steady state (``job.batching.steady_state`` makes it), and whether
requests queue in the replica ahead of its running batch."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from tokenplan.job.limits import BatchLimits
from tokenplan.perf.step_record import StepTime
from tokenplan.records import quick_init


@dataclass(frozen=True, slots=True)
class SteadyState:
    """One replica at a concurrency, in steady state.

    Attributes:
        batch: sequences running (per replica).
        limits: what caps the batch.
        output_tok_s: generated tokens per second of the replica.
        tpot_s, ttft_s: time per output token and time to first token (seconds).
        decode_step: the decode step at that batch.
        cycle_s: time for the batch to prefill and generate once (seconds).
        prefill_share: fraction of the cycle spent in prefill-only steps.
        roofline_output_tok_s: the physical bound at the same batch (speculative off).
        opening_ttft_s: mean TTFT of a wave of ``batch`` prompts that arrive at once on an idle
            replica (seconds): the TTFT overhead, its own prompt and the prompts ahead of it in
            whole prefill steps, fully synchronised and without a receive wait (the run's opening
            wave: ``job.timeline.run_mean_ttft_s``).
        median_ttft_s: the median request's TTFT (seconds): ``ttft_s`` is the mean over
            arrivals, a share ``prefill_wave_fraction`` of which wait behind the prompts of their
            wave; while that share is under one half the median arrival is outside the waves and
            waits only as a random arrival (the median of the two-part mixture), else inside one.
            What a file's median TTFT (InferenceX's ``ttft_ms_median``) is compared with.
        queued: requests wait in the replica for a running slot: offline (every request
            submitted at once) or more in flight than ``batch`` (``calibration.bands.queue_regime``,
            which the error bands split by).
        warnings: plain-language caveats.
    """

    batch: float
    limits: BatchLimits
    output_tok_s: float
    tpot_s: float
    ttft_s: float
    decode_step: StepTime
    cycle_s: float
    prefill_share: float
    roofline_output_tok_s: float
    opening_ttft_s: float
    median_ttft_s: float
    queued: bool = False
    warnings: tuple[str, ...] = field(default=())

    @property
    def bottleneck(self) -> str:
        """What bounds the replica: the decode step's limit (``memory bandwidth``, ``compute``, …),
        or ``prefill (N % of each cycle)`` where prefill-only steps take most of the cycle (a job
        of long prompts and short answers: at --osl 1 the decode step's "memory bandwidth" was
        said beside a cycle 99.7 % prefill, a break-it pass)."""
        if self.prefill_share >= 0.5:
            return f"prefill ({self.prefill_share:.0%} of each cycle)"
        return self.decode_step.bottleneck

    @property
    def batch_reason(self) -> str:
        """What sets the running batch: the client's ``concurrency`` when it is below the
        engine's limits, else the binding limit (``kv cache``, ``kv cache and state`` where one
        pool holds a hybrid model's KV and state, ``state slots``, ``engine cap``)."""
        return "concurrency" if self.batch < self.limits.limit else self.limits.reason


quick_init(SteadyState)  # a quicker __init__, same signature (tokenplan.records)


def requests_queue(concurrency: float | None, batch: float) -> bool:
    """Whether requests wait in the server for a slot of the running ``batch`` (sequences):
    offline (``concurrency`` None, every request submitted at once) or more requests in flight
    per replica than it runs. Then the waiting requests refill freed slots in prefill waves
    (:func:`queue_share`) and the TTFT adds the
    wait for a slot (:func:`steady_state`); the error bands keep these apart
    (``calibration.bands.queue_regime``)."""
    return concurrency is None or concurrency > batch


def queue_share(concurrency: float | None, batch: float) -> float:
    """The share of a running ``batch``'s slots, freed together, that requests already waiting
    in the replica refill: ``min(1, (C − B)/B)`` for ``concurrency`` C above the batch B, 1
    offline (every request submitted at once), 0 with no queue. The scheduler admits the waiting
    requests in the pass that frees the slots, so they join the wave of prompts prefilled
    together; the other freed slots wait for their clients' next requests, which arrive in
    waves only as often as unqueued arrivals do (``Efficiency.prefill_wave_fraction``). A
    client two requests above the batch (InferenceX's DeepSeek-R1 H200 SGLang MTP run at
    concurrency 64, median TTFT 604.6 ms) thus waits in a wave for 2 of every B refills,
    not for all of them (``job.batching._level``)."""
    if concurrency is None:
        return 1.0
    if concurrency <= batch:
        return 0.0
    share = (concurrency - batch) / batch
    return 1.0 if share > 1.0 else share


@lru_cache(maxsize=1024)
def queue_warning(concurrency: float, batch: float, reason: str) -> tuple[str]:
    """The caveat of a client that keeps more requests in flight than the replica runs (a sweep
    says it at every level of every configuration the limit binds)."""
    return (f"concurrency {concurrency:g} exceeds the {batch:g} sequences the replica runs ({reason}); the rest queue",)
