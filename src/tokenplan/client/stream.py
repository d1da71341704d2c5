"""A streamed chat answer: the SSE chunks of one completion joined into a :class:`Completion`,
each chunk validated as :mod:`tokenplan.client.answers` validates a whole answer (the same
failures, the same finish and empty-answer rules). Tool calls come in pieces
(``delta.tool_calls``), joined by :class:`~tokenplan.client.tool_calls.ToolCallDeltas`."""

from __future__ import annotations

from typing import Any

from tokenplan.client.answers import (
    Completion,
    Timings,
    Usage,
    answer_model,
    answer_text,
    check_finish,
    error_message,
    json_object,
    parse_usage,
    protocol_failure,
    text_field,
    verify_count,
)
from tokenplan.client.tool_calls import ToolCallDeltas, ToolCallError


class StreamAccumulator:
    """Joins the SSE chunks of one streamed chat completion, validating each; ``max_tokens``: the
    request's cap on the answer, which its usage may not pass
    (:func:`~tokenplan.client.answers.parse_usage`)."""

    def __init__(self, max_tokens: int | None = None) -> None:
        self.max_tokens = max_tokens
        self.content: list[str] = []
        self.reasoning: list[str] = []
        self.tool_calls = ToolCallDeltas()
        self.chunk_times_s: list[float] = []
        self.finish_reason: Any = None
        self.usage: Usage | None = None
        self.model: str | None = None
        self.verify_ct: int | None = None
        self.done = False
        self.last: bytes = b""

    def feed(self, data: bytes, now_s: float) -> bool:
        """Take one ``data:`` payload; return True at ``[DONE]``. Empty payloads are skipped.

        Raises:
            RequestFailed: ``protocol``, for a chunk that is not a well-formed completion chunk.
        """
        if not data:
            return False
        if data == b"[DONE]":
            self.done = True
            return True
        self.last = data
        chunk = json_object(data)
        if chunk.get("error") is not None:
            raise protocol_failure(f"error event in stream: {error_message(data, 'no message')}", data)
        self.model = answer_model(chunk) or self.model
        if chunk.get("usage") is not None:
            self.usage = parse_usage(chunk["usage"], data, self.max_tokens)
        if (verify := verify_count(chunk, data)) is not None:  # the last chunk carrying one wins
            self.verify_ct = verify
        choices = chunk.get("choices")
        if choices is not None and not isinstance(choices, list):
            raise protocol_failure("chunk choices is not a list", data)
        for choice in choices or ():
            self._take(choice, data, now_s)
        return False

    def _take(self, choice: Any, data: bytes, now_s: float) -> None:
        if not isinstance(choice, dict):
            raise protocol_failure("chunk choice is not an object", data)
        delta = choice.get("delta")
        if delta is not None and not isinstance(delta, dict):
            raise protocol_failure("choices[].delta is not an object", data)
        delta = delta or {}
        text = text_field(delta, "content", "delta", data)
        thought = text_field(delta, "reasoning_content", "delta", data) or text_field(delta, "reasoning", "delta", data)
        try:
            called = self.tool_calls.feed(delta.get("tool_calls"))
        except ToolCallError as problem:
            raise protocol_failure(str(problem), data) from None
        if text:
            self.content.append(text)
        if thought:
            self.reasoning.append(thought)
        if text or thought or called:
            self.chunk_times_s.append(now_s)
        if choice.get("finish_reason") is not None:
            self.finish_reason = choice["finish_reason"]

    def completion(self, sent_s: float, done_s: float) -> Completion:
        """The joined answer.

        Raises:
            RequestFailed: ``protocol``, when the stream ended without a terminal finish_reason.
        """
        if self.finish_reason is None:
            how = "[DONE]" if self.done else "the end of the stream"
            raise protocol_failure(
                f"stream reached {how} without a finish_reason after {len(self.chunk_times_s)} chunks with text",
                self.last or b"",
            )
        finish = check_finish(self.finish_reason, self.last)
        try:
            calls = self.tool_calls.calls()
        except ToolCallError as problem:
            raise protocol_failure(str(problem), self.last) from None
        message = {
            "content": "".join(self.content) if self.content else None,
            "reasoning_content": "".join(self.reasoning),
        }
        content, reasoning = answer_text(message, finish, self.usage, self.last, calls)
        return Completion(
            content,
            reasoning,
            finish,
            self.usage,
            Timings(sent_s, done_s, tuple(self.chunk_times_s)),
            self.model,
            self.verify_ct,
            calls,
        )
