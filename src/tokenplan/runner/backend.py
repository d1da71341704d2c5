"""The seam between ``generate`` and what sends: one :class:`RunSpec` in, one :class:`RunOutcome`
out, whichever backend runs it.

:mod:`tokenplan.runner.prepare` checks the options and resolves everything that depends on them
(sampling, the concurrency, the job's identity, the key); a backend opens the run directory in the order its
exactly-once argument needs, reads the rows, sends every unit not yet done and returns the tally.
:func:`tokenplan.runner.finish.finish_run` then counts what the run directory holds, whichever
backend wrote it.

Backends: ``local`` (:mod:`tokenplan.runner.local`: one asyncio process) and ``ray``
(:mod:`tokenplan.runner.ray.backend`: an actor pool on a Ray cluster; Ray is imported only when
such a run starts). A new backend is one module with a function of :func:`run`'s shape and one
branch in :func:`run`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from tokenplan.runner.local import run_local, run_local_async
from tokenplan.runner.progress import Snapshot
from tokenplan.runner.spec import RunOutcome, RunSpec


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
        from tokenplan.runner.ray.backend import run_ray_backend

        return run_ray_backend(spec, on_progress, on_note)
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
        from tokenplan.runner.ray.backend import run_ray_backend

        return await asyncio.to_thread(run_ray_backend, spec, on_progress, on_note)
    return await run_local_async(spec, on_progress)
