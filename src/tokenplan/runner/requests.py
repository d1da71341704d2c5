"""The requests a row needs, and the output record they produce.

Modes:

- ``regenerate``: keep system and user turns, drop the original assistant turns, and after each
  run of user turns send one request over the history regenerated so far (one request per user
  turn in the usual alternating conversation).
- ``complete``: one request over the row's messages up to its last user turn.

``n`` samples per row are separate work units with ids ``ROWID#0`` … ``ROWID#{n-1}`` (plain
``ROWID`` when ``n == 1``). Each request's seed is derived from the job seed, the unit id and
the turn, so a rerun asks exactly what the first run asked.

A ``length`` finish follows the ``on_length`` policy: ``keep`` stores the answer and flags the
turn, ``drop`` skips the whole unit, ``retry`` asks again with the next seed (at most
``length_retries`` times) and then keeps and flags.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from tokenplan.client.openai import Completion
from tokenplan.runner.rows import Message, Row

Mode = Literal["regenerate", "complete"]
OnLength = Literal["keep", "drop", "retry"]


@dataclass(frozen=True, slots=True)
class Sampling:
    """Sampling parameters sent with every request (``None`` fields are not sent).

    Attributes:
        max_tokens: cap on completion tokens per request (tokens).
        temperature, top_p, top_k: the usual; ``top_k`` is an SGLang/vLLM extension.
        seed: the job seed from which each request's seed is derived.
        thinking: ``chat_template_kwargs.enable_thinking``; ``None`` leaves the template default.
        extra_body: merged into every request body last (e.g. ``{"ignore_eos": true}``).
    """

    max_tokens: int
    temperature: float = 0.0
    top_p: float | None = None
    top_k: int | None = None
    seed: int = 0
    thinking: bool | None = None
    extra_body: Mapping[str, Any] = field(default_factory=dict)

    def as_record(self) -> dict[str, Any]:
        """The parameters as stored in each output record and the run manifest."""
        return {"max_tokens": self.max_tokens, "temperature": self.temperature, "top_p": self.top_p,
                "top_k": self.top_k, "seed": self.seed, "thinking": self.thinking,
                "extra_body": dict(self.extra_body)}


@dataclass(frozen=True, slots=True)
class WorkUnit:
    """One output record to produce: a row and a sample index."""

    id: str
    row: Row
    sample_index: int


@dataclass(frozen=True, slots=True)
class Sent:
    """A completion and the facts about how it was obtained."""

    completion: Completion
    endpoint: str
    attempts: int
    seed: int


@dataclass(frozen=True, slots=True)
class Dropped:
    """A unit deliberately not stored (``skipped.jsonl``): why, and at which turn."""

    reason: str
    turn: int
    status: int | None = None
    detail: str | None = None


Send = Callable[[list[dict[str, str]], int, int], Awaitable[Sent]]


def work_units(row: Row, n: int) -> Iterator[WorkUnit]:
    """The ``n`` units of ``row`` (ids ``ROWID`` for n == 1, else ``ROWID#k``), one at a time."""
    if n == 1:
        yield WorkUnit(row.id, row, 0)
        return
    for k in range(n):
        yield WorkUnit(f"{row.id}#{k}", row, k)


def seed_for(job_seed: int, unit_id: str, turn: int, retry: int = 0) -> int:
    """The request seed: 31 bits of SHA-256 over ``"job_seed:unit_id:turn:retry"``."""
    digest = hashlib.sha256(f"{job_seed}:{unit_id}:{turn}:{retry}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFF_FFFF


def request_body(model: str, messages: list[dict[str, str]], sampling: Sampling, seed: int) -> dict[str, Any]:
    """The chat completion request JSON for one turn."""
    body: dict[str, Any] = {"model": model, "messages": messages, "max_tokens": sampling.max_tokens,
                            "temperature": sampling.temperature, "seed": seed}
    if sampling.top_p is not None:
        body["top_p"] = sampling.top_p
    if sampling.top_k is not None:
        body["top_k"] = sampling.top_k
    if sampling.thinking is not None:
        body["chat_template_kwargs"] = {"enable_thinking": sampling.thinking}
    body.update(sampling.extra_body)
    return body


def prompt_prefixes(messages: tuple[Message, ...], mode: Mode) -> list[list[Message]]:
    """The original turns that precede each request, without assistant turns.

    ``regenerate``: one entry per run of user turns (each entry adds that run and the system turns
    before it). ``complete``: one entry, the messages up to the last user turn, as given.
    """
    if mode == "complete":
        last_user = max(i for i, m in enumerate(messages) if m.role == "user")
        return [list(messages[: last_user + 1])]
    prefixes, pending = [], []
    for i, message in enumerate(messages):
        if message.role == "assistant":
            continue
        pending.append(message)
        next_role = messages[i + 1].role if i + 1 < len(messages) else None
        if message.role == "user" and next_role != "user":
            prefixes.append(pending)
            pending = []
    return prefixes


async def run_unit(unit: WorkUnit, mode: Mode, on_length: OnLength, length_retries: int,
                   send: Send) -> dict[str, Any] | Dropped:
    """Send the unit's requests in order; return its output record, or why it was dropped.

    ``send(messages, turn, length_retry)`` sends one request (with its own retries on failure) and
    returns a :class:`Sent`; its failures propagate.
    """
    history: list[dict[str, Any]] = []
    turns: list[dict[str, Any]] = []
    for turn, new_turns in enumerate(prompt_prefixes(unit.row.messages, mode)):
        history.extend({"role": m.role, "content": m.content} for m in new_turns)
        prompt = [{"role": m["role"], "content": m["content"]} for m in history]
        sent, length_tries = await send(prompt, turn, 0), 0
        while sent.completion.finish_reason == "length" and on_length == "retry" \
                and length_tries < length_retries:
            length_tries += 1
            sent = await send(prompt, turn, length_tries)
        if sent.completion.finish_reason == "length" and on_length == "drop":
            return Dropped("length", turn)
        history.append(_assistant_message(sent.completion))
        turns.append(_turn_record(sent, length_tries))
    history.extend({"role": m.role, "content": m.content} for m in trailing_turns(unit.row.messages, mode))
    return {"id": unit.id, "conversations": history, "turns": turns}


def trailing_turns(messages: tuple[Message, ...], mode: Mode) -> list[Message]:
    """``regenerate``: the system turns after the last user turn. No request follows them, but
    they are part of the conversation, so the stored record keeps them after the last answer.
    ``complete``: none (the answer replaces everything after the last user turn)."""
    if mode == "complete":
        return []
    last_user = max(i for i, m in enumerate(messages) if m.role == "user")
    return [m for m in messages[last_user + 1:] if m.role == "system"]


def _assistant_message(completion: Completion) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": completion.content}
    if completion.reasoning is not None:
        message["reasoning_content"] = completion.reasoning
    return message


def _turn_record(sent: Sent, length_retries_used: int) -> dict[str, Any]:
    c = sent.completion
    usage = c.usage
    return {
        "finish_reason": c.finish_reason,
        "length_flag": c.finish_reason == "length",
        "usage": None if usage is None else {"prompt_tokens": usage.prompt_tokens,
                                             "completion_tokens": usage.completion_tokens,
                                             "reasoning_tokens": usage.reasoning_tokens},
        "endpoint": sent.endpoint,
        "latency_s": round(c.timings.latency_s, 6),
        "ttft_s": None if c.timings.ttft_s is None else round(c.timings.ttft_s, 6),
        "attempts": sent.attempts,
        "seed": sent.seed,
        "length_retries": length_retries_used,
        "model": c.model,
    }
