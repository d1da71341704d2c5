"""What ``tokenplan bench`` writes once the sweep is in hand: the fitted profile (``--fit -o``),
the bench JSON (``--save``) and the PNG (``--plot``), each failure kept as a value so the
measurement is never lost, then the one error to report (by type, not by text)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokenplan.calibration.run_profile import FitOutcome
from tokenplan.errors import ServerError, TokenplanError


class OutputLost(TokenplanError):
    """A --save, --plot or -o file could not be written at the end; the results went to stdout."""


@dataclass(frozen=True)
class FailedWrite:
    """A file that could not be written at the end: the option, the path and the system's reason."""

    option: str
    path: Path
    reason: str

    def __str__(self) -> str:
        return f"{self.option} {str(self.path)!r}: {self.reason}"


@dataclass
class Finished:
    """What :func:`finish_bench` did: the profile written (or None), the fit's error, the writes
    that failed and the fit's warnings."""

    profile: Path | None = None
    fit_error: TokenplanError | None = None
    failed: list[FailedWrite] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def lost(self, option: str) -> bool:
        """Whether the file of ``option`` (``--save``, ``--plot``, ``--out``) could not be written."""
        return any(f.option == option for f in self.failed)

    def print_json(self, saved: bool, asked: bool) -> bool:
        """Whether the bench JSON goes to stdout: asked for (``--json``), or what a failed write or
        a failed fit would otherwise lose (``saved``: a --save was given)."""
        unsaved = not saved or self.lost("--save")
        return asked or self.lost("--out") or (unsaved and (self.fit_error is not None or saved))

    def error(self, stopped: str | None, levels: list[dict[str, Any]], printed_json: bool) -> TokenplanError | None:
        """The one error to raise after the output: the fit's, a lost file's, an early stop, or
        requests that failed in ``levels`` (the bench JSON's level dicts; :func:`failed_requests`):
        a sweep whose levels lost answers measured fewer requests than it sent, so it is no success."""
        if self.fit_error is not None:
            return self.fit_error
        if self.failed:
            printed = "the bench JSON is printed on stdout" if printed_json else "the results are printed on stdout"
            early = f" (sweep stopped early: {stopped})" if stopped is not None else ""
            return OutputLost(f"could not write {'; '.join(map(str, self.failed))}; {printed}{early}")
        if stopped is not None:
            return ServerError(f"sweep stopped: {stopped} ({len(levels)} levels kept)")
        failed = failed_requests(levels)
        if failed is not None:
            return ServerError(failed)
        return None


def failed_requests(levels: list[dict[str, Any]]) -> str | None:
    """One line naming the levels whose requests failed (``errors`` > 0 in a bench level
    dict), with the first error's message; None when every request was answered. The levels'
    throughput counts only answered requests, so such a sweep is reported, kept, and not a success.
    """
    hit = [lv for lv in levels if lv.get("errors")]
    if not hit:
        return None
    where = ", ".join(f"{lv['errors']} of {lv['errors'] + lv['requests']} at {_level_name(lv)}" for lv in hit)
    samples = [m for lv in hit for m in lv.get("error_samples") or ()]
    first = f"; first: {samples[0]}" if samples else ""
    return f"requests failed ({where}){first}; the levels count only the answered ones"


def _level_name(level: dict[str, Any]) -> str:
    rate = level.get("request_rate")  # a number for an open-loop level; "inf" or absent otherwise
    return f"request rate {rate:g}/s" if isinstance(rate, (int, float)) else f"concurrency {level['concurrency']}"


def finish_bench(
    data: dict[str, Any],
    out: Path | None,
    save: Path | None,
    plot: Path | None,
    fit: Callable[[dict[str, Any]], FitOutcome],
    draw: Callable[[dict[str, Any], Path], None],
) -> Finished:
    """With ``out`` (``--fit -o``), fit the sweep in ``data`` (adds ``data["fit"]``) and write the
    profile there; then save the bench JSON and draw the plot. Nothing raises: each failure is
    kept in the result, so the caller still prints the measurement before it raises
    :meth:`Finished.error`.

    Args:
        fit: the bench JSON → its fit (``api.bench.fit_bench`` with the served configuration and
            the command line bound); called only with ``out``.
        draw: ``(data, path)`` → the PNG plot written (``report.bench_plot.write_bench_plot``);
            raises OSError when the file cannot be written.
    """
    done = Finished()
    if out is not None and data["levels"]:
        try:
            outcome = fit(data)
        except TokenplanError as problem:
            done.fit_error = problem
        else:
            data["fit"] = outcome.data  # holds the profile as well
            done.warnings += outcome.warnings
            if _write(out, outcome.profile_json(), "--out", done.failed):
                done.profile = out
    if save is not None:
        _write(save, json.dumps(data, indent=2) + "\n", "--save", done.failed)
    if plot is not None and data["levels"]:
        try:
            draw(data, plot)
        except OSError as problem:
            done.failed.append(FailedWrite("--plot", plot, problem.strerror or str(problem)))
    return done


def _write(path: Path, text: str, option: str, failed: list[FailedWrite]) -> bool:
    """Write ``text`` to ``path``; on failure note it in ``failed`` and return False."""
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as problem:
        failed.append(FailedWrite(option, path, problem.strerror or str(problem)))
        return False
    return True
