"""A concurrency sweep: at each level, ``C`` closed-loop workers keep ``C`` requests in flight;
or, with request rates, an open-loop sweep: at each level requests arrive at ``rate`` per second
whatever the server does, with gamma-distributed gaps (``burstiness`` 1 = Poisson arrivals), at
most ``max_concurrency`` in flight — as ``vllm bench serve --request-rate R --burstiness B
--max-concurrency C`` sends them (``vllm/benchmarks/serve.py``, ``get_request``: gap ~
Gamma(shape=B, scale=1/(R·B)), mean 1/R; a rate of ``inf`` sends every request at once).

Per level:

1. **warm-up** — ``warmup_requests`` requests at concurrency ``C`` with a short output budget
   (``WARMUP_MAX_TOKENS``), not measured: CUDA graphs of the new batch size, connection set-up;
2. **window** — a ``/metrics`` snapshot of every endpoint, then requests until ``num_prompts``
   have been sent (or, with ``duration_s``, until that much time has passed: sending stops and the
   requests in flight finish), then a second snapshot. The window runs from the first send to the
   last answer; the server's counters are read over the same window.

Token counts come from each answer's ``usage``; where a server sends none, from the streamed
chunks (:func:`tokenplan.client.metrics.completion_tokens`, and the level says which:
``token_count_method``); without either, throughput in tokens is ``None``, not 0. TTFT and ITL
come from streaming. Workers go round-robin over the endpoints (worker ``i`` uses endpoint ``i mod n``).

A transport failure (connection refused or dropped) makes the sweep ask the endpoint for its
model list; if it does not answer, the sweep stops: the levels finished before are kept and
the stop reason is returned with them. A level whose first ``ALL_FAIL_AFTER`` answers are all
errors stops the sweep the same way (e.g. a server that refuses every request).
"""

from __future__ import annotations

import asyncio
import itertools
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tokenplan.bench.levels import LevelResult
from tokenplan.bench.server_info import WindowStats, poll_window, read_snapshot
from tokenplan.bench.workload import Workload
from tokenplan.client.openai import OpenAIClient, RequestFailed

WARMUP_MAX_TOKENS = 16
ALL_FAIL_AFTER = 10
HEALTH_DEADLINE_S = 5.0


@dataclass(frozen=True, slots=True)
class SweepSettings:
    """How each level runs.

    Attributes:
        concurrencies: the levels (requests in flight over all endpoints).
        num_prompts: measured requests per level (None with ``duration_s``; if both are None,
            ``default_requests(C)``).
        duration_s: measured time per level instead of a count (seconds).
        warmup_requests: warm-up requests per level (None = ``min(C, 32)``; 0 = none).
        deadline_s: limit on one request (seconds).
        stream: stream answers (needed for TTFT and ITL).
        ignore_eos: ask for exactly ``max_tokens`` (vLLM/SGLang ``ignore_eos``).
        temperature: sampling temperature.
        metrics_interval_s: how often ``/metrics`` is read during a window (seconds).
    """

    concurrencies: tuple[int, ...]
    num_prompts: int | None = None
    duration_s: float | None = None
    warmup_requests: int | None = None
    deadline_s: float = 600.0
    stream: bool = True
    ignore_eos: bool = True
    temperature: float = 0.0
    metrics_interval_s: float = 0.5
    request_rates: tuple[float, ...] | None = None  # open loop: one level per rate (requests/s)
    burstiness: float = 1.0  # gamma shape of the arrival gaps (1 = Poisson)
    max_concurrency: int | None = None  # open loop: most requests in flight (None = no limit)
    seed: int = 0  # arrival-gap RNG
    return_meta_info: bool = False  # SGLang: ask for meta_info (spec_verify_ct) on every answer


def default_open_loop_requests(rate: float) -> int:
    """Measured requests per open-loop level without ``num_prompts``: 10 s of arrivals, at least
    16 (a rate of ``inf``: 16)."""
    return 16 if math.isinf(rate) else max(16, math.ceil(10 * rate))


def arrival_gaps_s(rate: float, burstiness: float, count: int, seed: int) -> list[float]:
    """``count`` gaps between arrivals (seconds): Gamma(shape=burstiness, scale=1/(rate·burstiness)),
    mean ``1/rate``, coefficient of variation ``1/sqrt(burstiness)``; all 0 for ``rate`` = inf.

    Raises:
        ValueError: ``rate`` or ``burstiness`` not > 0.
    """
    if not rate > 0 or not burstiness > 0:
        raise ValueError(f"request rate {rate} and burstiness {burstiness} must be > 0")
    if math.isinf(rate):
        return [0.0] * count
    scale = 1.0 / rate / burstiness  # not 1 / (rate · burstiness): that overflows to a 0 scale at 1e308
    if not scale > 0:  # a mean gap below the smallest float: every request at once, as for inf
        return [0.0] * count
    rng = random.Random(seed)
    return [rng.gammavariate(burstiness, scale) for _ in range(count)]


def default_requests(concurrency: int) -> int:
    """Measured requests per level when neither a count nor a duration is given: 4 rounds of
    the level's concurrency, at least 16."""
    return max(4 * concurrency, 16)


@dataclass(slots=True)
class SweepResult:
    """Finished levels, and why the sweep stopped early (None when it ran every level)."""

    levels: list[LevelResult]
    stopped: str | None = None


class SweepStopped(Exception):
    """The server stopped answering (or refuses every request) during a level."""


class _Level:
    """Shared state of one level's workers."""

    def __init__(self, concurrency: int, quota: int | None, until_s: float | None):
        self.result = LevelResult(concurrency)
        self.counter = itertools.count()
        self.quota, self.until_s = quota, until_s
        self.stop: str | None = None
        self.first_send_s: float | None = None

    def next_index(self) -> int | None:
        if self.stop is not None:
            return None
        if self.until_s is not None and time.perf_counter() >= self.until_s:
            return None
        i = next(self.counter)
        return i if self.quota is None or i < self.quota else None


class Sweep:
    """Runs the levels of ``settings`` against ``clients`` (one per endpoint) with ``workload``.

    Args:
        clients: one :class:`OpenAIClient` per endpoint, each sized for the largest level.
        urls: the endpoints' base URLs (for ``/metrics``), in the order of ``clients``.
        model: the served model name.
        workload: prompts, used round-robin.
        settings: the sweep.
        metrics: read ``/metrics`` (False when the servers have none).
        api_key: sent as ``Authorization: Bearer`` to ``/metrics`` (the clients carry their own).
    """

    def __init__(
        self,
        clients: Sequence[OpenAIClient],
        urls: Sequence[str],
        model: str,
        workload: Workload,
        settings: SweepSettings,
        metrics: bool = True,
        api_key: str | None = None,
    ):
        self.clients, self.urls, self.model, self.api_key = list(clients), list(urls), model, api_key
        self.workload, self.settings, self.metrics = workload, settings, metrics
        self._health_lock = asyncio.Lock()
        self._prompt_cursor = itertools.count()

    def body(self, max_tokens: int | None = None) -> dict[str, Any]:
        """The next request body (prompts round-robin across the whole sweep)."""
        prompt = self.workload.prompts[next(self._prompt_cursor) % len(self.workload.prompts)]
        body: dict[str, Any] = {
            "model": self.model,
            "messages": list(prompt.messages),
            "max_tokens": min(prompt.max_tokens, max_tokens or prompt.max_tokens),
            "temperature": self.settings.temperature,
        }
        if self.settings.ignore_eos and self.workload.ignore_eos:
            body["ignore_eos"] = True
        if self.settings.return_meta_info:
            body["return_meta_info"] = True
        return body

    async def run(self, on_level: Callable[[LevelResult], None] | None = None) -> SweepResult:
        """Every level in order; stops early (keeping finished levels) when the server fails."""
        done: list[LevelResult] = []
        s = self.settings
        plan: list[tuple[int, float | None]] = [(c, None) for c in s.concurrencies]
        if s.request_rates is not None:
            plan = [(s.max_concurrency or 0, rate) for rate in s.request_rates]
        for concurrency, rate in plan:
            try:
                level = await self.level(concurrency, rate)
            except SweepStopped as exc:
                return SweepResult(done, str(exc))
            done.append(level)
            if on_level is not None:
                on_level(level)
        return SweepResult(done)

    async def level(self, concurrency: int, rate: float | None = None) -> LevelResult:
        """Warm up, then measure one level: closed loop at ``concurrency``, or open loop at
        ``rate`` requests/s with at most ``concurrency`` in flight (0 = no limit). Raises
        :class:`SweepStopped`."""
        s = self.settings
        if rate is None:
            quota = None if s.duration_s is not None else (s.num_prompts or default_requests(concurrency))
        else:
            quota = s.num_prompts or default_open_loop_requests(rate)
        warm_c = concurrency or min(quota or 32, 32)
        warmup = min(warm_c, 32) if s.warmup_requests is None else s.warmup_requests
        if warmup:
            await self._run_workers(_Level(warm_c, warmup, None), warm_c, WARMUP_MAX_TOKENS)
        state = _Level(concurrency or (quota or 0), quota, None)
        result = state.result
        result.request_rate = rate
        result.max_concurrency = concurrency if rate is None or concurrency else None
        stop_polling = asyncio.Event()
        pollers = await self._start_polling(result, stop_polling)
        result.start_wall_s = time.time()
        start_s = time.perf_counter()
        if s.duration_s is not None:
            state.until_s = start_s + s.duration_s
        try:
            if rate is None:
                await self._run_workers(state, concurrency, None)
            else:
                await self._run_open_loop(state, rate, concurrency or None)
        finally:
            stop_polling.set()
            await asyncio.gather(*pollers, return_exceptions=True)
        end_s = time.perf_counter()
        result.end_wall_s = time.time()
        first = state.first_send_s if state.first_send_s is not None else start_s
        last = max((c.timings.done_s for c in result.completions), default=end_s)
        result.duration_s = max(last - first, 1e-9)
        for url, stats in result.server.items():
            stats.end = await read_snapshot(url, api_key=self.api_key)
        if state.stop is not None:
            raise SweepStopped(state.stop)
        return result

    async def _start_polling(self, result: LevelResult, stop: asyncio.Event) -> list[asyncio.Task[None]]:
        """With ``metrics``: a first ``/metrics`` snapshot of every endpoint into ``result.server``,
        and a poller per endpoint that answered, running until ``stop`` is set."""
        pollers: list[asyncio.Task[None]] = []
        if not self.metrics:
            return pollers
        starts = await asyncio.gather(*(read_snapshot(u, api_key=self.api_key) for u in self.urls))
        for url, snap in zip(self.urls, starts):
            if snap is not None:
                result.server[url] = WindowStats(snap)
                pollers.append(
                    asyncio.create_task(
                        poll_window(url, result.server[url], stop, self.settings.metrics_interval_s, self.api_key)
                    )
                )
        return pollers

    async def _run_open_loop(self, state: _Level, rate: float, limit: int | None) -> None:
        """Send ``state.quota`` requests (or until ``duration_s``) at gamma-distributed gaps; at
        most ``limit`` in flight (a request due while ``limit`` are in flight waits for a slot)."""
        gaps = arrival_gaps_s(rate, self.settings.burstiness, state.quota or 100_000, self.settings.seed)
        slots = asyncio.Semaphore(limit) if limit else None
        tasks: list[asyncio.Task[None]] = []
        for gap in gaps:
            if tasks and gap > 0:
                await asyncio.sleep(gap)
            index = state.next_index()
            if index is None:
                break
            if slots is not None:
                await slots.acquire()
            tasks.append(asyncio.create_task(self._send_one(state, index, slots)))
        await asyncio.gather(*tasks)

    async def _send_one(self, state: _Level, index: int, slots: asyncio.Semaphore | None) -> None:
        client, url = self.clients[index % len(self.clients)], self.urls[index % len(self.urls)]
        try:
            await self._request(state, client, url, None)
        finally:
            if slots is not None:
                slots.release()

    async def _request(self, state: _Level, client: OpenAIClient, url: str, max_tokens: int | None) -> None:
        """Send one request and record its completion or failure in ``state``."""
        result = state.result
        body = self.body(max_tokens)
        if state.first_send_s is None:
            state.first_send_s = time.perf_counter()
        try:
            completion = await client.chat(body, deadline_s=self.settings.deadline_s, stream=self.settings.stream)
        except RequestFailed as failure:
            result.errors += 1
            if len(result.error_samples) < 5:
                result.error_samples.append(str(failure))
            await self._judge_failure(state, client, url, failure)
            return
        result.completions.append(completion)

    async def _run_workers(self, state: _Level, concurrency: int, max_tokens: int | None) -> None:
        workers = [asyncio.create_task(self._worker(state, i, max_tokens)) for i in range(concurrency)]
        await asyncio.gather(*workers)

    async def _worker(self, state: _Level, index: int, max_tokens: int | None) -> None:
        client = self.clients[index % len(self.clients)]
        url = self.urls[index % len(self.urls)]
        while state.next_index() is not None:
            await self._request(state, client, url, max_tokens)

    async def _judge_failure(self, state: _Level, client: OpenAIClient, url: str, failure: RequestFailed) -> None:
        result = state.result
        if not result.completions and result.errors >= ALL_FAIL_AFTER and state.stop is None:
            state.stop = (
                f"every request failed at concurrency {state.result.concurrency} "
                f"({result.errors} errors; last: {failure})"
            )
            return
        if failure.kind != "transport" or state.stop is not None:
            return
        async with self._health_lock:
            if state.stop is not None:
                return
            try:
                await client.models(deadline_s=HEALTH_DEADLINE_S)
            except RequestFailed as health:
                state.stop = (
                    f"{client.base_url} stopped answering during concurrency {state.result.concurrency} "
                    f"({failure}; health check: {health})"
                )
