"""Reasoning text from an OpenAI-compatible chat message, whichever field the engine used.

SGLang and ``transformers serve`` return ``message.reasoning_content``; vLLM renamed it to
``message.reasoning`` (vLLM PR #27752) and later removed the old name (PR #33402). Servers started
without a reasoning parser leave ``<think>…</think>`` inside ``content``; Qwen3-style templates put
the opening ``<think>`` in the prompt, so the content may hold only the closing tag. A thinking
trace cut off by ``max_tokens`` can land in ``content`` with no closing tag at all (vLLM #35221);
that case stays in ``content`` and is flagged by ``finish_reason == "length"``. gpt-oss Harmony
channels returned raw in ``content`` (``trtllm-serve``) are split by :mod:`tokenplan.client.harmony`.
"""

from __future__ import annotations

from collections.abc import Mapping

from tokenplan.client.harmony import HarmonyError, is_harmony, split_harmony  # noqa: F401 - HarmonyError re-exported

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"


def split_reasoning(message: Mapping[str, object], finish_reason: str | None = None) -> tuple[str, str | None]:
    """Return ``(content, reasoning)`` for one chat message (or one accumulated stream).

    ``reasoning`` is ``None`` when the message carries no reasoning at all. A dedicated field
    (``reasoning_content``, then ``reasoning``) wins over tags in the content. Content that is
    raw gpt-oss Harmony output (:func:`tokenplan.client.harmony.is_harmony`) is split by channel
    (``finish_reason`` says whether a missing ``final`` channel was cut by ``max_tokens``).

    Raises:
        HarmonyError: Harmony content that is not one plain answer (a tool call, another
            channel, no final channel without a ``length`` finish).
    """
    content = message.get("content")
    text = content if isinstance(content, str) else ""
    field = message.get("reasoning_content")  # the first non-empty text of the two fields
    if not (field and isinstance(field, str)):
        field = message.get("reasoning")
        if not (field and isinstance(field, str)):
            field = None
    if is_harmony(text):
        answer, analysis = split_harmony(text, finish_reason)
        return answer, field or analysis
    if field is not None:
        return text, field
    return split_think_tags(text)


def split_think_tags(text: str) -> tuple[str, str | None]:
    """Split ``<think>R</think>C`` (or ``R</think>C`` when the template opened the tag) into ``(C, R)``.

    Text with no closing tag is returned unchanged with ``None`` reasoning. Leading whitespace
    of the answer after the closing tag is removed, as the engines' reasoning parsers do.
    """
    close_at = text.find(THINK_CLOSE)
    if close_at < 0:
        return text, None
    head = text[:close_at]
    open_at = head.find(THINK_OPEN)
    reasoning = head[open_at + len(THINK_OPEN) :] if open_at >= 0 else head
    content = text[close_at + len(THINK_CLOSE) :].lstrip()
    return content, reasoning.strip("\n")
