"""The Ray driver's judge of 400/413 refusals: one :class:`~tokenplan.runner.refusals.RefusalStreak`
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
from collections.abc import Callable
from typing import Any

from tokenplan.client.auth import display_url
from tokenplan.client.openai import OpenAIClient
from tokenplan.runner.dispatch import control_request
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
    """

    def __init__(
        self,
        job: JobSettings,
        endpoints: list[str],
        api_key: str | None,
        write_skipped: Callable[[dict[str, Any]], None],
        write_error: Callable[[dict[str, Any]], None],
    ):
        self.job, self.endpoints, self.api_key = job, endpoints, api_key
        self.write_skipped, self.write_error = write_skipped, write_error
        self.streak = RefusalStreak(control=True)

    def take(self, events: list[tuple[str, Any]]) -> str | None:
        """One actor report's events, in order; return the job-wide refusal's one-line message once
        there is one (else None)."""
        for held in replay(self.streak, events):
            self.write_skipped(held.skipped_record())
        for shown in self.streak.take_controls():  # a streak before any answer: ask that endpoint
            self.streak.control_answered(shown, self._control(shown))
        return self._verdict()

    def settle(self, finished: bool, rows: int) -> str | None:
        """The run ended. ``finished``: every unit was settled and nothing stopped it, so the held
        refusals are judged by the end-of-run rule (``rows``: the job's rows, done ones included);
        otherwise they are not judged. Units still held go to ``errors.jsonl``. Returns the
        job-wide message if the end-of-run rule found one."""
        if not self.streak.held:
            return None
        message = None
        if finished:
            for held in self.streak.settle(rows):
                self.write_skipped(held.skipped_record())
            message = self._verdict()
        for held in self.streak.take_held():
            self.write_error(held.error_record())
        return message

    def _verdict(self) -> str | None:
        if self.streak.job_wide is None:
            return None
        return self.streak.message(self.job.model, len(self.endpoints))

    def _control(self, shown: str) -> bool:
        """The control request to the endpoint shown as ``shown`` (its URL as records show it), sent
        from the driver while the actors carry on with the units they hold."""
        url = next((u for u in self.endpoints if display_url(u) == shown), None)
        if url is None:
            return False

        async def ask() -> bool:
            async with OpenAIClient(url, max_connections=1, api_key=self.api_key) as client:
                return await control_request(client, self.job)

        return asyncio.run(ask())


def refused_ids(events: list[tuple[str, Any]]) -> list[str]:
    """The unit ids an actor's events report refused (settled for that actor: held by the judge)."""
    return [value.unit_id for kind, value in events if kind == "refused" and isinstance(value, Held)]
