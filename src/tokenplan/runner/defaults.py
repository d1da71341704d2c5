"""Where each sampling value of a ``generate`` run comes from, and the notes that say so.

Order, first wins, per value:

1. the option the user gave (``--max-tokens``, ``--temperature``, ``--top-p``, ``--top-k``);
2. ``max_tokens`` only: the plan's output cap (``job.osl_cap_tokens`` of ``tokenplan plan
   --json``, or the ``cap N`` in its ``job.osl`` text), so the run cuts answers where the plan
   assumed they are cut; where that cap alone passes the model's context (when known, as in 4),
   each request asks for the cap or its context less its prompt, whichever is less (as the cap
   stands every request would be refused);
3. the model's ``generation_config.json`` (Hugging Face ``GenerationConfig``): ``--generation-config
   PATH`` (the file or the model directory), else ``MODEL/generation_config.json`` when ``--model``
   is a local directory (how vLLM, SGLang and ``transformers serve`` are often started). Read:
   ``do_sample`` (false → temperature 0), ``temperature``, ``top_p``, ``top_k`` — only the keys
   present, as vLLM's ``--generation-config auto`` does;
4. ``max_tokens`` only: the model's context (``max_position_embeddings`` of a local ``--model``
   directory or of the catalog's entry) less each prompt: every request asks for what its context
   leaves (:func:`tokenplan.runner.requests.request_body`), so answers are cut only where the
   server would cut them;
5. the fallback: ``max_tokens`` 32,768 — what the default plan assumes (``tokenplan plan``'s
   ``--max-tokens`` default), so the run cuts answers where the plan did; a 4,096 default cut ~16 %
   of a default plan's answers — and temperature 0 (greedy), with a note, since thinking
   models warn against greedy decoding (Qwen3 model card: "DO NOT use greedy decoding, as it can
   lead to performance degradation and endless repetitions"; it recommends temperature 0.6,
   top_p 0.95, top_k 20 in thinking mode, https://huggingface.co/Qwen/Qwen3-8B).

A Batch input line's own ``body`` fields override all of these for that row
(:attr:`tokenplan.runner.input.shapes.Row.overrides`). What temperature 0 does to a job is warned
about before anything is sent (:func:`greedy_warnings`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenplan.errors import ConfigError, InputError
from tokenplan.loaders import load_json
from tokenplan.runner.requests import BodyConflict, Sampling, request_body

FALLBACK_MAX_TOKENS = 32_768  # the default plan's output cap (api.plan.PlanRequest.osl_cap)
FALLBACK_TEMPERATURE = 0.0
# The sampling values a request may carry, from an option or a generation_config.json alike
# (runner.options.RANGES take these): engines accept temperature ≥ 0, and past ~2 sampling is noise
# already; top_p is a probability; top_k a positive 32-bit integer.
SAMPLING_RANGES: dict[str, tuple[float, float]] = {
    "temperature": (0.0, 100.0),
    "top_p": (0.0, 1.0),
    "top_k": (1, 2**31 - 1),
}
MAX_PLAN_TOKENS = 2**24  # a plan's cap above this is refused, as --max-tokens is (runner.options.RANGES)


@dataclass(frozen=True, slots=True)
class SamplingChoice:
    """The resolved values (``None``: not sent) and one note per value saying where it came from;
    ``context_tokens`` when ``max_tokens`` is the model's context, to be lessened by each prompt."""

    max_tokens: int
    temperature: float
    top_p: float | None
    top_k: int | None
    notes: tuple[str, ...]
    context_tokens: int | None = None


def read_generation_config(path: Path) -> dict[str, Any]:
    """The sampling fields of a ``generation_config.json`` (``path`` is the file or its directory).

    Returns ``{"temperature", "top_p", "top_k"}`` restricted to what the file sets; ``do_sample:
    false`` gives ``temperature 0.0`` whatever the file's temperature. ``top_k: 0`` is Hugging
    Face's "no top-k" (``GenerationConfig`` adds no top-k warper for 0), so no ``top_k`` is sent.

    Raises:
        InputError: the file (or the directory's ``generation_config.json``) cannot be read.
        ConfigError: not UTF-8 JSON, nested too deep, a key twice, not an object, or a value outside
            :data:`SAMPLING_RANGES` (NaN, a negative ``top_k``): one line naming the file and key.
    """
    file = path / "generation_config.json" if path.is_dir() else path
    if not file.is_file():
        raise InputError(
            "--generation-config",
            str(path),
            "a readable generation_config.json or a model directory holding one (file not found)",
        )
    data = load_json(file)
    if not isinstance(data, dict):
        raise ConfigError(str(file), "<root>", "expected a JSON object (a Hugging Face generation_config.json)")
    values: dict[str, Any] = {}
    for key, (low, high) in SAMPLING_RANGES.items():
        value = data.get(key)
        whole = key == "top_k"
        if value is None or (whole and value == 0 and not isinstance(value, bool)):
            continue
        number = not isinstance(value, bool) and isinstance(value, int if whole else (int, float))
        if not (number and low <= value <= high and not (key == "top_p" and value == 0)):  # also refuses nan
            allowed = {
                "temperature": f"a number from {low:g} to {high:g}",
                "top_p": f"a number above 0, at most {high:g}",
                "top_k": f"an integer from {low:,} to {high:,}, or 0 for no top-k",
            }[key]
            raise ConfigError(str(file), key, f"{value!r} is not allowed (allowed: {allowed})")
        values[key] = int(value) if whole else float(value)
    if data.get("do_sample") is False:
        values = {"temperature": 0.0}  # greedy: top_p/top_k do not apply
    return values


def model_generation_config(model: str) -> Path | None:
    """``MODEL/generation_config.json`` when ``model`` names a local directory holding one."""
    candidate = Path(model) / "generation_config.json"
    try:
        return candidate if candidate.is_file() else None
    except OSError:
        return None


def choose_sampling(
    given: dict[str, Any],
    plan_cap: int | None,
    plan_path: Path | None,
    config: dict[str, Any] | None,
    config_path: Path | None,
    context: tuple[int, str] | None = None,
) -> SamplingChoice:
    """Resolve ``max_tokens``, ``temperature``, ``top_p``, ``top_k`` in the order of the module
    docstring; ``given`` holds the user's options (``None`` = not given), ``context`` the model's
    context (tokens) and where it was read, when known.

    Raises:
        InputError: a plan whose output cap is above :data:`MAX_PLAN_TOKENS`.
    """
    notes: list[str] = []
    config = config or {}
    max_tokens, context_tokens = given.get("max_tokens"), None
    if max_tokens is None and plan_cap is not None:
        if plan_cap > MAX_PLAN_TOKENS:
            raise InputError(
                f"--plan {plan_path} job.osl_cap_tokens",
                plan_cap,
                f"an output cap from 1 to {MAX_PLAN_TOKENS:,} tokens",
            )
        max_tokens = plan_cap
        if context is not None and plan_cap >= context[0]:
            # the cap alone passes the context: every request would be refused as it stands, so
            # each asks for the cap or its context less its prompt, whichever is less
            context_tokens = context[0]
            notes.append(
                f"max_tokens {plan_cap:,} (the plan {plan_path}'s output cap), less each prompt where the "
                f"two pass the model's context {context[0]:,} ({context[1]})"
            )
        else:
            notes.append(f"max_tokens {plan_cap:,} (the plan {plan_path}'s output cap)")
    elif max_tokens is None and context is not None:
        max_tokens = context_tokens = context[0]
        notes.append(
            f"max_tokens: the model's context {context[0]:,} ({context[1]}) less each prompt, "
            "counted as its JSON bytes (no fewer than its tokens); --max-tokens or --plan sets it"
        )
    elif max_tokens is None:
        max_tokens = FALLBACK_MAX_TOKENS
        notes.append(
            f"max_tokens {FALLBACK_MAX_TOKENS:,} (the default plan's output cap; --max-tokens or --plan sets it)"
        )
    from_config = [k for k in ("temperature", "top_p", "top_k") if given.get(k) is None and k in config]
    chosen: dict[str, Any] = {
        k: given.get(k) if given.get(k) is not None else config.get(k) for k in ("temperature", "top_p", "top_k")
    }
    if from_config:
        values = ", ".join(f"{k} {config[k]:g}" for k in from_config)
        notes.append(f"sampling from {config_path}: {values}")
    if chosen["temperature"] is None:
        chosen["temperature"] = FALLBACK_TEMPERATURE
        notes.append(
            "temperature 0 (greedy): no --temperature and no generation_config.json found; thinking "
            "models such as Qwen3 warn against greedy decoding (use --generation-config PATH or "
            "--temperature)"
        )
    return SamplingChoice(
        int(max_tokens), float(chosen["temperature"]), chosen["top_p"], chosen["top_k"], tuple(notes), context_tokens
    )


def job_sampling(
    model: str,
    given: dict[str, Any],
    seed: int | None,
    thinking: str | None,
    extra_body: dict[str, Any],
    plan: tuple[int | None, Path | None],
    generation_config: Path | None,
    context: tuple[int, str] | None = None,
) -> tuple[Sampling, list[str]]:
    """The job's :class:`Sampling` from the options ``given`` (``None`` = not given), the plan's cap
    and path, a ``generation_config.json`` (``generation_config``, else ``model`` when it is a
    local directory holding one) and the model's context (tokens, where read; None: unknown);
    notes say where each value came from.

    Raises:
        InputError: an unreadable generation config, or an ``extra_body`` that contradicts an option
            (:class:`~tokenplan.runner.requests.BodyConflict`, named in one line).
    """
    config_path = generation_config or model_generation_config(model)
    if config_path is not None and config_path.is_dir():
        config_path = config_path / "generation_config.json"  # the note names the file read
    config = read_generation_config(config_path) if config_path is not None else None
    choice = choose_sampling(given, plan[0], plan[1], config, config_path, context)
    sampling = Sampling(
        choice.max_tokens,
        choice.temperature,
        choice.top_p,
        choice.top_k,
        seed,
        None if thinking is None else thinking == "on",
        extra_body,
        choice.context_tokens,
    )
    try:
        request_body(model, [], sampling, 0)
    except BodyConflict as conflict:
        raise InputError(
            "--extra-body", json.dumps(extra_body), f"no contradiction with tokenplan's options ({conflict})"
        ) from None
    return sampling, list(choice.notes)


def greedy_warnings(sampling: Sampling, n: int) -> list[str]:
    """What temperature 0 (greedy decoding) does to this job, said before anything is sent:
    ``n`` > 1 samples of a row come out identical, and thinking at temperature 0 loops on some
    models (Qwen3 model card, https://huggingface.co/Qwen/Qwen3-8B: "DO NOT use greedy decoding,
    as it can lead to performance degradation and endless repetitions"), the loops running to
    max_tokens and raising the mean output length a plan assumed."""
    if sampling.temperature != 0:
        return []
    warnings = []
    if n > 1:
        # the advice points nowhere that gave the 0: a generation_config.json that says
        # do_sample false is where it came from (a new-user pass)
        warnings.append(
            f"--n {n} at temperature 0 (greedy decoding): the {n} samples of each row will be "
            "identical; set --temperature above 0 for distinct samples (Qwen3 recommends 0.6)"
        )
    kwargs = sampling.extra_body.get("chat_template_kwargs")
    thinking = sampling.thinking
    if thinking is None and isinstance(kwargs, dict) and isinstance(kwargs.get("enable_thinking"), bool):
        thinking = kwargs["enable_thinking"]
    if thinking:
        warnings.append(
            "thinking on at temperature 0 (greedy decoding): some models loop until max_tokens "
            "(Qwen3's model card: \"DO NOT use greedy decoding, as it can lead to performance "
            'degradation and endless repetitions"), and long loops raise the mean output length '
            "the plan assumed; set --temperature (Qwen3 recommends 0.6)"
        )
    elif thinking is None and sampling.max_tokens > FALLBACK_MAX_TOKENS:
        # thinking not stated: Qwen3.x and other reasoning models think unless told not to, and any
        # answer that loops at greedy decoding runs to a cap as long as the model's context (a
        # new-user pass: 262,144 tokens for Qwen3.6-27B)
        warnings.append(
            f"temperature 0 (greedy decoding) with max_tokens {sampling.max_tokens:,}: an answer that repeats "
            "itself runs to that cap (models that think by default, such as Qwen3, warn against greedy "
            "decoding); set --temperature (Qwen3 recommends 0.6) or --max-tokens"
        )
    return warnings
