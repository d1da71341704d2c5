"""``generate --dry-run``: what the input asks for, read from the files, nothing sent.

Counts usable rows, rejected rows, units (rows × ``n``) and requests (one per user turn in
``regenerate``, one per row in ``complete``). With a tokenizer (a local model directory or
``--tokenizer``; ``transformers`` imported only then), each request's prompt is rendered with the
chat template and counted: the later turns of a multi-turn row are counted with the *original*
assistant answers standing in for the regenerated ones, so those prompts are estimates.
The prompt lengths are summarised as the planner describes inputs — mean, lognormal σ (standard
deviation of ln tokens) and the longest — and turned into the ``tokenplan plan`` command for them.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokenplan.errors import InputError
from tokenplan.runner.input.rows import Reject, limited, read_rows
from tokenplan.runner.input.shapes import Message, Row
from tokenplan.runner.requests import Mode, prompt_prefixes

REJECTS_SHOWN = 5  # the rows set aside a dry run names (a new-user pass saw "5 rejected" and no reason)


@dataclass(frozen=True, slots=True)
class DryRun:
    """What a run would send. Token figures are ``None`` without a tokenizer; ``rejects``: the
    first :data:`REJECTS_SHOWN` rows set aside, as ``file line N: reason`` (the run writes every
    one to ``rejects.jsonl``; a dry run writes nothing, so it says them)."""

    rows: int
    rejected_rows: int
    units: int
    requests: int
    prompt_tokens_mean: float | None
    prompt_tokens_sigma: float | None
    prompt_tokens_max: int | None
    tokenizer: str | None
    rejects: tuple[str, ...] = field(default=())

    def plan_command(self, max_tokens: int, osl_at_cap: float | None = None, model: str | None = None) -> str:
        """The ``tokenplan plan`` command for these requests, one ``plan`` accepts: ``--isl-*``
        only when counted, with an ``--isl-cap`` above the mean (the longest prompt, or one token
        more when every prompt has the mean's length); ``--max-tokens``, or where it is at or below
        the plan's default mean output (``osl_at_cap``: the mean of the plan's default outputs cut
        at ``max_tokens``, tokens) ``--osl`` at that mean below the cap, or every output at the
        cap (``--osl-sigma 0``) when that mean rounds to the cap; ``--model`` where ``model`` is
        given (the served model: a catalog name, a Hugging Face id or a local directory; without it
        ``plan`` plans its default model, a new-user pass)."""
        parts = [f"tokenplan plan --samples {self.requests}"]
        if self.prompt_tokens_mean is not None and self.prompt_tokens_max is not None:
            mean = max(round(self.prompt_tokens_mean), 1)
            parts.append(
                f"--isl {mean} --isl-sigma {self.prompt_tokens_sigma:.2f} "
                f"--isl-cap {max(self.prompt_tokens_max, mean + 1)}"
            )
        if osl_at_cap is None:
            parts.append(f"--max-tokens {max_tokens}")
        elif max(round(osl_at_cap), 1) < max_tokens:
            parts.append(f"--osl {max(round(osl_at_cap), 1)} --max-tokens {max_tokens}")
        else:
            parts.append(f"--osl {max_tokens} --osl-sigma 0")
        if model:
            parts.append(f"--model {shlex.quote(model)}")
        return " ".join(parts)


def request_prompts(row: Row, mode: Mode) -> Iterator[list[dict[str, Any]]]:
    """The prompts of ``row``'s requests, original assistant answers standing in for the
    regenerated ones (see the module docstring)."""
    prefixes = prompt_prefixes(row.messages, mode)
    if mode == "complete":
        yield [m.as_dict() for m in prefixes[0]]
        return
    history: list[Message] = []
    position = 0
    for prefix in prefixes:
        end = row.messages.index(prefix[-1], position) + 1
        history = list(row.messages[:end])
        position = end
        yield [m.as_dict() for m in history]


def dry_run(
    files: Sequence[Path],
    mode: Mode,
    n: int,
    limit: int | None,
    tokenizer_path: Path | None,
    notes: list[str] | None = None,
    option: str = "--tokenizer",
) -> DryRun:
    """Count what the input asks for (module docstring); ``tokenizer_path`` None: no token counts.
    ``option`` is where the tokenizer came from (``--tokenizer``, or ``--model`` for a local model
    directory, :func:`default_tokenizer`): a model's tokenizer that needs ``transformers`` where
    it is not installed is left out with a line added to ``notes``; one named by ``--tokenizer``
    is refused (InputError), as is one transformers cannot load."""
    count = _token_counter(tokenizer_path, option, notes if notes is not None else [])
    if count is None:
        tokenizer_path = None
    rows = rejected = requests = 0
    rejects: list[str] = []
    logs: list[float] = []
    longest = 0
    for item in limited(read_rows(files, mode=mode), limit):
        if not isinstance(item, Row):
            rejected += 1
            if isinstance(item, Reject) and len(rejects) < REJECTS_SHOWN:
                rejects.append(f"{item.source} line {item.line}: {item.reason}")
            continue
        rows += 1
        for prompt in request_prompts(item, mode):
            requests += n
            if count is not None:
                tokens = max(count(prompt), 1)
                logs.append(math.log(tokens))
                longest = max(longest, tokens)
    mean = sigma = None
    if logs:
        from statistics import fmean, pstdev

        sigma, mean = pstdev(logs), fmean(math.exp(x) for x in logs)
    return DryRun(
        rows,
        rejected,
        rows * n,
        requests,
        mean,
        sigma,
        longest if logs else None,
        None if tokenizer_path is None else str(tokenizer_path),
        tuple(rejects),
    )


def _token_counter(path: Path | None, option: str, notes: list[str]):  # noqa: ANN202 - a closure over a tokenizer
    if path is None:
        return None
    try:
        from transformers import AutoTokenizer
    except ImportError as problem:  # transformers is in no extra of the core install (pyproject: test only)
        if option != "--tokenizer":
            notes.append(
                f"prompt tokens not counted: the tokenizer of {option} {path} needs the transformers package, "
                "which the core install leaves out (pip install transformers to count them)"
            )
            return None
        raise InputError(
            option,
            str(path),
            f"a tokenizer directory counted with the transformers package, which the core install leaves out: "
            f"pip install transformers ({type(problem).__name__}: {problem})",
        ) from None
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(path))
    except (ImportError, OSError, ValueError) as problem:
        raise InputError(
            option,
            str(path),
            f"a local tokenizer directory that transformers can load "
            f"({type(problem).__name__}: {str(problem).splitlines()[0] if str(problem) else ''})",
        ) from None

    def count(prompt: list[dict[str, Any]]) -> int:
        ids: Any = tokenizer.apply_chat_template(prompt, tokenize=True, add_generation_prompt=True)  # typed a union
        if isinstance(ids, dict) or hasattr(ids, "keys"):  # transformers 5 returns a BatchEncoding
            ids = ids["input_ids"]
        return len(ids)

    return count


def default_tokenizer(tokenizer: Path | None, model: str) -> tuple[Path | None, str]:
    """The tokenizer ``--dry-run`` counts prompt tokens with and the option it came from:
    ``tokenizer`` when given (``--tokenizer``), else the model when it is a local directory holding
    ``tokenizer_config.json`` (``--model``), else None (no counts)."""
    if tokenizer is None and (Path(model) / "tokenizer_config.json").is_file():
        return Path(model), "--model"
    return tokenizer, "--tokenizer"
