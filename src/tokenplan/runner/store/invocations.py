"""The run over all its invocations: ``RUN_DIR/invocations.jsonl``, one line per ``generate`` that
sent at least one request, and the run-wide figures ``summary.json`` states.

A run is often several invocations: stopped and resumed, a failed export rerun, a rerun after an
endpoint died. ``summary.json`` used to hold the last invocation's figures only, so a rerun that
only exported said the run made 0 tok/s. Each invocation that sent something now appends its
sending time, requests, output tokens, completion-length histogram and latency percentiles (one
whole line, :class:`~tokenplan.runner.store.appendlog.AppendLog`); :func:`run_totals` adds them up.
An invocation killed with ``kill -9`` appends nothing: its stored records stay, its sending time
and tokens are not in the totals.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from tokenplan.runner.store.appendlog import AppendLog

LOG_NAME = "invocations.jsonl"


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
        }


def record_invocation(run_dir: Path, entry: dict[str, Any]) -> None:
    """Append one invocation's figures (``elapsed_s``, ``requests``, ``output_tokens`` and
    :func:`~tokenplan.runner.finish.summary_record`'s fields).

    Raises:
        WriteFailed: the line could not be written whole.
    """
    log = AppendLog(run_dir / LOG_NAME)
    try:
        log.append(entry)
    finally:
        log.close()


def run_totals(run_dir: Path) -> RunTotals:
    """Add up ``invocations.jsonl`` (a damaged or torn line is passed over: its invocation is not
    counted). Latencies are the latest invocation's that has them: percentiles do not add up."""
    totals = RunTotals()
    path = run_dir / LOG_NAME
    if not path.exists():
        return totals
    with open(path, "rb") as fh:
        for raw in fh:
            try:
                entry = orjson.loads(raw)
                elapsed, requests = float(entry["elapsed_s"]), int(entry["requests"])
                tokens = int(entry["output_tokens"])
            except (ValueError, KeyError, TypeError):
                continue
            totals.invocations += 1
            totals.elapsed_s += elapsed
            totals.requests += requests
            totals.output_tokens += tokens
            totals.histogram = _add_histograms(totals.histogram, entry.get("completion_tokens_histogram") or [])
            totals.latency_e2e = entry.get("latency_e2e") or totals.latency_e2e
            totals.latency_ttft = entry.get("latency_ttft") or totals.latency_ttft
    return totals


def _add_histograms(total: list[dict[str, Any]], more: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Bin-wise sum of two ``completion_tokens_histogram`` lists (bins matched by their bounds)."""
    counts: dict[tuple[Any, Any], int] = {}
    for row in [*total, *more]:
        key = (row.get("from_tokens"), row.get("below_tokens"))
        counts[key] = counts.get(key, 0) + int(row.get("requests") or 0)
    return [{"from_tokens": lo, "below_tokens": hi, "requests": n} for (lo, hi), n in counts.items()]
