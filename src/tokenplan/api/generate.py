"""``generate``: regenerate or complete a dataset through OpenAI-compatible servers, exactly once.

Usage::

    from tokenplan.api.generate import GenerateRequest, generate

    result = generate(GenerateRequest.build(inputs=["data.jsonl"], out_dir="run", model="qwen",
                                            endpoints=["http://127.0.0.1:8000/v1"]))
    print(result.stored, result.errors, result.accounting_ok)

Rerunning the same request on the same ``out_dir`` continues where the last run stopped (see
:mod:`tokenplan.runner.store.rundir`). The API key is read from the environment variable named by
``api_key_env`` (default: ``OPENAI_API_KEY`` when set; a local server needs none) and is never
logged or written. Everything that can be checked without a server is checked before anything is
sent (:func:`check_request`); a failed export at the end does not lose the run: the records stay in
the run directory and the result carries ``export_error``.

The run's parts, checks, assembly and end are the runner's (:mod:`tokenplan.runner.options`,
:mod:`~tokenplan.runner.prepare`, :mod:`~tokenplan.runner.finish`); this module reads what the
runner does not (the plan file, the catalog's model context) and makes one call per command.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from tokenplan.catalog import load_model
from tokenplan.client.openai import public_url
from tokenplan.errors import InputError, TokenplanError, allowed_from_validation, shown
from tokenplan.files.plan_hint import PlanHint, plan_model_mismatch, read_plan
from tokenplan.runner.backend import run, run_async
from tokenplan.runner.blocking import loop_running, run_blocking
from tokenplan.runner.dryrun import DryRun, default_tokenizer, dry_run
from tokenplan.runner.finish import ExportError, GenerateResult, finish_run  # noqa: F401 - ExportError re-exported
from tokenplan.runner.limits import MAX_CONCURRENCY
from tokenplan.runner.options import RunOptions
from tokenplan.runner.prepare import Checked, check_run, chosen_concurrency, prepare
from tokenplan.runner.progress import Snapshot  # noqa: F401 - re-exported: what on_progress receives
from tokenplan.runner.requests import Sampling
from tokenplan.runner.rolling import progress_line  # noqa: F401 - re-exported: the CLI's log line
from tokenplan.runner.spec import RunSpec

# The parts of a request (each field of RunOptions is one) and the flat option names (the CLI's,
# and build()'s keywords) of the part fields named otherwise.
GROUPS: dict[str, Any] = {name: field.annotation for name, field in RunOptions.model_fields.items()}
FLAT_NAMES = {("export", "path"): "export", ("export", "format"): "export_format"}
_GROUP_OF = {
    FLAT_NAMES.get((group, name), name): (group, name) for group, model in GROUPS.items() for name in model.model_fields
}


class GenerateRequest(RunOptions):
    """Everything ``generate`` needs, validated once (see :meth:`build`): the run's parts
    (:class:`~tokenplan.runner.options.RunOptions`), the plan file, and ``--dry-run`` (count rows,
    turns and, with a ``tokenizer``, prompt tokens; send nothing: :mod:`tokenplan.runner.dryrun`)."""

    plan: Path | None = None
    dry_run: bool = False
    tokenizer: Path | None = None  # None: --model when it is a local directory

    @classmethod
    def build(cls, **options: Any) -> GenerateRequest:
        """Validate ``options``, named as the CLI's options are (``temperature``, ``export``,
        ``export_format``…); each goes to its part.

        Raises:
            InputError: naming the first bad option, its value and what is allowed.
        """
        fields: dict[str, Any] = {group: {} for group in GROUPS}
        for key, value in options.items():
            group, name = _GROUP_OF.get(key, (None, key))
            if group is None:
                fields[key] = value
            else:
                fields[group][name] = value
        try:
            return cls(**fields)
        except ValidationError as problem:
            raise _input_error(problem.errors()[0]) from None


def _input_error(error: Any) -> InputError:
    """The one-line error of pydantic's first ``error``, named by the flat option name."""
    loc = error["loc"]
    if loc and loc[0] in GROUPS:  # ("sampling",): the part's one model-level check, on extra_body
        name = FLAT_NAMES.get((loc[0], loc[1]), str(loc[1])) if len(loc) > 1 else "extra_body"
        field_name = ".".join([name, *(str(p) for p in loc[2:])]) if loc[0] in ("server", "job") else name
    else:
        field_name = ".".join(str(p) for p in loc)
    # the CLI's names: --format, --request-timeout
    field_name = {"export_format": "format", "deadline_s": "request-timeout"}.get(field_name, field_name)
    value = error.get("input")
    if field_name == "endpoints" or field_name.startswith("endpoints."):
        # named as the flag (--endpoint), one URL as it was given (not a Python list of one)
        field_name = "endpoint"
        value = [public_url(u) for u in value] if isinstance(value, list) else public_url(str(value))
        value = value[0] if isinstance(value, list) and len(value) == 1 else value
    elif isinstance(value, dict) and "extra_body" in value:
        value = value["extra_body"]
        value = value if len(repr(value)) <= 200 else repr(value)[:200] + "…"  # e.g. nested 300 deep
    return InputError(field_name, shown(value), allowed_from_validation(error))


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
    (:func:`~tokenplan.runner.blocking.run_blocking`); :func:`generate_async` is the variant to ``await``.

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
    return finish_run(spec, run(spec, on_progress, on_warning), notes)


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
    return await asyncio.to_thread(finish_run, spec, outcome, notes)


def _prepare(request: GenerateRequest, on_warning: Callable[[str], None] | None) -> tuple[RunSpec, list[str]]:
    return prepare(request, check_request(request), on_warning)


def check_request(request: GenerateRequest) -> Checked:
    """Everything that can be checked before sending anything (:func:`tokenplan.runner.prepare.check_run`),
    the run directory made last, and not for ``--dry-run``.

    Raises:
        InputError: no input file, a named ``api_key_env`` that is unset, an ``export`` path
            that cannot be written, an ``out_dir`` that is a file or cannot be created.
        ConfigError: an unreadable plan file.
    """
    return check_run(request, request.plan, _read_plan(request.server.model), model_context, not request.dry_run)


def _read_plan(model: str) -> Callable[[Path], tuple[PlanHint, list[str], list[str]]]:
    """A reader of ``--plan`` that warns when the plan was made for another model than ``model``."""

    def read(path: Path) -> tuple[PlanHint, list[str], list[str]]:
        hint, notes = read_plan(path, MAX_CONCURRENCY)
        if not plan_model_mismatch(hint.model, model):
            return hint, notes, []
        return (
            hint,
            notes,
            [
                f"the plan {path} was made for model {hint.model!r}, but --model is "
                f"{model!r}: its concurrency and throughput may not fit this model"
            ],
        )

    return read


def model_context(model: str) -> tuple[int, str] | None:
    """``max_position_embeddings`` of ``model`` (tokens) and where it was read: the ``config.json``
    of a local model directory, else the catalog entry of that name or Hugging Face id; None when
    neither knows the name (a served alias such as ``default``) or the file cannot be read."""
    try:
        spec = load_model(model)
    except TokenplanError:
        return None
    if not spec.max_context_tokens:
        return None
    where = str(Path(model) / "config.json") if Path(model).is_dir() else f"catalog model {spec.name}"
    return spec.max_context_tokens, f"max_position_embeddings of {where}"


def dry_run_counts(request: GenerateRequest) -> tuple[DryRun, Sampling, list[str], list[str]]:
    """``--dry-run``: what the input asks for (:mod:`tokenplan.runner.dryrun`), the sampling the run
    would use, the notes and the warnings the run would print first (a ``--plan`` made for another
    model, greedy decoding with ``--n`` or thinking); nothing is sent and no run directory is made.

    Raises:
        InputError: as :func:`check_request`, or a tokenizer that cannot be loaded.
    """
    checked = check_request(request)
    tokenizer, option = default_tokenizer(request.tokenizer, request.server.model)
    job, notes = request.job, list(checked.notes)
    counts = dry_run(checked.files, job.mode, job.n, job.limit, tokenizer, notes, option)
    said = chosen_concurrency(request.sending, checked.plan)[1]
    return counts, checked.sampling, notes + ([said] if said else []), list(checked.warnings)
