"""``generate``'s sampling checks that need the catalog: the model's context for the ``max_tokens``
default (:func:`model_context`), and what temperature 0 is warned about (:func:`greedy_warnings`)."""

from __future__ import annotations

from pathlib import Path

from tokenplan.catalog import load_model
from tokenplan.errors import TokenplanError
from tokenplan.runner.requests import Sampling


def model_context(model: str) -> tuple[int, str] | None:
    """``max_position_embeddings`` of ``model`` (tokens) and where it was read: the ``config.json``
    of a local model directory, else the catalog entry of that name or Hugging Face id; None when
    neither knows the name (a served alias such as ``default``) or the file cannot be read."""
    try:
        spec = load_model(model)
    except TokenplanError:
        return None
    if not spec.max_context_tokens:
        return None
    where = str(Path(model) / "config.json") if Path(model).is_dir() else f"catalog model {spec.name}"
    return spec.max_context_tokens, f"max_position_embeddings of {where}"


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
        warnings.append(
            f"--n {n} at temperature 0 (greedy decoding): the {n} samples of each row will be "
            "identical; set --temperature (e.g. from the model's generation_config.json)"
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
    return warnings
