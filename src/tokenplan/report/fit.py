"""The fit of the planner's efficiency factors to a bench sweep, a run directory or other tools'
result files (``bench --fit``, ``calibrate --from-bench``/``--from-run``): the fitted factors
with their 1σ uncertainty, then predicted against measured TPOT and output tok/s per GPU per
level. Reads the fit's JSON as :class:`~tokenplan.bench_schema.BenchFit`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from tokenplan.bench_schema import BenchFit
from tokenplan.perf.efficiency import at_bound
from tokenplan.units import count_text

if TYPE_CHECKING:
    from tokenplan.calibration.update import CalibrationUpdate


def fit_table(fit: BenchFit) -> Table:
    """Fitted factors: value, ± 1σ ("–" where the fit cannot tell), and "at bound" notes."""
    t = Table(title="fit: efficiency factors" + ("" if fit.converged else " (not converged)"))
    for c in ("factor", "value", "± 1σ", "note"):
        t.add_column(c, justify="left" if c in ("factor", "note") else "right")
    for name, f in fit.factors.items():
        t.add_row(
            name,
            f"{f.value:.4g}",
            "–" if f.uncertainty is None else f"{f.uncertainty:.2g}",
            "at bound" if name in fit.at_bound else "",
        )
    return t


def fit_levels_table(fit: BenchFit) -> Table:
    """Per level: the running batch, predicted vs measured mean TPOT (ms) and output tok/s per GPU."""
    t = Table(title="fit: predicted vs measured per level")
    # TPOT: the mean over requests, which the fit reads (the bench table shows the median, p50)
    for c in ("conc", "batch", "mean TPOT ms pred", "mean TPOT ms meas", "out tok/s/GPU pred", "out tok/s/GPU meas"):
        t.add_column(c, justify="right")
    for lv in fit.levels:
        t.add_row(
            f"{lv.concurrency:g}",
            f"{lv.batch:g}",
            f"{lv.predicted_tpot_s * 1e3:.2f}",
            "–" if lv.measured_tpot_s is None else f"{lv.measured_tpot_s * 1e3:.2f}",
            f"{lv.predicted_output_tok_s_per_gpu:,.1f}",
            "–" if lv.measured_output_tok_s_per_gpu is None else f"{lv.measured_output_tok_s_per_gpu:,.1f}",
        )
    return t


def show_fit(console: Console, fit: BenchFit, wrote_profile: Path | None, sources: bool = False) -> None:
    """Print the two fit tables, preceded by one line per result file read when ``sources``, and
    followed by ``wrote PATH`` when the profile was written (``wrote_profile``)."""
    if sources:
        for source in fit.sources or ():
            console.print(f"read {source.path}: {source.format}, {source.levels} level(s)", markup=False)
    console.print(fit_table(fit))
    console.print(fit_levels_table(fit))
    if wrote_profile is not None:
        console.print(f"wrote {wrote_profile}", markup=False)


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value * 100:.1f} %"


def show_update(console: Console, update: CalibrationUpdate, wrote_profile: Path | None) -> None:
    """``calibrate FILE.csv`` (an update of the shipped fit): per group, each moved factor
    shipped → calibrated with ±1σ, then the median |error| on the group's rows with the shipped
    and the calibrated factors (TPOT, or output tok/s where a row has no TPOT; TTFT)."""
    console.print(
        f"{update.n} row{'' if update.n == 1 else 's'} fitted, {update.skipped} skipped (tokenplan validate lists why)",
        markup=False,
    )
    for group, g in update.groups.items():
        if not g.factors:  # no table of headers alone
            console.print(
                f"{group} ({count_text(g.rows, 'row')}): nothing moved (the rows did not improve on the shipped fit, or cannot tell its factors apart)",
                markup=False,
            )
        else:
            t = Table(title=f"update of the shipped fit: {group} ({count_text(g.rows, 'row')})")
            for c in ("factor", "shipped", "calibrated", "change", "± 1σ"):
                t.add_column(c, justify="left" if c == "factor" else "right")
            for name, f in g.factors.items():
                t.add_row(
                    name,
                    f"{f.shipped:.4g}",
                    f"{f.calibrated:.4g}",
                    f"{(f.calibrated / f.shipped - 1) * 100:+.1f} %" if f.shipped else "–",
                    # a factor held by its physical bound has no σ: the data ask for more than it allows
                    # (EFFICIENCY_BOUNDS)
                    "at bound"
                    if at_bound(name, f.calibrated)
                    else "–"
                    if f.uncertainty is None
                    else f"{f.uncertainty:.2g}",
                )
            console.print(t)
        old, new = g.median_abs_error_shipped, g.median_abs_error_calibrated
        console.print(
            f"{group} median |error|: TPOT/throughput {_pct(old.tpot)} → {_pct(new.tpot)}, "
            f"TTFT {_pct(old.ttft)} → {_pct(new.ttft)} (kept: {g.kept}); every other factor "
            "and group stays the shipped fit",
            markup=False,
        )
    if wrote_profile is not None:
        console.print(f"wrote {wrote_profile}", markup=False)
