"""``generate``: regenerate or complete a dataset through OpenAI-compatible servers, exactly once.

Usage::

    from tokenplan.api.generate import GenerateRequest, generate

    result = generate(GenerateRequest(inputs=["data.jsonl"], out_dir="run", model="qwen",
                                      endpoints=["http://127.0.0.1:8000/v1"]))
    print(result.stored, result.errors, result.accounting_ok)

Rerunning the same request on the same ``out_dir`` continues where the last run stopped (see
:mod:`tokenplan.runner.store.rundir`). The API key is read from the environment variable named by
``api_key_env`` (default: ``OPENAI_API_KEY`` when set; a local server needs none) and is never
logged or written.

Everything that can be checked without a server is checked before anything is sent
(:func:`check_request`): the input files, a named API-key variable, the plan file, ``--export``
and ``--out``. A failed export at the end does not lose the run: the records stay in the run
directory and the result carries ``export_error``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from yarl import URL

from tokenplan.api._generate_sampling import greedy_warnings, model_context  # noqa: F401 - re-exported
from tokenplan.api._loop import loop_running, run_blocking
from tokenplan.api.generate_request import GenerateRequest
from tokenplan.api.generate_results import ExportError, GenerateResult  # noqa: F401 - re-exported
from tokenplan.client.auth import api_key_from_env
from tokenplan.client.endpoints import PoolSettings
from tokenplan.client.retry import RetryPolicy, deadline_s
from tokenplan.files.plan_hint import PlanHint, plan_model_mismatch, read_plan
from tokenplan.runner.backend import run, run_async
from tokenplan.runner.defaults import job_sampling
from tokenplan.runner.dryrun import DryRun, default_tokenizer, dry_run
from tokenplan.runner.finish import ExportSpec, finish_run
from tokenplan.runner.input.files import check_readable, expand_inputs
from tokenplan.runner.limits import MAX_CONCURRENCY
from tokenplan.runner.paths import check_output_file, check_run_dir
from tokenplan.runner.progress import Snapshot  # noqa: F401 - re-exported: what on_progress receives
from tokenplan.runner.requests import Sampling
from tokenplan.runner.rolling import progress_line  # noqa: F401 - re-exported: the CLI's log line
from tokenplan.runner.spec import JobSettings, RunOutcome, RunSpec, job_identity

DEFAULT_CONCURRENCY = 64  # per endpoint, when neither --concurrency nor a plan gives one


@dataclass(frozen=True, slots=True)
class Checked:
    """What :func:`check_request` found: input files, API key, plan, notes and warnings."""

    files: list[Path]
    api_key: str | None
    hint: PlanHint
    notes: list[str]
    warnings: list[str]
    sampling: Sampling | None = None  # resolved (runner.defaults); None only when built by hand


def check_request(request: GenerateRequest) -> Checked:
    """Everything that can be checked before sending anything, cheapest first; the run
    directory is created last, only when every other check passed.

    Raises:
        InputError: no input file, a named ``api_key_env`` that is unset, an ``export`` path
            that cannot be written, an ``out_dir`` that is a file or cannot be created.
        ConfigError: an unreadable plan file.
    """
    files = expand_inputs(request.inputs)
    check_readable(files)
    api_key = api_key_from_env(request.api_key_env)
    hint = PlanHint(None, None, None)
    notes: list[str] = []
    warnings: list[str] = []
    if api_key and any(URL(u).user is not None for u in request.endpoints):
        warnings.append(
            "an --endpoint carries user:password and an API key is set: the API key is sent "
            "(Authorization: Bearer), the URL's credentials are not"
        )
    if request.plan is not None:
        hint, notes = read_plan(request.plan, MAX_CONCURRENCY)
        if plan_model_mismatch(hint.model, request.model):
            warnings.append(
                f"the plan {request.plan} was made for model {hint.model!r}, but --model is "
                f"{request.model!r}: its concurrency and throughput may not fit this model"
            )
    sampling, sampling_notes = resolve_sampling(request, hint)
    notes += sampling_notes
    warnings += greedy_warnings(sampling, request.n)
    export = _export_spec(request)
    if export is not None:
        kind = "a Parquet file path" if export.format == "parquet" else "a JSONL file path"
        check_output_file(export.path, "--export", kind)
    if not request.dry_run:
        check_run_dir(request.out_dir, "--out")
    return Checked(files, api_key, hint, notes, warnings, sampling)


def resolve_sampling(request: GenerateRequest, hint: PlanHint) -> tuple[Sampling, list[str]]:
    """The job's sampling and notes saying where each value came from
    (:func:`tokenplan.runner.defaults.job_sampling`).

    Raises:
        InputError: an unreadable ``generation_config``, or an ``extra_body`` whose nested values
            contradict tokenplan's options (e.g. ``--thinking off`` with ``enable_thinking: true``).
    """
    options = request.sampling
    given = options.model_dump(include={"max_tokens", "temperature", "top_p", "top_k"})
    context = model_context(request.model) if options.max_tokens is None and hint.max_tokens is None else None
    return job_sampling(
        request.model,
        given,
        options.seed,
        options.thinking,
        options.extra_body,
        (hint.max_tokens, request.plan),
        options.generation_config,
        context,
    )


def job_settings(request: GenerateRequest, sampling: Sampling) -> JobSettings:
    """The per-unit settings every backend's dispatcher runs with (the deadline from max_tokens
    unless the user set one)."""
    return JobSettings(
        request.model,
        request.mode,
        request.n,
        request.on_length,
        request.length_retries,
        sampling,
        request.sending.stream,
        RetryPolicy(request.sending.max_attempts, request.sending.retry_base_delay_s),
        request.sending.deadline_s or deadline_s(sampling.max_tokens),
        request.sending.grace_s,
        request.sending.max_answer_bytes,
    )


def generate(
    request: GenerateRequest,
    on_progress: Callable[[Snapshot], None] | None = None,
    on_warning: Callable[[str], None] | None = None,
) -> GenerateResult:
    """Run (or continue) the job; return when every unit is settled or the run was stopped.

    :func:`check_request` runs first; its warnings (a plan made for another model) go to
    ``on_warning`` before anything is sent, or into the result's ``notes`` without it.
    SIGINT/SIGTERM (when called from the main thread) stop sending, give in-flight requests
    ``grace_s`` seconds, flush and return with ``interrupted=True``; a second signal cancels at once.
    A failed ``export`` does not raise: the result carries ``export_error``.

    In a running event loop (a Jupyter cell) the run goes to a worker thread and this call waits
    (:func:`~tokenplan.api._loop.run_blocking`); :func:`generate_async` is the variant to ``await``.

    Raises:
        InputError: a bad input path or option, a named API-key variable that is unset, an
            ``out_dir`` or ``export`` path that cannot be written (all before sending anything).
        ConfigError: an unreadable plan file.
        RunDirError: ``out_dir`` holds another job (use ``force``), is damaged, is in use by
            another process, or a write to it failed (``WriteFailed``: the run stopped sending;
            every record written is whole, and a rerun resumes).
        ServerError: no endpoint serves the model, a fatal answer (401/403/404/422), the same
            400/413 for every row (:mod:`tokenplan.runner.refusals`; those rows stay re-sendable),
            or every endpoint down for ``max_all_down_s``.
        Interrupted: a second SIGINT/SIGTERM stopped the run at once (exit status 130).
    """
    if loop_running():
        return run_blocking(lambda: generate_async(request, on_progress, on_warning))
    spec, notes = _prepare(request, on_warning)
    return _result(request, spec, run(spec, on_progress, on_warning), notes)


async def generate_async(
    request: GenerateRequest,
    on_progress: Callable[[Snapshot], None] | None = None,
    on_warning: Callable[[str], None] | None = None,
) -> GenerateResult:
    """:func:`generate` on the running loop (``await generate_async(request)`` in a notebook): same
    result, same errors. The local backend sends from this loop and installs no signal handler;
    cancelling the awaiting task stops the run (in-flight answers are not stored, every record
    written stays whole, a rerun resumes). Ray, the final count and ``export`` run in worker threads."""
    spec, notes = _prepare(request, on_warning)
    outcome = await run_async(spec, on_progress, on_warning)
    return await asyncio.to_thread(_result, request, spec, outcome, notes)


def _prepare(request: GenerateRequest, on_warning: Callable[[str], None] | None) -> tuple[RunSpec, list[str]]:
    """The checked request's run spec and notes; warnings go to ``on_warning``, else into the notes."""
    checked = check_request(request)
    notes = list(checked.notes)
    for warning in checked.warnings:
        if on_warning is not None:
            on_warning(warning)
        else:
            notes.append(f"warning: {warning}")
    return run_spec(request, checked, notes), notes


def _result(request: GenerateRequest, spec: RunSpec, outcome: RunOutcome, notes: list[str]) -> GenerateResult:
    """Count what the run directory holds, export, and build the result (:func:`finish_run`)."""
    finished, tally = finish_run(spec, outcome, _export_spec(request)), outcome.tally
    return GenerateResult(
        run_dir=outcome.run_dir,
        units_total=finished.units_total,
        stored=finished.stored,
        skipped=finished.skipped,
        errors=finished.errors,
        rejected_rows=tally.rejected_rows,
        already_done=tally.already_done,
        duplicate_records=finished.duplicates,
        interrupted=tally.stopped,
        accounting_ok=finished.accounting_ok,
        summary=finished.summary,
        export_rows=finished.export_rows,
        notes=notes + outcome.notes,
        export_error=finished.export_error,
        blank_lines=outcome.blank_lines,
        not_yet_sent=finished.not_yet_sent,
    )


def run_spec(request: GenerateRequest, checked: Checked, notes: list[str]) -> RunSpec:
    """What the runner needs to run ``request`` (:class:`tokenplan.runner.backend.RunSpec`); the
    concurrency per endpoint is ``--concurrency``, else the plan's, else :data:`DEFAULT_CONCURRENCY`,
    and a note in ``notes`` says which when the user gave none."""
    hint = checked.hint
    concurrency = request.sending.concurrency or hint.concurrency_per_endpoint or DEFAULT_CONCURRENCY
    if request.sending.concurrency is None:
        source = "the plan" if hint.concurrency_per_endpoint else "the default"
        notes.append(f"concurrency {concurrency} per endpoint ({source})")
    sampling = checked.sampling or resolve_sampling(request, hint)[0]
    pool = PoolSettings(
        concurrency,
        request.sending.eject_after_failures,
        request.sending.probe_interval_s,
        request.sending.max_all_down_s,
    )
    job = job_settings(request, sampling)
    return RunSpec(
        backend=request.ray.backend,
        out_dir=request.out_dir,
        identity=job_identity(job, checked.files),
        force=request.force,
        shard_max_bytes=request.shard_max_bytes,
        files=checked.files,
        limit=request.limit,
        n=request.n,
        job=job,
        endpoints=request.endpoints,
        pool=pool,
        api_key=checked.api_key,
        progress_every_s=request.progress_every_s,
        plan_output_tok_s=hint.output_tok_s_total,
        actors=request.ray.actors,
        ray_address=request.ray.ray_address,
        retry_skipped=request.retry_skipped,
    )


def _export_spec(request: GenerateRequest) -> ExportSpec | None:
    """``--export`` as the runner takes it (None: no export)."""
    export = request.export
    if export.path is None:
        return None
    return ExportSpec.of(export.path, export.format, export.drop_length, export.require_think_close)


def dry_run_counts(request: GenerateRequest) -> tuple[DryRun, Sampling, list[str]]:
    """``--dry-run``: what the input asks for (:mod:`tokenplan.runner.dryrun`), the sampling the run
    would use and the notes; nothing is sent and no run directory is made.

    Raises:
        InputError: as :func:`check_request`, or a tokenizer that cannot be loaded.
    """
    checked = check_request(request)
    tokenizer = default_tokenizer(request.tokenizer, request.model)
    counts = dry_run(checked.files, request.mode, request.n, request.limit, tokenizer)
    return counts, checked.sampling or resolve_sampling(request, checked.hint)[0], checked.notes
