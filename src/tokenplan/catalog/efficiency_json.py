"""A calibration profile's efficiency factors read from its JSON object (the shipped
``catalog/efficiency.json`` and a user's profile alike)."""

from __future__ import annotations

import math

from tokenplan.errors import ConfigError
from tokenplan.perf.efficiency import EFFICIENCY_FIELDS, Efficiency, EfficiencyTable

__all__ = ["CALIBRATION_KEYS", "efficiency_table_from_json"]

# The top-level keys of a calibration profile (calibration.summary.CalibrationProfile, a bench fit's fitted_on).
CALIBRATION_KEYS = (
    "default",
    "groups",
    "ratios",
    "uncertainty",
    "at_bound",
    "held_at_default",
    "provenance",
    "fitted_on",
    "layered_on",
    "prior",
    "schema_version",
)  # layered_on, prior: an update profile (files/calibration.py); schema_version: 1 where stated


def efficiency_table_from_json(
    data: dict, source: str, bounds: dict[str, tuple[float, float]] | None = None
) -> EfficiencyTable:
    """Build an EfficiencyTable from a calibration JSON object; with ``bounds`` (factor → (low,
    high), inclusive) every factor given must lie in its range.

    Raises:
        ConfigError: unknown factor names, non-numeric values or values out of range (one line
            naming the key, the value and what is allowed).
    """

    def number(key: str, name: str, raw: object) -> float:
        value = float(raw) if isinstance(raw, (int, float)) and not isinstance(raw, bool) else math.nan
        may_be_zero = name.endswith("_s") or name == "prefill_wave_fraction"  # overheads, a share
        low, high = (bounds or {}).get(name, (0.0, math.inf))
        inside = low * (1 - 1e-6) <= value <= high * (1 + 1e-6)  # a fit that ends on a bound, through exp/log
        if not (math.isfinite(value) and (value >= 0 if may_be_zero else value > 0) and inside):
            shown = f"{raw!r}" if not isinstance(raw, (int, float)) or isinstance(raw, bool) else f"{value:g}"
            allowed = f"a number from {low:g} to {high:g}" if name in (bounds or {}) else "a finite number"
            allowed += "" if name in (bounds or {}) else (" ≥ 0" if may_be_zero else " > 0")
            raise ConfigError(source, f"{key}.{name}", f"{shown} is not allowed (allowed: {allowed})")
        return value

    def parse(obj: object, key: str) -> Efficiency:
        if not isinstance(obj, dict):
            raise ConfigError(source, key, "expected an object of factor → number")
        unknown = set(obj) - set(EFFICIENCY_FIELDS)
        if unknown:
            raise ConfigError(
                source, f"{key}.{sorted(unknown)[0]}", f"unknown factor (known: {', '.join(EFFICIENCY_FIELDS)})"
            )
        return Efficiency(**{k: number(key, k, v) for k, v in obj.items()})

    unknown = sorted(set(data) - set(CALIBRATION_KEYS))
    if unknown:
        raise ConfigError(source, unknown[0], f"unknown key (known: {', '.join(CALIBRATION_KEYS)})")
    default = parse(data.get("default", {}), "default")
    groups = data.get("groups", {})
    if not isinstance(groups, dict):
        raise ConfigError(source, "groups", "expected an object of group → factors")
    by_group = {
        g: parse({**default.as_dict(), **v} if isinstance(v, dict) else v, f"groups.{g}") for g, v in groups.items()
    }
    return EfficiencyTable(default, by_group, str(data.get("provenance", source)))
