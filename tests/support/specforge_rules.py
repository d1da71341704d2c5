"""SpecForge's rules for a training row, restated to check tokenplan's export against them.

Read from https://github.com/sgl-project/SpecForge at commit a6b6b0230009d15ec2a97a57384e6f53f0f96946
(2026-08-08); the files last changed at the commits named below. Written here from reading them,
not copied: each rule cites the line of thought it comes from.

``validator_problem`` — ``scripts/validate_regenerated_data.py`` (``validate_row``) with
``scripts/conversation_validation.py`` (``validate_conversation``, ``has_think_marker``), both last
changed in 69e18e6bb7358ba6dddf0554629c2d0a04fed82a (2026-07-12). Per line (the script stops the
whole file at the first bad line):

1. ``id`` is a string that is not blank;
2. ``status == "success"``;
3. ``conversations`` is a non-empty list of objects, each with a ``content`` string that is not
   blank; ``system`` turns only before the first user turn; otherwise roles alternate
   ``user``, ``assistant``, ``user``, … starting with ``user`` (any other role, ``tool`` included,
   is "unsupported"); at least one user turn;
4. per assistant turn: ``reasoning_content`` is a string or null; with ``--expect-reasoning`` it
   is a non-blank string; with ``--strict-think-markers`` neither content nor reasoning_content
   holds ``<think>`` or ``</think>`` (case-insensitive);
5. at least one assistant turn, and the last turn is an assistant turn.

``parser_problem`` — what the trainer keeps of a row, ``specforge/data/parse.py`` (last changed in
dca112012f54f06f19b50d0b0a47eaa605bc9b57, 2026-07-19): ``ThinkingParser`` keeps of each message
only ``role, content, tool_calls, reasoning_content, name, tool_call_id`` (``_sanitize_message``;
a ``tool_calls`` string is parsed as JSON); ``GeneralParser.parse`` drops leading non-user turns
after an optional first system turn and *truncates* the conversation at a ``tool`` turn not after
an ``assistant``/``tool`` turn or an ``assistant`` turn not after a ``user``/``tool`` turn. The
thinking field was ``thinking`` before commit afa1f4fb2ae5a080c1110497a9f7a894432d3e39
(2026-03-17, ``scripts/regenerate_train_data.py``) renamed it ``reasoning_content``.
"""

from __future__ import annotations

import json
from typing import Any

PARSER_KEYS = frozenset({"role", "content", "tool_calls", "reasoning_content", "name", "tool_call_id"})


def _has_think_marker(text: str) -> bool:
    lowered = text.lower()
    return "<think>" in lowered or "</think>" in lowered


def _conversation_problem(messages: Any) -> str | None:
    if not isinstance(messages, list) or not messages:
        return "conversations must be a non-empty list"
    expected, saw_user = "user", False
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            return f"message {index} must be an object"
        role, content = message.get("role"), message.get("content")
        if not isinstance(content, str) or not content.strip():
            return f"message {index} content must be a non-empty string"
        if role == "system" and not saw_user:
            continue
        if role not in ("user", "assistant"):
            return f"message {index} has unsupported role {role!r}"
        if role != expected:
            return f"message {index} expected role {expected!r}, got {role!r}"
        saw_user = True
        expected = "assistant" if role == "user" else "user"
    return None if saw_user else "conversation has no user message"


def validator_problem(
    row: dict[str, Any], *, expect_reasoning: bool = False, strict_think_markers: bool = False
) -> str | None:
    """Why ``validate_regenerated_data.py`` would reject ``row`` (its message), or None."""
    row_id = row.get("id")
    if not isinstance(row_id, str) or not row_id.strip():
        return "id must be a non-empty string"
    if row.get("status") != "success":
        return "status must be 'success'"
    messages = row.get("conversations")
    problem = _conversation_problem(messages)
    if problem is not None:
        return problem
    assistants = 0
    for index, message in enumerate(messages):
        if message.get("role") != "assistant":
            continue
        assistants += 1
        reasoning = message.get("reasoning_content")
        if reasoning is not None and not isinstance(reasoning, str):
            return f"assistant message {index} reasoning_content must be a string or null"
        if expect_reasoning and (not isinstance(reasoning, str) or not reasoning.strip()):
            return f"assistant message {index} has empty reasoning_content"
        if strict_think_markers and _has_think_marker(message["content"]):
            return f"assistant message {index} contains a thinking marker"
        if strict_think_markers and isinstance(reasoning, str) and _has_think_marker(reasoning):
            return f"assistant message {index} reasoning_content contains a thinking marker"
    if assistants == 0:
        return "conversation has no assistant message"
    if messages[-1].get("role") != "assistant":
        return "conversation must end with an assistant message"
    return None


def parser_problem(row: dict[str, Any]) -> str | None:
    """Why SpecForge's ``ThinkingParser`` would lose part of ``row``: a message key it drops, a
    ``tool_calls`` it cannot parse, or a turn order at which it truncates; None when it keeps all."""
    messages = row.get("conversations")
    if not isinstance(messages, list) or not messages:
        return "conversations must be a non-empty list"
    start = 1 if messages[0].get("role") == "system" else 0
    if start >= len(messages) or messages[start].get("role") != "user":
        return f"message {start} is not a user turn (dropped as a leading turn)"
    for index, message in enumerate(messages):
        lost = set(message) - PARSER_KEYS
        if lost:
            return f"message {index}: keys {sorted(lost)} are dropped by _sanitize_message"
        calls = message.get("tool_calls")
        if isinstance(calls, str):
            try:
                calls = json.loads(calls)
            except json.JSONDecodeError:
                return f"message {index}: tool_calls is not JSON"
        if calls is not None and not isinstance(calls, list):
            return f"message {index}: tool_calls is not a list"
        if index <= start:
            continue
        role, before = message.get("role"), messages[index - 1].get("role")
        if role == "tool" and before not in ("assistant", "tool"):
            return f"message {index}: a tool turn after {before!r} truncates the conversation"
        if role == "assistant" and before not in ("user", "tool"):
            return f"message {index}: an assistant turn after {before!r} truncates the conversation"
    return None
