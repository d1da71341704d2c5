"""The bench PNG: output tok/s against concurrency, and tok/s per user against tok/s per GPU.

Tok/s per user is the speed one stream sees, ``1 / TPOT`` (mean TPOT; for non-streamed runs
``output tok/s / achieved concurrency``). Tok/s per GPU is the level's output tok/s over the
bench's ``num_gpus`` (over the endpoints when the GPU count is not given). The Pareto frontier
joins the levels no other level beats on both axes. matplotlib is imported inside the function.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from tokenplan.errors import import_extra

if TYPE_CHECKING:
    from tokenplan.bench_schema import BenchLevel, BenchResult


def per_user_tok_s(level: BenchLevel) -> float | None:
    """Output tokens/s one request sees at this level (see the module docstring); None where
    neither TPOT nor output tok/s over achieved concurrency was measured."""
    tpot = level.tpot_s.mean if level.tpot_s else None
    if tpot:
        return 1.0 / tpot
    achieved, tok_s = level.achieved_concurrency, level.output_tok_s
    return tok_s / achieved if achieved and tok_s is not None else None


def pareto_front(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The points not beaten on both coordinates by another (larger is better on both),
    sorted by the first coordinate."""
    front = [p for p in points if not any(q != p and q[0] >= p[0] and q[1] >= p[1] for q in points)]
    return sorted(set(front))


def write_bench_plot(data: BenchResult, path: str | Path) -> Path:
    """Draw the two panels of a bench sweep ``data`` into the PNG ``path``; returns the path."""
    import_extra("matplotlib", "report").use("Agg")
    plt = import_extra("matplotlib.pyplot", "report")

    levels = [lv for lv in data.levels if lv.requests]
    gpus = data.num_gpus
    divisor, unit = (gpus, "GPU") if gpus else (len(data.endpoints), "endpoint")
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.4))
    conc = [lv.in_flight for lv in levels]  # an open-loop level at what it held, not what it sent
    left.plot(conc, [lv.output_tok_s for lv in levels], "o-", label="bench (usage tokens / window)")
    server = [(lv.in_flight, lv.server.output_tok_s) for lv in levels if lv.server and lv.server.output_tok_s]
    if server:
        left.plot(*zip(*server), "x--", label="server /metrics counter")
    cap = data.cap.flattens_at_concurrency if data.cap else None
    if cap:
        left.axvline(cap, color="grey", linestyle=":", label=f"flattens at {cap}")
    left.set_xscale("log", base=2)
    left.set_xlabel("concurrency (requests in flight)")
    left.set_ylabel("output tokens/s")
    left.set_title(f"{data.model}: throughput")
    left.grid(True, alpha=0.3)
    left.legend(fontsize=8)
    points = [
        (lv.output_tok_s / divisor, u, f"c={lv.concurrency}" if lv.open_loop_rate is None else lv.label)
        for lv in levels
        if (u := per_user_tok_s(lv)) is not None and lv.output_tok_s is not None
    ]
    if points:
        right.scatter([p[0] for p in points], [p[1] for p in points])
        for x, y, c in points:
            right.annotate(c, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
        front = pareto_front([(x, y) for x, y, _ in points])
        right.plot([p[0] for p in front], [p[1] for p in front], "-", alpha=0.6, label="Pareto frontier")
        right.legend(fontsize=8)
    right.set_xlabel(f"output tokens/s per {unit}")
    right.set_ylabel("output tokens/s per user (1 / TPOT)")
    right.set_title("per-user speed vs per-" + unit + " throughput")
    right.grid(True, alpha=0.3)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out
