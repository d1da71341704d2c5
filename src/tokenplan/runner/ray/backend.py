"""The Ray backend of ``generate`` (``--backend ray``): the same run directory, rows and summary as
the local backend, with the sending done by an actor pool (:mod:`tokenplan.runner.ray.driver`).

Order matters for exactly-once: the manifest is checked (or written), then the epoch is raised
(:func:`~tokenplan.runner.store.fencing.advance_epoch`, which fences every actor of an earlier run), and
only then is the done-set read. Ray itself is imported only when a run starts; a core install
without Ray gets a one-line :class:`~tokenplan.errors.InputError` naming ``pip install 'tokenplan[ray]'``.
"""

from __future__ import annotations

from collections.abc import Callable

from tokenplan.runner.finish import close_invocation
from tokenplan.runner.input.files import ReadStats
from tokenplan.runner.input.rows import limited, read_rows, until_broken
from tokenplan.runner.prepare import check_backend
from tokenplan.runner.progress import Snapshot
from tokenplan.runner.rolling import invocation_checkpoint
from tokenplan.runner.spec import RunOutcome, RunSpec, duplicate_notes, start_progress
from tokenplan.runner.store.fencing import advance_epoch
from tokenplan.runner.store.rundir import RunDir


def run_ray_backend(
    spec: RunSpec, on_progress: Callable[[Snapshot], None] | None, on_note: Callable[[str], None] | None
) -> RunOutcome:
    """Run ``spec`` on Ray; see :func:`tokenplan.runner.backend.run`. The outcome's notes name the
    epoch and the actors (and, without ``on_note``, each actor event); ``summary_extra["ray"]``
    holds the epoch, the actors and :class:`~tokenplan.runner.ray.driver.RayStats`.

    Raises:
        InputError: Ray is not installed.
        InputBroken: an input file broke part-way (raised once the units sent were settled).
        RunDirError, ServerError: as the local backend.
    """
    check_backend("ray")  # also checked with the options, before the run directory is made
    from tokenplan.runner.ray.driver import RayRun, run_ray

    epochs: list[int] = []
    rundir = RunDir.open(
        spec.out_dir,
        spec.identity,
        force=spec.force,
        shard_max_bytes=spec.shard_max_bytes,
        retry_skipped=spec.retry_skipped,
        # under the directory's lock, before the done-set is read: fences earlier runs' actors
        fence=lambda path: epochs.append(advance_epoch(path)),
    )
    epoch = epochs[0]
    notes = duplicate_notes(rundir) + rundir.notes
    progress = start_progress(spec, rundir)
    read_stats = ReadStats()
    events: list[str] = []

    def note(text: str) -> None:
        events.append(text)
        if on_note is not None:
            on_note(text)

    try:
        source = until_broken(
            limited(read_rows(spec.files, read_stats, rundir.done_ids, spec.job.mode), spec.limit), read_stats
        )
        run = RayRun(
            rundir,
            epoch,
            source,
            spec.job,
            spec.endpoints,
            spec.pool,
            spec.api_key,
            spec.shard_max_bytes,
            spec.actors,
            spec.ray_address,
            progress,
            invocation_checkpoint(on_progress, rundir.path, rundir.invocation_id),
            note,
        )
        tally = run_ray(run)
        # its line, under the lock (a run that raised leaves its checkpoint to the next open)
        invocation = close_invocation(rundir.path, rundir.invocation_id, tally, progress, run.stats.served)
    finally:
        rundir.close()
    if read_stats.broken is not None:  # the rows after the break were never read: not a success
        raise read_stats.broken
    notes.append(
        f"ray backend: epoch {epoch}, {spec.actors} actors" + (f"; {len(events)} actor events" if events else "")
    )
    if on_note is None:
        notes.extend(events)
    extra = {"ray": {"epoch": epoch, "actors": spec.actors, **run.stats.as_record()}}
    outside = set() if tally.stopped else rundir.done_ids.stored_outside_input()
    return RunOutcome(
        rundir.path, tally, progress, read_stats.blank_lines, notes, extra, outside, rundir.invocation_id, invocation
    )
