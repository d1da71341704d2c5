"""The base of the typed results the commands return, and their one JSON form, on the ground floor so that
every layer (``planning``, ``files``, ``report``) can build and read them; with the interval type of
an error band (``Interval``, which ``calibration.bands`` computes).

Every result is a frozen dataclass; ``to_json()`` gives the dict ``--json`` prints. The JSON keys
are the field names, in field order, so each figure (``output_tok_s_total``, ``tpot_ms``, …) is
spelled once, where it is declared. Two field markers shape the JSON:

- ``OMIT_NONE``: the key is left out while the value is None (a section that does not apply);
- ``INLINE``: the value's own JSON keys are merged in place of the key (optional groups of keys,
  such as an error band's ``<figure>_interval`` entries, or the figures of a chosen configuration);
  ``inline("tpot_")`` merges them with a prefix; a tuple merges each item's keys in turn; a None
  value adds no key.

Units are in the names (``_bytes``, ``_ms``, ``_tok_s``, ``_days``, ``_usd``), as everywhere below.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Interval:
    """An interval on one figure: ``low``/``high`` in the figure's units, its nominal coverage,
    the regime it came from and why it is wider (outside the measured regime), if it is."""

    low: float
    high: float
    coverage: float
    regime: str
    outside: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """``{"low", "high", "coverage", "regime"[, "outside_measured_regime"]}``."""
        d = {"low": self.low, "high": self.high, "coverage": self.coverage, "regime": self.regime}
        if self.outside:
            d["outside_measured_regime"] = self.outside
        return d


OMIT_NONE = {"json": "omit_none"}
INLINE = {"json": "inline"}


def inline(prefix: str) -> Mapping[str, str]:
    """Field metadata: merge the value's JSON keys, each with ``prefix`` before it."""
    return {"json": "inline", "prefix": prefix}


def plain(value: Any) -> Any:
    """``value`` as JSON-able Python: results through their ``to_json``, other dataclasses
    through ``as_dict`` where they have one (else ``dataclasses.asdict``), tuples as lists."""
    if hasattr(value, "to_json"):
        return value.to_json()
    if hasattr(value, "as_dict"):
        return value.as_dict()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, (tuple, list)):
        return [plain(v) for v in value]
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    return value


class JsonResult:
    """Mixin: ``to_json()`` from the dataclass fields (see the module docstring)."""

    def to_json(self) -> dict[str, Any]:
        """The JSON-able dict of this result: field name → value, in field order."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            how = f.metadata.get("json")
            if value is None and how in ("omit_none", "inline"):
                continue
            if how == "inline":
                prefix, merged = f.metadata.get("prefix", ""), plain(value)
                for part in merged if isinstance(merged, list) else [merged]:
                    out.update({prefix + k: v for k, v in part.items()})
            else:
                out[f.name] = plain(value)
        return out


@dataclass(frozen=True)
class ErrorBand(JsonResult):
    """Where the error band of a configuration comes from: its ``regime``, the nominal
    ``coverage`` (a fraction) and, when it lies outside the measured regime, why."""

    regime: str
    coverage: float
    outside_measured_regime: str | None


@dataclass(frozen=True)
class Bands:
    """The error bands of a result's figures: figure field name → its interval (same units as
    the figure), and the band's regime. JSON: ``<figure>_interval`` per figure, ``error_band``."""

    intervals: Mapping[str, Interval]
    error_band: ErrorBand | None

    def to_json(self) -> dict[str, Any]:
        """``{"<figure>_interval": {...}, ..., "error_band": {...}}`` (only what is present)."""
        out: dict[str, Any] = {f"{key}_interval": band.as_dict() for key, band in self.intervals.items()}
        if self.error_band is not None:
            out["error_band"] = self.error_band.to_json()
        return out
