"""Live counters of a generate run and their snapshot: rows done, output tok/s, ETA, plan vs measured.

Pure bookkeeping: the caller passes the clock reading (seconds, ``time.monotonic()``); drawing is
the CLI's job. Output tok/s is measured from the servers' ``usage.completion_tokens`` over a
sliding window (``window_s``) and over the whole run. The ETA divides the tokens still expected —
units left × mean completion tokens per finished unit (``max_tokens`` × turns before the first
finishes) — by the windowed rate.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What the progress display shows at one moment."""

    units_total: int | None
    done_before: int
    stored: int
    skipped: int
    errors: int
    rejected: int
    in_flight: dict[str, int]
    healthy_endpoints: int
    output_tokens: int
    elapsed_s: float
    output_tok_s_window: float
    output_tok_s_mean: float
    eta_s: float | None
    plan_output_tok_s: float | None
    workers: tuple[str, ...] = ()  # one line per client worker (Ray actors); empty for one process
    requests: int = 0  # requests answered in this invocation (a multi-turn unit sends several)
    requests_in_flight: int | None = None  # the most this invocation keeps in flight, all endpoints

    @property
    def finished(self) -> int:
        """Units accounted for so far, this run and before (stored, skipped, failed)."""
        return self.done_before + self.stored + self.skipped + self.errors


@dataclass(slots=True)
class Progress:
    """Counters updated by the dispatcher as outcomes arrive."""

    started_s: float
    units_total: int | None
    expected_tokens_per_unit: float
    done_before: int = 0
    plan_output_tok_s: float | None = None
    requests_in_flight: int | None = None  # concurrency per endpoint × endpoints (None: not known)
    window_s: float = 30.0
    stored: int = 0
    skipped: int = 0
    errors: int = 0
    rejected: int = 0  # units (rejected rows × samples per row)
    output_tokens: int = 0
    requests: int = 0  # answered requests (each brought its completion tokens)
    _recent: deque[tuple[float, int]] = field(default_factory=deque)

    def add_tokens(self, now_s: float, tokens: int, requests: int = 1) -> None:
        """Count ``tokens`` completion tokens of ``requests`` answers that arrived at ``now_s``."""
        self.output_tokens += tokens
        self.requests += requests
        self._recent.append((now_s, tokens))

    def snapshot(self, now_s: float, in_flight: dict[str, int], healthy_endpoints: int) -> Snapshot:
        """The counters at ``now_s`` with rates and ETA."""
        while self._recent and self._recent[0][0] < now_s - self.window_s:
            self._recent.popleft()
        elapsed_s = max(now_s - self.started_s, 1e-9)
        window_s = min(self.window_s, elapsed_s)
        tok_s_window = sum(t for _, t in self._recent) / window_s
        tok_s_mean = self.output_tokens / elapsed_s
        finished_here = self.stored + self.skipped + self.errors
        eta_s = None
        if self.units_total is not None and tok_s_window > 0:
            per_unit = self.output_tokens / self.stored if self.stored else self.expected_tokens_per_unit
            left = max(0, self.units_total - self.done_before - finished_here - self.rejected)
            eta_s = left * per_unit / tok_s_window
        return Snapshot(
            self.units_total,
            self.done_before,
            self.stored,
            self.skipped,
            self.errors,
            self.rejected,
            dict(in_flight),
            healthy_endpoints,
            self.output_tokens,
            elapsed_s,
            tok_s_window,
            tok_s_mean,
            eta_s,
            self.plan_output_tok_s,
            requests=self.requests,
            requests_in_flight=self.requests_in_flight,
        )
