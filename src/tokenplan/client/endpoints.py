"""A pool of OpenAI-compatible endpoints: least outstanding requests, health check, eject, probe back.

Each endpoint holds at most ``concurrency_per_endpoint`` requests; :meth:`EndpointPool.lease`
waits for the healthy endpoint with the fewest outstanding requests. The same number bounds the
work in flight: :meth:`EndpointPool.admit` lets at most ``concurrency_per_endpoint`` × endpoints
units (each a sequence of requests, one lease at a time) run at once, so a caller starts a unit
only when the pool can take it and never sizes a limit of its own. An endpoint whose requests
fail ``eject_after_failures`` times in a row (transport errors, deadlines, 5xx, malformed
answers; not 429, which is back-pressure, nor an answer a filter withheld or left empty, which
can be one row's own) is taken out and probed with ``GET /models`` every ``probe_interval_s``
until it answers, then put back. When every endpoint has been out for ``max_all_down_s`` the pool gives
up with :class:`~tokenplan.errors.ServerError`, so a dead fleet ends the run (resumably) instead of
hanging it. A server can also answer its probe and no chat request (it lists the model while its
engine drops or hangs every request): put back, it is taken out again. When every endpoint has
been put back ``max_futile_readmissions`` times in a row and failed again with no answer at all
(transport failures, deadlines; a 5xx is the runner's to judge), or is out having answered nothing
since it was last put back (a wrong port beside it), the pool gives up with
:class:`~tokenplan.errors.EndpointsUnanswering`. A restart does not count: the probe fails while
the server is down, and once it is back its requests are answered.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

from tokenplan.client.openai import OpenAIClient, RequestFailed
from tokenplan.client.stall import StallWatch
from tokenplan.errors import EndpointsUnanswering, ServerError

# Failures with no answer at all: what a readmitted endpoint that answers none of its requests
# shows (its engine drops or hangs them) and what the runner's row rule leaves to the pool.
SILENT = ("transport", "deadline")


@dataclass(slots=True, eq=False)
class Endpoint:
    """One server and its live counters."""

    base_url: str
    client: OpenAIClient
    outstanding: int = 0
    consecutive_failures: int = 0
    ejected: bool = False
    last_failure: str | None = None
    completed: int = 0
    failures: int = 0
    readmitted_at_completed: int | None = None  # ``completed`` when a probe last put it back
    futile_readmissions: int = 0  # put back, then taken out again with nothing answered, in a row
    last_kind: str = ""  # the kind of the last failure that counts toward ejection (transport, deadline…)
    last_heard_s: float = field(default_factory=time.monotonic)  # its last answer or failure (client.stall)
    calls: set[asyncio.Task] = field(default_factory=set)  # tasks awaiting a request to it (StallWatch.guard)
    abandoned: set[asyncio.Task] = field(default_factory=set)  # of those, the ones a stall probe freed


@dataclass(frozen=True, slots=True)
class PoolSettings:
    """Pool behaviour.

    Attributes:
        concurrency_per_endpoint: requests in flight per endpoint (also its connection pool size).
        eject_after_failures: consecutive failures that take an endpoint out.
        probe_interval_s: wait between health probes of an ejected endpoint (seconds).
        max_all_down_s: how long every endpoint may be out before the pool gives up (seconds).
        health_deadline_s: limit on one health check (seconds).
        max_futile_readmissions: times in a row every endpoint may be put back by its probe and
            taken out again with no request answered before the pool gives up.
        stall_probe_after_s: seconds an endpoint with requests in flight may answer nothing before
            it is probed, and taken out with its requests sent again where the probe fails too
            (:mod:`tokenplan.client.stall`).
    """

    concurrency_per_endpoint: int
    eject_after_failures: int = 5
    probe_interval_s: float = 5.0
    max_all_down_s: float = 600.0
    health_deadline_s: float = 10.0
    max_futile_readmissions: int = 3
    stall_probe_after_s: float = 120.0


@dataclass(slots=True)
class _State:
    all_down_since_s: float | None = None
    model: str | None = None
    probe_tasks: dict[int, asyncio.Task[None]] = field(default_factory=dict)  # id(endpoint) → its probe


class EndpointPool:
    """Least-outstanding-requests balancing over ``base_urls``.

    Args:
        base_urls: API roots, e.g. ``["http://a:8000/v1", "http://b:8000/v1"]``.
        settings: concurrency, eject and probe behaviour.
        api_key: sent to every endpoint; never logged.
    """

    def __init__(self, base_urls: Sequence[str], settings: PoolSettings, *, api_key: str | None = None):
        self.settings = settings
        clients = [
            OpenAIClient(url, max_connections=settings.concurrency_per_endpoint, api_key=api_key) for url in base_urls
        ]
        # base_url: credentials removed, query values masked (OpenAIClient.base_url): it is
        # printed and stored in every record's turns.
        self.endpoints = [Endpoint(client.base_url, client) for client in clients]
        # The one concurrency limit, seen from the caller's side: units admitted at once.
        self._admitted = asyncio.Semaphore(settings.concurrency_per_endpoint * len(self.endpoints))
        self._changed = asyncio.Condition()
        self._state = _State()
        self._stall = StallWatch(self.endpoints, settings.stall_probe_after_s, settings.health_deadline_s, self._eject)
        self.guard = self._stall.guard  # a request to a leased endpoint, freed where the endpoint stalls

    async def aclose(self) -> None:
        """Stop the probes and close every connection."""
        self._stall.close()
        for task in self._state.probe_tasks.values():
            task.cancel()
        for endpoint in self.endpoints:
            await endpoint.client.aclose()

    async def check_health(self, model: str) -> list[str]:
        """Ask every endpoint for its models; eject those that fail, keep the rest.

        Returns:
            One line per endpoint set aside (its URL and why): the caller says so, since the run
            goes on without it until a probe finds it serving ``model``.

        Raises:
            ServerError: no endpoint answers, or none serves ``model``.
        """
        self._state.model = model
        answers = await asyncio.gather(
            *(e.client.models(deadline_s=self.settings.health_deadline_s) for e in self.endpoints),
            return_exceptions=True,
        )
        problems = []
        for endpoint, answer in zip(self.endpoints, answers):
            if isinstance(answer, RequestFailed):
                said = answer.detail if answer.redirect else f"({answer}{v1_hint(endpoint.base_url, answer)})"
                problems.append(f"{endpoint.base_url} {said}")
                self._eject(endpoint, str(answer))
            elif isinstance(answer, BaseException):
                raise answer
            elif model not in answer:
                problems.append(f"{endpoint.base_url} (serves {', '.join(answer) or 'no model'})")
                self._eject(endpoint, f"does not serve {model!r}")
        if all(e.ejected for e in self.endpoints):
            raise ServerError(f"no endpoint is ready for model {model!r}: {'; '.join(problems)}", problems)
        return problems

    async def admit(self, stop: asyncio.Event | None = None) -> bool:
        """Wait until the pool can take one more unit of work (``concurrency_per_endpoint`` ×
        endpoints at once); pair each True with one :meth:`release`.

        ``stop`` set before a slot frees ends the wait: False, nothing taken. Every slot can be held
        for a long time (answers that take minutes, units waiting for an ejected endpoint), and a
        Ctrl-C waited for one of them before its grace began (a break-it pass: 600 s).
        """
        if stop is None or not self._admitted.locked():  # a free slot is taken without waiting
            await self._admitted.acquire()
        else:
            acquiring = asyncio.ensure_future(self._admitted.acquire())
            stopping = asyncio.ensure_future(stop.wait())
            try:
                await asyncio.wait((acquiring, stopping), return_when=asyncio.FIRST_COMPLETED)
            finally:
                stopping.cancel()
                if not acquiring.done():
                    acquiring.cancel()  # a slot handed to it meanwhile goes back (Semaphore.acquire)
                    await asyncio.wait((acquiring,))
            if acquiring.cancelled():
                return False
            acquiring.result()
        if stop is not None and stop.is_set():
            self.release()
            return False
        return True

    def release(self) -> None:
        """Give back one :meth:`admit`."""
        self._admitted.release()

    @contextlib.asynccontextmanager
    async def lease(self) -> AsyncIterator[Endpoint]:
        """Hold a slot on the healthy endpoint with the fewest outstanding requests.

        Raises:
            ServerError: every endpoint has been ejected for ``max_all_down_s``.
        """
        self._stall.start()
        endpoint = await self._acquire()
        try:
            yield endpoint
        finally:
            endpoint.outstanding -= 1
            async with self._changed:
                self._changed.notify(1)

    def record(self, endpoint: Endpoint, failure: RequestFailed | None) -> None:
        """Count one request's outcome; eject ``endpoint`` after too many failures in a row."""
        endpoint.last_heard_s = time.monotonic()
        if failure is None:
            endpoint.completed += 1
            endpoint.consecutive_failures = endpoint.futile_readmissions = 0
            return
        endpoint.failures += 1
        if (
            failure.kind == "oversize"
            or (failure.kind == "status" and failure.status is not None and failure.status < 500)
            or (failure.kind == "protocol" and not failure.malformed)
        ):
            # 429 is back-pressure; other 4xx, an over-size answer and an unfinished one (a
            # content filter, an empty answer: a row's own prompt can get it, and the runner's
            # control request judges it, runner.unanswered) concern the request
            return
        endpoint.consecutive_failures += 1
        endpoint.last_failure, endpoint.last_kind = str(failure), failure.kind
        if endpoint.consecutive_failures >= self.settings.eject_after_failures and not endpoint.ejected:
            self._eject(endpoint, str(failure))

    def unanswering(self) -> list[str]:
        """One line per endpoint that answered none of its requests (every one failed: a server
        that lists the model but fails each chat request, ejected and probed back in turn) while
        another endpoint answered: the run went on at a fraction of its capacity. Empty where no
        endpoint answered (the run's own stop says why) or every one did."""
        if not any(e.completed for e in self.endpoints):
            return []
        return [
            f"{e.base_url} ({e.failures:,} requests failed; the last: {e.last_failure})"
            for e in self.endpoints
            if e.failures and not e.completed
        ]

    def in_flight(self) -> dict[str, int]:
        """Outstanding requests per endpoint URL (as printed: endpoints that print alike are summed)."""
        counts: dict[str, int] = {}
        for e in self.endpoints:
            counts[e.base_url] = counts.get(e.base_url, 0) + e.outstanding
        return counts

    def served(self) -> dict[str, list[int]]:
        """Requests answered and failed so far per endpoint URL (as printed: endpoints that print
        alike are summed), ``{url: [answered, failed]}``; a failure counts each attempt."""
        out: dict[str, list[int]] = {}
        for e in self.endpoints:
            counts = out.setdefault(e.base_url, [0, 0])
            counts[0] += e.completed
            counts[1] += e.failures
        return out

    def healthy_count(self) -> int:
        """Endpoints currently taking requests."""
        return sum(not e.ejected for e in self.endpoints)

    async def _acquire(self) -> Endpoint:
        cap = self.settings.concurrency_per_endpoint
        async with self._changed:
            while True:
                ready = [e for e in self.endpoints if not e.ejected and e.outstanding < cap]
                if ready:
                    self._check_futile()
                    endpoint = min(ready, key=lambda e: e.outstanding)
                    if not endpoint.outstanding:  # its quiet time counts from its first request in flight
                        endpoint.last_heard_s = time.monotonic()
                    endpoint.outstanding += 1
                    return endpoint
                self._check_all_down()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), self.settings.probe_interval_s)

    def _check_all_down(self) -> None:
        if not all(e.ejected for e in self.endpoints):
            self._state.all_down_since_s = None
            return
        now_s = time.monotonic()
        since_s = self._state.all_down_since_s = self._state.all_down_since_s or now_s
        if now_s - since_s >= self.settings.max_all_down_s:
            reasons = "; ".join(f"{e.base_url} ({e.last_failure})" for e in self.endpoints)
            raise ServerError(f"every endpoint has failed for {now_s - since_s:.0f} s: {reasons}")

    def _check_futile(self) -> None:
        # Given up on: every endpoint put back max_futile_readmissions times in a row with nothing
        # answered, or out with nothing answered at all (an endpoint that never answered, or
        # answered nothing since it was last put back: a typo'd port beside a dead-but-listing
        # one stopped nothing, and the rows spent their tries on the listing one). One that
        # answered before it went out (a restart) is waited for, as the all-down rule waits.
        limit = self.settings.max_futile_readmissions
        futile = [e for e in self.endpoints if e.futile_readmissions >= limit]
        out = [e for e in self.endpoints if e not in futile and self._out_unanswered(e)]
        if not futile or len(futile) + len(out) < len(self.endpoints):
            return
        reasons = "; ".join(
            [f"{e.base_url} ({e.last_failure})" for e in futile]
            + [f"{e.base_url} (out: {e.last_failure})" for e in out]
        )
        head = "every endpoint answers GET /models but no chat request: each was put back"
        if out:
            head = (
                f"no endpoint answers chat requests: {len(futile)} of {len(self.endpoints)} answer GET /models "
                f"and were each put back"
            )
        tail = f", the other {len(out)} out with nothing answered" if out else ""
        # Where each ran out of time, the server may only be slower than the run's deadline: said, or
        # "answers no chat request" reads as a dead engine
        slow = all(e.last_kind == "deadline" for e in futile)
        hint = " (every request ran past its deadline: if the server is only slow, raise --request-timeout)"
        raise EndpointsUnanswering(
            f"{head} {limit} times in a row and failed again with nothing answered{tail}: {reasons}"
            + (hint if slow else "")
        )

    @staticmethod
    def _out_unanswered(endpoint: Endpoint) -> bool:
        """Out (ejected, probed) having answered nothing since it was last put back, or since the
        start where it never was, its last failure without an answer (or none: set aside at the
        start); a 5xx is the runner's to judge."""
        since = endpoint.readmitted_at_completed or 0
        return endpoint.ejected and endpoint.completed == since and endpoint.last_kind in (*SILENT, "")

    def _eject(self, endpoint: Endpoint, reason: str) -> None:
        endpoint.ejected, endpoint.last_failure = True, reason
        # Keyed by the endpoint itself: two URLs that differ only in masked query values
        # (two keys for one server) print alike but are probed apart.
        if id(endpoint) not in self._state.probe_tasks:
            self._state.probe_tasks[id(endpoint)] = asyncio.create_task(self._probe(endpoint))

    async def _probe(self, endpoint: Endpoint) -> None:
        try:
            while endpoint.ejected:
                await asyncio.sleep(self.settings.probe_interval_s)
                try:
                    served = await endpoint.client.models(deadline_s=self.settings.health_deadline_s)
                except RequestFailed as failure:
                    endpoint.last_failure = str(failure)
                    continue
                if self._state.model is not None and self._state.model not in served:
                    continue
                # Nothing answered since it was last put back, and no answer came back at all (a
                # 5xx or a malformed answer to every row is the runner's 8-row rule's to judge,
                # with the server's own words: runner.unanswered)
                if endpoint.readmitted_at_completed == endpoint.completed and endpoint.last_kind in SILENT:
                    endpoint.futile_readmissions += 1
                endpoint.readmitted_at_completed = endpoint.completed
                endpoint.ejected, endpoint.consecutive_failures = False, 0
                endpoint.last_heard_s = time.monotonic()
                async with self._changed:
                    self._changed.notify_all()
        finally:
            self._state.probe_tasks.pop(id(endpoint), None)


def v1_hint(base_url: str, failure: RequestFailed) -> str:
    """Where ``GET /models`` answered 404 on a base URL whose path does not end in ``/v1``: the
    OpenAI-compatible servers (vLLM, SGLang, TensorRT-LLM, ``transformers serve``) serve it under
    ``/v1``, so that is most often the missing part."""
    path = base_url.partition("?")[0].rstrip("/")
    if failure.kind != "status" or failure.status != 404:
        return ""
    # a route given as the endpoint (…/v1/chat/completions, …/v1/models): the endpoint is the
    # API root before it; the hint had said "try --endpoint …/v1/chat/completions/v1" (a new-user pass)
    for route in _ROUTES:
        if path.endswith(route):
            root = path[: -len(route)]
            return f"; --endpoint is the API root, not a route: try --endpoint {root if root.endswith('/v1') else root + '/v1'}"
    if not path.endswith("/v1"):
        return f"; the API is usually under /v1: try --endpoint {path}/v1"
    return ""


# OpenAI-compatible routes a user may give in place of the API root (longest first)
_ROUTES = ("/chat/completions", "/completions", "/responses", "/embeddings", "/models")


def set_aside_warning(set_aside: Sequence[str], endpoints: int, model: str) -> str:
    """The warning for endpoints :meth:`EndpointPool.check_health` set aside (one line each, URL
    and why) out of ``endpoints``: the run goes on at a fraction of the capacity asked for."""
    return (
        f"{len(set_aside)} of {endpoints} endpoints not used until a probe finds them serving {model!r}: "
        f"{'; '.join(set_aside)}"
    )
