"""``bench`` against an endpoint without ``/v1`` gets the hint ``generate`` gives (a new-user pass:
bench said only "status 404: Not Found")."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from tokenplan.bench.probe import check_servers
from tokenplan.client.openai import OpenAIClient
from tokenplan.errors import ServerError


def test_an_endpoint_without_v1_is_told_where_the_api_usually_is() -> None:
    async def models(_: web.Request) -> web.Response:
        return web.json_response({"data": [{"id": "m"}]})

    async def scenario() -> str:
        app = web.Application()
        app.router.add_get("/v1/models", models)  # the root's /models answers 404, as vLLM's does
        async with TestServer(app) as server:
            root = f"http://127.0.0.1:{server.port}"
            client = OpenAIClient(root, max_connections=1)
            try:
                with pytest.raises(ServerError) as caught:
                    await check_servers([client], "m")
            finally:
                await client.aclose()
            good = OpenAIClient(f"{root}/v1", max_connections=1)
            try:
                await check_servers([good], "m")  # with /v1 it serves m: no error
            finally:
                await good.aclose()
            return str(caught.value).replace(root, "ROOT")

    message = asyncio.run(scenario())
    assert message.startswith("cannot reach ROOT: ")
    assert message.endswith("; the API is usually under /v1: try --endpoint ROOT/v1")


@pytest.mark.parametrize("route", ["/v1/chat/completions", "/v1/models", "/chat/completions"])
def test_a_route_given_as_the_endpoint_is_told_the_api_root(route: str) -> None:
    # a new-user pass: --endpoint ROOT/v1/chat/completions was told "try --endpoint
    # ROOT/v1/chat/completions/v1"; the API root is the part before the route (with /v1)
    async def models(_: web.Request) -> web.Response:
        return web.json_response({"data": [{"id": "m"}]})

    async def scenario() -> str:
        app = web.Application()
        app.router.add_get("/v1/models", models)
        async with TestServer(app) as server:
            root = f"http://127.0.0.1:{server.port}"
            client = OpenAIClient(root + route, max_connections=1)  # asks ROOT{route}/models: 404
            try:
                with pytest.raises(ServerError) as caught:
                    await check_servers([client], "m")
            finally:
                await client.aclose()
            return str(caught.value).replace(root, "ROOT")

    assert asyncio.run(scenario()).endswith("; --endpoint is the API root, not a route: try --endpoint ROOT/v1")
