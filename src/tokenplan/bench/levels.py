"""One measured level of a bench sweep, and its figures in the bench JSON.

:class:`LevelResult` is what the sweep collects (answers, errors, the window, the servers'
``/metrics``); :func:`level_dict` turns it into one entry of the bench JSON's ``levels``: seconds and
tokens/s, latency distributions as ``mean/p50/p90/p99``, and the same figures under the names and
units of ``vllm bench serve``. Token counts come from each answer's ``usage``, else from the
streamed chunks (``token_count_method`` says which); without either, token throughput is ``None``,
not 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tokenplan.bench.acceptance import level_acceptance, vllm_fields
from tokenplan.bench.server_info import WindowStats
from tokenplan.client.metrics import USAGE, Distribution, LatencySummary, completion_tokens, summarize
from tokenplan.client.openai import Completion


@dataclass(slots=True)
class LevelResult:
    """One measured level.

    Attributes:
        concurrency: requests kept in flight.
        completions: answered requests.
        errors: failed requests; ``error_samples`` up to 5 of their messages.
        start_wall_s, end_wall_s: the window in ``time.time()`` seconds (for server-side counts).
        duration_s: first send to last answer (seconds).
        server: per endpoint URL, what its ``/metrics`` said over the window.
    """

    concurrency: int
    completions: list[Completion] = field(default_factory=list)
    errors: int = 0
    error_samples: list[str] = field(default_factory=list)
    start_wall_s: float = 0.0
    end_wall_s: float = 0.0
    duration_s: float = 0.0
    server: dict[str, WindowStats] = field(default_factory=dict)
    request_rate: float | None = None  # open-loop arrivals (requests/s); None: closed loop
    max_concurrency: int | None = None  # most requests in flight (None: open loop without a limit)


def _dist_dict(d: Distribution | None) -> dict[str, float | None]:
    if d is None:
        return {"mean": None, "p50": None, "p90": None, "p99": None}
    return {"mean": d.mean_s, "p50": d.p50_s, "p90": d.p90_s, "p99": d.p99_s}


def combine_server(stats: dict[str, WindowStats]) -> dict | None:
    """Every endpoint's window stats added up: tokens, tok/s, running and waiting (sums over
    servers), KV usage (the highest), preemptions (sum). None without metrics."""
    if not stats:
        return None
    parts = [s.to_dict() for s in stats.values()]

    def total(key: str) -> float | None:
        values = [p[key] for p in parts if p[key] is not None]
        return sum(values) if values else None

    kv = [p["kv_usage_max"] for p in parts if p["kv_usage_max"] is not None]
    out = {
        key: total(key)
        for key in (
            "generation_tokens",
            "output_tok_s",
            "preemptions",
            "running_mean",
            "running_max",
            "waiting_mean",
            "waiting_max",
            "samples",
            "queued_samples",
        )
    }
    out["kv_usage_max"] = max(kv) if kv else None
    return out


def _token_counts(completions: Sequence[Completion]) -> tuple[int | None, int | None, str | None]:
    """Output tokens, input tokens (usage only) and how the output tokens were counted."""
    counted = [completion_tokens(c) for c in completions]
    methods = sorted({m for _, m in counted if m is not None})
    known = [t for t, _ in counted if t is not None]
    if not completions:
        return 0, 0, USAGE
    out_tokens = sum(known) if len(known) == len(completions) else None
    with_usage = [c.usage.prompt_tokens for c in completions if c.usage is not None]
    in_tokens = sum(with_usage) if len(with_usage) == len(completions) else None
    return out_tokens, in_tokens, " and ".join(methods) if methods else None


def _ms_fields(lat: LatencySummary) -> dict[str, float | None]:
    """The latency fields as ``vllm bench serve`` and ``sglang.bench_serving`` name them (ms)."""
    out: dict[str, float | None] = {}
    for name, d in (("ttft", lat.ttft), ("tpot", lat.tpot), ("itl", lat.itl), ("e2el", lat.e2e)):
        for stat, attr in (("mean", "mean_s"), ("median", "p50_s"), ("p90", "p90_s"), ("p99", "p99_s")):
            out[f"{stat}_{name}_ms"] = None if d is None else getattr(d, attr) * 1e3
    return out


def level_dict(level: LevelResult) -> dict[str, Any]:
    """One level in the bench JSON schema (seconds, tokens/s; latency dicts ``mean/p50/p90/p99``),
    and the same figures under the names and units of ``vllm bench serve`` (``request_throughput``
    req/s, ``output_throughput`` and ``total_token_throughput`` tok/s, ``mean/median/p90/p99_
    {ttft,tpot,itl,e2el}_ms``, and where counters measured it ``spec_decode_*``). Token throughputs
    are ``None`` when the tokens cannot be counted; ``acceptance`` is
    :func:`~tokenplan.bench.acceptance.level_acceptance`'s dict, None without speculative decoding."""
    completions = level.completions
    duration = level.duration_s
    out_tokens, in_tokens, method = _token_counts(completions)
    busy_s = sum(c.timings.latency_s for c in completions)
    lat = summarize(completions)
    n = len(completions)
    output_tok_s = None if out_tokens is None else (out_tokens / duration if n else 0.0)
    windows = [w for stats in level.server.values() if (w := stats.acceptance()) is not None]
    acceptance = level_acceptance(
        windows,
        completions,
        in_tokens / n if n and in_tokens is not None else None,
        out_tokens / n if n and out_tokens is not None else None,
    )
    total_tok_s = (
        None if out_tokens is None or in_tokens is None else ((out_tokens + in_tokens) / duration if n else 0.0)
    )
    return {
        "concurrency": level.concurrency,
        "achieved_concurrency": busy_s / duration if n else 0.0,
        "requests": n,
        "errors": level.errors,
        "error_samples": list(level.error_samples),
        "duration_s": duration,
        "request_throughput_per_s": n / duration if n else 0.0,
        "output_tok_s": output_tok_s,
        "total_tok_s": total_tok_s,
        "token_count_method": method,
        "output_tokens": out_tokens,
        "input_tokens": in_tokens,
        "mean_input_tokens": in_tokens / n if n and in_tokens is not None else None,
        "mean_output_tokens": out_tokens / n if n and out_tokens is not None else None,
        "window_start_unix_s": level.start_wall_s,
        "window_end_unix_s": level.end_wall_s,
        "ttft_s": _dist_dict(lat.ttft),
        "tpot_s": _dist_dict(lat.tpot),
        "itl_s": _dist_dict(lat.itl),
        "e2e_s": _dist_dict(lat.e2e),
        "server": combine_server(level.server),
        "acceptance": acceptance,  # speculative decoding: τ, per position, per context (bench.acceptance)
        # the same figures as vllm bench serve names them
        "completed": n,
        "max_concurrency": level.max_concurrency,
        # vLLM writes "inf" for a closed loop and for --request-rate inf (all sent at once); JSON has no inf
        "request_rate": level.request_rate
        if level.request_rate is not None and math.isfinite(level.request_rate)
        else "inf",
        "total_input_tokens": in_tokens,
        "total_output_tokens": out_tokens,
        "request_throughput": n / duration if n else 0.0,
        "output_throughput": output_tok_s,
        "total_token_throughput": total_tok_s,
        **_ms_fields(lat),
        **vllm_fields(acceptance),
    }
