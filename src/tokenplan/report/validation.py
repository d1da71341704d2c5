"""What ``tokenplan validate`` prints: every measured row beside the planner's prediction, then
the error |predicted/measured − 1| overall and by engine, GPU and model family, the rows set
aside with their reason, and the calibration used. Reads ``validation_dict``'s JSON."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{x * 100:+.0f}%"


def _abs_pct(x: float | None) -> str:
    return "–" if x is None else f"{x * 100:.0f}%"


def _spread(lengths: str) -> str:
    """`` ~sharegpt`` after the mean lengths where they spread as a named set, else nothing
    (fixed lengths, and InferenceX's narrow U[0.8L, L] that every row of its file has)."""
    return "" if lengths == "fixed" or lengths.startswith("U[") else f" ~{lengths}"


def rows_table(d: dict) -> Table:
    """One row per measured point: its setting, then predicted, measured and signed error per
    metric (TPOT and TTFT in ms for serving rows, output tok/s per GPU for throughput rows, and
    TPOT and TTFT too where throughput rows measure them; "–" where a row does not, "set aside"
    where its tok/s was set aside) and, with error bands, the 80 % interval and whether the
    measurement lies in it."""
    serving = d["kind"] == "serving"
    t = Table(title=f"{d['n']} rows predicted", show_lines=False)
    for col in ("line", "engine", "model", "gpu", "layout", "w", "isl/osl", "conc"):
        t.add_column(col)
    latencies = [("tpot_ms", "tpot_error", "TPOT ms"), ("ttft_ms", "ttft_error", "TTFT ms")]
    metrics = latencies if serving else [("output_tok_s_per_gpu", "error", "tok/s/GPU")]
    if not serving and any("tpot_error" in r for r in d["rows"]):  # InferenceX rows also measure TPOT/TTFT
        metrics += latencies
    banded = any(f"{name}_low" in r for r in d["rows"] for name, _, _ in metrics)
    for _, _, label in metrics:
        t.add_column(f"pred {label}", justify="right")
        t.add_column(f"meas {label}", justify="right")
        t.add_column("err", justify="right")
        if banded:
            t.add_column("80% interval", justify="right")
    aside = {s["id"] for s in d.get("throughput_set_aside", ())}
    for r in d["rows"]:
        conc = "max" if r["concurrency"] is None else f"{r['concurrency']:g}"
        cells = [
            str(r["line"]),
            r["engine"],
            r["model"],
            r["gpu"],
            r["layout"],
            r["weight_dtype"],
            f"{r['isl']:g}/{r['osl']:g}" + _spread(r.get("lengths", "fixed")),
            conc,
        ]
        for name, err, _ in metrics:
            cells += (
                [f"{r['predicted_' + name]:,.1f}", f"{r['measured_' + name]:,.1f}", _pct(r[err])]
                if err in r
                else ["–", "set aside" if r["id"] in aside else "–", "–"]
            )
            if banded:
                cells.append(_interval(r, name, err.replace("error", "inside")))
        t.add_row(*cells)
    return t


def _interval(r: dict, name: str, inside_key: str) -> str:
    """``1,234–2,345 in`` (or ``out``): the row's 80 % interval on the figure and whether the
    measurement lies inside; "–" where the row has none."""
    if f"{name}_low" not in r:
        return "–"
    return f"{r[name + '_low']:,.1f}–{r[name + '_high']:,.1f} " + ("in" if r[inside_key] else "[bold]out[/bold]")


def _measured(d: dict, error_key: str) -> int:
    """Rows that measured the metric whose error is ``error_key`` (InferenceX rows without
    latencies, or whose tok/s was set aside, lack one of them)."""
    return sum(error_key in r for r in d["rows"])


def summary_table(d: dict) -> Table:
    """Median, p90 and bias of the error over all rows (per metric), then per engine, GPU, family;
    with error bands, the share of rows whose measurement lies in its 80 % interval (per metric)."""
    t = Table(title="error |predicted/measured − 1|")
    banded = d.get("coverage") is not None
    for col in ("over", "n", "median", "p90", "bias") + (("in 80% interval",) if banded else ()):
        t.add_column(col, justify="right" if col != "over" else "left")
    label = "throughput" if d["kind"] == "throughput" else "TPOT"
    main_key = "error" if d["kind"] == "throughput" else "tpot_error"

    def stats(prefix: str) -> list[str]:
        cells = [
            _abs_pct(d[prefix + "median_abs_pct_error"]),
            _abs_pct(d[prefix + "p90_abs_pct_error"]),
            _pct(d[prefix + "bias"]),
        ]
        return cells + ([_abs_pct(d.get(prefix + "coverage"))] if banded else [])

    t.add_row(f"all rows ({label})", str(_measured(d, main_key)), *stats(""))
    if d["kind"] == "throughput" and "tpot_median_abs_pct_error" in d:  # InferenceX rows also measure TPOT
        t.add_row("all rows (TPOT)", str(_measured(d, "tpot_error")), *stats("tpot_"))
    if "ttft_median_abs_pct_error" in d:
        t.add_row("all rows (TTFT)", str(_measured(d, "ttft_error")), *stats("ttft_"))
    for dim in ("engine", "gpu", "family"):
        for g, e in d[f"by_{dim}"].items():
            t.add_row(
                f"{dim} {g}",
                str(e["n"]),
                _abs_pct(e["median_abs_pct_error"]),
                _abs_pct(e["p90_abs_pct_error"]),
                _pct(e["bias"]),
                *([""] if banded else []),
            )
    return t


def _rows(n: int) -> str:
    """``1 row``, ``2 rows``."""
    return f"{n} row" + ("" if n == 1 else "s")


def _by_reason(skipped: list[dict]) -> dict[str, list[dict]]:
    """Skipped rows grouped by their reason, in file order (``--json`` keeps one entry per row)."""
    groups: dict[str, list[dict]] = {}
    for s in skipped:
        groups.setdefault(s["reason"], []).append(s)
    return groups


def _lines(rows: list[dict]) -> str:
    """``592–604, 610`` for the rows' file lines: consecutive lines as one range."""
    spans: list[list[int]] = []
    for line in sorted(r["line"] for r in rows):
        if spans and line == spans[-1][1] + 1:
            spans[-1][1] = line
        else:
            spans.append([line, line])
    return ", ".join(str(a) if a == b else f"{a}–{b}" for a, b in spans)


def show_validation(console: Console, d: dict, rows: bool = True) -> None:
    """Print the per-row table (when ``rows``), the error summary, the skipped rows with their
    reasons, the rows whose tok/s was set aside (with theirs) and the calibration the predictions
    used. With no row predicted, only the skipped rows (the caller then fails with one line)."""
    if d["n"] > 0:
        if rows:
            console.print(rows_table(d))
        console.print(summary_table(d))
    if d["skipped"]:
        console.print(f"[bold]{_rows(len(d['skipped']))} skipped[/bold]")
        for reason, group in _by_reason(d["skipped"]).items():
            if len(group) == 1:
                console.print(f"  line {group[0]['line']} (id {group[0]['id']}): {reason}", markup=False)
            else:
                console.print(f"  {len(group)} rows, lines {_lines(group)}: {reason}", markup=False)
    if d.get("throughput_set_aside"):
        console.print(
            f"[bold]tok/s of {_rows(len(d['throughput_set_aside']))} set aside[/bold] (their TTFT and "
            "TPOT are compared)"
        )
        for s in d["throughput_set_aside"]:
            console.print(f"  line {s['line']} (id {s['id']}): {s['reason']}", markup=False)
    if d["n"] > 0:
        console.print(f"calibration: {d['calibration']}", markup=False)
