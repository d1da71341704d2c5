"""The prompts a bench sends: random prompts of an exact token count, or a dataset's prompts.

Random prompts (``--isl/--osl``) are words drawn from a fixed list with a seeded RNG, distinct per
request (so prefix caching does not help). Their length is made exact where the server has a
tokenizer endpoint (vLLM ``POST /tokenize`` with ``messages`` counts the chat template too;
``/detokenize`` turns token ids back into text):

1. ``overhead`` = tokens of a chat with empty content (template and generation prompt);
2. the content is tokenized on its own, cut to ``isl − overhead`` ids and detokenized;
3. the whole chat is counted again and the cut moved by the difference, at most
   ``EXACT_TRIES`` times (a cut inside a multi-byte word can re-tokenize differently).

Without a tokenizer endpoint (SGLang, ``transformers serve``) the length is an **approximation**
calibrated on the server itself: two probe chats of 1 and ``PROBE_WORDS`` words with
``max_tokens 1`` give, from their ``usage.prompt_tokens``, the tokens per word and the template
overhead; each prompt then gets ``round((isl − overhead) / tokens_per_word)`` words. The
bench reports the mean prompt length the server counted either way.

Dataset prompts (``--dataset FILE``) keep their natural length: JSONL (plain, or ``.gz``/``.zst``/``.bz2``/``.lz4``) or Parquet rows with ``messages`` (chat) or
``prompt``/``text``/``question``, optional ``max_tokens``/``output_len``; or a ShareGPT JSON list
whose items have ``conversations`` (the first human turn is the prompt, the first reply's length
in words is the output budget when no ``--osl`` is given).
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tokenplan.bench.http import SideRequestFailed, request_json, server_root
from tokenplan.errors import ConfigError, InputError
from tokenplan.sniff import check_content_matches_name

WORDS = (
    "the of and to in is was it for on are as with his they at be this from have or by one had not but "
    "what all were when we there can an your which their said if do will each about how up out them "
    "then she many some so these would other into has more her two like him see time could no make "
    "than first been its who now people my made over did down only way find use may water long little "
    "very after words called just where most know get through back much before go good new write our "
    "used me man too any day same right look think also around another came come work three word must "
    "because does part even place well such here take why things help put years different away again "
    "off went old number great tell men say small every found still between name should home big give "
    "air line set own under read last never us left end along while might next sound below saw something "
    "thought both few those always looked show large often together asked house world going want school "
    "important until form food keep children feet land side without boy once animals life enough took "
    "sometimes four head above kind began almost live page got earth need far hand high year mother light "
    "parts country father let night following picture being study second eyes soon times story boys "
    "since white days ever paper hard near sentence better best across during today others however sure "
    "means knew try told young miles sun ways thing whole hear example heard several change answer room "
    "sea against top turned learn point city play toward five using himself usually"
).split()
EXACT_TRIES = 4
PROBE_WORDS = 200


@dataclass(frozen=True, slots=True)
class Prompt:
    """One request's input: chat ``messages``, ``max_tokens`` (its output budget, tokens) and
    ``prompt_tokens`` — the server's count where it was measured, else None."""

    messages: tuple[dict, ...]
    max_tokens: int
    prompt_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class Workload:
    """The prompts of a bench, used round-robin, and how their lengths were made.

    Attributes:
        prompts: the prompts.
        method: ``tokenizer`` (exact via ``/tokenize``), ``approximation`` (words calibrated by
            two probe chats) or ``dataset`` (natural lengths).
        exact_fraction: share of prompts whose counted length equals the target (tokenizer method).
        ignore_eos: ask the server to generate exactly ``max_tokens`` (random workloads).
    """

    prompts: tuple[Prompt, ...]
    method: str
    exact_fraction: float | None
    ignore_eos: bool


def _words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(max(n, 1)))


def _chat(text: str) -> tuple[dict, ...]:
    return ({"role": "user", "content": text},)


class Tokenizer:
    """The server's ``/tokenize`` and ``/detokenize`` (vLLM's request shapes)."""

    def __init__(self, base_url: str, model: str, api_key: str | None = None):
        self.root, self.model, self.api_key = server_root(base_url), model, api_key

    async def count_chat(self, messages: tuple[dict, ...]) -> int:
        answer = await request_json(
            self.root + "/tokenize", {"model": self.model, "messages": list(messages)}, api_key=self.api_key
        )
        return int(answer["count"])

    async def encode(self, text: str) -> list[int]:
        answer = await request_json(
            self.root + "/tokenize",
            {"model": self.model, "prompt": text, "add_special_tokens": False},
            api_key=self.api_key,
        )
        return [int(t) for t in answer["tokens"]]

    async def decode(self, ids: list[int]) -> str:
        answer = await request_json(
            self.root + "/detokenize", {"model": self.model, "tokens": ids}, api_key=self.api_key
        )
        return str(answer["prompt"])


async def _exact_prompt(tok: Tokenizer, overhead: int, isl: int, osl: int, seed: int) -> Prompt:
    rng = random.Random(seed)
    ids = await tok.encode(_words(rng, int(isl * 1.5) + 8))
    want = max(isl - overhead, 1)
    count, messages = -1, _chat("")
    for _ in range(EXACT_TRIES):
        messages = _chat(await tok.decode(ids[: max(want, 1)]))
        count = await tok.count_chat(messages)
        if count == isl:
            break
        want -= count - isl
    return Prompt(messages, osl, count)


async def random_workload_exact(
    base_url: str, model: str, isl: int, osl: int, n: int, seed: int, parallel: int = 8, api_key: str | None = None
) -> Workload:
    """``n`` random prompts of exactly ``isl`` tokens via the server's tokenizer (``api_key``: sent
    as a bearer token to ``/tokenize`` and ``/detokenize``).

    Raises:
        SideRequestFailed: the server has no usable ``/tokenize``/``/detokenize``.
    """
    tok = Tokenizer(base_url, model, api_key)
    overhead = await tok.count_chat(_chat(""))
    gate = asyncio.Semaphore(parallel)

    async def one(i: int) -> Prompt:
        async with gate:
            return await _exact_prompt(tok, overhead, isl, osl, seed * 1_000_003 + i)

    prompts = await asyncio.gather(*(one(i) for i in range(n)))
    exact = sum(p.prompt_tokens == isl for p in prompts) / n
    return Workload(tuple(prompts), "tokenizer", exact, True)


def approximate_words(isl: int, overhead_tokens: float, tokens_per_word: float) -> int:
    """Words for an ``isl``-token chat: ``round((isl − overhead) / tokens_per_word)``, at least 1."""
    return max(round((isl - overhead_tokens) / tokens_per_word), 1)


def calibrate_words(short_tokens: int, long_tokens: int) -> tuple[float, float]:
    """(overhead tokens, tokens per word) from the prompt tokens of a 1-word and a
    ``PROBE_WORDS``-word probe chat: the line through both points."""
    per_word = max((long_tokens - short_tokens) / (PROBE_WORDS - 1), 1e-3)
    return short_tokens - per_word, per_word


def random_workload_approx(
    isl: int, osl: int, n: int, seed: int, overhead_tokens: float, tokens_per_word: float
) -> Workload:
    """``n`` random prompts sized by :func:`approximate_words` (see the module docstring)."""
    words = approximate_words(isl, overhead_tokens, tokens_per_word)
    prompts = tuple(Prompt(_chat(_words(random.Random(seed * 1_000_003 + i), words)), osl) for i in range(n))
    return Workload(prompts, "approximation", None, True)


def probe_messages(seed: int) -> tuple[tuple[dict, ...], tuple[dict, ...]]:
    """The two probe chats of the approximation: 1 word and ``PROBE_WORDS`` words."""
    rng = random.Random(seed)
    return _chat(_words(rng, 1)), _chat(_words(rng, PROBE_WORDS))


def _messages_problem(messages: tuple) -> str | None:
    """Why a chat cannot be sent as OpenAI ``messages``, or None: it must hold at least one
    object with a text ``role`` and a ``content`` that is text or a list of content parts."""
    if not messages:
        return "is empty (expected at least one message)"
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            return f"item {i} is not a message (expected an object with a 'role' and a 'content')"
        if not isinstance(m.get("content"), (str, list)):
            return f"item {i} has no text 'content'"
    return None


def _dataset_prompt(item: object, osl: int | None, where: str, path: str) -> Prompt:
    if not isinstance(item, dict):
        raise ConfigError(path, where, "expected a JSON object")
    body = item.get("body")
    if isinstance(body, dict) and "custom_id" in item:  # an OpenAI Batch line, as generate reads it
        item = body  # the request: messages and max_tokens
    budget = item.get("max_tokens", item.get("output_len"))
    if isinstance(item.get("messages"), list):
        messages = tuple(item["messages"])
        problem = _messages_problem(messages)
        if problem:
            raise ConfigError(path, where, f"'messages' {problem}")
    elif isinstance(item.get("conversations"), list) and item["conversations"]:
        turns = item["conversations"]
        messages = _chat(str(turns[0].get("value", turns[0].get("content", ""))))
        if budget is None and len(turns) > 1:
            budget = len(str(turns[1].get("value", turns[1].get("content", ""))).split())
    else:
        text = item.get("prompt", item.get("text", item.get("question")))
        if not isinstance(text, str):
            wrong = next((k for k in ("messages", "conversations") if k in item), None)
            if wrong is not None:  # there, but not a (non-empty) list: say that (a new-user pass)
                raise ConfigError(
                    path, where, f"'{wrong}' is {type(item[wrong]).__name__}, not a non-empty list of turns"
                )
            raise ConfigError(
                path,
                where,
                "no 'messages', 'conversations', 'prompt', 'text' or 'question' (or an OpenAI Batch line's 'body')",
            )
        if not text.strip():
            raise ConfigError(path, where, "an empty prompt (expected text to send)")
        messages = _chat(text)
    tokens = osl if osl is not None else budget
    if not isinstance(tokens, (int, float)) or tokens < 1:
        raise ConfigError(path, where, "no output budget: give --osl or a 'max_tokens' per prompt")
    return Prompt(messages, int(tokens))


def _unicode(item: object, where: str, path: str) -> object:
    """``item`` as read, once its text is known to be sendable: JSON's ``\\ud800`` escapes decode
    to lone surrogates, which no request body can carry (ConfigError naming the line)."""
    try:
        json.dumps(item, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise ConfigError(
            path, where, "holds a lone surrogate (an unpaired \\ud800–\\udfff escape): not valid Unicode text"
        ) from None
    return item


# Compressed JSONL as generate reads it (runner.input.files.CODECS): the last suffix names the codec
_CODEC_SUFFIXES = (".gz", ".zst", ".zstd", ".bz2", ".lz4")


def _without_nones(row: dict) -> dict:
    """``row`` with its ``messages`` (a list of objects) stripped of keys whose value is None."""
    messages = row.get("messages")
    if isinstance(messages, list):
        row = {
            **row,
            "messages": [{k: v for k, v in m.items() if v is not None} if isinstance(m, dict) else m for m in messages],
        }
    return row


def _dataset_content(p: Path, path: str) -> str | list[dict]:
    """The file's text (a compressed JSONL decompressed by pyarrow, which names the codec by the
    suffix), or a Parquet file's rows; the formats ``generate`` reads (a new-user pass: bench
    refused the ``.parquet`` and ``.gz`` inputs generate had run).

    Raises:
        ConfigError: not UTF-8, or a compressed or Parquet file that cannot be read.
    """
    import pyarrow as pa

    try:
        if p.name.endswith(".parquet"):
            import pyarrow.parquet as pq

            # Arrow gives every struct field to every row (None where a row has none): the
            # messages are sent with the keys each row has
            return [_without_nones(row) for row in pq.read_table(p).to_pylist()]
        if p.name.endswith(_CODEC_SUFFIXES):
            with pa.input_stream(str(p), compression="detect") as stream:
                raw = stream.read()
        else:
            raw = p.read_bytes()
    except (OSError, ValueError, pa.ArrowException) as problem:
        raise ConfigError(path, "<root>", f"cannot be read ({str(problem).splitlines()[0]})") from None
    try:
        return raw.decode("utf-8-sig")  # a leading byte-order mark is not part of the JSON
    except UnicodeDecodeError:
        raise ConfigError(
            path, "encoding", "cannot be read as UTF-8 text; expected a UTF-8 JSONL or JSON file"
        ) from None


def dataset_workload(path: str, osl: int | None, limit: int | None = None) -> Workload:
    """Prompts from a JSONL file (plain or compressed), a ShareGPT-style JSON list or a Parquet
    file (see the module docstring).

    Raises:
        InputError: the file does not exist or holds no prompt.
        ConfigError: a line, item or row is not JSON or not a prompt (names it), or the file cannot be read.
    """
    p = Path(path)
    if not p.is_file():
        raise InputError(
            "dataset", path, "an existing JSONL, JSON or Parquet file (JSONL also as .gz, .zst, .bz2, .lz4)"
        )
    check_content_matches_name(p, "dataset")  # a gzip named .jsonl: said as such, as generate says it
    content = _dataset_content(p, path)
    items: list[tuple[str, object]]
    if isinstance(content, list):  # Parquet: one row per prompt
        items = [(f"row {i + 1}", row) for i, row in enumerate(content[:limit])]
    elif content.lstrip().startswith("["):
        try:
            whole = json.loads(content)
        except RecursionError:
            raise ConfigError(path, "<root>", "not valid JSON (nested too deeply)") from None
        except ValueError as exc:
            raise ConfigError(path, "<root>", f"not valid JSON ({exc})") from None
        items = [(f"item {i}", it) for i, it in enumerate(whole[:limit])]
    else:
        items = list(_jsonl_items(content, path, limit))
    prompts = [_dataset_prompt(_unicode(item, where, path), osl, where, path) for where, item in items]
    if not prompts:
        raise InputError("dataset", path, "a file with at least one prompt")
    return Workload(tuple(prompts), "dataset", None, False)


def _jsonl_items(text: str, path: str, limit: int | None) -> Iterator[tuple[str, object]]:
    """``("line N", value)`` for each non-blank JSONL line, the first ``limit``.

    Raises:
        ConfigError: a line that is not JSON (named).
    """
    count = 0
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        if limit is not None and count >= limit:
            return
        try:
            item = json.loads(line)
        except (ValueError, RecursionError):  # RecursionError: nested deeper than the parser goes
            raise ConfigError(path, f"line {number}", "not valid JSON") from None
        count += 1
        yield f"line {number}", item


__all__ = [
    "Prompt",
    "Workload",
    "Tokenizer",
    "SideRequestFailed",
    "random_workload_exact",
    "random_workload_approx",
    "approximate_words",
    "calibrate_words",
    "probe_messages",
    "dataset_workload",
]
