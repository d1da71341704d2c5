"""Latency metrics of chat requests, defined once for ``bench`` and ``generate``.

Definitions (as in ``vllm bench serve`` and ``sglang.bench_serving``), all in seconds:

- **E2E**: from sending the request to the last byte of the answer.
- **TTFT**: from sending to the first chunk carrying text (streamed requests only).
- **TPOT**: ``(E2E − TTFT) / (completion_tokens − 1)``, the mean time per output token after the
  first; defined only for streamed answers with at least 2 completion tokens.
- **ITL**: the gaps between consecutive text chunks of one streamed answer (a chunk may carry
  more than one token, e.g. with speculative decoding).

Completion tokens come from the answer's ``usage``; a server that sends no usage in its stream
(``stream_options.include_usage`` ignored) gets its tokens counted from the streamed chunks that
carried text, one token per chunk — exact for engines that stream token by token, an undercount
with speculative decoding or a detokenizer that holds back partial characters. Each figure says
which method it used; a non-streamed answer without usage has no token count (``None``), never 0.

Percentiles interpolate linearly between order statistics (:mod:`tokenplan.stats`: numpy's default).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from tokenplan.client.openai import Completion
from tokenplan.stats import percentile_of_sorted

PERCENTILES = (50.0, 90.0, 99.0)


@dataclass(frozen=True, slots=True)
class Distribution:
    """Summary of one latency metric (seconds): count, mean and the :data:`PERCENTILES`."""

    count: int
    mean_s: float
    p50_s: float
    p90_s: float
    p99_s: float

    def to_dict_ms(self) -> dict[str, float | int]:
        """The same values in milliseconds, keyed ``mean_ms``, ``p50_ms`` … (for JSON output)."""
        return {
            "count": self.count,
            "mean_ms": self.mean_s * 1e3,
            "p50_ms": self.p50_s * 1e3,
            "p90_ms": self.p90_s * 1e3,
            "p99_ms": self.p99_s * 1e3,
        }


@dataclass(frozen=True, slots=True)
class LatencySummary:
    """E2E, TTFT, TPOT and ITL distributions; a metric with no samples is ``None``."""

    e2e: Distribution | None
    ttft: Distribution | None
    tpot: Distribution | None
    itl: Distribution | None


def distribution(values_s: Iterable[float]) -> Distribution | None:
    """Mean and percentiles of ``values_s`` (seconds); ``None`` for no values."""
    ordered = sorted(float(v) for v in values_s)
    if not ordered:
        return None
    p50, p90, p99 = (percentile_of_sorted(ordered, p) for p in PERCENTILES)
    return Distribution(len(ordered), math.fsum(ordered) / len(ordered), p50, p90, p99)


USAGE = "usage"
STREAM_CHUNKS = "stream chunks"


def completion_tokens(completion: Completion) -> tuple[int | None, str | None]:
    """``(tokens, method)``: from ``usage`` when the server sent it, else the number of streamed
    chunks with text (``"stream chunks"``), else ``(None, None)``."""
    if completion.usage is not None:
        return completion.usage.completion_tokens, USAGE
    if completion.timings.chunk_times_s:
        return len(completion.timings.chunk_times_s), STREAM_CHUNKS
    return None, None


def tpot_s(completion: Completion) -> float | None:
    """Mean time per output token after the first (seconds), or ``None`` where undefined."""
    ttft = completion.timings.ttft_s
    tokens = completion_tokens(completion)[0] or 0
    if ttft is None or tokens < 2:
        return None
    return (completion.timings.latency_s - ttft) / (tokens - 1)


def itl_s(completion: Completion) -> list[float]:
    """Gaps between consecutive text chunks of a streamed answer (seconds); empty otherwise."""
    times = completion.timings.chunk_times_s
    return [b - a for a, b in zip(times, times[1:])]


def summarize(completions: Iterable[Completion]) -> LatencySummary:
    """E2E, TTFT, TPOT and ITL distributions over ``completions``."""
    e2e, ttft, tpot, itl = [], [], [], []
    for c in completions:
        e2e.append(c.timings.latency_s)
        if c.timings.ttft_s is not None:
            ttft.append(c.timings.ttft_s)
        per_token = tpot_s(c)
        if per_token is not None:
            tpot.append(per_token)
        itl.extend(itl_s(c))
    return LatencySummary(distribution(e2e), distribution(ttft), distribution(tpot), distribution(itl))
