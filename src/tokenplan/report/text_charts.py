"""Small terminal charts: no browser, no plotting library — characters on a grid.

``line_chart`` draws series of (x, y) points on a log-x, linear-y grid; ``throughput_chart``
draws the plan's chosen configuration per option (output tok/s per GPU against requests in
flight) from :func:`tokenplan.api.plan.plan_report_data`'s ``throughput`` list.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tokenplan.planning.curves import ThroughputCurve

MARKERS = "●▲■◆○△□◇"


def _col(x: float, lo: float, hi: float, width: int) -> int:
    """Column of ``x`` on a log scale from ``lo`` (column 0) to ``hi`` (column width−1)."""
    if hi <= lo:
        return 0
    return round((math.log(x) - math.log(lo)) / (math.log(hi) - math.log(lo)) * (width - 1))


def _resample(points: list[tuple[float, float]], lo: float, hi: float, width: int) -> dict[int, float]:
    """y per column between the first and last point, interpolated linearly in log x."""
    out: dict[int, float] = {}
    for (x0, y0), (x1, y1) in zip(points, points[1:]):
        c0, c1 = _col(x0, lo, hi, width), _col(x1, lo, hi, width)
        for c in range(c0, c1 + 1):
            t = 0.0 if c1 == c0 else (c - c0) / (c1 - c0)
            out[c] = y0 + t * (y1 - y0)
    if len(points) == 1:
        out[_col(points[0][0], lo, hi, width)] = points[0][1]
    return out


def line_chart(
    series: list[tuple[str, list[tuple[float, float]]]],
    width: int = 60,
    height: int = 10,
    y_label: str = "",
    x_label: str = "",
) -> str:
    """Series (name, [(x > 0, y ≥ 0), …] sorted by x) as text: log x, linear y from 0.

    Each series gets a marker character; where two series share a cell the later one shows.
    Returns the chart, its axis labels and a legend, lines joined by newlines.
    """
    pts = [p for _, s in series for p in s if p[0] > 0]
    if not pts:
        return ""
    lo, hi = min(p[0] for p in pts), max(p[0] for p in pts)
    top = max(p[1] for p in pts) or 1.0
    grid = [[" "] * width for _ in range(height)]
    for i, (_, s) in enumerate(series):
        mark = MARKERS[i % len(MARKERS)]
        for c, y in _resample([p for p in s if p[0] > 0], lo, hi, width).items():
            row = height - 1 - min(height - 1, round(y / top * (height - 1)))
            grid[row][c] = mark
    label_w = len(f"{top:,.0f}")
    lines = []
    for r, cells in enumerate(grid):
        tick = f"{top * (height - 1 - r) / (height - 1):,.0f}" if r in (0, height // 2, height - 1) else ""
        lines.append(f"{tick:>{label_w}} ┤{''.join(cells)}")
    axis = f"{'':>{label_w}} └" + "─" * width
    left, right = f"{lo:,.0f}", f"{hi:,.0f}"
    ticks = f"{'':>{label_w}}  {left}{right:>{width - len(left)}}"
    legend = "  ".join(f"{MARKERS[i % len(MARKERS)]} {name}" for i, (name, _) in enumerate(series))
    head = f"{y_label}" if y_label else ""
    return "\n".join(([head] if head else []) + lines + [axis, ticks, f"{'':>{label_w}}  {x_label}", legend])


def throughput_chart(curves: Sequence[ThroughputCurve], width: int = 60, height: int = 10) -> str:
    """Output tok/s per GPU against requests in flight for each option's chosen configuration
    (the curves of ``plan_report_data(...).throughput`` with ``chosen`` true)."""
    chosen = [c for c in curves if c.chosen]
    series = [
        (
            f"{c.option} {c.layout} ({c.running_max_concurrency:,.0f} running at most: {c.limit_reason})",
            [(p.concurrency, p.output_tok_s_per_gpu) for p in c.points],
        )
        for c in chosen
    ]
    return line_chart(
        series, width, height, y_label="output tok/s per GPU", x_label="requests in flight, all replicas (log scale)"
    )
