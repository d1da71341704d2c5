"""One OpenAI-compatible chat request → one :class:`Completion`.

The client speaks ``POST {base_url}/chat/completions`` (``base_url`` follows the OpenAI SDK
convention, e.g. ``http://127.0.0.1:8000/v1``) over one :class:`aiohttp.ClientSession` whose
connection pool is sized by the caller: httpx and aiohttp default to 100 connections, a silent cap
on concurrency (vLLM #7241). There are no hidden retries: one :meth:`OpenAIClient.chat` call is one
HTTP request, and every failure surfaces as :class:`RequestFailed` for the caller to judge
(:mod:`tokenplan.client.retry`). (aiohttp resends an idempotent ``GET`` once when a reused
keep-alive connection turns out to be closed, RFC 9112 §9.3.1; that touches only the health check,
never a chat ``POST``.) Nor are redirects followed: a 301/302 turns the ``POST`` into a ``GET``
(RFC 9110 §15.4.2), which the server then answered 404, and a 307 to another host sent every
request there while the records named the first; a 3xx is a ``status`` failure whose detail
names where it points and the ``--endpoint`` to give (:func:`redirect_detail`).

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
import dataclasses
import functools
import ssl
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

import aiohttp
import orjson
from aiohttp.helpers import get_env_proxy_for_url
from yarl import URL

from tokenplan.client.answer_size import answer_bytes_cap
from tokenplan.client.answers import (
    Completion,
    RequestFailed,
    Timings,
    Usage,
    answer_tokens_cap,
    error_message,
    json_object,
    parse_whole,
)
from tokenplan.client.auth import Redactor, basic_token, display_url
from tokenplan.client.sse import SSELines
from tokenplan.client.stream import StreamAccumulator

__all__ = ["Completion", "OpenAIClient", "RequestFailed", "Timings", "Usage"]
_SSELines = SSELines  # the name the SSE tests import


class OpenAIClient:
    """Async client for one OpenAI-compatible server.

    The connection pool opens with the first request, in that request's event loop, and serves
    that loop only.

    Args:
        base_url: the server's API root, e.g. ``http://host:8000/v1``.
        max_connections: connection pool size; size it to the requests you keep in flight.
        api_key: sent as ``Authorization: Bearer``; never logged. Without it, ``user:password@``
            in ``base_url`` is sent as HTTP basic auth; with it, the URL's credentials are not sent.
        connect_timeout_s: limit on opening one connection (seconds).
    """

    def __init__(
        self, base_url: str, *, max_connections: int, api_key: str | None = None, connect_timeout_s: float = 10.0
    ):
        url = URL(base_url.rstrip("/"))
        self.base_url = display_url(base_url)  # no credentials, query values masked: safe to print and store
        headers = {"Content-Type": "application/json"}
        token = basic_token(url)
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        elif token is not None:  # http://user:password@host/v1: HTTP basic auth, as curl does
            # RFC 7617: "Basic " + base64("user:password") in UTF-8 (aiohttp.BasicAuth is deprecated).
            headers["Authorization"] = f"Basic {token}"
        self._headers, self._max_connections = headers, max_connections
        # Texts a server might echo back (the key, a password or Basic token, a query-string key)
        # are removed from every failure and every answer this client returns.
        self.redactor = Redactor.for_endpoints([base_url], api_key)
        # The credentials travel in the header only; the query string (``?api-version=…``,
        # ``?key=…``) goes with every request, as the OpenAI SDK's ``default_query`` does.
        query = url.query
        url = url.with_user(None).with_query(None).with_fragment(None)
        # Only connecting is bounded here (aiohttp's default is a 5-minute cap on the whole
        # request); the whole request is bounded by the caller's deadline, as a 30k-token answer
        # may rightly take half an hour.
        self._timeout = aiohttp.ClientTimeout(total=None, connect=None, sock_connect=connect_timeout_s, sock_read=None)
        self._timeouts: dict[float, aiohttp.ClientTimeout] = {}  # per deadline: total = the deadline
        self._session: aiohttp.ClientSession | None = None  # opened in the loop of the first request
        self._chat_url = (url / "chat/completions").with_query(query)
        self._models_url = (url / "models").with_query(query)
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
            # from 4 to 5,000 in flight. No cookie jar: nothing here is a browser session. One
            # connection beyond the requests in flight is kept for GET /models: a health probe
            # waited behind busy chat requests for a connection and timed out on a live server
            # (a break-it pass: the stall watch, client.stall, took out a healthy, busy endpoint).
            connector = aiohttp.TCPConnector(
                limit=self._max_connections + 1,
                limit_per_host=self._max_connections + 1,
                keepalive_timeout=60.0,
                ssl=_ssl_context(),
            )
            self._session = aiohttp.ClientSession(
                connector=connector, headers=self._headers, timeout=self._timeout, cookie_jar=aiohttp.DummyCookieJar()
            )
        return self._session

    async def models(self, *, deadline_s: float = 10.0) -> list[str]:
        """The model names the server serves (``GET /models``); used as the health check.

        Raises:
            RequestFailed: the server did not answer with a model list within ``deadline_s``.
        """
        async with _failures_as_request_failed(deadline_s, self.redactor):
            async with self._http().get(
                self._models_url, proxy=self._proxy, proxy_auth=self._proxy_auth, allow_redirects=False
            ) as response:
                raw = await _read_capped(response, MODELS_BYTES_CAP)
            _raise_for_status(response, raw)
            data = json_object(raw).get("data")
            if not isinstance(data, list):
                raise RequestFailed("protocol", "GET /models answered without a 'data' list")
        return [str(m.get("id")) for m in data if isinstance(m, dict)]

    async def chat(
        self, body: Mapping[str, Any], *, deadline_s: float, stream: bool = False, max_bytes: int | None = None
    ) -> Completion:
        """Send one chat completion request and wait for the whole, finished answer.

        Args:
            body: the request JSON (``model``, ``messages``, sampling fields…); ``stream`` and
                ``stream_options`` are set here.
            deadline_s: limit on the whole request, from sending to the last byte (seconds).
            stream: stream the answer (SSE) to measure TTFT and ITL.
            max_bytes: cap on the answer body (bytes); ``None``: derived from ``body["max_tokens"]``
                (:func:`~tokenplan.client.answer_size.answer_bytes_cap`), 1 MiB without it.

        Raises:
            RequestFailed: on any failure, including an answer that is malformed or unfinished
                (``protocol``) or larger than ``max_bytes`` (``oversize``); the request was sent at
                most once. Texts from the server have the API key and ``Bearer`` tokens removed.

        Returns:
            The completion, with every secret this client holds (API key, URL password, Basic
            token, credential-named query values) replaced by ``***`` in its content, reasoning,
            model name and tool calls.
        """
        if max_bytes is None:
            tokens = body.get("max_tokens")
            max_bytes = answer_bytes_cap(tokens if isinstance(tokens, int) else 0)
        # The deadline is aiohttp's own total timeout (one timer per request, which aiohttp sets
        # up anyway) and the failures are mapped inline: an asyncio.timeout and an async context
        # manager around every request cost ~10% of the client's CPU per request
        # (benchmarks/client_overhead.py).
        timeout = self._timeouts.get(deadline_s)
        if timeout is None:
            timeout = self._timeouts[deadline_s] = aiohttp.ClientTimeout(
                total=deadline_s, connect=None, sock_connect=self._timeout.sock_connect, sock_read=None
            )
        try:
            if stream:
                done = await self._chat_streamed(body, max_bytes, timeout)
            else:
                done = await self._chat_whole(body, max_bytes, timeout)
        except Exception as exc:
            failure = _as_request_failed(exc, deadline_s, self.redactor)
            if failure is None:
                raise
            raise failure from (exc if isinstance(exc, aiohttp.ClientError) else None)
        return self._redacted(done)

    def _redacted(self, done: Completion) -> Completion:
        """``done`` with this client's secrets removed from its texts (a server that echoes the
        Authorization header or the URL into its answer): the answer is stored and exported."""
        if not self.redactor:
            return done
        text = self.redactor.text
        return dataclasses.replace(
            done,
            content=text(done.content),
            reasoning=None if done.reasoning is None else text(done.reasoning),
            model=None if done.model is None else text(done.model),
            tool_calls=tuple(call.redacted(text) for call in done.tool_calls),
        )

    def _post(self, payload: bytes, timeout: aiohttp.ClientTimeout) -> Any:
        """The chat ``POST`` of ``payload`` (an async context manager of the response), through the
        proxy where set; a redirect is answered, not followed (module docstring)."""
        session, auth = self._http(), self._proxy_auth
        return session.post(
            self._chat_url, data=payload, proxy=self._proxy, proxy_auth=auth, timeout=timeout, allow_redirects=False
        )

    async def _chat_whole(self, body: Mapping[str, Any], max_bytes: int, timeout: aiohttp.ClientTimeout) -> Completion:
        payload = orjson.dumps({**body, "stream": False})
        sent_s = time.perf_counter()
        async with self._post(payload, timeout) as response:
            length = _plain_length(response)
            if length is not None and length <= max_bytes:
                raw = await response.read()  # the server said how much comes: aiohttp's fast path
            else:
                raw = await _read_capped(response, max_bytes)
        done_s = time.perf_counter()
        _raise_for_status(response, raw)
        return parse_whole(raw, Timings(sent_s, done_s), answer_tokens_cap(body))

    async def _chat_streamed(
        self, body: Mapping[str, Any], max_bytes: int, timeout: aiohttp.ClientTimeout
    ) -> Completion:
        payload = orjson.dumps({**body, "stream": True, "stream_options": {"include_usage": True}})
        acc = StreamAccumulator(answer_tokens_cap(body))
        sent_s = time.perf_counter()
        async with self._post(payload, timeout) as response:
            if response.status >= 300:  # an error or a redirect (not followed)
                _raise_for_status(response, await _read_capped(response, max_bytes))
            if response.content_type == "application/json":  # a server that ignores stream: true
                # answered whole; read as one answer, not as an SSE stream with no data line
                raw = await _read_capped(response, max_bytes)
                return parse_whole(raw, Timings(sent_s, time.perf_counter()), acc.max_tokens)
            lines, received = SSELines(), 0
            async for block in response.content.iter_any():
                now_s = time.perf_counter()  # when these bytes arrived
                received += len(block)
                if received > max_bytes:
                    raise _oversize(max_bytes)
                if any(acc.feed(data, now_s) for data in lines.feed(block)):
                    break
            else:
                for data in lines.close():
                    acc.feed(data, time.perf_counter())
        done_s = time.perf_counter()
        return acc.completion(sent_s, done_s)


def public_url(url: str) -> str:
    """``url`` as it is stored and printed (:func:`tokenplan.client.auth.display_url`)."""
    return display_url(url)


MODELS_BYTES_CAP = 16 * 2**20  # a /models list: a few KiB even for a server with many adapters


def _oversize(max_bytes: int) -> RequestFailed:
    return RequestFailed(
        "oversize", f"answer larger than {max_bytes:,} bytes (the cap; raise it with --max-answer-bytes)"
    )


def _plain_length(response: aiohttp.ClientResponse) -> int | None:
    """The body's size as the server states it, or None where it does not or where the body is
    compressed (``Content-Encoding: gzip``…): aiohttp inflates it, so its ``Content-Length``
    bounds the bytes on the wire, not the answer (a 200 KiB gzip body inflated to 200 MiB under
    a 1 MiB cap, a break-it pass); the capped read then counts the inflated bytes."""
    encoding = response.headers.get("Content-Encoding", "").strip().lower()
    return response.content_length if encoding in ("", "identity") else None


async def _read_capped(response: aiohttp.ClientResponse, max_bytes: int) -> bytes:
    """The whole body, or :class:`RequestFailed` ``oversize`` as soon as it passes ``max_bytes``."""
    length = _plain_length(response)
    if length is not None:
        if length > max_bytes:
            raise _oversize(max_bytes)
        return await response.read()  # the server said how much comes: aiohttp's fast path
    blocks, received = [], 0  # chunked: count as it arrives
    async for block in response.content.iter_any():
        received += len(block)
        if received > max_bytes:
            raise _oversize(max_bytes)
        blocks.append(block)
    return b"".join(blocks)


@contextlib.asynccontextmanager
async def _failures_as_request_failed(deadline_s: float, redactor: Redactor) -> AsyncIterator[None]:
    """A deadline around the body; aiohttp errors and the deadline become :class:`RequestFailed`,
    and every failure's texts lose the secrets of ``redactor`` and ``Bearer``/``Basic`` tokens."""
    try:
        async with asyncio.timeout(deadline_s):
            yield
    except Exception as exc:
        failure = _as_request_failed(exc, deadline_s, redactor)
        if failure is None:
            raise
        raise failure from (exc if isinstance(exc, aiohttp.ClientError) else None)


def _as_request_failed(exc: Exception, deadline_s: float, redactor: Redactor) -> RequestFailed | None:
    """``exc`` as the :class:`RequestFailed` a caller sees (secrets removed), or None for an error
    that is not a failed request (a bug: raised as it is)."""
    if isinstance(exc, RequestFailed):
        return exc.redacted(redactor.message)
    # aiohttp's own time-outs (connecting) are TimeoutErrors too: its errors first.
    if isinstance(exc, (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError)):
        return RequestFailed("transport", _transport_detail(exc))
    if isinstance(exc, aiohttp.ClientError):  # a malformed HTTP answer, a bad URL
        return RequestFailed("protocol", type(exc).__name__)
    if isinstance(exc, TimeoutError):  # the deadline: aiohttp's total timeout or asyncio.timeout
        # whole seconds from 10 s up; a sub-second deadline read "within 0 s" (a break-it pass)
        shown = f"{deadline_s:,.0f}" if deadline_s >= 10 else f"{deadline_s:.3g}"
        return RequestFailed("deadline", f"no complete answer within {shown} s")
    return None


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
    if 300 <= response.status < 400:
        detail = redirect_detail(response.status, response.headers.get("Location"), response.url)
        raise RequestFailed("status", detail, status=response.status)
    if response.status < 400:
        return
    detail = error_message(raw, response.reason or f"HTTP {response.status}")
    raise RequestFailed(
        "status", detail, status=response.status, retry_after_s=_retry_after_s(response.headers.get("Retry-After"))
    )


def redirect_detail(status: int, location: str | None, requested: URL) -> str:
    """What a ``status`` (3xx) answer to ``requested`` says, in one line: where ``location``
    points (resolved against ``requested``) and the ``--endpoint`` to give, the API root before
    the route asked (``…/v1/chat/completions`` → ``…/v1``). Credentials in ``location`` are masked
    as :class:`~tokenplan.client.auth.Redactor` masks an endpoint's (password, ``user@``,
    credential-named query values); the caller's redactor then removes its own secrets."""
    if not location:
        return f"redirected ({status}) with no Location header; redirects are not followed"
    try:
        # the fragment is never sent to a server, and may carry a token (#access_token=…): left out
        target = str(requested.join(URL(location)).with_fragment(None))
    except (ValueError, TypeError):
        target = location.partition("#")[0]
    path, mark, query = target.partition("?")
    route = next((r for r in ("/chat/completions", "/models") if path.rstrip("/").endswith(r)), None)
    if route is None:
        give = "give the API root it points to as --endpoint"
    else:
        give = f"give {path.rstrip('/')[: -len(route)]}{mark}{query} as --endpoint"
    line = f"redirected ({status}) to {target}; {give} (redirects are not followed)"
    return Redactor.for_endpoints([target], None).message(line)


def _retry_after_s(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:  # an HTTP date: not worth parsing, the backoff covers it
        return None
