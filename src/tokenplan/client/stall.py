"""An endpoint that stops answering while requests wait on it: found by a probe, its requests freed.

A request's own deadline (``--request-timeout``, 120 s + max_tokens / 10: about 57 minutes at
32,768 tokens) is the only limit on an answer, since a long reasoning answer rightly takes that
long. A server that stops answering altogether (its process stopped or frozen, its host or the
network to it gone without closing the connections) then held every request sent to it for that
long, and the run's share on it with them. :class:`StallWatch` looks, every quarter of
``stall_probe_after_s``, for an endpoint with requests in flight that has answered nothing (no
answer, no failure) for ``stall_probe_after_s`` seconds, and asks it ``GET /models`` within
``health_deadline_s``. An OpenAI-compatible server answers that from its HTTP front end, busy or
not, so an endpoint that answers it is left alone (it may be working through long answers); one
that does not is taken out (the pool's probe puts it back once it answers) and its requests in
flight fail as ``transport`` failures, which the caller retries on another endpoint or later.

A stuck engine behind a live HTTP front end (vLLM lists its models from the API process) still
waits for the request deadline: nothing outside the engine tells it from a slow one.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

from tokenplan.client.answers import RequestFailed

if TYPE_CHECKING:
    from tokenplan.client.endpoints import Endpoint

T = TypeVar("T")


class StallWatch:
    """Probe endpoints that answer nothing while requests wait on them (module docstring).

    Args:
        endpoints: the pool's endpoints (their ``last_heard_s``, ``outstanding``, ``ejected``,
            ``calls`` and ``abandoned`` are read and kept here).
        after_s: seconds without an answer, requests in flight, before the probe (seconds).
        probe_deadline_s: limit on the probe (seconds).
        eject: the pool's ``(endpoint, reason)`` that takes an endpoint out and probes it back.
    """

    def __init__(
        self,
        endpoints: Sequence[Endpoint],
        after_s: float,
        probe_deadline_s: float,
        eject: Callable[[Endpoint, str], None],
    ):
        self.endpoints, self.after_s, self.probe_deadline_s, self._eject = endpoints, after_s, probe_deadline_s, eject
        self._task: asyncio.Task[None] | None = None
        # id(endpoint) → its probe now running (held here: the loop keeps only weak references to tasks)
        self._probing: dict[int, asyncio.Task[None]] = {}
        self._why: dict[int, str] = {}  # id(endpoint) → why its requests were last freed

    def start(self) -> None:
        """Start watching in the running loop (once; a pool is built before its loop runs)."""
        if self._task is None:
            self._task = asyncio.ensure_future(self._watch())

    def close(self) -> None:
        """Stop watching, and every probe still running."""
        if self._task is not None:
            self._task.cancel()
        for probe in self._probing.values():
            probe.cancel()

    async def guard(self, endpoint: Endpoint, call: Awaitable[T]) -> T:
        """Await ``call`` (a request to ``endpoint``); where the watch takes the endpoint out as
        stalled meanwhile, raise RequestFailed (``transport``) instead.

        The request's task is cancelled for that, and the cancellation is taken back
        (``Task.uncancel``), so the caller sees a failed request, not a cancelled run.
        """
        task = asyncio.current_task()
        assert task is not None  # awaited from a task: every request is
        endpoint.calls.add(task)
        try:
            return await call
        except asyncio.CancelledError:
            if task not in endpoint.abandoned:  # the run's own stop: passed on
                raise
            endpoint.abandoned.discard(task)
            if task.uncancel() > 0:  # the run was stopping it too: that cancellation stands
                raise
            why = self._why.get(id(endpoint), "it stopped answering")
            raise RequestFailed("transport", f"freed from a stalled endpoint: {why}") from None
        finally:
            endpoint.calls.discard(task)

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self.after_s / 4)
            now_s = time.monotonic()
            for endpoint in self.endpoints:
                quiet_s = now_s - endpoint.last_heard_s
                if endpoint.ejected or not endpoint.outstanding or quiet_s < self.after_s:
                    continue
                if id(endpoint) not in self._probing:
                    self._probing[id(endpoint)] = asyncio.ensure_future(self._probe(endpoint, quiet_s))

    async def _probe(self, endpoint: Endpoint, quiet_s: float) -> None:
        try:
            await endpoint.client.models(deadline_s=self.probe_deadline_s)
        except RequestFailed as failure:
            if endpoint.ejected or time.monotonic() - endpoint.last_heard_s < self.after_s:
                return  # taken out meanwhile, or it answered a request meanwhile
            waiting = list(endpoint.calls)
            why = self._why[id(endpoint)] = (
                f"answered nothing for {quiet_s:,.0f} s with {len(waiting):,} requests in flight, and "
                f"GET /models failed ({failure})"
            )
            self._eject(endpoint, f"{why}: its requests are sent again")
            for task in waiting:
                endpoint.abandoned.add(task)
                task.cancel()
        else:
            endpoint.last_heard_s = time.monotonic()  # its front end answers: slow, not gone
        finally:
            self._probing.pop(id(endpoint), None)
