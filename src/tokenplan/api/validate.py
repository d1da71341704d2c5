"""``validate``: predict measured rows and summarise the error — the Python API behind
``tokenplan validate``.

The rows resolve as ``tokenplan predict`` resolves a request (:mod:`tokenplan.api.resolve`); the
result and its error summaries are :mod:`tokenplan.calibration.validation`'s. With the shipped
calibration, each predicted figure also carries the 80 % interval that ``tokenplan predict`` would
give it (``catalog/error_bands.json``) and each metric its ``coverage``. With ``--calibration``
there are no intervals: the shipped bands describe the shipped factors' errors, not another
profile's.
"""

from __future__ import annotations

from dataclasses import replace

from tokenplan.api.bands import error_bands
from tokenplan.api.resolve import read_profile, resolve_case, resolve_file
from tokenplan.calibration.validate import Case, validate_cases
from tokenplan.calibration.validation import ValidationResult, validation_result, variant_span
from tokenplan.catalog.length_sets import length_set
from tokenplan.catalog.listing import family_variants
from tokenplan.files.measurements import read_measurements
from tokenplan.measurement import Measurement, SkippedRow


def validate(path: str, calibration: str | None = None) -> ValidationResult:
    """Predict every row of a measurement CSV and summarise the error (see ``tokenplan validate``):
    a :class:`~tokenplan.calibration.validation.ValidationResult`, whose ``to_json()`` is what
    ``--json`` prints.

    Raises:
        InputError, ConfigError: the file (or the calibration profile) is missing or malformed.
    """
    table = read_profile(calibration).table
    data = read_measurements(path)
    cases, skipped = resolve_file(data)
    named = {m.length_set for m in data.rows if m.length_set is not None and length_set(m.length_set) is not None}
    bands = error_bands() if calibration is None else None
    spans = None if bands is None else variant_span(table, _variant_cases)
    return validation_result(validate_cases(data.kind, cases, skipped, table), bands, named, spans)


def in_sample_note(path: str, calibration: str | None = None) -> str | None:
    """A note where ``path`` is one of the files the profile (None: the shipped fit) was fitted
    on, as its provenance names them by SHA-256: the errors (and the share in the 80 % interval)
    are then in-sample, lower than on held-out rows. None otherwise, or for a file that cannot be read."""
    from tokenplan.files.measurements import described

    try:
        stamp = described(path).rpartition(" ")[2]  # sha256:0123456789ab
    except OSError:
        return None
    if stamp not in read_profile(calibration).table.provenance:
        return None
    return (
        f"{path} ({stamp}) is one of the files the fit was made on: these errors are in-sample; "
        "held-out errors come from calibrate --refit --cv (leave one GPU or model out)"
    )


def _variant_cases(m: Measurement) -> list[Case]:
    """The row on each other catalog variant of its GPU's family, where it resolves."""
    cases = (resolve_case(replace(m, gpu=key)) for key in family_variants(m.gpu))
    return [c for c in cases if not isinstance(c, SkippedRow)]
