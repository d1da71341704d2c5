"""The pool gives up on endpoints that answer their probe (GET /models) and no chat request
(client/endpoints.py: ``max_futile_readmissions``), and not on one that answers between failures."""

from __future__ import annotations

import asyncio
import json

import pytest
from tests.support.fault_server import FaultServerProcess

from tokenplan.client.endpoints import EndpointPool, PoolSettings
from tokenplan.client.openai import RequestFailed
from tokenplan.errors import EndpointsUnanswering

BODY = {"model": "fault-model", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}
SETTINGS = PoolSettings(1, eject_after_failures=2, probe_interval_s=0.05, max_futile_readmissions=3)


async def _send_until_stopped(url: str, limit: int) -> tuple[int, int, BaseException | None]:
    """Send up to ``limit`` chat requests one at a time; (sent, answered, what stopped the pool)."""
    pool = EndpointPool([url], SETTINGS)
    await pool.check_health("fault-model")
    sent = answered = 0
    try:
        for _ in range(limit):
            async with pool.lease() as endpoint:
                sent += 1
                try:
                    await endpoint.client.chat(BODY, deadline_s=5)
                except RequestFailed as failure:
                    pool.record(endpoint, failure)
                    continue
                pool.record(endpoint, None)
                answered += 1
    except EndpointsUnanswering as stopped:
        return sent, answered, stopped
    finally:
        await pool.aclose()
    return sent, answered, None


def test_a_server_listing_the_model_but_dropping_every_chat_request_stops_the_pool(tmp_path) -> None:
    # Ejected after 2 failures; the probe puts it back (GET /models answers). The first readmission
    # starts the count, each later one with nothing answered since adds one: 3 futile readmissions
    # take 4 ejections, 4 × 2 = 8 chat requests; the 9th lease raises.
    with FaultServerProcess(str(tmp_path), pdrop=1.0) as server:
        sent, answered, stopped = asyncio.run(_send_until_stopped(server.url, 50))
    assert (sent, answered) == (8, 0)
    assert stopped is not None and "answers GET /models but no chat request" in str(stopped)
    assert "put back 3 times" in str(stopped) and "ServerDisconnectedError" in str(stopped)


def test_an_endpoint_answering_between_its_ejections_is_kept(tmp_path) -> None:
    # Four 500s then one answer, over and over (the script's k-th chat request gets entry k mod 5):
    # two 500s eject it, the probe puts it back, two more eject it again with nothing answered
    # (one futile readmission), then the answer starts the count again. 40 requests: 8 answered.
    failure = {"status": 500, "raw": json.dumps({"error": {"message": "injected"}}), "content_type": "application/json"}
    script = tmp_path / "script.json"
    script.write_text(json.dumps([failure] * 4 + [{"answer": True}]))
    with FaultServerProcess(str(tmp_path), script=str(script)) as server:
        sent, answered, stopped = asyncio.run(_send_until_stopped(server.url, 40))
    assert (sent, answered, stopped) == (40, 8, None)


@pytest.mark.parametrize("limit", [1, 2])
def test_the_limit_counts_readmissions_after_the_first(tmp_path, limit: int) -> None:
    # With max_futile_readmissions = L: L + 1 ejections of 2 requests each before the stop.
    settings = PoolSettings(1, eject_after_failures=2, probe_interval_s=0.05, max_futile_readmissions=limit)

    async def scenario(url: str) -> int:
        pool = EndpointPool([url], settings)
        sent = 0
        try:
            while True:
                async with pool.lease() as endpoint:
                    sent += 1
                    try:
                        await endpoint.client.chat(BODY, deadline_s=5)
                    except RequestFailed as failure:
                        pool.record(endpoint, failure)
        except EndpointsUnanswering:
            return sent
        finally:
            await pool.aclose()

    with FaultServerProcess(str(tmp_path), pdrop=1.0) as server:
        assert asyncio.run(scenario(server.url)) == 2 * (limit + 1)
