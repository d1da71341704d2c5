"""What caps the running batch of one replica: KV capacity at the running mean context, hybrid
models' state slots, and the engine's running-request cap (``job.batching`` runs the batch).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tokenplan.engines.base import Engine, EngineSettings
from tokenplan.job.workload import LengthDist
from tokenplan.perf.deployment import Deployment
from tokenplan.perf.speculative import SpecDecode
from tokenplan.records import quick_init

ENGINE_CAP = "engine cap"  # the engine's default running-request cap binds
RUNNING_CAP = "running cap"  # the cap the launch sets binds (--max-running N, a measured run's max_running)


@dataclass(frozen=True, slots=True)
class BatchLimits:
    """What caps the running batch of one replica (sequences).

    Attributes:
        kv: sequences whose KV fits at the running mean context.
        state: hybrid-model state slots per the engine's slot rule (None = no state).
        max_running: the engine's running-request cap (``Engine.max_running``).
        limit: the smallest of them.
        reason: which one binds: ``kv cache``, ``state slots``, ``engine cap`` or ``running cap``
            (the cap a launch sets: ``--max-running N``, a measured run's ``max_running``).
    """

    kv: float
    state: float | None
    max_running: float
    limit: float
    reason: str


quick_init(BatchLimits)  # a quicker __init__, same signature (tokenplan.records)


def batch_limits(
    d: Deployment,
    engine: Engine,
    settings: EngineSettings,
    isl: LengthDist,
    osl: LengthDist,
    spec: SpecDecode | None,
    *,
    cap_reason: str = ENGINE_CAP,
) -> BatchLimits:
    """The most sequences one replica runs (see ``job.batching``'s module docstring). The
    engine's scheduler says what context a running request holds
    (``Engine.running_context_tokens``: the running mean context, or ISL + OSL where admission
    reserves the whole request, TRT-LLM's GUARANTEED_NO_EVICT) and its running-request cap
    (``Engine.max_running``), named ``cap_reason`` where it binds (``running cap`` where the launch
    sets it, not the engine's default)."""
    running_ctx = engine.running_context_tokens(isl.mean, osl.mean, osl.running_mean, osl.max_tokens)
    mem = d.memory
    # With a separate state pool (SGLang) KV and state limit apart; else one pool holds both.
    kv = mem.max_sequences(running_ctx) if mem.state_slots is None else mem.kv_capacity_tokens / running_ctx
    state = None
    if mem.state_slots is not None:
        state = math.floor(mem.state_slots / engine.pools.slots(bool(spec)))
    cap = engine.max_running(settings, mem.kv_capacity_tokens, isl.max + osl.max)
    # A hybrid model's state shares the pool with its KV here: say so, or the state (most of a
    # Qwen3.6-27B request's memory) would go unnamed in "capped by kv cache".
    pool = "kv cache and state" if mem.state_slots is None and mem.state_bytes_per_sequence_per_gpu > 0 else "kv cache"
    candidates = {pool: kv, cap_reason: cap}
    if state is not None:
        candidates["state slots"] = float(state)
    reason = min(candidates, key=candidates.__getitem__)
    return BatchLimits(kv, state, cap, max(math.floor(candidates[reason]), 0.0), reason)
