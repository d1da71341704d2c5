"""Credentials: the API key a command sends, the secrets an endpoint URL carries, and the one
redaction every file, table and report goes through.

The key is read from the environment (never from a flag): both ``generate`` and ``bench`` take
``--api-key-env VAR``; without it the key is ``$OPENAI_API_KEY`` when that is set (the OpenAI SDK's
and ``vllm bench serve``'s variable), and a local server needs none.

What a run holds that must never reach a file, a table, an error line or a report
(:class:`Redactor`):

- the API key (sent as ``Authorization: Bearer <key>``);
- an endpoint's ``user:password@``: the password as written and percent-decoded, and the
  ``Basic`` token sent for it, ``base64("user:password")`` (RFC 7617 §2);
- an endpoint's query-string values whose *name* looks like a credential (:data:`KEY_NAME`:
  ``key``, ``api_key``, ``access_token``, ``sig``, ``X-Amz-Signature``, ``code``…), as written and
  decoded, and bare query parts of key length (``?TOKEN``: a key passed without a name; a short
  one such as ``?debug`` is a flag). Other query values
  (``api-version=2024-02-01``) are configuration, not credentials:
  replacing them inside stored answers would rewrite the data (a date in a model's answer).
  Printed and stored endpoint URLs mask *every* query value (:func:`display_url`), so no value,
  whatever its name, is shown.

Secrets shorter than :data:`MIN_SECRET_CHARS` are not replaced inside texts: replacing ``"ab"``
everywhere would rewrite ordinary words of every answer, and so short a value guards nothing.
"""

from __future__ import annotations

import base64
import json
import os
import re
from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import quote, quote_plus, unquote_plus

from yarl import URL

from tokenplan.errors import InputError

DEFAULT_API_KEY_ENV = "OPENAI_API_KEY"  # read when set; unset is fine (local servers need no key)
MASK = "***"
MIN_SECRET_CHARS = 4
# A bare query part (``?TOKEN``) is searched for inside texts only from this length: keys run
# longer (OpenAI's ``sk-…`` 51 characters, Hugging Face's ``hf_…`` 37), while a short bare part is
# a flag (``?debug``, ``?beta``) whose replacement would rewrite every answer that says the word
# (a break-it pass: "debug answer" stored as "*** answer"). Shown URLs mask it whatever its length.
MIN_BARE_SECRET_CHARS = 16
# Query parameter names that carry credentials: Google's ``key``, ``api_key``/``api-key``, OAuth's
# ``access_token``, Azure SAS ``sig``, AWS presigned ``X-Amz-Signature``/``X-Amz-Credential``/
# ``X-Amz-Security-Token``, Azure Functions ``code``, ``password``, ``secret``, ``auth``, ``session``.
KEY_NAME = re.compile(r"(?i)key|token|secret|pass|pwd|auth|sig|credential|session|code")
# "Bearer <token>" / "Basic <token>" in a server's error text (the header echoed back), whatever the token.
_AUTH_SCHEME = re.compile(r"(?i)\b(bearer|basic)\s+[^\s\"',;}\]]+")
# ``;name=value`` parameters of a path segment (RFC 3986 §3.3), where a gateway may take a token
# (``/v1;token=abc``; a break-it pass found it stored as written): masked when shown, and searched
# for in texts where the name is a credential's (:data:`KEY_NAME`).
_PATH_PARAM = re.compile(r";([^/;=?#]*)=([^/;?#]*)")
# user:password@ in any URL inside a message (a proxy or library error naming the URL it failed on).
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@]*@")


def api_key_from_env(name: str | None) -> str | None:
    """The API key held by the environment variable ``name``.

    Args:
        name: the variable ``--api-key-env`` names; ``None`` reads ``$OPENAI_API_KEY`` if set.

    Returns:
        The key, or ``None`` when ``name`` is ``None`` and ``$OPENAI_API_KEY`` is unset or empty.

    Raises:
        InputError: ``name`` is given but that variable is unset or empty, or the key holds a
            control character (CR, LF, …) that no HTTP header may carry.
    """
    if name is None:
        return _header_safe(os.environ.get(DEFAULT_API_KEY_ENV) or None, DEFAULT_API_KEY_ENV)
    key = os.environ.get(name) or None
    if key is None:
        raise InputError(
            "--api-key-env",
            name,
            "the name of a set, non-empty environment variable holding the API key "
            f"(${name} is unset or empty; leave --api-key-env out "
            "for a server that needs no key)",
        )
    return _header_safe(key, name)


def _header_safe(key: str | None, name: str) -> str | None:
    """``key`` when it can be sent in the ``Authorization`` header: no CR, LF or other control
    character (RFC 9110 §5.5 field values; aiohttp raises on CR/LF in a header rather than send
    it). A key read with ``$(cat key.txt)``-style quoting often ends in one. The message names the
    variable and where the character is, never the key."""
    if key is None:
        return None
    bad = next((i for i, c in enumerate(key) if ord(c) < 32 or ord(c) == 127), None)
    if bad is None:
        return key
    raise InputError(
        "--api-key-env",
        name,
        f"a variable whose value has no line break or other control character (${name} has "
        f"U+{ord(key[bad]):04X} at character {bad + 1} of {len(key)}; the key is not shown)",
    )


def basic_token(url: URL) -> str | None:
    """``base64("user:password")`` for a URL with ``user:password@`` (RFC 7617 §2, UTF-8), else None."""
    if url.user is None:
        return None
    return base64.b64encode(f"{url.user}:{url.password or ''}".encode()).decode("ascii")


def display_url(url: str) -> str:
    """``url`` as it may be printed and stored: ``scheme://host:port/path``, no ``user:password@``,
    no trailing slash, no fragment, every query value replaced by ``***`` and so is a bare query
    part, which may be a key passed without a name (``http://u:p@h:8000/v1/?key=abc&v=1&TOKEN`` →
    ``http://h:8000/v1?key=***&v=***&***``); a path parameter's value too (``/v1;token=***``)."""
    try:
        parsed = URL(url)
        query = parsed.raw_query_string
        base = str(parsed.with_user(None).with_query(None).with_fragment(None)).rstrip("/")
    except (ValueError, TypeError):  # not a URL yarl can parse: cut userinfo, query and fragment by hand
        head, _, rest = url.partition("?")
        query = rest.partition("#")[0]
        base = _USERINFO.sub(r"\1", head.partition("#")[0]).rstrip("/")
    base = _PATH_PARAM.sub(lambda m: f";{m.group(1)}={MASK}", base)
    if not query:
        return base
    parts = [part.partition("=") for part in query.split("&") if part]
    return base + "?" + "&".join(f"{name}={MASK}" if equals else MASK for name, equals, _ in parts)


def url_problem(url: str) -> str | None:
    """Why ``url`` cannot be an endpoint (not http(s), no host, a port that is no number), or None."""
    try:
        parsed = URL(url)
    except ValueError as problem:
        return str(problem)
    if parsed.scheme not in ("http", "https"):
        return "the scheme must be http or https"
    if not parsed.host:
        return "no host"
    try:
        parsed.port  # noqa: B018 - a port that is not a number raises here
    except ValueError as problem:
        return str(problem)
    return None


def url_secrets(url: str) -> list[str]:
    """The secrets ``url`` carries: its password (as written and decoded), its Basic token, the
    user where no password follows it (``https://TOKEN@host``, a token in the user position), and
    the values of credential-named query and path parameters (:data:`KEY_NAME`; as written and decoded) and
    bare query parts of key length (``?TOKEN``, :data:`MIN_BARE_SECRET_CHARS`; as written and
    decoded)."""
    try:
        parsed = URL(url)
        found = [parsed.password, parsed.raw_password, basic_token(parsed)]
        if parsed.password is None:  # ``https://TOKEN@host``: a bare token in the user position
            found += [parsed.user, parsed.raw_user]
        raw_pairs = [part.partition("=") for part in parsed.raw_query_string.split("&") if part]
        found += [value for name, _, value in raw_pairs if KEY_NAME.search(name)]
        found += [value for name, value in parsed.query.items() if KEY_NAME.search(name)]
        path_values = [value for name, value in _PATH_PARAM.findall(parsed.raw_path) if KEY_NAME.search(name)]
        found += path_values + [unquote_plus(v) for v in path_values]  # ``/v1;token=…``, as written and decoded
        # and as the client sends them: the decoded query re-encoded (OpenAIClient), which is
        # neither form above for a key holding "+", "/" and "=" ("?key=Ab+Cd/Ef==" goes out as
        # "key=Ab+Cd/Ef%3D%3D" and was stored where a server echoed it; a break-it pass)
        sent_pairs = [part.partition("=") for part in URL("/").with_query(parsed.query).raw_query_string.split("&")]
        found += [value for name, _, value in sent_pairs if KEY_NAME.search(name)]
        # a bare token also where base64 padding made it look like ``name=value`` ("?QWxh…ZQ==" is
        # name "QWxh…ZQ", value "="): its name is the token but its "=" padding, in every form sent
        bare = [
            name
            for name, equals, value in raw_pairs
            if len(name) >= MIN_BARE_SECRET_CHARS and (not equals or not unquote_plus(value).strip("="))
        ]
        found += bare + [
            unquote_plus(name) for name in bare
        ]  # ``?TOKEN``: a key without a name, as written and decoded
    except (ValueError, TypeError):
        return []  # refused as an endpoint before anything is sent; display_url masks it in the message
    return [s for s in found if s]


def short_bare_parts(url: str) -> list[str]:
    """The bare query parts of ``url`` shorter than :data:`MIN_BARE_SECRET_CHARS` (``?QSECRET789``),
    as written and decoded: a short key or a flag, so :class:`Redactor` masks them only where they
    stand as a query part (after ``?`` or ``&``) in a text, as a server echoing the request's path
    writes them (``/v1/chat/completions?QSECRET789=``; a new-user pass found that stored and
    printed), never as a word of an answer."""
    try:
        raw = URL(url).raw_query_string
    except (ValueError, TypeError):
        return []
    names = [n for n, equals, v in (p.partition("=") for p in raw.split("&") if p) if not equals or not v.strip("=")]
    short = [n for n in names if MIN_SECRET_CHARS <= len(n) < MIN_BARE_SECRET_CHARS]
    return list(dict.fromkeys(short + [unquote_plus(n) for n in short]))


def secret_forms(secret: str) -> set[str]:
    """The forms a server may echo ``secret`` in: as it is; JSON-escaped, also with ``/`` as ``\\/``
    (PHP's and some Java encoders' default) and with every character as ``\\uXXXX`` (either case);
    percent-encoded as a URL path or query value would carry it (``quote``, ``quote_plus``, either
    hex case). A break-it pass found the key in ``errors.jsonl`` and ``bench.json`` in these forms."""
    escaped = json.dumps(secret)[1:-1]
    forms = {secret, escaped, escaped.replace("/", "\\/")}
    forms.update("".join(f"\\u{ord(c):{case}}" for c in secret) for case in ("04x", "04X"))
    for encoded in (quote(secret, safe=""), quote(secret), quote_plus(secret, safe="")):
        forms.update((encoded, re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), encoded)))
    return forms


class Redactor:
    """Removes a run's secrets from what it writes and prints.

    Args:
        secrets: the texts to remove (API key, passwords, tokens); each is also removed in its JSON-
            escaped form. Empty texts and texts shorter than :data:`MIN_SECRET_CHARS` are ignored.

    :meth:`text` replaces only the secrets themselves (for answers: their words stay as they are);
    :meth:`message` also masks any ``Bearer``/``Basic`` token and any URL's ``user:password@``
    (for error texts, where a server echoes headers it was sent).
    """

    def __init__(self, secrets: Iterable[str | None] = (), query_parts: Iterable[str] = ()):
        forms: set[str] = set()
        for secret in secrets:
            if secret and len(secret) >= MIN_SECRET_CHARS:
                forms.update(secret_forms(secret))
        self.secrets = tuple(sorted(forms, key=len, reverse=True))  # longest first: a secret inside another
        # short bare query parts (:func:`short_bare_parts`), masked only where they stand as a
        # query part: after ``?`` or ``&`` as written, percent-encoded (``%3F``, ``%26``) or
        # JSON-escaped (``\u0026``), and not followed by a character a query name goes on with
        # (a letter, digit, ``-``, ``_``, ``~``, or ``%`` but for an encoded ``=``, ``&``, ``#`` or
        # space); each in every form a server may echo it
        parts = sorted({f for part in query_parts for f in secret_forms(part)}, key=len, reverse=True)
        self._query_parts = (
            re.compile(
                r"(?:(?<=[?&])|(?<=%3[Ff])|(?<=%26)|(?<=\\u0026)|(?<=\\u003[Ff]))(?:"
                + "|".join(map(re.escape, parts))
                + r")(?![A-Za-z0-9_~-]|%(?!3[Dd]|26|23|20))"
            )
            if parts
            else None
        )

    @classmethod
    def for_endpoints(cls, endpoints: Sequence[str], api_key: str | None) -> Redactor:
        """Every secret of a run over ``endpoints`` with ``api_key`` (see the module docstring)."""
        return cls(
            [api_key, *(s for url in endpoints for s in url_secrets(url))],
            [p for url in endpoints for p in short_bare_parts(url)],
        )

    def __bool__(self) -> bool:
        return bool(self.secrets) or self._query_parts is not None

    def text(self, text: str) -> str:
        """``text`` with every secret replaced by ``***``, and a short bare query part where it
        stands as a query part; nothing else changes."""
        for secret in self.secrets:
            if secret in text:
                text = text.replace(secret, MASK)
        if self._query_parts is not None:
            text = self._query_parts.sub(MASK, text)
        return text

    def message(self, text: str) -> str:
        """:meth:`text`, every ``Bearer``/``Basic`` token and URL ``user:password@`` masked, and a
        secret's first characters at the very end (an excerpt cut inside it, ``…`` after) too."""
        text = _USERINFO.sub(r"\1", self.text(text))
        text = _AUTH_SCHEME.sub(lambda m: f"{m.group(1)} {MASK}", text)
        body = text.rstrip("…")
        for secret in self.secrets:
            for cut in range(len(secret) - 1, MIN_SECRET_CHARS - 1, -1):
                if body.endswith(secret[:cut]):
                    return body[:-cut] + MASK + text[len(body) :]
        return text

    def json(self, value: Any) -> Any:
        """A copy of the JSON-like ``value`` with :meth:`message` applied to every string (keys too)."""
        if isinstance(value, str):
            return self.message(value)
        if isinstance(value, dict):
            return {self.json(k): self.json(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.json(v) for v in value]
        return value


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with each of ``secrets`` and any ``Bearer <token>``/``Basic <token>`` replaced by
    ``***`` (:meth:`Redactor.message`): servers echo request headers in error messages."""
    return Redactor(secrets).message(text)
