"""The calibration profile JSON that ``tokenplan calibrate`` and ``bench --fit`` write and
``--calibration`` reads: read once, checked, errors as one line naming the file and the key.

Two kinds of profile:

- an **update** (``"layered_on": "shipped"``; what ``calibrate --from-bench``, ``--from-run``,
  ``calibrate FILE.csv`` and ``bench --fit`` write): ``groups`` holds, per ``engine/architecture``
  group (or engine), only the factors the user's data informed, ``prior`` the shipped value each
  started from and ``uncertainty`` their ±1σ. The rule at load time: the table is the shipped
  one (``catalog/efficiency.json``), except that each group the profile names resolves to the
  shipped factors of that engine and architecture with the profile's factors put over them; a
  bare engine (``"vllm"``) puts its factors over the engine's group and over each of its
  shipped ``engine/architecture`` groups the profile does not name itself. Every factor and
  every group the profile does not name keeps its shipped value. ``calibrate`` writes
  ``engine/architecture`` groups only.
- a **full table** (no ``layered_on``; older profiles and ``calibrate --refit``): ``default``
  and ``groups`` replace the shipped table wholesale (a group's missing factors from ``default``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from tokenplan.calibration.fitted_range import Profile
from tokenplan.catalog import CALIBRATION_KEYS, efficiency_table_from_json, profile_groups, shipped_efficiency
from tokenplan.errors import ConfigError, InputError
from tokenplan.loaders import load_json
from tokenplan.perf.efficiency import EFFICIENCY_BOUNDS, Efficiency, EfficiencyTable
from tokenplan.results import Reading, check_version

LAYERED_ON_SHIPPED = "shipped"  # the value of ``layered_on`` in an update profile
# What a profile's factor may hold: the physical range a fit keeps it in (EFFICIENCY_BOUNDS, each
# with its reason there), widened to the ideal a roofline assumes: a fraction up to 1 (the
# datasheet peak) and an overhead or the share of synchronised arrivals down to 0 (none; the
# fit's lower bounds there keep its log-space optimiser off 0). A profile that turns every
# inefficiency off is a limit, not an absurdity; hbm_fraction 1e-300 or 1e9 is one.
PROFILE_BOUNDS = {
    name: (
        0.0 if name.endswith("_s") or name == "prefill_wave_fraction" else low,
        max(high, 1.0) if name.endswith("_fraction") else high,
    )
    for name, (low, high) in EFFICIENCY_BOUNDS.items()
}


@dataclass(frozen=True)
class CalibrationFile:
    """A read profile: its efficiency ``table`` (an update already layered over the shipped
    table), its ``fitted_on`` record (the range of measurements a ``bench --fit`` profile was
    fitted on; None for profiles without one) and, for an update, ``moved``: group → factor →
    (shipped value, calibrated value, ±1σ or None)."""

    table: EfficiencyTable
    fitted_on: dict | None
    moved: dict[str, dict[str, tuple[float, float, float | None]]] | None = None

    @property
    def moved_groups(self) -> tuple[str, ...] | None:
        """The groups an update moves a factor of (a group it names with no factor moves
        nothing); None for a full table, which replaces every group."""
        return None if self.moved is None else tuple(g for g, factors in self.moved.items() if factors)


def shipped_base(shipped: EfficiencyTable, group: str) -> Efficiency:
    """The shipped factors a profile group layers over: ``engine/architecture`` resolves as a
    plan on that engine and architecture would; a bare engine takes the engine's group."""
    engine, _, arch = group.partition("/")
    return shipped.resolve(engine, arch) if arch else shipped.by_group.get(engine) or shipped.default


def layer_update(data: dict, source: str, shipped: EfficiencyTable | None = None) -> CalibrationFile:
    """The table of an update profile (see the module docstring) over ``shipped`` (default: the
    table that ships).

    Raises:
        ConfigError: an unknown key, ``groups`` is not an object of group → factor → number, or names an
            unknown factor or a value not allowed (one line naming the key).
    """
    shipped = shipped or shipped_efficiency()
    unknown = sorted(set(data) - set(CALIBRATION_KEYS))
    if unknown:
        raise ConfigError(source, unknown[0], f"unknown key (known: {', '.join(CALIBRATION_KEYS)})")
    groups = data.get("groups")
    if not isinstance(groups, dict):  # a group with no factors: an update that kept the shipped fit
        raise ConfigError(source, "groups", "an update profile holds 'groups' of group → informed factors")
    check_group_names(groups, source)
    # parse each group's factors with the same checks as a full table (names, finite, sign)
    parsed = efficiency_table_from_json({"groups": groups}, source, PROFILE_BOUNDS)
    raw_sigma = data.get("uncertainty")
    sigma: dict[str, object] = raw_sigma if isinstance(raw_sigma, dict) else {}
    by_group, moved = dict(shipped.by_group), {}
    # engines first, so a profile's own engine/architecture group goes over its engine's update
    for group, factors in sorted(groups.items(), key=lambda kv: "/" in kv[0]):
        base = shipped_base(shipped, group)
        values = {k: getattr(parsed.by_group[group], k) for k in factors}
        by_group[group] = base.with_values(**values)
        if "/" not in group:  # an engine's update reaches each of its shipped architecture groups
            for key in [k for k in shipped.by_group if k.startswith(group + "/") and k not in groups]:
                by_group[key] = by_group[key].with_values(**values)
        moved[group] = {k: (getattr(base, k), v, _sigma(sigma.get(f"{group}.{k}"))) for k, v in values.items()}
    provenance = f"{data.get('provenance', source)}, over the shipped fit ({shipped.provenance})"
    return CalibrationFile(EfficiencyTable(shipped.default, by_group, provenance), _fitted_on(data, source), moved)


def check_group_names(groups: object, source: str) -> None:
    """Refuse a group no plan would look up (``nonsense/group`` was read and never used): each is
    an engine, or ``engine/architecture`` with an architecture of the GPU catalog (ConfigError)."""
    engines, architectures = profile_groups()
    for group in groups if isinstance(groups, dict) else ():
        engine, slash, arch = str(group).partition("/")
        if engine not in engines or (slash and arch not in architectures):
            raise ConfigError(
                source,
                f"groups.{group}",
                f"not a group a plan looks up (allowed: ENGINE or ENGINE/ARCHITECTURE with ENGINE one of "
                f"{', '.join(engines)} and ARCHITECTURE one of {', '.join(architectures)})",
            )


def _sigma(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def read_calibration_file(path: str) -> CalibrationFile:
    """Load a calibration profile written by ``tokenplan calibrate`` / ``bench --fit``.

    Raises:
        InputError: the file does not exist.
        ConfigError: not JSON, unknown factors, a factor outside its physical range
            (:data:`PROFILE_BOUNDS`), or an unknown ``layered_on``.
    """
    p = Path(path)
    if not p.is_file():
        raise InputError("calibration", path, "an existing JSON file written by tokenplan calibrate")
    data = load_json(p)  # ConfigError: not UTF-8, not JSON, a key twice, nested too deep
    if not isinstance(data, dict):
        raise ConfigError(path, "<root>", "expected a JSON object")
    check_version(data, 1, Reading(path))  # the profile's schema; a file without one reads as 1
    layered = data.get("layered_on")
    if layered is not None:
        if layered != LAYERED_ON_SHIPPED:
            raise ConfigError(path, "layered_on", f"{layered!r} is not allowed (allowed: {LAYERED_ON_SHIPPED!r})")
        return layer_update(data, path)
    if "default" not in data and not data.get("groups"):
        # an empty profile would silently plan at the built-in defaults, not at a fit
        raise ConfigError(
            path,
            "default",
            "required key is missing (a profile holds 'default' and/or 'groups' "
            "of fitted factors, as tokenplan calibrate writes them)",
        )
    check_group_names(data.get("groups"), path)
    table = efficiency_table_from_json(data, path, PROFILE_BOUNDS)
    return CalibrationFile(table, _fitted_on(data, path))


def _fitted_on(data: dict, source: str) -> dict | None:
    """The profile's ``fitted_on`` record (None: none); one that is not an object would drop
    every warning about using the profile away from what it measured, so it is refused."""
    fitted = data.get("fitted_on")
    if fitted is not None and not isinstance(fitted, dict):
        raise ConfigError(
            source, "fitted_on", f"{fitted!r} is not allowed (allowed: an object, as calibrate writes it)"
        )
    return fitted


def read_calibration(path: str) -> EfficiencyTable:
    """The efficiency table of the profile at ``path`` (see :func:`read_calibration_file`)."""
    return read_calibration_file(path).table


def moved_lines(path: str, read: CalibrationFile | None = None) -> list[str]:
    """What an update profile moves, for the first lines of a plan: one line per group, each
    factor as ``name shipped → calibrated (±%, ±1σ)``; for a full table one line saying it
    replaces the shipped fit. Units: seconds shown in ms or µs, fractions as they are.
    ``read``: the profile at ``path`` already read (None: read it here).

    Raises:
        InputError, ConfigError: as :func:`read_calibration_file`.
    """
    read = read or read_calibration_file(path)
    if read.moved is None:
        return [f"calibration {path}: a full table that replaces the shipped fit ({read.table.provenance})"]
    lines = []
    for group, factors in read.moved.items():
        parts = [
            f"{k} {_show(k, old)} → {_show(k, new)} ({(new / old - 1) * 100 if old else math.inf:+.0f} %"
            + ("" if s is None else f", ±{_show(k, s)}")
            + ")"
            for k, (old, new, s) in factors.items()
        ]
        lines.append(
            f"calibration {path} moves {group}: "
            + "; ".join(parts)
            + "; every other factor and group is the shipped fit"
            if parts
            else f"calibration {path} moves nothing in {group} (its data did not improve on the shipped fit)"
        )
    return lines


def _show(name: str, value: float) -> str:
    if not name.endswith("_s"):
        return f"{value:.3g}"
    return f"{value * 1e3:.3g} ms" if abs(value) >= 1e-3 else f"{value * 1e6:.3g} µs"


def read_profile_file(path: str) -> Profile:
    """The :class:`~tokenplan.calibration.fitted_range.Profile` of the profile at ``path``: its
    table, fitted range, the lines of what it moves (:func:`moved_lines`) and the group each line
    is about. Raises InputError, ConfigError: as :func:`read_calibration_file`."""
    read = read_calibration_file(path)
    groups = ("",) if read.moved is None else tuple(read.moved)  # moved_lines: one line per group
    return Profile(path, read.table, read.fitted_on, tuple(moved_lines(path, read)), read.moved_groups, groups)
