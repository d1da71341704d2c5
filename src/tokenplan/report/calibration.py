"""What ``tokenplan calibrate`` prints: the fitted efficiency factors with their 1σ uncertainty,
the factors that ended on a bound or were held, the leave-one-GPU-out / leave-one-model-out
cross-validation and the error bands' checked coverage. Draws
:class:`~tokenplan.calibration.summary.CalibrationSummary`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    from tokenplan.calibration.summary import CalibrationSummary


def _reason(message: str, status: int) -> str:
    """scipy ``least_squares``'s own words for why it stopped (e.g. "`ftol` termination condition
    is satisfied"), without the final period; its status code where it gave none."""
    text = message.strip().rstrip(".")
    return text if text else f"scipy status {status}"


def factors_table(d: CalibrationSummary) -> Table:
    """Fitted factors per level: value, ± 1σ ("–" where the data cannot tell) and "at bound"."""
    opt = d.optimizer
    state = "converged" if d.converged else "not converged"
    aside = d.throughput_set_aside
    rows = f"{d.n} rows, {d.skipped} skipped" + (f", {aside} with tok/s set aside" if aside else "")
    t = Table(
        title=f"fitted factors ({rows} — `tokenplan validate FILE` gives each reason; optimiser {state} after "
        f"{opt.nfev} evaluations: {_reason(opt.message, opt.status)})"
    )
    for col in ("level", "factor", "value", "± 1σ", "note"):
        t.add_column(col, justify="right" if col in ("value", "± 1σ") else "left")
    for f in d.factors:
        unc = f.uncertainty
        t.add_row(
            f.level,
            f.name,
            f"{f.value:.4g}",
            "–" if unc is None else f"{unc:.2g}",
            "at bound" if f.at_bound else "",
        )
    return t


def at_bound_line(d: CalibrationSummary) -> str | None:
    """One line naming the factors that ended on a physical bound, or None."""
    if not d.at_bound:
        return None
    return (
        "at a bound of EFFICIENCY_BOUNDS (the data asks for more than the bound allows, or cannot "
        f"identify the factor; no σ): {', '.join(d.at_bound)}"
    )


def cv_table(d: CalibrationSummary) -> Table:
    """Per grouping (GPU, model): the pooled median (and p90) |predicted/measured − 1| on
    held-out rows, then each held-out group's median."""
    t = Table(title="cross-validation: |predicted/measured − 1| on held-out rows")
    for col in ("held out", "n", "median"):
        t.add_column(col, justify="left" if col == "held out" else "right")
    for by, cv in d.cross_validation.items():
        t.add_row(
            f"[bold]each {by} (pooled)[/bold]",
            str(sum(f.n for f in cv.folds)),
            f"{cv.median_abs_pct_error * 100:.0f}% (p90 {cv.p90_abs_pct_error * 100:.0f}%)",
        )
        for f in cv.folds:
            t.add_row(f"  {by} {f.held_out}", str(f.n), f"{f.median_abs_pct_error * 100:.0f}%")
    return t


def coverage_line(table) -> str:  # noqa: ANN001 - a tokenplan.calibration.bands.BandTable
    """One line: the nested cross-validation coverage of the 80 % bands, per metric, then per
    file and measured quantity (throughput, TPOT, TTFT)."""
    parts = [f"{m} {c * 100:.0f} %" for m, c in table.checked_coverage.items()]
    line = (
        f"error bands: nominal {table.coverage * 100:.0f} %, held-out coverage in nested cross-validation "
        "(folds of whole configurations): " + ", ".join(parts)
    )
    by_file = getattr(table, "coverage_by_file", {})
    if by_file:
        line += "; per file: " + "; ".join(
            f"{name} " + ", ".join(f"{q} {c * 100:.0f} %" for q, c in shares.items())
            for name, shares in by_file.items()
        )
    return line


def show_calibration(
    console: Console, d: CalibrationSummary, out: Path, bands=None, bands_path: Path | None = None
) -> None:  # noqa: ANN001
    """Print the factors, the bound and held notes, the cross-validation and, when the error-band
    table ``bands`` (a BandTable) was written to ``bands_path``, its coverage; then ``wrote out``."""
    console.print(factors_table(d))
    bound_line = at_bound_line(d)
    if bound_line:
        console.print(bound_line, markup=False)
    if d.held:
        console.print(
            f"held at their documented defaults (not identified by the data): {', '.join(d.held)}", markup=False
        )
    if d.cross_validation:
        console.print(cv_table(d))
    if bands is not None and bands_path is not None:
        console.print(coverage_line(bands), markup=False)
        console.print(f"wrote {bands_path}", markup=False)
    console.print(f"wrote {out}", markup=False)
