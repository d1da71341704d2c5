"""``memory``: one GPU's memory breakdown — the Python API behind ``tokenplan memory``."""

from __future__ import annotations

from tokenplan.api._common import PredictRequest, evaluate_request
from tokenplan.job.evaluate import Rejection, allocated_requests, kv_and_state

__all__ = ["PredictRequest", "memory"]


def memory(req: PredictRequest) -> dict:
    """Per-GPU memory breakdown of one configuration (bytes), with KV capacity in tokens.

    Keys: ``gpu_bytes``, ``weight_bytes_per_gpu``, ``reserve_bytes``, ``kv_pool_bytes``,
    ``state_pool_bytes``, ``kv_bytes_per_token`` (whole model), ``kv_bytes_per_token_per_gpu``,
    ``state_bytes_per_sequence`` (whole model), ``kv_capacity_tokens`` (per replica),
    ``state_slots``, ``max_sequences`` at ISL + OSL, ``memory_fraction``, ``running_requests``
    (the batch limit) and ``allocation`` (what the engine allocates on one GPU at that many
    running requests, term → bytes: weights, kv_cache, draft_kv, state, spec_state, reserve;
    they sum to ``gpu_bytes``); or ``rejected``.
    """
    result = evaluate_request(req)
    if isinstance(result, Rejection):
        return {"rejected": result.reason}
    config, model, gpu = result.config, result.deployment.spec, result.deployment.gpu
    m = result.memory
    kv_tok, state_seq = kv_and_state(model, config.kv_dtype)
    return {
        "gpu": gpu.key, "layout": config.layout.describe(), "gpu_bytes": m.gpu_bytes,
        "weight_bytes_per_gpu": m.weight_bytes_per_gpu, "reserve_bytes": m.reserve_bytes,
        "kv_pool_bytes": m.kv_pool_bytes, "state_pool_bytes": m.state_pool_bytes,
        "kv_bytes_per_token": kv_tok, "kv_bytes_per_token_per_gpu": m.kv_bytes_per_token_per_gpu,
        "state_bytes_per_sequence": state_seq, "kv_capacity_tokens": m.kv_capacity_tokens,
        "state_slots": m.state_slots, "max_sequences": m.max_sequences(req.isl + req.osl),
        "context_tokens": req.isl + req.osl,
        "memory_fraction": result.settings.memory_fraction, "warnings": list(result.warnings),
        "running_requests": allocated_requests(result), "allocation": m.allocation(allocated_requests(result)),
    }
