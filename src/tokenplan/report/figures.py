"""Plotly figures of the plan report, built from what ``plan_report_data`` returns (the
measurements of ``tokenplan report`` are drawn by :mod:`tokenplan.report.measured_figures`).
Presentation only: every number drawn is read from the plan; nothing is computed here but unit conversions and the roofline's two lines.

plotly is imported inside each function, so importing this module costs nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from tokenplan.errors import import_extra
from tokenplan.units import S_PER_DAY, GiB

if TYPE_CHECKING:
    from tokenplan.planning.curves import MemoryBars
    from tokenplan.planning.results import PlanReportData

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")
# What fills one GPU (MemoryBars, bytes): label, the part, colour.
MEMORY_PARTS: tuple[tuple[str, Callable[[MemoryBars], float], str], ...] = (
    ("weights", lambda m: m.weight_bytes, "#4c72b0"),
    ("KV cache", lambda m: m.kv_bytes, "#55a868"),
    ("per-sequence state", lambda m: m.state_bytes, "#c44e52"),
    ("engine reserve", lambda m: m.reserve_bytes, "#8172b2"),
)


def option_colors(names: list[str]) -> dict[str, str]:
    """A stable colour per option label, in the plan's order."""
    ordered = list(dict.fromkeys(names))
    return {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(ordered)}


def layout(fig, title: str, x: str, y: str, log_x: bool = False, log_y: bool = False) -> None:
    """The report's common look on a plotly ``fig``: ``title``, axis titles ``x``/``y``, log axes where asked."""
    fig.update_layout(
        title=title,
        template="plotly_white",
        height=460,
        margin=dict(l=70, r=20, t=60, b=60),
        legend=dict(font=dict(size=11)),
        hovermode="closest",
    )
    fig.update_xaxes(title_text=x, type="log" if log_x else "-")  # "-": plotly picks linear or category
    fig.update_yaxes(title_text=y, type="log" if log_y else "-")


def throughput_figure(data: PlanReportData):
    """Output tok/s per GPU against requests in flight, one line per option and layout; the
    plan's choice drawn bold, each line's memory-limited maximum marked with a diamond."""
    go = import_extra("plotly.graph_objects", "report")

    curves = data.throughput or ()
    colors = option_colors([c.option for c in curves])
    fig = go.Figure()
    for c in curves:
        xs = [p.concurrency for p in c.points]
        ys = [p.output_tok_s_per_gpu for p in c.points]
        name = f"{c.option} · {c.layout}" + (" (plan)" if c.chosen else "")
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                mode="lines+markers",
                name=name,
                legendgroup=c.option,
                line=dict(color=colors[c.option], width=3.5 if c.chosen else 1.3, dash=None if c.chosen else "dot"),
                marker=dict(size=5),
                opacity=1.0 if c.chosen else 0.6,
                hovertemplate=f"{c.configuration}<br>%{{x:,.0f}} in flight → %{{y:,.0f}} tok/s/GPU<extra>{c.option}</extra>",
            )
        )
        fig.add_trace(
            go.Scatter(
                x=[c.memory_max_concurrency],
                y=[ys[-1]] if ys else [],
                mode="markers",
                showlegend=False,
                legendgroup=c.option,
                marker=dict(
                    symbol="diamond",
                    size=11 if c.chosen else 7,
                    color=colors[c.option],
                    line=dict(color="black", width=1),
                ),
                hovertemplate=(
                    f"memory-limited max: %{{x:,.0f}} in flight ({c.limit_reason})"
                    f"<extra>{c.option} · {c.layout}</extra>"
                ),
            )
        )
    layout(
        fig,
        "Output tok/s per GPU vs requests in flight (◆ = memory-limited maximum)",
        "requests in flight, all replicas (log)",
        "output tok/s per GPU",
        log_x=True,
    )
    return fig


def roofline_figure(data: PlanReportData):
    """Each option's decode-step operating points (FLOP/s per GPU against FLOP per byte)
    under its roofs: ``min(peak FLOP/s, intensity × HBM bytes/s)``."""
    go = import_extra("plotly.graph_objects", "report")

    curves = data.throughput or ()
    colors = option_colors([c.option for c in curves])
    fig = go.Figure()
    intensities = [p.flop_per_byte for c in curves for p in c.points if p.flop_per_byte > 0]
    lo, hi = min(intensities) / 2, max(intensities) * 4
    for c in curves:
        if not c.chosen:
            continue
        ridge = c.peak_flop_per_s / c.hbm_bytes_per_s
        xs = sorted({lo, ridge, hi})
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=[min(c.peak_flop_per_s, x * c.hbm_bytes_per_s) / 1e12 for x in xs],
                mode="lines",
                name=f"{c.option} roofs ({c.hbm_bytes_per_s / 1e12:.1f} TB/s, {c.peak_flop_per_s / 1e15:.2f} PFLOP/s)",
                line=dict(color=colors[c.option], width=2),
                legendgroup=c.option,
                hoverinfo="skip",
            )
        )
    for c in curves:
        pts = c.points
        fig.add_trace(
            go.Scatter(
                x=[p.flop_per_byte for p in pts],
                y=[p.achieved_flop_per_s / 1e12 for p in pts],
                mode="lines+markers" if c.chosen else "markers",
                legendgroup=c.option,
                name=f"{c.option} · {c.layout}" + (" (plan)" if c.chosen else ""),
                showlegend=c.chosen,
                marker=dict(color=colors[c.option], size=7 if c.chosen else 4, opacity=1 if c.chosen else 0.35),
                line=dict(color=colors[c.option], width=1, dash="dot"),
                customdata=[[p.batch_per_replica, p.bottleneck] for p in pts],
                hovertemplate=(
                    f"{c.configuration}<br>batch %{{customdata[0]:,.0f}}/replica, %{{customdata[1]}}"
                    f"<br>%{{x:.1f}} FLOP/B, %{{y:,.0f}} TFLOP/s<extra>{c.option}</extra>"
                ),
            )
        )
    layout(
        fig,
        "Roofline: decode step per GPU, batch 1 → memory limit (lines = bandwidth and compute roofs)",
        "arithmetic intensity, FLOP per byte (log)",
        "achieved TFLOP/s per GPU (log)",
        log_x=True,
        log_y=True,
    )
    return fig


def cost_time_figure(data: PlanReportData):
    """Every evaluated configuration as job days against dollars; the Pareto frontier joined,
    the plan's choice per option starred."""
    go = import_extra("plotly.graph_objects", "report")

    pts = [p for p in data.cost_time or () if p.usd is not None]
    colors = option_colors([p.option for p in data.cost_time or ()])
    fig = go.Figure()
    for option, color in colors.items():
        mine = [p for p in pts if p.option == option]
        fig.add_trace(
            go.Scatter(
                x=[p.wall_s / S_PER_DAY for p in mine],
                y=[p.usd for p in mine],
                mode="markers",
                name=option,
                marker=dict(
                    color=color,
                    size=[14 if p.chosen else 6 for p in mine],
                    symbol=["star" if p.chosen else "circle" for p in mine],
                    opacity=0.75,
                    line=dict(color="black", width=[1 if p.chosen else 0 for p in mine]),
                ),
                text=[p.configuration for p in mine],
                hovertemplate="%{text}<br>%{x:.2f} days, $%{y:,.0f}<extra>" + option + "</extra>",
            )
        )
    front = sorted((p for p in pts if p.pareto), key=lambda p: p.wall_s)
    fig.add_trace(
        go.Scatter(
            x=[p.wall_s / S_PER_DAY for p in front],
            y=[p.usd for p in front],
            mode="lines+markers",
            name="Pareto frontier",
            line=dict(color="black", width=2),
            marker=dict(size=9, symbol="circle-open"),
            text=[f"{p.option}: {p.configuration}" for p in front],
            hovertemplate="%{text}<br>%{x:.2f} days, $%{y:,.0f}<extra>frontier</extra>",
        )
    )
    layout(
        fig,
        "Cost vs time of every configuration that runs (★ = plan's choice)",
        "job wall time, days (log)",
        "job cost, $ (log)",
        log_x=True,
        log_y=True,
    )
    return fig


def memory_figure(data: PlanReportData):
    """Stacked bars: what fills one GPU of each option's chosen configuration (GiB)."""
    go = import_extra("plotly.graph_objects", "report")

    bars = data.memory or ()
    labels = [f"{m.option}<br>batch {m.batch_per_replica:,.0f}/replica" for m in bars]
    fig = go.Figure()
    for name, part, color in MEMORY_PARTS:
        fig.add_trace(
            go.Bar(
                y=labels,
                x=[part(m) / GiB for m in bars],
                name=name,
                orientation="h",
                marker=dict(color=color),
                text=[f"{part(m) / GiB:.1f}" for m in bars],
                textposition="inside",
                hovertemplate=f"{name}: %{{x:.1f}} GiB<extra></extra>",
            )
        )
    fig.update_layout(barmode="stack")
    layout(fig, "Memory per GPU of each plan's choice (GiB)", "GiB per GPU", "")
    fig.update_layout(height=140 + 90 * len(bars))
    return fig


def speedup_figure(data: PlanReportData):
    """Speculative decoding's speed-up over the same configuration without it, by requests in
    flight; where a line crosses 1 speculation stops paying."""
    go = import_extra("plotly.graph_objects", "report")

    curves = data.speedup or ()
    colors = option_colors([c.option for c in curves])
    chosen = {c.configuration for c in (data.throughput or ()) if c.chosen}
    fig = go.Figure()
    for c in curves:
        fig.add_trace(
            go.Scatter(
                x=[p.concurrency for p in c.points],
                y=[p.speedup for p in c.points],
                mode="lines+markers",
                name=f"{c.option} · {c.spec}" + (" (plan)" if c.configuration in chosen else ""),
                line=dict(color=colors[c.option], dash="solid" if c.configuration in chosen else "dash"),
                customdata=[p.batch_per_replica for p in c.points],
                hovertemplate=f"{c.configuration}<br>%{{x:,.0f}} in flight (batch %{{customdata:,.0f}}/replica)"
                f"<br>speed-up ×%{{y:.2f}}<extra>{c.option}</extra>",
            )
        )
    fig.add_hline(
        y=1.0, line=dict(color="grey", dash="dot"), annotation_text="no gain", annotation_position="bottom right"
    )
    layout(
        fig,
        "Speculative decoding: tok/s with ÷ without, same layout and formats",
        "requests in flight, all replicas (log)",
        "speed-up (×)",
        log_x=True,
    )
    return fig


def plan_figures(data: PlanReportData) -> list[tuple[str, str, object]]:
    """(file stem, caption, figure) for each chart the data holds, in report order."""
    out = []
    if data.throughput:
        out.append(("throughput", "Throughput per GPU against concurrency", throughput_figure(data)))
        out.append(("roofline", "Roofline", roofline_figure(data)))
    if data.cost_time:
        out.append(("cost_time", "Cost against time", cost_time_figure(data)))
    if data.memory:
        out.append(("memory", "Memory per GPU", memory_figure(data)))
    if data.speedup:
        out.append(("speedup", "Speculative decoding speed-up", speedup_figure(data)))
    return out
