"""What ``tokenplan bench`` prints: the sweep table (latencies in ms, throughput in tokens/s), the
line on where the server's capacity was reached, the notes, and one progress line per level.

Every function reads the bench JSON (``tokenplan.api.bench.bench(...).data`` or a saved
``--save`` file); the fit's tables come from :mod:`tokenplan.report.fit`.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

from tokenplan.client.auth import display_url
from tokenplan.report.fit import show_fit

BENCH_COLUMNS = (
    "conc",
    "achieved",
    "reqs",
    "err",
    "req/s",
    "out tok/s",
    "total tok/s",
    "server tok/s",
    "TTFT p50 ms",
    "TTFT p99 ms",
    "TPOT p50 ms",
    "ITL p50 ms",
    "E2E p50 s",
    "running",
    "waiting",
    "KV max",
)


def _ms(d: dict | None, key: str) -> str:
    """A latency in seconds as milliseconds with one decimal; "–" when not measured."""
    v = (d or {}).get(key)
    return "–" if v is None else f"{v * 1e3:.1f}"


def _fmt(v: float | None, spec: str) -> str:
    return "–" if v is None else format(v, spec)


def bench_table(data: dict) -> Table:
    """The levels as a rich table: one row per concurrency level, the server's own counters
    (``/metrics``) beside the client's measurement; latencies in ms, throughput in tokens/s."""
    # display_url again: a --from-json file written before endpoints were stored masked may hold user:password@.
    t = Table(title=f"{data['model']} · {', '.join(display_url(str(e)) for e in (data.get('endpoints') or ()))}")
    for c in BENCH_COLUMNS:
        t.add_column(c, justify="right")
    for lv in data["levels"]:  # a saved file's figures are checked by tokenplan.files.shapes; absent ones print "–"
        s = lv.get("server") or {}
        t.add_row(
            str(lv["concurrency"]),
            _fmt(lv.get("achieved_concurrency"), ".1f"),
            str(lv["requests"]),
            str(lv["errors"]),
            _fmt(lv.get("request_throughput_per_s"), ".2f"),
            _fmt(lv.get("output_tok_s"), ",.0f"),
            _fmt(lv.get("total_tok_s"), ",.0f"),
            _fmt(s.get("output_tok_s"), ",.0f"),
            _ms(lv.get("ttft_s"), "p50"),
            _ms(lv.get("ttft_s"), "p99"),
            _ms(lv.get("tpot_s"), "p50"),
            _ms(lv.get("itl_s"), "p50"),
            _fmt((lv.get("e2e_s") or {}).get("p50"), ".2f"),
            _fmt(s.get("running_mean"), ".1f"),
            _fmt(s.get("waiting_mean"), ".1f"),
            "–" if s.get("kv_usage_max") is None else f"{s['kv_usage_max'] * 100:.0f}%",
        )
    return t


def acceptance_table(data: dict) -> Table | None:
    """Speculative decoding as the servers and answers reported it (``levels[i].acceptance`` and
    the sweep's ``acceptance``, :mod:`tokenplan.bench.acceptance`): one row per level with τ
    (tokens per verification step, bonus included), where it came from, the acceptance rate and
    per draft position (%), and the level's mean decode context (tokens); then one row per
    context bucket of the answers' own counts. None when nothing was measured (no speculation,
    or a file saved before bench read acceptance)."""
    rows = [lv for lv in data["levels"] if lv.get("acceptance")]
    if not rows:
        return None
    t = Table(title="speculative acceptance (τ = tokens per verification step)")
    for c in ("conc", "context tok", "τ", "from", "accept rate", "per position"):
        t.add_column(c, justify="right")
    for lv in rows:
        acc = lv["acceptance"]
        server = acc.get("server") or {}
        rate = server.get("acceptance_rate")
        t.add_row(
            str(lv["concurrency"]),
            _fmt(acc.get("context_tokens"), ",.0f"),
            f"{acc['tau']:.2f}",
            acc["source"],
            "–" if rate is None else f"{rate * 100:.1f}%",
            " ".join(f"{p * 100:.0f}%" for p in server.get("per_position") or ()) or "–",
        )
    sweep = data.get("acceptance") or {}
    for b in sweep.get("context_buckets") or ():
        t.add_row(
            f"ctx {b['bucket']}",
            f"{b['mean_decode_context_tokens']:,.0f}",
            f"{b['tau']:.2f}",
            f"{b['requests']} requests",
            "–",
            "–",
        )
    return t


def cap_text(data: dict) -> str | None:
    """The ``cap:`` line: where throughput flattens, the queue grows and the most requests the
    server ran — "not reached in this sweep" where the sweep did not get there (and "not
    measured" for the queue and running count without /metrics). None when no cap was seen."""
    cap = data.get("cap") or {}
    if not cap.get("source"):
        return None
    metrics = (data.get("server") or {}).get("metrics", True)
    unseen = "not reached in this sweep" if metrics else "not measured (no /metrics)"
    flat, queue, running = (
        cap.get("flattens_at_concurrency"),
        cap.get("queue_grows_at_concurrency"),
        cap.get("max_running_requests"),
    )
    parts = [
        f"throughput flattens at concurrency {flat}"
        if flat is not None
        else "throughput flattening not reached in this sweep",
        f"queue grows at {queue}" if queue is not None else f"queue growth {unseen}",
        f"server runs at most {running}" if running is not None else f"running-request limit {unseen}",
    ]
    return f"cap: {', '.join(parts)} (from {cap['source']})"


def level_line(level: dict) -> str:
    """One line per finished level while the sweep runs (output tok/s, requests, errors)."""
    tok_s = "– (not measured)" if level["output_tok_s"] is None else f"{level['output_tok_s']:,.0f}"
    return (
        f"concurrency {level['concurrency']}: {tok_s} output tok/s, "
        f"{level['requests']} requests, {level['errors']} errors"
    )


def show_bench(console: Console, data: dict, wrote_profile: Path | None) -> None:
    """Print the sweep table, the detected cap, the notes and, after ``--fit`` (``data["fit"]``),
    the fit's tables and where the profile went (``wrote_profile``; None: not written)."""
    console.print(bench_table(data))
    spec = acceptance_table(data)
    if spec is not None:
        console.print(spec)
    cap = cap_text(data)
    if cap is not None:
        console.print(cap, markup=False)
    for note in data.get("notes") or ():
        console.print(f"note: {note}", markup=False)
    if "fit" in data:
        show_fit(console, data["fit"], wrote_profile)
