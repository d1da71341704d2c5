"""``calibrate``: fit the efficiency factors on measured rows and write a profile — the Python API
behind ``tokenplan calibrate``. The files are read (:mod:`tokenplan.files.measurements`) and their
rows resolved as for ``validate`` (``tokenplan.api.resolve``); the refit and its cross-validations
are :mod:`tokenplan.calibration.refit`, the update of the shipped fit
:mod:`tokenplan.calibration.update`."""

from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path

from tokenplan.api.resolve import read_profile, resolve_file
from tokenplan.calibration.refit import CV_LATENCY_STRIDE, SERVING_FIT_STRIDE, CaseFile, fit_rows, refit
from tokenplan.calibration.summary import CalibrationResult
from tokenplan.calibration.update import CalibrationUpdate, update_shipped
from tokenplan.errors import ConfigError, InputError
from tokenplan.files.measurements import SERVING, described, read_measurements


def check_outputs(out: Path, bands: Path | None = None, inputs: tuple[str, ...] = ()) -> None:
    """Refuse a profile (``-o``) or band-table (``--bands``) path that cannot be written, is one of
    the ``inputs`` it would overwrite, or is the same file for both, before the fit (InputError
    naming the option, the path and what is allowed: ``/proc/x.json`` said only "No such file or
    directory", after the fit; ``-o`` naming the input CSV replaced the measurements with JSON)."""
    from tokenplan.runner.paths import check_output_file

    check_output_file(str(out), "-o", "a profile JSON file path")
    if bands is not None:
        check_output_file(str(bands), "--bands", "a band-table JSON file path")
    read = {Path(p).resolve() for p in inputs}
    for option, path in (("-o", out), ("--bands", bands)):
        if path is not None and path.resolve() in read:
            raise InputError(option, str(path), "a new file path, not one of the measurement files read")
    if bands is not None and bands.resolve() == out.resolve():
        raise InputError("--bands", str(bands), f"a file path other than -o {out} (the profile)")


def save_json(path: Path, data: object, option: str) -> None:
    """Write ``data`` as indented JSON to ``path`` (``runner.store.appendlog.write_whole``: a copy
    beside it renamed over it, so a failed write keeps the file that was there). Raises
    InputError naming ``option``, the path and why it could not be written."""
    import json
    import os

    from tokenplan.runner.store.appendlog import WriteFailed, write_whole

    try:
        write_whole(path, (json.dumps(data, indent=2) + "\n").encode("utf-8"))
    except WriteFailed as failed:
        why = os.strerror(failed.errno) if failed.errno else "an I/O error"
        raise InputError(option, str(path), f"a path this process can write ({why})") from None


def read_cases(paths: list[str]) -> tuple[list[CaseFile], int]:
    """The predictable rows of each file, and the number of rows skipped (a model not in the catalog,
    no stated lengths). Raises InputError/ConfigError (ConfigError on a malformed row: a cell that is
    not a number, a bad CSV record, a repeated row id; InputError on a file named twice or a copy
    of one named before)."""
    files, n_skipped = [], 0
    seen: dict[str, str] = {}  # file content's SHA-256 → the path first named with it
    for path in paths:  # a file named twice or copied, or a row id twice in one file, counts rows twice
        digest = hashlib.sha256(Path(path).read_bytes()).hexdigest() if Path(path).is_file() else path
        if digest in seen:
            raise InputError("measurement file", path, f"each file once (this one holds what {seen[digest]} holds)")
        seen[digest] = path
        data = read_measurements(path)
        twice = [i for i, n in Counter(row.row_id for row in data.rows).items() if n > 1]
        if twice:
            raise ConfigError(
                path, f"id {twice[0]}", "each row id once (a repeated row is fitted twice); nothing fitted"
            )
        malformed = [row for row in data.skipped if row.reason.startswith("malformed")]
        if malformed:  # bad input: refused before a fit is written, as validate fails on it
            first, more = malformed[0], len(malformed) - 1
            others = f" and {more} more" if more else ""
            raise ConfigError(path, f"line {first.line} (id {first.row_id})", f"{first.reason}{others}; nothing fitted")
        cases, skipped = resolve_file(data)
        n_skipped += len(skipped)
        has_tpot = any(m.tpot_s is not None for m in data.rows)
        files.append(CaseFile.of(path, data.kind == SERVING, has_tpot, cases))
    return files, n_skipped


def calibrate(
    paths: list[str], command: str = "", cross_validation: bool = True, bands: bool = False, workers: int | None = None
) -> CalibrationResult:
    """Refit the efficiency factors on measurement CSVs, cross-validate and, with ``bands``, make the
    error-band table (:func:`~tokenplan.calibration.refit.refit`). Raises InputError/ConfigError
    for bad files, no predictable row, or rows that identify no factor."""
    files, skipped = read_cases(paths)
    files, rejected = _drop_rejected(files)  # as the update: a rejected row predicts nothing
    skipped += rejected
    named = command or "tokenplan calibrate " + " ".join(paths)
    result = refit(files, named, [described(p) for p in paths], skipped, cross_validation, bands, workers)
    if not result.fit.factors:  # a profile of the defaults would read as a fit (a break-it pass)
        rows = sum(len(f.cases) for f in files)
        raise InputError(
            "measurement files",
            ", ".join(paths),
            f"rows that identify at least one factor (each is fitted from rows of two or more models; "
            f"the predictable rows ({rows}) identify none, so nothing was fitted or written)",
        )
    return result


def _drop_rejected(files: list[CaseFile]) -> tuple[list[CaseFile], int]:
    """The files without the rows whose configuration the planner rejects (it does not fit,
    its layout is refused: ``validate`` skips them with the reason), and how many were dropped.
    Such a row predicts nothing, yet it counted as fitted: a zero error that lowered the
    update's noise estimate and let a second model "inform" factors, so five rows of a
    405B model on one H100 moved vLLM/Hopper's ``hbm_fraction`` from 0.64 to 0.95. A rejection
    does not depend on the factors (memory and layout only): the shipped ones decide it."""
    from dataclasses import replace

    from tokenplan.calibration.validate import predict_case

    table = read_profile(None).table
    kept, dropped, first = [], 0, None
    for f in files:
        ok = []
        for c in f.cases:
            why = predict_case(c, table.resolve(c.engine, c.architecture), screen=True).rejected
            ok += [c] if why is None else []
            first = first or (None if why is None else f"line {c.measurement.line}: {why}")
        dropped += len(f.cases) - len(ok)
        kept.append(replace(f, cases=ok))
    if first is not None and not any(f.cases for f in kept):  # say why, not only that nothing is left
        raise InputError(
            "measurement files",
            ", ".join(f.path for f in files),
            f"files with at least one predictable row (the planner rejects every one; {first})",
        )
    return kept, dropped


def calibrate_update(paths: list[str], command: str = "") -> CalibrationUpdate:
    """Update the shipped fit with the rows of measurement CSVs (no file of at most
    :data:`~tokenplan.calibration.refit.THIN_ABOVE` rows is thinned;
    :func:`~tokenplan.calibration.update.update_shipped`). Raises InputError/ConfigError for bad
    files, InputError when no row is predictable or none carries TPOT or throughput."""
    files, skipped = read_cases(paths)
    files, rejected = _drop_rejected(files)
    cases = fit_rows(files, paths, SERVING_FIT_STRIDE, CV_LATENCY_STRIDE)
    skipped += rejected
    provenance = (
        f"update of the shipped fit by `{command or 'tokenplan calibrate ' + ' '.join(paths)}` on "
        f"{len(cases)} rows ({', '.join(described(p) for p in paths)})"
    )
    return update_shipped(cases, skipped, read_profile(None).table, provenance, ", ".join(paths))
