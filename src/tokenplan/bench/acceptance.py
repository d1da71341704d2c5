"""Speculative-decoding acceptance as the servers report it: τ (tokens per verification step, the
bonus token included), the acceptance rate and the per-position acceptance, over one window.

Each engine's metrics, read from its source:

- **vLLM** (``vllm/v1/spec_decode/metrics.py``, ``SpecDecodingProm``, vllm-project/vllm@016a858):
  counters ``vllm:spec_decode_num_drafts_total`` (verification steps with a draft),
  ``…_num_draft_tokens_total``, ``…_num_accepted_tokens_total`` and
  ``…_num_accepted_tokens_per_pos_total{position="i"}`` (0-based), one label set per engine of a
  data-parallel server (summed here). τ = 1 + Δaccepted / Δdrafts, per position
  Δaccepted[i] / Δdrafts, the rate Δaccepted / Δdraft_tokens — as ``vllm bench serve`` computes
  them from the counters before and after its run (``vllm/benchmarks/serve.py``,
  ``fetch_spec_decode_metrics`` and the ``spec_decode_*`` result fields, vllm-project/vllm@009e6d4).
- **SGLang** (``python/sglang/srt/metrics/collector.py``, sgl-project/sglang@00ae9c1): gauges
  ``sglang:spec_accept_length`` (τ over the scheduler's last logging interval) and
  ``sglang:spec_accept_rate``; no counters, so the window's τ is the mean of the gauge's readings
  during the window. Per request, SGLang puts ``spec_verify_ct`` (verification steps) in the
  finished request's ``meta_info`` (``python/sglang/srt/managers/tokenizer_manager.py``,
  sgl-project/sglang@c60799d) and its own tests take τ = completion_tokens / spec_verify_ct; see
  :func:`request_acceptance`.
- **TensorRT-LLM** (``tensorrt_llm/metrics/collector.py``, ``MetricsCollector``,
  NVIDIA/TensorRT-LLM@050f80d), served by ``trtllm-serve`` on ``/prometheus/metrics`` (its
  ``/metrics`` is JSON iteration stats): per-request counters
  ``trtllm_spec_decode_drafted_tokens_total{token_position="i"}`` and
  ``trtllm_spec_decode_accepted_tokens_total{token_position="i"}``, iteration counters
  ``trtllm_spec_decode_num_draft_tokens_total`` / ``…_num_accepted_tokens_total`` (from
  ``specDecodingStats.numDraftTokens`` / ``numAcceptedTokens``) and the gauge
  ``trtllm_spec_decode_acceptance_length``. Every draft has a position 0, so Δdrafted[0] is the
  number of drafts: τ = 1 + ΣΔaccepted[i] / Δdrafted[0], per position Δaccepted[i] / Δdrafted[0]
  (vLLM's definition); without the per-position counters, the rate from the iteration counters
  and τ from the gauge. (The collector's notes: the per-request counters need the server's
  ``return_perf_metrics``, the iteration ones ``enable_iter_perf_stats``.)

Counters are always read as a difference between two readings (the window's edges), never as
lifetime totals: a server that ran other work before the bench would otherwise leak it in.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from tokenplan.bench.prometheus import labelled_samples
from tokenplan.client.openai import Completion

VLLM, SGLANG, TRTLLM = "vllm", "sglang", "trtllm"

_VLLM_DRAFTS = "vllm:spec_decode_num_drafts_total"
_VLLM_DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
_VLLM_ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
_VLLM_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
_SGLANG_LENGTH = "sglang:spec_accept_length"
_TRT_DRAFT_TOKENS = "trtllm_spec_decode_num_draft_tokens_total"
_TRT_ACCEPTED = "trtllm_spec_decode_num_accepted_tokens_total"
_TRT_DRAFTED_POS = "trtllm_spec_decode_drafted_tokens_total"
_TRT_ACCEPTED_POS = "trtllm_spec_decode_accepted_tokens_total"
_TRT_LENGTH = "trtllm_spec_decode_acceptance_length"

# Context buckets (tokens of prompt + completion): a factor of 4 apart, because acceptance falls
# with the logarithm of the context (perf/speculative.py: 1 − β·ln(context / 1,000)), so each
# bucket spans the same share of the decline; < 2K holds the chat and benchmark prompts the
# published τ figures come from, ≥ 32K the long thinking traces where SGLang reports τ 1.57
# (sgl-project/sglang#30763) against ~3 at short context.
CONTEXT_BUCKETS: tuple[tuple[str, int, float], ...] = (
    ("<2K", 0, 2048),
    ("2–8K", 2048, 8192),
    ("8–32K", 8192, 32768),
    ("≥32K", 32768, math.inf),
)


@dataclass(frozen=True, slots=True)
class AcceptanceReading:
    """One reading of a server's acceptance metrics (cumulative counters, or gauges).

    Attributes:
        engine: ``"vllm"``, ``"sglang"`` or ``"trtllm"`` (whose metric names were found).
        drafts: verification steps that carried a draft (count; None where not exposed).
        draft_tokens, accepted_tokens: drafted and accepted tokens (counts; None where not exposed).
        accepted_per_pos: accepted tokens per draft position 0, 1, … (counts; empty where not exposed).
        drafted_per_pos: drafted tokens per position (TensorRT-LLM only; empty elsewhere).
        accept_length: the engine's τ gauge (SGLang, TensorRT-LLM), or None.
    """

    engine: str
    drafts: float | None = None
    draft_tokens: float | None = None
    accepted_tokens: float | None = None
    accepted_per_pos: tuple[float, ...] = ()
    drafted_per_pos: tuple[float, ...] = ()
    accept_length: float | None = None


def _families(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Prometheus text → sample name → (labels, value) per label set (:func:`labelled_samples`)."""
    return labelled_samples(text)


def _total(samples: dict, name: str) -> float | None:
    values = samples.get(name)
    return sum(v for _, v in values) if values else None


def _per_position(samples: dict, name: str, label: str) -> tuple[float, ...]:
    """Values of ``name`` summed per position label (over engines), positions 0… in order; empty
    when absent or when the positions are not 0…n−1."""
    by_pos: dict[int, float] = {}
    for labels, value in samples.get(name, ()):
        try:
            pos = int(labels[label])
        except (KeyError, ValueError):
            continue
        by_pos[pos] = by_pos.get(pos, 0.0) + value
    if not by_pos or sorted(by_pos) != list(range(len(by_pos))):
        return ()
    return tuple(by_pos[i] for i in range(len(by_pos)))


def acceptance_reading(text: str) -> AcceptanceReading | None:
    """Prometheus text → the acceptance metrics it holds, or None when it holds none."""
    s = _families(text)
    if _VLLM_DRAFTS in s or _VLLM_ACCEPTED in s:
        return AcceptanceReading(
            VLLM,
            _total(s, _VLLM_DRAFTS),
            _total(s, _VLLM_DRAFT_TOKENS),
            _total(s, _VLLM_ACCEPTED),
            _per_position(s, _VLLM_PER_POS, "position"),
        )
    if _SGLANG_LENGTH in s:
        return AcceptanceReading(SGLANG, accept_length=_gauge(s, _SGLANG_LENGTH))
    if any(n in s for n in (_TRT_DRAFT_TOKENS, _TRT_DRAFTED_POS, _TRT_LENGTH)):
        drafted = _per_position(s, _TRT_DRAFTED_POS, "token_position")
        accepted = _per_position(s, _TRT_ACCEPTED_POS, "token_position")
        return AcceptanceReading(
            TRTLLM,
            drafted[0] if drafted else None,
            _total(s, _TRT_DRAFT_TOKENS),
            _total(s, _TRT_ACCEPTED),
            accepted,
            drafted,
            _gauge(s, _TRT_LENGTH),
        )
    return None


def _gauge(samples: dict, name: str) -> float | None:
    """The mean over label sets (data-parallel ranks) of a τ gauge, leaving out readings below 1:
    τ counts the bonus token, so a reading below 1 is the gauge's initial 0 before the engine's
    first logging interval (SGLang ``SchedulerStats.spec_accept_length = 0.0``), not a measurement."""
    values = [v for _, v in samples.get(name, ()) if v >= 1.0]
    return sum(values) / len(values) if values else None


def _delta(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else b - a


@dataclass(frozen=True, slots=True)
class AcceptanceWindow:
    """What one server's acceptance metrics said over a window: counter differences (None where
    not exposed), and the mean of the τ gauge's readings with their count."""

    engine: str
    drafts: float | None
    draft_tokens: float | None
    accepted_tokens: float | None
    accepted_per_pos: tuple[float, ...]
    gauge_tau: float | None
    gauge_readings: int

    @classmethod
    def between(
        cls,
        start: AcceptanceReading | None,
        end: AcceptanceReading | None,
        during: Iterable[AcceptanceReading | None] = (),
    ) -> AcceptanceWindow | None:
        """The window from ``start`` to ``end``, with the gauge readings of ``during`` and ``end``.
        None without both edges."""
        if start is None or end is None or start.engine != end.engine:
            return None
        gauges = [r.accept_length for r in (*during, end) if r is not None and r.accept_length is not None]
        per_pos: tuple[float, ...] = ()
        if start.accepted_per_pos and len(start.accepted_per_pos) == len(end.accepted_per_pos):
            per_pos = tuple(b - a for a, b in zip(start.accepted_per_pos, end.accepted_per_pos))
        accepted = _delta(start.accepted_tokens, end.accepted_tokens)
        draft_tokens = _delta(start.draft_tokens, end.draft_tokens)
        if end.engine == TRTLLM and per_pos and len(start.drafted_per_pos) == len(end.drafted_per_pos):
            # the per-request family: drafts, drafted and accepted tokens all from one source
            drafted = [b - a for a, b in zip(start.drafted_per_pos, end.drafted_per_pos)]
            accepted, draft_tokens = sum(per_pos), sum(drafted)
        return cls(
            end.engine,
            _delta(start.drafts, end.drafts),
            draft_tokens,
            accepted,
            per_pos,
            sum(gauges) / len(gauges) if gauges else None,
            len(gauges),
        )

    @staticmethod
    def combine(windows: Sequence[AcceptanceWindow]) -> dict | None:
        """Every endpoint's window → one acceptance dict (:func:`acceptance_dict`): counters
        summed over endpoints, gauge means averaged. None for no windows."""
        if not windows:
            return None

        def total(values: list[float | None]) -> float | None:
            return None if any(v is None for v in values) else sum(v for v in values if v is not None)

        lengths = {len(w.accepted_per_pos) for w in windows}
        per_pos = tuple(map(sum, zip(*(w.accepted_per_pos for w in windows)))) if len(lengths) == 1 else ()
        gauges = [w.gauge_tau for w in windows if w.gauge_tau is not None]
        engines = sorted({w.engine for w in windows})
        merged = AcceptanceWindow(
            " and ".join(engines),
            total([w.drafts for w in windows]),
            total([w.draft_tokens for w in windows]),
            total([w.accepted_tokens for w in windows]),
            per_pos,
            sum(gauges) / len(gauges) if gauges else None,
            sum(w.gauge_readings for w in windows),
        )
        return merged.to_dict()

    def to_dict(self) -> dict | None:
        """See :func:`acceptance_dict`."""
        return acceptance_dict(self)


def acceptance_dict(w: AcceptanceWindow) -> dict | None:
    """A window as the bench JSON shows it, or None when it measured nothing (no drafts in the
    window and no gauge reading).

    Keys: ``engine``; ``source`` (``"counters"`` or ``"gauge"``); ``tau`` (tokens per verification
    step, bonus included); ``acceptance_rate`` (accepted / drafted tokens, 0–1, or None);
    ``per_position`` (acceptance at draft positions 0, 1, …: accepted there / drafts, 0–1; empty
    where not exposed); ``drafts``, ``draft_tokens``, ``accepted_tokens`` (counts in the window);
    ``gauge_readings``.
    """
    if w.drafts is not None and w.drafts > 0 and w.accepted_tokens is not None:  # counted
        tau, source = 1.0 + w.accepted_tokens / w.drafts, "counters"
        per_pos = [a / w.drafts for a in w.accepted_per_pos]
    elif w.gauge_tau is not None:
        tau, source, per_pos = w.gauge_tau, "gauge", []
    else:
        return None
    rate = w.accepted_tokens / w.draft_tokens if w.draft_tokens and w.accepted_tokens is not None else None
    return {
        "engine": w.engine,
        "source": source,
        "tau": tau,
        "acceptance_rate": rate,
        "per_position": per_pos,
        "drafts": w.drafts,
        "draft_tokens": w.draft_tokens,
        "accepted_tokens": w.accepted_tokens,
        "gauge_readings": w.gauge_readings,
    }


def _with_verify(completions: Iterable[Completion]) -> list[tuple[int, int, int]]:
    """(prompt tokens, completion tokens, verification steps) of the answers that carry all three."""
    return [
        (c.usage.prompt_tokens, c.usage.completion_tokens, c.spec_verify_ct)
        for c in completions
        if c.spec_verify_ct and c.usage is not None and c.usage.completion_tokens > 0
    ]


def request_acceptance(completions: Iterable[Completion]) -> dict | None:
    """τ from the answers' own counts (SGLang ``meta_info.spec_verify_ct``): Σ completion tokens /
    Σ verification steps over the answers that carry it — token-weighted, as the counters are —
    overall and per :data:`CONTEXT_BUCKETS` (a request's context: prompt + completion tokens).

    Returns None when no answer carries it, else ``{"requests", "completion_tokens",
    "verify_steps", "tau", "context_buckets"}``; each bucket ``{"bucket", "min_tokens",
    "max_tokens" (None: unbounded), "requests", "completion_tokens", "verify_steps",
    "mean_context_tokens" (prompt + completion), "mean_decode_context_tokens" (prompt +
    completion / 2: the mean context while the answer was decoded), "tau"}``, buckets without
    requests left out.
    """
    rows = _with_verify(completions)
    if not rows:
        return None
    buckets = []
    for name, lo, hi in CONTEXT_BUCKETS:
        inside = [r for r in rows if lo <= r[0] + r[1] < hi]
        if inside:
            n = len(inside)
            buckets.append(
                {
                    **bucket_head(name, lo, hi),
                    **verify_totals([(1, c, v) for _, c, v in inside]),
                    "mean_context_tokens": sum(p + c for p, c, _ in inside) / n,
                    "mean_decode_context_tokens": sum(p + c / 2 for p, c, _ in inside) / n,
                }
            )
    return {**verify_totals([(1, c, v) for _, c, v in rows]), "context_buckets": buckets}


def bucket_head(name: str, lo: int, hi: float) -> dict:
    return {"bucket": name, "min_tokens": lo, "max_tokens": None if math.isinf(hi) else int(hi)}


def verify_totals(parts: Sequence[tuple[int, float, float]]) -> dict:
    """(requests, completion tokens, verification steps) parts → their sums and τ = tokens / steps."""
    n, tokens, steps = (sum(p[i] for p in parts) for i in range(3))
    return {"requests": n, "completion_tokens": tokens, "verify_steps": steps, "tau": tokens / steps}


def level_acceptance(
    windows: Sequence[AcceptanceWindow],
    completions: Sequence[Completion],
    mean_input_tokens: float | None,
    mean_output_tokens: float | None,
) -> dict | None:
    """One level's acceptance for the bench JSON, or None when neither the servers nor the answers
    report any.

    Returns ``{"tau", "source", "context_tokens", "server", "requests"}``: ``tau`` from the servers'
    counters where they have them (every token of the window counts), else from the answers'
    verification counts, else from the servers' τ gauge — ``source`` says which (``"server
    counters"``, ``"requests"``, ``"server gauge"``); ``context_tokens`` is the level's mean
    context while decoding (mean prompt + mean completion / 2, tokens), the context that τ belongs
    to when only counters measured it; ``server`` is :meth:`AcceptanceWindow.combine`'s dict and
    ``requests`` :func:`request_acceptance`'s (None where absent).
    """
    server = AcceptanceWindow.combine(windows)
    requests = request_acceptance(completions)
    if server is not None and server["source"] == "counters":
        tau, source = server["tau"], "server counters"
    elif requests is not None:
        tau, source = requests["tau"], "requests"
    elif server is not None:
        tau, source = server["tau"], "server gauge"
    else:
        return None
    context = (
        None if mean_input_tokens is None or mean_output_tokens is None else mean_input_tokens + mean_output_tokens / 2
    )
    return {"tau": tau, "source": source, "context_tokens": context, "server": server, "requests": requests}


def vllm_fields(acceptance: dict | None) -> dict:
    """The acceptance under ``vllm bench serve``'s result names (``spec_decode_acceptance_rate`` in
    %, ``…_acceptance_length``, ``…_num_drafts``, ``…_draft_tokens``, ``…_accepted_tokens``,
    ``…_per_position_acceptance_rates`` as fractions), present, as there, only when the counters
    measured it; else ``{}``."""
    server = (acceptance or {}).get("server") or {}
    if server.get("source") != "counters":
        return {}
    rate = server["acceptance_rate"]
    return {
        "spec_decode_acceptance_rate": None if rate is None else rate * 100,
        "spec_decode_acceptance_length": server["tau"],
        "spec_decode_num_drafts": server["drafts"],
        "spec_decode_draft_tokens": server["draft_tokens"],
        "spec_decode_accepted_tokens": server["accepted_tokens"],
        "spec_decode_per_position_acceptance_rates": server["per_position"],
    }
