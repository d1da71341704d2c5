"""The stored record: one finished unit as a line of ``shards/part-*.jsonl``, typed both ways.

:class:`OutputRecord` is what the runner writes for a unit it generated and what the exports and
the run summary read back; :meth:`OutputRecord.to_json` is the one writer of the line's object
and :meth:`OutputRecord.from_json` the one reader. The line's bytes are those of every earlier
version (run directories written before keep resuming and exporting): keys in this order, ``id``
first (:mod:`tokenplan.runner.store.record_ids` reads the id from the start of the line)::

    {"id", "conversations", "turns", ["request_overrides"], ["fields"],
     "source_id", "sample_index", "model", "sampling", "source": {"file", "line"}}

with each turn ``{"finish_reason", "length_flag", "reasoning_truncated", "usage":
{"prompt_tokens", "completion_tokens", "reasoning_tokens"} | null, "endpoint", "latency_s",
"ttft_s", "attempts", "seed", "length_retries", "model", ["max_tokens"], ["tool_calls"]}``; a bracketed key is
written only when it has a value. Reading is lenient in the way the exports always were: a key
an older record lacks reads as ``None`` (empty for ``conversations``, ``turns`` and ``fields``),
a key it has beyond these is ignored.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from tokenplan.errors import RunDirError
from tokenplan.runner.store.appendlog import iter_records, shard_paths


@dataclass(frozen=True, slots=True)
class TurnUsage:
    """The server's token counts for one request (tokens); ``None`` where it did not say."""

    prompt_tokens: int | None
    completion_tokens: int | None
    reasoning_tokens: int | None = None

    def to_json(self) -> dict[str, Any]:
        """``{"prompt_tokens", "completion_tokens", "reasoning_tokens"}``."""
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "reasoning_tokens": self.reasoning_tokens,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TurnUsage:
        """The usage stored as ``data`` (missing counts read as ``None``)."""
        return cls(data.get("prompt_tokens"), data.get("completion_tokens"), data.get("reasoning_tokens"))


@dataclass(frozen=True, slots=True)
class TurnRecord:
    """One request of a unit, as stored.

    Attributes:
        finish_reason: the server's (``stop``, ``length``, ``tool_calls``…).
        length_flag: the answer was cut by ``max_tokens``; ``reasoning_truncated``: cut while
            still thinking (reasoning and no answer text).
        usage: the server's token counts, or None when it sent none.
        endpoint: the API root that answered; ``latency_s``/``ttft_s``: end-to-end time and time
            to first token (seconds, rounded to µs; ``ttft_s`` None without streaming).
        attempts: tries the request took; ``seed``: the seed sent (None: none); ``length_retries``:
            asks again after a ``length`` finish; ``model``: the model the server named.
        max_tokens: the per-prompt cap sent under ``--context-tokens`` (None: the job's, not written).
        tool_calls: how many tool calls the answer made (kept on its assistant turn's
            ``tool_calls``); None for an answer in words (not written).
    """

    finish_reason: str | None
    length_flag: bool | None
    reasoning_truncated: bool | None
    usage: TurnUsage | None
    endpoint: str | None
    latency_s: float | None
    ttft_s: float | None
    attempts: int | None
    seed: int | None
    length_retries: int | None
    model: str | None
    max_tokens: int | None = None
    tool_calls: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The turn's object on disk (see the module docstring)."""
        data = {
            "finish_reason": self.finish_reason,
            "length_flag": self.length_flag,
            "reasoning_truncated": self.reasoning_truncated,
            "usage": None if self.usage is None else self.usage.to_json(),
            "endpoint": self.endpoint,
            "latency_s": self.latency_s,
            "ttft_s": self.ttft_s,
            "attempts": self.attempts,
            "seed": self.seed,
            "length_retries": self.length_retries,
            "model": self.model,
        }
        if self.max_tokens is not None:
            data["max_tokens"] = self.max_tokens
        if self.tool_calls is not None:
            data["tool_calls"] = self.tool_calls
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TurnRecord:
        """The turn stored as ``data`` (see the module docstring for missing keys)."""
        usage = data.get("usage")
        return cls(
            data.get("finish_reason"),
            data.get("length_flag"),
            data.get("reasoning_truncated"),
            None if not isinstance(usage, Mapping) else TurnUsage.from_json(usage),
            data.get("endpoint"),
            data.get("latency_s"),
            data.get("ttft_s"),
            data.get("attempts"),
            data.get("seed"),
            data.get("length_retries"),
            data.get("model"),
            data.get("max_tokens"),
            data.get("tool_calls"),
        )


@dataclass(frozen=True, slots=True)
class OutputRecord:
    """One generated unit, as stored (see the module docstring for the line it is).

    Attributes:
        id: the unit id (the row id, ``#k`` appended for sample k > 0 when n > 1).
        conversations: the conversation as stored: the input's turns and the generated assistant
            turns, OpenAI message objects (``role``, ``content``, ``reasoning_content``, tool fields).
        turns: one :class:`TurnRecord` per request, in order.
        request_overrides: a Batch API line's own body values sent with its requests (empty: none).
        fields: the input row's other fields, kept for the exports (empty: none).
        source_id, sample_index: the input row's id and which of its n samples this is.
        model: the job's model; ``sampling``: the job's sampling parameters as in the manifest.
        source_file, source_line: where the row is in the input (1-based line).
    """

    id: str
    conversations: tuple[dict[str, Any], ...]
    turns: tuple[TurnRecord, ...]
    request_overrides: Mapping[str, Any] = field(default_factory=dict)
    fields: Mapping[str, Any] = field(default_factory=dict)
    source_id: str | None = None
    sample_index: int | None = None
    model: str | None = None
    sampling: Mapping[str, Any] | None = None
    source_file: str | None = None
    source_line: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The record's object on disk, keys in the order of the module docstring (``id`` first)."""
        data: dict[str, Any] = {
            "id": self.id,
            "conversations": list(self.conversations),
            "turns": [turn.to_json() for turn in self.turns],
        }
        if self.request_overrides:
            data["request_overrides"] = dict(self.request_overrides)
        if self.fields:
            data["fields"] = dict(self.fields)
        data["source_id"] = self.source_id
        data["sample_index"] = self.sample_index
        data["model"] = self.model
        data["sampling"] = None if self.sampling is None else dict(self.sampling)
        data["source"] = {"file": self.source_file, "line": self.source_line}
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> OutputRecord:
        """The record stored as ``data`` (one parsed line; see the module docstring for missing keys).

        Raises:
            KeyError: ``data`` has no ``id`` (not a stored record).
            ValueError: a field of another shape than the writer gives it (a hand-edited line):
                ``conversations``/``turns`` not lists of objects, ``fields``/``request_overrides``/
                ``sampling`` not objects.
        """
        for name in ("conversations", "turns"):
            value = data.get(name)
            if value is not None and not (isinstance(value, list) and all(isinstance(v, Mapping) for v in value)):
                raise ValueError(f"{name}: not a list of objects")
        for name in ("fields", "request_overrides", "sampling"):
            if data.get(name) is not None and not isinstance(data[name], Mapping):
                raise ValueError(f"{name}: not an object")
        source = data.get("source")
        source = source if isinstance(source, Mapping) else {}
        return cls(
            str(data["id"]),
            tuple(data.get("conversations") or ()),
            tuple(TurnRecord.from_json(turn) for turn in data.get("turns") or ()),
            data.get("request_overrides") or {},
            data.get("fields") or {},
            data.get("source_id"),
            data.get("sample_index"),
            data.get("model"),
            data.get("sampling"),
            source.get("file"),
            source.get("line"),
        )

    def last_assistant(self) -> dict[str, Any]:
        """The last assistant message of :attr:`conversations` (``{}`` when there is none)."""
        return next((m for m in reversed(self.conversations) if m.get("role") == "assistant"), {})


def stored_records(run_dir: Path, *, damaged: Literal["raise", "skip"] = "raise") -> Iterator[OutputRecord]:
    """Every stored record of ``run_dir``, shard by shard in order; ``damaged="skip"`` passes over
    a line that is not a record (a reader that must not repair).

    Raises:
        RunDirError: a damaged line (``damaged="raise"``).
    """
    for shard in shard_paths(run_dir / "shards"):
        for line_no, data in iter_records(shard, damaged=damaged):
            try:
                record = OutputRecord.from_json(data)
            except ValueError as problem:
                if damaged == "skip":
                    continue
                raise RunDirError(
                    f"{shard}:{line_no}: damaged record ({problem}); the run directory was edited or corrupted"
                ) from None
            yield record
