"""What the planner evaluates and the verdict on one that cannot run: a candidate configuration
(:class:`Config`: layout, formats, engine, speculative decoding, user overrides) and a
:class:`Rejection` with its one-line reason. ``job.evaluate`` turns a Config into an Evaluation
or a Rejection.
"""

from __future__ import annotations

from dataclasses import dataclass

from tokenplan.engines.base import Engine
from tokenplan.engines.launch import MaxRunning
from tokenplan.perf.layout import Layout
from tokenplan.perf.speculative import SpecDecode
from tokenplan.records import quick_init
from tokenplan.units import Dtype


@dataclass(frozen=True, slots=True)
class Config:
    """One candidate configuration.

    Attributes:
        layout: TP/PP/EP/DP.
        weight_dtype, kv_dtype: number formats.
        engine: the engine (``tokenplan.engines``).
        spec: speculative decoding, or None.
        memory_fraction: user override of the engine's memory fraction (None = default).
        max_running: the running-request cap per replica (the engine's default, lifted to what
            memory allows instead of it — SGLang's 48 with speculative decoding — or fixed).
        ssm_dtype: override of the hybrid state dtype (None = the config's).
        vision_cut: SGLang's memory cut for a multimodal checkpoint (1 = none).
        max_model_len: the longest request the server is launched to serve (tokens; None = the
            model's whole context, vLLM's default ``max_model_len``). A measured run sets it: the
            server served its requests, so it was launched for at least the longest of them.
        chunk_tokens: the prefill chunk / token budget per step (SGLang ``--chunked-prefill-size``,
            vLLM ``--max-num-batched-tokens``, TRT-LLM ``max_num_tokens``; None = the engine's).
        engine_version: the engine release a measured run used (its ``engine_version`` column),
            which decides whether the step overlaps its CPU work (``engines.overlap``); None = the
            current release.
        scheduler_recv_interval: SGLang's ``--scheduler-recv-interval`` (decode iterations between
            two receives of new requests; ``EngineSettings.recv_interval``); None = the engine's, 1.
    """

    layout: Layout
    weight_dtype: Dtype
    kv_dtype: Dtype
    engine: Engine
    spec: SpecDecode | None = None
    memory_fraction: float | None = None
    max_running: MaxRunning = MaxRunning()
    ssm_dtype: str | None = None
    vision_cut: float = 1.0
    max_model_len: int | None = None
    chunk_tokens: int | None = None
    engine_version: str | None = None
    scheduler_recv_interval: int | None = None


quick_init(Config)  # a quicker __init__, same signature (tokenplan.records)


REJECTION_KINDS = ("engine", "context", "format", "layout", "memory", "kv", "spec", "concurrency")


@dataclass(frozen=True, slots=True)
class Rejection:
    """A configuration that cannot run, and why (one line).

    Attributes:
        config: what was evaluated.
        reason: the one-line reason, never empty.
        kind: what the reason depends on, so a search can say it once per scope: ``"engine"``
            (engine × GPU vendor), ``"context"`` (the job's lengths), ``"format"`` (formats ×
            GPU), ``"layout"`` (the split), ``"memory"`` (layout × formats), ``"kv"`` (the
            KV cache at this setting), ``"spec"``, ``"concurrency"``.
        weight_bytes_per_gpu, usable_bytes_per_gpu: for ``"memory"``, the weights one GPU holds
            and what weights and cache may use together (bytes: the engine's memory setting less
            its reserve for activations and CUDA graphs); 0 otherwise.
        spec_state_bytes_per_gpu: for ``"memory"``, the speculative state copies the engine
            reserves before the cache (SGLang, hybrid models; bytes); 0 otherwise.
    """

    config: Config
    reason: str
    kind: str = "other"
    weight_bytes_per_gpu: float = 0.0
    usable_bytes_per_gpu: float = 0.0
    spec_state_bytes_per_gpu: float = 0.0


quick_init(Rejection)  # a quicker __init__, same signature (tokenplan.records)
