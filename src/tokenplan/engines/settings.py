"""The settings an engine resolves to for one deployment (:class:`EngineSettings`): what its
launch command would set and how its memory fraction turns into bytes for KV cache and state.
``engines.base`` (the :class:`~tokenplan.engines.base.Engine` protocol) and ``engines.launch``
(the launch records) both take it from here. Nothing here reads a file."""

from __future__ import annotations

from dataclasses import dataclass

from tokenplan.records import quick_init


@dataclass(frozen=True, slots=True)
class EngineSettings:
    """The settings an engine resolves to for one deployment (what a launch command would set).

    Attributes:
        memory_fraction: SGLang ``--mem-fraction-static`` and vLLM ``--gpu-memory-utilization``:
            share of total GPU memory for weights + cache; TRT-LLM
            ``free_gpu_memory_fraction``: share of the memory left after weights and reserve.
        reserve_bytes: memory held back besides the fraction's headroom (activations, CUDA
            graphs, communication buffers); 0 for SGLang, whose fraction already excludes it.
        fraction_of_free: True for TRT-LLM's fraction-of-free-memory rule.
        chunk_tokens: prefill chunk / token budget per step.
        graph_max_bs: largest decode batch captured in a CUDA graph.
        max_running: the engine's cap on running requests (None = derived from KV later).
        profile_tokens, profile_seqs: tokens of the profiling forward and rows of its sampler
            pass whose activation peak the engine holds back (vLLM: ``max_num_batched_tokens``
            and ``max_num_seqs``; 0 = none); the model-dependent bytes are
            ``perf.memory.profile_reserve_bytes``.
        sampler_bytes_per_logit: bytes one vocabulary entry of one row holds in the sampler pass.
        graph_estimate_bytes: the engine's CUDA-graph memory estimate (bytes; 0 = none).
        tight: the launch raises the memory fraction and shrinks the prefill chunk and the
            CUDA-graph batch so that a checkpoint the default reserve leaves no room for fits
            (:meth:`Engine.tight_settings`); the launch command then sets all three.
        startup_bytes: device memory the process holds before it loads weights (CUDA context,
            communicators) that the fraction is taken after: SGLang sizes against the free
            memory it measured then (S1/S3 ``profile_max_num_token``: ``rest = available_after_weights
            − total_gpu_memory × (1 − mem_fraction_static)``, ``total_gpu_memory`` = the free memory
            after ``init_torch_distributed``); 0 where the fraction is of the device total (vLLM).
        chunk_set: the user set the prefill chunk (SGLang ``--chunked-prefill-size``, vLLM
            ``--max-num-batched-tokens``); the launch command then writes it.
        activation_bytes: what the engine's own rule holds back for activations, CUDA graphs
            and communication inside its fraction's remainder (SGLang's S1 reserve, bytes; 0
            where ``reserve_bytes`` already holds it): a launch that raises the fraction keeps it.
        adp_balance_timeout_iters: iterations a rank holds a new context request back while
            some attention-DP rank has none (TensorRT-LLM ``attention_dp_config.timeout_iters``
            with ``enable_balance``; 0 = no balancing; ``job.prefill_wait.adp_balance_wait_s``).
        recv_interval: decode iterations between two receives of new requests (SGLang
            ``--scheduler-recv-interval``, default 1).
        uncaptured_gdn_layer_s: host time (seconds) per model layer a step past ``graph_max_bs``
            tokens adds on a Gated DeltaNet hybrid (vLLM; :mod:`tokenplan.job.graphs`); 0 = none.
        graph_cap_tokens: the capture size's bound besides the running cap (vLLM: ``min(512,
            max_num_batched_tokens)``): with k draft tokens a step is captured up to
            ``min(graph_max_bs × (1 + k), graph_cap_tokens)`` tokens (V5); 0 = ``graph_max_bs``.
    """

    memory_fraction: float
    reserve_bytes: float
    fraction_of_free: bool
    chunk_tokens: int
    graph_max_bs: int
    max_running: int | None
    profile_tokens: int = 0
    profile_seqs: int = 0
    sampler_bytes_per_logit: float = 0.0
    graph_estimate_bytes: float = 0.0
    tight: bool = False
    startup_bytes: float = 0.0
    chunk_set: bool = False
    activation_bytes: float = 0.0
    adp_balance_timeout_iters: int = 0
    recv_interval: int = 1
    uncaptured_gdn_layer_s: float = 0.0
    graph_cap_tokens: int = 0

    def fraction_base_bytes(self, gpu_bytes: float, weight_bytes: float, reserve_bytes: float) -> float:
        """The bytes the memory fraction is a share of, so that raising it by Δ adds Δ × this to
        :meth:`usable_bytes`: the memory left after weights and reserve for TensorRT-LLM's
        fraction of free memory, the device less ``startup_bytes`` otherwise (bytes)."""
        if self.fraction_of_free:
            return gpu_bytes - weight_bytes - reserve_bytes
        return gpu_bytes - self.startup_bytes

    def usable_bytes(self, gpu_bytes: float, weight_bytes: float, reserve_bytes: float) -> float:
        """Bytes one GPU has for KV cache and state under these settings (may be negative).

        vLLM sizes against the device total: ``gpu × fraction − weights − reserve`` (V1, V3
        ``gpu_memory_utilization``; vllm ``v1/worker/gpu_worker.py determine_available_memory``:
        requested memory = total × utilization, less weights, the profiled peak, non-torch memory
        and the CUDA-graph estimate); SGLang against the free memory after its startup:
        ``(gpu − startup) × fraction − weights`` (``startup_bytes``; S3 ``profile_max_num_token``);
        TensorRT-LLM against the memory left after weights and its profiling peak: ``(gpu −
        weights − reserve) × fraction`` (T3 ``KvCacheCreator._cal_max_memory``).

        Args:
            gpu_bytes: device memory as the CUDA runtime reports it (``perf.memory.cuda_visible_bytes``);
                weight_bytes: weights on the GPU; reserve_bytes: the whole reserve
                (``reserve_bytes`` plus a profiled activation peak), all in bytes.
        """
        if self.fraction_of_free:
            return (gpu_bytes - weight_bytes - reserve_bytes) * self.memory_fraction
        return (gpu_bytes - self.startup_bytes) * self.memory_fraction - weight_bytes - reserve_bytes


quick_init(EngineSettings)  # a quicker __init__, same signature (tokenplan.records)
