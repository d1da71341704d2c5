"""Option parsing shared by CLI commands (translation only, no computation)."""

from __future__ import annotations

import re

from tokenplan.api.plan import MAX_PRICE_USD_PER_GPU_HOUR
from tokenplan.errors import InputError


def parse_prices(items: list[str]) -> dict[str, float]:
    """``["b200=4.5"]`` → ``{"b200": 4.5}``. Raises InputError."""
    out: dict[str, float] = {}
    for item in items:
        key, sep, value = item.partition("=")
        before = out.get(key.strip().lower())
        try:
            out[key.strip().lower()] = float(value)
        except ValueError:
            raise InputError("price", item, "GPU=USD per GPU-hour, e.g. b200=4.5") from None
        if before is not None and before != out[key.strip().lower()]:  # the last used to win silently
            raise InputError(
                "price", item, f"one price per GPU ({key.strip().lower()} is already priced at {before:g})"
            )
        if not sep or not key.strip():
            raise InputError("price", item, "GPU=USD per GPU-hour, e.g. b200=4.5")
        if not 0 < out[key.strip().lower()] <= MAX_PRICE_USD_PER_GPU_HOUR:  # also refuses nan
            raise InputError("price", item, f"GPU=USD per GPU-hour with 0 < USD ≤ {MAX_PRICE_USD_PER_GPU_HOUR:,}")
    return out


_DURATION_UNITS_S = {"s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}


def parse_duration(text: str, field: str = "deadline") -> float:
    """``2d`` / ``36h`` / ``90m`` / ``1.5d`` / ``3600s`` → seconds. Raises InputError (a bare
    number is refused: days or hours would be a guess)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-z]+)\s*", text.lower())
    if not m or m.group(2) not in _DURATION_UNITS_S or not float(m.group(1)) > 0:
        raise InputError(
            field, text, "a plain decimal number > 0 and its unit: s, m or min, h, d or w (e.g. 2d, 36h, 90m)"
        )
    return float(m.group(1)) * _DURATION_UNITS_S[m.group(2)]
