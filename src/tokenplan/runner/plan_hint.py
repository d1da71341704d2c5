"""What ``generate --plan`` reads from a ``tokenplan plan --json`` file: the recommended
concurrency per endpoint, the expected output tok/s (for the progress display), the replicas, the
model the plan was made for and its output cap.

A missing or odd ``recommended`` value is not an error: the run uses its defaults and a note says
so. A concurrency beyond :data:`~tokenplan.runner.limits.MAX_CONCURRENCY` is refused. A plan made
for a plainly different model than ``--model`` earns a warning (:func:`plan_model_mismatch`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenplan.errors import ConfigError
from tokenplan.loaders import load_json
from tokenplan.runner.defaults import plan_max_tokens
from tokenplan.runner.limits import MAX_CONCURRENCY


@dataclass(frozen=True, slots=True)
class PlanHint:
    """What ``generate`` reads from ``tokenplan plan --json``: ``recommended.*`` and the
    top-level ``model`` the plan was made for (a catalog name; None when absent)."""

    concurrency_per_endpoint: int | None
    output_tok_s_total: float | None
    num_replicas: int | None
    model: str | None = None
    max_tokens: int | None = None  # the plan's output cap (job.osl_cap_tokens)


def read_plan(path: Path) -> tuple[PlanHint, list[str]]:
    """Read ``recommended`` from a ``tokenplan plan --json`` file; notes say what was missing.

    Raises:
        ConfigError: the file is missing, not UTF-8 JSON (or nested too deep, a key twice), not a
            JSON object, or its output cap or concurrency is out of range.
    """
    if not path.is_file():
        raise ConfigError(
            str(path), "file", "cannot read (no such file; allowed: the output of `tokenplan plan --json`)"
        )
    data = load_json(path)  # ConfigError: not UTF-8, not JSON, nested too deep, a key twice
    if not isinstance(data, dict):
        raise ConfigError(str(path), "file", "not a JSON object as printed by `tokenplan plan --json`")
    model = data.get("model") if isinstance(data.get("model"), str) and data.get("model") else None
    cap = plan_max_tokens(data, str(path))  # ConfigError: a cap of 1e30, Infinity, NaN
    recommended = data.get("recommended")
    if not isinstance(recommended, dict):
        return PlanHint(None, None, None, model, cap), [f"{path}: no 'recommended' section; using the defaults"]
    notes: list[str] = []
    values: dict[str, Any] = {}
    for key, kind in (("concurrency_per_endpoint", int), ("output_tok_s_total", float), ("num_replicas", int)):
        value = recommended.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < math.inf:
            if key != "output_tok_s_total" and value > MAX_CONCURRENCY:
                raise ConfigError(
                    str(path), f"recommended.{key}", f"{value!r} is not allowed (allowed: 1 to {MAX_CONCURRENCY:,})"
                )
            values[key] = kind(value)
        else:
            values[key] = None
            notes.append(f"{path}: recommended.{key} is absent or not a positive number")
    return PlanHint(**values, model=model, max_tokens=cap), notes


def _model_key(name: str) -> str:
    """``"/models/Qwen/Qwen3.6-27B/"`` → ``"qwen3.6-27b"``: the last path component, lower case."""
    return name.strip().rstrip("/").rsplit("/", 1)[-1].lower()


def plan_model_mismatch(plan_model: str | None, model: str) -> bool:
    """Whether the plan's model plainly differs from the served ``model``: their last path
    components (case-insensitive) differ and neither contains the other. Served names often
    differ from catalog names (``qwen3.6-27b`` vs ``Qwen/Qwen3.6-27B-FP8``), so a containment
    counts as the same model."""
    if not plan_model:
        return False
    a, b = _model_key(plan_model), _model_key(model)
    return not (a in b or b in a)
