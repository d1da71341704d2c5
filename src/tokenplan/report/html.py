"""One self-contained HTML file per report: plotly.js inlined once, every figure's data inline,
no reference to any network address — it opens with the network off.

``plan_report_html`` draws ``tokenplan plan --report`` from :func:`tokenplan.api.plan.plan_report_data`;
``measurements_report_html`` draws ``tokenplan report`` from :func:`tokenplan.api.report.report_inputs`.
Both return the page as a string; ``write_html`` writes it. plotly is imported inside.
"""

from __future__ import annotations

from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING

from tokenplan.client.auth import display_url
from tokenplan.errors import import_extra
from tokenplan.report.figures import plan_figures
from tokenplan.report.measured_figures import achieved, bench_divisor, measured_levels, measurement_figures
from tokenplan.report.tables import (
    DP_ATTENTION_CAPS,
    ENGINE_NAMES,
    band_of,
    current_table,
    first_rejection,
    not_searched,
    provisioning_rows,
    recommended_choice,
    wall_text,
    wall_unit,
    with_band,
)
from tokenplan.units import GiB, count_text, output_tokens_text, usd_text

if TYPE_CHECKING:
    from tokenplan.api.report import ReportInputs
    from tokenplan.bench_schema import BenchResult, Latency
    from tokenplan.planning.results import PlanReportData, PlanResult
    from tokenplan.results import Interval
    from tokenplan.run_summary import RunSummary

STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0 auto;max-width:1180px;padding:16px 28px;color:#222}
h1{font-size:1.5em;margin-bottom:.2em} h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ddd;padding-bottom:.2em}
table{border-collapse:collapse;font-size:.9em;margin:.5em 0} th,td{border:1px solid #ddd;padding:4px 8px;vertical-align:top}
th{background:#f4f4f4;text-align:left} td.n{text-align:right;font-variant-numeric:tabular-nums}
.sub{color:#666} .cap{color:#444;font-size:.92em;max-width:1050px} pre{background:#f7f7f7;padding:8px;overflow-x:auto;font-size:.85em}
.chart{margin:.4em 0 1.2em}
"""

CAPTIONS = {
    "throughput": "Each line is one layout's fastest configuration, swept from one request per replica up to the "
    "most requests whose KV cache and state fit in memory (◆). Bold: the plan's choice. Beyond ◆ the "
    "engine runs no more at once and further requests queue.",
    "roofline": "The decode step of each configuration on one GPU, from batch 1 to the memory limit. The sloped "
    "line is HBM bandwidth (FLOP/s = intensity × bytes/s), the flat one the dense peak FLOP/s in the "
    "weights' format; left of the ridge a step is bandwidth-bound. Achieved FLOP/s counts the whole "
    "step (communication and per-step overheads included), so points sit below the roofs.",
    "cost_time": "Every configuration that runs, as a whole job (ramp-up, steady state and drain tail). On the "
    "frontier, no other configuration is both faster and cheaper. Configurations without a price "
    "are not drawn.",
    "memory": "What fills one GPU at the plan's running batch. KV cache and per-sequence (linear-attention) "
    "state share the engine's cache pool: the state part is the running batch's share of it. The "
    "engine reserve holds activations, CUDA graphs and the headroom its memory fraction leaves.",
    "speedup": "Output tok/s with speculative decoding divided by the same configuration without it, at the "
    "same number of requests in flight. Where a line falls below 1, speculation stops paying.",
}


def write_html(text: str, path: str | Path) -> Path:
    """Write ``text`` to ``path`` (parents created) and return the path."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    return out


def _page(title: str, body: list[str]) -> str:
    get_plotlyjs = import_extra("plotly.offline", "report").get_plotlyjs

    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title><style>{STYLE}</style>\n"
        f'<script type="text/javascript">{get_plotlyjs()}</script></head>\n<body>\n'
        + "\n".join(body)
        + "\n</body></html>\n"
    )


def _figure(stem: str, caption: str, fig, note: str = "") -> str:
    div = fig.to_html(
        full_html=False,
        include_plotlyjs=False,
        div_id=f"chart-{stem}",
        config={"displaylogo": False, "responsive": True},
    )
    text = CAPTIONS.get(stem, "")
    return f'<h2>{escape(caption)}</h2><p class="cap">{escape(text)}{escape(note)}</p><div class="chart">{div}</div>'


def _table(head: list[str], rows: Sequence[Sequence[object]], numeric: AbstractSet[int] = frozenset()) -> str:
    th = "".join(f"<th>{escape(h)}</th>" for h in head)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="n">{escape(str(c))}</td>' if i in numeric else f"<td>{escape(str(c))}</td>"
            for i, c in enumerate(r)
        )
        + "</tr>"
        for r in rows
    )
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def _money(x: float | None, digits: int | None = None) -> str:
    """Dollars: ``digits`` decimals, or by default :func:`~tokenplan.units.usd_text` (cents below $100)."""
    if x is None:
        return "—"
    return usd_text(x) if digits is None else f"${x:,.{digits}f}"


def _money_range(band: Interval | None) -> str:
    """`` ($low–$high)``: the 80 % interval of a dollar figure, or nothing."""
    if not band:
        return ""
    digits = 0 if max(abs(band.low), abs(band.high)) >= 100 else 2
    return f" ({_money(band.low, digits)}–{_money(band.high, digits)})"


def comparison_html(plan: PlanResult) -> str:
    """The options table (best setting, tok/s, wall time, $, $/Mtok, bottleneck) and the rejections."""
    unit, scale = wall_unit(o.chosen.wall_days for o in plan.options if o.chosen is not None)
    rows = []
    for o in plan.options:
        c = o.chosen
        if c is None:
            rows.append([o.option, "nothing runs", "—", "—", "—", "—", "—", first_rejection(o)])
            continue
        rows.append(
            [
                o.option,
                c.best,
                with_band(c.output_tok_s_total, band_of(c.bands, "output_tok_s_total"), ",.0f"),
                f"{c.output_tok_s_per_gpu:,.0f}",
                wall_text(c.wall_days, band_of(c.bands, "wall_days"), scale),
                _money(c.usd) + _money_range(band_of(c.bands, "usd")),
                _money(c.usd_per_mtok, 3),
                c.bottleneck,
            ]
        )
    parts = [
        _table(
            ["option", "best layout & settings", "output tok/s", "tok/s/GPU", unit, "$", "$/Mtok", "bottleneck"],
            rows,
            numeric={2, 3, 4, 5, 6},
        )
    ]
    for o in plan.options:
        if o.rejected:
            reasons = sorted(o.rejected.items(), key=lambda kv: -kv[1])
            # each reason's count where there are several (one reason's count is the heading's)
            items = "".join(
                f"<li>{escape(r)}" + (f" ({count_text(n, 'configuration')})" if len(reasons) > 1 else "") + "</li>"
                for r, n in reasons[:12]
            )
            more = f"<li>… {len(reasons) - 12} more reasons</li>" if len(reasons) > 12 else ""
            parts.append(
                f"<p><b>Rejected on {escape(o.option)}</b> ({sum(o.rejected.values())} "
                f"configurations):</p><ul>{items}{more}</ul>"
            )
        else:
            parts.append(
                f'<p class="sub">Rejected on {escape(o.option)}: none of {o.configurations} configurations.</p>'
            )
    notes = not_searched(plan)
    if notes:
        parts.append('<p class="sub"><b>Not searched</b>: ' + "; ".join(escape(n) for n in notes) + ".</p>")
    return _provisioning_html(plan) + "<h2>Options compared</h2>" + "".join(parts)


def _provisioning_html(plan: PlanResult) -> str:
    """The provisioning answer (fewest GPUs per type), when the plan has a deadline or budget."""
    if not plan.provisioning:
        return ""
    title, head, rows = provisioning_rows(plan.provisioning)
    return f"<h2>{escape(title)}</h2>" + _table(head, rows, numeric={1, 2, 3, 4})


def _answer_html(plan: PlanResult) -> str:
    items = "".join(f"<li>{escape(line)}</li>" for line in plan.answer)
    return f"<h2>The answer</h2><ul>{items}</ul>"


def _launch_html(plan: PlanResult) -> str:
    choice = recommended_choice(plan)
    if not choice:
        return ""
    rec, best = choice
    return (
        f"<h2>Launch ({escape(rec.option)})</h2><p>Drive it with {best.concurrency_per_endpoint:,} requests "
        f"in flight per endpoint (e.g. <code>tokenplan generate --concurrency "
        f"{best.concurrency_per_endpoint}</code>).</p>"
        + "".join(
            f'<p class="sub">{escape(ENGINE_NAMES.get(e, e))}'
            + (" (the planned engine)" if i == 0 else " (another engine, with its own memory setting)")
            + f"</p><pre>{escape(cmd)}</pre>"
            for i, (e, cmd) in enumerate(best.launch.items())
        )
        + (f'<p class="sub">{escape(DP_ATTENTION_CAPS)}</p>' if "DP-attn" in best.layout else "")
        # the plan's warnings on this configuration (the terminal prints them under the launch):
        # a --max-model-len that refuses longer requests, a launch that caps the batch lower, …
        + (
            "<p>Warnings:</p><ul>" + "".join(f"<li>{escape(w)}</li>" for w in best.warnings) + "</ul>"
            if best.warnings
            else ""
        )
    )


def _speedup_note(data: PlanReportData) -> str:
    notes = []
    for c in data.speedup or ():
        last = c.points[-1].concurrency if c.points else 0
        where = (
            f"stops paying near {c.breakeven_concurrency:,.0f} in flight"
            if c.breakeven_concurrency
            else f"pays at every level up to the memory limit ({last:,.0f} in flight)"
        )
        notes.append(f"{c.option} {c.spec}: {where}")
    return (" " + "; ".join(notes) + ".") if notes else ""


def assumptions_html(data: PlanReportData) -> str:
    """Lengths, prices with their source, GPU figures and efficiency factors with their source."""
    plan, a = data.plan, data.assumptions
    job = plan.job
    lines = [
        f"Model {plan.model}, engine {plan.engine} with its defaults unless a setting says otherwise.",
        f"{job.samples:,} requests. Input lengths (ISL): {job.isl}. Output lengths (OSL): {job.osl} "
        f"→ {output_tokens_text(job.output_tokens)} output tokens.",
        "Concurrency counts requests in flight over all replicas of an option; tok/s are output tokens.",
        f"Job time = server start-up ({job.startup_s:,.0f} s) + ramp-up + steady state + drain tail of the "
        "longest outputs; cost = GPUs × hours × price.",
        f"Efficiency factors (fractions of datasheet peaks, and overheads in seconds): {a.efficiency_source}.",
    ]
    rows = [
        [
            o.option,
            o.gpu,
            _money(o.usd_per_gpu_hour, 2),
            o.price_source,
            f"{o.memory_bytes / GiB:,.1f}",
            f"{o.hbm_bytes_per_s / 1e12:,.2f}",
            ", ".join(f"{k} {v / 1e12:,.0f}" for k, v in o.dense_flops_per_s.items()),
            f"{o.scaleup} ({o.scaleup_bytes_per_s / 1e9:,.0f} GB/s)",
        ]
        for o in a.options
    ]
    gpus = _table(
        ["option", "GPU", "$/GPU-hour", "price source", "memory GiB", "HBM TB/s", "dense TFLOP/s", "scale-up link"],
        rows,
        numeric={2, 4, 5},
    )
    names = list(a.options[0].efficiency) if a.options else []
    eff = _table(
        ["efficiency factor"] + [o.option for o in a.options],
        [[n] + [f"{o.efficiency[n]:.4g}" for o in a.options] for n in names],
        numeric=set(range(1, len(a.options) + 1)),
    )
    return "<h2>Assumptions</h2><ul>" + "".join(f"<li>{escape(x)}</li>" for x in lines) + "</ul>" + gpus + eff


def plan_report_html(data: PlanReportData) -> str:
    """The page of ``tokenplan plan --report``: answer, comparison, charts, assumptions."""
    plan = data.plan
    title = f"tokenplan · {plan.model} · {count_text(plan.job.samples, 'sample')} · engine {plan.engine}"
    body = [
        f'<h1>{escape(title)}</h1><p class="sub">{plan.configurations_evaluated:,} configurations '
        f"evaluated. Hover over any point for its configuration.</p>",
        comparison_html(plan),
        _answer_html(plan),
        _current_html(plan),
    ]
    for stem, caption, fig in plan_figures(data):
        body.append(_figure(stem, caption, fig, _speedup_note(data) if stem == "speedup" else ""))
    body.append(_launch_html(plan))
    body.append(assumptions_html(data))
    return _page(title, body)


def _current_html(plan: PlanResult) -> str:
    """``plan --current``: the walk from the setup run now to the recommended one (empty without it)."""
    walk = current_table(plan)
    if walk is None:
        return ""
    rows = [[c.plain if hasattr(c, "plain") else c for c in r] for r in walk.rows]
    return f"<h2>{escape(walk.title)}</h2>" + _table(walk.header, rows, numeric=set(walk.right))


def _runs_html(runs: Sequence[RunSummary]) -> str:
    rows = []
    for r in runs:
        e2e, planned = r.latency_e2e, r.plan_output_tok_s
        rows.append(
            [
                r.run_dir or "",
                r.model,
                f"{r.stored:,} / {r.units_total:,}",
                f"{r.errors:,}",
                f"{r.elapsed_s / 3600:,.2f}",
                f"{r.output_tokens:,.0f}",
                f"{r.output_tok_s:,.0f}",
                "—" if not planned else f"{planned:,.0f}",
                "—" if e2e is None else f"{e2e.p50_ms / 1e3:,.1f} / {e2e.p99_ms / 1e3:,.1f}",
            ]
        )
    return "<h2>generate runs</h2>" + _table(
        [
            "run directory",
            "model",
            "stored / units",
            "errors",
            "hours",
            "output tokens",
            "tok/s measured",
            "tok/s planned",
            "E2E p50 / p99 s",
        ],
        rows,
        numeric={3, 4, 5, 6, 7, 8},
    )


def _bench_html(bench: BenchResult) -> str:
    n, unit = bench_divisor(bench)

    def q(d: Latency | None) -> str:
        """``p50 / p99`` of a latency distribution in ms with one decimal, as ``bench`` prints
        them (seconds to 3 decimals showed a 2.4 ms TPOT as 0.002); "—" where not measured."""
        return " / ".join("—" if v is None else f"{v * 1e3:,.1f}" for v in ((d.p50, d.p99) if d else (None, None)))

    rows = [
        [
            f"{lv.concurrency:,}" if lv.open_loop_rate is None else lv.label.removeprefix("rate "),
            f"{achieved(lv):,.1f}",
            f"{lv.requests:,}",
            f"{lv.errors:,}",
            f"{tok_s:,.0f}",
            f"{tok_s / n:,.0f}",
            q(lv.ttft_s),
            q(lv.tpot_s),
        ]
        for lv, tok_s in measured_levels(bench)
    ]
    # display_url again: a bench file written before endpoints were stored masked may hold user:password@.
    endpoints = ", ".join(display_url(e) for e in bench.endpoints)
    on = (
        f"{n} GPU{'s' if n > 1 else ''}"
        if unit == "GPU"
        else f"{n} endpoint{'s' if n > 1 else ''} (GPU count not stated: bench --num-gpus)"
    )
    return f'<h2>bench · {escape(bench.model)} on {escape(on)}</h2><p class="sub">{escape(endpoints)}</p>' + _table(
        [
            "concurrency",
            "achieved",
            "requests",
            "errors",
            "output tok/s",
            f"tok/s/{unit}",
            "TTFT p50 / p99 ms",
            "TPOT p50 / p99 ms",
        ],
        rows,
        numeric=set(range(8)),
    )


def measurements_report_html(inputs: ReportInputs) -> str:
    """The page of ``tokenplan report``: the plan (if given) beside bench levels and generate runs."""
    plan = inputs.plan
    title = "tokenplan report" + (f" · {plan.model}" if plan else "")
    body = [f"<h1>{escape(title)}</h1>"]
    if plan:
        job = plan.job
        body.append(
            f'<p class="sub">Plan: {job.samples:,} requests, ISL {escape(job.isl)}, OSL '
            f"{escape(job.osl)}, engine {escape(plan.engine)}.</p>"
        )
        body.append(comparison_html(plan))
    if inputs.bench:
        body.append(_bench_html(inputs.bench))
    if inputs.runs:
        body.append(_runs_html(inputs.runs))
    for stem, caption, fig in measurement_figures(inputs):
        body.append(_figure(stem, caption, fig))
    return _page(title, body)
