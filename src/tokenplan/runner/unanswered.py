"""Telling a server that answers no row from rows that are not answered: the job-wide stop on
failures that exhaust every try.

A row whose every try failed goes to ``errors.jsonl`` (not final: a rerun sends it again). When
:data:`~tokenplan.runner.refusals.JOB_WIDE_ROWS` distinct rows fail so, with no answer between,
the failure may be the server's rather than the rows':

- an HTTP status (a 500 or a 429 to everything) or an answer malformed in its shape
  (:attr:`~tokenplan.client.answers.RequestFailed.malformed`: not JSON, no choices, usage not
  counts — a proxy's HTML page) is the server's: the run stops at once;
- an answer that is not finished (``finish_reason`` ``content_filter`` or ``abort``, a stream that
  ends without one, no text while it says it is complete) can be what one row's prompt got (a
  filter, a prompt the model answers with nothing), so the run first asks the endpoint the job's
  settings on a one-line prompt (:func:`~tokenplan.runner.control.control_request`, as the
  refusal rule does). Answered: the rows were their own and the run goes on (the streak starts
  again). Not answered: the run stops. Before, a server that withheld every answer
  (``content_filter`` on every request) sent every row of the input through all its tries to
  ``errors.jsonl`` — hours for a large input (a break-it pass) — while counting those answers
  as the server's stopped every rerun of a file whose first rows the model answers with nothing.

Transport failures and deadlines are left to the endpoint pool, which takes an endpoint out and
waits out a restart (:mod:`tokenplan.client.endpoints`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tokenplan.client.answers import RequestFailed
from tokenplan.runner.refusals import JOB_WIDE_ROWS, MESSAGE_CHARS


def unfinished(failure: RequestFailed) -> bool:
    """An answer that came back but is not a finished one, and can be one row's own (see the
    module docstring): a ``protocol`` failure not in the answer's shape."""
    return failure.kind == "protocol" and not failure.malformed


@dataclass(slots=True)
class NoAnswerStreak:
    """Rows whose every try failed since the last answer, and the verdict on them.

    ``failed`` says what a row's failure calls for: None (keep going), ``"stop"`` (:attr:`message`
    says why) or ``"control"`` (ask the endpoint: :meth:`control_answered`; a Ray actor asks from
    its own event loop, over its share of the rows); ``answered`` starts the streak again."""

    model: str
    rows: set[str] = field(default_factory=set)
    unfinished_rows: set[str] = field(default_factory=set)
    last: RequestFailed | None = None
    message: str = ""
    controlling: bool = False

    def answered(self) -> None:
        """An answer: the failures before it were the rows' own or transient."""
        self.rows.clear()
        self.unfinished_rows.clear()

    def failed(self, row_id: str, failure: RequestFailed) -> str | None:
        """Count a row whose every try failed with ``failure``; what it calls for (class docstring)."""
        if failure.kind == "status" or failure.malformed:
            self.rows.add(row_id)
            if len(self.rows) >= JOB_WIDE_ROWS and not self.message:
                answered = failure.status if failure.kind == "status" else "with an unusable answer"
                self.message = (
                    f"the server answered {answered} ({failure.detail[:MESSAGE_CHARS]}) to every try of "
                    f"{len(self.rows)} rows with no answer between, for model {self.model!r}: a server fault, "
                    "not the rows'; they are in errors.jsonl and a rerun sends them again"
                )
                return "stop"
            return None
        if not unfinished(failure):
            return None
        self.unfinished_rows.add(row_id)
        self.last = failure
        if len(self.unfinished_rows) < JOB_WIDE_ROWS or self.controlling or self.message:
            return None
        self.controlling = True
        return "control"

    def control_answered(self, answered: bool | None, shown: str) -> str | None:
        """The control request's outcome (:func:`~tokenplan.runner.control.control_request`):
        answered, the rows were their own (None, the streak starts again); else ``"stop"``."""
        self.controlling = False
        if answered:
            self.unfinished_rows.clear()
            return None
        detail = self.last.detail[:MESSAGE_CHARS] if self.last is not None else ""
        self.message = (
            f"the server gave no finished answer ({detail}) to every try of {len(self.unfinished_rows)} rows "
            f"with no answer between, nor to a short prompt with the job's settings ({shown[:MESSAGE_CHARS]}), "
            f"for model {self.model!r}: a server fault, not the rows'; they are in errors.jsonl and a rerun "
            "sends them again"
        )
        return "stop"
