"""``tokenplan generate``: options → :class:`GenerateRequest` → :func:`generate` → live display and
summary (:mod:`tokenplan.report.generate`).

Each option's type and help is one click decorator below, in the order ``--help`` lists.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any

import click
from rich.console import Console
from rich.live import Live

from tokenplan.api.generate import ExportError, GenerateRequest, GenerateResult, generate
from tokenplan.cli.app import app
from tokenplan.cli.generate_trial import console_is_terminal, log_every, print_dry_run
from tokenplan.cli.params import INTEGER, NUMBER, PATH
from tokenplan.errors import ConfigError, InputError, ServerError
from tokenplan.loaders import parse_json
from tokenplan.report.generate import progress_table, summary_text

EXIT_INTERRUPTED = 130


@app.command("generate", old_spellings={"--deadline-s": "--request-timeout"})
@click.argument(
    "inputs", nargs=-1, required=True, help="JSONL (plain, .zst, .gz, .bz2, .lz4), JSON or Parquet files or globs."
)
@click.option("--out", type=PATH, required=True, help="Run directory (created; rerun to resume).")
@click.option(
    "--endpoint", multiple=True, required=True, help="Server base URL, e.g. http://127.0.0.1:8000/v1; repeatable."
)
@click.option("--model", required=True, help="Model name the servers serve.")
@click.option("--mode", default="regenerate", help="regenerate | complete")
@click.option("--concurrency", type=INTEGER, help="Requests in flight per endpoint [default: the plan's, else 64].")
@click.option(
    "--max-tokens",
    type=INTEGER,
    help=(
        "Max completion tokens per request [default: the plan's output cap (--plan), else the model's"
        " context less each prompt, else 32768]."
    ),
)
@click.option("--temperature", type=NUMBER, help="Sampling temperature [default: generation_config.json, else 0].")
@click.option(
    "--top-p", type=NUMBER, help="Nucleus sampling top_p [default: generation_config.json, else the server's]."
)
@click.option("--top-k", type=INTEGER, help="top_k sampling [default: generation_config.json, else the server's].")
@click.option("--seed", type=INTEGER, help="Job seed; each request's seed derives from it [default: 0].")
@click.option("--no-seed", is_flag=True, help="Send no seed (a server that refuses the field).")
@click.option("--thinking", help="on | off (chat_template_kwargs.enable_thinking).")
@click.option("--on-length", default="keep", help="keep | drop | retry a 'length' finish.")
@click.option("--n", type=INTEGER, default=1, help="Samples per row (complete mode ids ROWID#k).")
@click.option("--extra-body", help="JSON object merged into every request.")
@click.option("--plan", type=PATH, help="Output of `tokenplan plan --json`.")
@click.option(
    "--export",
    type=PATH,
    help="Write all stored records to this file: .parquet, .jsonl (SpecForge training rows), or see --format.",
)
@click.option(
    "--format", "export_format", help="--export format: parquet | jsonl | openai-batch [default: from the suffix]."
)
@click.option(
    "--drop-length/--no-drop-length", default=False, help="--export leaves out records with a length-cut turn."
)
@click.option(
    "--require-think-close/--no-require-think-close",
    default=False,
    help="--export leaves out records whose thinking was cut before </think>.",
)
@click.option(
    "--generation-config", type=PATH, help="generation_config.json (or its model directory) for default sampling."
)
@click.option("--limit", type=INTEGER, help="Only the first N usable rows (a trial run).")
@click.option(
    "--dry-run/--no-dry-run",
    default=False,
    help="Count rows, requests and (with a tokenizer) prompt tokens; send nothing.",
)
@click.option(
    "--tokenizer", type=PATH, help="Tokenizer directory for --dry-run [default: --model when it is a local directory]."
)
@click.option(
    "--progress-every",
    type=NUMBER,
    default=30.0,
    help="Seconds between log lines and summary.json updates when stderr is not a terminal.",
)
@click.option("--force/--no-force", default=False, help="Continue a run directory made for another configuration.")
@click.option(
    "--retry-skipped/--no-retry-skipped",
    default=False,
    help="Send the units in skipped.jsonl again (kept as skipped.retried.jsonl).",
)
@click.option(
    "--api-key-env",
    help="Environment variable holding the API key (must be set when named) [default: OPENAI_API_KEY if set].",
)
@click.option("--stream/--no-stream", default=False, help="Stream answers (measures TTFT; more client CPU).")
@click.option("--max-attempts", type=INTEGER, default=6, help="Tries per request, the first included.")
@click.option(
    "--request-timeout",
    "deadline_s",
    type=NUMBER,
    help="Limit on one request in seconds [default: 120 + max_tokens / 10].",
)
@click.option("--grace-s", type=NUMBER, default=30.0, help="Seconds in-flight requests get after Ctrl-C.")
@click.option(
    "--backend",
    default="local",
    help="local (one process) | ray (an actor pool on a Ray cluster; pip install 'tokenplan[ray]').",
)
@click.option(
    "--ray-address",
    help="Ray cluster to join: head:6379, auto (the one on this node) or ray://head:10001 [default: $RAY_ADDRESS, else a new local one].",
)
@click.option("--actors", type=INTEGER, default=2, help="Ray actors (client processes) sharing the endpoints.")
@click.option("--quiet/--no-quiet", default=False, help="No live display.")
@click.option(
    "--extra-body-override/--no-extra-body-override",
    default=False,
    help="Let --extra-body replace fields tokenplan sets (messages, model, n, seed, max_tokens, max_completion_tokens).",
)
@click.option(
    "--max-answer-bytes",
    type=INTEGER,
    help="Cap on one answer body in bytes; a larger answer fails its row [default: 1 MiB + 1 KiB per max-tokens].",
)
@click.option("--json", "json_out", is_flag=True, help="Print the summary as JSON.")
def generate_command(**o: Any) -> None:
    """Regenerate or complete a dataset through OpenAI-compatible servers, exactly once, resumably."""
    request = GenerateRequest.build(**_request_fields(o))
    if o["dry_run"]:
        print_dry_run(request, o["json_out"])
        return
    result = _run(request, o["quiet"] or o["json_out"], o["progress_every"])
    if o["json_out"]:
        print(json.dumps(result.summary, indent=2))
    else:
        print(summary_text(result))
    used = result.units_total // max(request.job.n, 1)  # rows, as rejected_rows counts them (--n samples each)
    if result.rejected_rows > used > 0:  # most of the input unusable: likely its shape, not its rows
        click.echo(
            f"warning: {result.rejected_rows:,} rows were rejected and {used:,} used: the input's "
            f"shape may not be one generate reads (the reasons are in {result.run_dir / 'rejects.jsonl'})",
            err=True,
        )
    _exit_status(result, o["inputs"])


# Options that shape the output here rather than the job; and the request's name where it differs
_DISPLAY_ONLY = ("quiet", "json_out", "no_seed", "progress_every")
_RENAMED = {"out": "out_dir", "endpoint": "endpoints"}


def _request_fields(o: dict[str, Any]) -> dict[str, Any]:
    """GenerateRequest.build's keywords from the options: the seed (``--seed``/``--no-seed``), the
    parsed ``--extra-body``, and progress lines only where stderr is not a terminal."""
    fields = {_RENAMED.get(k, k): v for k, v in o.items() if k not in _DISPLAY_ONLY}
    return fields | {
        "inputs": list(o["inputs"]),
        "endpoints": list(o["endpoint"]),
        "seed": _job_seed(o["seed"], o["no_seed"]),
        "extra_body": _json_object(o["extra_body"]),
        "progress_every_s": None if console_is_terminal() else o["progress_every"],
    }


def _run(request: GenerateRequest, quiet: bool, progress_every: float) -> GenerateResult:
    """Run the job with the live display on a terminal, one log line per ``progress_every``
    seconds off a terminal, or nothing when ``quiet``; warnings and notes go to stderr."""
    console = Console(stderr=True)

    def warn(text: str) -> None:
        console.print(f"warning: {text}", markup=False, highlight=False, soft_wrap=True)

    if not console.is_terminal and not quiet:
        result = generate(request, on_progress=log_every(progress_every, console), on_warning=warn)
    elif quiet or not console.is_terminal:
        result = generate(request, on_warning=warn)
    else:
        with Live(console=console, refresh_per_second=4, transient=False) as live:
            result = generate(request, on_progress=lambda s: live.update(progress_table(s)), on_warning=warn)
    for note in result.notes:  # one line each, as the warnings (grep-able logs; no markup in paths)
        prefix = "" if note.startswith("warning: ") else "note: "  # a runner's warning keeps its own word
        console.print(f"{prefix}{note}", markup=False, highlight=False, soft_wrap=True)
    return result


def _exit_status(result: GenerateResult, inputs: Sequence[str]) -> None:
    """Exit 2 when no row was usable, the export failed or units are left in ``errors.jsonl``, 130
    when interrupted (after the summary)."""
    if result.units_total == 0 and result.rejected_rows:  # e.g. a file in a shape no reader knows
        raise InputError(
            "input",
            " ".join(inputs),
            f"at least one usable row (all {result.rejected_rows:,} rows "
            f"were rejected; the reasons are in {result.run_dir / 'rejects.jsonl'})",
        )
    if result.units_total == 0 and not result.rejected_rows:
        raise InputError("input", " ".join(inputs), "at least one row (it holds none)")
    if result.interrupted:
        sys.exit(EXIT_INTERRUPTED)  # SystemExit: a status of its own, after the summary
    if result.export_error is not None:
        raise ExportError(result.export_error)  # after the summary: one line, exit 2
    if result.errors:  # a run with work undone never exits 0 (the rows wait in errors.jsonl)
        raise ServerError(
            f"{result.errors:,} of {result.units_total:,} units failed every try (the reasons are in "
            f"{result.run_dir / 'errors.jsonl'}); rerun the same command to send them again"
        )


def _job_seed(seed: int | None, no_seed: bool) -> int | None:
    """``--seed`` (default 0), or None for ``--no-seed``; both given is one line naming them (exit 2)."""
    if no_seed and seed is not None:
        raise InputError("--no-seed", f"--seed {seed}", "one of --seed N or --no-seed")
    return None if no_seed else (seed if seed is not None else 0)


def _json_object(text: str | None) -> dict:
    """``--extra-body``: a JSON object, else one line naming the option (exit 2)."""
    if text is None:
        return {}
    allowed = "a JSON object, e.g. '{\"ignore_eos\": true}'"
    try:
        value = parse_json(text, "--extra-body")
    except ConfigError as problem:  # not JSON, nested past MAX_NESTING, a key twice
        shown = text if len(text) <= 80 else f"{text[:77]}..."
        raise InputError("extra-body", shown, f"{allowed}; {str(problem).removeprefix('--extra-body: ')}") from None
    if not isinstance(value, dict):
        raise InputError("extra-body", text, allowed)
    return value
