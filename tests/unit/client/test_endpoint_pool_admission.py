"""One concurrency limit: the pool admits ``concurrency_per_endpoint`` × endpoints units at once."""

from __future__ import annotations

import asyncio

from tokenplan.client.endpoints import EndpointPool, PoolSettings


def test_the_pool_admits_concurrency_times_endpoints_and_one_more_after_a_release() -> None:
    async def scenario() -> tuple[int, bool, bool]:
        # 3 per endpoint × 2 endpoints = 6 units at once (no request is sent: admission only)
        pool = EndpointPool(["http://127.0.0.1:9/v1", "http://127.0.0.1:10/v1"], PoolSettings(3))
        try:
            admitted = 0
            for _ in range(6):
                await asyncio.wait_for(pool.admit(), 1.0)
                admitted += 1
            seventh = asyncio.create_task(pool.admit())
            for _ in range(10):  # a free slot would let it in at its first turn of the loop; it must not
                await asyncio.sleep(0)
            blocked = not seventh.done()
            pool.release()
            await asyncio.wait_for(seventh, 1.0)  # a release lets exactly it in
            return admitted, blocked, seventh.done()
        finally:
            await pool.aclose()

    assert asyncio.run(scenario()) == (6, True, True)


def test_a_base_url_without_v1_that_answers_404_is_told_to_add_it() -> None:
    # new-user finding: --endpoint http://host:port (no /v1) got "status 404" with no hint; vLLM,
    # SGLang and TensorRT-LLM serve GET /v1/models, and a bare root answers 404.
    import pytest
    from aiohttp import web
    from aiohttp.test_utils import TestServer

    from tokenplan.errors import ServerError

    async def models(_: web.Request) -> web.Response:
        return web.json_response({"data": [{"id": "m"}]})

    async def scenario() -> str:
        app = web.Application()
        app.router.add_get("/v1/models", models)
        async with TestServer(app) as server:
            root = f"http://127.0.0.1:{server.port}"
            pool = EndpointPool([root], PoolSettings(1))
            try:
                with pytest.raises(ServerError) as caught:
                    await pool.check_health("m")
            finally:
                await pool.aclose()
            good = EndpointPool([f"{root}/v1"], PoolSettings(1))
            try:
                assert await good.check_health("m") == []  # with /v1 it serves m
            finally:
                await good.aclose()
            return str(caught.value).replace(root, "ROOT")

    assert asyncio.run(scenario()).endswith("; the API is usually under /v1: try --endpoint ROOT/v1)")


def test_a_stop_ends_the_wait_for_a_slot_with_nothing_taken() -> None:
    # break-it pass: with every slot held (answers that take minutes, units waiting for an
    # ejected endpoint) the dispatcher waited in admit() for a slot before it saw a Ctrl-C
    async def scenario() -> tuple[bool, bool, bool, bool]:
        pool = EndpointPool(["http://127.0.0.1:9/v1"], PoolSettings(1))
        stop = asyncio.Event()
        try:
            first = await asyncio.wait_for(pool.admit(stop), 1.0)
            waiting = asyncio.create_task(pool.admit(stop))
            for _ in range(10):
                await asyncio.sleep(0)
            blocked = not waiting.done()
            stop.set()
            second = await asyncio.wait_for(waiting, 1.0)  # the stop, not a slot, ends it
            pool.release()
            free_again = await asyncio.wait_for(pool.admit(), 1.0)  # the slot was not leaked
            return first, blocked, second, free_again
        finally:
            await pool.aclose()

    assert asyncio.run(scenario()) == (True, True, False, True)
