"""What ``tokenplan bench`` does once the sweep is in hand: fit (``--fit``), write the profile
(``-o``), save the bench JSON (``--save``) and draw the PNG (``--plot``), each failure kept as a
value so the measurement is never lost, then the one error to report (by type, not by text).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokenplan.api.resolve import PredictRequest, resolve
from tokenplan.errors import ServerError, TokenplanError
from tokenplan.runner.paths import check_output_file


class OutputLost(TokenplanError):
    """A --save, --plot or -o file could not be written at the end; the results went to stdout."""


@dataclass(frozen=True)
class FitTarget:
    """``--fit``'s options: where the profile goes and the served configuration to fit."""

    out: Path
    config: str
    gpu: str
    num_gpus: int | None
    tp: int
    pp: int
    ep: int
    weight_dtype: str
    kv_dtype: str
    engine: str
    max_running: int | None

    def request(self, measured_gpus: int | None = None) -> PredictRequest:
        """The served configuration; GPUs: ``--num-gpus``, else the bench JSON's, else tp × pp."""
        return PredictRequest(
            model=self.config,
            gpu=self.gpu,
            num_gpus=self.num_gpus or measured_gpus or self.tp * self.pp,
            tp=self.tp,
            pp=self.pp,
            ep=self.ep,
            weight_dtype=self.weight_dtype,
            kv_dtype=self.kv_dtype,
            engine=self.engine,
            max_running=self.max_running,
        )

    def check(self, measured_gpus: int | None = None) -> None:
        """Resolve the served configuration now, so a bad --config/--gpu/layout fails before the sweep.

        Raises:
            InputError, CatalogError, ConfigError: a name or layout that does not resolve.
        """
        resolve(self.request(measured_gpus))


def check_outputs(save: Path | None, plot: Path | None, fitting: FitTarget | None) -> None:
    """Refuse a ``--save``, ``--plot`` or ``--out`` path that cannot be written, before measuring.

    Raises:
        InputError: a path in a missing folder, a folder, or one that cannot be written.
    """
    for option, path, what in (
        ("--save", save, "a JSON file path"),
        ("--plot", plot, "a PNG file path"),
        ("--out", fitting.out if fitting else None, "a profile JSON file path"),
    ):
        if path is not None:
            check_output_file(path, option, what)


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

    def error(self, stopped: str | None, levels: int, printed_json: bool) -> TokenplanError | None:
        """The one error to raise after the output: the fit's, a lost file's, or an early stop."""
        if self.fit_error is not None:
            return self.fit_error
        if self.failed:
            printed = "the bench JSON is printed on stdout" if printed_json else "the results are printed on stdout"
            early = f" (sweep stopped early: {stopped})" if stopped is not None else ""
            return OutputLost(f"could not write {'; '.join(map(str, self.failed))}; {printed}{early}")
        if stopped is not None:
            return ServerError(f"sweep stopped: {stopped} ({levels} levels kept)")
        return None


def finish_bench(
    data: dict[str, Any],
    fitting: FitTarget | None,
    save: Path | None,
    plot: Path | None,
    fit: Callable[[dict[str, Any], PredictRequest], Any],
    draw: Callable[[dict[str, Any], Path], None],
) -> Finished:
    """Fit the sweep in ``data`` (adds ``data["fit"]``) and write the profile, then save the bench
    JSON and draw the plot. Nothing raises: each failure is kept in the result, so the caller
    still prints the measurement before it raises :meth:`Finished.error`.

    Args:
        fit: ``(data, served configuration)`` → a :class:`~tokenplan.calibration.run_profile.FitOutcome`
            (``api.bench.fit_bench`` with the command line bound).
        draw: ``(data, path)`` → the PNG plot written (``report.bench_plot.write_bench_plot``);
            raises OSError when the file cannot be written.
    """
    done = Finished()
    if fitting is not None and data["levels"]:
        try:
            outcome = fit(data, fitting.request(data.get("num_gpus")))
        except TokenplanError as problem:
            done.fit_error = problem
        else:
            data["fit"] = outcome.data  # holds the profile as well
            done.warnings += outcome.warnings
            if _write(fitting.out, json.dumps(outcome.profile, indent=2) + "\n", "--out", done.failed):
                done.profile = fitting.out
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
