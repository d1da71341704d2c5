"""Input rows: stream JSONL (plain or zstd) and Parquet files, detect each row's shape, give it an id.

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

Files: JSONL (plain or zstd), Parquet, and ``.json`` holding either JSONL or one JSON array of
rows (how ShareGPT and many datasets ship; streamed with ijson, the "line" of an array element
is its 1-based index).

A row's id is its own ``id`` (or ``custom_id``), else the first 16 hex digits of the SHA-256 of
its normalised messages — stable across reruns. A row that cannot be used becomes a
:class:`Reject` (file, line, reason); a second row with an id already seen is rejected as a
duplicate. Files are read line by line (Parquet: batch by batch), never whole.

Faults: a line that is not JSON, nested deeper than the parser allows, or holding text that is not
valid Unicode (a lone UTF-16 surrogate, escaped or as raw bytes ``ED A0 80``) is a reject with its
reason; so is the rest of a file that stops being readable part-way (a corrupt zstd frame or
Parquet page): one reject names the file and the line it stopped at. A file that cannot be read
at all is refused before anything is sent (:func:`check_readable`).

Blank lines: a JSONL line that is empty or only whitespace is not a row. The JSON Lines format
allows none, but tools often write trailing or separating newlines, so such a line is neither
used nor rejected: it is counted (:attr:`ReadStats.blank_lines`) and reported in the run's
summary as ``blank_lines``, so nothing in the input goes unaccounted for.
"""

from __future__ import annotations

import glob
import hashlib
import io
import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from tokenplan.errors import InputError

SUFFIXES = (".jsonl", ".ndjson", ".json", ".jsonl.zst", ".jsonl.zstd", ".zst", ".zstd", ".parquet")
ROLES = ("system", "user", "assistant", "tool")
SHAREGPT_ROLES = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant",
                  "chatgpt": "assistant", "model": "assistant", "system": "system", "tool": "tool",
                  "observation": "tool", "function_response": "tool"}
# Request fields of an OpenAI Batch line's body honoured per row (OpenAI chat completions API, plus
# the vLLM/SGLang extensions top_k, min_p, repetition_penalty); the rest of the body is not sent.
BATCH_SAMPLING_FIELDS = ("max_tokens", "max_completion_tokens", "temperature", "top_p", "top_k", "min_p",
                         "seed", "stop", "presence_penalty", "frequency_penalty", "repetition_penalty",
                         "logit_bias", "logprobs", "top_logprobs", "response_format", "reasoning_effort",
                         "chat_template_kwargs", "tools", "tool_choice")
_CONVERSATION_KEYS = ("conversations", "messages", "prompt", "body")
# Keys a shape consumes; everything else in a row is kept in Row.fields.
_SHAPE_KEYS = {"conversations": ("conversations", "system"), "sharegpt": ("conversations", "system"),
               "messages": ("messages", "system"), "prompt": ("prompt", "system"), "batch": ("body",)}


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


@dataclass(frozen=True, slots=True)
class Reject:
    """An input row set aside: where it is (file, 1-based line), why, and its id when known."""

    source: str
    line: int
    reason: str
    id: str | None = None


@dataclass(slots=True)
class ReadStats:
    """What :func:`read_rows` read besides rows: blank or whitespace-only JSONL lines."""

    blank_lines: int = 0


class RowError(ValueError):
    """A row that cannot be used; the message is the reason written to ``rejects.jsonl``."""


def expand_inputs(patterns: Sequence[str]) -> list[Path]:
    """Files named by ``patterns`` (paths or globs), in the given order, each glob sorted.

    Raises:
        InputError: a pattern matches no file, or a file's suffix is not a known format.
    """
    files: list[Path] = []
    for pattern in patterns:
        matches = sorted(glob.glob(pattern)) if glob.has_magic(pattern) else [pattern]
        matches = [m for m in matches if os.path.isfile(m)]
        if not matches:
            raise InputError("input", pattern, "existing files or globs that match files")
        for match in matches:
            if not match.endswith(SUFFIXES):
                raise InputError("input", match, SUFFIXES)
            files.append(Path(match))
    return files


def read_rows(files: Sequence[Path], stats: ReadStats | None = None) -> Iterator[Row | Reject]:
    """Every row of ``files`` in order, as a :class:`Row` or a :class:`Reject`; blank lines
    are not rows and are counted in ``stats`` (see the module docstring)."""
    seen: set[str] = set()
    stats = stats if stats is not None else ReadStats()
    for path in files:
        items, line, source = _raw_items(path, stats), 0, file_name(path)
        while True:
            try:  # only reading the file is guarded here: a bad row is a reject, not a bad file
                line, item = next(items)
            except StopIteration:
                break
            except _read_errors() as problem:
                yield Reject(source, line + 1, f"file unreadable from here on: {_why(problem)}")
                break
            yield _row_or_reject(item, source, line, seen)


def file_name(path: Path) -> str:
    """``path`` as UTF-8 text: a name with bytes that are not UTF-8 (which Python keeps as lone
    surrogates) gets U+FFFD for them, so records naming the file can be written."""
    return str(path).encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _row_or_reject(item: Any, source: str, line: int, seen: set[str]) -> Row | Reject:
    try:
        row = parse_row(item, source, line)
        _unicode(row.id, "id")
    except RowError as problem:
        return Reject(source, line, str(problem), _safe_id(item))
    except RecursionError:
        return Reject(source, line, "nested deeper than the parser's limit", _safe_id(item))
    if row.id in seen:
        return Reject(source, line, f"duplicate id {row.id!r}", row.id)
    seen.add(row.id)
    return row


def _safe_id(item: Any) -> str | None:
    """The row's declared id for a reject line, or None when it is not valid text either."""
    try:
        found = _declared_id(item)
        return None if found is None else _unicode(found, "id")
    except RowError:
        return None


def _read_errors() -> tuple[type[BaseException], ...]:
    """What reading a damaged file raises: OS errors, zstd frame errors, Arrow errors."""
    import pyarrow as pa
    import zstandard

    return (OSError, EOFError, ValueError, zstandard.ZstdError, pa.ArrowException)


def _why(problem: BaseException) -> str:
    text = " ".join(str(problem).split())[:200]
    return f"{type(problem).__name__}: {text}" if text else type(problem).__name__


def check_readable(files: Sequence[Path]) -> None:
    """Open each file and read its start (zstd: the first 64 KiB decompressed; Parquet: the
    footer and the first row group's first batch), so a file that cannot be read at all is
    refused before anything is sent.

    Raises:
        InputError: naming the file and why it cannot be read.
    """
    for path in files:
        try:
            if path.name.endswith(".parquet"):
                import pyarrow.parquet as pq

                parquet = pq.ParquetFile(path)
                if parquet.metadata.num_rows:
                    next(parquet.iter_batches(batch_size=1), None)
                continue
            with _open_binary(path) as fh:
                fh.read(65536)
        except _read_errors() as problem:
            raise InputError("input", str(path), f"a readable JSONL, JSONL.zst or Parquet file "
                             f"({_why(problem)})") from None


def limited(items: Iterator[Row | Reject], limit: int | None) -> Iterator[Row | Reject]:
    """``items`` up to and including the ``limit``-th :class:`Row` (rejects pass through); all
    of them when ``limit`` is ``None``."""
    if limit is None:
        yield from items
        return
    rows = 0
    for item in items:
        if rows >= limit:
            return
        yield item
        rows += isinstance(item, Row)


def count_units(files: Sequence[Path], n: int, limit: int | None) -> int:
    """Units the input holds: usable rows (the first ``limit``), × ``n`` samples, read from the
    files again (after a stop, the units never read are part of the input too)."""
    return n * sum(isinstance(item, Row) for item in limited(read_rows(files), limit))


def count_rows(files: Sequence[Path]) -> int:
    """Rows expected in ``files``: non-empty lines of JSONL, ``num_rows`` of Parquet (for ETA)."""
    total = 0
    for path in files:
        if path.name.endswith(".parquet"):
            import pyarrow.parquet as pq

            total += pq.ParquetFile(path).metadata.num_rows
            continue
        if _is_json_array(path):
            total += sum(1 for _ in _json_array_items(path))
            continue
        with _open_binary(path) as fh:
            total += sum(1 for line in fh if line.strip())
    return total


def count_rows_or_none(files: Sequence[Path]) -> int | None:
    """:func:`count_rows`, or None when a file breaks part-way (the reader then rejects the
    unreadable part; the count only feeds the ETA)."""
    try:
        return count_rows(files)
    except _read_errors():
        return None


def parse_row(item: Any, source: str, line: int) -> Row:
    """Turn one decoded JSON object (or Parquet row) into a :class:`Row`.

    Raises:
        RowError: the shape is unknown or a field is malformed; the message names the field.
    """
    if isinstance(item, RowError):
        raise item
    if not isinstance(item, dict):
        raise RowError(f"row is a {type(item).__name__}, not a JSON object")
    shape, messages = _messages(item)
    messages = _with_system(item, messages, shape)
    if not any(m.role == "user" for m in messages):
        raise RowError(f"{shape}: no user turn")
    declared = _declared_id(item)
    row_id = declared if declared is not None else content_id(messages)
    consumed = _SHAPE_KEYS[shape]
    fields = {k: v for k, v in item.items() if k not in consumed and k not in ("id", "custom_id")
              and not (k in _CONVERSATION_KEYS and v is None)}
    overrides = _batch_overrides(item["body"]) if shape == "batch" else {}
    return Row(row_id, messages, shape, source, line, fields, overrides)


def _with_system(item: dict[str, Any], messages: tuple[Message, ...], shape: str) -> tuple[Message, ...]:
    system = item.get("system")
    if system is None or shape == "batch" or system == "":
        return messages
    if not isinstance(system, str):
        raise RowError(f"system: {type(system).__name__} is not a string")
    if messages and messages[0].role == "system":
        return messages  # the conversation carries its own system turn
    return (Message("system", system), *messages)


def _batch_overrides(body: dict[str, Any]) -> dict[str, Any]:
    overrides = {k: body[k] for k in BATCH_SAMPLING_FIELDS if body.get(k) is not None}
    if "max_completion_tokens" in overrides:
        overrides.setdefault("max_tokens", overrides["max_completion_tokens"])
        del overrides["max_completion_tokens"]
    tokens = overrides.get("max_tokens")
    if tokens is not None and (not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 1):
        raise RowError(f"body.max_tokens: {tokens!r} is not a positive integer")
    temperature = overrides.get("temperature")
    if temperature is not None and (isinstance(temperature, bool) or not isinstance(temperature, (int, float))
                                    or temperature < 0):
        raise RowError(f"body.temperature: {temperature!r} is not a number >= 0")
    return overrides


def content_id(messages: Sequence[Message]) -> str:
    """A stable id from the messages: 16 hex digits of SHA-256 over ``[[role, content], …]`` JSON."""
    canonical = json.dumps([[m.role, m.content] for m in messages], ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def _declared_id(item: Any) -> str | None:
    if not isinstance(item, dict):
        return None
    for key in ("id", "custom_id"):
        value = item.get(key)
        if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value) != "":
            return str(value)
    return None


def _messages(item: dict[str, Any]) -> tuple[str, tuple[Message, ...]]:
    if item.get("conversations") is not None:
        turns = item["conversations"]
        sharegpt = (isinstance(turns, list) and bool(turns) and isinstance(turns[0], dict)
                    and turns[0].get("from") is not None)
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
        return "prompt", (Message("user", _unicode(prompt, "prompt")),)
    raise RowError(f"unknown shape: keys {sorted(item)[:8]} (expected conversations, messages, "
                   "prompt, or custom_id + body)")


def _turns(turns: Any, field: str, role_key: str, text_key: str,
           role_map: dict[str, str] | None) -> tuple[Message, ...]:
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
        text = turn.get(text_key)
        if text is None and (role == "assistant" and extra):
            text = ""  # an assistant turn that only calls tools
        out.append(Message(role, _text(text, f"{field}[{i}].{text_key}"), extra))
    return tuple(out)


_TOOL_KEYS = ("tool_calls", "tool_call_id", "name")


def _text(content: Any, field: str) -> str:
    if isinstance(content, str):
        return _unicode(content, field)
    if isinstance(content, list) and all(isinstance(p, dict) and p.get("type") == "text" for p in content):
        return _unicode("".join(str(p.get("text", "")) for p in content), field)
    raise RowError(f"{field}: not a string or a list of text parts")


def _unicode(text: str, field: str) -> str:
    """``text`` when it is valid Unicode; a lone UTF-16 surrogate (``"\ud800"`` escaped in JSON,
    or the raw bytes ``ED A0 80``, which Python's json decodes with surrogatepass) cannot be
    stored as UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as problem:
        raise RowError(f"{field}: lone UTF-16 surrogate {text[problem.start]!r} at character "
                       f"{problem.start} (not valid Unicode)") from None
    return text


def _raw_items(path: Path, stats: ReadStats) -> Iterator[tuple[int, Any]]:
    if path.name.endswith(".parquet"):
        yield from _parquet_items(path)
        return
    if _is_json_array(path):
        yield from _json_array_items(path)
        return
    with _open_binary(path) as fh:
        for line_no, raw in enumerate(fh, start=1):
            if not raw.strip():
                stats.blank_lines += 1
                continue
            try:
                yield line_no, _loads(raw)
            except ValueError as problem:
                yield line_no, RowError(f"invalid JSON: {' '.join(str(problem).split())[:200]}")
            except RecursionError:
                yield line_no, RowError("invalid JSON: nested deeper than the parser's limit")


FAST_PARSE_MAX_BRACKETS = 512  # more '{' + '[' than this in a line: parsed by json, not orjson


def _is_json_array(path: Path) -> bool:
    """Whether a ``.json`` file holds one JSON array (its first non-blank byte is ``[``)."""
    if not path.name.endswith(".json"):
        return False
    with open(path, "rb") as fh:
        head = fh.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
    return head.startswith(b"[")


def _json_array_items(path: Path) -> Iterator[tuple[int, Any]]:
    """The elements of a file holding one JSON array, streamed; "line" is the 1-based index.
    A file that stops being valid JSON yields one :class:`RowError` at the element it broke."""
    import ijson

    index = 0
    with open(path, "rb") as fh:
        try:
            for index, item in enumerate(ijson.items(fh, "item", use_float=True), start=1):
                yield index, item
        except ijson.JSONError as problem:
            yield index + 1, RowError(f"invalid JSON in the array after element {index}: {problem}")


def _loads(raw: bytes) -> Any:
    """``json.loads``, ~3x faster through orjson; lines orjson refuses but Python's json takes
    (``NaN``, integers past 64 bits) still go through ``json.loads``."""
    if raw.count(b"{") + raw.count(b"[") > FAST_PARSE_MAX_BRACKETS:
        # orjson 3.8 has no nesting limit: 100,000 nested objects overflow the C stack and kill
        # the process (measured: SIGSEGV). Python's json stops at the recursion limit with a
        # RecursionError, which becomes a reject; a line with this many brackets is rare.
        return json.loads(raw)
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return json.loads(raw)


def _parquet_items(path: Path) -> Iterator[tuple[int, Any]]:
    import pyarrow.parquet as pq

    row_no = 0
    for batch in pq.ParquetFile(path).iter_batches(batch_size=1024):
        for item in batch.to_pylist():
            row_no += 1
            yield row_no, item


def _open_binary(path: Path) -> io.BufferedIOBase:
    fh = open(path, "rb")
    if path.name.endswith((".zst", ".zstd")):
        import zstandard

        return io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(fh, closefd=True))
    return fh
