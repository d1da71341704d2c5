"""The plan report's charts as PNG files (``tokenplan plan --png DIR``), drawn with matplotlib
from the same typed data as the HTML report (:func:`tokenplan.api.plan.plan_report_data`).

matplotlib is imported inside ``write_plan_pngs`` with the non-interactive Agg backend, so
nothing needs a display and importing this module costs nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from tokenplan.errors import import_extra
from tokenplan.report.figures import MEMORY_PARTS, option_colors
from tokenplan.units import S_PER_DAY, GiB

if TYPE_CHECKING:
    from tokenplan.planning.results import PlanReportData

DPI = 120


def _throughput(ax, data: PlanReportData) -> None:
    curves = data.throughput or ()
    colors = option_colors([c.option for c in curves])
    for c in curves:
        xs = [p.concurrency for p in c.points]
        ys = [p.output_tok_s_per_gpu for p in c.points]
        ax.plot(
            xs,
            ys,
            color=colors[c.option],
            lw=3 if c.chosen else 1,
            ls="-" if c.chosen else ":",
            alpha=1 if c.chosen else 0.6,
            marker="o",
            ms=3,
            label=f"{c.option} · {c.layout}" + (" (plan)" if c.chosen else ""),
        )
        if ys:
            ax.plot(
                [c.memory_max_concurrency],
                [ys[-1]],
                marker="D",
                ms=8 if c.chosen else 5,
                color=colors[c.option],
                mec="black",
            )
    ax.set(
        xscale="log",
        xlabel="requests in flight, all replicas (log)",
        ylabel="output tok/s per GPU",
        title="Output tok/s per GPU vs requests in flight (◆ = memory-limited maximum)",
    )


def _roofline(ax, data: PlanReportData) -> None:
    curves = data.throughput or ()
    colors = option_colors([c.option for c in curves])
    xs_all = [p.flop_per_byte for c in curves for p in c.points if p.flop_per_byte > 0]
    lo, hi = min(xs_all) / 2, max(xs_all) * 4
    for c in curves:
        col = colors[c.option]
        pts = c.points
        if c.chosen:
            ridge = c.peak_flop_per_s / c.hbm_bytes_per_s
            xs = sorted({lo, ridge, hi})
            ax.plot(
                xs,
                [min(c.peak_flop_per_s, x * c.hbm_bytes_per_s) / 1e12 for x in xs],
                color=col,
                lw=2,
                label=f"{c.option} roofs",
            )
        ax.plot(
            [p.flop_per_byte for p in pts],
            [p.achieved_flop_per_s / 1e12 for p in pts],
            ls=":" if c.chosen else "none",
            marker="o",
            ms=5 if c.chosen else 3,
            color=col,
            alpha=1 if c.chosen else 0.35,
            label=f"{c.option} · {c.layout} (plan)" if c.chosen else None,
        )
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="arithmetic intensity, FLOP per byte (log)",
        ylabel="achieved TFLOP/s per GPU (log)",
        title="Roofline: decode step per GPU, batch 1 → memory limit",
    )


def _cost_time(ax, data: PlanReportData) -> None:
    pts = [p for p in data.cost_time or () if p.usd is not None]
    colors = option_colors([p.option for p in data.cost_time or ()])
    for option, col in colors.items():
        mine = [p for p in pts if p.option == option]
        ax.scatter(
            [p.wall_s / S_PER_DAY for p in mine], [p.usd for p in mine], s=12, color=col, alpha=0.6, label=option
        )
        star = [p for p in mine if p.chosen]
        ax.scatter(
            [p.wall_s / S_PER_DAY for p in star],
            [p.usd for p in star],
            s=220,
            marker="*",
            color=col,
            edgecolors="black",
            zorder=3,
        )
    front = sorted((p for p in pts if p.pareto), key=lambda p: p.wall_s)
    ax.plot(
        [p.wall_s / S_PER_DAY for p in front],
        [p.usd for p in front],
        color="black",
        lw=1.5,
        marker="o",
        mfc="none",
        label="Pareto frontier",
    )
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="job wall time, days (log)",
        ylabel="job cost, $ (log)",
        title="Cost vs time of every configuration that runs (★ = plan's choice)",
    )


def _memory(ax, data: PlanReportData) -> None:
    bars = data.memory or ()
    labels = [f"{m.option}\nbatch {m.batch_per_replica:,.0f}/replica" for m in bars]
    left = [0.0] * len(bars)
    for name, part, col in MEMORY_PARTS:
        widths = [part(m) / GiB for m in bars]
        ax.barh(labels, widths, left=left, color=col, label=name)
        for i, w in enumerate(widths):
            if w > 3:
                ax.text(left[i] + w / 2, i, f"{w:.1f}", ha="center", va="center", color="white", fontsize=9)
        left = [a + b for a, b in zip(left, widths)]
    ax.invert_yaxis()
    ax.set(xlabel="GiB per GPU", title="Memory per GPU of each plan's choice (GiB)")


def _speedup(ax, data: PlanReportData) -> None:
    curves = data.speedup or ()
    colors = option_colors([c.option for c in curves])
    chosen = {c.configuration for c in (data.throughput or ()) if c.chosen}
    for c in curves:
        ax.plot(
            [p.concurrency for p in c.points],
            [p.speedup for p in c.points],
            marker="o",
            ms=3,
            color=colors[c.option],
            ls="-" if c.configuration in chosen else "--",
            label=f"{c.option} · {c.spec}",
        )
    ax.axhline(1.0, color="grey", ls=":")
    ax.set(
        xscale="log",
        xlabel="requests in flight, all replicas (log)",
        ylabel="speed-up (×)",
        title="Speculative decoding: tok/s with ÷ without",
    )


DRAWERS = (
    ("throughput", _throughput),
    ("roofline", _roofline),
    ("cost_time", _cost_time),
    ("memory", _memory),
    ("speedup", _speedup),
)
# Each chart's data in PlanReportData (None or empty: the chart is not drawn).
SOURCE: dict[str, Callable[[PlanReportData], tuple | None]] = {
    "throughput": lambda d: d.throughput,
    "roofline": lambda d: d.throughput,
    "cost_time": lambda d: d.cost_time,
    "memory": lambda d: d.memory,
    "speedup": lambda d: d.speedup,
}


def write_plan_pngs(data: PlanReportData, folder: str | Path) -> list[Path]:
    """One PNG per chart the data holds (``throughput.png``, ``roofline.png``,
    ``cost_time.png``, ``memory.png``, ``speedup.png``) in ``folder`` (created); returns the paths."""
    import_extra("matplotlib", "report").use("Agg")
    plt = import_extra("matplotlib.pyplot", "report")

    out_dir = Path(folder)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for stem, draw in DRAWERS:
        if not SOURCE[stem](data):
            continue
        height = 2.0 + 1.1 * len(data.memory or ()) if stem == "memory" else 5.5
        fig, ax = plt.subplots(figsize=(10, height))
        draw(ax, data)
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize=7, loc="best")
        fig.tight_layout()
        path = out_dir / f"{stem}.png"
        fig.savefig(path, dpi=DPI)
        plt.close(fig)
        written.append(path)
    return written
