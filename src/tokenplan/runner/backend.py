"""The seam between ``generate`` and what sends: one :class:`RunSpec` in, one :class:`RunOutcome`
out, whichever backend runs it.

The api layer checks the request and resolves everything that depends on it (sampling, the
concurrency, the job's identity, the key); a backend opens the run directory in the order its
exactly-once argument needs, reads the rows, sends every unit not yet done and returns the tally.
:func:`tokenplan.runner.finish.finish_run` then counts what the run directory holds, whichever
backend wrote it.

Backends: ``local`` (:mod:`tokenplan.runner.local`: one asyncio process) and ``ray``
(:mod:`tokenplan.runner.ray_backend`: an actor pool on a Ray cluster; Ray is imported only when
such a run starts). A new backend is one module with a function of :func:`run`'s shape and one
branch in :func:`run`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from tokenplan.client.endpoints import PoolSettings
from tokenplan.runner.dispatch import JobSettings, RunTally
from tokenplan.runner.input_files import count_rows_or_none
from tokenplan.runner.progress import Progress, Snapshot
from tokenplan.runner.rundir import RunDir


@dataclass(frozen=True, slots=True)
class RunSpec:
    """One run, resolved from the request.

    Attributes:
        backend: ``local`` or ``ray``.
        out_dir: the run directory; ``identity`` the job it is bound to (its manifest), ``force``
            rebinds a directory that holds another job; ``shard_max_bytes`` the size of one shard (bytes);
            ``retry_skipped`` sends the units of ``skipped.jsonl`` again.
        files: the input files; ``limit`` the first N usable rows only; ``n`` samples per row.
        job: how each unit is generated.
        endpoints: API roots; ``pool`` their settings (the one concurrency limit); ``api_key`` or None.
        progress_every_s: a rolling ``summary.json`` every S seconds (None: none).
        plan_output_tok_s: the plan's output tok/s, for the progress display (None: no plan).
        actors, ray_address: the Ray backend's actor count and cluster (None: join or start one).
    """

    backend: Literal["local", "ray"]
    out_dir: Path
    identity: dict[str, Any]
    force: bool
    shard_max_bytes: int
    files: list[Path]
    limit: int | None
    n: int
    job: JobSettings
    endpoints: list[str]
    pool: PoolSettings
    api_key: str | None = field(repr=False)
    progress_every_s: float | None = None
    plan_output_tok_s: float | None = None
    actors: int = 2
    ray_address: str | None = None
    retry_skipped: bool = False


@dataclass(slots=True)
class RunOutcome:
    """What a backend did: the tally, the progress counters, blank input lines (not rows), notes
    (duplicate records dropped, the Ray side's events) and what the backend adds to
    ``summary.json`` after the export (``{"ray": ...}``; empty for the local backend)."""

    run_dir: Path
    tally: RunTally
    progress: Progress
    blank_lines: int
    notes: list[str] = field(default_factory=list)
    summary_extra: dict[str, Any] = field(default_factory=dict)


def run(
    spec: RunSpec, on_progress: Callable[[Snapshot], None] | None = None, on_note: Callable[[str], None] | None = None
) -> RunOutcome:
    """Run (or continue) ``spec`` on its backend; return when every unit is settled or the run stopped.

    ``on_note`` hears what happens on the way (a Ray actor that died); without it such notes go
    into the outcome's ``notes``.

    Raises:
        InputError: ``ray`` without Ray installed.
        RunDirError: ``out_dir`` holds another job, is damaged, in use, or a write to it failed.
        ServerError: no endpoint serves the model, a fatal answer, or every endpoint down too long.
    """
    if spec.backend == "ray":
        from tokenplan.runner.ray_backend import run_ray_backend

        return run_ray_backend(spec, on_progress, on_note)
    from tokenplan.runner.local import run_local

    return run_local(spec, on_progress, on_note)


async def run_async(
    spec: RunSpec, on_progress: Callable[[Snapshot], None] | None = None, on_note: Callable[[str], None] | None = None
) -> RunOutcome:
    """:func:`run` on the running event loop (Jupyter's): the local backend sends from this loop
    (:func:`~tokenplan.runner.local.run_local_async`: no signal handlers installed; cancelling the
    awaiting task stops the run, resumably); the Ray backend's driver runs in a worker thread
    (``asyncio.to_thread``), so the loop stays free, and a cancellation does not reach it.

    Raises:
        InputError, RunDirError, ServerError: as :func:`run`.
    """
    if spec.backend == "ray":
        from tokenplan.runner.ray_backend import run_ray_backend

        return await asyncio.to_thread(run_ray_backend, spec, on_progress, on_note)
    from tokenplan.runner.local import run_local_async

    return await run_local_async(spec, on_progress)


def duplicate_notes(rundir: RunDir) -> list[str]:
    """The note a reopened run directory earns when its scan dropped duplicate records."""
    if not rundir.stats.duplicate_ids:
        return []
    return [
        f"dropped {rundir.stats.duplicate_ids:,} duplicate records from {rundir.path} "
        "(the first record of each id is kept)"
    ]


def start_progress(spec: RunSpec, rundir: RunDir) -> Progress:
    """Progress against the input's rows (the first ``limit``) × n; before the first unit
    finishes, the ETA assumes max_tokens per unit. Rows are None when a file breaks part-way."""
    rows = count_rows_or_none(spec.files)
    if rows is not None and spec.limit is not None:
        rows = min(spec.limit, rows)
    return Progress(
        time.monotonic(),
        None if rows is None else rows * spec.n,
        float(spec.job.sampling.max_tokens),
        done_before=len(rundir.done_ids),
        plan_output_tok_s=spec.plan_output_tok_s,
    )
