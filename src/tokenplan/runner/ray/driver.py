"""The driver of ``generate --backend ray``: anti-join, actor pool, dead actors, progress.

The caller (:mod:`tokenplan.runner.ray.backend`) has checked the request, opened the run directory
after :func:`~tokenplan.runner.store.fencing.advance_epoch` and built the job. This module:

1. reads the input with the local backend's row parser (same ids, line numbers, rejects, duplicate
   ids and blank-line counts) and drops every unit already in the run directory — a left-anti join
   on id against the done-set (:func:`~tokenplan.runner.ray.work.pending_units`);
2. starts ``actors`` :class:`~tokenplan.runner.ray.actor.GenerateActor` s over their shares of the
   endpoints (:func:`~tokenplan.runner.ray.work.endpoint_shares`), each fed up to twice its
   in-flight capacity (never idle while rows remain; memory bounded);
3. collects what each actor finished (it stored records itself; the driver writes skipped and
   failed units), and when an actor dies, reads the ids its shards hold and sends the rest of its
   share again, to a replacement actor over the same endpoints and to the others;
4. judges 400/413/422 refusals over every actor as the local backend does (:mod:`tokenplan.runner.ray.judge`).

Ray is imported here only, inside :func:`run_ray`.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from tokenplan.client.endpoints import PoolSettings, set_aside_warning
from tokenplan.errors import InputError, ServerError
from tokenplan.runner.input.rows import Reject
from tokenplan.runner.input.shapes import Row
from tokenplan.runner.progress import Progress, Snapshot
from tokenplan.runner.ray.actor import ActorConfig, GenerateActor, Report
from tokenplan.runner.ray.judge import RefusalJudge, refused_ids
from tokenplan.runner.ray.signals import StopOnSignals
from tokenplan.runner.ray.work import endpoint_shares, pending_units
from tokenplan.runner.requests import WorkUnit
from tokenplan.runner.spec import JobSettings, RunTally
from tokenplan.runner.store.fencing import Fence, Fenced, actor_prefix, stored_ids
from tokenplan.runner.store.rundir import RunDir

POLL_WAIT_S = 0.5  # how long an actor's poll waits for news (seconds)
MAX_REPLACEMENTS_PER_ACTOR = 3  # replacements of dead actors, per starting actor, before giving up


@dataclass(slots=True)
class RayStats:
    """How the Ray side went: cluster and actor start (seconds); client CPU of the driver and of the
    actors from the moment the actors were up (seconds, user + system); actors started and dead."""

    startup_s: float = 0.0
    driver_cpu_s: float = 0.0
    actor_cpu_s: float = 0.0
    actors_started: int = 0
    actor_deaths: int = 0
    served: dict[str, list[int]] = field(default_factory=dict)  # URL → requests answered, failed (not in the record)

    def as_record(self) -> dict[str, Any]:
        return {
            "startup_s": round(self.startup_s, 3),
            "driver_cpu_s": round(self.driver_cpu_s, 3),
            "actor_cpu_s": round(self.actor_cpu_s, 3),
            "actors_started": self.actors_started,
            "actor_deaths": self.actor_deaths,
        }


@dataclass(slots=True)
class RayRun:
    """One Ray-backend run, as prepared by the caller (see the module docstring)."""

    rundir: RunDir
    epoch: int
    source: Iterator[Row | Reject]
    job: JobSettings
    endpoints: list[str]
    pool: PoolSettings
    api_key: str | None
    shard_max_bytes: int
    actors: int
    address: str | None
    progress: Progress
    on_progress: Callable[[Snapshot], None] | None = None
    on_note: Callable[[str], None] = lambda _: None
    stats: RayStats = field(default_factory=RayStats)


@dataclass(slots=True)
class _Slot:
    index: int
    share: tuple[tuple[str, ...], int]
    handle: Any
    assigned: dict[str, WorkUnit] = field(default_factory=dict)
    poll_ref: Any = None
    last: Report | None = None
    replaced: int = 0


def run_ray(run: RayRun) -> RunTally:
    """Run every pending unit on a Ray actor pool; return the tally (``stopped`` on SIGINT/SIGTERM).

    Raises:
        InputError: Ray is not installed (``pip install 'tokenplan[ray]'``).
        ServerError: an actor met a fatal answer (401/403/404) or every endpoint down too long.
    """
    ray = _import_ray()
    began_s = time.monotonic()
    started_here = not ray.is_initialized()
    if started_here:
        # No address: a new local cluster ("local"), never a stale one named in /tmp/ray.
        address = run.address or os.environ.get("RAY_ADDRESS") or "local"
        ray.init(address=address, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        driver = _Driver(ray, run, began_s)
        try:
            return driver.run()
        finally:
            driver.fence.close()
    finally:
        if started_here:
            ray.shutdown()


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise InputError(
            "--backend", "ray", "local, or ray after `pip install 'tokenplan[ray]'` (Ray is not installed)"
        ) from None
    return ray


class _Driver:
    def __init__(self, ray: Any, run: RayRun, began_s: float):
        self.ray, self.run_, self.began_s = ray, run, began_s
        self.actor_cpu_s: dict[int, float] = {}
        self.stored_by: dict[int, int] = {}
        self.gone: list[str] = []  # "actor 1: died, replaced by actor 2"
        self.tally = RunTally()
        self.remote_cls = ray.remote(num_cpus=0, max_restarts=0, scheduling_strategy="SPREAD")(GenerateActor)
        self.retry: deque[WorkUnit] = deque()
        self.units = pending_units(run.source, run.rundir.done_ids, run.job.n, self.tally, self._reject)
        self.exhausted = False
        self.next_index = 0
        self.slots: dict[int, _Slot] = {}
        self.stop = threading.Event()
        self.fatal: str | None = None
        self.fence = Fence(run.rundir.path, run.epoch)  # a frozen, then thawed, driver writes nothing late
        self.refusals = RefusalJudge(
            run.job, run.endpoints, run.api_key, self._write_skipped, self._write_error, self.stop
        )

    def run(self) -> RunTally:
        shares = endpoint_shares(self.run_.endpoints, self.run_.actors, self.run_.pool.concurrency_per_endpoint)
        with StopOnSignals(self.stop):
            problems, set_aside = self._spawn(shares)
            if len(problems) == len(shares):  # no endpoint of any actor is ready: as the local backend
                self._finish()
                raise ServerError("; ".join(dict.fromkeys(problems)))
            if set_aside:  # as the local backend says it
                self.run_.on_note(set_aside_warning(set_aside, len(self.run_.endpoints), self.run_.job.model))
            # The run's clock starts once the actors are up: rates measure sending, not Ray's start.
            self.run_.stats.startup_s = time.monotonic() - self.began_s
            self.run_.progress.started_s = time.monotonic()
            cpu0_s = time.process_time()
            last_emit = 0.0
            while not self.stop.is_set() and self.fatal is None and self.slots:
                self._feed()
                if self.exhausted and not self.retry and not any(s.assigned for s in self.slots.values()):
                    break
                self._collect()
                if time.monotonic() - last_emit >= 0.5:
                    self._emit()
                    last_emit = time.monotonic()
            self._finish()
            self._settle_refusals()
        self.run_.stats.driver_cpu_s = time.process_time() - cpu0_s
        self.run_.stats.actor_cpu_s = sum(self.actor_cpu_s.values())
        if self.fatal is not None:
            raise ServerError(self.fatal)
        self.tally.stopped = self.stop.is_set() or bool(self.retry) or not self.exhausted
        return self.tally

    def _spawn(self, shares: list[tuple[tuple[str, ...], int]], replaced: int = 0) -> tuple[list[str], list[str]]:
        """Start one actor per share, all at once; return the health problems they reported
        (an actor whose endpoints are all down keeps probing them, as the local backend does)
        and the endpoints set aside, one line each (an endpoint two actors share, once)."""
        run, started = self.run_, []
        for share in shares:
            index, self.next_index = self.next_index, self.next_index + 1
            pool = dataclasses.replace(run.pool, concurrency_per_endpoint=share[1])
            config = (run.rundir.path, run.epoch, index, share[0], pool, run.job, run.api_key, run.shard_max_bytes)
            handle = self.remote_cls.remote(ActorConfig(*config))
            started.append((_Slot(index, share, handle, replaced=replaced), handle.start.remote()))
        problems, set_aside = [], []
        for slot, ref in started:
            try:
                problem, aside = self.ray.get(ref)
                set_aside += aside
            except self.ray.exceptions.RayTaskError as failed:  # a bug, or the actor could not start
                raise ServerError(str(failed.cause) if failed.cause else str(failed)) from None
            if problem is not None:
                problems.append(problem)
                slot.last = Report(slot.index, 0)  # no healthy endpoint until its probes say so
            self.slots[slot.index] = slot
            run.stats.actors_started += 1
        return problems, list(dict.fromkeys(set_aside))

    def _take(self, count: int) -> list[WorkUnit]:
        units: list[WorkUnit] = []
        while len(units) < count and self.retry:
            units.append(self.retry.popleft())
        while len(units) < count and not self.exhausted:
            unit = next(self.units, None)
            if unit is None:
                self.exhausted = True
            else:
                units.append(unit)
        return units

    def _feed(self) -> None:
        for slot in self.slots.values():
            if slot.last is not None and not slot.last.healthy and self._others_healthy(slot):
                continue  # its endpoints are all ejected: feed the actors that can send
            capacity = 2 * len(slot.share[0]) * slot.share[1]
            units = self._take(capacity - len(slot.assigned))
            if units:
                slot.assigned.update((u.id, u) for u in units)
                slot.handle.submit.remote(units)

    def _collect(self) -> None:
        for slot in self.slots.values():
            if slot.poll_ref is None:
                slot.poll_ref = slot.handle.poll.remote(POLL_WAIT_S)
        by_ref = {slot.poll_ref: slot for slot in self.slots.values()}
        ready, waiting = self.ray.wait(list(by_ref), num_returns=1, timeout=POLL_WAIT_S * 2)
        if ready and waiting:  # take every report that is in, not one per pass
            ready += self.ray.wait(waiting, num_returns=len(waiting), timeout=0)[0]
        for ref in ready:
            slot = by_ref[ref]
            if slot.index not in self.slots:
                continue  # retired during this pass
            slot.poll_ref = None
            try:
                report = self.ray.get(ref)
            except self.ray.exceptions.RayActorError:
                self._on_death(slot)
                continue
            self._apply(slot, report)

    def _apply(self, slot: _Slot, report: Report) -> None:
        run, progress = self.run_, self.run_.progress
        slot.last = report
        self.actor_cpu_s[slot.index] = report.cpu_s
        for unit_id in report.stored:
            slot.assigned.pop(unit_id, None)
        progress.stored += len(report.stored)
        self.stored_by[slot.index] = self.stored_by.get(slot.index, 0) + len(report.stored)
        for record in report.skipped:
            slot.assigned.pop(record["id"], None)
            self._write_skipped(record)
        for record in report.errors:  # retries exhausted: not final, the next run sends it again
            slot.assigned.pop(record["id"], None)
            self._write_error(record)
        for unit_id in refused_ids(report.refusals):  # settled for the actor: held by the judge
            slot.assigned.pop(unit_id, None)
        verdict = self.refusals.take(report.refusals)  # always: after a verdict it holds them (errors)
        self.fatal = self.fatal or verdict
        progress.add_tokens(time.monotonic(), report.output_tokens, len(report.latency_s))
        self.tally.latency_s.extend(report.latency_s)
        self.tally.ttft_s.extend(report.ttft_s)
        self.tally.completion_tokens.extend(report.completion_tokens)
        for url, (answered, failed) in report.served.items():  # each report's counts since the last
            total = self.run_.stats.served.setdefault(url, [0, 0])
            total[0], total[1] = total[0] + answered, total[1] + failed
        if report.fatal is not None and report.all_down and self._others_healthy(slot):
            self._retire(slot, report.fatal)
        elif report.fatal is not None:
            self.fatal = self.fatal or report.fatal
        if report.fenced:
            self.run_.on_note(f"actor {slot.index}: a newer run took over {run.rundir.path}; stopping")
            self.stop.set()

    def _write_skipped(self, record: dict[str, Any]) -> None:
        try:
            with self.fence.holding():  # a skipped unit counts as done: fenced like a stored one
                self.run_.rundir.write_skipped(record)
        except Fenced:
            self.stop.set()
            return
        self.run_.progress.skipped += 1

    def _settle_refusals(self) -> None:
        """Held refusals judged at the end (every unit settled, nothing stopped), else errors."""
        finished = self.exhausted and not self.retry and not any(s.assigned for s in self.slots.values())
        rows = self.tally.units_seen // max(1, self.run_.job.n)  # rows done by an earlier run count
        judged = finished and not self.stop.is_set() and self.fatal is None
        message = self.refusals.settle(judged, rows, self.tally.already_done)  # always: it writes what it holds
        self.fatal = self.fatal or message

    def _write_error(self, record: dict[str, Any]) -> None:
        self.run_.rundir.write_error(record)
        self.run_.progress.errors += 1

    def _others_healthy(self, slot: _Slot) -> bool:
        # An actor that has not reported yet started with a healthy endpoint (else it has a report).
        return any(other.last is None or other.last.healthy for other in self.slots.values() if other is not slot)

    def _retire(self, slot: _Slot, why: str) -> None:
        """Every endpoint of ``slot`` is down while other actors' are up: stop it, and send its
        units through the others (no replacement: its endpoints are the problem)."""
        self.ray.kill(slot.handle)
        try:
            self.ray.get(slot.handle.poll.remote(0.0))  # returns only once the process is gone
        except self.ray.exceptions.RayActorError:
            pass
        self.slots.pop(slot.index, None)
        resent = self._take_back(slot)
        self.gone.append(f"actor {slot.index}: stopped, its endpoints down")
        self.run_.on_note(f"actor {slot.index} stopped ({why}); {resent} of its units go to the other actors")

    def _take_back(self, slot: _Slot) -> int:
        """A stopped actor's units: those its shards hold are stored, the rest are queued again."""
        stored = stored_ids(self.run_.rundir.path / "shards", actor_prefix(self.run_.epoch, slot.index))
        resent = 0
        for unit_id, unit in slot.assigned.items():
            if unit_id in stored:
                self.run_.progress.stored += 1
            else:
                self.retry.append(unit)
                resent += 1
        slot.assigned.clear()
        return resent

    def _on_death(self, slot: _Slot) -> None:
        """The actor's process is gone: what its shards hold is stored, the rest goes to a replacement."""
        self.slots.pop(slot.index, None)
        self.run_.stats.actor_deaths += 1
        resent = self._take_back(slot)
        if slot.replaced >= MAX_REPLACEMENTS_PER_ACTOR:
            self.gone.append(f"actor {slot.index}: died, not replaced")
            note = f"actor {slot.index} died; {resent} of its units go to the others (no replacement after {slot.replaced})"
            self.run_.on_note(note)
            return
        self._spawn([slot.share], slot.replaced + 1)
        self.gone.append(f"actor {slot.index}: died, replaced by actor {self.next_index - 1}")
        self.run_.on_note(
            f"actor {slot.index} died; {resent} of its unfinished units are sent again, and "
            f"actor {self.next_index - 1} replaces it over the same endpoints"
        )

    def _finish(self) -> None:
        grace_s = self.run_.job.grace_s if self.stop.is_set() else 0.0
        slots = list(self.slots.values())
        refs = [slot.handle.finish.remote(grace_s) for slot in slots]
        for slot, ref in zip(slots, refs):
            try:
                self._apply(slot, self.ray.get(ref))
            except self.ray.exceptions.RayActorError:
                self._take_back(slot)
            self.ray.kill(slot.handle)

    def _reject(self, reject: Reject) -> None:
        self.run_.progress.rejected += self.run_.job.n
        self.run_.rundir.write_reject(
            {"file": reject.source, "line": reject.line, "reason": reject.reason, "id": reject.id}
        )

    def _emit(self) -> None:
        if self.run_.on_progress is None:
            return
        in_flight: dict[str, int] = {}
        healthy: set[str] = set()
        for slot in self.slots.values():
            if slot.last is not None:
                for url, count in slot.last.in_flight.items():
                    in_flight[url] = in_flight.get(url, 0) + count
                healthy.update(slot.last.healthy)
        snapshot = self.run_.progress.snapshot(time.monotonic(), in_flight, len(healthy))
        self.run_.on_progress(dataclasses.replace(snapshot, workers=self._health()))

    def _health(self) -> tuple[str, ...]:
        """Per actor: stored this run, in flight, endpoints up; and what happened to the others."""
        lines = []
        for slot in self.slots.values():
            report = slot.last
            if report is None:
                lines.append(f"actor {slot.index}: starting")
                continue
            lines.append(
                f"actor {slot.index}: {self.stored_by.get(slot.index, 0):,} stored, "
                f"{sum(report.in_flight.values())} in flight, "
                f"{len(report.healthy)}/{len(slot.share[0])} endpoints up"
            )
        return (*lines, *self.gone)
