"""What ``generate --plan`` reads from a ``tokenplan plan --json`` file: the recommended
concurrency per endpoint, the expected output tok/s (for the progress display), the replicas, the
model the plan was made for and its output cap.

The keys are those of the plan's own types (:class:`~tokenplan.planning.results.PlanResult`,
:class:`~tokenplan.planning.results.Recommended`, :class:`~tokenplan.planning.results.PlanJob`),
read here one by one because a plan file cut down by hand still drives a run: a missing or odd
``recommended`` value is not an error (the run uses its defaults and a note says so). A
``schema_version`` other than the plan's is refused; a concurrency beyond the caller's limit is
refused. A plan made for a plainly different model than ``--model`` earns a warning
(:func:`plan_model_mismatch`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenplan.errors import ConfigError
from tokenplan.loaders import load_json
from tokenplan.planning.results import PlanJob, PlanResult, Recommended
from tokenplan.results import Reading, check_version
from tokenplan.units import MAX_REQUEST_TOKENS


@dataclass(frozen=True, slots=True)
class PlanHint:
    """What ``generate`` reads from ``tokenplan plan --json``: ``recommended.*`` and the
    top-level ``model`` the plan was made for (a catalog name; None when absent)."""

    concurrency_per_endpoint: int | None
    output_tok_s_total: float | None
    num_replicas: int | None
    model: str | None = None
    max_tokens: int | None = None  # the plan's output cap (job.osl_cap_tokens)
    num_servers: int | None = None  # the endpoints its launch runs (recommended.num_servers; older plans: None)


# The recommended figures generate uses, by their field in Recommended, and the type each is read as.
HINTED: tuple[tuple[str, type], ...] = (
    (Recommended.__dataclass_fields__["concurrency_per_endpoint"].name, int),
    (Recommended.__dataclass_fields__["output_tok_s_total"].name, float),
    (Recommended.__dataclass_fields__["num_replicas"].name, int),
)
_RECOMMENDED = PlanResult.__dataclass_fields__["recommended"].name
_MODEL = PlanResult.__dataclass_fields__["model"].name
_JOB = PlanResult.__dataclass_fields__["job"].name
_ALLOWED = "allowed: the output of `tokenplan plan --json` (e.g. tokenplan plan --job job.yaml --json > plan.json)"
_CAP = PlanJob.__dataclass_fields__["osl_cap_tokens"].name
_OSL = PlanJob.__dataclass_fields__["osl"].name


def load_plan_json(path: Path) -> Any:
    """Parsed JSON of a plan file. Raises ConfigError (not UTF-8, not JSON, nested too deep, a key
    twice), saying what the file should be: a job YAML or the table printed without ``--json``
    given as ``--plan`` is otherwise answered with a JSON parser's complaint alone."""
    try:
        return load_json(path)
    except ConfigError as exc:
        if not exc.problem.startswith("not valid JSON"):  # nested too deep, a key twice: said in full
            raise
        raise ConfigError(exc.path, exc.key, f"{exc.problem}; {_ALLOWED}") from None


def read_plan(path: Path, max_concurrency: int) -> tuple[PlanHint, list[str]]:
    """Read ``recommended`` from a ``tokenplan plan --json`` file; notes say what was missing.

    Args:
        path: the plan file.
        max_concurrency: the most requests in flight a run allows (a larger concurrency or
            replica count is refused).

    Raises:
        ConfigError: the file is missing, not UTF-8 JSON (or nested too deep, a key twice), not a
            JSON object, holds neither ``recommended`` nor ``job``, of another schema_version, or its output cap or concurrency is out of range.
    """
    if not path.is_file():
        raise ConfigError(
            str(path), "file", "cannot read (no such file; allowed: the output of `tokenplan plan --json`)"
        )
    data = load_plan_json(path)
    if not isinstance(data, dict):
        raise ConfigError(str(path), "file", "not a JSON object as printed by `tokenplan plan --json`")
    if _RECOMMENDED not in data and _JOB not in data:
        raise ConfigError(
            str(path), "file", f"has neither '{_RECOMMENDED}' nor '{_JOB}': not the output of `tokenplan plan --json`"
        )
    check_version(data, PlanResult.SCHEMA_VERSION or 1, Reading(str(path)))
    model = data.get(_MODEL) if isinstance(data.get(_MODEL), str) and data.get(_MODEL) else None
    cap = plan_max_tokens(data, str(path))  # ConfigError: a cap of 1e30, Infinity, NaN
    recommended = data.get(_RECOMMENDED)
    if not isinstance(recommended, dict):
        why = "is null: the plan found no configuration that runs" if _RECOMMENDED in data else "is absent"
        return PlanHint(None, None, None, model, cap), [f"{path}: '{_RECOMMENDED}' {why}; using the defaults"]
    notes: list[str] = []
    values: dict[str, Any] = {}
    for key, kind in HINTED:
        value = recommended.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < math.inf:
            if kind is int and value > max_concurrency:
                raise ConfigError(
                    str(path), f"{_RECOMMENDED}.{key}", f"{value!r} is not allowed (allowed: 1 to {max_concurrency:,})"
                )
            values[key] = kind(value)
        else:
            values[key] = None
            notes.append(f"{path}: {_RECOMMENDED}.{key} is absent or not a positive number")
    servers = recommended.get("num_servers")
    servers = servers if isinstance(servers, int) and not isinstance(servers, bool) and servers > 0 else None
    return PlanHint(**values, model=model, max_tokens=cap, num_servers=servers), notes


def plan_max_tokens(plan: Mapping[str, Any], source: str = "plan") -> int | None:
    """The output cap a ``tokenplan plan --json`` assumed (tokens), or ``None`` when it states none:
    ``job.osl_cap_tokens``, else the ``cap N`` in its ``job.osl`` text.

    Raises:
        ConfigError: the cap is not a whole number of tokens from 1 to
            :data:`~tokenplan.units.MAX_REQUEST_TOKENS` (``1e30``, ``Infinity``, ``NaN``), as
            ``--max-tokens`` would be refused; ``source`` names the file.
    """
    job = plan.get(_JOB)
    if not isinstance(job, dict):
        return None
    cap, key = job.get(_CAP), f"{_JOB}.{_CAP}"
    if cap is None:
        match = re.search(r"cap ([\d,]+)", job[_OSL]) if isinstance(job.get(_OSL), str) else None
        if match is None:
            return None
        cap, key = int(match.group(1).replace(",", "")), f"{_JOB}.{_OSL}"
    if isinstance(cap, bool) or not isinstance(cap, (int, float)) or not 1 <= cap <= MAX_REQUEST_TOKENS:
        raise ConfigError(
            source,
            key,
            f"{cap!r} is not allowed (allowed: an output cap of 1 to {MAX_REQUEST_TOKENS:,} tokens, as --max-tokens)",
        )
    return int(cap)


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
