"""Provisioning: how many GPUs of one type a job should get to meet a deadline and/or a budget.

GPUs are counted in whole rental units (``Gpu.node_gpus``: one PCIe card, an 8-GPU HGX board, a
4-GPU GB200 NVL72 tray). More GPUs add replicas, so the job's wall time falls as the count grows
while its cost stays level or rises (a longer drain tail per replica, wider layouts):

- with a deadline (alone or with a budget), the counts that meet it form an upward-closed set and
  the answer is the *fewest* GPUs that meet every target (:func:`fewest_gpus`): the search doubles
  the number of units until the target is met, then bisects between the last count that missed
  and the first that met;
- with a budget alone, the counts within it form a downward-closed set and the answer is the count
  that *finishes soonest* within it (:func:`soonest_within_budget`): the search doubles until the
  budget is exceeded, then bisects between the last count within it and the first over it.

Each count tried is searched in full (every layout, format and speculative setting) by the
caller's ``search_at``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tokenplan.units import S_PER_DAY, days_words, duration_words, usd_text

if TYPE_CHECKING:  # search imports the job model; outcome() only reads a result's fields
    from tokenplan.planning.search import Candidate, OptionResult

DEFAULT_MAX_UNITS = 64  # the most rental units one search considers (512 GPUs of an 8-GPU board)


@dataclass(frozen=True, slots=True)
class Target:
    """What the job must meet: a wall time (seconds) and/or a cost (USD); None = no limit."""

    deadline_s: float | None = None
    budget_usd: float | None = None

    def met_by(self, wall_s: float, usd: float | None) -> bool:
        """True when a job of ``wall_s`` seconds costing ``usd`` (None = unknown price) meets
        both limits. An unknown price never meets a budget."""
        if self.deadline_s is not None and wall_s > self.deadline_s:
            return False
        if self.budget_usd is not None and (usd is None or usd > self.budget_usd):
            return False
        return True


@dataclass(frozen=True, slots=True)
class Outcome:
    """The job at one GPU count: its fastest configuration that meets the target, else its
    fastest configuration (``meets`` False), or nothing that runs (``wall_s`` None).

    Attributes:
        gpus: GPUs (a whole number of rental units).
        wall_s: job wall time (seconds), None when no configuration runs at this count.
        usd: job cost (USD), None when unknown.
        meets: the target is met.
        payload: the caller's object for this count (its search result and chosen candidate).
        in_time: the deadline alone is met, checked as ``meets`` checks it (a prior τ at its low
            end); None: by ``wall_s``.
        checked_wall_s, checked_usd: the wall time (seconds) and cost (USD) ``meets`` judged the
            target on: ``wall_s`` and ``usd`` at the low end of a prior τ's published acceptance
            (``Candidate.ranking_wall_s``, ``ranking_usd``), else the same figures; None as above.
    """

    gpus: int
    wall_s: float | None
    usd: float | None
    meets: bool
    payload: object = None
    in_time: bool | None = None
    checked_wall_s: float | None = None
    checked_usd: float | None = None


@dataclass(frozen=True, slots=True)
class Provision:
    """The answer for one GPU type.

    Attributes:
        unit_gpus: GPUs per rental unit.
        chosen: the fewest-GPU outcome that meets the target, or None.
        closest: when none meets it, the tried count that came closest (the most GPUs that run).
        tried: every count searched, fewest GPUs first.
        why: one line: what the chosen count does, or why no count up to the limit meets it.
    """

    unit_gpus: int
    chosen: Outcome | None
    closest: Outcome | None
    tried: list[Outcome] = field(default_factory=list)
    why: str = ""


def fewest_gpus(
    outcome_at: Callable[[int], Outcome], unit_gpus: int, max_gpus: int, target: Target | None = None
) -> Provision:
    """The fewest GPUs, in multiples of ``unit_gpus`` up to ``max_gpus``, whose outcome meets the
    target (see the module docstring for the search).

    Args:
        outcome_at: the job at a GPU count (called once per count tried).
        unit_gpus: GPUs per rental unit (≥ 1).
        max_gpus: the most GPUs to consider (≥ ``unit_gpus``).
        target: the limits, only to say in ``why`` which one the closest count misses.

    Returns:
        Provision: ``chosen`` None when no count up to ``max_gpus`` meets the target; ``why``
        then says what the largest count tried achieves. Raises nothing of its own.
    """
    tried: dict[int, Outcome] = {}

    def at(units: int) -> Outcome:
        if units not in tried:
            tried[units] = outcome_at(units * unit_gpus)
        return tried[units]

    deadline_s = target.deadline_s if target is not None else None

    def ok(o: Outcome) -> bool:
        # With a deadline the search runs on it alone (upward-closed in the count); a budget as
        # well is checked at the count found: cost rises with the count, so the fewest GPUs that
        # meet the deadline are the cheapest that do, and no larger count can meet both.
        if deadline_s is None:
            return o.meets
        if o.in_time is not None:  # wall_s is a prior τ's figure; the deadline is met at its low end
            return o.in_time
        return o.wall_s is not None and o.wall_s <= deadline_s

    max_units = max(1, max_gpus // unit_gpus)
    lo, hi = 0, None  # lo: most units known to miss (0 = none tried); hi: fewest known to meet
    for units in _doubling(max_units):
        if ok(at(units)):
            hi = units
            break
        lo = units
    if hi is None:
        closest = _closest(list(tried.values()), target)
        return Provision(
            unit_gpus, None, closest, _sorted(tried), _miss_text(closest, max_units * unit_gpus, target, unit_gpus)
        )
    while hi - lo > 1:
        mid = _mid(lo, hi)
        if ok(at(mid)):
            hi = mid
        else:
            lo = mid
    chosen = tried[hi]
    if not chosen.meets:  # the deadline is met at this count, the budget is not (nor at any larger one)
        assert chosen.wall_s is not None  # ok(chosen) held with a deadline: a wall time within it
        took = f"the fewest GPUs that meet the deadline, {chosen.gpus}, take {days_words(chosen.wall_s)}"
        if chosen.usd is None:  # "… at no public price to check the budget against, and more GPUs cost …"
            return Provision(unit_gpus, None, chosen, _sorted(tried), f"{took}; {_NO_PRICE}")
        money = (
            f"{usd_text(chosen.usd)}, over the {usd_text(target.budget_usd)} budget"
            if target and target.budget_usd
            else ""
        )
        return Provision(
            unit_gpus, None, chosen, _sorted(tried), f"{took} at {money}, and more GPUs cost at least as much"
        )
    return Provision(unit_gpus, chosen, None, _sorted(tried), "")


def soonest_within_budget(
    outcome_at: Callable[[int], Outcome], unit_gpus: int, max_gpus: int, target: Target
) -> Provision:
    """The count, in multiples of ``unit_gpus`` up to ``max_gpus``, that finishes the job soonest
    while its cost stays within ``target.budget_usd`` (see the module docstring for the search).

    The cost of a fixed job is level or rising in the GPU count (the same GPU-hours plus a longer
    drain tail), so the counts within the budget are the ones up to a limit; the search finds that
    limit and returns, among the counts tried within the budget, the one with the shortest wall
    time (the fewer GPUs on a tie).

    Args:
        outcome_at: the job at a GPU count (called once per count tried); ``meets`` is the budget.
        unit_gpus: GPUs per rental unit (≥ 1).
        max_gpus: the most GPUs to consider (≥ ``unit_gpus``).
        target: the budget (``deadline_s`` None).

    Returns:
        Provision: ``chosen`` None when even one rental unit exceeds the budget; ``why`` then says
        so. Raises nothing of its own.
    """
    tried: dict[int, Outcome] = {}

    def at(units: int) -> Outcome:
        if units not in tried:
            tried[units] = outcome_at(units * unit_gpus)
        return tried[units]

    max_units = max(1, max_gpus // unit_gpus)
    lo, hi = 0, None  # lo: most units known within the budget (0 = none); hi: fewest known over it
    for units in _doubling(max_units):
        if not at(units).meets:
            hi = units
            break
        lo = units
    if lo == 0:
        closest = _closest(list(tried.values()), target)
        return Provision(
            unit_gpus, None, closest, _sorted(tried), _miss_text(closest, max_units * unit_gpus, target, unit_gpus)
        )
    while hi is not None and hi - lo > 1:
        mid = _mid(lo, hi)
        if at(mid).meets:
            lo = mid
        else:
            hi = mid
    within = [o for o in tried.values() if o.meets and o.wall_s is not None]
    chosen = min(within, key=lambda o: (o.wall_s, o.gpus)) if within else tried[lo]
    limit = (
        f"{max_units * unit_gpus} GPUs is the search's limit ({max_units} rental units), not the budget's: "
        "more would finish sooner within it"
        if hi is None and chosen.gpus == max_units * unit_gpus and max_units == DEFAULT_MAX_UNITS
        else ""
    )
    return Provision(unit_gpus, chosen, None, _sorted(tried), limit)


def _doubling(n: int) -> Iterator[int]:
    """1, 2, 4, … below ``n``, then up to ``n`` by the roundest counts (``n`` rounded down to a
    multiple of 8, 4, 2, 1: 45 → 40, 44, 45). A count with fewer factors of two has fewer
    layouts (TP and PP are powers of two) and can be far slower: 45 L40S, TP1 only, missed a
    deadline that 34 met (TP2×DP17), and the search said no count up to 45 meets it."""
    units = 1
    while units < n:
        yield units
        units *= 2
    last = units // 2
    step = max(last, 1)
    while step >= 1:
        if n - n % step > last:
            last = n - n % step
            yield last
        step //= 2


def _mid(lo: int, hi: int) -> int:
    """The count strictly between ``lo`` and ``hi`` (``hi - lo`` ≥ 2) with the most factors of
    two: the midpoint where the interval is a power of two wide and aligned to it, as doubling
    leaves it; otherwise the roundest count (32..45 → 40, not 38 then 35), for the reason in
    :func:`_doubling`."""
    step = 1 << hi.bit_length()
    while (lo // step + 1) * step >= hi:
        step //= 2
    return (lo // step + 1) * step


def _sorted(tried: dict[int, Outcome]) -> list[Outcome]:
    return [tried[k] for k in sorted(tried)]


def _closest(outcomes: Sequence[Outcome], target: Target | None = None) -> Outcome | None:
    """Among the outcomes where something runs, the one nearest the target: with a budget, the
    fastest within it, else the cheapest (a budget nothing meets is best served by the count
    that costs least); without one, the most GPUs (the fastest)."""
    running = [o for o in outcomes if o.wall_s is not None]
    if not running:
        return None
    budget = target.budget_usd if target is not None else None
    priced = [o for o in running if o.usd is not None]
    if budget is not None and priced:
        within = [o for o in priced if o.usd is not None and o.usd <= budget]  # priced: usd set
        return max(within, key=lambda o: o.gpus) if within else min(priced, key=lambda o: (o.usd, o.gpus))
    return max(running, key=lambda o: o.gpus)


_NO_PRICE = "no public price to check the budget against: pass --price GPU=USD"


def _miss_text(closest: Outcome | None, max_gpus: int, target: Target | None, unit_gpus: int = 1) -> str:
    """Why no count meets the target: what the closest count does and which limit it misses.
    When the closest is one rental unit and it misses the budget, more GPUs cannot help (they cost
    at least as much), so the sentence says that instead of naming the largest count searched."""
    if closest is None or closest.wall_s is None:  # _closest picks only outcomes where something runs
        return f"no configuration runs on up to {max_gpus} GPUs"
    if target is not None and target.budget_usd is not None and closest.usd is None:  # no count can meet it
        return f"{closest.gpus} GPUs take {days_words(closest.wall_s)}; {_NO_PRICE}"
    money = f", {usd_text(closest.usd)}" if closest.usd is not None else " (no public price: pass --price)"
    missed = []
    if target is not None and target.deadline_s is not None and closest.wall_s > target.deadline_s:
        missed.append(f"over the {duration_words(target.deadline_s)} deadline")
    if target is not None and target.budget_usd is not None:
        if closest.usd is None:
            missed.append("no price to check the budget against")
        elif closest.usd > target.budget_usd:
            missed.append(f"over the {usd_text(target.budget_usd)} budget")
    why = f" ({', '.join(missed)})" if missed else ""
    # in the deadline's own unit where it is under a day: "1.4 h (over the 1 h deadline)", not
    # "0.06 days" beside it (a new-user pass)
    short = target is not None and target.deadline_s is not None and target.deadline_s < S_PER_DAY
    took = duration_words(closest.wall_s) if short else days_words(closest.wall_s)
    over_budget = (
        target is not None
        and target.budget_usd is not None
        and closest.usd is not None
        and closest.usd > target.budget_usd
    )
    if over_budget and closest.gpus == unit_gpus:
        unit = "one rental unit" if unit_gpus > 1 else "one GPU"
        return (
            f"even the fewest GPUs, {closest.gpus} ({unit}), take {took}{money}"
            f"{why}, and more GPUs cost at least as much"
        )
    return f"no count up to {max_gpus} GPUs meets the target; {closest.gpus} GPUs take {took}{money}{why}"


def outcome(result: OptionResult, gpus: int, target: Target) -> Outcome:
    """The job at ``gpus`` GPUs from one option's search (an ``OptionResult``): its leading
    simulated configuration that meets ``target``, else its leader. A speculative configuration
    whose τ is a prior must meet it at the low end of the published acceptance
    (``Candidate.ranking_wall_s``, ``ranking_usd``). One the search set aside as unmeasured
    (``planning.measured.measured_first``: vLLM's MTP on a hybrid, an unmeasured PP layout) is
    not one that meets it: the plan launches the measured one (a break-it pass: a budget met only
    by the set-aside MTP figure was said met while the launch cost more). The payload is ``(result, candidate)``
    (candidate None when nothing runs). Raises nothing."""
    best = result.best
    kept = [c for c in result.ranked if c is best or best is None or not _set_aside(result, c, best)]  # ranking order
    for c in kept:
        if target.met_by(c.ranking_wall_s, c.ranking_usd):
            met_in_time = target.deadline_s is not None or None
            return Outcome(gpus, c.wall_s, c.cost.usd, True, (result, c), met_in_time, c.ranking_wall_s, c.ranking_usd)
    if best is None:
        return Outcome(gpus, None, None, False, (result, None))
    # Not met: the leader, unless one meets the deadline alone (then the budget is what it misses);
    # in_time says so, since a prior τ's wall_s within the deadline is not the deadline met (a
    # break-it pass: 248 H200s "met" 15 min at 14.8 min while only 256 met it at the low end).
    on_time = Target(target.deadline_s)
    timely = next((c for c in kept if on_time.met_by(c.ranking_wall_s, c.ranking_usd)), None)
    shown = best if timely is None or target.deadline_s is None else timely
    in_time = None if target.deadline_s is None else timely is not None
    return Outcome(
        gpus, shown.wall_s, shown.cost.usd, False, (result, shown), in_time, shown.ranking_wall_s, shown.ranking_usd
    )


def _set_aside(result: OptionResult, c: Candidate, best: Candidate) -> bool:
    """``c`` runs in a regime ``planning.measured.measured_first`` sets aside for ``best``."""
    return result.unmeasured(c.evaluation) and not result.unmeasured(best.evaluation)


def provision(search_at: Callable[[int], OptionResult], target: Target, unit_gpus: int, max_gpus: int) -> Provision:
    """The GPUs (whole units) for ``target``: the fewest that meet a deadline (and budget), or, with a
    budget alone, the count that finishes soonest within it (module docstring).

    Args:
        search_at: the option's full search at a GPU count (returns an ``OptionResult``).
        target: the deadline (seconds) and/or budget (USD).
        unit_gpus, max_gpus: GPUs per rental unit; the most GPUs to consider.

    Returns:
        Provision (see :func:`fewest_gpus`); each outcome's payload is ``(OptionResult,
        Candidate | None)``. Raises nothing of its own.
    """
    at = lambda n: outcome(search_at(n), n, target)  # noqa: E731
    if target.deadline_s is None and target.budget_usd is not None:
        return soonest_within_budget(at, unit_gpus, max_gpus, target)
    return fewest_gpus(at, unit_gpus, max_gpus, target)
