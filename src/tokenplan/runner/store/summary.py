"""What a finished ``generate`` run says about its own speed, read back from its run directory:
``summary.json`` (requests, output tokens, output tok/s, mean TTFT), ``manifest.json`` (the model)
and the stored records' ``usage.prompt_tokens`` (the mean prompt length).

``tokenplan calibrate --from-run`` fits the planner to these figures. Nothing here writes: a damaged
or torn record line (a run killed mid-write that was not resumed) is passed over, not cut.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenplan.errors import ConfigError, InputError
from tokenplan.loaders import load_json
from tokenplan.results import RUN_SUMMARY_SCHEMA_VERSION, Reading, check_version
from tokenplan.run_summary import check_finished
from tokenplan.runner.store.record import stored_records


@dataclass(frozen=True, slots=True)
class RunSummary:
    """A run's figures as ``summary.json`` holds them (not checked: a run that finished no request
    has zeros or None) and the model ``manifest.json`` names (``"?"`` when absent).

    Attributes:
        requests: chat requests answered; output_tokens: their completion tokens.
        output_tok_s: output tokens per second over the run.
        ttft_mean_ms: mean time to first token (milliseconds; None unless streamed).
        requests_in_flight: the requests the run kept in flight over all its endpoints, where
            every invocation kept the same (``summary.json`` from this release on), else None.
    """

    requests: Any
    output_tokens: Any
    output_tok_s: Any
    ttft_mean_ms: float | None
    model: str
    requests_in_flight: int | None = None


def read_run_summary(run_dir: Path) -> RunSummary:
    """Read ``run_dir``'s ``summary.json`` and ``manifest.json``.

    Raises:
        InputError: either file is missing (not a run directory).
        ConfigError: either file is not a JSON object, the summary's ``schema_version`` is unknown,
            a total that is not a finite number, a ``latency_ttft`` that is neither null nor an
            object whose ``mean_ms`` is a finite number > 0, or a ``requests_in_flight`` that is
            neither null nor a whole number > 0 (each named with its value).
    """
    where = str(run_dir / "summary.json")
    summary, manifest = _read_json(run_dir / "summary.json"), _read_json(run_dir / "manifest.json")
    check_finished(summary, where)  # RunDirError: a run's rolling form
    check_version(summary, RUN_SUMMARY_SCHEMA_VERSION, Reading(where))
    requests, output_tokens, output_tok_s = (_finite(summary.get(k), where, k, "a finite number") for k in _TOTALS)
    ttft = summary.get("latency_ttft")
    if ttft is not None and not isinstance(ttft, dict):
        raise ConfigError(where, "latency_ttft", f"{ttft!r} is not allowed (allowed: an object with mean_ms, or null)")
    mean_ms = None if ttft is None else ttft.get("mean_ms")
    if mean_ms is not None and not _finite(mean_ms, where, "latency_ttft.mean_ms", _TTFT_ALLOWED) > 0:
        raise ConfigError(where, "latency_ttft.mean_ms", f"{mean_ms!r} is not allowed (allowed: {_TTFT_ALLOWED})")
    model = (manifest.get("job") or {}).get("model", "?")
    in_flight = summary.get("requests_in_flight")
    if in_flight is not None and not (isinstance(in_flight, int) and not isinstance(in_flight, bool) and in_flight > 0):
        raise ConfigError(
            where, "requests_in_flight", f"{in_flight!r} is not allowed (allowed: a whole number > 0, or null)"
        )
    return RunSummary(requests, output_tokens, output_tok_s, mean_ms, model, in_flight)


_TOTALS = ("requests", "output_tokens", "output_tok_s")
_TTFT_ALLOWED = "a finite number of milliseconds > 0"


def _finite(value: Any, where: str, key: str, allowed: str) -> Any:
    """``value`` unless it is a bool, not a number, NaN or infinite (ConfigError naming ``key``);
    None (absent) passes, for the caller to judge."""
    if value is None or (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)):
        return value
    raise ConfigError(where, key, f"{value!r} is not allowed (allowed: {allowed})")


def mean_prompt_tokens(run_dir: Path) -> float | None:
    """The mean ``usage.prompt_tokens`` over every turn of every stored record (tokens); None when
    no turn carries it."""
    total = count = 0
    for record in stored_records(run_dir, damaged="skip"):
        for turn in record.turns:
            prompt_tokens = None if turn.usage is None else turn.usage.prompt_tokens
            if isinstance(prompt_tokens, int):
                total, count = total + prompt_tokens, count + 1
    return total / count if count else None


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise InputError("run directory", str(path.parent), f"a generate run directory with {path.name}")
    data = load_json(path)  # ConfigError: not UTF-8, not JSON, a key twice, nested too deep
    if not isinstance(data, dict):
        raise ConfigError(str(path), "<root>", "expected a JSON object")
    return data
