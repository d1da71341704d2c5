"""``plan --current``: the setup a team runs now, parsed and resolved once
(:class:`~tokenplan.planning.current.Current`); ``planning.current`` predicts it, sets it beside
the measurement and walks to the recommended setup.

``--current`` is a comma-separated list of ``key=value`` describing the running server, as the
engines' own flags would: ``engine=sglang,tp=4,weight-dtype=bf16,spec=mtp:3,max-running=48``.
It describes the first ``--gpu`` option of the plan.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from tokenplan.api.resolve import PredictRequest, Profile, resolve
from tokenplan.errors import InputError
from tokenplan.planning.current import Current
from tokenplan.planning.space import HardwareOption

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


def _bool(text: str) -> bool:
    low = text.strip().lower()
    if low in _TRUE | _FALSE:
        return low in _TRUE
    raise ValueError(text)


def _count(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError(text)
    return value


def _fraction(text: str) -> float:
    value = float(text)
    if not 0 < value <= 1:
        raise ValueError(text)
    return value


# --current key → (PredictRequest field, parser, what is allowed)
_KEYS: dict[str, tuple[str, Callable[[str], object], str]] = {
    "engine": ("engine", str, "sglang, vllm or trtllm"),
    "tp": ("tp", _count, "an integer ≥ 1"),
    "pp": ("pp", _count, "an integer ≥ 1"),
    "ep": ("ep", _count, "an integer ≥ 1"),
    "attention-dp": ("attention_dp", _bool, "true or false"),
    "weight-dtype": ("weight_dtype", str, "a weight format, e.g. bf16, fp8"),
    "kv-dtype": ("kv_dtype", str, "a KV-cache format, e.g. bf16, fp8, auto"),
    "spec": ("spec", str, "none or METHOD:K[:TAU], e.g. mtp:3"),
    "max-running": ("max_running", _count, "an integer ≥ 1 (running requests per replica)"),
    "memory-fraction": ("memory_fraction", _fraction, "a share of GPU memory in (0, 1]"),
    "disable-radix-cache": ("disable_radix_cache", _bool, "true or false"),
}


def _parse_current(text: str) -> dict[str, object]:
    """``engine=sglang,tp=4,…`` → PredictRequest fields by keyword.

    Raises:
        InputError: an entry that is not ``key=value``, an unknown key (the allowed ones are
            listed) or a value its key does not allow.
    """
    fields: dict[str, object] = {}
    for entry in (e for e in text.split(",") if e.strip()):
        key, sep, value = entry.partition("=")
        key = key.strip().lower().replace("_", "-")
        if not sep or not value.strip():
            raise InputError("current", entry.strip(), "KEY=VALUE entries separated by commas, e.g. engine=sglang,tp=4")
        if key not in _KEYS:
            raise InputError("current", key, sorted(_KEYS))
        name, parse, allowed = _KEYS[key]
        try:
            fields[name] = parse(value.strip())
        except ValueError:
            raise InputError(f"current {key}", value.strip(), allowed) from None
    if not fields:
        raise InputError("current", text, "KEY=VALUE entries separated by commas, e.g. engine=sglang,tp=4")
    return fields


def current_of(
    text: str, measured_tok_s: float | None, option: HardwareOption, model: str, engine: str, profile: Profile
) -> Current:
    """The setup ``text`` on ``option`` (the plan's first), of the plan's ``model`` and by default
    its ``engine``, resolved with the plan's ``profile``, and its measured output tokens/s.

    Raises:
        InputError, CatalogError: a bad ``--current`` entry or measurement.
    """
    if measured_tok_s is not None and not 0 < measured_tok_s < math.inf:
        raise InputError("measured-tok-s", measured_tok_s, "a finite number of output tokens/s > 0")
    fields: dict[str, object] = {
        "model": model,
        "gpu": option.gpu.key,
        "num_gpus": option.count,
        "engine": engine,
        "weight_dtype": "auto",
        "calibration": profile.path,
        **_parse_current(text),
    }
    s = resolve(PredictRequest(**fields), profile)  # type: ignore[arg-type]  # keys checked above
    return Current(text, measured_tok_s, s.config, s.model, s.gpu)
