"""Continuous batching with chunked prefill, in steady state at a given concurrency.

In a *cycle* every running sequence is prefilled once (ISL tokens) and decodes OSL tokens.
With ``B`` sequences running, a cycle holds ``OSL/τ`` decode steps at batch ``B`` (τ = tokens
per step: 1, or the acceptance length with speculative decoding) and ``B·ISL`` prefill tokens:

- engines that keep prefill apart (SGLang's default, ``--enable-mixed-chunk`` off) add
  ``B·ISL / chunk`` prefill steps during which decode waits;
- engines that mix (vLLM chunked prefill, TRT-LLM in-flight batching) put ``B·ISL·τ/OSL``
  prompt tokens into each decode step, within the step's token budget.

Output tok/s = B·OSL / cycle; TPOT = (cycle − the prefill work before the request's first token) /
OSL: a client times TPOT from its first token, so its own prompt's prefill and, in a wave, the
prompts prefilled ahead of it are in its TTFT (Little's law on the requests past their first
token then gives B·(cycle − that work)/cycle, below B: with fixed lengths and prefill kept apart,
SGLang refills a whole batch in back-to-back prefill steps before it decodes again). The running
batch is the concurrency capped by the engine's running-request limit, by KV capacity at the
running sequences' mean context (length-biased: ISL + E[OSL²]/(2·E[OSL])) and, for hybrid models, by state slots.
TTFT = the serving overhead outside the GPU + wait for the next receive (R/2 decode steps, R = SGLang's
``--scheduler-recv-interval`` or 1) + own prefill + queueing behind other prompts (waves and M/D/1,
mixed by ``Efficiency.prefill_wave_fraction``, and every slot refilled from a queue in the replica
in a wave: ``job.steady.queue_share``; ``job.prefill_wait``) + TensorRT-LLM's attention-DP
balancing wait + queueing when the client keeps more requests in flight than the engine runs.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from tokenplan.engines.base import Engine, EngineSettings
from tokenplan.job.draft import draft_s as draft_s  # its home was here (explicit re-export)
from tokenplan.job.graphs import NO_HOST_TIME, Eager, outside_s, uncaptured

# What caps the batch lived here before issue 30 made room; it is imported from here (explicit re-exports).
from tokenplan.job.limits import BatchLimits as BatchLimits
from tokenplan.job.limits import batch_limits as batch_limits
from tokenplan.job.prefill_wait import (  # noqa: F401  (MAX_PREFILL_UTILISATION: its home was here)
    MAX_PREFILL_UTILISATION,
    adp_balance_wait_s,
    length_spread_tokens,
    prefill_queue_s,
    wave_persistence,
    wave_steps_mean,
)
from tokenplan.job.steady import SteadyState as SteadyState  # its home was here (explicit re-export)
from tokenplan.job.steady import queue_share, queue_warning, requests_queue
from tokenplan.job.workload import LengthDist
from tokenplan.perf.deployment import Deployment
from tokenplan.perf.efficiency import Efficiency
from tokenplan.perf.speculative import SpecDecode
from tokenplan.perf.step import keep_step, kept_memos, roofline_step_s, step_time
from tokenplan.perf.step_record import StepTime

# Step times by ``step_time``'s arguments after ``d`` and ``eff`` (:func:`_step`); a level's pair: ``kept_memos``.
StepMemo = dict[tuple[float, float, float, float, float, float], StepTime]
StepMemos = tuple[StepMemo, StepMemo]
# A replica's figures at a batch (see :func:`_level`), and a memo of them by (batch, queue share).
Level = tuple[float, float, float, StepTime, float, float, float, float, float]
LevelMemo = dict[tuple[float, float], Level]


# Least share of a mixed step's token budget left to prompt tokens when the decode batch alone
# fills it. vLLM and TRT-LLM schedule the running decodes first and give prefill what is left of
# ``max_num_batched_tokens``; with a decode batch at the budget nothing would be left and the
# prompts would never be admitted, whereas the engines still admit them (vLLM's scheduler lets
# a waiting prompt in once a decode finishes). One tenth of a chunk keeps prefill progressing at
# that rate, so that the cycle stays finite and a saturated budget reads as slow, not stalled.
MIN_PREFILL_BUDGET_FRACTION = 0.1


def _step(
    d: Deployment,
    eff: Efficiency,
    memos: StepMemos | None,
    decode_seqs: float,
    context_tokens: float,
    prefill_tokens: float,
    prefill_context_tokens: float,
    query_tokens_per_seq: float,
    prompt_chunk_tokens: float,
) -> StepTime:
    """``step_time`` with every argument given, looked up first in ``memos`` (of one deployment
    and one ``eff``: the first where sequences decode, else the second; ``perf.step.kept_memos``
    keeps the steps of a search by the value of what they depend on, and a sweep over
    concurrency asks for the same prefill steps at every level) where the caller has them."""
    args = (
        decode_seqs,
        context_tokens,
        prefill_tokens,
        prefill_context_tokens,
        query_tokens_per_seq,
        prompt_chunk_tokens,
    )
    if memos is None:
        return step_time(d, eff, *args)
    memo = memos[0] if decode_seqs else memos[1]
    got = memo.get(args)
    return keep_step(memo, d, eff, args) if got is None else got


class _Cycle(NamedTuple):
    """One cycle of a batch (see the module docstring), all in seconds."""

    cycle_s: float  # the batch prefills once and decodes OSL tokens
    prefill_share: float  # fraction of the cycle in prefill work
    own_s: float  # one request's own prefill


def _mixed_cycle(
    d: Deployment,
    eff: Efficiency,
    settings: EngineSettings,
    batch: float,
    ctx: float,
    isl: LengthDist,
    n_dec: float,
    query: float,
    dec_s: float,
    dec_kernel_s: float,
    memos: StepMemos | None = None,
    eager: Eager = NO_HOST_TIME,
) -> _Cycle:
    """Engines that mix prompt chunks into decode steps (vLLM, TRT-LLM): each step carries the
    decode batch and, while a prompt waits, as much of it as the token budget holds.

    The schedulers fill the budget greedily (vLLM's scheduler schedules the running decodes,
    then gives the rest of ``max_num_batched_tokens`` to waiting prompts; TRT-LLM's capacity
    scheduler does the same with ``max_num_tokens``): a prompt is cut into the fewest pieces the
    budget allows, ``k = ⌈ISL / budget⌉``, each riding in one step. While the B prompts of a
    cycle need no more steps than the cycle has (``B·k ≤`` decode steps), B·k steps carry a
    piece and the rest decode alone. Spreading the prompts thinly over every step instead would
    make each MoE step touch nearly every expert (36 tokens × top-8 reach most of 256 experts)
    and read all expert weights every step: DeepSeek-R1 NVFP4 TP4 on B200 at concurrency 4,
    8K/1K, would decode at 16.7 ms per token where InferenceX measures 8.0–8.4 ms. When the
    prompts need more steps than the cycle has, every step carries prompt tokens, spread evenly.
    A step past the CUDA-graph capture size adds ``eager``'s host time (:mod:`tokenplan.job.graphs`).
    """
    chunk = settings.chunk_tokens
    prompt_tokens = batch * isl.mean
    # With attention DP each of R ranks schedules its own B/R decodes and prompts under its own
    # share of the budget (chunk / R: the engines' per-rank max_num_tokens / max_num_batched_tokens,
    # SGLang's chunked_prefill_size // dp_size), so a prompt is cut by one rank's budget, and R
    # ranks together admit R pieces' worth of prompt tokens a step.
    ranks = d.memory.sequence_shards
    rank_chunk = chunk / ranks
    prompt_chunk = min(isl.mean, rank_chunk)
    budget = max(rank_chunk - batch * query / ranks, rank_chunk * MIN_PREFILL_BUDGET_FRACTION)
    n_own = math.ceil(isl.mean / budget)
    overhead_s = dec_s - dec_kernel_s  # per step outside the verify kernels (the draft)
    # One piece of a prompt riding with the whole decode batch: the greedy schedule's prefill
    # step, and what a request waits for its own prompt (n_own of them).
    piece_s = _step(d, eff, memos, batch, ctx, isl.mean / n_own, isl.mean / 2, query, prompt_chunk).total_s
    piece_s += outside_s(eager, batch * query, isl.mean / n_own)
    if batch * n_own <= n_dec:
        cycle = batch * n_own * piece_s + (n_dec - batch * n_own) * dec_kernel_s + n_dec * overhead_s
    else:
        n_steps = max(n_dec, prompt_tokens / (budget * ranks))
        mixed = _step(
            d, eff, memos, batch * n_dec / n_steps, ctx, prompt_tokens / n_steps, isl.mean / 2, query, prompt_chunk
        )
        cycle = n_steps * (
            mixed.total_s + outside_s(eager, batch * n_dec * query / n_steps, prompt_tokens / n_steps) + overhead_s
        )
    prefill_share = 1.0 - n_dec * dec_s / cycle if cycle > 0 else 0.0
    return tuple.__new__(_Cycle, (cycle, prefill_share, n_own * piece_s))


def _separate_cycle(
    d: Deployment,
    eff: Efficiency,
    settings: EngineSettings,
    batch: float,
    isl: LengthDist,
    n_dec: float,
    dec_s: float,
    pre_s: float,
    memos: StepMemos | None = None,
) -> _Cycle:
    """Engines that keep prefill apart (SGLang default): the cycle's ``B·ISL`` prompt tokens run
    in prefill-only steps of ``min(chunk, B·ISL)`` tokens each, of ``pre_s`` seconds each, during which
    decode waits: ``B·ISL / min(chunk, B·ISL)`` of them (at least one: prompts that fit one
    chunk together still take a whole prefill step)."""
    chunk = settings.chunk_tokens
    isl_mean = isl.mean
    prompt_tokens = batch * isl_mean
    n_chunks = prompt_tokens / (prompt_tokens if prompt_tokens < chunk else chunk) if prompt_tokens > 0 else 0.0
    cycle = n_dec * dec_s + n_chunks * pre_s
    # A request's own prompt is cut by its rank's share of the chunk (attention DP: chunk / R,
    # SGLang's chunked_prefill_size // dp_size; see _mixed_cycle)
    rank_chunk = chunk / d.memory.sequence_shards
    one_chunk = isl_mean if isl_mean < rank_chunk else rank_chunk  # min(rank_chunk, isl_mean)
    own = _step(d, eff, memos, 0.0, 0.0, one_chunk, isl_mean / 2, 1.0, one_chunk).total_s * math.ceil(
        isl_mean / rank_chunk
    )
    return tuple.__new__(_Cycle, (cycle, n_chunks * pre_s / cycle, own))  # _Cycle(...) without its __new__'s frame


def _wave_ttft_s(
    d: Deployment,
    eff: Efficiency,
    batch: float,
    isl_tokens: float,
    chunk: int,
    full_step_s: float,
    memos: StepMemos | None = None,
    eager: Eager = NO_HOST_TIME,
) -> float:
    """Mean time from a synchronised wave's arrival to a request's first token: its prompt and
    those ahead of it, prefilled in whole steps of ``chunk`` tokens (``wave_steps_mean``), the
    last step partly filled (seconds). ``full_step_s``: one prefill step of ``min(chunk, the
    wave's prompt tokens)``, which is already the whole wave when it fits one step, host time
    past the CUDA-graph capture size (``eager``, :mod:`tokenplan.job.graphs`) included."""
    full_steps, share_last, last_tokens = wave_steps_mean(batch, isl_tokens, chunk)
    last_s = (
        full_step_s
        if last_tokens >= chunk or full_steps == 0.0
        else _step(
            d, eff, memos, 0.0, 0.0, last_tokens, isl_tokens / 2, 1.0, min(isl_tokens, chunk / d.memory.sequence_shards)
        ).total_s
        + outside_s(eager, 0.0, last_tokens)
    )
    return full_steps * full_step_s + share_last * last_s + (1.0 - share_last) * full_step_s


def steady_state(
    d: Deployment,
    eff: Efficiency,
    engine: Engine,
    settings: EngineSettings,
    isl: LengthDist,
    osl: LengthDist,
    concurrency: float | None,
    spec: SpecDecode | None = None,
    limits: BatchLimits | None = None,
    steps: StepMemo | None = None,
    levels: LevelMemo | None = None,
) -> SteadyState:
    """Steady state of one replica at ``concurrency`` requests in flight.

    Args:
        d: the deployment. eff: efficiency factors. engine, settings: the engine and its
            resolved settings (``chunk_tokens`` in tokens).
        isl, osl: prompt and output lengths (tokens).
        concurrency: requests the client keeps in flight (None = offline: the engine runs as
            many as it can).
        spec: speculative decoding, or None.
        limits: the batch limits when the caller computed them (else computed here).
        steps: a memo of step times for this ``d`` and ``eff``, or None: the steps ``perf.step``
            keeps by the value of what they depend on (``kept_memos``), which the levels of a
            sweep and the configurations that step alike share.
        levels: a memo of :func:`_level` for these arguments but the concurrency, or None
            (``job.evaluate.Prepared`` keeps one: concurrencies at or above the limit run the
            same batch).

    Returns:
        SteadyState (tok/s, seconds).

    Raises:
        ValueError: not one sequence fits (``limits.limit`` < 1) or ``concurrency`` < 1. Callers
            (``job.evaluate``) reject configurations whose memory does not fit or whose limit
            is 0 before they get here, so this is a guard against a bug, not a user error.
    """
    limits = limits or batch_limits(d, engine, settings, isl, osl, spec)
    limit = limits.limit
    # min(concurrency, limit), written out (as the other min and max of the batch search below)
    batch = limit if concurrency is None or limit < concurrency else concurrency
    if batch < 1:
        raise ValueError(f"no sequence fits (batch {batch:g}); callers check memory.fits and limits first")
    # the share of a batch's freed slots refilled from a queue in the replica (queue_share)
    queued = requests_queue(concurrency, batch)
    share = queue_share(concurrency, batch)
    level = None if levels is None else levels.get((batch, share))
    if level is None:
        level = _level(d, eff, engine, settings, isl, osl, spec, batch, share, steps)
        if levels is not None:
            levels[batch, share] = level
    output_tok_s, tpot_s, ttft, dec, cycle_s, prefill_share, roofline_tok_s, opening, median = level
    warnings: tuple[str, ...] = ()
    if concurrency is not None and concurrency > batch:
        wait = (concurrency - batch) / (batch / cycle_s)  # queueing: waiting / completion rate
        ttft, median = ttft + wait, median + wait
        warnings = queue_warning(concurrency, batch, limits.reason)
    # Positional: a sweep builds tens of thousands, and keywords cost a third more.
    return SteadyState(
        batch,
        limits,
        output_tok_s,
        tpot_s,
        ttft,
        dec,
        cycle_s,
        prefill_share,
        roofline_tok_s,
        opening,
        median,
        queued,
        warnings,
    )


def _level(
    d: Deployment,
    eff: Efficiency,
    engine: Engine,
    settings: EngineSettings,
    isl: LengthDist,
    osl: LengthDist,
    spec: SpecDecode | None,
    batch: float,
    share: float,
    steps: StepMemo | None,
) -> Level:
    """:func:`steady_state`'s figures at ``batch`` running sequences, a ``share`` of whose freed
    slots refill from requests waiting in the replica (:func:`~tokenplan.job.steady.queue_share`),
    before the wait in that queue: (output tok/s, TPOT, TTFT, decode step, cycle, prefill share,
    roofline tok/s; seconds)."""
    # step_time is pure: the kept memos, or the caller's own for both, give the same steps
    memos = kept_memos(d, eff) if steps is None else (steps, steps)
    every, prefill = memos
    isl_mean, osl_mean = isl.mean, osl.mean
    ctx = isl_mean + osl.running_mean / 2
    tau = spec.acceptance_length if spec else 1.0
    query = (spec.draft_tokens + 1) if spec else 1.0
    # The decode step (and with speculative decoding the one-token step) and the prefill step,
    # looked up in ``memos`` first (as :func:`_step`, written out: every level of a sweep asks).
    key = (batch, ctx, 0.0, 0.0, query, 0.0)
    dec = every.get(key)
    if dec is None:
        dec = keep_step(every, d, eff, key)
    eager = uncaptured(d, settings, spec)  # a step past the CUDA-graph capture size (job.graphs)
    dec_total = dec.total_s + outside_s(eager, batch * query)
    if spec:
        one = _step(d, eff, memos, batch, ctx, 0.0, 0.0, 1.0, 0.0)  # one token per sequence
        dec_s = dec_total + draft_s(d, eff, batch, ctx, spec, one)
    else:
        one, dec_s = dec, dec_total
    n_dec = osl_mean / tau
    chunk, prompt_tokens = settings.chunk_tokens, batch * isl_mean
    key = (
        0.0,
        0.0,
        prompt_tokens if prompt_tokens < chunk else chunk,  # min(chunk, prompt_tokens)
        isl_mean / 2,
        1.0,
        min(isl_mean, chunk / d.memory.sequence_shards),  # a prompt's piece on its rank (_mixed_cycle)
    )
    pre = prefill.get(key)
    if pre is None:
        pre = keep_step(prefill, d, eff, key)
    pre_s = pre.total_s
    if engine.mixed_prefill:
        cyc = _mixed_cycle(d, eff, settings, batch, ctx, isl, n_dec, query, dec_s, dec_total, memos, eager)
    else:
        cyc = _separate_cycle(d, eff, settings, batch, isl, n_dec, dec_s, pre_s, memos)
    cycle_s, prefill_share, own_s = cyc
    # A slot refilled from the replica's queue is in its wave (the scheduler refills every freed slot
    # in one pass); the rest are the clients' new requests, a share prefill_wave_fraction in waves.
    g = eff.prefill_wave_fraction + (1.0 - eff.prefill_wave_fraction) * share
    wave_step_s = pre_s + outside_s(eager, 0.0, key[2])  # a wave's prefill step of min(chunk, B·ISL) tokens
    wave = _wave_ttft_s(d, eff, batch, isl_mean, chunk, wave_step_s, memos, eager) - own_s
    wave = 0.0 if 0.0 > wave else wave  # max(wave, 0.0)
    opening = eff.ttft_overhead_s + own_s + wave
    wave *= wave_persistence(wave, length_spread_tokens(osl) * cycle_s / osl_mean)
    steady_queue = prefill_queue_s(own_s, prefill_share, batch - 1.0)
    base = eff.ttft_overhead_s + dec_s * settings.recv_interval / 2 + own_s
    if settings.adp_balance_timeout_iters:  # attention-DP balancing holds the prompt back (job.prefill_wait)
        arrivals = math.inf if share > 0.0 else batch / cycle_s
        base += adp_balance_wait_s(settings.adp_balance_timeout_iters, d.memory.sequence_shards, dec_s, arrivals)
    # The mean over arrivals: a share g waits behind its wave, the rest queue as random arrivals.
    ttft = base + g * wave + (1.0 - g) * steady_queue
    # The median arrival is one of the majority: outside the waves while they hold under half
    # of the arrivals, else inside one (the median of the two-part mixture, whose wave part lies
    # above the other).
    median = base + (steady_queue if g < 0.5 else wave)
    # A client times TPOT from its first token: the cycle's prefill work before that token (its own
    # prompt, and in a wave the prompts ahead of it) is in its TTFT, not in its TPOT.
    before_first = own_s + g * wave
    prefill_s = cycle_s * prefill_share
    before_first = prefill_s if prefill_s < before_first else before_first  # min(before_first, prefill_s)
    bound = roofline_step_s(d, one)
    return (
        batch * osl_mean / cycle_s,  # output tok/s
        (cycle_s - before_first) / osl_mean,  # TPOT
        ttft,
        dec,
        cycle_s,
        prefill_share,
        batch / bound if bound > 0 else math.inf,  # the roofline's output tok/s
        opening,
        median,
    )
