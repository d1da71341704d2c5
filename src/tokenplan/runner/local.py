"""The local backend of ``generate``: one asyncio process sends every unit not yet done.

Order: the open-file limit is checked for the concurrency, a Ray-backend run's leftover actors are
fenced (:func:`~tokenplan.runner.store.fencing.fence_earlier_actors`), the run directory is opened (its
done-set read), the endpoints are health-checked, and the :class:`~tokenplan.runner.dispatch.Dispatcher`
sends until every unit is settled. SIGINT/SIGTERM (when run from the main thread on a loop of its
own) stop sending and give in-flight requests ``grace_s`` seconds; a second signal cancels at once
and raises :class:`~tokenplan.errors.Interrupted` (exit status 130, one line: every record written
is kept). The loop is uvloop's where installed (:func:`event_loop_factory`).
:func:`run_local_async` runs on the caller's event loop (Jupyter's) and leaves its signals alone:
cancelling the awaiting task stops the run (in-flight answers are not stored; a rerun sends them).
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections.abc import Callable

from tokenplan.client.endpoints import EndpointPool, set_aside_warning
from tokenplan.errors import Interrupted, TokenplanError
from tokenplan.runner.dispatch import Dispatcher
from tokenplan.runner.finish import close_invocation
from tokenplan.runner.input.files import ReadStats
from tokenplan.runner.input.rows import limited, read_rows, until_broken
from tokenplan.runner.limits import check_open_files
from tokenplan.runner.progress import Snapshot
from tokenplan.runner.refusals import RefusalStreak
from tokenplan.runner.rolling import invocation_checkpoint, rolling_summary, write_stopped_summary
from tokenplan.runner.spec import RunOutcome, RunSpec, duplicate_notes, start_progress
from tokenplan.runner.store.fencing import fence_earlier_actors
from tokenplan.runner.store.rundir import RunDir


def run_local(
    spec: RunSpec, on_progress: Callable[[Snapshot], None] | None = None, on_note: Callable[[str], None] | None = None
) -> RunOutcome:
    """Run ``spec`` in this process (see the module docstring and :func:`tokenplan.runner.backend.run`);
    ``on_note`` hears the first stop signal (what happens now, and that a second one stops at once).

    Raises:
        InputError: the open-file limit is below what the concurrency needs.
        InputBroken: an input file broke part-way; raised once every unit sent was settled.
        Interrupted: a second SIGINT/SIGTERM stopped the run at once.
        RunDirError, ServerError: as :func:`tokenplan.runner.backend.run`.
    """
    with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
        return runner.run(_run(spec, on_progress, on_note, handle_signals=True))


def event_loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's event loop when it is installed (``pip install 'tokenplan[fast]'``) and not turned
    off with ``TOKENPLAN_UVLOOP=0``; None (asyncio's own loop) otherwise. Measured effect: see
    ``benchmarks/client_overhead.py`` (client CPU per request on each loop)."""
    if os.environ.get("TOKENPLAN_UVLOOP", "1") == "0":
        return None
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


async def run_local_async(spec: RunSpec, on_progress: Callable[[Snapshot], None] | None = None) -> RunOutcome:
    """:func:`run_local` on the running event loop; SIGINT/SIGTERM stay the loop owner's.

    Raises:
        InputError, InputBroken, RunDirError, ServerError: as :func:`run_local`.
        asyncio.CancelledError: the awaiting task was cancelled; every record written is whole,
            the run directory is closed, and a rerun resumes.
    """
    return await _run(spec, on_progress, None, handle_signals=False)


async def _run(
    spec: RunSpec,
    on_progress: Callable[[Snapshot], None] | None,
    on_note: Callable[[str], None] | None,
    handle_signals: bool,
) -> RunOutcome:
    check_open_files(spec.pool.concurrency_per_endpoint * len(spec.endpoints))
    pool = EndpointPool(spec.endpoints, spec.pool, api_key=spec.api_key)
    try:
        # the endpoints first: a run that cannot start leaves the directory as it was (a --force
        # that finds no server does not rebind it to the new job)
        set_aside = await pool.check_health(spec.job.model)
        rundir = RunDir.open(
            spec.out_dir,
            spec.identity,
            force=spec.force,
            shard_max_bytes=spec.shard_max_bytes,
            retry_skipped=spec.retry_skipped,
            fence=fence_earlier_actors,  # a Ray-backend run's leftover actors stop writing (under the lock)
        )
    except BaseException:
        await pool.aclose()
        raise
    notes = duplicate_notes(rundir) + rundir.notes
    if set_aside:  # the run goes on at a fraction of the capacity asked for: say so before it starts
        line = set_aside_warning(set_aside, len(pool.endpoints), spec.job.model)
        if on_note is not None:
            on_note(line)
        else:
            notes.append(f"warning: {line}")
    dispatcher: Dispatcher | None = None
    invocation: dict | None = None
    try:
        progress = start_progress(spec, rundir)
        dispatcher = Dispatcher(
            spec.job,
            pool,
            rundir,
            progress,
            invocation_checkpoint(
                rolling_summary(on_progress, rundir.path, spec.progress_every_s), rundir.path, rundir.invocation_id
            ),
            refusals=RefusalStreak(control=True),
        )
        stop = asyncio.Event()
        read_stats = ReadStats()
        first = f"stopping: requests in flight get up to {spec.job.grace_s:g} s to finish; a second Ctrl-C (or SIGTERM) stops at once"
        with StopOnSignals(stop, (lambda: on_note(first)) if on_note else None, active=handle_signals) as signals:
            source = until_broken(
                limited(read_rows(spec.files, read_stats, rundir.done_ids, spec.job.mode), spec.limit), read_stats
            )
            try:
                tally = await dispatcher.run(source, stop)
            except (TokenplanError, OSError) as stopped:  # a server fault, a full disk: the counters at the stop
                write_stopped_summary(rundir.path, progress.snapshot(time.monotonic(), {}, 0), str(stopped))
                raise
            except asyncio.CancelledError:
                if signals.count < 2:
                    raise
                why = (
                    "interrupted twice: stopped at once without the grace; every record "
                    "written is kept — rerun the same command to resume"
                )
                # the counters at the stop, with why (a new-user pass found the last rolling
                # snapshot instead: 20 in flight at 0.5 s, nothing saying the run had stopped)
                write_stopped_summary(rundir.path, progress.snapshot(time.monotonic(), {}, 0), why)
                raise Interrupted(why) from None
    finally:
        idle, served = pool.unanswering(), pool.served()
        await pool.aclose()
        if dispatcher is not None:  # its line, under the lock, however the run ended
            invocation = close_invocation(rundir.path, rundir.invocation_id, dispatcher.tally, progress, served)
        rundir.close()
    if read_stats.broken is not None:  # the rows after the break were never read: not a success
        write_stopped_summary(rundir.path, progress.snapshot(time.monotonic(), {}, 0), str(read_stats.broken))
        raise read_stats.broken
    if idle:  # the others did its work: said, or a run at a third of its speed looks like a slow server
        notes.append(
            f"warning: {len(idle)} of {len(pool.endpoints)} endpoints answered none of their requests, "
            f"which the others answered: {'; '.join(idle)}"
        )
    outside = set() if tally.stopped else rundir.done_ids.stored_outside_input()
    return RunOutcome(
        rundir.path,
        tally,
        progress,
        read_stats.blank_lines,
        notes,
        stored_outside_input=outside,
        invocation_id=rundir.invocation_id,
        invocation=invocation,
    )


class StopOnSignals:
    """SIGINT/SIGTERM → ``stop``; a second signal cancels the running task (main thread only, and
    only when ``active``: a loop this process did not start keeps its owner's handlers)."""

    def __init__(self, stop: asyncio.Event, on_first: Callable[[], None] | None = None, active: bool = True):
        self.stop, self.on_first = stop, on_first
        self.active = active and threading.current_thread() is threading.main_thread()
        self.count = 0  # signals received

    def __enter__(self) -> StopOnSignals:
        if not self.active:
            return self
        loop, task = asyncio.get_running_loop(), asyncio.current_task()

        def on_signal() -> None:
            self.count += 1
            if self.stop.is_set() and task is not None:
                task.cancel()
            elif self.on_first is not None:
                self.on_first()
            self.stop.set()

        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, on_signal)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.active:
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)
