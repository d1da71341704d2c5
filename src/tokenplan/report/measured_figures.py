"""Plotly figures of what ``tokenplan report`` was given: a bench run's measured throughput (beside
the plan's, where one is given) and latency, and generate runs' measured against planned tok/s.
Presentation only: every number drawn is read from the measurements (and the plan); nothing is
computed here but the division per GPU (or per endpoint).

plotly is imported inside each function, so importing this module costs nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from tokenplan.errors import import_extra
from tokenplan.report.figures import layout, option_colors

if TYPE_CHECKING:
    from tokenplan.api.report import ReportInputs
    from tokenplan.bench_schema import BenchLevel, BenchResult, Latency
    from tokenplan.planning.results import PlanResult
    from tokenplan.run_summary import RunSummary


def bench_divisor(bench: BenchResult) -> tuple[int, str]:
    """What a bench's tok/s is divided by: (its GPUs, "GPU"), or, where the bench did not state
    them (``num_gpus`` null), (its endpoints, "endpoint") — as ``bench --plot`` does."""
    gpus = bench.num_gpus
    return (gpus, "GPU") if gpus else (max(len(bench.endpoints), 1), "endpoint")


def measured_levels(bench: BenchResult) -> list[tuple[BenchLevel, float]]:
    """The levels that measured output tok/s, each with it (tokens/s; a file ``tokenplan report``
    reads has it on every level: :func:`~tokenplan.files.reports.load_bench_json`)."""
    return [(lv, lv.output_tok_s) for lv in bench.levels if lv.output_tok_s is not None]


def bench_throughput_figure(bench: BenchResult, plan: PlanResult | None):
    """Measured output tok/s per GPU at each concurrency level of a bench run; with a plan,
    each option's planned tok/s per GPU as a dashed line and its planned concurrency ◆."""
    go = import_extra("plotly.graph_objects", "report")

    levels, (n, unit) = measured_levels(bench), bench_divisor(bench)
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=[lv.in_flight for lv, _ in levels],  # an open-loop level at what it held
            y=[tok_s / n for _, tok_s in levels],
            mode="lines+markers",
            name=f"measured ({n} {unit}{'s' if n > 1 else ''})",
            line=dict(color="black", width=3),
            marker=dict(size=8),
            customdata=[[achieved(lv), lv.errors] for lv, _ in levels],
            hovertemplate="concurrency %{x:,.0f} (achieved %{customdata[0]:,.1f})<br>%{y:,.0f} tok/s/GPU, "
            "%{customdata[1]} errors<extra>bench</extra>",
        )
    )
    if plan and unit == "GPU":  # the plan's figures are per GPU: no overlay on a per-endpoint axis
        colors = option_colors([o.option for o in plan.options])
        # a bench level's concurrency is its requests in flight over all its endpoints (bench.sweep:
        # workers round-robin over them); the plan's is per endpoint: the same axis takes it times
        # the endpoints benched (one marker per endpoint's share sat 8× left of an 8-server sweep)
        endpoints = max(len(bench.endpoints), 1)
        for o in plan.options:
            c = o.chosen
            if c is None:
                continue
            fig.add_hline(
                y=c.output_tok_s_per_gpu,
                line=dict(color=colors[o.option], dash="dash"),
                annotation_text=f"plan {o.option}: {c.output_tok_s_per_gpu:,.0f} tok/s/GPU",
                annotation_position="top left",
            )
            fig.add_trace(
                go.Scatter(
                    x=[c.concurrency_per_endpoint * endpoints],
                    y=[c.output_tok_s_per_gpu],
                    mode="markers",
                    name=f"plan {o.option} ({c.best})",
                    marker=dict(symbol="diamond", size=11, color=colors[o.option]),
                    hovertemplate=f"planned: %{{x:,.0f}} in flight over the {endpoints} endpoint"
                    f"{'s' if endpoints > 1 else ''} benched ({c.concurrency_per_endpoint:,} each), "
                    "%{y:,.0f} tok/s/GPU<extra></extra>",
                )
            )
    layout(
        fig,
        f"Measured vs planned output tok/s per {unit} · {bench.model}",
        "requests in flight (log)",
        f"output tok/s per {unit}",
        log_x=True,
    )
    return fig


def achieved(level: BenchLevel) -> float:
    """A bench level's achieved concurrency (requests in flight, Little's law), else its target
    concurrency where the file has none (absent or null)."""
    value = level.achieved_concurrency
    return level.concurrency if value is None else value


def bench_latency_figure(bench: BenchResult):
    """TTFT and TPOT (p50 solid, p99 dotted) at each bench concurrency level (seconds)."""
    go = import_extra("plotly.graph_objects", "report")

    fig = go.Figure()
    for name, color, dist in (("TTFT", "#1f77b4", _ttft), ("TPOT", "#d62728", _tpot)):
        for q, dash in (("p50", "solid"), ("p99", "dot")):
            pts = [(lv.in_flight, getattr(d, q)) for lv in bench.levels if (d := dist(lv)) is not None]
            if pts:
                fig.add_trace(
                    go.Scatter(
                        x=[p[0] for p in pts],
                        y=[p[1] for p in pts],
                        mode="lines+markers",
                        name=f"{name} {q}",
                        line=dict(color=color, dash=dash),
                        hovertemplate="%{x:,.0f} in flight: %{y:.3f} s<extra></extra>",
                    )
                )
    layout(fig, "Latency by concurrency (seconds)", "requests in flight (log)", "seconds (log)", log_x=True, log_y=True)
    return fig


def _ttft(level: BenchLevel) -> Latency | None:
    return level.ttft_s


def _tpot(level: BenchLevel) -> Latency | None:
    return level.tpot_s


def runs_figure(runs: Sequence[RunSummary], plan: PlanResult | None):
    """Per generate run, measured output tok/s beside the plan's (the run's own plan figure,
    else the plan file's recommended throughput)."""
    go = import_extra("plotly.graph_objects", "report")

    names = [r.run_dir or r.model for r in runs]
    planned_default = plan.recommended.output_tok_s_total if plan and plan.recommended else None
    planned = [r.plan_output_tok_s or planned_default for r in runs]
    fig = go.Figure()
    fig.add_trace(
        go.Bar(
            x=names,
            y=[r.output_tok_s for r in runs],
            name="measured",
            marker=dict(color="black"),
            hovertemplate="%{x}: %{y:,.0f} tok/s measured<extra></extra>",
        )
    )
    if any(p is not None for p in planned):
        fig.add_trace(
            go.Bar(
                x=names,
                y=planned,  # None: no bar (a 0 bar read as a plan of nothing)
                name="planned",
                marker=dict(color="#1f77b4"),
                hovertemplate="%{x}: %{y:,.0f} tok/s planned<extra></extra>",
            )
        )
    fig.update_layout(barmode="group")
    layout(fig, "generate runs: output tok/s, measured and planned", "run directory", "output tok/s (all GPUs)")
    return fig


def measurement_figures(inputs: ReportInputs) -> list[tuple[str, str, object]]:
    """(file stem, caption, figure) for what ``tokenplan report`` was given."""
    out = []
    if inputs.bench:
        out.append(("bench_throughput", "Measured throughput", bench_throughput_figure(inputs.bench, inputs.plan)))
        out.append(("bench_latency", "Measured latency", bench_latency_figure(inputs.bench)))
    if inputs.runs:
        out.append(("runs", "generate runs", runs_figure(inputs.runs, inputs.plan)))
    return out
