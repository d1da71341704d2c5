"""The seam between the performance model and an inference engine: the :class:`Engine` protocol,
the settings an engine resolves to (:class:`EngineSettings`), how it lays out its cache pools
(:class:`CachePools`); what a launch command is written from (:class:`Launch`) is in
``engines.launch``.
The small records are NamedTuples: a frozen dataclass costs ~10× more to define at import,
and ``tokenplan plan`` imports this package on every start.

Each engine (``sglang.py``, ``vllm.py``, ``trtllm.py``) implements :class:`Engine` with its own
rules in code and its figures from ``catalog/engines.yaml`` (every figure sourced there, keys S*,
V*, T* of ``docs/engine-facts.md``). Nothing here reads a file.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol, runtime_checkable

from tokenplan.arch.spec import ModelSpec

# The launch records and the shell around them lived here; they are imported from here throughout.
from tokenplan.engines.launch import Launch as Launch
from tokenplan.engines.launch import MaxRunning
from tokenplan.engines.launch import Parallelism as Parallelism
from tokenplan.engines.launch import endpoint_list as endpoint_list
from tokenplan.engines.launch import join_command as join_command
from tokenplan.engines.launch import quote as quote
from tokenplan.engines.launch import replicas_per_server as replicas_per_server
from tokenplan.engines.settings import EngineSettings as EngineSettings
from tokenplan.hardware import Gpu
from tokenplan.units import Dtype


class CachePools(NamedTuple):
    """How an engine lays out the memory after weights for a hybrid (linear-attention) model and
    an MTP draft (see each engine's module for the sources).

    Attributes:
        state_to_kv_memory_ratio: state pool / KV pool where the engine splits them at a fixed
            ratio (SGLang ``--mamba-full-memory-ratio``); None where one pool holds both.
        slots_per_request, slots_per_request_spec: state slots one running request takes
            without and with speculative decoding (SGLang's radix-cache ping-pong buffers; 1
            where state is one block per request).
        padded_state_slot: every state tensor has one row more than the requests (SGLang).
        draft_kv_pool: an MTP draft keeps its own KV pool at the target's token count (SGLang).
        verify_state_commit: after each speculative verify the engine copies the accepted
            intermediate state into the request's state slot, one more whole-state read and
            write per request per step (SGLang ``update_mamba_state_after_mtp_verify``, S20).
        swa_full_tokens_ratio: sliding-window layers get a pool of this many tokens per
            full-attention token, sized up front (SGLang ``--swa-full-tokens-ratio``); None where
            they hold only their window per request (vLLM, TRT-LLM).
    """

    state_to_kv_memory_ratio: float | None = None
    slots_per_request: int = 1
    slots_per_request_spec: int = 1
    padded_state_slot: bool = False
    draft_kv_pool: bool = False
    verify_state_commit: bool = False
    swa_full_tokens_ratio: float | None = None

    def slots(self, speculative: bool) -> int:
        """State slots one running request takes (``slots_per_request[_spec]``)."""
        return self.slots_per_request_spec if speculative else self.slots_per_request


@runtime_checkable
class Engine(Protocol):
    """What the performance model, the job simulation and the planner need from an engine.

    Implementations: :class:`tokenplan.engines.sglang.Sglang`,
    :class:`tokenplan.engines.vllm.Vllm`, :class:`tokenplan.engines.trtllm.Trtllm`; built from
    ``catalog/engines.yaml`` by :func:`tokenplan.engines.from_catalog`. Frozen and hashable.
    Runtime-checkable: ``isinstance(x, Engine)`` checks that every member below is present.
    """

    @property
    def name(self) -> str:
        """Catalog key (``sglang``, ``vllm``, ``trtllm``)."""

    @property
    def display_name(self) -> str:
        """Name for people (``SGLang``)."""

    @property
    def vendors(self) -> tuple[str, ...]:
        """GPU vendors the engine runs on."""

    @property
    def nvfp4_weight_only(self) -> bool:
        """Runs NVFP4 weights weight-only (dequantized to BF16 in the GEMM) on a GPU without FP4
        tensor cores; False: the engine refuses NVFP4 there (``catalog/engines.yaml`` cites each)."""

    @property
    def nvfp4_kv_architectures(self) -> tuple[str, ...]:
        """GPU architectures on which the engine runs an NVFP4 KV cache (``catalog/engines.yaml``
        cites each)."""

    @property
    def mixed_prefill(self) -> bool:
        """Prompt chunks ride in decode steps (else prefill runs in steps of its own)."""

    @property
    def pools(self) -> CachePools:
        """How the memory after weights is split for hybrid state and an MTP draft."""

    # ---- defaults, caps and memory
    def settings(
        self,
        gpu: Gpu,
        layout: Parallelism,
        *,
        speculative: bool,
        vision_cut: float = 1.0,
        memory_fraction: float | None = None,
        max_running: int | None = None,
        chunk_tokens: int | None = None,
    ) -> EngineSettings:
        """The engine's defaults applied to one deployment (user overrides win; ``chunk_tokens``:
        SGLang ``--chunked-prefill-size``, vLLM ``--max-num-batched-tokens``, TRT-LLM
        ``max_num_tokens``)."""

    def expert_padding(self, gpu: Gpu, weight: Dtype) -> tuple[int, int]:
        """(hidden, per-partition intermediate) multiples the engine pads routed-expert weights
        of format ``weight`` to on ``gpu`` ((1, 1) = none)."""

    def context_must_fit(self) -> bool:
        """The engine refuses to start when its KV pool cannot hold one request of the model's
        whole context (its default ``max_model_len``)."""

    def tight_settings(self, settings: EngineSettings, vision_cut: float = 1.0) -> EngineSettings | None:
        """The settings a launch uses when the default reserve leaves no room for the weights,
        or None where the engine has no such rule."""

    def offline_settings(
        self,
        settings: EngineSettings,
        model: ModelSpec,
        gpu: Gpu,
        layout: Parallelism,
        weight_dtype: Dtype,
        kv_dtype: Dtype,
        isl_tokens: float,
        osl_tokens: float,
    ) -> EngineSettings:
        """The settings of an offline (max-throughput) run, where the engine's benchmark tool
        sizes its own batch; ``settings`` where it does not."""

    def vision_cut(self, vision_layers: int, vision_hidden: int) -> float:
        """Memory-fraction multiplier for a multimodal checkpoint (1 = none)."""

    def auto_kv_dtype(self, weight: Dtype) -> Dtype:
        """The KV-cache format ``--kv-dtype auto`` means for checkpoints in ``weight``."""

    def spec_state_copies(self, draft_tokens: int | None) -> int:
        """Extra recurrent-state copies one running request holds under speculative decoding
        (``draft_tokens`` k; None or 0 = off)."""

    def disables_radix_cache(self, hybrid_model: bool, max_running: MaxRunning) -> bool:
        """The launch turns the prefix (radix) cache off: what lifting the running cap
        (``max_running.lifted``) of a hybrid model takes (SGLang ``--disable-radix-cache``)."""

    def state_to_kv_ratio(self, hybrid_model: bool, max_running: MaxRunning) -> float | None:
        """The state-pool / KV-pool memory ratio a hybrid model's memory after weights is split
        at (None: one pool holds both, or no state), at the running cap ``max_running``
        (``Config.max_running``: the engine's default, lifted or fixed)."""

    def allocated_running(self, limit: float, settings: EngineSettings, max_running: MaxRunning) -> float:
        """Running requests per replica the engine allocates state for when the running limit
        is ``limit`` (``settings.max_running``: the cap's value; ``max_running`` as above)."""

    # ---- scheduler
    def running_context_tokens(
        self, isl_mean: float, osl_mean: float, osl_running_mean: float, max_tokens: float | None = None
    ) -> float:
        """KV tokens one running request holds for admission (tokens); ``max_tokens``: the
        ``max_tokens`` every request carries (the job's output cap), None where each request's
        own output length is its limit (a benchmark's fixed or drawn lengths)."""

    def max_running(self, settings: EngineSettings, kv_tokens: float, max_request_tokens: float) -> float:
        """Running requests the scheduler admits at most, per replica: ``settings.max_running``
        (the flag: SGLang ``--max-running-requests``, vLLM ``--max-num-seqs``, TRT-LLM
        ``--max_batch_size``), or the engine's rule where it is unset."""

    def caps_running_by_default(self, speculative: bool, hybrid_model: bool) -> bool:
        """The default launch caps running requests below what memory allows (a plan then also
        tries a launch that lifts the cap)."""

    @property
    def reserves_whole_output(self) -> bool:
        """Admission reserves a request's whole output (TRT-LLM GUARANTEED_NO_EVICT); else a
        running request holds its prompt and the output generated so far."""

    @property
    def fraction_digits(self) -> int:
        """Decimals the launch command prints the memory fraction with (a sized fraction is
        rounded up to them, so the printed value still holds the batch)."""

    def max_memory_fraction(self, settings: EngineSettings, gpu_bytes: float) -> float:
        """The largest memory fraction a launch may set on a GPU of ``gpu_bytes`` (CUDA-visible)
        while keeping what the engine needs outside its pools."""

    # ---- launch
    def servers_per_replica(self, layout: Parallelism) -> bool:
        """Each DP replica needs a server of its own."""

    def launch_command(self, launch: Launch) -> str:
        """The shell command that starts the engine for ``launch``, every value quoted
        (:func:`quote`)."""
