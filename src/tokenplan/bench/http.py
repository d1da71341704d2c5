"""Small JSON/text requests to a server's side endpoints (``/tokenize``, ``/metrics``,
``/get_server_info``): the standard library in a worker thread, so that nothing here depends on
which HTTP library the chat client uses. Chat requests go through :mod:`tokenplan.client`.
Redirects are not followed, as the chat client follows none: urllib would send the
``Authorization`` header on to whatever host a ``Location`` names, and a ``POST /tokenize``
redirected by a 301/302 would go as a ``GET``; a 3xx is a :class:`SideRequestFailed`.
"""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlsplit

from yarl import URL

from tokenplan.client.auth import basic_token, display_url


class SideRequestFailed(Exception):
    """A side endpoint did not answer usefully.

    Attributes:
        status: the HTTP status, or ``None`` when no answer came (connection refused, timeout).
    """

    def __init__(self, url: str, detail: str, status: int | None = None):
        self.status = status
        super().__init__(f"{display_url(url)}: {detail}")  # no user:password@, no query values


def server_root(base_url: str) -> str:
    """``http://host:8000/v1`` → ``http://host:8000`` (where ``/metrics`` and ``/tokenize`` live)."""
    parts = urlsplit(base_url.rstrip("/"))
    path = parts.path[:-3] if parts.path.endswith("/v1") else parts.path
    return f"{parts.scheme}://{parts.netloc}{path}"


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Answers a 3xx with :class:`urllib.error.HTTPError` instead of following it."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)  # proxies from the environment, as urlopen's


def _fetch(url: str, body: dict[str, Any] | None, timeout_s: float, api_key: str | None) -> bytes:
    """The answer body; ``api_key`` goes as ``Authorization: Bearer``, else a ``user:password@``
    in ``url`` as ``Basic`` (as the chat client sends them), never in the request line."""
    data = None if body is None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"}
    parsed = URL(url)
    token = basic_token(parsed)
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    elif token is not None:
        headers["Authorization"] = f"Basic {token}"
    request = urllib.request.Request(str(parsed.with_user(None)), data=data, headers=headers)
    try:
        with _OPENER.open(request, timeout=timeout_s) as response:
            return response.read()
    except urllib.error.HTTPError as exc:
        moved = " (a redirect, not followed)" if 300 <= exc.code < 400 else ""
        raise SideRequestFailed(url, f"HTTP {exc.code}{moved}", exc.code) from None
    except (urllib.error.URLError, OSError) as exc:
        raise SideRequestFailed(url, type(exc).__name__) from None


async def get_text(url: str, *, timeout_s: float = 5.0, api_key: str | None = None) -> str:
    """``GET url`` → body text; ``api_key`` is sent as ``Authorization: Bearer``. Raises
    :class:`SideRequestFailed`."""
    return (await asyncio.to_thread(_fetch, url, None, timeout_s, api_key)).decode("utf-8", "replace")


async def request_json(
    url: str, body: dict[str, Any] | None = None, *, timeout_s: float = 10.0, api_key: str | None = None
) -> Any:
    """``GET url`` (``body`` None) or ``POST url`` with a JSON body → the parsed JSON answer;
    ``api_key`` is sent as ``Authorization: Bearer``.

    Raises:
        SideRequestFailed: no answer, an HTTP error status, or an answer that is not JSON.
    """
    raw = await asyncio.to_thread(_fetch, url, body, timeout_s, api_key)
    try:
        return json.loads(raw)
    except ValueError:
        raise SideRequestFailed(url, "answer is not JSON") from None
