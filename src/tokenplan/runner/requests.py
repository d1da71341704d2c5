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

An answer that calls tools keeps its calls on the generated assistant turn (``tool_calls``, OpenAI's
message form), and in ``regenerate`` the next request sends that turn as it is stored, so each
stored answer follows the conversation the model was shown.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from tokenplan.client.openai import Completion
from tokenplan.client.reasoning import THINK_OPEN
from tokenplan.runner.input.shapes import Message, Row, calls_tools
from tokenplan.runner.input.storable import Unstorable, check_fields
from tokenplan.runner.store.record import OutputRecord, TurnRecord, TurnUsage

Mode = Literal["regenerate", "complete"]
OnLength = Literal["keep", "drop", "retry"]


# Fields tokenplan sets in every request; --extra-body replaces them only with extra_body_override,
# since a replaced `messages` would send other prompts than the records show.
# max_completion_tokens: max_tokens's newer name (OpenAI chat API; vLLM and SGLang take it over max_tokens).
OWNED_FIELDS = ("messages", "model", "n", "seed", "max_tokens", "max_completion_tokens")
EXTRA_BODY_ENCLOSING = 4  # manifest.json → job → sampling → extra_body → a value (runner.input.storable)
CLIENT_FIELDS = ("stream", "stream_options")  # set by the client for --stream: never from --extra-body
# Sampling fields generate has an option for and records in every record's ``sampling``: set in
# --extra-body, the request would send one value while the record states another.
SAMPLING_OPTIONS = {"temperature": "--temperature", "top_p": "--top-p", "top_k": "--top-k"}


@dataclass(frozen=True, slots=True)
class Sampling:
    """Sampling parameters sent with every request (``None`` fields are not sent).

    Attributes:
        max_tokens: cap on completion tokens per request (tokens).
        temperature, top_p, top_k: the usual; ``top_k`` is an SGLang/vLLM extension.
        seed: the job seed from which each request's seed is derived; ``None`` sends no ``seed``
            (``--no-seed``, for a server that refuses the field).
        thinking: ``chat_template_kwargs.enable_thinking``; ``None`` leaves the template default.
        extra_body: merged into every request body last (e.g. ``{"ignore_eos": true}``).
        context_tokens: when set, ``max_tokens`` is the model's context and each request asks for
            what its prompt leaves of it (:func:`prompt_tokens_bound`).
    """

    max_tokens: int
    temperature: float = 0.0
    top_p: float | None = None
    top_k: int | None = None
    seed: int | None = 0
    thinking: bool | None = None
    extra_body: Mapping[str, Any] = field(default_factory=dict)
    context_tokens: int | None = None

    def as_record(self) -> dict[str, Any]:
        """The parameters as stored in each output record and the run manifest (``context_tokens``
        only when set, so the records and manifests of runs without it stay as they were)."""
        record = {
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "top_k": self.top_k,
            "seed": self.seed,
            "thinking": self.thinking,
            "extra_body": dict(self.extra_body),
        }
        if self.context_tokens is not None:
            record["context_tokens"] = self.context_tokens
        return record


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
    seed: int | None  # None: no seed was sent (--no-seed)
    max_tokens: int | None = None  # the request's own max_tokens when it is the context less the prompt


@dataclass(frozen=True, slots=True)
class Dropped:
    """A unit deliberately not stored (``skipped.jsonl``): why, and at which turn."""

    reason: str
    turn: int
    status: int | None = None
    detail: str | None = None


@dataclass(frozen=True, slots=True)
class Answered:
    """A unit whose requests were all answered: the conversation as it will be stored (the input's
    turns with each assistant turn generated) and one :class:`TurnRecord` per request."""

    conversations: tuple[dict[str, Any], ...]
    turns: tuple[TurnRecord, ...]


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


class BodyConflict(ValueError):
    """``extra_body`` sets a nested value that tokenplan's own options already set otherwise."""


def request_body(
    model: str,
    messages: list[dict[str, Any]],
    sampling: Sampling,
    seed: int | None,
    overrides: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The chat completion request JSON for one turn (no ``seed`` field when ``seed`` is None).

    Order: tokenplan's fields, then ``sampling.extra_body`` merged in (:func:`merge_body`: a
    top-level scalar replaces tokenplan's, nested objects such as ``chat_template_kwargs`` are
    merged key by key), then the row's own ``overrides`` (a Batch line's sampling fields), which
    win over both.

    Raises:
        BodyConflict: ``extra_body`` sets a nested key to another value than tokenplan's
            options did (e.g. ``--thinking off`` with ``chat_template_kwargs.enable_thinking: true``).
    """
    max_tokens = sampling.max_tokens
    if sampling.context_tokens is not None:
        room = sampling.context_tokens - prompt_tokens_bound(messages)
        # Where the bound (JSON bytes, ~4 per token of English) leaves no room, the prompt may still
        # leave most of the context: ask one token under it, and the server's refusal states the
        # prompt's tokens and the room it leaves (runner.control.context_room, sent again with it).
        # Before, such a prompt was sent with max_tokens 1 and its one-token answer stored as done
        # (a break-it pass: prompts of 2,533 and 3,233 bytes against a context of 2,048).
        max_tokens = min(max_tokens, room if room >= 1 else sampling.context_tokens - 1)
    body: dict[str, Any] = {
        "model": model,
        "messages": messages,
        "max_tokens": max_tokens,
        "temperature": sampling.temperature,
    }
    if seed is not None:
        body["seed"] = seed
    if sampling.top_p is not None:
        body["top_p"] = sampling.top_p
    if sampling.top_k is not None:
        body["top_k"] = sampling.top_k
    if sampling.thinking is not None:
        body["chat_template_kwargs"] = {"enable_thinking": sampling.thinking}
    body = merge_body(body, sampling.extra_body, refuse_conflicts=True)
    return merge_body(body, overrides or {}, refuse_conflicts=False)


def prompt_tokens_bound(messages: list[dict[str, Any]]) -> int:
    """No fewer tokens than ``messages`` take in the model's context: the bytes of their JSON, plus
    32 per message and 64 for the chat template's own text.

    Byte-level BPE (GPT-2, Llama 3, Qwen) and SentencePiece with byte fallback map each token to
    at least one byte, so a text has no more tokens than bytes; a chat template adds a few tokens
    per message (Qwen's ``<|im_start|>user\n…<|im_end|>\n``: 5) and a default system text (Qwen2.5:
    ~20). A bound, not an estimate: English runs ~4 bytes per token, so a long prompt leaves its
    answer less room than it could have.
    """
    return 64 + sum(32 + len(orjson.dumps(m)) for m in messages)


def merge_body(
    base: Mapping[str, Any], extra: Mapping[str, Any], *, refuse_conflicts: bool, path: str = ""
) -> dict[str, Any]:
    """``base`` with ``extra`` merged in: objects merged recursively, anything else replaced.

    With ``refuse_conflicts``, a key below the top level that both set to different values
    raises :class:`BodyConflict` naming its path (top-level scalars are ``--extra-body``'s to
    override, as documented).
    """
    merged = dict(base)
    for key, value in extra.items():
        where = f"{path}.{key}" if path else key
        old = merged.get(key)
        if isinstance(old, Mapping) and isinstance(value, Mapping):
            merged[key] = merge_body(old, value, refuse_conflicts=refuse_conflicts, path=where)
            continue
        if refuse_conflicts and path and key in merged and old != value:
            raise BodyConflict(f"{where}: --extra-body sets {value!r} but tokenplan's options set {old!r}")
        merged[key] = value
    return merged


def prompt_prefixes(messages: tuple[Message, ...], mode: Mode) -> list[list[Message]]:
    """The original turns that precede each request, without assistant turns.

    ``regenerate``: one entry per run of user turns (each entry adds that run and the system turns
    before it). ``complete``: one entry, the messages up to the last user turn, as given.
    """
    if mode == "complete":
        last_asked = max(i for i, m in enumerate(messages) if m.role in ("user", "tool"))
        return [list(messages[: last_asked + 1])]
    prefixes, pending = [], []
    for i, message in enumerate(messages):
        if message.role == "assistant" and not calls_tools(message):
            continue
        pending.append(message)
        after = messages[i + 1] if i + 1 < len(messages) else None
        asks = after is None or (after.role not in ("user", "tool") and not calls_tools(after))
        if message.role in ("user", "tool") and asks:
            prefixes.append(pending)
            pending = []
    return prefixes


async def run_unit(
    unit: WorkUnit, mode: Mode, on_length: OnLength, length_retries: int, send: Send
) -> Answered | Dropped:
    """Send the unit's requests in order; return its conversation and turns, or why it was dropped.

    ``send(messages, turn, length_retry)`` sends one request (with its own retries on failure) and
    returns a :class:`Sent`; its failures propagate.
    """
    history: list[dict[str, Any]] = []
    turns: list[TurnRecord] = []
    for turn, new_turns in enumerate(prompt_prefixes(unit.row.messages, mode)):
        history.extend(m.as_dict() for m in new_turns)
        prompt = [{k: v for k, v in m.items() if k != "reasoning_content"} for m in history]
        sent, length_tries = await send(prompt, turn, 0), 0
        while sent.completion.finish_reason == "length" and on_length == "retry" and length_tries < length_retries:
            length_tries += 1
            sent = await send(prompt, turn, length_tries)
        if sent.completion.finish_reason == "length" and on_length == "drop":
            return Dropped("length", turn)
        history.append(_assistant_message(sent.completion))
        turns.append(_turn_record(sent, length_tries))
    history.extend(m.as_dict() for m in trailing_turns(unit.row.messages, mode))
    return Answered(tuple(history), tuple(turns))


def stored_record(unit: WorkUnit, answered: Answered, model: str, sampling: dict[str, Any]) -> OutputRecord:
    """The record stored for ``unit`` once ``answered``: its conversation and turns, the row's
    overrides and fields, where the row is, and the job's ``model`` and ``sampling`` (as in the
    manifest). The one place an :class:`~tokenplan.runner.store.record.OutputRecord` is built."""
    row = unit.row
    return OutputRecord(
        unit.id,
        answered.conversations,
        answered.turns,
        row.overrides,
        row.fields,
        row.id,
        unit.sample_index,
        model,
        sampling,
        row.source,
        row.line,
    )


def trailing_turns(messages: tuple[Message, ...], mode: Mode) -> list[Message]:
    """``regenerate``: the system turns after the last user turn. No request follows them, but
    they are part of the conversation, so the stored record keeps them after the last answer.
    ``complete``: none (the answer replaces everything after the last user turn)."""
    if mode == "complete":
        return []
    last_user = max(i for i, m in enumerate(messages) if m.role == "user")
    return [m for m in messages[last_user + 1 :] if m.role == "system"]


def _assistant_message(completion: Completion) -> dict[str, Any]:
    content, reasoning = completion.content, completion.reasoning
    if reasoning is None and completion.finish_reason == "length" and content.lstrip().startswith(THINK_OPEN):
        # cut off inside an unclosed <think> (vLLM #35221): all of it is reasoning, no answer yet
        content, reasoning = "", content.lstrip()[len(THINK_OPEN) :].lstrip("\n")
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if reasoning is not None:
        message["reasoning_content"] = reasoning
    if completion.tool_calls:  # the answer calls tools: the calls are (part of) the answer
        message["tool_calls"] = [call.as_message() for call in completion.tool_calls]
    return message


def reasoning_truncated(completion: Completion) -> bool:
    """Whether the answer was cut by ``max_tokens`` while still thinking: a ``length`` finish
    with reasoning and no answer text (an unclosed ``<think>``, or a reasoning parser that put
    everything in the reasoning field)."""
    message = _assistant_message(completion)
    return (
        completion.finish_reason == "length"
        and message.get("reasoning_content") is not None
        and not message["content"].strip()
    )


def _turn_record(sent: Sent, length_retries_used: int) -> TurnRecord:
    c = sent.completion
    usage = c.usage
    return TurnRecord(
        c.finish_reason,
        c.finish_reason == "length",
        reasoning_truncated(c),
        None if usage is None else TurnUsage(usage.prompt_tokens, usage.completion_tokens, usage.reasoning_tokens),
        sent.endpoint,
        round(c.timings.latency_s, 6),
        None if c.timings.ttft_s is None else round(c.timings.ttft_s, 6),
        sent.attempts,
        sent.seed,
        length_retries_used,
        c.model,
        sent.max_tokens,
        len(c.tool_calls) or None,
    )


def extra_body_problem(extra_body: dict[str, Any], override: bool) -> str | None:
    """Why ``--extra-body`` cannot be sent with every request and stated in every record, or None:
    a value no record can hold (:func:`~tokenplan.runner.input.storable.check_fields`), a field the
    client sets (:data:`CLIENT_FIELDS`), a sampling field with its own option
    (:data:`SAMPLING_OPTIONS`), ``chat_template_kwargs`` that is not an object, or a field tokenplan
    sets (:data:`OWNED_FIELDS`) without ``override``. The text completes "allowed: …"."""
    try:  # stored in every record and the manifest, sent in every request: it must encode exactly
        check_fields(extra_body, "extra_body.", EXTRA_BODY_ENCLOSING)
    except Unstorable as problem:
        return f"a JSON object every record can hold; {problem}"
    client = sorted(set(extra_body) & set(CLIENT_FIELDS))
    if client:
        return f"extra_body may not set {', '.join(client)}: use --stream"
    sampling = sorted(set(extra_body) & set(SAMPLING_OPTIONS))
    if sampling:
        return (
            f"no {', '.join(sampling)} (use {', '.join(SAMPLING_OPTIONS[k] for k in sampling)}: "
            "each record states the sampling it was generated with)"
        )
    kwargs = extra_body.get("chat_template_kwargs")
    if kwargs is not None and not isinstance(kwargs, dict):
        return "chat_template_kwargs as an object of template arguments"
    owned = sorted(set(extra_body) & set(OWNED_FIELDS))
    if owned and not override:
        alias = " (max_tokens's other name: use --max-tokens)" if "max_completion_tokens" in owned else ""
        return (
            f"extra_body sets {', '.join(owned)}{alias}, which tokenplan sets in every request "
            "(and records); add --extra-body-override to replace them anyway"
        )
    return None
