"""What ``tokenplan validate`` prints: every measured row beside the planner's prediction, then
the error |predicted/measured − 1| overall and by engine, GPU and model family, the rows set
aside with their reason, and the calibration used. Draws :class:`~tokenplan.calibration.validation.ValidationResult`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table
from rich.text import Text

from tokenplan.report.fold import FoldingTable
from tokenplan.units import count_text

if TYPE_CHECKING:
    from tokenplan.calibration.validation import ErrorStats, MetricError, SkippedEntry, ValidatedRow, ValidationResult


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{x * 100:+.0f}%"


def _abs_pct(x: float | None) -> str:
    return "–" if x is None else f"{x * 100:.0f}%"


def _spread(lengths: str) -> str:
    """`` ~sharegpt`` after the mean lengths where they spread as a named set, else nothing
    (fixed lengths, and InferenceX's narrow U[0.8L, L] that every row of its file has)."""
    return "" if lengths == "fixed" or lengths.startswith("U[") else f" ~{lengths}"


def rows_table(v: ValidationResult) -> FoldingTable:
    """One row per measured point: its setting, then predicted, measured and signed error per
    metric (TPOT and TTFT in ms for serving rows, output tok/s per GPU for throughput rows, and
    TPOT and TTFT too where throughput rows measure them; "–" where a row does not, "set aside"
    where its tok/s was set aside) and, with error bands, whether the measurement lies in its 80 %
    interval (the interval: ``validate --json``). A :class:`FoldingTable`: no figure or name is
    cut, and a terminal too narrow for the columns gets each row stacked."""
    serving = v.kind == "serving"
    header = ["line", "engine", "model", "gpu", "layout", "w", "spec", "isl/osl", "conc"]
    latencies = [("tpot", "TPOT ms"), ("ttft", "TTFT ms")]
    metrics = latencies if serving else [("throughput", "tok/s/GPU")]
    if not serving and any(r.tpot for r in v.rows):  # InferenceX rows also measure TPOT/TTFT
        metrics += latencies
    banded = any(m.low is not None for r in v.rows for err, _ in metrics if (m := r.metric(err)))
    right = [0, 8]
    for _, label in metrics:
        right += range(len(header), len(header) + 3 + banded)
        header += [f"pred {label}", f"meas {label}", "err"] + (["in 80%"] if banded else [])
    aside = {s.id for s in v.throughput_set_aside}
    rows: list[list[str | Text]] = []
    for r in v.rows:
        conc = "max" if r.concurrency is None else f"{r.concurrency:g}"
        spec = r.spec.split(" τ=")[0] if r.spec != "none" else "–"  # the method and k; τ is in --json
        cells: list[str | Text] = [
            str(r.line),
            r.engine,
            r.model,
            r.gpu,
            r.layout,
            r.weight_dtype,
            spec,
            _lengths(r),
            conc,
        ]
        for err, _ in metrics:
            m = r.metric(err)
            cells += (
                [_figure(m.predicted), _figure(m.measured), _pct(m.error)]
                if m
                else ["–", "set aside" if r.id in aside else "–", "–"]
            )
            if banded:
                cells.append(_interval(m))
        rows.append(cells)
    return FoldingTable(f"{count_text(v.n, 'row')} predicted", header, rows, right=right)


def _lengths(r: ValidatedRow) -> str:
    """``1024/256`` (ISL/OSL means, tokens) and how they spread."""
    return f"{r.isl:g}/{r.osl:g}" + _spread(r.lengths)


def _figure(value: float) -> str:
    """A tok/s or ms figure: whole numbers from 100 up, one decimal below."""
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.1f}"


def _interval(m: MetricError | None) -> str | Text:
    """``in`` (or a bold ``out``): whether the measurement lies in the row's 80 % interval on the
    figure (the interval itself is in ``validate --json``); "–" where the row has none."""
    if m is None or m.low is None or m.high is None:
        return "–"
    return "in" if m.inside else Text("out", style="bold")


def _measured(v: ValidationResult, metric: str) -> int:
    """Rows that measured ``metric`` (``throughput``, ``tpot``, ``ttft``; InferenceX rows without
    latencies, or whose tok/s was set aside, lack one of them)."""
    return sum(r.metric(metric) is not None for r in v.rows)


def summary_table(v: ValidationResult) -> Table:
    """Median, p90 and bias of the error over all rows (per metric), then per engine, GPU, family;
    with error bands, the share of rows whose measurement lies in its 80 % interval (per metric)."""
    t = Table(title="error |predicted/measured − 1|")
    # with bands, any metric's coverage (a file whose every tok/s is set aside still has TPOT's)
    banded = any(e.coverage is not None for e in (v.main, v.tpot, v.ttft))
    for col in ("over", "n", "median", "p90", "bias") + (("in 80% interval",) if banded else ()):
        t.add_column(col, justify="right" if col != "over" else "left")
    label = "throughput" if v.kind == "throughput" else "TPOT"
    main_key = "throughput" if v.kind == "throughput" else "tpot"

    def stats(e: ErrorStats) -> list[str]:
        cells = [_abs_pct(e.median_abs_pct_error), _abs_pct(e.p90_abs_pct_error), _pct(e.bias)]
        return cells + ([_abs_pct(e.coverage)] if banded else [])

    t.add_row(f"all rows ({label})", str(_measured(v, main_key)), *stats(v.main))
    if v.kind == "throughput" and v.tpot.rows_compared:  # InferenceX rows also measure TPOT
        t.add_row("all rows (TPOT)", str(_measured(v, "tpot")), *stats(v.tpot))
    if v.ttft.rows_compared:
        t.add_row("all rows (TTFT)", str(_measured(v, "ttft")), *stats(v.ttft))
    for dim, groups in (("engine", v.by_engine), ("gpu", v.by_gpu), ("family", v.by_family)):
        for g, e in groups.items():
            t.add_row(
                f"{dim} {g}",
                str(e.n),
                _abs_pct(e.median_abs_pct_error),
                _abs_pct(e.p90_abs_pct_error),
                _pct(e.bias),
                *([""] if banded else []),
            )
    return t


def _rows(n: int) -> str:
    """``1 row``, ``2 rows``."""
    return f"{n} row" + ("" if n == 1 else "s")


def _by_reason(skipped: Sequence[SkippedEntry]) -> dict[str, list[SkippedEntry]]:
    """Skipped rows grouped by their reason, in file order (``--json`` keeps one entry per row)."""
    groups: dict[str, list[SkippedEntry]] = {}
    for s in skipped:
        groups.setdefault(s.reason, []).append(s)
    return groups


def _lines(rows: list[SkippedEntry]) -> str:
    """``592–604, 610`` for the rows' file lines: consecutive lines as one range."""
    spans: list[list[int]] = []
    for line in sorted(r.line for r in rows):
        if spans and line == spans[-1][1] + 1:
            spans[-1][1] = line
        else:
            spans.append([line, line])
    return ", ".join(str(a) if a == b else f"{a}–{b}" for a, b in spans)


def show_validation(console: Console, v: ValidationResult, rows: bool = True) -> None:
    """Print the per-row table (when ``rows``), the error summary, the skipped rows with their
    reasons, the rows whose tok/s was set aside (with theirs), the rows whose replica is read as
    the engine's launch and the calibration the predictions
    used. With no row predicted, only the skipped rows (the caller then fails with one line)."""
    if v.n > 0:
        if rows:
            console.print(rows_table(v))
        console.print(summary_table(v))
    if v.skipped:
        console.print(f"[bold]{_rows(len(v.skipped))} skipped[/bold]")
        for reason, group in _by_reason(v.skipped).items():
            if len(group) == 1:
                console.print(f"  line {group[0].line} (id {group[0].id}): {reason}", markup=False)
            else:
                console.print(f"  {len(group)} rows, lines {_lines(group)}: {reason}", markup=False)
    if v.throughput_set_aside:
        console.print(
            f"[bold]tok/s of {_rows(len(v.throughput_set_aside))} set aside[/bold] (their TTFT and TPOT are compared)"
        )
        for s in v.throughput_set_aside:
            console.print(f"  line {s.line} (id {s.id}): {s.reason}", markup=False)
    if len(v.layout_read_as_launched) == 1:
        one = v.layout_read_as_launched[0]
        console.print(f"line {one.line} (id {one.id}) {one.reason}", markup=False)
    elif v.layout_read_as_launched:
        reread = sorted(s.line for s in v.layout_read_as_launched)
        console.print(
            f"[bold]{_rows(len(reread))} read as the engine's launch[/bold], between lines {reread[0]} and "
            f"{reread[-1]}: their layout columns do not describe it (each row's reason is in --json)"
        )
    if v.n > 0:
        console.print(f"calibration: {v.calibration}", markup=False)
