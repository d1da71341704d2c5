"""The run over all its invocations: ``RUN_DIR/invocations.jsonl``, one line per ``generate`` that
sent at least one request, and the run-wide figures ``summary.json`` states.

A run is often several invocations: stopped and resumed, a failed export rerun, a rerun after an
endpoint died. ``summary.json`` used to hold the last invocation's figures only, so a rerun that
only exported said the run made 0 tok/s. Each invocation that sent something now appends its
sending time, requests, output tokens, completion-length histogram and latency percentiles (one
whole line, :class:`~tokenplan.runner.store.appendlog.AppendLog`); :func:`run_totals` adds them up.

An invocation killed with ``kill -9`` cannot append its line. While it sends, it keeps its figures
so far in ``invocation.current.json`` (:func:`write_checkpoint`, every ``CHECKPOINT_EVERY_S``
seconds, written beside its name and renamed into place); the next invocation to open the
directory finds the file left behind and appends it with ``"ended": "killed"``
(:func:`recover_killed`), so the totals keep the killed invocation's time, requests and tokens up
to its last checkpoint (at most ``CHECKPOINT_EVERY_S`` of them lost; its latencies and
completion-length histogram, which the checkpoint does not carry, are). Each line carries its
invocation's id, so a checkpoint whose line was appended before the kill is not counted twice.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from tokenplan.runner.store.appendlog import AppendLog

LOG_NAME = "invocations.jsonl"
CHECKPOINT_NAME = "invocation.current.json"
CHECKPOINT_EVERY_S = 10.0


@dataclass(slots=True)
class RunTotals:
    """The invocations' figures added up: count, sending time (s), requests, output tokens, the
    completion-length histogram (counts per bin) and the latest latency percentiles (ms)."""

    invocations: int = 0
    elapsed_s: float = 0.0
    requests: int = 0
    output_tokens: int = 0
    histogram: list[dict[str, Any]] = field(default_factory=list)
    latency_e2e: dict[str, Any] | None = None
    latency_ttft: dict[str, Any] | None = None
    plan_tokens: float = 0.0  # Σ plan tok/s × sending time over the invocations that had a plan
    plan_elapsed_s: float = 0.0
    # the requests every invocation kept in flight where all that answered one kept the same,
    # else None (a run resumed at another --concurrency has no one figure); 0: none seen yet
    requests_in_flight: int | None = 0

    @property
    def plan_output_tok_s(self) -> float | None:
        """The plan's tok/s for the run as sent: each invocation's share of the plan (for the
        endpoints it was given) weighted by its sending time, as ``output_tok_s`` is; None where no
        invocation had a plan. A run resumed on 1 of 8 endpoints after an hour on all 8 compares
        its run-wide rate with the mean of the two shares, not with the last one."""
        return self.plan_tokens / self.plan_elapsed_s if self.plan_elapsed_s > 0 else None

    def as_summary(self) -> dict[str, Any]:
        """The run-wide fields of ``summary.json`` (rates over the sending time; 0 when none)."""
        return {
            "invocations": self.invocations,
            "elapsed_s": self.elapsed_s,
            "requests": self.requests,
            "output_tokens": self.output_tokens,
            "output_tok_s": self.output_tokens / self.elapsed_s if self.elapsed_s > 0 else 0.0,
            "requests_per_s": self.requests / self.elapsed_s if self.elapsed_s > 0 else 0.0,
            "latency_e2e": self.latency_e2e,
            "latency_ttft": self.latency_ttft,
            "completion_tokens_histogram": self.histogram,
            "requests_in_flight": self.requests_in_flight or None,
        }


def record_invocation(run_dir: Path, entry: dict[str, Any]) -> None:
    """Append one invocation's figures (``invocation``: its id, ``elapsed_s``, ``requests``,
    ``output_tokens``, ``plan_output_tok_s`` (its share of the plan, or None) and :func:`~tokenplan.runner.finish.summary_record`'s fields), then remove
    its checkpoint.

    Raises:
        WriteFailed: the line could not be written whole.
    """
    log = AppendLog(run_dir / LOG_NAME)
    try:
        log.append(entry)
    finally:
        log.close()
    (run_dir / CHECKPOINT_NAME).unlink(missing_ok=True)


def write_checkpoint(run_dir: Path, entry: dict[str, Any]) -> None:
    """Keep a running invocation's figures so far (``invocation``, ``started_at``, ``elapsed_s``,
    ``requests``, ``output_tokens``) in ``invocation.current.json``, whole or not at all (written
    beside its name, then renamed). Raises OSError where the file cannot be written."""
    tmp = run_dir / (CHECKPOINT_NAME + ".tmp")
    tmp.write_bytes(orjson.dumps(entry))
    os.replace(tmp, run_dir / CHECKPOINT_NAME)


def recover_killed(run_dir: Path) -> str | None:
    """Append the checkpoint an invocation left behind (it ended without its line: killed) to
    ``invocations.jsonl`` with ``"ended": "killed"``, unless a line of the same invocation is
    there already, and remove it. Call with the run directory's lock held. Returns a note saying
    what was counted, or None when there was nothing to recover (a damaged checkpoint is dropped:
    the invocation is then not counted, as before checkpoints).

    Raises:
        WriteFailed: the line could not be written whole.
    """
    path = run_dir / CHECKPOINT_NAME
    if not path.exists():
        return None
    try:
        entry = orjson.loads(path.read_bytes())
        invocation = str(entry["invocation"])
        elapsed_s, requests, tokens = _figures(entry)
    except (ValueError, KeyError, TypeError, OSError):
        path.unlink(missing_ok=True)
        return None
    if invocation not in _logged_invocations(run_dir):
        log = AppendLog(run_dir / LOG_NAME)
        try:
            log.append({**entry, "ended": "killed"})
        finally:
            log.close()
    path.unlink(missing_ok=True)
    return (
        f"an earlier invocation ended without writing its figures (killed): its {requests:,} requests and "
        f"{tokens:,} output tokens over {elapsed_s:,.0f} s, to its last checkpoint, are counted in the run's figures"
    )


def _logged_invocations(run_dir: Path) -> set[str]:
    """The invocation ids ``invocations.jsonl`` holds (lines from before ids were written have none)."""
    path, ids = run_dir / LOG_NAME, set()
    if path.exists():
        with open(path, "rb") as fh:
            for raw in fh:
                try:
                    ids.add(str(orjson.loads(raw)["invocation"]))
                except (ValueError, KeyError, TypeError):
                    continue
    return ids


def run_totals(run_dir: Path) -> RunTotals:
    """Add up ``invocations.jsonl`` (a damaged or torn line, or one whose figures are not finite
    non-negative numbers, is passed over: its invocation is not counted). Latencies are the latest invocation's that has them: percentiles do not add up."""
    totals = RunTotals()
    path = run_dir / LOG_NAME
    if not path.exists():
        return totals
    with open(path, "rb") as fh:
        for raw in fh:
            try:
                entry = orjson.loads(raw)
                elapsed, requests, tokens = _figures(entry)
            except (ValueError, KeyError, TypeError):
                continue
            totals.invocations += 1
            totals.elapsed_s += elapsed
            totals.requests += requests
            totals.output_tokens += tokens
            totals.histogram = _add_histograms(totals.histogram, entry.get("completion_tokens_histogram") or [])
            totals.latency_e2e = entry.get("latency_e2e") or totals.latency_e2e
            totals.latency_ttft = entry.get("latency_ttft") or totals.latency_ttft
            totals.requests_in_flight = _same_in_flight(totals.requests_in_flight, entry, requests)
            plan = entry.get("plan_output_tok_s")
            if isinstance(plan, (int, float)) and not isinstance(plan, bool) and math.isfinite(plan) and plan > 0:
                totals.plan_tokens += plan * elapsed
                totals.plan_elapsed_s += elapsed
    return totals


def _same_in_flight(so_far: int | None, entry: dict[str, Any], requests: int) -> int | None:
    """``RunTotals.requests_in_flight`` after one more invocation line: unchanged by one that
    answered nothing; None once two that answered differ or one does not say (a line of a
    release before the field, or a hand edit)."""
    if not requests or so_far is None:
        return so_far
    value = entry.get("requests_in_flight")
    if not (isinstance(value, int) and not isinstance(value, bool) and value > 0):
        return None
    return value if so_far in (0, value) else None


def _add_histograms(total: list[dict[str, Any]], more: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Bin-wise sum of two ``completion_tokens_histogram`` lists (bins matched by their bounds)."""
    counts: dict[tuple[Any, Any], int] = {}
    for row in [*total, *more]:
        key = (row.get("from_tokens"), row.get("below_tokens"))
        counts[key] = counts.get(key, 0) + int(row.get("requests") or 0)
    return [{"from_tokens": lo, "below_tokens": hi, "requests": n} for (lo, hi), n in counts.items()]


def _figures(entry: Any) -> tuple[float, int, int]:
    """(sending time in seconds, requests, output tokens) of an invocation line or checkpoint.

    Raises:
        KeyError, TypeError, ValueError: a figure missing, of another type, not finite or
            negative (a hand-edited ``nan`` or ``-500`` would make every later summary fail or lie).
    """
    elapsed_s, requests, tokens = entry["elapsed_s"], entry["requests"], entry["output_tokens"]
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (elapsed_s, requests, tokens)):
        raise TypeError("a figure that is not a number")
    if not (
        math.isfinite(elapsed_s) and elapsed_s >= 0 and 0 <= requests == int(requests) and 0 <= tokens == int(tokens)
    ):
        raise ValueError("a figure that is not finite, negative or not whole")
    return float(elapsed_s), int(requests), int(tokens)
