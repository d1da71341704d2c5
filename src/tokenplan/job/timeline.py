"""A whole job of N requests on one replica: ramp-up, steady state, and the drain tail.

Steady state (``job.batching``) produces tokens at a constant rate while the queue is full.
Two phases are not steady:

- **drain**: once the queue is empty the batch shrinks as requests finish. The B running
  requests then have *residual* lengths; for requests in a renewal process the residual of a
  length L drawn length-biased has survival ``S_res(s) = E[max(L − s, 0)] / E[L]`` (Cox,
  *Renewal Theory*, 1962, §5.2). The drain decodes at batch ``B·S_res(s)`` until the longest
  residual is done — with thinking outputs capped at 32K tokens this is a long, slow tail.
- **burst**: N ≤ B requests sent at once (benchmarks that fire N prompts): every prompt is
  prefilled first, then all decode together and the batch shrinks as outputs end.

With R data-parallel replicas the job ends when the last replica does: its tail lasts while any
of the ``R·B`` draining requests runs, not any of one replica's B (with 50,000 replicas of 18
requests each, one replica's longest answer is ~14,000 tokens and the job's is the 32,768-token
cap). The time while it lasts is paid at the step of a replica that still runs one.

Tokens: the drain produces ``B·E[res]`` tokens with ``E[res] = E[L²]/(2·E[L])``; the steady
phase produces the rest at the steady rate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tokenplan.engines.base import EngineSettings
from tokenplan.job.batching import SteadyState
from tokenplan.job.draft import draft_s
from tokenplan.job.graphs import NO_HOST_TIME, Eager, outside_s, uncaptured
from tokenplan.job.workload import LengthDist
from tokenplan.perf.deployment import Deployment
from tokenplan.perf.efficiency import Efficiency
from tokenplan.perf.speculative import SpecDecode
from tokenplan.perf.step import step_time


@dataclass(frozen=True, slots=True)
class JobTime:
    """Wall time of N requests on one replica (seconds) by phase.

    Attributes:
        ramp_s: prompt prefill not overlapped with steady decoding (burst: every prompt).
        steady_s: the steady phase.
        drain_s: the tail while the batch empties.
        output_tokens: tokens generated (N × mean OSL).
        startup_s: the servers' start-up before the first request (weights loaded, compiled,
            CUDA graphs captured; the GPUs are held and paid for), 0 where not counted (a
            measured run's throughput, ``calibration.validate``).
    """

    ramp_s: float
    steady_s: float
    drain_s: float
    output_tokens: float
    startup_s: float = 0.0

    @property
    def total_s(self) -> float:
        """Whole wall time (seconds), the start-up included."""
        return self.startup_s + self.ramp_s + self.steady_s + self.drain_s

    @property
    def output_tok_s(self) -> float:
        """Mean output tokens per second over the whole job."""
        return self.output_tokens / self.total_s


def _shrinking_decode_s(
    d: Deployment,
    eff: Efficiency,
    batch0: float,
    isl: LengthDist,
    survival: tuple[tuple[float, float], ...],
    spec: SpecDecode | None,
    replicas: float = 1.0,
    eager: Eager = NO_HOST_TIME,
) -> float:
    """Expected decode time while ``batch0`` requests on each of ``replicas`` replicas finish
    along ``survival(s)`` (the share still running after s generated tokens).

    The phase lasts while *any* request of any replica runs: with n requests per replica each
    still running with probability f, that is ``P = 1 − (1 − f)^(n·R)``. While it lasts, a
    replica that still runs one runs ``n·f / p`` on average (``p = 1 − (1 − f)^n``, never fewer
    than one), and its step sets the pace. Each step also pays the draft when speculating, and past the CUDA-graph capture size ``eager``'s host time (job.graphs).
    """
    tau = spec.acceptance_length if spec else 1.0
    query = (spec.draft_tokens + 1) if spec else 1.0
    n = max(batch0, 1.0)
    total = 0.0
    for (s0, f0), (s1, f1) in zip(survival, survival[1:]):
        f = (f0 + f1) / 2
        p_job = 1.0 - (1.0 - f) ** (n * max(replicas, 1.0))
        if p_job < 1e-12:
            continue
        p_replica = 1.0 - (1.0 - f) ** n
        running = max(n * f / p_replica, 1.0) if p_replica > 0 else 1.0
        ctx = isl.mean + (s0 + s1) / 2
        step = step_time(d, eff, running, ctx, query_tokens_per_seq=query).total_s + outside_s(eager, running * query)
        if spec is not None:
            step += draft_s(d, eff, running, ctx, spec)
        total += (s1 - s0) / tau * p_job * step
    return total


def job_time(
    d: Deployment,
    eff: Efficiency,
    settings: EngineSettings,
    steady: SteadyState,
    isl: LengthDist,
    osl: LengthDist,
    num_requests: float,
    spec: SpecDecode | None = None,
    replicas: float = 1.0,
) -> JobTime:
    """Wall time of ``num_requests`` requests on each of ``replicas`` replicas running at
    ``steady`` (the job ends with the last replica's tail: see the module docstring).

    Args:
        steady: the replica's steady state at the job's concurrency.
        num_requests: requests each replica serves.
        replicas: data-parallel replicas serving the job together (1: one replica alone).
    """
    batch = min(steady.batch, num_requests)
    mean_l = osl.mean
    chunk = settings.chunk_tokens
    eager = uncaptured(d, settings, spec)  # a step past the CUDA-graph capture size (job.graphs)
    prefill_chunk_s = step_time(d, eff, 0.0, 0.0, chunk, isl.mean / 2).total_s + outside_s(eager, 0.0, chunk)
    tokens = num_requests * mean_l
    if num_requests <= steady.batch:  # burst: every prompt first, then a shrinking batch
        ramp = num_requests * isl.mean / chunk * prefill_chunk_s
        return JobTime(ramp, 0.0, _shrinking_decode_s(d, eff, batch, isl, osl.survival, spec, replicas, eager), tokens)
    residual_mean = osl.running_mean / 2
    drain = _shrinking_decode_s(d, eff, batch, isl, osl.residual_survival, spec, replicas, eager)
    drain_tokens = batch * residual_mean
    ramp = batch * isl.mean * (residual_mean / mean_l) / chunk * prefill_chunk_s
    steady_s = max(tokens - drain_tokens, 0.0) / steady.output_tok_s
    return JobTime(ramp, steady_s, drain, tokens)


def finite_run_wait_s(
    steady: SteadyState, concurrency: float | None, num_requests: float, median: bool = False
) -> float:
    """The queue wait (seconds) of a closed-loop run of ``num_requests`` requests on one replica
    that keeps ``concurrency`` in flight (None = offline: all of them submitted at once, C = N)
    and runs ``steady.batch`` of them: the run's mean wait, or its median request's with
    ``median``. 0 where nothing queues.

    The steady state's wait, ``(C − B)/λ`` with ``λ = B / cycle`` requests completing per
    second, is that of a client that never runs out of requests: each new one joins behind the
    ``C − B`` already waiting. A run of N requests starts with C sent at once: request j (in
    order of sending) starts when the (j − B)-th request ends, and j > C was sent when the
    (j − C)-th ended, so it waits ``w_j = (min(j, C) − B)⁺ / λ``: nothing for the first B, a
    wait that grows by 1/λ per place for the rest of the opening burst, the steady wait after
    it. Mean over j = 1..N: ``[(C' − B)(C' − B + 1)/2 + (N − C')(C' − B)] / (N·λ)`` with
    ``C' = min(C, N)``; median: ``w_j`` at ``j = (N + 1)/2``. E.g. 500 prompts sent at once to a
    replica that runs 12: the median request (j = 250.5) waits 238.5/λ, not 488/λ. FCFS
    admission (vLLM, SGLang and TensorRT-LLM admit in arrival order). Requests are taken to end
    evenly spaced from the start; with equal output lengths the first batch ends together one
    cycle in, so a lightly queued burst of fixed lengths waits up to about one cycle longer than
    this (the spread of the lengths and a deep queue make the two agree). A replica that
    completes nothing (``cycle_s`` infinite) waits forever: ``inf``."""
    b = steady.batch
    c = num_requests if concurrency is None else min(concurrency, num_requests)
    if c <= b:
        return 0.0
    if not steady.cycle_s < math.inf:
        return math.inf
    per_place = steady.cycle_s / b  # 1/λ: seconds between two completions
    n = num_requests
    if median:
        return max(min((n + 1.0) / 2.0, c) - b, 0.0) * per_place
    return ((c - b) * (c - b + 1.0) / 2.0 + (n - c) * (c - b)) / n * per_place


def steady_wait_s(steady: SteadyState, concurrency: float | None) -> float:
    """The steady state's queue wait (seconds): ``(C − B) / (B / cycle)`` where the client keeps
    C > B in flight (``job.batching.steady_state`` adds it to ``ttft_s`` and ``median_ttft_s``),
    else 0 (offline too: the steady state of an offline run adds no wait)."""
    if concurrency is None or concurrency <= steady.batch:
        return 0.0
    return (concurrency - steady.batch) * steady.cycle_s / steady.batch


def _opening(steady: SteadyState, concurrency: float | None) -> float:
    """Requests in a run's opening wave: the ones sent at once that the replica runs,
    ``min(C, batch)`` (offline: ``batch``)."""
    return steady.batch if concurrency is None or concurrency > steady.batch else concurrency


def run_median_ttft_s(steady: SteadyState, concurrency: float | None, num_requests: float) -> float:
    """The median request's time to first token (seconds) over a closed-loop run of
    ``num_requests`` requests on one replica that keeps ``concurrency`` in flight (None =
    offline: all sent at once).

    The run's first ``min(C, B)`` requests open it as one wave of prompts
    (:attr:`SteadyState.opening_ttft_s`, whose mean is also its median: a wave's TTFTs rise
    evenly through its prefill steps); where the median request ``(N + 1)/2`` is one of them,
    that is its TTFT. Otherwise it is the steady state's median request
    (:attr:`SteadyState.median_ttft_s`) with the finite run's queue wait in place of the
    steady one (:func:`finite_run_wait_s`). For ``N < C`` the caller gives the steady state at
    concurrency N (as for :func:`run_mean_ttft_s`)."""
    if (num_requests + 1.0) / 2.0 <= _opening(steady, concurrency):
        return steady.opening_ttft_s
    wait = finite_run_wait_s(steady, concurrency, num_requests, median=True)
    return steady.median_ttft_s - steady_wait_s(steady, concurrency) + wait


def run_mean_ttft_s(steady: SteadyState, concurrency: float | None, num_requests: float) -> float:
    """The mean time to first token (seconds) over a closed-loop run of ``num_requests``
    requests on one replica that keeps ``concurrency`` in flight (None = offline: all of them
    submitted at once).

    A benchmark client started with ``--max-concurrency C --request-rate inf`` sends its first C
    prompts at once to an idle server (InferenceX's and vLLM's ``benchmark_serving.py``: every
    request is created at start and a semaphore of C admits the first C together), so those C
    — ``min(C, batch)`` that the replica runs — wait for the prompts of one whole wave ahead of
    theirs (:attr:`SteadyState.opening_ttft_s`); the other ``N − C`` arrive one by one as
    requests end, at the steady state's TTFT. The mean weighs the two:
    ``(C·opening + (N − C)·steady) / N``. A median (InferenceX's ``ttft_ms_median``) is the
    median request's: :func:`run_median_ttft_s`. Offline, the first ``batch`` requests open the
    run and the rest wait in the replica's queue (C = N). ``N ≤ C``: one burst, the
    opening wave's, which is a wave of ``steady.batch`` prompts: for ``N < C`` the caller gives
    the steady state at concurrency N (``calibration.validate.predict_case``). Open-loop runs
    (a finite request rate) have no opening wave: not for them. The requests beyond the batch
    in the opening burst (C above the running limit) and after it wait in the replica's queue as
    a finite run does (:func:`finite_run_wait_s`), not the steady state's endless one.
    """
    opening = _opening(steady, concurrency)
    if num_requests <= opening:
        return steady.opening_ttft_s
    unqueued = steady.ttft_s - steady_wait_s(steady, concurrency)
    waits = num_requests * finite_run_wait_s(steady, concurrency, num_requests)
    return (opening * steady.opening_ttft_s + (num_requests - opening) * unqueued + waits) / num_requests
