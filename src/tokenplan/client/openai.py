"""One OpenAI-compatible chat request → one :class:`Completion`.

The client speaks ``POST {base_url}/chat/completions`` (``base_url`` follows the OpenAI SDK
convention, e.g. ``http://127.0.0.1:8000/v1``) over one :class:`aiohttp.ClientSession` whose
connection pool is sized by the caller: httpx and aiohttp default to 100 connections, a silent cap
on concurrency (vLLM #7241). There are no hidden retries: one :meth:`OpenAIClient.chat` call is one
HTTP request, and every failure surfaces as :class:`RequestFailed` for the caller to judge
(:mod:`tokenplan.client.retry`). (aiohttp resends an idempotent ``GET`` once when a reused
keep-alive connection turns out to be closed, RFC 9112 §9.3.1; that touches only the health check,
never a chat ``POST``.)

Usage::

    async with OpenAIClient("http://127.0.0.1:8000/v1", max_connections=64) as client:
        done = await client.chat({"model": "m", "messages": [...], "max_tokens": 64}, deadline_s=120)
        print(done.content, done.usage.completion_tokens, done.timings.latency_s)

Times are ``time.perf_counter()`` readings in seconds. Non-streamed requests are the cheap path
(one JSON parse per request); streaming costs one parse per chunk and is for measuring TTFT/ITL.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import ssl
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import aiohttp
import orjson
from aiohttp.helpers import get_env_proxy_for_url
from yarl import URL

from tokenplan.client.reasoning import split_reasoning

FailureKind = Literal["transport", "deadline", "status", "protocol"]

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

    The connection pool opens with the first request, in that request's event loop, and serves
    that loop only.

    Args:
        base_url: the server's API root, e.g. ``http://host:8000/v1``.
        max_connections: connection pool size; size it to the requests you keep in flight.
        api_key: sent as ``Authorization: Bearer``; never logged.
        connect_timeout_s: limit on opening one connection (seconds).
    """

    def __init__(self, base_url: str, *, max_connections: int, api_key: str | None = None,
                 connect_timeout_s: float = 10.0):
        self.base_url = base_url.rstrip("/")
        headers = {"Content-Type": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self._headers, self._max_connections = headers, max_connections
        # Only connecting is bounded here (aiohttp's default is a 5-minute cap on the whole
        # request); the whole request is bounded by the caller's deadline, as a 30k-token answer
        # may rightly take half an hour.
        self._timeout = aiohttp.ClientTimeout(total=None, connect=None, sock_connect=connect_timeout_s,
                                              sock_read=None)
        self._session: aiohttp.ClientSession | None = None  # opened in the loop of the first request
        self._chat_url = URL(self.base_url + "/chat/completions")
        self._models_url = URL(self.base_url + "/models")
        # HTTP_PROXY / HTTPS_PROXY / NO_PROXY, read once here as httpx did (aiohttp's trust_env
        # would look them up again in a worker thread for every request).
        self._proxy, self._proxy_auth = _env_proxy(self._chat_url)

    async def __aenter__(self) -> OpenAIClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close every pooled connection."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None:
            # One pool for every request, as large as the requests the caller keeps in flight;
            # aiohttp hands out an idle connection in O(1), so the cost per request stays flat
            # from 4 to 5,000 in flight. No cookie jar: nothing here is a browser session.
            connector = aiohttp.TCPConnector(limit=self._max_connections, limit_per_host=self._max_connections,
                                             keepalive_timeout=60.0, ssl=_ssl_context())
            self._session = aiohttp.ClientSession(connector=connector, headers=self._headers,
                                                  timeout=self._timeout, cookie_jar=aiohttp.DummyCookieJar())
        return self._session

    async def models(self, *, deadline_s: float = 10.0) -> list[str]:
        """The model names the server serves (``GET /models``); used as the health check.

        Raises:
            RequestFailed: the server did not answer with a model list within ``deadline_s``.
        """
        async with _failures_as_request_failed(deadline_s):
            async with self._http().get(self._models_url, proxy=self._proxy,
                                        proxy_auth=self._proxy_auth) as response:
                raw = await response.read()
            _raise_for_status(response, raw)
            data = _json_or_fail(raw).get("data")
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
        payload = orjson.dumps({**body, "stream": False})
        sent_s = time.perf_counter()
        async with self._http().post(self._chat_url, data=payload, proxy=self._proxy,
                                     proxy_auth=self._proxy_auth) as response:
            raw = await response.read()
        done_s = time.perf_counter()
        _raise_for_status(response, raw)
        data = _json_or_fail(raw)
        choice = _first_choice(data)
        message = choice.get("message")
        if not isinstance(message, dict):
            raise RequestFailed("protocol", "choices[0] has no 'message' object")
        content, reasoning = split_reasoning(message)
        return Completion(content, reasoning, choice.get("finish_reason"), _usage(data.get("usage")),
                          Timings(sent_s, done_s), data.get("model"))

    async def _chat_streamed(self, body: Mapping[str, Any]) -> Completion:
        payload = orjson.dumps({**body, "stream": True, "stream_options": {"include_usage": True}})
        acc = _StreamAccumulator()
        sent_s = time.perf_counter()
        async with self._http().post(self._chat_url, data=payload, proxy=self._proxy,
                                     proxy_auth=self._proxy_auth) as response:
            if response.status >= 400:
                _raise_for_status(response, await response.read())
            lines = _SSELines()
            async for block in response.content.iter_any():
                now_s = time.perf_counter()  # when these bytes arrived
                if any(acc.feed(data, now_s) for data in lines.feed(block)):
                    break
            else:
                for data in lines.close():
                    acc.feed(data, time.perf_counter())
        done_s = time.perf_counter()
        return acc.completion(sent_s, done_s)


class _SSELines:
    """Splits a Server-Sent Events byte stream into the payloads of its ``data:`` lines.

    Lines end with LF, CRLF or CR; reads may cut a line anywhere, so the unfinished tail is kept
    for the next block. Comment (``:``), ``event:``, ``id:`` and blank lines are skipped.
    """

    def __init__(self) -> None:
        self._tail = b""
        self._after_cr = False  # the last block ended with CR: a leading LF completes a CRLF

    def feed(self, block: bytes) -> list[bytes]:
        """The ``data:`` payloads completed by ``block``, in order."""
        if not block:
            return []
        if self._after_cr and block.startswith(b"\n"):
            block = block[1:]
        self._after_cr = block.endswith(b"\r")
        buffer = self._tail + block if self._tail else block
        if b"\r" in buffer:
            buffer = buffer.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lines = buffer.split(b"\n")
        self._tail = lines.pop()
        return self._payloads(lines)

    def close(self) -> list[bytes]:
        """The payload of a last line that the stream ended without terminating."""
        tail, self._tail = self._tail, b""
        return self._payloads([tail]) if tail else []

    @staticmethod
    def _payloads(lines: list[bytes]) -> list[bytes]:
        return [line[5:].strip() for line in lines if line.startswith(b"data:")]


class _StreamAccumulator:
    """Joins SSE chunks of one streamed chat completion."""

    def __init__(self) -> None:
        self.content: list[str] = []
        self.reasoning: list[str] = []
        self.chunk_times_s: list[float] = []
        self.finish_reason: str | None = None
        self.usage: Usage | None = None
        self.model: str | None = None

    def feed(self, data: bytes, now_s: float) -> bool:
        """Take one ``data:`` payload; return True at ``[DONE]``."""
        if data == b"[DONE]":
            return True
        chunk = _json_or_fail(data)
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
    """A deadline around the body; aiohttp errors and the deadline become :class:`RequestFailed`."""
    try:
        async with asyncio.timeout(deadline_s):
            yield
    # aiohttp's own time-outs (connecting) are TimeoutErrors too: catch its errors first.
    except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError) as exc:
        raise RequestFailed("transport", _transport_detail(exc)) from exc
    except aiohttp.ClientError as exc:  # a malformed HTTP answer, a bad URL
        raise RequestFailed("protocol", type(exc).__name__) from exc
    except TimeoutError:
        raise RequestFailed("deadline", f"no complete answer within {deadline_s:.0f} s") from None


def _transport_detail(exc: BaseException) -> str:
    if isinstance(exc, aiohttp.ClientConnectorError):
        return "ConnectError"  # refused, unreachable, DNS: the server was never reached
    return type(exc).__name__  # ServerDisconnectedError, ClientPayloadError, ConnectionTimeoutError…


def _env_proxy(url: URL) -> tuple[URL | None, aiohttp.BasicAuth | None]:
    """The proxy the environment names for ``url`` (``HTTP_PROXY``, ``HTTPS_PROXY``; ``NO_PROXY``
    excludes hosts), with its credentials, or ``(None, None)``."""
    try:
        return get_env_proxy_for_url(url)
    except LookupError:
        return None, None


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    return ssl.create_default_context()  # one context for every client: building one costs ~20 ms


def _raise_for_status(response: aiohttp.ClientResponse, raw: bytes) -> None:
    if response.status < 400:
        return
    detail = response.reason or f"HTTP {response.status}"
    try:
        body = orjson.loads(raw)
        error = body.get("error", body.get("detail"))  # OpenAI style, or FastAPI's {"detail": …}
        if isinstance(error, dict) and error.get("message"):
            detail = str(error["message"])[:300]
        elif isinstance(error, str):
            detail = error[:300]
    except (ValueError, AttributeError):
        pass
    raise RequestFailed("status", detail, status=response.status,
                        retry_after_s=_retry_after_s(response.headers.get("Retry-After")))


def _retry_after_s(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:  # an HTTP date: not worth parsing, the backoff covers it
        return None


def _json_or_fail(raw: bytes) -> dict[str, Any]:
    try:
        data = orjson.loads(raw)
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
