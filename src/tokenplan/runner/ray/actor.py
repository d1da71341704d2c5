"""One worker of ``generate --backend ray``: the local backend's per-unit logic over a share of the endpoints.

:class:`GenerateActor` is a plain class; the driver (:mod:`tokenplan.runner.ray.driver`) wraps it
with ``ray.remote`` so this module never imports Ray. Each actor:

- owns an :class:`~tokenplan.client.endpoints.EndpointPool` over its share of the endpoints (same
  retries, ejection and probing as the local backend);
- runs every unit it is given through :meth:`Dispatcher.process` — the very code the local
  backend runs — as soon as a slot frees, so no batch waits for its slowest row;
- writes each stored record the moment it arrives to its own shards
  ``shards/part-<epoch>-<actor>-NNNNN.jsonl`` (same record format), each write under the run's
  :class:`~tokenplan.runner.store.fencing.Fence`; an actor whose epoch has ended stops;
- hands skipped and failed units (and the ids it stored, tokens, latencies, endpoint health) to
  the driver through :meth:`poll`; the driver writes ``skipped.jsonl`` and ``errors.jsonl``;
- logs each 400/413/422 refusal, and the answers that bear on it, in a
  :class:`~tokenplan.runner.refusals.RefusalLog` for the driver, which judges over every actor
  whether the rows or the job are refused (a server that refuses every request ends the run with
  a configuration error, as the local backend does, rather than skip every row).
"""

from __future__ import annotations

import asyncio
import os
import time
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokenplan.client.endpoints import EndpointPool, PoolSettings
from tokenplan.errors import EndpointsUnanswering, ServerError
from tokenplan.runner.dispatch import Dispatcher
from tokenplan.runner.progress import Progress
from tokenplan.runner.refusals import RefusalLog
from tokenplan.runner.requests import WorkUnit
from tokenplan.runner.spec import JobSettings
from tokenplan.runner.store.appendlog import ShardLog
from tokenplan.runner.store.fencing import Fence, Fenced, actor_prefix
from tokenplan.runner.store.record import OutputRecord


@dataclass(frozen=True, slots=True)
class ActorConfig:
    """What one actor needs (pickled to it by Ray).

    Attributes:
        run_dir: the run directory (a shared file system on a multi-node cluster).
        epoch, actor: this run's epoch and the actor's index (they name its shards).
        endpoints: its share of the endpoints; pool: their settings (concurrency is this actor's share).
        job: how each unit is generated (same as the local backend).
        api_key: sent as the bearer token; None for servers that need none.
        shard_max_bytes: shard rotation size (bytes).
    """

    run_dir: Path
    epoch: int
    actor: int
    endpoints: tuple[str, ...]
    pool: PoolSettings
    job: JobSettings
    api_key: str | None
    shard_max_bytes: int


@dataclass(slots=True)
class Report:
    """What an actor finished since its last report, and its state now."""

    actor: int
    pid: int
    stored: list[str] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)
    output_tokens: int = 0
    latency_s: list[float] = field(default_factory=list)
    ttft_s: list[float] = field(default_factory=list)
    completion_tokens: list[int] = field(default_factory=list)
    in_flight: dict[str, int] = field(default_factory=dict)
    healthy: list[str] = field(default_factory=list)
    fenced: bool = False
    fatal: str | None = None  # why the run must end (a 401/403/404 answer, every endpoint down, a bug)
    cpu_s: float = 0.0  # the actor process's CPU time since it started taking units (user + system, s)
    # the fatal error is "every endpoint of this actor down for max_all_down_s" (or answering none)
    all_down: bool = False
    refusals: list[tuple[str, Any]] = field(default_factory=list)  # RefusalLog events, oldest first
    served: dict[str, list[int]] = field(default_factory=dict)  # URL → requests answered, failed since the last report


class FencedSink:
    """The run-directory side of :class:`Dispatcher` inside an actor (``write_done``,
    ``write_skipped``, ``write_error``): stored records go to this actor's fenced shards,
    skipped and failed units to the outbox the driver collects."""

    def __init__(self, config: ActorConfig):
        self.fence = Fence(config.run_dir, config.epoch)
        self.shards = ShardLog(
            config.run_dir / "shards", config.shard_max_bytes, actor_prefix(config.epoch, config.actor)
        )
        self.stored: list[str] = []
        self.skipped: list[dict[str, Any]] = []
        self.errors: list[dict[str, Any]] = []

    def write_done(self, record: OutputRecord) -> None:
        """Append one record while this epoch is current.

        Raises:
            Fenced: a newer run owns the directory; nothing was written.
        """
        with self.fence.holding():
            self.shards.append(record.to_json())
        self.stored.append(record.id)

    def write_skipped(self, record: dict[str, Any]) -> None:
        self.skipped.append(record)

    def write_error(self, record: dict[str, Any]) -> None:
        self.errors.append(record)

    def close(self) -> None:
        self.shards.close()
        self.fence.close()


class GenerateActor:
    """The actor (see the module docstring). Methods are coroutines: Ray runs them on the actor's
    event loop, beside the units in flight."""

    def __init__(self, config: ActorConfig):
        self.config = config
        self.sink = FencedSink(config)
        self._tokens_reported = 0
        self._arrays_reported = (0, 0, 0)
        self._served: dict[str, list[int]] = {}  # EndpointPool.served at the last report
        self._tasks: set[asyncio.Task[None]] = set()
        self._fenced = False

    async def start(self) -> tuple[str | None, list[str]]:
        """Check which endpoints serve the model and start taking units.

        Returns:
            (None, or why none of this actor's endpoints is ready (they stay ejected and probed,
            as in the local backend; the driver gives up only when every actor says so); one
            line per endpoint set aside, its URL and why, for the driver to say).
        """
        self.pool = EndpointPool(self.config.endpoints, self.config.pool, api_key=self.config.api_key)
        try:
            set_aside = await self.pool.check_health(self.config.job.model)
            problem = None
        except ServerError as down:
            problem, set_aside = str(down), down.problems
        self.progress = Progress(0.0, None, float(self.config.job.sampling.max_tokens))
        self.refusals = RefusalLog()
        self.dispatcher = Dispatcher(
            self.config.job,
            self.pool,
            self.sink,  # type: ignore[arg-type]
            self.progress,
            refusals=self.refusals,
        )
        self._queue: asyncio.Queue[WorkUnit] = asyncio.Queue()
        self._changed = asyncio.Event()
        self._loop_task = asyncio.create_task(self._loop())
        self._cpu0_s = time.process_time()
        return problem, set_aside

    async def submit(self, units: list[WorkUnit]) -> None:
        """Queue ``units``; each starts as soon as a slot is free."""
        for unit in units:
            self._queue.put_nowait(unit)

    async def poll(self, wait_s: float) -> Report:
        """What finished since the last poll; waits up to ``wait_s`` seconds for something to."""
        if not self._has_news():
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), wait_s)
            except asyncio.TimeoutError:
                pass
        return self._report()

    async def finish(self, grace_s: float) -> Report:
        """Stop taking units, give those in flight ``grace_s`` seconds, close the shards; the last report."""
        self._loop_task.cancel()
        await self.dispatcher.cancel_controls()  # a control request out decides nothing now
        if self._tasks:
            _, pending = await asyncio.wait(set(self._tasks), timeout=grace_s)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        self.sink.close()
        await self.pool.aclose()
        return self._report()

    async def _loop(self) -> None:
        while not self.fenced and self.dispatcher.fatal is None:
            unit = await self._queue.get()
            await self.pool.admit()  # the pool's one limit: this actor's share of the concurrency
            task = asyncio.create_task(self._run(unit))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _run(self, unit: WorkUnit) -> None:
        try:
            if not self.fenced:
                await self.dispatcher.process(unit)
        except Fenced:
            self._fenced = True
            self._loop_task.cancel()
        finally:
            self.pool.release()
            self._changed.set()

    @property
    def fenced(self) -> bool:
        # Fenced reaches here raised through process(), or kept as the dispatcher's fatal error
        # where the dispatcher catches every exception of a unit.
        return self._fenced or isinstance(self.dispatcher.fatal, Fenced)

    def _has_news(self) -> bool:
        sink = self.sink
        return bool(
            sink.stored or sink.skipped or sink.errors or self.refusals.events or self.fenced or self.dispatcher.fatal
        )

    def _report(self) -> Report:
        sink, tally = self.sink, self.dispatcher.tally
        lat, ttft, tok = self._arrays_reported
        fatal, now, before = self.dispatcher.fatal, self.pool.served(), self._served
        report = Report(
            self.config.actor,
            os.getpid(),
            sink.stored,
            sink.skipped,
            sink.errors,
            self.progress.output_tokens - self._tokens_reported,
            _tail(tally.latency_s, lat),
            _tail(tally.ttft_s, ttft),
            _tail(tally.completion_tokens, tok),
            self.pool.in_flight(),
            [e.base_url for e in self.pool.endpoints if not e.ejected],
            self.fenced,
            None if self.fenced else _fatal_text(fatal),
            time.process_time() - self._cpu0_s,
            isinstance(fatal, EndpointsUnanswering)
            or (isinstance(fatal, ServerError) and all(e.ejected for e in self.pool.endpoints)),
            self.refusals.take(),
            served={u: [a - before.get(u, [0, 0])[0], f - before.get(u, [0, 0])[1]] for u, (a, f) in now.items()},
        )
        self._served = now
        sink.stored, sink.skipped, sink.errors = [], [], []
        self._tokens_reported = self.progress.output_tokens
        self._arrays_reported = (len(tally.latency_s), len(tally.ttft_s), len(tally.completion_tokens))
        return report


def _fatal_text(fatal: BaseException | None) -> str | None:
    """A ServerError's own one-line message (as the local backend prints it); anything else typed."""
    if fatal is None:
        return None
    return str(fatal) if isinstance(fatal, ServerError) else f"{type(fatal).__name__}: {fatal}"


def _tail(values: array, start: int) -> list:
    return values[start:].tolist()
