"""Speculative-decoding acceptance for the simulated engine: a known law, and the metrics each
engine would expose for it.

The law: a chain of ``k`` drafts whose every draft is accepted with probability ``p(context)``
given the ones before it, so draft position ``i`` (0-based) is reached and accepted in a fraction
``p^(i+1)`` of the verification steps and a step yields τ = 1 + p + p² + … + p^k tokens. ``p`` is
``p0`` up to 1,000 tokens of context and ``p0·(1 − decay·ln(context / 1,000))`` above (the form of
tokenplan's prior, with the fake's own constants). Each request's context is fixed when it
arrives: prompt tokens + ``max_tokens`` (the context it ends with).

Every generated token stands for 1/τ of a verification step of its request, so over any set of
tokens the counters give exactly the token-weighted τ: drafts += 1/τ, draft tokens += k/τ,
accepted tokens += (τ − 1)/τ and accepted at position i += p^(i+1)/τ. What each engine shows:

- ``vllm``: those counters under vLLM's names (``vllm:spec_decode_num_drafts_total`` …,
  ``…_per_pos_total{position}``), updated every step;
- ``sglang``: the gauge ``sglang:spec_accept_length``, recomputed every ``SGLANG_LOG_INTERVAL``
  steps from the counters' change (SGLang's ``decode_log_interval`` is 40), 0 before the first
  interval; and ``meta_info.spec_verify_ct`` = round(Σ 1/τ) on each whole answer asked for it;
- ``trtllm``: on ``/prometheus/metrics`` the iteration counters
  ``trtllm_spec_decode_num_draft_tokens_total`` / ``…_num_accepted_tokens_total`` (every step),
  the per-request ``trtllm_spec_decode_drafted_tokens_total{token_position}`` /
  ``…_accepted_tokens_total{token_position}`` (when a request finishes) and the gauge
  ``trtllm_spec_decode_acceptance_length``; its ``/metrics`` answers JSON iteration stats.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

SGLANG_LOG_INTERVAL = 40
REFERENCE_CONTEXT = 1_000


@dataclass(frozen=True)
class SpecLaw:
    engine: str  # vllm, sglang or trtllm
    k: int
    p0: float
    decay: float = 0.0

    def rates(self, context_tokens: int) -> list[float]:
        """Acceptance at positions 0…k−1 (fractions of verification steps)."""
        p = self.p0
        if context_tokens > REFERENCE_CONTEXT:
            p *= max(1.0 - self.decay * math.log(context_tokens / REFERENCE_CONTEXT), 0.0)
        return [p ** (i + 1) for i in range(self.k)]


@dataclass
class SpecCounters:
    law: SpecLaw
    drafts: float = 0.0
    draft_tokens: float = 0.0
    accepted: float = 0.0
    per_pos: list[float] = field(default_factory=list)
    drafted_per_pos_done: list[float] = field(default_factory=list)  # TRT-LLM: finished requests only
    accepted_per_pos_done: list[float] = field(default_factory=list)
    gauge: float = 0.0
    _steps: int = 0
    _mark: tuple[float, float] = (0.0, 0.0)

    def __post_init__(self) -> None:
        k = self.law.k
        self.per_pos, self.drafted_per_pos_done, self.accepted_per_pos_done = [0.0] * k, [0.0] * k, [0.0] * k

    def token(self, rates: list[float]) -> float:
        """Count one generated token of a request with these rates; returns its verification share 1/τ."""
        share = 1.0 / (1.0 + sum(rates))
        self.drafts += share
        self.draft_tokens += self.law.k * share
        self.accepted += sum(rates) * share
        for i, r in enumerate(rates):
            self.per_pos[i] += r * share
        return share

    def finished(self, rates: list[float], verify_steps: float) -> None:
        for i, r in enumerate(rates):
            self.drafted_per_pos_done[i] += verify_steps
            self.accepted_per_pos_done[i] += r * verify_steps

    def step_done(self) -> None:
        self._steps += 1
        if self._steps % SGLANG_LOG_INTERVAL == 0:
            drafts, accepted = self.drafts - self._mark[0], self.accepted - self._mark[1]
            if drafts > 0:
                self.gauge = 1.0 + accepted / drafts
            self._mark = (self.drafts, self.accepted)

    def prometheus_rows(self, label: str) -> list[str]:
        """Metric lines (with ``# TYPE``) in the law's engine's names; ``label`` is ``{…}`` without the brace."""
        e = self.law.engine
        if e == "vllm":
            rows = _counter("vllm:spec_decode_num_drafts", label, self.drafts)
            rows += _counter("vllm:spec_decode_num_draft_tokens", label, self.draft_tokens)
            rows += _counter("vllm:spec_decode_num_accepted_tokens", label, self.accepted)
            rows += _per_pos("vllm:spec_decode_num_accepted_tokens_per_pos", label, "position", self.per_pos)
            return rows
        if e == "sglang":
            return ["# TYPE sglang:spec_accept_length gauge", f"sglang:spec_accept_length{{{label}}} {self.gauge}"]
        rows = _counter("trtllm_spec_decode_num_draft_tokens", label, self.draft_tokens)
        rows += _counter("trtllm_spec_decode_num_accepted_tokens", label, self.accepted)
        rows += _per_pos("trtllm_spec_decode_drafted_tokens", label, "token_position", self.drafted_per_pos_done)
        rows += _per_pos("trtllm_spec_decode_accepted_tokens", label, "token_position", self.accepted_per_pos_done)
        rows += [
            "# TYPE trtllm_spec_decode_acceptance_length gauge",
            f"trtllm_spec_decode_acceptance_length{{{label}}} {self.gauge}",
        ]
        return rows


def _counter(name: str, label: str, value: float) -> list[str]:
    # prometheus_client's text format: the family typed under its _total name, plus _created
    return [f"# TYPE {name}_total counter", f"{name}_total{{{label}}} {value!r}", f"{name}_created{{{label}}} 1.7e9"]


def _per_pos(name: str, label: str, pos_label: str, values: list[float]) -> list[str]:
    rows = [f"# TYPE {name}_total counter"]
    rows += [f'{name}_total{{{label},{pos_label}="{i}"}} {v!r}' for i, v in enumerate(values)]
    return rows
