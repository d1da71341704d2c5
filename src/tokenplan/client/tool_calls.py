"""The tool calls of a chat answer, validated at the client boundary and kept as OpenAI writes them.

A model given ``tools`` (an OpenAI Batch line's body sends them per row) may answer with calls
instead of, or besides, text: ``choices[0].message.tool_calls``, a list of ``{"id", "type":
"function", "function": {"name", "arguments"}}`` with ``arguments`` a JSON text (OpenAI API
reference, chat completion object), usually with ``finish_reason: "tool_calls"`` (vLLM answers a
named or ``required`` ``tool_choice`` with ``stop``). The calls are the answer, so they are kept on
the stored assistant turn (:meth:`ToolCall.as_message`) and exported with it.

Accepted beyond the reference: ``arguments`` as a JSON object (Hugging Face TGI's messages API
sends it so), stored as its JSON text; ``null`` arguments, stored as ``""``; no ``id`` (the stored
call then has none) and no ``type`` (``"function"``, the only type). ``tool_calls: []`` or
``null`` (vLLM sends ``[]`` with every answer in words) is no call. Anything else malformed raises
:class:`ToolCallError` naming the field (``choices[0].message.tool_calls…`` or ``delta.tool_calls…``),
which :mod:`tokenplan.client.answers` and :mod:`tokenplan.client.stream` make a ``protocol``
failure (both prefixes are :data:`~tokenplan.client.answers.MALFORMED`), retried like any
malformed answer.

A streamed answer carries each call in pieces (``choices[0].delta.tool_calls``, each entry with
the ``index`` of the call it adds to); :class:`ToolCallDeltas` joins them as the OpenAI Python SDK
does (``openai/lib/streaming/_deltas.py``, ``accumulate_delta``): text fields (``id``,
``function.name``, ``function.arguments``) are concatenated in arrival order, ``type`` replaced,
calls ordered by ``index``; an ``id`` repeated whole in a later piece is the same id (joined,
``call_1call_1`` no longer names the call a tool turn answers), and an empty one is none.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson


class ToolCallError(ValueError):
    """A ``tool_calls`` field of another shape; the message names the field."""


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One call of an answer: ``name`` the function's, ``arguments`` its JSON text as the model
    wrote it (not parsed: a model's malformed arguments are what it said), ``id`` the server's
    (``None`` where it gave none), ``type`` ``"function"`` unless the server said otherwise."""

    id: str | None
    name: str
    arguments: str
    type: str = "function"

    def as_message(self) -> dict[str, Any]:
        """The call as an OpenAI chat message carries it: ``{"id", "type", "function": {"name",
        "arguments"}}`` (no ``id`` key where the server gave none)."""
        call: dict[str, Any] = {} if self.id is None else {"id": self.id}
        call["type"] = self.type
        call["function"] = {"name": self.name, "arguments": self.arguments}
        return call

    def redacted(self, text: Callable[[str], str]) -> ToolCall:
        """The call with ``text`` applied to its texts (a client's secrets removed)."""
        return ToolCall(None if self.id is None else text(self.id), text(self.name), text(self.arguments), self.type)


def _text(value: Any, where: str, *, required: bool = False) -> str | None:
    if value is None and not required:
        return None
    if not isinstance(value, str):
        raise ToolCallError(f"{where} is {type(value).__name__}, not a string")
    return value


def _arguments(value: Any, where: str) -> str:
    """``arguments`` as JSON text: a string as it is, an object or list (TGI) as its JSON."""
    if value is None or isinstance(value, str):
        return value or ""
    if not isinstance(value, (dict, list)):
        raise ToolCallError(f"{where} is {type(value).__name__}, not a string or an object")
    try:
        return orjson.dumps(value).decode()
    except orjson.JSONEncodeError:  # nested past orjson's 254 levels
        raise ToolCallError(f"{where} is nested too deep to store") from None


def parse_tool_calls(message: Mapping[str, Any]) -> tuple[ToolCall, ...]:
    """``message["tool_calls"]`` of a whole answer → its calls (empty: none).

    Raises:
        ToolCallError: naming the field, for a list or call of another shape.
    """
    calls = message.get("tool_calls")
    where = "choices[0].message.tool_calls"
    if calls is None:
        return ()
    if not isinstance(calls, list):
        raise ToolCallError(f"{where} is {type(calls).__name__}, not a list")
    out = []
    for i, call in enumerate(calls):
        at = f"{where}[{i}]"
        if not isinstance(call, dict) or not isinstance(call.get("function"), dict):
            raise ToolCallError(f"{at} is not an object with a 'function' object")
        function = call["function"]
        name = _text(function.get("name"), f"{at}.function.name", required=True) or ""
        if not name.strip():
            raise ToolCallError(f"{at}.function.name is {'empty' if not name else 'blank'}")
        kind = _text(call.get("type"), f"{at}.type") or "function"
        arguments = _arguments(function.get("arguments"), f"{at}.function.arguments")
        out.append(ToolCall(_text(call.get("id"), f"{at}.id") or None, name, arguments, kind))  # "": none
    return tuple(out)


class ToolCallDeltas:
    """The tool calls of one streamed answer, joined from its ``delta.tool_calls`` pieces."""

    def __init__(self) -> None:
        self._calls: dict[int, dict[str, Any]] = {}  # index → {"id", "type", "name", "arguments"}

    def feed(self, pieces: Any) -> bool:
        """Take one chunk's ``delta.tool_calls`` (``None``: none); return whether it held a piece of
        a call (text of its id, name or arguments), which, like answer text, marks a chunk's arrival
        for TTFT and ITL.

        Raises:
            ToolCallError: naming the field, for a piece of another shape.
        """
        if pieces is None:
            return False
        if not isinstance(pieces, list):
            raise ToolCallError(f"delta.tool_calls is {type(pieces).__name__}, not a list")
        return any([self._take(piece) for piece in pieces])  # a list: every piece taken

    def _take(self, piece: Any) -> bool:
        if not isinstance(piece, dict):
            raise ToolCallError("delta.tool_calls[] is not an object")
        index = piece.get("index")
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            raise ToolCallError(f"delta.tool_calls[].index is {index!r}, not a call's index")
        function = piece.get("function") or {}
        if not isinstance(function, dict):
            raise ToolCallError("delta.tool_calls[].function is not an object")
        call_id = _text(piece.get("id"), "delta.tool_calls[].id")
        kind = _text(piece.get("type"), "delta.tool_calls[].type")
        name = _text(function.get("name"), "delta.tool_calls[].function.name") or ""
        arguments = _arguments(function.get("arguments"), "delta.tool_calls[].function.arguments")
        call = self._calls.setdefault(index, {"id": None, "type": "function", "name": "", "arguments": ""})
        if call_id and call_id != call["id"]:  # a server that repeats the id in each piece: one id
            call["id"] = (call["id"] or "") + call_id
        call["type"] = kind or call["type"]
        call["name"] += name
        call["arguments"] += arguments
        return bool(call_id or name or arguments)

    def calls(self) -> tuple[ToolCall, ...]:
        """The joined calls, ordered by index.

        Raises:
            ToolCallError: for a call whose pieces named no function.
        """
        out = []
        for index in sorted(self._calls):
            call = self._calls[index]
            if not call["name"].strip():
                raise ToolCallError(f"delta.tool_calls: the call at index {index} names no function")
            out.append(ToolCall(call["id"], call["name"], call["arguments"], call["type"]))
        return tuple(out)
