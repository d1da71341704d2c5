"""StallWatch.guard: a request the stall probe frees fails as a transport failure; the run's own
cancellation stays a cancellation, also when both come at once."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest

from tokenplan.client.answers import RequestFailed
from tokenplan.client.stall import StallWatch


@dataclass(eq=False)
class _Endpoint:
    calls: set = field(default_factory=set)
    abandoned: set = field(default_factory=set)


def _watch() -> StallWatch:
    return StallWatch([], after_s=120.0, probe_deadline_s=10.0, eject=lambda endpoint, reason: None)


async def _started(endpoint: _Endpoint) -> tuple[asyncio.Task, asyncio.Event]:
    never = asyncio.Event()
    task = asyncio.ensure_future(_watch().guard(endpoint, never.wait()))
    while not endpoint.calls:  # the request is in flight once the guard holds its task
        await asyncio.sleep(0)
    return task, never


def test_a_request_the_probe_frees_fails_as_a_transport_failure() -> None:
    async def scenario() -> RequestFailed:
        endpoint = _Endpoint()
        task, _ = await _started(endpoint)
        (held,) = endpoint.calls
        endpoint.abandoned.add(held)  # what StallWatch._probe does to each request in flight
        held.cancel()
        with pytest.raises(RequestFailed) as failed:
            await task
        assert not endpoint.calls and not endpoint.abandoned and not task.cancelled()
        return failed.value

    failure = asyncio.run(scenario())
    assert (failure.kind, failure.detail) == ("transport", "freed from a stalled endpoint: it stopped answering")


def test_the_runs_own_cancellation_stays_a_cancellation_even_beside_the_probes() -> None:
    async def scenario(also_abandoned: bool) -> bool:
        endpoint = _Endpoint()
        task, _ = await _started(endpoint)
        (held,) = endpoint.calls
        if also_abandoned:  # the probe and the run's stop in the same turn of the loop
            endpoint.abandoned.add(held)
            held.cancel()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return task.cancelled()

    assert asyncio.run(scenario(False)) is True
    assert asyncio.run(scenario(True)) is True
