"""The calibration profile JSON that ``tokenplan calibrate`` and ``bench --fit`` write and
``--calibration`` reads: read once, checked, errors as one line naming the file and the key."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tokenplan.catalog import efficiency_table_from_json
from tokenplan.errors import ConfigError, InputError
from tokenplan.loaders import load_json
from tokenplan.perf.efficiency import EfficiencyTable


@dataclass(frozen=True)
class CalibrationFile:
    """A read profile: its efficiency ``table`` and its ``fitted_on`` record (the range of
    measurements a ``bench --fit`` profile was fitted on; None for profiles without one)."""

    table: EfficiencyTable
    fitted_on: dict | None


def read_calibration_file(path: str) -> CalibrationFile:
    """Load a calibration profile written by ``tokenplan calibrate`` / ``bench --fit``.

    Raises:
        InputError: the file does not exist.
        ConfigError: not JSON, or unknown factors.
    """
    p = Path(path)
    if not p.is_file():
        raise InputError("calibration", path, "an existing JSON file written by tokenplan calibrate")
    data = load_json(p)  # ConfigError: not UTF-8, not JSON, a key twice, nested too deep
    if not isinstance(data, dict):
        raise ConfigError(path, "<root>", "expected a JSON object")
    if "default" not in data and not data.get("groups"):
        # an empty profile would silently plan at the built-in defaults, not at a fit
        raise ConfigError(path, "default", "required key is missing (a profile holds 'default' and/or 'groups' "
                          "of fitted factors, as tokenplan calibrate writes them)")
    fitted = data.get("fitted_on")
    return CalibrationFile(efficiency_table_from_json(data, path), fitted if isinstance(fitted, dict) else None)


def read_calibration(path: str) -> EfficiencyTable:
    """The efficiency table of the profile at ``path`` (see :func:`read_calibration_file`)."""
    return read_calibration_file(path).table
