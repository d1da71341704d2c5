"""What ``tokenplan bench`` prints: the sweep table (latencies in ms, throughput in tokens/s), the
line on where the server's capacity was reached, the notes, and one progress line per level.

Every function reads the bench sweep as :class:`~tokenplan.bench_schema.BenchResult` (the JSON
``tokenplan bench`` wrote, or a saved ``--save`` file, read back with ``from_json``); the fit's
tables come from :mod:`tokenplan.report.fit`.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

from tokenplan.bench_schema import BenchFit, BenchLevel, BenchResult, Latency, ServerWindow
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


def _ms(v: float | None) -> str:
    """A latency in seconds as milliseconds with one decimal; "–" when not measured."""
    return "–" if v is None else f"{v * 1e3:.1f}"


def _fmt(v: float | None, spec: str) -> str:
    return "–" if v is None else format(v, spec)


def _pct(v: float | None, spec: str) -> str:
    """A fraction (0–1) in percent; "–" when not measured."""
    return "–" if v is None else f"{v * 100:{spec}}%"


def bench_table(data: BenchResult) -> Table:
    """The levels as a rich table: one row per concurrency level, the server's own counters
    (``/metrics``) beside the client's measurement; latencies in ms, throughput in tokens/s."""
    # display_url again: a --from-json file written before endpoints were stored masked may hold user:password@.
    t = Table(title=f"{data.model} · {', '.join(display_url(e) for e in data.endpoints)}")
    for c in BENCH_COLUMNS:
        t.add_column(c, justify="right")
    for lv in data.levels:  # a saved file's figures are checked by tokenplan.files.shapes; absent ones print "–"
        s = lv.server or ServerWindow()
        ttft, tpot, itl, e2e = (d or Latency() for d in (lv.ttft_s, lv.tpot_s, lv.itl_s, lv.e2e_s))
        t.add_row(
            str(lv.concurrency) if lv.open_loop_rate is None else lv.label.removeprefix("rate "),
            _fmt(lv.achieved_concurrency, ".1f"),
            str(lv.requests),
            str(lv.errors),
            _fmt(lv.request_throughput_per_s, ".2f"),
            _fmt(lv.output_tok_s, ",.0f"),
            _fmt(lv.total_tok_s, ",.0f"),
            _fmt(s.output_tok_s, ",.0f"),
            _ms(ttft.p50),
            _ms(ttft.p99),
            _ms(tpot.p50),
            _ms(itl.p50),
            _fmt(e2e.p50, ".2f"),
            _fmt(s.running_mean, ".1f"),
            _fmt(s.waiting_mean, ".1f"),
            _pct(s.kv_usage_max, ".0f"),
        )
    return t


def acceptance_table(data: BenchResult) -> Table | None:
    """Speculative decoding as the servers and answers reported it (``levels[i].acceptance`` and
    the sweep's ``acceptance``, :mod:`tokenplan.bench.acceptance`): one row per level with τ
    (tokens per verification step, bonus included), where it came from, the acceptance rate and
    per draft position (%), and the level's mean decode context (tokens); then one row per
    context bucket of the answers' own counts. None when nothing was measured (no speculation,
    or a file saved before bench read acceptance)."""
    rows = [(lv, lv.acceptance) for lv in data.levels if lv.acceptance]
    if not rows:
        return None
    t = Table(title="speculative acceptance (τ = tokens per verification step)")
    for c in ("conc", "context tok", "τ", "from", "accept rate", "per position"):
        t.add_column(c, justify="right")
    for lv, acc in rows:
        server = acc.server
        t.add_row(
            str(lv.concurrency),
            _fmt(acc.context_tokens, ",.0f"),
            f"{acc.tau:.2f}",
            acc.source,
            _pct(server.acceptance_rate if server else None, ".1f"),
            " ".join(f"{p * 100:.0f}%" for p in (server.per_position if server else ())) or "–",
        )
    for b in data.acceptance.context_buckets if data.acceptance else ():
        t.add_row(
            f"ctx {b.bucket}",
            f"{b.mean_decode_context_tokens:,.0f}",
            f"{b.tau:.2f}",
            f"{b.requests} requests",
            "–",
            "–",
        )
    return t


def cap_text(data: BenchResult) -> str | None:
    """The ``cap:`` line: where throughput flattens, the queue grows and the most requests the
    server ran — "not reached in this sweep" where the sweep did not get there (and "not
    measured" for the queue and running count without /metrics). None when no cap was seen."""
    cap = data.cap
    if cap is None or not cap.source:
        return None
    metrics = data.server.metrics if data.server else True
    unseen = "not reached in this sweep" if metrics else "not measured (no /metrics)"
    flat, queue, running = cap.flattens_at_concurrency, cap.queue_grows_at_concurrency, cap.max_running_requests
    parts = [
        f"throughput flattens at concurrency {flat}"
        if flat is not None
        else "throughput flattening not reached in this sweep",
        f"queue grows at {queue}" if queue is not None else f"queue growth {unseen}",
        f"server runs at most {running}" if running is not None else f"running-request limit {unseen}",
    ]
    return f"cap: {', '.join(parts)} (from {cap.source})"


def level_line(level: BenchLevel) -> str:
    """One line per finished level while the sweep runs (output tok/s, requests, errors)."""
    tok_s = "– (not measured)" if level.output_tok_s is None else f"{level.output_tok_s:,.0f}"
    return f"{level.label}: {tok_s} output tok/s, {level.requests} requests, {level.errors} errors"


def show_bench(console: Console, data: BenchResult, wrote_profile: Path | None) -> None:
    """Print the sweep table, the detected cap, the notes and, after ``--fit`` (``data.fit``),
    the fit's tables and where the profile went (``wrote_profile``; None: not written)."""
    console.print(bench_table(data))
    spec = acceptance_table(data)
    if spec is not None:
        console.print(spec)
    cap = cap_text(data)
    if cap is not None:
        console.print(cap, markup=False)
    for note in data.notes:
        console.print(f"note: {note}", markup=False)
    if data.fit is not None:
        show_fit(console, BenchFit.from_json(data.fit, "bench --fit"), wrote_profile)
