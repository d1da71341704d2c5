"""Which units go to which Ray actor: the left-anti join on id, and each actor's endpoints.

Pure functions, no Ray: the default test suite checks them (tests/unit/runner/test_ray_backend_parts.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from tokenplan.runner.input.rows import Reject
from tokenplan.runner.input.shapes import Row
from tokenplan.runner.requests import WorkUnit, work_units
from tokenplan.runner.spec import RunTally
from tokenplan.runner.store.idset import IdSet


def endpoint_shares(endpoints: Sequence[str], actors: int, concurrency: int) -> list[tuple[tuple[str, ...], int]]:
    """Each actor's endpoints and its requests in flight per endpoint.

    With at least as many endpoints as actors, actor ``i`` takes endpoints ``i, i+A, i+2A…`` at
    the full ``concurrency``; with fewer, actor ``i`` takes endpoint ``i mod E`` and the actors on
    one endpoint split its ``concurrency`` (the first ``concurrency mod k`` get one more), so each
    endpoint still sees exactly ``concurrency`` requests (at least 1 per actor).
    """
    if len(endpoints) >= actors:
        return [(tuple(endpoints[i::actors]), concurrency) for i in range(actors)]
    shares: list[tuple[tuple[str, ...], int]] = []
    for i in range(actors):
        j = i % len(endpoints)
        sharers = len(range(j, actors, len(endpoints)))
        rank = i // len(endpoints)
        shares.append(((endpoints[j],), max(1, concurrency // sharers + (rank < concurrency % sharers))))
    return shares


def pending_units(
    source: Iterator[Row | Reject], done: IdSet, n: int, tally: RunTally, on_reject: Callable[[Reject], None]
) -> Iterator[WorkUnit]:
    """The units of ``source`` whose id is not in ``done`` (a left-anti join on id, streamed);
    counts units seen, already done and rejected rows in ``tally``."""
    for item in source:
        if isinstance(item, Reject):
            tally.rejected_rows += 1
            on_reject(item)
            continue
        for unit in work_units(item, n):
            tally.units_seen += 1
            if done.done_for_input(unit.id):
                tally.already_done += 1
                continue
            yield unit
