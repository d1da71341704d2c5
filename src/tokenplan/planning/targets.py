"""``plan --deadline/--budget``: the fewest GPUs of each type that meet the targets, as typed
rows and as sentences (the search itself is ``tokenplan.planning.provision``)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import replace

from tokenplan.errors import InputError, shown
from tokenplan.job.evaluate import Evaluation
from tokenplan.planning.provision import Outcome, Provision
from tokenplan.planning.rank import describe
from tokenplan.planning.results import Provisioning, ProvisionRow, ProvisionTry
from tokenplan.planning.search import Candidate, OptionResult
from tokenplan.planning.space import HardwareOption
from tokenplan.results import Bands
from tokenplan.units import S_PER_DAY, days_band_words, days_words, duration_words, usd_text


def check_targets(deadline_s: float | None, budget_usd: float | None) -> None:
    """Name a deadline (seconds) or budget (US dollars) that is not a positive number.

    Raises:
        InputError: either is given and not > 0.
    """
    if deadline_s is not None and not 0 < deadline_s < math.inf:
        raise InputError("deadline", deadline_s, "a finite duration > 0, e.g. 2d, 36h")
    if budget_usd is not None and not 0 < budget_usd < math.inf:
        raise InputError(
            "budget", shown(budget_usd), "a finite number of US dollars > 0, e.g. 1500 (leave it out for none)"
        )


def at_count(search: Callable[[HardwareOption], OptionResult], opt: HardwareOption) -> Callable[[int], OptionResult]:
    """``search`` of ``opt`` at a GPU count: the ``search_at`` of :func:`~tokenplan.planning.provision.provision`."""
    return lambda n: search(replace(opt, count=n))


def provisioned_result(p: Provision) -> OptionResult:
    """The search at the count a provisioning answer settled on (or came closest with)."""
    shown = p.chosen or p.closest or p.tried[-1]
    return _payload(shown)[0]


def _payload(o: Outcome) -> tuple[OptionResult, Candidate | None]:
    """The ``(OptionResult, Candidate | None)`` that :func:`~tokenplan.planning.provision.outcome`
    puts in every outcome of a plan's provisioning (``Outcome.payload`` is typed ``object``)."""
    assert isinstance(o.payload, tuple)  # set by planning.provision.outcome
    return o.payload


def provisioning(
    deadline_s: float | None,
    budget_usd: float | None,
    answers: list[tuple[HardwareOption, Provision]],
    bands: Callable[[object, Evaluation, Mapping[str, tuple[str, bool]]], Bands | None],
    figures: Mapping[str, tuple[str, bool]],
) -> Provisioning:
    """``plan``'s ``provisioning`` section for the targets (seconds, US dollars): per GPU type,
    the fewest GPUs and the job at that count, with the 80 % bands of its days and dollars
    (``bands(row, evaluation, figures)``: ``planning.answer.BandsOf``; ``figures``: the plan's
    figure → band metric, of which ``wall_days`` and ``usd`` are banded)."""
    rows = []
    for opt, p in answers:
        o = p.chosen
        tried = tuple(
            ProvisionTry(
                t.gpus,
                None if t.wall_s is None else t.wall_s / S_PER_DAY,
                t.usd,
                t.meets,
                None if t.checked_wall_s is None else t.checked_wall_s / S_PER_DAY,
                t.checked_usd,
            )
            for t in p.tried
        )
        row = ProvisionRow(
            gpu=opt.gpu.key,
            unit_gpus=p.unit_gpus,
            usd_per_gpu_hour=opt.usd_per_gpu_hour,
            meets=o is not None,
            gpus=None,
            nodes=None,
            wall_days=None,
            usd=None,
            configuration=None,
            why=p.why,
            tried=tried,
        )
        if o is not None:
            chosen = _payload(o)[1]
            assert chosen is not None and o.wall_s is not None  # a count that meets the target runs one
            row = replace(
                row,
                gpus=o.gpus,
                nodes=o.gpus // p.unit_gpus,
                wall_days=o.wall_s / S_PER_DAY,
                usd=o.usd,
                configuration=describe(chosen),
                why=p.why or None,  # on a count that meets the target: a caveat (the search's limit)
            )
            # The 80 % band of the configuration at that count (issue 10), on days and dollars.
            row = replace(row, bands=bands(row, chosen.evaluation, {k: figures[k] for k in ("wall_days", "usd")}))
        rows.append(row)
    return Provisioning(
        deadline_days=None if deadline_s is None else deadline_s / S_PER_DAY, budget_usd=budget_usd, options=tuple(rows)
    )


def _days_text(days: float) -> str:
    """``1 day``, ``2 days``, ``1.5 days``; ``6 h`` below a day (:func:`~tokenplan.units.duration_words`)."""
    return duration_words(days * S_PER_DAY)


def provisioning_sentences(prov: Provisioning, startup_s: float = 0.0) -> list[str]:
    """One sentence per GPU type: the count chosen for the target (the fewest that meet a
    deadline; the soonest within a budget alone), or why none does. ``startup_s``: the servers'
    start-up (seconds) the days and dollars count (``Job.startup_s``; 0 = left out)."""
    limits = []
    if prov.deadline_days is not None:
        limits.append(_days_text(prov.deadline_days))
    if prov.budget_usd is not None:
        limits.append(f"{usd_text(prov.budget_usd)}")
    lines = []
    for row in prov.options:
        if not row.meets:
            lines.append(f"{row.gpu} within {' and '.join(limits)}: {row.why}.")
            continue
        assert row.nodes is not None and row.gpus is not None and row.wall_days is not None  # set where it meets
        unit = f" ({row.nodes} × {row.unit_gpus}-GPU node{'s' if row.nodes > 1 else ''})" if row.unit_gpus > 1 else ""
        money = f", {usd_text(row.usd)}" if row.usd is not None else " (no public price: pass --price)"
        band = row.bands.intervals.get("wall_days") if row.bands is not None else None
        spread = ""  # the band in the point figure's unit (days_words: days, or words below a tenth of a day)
        if band:
            spread = (
                f" (80 %: {days_band_words(row.wall_days * S_PER_DAY, band.low * S_PER_DAY, band.high * S_PER_DAY)})"
            )
        lines.append(
            f"{row.gpu} within {' and '.join(limits)}: {row.gpus} GPU{'s' if row.gpus > 1 else ''}{unit} → "
            f"{days_words(row.wall_days * S_PER_DAY)}{spread}{money} with {row.configuration}{_overrun(prov, row)}"
            + (f"; {row.why}" if row.why else "")
            + _startup_note(row.wall_days, startup_s)
            + "."
        )
    return lines


# Below this wall time (hours) the time servers take to start is said beside the figure.
STARTUP_NOTE_BELOW_H = 1.0


def _startup_note(wall_days: float, startup_s: float) -> str:
    """For a job under :data:`STARTUP_NOTE_BELOW_H`, where the servers' start-up is a large share
    of the time and money: what the figures count of it (``startup_s`` seconds, ``plan
    --startup``), and that a first start can take longer (a new-user pass: 512 B200s bought for a
    13-minute job read as if starting them were free). Empty from an hour up."""
    if wall_days * 24 >= STARTUP_NOTE_BELOW_H:
        return ""
    if startup_s <= 0:
        return (
            " — server start-up (reading the weights, compiling, capturing CUDA graphs) is not counted (--startup 0), "
            "and for a job under an hour it is a large share: fewer GPUs for longer may cost less"
        )
    return (
        f" — this counts {duration_words(startup_s)} of server start-up (--startup); a first start that downloads "
        "the weights or compiles can take several times that, and for a job under an hour it is a large share: "
        "fewer GPUs for longer may cost less"
    )


def _overrun(prov: Provisioning, row: ProvisionRow) -> str:
    """Where a count meets a target at its point estimate but its 80 % band reaches past it:
    say so, so that a deadline or budget met only at the estimate is read as at risk."""
    if row.bands is None:
        return ""
    out = []
    days, usd = row.bands.intervals.get("wall_days"), row.bands.intervals.get("usd")
    if prov.deadline_days is not None and days is not None and days.high > prov.deadline_days:
        out.append(f"the 80 % band reaches past the {_days_text(prov.deadline_days)} deadline")
    if prov.budget_usd is not None and usd is not None and usd.high > prov.budget_usd:
        out.append(f"the 80 % band reaches past the {usd_text(prov.budget_usd)} budget (to {usd_text(usd.high)})")
    return f" — at risk: {'; '.join(out)}" if out else ""
