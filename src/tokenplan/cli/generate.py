"""``tokenplan generate``: options → :class:`GenerateRequest` → :func:`generate` → live display and summary."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.live import Live
from rich.table import Table

from tokenplan.api_generate import ExportError, GenerateRequest, GenerateResult, generate
from tokenplan.cli.app import app
from tokenplan.errors import InputError
from tokenplan.runner.progress import Snapshot

EXIT_INTERRUPTED = 130


@app.command("generate")
def generate_command(
    inputs: Annotated[list[str], typer.Argument(help="JSONL, JSONL.zst or Parquet files or globs.")],
    out: Annotated[Path, typer.Option("--out", help="Run directory (created; rerun to resume).")],
    endpoint: Annotated[list[str], typer.Option("--endpoint", help="Server base URL, e.g. "
                                                "http://127.0.0.1:8000/v1; repeatable.")],
    model: Annotated[str, typer.Option("--model", help="Model name the servers serve.")],
    mode: Annotated[str, typer.Option(help="regenerate | complete")] = "regenerate",
    concurrency: Annotated[Optional[int], typer.Option(help="Requests in flight per endpoint "
                                                       "[default: the plan's, else 64].")] = None,
    max_tokens: Annotated[int, typer.Option(help="Max completion tokens per request.")] = 4096,
    temperature: Annotated[float, typer.Option()] = 0.0,
    top_p: Annotated[Optional[float], typer.Option()] = None,
    top_k: Annotated[Optional[int], typer.Option()] = None,
    seed: Annotated[int, typer.Option(help="Job seed; each request's seed derives from it.")] = 0,
    thinking: Annotated[Optional[str], typer.Option(help="on | off (chat_template_kwargs.enable_thinking).")] = None,
    on_length: Annotated[str, typer.Option(help="keep | drop | retry a 'length' finish.")] = "keep",
    n: Annotated[int, typer.Option("--n", help="Samples per row (complete mode ids ROWID#k).")] = 1,
    extra_body: Annotated[Optional[str], typer.Option(help="JSON object merged into every request.")] = None,
    plan: Annotated[Optional[Path], typer.Option(help="Output of `tokenplan plan --json`.")] = None,
    export: Annotated[Optional[Path], typer.Option(help="Write all stored records to this Parquet file.")] = None,
    force: Annotated[bool, typer.Option(help="Continue a run directory made for another configuration.")] = False,
    api_key_env: Annotated[Optional[str], typer.Option(help="Environment variable holding the API key (must be "
                                                        "set when named) [default: OPENAI_API_KEY if set].")] = None,
    stream: Annotated[bool, typer.Option(help="Stream answers (measures TTFT; more client CPU).")] = False,
    max_attempts: Annotated[int, typer.Option(help="Tries per request, the first included.")] = 6,
    deadline_s: Annotated[Optional[float], typer.Option(help="Per-request limit in seconds "
                                                        "[default: 120 + max_tokens / 10].")] = None,
    grace_s: Annotated[float, typer.Option(help="Seconds in-flight requests get after Ctrl-C.")] = 30.0,
    backend: Annotated[str, typer.Option(help="local (one process) | ray (an actor pool on a Ray "
                                         "cluster; pip install 'tokenplan[ray]').")] = "local",
    ray_address: Annotated[Optional[str], typer.Option(help="Ray cluster to join: head:6379, auto (the one "
                                                       "on this node) or ray://head:10001 [default: $RAY_ADDRESS, "
                                                       "else a new local one].")] = None,
    actors: Annotated[int, typer.Option(help="Ray actors (client processes) sharing the endpoints.")] = 2,
    quiet: Annotated[bool, typer.Option(help="No live display.")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
) -> None:
    """Regenerate or complete a dataset through OpenAI-compatible servers, exactly once, resumably."""
    request = GenerateRequest.build(
        inputs=inputs, out_dir=out, endpoints=endpoint, model=model, mode=mode, concurrency=concurrency,
        max_tokens=max_tokens, temperature=temperature, top_p=top_p, top_k=top_k, seed=seed,
        thinking=thinking, on_length=on_length, n=n, extra_body=_json_object(extra_body), plan=plan,
        export=export, force=force, api_key_env=api_key_env, stream=stream, max_attempts=max_attempts,
        deadline_s=deadline_s, grace_s=grace_s, backend=backend, ray_address=ray_address, actors=actors)
    console = Console(stderr=True)

    def warn(text: str) -> None:
        console.print(f"warning: {text}", markup=False, highlight=False, soft_wrap=True)

    if quiet or json_out:
        result = generate(request, on_warning=warn)
    elif not console.is_terminal:  # a log file or a pipe: one plain line every LOG_EVERY_S seconds
        result = generate(request, on_progress=_progress_lines(console), on_warning=warn)
    else:
        with Live(console=console, refresh_per_second=4, transient=False) as live:
            result = generate(request, on_progress=lambda s: live.update(progress_table(s)), on_warning=warn)
    for note in result.notes:
        console.print(f"note: {note}")
    if json_out:
        print(json.dumps(result.summary, indent=2))
    else:
        print(summary_text(result))
    if result.interrupted:
        sys.exit(EXIT_INTERRUPTED)  # SystemExit: typer.Exit is swallowed in non-standalone mode
    if result.export_error is not None:
        raise ExportError(result.export_error)  # after the summary: one line, exit 2


LOG_EVERY_S = 10.0  # progress lines when stderr is not a terminal (seconds)


def _progress_lines(console: Console):  # noqa: ANN202 - a Snapshot callback
    last = [float("-inf")]

    def show(s: Snapshot) -> None:
        if s.elapsed_s - last[0] < LOG_EVERY_S:
            return
        last[0] = s.elapsed_s
        total = f"/{s.units_total:,}" if s.units_total is not None else ""
        console.print(f"progress {s.finished:,}{total} done (stored {s.stored:,}, errors {s.errors:,}), "
                      f"{s.output_tok_s_window:,.0f} output tok/s"
                      + (f" (plan {s.plan_output_tok_s:,.0f})" if s.plan_output_tok_s else "")
                      + f", ETA {_duration(s.eta_s)}, {sum(s.in_flight.values())} in flight, "
                      f"{s.healthy_endpoints} endpoints healthy"
                      + "".join(f"; {line}" for line in s.workers), markup=False, highlight=False, soft_wrap=True)

    return show


def _json_object(text: str | None) -> dict:
    if text is None:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise InputError("extra-body", text, "a JSON object, e.g. '{\"ignore_eos\": true}'")
    return value


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"


def progress_table(s: Snapshot) -> Table:
    """The live display: rows, tok/s against the plan, ETA, errors, in-flight per endpoint."""
    table = Table(show_header=False, box=None, pad_edge=False)
    total = f"/{s.units_total:,}" if s.units_total is not None else ""
    table.add_row("done", f"{s.finished:,}{total}  (stored {s.stored:,}, skipped {s.skipped:,}, "
                          f"errors {s.errors:,}, rejected {s.rejected:,}, before this run {s.done_before:,})")
    plan = f"   plan {s.plan_output_tok_s:,.0f}" if s.plan_output_tok_s else ""
    table.add_row("output tok/s", f"{s.output_tok_s_window:,.0f} now, {s.output_tok_s_mean:,.0f} mean{plan}")
    table.add_row("elapsed / ETA", f"{_duration(s.elapsed_s)} / {_duration(s.eta_s)}")
    flight = ", ".join(f"{url} {count}" for url, count in s.in_flight.items())
    table.add_row("in flight", f"{flight}  ({s.healthy_endpoints} healthy)")
    for line in s.workers:
        table.add_row("", line)
    return table


def summary_text(result: GenerateResult) -> str:
    """The closing summary: accounting, throughput and latency."""
    s = result.summary
    check = "ok" if result.accounting_ok else ("incomplete (interrupted)" if result.interrupted else "MISMATCH")
    lines = [
        f"run dir       {result.run_dir}",
        f"units         {result.units_total:,} = {result.stored:,} stored + {result.skipped:,} skipped "
        f"+ {result.errors:,} errors  [{check}]",
        f"rejected rows {result.rejected_rows:,} (see rejects.jsonl)"
        + (f", blank lines {result.blank_lines:,} (not rows)" if result.blank_lines else "")
        + f"   done before this run {result.already_done:,}",
        f"throughput    {s['output_tok_s']:,.1f} output tok/s, {s['requests_per_s']:,.2f} req/s over "
        f"{s['elapsed_s']:,.1f} s" + (f"  (plan: {s['plan_output_tok_s']:,.0f} tok/s)"
                                     if s.get("plan_output_tok_s") else ""),
    ]
    e2e = s.get("latency_e2e")
    if e2e:
        lines.append(f"latency E2E   p50 {e2e['p50_ms']:,.0f} ms  p90 {e2e['p90_ms']:,.0f} ms  "
                     f"p99 {e2e['p99_ms']:,.0f} ms  ({e2e['count']:,} requests)")
    if result.export_rows is not None:
        lines.append(f"exported      {result.export_rows:,} rows")
    if result.interrupted:
        lines.append("interrupted: rerun the same command to resume")
    return "\n".join(lines)

