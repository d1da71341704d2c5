"""The results ``predict`` and ``memory`` share: a rejected configuration, and one evaluated
configuration's figures (with their 80 % bands in :class:`Prediction`). The JSON form and its
reading back are :mod:`tokenplan.results`'s (``to_json``/``from_json``).

Units are in the names (``_bytes``, ``_ms``, ``_tok_s``, ``_days``, ``_usd``), as everywhere below.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from tokenplan.results import INLINE, Bands, JsonResult


@dataclass(frozen=True)
class Rejected(JsonResult):
    """A configuration that cannot run, and why (``predict`` and ``memory``)."""

    SCHEMA_VERSION: ClassVar[int | None] = 1

    rejected: str


@dataclass(frozen=True)
class EvaluationFigures(JsonResult):
    """One evaluated configuration: layout, formats, throughput (tokens/s), latencies (ms),
    memory (bytes, tokens) and the bottleneck. ``max_concurrency``, ``kv_capacity_tokens`` and
    ``state_slots`` are over all replicas; ``kv_bytes_per_token`` and
    ``state_bytes_per_sequence`` are for the whole model."""

    layout: str
    tp: int
    pp: int
    ep: int
    dp: int
    attention_dp: bool
    num_gpus: int
    weight_dtype: str
    kv_dtype: str
    engine: str
    spec: str
    output_tok_s_total: float
    output_tok_s_per_gpu: float
    roofline_output_tok_s_total: float
    batch_per_replica: float
    max_concurrency: float
    batch_limit_reason: str
    kv_bytes_per_token: float
    state_bytes_per_sequence: float
    weight_bytes_per_gpu: float
    kv_capacity_tokens: float
    state_slots: float | None  # sequences the state pools hold (perf.memory: a quotient, not floored)
    memory_fraction: float
    chunk_tokens: int
    step_time_ms: float
    tpot_ms: float
    ttft_ms: float
    prefill_share: float
    bottleneck: str
    warnings: tuple[str, ...]


@dataclass(frozen=True)
class Prediction(EvaluationFigures):
    """``predict``'s result: the figures and, with a shipped band table, their 80 % bands."""

    SCHEMA_VERSION: ClassVar[int | None] = 1

    bands: Bands | None = field(default=None, metadata=INLINE)
