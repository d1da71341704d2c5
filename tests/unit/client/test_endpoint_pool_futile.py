"""The pool gives up on endpoints that answer their probe (GET /models) and no chat request
(client/endpoints.py: ``max_futile_readmissions``), and not on one that answers between failures."""

from __future__ import annotations

import asyncio

import pytest
from tests.support.fault_server import FaultServerProcess

from tokenplan.client.endpoints import EndpointPool, PoolSettings
from tokenplan.client.openai import RequestFailed
from tokenplan.errors import EndpointsUnanswering

BODY = {"model": "fault-model", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}
SETTINGS = PoolSettings(1, eject_after_failures=2, probe_interval_s=0.05, max_futile_readmissions=3)


async def _send_until_stopped(
    url: str | list[str], limit: int, settings: PoolSettings = SETTINGS, deadline_s: float = 5.0
) -> tuple[int, int, BaseException | None, set[str]]:
    """Send up to ``limit`` chat requests one at a time, each with ``deadline_s`` (seconds);
    (sent, answered, what stopped the pool, the kinds of the failures)."""
    pool = EndpointPool([url] if isinstance(url, str) else url, settings)
    await pool.check_health("fault-model")
    sent = answered = 0
    kinds: set[str] = set()
    try:
        for _ in range(limit):
            async with pool.lease() as endpoint:
                sent += 1
                try:
                    await endpoint.client.chat(BODY, deadline_s=deadline_s)
                except RequestFailed as failure:
                    pool.record(endpoint, failure)
                    kinds.add(failure.kind)
                    continue
                pool.record(endpoint, None)
                answered += 1
    except EndpointsUnanswering as stopped:
        return sent, answered, stopped, kinds
    finally:
        await pool.aclose()
    return sent, answered, None, kinds


def test_a_server_listing_the_model_but_dropping_every_chat_request_stops_the_pool(tmp_path) -> None:
    # Ejected after 2 failures; the probe puts it back (GET /models answers). The first readmission
    # starts the count, each later one with nothing answered since adds one: 3 futile readmissions
    # take 4 ejections, 4 × 2 = 8 chat requests; the 9th lease raises.
    with FaultServerProcess(str(tmp_path), pdrop=1.0) as server:
        sent, answered, stopped, kinds = asyncio.run(_send_until_stopped(server.url, 50))
    assert (sent, answered, kinds) == (8, 0, {"transport"})
    assert stopped is not None and "answers GET /models but no chat request" in str(stopped)
    assert "put back 3 times" in str(stopped) and "ServerDisconnectedError" in str(stopped)


async def _dropping_four_in_five(answered_every: int = 5):
    """An aiohttp server listing ``fault-model`` whose k-th chat request (from 0) is answered when
    k mod ``answered_every`` is the last, else dropped (the connection closed, nothing sent)."""
    from aiohttp import web

    count = [0]

    async def models(_: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "fault-model", "object": "model"}]})

    async def chat(request: web.Request) -> web.Response:
        k, count[0] = count[0], count[0] + 1
        if k % answered_every != answered_every - 1:
            assert request.transport is not None
            request.transport.close()  # nothing answered: the client sees the connection dropped
            return web.Response()
        message = {"role": "assistant", "content": "ok"}
        usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
        return web.json_response(
            {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}], "usage": usage}
        )

    app = web.Application()
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/chat/completions", chat)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://127.0.0.1:{port}/v1"


def test_an_endpoint_answering_between_its_ejections_is_kept() -> None:
    # Four dropped connections then one answer, over and over: two drops eject it, the probe puts
    # it back, two more eject it again with nothing answered (one futile readmission), then the
    # answer starts the count again. 40 requests: 8 answered, never given up on.
    async def scenario() -> tuple[int, int, BaseException | None, set[str]]:
        runner, url = await _dropping_four_in_five()
        try:
            return await _send_until_stopped(url, 40)
        finally:
            await runner.cleanup()

    assert asyncio.run(scenario()) == (40, 8, None, {"transport"})


def test_a_5xx_to_every_request_is_left_to_the_runner(tmp_path) -> None:
    # A 500 is an answer in the server's own words; the runner's 8-row rule stops on it and quotes
    # it (runner.unanswered). The pool ejects and puts the endpoint back but never gives up on it.
    with FaultServerProcess(str(tmp_path), p500=1.0) as server:
        sent, answered, stopped, kinds = asyncio.run(_send_until_stopped(server.url, 30))
    assert (sent, answered, stopped, kinds) == (30, 0, None, {"status"})


@pytest.mark.parametrize("limit", [1, 2])
def test_the_limit_counts_readmissions_after_the_first(tmp_path, limit: int) -> None:
    # With max_futile_readmissions = L: L + 1 ejections of 2 requests each before the stop.
    settings = PoolSettings(1, eject_after_failures=2, probe_interval_s=0.05, max_futile_readmissions=limit)

    with FaultServerProcess(str(tmp_path), pdrop=1.0) as server:
        sent, answered, stopped, _ = asyncio.run(_send_until_stopped(server.url, 50, settings))
    assert (sent, answered) == (2 * (limit + 1), 0) and stopped is not None


def test_answers_a_filter_withheld_do_not_take_an_endpoint_out_and_malformed_ones_do() -> None:
    # Eject after 5 in a row. Ten content_filter answers (a row's own filter, judged by the
    # runner's control request) leave it in; five answers that are not JSON (a proxy's page) take
    # it out. No request is sent: the outcomes are recorded as a lease would record them.
    async def scenario() -> tuple[bool, bool, int]:
        pool = EndpointPool(["http://127.0.0.1:9/v1"], PoolSettings(1, eject_after_failures=5, probe_interval_s=60))
        try:
            (endpoint,) = pool.endpoints
            withheld = RequestFailed("protocol", "finish_reason 'content_filter': the answer was withheld")
            assert not withheld.malformed
            for _ in range(10):
                pool.record(endpoint, withheld)
            kept = not endpoint.ejected
            for _ in range(5):
                pool.record(endpoint, RequestFailed("protocol", "answer is not JSON"))
            return kept, endpoint.ejected, endpoint.failures
        finally:
            await pool.aclose()

    assert asyncio.run(scenario()) == (True, True, 15)


async def _send(pool: EndpointPool, count: int) -> tuple[int, list[str]]:
    """Send ``count`` chat requests one at a time through ``pool``; (answered, the URLs that answered)."""
    answered: list[str] = []
    for _ in range(count):
        async with pool.lease() as endpoint:
            try:
                await endpoint.client.chat(BODY, deadline_s=5)
            except RequestFailed as failure:
                pool.record(endpoint, failure)
                continue
            pool.record(endpoint, None)
            answered.append(endpoint.base_url)
    return len(answered), answered


def test_a_dead_but_listing_server_beside_a_wrong_port_stops_the_pool(tmp_path) -> None:
    # Port 1 refuses connections: set aside at the start, it never answers. The other lists the
    # model and drops every chat request. Before, the pool waited for the wrong port to be put back
    # (it never is) and every row spent its tries on the dropping server. Now the same 8 requests
    # as for the dropping server alone (4 ejections × 2) and the 9th lease raises, naming both.
    with FaultServerProcess(str(tmp_path), pdrop=1.0) as server:
        sent, answered, stopped, _ = asyncio.run(_send_until_stopped([server.url, "http://127.0.0.1:1/v1"], 50))
    assert (sent, answered) == (8, 0) and stopped is not None
    assert str(stopped).startswith("no endpoint answers chat requests: 1 of 2 answer GET /models")
    assert f"{server.url} (transport: ServerDisconnectedError)" in str(stopped)
    assert "http://127.0.0.1:1/v1 (out: transport: " in str(stopped)


def test_a_server_that_answered_then_went_down_is_waited_for_beside_a_dead_but_listing_one(tmp_path) -> None:
    # The dropping server is first in the list, so with both in it takes every request; while it
    # is out the healthy one answers. Then the healthy one goes down (a restart): the dropping one
    # is put back and ejected again and again (futile 3 times and more), and the pool goes on, for
    # the healthy one answered before it went out. Back on its port, it answers again.
    async def scenario(drop: FaultServerProcess, healthy: FaultServerProcess) -> tuple[int, int, int]:
        pool = EndpointPool([drop.url, healthy.url], SETTINGS)
        await pool.check_health("fault-model")
        try:
            before, _ = await _send(pool, 10)
            healthy.kill()
            during, _ = await _send(pool, 30)  # raised EndpointsUnanswering before the fix
            futile = pool.endpoints[0].futile_readmissions
            healthy.start()
            after, _ = await _send(pool, 30)
            return before, during, futile if after else -1
        finally:
            await pool.aclose()

    with FaultServerProcess(str(tmp_path), pdrop=1.0) as drop, FaultServerProcess(str(tmp_path)) as healthy:
        before, during, futile = asyncio.run(scenario(drop, healthy))
    assert before > 0 and during == 0 and futile >= 3


def test_a_server_slower_than_the_deadline_is_said_to_be_so(tmp_path) -> None:
    # Every answer takes 2 s and each request may take 0.2 s: every request runs past its deadline
    # (no answer at all, as a hang), so the pool gives up after the same 8 requests; the line says
    # the deadline, not only "no chat request", since the server may be merely slow.
    with FaultServerProcess(str(tmp_path), delay_s=2) as server:
        _, _, stopped, _ = asyncio.run(_send_until_stopped(server.url, 50, deadline_s=0.2))
    assert stopped is not None and "(deadline: no complete answer within" in str(stopped)
    assert str(stopped).endswith("if the server is only slow, raise --request-timeout)")
