"""``tokenplan generate``: options → :class:`GenerateRequest` → :func:`generate` → live display and
summary (:mod:`tokenplan.report.generate`).

Each option's type and help is one named ``Annotated`` alias below, in the order ``--help`` lists.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.live import Live

from tokenplan.api.generate import ExportError, GenerateRequest, GenerateResult, generate
from tokenplan.cli.app import app
from tokenplan.cli.generate_trial import console_is_terminal, log_every, print_dry_run
from tokenplan.errors import ConfigError, InputError
from tokenplan.loaders import parse_json
from tokenplan.report.generate import progress_table, summary_text

EXIT_INTERRUPTED = 130

_Inputs = Annotated[
    list[str], typer.Argument(help="JSONL (plain, .zst, .gz, .bz2, .lz4), JSON or Parquet files or globs.")
]
_Out = Annotated[Path, typer.Option("--out", help="Run directory (created; rerun to resume).")]
_Endpoint = Annotated[
    list[str], typer.Option("--endpoint", help="Server base URL, e.g. http://127.0.0.1:8000/v1; repeatable.")
]
_Model = Annotated[str, typer.Option("--model", help="Model name the servers serve.")]
_Mode = Annotated[str, typer.Option(help="regenerate | complete")]
_Concurrency = Annotated[
    Optional[int], typer.Option(help="Requests in flight per endpoint [default: the plan's, else 64].")
]
_MaxTokens = Annotated[
    Optional[int], typer.Option(help="Max completion tokens per request [default: the plan's output cap, else 4096].")
]
_Temperature = Annotated[
    Optional[float], typer.Option(help="Sampling temperature [default: generation_config.json, else 0].")
]
_TopP = Annotated[
    Optional[float], typer.Option(help="Nucleus sampling top_p [default: generation_config.json, else the server's].")
]
_TopK = Annotated[
    Optional[int], typer.Option(help="top_k sampling [default: generation_config.json, else the server's].")
]
_Seed = Annotated[Optional[int], typer.Option(help="Job seed; each request's seed derives from it [default: 0].")]
_NoSeed = Annotated[bool, typer.Option("--no-seed", help="Send no seed (a server that refuses the field).")]
_Thinking = Annotated[Optional[str], typer.Option(help="on | off (chat_template_kwargs.enable_thinking).")]
_OnLength = Annotated[str, typer.Option(help="keep | drop | retry a 'length' finish.")]
_N = Annotated[int, typer.Option("--n", help="Samples per row (complete mode ids ROWID#k).")]
_ExtraBody = Annotated[Optional[str], typer.Option(help="JSON object merged into every request.")]
_Plan = Annotated[Optional[Path], typer.Option(help="Output of `tokenplan plan --json`.")]
_Export = Annotated[
    Optional[Path],
    typer.Option(
        help="Write all stored records to this file: .parquet, .jsonl (SpecForge training rows), or see --format."
    ),
]
_ExportFormat = Annotated[
    Optional[str],
    typer.Option("--format", help="--export format: parquet | jsonl | openai-batch [default: from the suffix]."),
]
_DropLength = Annotated[bool, typer.Option(help="--export leaves out records with a length-cut turn.")]
_RequireThinkClose = Annotated[
    bool, typer.Option(help="--export leaves out records whose thinking was cut before </think>.")
]
_GenerationConfig = Annotated[
    Optional[Path], typer.Option(help="generation_config.json (or its model directory) for default sampling.")
]
_Limit = Annotated[Optional[int], typer.Option(help="Only the first N usable rows (a trial run).")]
_DryRun = Annotated[bool, typer.Option(help="Count rows, requests and (with a tokenizer) prompt tokens; send nothing.")]
_Tokenizer = Annotated[
    Optional[Path],
    typer.Option(help="Tokenizer directory for --dry-run [default: --model when it is a local directory]."),
]
_ProgressEvery = Annotated[
    float, typer.Option(help="Seconds between log lines and summary.json updates when stderr is not a terminal.")
]
_Force = Annotated[bool, typer.Option(help="Continue a run directory made for another configuration.")]
_RetrySkipped = Annotated[
    bool, typer.Option(help="Send the units in skipped.jsonl again (kept as skipped.retried.jsonl).")
]
_ApiKeyEnv = Annotated[
    Optional[str],
    typer.Option(
        help="Environment variable holding the API key (must be set when named) [default: OPENAI_API_KEY if set]."
    ),
]
_Stream = Annotated[bool, typer.Option(help="Stream answers (measures TTFT; more client CPU).")]
_MaxAttempts = Annotated[int, typer.Option(help="Tries per request, the first included.")]
_RequestTimeout = Annotated[
    Optional[float],
    typer.Option("--request-timeout", help="Limit on one request in seconds [default: 120 + max_tokens / 10]."),
]
_Grace = Annotated[float, typer.Option(help="Seconds in-flight requests get after Ctrl-C.")]
_Backend = Annotated[
    str, typer.Option(help="local (one process) | ray (an actor pool on a Ray cluster; pip install 'tokenplan[ray]').")
]
_RayAddress = Annotated[
    Optional[str],
    typer.Option(
        help="Ray cluster to join: head:6379, auto (the one "
        "on this node) or ray://head:10001 [default: $RAY_ADDRESS, "
        "else a new local one]."
    ),
]
_Actors = Annotated[int, typer.Option(help="Ray actors (client processes) sharing the endpoints.")]
_Quiet = Annotated[bool, typer.Option(help="No live display.")]
_ExtraBodyOverride = Annotated[
    bool,
    typer.Option(
        help="Let --extra-body replace fields tokenplan sets "
        "(messages, model, n, seed, max_tokens, max_completion_tokens)."
    ),
]
_MaxAnswerBytes = Annotated[
    Optional[int],
    typer.Option(
        help="Cap on one answer body in bytes; a larger answer fails its row [default: 1 MiB + 1 KiB per max-tokens]."
    ),
]
_Json = Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")]


@app.command("generate")
def generate_command(
    inputs: _Inputs,
    out: _Out,
    endpoint: _Endpoint,
    model: _Model,
    mode: _Mode = "regenerate",
    concurrency: _Concurrency = None,
    max_tokens: _MaxTokens = None,
    temperature: _Temperature = None,
    top_p: _TopP = None,
    top_k: _TopK = None,
    seed: _Seed = None,
    no_seed: _NoSeed = False,
    thinking: _Thinking = None,
    on_length: _OnLength = "keep",
    n: _N = 1,
    extra_body: _ExtraBody = None,
    plan: _Plan = None,
    export: _Export = None,
    export_format: _ExportFormat = None,
    drop_length: _DropLength = False,
    require_think_close: _RequireThinkClose = False,
    generation_config: _GenerationConfig = None,
    limit: _Limit = None,
    dry_run: _DryRun = False,
    tokenizer: _Tokenizer = None,
    progress_every: _ProgressEvery = 30.0,
    force: _Force = False,
    retry_skipped: _RetrySkipped = False,
    api_key_env: _ApiKeyEnv = None,
    stream: _Stream = False,
    max_attempts: _MaxAttempts = 6,
    deadline_s: _RequestTimeout = None,
    grace_s: _Grace = 30.0,
    backend: _Backend = "local",
    ray_address: _RayAddress = None,
    actors: _Actors = 2,
    quiet: _Quiet = False,
    extra_body_override: _ExtraBodyOverride = False,
    max_answer_bytes: _MaxAnswerBytes = None,
    json_out: _Json = False,
) -> None:
    """Regenerate or complete a dataset through OpenAI-compatible servers, exactly once, resumably."""
    request = GenerateRequest.build(
        inputs=inputs,
        out_dir=out,
        endpoints=endpoint,
        model=model,
        mode=mode,
        concurrency=concurrency,
        extra_body_override=extra_body_override,
        max_answer_bytes=max_answer_bytes,
        max_tokens=max_tokens,
        temperature=temperature,
        top_p=top_p,
        top_k=top_k,
        seed=_job_seed(seed, no_seed),
        thinking=thinking,
        on_length=on_length,
        n=n,
        extra_body=_json_object(extra_body),
        plan=plan,
        export=export,
        force=force,
        retry_skipped=retry_skipped,
        api_key_env=api_key_env,
        stream=stream,
        max_attempts=max_attempts,
        deadline_s=deadline_s,
        grace_s=grace_s,
        export_format=export_format,
        drop_length=drop_length,
        require_think_close=require_think_close,
        generation_config=generation_config,
        limit=limit,
        dry_run=dry_run,
        tokenizer=tokenizer,
        backend=backend,
        ray_address=ray_address,
        actors=actors,
        progress_every_s=None if console_is_terminal() else progress_every,
    )
    if dry_run:
        print_dry_run(request, json_out)
        return
    result = _run(request, quiet or json_out, progress_every)
    if json_out:
        print(json.dumps(result.summary, indent=2))
    else:
        print(summary_text(result))
    _exit_status(result, inputs)


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
    for note in result.notes:
        console.print(f"note: {note}")
    return result


def _exit_status(result: GenerateResult, inputs: list[str]) -> None:
    """Exit 2 when no row was usable or the export failed, 130 when interrupted (after the summary)."""
    if result.units_total == 0 and result.rejected_rows:  # e.g. a file in a shape no reader knows
        raise InputError(
            "input",
            " ".join(inputs),
            f"at least one usable row (all {result.rejected_rows:,} rows "
            f"were rejected; the reasons are in {result.run_dir / 'rejects.jsonl'})",
        )
    if result.interrupted:
        sys.exit(EXIT_INTERRUPTED)  # SystemExit: typer.Exit is swallowed in non-standalone mode
    if result.export_error is not None:
        raise ExportError(result.export_error)  # after the summary: one line, exit 2


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
