"""``memory``: one GPU's memory breakdown — the Python API behind ``tokenplan memory``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from tokenplan.api.resolve import PredictRequest, resolve
from tokenplan.api.results import Rejected
from tokenplan.job.evaluate import Rejection, allocated_requests, kv_and_state
from tokenplan.results import JsonResult

__all__ = ["MemoryResult", "PredictRequest", "Rejected", "memory"]


@dataclass(frozen=True)
class MemoryResult(JsonResult):
    """One GPU's memory (bytes), with KV capacity in tokens.

    ``kv_bytes_per_token`` and ``state_bytes_per_sequence`` are for the whole model,
    ``kv_bytes_per_token_per_gpu`` for this GPU's share; ``kv_capacity_tokens`` and
    ``state_slots`` are per replica; ``max_sequences`` is how many sequences of
    ``context_tokens`` (ISL + OSL, whole requests) fit in the KV cache; ``running_requests`` is
    the batch limit per replica, ``running_limited_by`` what sets it (``kv cache``, ``state
    slots``, ``kv cache and state`` or ``engine cap``) and ``running_context_tokens`` the context
    each running request is counted at for it (the engine's rule: the running mean ISL + the
    length-biased half output, or ISL + OSL where admission reserves the whole request, as
    TRT-LLM's does); ``allocation`` is what the engine allocates on one GPU at that many running
    requests (term → bytes: weights, kv_cache, draft_kv, state, spec_state, reserve; they sum to
    ``gpu_bytes``).
    """

    SCHEMA_VERSION: ClassVar[int | None] = 1

    gpu: str
    layout: str
    gpu_bytes: float
    weight_bytes_per_gpu: float
    reserve_bytes: float
    kv_pool_bytes: float
    state_pool_bytes: float
    kv_bytes_per_token: float
    kv_bytes_per_token_per_gpu: float
    state_bytes_per_sequence: float
    kv_capacity_tokens: float
    state_slots: float | None  # sequences the state pool holds (perf.memory: a quotient, not floored)
    max_sequences: float
    context_tokens: float
    memory_fraction: float
    warnings: tuple[str, ...]
    running_requests: float
    running_limited_by: str
    running_context_tokens: float
    allocation: Mapping[str, float]


def memory(req: PredictRequest) -> MemoryResult | Rejected:
    """Per-GPU memory breakdown of one configuration (:class:`MemoryResult`), or
    :class:`Rejected` with the reason it cannot run.

    Raises:
        InputError, CatalogError, ConfigError: bad names or sizes.
    """
    scenario = resolve(req)
    result = scenario.evaluate()
    if isinstance(result, Rejection):
        return Rejected(result.reason)
    config, model, gpu = result.config, result.deployment.spec, result.deployment.gpu
    m = result.memory
    kv_tok, state_seq = kv_and_state(model, config.kv_dtype)
    running = allocated_requests(result)
    isl, osl = scenario.isl, scenario.osl
    return MemoryResult(
        gpu=gpu.key,
        layout=config.layout.describe(),
        gpu_bytes=m.gpu_bytes,
        weight_bytes_per_gpu=m.weight_bytes_per_gpu,
        reserve_bytes=m.reserve_bytes,
        kv_pool_bytes=m.kv_pool_bytes,
        state_pool_bytes=m.state_pool_bytes,
        kv_bytes_per_token=kv_tok,
        kv_bytes_per_token_per_gpu=m.kv_bytes_per_token_per_gpu,
        state_bytes_per_sequence=state_seq,
        kv_capacity_tokens=m.kv_capacity_tokens,
        state_slots=m.state_slots,
        max_sequences=m.max_sequences(req.isl + req.osl),
        context_tokens=req.isl + req.osl,
        memory_fraction=result.settings.memory_fraction,
        warnings=tuple(result.warnings),
        running_requests=running,
        running_limited_by=result.steady.limits.reason,
        running_context_tokens=config.engine.running_context_tokens(isl.mean, osl.mean, osl.running_mean),
        allocation=m.allocation(running),
    )
