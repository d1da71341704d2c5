"""Telling a refused row from a refused job: 4xx answers held back until they say which.

A 400, 413 or 422 for one row (a prompt beyond the context, a body too large; TGI answers the first with 422) is that row's outcome and
is final (``skipped.jsonl``). The same refusal for every row is a configuration error — a
``--max-tokens`` above the served context, a sampling value the engine refuses, a server that
rejects ``seed`` — and marking every row final would leave a run that "finished" with nothing
done and a corrected rerun with nothing to send.

Rule: refusals with the same status and message from one endpoint on :data:`JOB_WIDE_ROWS`
distinct rows, with no answer from that endpoint in between, are job-wide — unless that endpoint
answered earlier in the run: a setting every request carries is refused from the first request
on, so a refusal after answers is the row's own (a file sorted by length puts its too-long rows
together at the end; they made a verdict no rerun could clear). A file sorted the other way, its
longest rows first, still reaches the verdict before any answer: there the rows stay in
``errors.jsonl`` and the message says what to check. In the message every
word that holds a digit is masked: engines put each prompt's token count in it, and gateways a
request id (``req_dd24…``, a UUID) that differs on every answer. Per endpoint, because with
several endpoints one misconfigured server (one that rejects ``seed``, say) is refused by itself
while the others answer: their answers say nothing about its refusals. Eight because it keeps per-row refusals apart: with 10 % of rows genuinely too long,
eight in a row without a success has probability 0.1^8 = 1e-8 per position, while a job-wide
refusal reaches eight within the first wave of requests. A run that sent fewer rows than that
is judged at its end: a job of fewer rows, every one refused the same way, is job-wide too
(``min(8, rows)``; rows done by an earlier run count, so a rerun of two leftover rows is not) —
from two rows up: one row alone cannot tell its own refusal from the job's, and is skipped.

Before the verdict, ``generate`` (either backend) asks the endpoint once more: a *control request*, the job's
settings (``max_tokens``, sampling, ``seed``…) on a one-line prompt. Refused too: the settings
are, and the verdict is job-wide at once. Answered: the rows themselves are refused (a file sorted
with its longest rows first puts its too-long rows together at the start, where they made a
verdict no rerun could clear), and the refusals stay held until a row is answered (they were the
rows' own: skipped) or the run ends (the end-of-run rule below); a content-wide refusal the
control cannot show (every row carries a field the server rejects) still ends as job-wide at the
end, or at :data:`HELD_ROWS_LIMIT` rows held with no answer. At the end of a run an endpoint that
holds refusals without a control request gets one too (:meth:`RefusalStreak.to_control_at_end`),
and where it answers and any row of the job was answered, in this run or an earlier one, its
refusals are the rows' own (:meth:`RefusalStreak.settle`).

Until the rule decides, refused units are held here, written nowhere. An answer from the same
endpoint in between (or a different refusal) releases them as skipped; a job-wide verdict releases them as errors
(``errors.jsonl``: not final, sent again by the next run).

With ``--backend ray`` the rule is the driver's, over every actor: each actor keeps its refusals
and the answers that bear on them, in order, in a :class:`RefusalLog` and reports them; the driver
feeds them to one :class:`RefusalStreak`. Held units are then settled as far as the actors are
concerned (they take new units meanwhile), and held only in the driver.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from tokenplan.client.auth import display_url

JOB_WIDE_ROWS = 8
# Rows held with no answer after the endpoint accepted the control request: beyond this the
# verdict is job-wide (bounds the memory held; ~300 B a unit). A file would need this many too-long
# rows in a row at its start to meet it.
HELD_ROWS_LIMIT = 10_000
_WORD_WITH_DIGIT = re.compile(r"[^\s'\"()\[\]{},;]*\d[^\s'\"()\[\]{},;]*")
MESSAGE_CHARS = 300  # the server's message in the one-line error, at most


@dataclass(slots=True)
class Held:
    """A refused unit not yet written: its id, row id, source, status, the server's message, tries
    and the endpoint (base URL) that refused it."""

    unit_id: str
    row_id: str
    source: dict[str, Any]
    status: int
    detail: str
    attempts: int
    endpoint: str = ""

    def skipped_record(self) -> dict[str, Any]:
        """The line for ``skipped.jsonl``: the refusal proved to be the row's own (final)."""
        return {
            "id": self.unit_id,
            "reason": "refused",
            "turn": -1,
            "status": self.status,
            "detail": self.detail,
            "source": self.source,
        }

    def error_record(self) -> dict[str, Any]:
        """The line for ``errors.jsonl``: a job-wide refusal, or a run that stopped before the rule
        decided (not final: the next run sends the unit again)."""
        return {
            "id": self.unit_id,
            "reason": "status",
            "status": self.status,
            "detail": self.detail,
            "received": None,
            "attempts": self.attempts,
            "source": self.source,
        }


def refusal_key(status: int, detail: str) -> tuple[int, str]:
    """What makes two refusals the same: the status and the message with every word that holds a
    digit masked (``you requested 8203 tokens (request id: req_dd24f0)`` →
    ``you requested N tokens (request id: N)``)."""
    return status, _WORD_WITH_DIGIT.sub("N", detail or "")


@dataclass(slots=True)
class _Run:
    """One endpoint's refusals since its last answer that share one status and masked message."""

    key: tuple[int, str] | None = None
    rows: set[str] = field(default_factory=set)
    held: list[Held] = field(default_factory=list)


@dataclass(slots=True)
class RefusalStreak:
    """Refusals held per endpoint until they say whether their rows or the job are refused.

    ``threshold``: distinct rows that make the refusal job-wide (:data:`JOB_WIDE_ROWS`).
    """

    threshold: int = JOB_WIDE_ROWS
    runs: dict[str, _Run] = field(default_factory=dict)
    job_wide: Held | None = None  # the refusal that made it job-wide, once it did
    answering: set[str] = field(default_factory=set)  # endpoints that answered at least once
    control: bool = False  # send a control request at the threshold (see the module docstring)
    to_control: list[str] = field(default_factory=list)  # endpoints whose control is to be sent
    controlling: set[str] = field(default_factory=set)  # control sent or to be sent, no outcome yet
    controlled: set[str] = field(default_factory=set)  # endpoints that answered the control request
    control_refused: bool = False  # the verdict came from a refused control request
    control_failed: str = ""  # the control request got no answer at all (what came back instead)
    merged: bool = False  # the verdict counts the refusals of several endpoints together

    @property
    def held(self) -> list[Held]:
        """Every refused unit held, over all endpoints."""
        return [h for run in self.runs.values() for h in run.held]

    @property
    def rows(self) -> set[str]:
        """The distinct rows of the job-wide refusal's endpoint (of all endpoints before a verdict)."""
        if self.job_wide is not None:
            return self.runs[self.job_wide.endpoint].rows
        return {r for run in self.runs.values() for r in run.rows}

    def refused(self, unit: Held) -> list[Held]:
        """Add one refused unit; return units released as row refusals (skipped): this one where
        its endpoint already answered in this run, else those of its endpoint's streak when this
        one differs from it. After a job-wide verdict every refusal is held (sent again later)."""
        if self.job_wide is None and unit.endpoint in self.answering:
            # the endpoint answered other rows of this run with the same settings: the refusal is
            # this row's (rows too long for the context, clustered at the end of a file sorted by
            # length, made a verdict no rerun could clear)
            return [unit]
        run = self.runs.setdefault(unit.endpoint, _Run())
        key = refusal_key(unit.status, unit.detail)
        released: list[Held] = []
        if self.job_wide is None and key != run.key:
            released, run.held, run.rows, run.key = run.held, [], set(), key
        run.held.append(unit)
        run.rows.add(unit.row_id)
        if self.job_wide is None and len(run.rows) >= self.threshold:
            if not self.control:
                self.job_wide = unit
            elif unit.endpoint in self.controlled:
                if len(run.rows) >= HELD_ROWS_LIMIT:
                    self.job_wide = unit
            elif unit.endpoint not in self.controlling:
                self.controlling.add(unit.endpoint)
                self.to_control.append(unit.endpoint)
        return released

    def take_controls(self) -> list[str]:
        """Endpoints whose control request is to be sent now (each once), removed from here."""
        endpoints, self.to_control = self.to_control, []
        return endpoints

    def control_answered(self, endpoint: str, answered: bool | None, detail: str = "") -> None:
        """The control request to ``endpoint`` came back: ``answered`` True (the job's settings are
        accepted: its refusals stay held until a row is answered or the run ends), False (refused
        as the rows were: the settings are, and the verdict is job-wide), or None (no answer at
        all, ``detail`` says what came instead: a 503, a timeout; the verdict is job-wide, and
        says so rather than that the settings were refused)."""
        self.controlling.discard(endpoint)
        run = self.runs.get(endpoint)
        if self.job_wide is not None or endpoint in self.answering or run is None or not run.held:
            return  # decided meanwhile: a row was answered, or another verdict came first
        if answered:
            self.controlled.add(endpoint)
            if len(run.rows) >= HELD_ROWS_LIMIT:
                self.job_wide = run.held[-1]
        elif answered is None:
            self.job_wide, self.control_failed = run.held[-1], detail or "no answer"
        else:
            self.job_wide, self.control_refused = run.held[-1], True

    def to_control_at_end(self) -> list[str]:
        """At the end of a finished run: the endpoints that hold refusals and have had no control
        request (their streaks stayed below the threshold, e.g. a rerun's leftover rows split over
        endpoints), marked as sent; their controls decide before the end-of-run rule does."""
        if not self.control or self.job_wide is not None:
            return []
        out = [e for e, run in self.runs.items() if run.held and e not in self.controlled and e not in self.controlling]
        self.controlling.update(out)
        return out

    def answered(self, endpoint: str = "") -> list[Held]:
        """``endpoint`` answered: the refusals it gave so far were the rows' own; return them
        (skipped). Another endpoint's refusals stay held."""
        self.answering.add(endpoint)
        if self.job_wide is not None or endpoint not in self.runs:
            return []
        return self.runs.pop(endpoint).held

    def settle(self, rows: int, done_before: int = 0) -> list[Held]:
        """The run ended; return the units released as skipped.

        - An endpoint that answered a control request (its settings accepted) refused rows for
          what they hold: skipped, where some row of the job was answered, in this run or in an
          earlier one (``done_before`` rows); with none ever answered every row may carry what
          the server refuses, which the rules below judge.
        - Job-wide when one endpoint refused every request it got (two rows or more) while it
          never answered, answered no control request, and another endpoint answered (a rerun of
          a few leftover rows on one endpoint is judged by the next rule, not this one).
        - Job-wide when the job has fewer than ``threshold`` rows (``rows``, done ones included;
          at least 2) and every one was refused the same way (by whichever endpoint).
        """
        released: list[Held] = []
        if self.job_wide is None and (self.answering or done_before > 0):
            for endpoint in [e for e in self.runs if e in self.controlled]:
                released += self.runs.pop(endpoint).held
        held = self.held
        for endpoint, run in self.runs.items():
            # an endpoint that refused every request it got, on two rows or more, alike, while
            # others answered: its share was too small to reach the streak (a break-it pass: a
            # 5-row job over a healthy and a seed-refusing endpoint ended [ok], 2 rows skipped)
            others_answered = bool(self.answering - {endpoint})
            if (
                self.job_wide is None
                and others_answered
                and endpoint not in self.answering
                and endpoint not in self.controlled
                and len(run.rows) >= 2
            ):
                self.job_wide = run.held[-1]
        keys = {run.key for run in self.runs.values() if run.held}
        if self.job_wide is None and held and len(keys) == 1:
            refused_rows = {r for run in self.runs.values() for r in run.rows}
            if len(refused_rows) >= max(2, min(self.threshold, rows)):
                self.job_wide = held[-1]
                self.merged = sum(bool(run.held) for run in self.runs.values()) > 1
                merged = _Run(next(iter(keys)), refused_rows, held)
                self.runs = {self.job_wide.endpoint: merged}
        if self.job_wide is not None:
            return released
        self.runs = {}
        return released + held

    def take_held(self) -> list[Held]:
        """Every unit still held, removed from here (to be written as errors: sent again)."""
        held, self.runs = self.held, {}
        if self.job_wide is not None:
            self.runs = {self.job_wide.endpoint: _Run(None, set(), [])}
        return held

    def message(self, model: str, endpoints: int = 1) -> str:
        """The one-line error for a job-wide refusal (quoting the server's message, already redacted
        by the client); with more than one of ``endpoints`` it names the one that refused (its
        URL as :func:`~tokenplan.client.auth.display_url` shows it)."""
        assert self.job_wide is not None
        detail = " ".join((self.job_wide.detail or "").split())
        if len(detail) > MESSAGE_CHARS:
            detail = detail[:MESSAGE_CHARS] + "…"
        where = f" at {display_url(self.job_wide.endpoint)}" if endpoints > 1 and self.job_wide.endpoint else ""
        server = "the servers" if self.merged else f"the server{where}"
        head = f"{server} refused {len(self.rows):,} row{'s' if len(self.rows) != 1 else ''} in a row with {self.job_wide.status} ({detail!r})"
        if self.control_failed:
            return (
                f"{head} for model {model!r} before answering any, and a short prompt with the job's settings "
                f"got no answer ({self.control_failed[:MESSAGE_CHARS]}): the server may be failing; nothing "
                "was marked final: rerun the same command once it answers"
            )
        if self.job_wide.endpoint in self.controlled:
            return (
                f"{head} for model {model!r}, with no row answered, though it answers a short prompt with "
                "the job's settings: every row is refused for what it holds (prompts above the served "
                "context? a field every row carries?); nothing was marked final"
            )
        also = ", and a short prompt with the same settings too" if self.control_refused else ""
        return (
            f"{head} for model {model!r}{also}: a setting every request carries, not the rows "
            "(--max-tokens above the served context? a sampling value the engine refuses? a server "
            "that rejects seed: --no-seed); nothing was marked final: fix it and rerun the same command"
        )


@dataclass(slots=True)
class RefusalLog:
    """One Ray actor's refusals and the answers that bear on them, in order, for the driver's
    :class:`RefusalStreak` (the actor decides nothing: ``refused`` and ``answered`` release no unit).

    ``events``: ``("refused", Held)`` and ``("answered", endpoint)``, oldest first. An answer is
    logged only where it tells the streak something: an endpoint's first answer (from then on its
    refusals are the rows' own) and the first answer after a refusal from that endpoint (which
    releases its held ones), so a run of answers costs one event, not one per row.
    """

    events: list[tuple[str, Any]] = field(default_factory=list)
    _answered: set[str] = field(default_factory=set)
    _refused_since: set[str] = field(default_factory=set)

    def refused(self, unit: Held) -> list[Held]:
        self.events.append(("refused", unit))
        self._refused_since.add(unit.endpoint)
        return []

    def answered(self, endpoint: str = "") -> list[Held]:
        if endpoint not in self._answered or endpoint in self._refused_since:
            self.events.append(("answered", endpoint))
            self._answered.add(endpoint)
            self._refused_since.discard(endpoint)
        return []

    def take(self) -> list[tuple[str, Any]]:
        """The events since the last call, removed from here."""
        events, self.events = self.events, []
        return events


def replay(streak: RefusalStreak, events: list[tuple[str, Any]]) -> list[Held]:
    """Feed an actor's :class:`RefusalLog` events to ``streak`` in order; return the units released
    as the rows' own refusals (to be written as skipped)."""
    released: list[Held] = []
    for kind, value in events:
        released += streak.refused(value) if kind == "refused" else streak.answered(value)
    return released
