"""``generate --backend ray``: the same job, request checks, run directory and summary as the local
backend, with the sending done by an actor pool on a Ray cluster (:mod:`tokenplan.runner.ray_driver`).

Order matters for exactly-once: the manifest is checked (or written), then the epoch is raised
(:func:`~tokenplan.runner.fencing.advance_epoch`, which fences every actor of an earlier run), and
only then is the done-set read. Ray itself is imported only when a run starts; a core install
without Ray gets a one-line :class:`~tokenplan.errors.InputError` naming ``pip install 'tokenplan[ray]'``.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable

from tokenplan.api.generate import (DEFAULT_CONCURRENCY, Checked, GenerateRequest, GenerateResult, _finish,
                                    duplicate_notes, job_identity, job_settings, resolve_sampling, start_progress)
from tokenplan.client.endpoints import PoolSettings
from tokenplan.errors import InputError
from tokenplan.runner.fencing import advance_epoch
from tokenplan.runner.progress import Snapshot
from tokenplan.runner.rows import ReadStats, limited, read_rows
from tokenplan.runner.rundir import RunDir, check_manifest


def generate_ray(request: GenerateRequest, checked: Checked, notes: list[str],
                 on_progress: Callable[[Snapshot], None] | None,
                 on_warning: Callable[[str], None] | None) -> GenerateResult:
    """Run (or continue) ``request`` on Ray; see :func:`tokenplan.api.generate.generate`.

    Raises:
        InputError: Ray is not installed.
        RunDirError, ServerError: as the local backend.
    """
    if importlib.util.find_spec("ray") is None:
        raise InputError("--backend", "ray", "local, or ray after `pip install 'tokenplan[ray]'` "
                         "(Ray is not installed)")
    from tokenplan.runner.ray_driver import RayRun, run_ray

    hint, files = checked.hint, checked.files
    concurrency = request.concurrency or hint.concurrency_per_endpoint or DEFAULT_CONCURRENCY
    if request.concurrency is None:
        notes.append(f"concurrency {concurrency} per endpoint "
                     f"({'the plan' if hint.concurrency_per_endpoint else 'the default'})")
    sampling = checked.sampling or resolve_sampling(request, hint)[0]
    identity = job_identity(request, sampling)
    (request.out_dir / "shards").mkdir(parents=True, exist_ok=True)
    check_manifest(request.out_dir, identity, force=request.force)
    epoch = advance_epoch(request.out_dir)  # fences earlier runs' actors before the done-set is read
    rundir = RunDir.open(request.out_dir, identity, force=request.force, shard_max_bytes=request.shard_max_bytes)
    notes.extend(duplicate_notes(rundir, request))
    job = job_settings(request, sampling)
    progress = start_progress(request, files, sampling, rundir, hint)
    read_stats = ReadStats()
    pool = PoolSettings(concurrency, request.eject_after_failures, request.probe_interval_s,
                        request.max_all_down_s)
    events: list[str] = []

    def note(text: str) -> None:
        events.append(text)
        if on_warning is not None:
            on_warning(text)

    try:
        run = RayRun(rundir, epoch, limited(read_rows(files, read_stats), request.limit), job, request.endpoints, pool,
                     checked.api_key, request.shard_max_bytes, request.actors, request.ray_address,
                     progress, on_progress, note)
        tally = run_ray(run)
    finally:
        rundir.close()
    notes.append(f"ray backend: epoch {epoch}, {request.actors} actors"
                 + (f"; {len(events)} actor events" if events else ""))
    if on_warning is None:
        notes.extend(events)
    result = _finish(request, rundir.path, tally, progress, notes, read_stats.blank_lines, files)
    result.summary["ray"] = {"epoch": epoch, "actors": request.actors, **run.stats.as_record()}
    (rundir.path / "summary.json").write_text(json.dumps(result.summary, indent=2))
    return result
