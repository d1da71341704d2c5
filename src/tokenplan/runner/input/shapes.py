"""One input row, decoded, into a :class:`Row`: its shape, its messages, its id, its other fields.

Shapes understood (one per row; a file may mix them):

- ``conversations`` of ``{"role", "content"}`` (SpecForge) or ``{"from", "value"}`` (ShareGPT,
  roles ``human``/``gpt``/``system``);
- ``messages`` of ``{"role", "content"}`` (OpenAI chat);
- ``prompt``: one user message;
- OpenAI Batch API lines: ``{"custom_id", "body": {"messages": …, "max_tokens": …, …}}``; the
  body's sampling fields (:data:`BATCH_SAMPLING_FIELDS`) are kept as the row's per-request
  overrides (``max_completion_tokens`` is read as ``max_tokens``).

Which shape a row has is decided by the keys whose value is not null: Parquet written by Hugging
Face ``datasets`` from mixed rows holds one struct with ``from``/``value`` *and*
``role``/``content``, the unused pair null in every turn. A top-level ``system`` string
(LLaMA-Factory's ShareGPT layout) becomes the first system turn when the conversation has none.
Roles are ``system``, ``user``, ``assistant`` and ``tool`` (ShareGPT ``observation``,
``function_response``); an assistant turn's ``tool_calls`` and a tool turn's ``tool_call_id`` and
``name`` are kept. Every other top-level field of the row is kept in :attr:`Row.fields`, in order,
for the output record (training pipelines filter on them).

Every value a record will carry (the other fields, tool fields, a Batch line's sampling fields)
must be one the record can hold exactly (:mod:`tokenplan.runner.input.storable`: nesting, lone
surrogates, NaN/Infinity, integers past 64 bits); one that cannot is a :class:`RowError`, so the
row is rejected before anything is sent instead of failing when its answer is stored.

A row's id is its own ``id`` (or ``custom_id``), else the first 16 hex digits of the SHA-256 of
its normalised messages — stable across reruns. Text that is not valid Unicode (a lone UTF-16
surrogate) is a :class:`RowError` naming the field.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tokenplan.runner.input.storable import Unstorable, check_fields

ROLES = ("system", "user", "assistant", "tool")
SHAREGPT_ROLES = {
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "assistant": "assistant",
    "chatgpt": "assistant",
    "model": "assistant",
    "system": "system",
    "tool": "tool",
    "observation": "tool",
    "function_response": "tool",
}
# Request fields of an OpenAI Batch line's body honoured per row (OpenAI chat completions API, plus
# the vLLM/SGLang extensions top_k, min_p, repetition_penalty); the rest of the body is not sent.
BATCH_SAMPLING_FIELDS = (
    "max_tokens",
    "max_completion_tokens",
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "seed",
    "stop",
    "presence_penalty",
    "frequency_penalty",
    "repetition_penalty",
    "logit_bias",
    "logprobs",
    "top_logprobs",
    "response_format",
    "reasoning_effort",
    "chat_template_kwargs",
    "tools",
    "tool_choice",
)
_CONVERSATION_KEYS = ("conversations", "messages", "prompt", "body")
# Keys a shape consumes; everything else in a row is kept in Row.fields.
_SHAPE_KEYS = {
    "conversations": ("conversations", "system"),
    "sharegpt": ("conversations", "system"),
    "messages": ("messages", "system"),
    "prompt": ("prompt", "system"),
    "batch": ("body",),
}


@dataclass(frozen=True, slots=True)
class Message:
    """One chat turn; ``role`` is ``system``, ``user``, ``assistant`` or ``tool``.

    ``extra`` holds the turn's tool fields when present (``tool_calls``, ``tool_call_id``,
    ``name``), as ``(key, value)`` pairs so the message stays hashable.
    """

    role: str
    content: str
    extra: tuple[tuple[str, Any], ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """The OpenAI chat message: ``{"role", "content", **extra}``."""
        return {"role": self.role, "content": self.content, **dict(self.extra)}


@dataclass(frozen=True, slots=True)
class Row:
    """One usable input row: its id, its messages, where it came from (file, 1-based line).

    ``fields``: every other top-level field of the input row (kept in the output record);
    ``overrides``: request fields this row sets (a Batch line's sampling fields), sent over the
    job's sampling.
    """

    id: str
    messages: tuple[Message, ...]
    shape: str
    source: str
    line: int
    fields: dict[str, Any] = field(default_factory=dict)
    overrides: dict[str, Any] = field(default_factory=dict)


def calls_tools(message: Message) -> bool:
    """An assistant turn that calls tools: kept as given in ``regenerate`` (the tool turns that
    follow answer it), so only the assistant turns that answer in words are regenerated."""
    return message.role == "assistant" and any(k == "tool_calls" for k, _ in message.extra)


def unanswered_tool_call(messages: Sequence[Message]) -> str | None:
    """Why ``regenerate`` cannot send a row whole, or None: it asks the model after each user or
    tool turn and regenerates the assistant turns that answer in words, so a row whose last other
    turn is an assistant tool call has no tool result to continue from; its last question would
    be sent nowhere and the record would lose it (``runner.requests.prompt_prefixes``)."""
    kept = [m for m in messages if not (m.role == "assistant" and not calls_tools(m))]
    if kept and kept[-1].role == "assistant":
        return "the conversation ends in an assistant tool call with no tool turn answering it (regenerate asks the model after a user or tool turn)"
    return None


class RowError(ValueError):
    """A row that cannot be used; the message is the reason written to ``rejects.jsonl``."""


def parse_row(item: Any, source: str, line: int) -> Row:
    """Turn one decoded JSON object (or Parquet row) into a :class:`Row`.

    Raises:
        RowError: the shape is unknown or a field is malformed; the message names the field.
    """
    if isinstance(item, RowError):
        raise item
    if not isinstance(item, dict):
        # a list on a line: a JSON array (of rows) in a file named as JSONL (a break-it pass)
        hint = (
            " (a file holding one JSON array of rows is read as such when named .json)"
            if isinstance(item, list)
            else ""
        )
        raise RowError(f"row is a {type(item).__name__}, not a JSON object{hint}")
    for key in ("id", "custom_id"):  # a declared id that is not one must not fall back to the content hash
        value = item.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (str, int))):
            raise RowError(f"{key}: expected text or an integer, got {type(value).__name__} {str(value)[:40]}")
    shape, messages = _messages(item)
    messages = _with_system(item, messages, shape)
    if not any(m.role == "user" for m in messages):
        raise RowError(f"{shape}: no user turn")
    declared = declared_id(item)
    row_id = declared if declared is not None else content_id(messages)
    consumed = _SHAPE_KEYS[shape]
    fields = {
        k: v
        for k, v in item.items()
        if k not in consumed and k not in ("id", "custom_id") and not (k in _CONVERSATION_KEYS and v is None)
    }
    overrides = _batch_overrides(item["body"]) if shape == "batch" else _row_tools(item)
    _storable(fields, "", 2)  # record → fields → each field
    if overrides:
        _storable(overrides, "body." if shape == "batch" else "", 2)  # record → request_overrides → each field
    return Row(row_id, messages, shape, source, line, fields, overrides)


def _storable(fields: dict[str, Any], prefix: str, enclosing: int) -> None:
    try:
        check_fields(fields, prefix, enclosing)
    except Unstorable as problem:
        raise RowError(str(problem)) from None


def _with_system(item: dict[str, Any], messages: tuple[Message, ...], shape: str) -> tuple[Message, ...]:
    system = item.get("system")
    if system is None or shape == "batch" or system == "":
        return messages
    if not isinstance(system, str):
        raise RowError(f"system: {type(system).__name__} is not a string")
    valid_unicode(system, "system")
    if messages and messages[0].role == "system":
        return messages  # the conversation carries its own system turn
    return (Message("system", system), *messages)


def _row_tools(item: dict[str, Any]) -> dict[str, Any]:
    """A ``messages``/``conversations``/``prompt`` row's own ``tools``, with its ``tool_choice``,
    as the overrides its requests carry, where they are OpenAI function definitions (a non-empty
    list of ``{"type": "function", "function": {"name": …}}``); none otherwise (a JSON text of
    tools, as some function-calling sets write them, stays a field as before). Its answers are
    then made with the schema its tool turns were made with (a break-it pass: the tools were kept
    in the export and never sent). The row keeps them as a field too, so the export has them."""
    tools = item.get("tools")
    if not isinstance(tools, list) or not tools:
        return {}
    for tool in tools:
        if not isinstance(tool, dict) or tool.get("type") != "function":
            return {}
        function = tool.get("function")
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            return {}
    choice = item.get("tool_choice")
    return {"tools": tools, **({"tool_choice": choice} if isinstance(choice, (str, dict)) else {})}


def _batch_overrides(body: dict[str, Any]) -> dict[str, Any]:
    overrides = {k: body[k] for k in BATCH_SAMPLING_FIELDS if body.get(k) is not None}
    if "max_completion_tokens" in overrides:
        # the newer name wins where both are given, as the engines read them (vLLM's protocol:
        # max_completion_tokens or max_tokens; SGLang's to_sampling_params likewise; a break-it pass
        # sent the line's max_tokens 100 beside its max_completion_tokens 20)
        overrides["max_tokens"] = overrides.pop("max_completion_tokens")
    tokens = overrides.get("max_tokens")
    if tokens is not None and (not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 1):
        raise RowError(f"body.max_tokens: {tokens!r} is not a positive integer")
    temperature = overrides.get("temperature")
    if temperature is not None and (
        isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or temperature < 0
    ):
        raise RowError(f"body.temperature: {temperature!r} is not a number >= 0")
    return overrides


def content_id(messages: Sequence[Message]) -> str:
    """A stable id from the messages: 16 hex digits of SHA-256 over ``[[role, content], …]`` JSON."""
    canonical = json.dumps([[m.role, m.content] for m in messages], ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def declared_id(item: Any) -> str | None:
    """The row's own ``id`` (or ``custom_id``) as text, or None when it declares none. An id of
    blanks only (``" "``, ``"\t"``) is none: SpecForge's validator refuses it ("id must be a
    non-empty string" after ``strip()``) and stops the whole file there (a break-it pass)."""
    if not isinstance(item, dict):
        return None
    for key in ("id", "custom_id"):
        value = item.get(key)
        if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value).strip():
            return str(value)
    return None


def _messages(item: dict[str, Any]) -> tuple[str, tuple[Message, ...]]:
    if item.get("conversations") is not None:
        turns = item["conversations"]
        sharegpt = (
            isinstance(turns, list) and bool(turns) and isinstance(turns[0], dict) and turns[0].get("from") is not None
        )
        if sharegpt:
            return "sharegpt", _turns(turns, "conversations", "from", "value", SHAREGPT_ROLES)
        return "conversations", _turns(turns, "conversations", "role", "content", None)
    if item.get("messages") is not None:
        return "messages", _turns(item["messages"], "messages", "role", "content", None)
    if item.get("body") is not None and item.get("custom_id") is not None:
        body = item["body"]
        if not isinstance(body, dict) or body.get("messages") is None:
            raise RowError("body: batch line without body.messages")
        return "batch", _turns(body["messages"], "body.messages", "role", "content", None)
    if item.get("prompt") is not None:
        prompt = item["prompt"]
        if not isinstance(prompt, str) or not prompt:
            raise RowError("prompt: not a non-empty string")
        return "prompt", (Message("user", valid_unicode(prompt, "prompt")),)
    expected = {
        "conversations": "a list of turns",
        "messages": "a list of turns",
        "prompt": "a non-empty string",
        "body": "a request object with messages",
    }
    nulls = [k for k in expected if k in item and item[k] is None]
    if nulls:  # the shape's key is there, with null: say that rather than "unknown shape"
        raise RowError(f"{nulls[0]}: null (expected {expected[nulls[0]]})")
    raise RowError(
        f"unknown shape: keys {sorted(item)[:8]} (expected conversations, messages, prompt, or custom_id + body)"
    )


def _turns(
    turns: Any, field: str, role_key: str, text_key: str, role_map: dict[str, str] | None
) -> tuple[Message, ...]:
    if not isinstance(turns, list) or not turns:
        raise RowError(f"{field}: not a non-empty list")
    out = []
    for i, turn in enumerate(turns):
        if not isinstance(turn, dict):
            raise RowError(f"{field}[{i}]: not an object")
        role = turn.get(role_key)
        role = role_map.get(role) if role_map is not None and isinstance(role, str) else role
        if role not in ROLES:
            allowed = sorted(role_map) if role_map is not None else list(ROLES)
            raise RowError(f"{field}[{i}].{role_key}: {turn.get(role_key)!r} is not one of {allowed}")
        extra = tuple((k, turn[k]) for k in _TOOL_KEYS if turn.get(k) is not None)
        if extra:
            _storable(dict(extra), f"{field}[{i}].", 3)  # record → conversations → this turn → each field
        text = turn.get(text_key)
        if text is None and (role == "assistant" and extra):
            text = ""  # an assistant turn that only calls tools
        out.append(Message(role, _text(text, f"{field}[{i}].{text_key}"), extra))
    return tuple(out)


_TOOL_KEYS = ("tool_calls", "tool_call_id", "name")


def _text(content: Any, field: str) -> str:
    """A turn's text: a string, or a list of text parts joined with a newline, as vLLM (and
    TensorRT-LLM's server) flatten them for a template that takes a string
    (``vllm/entrypoints/chat_utils.py``: ``text_prompt = "\\n".join(texts)``; SGLang joins with a
    space, ``jinja_template_utils.process_content_for_template_format``). The joined text is what
    is sent and stored, so the training row holds what the model saw; joined with nothing,
    ``["Hello", "world"]`` read "Helloworld" (a break-it pass)."""
    if isinstance(content, str):
        return valid_unicode(content, field)
    if isinstance(content, list) and all(
        isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text", ""), str) for p in content
    ):
        return valid_unicode("\n".join(p.get("text", "") for p in content), field)
    raise RowError(f"{field}: not a string or a list of text parts (each with a string text)")


def valid_unicode(text: str, field: str) -> str:
    """``text`` when it is valid Unicode; a lone UTF-16 surrogate (``"\ud800"`` escaped in JSON,
    or the raw bytes ``ED A0 80``, which Python's json decodes with surrogatepass) cannot be
    stored as UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as problem:
        raise RowError(
            f"{field}: lone UTF-16 surrogate {text[problem.start]!r} at character {problem.start} (not valid Unicode)"
        ) from None
    return text
