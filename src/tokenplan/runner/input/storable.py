"""Which values a stored record may carry: those orjson writes back exactly as they were read.

Every record of a run directory is written with orjson (:mod:`tokenplan.runner.store.appendlog`), and
what a row or ``--extra-body`` brings in is stored in it (a row's other fields, an assistant
turn's ``tool_calls``, a Batch line's sampling fields, ``extra_body`` under ``sampling``).
orjson 3.13 refuses some values outright and rewrites others silently (measured with it):

- containers nested more than :data:`MAX_RECORD_DEPTH` (254) deep: ``Recursion limit reached``
  (254 nested lists serialize, 255 raise);
- text with a lone UTF-16 surrogate (``"\\ud800"`` in JSON): ``str is not valid UTF-8``;
- integers outside -2^63 … 2^64-1: ``Integer exceeds 64-bit range``;
- ``NaN`` and ``±Infinity`` (Python's ``json`` reads them): written as ``null``, the value lost;
- ``bytes``, ``Decimal``, sets, keys that are not text: ``TypeError``.

A value that would meet any of these is refused before anything is sent (:func:`check_storable`
and :func:`check_fields` raise :class:`Unstorable` naming where it is, the value and what is
allowed), so a record can never fail to be written: a bad row is one reject line, not a crash
that every rerun repeats.
Integers are held to the signed 64-bit range -2^63 … 2^63-1, the widest the Parquet export
(``int64``) and most JSON readers keep exact. Dates and times (Parquet timestamp columns) are
allowed: orjson writes them as RFC 3339 text (a time of day only without a time zone, as orjson
requires).
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Mapping
from typing import Any

MAX_RECORD_DEPTH = 254  # orjson 3.13: 254 nested containers serialize, 255 raise "Recursion limit reached"
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
_SCALARS = (bool, type(None), datetime.datetime, datetime.date, datetime.time)
_SHOWN_CHARS = 60  # how much of a refused value the message shows


class Unstorable(ValueError):
    """A value a record cannot hold as it is; the message is one line naming where and why."""


def check_storable(value: Any, where: str, enclosing: int) -> None:
    """Refuse ``value`` unless orjson stores it exactly (see the module docstring).

    Args:
        value: a decoded JSON value (dicts, lists, text, numbers, booleans, null) or a Parquet
            row's value (also tuples, dates and times).
        where: its name for the message, e.g. ``"fields"`` or ``"messages[1]"``; the path inside
            it is added (``meta.tags[3]``).
        enclosing: how many containers enclose ``value`` in the deepest place it is stored
            (e.g. 1 for a dict that is one key of the record), so nesting is counted as orjson
            counts it: ``enclosing`` + the value's own depth ≤ :data:`MAX_RECORD_DEPTH`.

    Raises:
        Unstorable: the first value that cannot be stored, by path.
    """
    try:
        _walk(value, enclosing)
    except _Refused as refused:
        path = where + "".join(reversed(refused.path))
        if refused.why == "depth":
            allowed = MAX_RECORD_DEPTH - enclosing
            raise Unstorable(
                f"{_short(where)}: nested more than {allowed} levels deep (where a record holds "
                f"it, orjson writes at most {MAX_RECORD_DEPTH} levels in all)"
            ) from None
        raise Unstorable(f"{_short(path)}: {refused.why}") from None


class _Refused(Exception):
    """Raised inside :func:`_walk`; each level it passes adds its key to ``path`` (built only
    for a refused value, so a good row costs no path strings)."""

    def __init__(self, why: str):
        super().__init__(why)
        self.why = why
        self.path: list[str] = []  # the keys and indexes from the refused value up, innermost first


def _walk(item: Any, depth: int) -> None:
    """Check ``item``, enclosed by ``depth`` containers; recursion stops at MAX_RECORD_DEPTH."""
    if isinstance(item, str):
        if not item.isascii():
            _text_problem(item)
    elif isinstance(item, dict):
        if depth >= MAX_RECORD_DEPTH:
            raise _Refused("depth")
        for key, child in item.items():
            if not isinstance(key, str):
                raise _Refused(f"key {_shown(key)} is a {type(key).__name__}, not text")
            try:
                if not key.isascii():
                    _text_problem(key)
                _walk(child, depth + 1)
            except _Refused as refused:
                refused.path.append(f".{key}")
                raise
    elif isinstance(item, (list, tuple)):
        if depth >= MAX_RECORD_DEPTH:
            raise _Refused("depth")
        for index, child in enumerate(item):
            try:
                _walk(child, depth + 1)
            except _Refused as refused:
                refused.path.append(f"[{index}]")
                raise
    elif isinstance(item, bool) or item is None:
        return
    elif isinstance(item, int):
        if not INT64_MIN <= item <= INT64_MAX:
            raise _Refused(f"integer {_shown(item)} is outside the 64-bit range -2^63 … 2^63-1 (store it as text)")
    elif isinstance(item, float):
        if not math.isfinite(item):
            raise _Refused(f"{item!r} is not a finite number (JSON has no NaN or Infinity; it would be stored as null)")
    elif isinstance(item, datetime.time) and item.tzinfo is not None:
        raise _Refused(f"a time of day with a time zone ({_shown(item)}) cannot be stored as JSON")
    elif not isinstance(item, _SCALARS):
        raise _Refused(
            f"a {type(item).__name__} value ({_shown(item)}) cannot be stored as JSON "
            "(allowed: objects, lists, text, numbers, true/false, null)"
        )


def _text_problem(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as problem:
        raise _Refused(
            f"lone UTF-16 surrogate {text[problem.start]!r} at character {problem.start} (not valid Unicode)"
        ) from None


def check_fields(fields: Mapping[str, Any], prefix: str, enclosing: int) -> None:
    """:func:`check_storable` for each key (text) and value of ``fields``, named ``prefix + key``;
    ``enclosing`` counts the containers around each value (e.g. 2 for a row's other fields:
    the record, then its ``fields`` object).

    Raises:
        Unstorable: the first key or value that cannot be stored.
    """
    for key, value in fields.items():
        if not isinstance(key, str):
            raise Unstorable(f"{_short(prefix)}: key {_shown(key)} is a {type(key).__name__}, not text")
        try:
            _text_problem(key)
        except _Refused as refused:
            raise Unstorable(f"{_short(prefix + key)}: {refused.why}") from None
        check_storable(value, prefix + key, enclosing)


def _short(path: str) -> str:
    """A path for a one-line message: characters that are not printable (line breaks, lone
    surrogates) escaped, and only its first and last 50 characters when longer than 120."""
    path = "".join(c if c.isprintable() else repr(c)[1:-1] for c in path)
    return path if len(path) <= 120 else f"{path[:50]}…{path[-50:]}"


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + "…"
