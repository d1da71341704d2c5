"""Waiting for prefill: what a new request waits behind other requests' prompts before its own
first token (``job.batching.steady_state``'s TTFT), for the two arrival patterns the engines see.

- Requests that arrive at random queue as M/D/1 at the replica's prefill share of time
  (:func:`prefill_queue_s`, Pollaczek–Khinchine), at most behind the C − 1 others a closed client
  keeps in flight.
- A client that keeps C requests of fixed lengths in flight sends them in waves (requests that
  start together end together); a wave's prompts are packed in arrival order into whole prefill
  steps of the engine's chunk (:func:`wave_steps_mean`), so a wave that fits one step waits for
  all of it. Output lengths that differ spread a wave's completions over time
  (:func:`wave_persistence`, with the spread of :func:`length_spread_tokens`).

When the replica holds a queue
(concurrency above the running batch, or offline), every arrival is in a wave (g = 1): the
requests of a batch that started together end in the same step (fixed lengths, no speculation),
and the scheduler refills their slots from its own waiting queue in the same pass, so the next
batch starts together too. SGLang (``Scheduler.get_next_batch_to_run``: a new prefill batch
whenever one can be formed, before the running decode batch; ``--enable-mixed-chunk`` off) then
prefills the whole batch back to back before it decodes again. On the SGLang Qwen3.6 cookbook's
concurrency-1,024 cells (fixed 8K/1K, 2,048 prompts) this is what makes Little's law on the
client's figures (output tok/s × TPOT = 27.6 for 27B BF16 on H200) read ~0.7 of the slots the
replica holds (39 at ``--mem-fraction-static 0.8``): a request spends about half of each refill
before its own first token, in its TTFT, the rest in its TPOT.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

from tokenplan.job.workload import LengthDist

# Highest prefill utilisation the M/D/1 wait is evaluated at. The Pollaczek–Khinchine wait
# ρ/(1 − ρ) diverges as ρ → 1, but a replica's prefill share comes from a closed loop (the client
# keeps C requests in flight, so arrivals stop when the queue fills) and cannot grow without
# bound; at ρ = 0.95 the wait is already 9.5 prompt-prefill times, beyond which the open-queue
# formula no longer describes a closed client.
MAX_PREFILL_UTILISATION = 0.95


def prefill_queue_s(own_prefill_s: float, prefill_share: float, others: float = math.inf) -> float:
    """Mean wait behind other requests' prefills: M/D/1 with utilisation ρ = the share of time
    the replica spends prefilling, ``W = ρ·S / (2(1 − ρ))`` (Pollaczek–Khinchine, deterministic
    service S = one prompt's prefill); ρ capped at :data:`MAX_PREFILL_UTILISATION`. A closed
    loop of C requests has at most ``others = C − 1`` prompts ahead of a new one, so the wait is
    at most ``others·S`` (none at concurrency 1, where a high prefill share is the request's own
    prompt, not a queue).

    Args:
        own_prefill_s: S, one prompt's prefill (seconds).
        prefill_share: ρ, fraction of time the replica prefills (dimensionless).
        others: requests that can be ahead of this one (C − 1; unbounded by default).

    Returns:
        The mean wait (seconds).
    """
    # min(max(prefill_share, 0.0), MAX), min(wait, max(others, 0.0) * S), written out as the
    # comparisons the builtins make (a sweep calls this once per configuration and level).
    rho = 0.0 if 0.0 > prefill_share else prefill_share
    rho = MAX_PREFILL_UTILISATION if MAX_PREFILL_UTILISATION < rho else rho
    wait = rho * own_prefill_s / (2.0 * (1.0 - rho))
    bound = (0.0 if 0.0 > others else others) * own_prefill_s
    return bound if bound < wait else wait


def length_spread_tokens(dist: LengthDist) -> float:
    """Width of the length distribution as the width of a uniform of the same variance,
    ``√12 · sd`` (tokens): 0 for fixed lengths, 0.2·L for InferenceX's U[0.8 L, L]."""
    last = _LAST_SPREAD  # a sweep asks for one distribution at every level: no hash of it then
    if last[0] is not dist:
        last[:] = [dist, _length_spread_tokens(dist)]
    return last[1]  # type: ignore[no-any-return]


_LAST_SPREAD: list[Any] = [None, 0.0]  # [the distribution asked for last (held), its spread]


@lru_cache(maxsize=256)
def _length_spread_tokens(dist: LengthDist) -> float:
    q = dist.quantiles
    mean = sum(q) / len(q)
    return math.sqrt(12.0 * max(sum(x * x for x in q) / len(q) - mean * mean, 0.0))


def wave_persistence(wave_s: float, spread_s: float) -> float:
    """Share of the wave wait left when the wave's requests finish spread over ``spread_s``
    seconds (their output lengths differ) instead of together. The wave's n prompts, each
    prefilled in p seconds (all of them in P = n·p = 2 × the mean wave wait), now arrive evenly
    spaced over the spread W; request i waits ``i·(p − W/n)`` when the prefills outrun the
    arrivals, so the mean wait is the synchronised one times ``1 − W/P``, and 0 when W ≥ P (each
    prompt is prefilled before the next arrives). Fixed lengths (W = 0) keep the whole wave."""
    if wave_s <= 0:
        return 1.0
    left = 1.0 - spread_s / (2.0 * wave_s)
    return left if left > 0.0 else 0.0  # max(0.0, left), written as the builtin picks


def wave_steps_mean(batch: float, isl_tokens: float, step_tokens: float) -> tuple[float, float, float]:
    """How a synchronised wave of prompts is prefilled in whole steps.

    A wave of n = round(batch) prompts of ``isl_tokens`` each arrives together and is packed,
    in arrival order, into prefill steps of ``step_tokens`` (SGLang's chunk, the token budget
    of vLLM and TRT-LLM, which the wave's prompts fill alone: the requests that would decode
    with them have just ended). Prompt i (1..n) has its first token when the step holding its
    last prompt token ends, step ``k_i = ⌈i·ISL / step_tokens⌉``; the wave takes
    ``K = ⌈n·ISL / step_tokens⌉`` steps, the last of them partly filled. Every prompt of a wave
    that fits one step waits for the whole step, where a token-by-token count of the prompts
    ahead, ``(n − 1)/2 × ISL``, gives about half of it.

    Args:
        batch: requests in the wave (≥ 1 after rounding). isl_tokens: prompt length (tokens).
        step_tokens: prompt tokens one prefill step holds (tokens, > 0).

    Returns:
        (mean over the wave of the full steps before a prompt's last one, share of the wave's
        prompts whose last step is the wave's last, prompt tokens in that last step). The mean
        wait in seconds is ``full_steps × T(step_tokens) + share_last × T(last) + (1 −
        share_last) × T(step_tokens)``.
    """
    n = round(batch)
    n = n if n > 1 else 1  # max(1, n)
    total, last, at_last = _wave_ends(n, isl_tokens / step_tokens)
    last_tokens = n * isl_tokens - (last - 1.0) * step_tokens
    return total / n - 1.0, at_last / n, last_tokens


@lru_cache(maxsize=4096)
def _wave_ends(n: int, per_step: float) -> tuple[int, float, int]:
    """(Σ k_i, k_n, how many i have k_i = k_n) for ``k_i = ⌈i·per_step − 10⁻⁹⌉``, i = 1..n.

    ``k_i`` never decreases with i (a product, a difference and a ceiling are each monotone in
    floating point), so where a step holds more than four prompts it is summed one run of equal
    values at a time (``k_n`` runs, each found by a guess from the exact bound and corrected
    against ``k_i`` itself, which keeps every ``k_i`` the one the per-prompt formula gives), else
    prompt by prompt. Exact integers throughout."""

    def k(i: int) -> int:
        return math.ceil(i * per_step - 1e-9)

    if per_step > 0.25:  # runs of at most four prompts: count prompt by prompt
        ends = [math.ceil(i * per_step - 1e-9) for i in range(1, n + 1)]
        return sum(ends), float(ends[-1]), ends.count(ends[-1])
    total, i, v = 0, 1, k(1)
    while True:
        j = min(max(int((v + 1e-9) / per_step), i), n)  # last i of this run, about
        while k(j) > v:
            j -= 1
        nxt = v
        while j < n and (nxt := k(j + 1)) <= v:
            j += 1
        total += v * (j - i + 1)
        if j == n:
            return total, float(v), j - i + 1  # the last run is every i with k_i = k_n
        i, v = j + 1, nxt


def adp_balance_wait_s(timeout_iters: int, ranks: float, step_s: float, arrivals_per_s: float) -> float:
    """Mean time a new request waits for TensorRT-LLM's attention-DP context balancing before
    its prefill (seconds).

    With ``attention_dp_config.enable_balance`` a rank schedules its pending context requests
    only once every attention-DP rank has one, or after ``timeout_iters`` iterations of waiting
    (TensorRT-LLM ``PyExecutor._balance_adp_requests``: ``adp_ctx_waiting_iters_count`` counts
    the steps while some rank has none, and the contexts go when it reaches
    ``attention_dp_time_out_iters``; ``batching_wait_iters`` adds nothing at 0). The published
    attention-DP recipes set ``enable_balance: true, timeout_iters: 60, batching_wait_iters: 0``
    (InferenceMAX ``benchmarks/dsr1_fp4_b200_trt*.sh`` / ``dsr1_fp8_*_trt*.sh``; TensorRT-LLM's
    DeepSeek deployment guide), so the wait is the shorter of ``timeout_iters`` decode steps and
    the time until every rank has received a request: requests arrive at the replica at
    ``arrivals_per_s`` and land on a rank as its own requests finish, i.e. at random among the
    ranks, so after the first the other ``ranks − 1`` each need one (a coupon collector:
    ``ranks / λ · H(ranks − 1)`` on average), and a request waits on average half that window.
    On ``serving-dev.csv``'s TensorRT-LLM DeepSeek-R1 DP-attention rows at concurrency ≤ 32 the
    measured TTFT is 0.8–6.4 s where the prefill takes 0.13–0.5 s: 30–100 decode steps more.

    Args:
        timeout_iters: the engine's balance timeout (iterations; 0 = balancing off).
        ranks: attention-DP ranks of the replica (1 = no attention DP).
        step_s: one decode step of the running batch (seconds).
        arrivals_per_s: requests arriving at the replica per second (``math.inf`` when a queue
            in the replica keeps every rank supplied: offline, or concurrency above the batch).

    Returns:
        Seconds (0 without balancing, attention DP or arrivals to wait for).
    """
    if timeout_iters <= 0 or ranks <= 1.0 or not arrivals_per_s > 0.0 or math.isinf(arrivals_per_s):
        return 0.0
    others = int(round(ranks)) - 1
    window = ranks / arrivals_per_s * sum(1.0 / i for i in range(1, others + 1))
    cap = timeout_iters * step_s
    return cap if cap < window / 2 else window / 2
