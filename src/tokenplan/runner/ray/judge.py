"""The Ray driver's judge of 400/413/422 refusals: one :class:`~tokenplan.runner.refusals.RefusalStreak`
over every actor, as the local backend keeps one over its requests.

Each actor logs its refusals and the answers that bear on them, in order
(:class:`~tokenplan.runner.refusals.RefusalLog`); the driver hands each report's events here.
Units released as the rows' own refusals are written as skipped; a streak before any answer
sends the endpoint the control request from the driver (:func:`~tokenplan.runner.dispatch.control_request`);
a job-wide verdict is returned as the run's fatal message, and the units still held go to
``errors.jsonl`` at the end (sent again by the next run).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

from tokenplan.client.auth import display_url
from tokenplan.client.openai import OpenAIClient
from tokenplan.runner.control import control_request
from tokenplan.runner.refusals import Held, RefusalStreak, replay
from tokenplan.runner.spec import JobSettings


class RefusalJudge:
    """Refusals over every actor (see the module docstring).

    Args:
        job: the job (its model names the refusal; its settings go into the control request).
        endpoints: every endpoint URL of the run, as given (credentials included: the control
            request is sent with them).
        api_key: sent as the bearer token; None for servers that need none.
        write_skipped: writes one line of ``skipped.jsonl`` (the driver's fenced write).
        write_error: writes one line of ``errors.jsonl``.
        stop: set on SIGINT/SIGTERM: a control request under way is given up (a Ctrl-C does not
            wait out its deadline).
    """

    def __init__(
        self,
        job: JobSettings,
        endpoints: list[str],
        api_key: str | None,
        write_skipped: Callable[[dict[str, Any]], None],
        write_error: Callable[[dict[str, Any]], None],
        stop: threading.Event | None = None,
    ):
        self.job, self.endpoints, self.api_key = job, endpoints, api_key
        self.write_skipped, self.write_error = write_skipped, write_error
        self.stop = stop or threading.Event()
        self.streak = RefusalStreak(control=True)

    def take(self, events: list[tuple[str, Any]]) -> str | None:
        """One actor report's events, in order; return the job-wide refusal's one-line message once
        there is one (else None)."""
        for held in replay(self.streak, events):
            self.write_skipped(held.skipped_record())
        for shown in self.streak.take_controls():  # a streak before any answer: ask that endpoint
            self._ask(shown)
        return self._verdict()

    def settle(self, finished: bool, rows: int, done_before: int = 0) -> str | None:
        """The run ended. ``finished``: every unit was settled and nothing stopped it, so the held
        refusals are judged by the end-of-run rule (``RefusalStreak.settle``: ``rows`` the job's
        rows, done ones included, ``done_before`` the units an earlier run finished), after a
        control request to each endpoint holding refusals without one; otherwise they are not
        judged. Units still held go to ``errors.jsonl``. Returns the job-wide message if the
        end-of-run rule found one."""
        if not self.streak.held:
            return None
        message = None
        if finished:
            for shown in self.streak.to_control_at_end():
                self._ask(shown)
            for held in self.streak.settle(rows, done_before):
                self.write_skipped(held.skipped_record())
            message = self._verdict()
        for held in self.streak.take_held():
            self.write_error(held.error_record())
        return message

    def _verdict(self) -> str | None:
        if self.streak.job_wide is None:
            return None
        return self.streak.message(self.job.model, len(self.endpoints))

    def _ask(self, shown: str) -> None:
        """Send the control request to the endpoint shown as ``shown`` (its URL as records show
        it) from the driver, while the actors carry on with the units they hold; a stop meanwhile
        gives it up, with no verdict (the held refusals go to ``errors.jsonl``)."""
        url = next((u for u in self.endpoints if display_url(u) == shown), None)
        if url is None:
            self.streak.control_answered(shown, None, "no such endpoint")
            return

        async def ask() -> tuple[bool | None, str] | None:
            async with OpenAIClient(url, max_connections=1, api_key=self.api_key) as client:
                task = asyncio.create_task(control_request(client, self.job))
                while not task.done():
                    if self.stop.is_set():
                        task.cancel()
                        return None
                    await asyncio.wait({task}, timeout=0.2)
                return task.result()

        outcome = asyncio.run(ask())
        if outcome is None:  # stopped: no verdict; the run's end writes the held units as errors
            self.streak.controlling.discard(shown)
            return
        self.streak.control_answered(shown, *outcome)


def refused_ids(events: list[tuple[str, Any]]) -> list[str]:
    """The unit ids an actor's events report refused (settled for that actor: held by the judge)."""
    return [value.unit_id for kind, value in events if kind == "refused" and isinstance(value, Held)]
