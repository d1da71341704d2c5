"""The async loop of ``generate``: bounded in-flight units, outcomes handed to the run directory.

Rows are pulled only when an in-flight slot frees, so memory is bounded by the concurrency, not
the input. Each unit runs its requests (:func:`runner.requests.run_unit`) through the endpoint pool
with retries; its outcome is written once known: stored record, skipped (``length`` with
``--on-length drop``, or refused with 400, 413 or 422) or error (retries exhausted). 401, 403 and 404 concern every request (bad key,
unknown model or route) and end the run with :class:`~tokenplan.errors.ServerError`. So does a
400/413/422 that turns out to concern every row (:mod:`tokenplan.runner.refusals`), and a failure
that exhausts every try on eight rows with no answer between (:mod:`tokenplan.runner.unanswered`);
the rows go to ``errors.jsonl``, not final, and the next run sends them again.

Stopping: when ``stop`` is set (SIGINT/SIGTERM), no new unit starts; in-flight units get
``grace_s`` seconds to finish and are then cancelled, unwritten — the next run sends them again.
A write that fails (:class:`~tokenplan.runner.store.rundir.WriteFailed`: disk full, file size limit)
stops the run the same way, without the grace (no answer could be stored), and is raised.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Coroutine, Iterator
from typing import Any

from tokenplan.client.endpoints import EndpointPool
from tokenplan.client.openai import Completion, RequestFailed
from tokenplan.client.retry import RetriesExhausted, call_with_retries, deadline_s
from tokenplan.errors import RunDirError, ServerError
from tokenplan.runner.control import REFUSED_STATUSES, context_room, control_request, fatal_line
from tokenplan.runner.input.rows import Reject
from tokenplan.runner.input.shapes import Row
from tokenplan.runner.progress import Progress, Snapshot
from tokenplan.runner.refusals import Held, RefusalLog, RefusalStreak
from tokenplan.runner.requests import (
    Dropped,
    Sent,
    WorkUnit,
    request_body,
    run_unit,
    seed_for,
    stored_record,
    work_units,
)
from tokenplan.runner.spec import JobSettings, RunTally
from tokenplan.runner.store.appendlog import WriteFailed
from tokenplan.runner.store.rundir import RunDir
from tokenplan.runner.unanswered import NoAnswerStreak


class Dispatcher:
    """Runs every unit of ``source`` not yet done (see the module docstring)."""

    def __init__(
        self,
        job: JobSettings,
        pool: EndpointPool,
        rundir: RunDir,
        progress: Progress,
        on_progress: Callable[[Snapshot], None] | None = None,
        tick_s: float = 0.5,
        refusals: RefusalStreak | RefusalLog | None = None,
    ):
        """``refusals``: hold 400/413/422 answers until they say whether the row or the job is refused
        (:mod:`tokenplan.runner.refusals`); a :class:`RefusalLog` (the Ray actors) keeps them for
        the driver to judge; None writes each as skipped at once."""
        self.job, self.pool, self.rundir, self.progress = job, pool, rundir, progress
        self.on_progress, self.tick_s = on_progress, tick_s
        self.refusals = refusals
        self._rows_seen = 0
        self.tally = RunTally()
        self._rng = random.Random()
        self._fatal: BaseException | None = None
        self._unanswered = NoAnswerStreak(job.model)  # rows failed since an answer: runner.unanswered
        self._endpoint_of: dict[str, str] = {}  # unit id → the endpoint its last request went to
        self._wake = asyncio.Event()  # set when the last task settles or a fatal error arrives
        self._controls: set[asyncio.Task[None]] = set()  # control requests in flight (refusals)
        self._sampling_record = job.sampling.as_record()

    async def run(self, source: Iterator[Row | Reject], stop: asyncio.Event) -> RunTally:
        """Send every unit of ``source`` that is not done; return when all are settled or stopped.

        Raises:
            ServerError: a fatal answer (401/403/404), the same 400/413/422 for every row
                (:mod:`tokenplan.runner.refusals`), or every endpoint down too long.
        """
        tasks: set[asyncio.Task[None]] = set()
        ticker = asyncio.create_task(self._tick())
        try:
            try:
                await self._start_all(source, stop, tasks)
            except RunDirError as failed:  # rejects.jsonl could not be written: stop sending
                self._set_fatal(failed)
            await self._drain(tasks, stop)
            await self._await_controls(stop)
            self._settle_refusals(stop.is_set())
        finally:
            ticker.cancel()
            self._emit()
        if self._fatal is not None:
            raise self._fatal
        self.tally.stopped = stop.is_set()
        return self.tally

    async def _start_all(
        self, source: Iterator[Row | Reject], stop: asyncio.Event, tasks: set[asyncio.Task[None]]
    ) -> None:
        # A unit starts only when the pool admits it (its one concurrency limit), so rows are read
        # no faster than answers come back.
        for count, unit in enumerate(self._units(source)):
            if count % 256 == 0:
                await asyncio.sleep(0)  # let answers and the display in while skipping done rows
            if stop.is_set() or self._fatal is not None:
                return
            if self._controls:  # a control request decides a streak: send no new row meanwhile
                await self._wait_for_controls(stop)
                if stop.is_set() or self._fatal is not None:
                    return
            if not await self.pool.admit(stop):  # a stop ends the wait for a slot: the grace starts now
                return
            if self._fatal is not None:
                self.pool.release()
                return
            task = asyncio.create_task(self.process(unit))
            tasks.add(task)
            task.add_done_callback(lambda t: self._settled(t, tasks))

    def _units(self, source: Iterator[Row | Reject]) -> Iterator[WorkUnit]:
        done = self.rundir.done_ids
        for item in source:
            if isinstance(item, Reject):
                self.tally.rejected_rows += 1
                self.progress.rejected += self.job.n
                self.rundir.write_reject({"file": item.source, "line": item.line, "reason": item.reason, "id": item.id})
                continue
            self._rows_seen += 1
            for unit in work_units(item, self.job.n):
                self.tally.units_seen += 1
                if done.done_for_input(unit.id):
                    self.tally.already_done += 1
                    continue
                yield unit

    async def _await_controls(self, stop: asyncio.Event) -> None:
        """Every row is settled: a control request still out decides its held refusals before the
        end-of-run rule does, and so does one for each endpoint that holds refusals without one
        (a rerun's few leftover rows, split over endpoints; :meth:`RefusalStreak.to_control_at_end`).
        Cancelled on a stop or a fatal error."""
        streak = self.refusals
        if isinstance(streak, RefusalStreak) and not stop.is_set() and self._fatal is None:
            for url in streak.to_control_at_end():
                self._start_control(url)
        if not self._controls:
            return
        await self._wait_for_controls(stop)
        await self.cancel_controls()  # a stop or a fatal error meanwhile: the rest are not waited for

    async def cancel_controls(self) -> None:
        """Give up the control requests still out (also a Ray actor's end: they decide nothing now)."""
        for task in self._controls:
            task.cancel()
        await asyncio.gather(*self._controls, return_exceptions=True)

    def _start_control(self, url: str, control: Callable[[str], Coroutine[Any, Any, None]] | None = None) -> None:
        """Send the control request to the endpoint shown as ``url`` (:meth:`_control`, or
        ``control``), kept among the controls out until it ends (no new row starts meanwhile)."""
        task = asyncio.create_task((control or self._control)(url))
        self._controls.add(task)
        task.add_done_callback(self._controls.discard)

    async def _wait_for_controls(self, stop: asyncio.Event) -> None:
        """Wait until no control request is out, a stop (Ctrl-C: it does not wait out a control's
        deadline) or a fatal error."""
        stopping = asyncio.create_task(stop.wait())
        try:
            while self._controls and not stop.is_set() and self._fatal is None:
                await asyncio.wait({*self._controls, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()

    def _settled(self, task: asyncio.Task[None], tasks: set[asyncio.Task[None]]) -> None:
        tasks.discard(task)
        self.pool.release()
        if not tasks:
            self._wake.set()

    def _set_fatal(self, error: BaseException) -> None:
        self._fatal = self._fatal or error
        self._wake.set()

    async def _drain(self, tasks: set[asyncio.Task[None]], stop: asyncio.Event) -> None:
        # Waiting on the tasks themselves would cost O(in flight) per completion; one event each
        # for "all settled / fatal" and "stop" keeps the end of a 5,000-deep run linear. A loop: a
        # control request that ends wakes it too, with rows still out (they were cancelled unwritten)
        while tasks and not stop.is_set() and self._fatal is None:
            self._wake.clear()
            waiters = {asyncio.create_task(stop.wait()), asyncio.create_task(self._wake.wait())}
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
            for waiter in waiters:
                waiter.cancel()
        if tasks:
            # After a failed write their answers could not be stored either: cancel at once.
            grace_s = 0 if isinstance(self._fatal, WriteFailed) else self.job.grace_s
            _, pending = await asyncio.wait(set(tasks), timeout=grace_s)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

    @property
    def fatal(self) -> BaseException | None:
        """The error that ends the run (a fatal status, every endpoint down, a bug), once one arrived."""
        return self._fatal

    async def process(self, unit: WorkUnit) -> None:
        """Run one unit to its outcome and write it (stored, skipped or error) to the run directory;
        a fatal error is kept in :attr:`fatal`. The Ray backend's actors call this per unit."""
        try:
            await self._run_and_record(unit)
        except Exception as fatal:  # ServerError, WriteFailed (disk full), or a bug: all end the run
            self._set_fatal(fatal)

    async def _run_and_record(self, unit: WorkUnit) -> None:
        try:
            outcome = await run_unit(
                unit,
                self.job.mode,
                self.job.on_length,
                self.job.length_retries,
                lambda messages, turn, retry: self._send(unit, messages, turn, retry),
            )
        except RetriesExhausted as exhausted:
            self._record_failure(unit, exhausted)
            return
        self._unanswered.answered()  # an answer: the failures before it were the rows' or transient
        answered_by = self._endpoint_of.pop(unit.id, "")
        if self.refusals is not None:  # that endpoint's refusals were their rows' own
            self._write_refused(self.refusals.answered(answered_by))
        if isinstance(outcome, Dropped):
            self._write_skipped(unit, outcome)
            return
        self.rundir.write_done(stored_record(unit, outcome, self.job.model, self._sampling_record))
        self.progress.stored += 1

    async def _send(self, unit: WorkUnit, messages: list[dict[str, str]], turn: int, retry: int) -> Sent:
        job_seed = self.job.sampling.seed
        seed = None if job_seed is None else seed_for(job_seed, unit.id, turn, retry)
        body = request_body(self.job.model, messages, self.job.sampling, seed, unit.row.overrides)
        row_tokens = unit.row.overrides.get("max_tokens")  # a Batch line's own cap needs its own deadline
        limit_s = self.job.deadline_s if row_tokens is None else max(self.job.deadline_s, deadline_s(row_tokens))
        used: list[str] = []

        async def once() -> Completion:
            async with self.pool.lease() as endpoint:
                used.append(endpoint.base_url)
                self._endpoint_of[unit.id] = endpoint.base_url  # the last endpoint tried (refusals)
                try:
                    sending = endpoint.client.chat(
                        body, deadline_s=limit_s, stream=self.job.stream, max_bytes=self.job.max_answer_bytes
                    )
                    completion = await self.pool.guard(endpoint, sending)  # freed where the endpoint stalls
                except RequestFailed as failure:
                    self.pool.record(endpoint, failure)
                    raise
                self.pool.record(endpoint, None)
                return completion

        try:
            completion, attempts = await call_with_retries(once, self.job.retry, self._rng)
            fitted = False
        except RetriesExhausted as refused:  # a prompt that leaves less room than max_tokens
            room = context_room(refused.failure, body.get("max_tokens"))
            if room is None:
                raise
            body = {**body, "max_tokens": room}  # what ``once`` sends from now on
            completion, more = await call_with_retries(once, self.job.retry, self._rng)
            attempts, fitted = refused.attempts + more, True
        self._count(completion)
        per_prompt = body.get("max_tokens") if fitted or self.job.sampling.context_tokens is not None else None
        return Sent(completion, used[-1], attempts, seed, per_prompt)

    def _count(self, completion: Completion) -> None:
        tokens = completion.usage.completion_tokens if completion.usage else 0
        self.progress.add_tokens(time.monotonic(), tokens)
        self.tally.latency_s.append(completion.timings.latency_s)
        self.tally.completion_tokens.append(tokens)
        if completion.timings.ttft_s is not None:
            self.tally.ttft_s.append(completion.timings.ttft_s)

    def _record_failure(self, unit: WorkUnit, exhausted: RetriesExhausted) -> None:
        failure = exhausted.failure
        endpoint = self._endpoint_of.pop(unit.id, "")
        fatal = fatal_line(failure, self.job.model, endpoint)
        if fatal is not None:
            self._set_fatal(ServerError(fatal))
            return
        if failure.kind == "status" and failure.status in REFUSED_STATUSES:
            if self.refusals is None:
                self._write_skipped(unit, Dropped("refused", -1, failure.status, failure.detail))
                return
            source = {"file": unit.row.source, "line": unit.row.line}
            self._write_refused(
                self.refusals.refused(
                    Held(unit.id, unit.row.id, source, failure.status, failure.detail, exhausted.attempts, endpoint)
                )
            )
            if isinstance(self.refusals, RefusalStreak):
                for suspect in self.refusals.take_controls():
                    self._start_control(suspect)
                self._judge_refusals()
            return
        self.rundir.write_error(
            {
                "id": unit.id,
                "reason": failure.kind,
                "status": failure.status,
                "detail": failure.detail,
                "received": failure.received,
                "attempts": exhausted.attempts,
                "source": {"file": unit.row.source, "line": unit.row.line},
            }
        )
        self.progress.errors += 1
        verdict = self._unanswered.failed(unit.row.id, failure) if self.refusals is not None else None
        if verdict == "stop":
            self._set_fatal(ServerError(self._unanswered.message))
        elif verdict == "control":  # no finished answer on eight rows: the rows' or the server's?
            self._start_control(endpoint, self._control_unanswered)

    def _judge_refusals(self) -> None:
        streak = self.refusals
        if isinstance(streak, RefusalStreak) and streak.job_wide is not None and self._fatal is None:
            self._set_fatal(ServerError(streak.message(self.job.model, len(self.pool.endpoints))))

    async def _control(self, url: str) -> None:
        """Send the control request (:func:`control_request`) to the endpoint shown as ``url``."""
        assert isinstance(self.refusals, RefusalStreak)
        endpoint = next(e for e in self.pool.endpoints if e.base_url == url)
        self.refusals.control_answered(url, *await control_request(endpoint.client, self.job))
        self._judge_refusals()
        self._wake.set()

    async def _control_unanswered(self, url: str) -> None:
        """The control request of :mod:`tokenplan.runner.unanswered` to ``url`` (else the first endpoint)."""
        endpoint = next((e for e in self.pool.endpoints if e.base_url == url), self.pool.endpoints[0])
        if self._unanswered.control_answered(*await control_request(endpoint.client, self.job)) == "stop":
            self._set_fatal(ServerError(self._unanswered.message))
        self._wake.set()

    def _write_refused(self, released: list[Held]) -> None:
        """Refusals that proved to be their rows' own: final, in ``skipped.jsonl``."""
        for held in released:
            self.rundir.write_skipped(held.skipped_record())
            self.progress.skipped += 1

    def _settle_refusals(self, stopped: bool) -> None:
        """At the end: refusals still held are the rows' own (skipped) unless the run stopped early
        or they proved job-wide; then they go to ``errors.jsonl`` and the next run sends them again."""
        streak = self.refusals
        if not isinstance(streak, RefusalStreak) or not streak.held:
            return
        if not stopped and self._fatal is None:
            self._write_refused(streak.settle(self._rows_seen, self.tally.already_done))
            if streak.job_wide is not None:
                self._set_fatal(ServerError(streak.message(self.job.model, len(self.pool.endpoints))))
        for held in streak.take_held():
            self.rundir.write_error(held.error_record())
            self.progress.errors += 1

    def _write_skipped(self, unit: WorkUnit, dropped: Dropped) -> None:
        self.rundir.write_skipped(
            {
                "id": unit.id,
                "reason": dropped.reason,
                "turn": dropped.turn,
                "status": dropped.status,
                "detail": dropped.detail,
                "source": {"file": unit.row.source, "line": unit.row.line},
            }
        )
        self.progress.skipped += 1

    async def _tick(self) -> None:
        last_sync_s = time.monotonic()
        while True:
            await asyncio.sleep(self.tick_s)
            self._emit()
            if time.monotonic() - last_sync_s >= 2.0:
                try:
                    self.rundir.sync()
                except RunDirError as failed:
                    self._set_fatal(failed)
                last_sync_s = time.monotonic()

    def _emit(self) -> None:
        if self.on_progress is not None:
            self.on_progress(self.progress.snapshot(time.monotonic(), self.pool.in_flight(), self.pool.healthy_count()))
