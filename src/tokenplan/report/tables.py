"""Rich renderings of the API results: the typed results ``plan``, ``predict`` and ``memory`` return
(or a plan file read back into them, :func:`tokenplan.files.reports.load_plan`)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from tokenplan.report.fold import FoldingTable
from tokenplan.units import (
    S_PER_DAY,
    GiB,
    KiB,
    MiB,
    count_text,
    duration_words,
    kv_tokens_text,
    output_tokens_text,
    usd_text,
)

if TYPE_CHECKING:  # the types only: importing them at run time would load the planner for a table
    from tokenplan.job.results import Prediction
    from tokenplan.planning.results import (
        ChosenConfiguration,
        PlanOption,
        PlanReportData,
        PlanResult,
        Provisioning,
        Recommended,
    )
    from tokenplan.results import Bands, Interval

MOVED_PREFIX = "calibration "  # how files.calibration.moved_lines starts each line of a plan's answer

ENGINE_NAMES = {"sglang": "SGLang", "vllm": "vLLM", "trtllm": "TensorRT-LLM"}


def _money(x: float | None, digits: int | None = None) -> str:
    """Dollars: ``digits`` decimals, or by default :func:`~tokenplan.units.usd_text` (cents below $100)."""
    if x is None:
        return "—"
    return usd_text(x) if digits is None else f"${x:,.{digits}f}"


def band_of(bands: Bands | None, figure: str) -> Interval | None:
    """The 80 % interval on ``figure`` (a field name such as ``"wall_days"``), or None."""
    return None if bands is None else bands.of(figure)


def with_band(value: float, band: Interval | None, fmt: str, unit: str = "") -> str:
    """``value unit (low–high)``: the figure and its 80 % interval where it has one."""
    text = format(value, fmt) + unit
    if band:
        text += f" ({format(band.low, fmt)}–{format(band.high, fmt)})"
    return text


def ms_with_band(value_ms: float, band: Interval | None) -> str:
    """A latency in ms with its 80 % interval, in seconds from 10 s up (a queued TTFT of minutes
    reads ``413.4 s (…)``, not ``413,410 ms``)."""
    if value_ms < 10_000:
        return with_band(value_ms, band, ",.0f", " ms")
    seconds = None if band is None else replace(band, low=band.low / 1e3, high=band.high / 1e3)
    return with_band(value_ms / 1e3, seconds, ",.1f", " s")


def _money_band(value: float | None, band: Interval | None) -> str:
    """Dollars with their 80 % interval, in cents where the figure is under $100 (as :func:`_money`)."""
    if value is None:
        return "—"
    digits = 0 if abs(value) >= 100 else 2
    return "$" + with_band(value, band, f",.{digits}f").replace("(", "($").replace("–", "–$")


def first_rejection(option: PlanOption) -> str:
    """The first reason configurations of ``option`` were rejected ("" when none was)."""
    return next(iter(option.rejected), "")


def plan_table(result: PlanResult) -> FoldingTable:
    """The comparison table of ``tokenplan plan``: one row per hardware option (side by side
    where the terminal is wide enough to keep every number whole, else stacked per option)."""
    # figures carry their 80 % interval in brackets where the error-band table ships
    unit, scale = wall_unit(o.chosen.wall_days for o in result.options if o.chosen is not None)
    header = ["option", "best layout & settings", "output tok/s", "tok/s/GPU", unit, "$", "$/Mtok", "bottleneck"]
    rows: list[list[str | Text]] = []
    for o in result.options:
        c = o.chosen
        if c is None:
            rows.append([o.option, Text("nothing runs", style="red"), "—", "—", "—", "—", "—", first_rejection(o)])
            continue
        rows.append(
            [
                o.option,
                c.best,
                with_band(c.output_tok_s_total, band_of(c.bands, "output_tok_s_total"), ",.0f"),
                f"{c.output_tok_s_per_gpu:,.0f}",
                wall_text(c.wall_days, band_of(c.bands, "wall_days"), scale),
                _money_band(c.usd, band_of(c.bands, "usd")),
                _money(c.usd_per_mtok, 3),
                c.bottleneck,
            ]
        )
    return FoldingTable(
        f"{result.model} · {count_text(result.job.samples, 'sample')} · engine {result.engine}",
        header,
        rows,
        right=(2, 3, 4, 5, 6),
    )


def wall_unit(days: Iterable[float]) -> tuple[str, float]:
    """(column header, figures per day) of a wall-time column: days where the longest job takes a
    tenth of a day or more, as the answer's sentences say it (``days_words``: a column in hours
    beside "0.41 days" read as another figure, a new-user pass), else hours, minutes, or seconds
    under a minute (a 4-second job read ``0.0000501 (0.0000372–0.0000753)`` days beside its "4.33 s")."""
    longest = max((d for d in days if d > 0), default=0.0)
    if longest >= 0.1 or longest == 0.0:  # nothing runs: the rows show "—" under the plan's usual unit
        return "days", 1.0
    for unit, per_day in (("hours", 24.0), ("min", 1440.0)):
        if longest * per_day >= 1.0:
            return unit, per_day
    return "s", float(S_PER_DAY)


def wall_text(days: float, band: Interval | None, scale: float) -> str:
    """A wall time in the column's unit (``scale`` figures per day, :func:`wall_unit`) with its
    80 % interval, in :func:`days_format`'s digits."""
    value = days * scale
    scaled = None if band is None else replace(band, low=band.low * scale, high=band.high * scale)
    return with_band(value, scaled, days_format(value))


def days_format(days: float) -> str:
    """The format spec of a days figure: two decimals from a tenth of a day up, else three
    significant digits written out (``0.00913``, ``0.0000645``), never ``6.45e-05`` (a new-user
    pass read the exponent as noise beside ``0.41``)."""
    if not days > 0 or days >= 0.1:
        return ".2f"
    return f".{2 - math.floor(math.log10(days))}f"


def provisioning_rows(prov: Provisioning) -> tuple[str, list[str], list[list[str]]]:
    """(title, header, rows) of the provisioning answer (``plan``'s ``provisioning``): per GPU
    type, the fewest GPUs that meet the deadline (and budget), or with a budget alone the count
    that finishes soonest within it, and the job at that count. Shared by
    the terminal table and the HTML report."""
    limits = []
    if prov.deadline_days is not None:
        limits.append(f"deadline {duration_words(prov.deadline_days * S_PER_DAY)}")
    if prov.budget_usd is not None:
        limits.append(f"budget {usd_text(prov.budget_usd)}")
    rows = []
    unit, scale = wall_unit(r.wall_days or 0.0 for r in prov.options if r.meets)
    for r in prov.options:
        if not r.meets:
            rows.append([r.gpu, "none", "—", "—", "—", str(r.why)])
            continue
        nodes = f" ({r.nodes} × {r.unit_gpus})" if r.unit_gpus > 1 else ""
        rows.append(
            [
                r.gpu,
                f"{r.gpus}{nodes}",
                wall_text(r.wall_days or 0.0, None, scale),
                _money(r.usd),
                _money(r.usd_per_gpu_hour, 2),
                str(r.configuration),
            ]
        )
    title = "Fewest GPUs" if prov.deadline_days is not None else "Soonest within the budget"
    return (
        f"{title} · {' · '.join(limits)}",
        ["GPU", "GPUs (nodes × GPUs)", unit, "$", "$/GPU-h", "best layout & settings at that count"],
        rows,
    )


def current_table(result: PlanResult) -> FoldingTable | None:
    """``plan --current``: the walk from the setup run now to the recommended one, one row per
    change with its steady-state tok/s and gain (None when the plan has no ``--current``)."""
    cur = result.current
    if not cur:
        return None
    rows: list[list[str | Text]] = []
    for r in cur.walk:
        rate = "—" if r.output_tok_s_total is None else f"{r.output_tok_s_total:,.0f}"
        gain = "" if r.gain is None else f"×{r.gain:.2f}"
        batch = "" if r.batch_per_replica is None else f"{r.batch_per_replica:,.0f}"
        rows.append([r.change, r.layout, rate, gain, batch, r.limited_by])
    if cur.measured_tok_s is not None:
        # the walk starts at the setup that reproduces the measurement (planning.current): its
        # acceptance, else its running cap; the prediction as given first, then the measurement
        reproduced = (
            f"τ={cur.implied_tau:.2f}"
            if cur.implied_tau is not None
            else (f"a running cap of {cur.implied_running_cap}" if cur.implied_running_cap is not None else None)
        )
        measured: list[str | Text] = [
            "measured" if reproduced is None else f"measured ({reproduced} reproduces it)",
            "",
            f"{cur.measured_tok_s:,.0f}",
            f"×{cur.measured_tok_s / cur.predicted_tok_s:.2f}",
            "",
            "your measurement",
        ]
        if reproduced is not None and cur.walk:
            start = cur.walk[0]
            as_given = f"{cur.batch_per_replica:,.0f}" if cur.implied_tau is None else rows[0][4]
            limited = cur.batch_limit_reason if cur.implied_tau is None else start.limited_by
            rows[0] = [start.change, start.layout, f"{cur.predicted_tok_s:,.0f}", "", as_given, limited]
        rows.insert(1, measured)
    return FoldingTable(
        f"From your setup to the recommended one · {cur.option}",
        ["step", "layout", "tok/s", "gain", "batch/replica", "capped by"],
        rows,
        right=(2, 3, 4),
    )


def provisioning_table(result: PlanResult) -> FoldingTable | None:
    """The provisioning answer as a table (None when the plan has no deadline or budget)."""
    if not result.provisioning:
        return None
    title, head, rows = provisioning_rows(result.provisioning)
    return FoldingTable(title, head, rows, right=(1, 2, 3, 4))


def calibration_lines(result: PlanResult) -> list[str]:
    """The answer's lines that say what a ``--calibration`` profile moves (they come first in the
    answer and start with ``calibration ``: ``files.calibration.moved_lines``)."""
    return [line for line in result.answer if line.startswith(MOVED_PREFIX)]


def recommended_choice(result: PlanResult) -> tuple[Recommended, ChosenConfiguration] | None:
    """The recommended option and its chosen configuration (None when nothing is recommended)."""
    rec = result.recommended
    if rec is None:
        return None
    best = next(o.chosen for o in result.options if o.option == rec.option)
    assert best is not None, f"the recommended option {rec.option} has no chosen configuration"
    return rec, best


def not_searched(result: PlanResult) -> list[str]:
    """The formats no option searched, each once, in the order the options give them."""
    return list(dict.fromkeys(n for o in result.options for n in o.not_searched))


def _startup_words(startup_s: float) -> str:
    """What the days and dollars count before the first request (``plan --startup``)."""
    if not startup_s:
        return "; days and $ count no server start-up"
    return f"; days and $ include {duration_words(startup_s)} of server start-up (--startup)"


# How the launch commands' running caps read under attention DP (engines/sglang.py
# servers_per_replica: SGLang divides the replica's cap per rank; vLLM's and TensorRT-LLM's are each rank's).
DP_ATTENTION_CAPS = (
    "with attention DP, SGLang's --max-running-requests is the replica's cap, split over its attention-DP "
    "ranks; vLLM's --max-num-seqs and TensorRT-LLM's max_batch_size are each rank's"
)


def plan_details(result: PlanResult) -> Group:
    """Assumptions, answer sentences, launch commands and rejections under the table."""
    job = result.job
    parts: list = [
        Text(
            f"Job: ISL {job.isl}; OSL {job.osl} → {output_tokens_text(job.output_tokens)} output "
            f"tokens{_startup_words(job.startup_s)}. Efficiency: {result.efficiency}.",
            style="dim",
        )
    ]
    parts.append(Text(""))
    for line in result.answer:
        if not line.startswith(MOVED_PREFIX):  # printed above the table (calibration_lines)
            parts.append(Text("• " + line))
    for o in result.options:  # a band widened where the fit measured nothing alike says why
        band = o.chosen.bands.error_band if o.chosen is not None and o.chosen.bands is not None else None
        if band is not None and band.outside_measured_regime:
            parts.append(
                Text(f"• {o.option}: band widened, outside the measured regime: {band.outside_measured_regime}.")
            )
    choice = recommended_choice(result)
    if choice:
        rec, best = choice
        parts.append(
            Text(
                f"\nLaunch ({rec.option}) and drive it with {best.concurrency_per_endpoint:,} "
                f"requests in flight per server (the running limit plus 10 %, at least 8 more, so a finished "
                f"request is replaced at once; tokenplan generate --plan plan.json uses it); its memory "
                f"setting leaves the KV pool room for the batch at the 90th-percentile running context, "
                f"more than the mean context the figures above assume:",
                style="bold",
            )
        )
        engine, command = next(iter(best.launch.items()))  # the planned engine's, first
        parts.append(Text(f"{ENGINE_NAMES.get(engine, engine)}:\n{command}"))
        if "DP-attn" in best.layout:  # the caps read differently per engine (a new-user pass)
            parts.append(Text(f"({DP_ATTENTION_CAPS})", style="dim"))
        others = [ENGINE_NAMES.get(e, e) for e in list(best.launch)[1:]]
        if others:
            parts.append(
                Text(
                    f"(--json also gives the {' and '.join(others)} "
                    + ("commands, each" if len(others) > 1 else "command")
                    + " with its own memory setting sized so its KV pool holds the batch at the 90th-percentile "
                    f"running context; plan with --engine to get {'their' if len(others) > 1 else 'its'} figures)",
                    style="dim",
                )
            )
        if best.warnings:
            parts.append(Text("Warnings: " + "; ".join(best.warnings), style="yellow"))
    for o in result.options:
        if o.rejected:
            reasons = sorted(o.rejected.items(), key=lambda kv: -kv[1])[:4]
            shown = "; ".join(f"{r} ({count_text(n, 'configuration')})" for r, n in reasons)
            if len(o.rejected) > len(reasons):  # the rest were left out with no word (a new-user pass)
                shown += f"; {len(o.rejected) - len(reasons)} more reasons in --json (options[].rejected)"
            parts.append(Text(f"Rejected on {o.option}: {shown}", style="dim"))
    notes = not_searched(result)
    if notes:
        parts.append(Text("Not searched: " + "; ".join(notes) + ".", style="dim"))
    return Group(*parts)


def throughput_text(data: PlanReportData) -> Text:
    """The terminal chart under the plan table: tok/s per GPU against requests in flight for
    each option's choice (``plan_report_data``'s ``throughput``)."""
    from tokenplan.report.text_charts import throughput_chart

    return Text(throughput_chart(data.throughput or ()), style="cyan", no_wrap=True)


def predict_table(p: Prediction) -> Table:
    """Key/value table of one prediction (the factors' source is printed under it: ``efficiency_line``)."""
    t = Table(show_header=False)
    t.add_column("quantity")
    t.add_column("value", justify="right")
    slot = ", from a free slot" if p.ttft_from_free_slot else ""  # --concurrency max: no wait for it
    rows = [
        ("layout", p.layout),
        ("weights / KV", f"{p.weight_dtype} / {p.kv_dtype}"),
        ("speculative", p.spec),
        ("output tok/s (total)", with_band(p.output_tok_s_total, band_of(p.bands, "output_tok_s_total"), ",.0f")),
        ("output tok/s per GPU", with_band(p.output_tok_s_per_gpu, band_of(p.bands, "output_tok_s_per_gpu"), ",.0f")),
        # The roofline is one token per sequence and step: with speculative decoding a step can
        # yield more (τ per step), so the figure is a bound only without it.
        (
            "roofline bound tok/s" if p.spec in (None, "none") else "roofline tok/s without speculation",
            f"{p.roofline_output_tok_s_total:,.0f}",
        ),
        ("running batch / replica", f"{p.batch_per_replica:,.0f} ({p.batch_limit_reason})"),
        ("max concurrency", f"{p.max_concurrency:,.0f}"),
        ("decode step", f"{p.step_time_ms:.2f} ms"),
        ("TPOT", with_band(p.tpot_ms, band_of(p.bands, "tpot_ms"), ".2f", " ms")),
        ("TTFT mean" + slot, ms_with_band(p.ttft_ms, band_of(p.bands, "ttft_ms"))),
        ("TTFT median" + slot, ms_with_band(p.ttft_median_ms, band_of(p.bands, "ttft_median_ms"))),
        ("bottleneck", p.bottleneck),
        ("weights per GPU", f"{p.weight_bytes_per_gpu / GiB:.1f} GiB"),
        ("KV cache per token", f"{p.kv_bytes_per_token / KiB:,.1f} KiB ({p.kv_bytes_per_token:,.0f} B)"),
        ("state per sequence", f"{p.state_bytes_per_sequence / MiB:,.1f} MiB ({p.state_bytes_per_sequence:,.0f} B)"),
        ("KV capacity, all replicas", kv_tokens_text(p.kv_capacity_tokens)),
    ]
    band = p.bands.error_band if p.bands else None
    if band:
        where = band.outside_measured_regime
        rows.append(("(…–…) = 80 % interval", f"regime {band.regime}" + (f"; OUTSIDE: {where}" if where else "")))
    for k, v in rows:
        t.add_row(k, str(v))
    return t


def efficiency_line(result: object) -> Text | None:
    """``Efficiency: …`` (where the efficiency factors come from) for a result that names it."""
    source = getattr(result, "efficiency", "")
    return Text(f"Efficiency: {source}.") if source else None


def print_warnings(console: Console, warnings: list[str]) -> None:
    """Warnings in yellow, one per line."""
    for w in warnings:
        console.print(Text("warning: " + w, style="yellow"))
