"""What a calibration profile was fitted on, and warnings when it is used far from that.

A profile written by ``tokenplan bench --fit`` or ``tokenplan calibrate --from-run`` carries
``fitted_on``: the engine, GPU, model and layout it measured, and the range of concurrency,
input and output lengths its levels covered. A prediction that uses the profile elsewhere is
still made — the factors are physical — but with a warning: beyond ``FAR`` times the measured
range (or below it by the same factor), or on another engine, GPU or model, the fitted overheads
and fractions are an extrapolation.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tokenplan.perf.efficiency import EfficiencyTable

FAR = 2.0  # a value more than 2× above the fitted maximum (or 2× below the minimum) is far outside
POOR_FIT = 0.5  # median |predicted / measured − 1| of output tok/s per GPU above this: a poor fit
IDENTITY_KEYS = ("engine", "gpu", "model")
RANGE_KEYS = {"concurrency": "concurrency", "isl_tokens": "input length", "osl_tokens": "output length"}


def fitted_on(
    levels: Sequence[Mapping[str, float | None]], identity: Mapping[str, object], source: str
) -> dict[str, Any]:
    """The ``fitted_on`` record: ``identity`` (engine, gpu, model, layout, dtypes…), ``source``,
    and ``{key}_min``/``{key}_max`` over ``levels`` for each key of :data:`RANGE_KEYS` present."""
    out: dict[str, Any] = {**identity, "source": source, "levels": len(levels)}
    for key in RANGE_KEYS:
        values = [float(v) for lv in levels if (v := lv.get(key)) is not None]
        if values:
            out[f"{key}_min"], out[f"{key}_max"] = min(values), max(values)
    return out


def range_warnings(fitted: Mapping[str, object], point: Mapping[str, object]) -> list[str]:
    """Warnings for using a profile fitted on ``fitted`` at ``point`` (same keys: ``engine``,
    ``gpu``, ``model``, ``concurrency``, ``isl_tokens``, ``osl_tokens``; a None or missing value
    is not checked), and for a profile that did not reproduce what it was fitted on
    (``median_abs_error`` above :data:`POOR_FIT`): its figures and bands are not borne out there."""
    out = []
    error = fitted.get("median_abs_error")
    if isinstance(error, (int, float)) and not isinstance(error, bool) and error > POOR_FIT:
        out.append(
            f"the calibration profile reproduces the measurements it was fitted on poorly (median "
            f"|predicted/measured − 1| of output tok/s per GPU {error * 100:,.0f} %, fitted_on.median_abs_error): "
            "these figures and their 80 % bands are not borne out by its own measurements"
        )
    for key in IDENTITY_KEYS:
        have, want = fitted.get(key), point.get(key)
        if have is not None and want is not None and str(have) != str(want):
            out.append(f"calibration profile was fitted on {key} {have}, used here for {want}")
    for key, words in RANGE_KEYS.items():
        value = point.get(key)
        lo, hi = fitted.get(f"{key}_min"), fitted.get(f"{key}_max")
        if not isinstance(value, (int, float)) or not isinstance(lo, (int, float)) or not isinstance(hi, (int, float)):
            continue
        if value > FAR * hi or value < lo / FAR:
            out.append(
                f"{words} {value:g} is far outside the calibration profile's fitted range "
                f"{lo:g}–{hi:g}: its factors are extrapolated"
            )
    return out


@dataclass(frozen=True)
class Profile:
    """The efficiency factors in use, read once: ``table`` (the shipped fit, or the profile at
    ``path``, an update already layered over the shipped fit), ``fitted_on`` (the range of
    measurements a ``bench --fit`` profile was fitted on; None for the shipped fit and profiles
    without one), ``moves`` (what the profile changes in the shipped fit, one line per group:
    ``files.calibration.moved_lines``; none for the shipped fit) and ``moved_groups`` (the
    groups, ``engine`` or ``engine/architecture``, an update profile moves a factor of; None for
    the shipped fit and a full table, which replaces every group)."""

    path: str | None
    table: EfficiencyTable
    fitted_on: Mapping[str, object] | None = None
    moves: tuple[str, ...] = ()
    moved_groups: tuple[str, ...] | None = None
    move_groups: tuple[str, ...] = ()  # the group each line of ``moves`` is about ("" for a full table)

    def moves_for(self, engine: str, architectures: Collection[str]) -> tuple[str, ...]:
        """The lines of ``moves`` about ``engine`` (a group ``engine`` or ``engine/architecture``
        for one of ``architectures``), all of them for a full table (a plan on MI300X listed the
        profile's Hopper and Blackwell groups as if they applied; where none applies,
        :meth:`range_warnings` says the figures are the shipped fit's)."""
        if self.moved_groups is None or len(self.move_groups) != len(self.moves):
            return self.moves
        own = {engine, *(f"{engine}/{a}" for a in architectures)}
        return tuple(line for line, group in zip(self.moves, self.move_groups) if group in own)

    def range_warnings(self, point: Mapping[str, object]) -> list[str]:
        """Warnings for using the profile far from what it was fitted on (:func:`range_warnings`;
        none without a ``fitted_on`` record). ``point``: ``engine``, ``gpu``, ``architecture``,
        ``model``, ``concurrency`` (per replica), ``isl_tokens``, ``osl_tokens``. An update that
        moves nothing of the point's engine and architecture leaves its figures at the shipped
        fit: one warning says so instead (not that the profile's factors are extrapolated there)."""
        engine, arch = point.get("engine"), point.get("architecture")
        if self.moved_groups is not None and engine is not None and arch is not None:
            if engine not in self.moved_groups and f"{engine}/{arch}" not in self.moved_groups:
                return [
                    f"calibration profile {self.path} moves {', '.join(self.moved_groups) or 'no factor'}, "
                    f"not {engine} on {point.get('gpu')} ({engine}/{arch}): these figures are the shipped fit's"
                ]
        return [] if self.fitted_on is None else range_warnings(self.fitted_on, point)
