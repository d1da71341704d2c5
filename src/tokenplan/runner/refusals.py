"""Telling a refused row from a refused job: 4xx answers held back until they say which.

A 400 or 413 for one row (a prompt beyond the context, a body too large) is that row's outcome and
is final (``skipped.jsonl``). The same refusal for every row is a configuration error — a
``--max-tokens`` above the served context, a sampling value the engine refuses, a server that
rejects ``seed`` — and marking every row final would leave a run that "finished" with nothing
done and a corrected rerun with nothing to send.

Rule: refusals with the same status and message (digits masked, since engines put each prompt's
token count in it) on :data:`JOB_WIDE_ROWS` distinct rows, with no answer in between, are
job-wide. Eight because it keeps per-row refusals apart: with 10 % of rows genuinely too long,
eight in a row without a success has probability 0.1^8 = 1e-8 per position, while a job-wide
refusal reaches eight within the first wave of requests. A run that sent fewer rows than that
is judged at its end: a job of fewer rows, every one refused the same way, is job-wide too
(``min(8, rows)``; rows done by an earlier run count, so a rerun of two leftover rows is not) —
from two rows up: one row alone cannot tell its own refusal from the job's, and is skipped.

Until the rule decides, refused units are held here, written nowhere. An answer in between (or a
different refusal) releases them as skipped; a job-wide verdict releases them as errors
(``errors.jsonl``: not final, sent again by the next run).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

JOB_WIDE_ROWS = 8
_DIGITS = re.compile(r"\d+")
MESSAGE_CHARS = 300  # the server's message in the one-line error, at most


@dataclass(slots=True)
class Held:
    """A refused unit not yet written: its id, row id, source, status, the server's message and tries."""

    unit_id: str
    row_id: str
    source: dict[str, Any]
    status: int
    detail: str
    attempts: int


@dataclass(slots=True)
class RefusalStreak:
    """Refusals since the last answer that share one status and (digit-masked) message.

    ``threshold``: distinct rows that make the refusal job-wide (:data:`JOB_WIDE_ROWS`).
    """

    threshold: int = JOB_WIDE_ROWS
    key: tuple[int, str] | None = None
    rows: set[str] = field(default_factory=set)
    held: list[Held] = field(default_factory=list)
    job_wide: Held | None = None  # the refusal that made it job-wide, once it did

    def refused(self, unit: Held) -> list[Held]:
        """Add one refused unit; return units released as row refusals (skipped) because this one
        differs from the streak. After a job-wide verdict every refusal is held (sent again later)."""
        key = (unit.status, _DIGITS.sub("N", unit.detail or ""))
        released: list[Held] = []
        if self.job_wide is None and key != self.key:
            released, self.held, self.rows, self.key = self.held, [], set(), key
        self.held.append(unit)
        self.rows.add(unit.row_id)
        if self.job_wide is None and len(self.rows) >= self.threshold:
            self.job_wide = unit
        return released

    def answered(self) -> list[Held]:
        """An answer arrived: the refusals held so far were the rows' own; return them (skipped)."""
        if self.job_wide is not None:
            return []
        released, self.held, self.rows, self.key = self.held, [], set(), None
        return released

    def settle(self, rows: int) -> list[Held]:
        """The run ended: job-wide also when the job has fewer than ``threshold`` rows (``rows``,
        done ones included; at least 2) and every one was refused the same way; return the units
        released as skipped."""
        if self.job_wide is None and self.held and len(self.rows) >= max(2, min(self.threshold, rows)):
            self.job_wide = self.held[-1]
        if self.job_wide is not None:
            return []
        released, self.held = self.held, []
        return released

    def message(self, model: str) -> str:
        """The one-line error for a job-wide refusal (quoting the server's message, already redacted
        by the client)."""
        assert self.job_wide is not None
        detail = " ".join((self.job_wide.detail or "").split())
        if len(detail) > MESSAGE_CHARS:
            detail = detail[:MESSAGE_CHARS] + "…"
        return (
            f"the server refused {len(self.rows):,} rows in a row with {self.job_wide.status} "
            f"({detail!r}) for model {model!r}: a setting every request carries, not the rows "
            "(--max-tokens above the served context? a sampling value the engine refuses? a server "
            "that rejects seed: --no-seed); nothing was marked final: fix it and rerun the same command"
        )
