"""A ``generate`` run before its first request: check the options (:func:`check_run`: everything
that can be checked without a server, cheapest first, the run directory made last), resolve the
sampling (:mod:`tokenplan.runner.defaults`) and assemble the :class:`~tokenplan.runner.spec.RunSpec`
the backends run (:func:`prepare`). :func:`tokenplan.runner.finish.finish_run` is the other end.

The plan file and the model's context come from above (the api reads them through ``files/`` and
the catalog, which the runner does not import), as callables, so that they are read in the order
of the checks and only when needed.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from yarl import URL

from tokenplan.client.auth import api_key_from_env
from tokenplan.client.endpoints import PoolSettings
from tokenplan.client.retry import RetryPolicy, deadline_s
from tokenplan.errors import InputError
from tokenplan.runner.defaults import greedy_warnings, job_sampling
from tokenplan.runner.input.files import check_readable, expand_inputs
from tokenplan.runner.options import ExportOptions, RunOptions, SendingOptions
from tokenplan.runner.paths import check_output_file, check_run_dir
from tokenplan.runner.requests import Sampling
from tokenplan.runner.spec import ExportSpec, JobSettings, RunSpec, job_identity

DEFAULT_CONCURRENCY = 64  # per endpoint, when neither --concurrency nor a plan gives one


class PlanFigures(Protocol):
    """What a run takes from ``--plan`` (:class:`tokenplan.files.plan_hint.PlanHint`)."""

    @property
    def concurrency_per_endpoint(self) -> int | None: ...
    @property
    def output_tok_s_total(self) -> float | None: ...
    @property
    def max_tokens(self) -> int | None: ...
    @property
    def num_servers(self) -> int | None: ...


@dataclass(frozen=True, slots=True)
class NoPlan:
    """No ``--plan``: no figure from one."""

    concurrency_per_endpoint: None = None
    output_tok_s_total: None = None
    max_tokens: None = None
    num_servers: None = None


# The plan's figures, its notes and its warnings (a plan made for another model), read from a path.
PlanReader = Callable[[Path], tuple[PlanFigures, list[str], list[str]]]
# The model's context (tokens) and where it was read; None: unknown.
ContextReader = Callable[[str], tuple[int, str] | None]


@dataclass(frozen=True, slots=True)
class Checked:
    """What :func:`check_run` found: input files, API key, the plan's figures, the sampling, notes and warnings."""

    files: list[Path]
    api_key: str | None
    plan: PlanFigures
    sampling: Sampling
    notes: list[str]
    warnings: list[str]


def check_run(
    options: RunOptions,
    plan: Path | None,
    read_plan: PlanReader,
    model_context: ContextReader,
    make_run_dir: bool = True,
) -> Checked:
    """Everything that can be checked before sending anything, cheapest first: the input files, the
    API key, the plan, the sampling, the export path; the run directory is created last, only when
    every other check passed (and ``make_run_dir``).

    Raises:
        InputError: no input file, a named ``api_key_env`` that is unset, an unreadable
            ``generation_config``, an ``extra_body`` that contradicts an option, an ``export`` path
            that cannot be written, an ``out_dir`` that is a file or cannot be created.
        ConfigError: an unreadable plan file (from ``read_plan``).
    """
    files = expand_inputs(options.job.inputs)
    check_readable(files)
    server, sampling_options = options.server, options.sampling
    api_key = api_key_from_env(server.api_key_env)
    warnings: list[str] = []
    if api_key and any(URL(u).user is not None for u in server.endpoints):
        warnings.append(
            "an --endpoint carries user:password and an API key is set: the API key is sent "
            "(Authorization: Bearer), the URL's credentials are not"
        )
    figures, notes, plan_warnings = read_plan(plan) if plan is not None else (NoPlan(), [], [])
    warnings += plan_warnings
    servers, given_endpoints = figures.num_servers, len(server.endpoints)
    if servers and figures.output_tok_s_total and given_endpoints < servers:
        # the plan's rate is its servers' together: a run on fewer of them reads low beside it
        warnings.append(
            f"the plan's {figures.output_tok_s_total:,.0f} tok/s is for the {servers:,} servers its launch runs; "
            f"{given_endpoints:,} --endpoint given, so expect about {given_endpoints / servers:.0%} of it "
            f"({plan_share_tok_s(figures, given_endpoints):,.0f} tok/s, the figure progress and summary.json compare with)"
        )
    given = sampling_options.model_dump(include={"max_tokens", "temperature", "top_p", "top_k"})
    # the model's context serves both a run without a cap and one whose plan's cap passes it (a
    # new-user pass: a plan's 32,768 was sent to a model of 2,048 tokens, not read for it)
    unset = sampling_options.max_tokens is None
    sampling, sampling_notes = job_sampling(
        server.model,
        given,
        sampling_options.seed,
        sampling_options.thinking,
        sampling_options.extra_body,
        (figures.max_tokens, plan),
        sampling_options.generation_config,
        model_context(server.model) if unset else None,
    )
    warnings += greedy_warnings(sampling, options.job.n)
    export = export_spec(options.export)
    if export is not None:
        kind = "a Parquet file path" if export.format == "parquet" else "a JSONL file path"
        check_output_file(export.path, "--export", kind)
        _export_apart(Path(export.path), files, Path(options.run_dir.out_dir))
    check_backend(options.ray.backend)
    if make_run_dir:
        check_run_dir(options.run_dir.out_dir, "--out")
    return Checked(files, api_key, figures, sampling, notes + sampling_notes, warnings)


def _export_apart(export: Path, inputs: Sequence[Path], out_dir: Path) -> None:
    """Refuse an ``--export`` path that is one of the inputs or lies inside the run directory:
    writing it would overwrite the dataset or the run's own records (InputError)."""
    target = export.resolve()
    if any(target == Path(f).resolve() for f in inputs):
        raise InputError("--export", str(export), "a path other than the input files (it would overwrite the input)")
    if target.is_relative_to(out_dir.resolve()):
        raise InputError(
            "--export", str(export), f"a path outside the run directory {out_dir} (its records live there)"
        )


def check_backend(backend: str) -> None:
    """Refuse ``--backend ray`` where Ray is not installed (InputError), before a run directory is
    made (it used to be left behind, empty); ``find_spec`` looks without importing Ray."""
    if backend == "ray" and importlib.util.find_spec("ray") is None:
        raise InputError(
            "--backend", "ray", "local, or ray after `pip install 'tokenplan[ray]'` (Ray is not installed)"
        )


def prepare(
    options: RunOptions, checked: Checked, on_warning: Callable[[str], None] | None
) -> tuple[RunSpec, list[str]]:
    """The run spec of checked ``options`` and the notes the result carries: the checks' notes,
    where the concurrency came from, and the warnings when there is no ``on_warning`` to hear them."""
    notes = list(checked.notes)
    for warning in checked.warnings:
        if on_warning is not None:
            on_warning(warning)
        else:
            notes.append(f"warning: {warning}")
    return run_spec(options, checked, notes), notes


def chosen_concurrency(sending: SendingOptions, plan: PlanFigures) -> tuple[int, str | None]:
    """Requests in flight per endpoint: ``--concurrency``, else the plan's, else
    :data:`DEFAULT_CONCURRENCY`; with the note that says which where the user gave none (a run
    and ``--dry-run`` say it alike)."""
    concurrency = sending.concurrency or plan.concurrency_per_endpoint or DEFAULT_CONCURRENCY
    if sending.concurrency is not None:
        return concurrency, None
    source = "the plan" if plan.concurrency_per_endpoint else "the default"
    return concurrency, f"concurrency {concurrency} per endpoint ({source})"


def run_spec(options: RunOptions, checked: Checked, notes: list[str]) -> RunSpec:
    """What the backends need to run ``options``; the concurrency per endpoint is ``--concurrency``,
    else the plan's, else :data:`DEFAULT_CONCURRENCY`, and a note in ``notes`` says which when the
    user gave none. The deadline per request comes from max_tokens unless the user set one."""
    sending, job = options.sending, options.job
    concurrency, said = chosen_concurrency(sending, checked.plan)
    if said is not None:
        notes.append(said)
    settings = JobSettings(
        options.server.model,
        job.mode,
        job.n,
        job.on_length,
        job.length_retries,
        checked.sampling,
        sending.stream,
        RetryPolicy(sending.max_attempts, sending.retry_base_delay_s),
        sending.deadline_s or deadline_s(checked.sampling.max_tokens),
        sending.grace_s,
        sending.max_answer_bytes,
    )
    return RunSpec(
        backend=options.ray.backend,
        out_dir=options.run_dir.out_dir,
        identity=job_identity(settings, checked.files),
        force=options.run_dir.force,
        shard_max_bytes=options.run_dir.shard_max_bytes,
        files=checked.files,
        limit=job.limit,
        n=job.n,
        job=settings,
        endpoints=options.server.endpoints,
        pool=PoolSettings(
            concurrency,
            sending.eject_after_failures,
            sending.probe_interval_s,
            sending.max_all_down_s,
            stall_probe_after_s=sending.stall_probe_after_s,
        ),
        api_key=checked.api_key,
        progress_every_s=options.run_dir.progress_every_s,
        plan_output_tok_s=plan_share_tok_s(checked.plan, len(options.server.endpoints)),
        actors=options.ray.actors,
        ray_address=options.ray.ray_address,
        retry_skipped=options.run_dir.retry_skipped,
        export=export_spec(options.export),
    )


def plan_share_tok_s(plan: PlanFigures, endpoints: int) -> float | None:
    """The plan's output tok/s for the servers a run was given (tokens/s): its whole figure times
    ``endpoints / num_servers`` where the run has fewer endpoints than the plan's launch runs
    servers (a run on 1 of 8 expects 1/8 of it; comparing it with all 8 read as 12 % of plan), the
    whole figure otherwise or where the plan does not say how many servers it runs; None: no
    plan figure."""
    total, servers = plan.output_tok_s_total, plan.num_servers
    if total is None or not servers or endpoints >= servers:
        return total
    return total * endpoints / servers


def export_spec(export: ExportOptions) -> ExportSpec | None:
    """``--export`` as the runner takes it (None: no export)."""
    if export.path is None:
        return None
    return ExportSpec.of(export.path, export.format, export.drop_length, export.require_think_close)
