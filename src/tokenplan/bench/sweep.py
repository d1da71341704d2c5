"""A concurrency sweep: at each level, ``C`` closed-loop workers keep ``C`` requests in flight.

Per level:

1. **warm-up** — ``warmup_requests`` requests at concurrency ``C`` with a short output budget
   (``WARMUP_MAX_TOKENS``), not measured: CUDA graphs of the new batch size, connection set-up;
2. **window** — a ``/metrics`` snapshot of every endpoint, then requests until ``num_prompts``
   have been sent (or, with ``duration_s``, until that much time has passed: sending stops and the
   requests in flight finish), then a second snapshot. The window runs from the first send to the
   last answer; the server's counters are read over the same window.

Token counts come from each answer's ``usage`` (never from counting chunks); TTFT and ITL come
from streaming. Workers go round-robin over the endpoints (worker ``i`` uses endpoint ``i mod n``).

A transport failure (connection refused or dropped) makes the sweep ask the endpoint for its
model list; if it does not answer, the sweep stops: the levels finished before are kept and
the stop reason is returned with them. A level whose first ``ALL_FAIL_AFTER`` answers are all
errors stops the sweep the same way (e.g. a server that refuses every request).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tokenplan.bench.server_info import WindowStats, poll_window, read_snapshot
from tokenplan.bench.workload import Workload
from tokenplan.client.metrics import Distribution, summarize
from tokenplan.client.openai import Completion, OpenAIClient, RequestFailed

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


def default_requests(concurrency: int) -> int:
    """Measured requests per level when neither a count nor a duration is given: 4 rounds of
    the level's concurrency, at least 16."""
    return max(4 * concurrency, 16)


@dataclass(slots=True)
class LevelResult:
    """One measured level.

    Attributes:
        concurrency: requests kept in flight.
        completions: answered requests.
        errors: failed requests; ``error_samples`` up to 5 of their messages.
        start_wall_s, end_wall_s: the window in ``time.time()`` seconds (for server-side counts).
        duration_s: first send to last answer (seconds).
        server: per endpoint URL, what its ``/metrics`` said over the window.
    """

    concurrency: int
    completions: list[Completion] = field(default_factory=list)
    errors: int = 0
    error_samples: list[str] = field(default_factory=list)
    start_wall_s: float = 0.0
    end_wall_s: float = 0.0
    duration_s: float = 0.0
    server: dict[str, WindowStats] = field(default_factory=dict)


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
    """

    def __init__(self, clients: Sequence[OpenAIClient], urls: Sequence[str], model: str, workload: Workload,
                 settings: SweepSettings, metrics: bool = True):
        self.clients, self.urls, self.model = list(clients), list(urls), model
        self.workload, self.settings, self.metrics = workload, settings, metrics
        self._health_lock = asyncio.Lock()
        self._prompt_cursor = itertools.count()

    def body(self, max_tokens: int | None = None) -> dict[str, Any]:
        """The next request body (prompts round-robin across the whole sweep)."""
        prompt = self.workload.prompts[next(self._prompt_cursor) % len(self.workload.prompts)]
        body: dict[str, Any] = {"model": self.model, "messages": list(prompt.messages),
                                "max_tokens": min(prompt.max_tokens, max_tokens or prompt.max_tokens),
                                "temperature": self.settings.temperature}
        if self.settings.ignore_eos and self.workload.ignore_eos:
            body["ignore_eos"] = True
        return body

    async def run(self, on_level: Callable[[LevelResult], None] | None = None) -> SweepResult:
        """Every level in order; stops early (keeping finished levels) when the server fails."""
        done: list[LevelResult] = []
        for concurrency in self.settings.concurrencies:
            try:
                level = await self.level(concurrency)
            except SweepStopped as exc:
                return SweepResult(done, str(exc))
            done.append(level)
            if on_level is not None:
                on_level(level)
        return SweepResult(done)

    async def level(self, concurrency: int) -> LevelResult:
        """Warm up, then measure one level. Raises :class:`SweepStopped`."""
        s = self.settings
        warmup = min(concurrency, 32) if s.warmup_requests is None else s.warmup_requests
        if warmup:
            await self._run_workers(_Level(concurrency, warmup, None), concurrency, WARMUP_MAX_TOKENS)
        quota = None if s.duration_s is not None else (s.num_prompts or default_requests(concurrency))
        state = _Level(concurrency, quota, None)
        result = state.result
        stop_polling = asyncio.Event()
        pollers = []
        if self.metrics:
            starts = await asyncio.gather(*(read_snapshot(u) for u in self.urls))
            for url, snap in zip(self.urls, starts):
                if snap is not None:
                    result.server[url] = WindowStats(snap)
                    pollers.append(asyncio.create_task(
                        poll_window(url, result.server[url], stop_polling, s.metrics_interval_s)))
        result.start_wall_s = time.time()
        start_s = time.perf_counter()
        if s.duration_s is not None:
            state.until_s = start_s + s.duration_s
        try:
            await self._run_workers(state, concurrency, None)
        finally:
            stop_polling.set()
            await asyncio.gather(*pollers, return_exceptions=True)
        end_s = time.perf_counter()
        result.end_wall_s = time.time()
        first = state.first_send_s if state.first_send_s is not None else start_s
        last = max((c.timings.done_s for c in result.completions), default=end_s)
        result.duration_s = max(last - first, 1e-9)
        for url, stats in result.server.items():
            stats.end = await read_snapshot(url)
        if state.stop is not None:
            raise SweepStopped(state.stop)
        return result

    async def _run_workers(self, state: _Level, concurrency: int, max_tokens: int | None) -> None:
        workers = [asyncio.create_task(self._worker(state, i, max_tokens)) for i in range(concurrency)]
        await asyncio.gather(*workers)

    async def _worker(self, state: _Level, index: int, max_tokens: int | None) -> None:
        client = self.clients[index % len(self.clients)]
        url = self.urls[index % len(self.urls)]
        result = state.result
        while state.next_index() is not None:
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
                continue
            result.completions.append(completion)

    async def _judge_failure(self, state: _Level, client: OpenAIClient, url: str, failure: RequestFailed) -> None:
        result = state.result
        if not result.completions and result.errors >= ALL_FAIL_AFTER and state.stop is None:
            state.stop = (f"every request failed at concurrency {state.result.concurrency} "
                          f"({result.errors} errors; last: {failure})")
            return
        if failure.kind != "transport" or state.stop is not None:
            return
        async with self._health_lock:
            if state.stop is not None:
                return
            try:
                await client.models(deadline_s=HEALTH_DEADLINE_S)
            except RequestFailed as health:
                state.stop = (f"{url} stopped answering during concurrency {state.result.concurrency} "
                              f"({failure}; health check: {health})")


def _dist_dict(d: Distribution | None) -> dict[str, float | None]:
    if d is None:
        return {"mean": None, "p50": None, "p90": None, "p99": None}
    return {"mean": d.mean_s, "p50": d.p50_s, "p90": d.p90_s, "p99": d.p99_s}


def combine_server(stats: dict[str, WindowStats]) -> dict | None:
    """Every endpoint's window stats added up: tokens, tok/s, running and waiting (sums over
    servers), KV usage (the highest), preemptions (sum). None without metrics."""
    if not stats:
        return None
    parts = [s.to_dict() for s in stats.values()]

    def total(key: str) -> float | None:
        values = [p[key] for p in parts if p[key] is not None]
        return sum(values) if values else None

    kv = [p["kv_usage_max"] for p in parts if p["kv_usage_max"] is not None]
    out = {key: total(key) for key in ("generation_tokens", "output_tok_s", "preemptions", "running_mean",
                                       "running_max", "waiting_mean", "waiting_max", "samples")}
    out["kv_usage_max"] = max(kv) if kv else None
    return out


def level_dict(level: LevelResult) -> dict[str, Any]:
    """One level in the bench JSON schema (seconds, tokens/s; latency dicts ``mean/p50/p90/p99``)."""
    completions = level.completions
    duration = level.duration_s
    out_tokens = sum(c.usage.completion_tokens for c in completions if c.usage)
    in_tokens = sum(c.usage.prompt_tokens for c in completions if c.usage)
    busy_s = sum(c.timings.latency_s for c in completions)
    lat = summarize(completions)
    n = len(completions)
    return {
        "concurrency": level.concurrency,
        "achieved_concurrency": busy_s / duration if n else 0.0,
        "requests": n, "errors": level.errors, "error_samples": list(level.error_samples),
        "duration_s": duration,
        "request_throughput_per_s": n / duration if n else 0.0,
        "output_tok_s": out_tokens / duration if n else 0.0,
        "total_tok_s": (out_tokens + in_tokens) / duration if n else 0.0,
        "output_tokens": out_tokens, "input_tokens": in_tokens,
        "mean_input_tokens": in_tokens / n if n else None, "mean_output_tokens": out_tokens / n if n else None,
        "window_start_unix_s": level.start_wall_s, "window_end_unix_s": level.end_wall_s,
        "ttft_s": _dist_dict(lat.ttft), "tpot_s": _dist_dict(lat.tpot), "itl_s": _dist_dict(lat.itl),
        "e2e_s": _dist_dict(lat.e2e),
        "server": combine_server(level.server),
    }
