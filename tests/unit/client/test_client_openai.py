"""OpenAIClient against the fault server: answers, streaming, failures as RequestFailed."""

from __future__ import annotations

import asyncio
import hashlib
import json

import pytest

from tests.support.fault_server import FaultServerProcess
from tokenplan.client.endpoints import EndpointPool, PoolSettings
from tokenplan.client.openai import OpenAIClient, RequestFailed

BODY = {"model": "fault-model", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}
# The fault server answers "reply-" + sha256(messages JSON, sorted keys)[:12].
DIGEST = hashlib.sha256(json.dumps(BODY["messages"], sort_keys=True).encode()).hexdigest()[:12]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    with FaultServerProcess(str(tmp_path_factory.mktemp("fault")), tokens=16) as s:
        yield s


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
