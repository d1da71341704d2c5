"""OpenAIClient against the fault server: answers, streaming, failures as RequestFailed."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import time
import urllib.request

import pytest
from tests.support.fault_server import FaultServerProcess

from tokenplan.client.endpoints import EndpointPool, PoolSettings
from tokenplan.client.openai import OpenAIClient, RequestFailed, _SSELines

BODY = {"model": "fault-model", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}
# The fault server answers "reply-" + sha256(messages JSON, sorted keys)[:12].
DIGEST = hashlib.sha256(json.dumps(BODY["messages"], sort_keys=True).encode()).hexdigest()[:12]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    with FaultServerProcess(str(tmp_path_factory.mktemp("fault")), tokens=16) as s:
        yield s


@contextlib.asynccontextmanager
async def _one_route(handler):
    """An aiohttp server answering ``POST /v1/chat/completions`` with ``handler`` on a free port;
    yields its base URL (``http://127.0.0.1:P/v1``)."""
    from aiohttp import web

    app = web.Application()
    app.router.add_post("/v1/chat/completions", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}/v1"
    finally:
        await runner.cleanup()


async def _chat(url: str, **kwargs) -> object:
    async with OpenAIClient(url, max_connections=4) as client:
        return await client.chat(BODY, **{"deadline_s": 10, **kwargs})


def test_a_whole_answer_has_content_reasoning_usage_and_length_finish(server) -> None:
    done = asyncio.run(_chat(server.url))
    # max_tokens 8 < the server's 16 tokens → finish "length" with 8 completion tokens.
    assert (done.content, done.reasoning) == (f"reply-{DIGEST}", f"thought-{DIGEST}")
    assert (done.finish_reason, done.usage.completion_tokens) == ("length", 8)
    assert done.timings.ttft_s is None and done.timings.latency_s > 0


def test_a_streamed_answer_joins_its_chunks_and_times_the_first(server) -> None:
    done = asyncio.run(_chat(server.url, stream=True))
    assert (done.content, done.reasoning, done.usage.completion_tokens) == (f"reply-{DIGEST}", f"thought-{DIGEST}", 8)
    assert 0 < done.timings.ttft_s <= done.timings.latency_s
    assert len(done.timings.chunk_times_s) > 2


def test_a_refused_connection_is_a_transport_failure() -> None:
    with pytest.raises(RequestFailed) as caught:
        asyncio.run(_chat("http://127.0.0.1:9/v1"))  # port 9 (discard) has no listener here
    assert caught.value.kind == "transport"


def test_status_errors_carry_the_status_and_server_message(tmp_path) -> None:
    with FaultServerProcess(str(tmp_path), p429=1.0) as busy:
        with pytest.raises(RequestFailed) as caught:
            asyncio.run(_chat(busy.url))
    failure = caught.value
    assert (failure.kind, failure.status, failure.detail, failure.retry_after_s) == ("status", 429, "injected 429", 0.0)


def test_a_stalled_server_hits_the_deadline(tmp_path) -> None:
    with FaultServerProcess(str(tmp_path), pstall=1.0, stall_s=30) as stalled:
        with pytest.raises(RequestFailed) as caught:
            asyncio.run(_chat(stalled.url, deadline_s=0.3))
    assert caught.value.kind == "deadline"
    assert caught.value.detail == "no complete answer within 0.3 s"  # not "within 0 s"


def test_the_pool_ejects_a_failing_endpoint_and_probes_it_back(tmp_path) -> None:
    with FaultServerProcess(str(tmp_path)) as server:
        port = server.port

        async def scenario() -> list[int]:
            pool = EndpointPool([server.url], PoolSettings(2, eject_after_failures=2, probe_interval_s=0.1))
            await pool.check_health("fault-model")
            healthy = [pool.healthy_count()]
            server.kill()
            for _ in range(2):
                async with pool.lease() as endpoint:
                    try:
                        await endpoint.client.chat(BODY, deadline_s=2)
                    except RequestFailed as failure:
                        pool.record(endpoint, failure)
            healthy.append(pool.healthy_count())
            server.port = port
            server.start()  # same port
            await asyncio.sleep(0.6)
            healthy.append(pool.healthy_count())
            async with pool.lease() as endpoint:
                await endpoint.client.chat(BODY, deadline_s=5)
            await pool.aclose()
            return healthy

        assert asyncio.run(scenario()) == [1, 0, 1]


def _stats(server) -> dict:
    with urllib.request.urlopen(server.url.removesuffix("/v1") + "/stats", timeout=5) as answer:
        return json.loads(answer.read())


def test_a_dropped_connection_is_a_transport_failure_sent_once(tmp_path) -> None:
    with FaultServerProcess(str(tmp_path), pdrop=1.0) as dropping:
        with pytest.raises(RequestFailed) as caught:
            asyncio.run(_chat(dropping.url))
        stats = _stats(dropping)
    assert (caught.value.kind, caught.value.detail) == ("transport", "ServerDisconnectedError")
    assert stats["requests"] == 2  # the one chat POST (not resent) and this /stats GET itself


def test_the_pool_holds_more_than_the_libraries_default_of_100_connections(tmp_path) -> None:
    # 150 requests held 1 s each by the server: with a 150-connection pool all 150 are answered
    # at once; a 100-connection cap would show 100.
    with FaultServerProcess(str(tmp_path), delay_s=1.0) as slow:

        async def burst() -> None:
            async with OpenAIClient(slow.url, max_connections=150) as client:
                await asyncio.gather(*(client.chat(BODY, deadline_s=30) for _ in range(150)))

        asyncio.run(burst())
        assert _stats(slow)["max_active"] == 150


@pytest.mark.parametrize(
    ("blocks", "payloads"),
    [
        # a payload cut across reads comes out once its line is complete
        ([b'data: {"a"', b": 1}\n\nda", b"ta: [DONE]\n\n"], [[], [b'{"a": 1}'], [b"[DONE]"]]),
        # CRLF, with the CR and LF in different reads: one line end, not two
        ([b"data: x\r", b"\ndata: y\r\n\r\n"], [[b"x"], [b"y"]]),
        # lone CR line ends
        ([b"data: a\rdata: b\r"], [[b"a", b"b"]]),
        # comments, event and id lines and blank lines carry no payload; "data:" needs no space
        ([b": ping\nevent: message\nid: 3\n\ndata:z\n\n"], [[b"z"]]),
    ],
)
def test_sse_lines_are_split_however_the_reads_cut_them(blocks: list[bytes], payloads: list[list[bytes]]) -> None:
    lines = _SSELines()
    assert [lines.feed(block) for block in blocks] == payloads
    assert lines.close() == []


def test_sse_last_line_without_a_line_end_is_kept_for_the_close() -> None:
    lines = _SSELines()
    assert lines.feed(b"data: 1\n\ndata: end") == [b"1"]
    assert lines.close() == [b"end"]


def test_a_client_built_outside_an_event_loop_opens_its_pool_in_the_loop_that_uses_it(server) -> None:
    client = OpenAIClient(server.url, max_connections=2)  # no loop is running here

    async def use() -> str:
        try:
            return (await client.chat(BODY, deadline_s=10)).content
        finally:
            await client.aclose()

    assert asyncio.run(use()) == f"reply-{DIGEST}"


def test_the_proxy_named_by_the_environment_is_used_unless_no_proxy_names_the_host(server, monkeypatch) -> None:
    # The fault server answers whatever chat request reaches it, so with HTTP_PROXY pointing at it
    # a request for a host that does not exist is answered through the proxy.
    unreachable = "http://upstream.invalid:8000/v1"
    for lower in ("http_proxy", "no_proxy"):  # urllib prefers the lower-case names
        monkeypatch.delenv(lower, raising=False)
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{server.port}")
    monkeypatch.setenv("NO_PROXY", "")
    assert asyncio.run(_chat(unreachable)).content == f"reply-{DIGEST}"
    monkeypatch.setenv("NO_PROXY", "upstream.invalid")
    with pytest.raises(RequestFailed) as caught:
        asyncio.run(_chat(unreachable))
    assert caught.value.kind == "transport"


@pytest.mark.parametrize("stream", [False, True])
def test_an_answer_that_stalls_part_way_hits_the_deadline(stream: bool) -> None:
    # The deadline covers the body too (aiohttp's total timeout): the server sends its headers and
    # the first bytes, then nothing; 0.5 s later the request fails as "deadline", not later.
    from aiohttp import web

    async def main() -> tuple[RequestFailed, float]:
        release = asyncio.Event()

        async def handler(request: web.Request) -> web.StreamResponse:
            chunk = b'data: {"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}]}\n\n'
            headers = {"Content-Type": "text/event-stream"} if stream else {"Content-Length": "1000"}
            response = web.StreamResponse(headers=headers)
            await response.prepare(request)
            await response.write(chunk if stream else b'{"choices": [')
            await release.wait()
            return response

        async with _one_route(handler) as url:
            start_s = time.monotonic()
            try:
                await _chat(url, stream=stream, deadline_s=0.5)
            except RequestFailed as failure:
                return failure, time.monotonic() - start_s
            finally:
                release.set()
            raise AssertionError("the stalled answer was accepted")

    failure, waited_s = asyncio.run(main())
    assert failure.kind == "deadline" and 0.5 <= waited_s < 10


@pytest.mark.parametrize("stated_length", [True, False])
def test_a_compressed_answer_is_capped_at_its_inflated_size(stated_length: bool) -> None:
    # A gzip body of a few KiB (its Content-Length) that inflates to 2,000,000 characters of
    # content: max_tokens 8 → cap 1 MiB + 8 KiB = 1,056,768 bytes, so it is an oversize failure,
    # whether or not the server states the compressed length (it was read whole and stored).
    import gzip

    from aiohttp import web

    answer = {"choices": [{"index": 0, "message": {"content": "x" * 2_000_000}, "finish_reason": "stop"}]}
    packed = gzip.compress(json.dumps(answer).encode())
    assert len(packed) < 1_056_768 < 2_000_000

    async def main() -> RequestFailed:
        async def handler(request: web.Request) -> web.StreamResponse:
            headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
            if stated_length:
                headers["Content-Length"] = str(len(packed))
            response = web.StreamResponse(headers=headers)
            await response.prepare(request)
            await response.write(packed)
            await response.write_eof()
            return response

        async with _one_route(handler) as url:
            try:
                await _chat(url)
            except RequestFailed as failure:
                return failure
        raise AssertionError("the inflated answer was accepted")

    failure = asyncio.run(main())
    assert failure.kind == "oversize" and "1,056,768 bytes" in failure.detail


def test_a_whole_json_answer_to_a_stream_request_is_read_as_the_answer() -> None:
    # break-it pass: a server that ignores "stream": true and answers application/json whole
    # failed every try as "stream reached the end of the stream without a finish_reason", with
    # nothing of the answer kept
    from aiohttp import web

    answer = {
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "whole"}}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1},
    }

    async def whole(request: web.Request) -> web.Response:
        assert (await request.json())["stream"] is True
        return web.json_response(answer)

    async def scenario() -> object:
        async with _one_route(whole) as url:
            return await _chat(url, stream=True)

    done = asyncio.run(scenario())
    assert (done.content, done.finish_reason, done.usage.completion_tokens) == ("whole", "stop", 1)
