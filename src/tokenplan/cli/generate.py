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
from tokenplan.api_generate import Snapshot
from tokenplan.cli.generate_trial import console_is_terminal, log_every, print_dry_run

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
    max_tokens: Annotated[Optional[int], typer.Option(help="Max completion tokens per request "
                                                      "[default: the plan's output cap, else 4096].")] = None,
    temperature: Annotated[Optional[float], typer.Option(help="Sampling temperature "
                                                         "[default: generation_config.json, else 0].")] = None,
    top_p: Annotated[Optional[float], typer.Option(help="Nucleus sampling top_p "
                                                   "[default: generation_config.json, else the server's].")] = None,
    top_k: Annotated[Optional[int], typer.Option(help="top_k sampling "
                                                 "[default: generation_config.json, else the server's].")] = None,
    seed: Annotated[int, typer.Option(help="Job seed; each request's seed derives from it.")] = 0,
    thinking: Annotated[Optional[str], typer.Option(help="on | off (chat_template_kwargs.enable_thinking).")] = None,
    on_length: Annotated[str, typer.Option(help="keep | drop | retry a 'length' finish.")] = "keep",
    n: Annotated[int, typer.Option("--n", help="Samples per row (complete mode ids ROWID#k).")] = 1,
    extra_body: Annotated[Optional[str], typer.Option(help="JSON object merged into every request.")] = None,
    plan: Annotated[Optional[Path], typer.Option(help="Output of `tokenplan plan --json`.")] = None,
    export: Annotated[Optional[Path], typer.Option(help="Write all stored records to this file: .parquet, "
                                                   ".jsonl (SpecForge training rows), or see --format.")] = None,
    export_format: Annotated[Optional[str], typer.Option("--format", help="--export format: parquet | jsonl | "
                                                         "openai-batch [default: from the suffix].")] = None,
    drop_length: Annotated[bool, typer.Option(help="--export leaves out records with a length-cut turn.")] = False,
    require_think_close: Annotated[bool, typer.Option(help="--export leaves out records whose thinking was "
                                                      "cut before </think>.")] = False,
    generation_config: Annotated[Optional[Path], typer.Option(help="generation_config.json (or its model "
                                                              "directory) for default sampling.")] = None,
    limit: Annotated[Optional[int], typer.Option(help="Only the first N usable rows (a trial run).")] = None,
    dry_run: Annotated[bool, typer.Option(help="Count rows, requests and (with a tokenizer) prompt tokens; "
                                          "send nothing.")] = False,
    tokenizer: Annotated[Optional[Path], typer.Option(help="Tokenizer directory for --dry-run "
                                                      "[default: --model when it is a local directory].")] = None,
    progress_every: Annotated[float, typer.Option(help="Seconds between log lines and summary.json updates "
                                                  "when stderr is not a terminal.")] = 30.0,
    force: Annotated[bool, typer.Option(help="Continue a run directory made for another configuration.")] = False,
    api_key_env: Annotated[Optional[str], typer.Option(help="Environment variable holding the API key (must be "
                                                        "set when named) [default: OPENAI_API_KEY if set].")] = None,
    stream: Annotated[bool, typer.Option(help="Stream answers (measures TTFT; more client CPU).")] = False,
    max_attempts: Annotated[int, typer.Option(help="Tries per request, the first included.")] = 6,
    deadline_s: Annotated[Optional[float], typer.Option("--request-timeout", help="Limit on one request in seconds "
                                                        "[default: 120 + max_tokens / 10].")] = None,
    grace_s: Annotated[float, typer.Option(help="Seconds in-flight requests get after Ctrl-C.")] = 30.0,
    backend: Annotated[str, typer.Option(help="local (one process) | ray (an actor pool on a Ray "
                                         "cluster; pip install 'tokenplan[ray]').")] = "local",
    ray_address: Annotated[Optional[str], typer.Option(help="Ray cluster to join: head:6379, auto (the one "
                                                       "on this node) or ray://head:10001 [default: $RAY_ADDRESS, "
                                                       "else a new local one].")] = None,
    actors: Annotated[int, typer.Option(help="Ray actors (client processes) sharing the endpoints.")] = 2,
    quiet: Annotated[bool, typer.Option(help="No live display.")] = False,
    extra_body_override: Annotated[bool, typer.Option(help="Let --extra-body replace fields tokenplan sets "
                                                      "(messages, model, n, seed, max_tokens).")] = False,
    max_answer_bytes: Annotated[Optional[int], typer.Option(help="Cap on one answer body in bytes; a larger "
                                                            "answer fails its row [default: 1 MiB + 1 KiB "
                                                            "per max-tokens].")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
) -> None:
    """Regenerate or complete a dataset through OpenAI-compatible servers, exactly once, resumably."""
    request = GenerateRequest.build(
        inputs=inputs, out_dir=out, endpoints=endpoint, model=model, mode=mode, concurrency=concurrency,
        extra_body_override=extra_body_override, max_answer_bytes=max_answer_bytes,
        max_tokens=max_tokens, temperature=temperature, top_p=top_p, top_k=top_k, seed=seed,
        thinking=thinking, on_length=on_length, n=n, extra_body=_json_object(extra_body), plan=plan,
        export=export, force=force, api_key_env=api_key_env, stream=stream, max_attempts=max_attempts,
        deadline_s=deadline_s, grace_s=grace_s, export_format=export_format, drop_length=drop_length,
        require_think_close=require_think_close, generation_config=generation_config, limit=limit,
        dry_run=dry_run, tokenizer=tokenizer, progress_every_s=None if console_is_terminal() else progress_every,
        backend=backend, ray_address=ray_address, actors=actors)
    console = Console(stderr=True)

    def warn(text: str) -> None:
        console.print(f"warning: {text}", markup=False, highlight=False, soft_wrap=True)

    if dry_run:
        print_dry_run(request, json_out)
        return
    if not console.is_terminal and not quiet and not json_out:
        result = generate(request, on_progress=log_every(progress_every, console), on_warning=warn)
    elif quiet or json_out or not console.is_terminal:
        result = generate(request, on_warning=warn)
    else:
        with Live(console=console, refresh_per_second=4, transient=False) as live:
            result = generate(request, on_progress=lambda s: live.update(progress_table(s)), on_warning=warn)
    for note in result.notes:
        console.print(f"note: {note}")
    if json_out:
        print(result.to_json())
    else:
        print(summary_text(result))
    if result.units_total == 0 and result.rejected_rows:  # e.g. a file in a shape no reader knows
        raise InputError("input", " ".join(inputs), f"at least one usable row (all {result.rejected_rows:,} rows "
                         f"were rejected; the reasons are in {result.run_dir / 'rejects.jsonl'})")
    if result.interrupted:
        sys.exit(EXIT_INTERRUPTED)  # SystemExit: typer.Exit is swallowed in non-standalone mode
    if result.export_error is not None:
        raise ExportError(result.export_error)  # after the summary: one line, exit 2


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
        f"+ {result.errors:,} errors" + (f" + {result.not_yet_sent:,} not yet sent" if result.interrupted else "")
        + f"  [{check}]",
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
        export = s.get("export") or {}
        left_out = [f"{export[k]:,} {label}" for k, label in (("dropped_length", "cut by max_tokens"),
                    ("dropped_think_open", "thinking not closed"), ("failed", "failed/skipped lines"))
                    if export.get(k)]
        lines.append(f"exported      {result.export_rows:,} rows" + (f" ({', '.join(left_out)})" if left_out else ""))
    if result.interrupted:
        lines.append("interrupted: rerun the same command to resume")
    return "\n".join(lines)

