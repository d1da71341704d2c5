"""One OpenAI-compatible chat request → one :class:`Completion`.

The client speaks ``POST {base_url}/chat/completions`` (``base_url`` follows the OpenAI SDK
convention, e.g. ``http://127.0.0.1:8000/v1``) over one shared :class:`httpx.AsyncClient` whose
connection pool is sized by the caller: httpx and aiohttp default to 100 connections, a silent cap
on concurrency (vLLM #7241). There are no hidden retries: one :meth:`OpenAIClient.chat` call is one
HTTP request, and every failure surfaces as :class:`RequestFailed` for the caller to judge
(:mod:`tokenplan.client.retry`).

Usage::

    async with OpenAIClient("http://127.0.0.1:8000/v1", max_connections=64) as client:
        done = await client.chat({"model": "m", "messages": [...], "max_tokens": 64}, deadline_s=120)
        print(done.content, done.usage.completion_tokens, done.timings.latency_s)

Times are ``time.perf_counter()`` readings in seconds. Non-streamed requests are the cheap path
(one JSON parse per request); streaming costs one parse per chunk and is for measuring TTFT/ITL.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import json
import ssl
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import httpx

from tokenplan.client.reasoning import split_reasoning

FailureKind = Literal["transport", "deadline", "status", "protocol"]
CONNECTIONS_PER_POOL = 1  # connections per httpx pool (see OpenAIClient.__init__)


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts the server reported (tokens). ``reasoning_tokens`` is ``None`` when the server
    does not report it (only recent SGLang and vLLM do); ``completion_tokens`` includes reasoning."""

    prompt_tokens: int
    completion_tokens: int
    reasoning_tokens: int | None


@dataclass(frozen=True, slots=True)
class Timings:
    """When a request was sent, answered and (streaming only) when each chunk with text arrived.

    All values are ``time.perf_counter()`` readings (seconds); ``chunk_times_s`` is empty for a
    non-streamed request, so TTFT and ITL exist only for streamed ones.
    """

    sent_s: float
    done_s: float
    chunk_times_s: tuple[float, ...] = ()

    @property
    def latency_s(self) -> float:
        """End-to-end latency (seconds)."""
        return self.done_s - self.sent_s

    @property
    def ttft_s(self) -> float | None:
        """Time to first token (seconds), or ``None`` for a non-streamed request."""
        return self.chunk_times_s[0] - self.sent_s if self.chunk_times_s else None


@dataclass(frozen=True, slots=True)
class Completion:
    """One answered chat request.

    ``content`` is the answer without reasoning; ``reasoning`` the thinking text, from whichever
    field the engine used (:mod:`tokenplan.client.reasoning`), or ``None``. ``finish_reason`` is
    the server's (``"stop"``, ``"length"``, …); ``usage`` is ``None`` if the server sent none.
    """

    content: str
    reasoning: str | None
    finish_reason: str | None
    usage: Usage | None
    timings: Timings
    model: str | None


class RequestFailed(Exception):
    """One request did not produce a completion.

    Attributes:
        kind: ``"transport"`` (connect/read/write error, dropped connection), ``"deadline"`` (the
            per-request deadline passed), ``"status"`` (HTTP status ≥ 400) or ``"protocol"`` (a 200
            answer that is not a chat completion).
        status: the HTTP status for ``"status"``, else ``None``.
        detail: a short text for logs: the server's error message or the exception type.
        retry_after_s: the server's ``Retry-After`` header (seconds), if it sent one.
    """

    def __init__(self, kind: FailureKind, detail: str, status: int | None = None,
                 retry_after_s: float | None = None):
        self.kind, self.status, self.detail, self.retry_after_s = kind, status, detail, retry_after_s
        super().__init__(f"{kind}{f' {status}' if status is not None else ''}: {detail}")


class OpenAIClient:
    """Async client for one OpenAI-compatible server.

    Args:
        base_url: the server's API root, e.g. ``http://host:8000/v1``.
        max_connections: connection pool size; size it to the requests you keep in flight.
        api_key: sent as ``Authorization: Bearer``; never logged.
        connect_timeout_s: limit on opening one connection (seconds).
        transport: an httpx transport (tests only).
    """

    def __init__(self, base_url: str, *, max_connections: int, api_key: str | None = None,
                 connect_timeout_s: float = 10.0, transport: httpx.AsyncBaseTransport | None = None):
        self.base_url = base_url.rstrip("/")
        headers = {"Content-Type": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        # httpcore's pool scans every connection for every request it places and hands one idle
        # connection to several queued requests (httpcore #1035, open), so one pool of thousands
        # of connections costs milliseconds of CPU per request (measured: 7.6 ms at 64). One
        # connection per pool, pools handed out from a free list, keeps it flat (~0.6 ms).
        shards = -(-max_connections // CONNECTIONS_PER_POOL)
        per_pool = -(-max_connections // shards)
        limits = httpx.Limits(max_connections=per_pool, max_keepalive_connections=per_pool,
                              keepalive_expiry=60.0)
        # Only connecting and writing are bounded here; the whole request is bounded by the
        # caller's deadline (a 30k-token answer may rightly take half an hour).
        timeout = httpx.Timeout(connect=connect_timeout_s, read=None, write=60.0, pool=None)
        verify = _ssl_context()  # one context for all pools: building one costs ~20 ms
        self._pools = [httpx.AsyncClient(headers=headers, limits=limits, timeout=timeout, transport=transport,
                                         verify=verify) for _ in range(shards)]
        self._free = collections.deque(i for _ in range(per_pool) for i in range(shards))
        self._chat_url = self.base_url + "/chat/completions"

    async def __aenter__(self) -> OpenAIClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close every pooled connection."""
        for pool in self._pools:
            await pool.aclose()

    @contextlib.contextmanager
    def _http(self) -> Iterator[httpx.AsyncClient]:
        # The caller bounds requests in flight to max_connections, so a slot is free; past that
        # bound requests share the first pool and wait in its queue.
        slot = self._free.popleft() if self._free else 0
        try:
            yield self._pools[slot]
        finally:
            self._free.append(slot)

    async def models(self, *, deadline_s: float = 10.0) -> list[str]:
        """The model names the server serves (``GET /models``); used as the health check.

        Raises:
            RequestFailed: the server did not answer with a model list within ``deadline_s``.
        """
        async with _failures_as_request_failed(deadline_s):
            with self._http() as http:
                response = await http.get(self.base_url + "/models")
            _raise_for_status(response)
            data = _json_or_fail(response.content).get("data")
        if not isinstance(data, list):
            raise RequestFailed("protocol", "GET /models answered without a 'data' list")
        return [str(m.get("id")) for m in data if isinstance(m, dict)]

    async def chat(self, body: Mapping[str, Any], *, deadline_s: float, stream: bool = False) -> Completion:
        """Send one chat completion request and wait for the whole answer.

        Args:
            body: the request JSON (``model``, ``messages``, sampling fields…); ``stream`` and
                ``stream_options`` are set here.
            deadline_s: limit on the whole request, from sending to the last byte (seconds).
            stream: stream the answer (SSE) to measure TTFT and ITL.

        Raises:
            RequestFailed: on any failure; the request was sent at most once.
        """
        async with _failures_as_request_failed(deadline_s):
            if stream:
                return await self._chat_streamed(body)
            return await self._chat_whole(body)

    async def _chat_whole(self, body: Mapping[str, Any]) -> Completion:
        payload = json.dumps({**body, "stream": False}).encode()
        with self._http() as http:
            sent_s = time.perf_counter()
            response = await http.post(self._chat_url, content=payload)
            done_s = time.perf_counter()
        _raise_for_status(response)
        data = _json_or_fail(response.content)
        choice = _first_choice(data)
        message = choice.get("message")
        if not isinstance(message, dict):
            raise RequestFailed("protocol", "choices[0] has no 'message' object")
        content, reasoning = split_reasoning(message)
        return Completion(content, reasoning, choice.get("finish_reason"), _usage(data.get("usage")),
                          Timings(sent_s, done_s), data.get("model"))

    async def _chat_streamed(self, body: Mapping[str, Any]) -> Completion:
        payload = json.dumps({**body, "stream": True,
                              "stream_options": {"include_usage": True}}).encode()
        acc = _StreamAccumulator()
        with self._http() as http:
            sent_s = time.perf_counter()
            async with http.stream("POST", self._chat_url, content=payload) as response:
                if response.status_code >= 400:
                    await response.aread()
                    _raise_for_status(response)
                async for line in response.aiter_lines():
                    if line.startswith("data:") and acc.feed(line[5:].strip(), time.perf_counter()):
                        break
        done_s = time.perf_counter()
        return acc.completion(sent_s, done_s)


class _StreamAccumulator:
    """Joins SSE chunks of one streamed chat completion."""

    def __init__(self) -> None:
        self.content: list[str] = []
        self.reasoning: list[str] = []
        self.chunk_times_s: list[float] = []
        self.finish_reason: str | None = None
        self.usage: Usage | None = None
        self.model: str | None = None

    def feed(self, data: str, now_s: float) -> bool:
        """Take one ``data:`` payload; return True at ``[DONE]``."""
        if data == "[DONE]":
            return True
        chunk = _json_or_fail(data.encode())
        if "error" in chunk:
            raise RequestFailed("protocol", f"error event in stream: {str(chunk['error'])[:200]}")
        self.model = chunk.get("model", self.model)
        if chunk.get("usage"):
            self.usage = _usage(chunk["usage"])
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            text = delta.get("content")
            thought = delta.get("reasoning_content") or delta.get("reasoning")
            if text:
                self.content.append(text)
            if thought:
                self.reasoning.append(thought)
            if text or thought:
                self.chunk_times_s.append(now_s)
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
        return False

    def completion(self, sent_s: float, done_s: float) -> Completion:
        message = {"content": "".join(self.content), "reasoning_content": "".join(self.reasoning)}
        content, reasoning = split_reasoning(message)
        return Completion(content, reasoning, self.finish_reason, self.usage,
                          Timings(sent_s, done_s, tuple(self.chunk_times_s)), self.model)


@contextlib.asynccontextmanager
async def _failures_as_request_failed(deadline_s: float) -> AsyncIterator[None]:
    """A deadline around the body; httpx errors and the deadline become :class:`RequestFailed`."""
    try:
        async with asyncio.timeout(deadline_s):
            yield
    except TimeoutError:
        raise RequestFailed("deadline", f"no complete answer within {deadline_s:.0f} s") from None
    except httpx.TransportError as exc:
        raise RequestFailed("transport", type(exc).__name__) from exc
    except httpx.HTTPError as exc:
        raise RequestFailed("protocol", type(exc).__name__) from exc


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    return ssl.create_default_context()


def _raise_for_status(response: httpx.Response) -> None:
    if response.status_code < 400:
        return
    detail = response.reason_phrase
    try:
        body = json.loads(response.content)
        error = body.get("error", body.get("detail"))  # OpenAI style, or FastAPI's {"detail": …}
        if isinstance(error, dict) and error.get("message"):
            detail = str(error["message"])[:300]
        elif isinstance(error, str):
            detail = error[:300]
    except (ValueError, AttributeError):
        pass
    raise RequestFailed("status", detail, status=response.status_code,
                        retry_after_s=_retry_after_s(response.headers.get("retry-after")))


def _retry_after_s(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:  # an HTTP date: not worth parsing, the backoff covers it
        return None


def _json_or_fail(raw: bytes) -> dict[str, Any]:
    try:
        data = json.loads(raw)
    except ValueError:
        raise RequestFailed("protocol", f"answer is not JSON: {raw[:80]!r}") from None
    if not isinstance(data, dict):
        raise RequestFailed("protocol", "answer is not a JSON object")
    return data


def _first_choice(data: Mapping[str, Any]) -> dict[str, Any]:
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise RequestFailed("protocol", "answer has no choices")
    return choices[0]


def _usage(raw: object) -> Usage | None:
    if not isinstance(raw, dict):
        return None
    details = raw.get("completion_tokens_details")
    reasoning = details.get("reasoning_tokens") if isinstance(details, dict) else None
    return Usage(int(raw.get("prompt_tokens") or 0), int(raw.get("completion_tokens") or 0),
                 int(reasoning) if reasoning is not None else None)
