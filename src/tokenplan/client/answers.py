"""What a server answered, validated once at the client boundary.

Every chat answer passes through :func:`parse_whole` (one JSON body) or
:class:`~tokenplan.client.stream.StreamAccumulator` (SSE chunks); either gives a :class:`Completion` whose fields have the types they claim, or raises
:class:`RequestFailed` of kind ``"protocol"`` carrying an excerpt of what came back. Nothing else
in tokenplan looks at raw answers, so a malformed field can neither crash the runner nor be
stored and break ``--export`` later.

An answer is finished only when its ``finish_reason`` is one of :data:`TERMINAL_FINISH_REASONS`.
vLLM ends a request it aborted with ``finish_reason: "abort"`` (vllm/v1/engine FinishReason.ABORT),
a stream cut short may end with no ``finish_reason`` at all, and neither is an answer. Nor is
an answer with no text (no content, no reasoning) and no tool call that says it is complete
(``stop``) or calls a tool (``tool_calls``), nor gpt-oss Harmony
channels in ``content`` that are not one plain answer (:mod:`tokenplan.client.harmony`): all are
``protocol`` failures, retried like any malformed answer, then recorded in ``errors.jsonl``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from tokenplan.client.reasoning import HarmonyError, split_reasoning
from tokenplan.client.tool_calls import ToolCall, ToolCallError, parse_tool_calls

FailureKind = Literal["transport", "deadline", "status", "protocol", "oversize"]

# Finish reasons that end a complete answer. OpenAI API reference (chat object): stop, length,
# tool_calls, function_call (deprecated). Hugging Face TGI's messages API spells its EOS and
# stop-string finishes "eos_token" and "stop_sequence" (text-generation-inference FinishReason);
# "eos" is the same finish under its short name. Not here: "abort" (vLLM, an aborted request),
# "content_filter" (the answer was withheld), "error", null — those are retried, then recorded.
TERMINAL_FINISH_REASONS = frozenset(
    {"stop", "length", "tool_calls", "function_call", "eos", "eos_token", "stop_sequence"}
)
EXCERPT_CHARS = 300  # how much of a bad answer goes into errors.jsonl
# 2^40 ≈ 1.1e12 tokens: no answer or prompt comes near; keeps counts inside the 64-bit integers
# the records (orjson) and the run's tallies (array "q") hold.
MAX_TOKEN_COUNT = 2**40
# Protocol failures in the answer's shape rather than its text (RequestFailed.malformed).
MALFORMED = (
    "answer is not JSON",
    "answer is not a JSON object",
    "answer has no choices",
    "choices[0] has no 'message' object",
    "chunk choices is not a list",
    "chunk choice is not an object",
    "choices[].delta is not an object",
    # a count or a text of another type (usage.completion_tokens -5, content 12345): the server's
    # encoding, never what the model made of a row (the fault table's "usage not counts, content
    # not text"; a server sending them to every request ran through the whole input, a break-it pass)
    "usage",
    "meta_info",
    "choices[0].message.",
    "delta.",
)


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts the server reported (tokens). ``reasoning_tokens`` is ``None`` when the server
    does not report it (only recent SGLang and vLLM do); ``completion_tokens`` includes reasoning."""

    prompt_tokens: int
    completion_tokens: int
    reasoning_tokens: int | None


@dataclass(frozen=True, slots=True)
class Timings:
    """When a request was sent, answered and (streaming only) when each chunk with text (or a piece
    of a tool call) arrived.

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
    the server's, one of :data:`TERMINAL_FINISH_REASONS` for an answer from :func:`parse_whole` or
    :class:`~tokenplan.client.stream.StreamAccumulator`; ``usage`` is ``None`` if the server sent none. ``spec_verify_ct``
    is the number of speculative verification steps the server says the answer took (SGLang's
    ``meta_info.spec_verify_ct``, see :func:`verify_count`), ``None`` where it says nothing.
    ``tool_calls``: the functions the answer calls (:mod:`tokenplan.client.tool_calls`), empty
    for an answer in words.
    """

    content: str
    reasoning: str | None
    finish_reason: str | None
    usage: Usage | None
    timings: Timings
    model: str | None
    spec_verify_ct: int | None = None
    tool_calls: tuple[ToolCall, ...] = ()


class RequestFailed(Exception):
    """One request did not produce a completion.

    Attributes:
        kind: ``"transport"`` (connect/read/write error, dropped connection), ``"deadline"`` (the
            per-request deadline passed), ``"status"`` (HTTP status ≥ 400, or a 3xx redirect:
            :attr:`redirect`), ``"protocol"`` (a 200 answer that is not a finished chat
            completion) or ``"oversize"`` (an answer larger than the cap; not retried).
        status: the HTTP status for ``"status"``, else ``None``.
        detail: a short text for logs: the server's error message or the exception type.
        retry_after_s: the server's ``Retry-After`` header (seconds), if it sent one.
        received: for ``"protocol"``, an excerpt of what the server sent (≤ 300 characters).
    """

    def __init__(
        self,
        kind: FailureKind,
        detail: str,
        status: int | None = None,
        retry_after_s: float | None = None,
        received: str | None = None,
    ):
        self.kind, self.status, self.detail, self.retry_after_s = kind, status, detail, retry_after_s
        self.received = received
        super().__init__(f"{kind}{f' {status}' if status is not None else ''}: {detail}")

    @property
    def malformed(self) -> bool:
        """A ``protocol`` failure in the answer's shape (not JSON, no choices…, :data:`MALFORMED`),
        which a server or proxy answering so sends every row; not what the model made of one
        row's prompt (an empty answer, Harmony channels, an ``abort`` finish), which can be the
        row's own and so stops the run only when a control request is not answered either
        (``runner.unanswered``)."""
        return self.kind == "protocol" and self.detail.startswith(MALFORMED)

    @property
    def redirect(self) -> bool:
        """A 3xx answer, not followed (:mod:`tokenplan.client.openai`): ``detail`` says where it
        points and the ``--endpoint`` to give; the same for every request, so never retried."""
        return self.kind == "status" and self.status is not None and 300 <= self.status < 400

    def redacted(self, message: Callable[[str], str]) -> RequestFailed:
        """The same failure with its texts passed through ``message`` (a client's
        :meth:`~tokenplan.client.auth.Redactor.message`: every secret, short bare query key and
        ``Bearer …`` token removed)."""
        received = None if self.received is None else message(self.received)
        return RequestFailed(self.kind, message(self.detail), self.status, self.retry_after_s, received)


def excerpt(raw: bytes | str) -> str:
    """The first :data:`EXCERPT_CHARS` characters of an answer, bytes decoded leniently."""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    return text[:EXCERPT_CHARS] + ("…" if len(text) > EXCERPT_CHARS else "")


def error_message(raw: bytes, fallback: str) -> str:
    """The server's message from an error body, whatever its shape, else ``fallback``.

    Shapes: OpenAI ``{"error": {"message": …}}`` or ``{"error": "…"}``; SGLang and older vLLM
    ``{"object": "error", "message": …}``; FastAPI ``{"detail": "…"}`` or ``{"detail": [{"msg":
    …}]}``; anything else non-empty is taken as plain text.
    """
    try:
        body = orjson.loads(raw)
    except ValueError:
        text = raw.decode("utf-8", "replace").strip()
        return excerpt(" ".join(text.split())) if text else fallback
    found = _message_in(body)
    return excerpt(found) if found else (excerpt(raw) if raw.strip() else fallback)


def _message_in(body: Any) -> str | None:
    if isinstance(body, str):
        return body or None
    if isinstance(body, list):
        parts = [m for m in (_message_in(item) for item in body[:5]) if m]
        return "; ".join(parts) or None
    if not isinstance(body, dict):
        return None
    for key in ("error", "message", "detail", "msg"):
        if key in body and (found := _message_in(body[key])):
            return found
    return None


def protocol_failure(detail: str, received: bytes | str | None = None) -> RequestFailed:
    """A ``protocol`` failure saying ``detail``, with an excerpt of what was ``received``."""
    return RequestFailed("protocol", detail, received=None if received is None else excerpt(received))


def json_object(raw: bytes) -> dict[str, Any]:
    """``raw`` parsed as a JSON object.

    Raises:
        RequestFailed: ``protocol``, when it is not JSON or not an object.
    """
    try:
        data = orjson.loads(raw)
    except ValueError:
        raise protocol_failure("answer is not JSON", raw) from None
    if not isinstance(data, dict):
        raise protocol_failure("answer is not a JSON object", raw)
    return data


def _count(value: Any, field: str, raw: bytes) -> int:
    if value is None:
        return 0
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_TOKEN_COUNT:
        raise protocol_failure(f"{field} is {value!r}, not a token count (an integer from 0 to 2^40)", raw)
    return value


def parse_usage(value: Any, raw: bytes, max_tokens: int | None = None) -> Usage | None:
    """``usage`` → :class:`Usage`; ``None`` when absent.

    Impossible counts are malformed too: ``completion_tokens`` above ``max_tokens`` (the request's
    cap, :func:`answer_tokens_cap`; 999,999 claimed for 64 made a summary of 33 M tok/s) and
    ``reasoning_tokens`` above ``completion_tokens``, which includes them.

    Raises:
        RequestFailed: ``protocol``, when it or a count in it is malformed or impossible.
    """
    if value is None:
        return None
    if not isinstance(value, dict):
        raise protocol_failure(f"usage is {type(value).__name__}, not an object", raw)
    details = value.get("completion_tokens_details")
    if details is not None and not isinstance(details, dict):
        raise protocol_failure("usage.completion_tokens_details is not an object", raw)
    reasoning = None if details is None else details.get("reasoning_tokens")
    usage = Usage(
        _count(value.get("prompt_tokens"), "usage.prompt_tokens", raw),
        _count(value.get("completion_tokens"), "usage.completion_tokens", raw),
        None if reasoning is None else _count(reasoning, "usage.reasoning_tokens", raw),
    )
    done = usage.completion_tokens
    if max_tokens is not None and done > max_tokens:
        raise protocol_failure(
            f"usage.completion_tokens is {done:,}, more than the request's max_tokens (allowed: 0 to {max_tokens:,})",
            raw,
        )
    if usage.reasoning_tokens is not None and usage.reasoning_tokens > done:
        raise protocol_failure(
            f"usage.reasoning_tokens is {usage.reasoning_tokens:,}, more than usage.completion_tokens, which "
            f"includes them (allowed: 0 to {done:,})",
            raw,
        )
    return usage


def answer_tokens_cap(body: Mapping[str, Any]) -> int | None:
    """The most completion tokens an answer to ``body`` can report: ``max_completion_tokens``
    (which vLLM and SGLang take over ``max_tokens``) or ``max_tokens``, times ``n`` (choices) where
    it is more than 1; None without an integer cap."""
    caps = [v for v in (body.get("max_completion_tokens"), body.get("max_tokens")) if type(v) is int]
    n = body.get("n")
    return caps[0] * (n if type(n) is int and n > 1 else 1) if caps else None


def verify_count(data: Mapping[str, Any], raw: bytes) -> int | None:
    """``meta_info.spec_verify_ct`` (top level, or the first choice's, where SGLang's chat route puts it
    with ``return_meta_info``: ``openai/serving_chat.py``, sgl-project/sglang@002897c): a finished
    request's verification steps under a speculative algorithm (``managers/tokenizer_manager.py``,
    @c60799d), or None. Raises :class:`RequestFailed` ``protocol`` for a malformed one."""
    choices = data.get("choices")
    first = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
    meta = data.get("meta_info", first.get("meta_info"))
    if meta is not None and not isinstance(meta, dict):
        raise protocol_failure(f"meta_info is {type(meta).__name__}, not an object", raw)
    value = (meta or {}).get("spec_verify_ct")
    return None if value is None else _count(value, "meta_info.spec_verify_ct", raw)


def text_field(container: Mapping[str, Any], key: str, where: str, raw: bytes) -> str | None:
    """``container[key]`` when it is text or absent (None).

    Raises:
        RequestFailed: ``protocol``, naming ``where.key``, for a value of another type.
    """
    value = container.get(key)
    if value is not None and not isinstance(value, str):
        raise protocol_failure(f"{where}.{key} is {type(value).__name__}, not a string", raw)
    return value


def check_finish(reason: Any, raw: bytes | str) -> str:
    """``reason`` when it ends a complete answer.

    Raises:
        RequestFailed: ``protocol``, for any other value (``"abort"``, missing, not a string).
    """
    if isinstance(reason, str) and reason in TERMINAL_FINISH_REASONS:
        return reason
    raise protocol_failure(
        f"finish_reason {reason!r} does not end a complete answer "
        f"(allowed: {', '.join(sorted(TERMINAL_FINISH_REASONS))})",
        raw,
    )


def answer_model(data: Mapping[str, Any]) -> str | None:
    """The model the answer names, or None when it names none as text."""
    model = data.get("model")
    return model if isinstance(model, str) else None


def parse_whole(raw: bytes, timings: Timings, max_tokens: int | None = None) -> Completion:
    """A non-streamed answer body → :class:`Completion`; ``max_tokens``: the request's cap on the
    answer (:func:`answer_tokens_cap`), which its ``usage`` may not pass (:func:`parse_usage`).

    Raises:
        RequestFailed: ``protocol``, for anything but a finished, well-formed chat completion.
    """
    data = json_object(raw)
    if data.get("error") is not None:
        raise protocol_failure(f"error in a 200 answer: {error_message(raw, 'no message')}", raw)
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise protocol_failure("answer has no choices", raw)
    choice = choices[0]
    message = choice.get("message")
    if not isinstance(message, dict):
        raise protocol_failure("choices[0] has no 'message' object", raw)
    for key in ("content", "reasoning_content", "reasoning"):
        value = message.get(key)
        if value is not None and not isinstance(value, str):
            text_field(message, key, "choices[0].message", raw)  # raises, naming the field
    try:
        calls = parse_tool_calls(message)
    except ToolCallError as problem:
        raise protocol_failure(str(problem), raw) from None
    usage = parse_usage(data.get("usage"), raw, max_tokens)
    finish = check_finish(choice.get("finish_reason"), raw)
    content, reasoning = answer_text(message, finish, usage, raw, calls)
    model, verify = answer_model(data), verify_count(data, raw)
    return Completion(content, reasoning, finish, usage, timings, model, verify, calls)


# Finishes that say the answer is complete; one of them with no text and no tool call at all lost
# it on the way (tool_calls: the calls are the answer, kept on the Completion). Not here:
# function_call (the deprecated single call, message.function_call, which tokenplan does not read:
# refused in answer_text) and length (flagged as cut, and the --on-length policy keeps, drops or
# retries it like any cut answer).
_COMPLETE_FINISHES = frozenset({"stop", "eos", "eos_token", "stop_sequence", "tool_calls"})


def answer_text(
    message: Mapping[str, Any], finish: str, usage: Usage | None, raw: bytes | str, calls: tuple[ToolCall, ...] = ()
) -> tuple[str, str | None]:
    """``(content, reasoning)`` of a finished answer whose tool calls are ``calls``, refused when
    it holds no answer at all.

    Raises:
        RequestFailed: ``protocol``, for Harmony channels that are not one plain answer
            (:mod:`tokenplan.client.harmony`), or an answer with no content, no reasoning and no
            tool call (``content: null`` with ``finish_reason: stop`` and 500 completion tokens:
            the text was lost on the way; ``finish_reason: tool_calls`` and no calls) that claims
            to be complete (:data:`_COMPLETE_FINISHES`).
    """
    try:
        content, reasoning = split_reasoning(message, finish)
    except HarmonyError as problem:
        raise protocol_failure(f"gpt-oss Harmony output in content: {problem}", raw) from None
    if message.get("function_call") is not None or (finish == "function_call" and not content):
        # the deprecated single call (message.function_call): not read, so stored it would be an
        # empty answer counted done and left out of the export (a break-it pass)
        raise protocol_failure("a function_call answer (deprecated; send tools, answered as tool_calls)", raw)
    if not content and not reasoning and not calls and finish in _COMPLETE_FINISHES:
        given = "null" if message.get("content") is None else "empty"
        tokens = "not reported" if usage is None else f"{usage.completion_tokens:,}"
        raise protocol_failure(
            f"empty answer: content {given}, no reasoning{', no tool call' if finish == 'tool_calls' else ''}, "
            f"finish_reason {finish!r}, completion_tokens {tokens}",
            raw,
        )
    if finish == "tool_calls" and not calls and not content:  # reasoning alone: the call was lost
        raise protocol_failure("finish_reason 'tool_calls' with reasoning but no tool call and no content", raw)
    return content, reasoning
