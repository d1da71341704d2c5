"""TensorRT-LLM (``trtllm-serve``, PyTorch backend): ``free_gpu_memory_fraction`` of the memory left
after weights and a profiling run; in-flight batching with the GUARANTEED_NO_EVICT scheduler;
offline runs are ``trtllm-bench`` runs that size their own batch.

Rules here, figures in ``catalog/engines.yaml`` (``trtllm:``). Sources (``docs/engine-facts.md``): T1
``commands/serve.py`` @00209af1; T2 ``llmapi/llm_args.py``; T3 ``_torch/pyexecutor/_util.py``
``KvCacheCreator._cal_max_memory``; T5 ``bench/build/tuning.py`` (``calc_engine_setting``); T6 ``DecodeCudaGraphConfig``;
T9 performance-tuning guide (scheduler policies); T12 reasoning parser / ``kv_cache_config`` example.

The scheduler is here alone (:meth:`Trtllm.running_context_tokens`, :meth:`Trtllm.max_running`):
a MAX_UTILIZATION policy or trtllm-serve's dynamic batch-size tuning changes these two methods.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from tokenplan.arch.kv import state_bytes_per_sequence
from tokenplan.arch.params import component_dtype, param_counts
from tokenplan.arch.spec import AttentionKind, ModelSpec
from tokenplan.engines.base import CachePools, EngineSettings, Launch, Parallelism, join_command, quote
from tokenplan.engines.launch import DRAFT_MODEL, MaxRunning, replica_hosts, serves_other_hosts
from tokenplan.hardware import Gpu
from tokenplan.units import Dtype, GiB

# Weight formats trtllm-bench's heuristic sizes (QuantAlgo NO_QUANT, FP8, FP8_BLOCK_SCALES, NVFP4; T5).
_BENCH_TUNED = frozenset({Dtype.BF16, Dtype.FP16, Dtype.FP8, Dtype.NVFP4})

# Attention-DP context balancing as the published attention-DP recipes launch it
# (``attention_dp_config: {enable_balance: true, timeout_iters: 60, batching_wait_iters: 0}`` in
# InferenceMAX's TensorRT-LLM DeepSeek-R1 scripts and TensorRT-LLM's DeepSeek deployment guide;
# the engine's own default is ``enable_balance: false``): the launch command writes it and the
# TTFT charges its wait (``job.prefill_wait.adp_balance_wait_s``).
ADP_BALANCE_TIMEOUT_ITERS = 60
_ADP_BALANCE_YAML = (
    "  enable_balance: true",
    f"  timeout_iters: {ADP_BALANCE_TIMEOUT_ITERS}",
    "  batching_wait_iters: 0",
)


def trtllm_bench_limits(
    gpu_memory_bytes: float,
    weight_bytes_total: float,
    kv_bytes_per_token: float,
    state_bytes_per_sequence: float,
    isl_tokens: float,
    osl_tokens: float,
    ranks: int,
    pp: int,
    tuned: bool,
) -> tuple[int, int]:
    """``(max_batch_size, max_num_tokens)`` that ``trtllm-bench throughput`` picks for itself
    (TRT-LLM ``bench/tuning/heuristics.py`` ``calc_engine_setting`` / ``finetune_setting``, T5).

    ``cache = (ranks × device memory − weights) × 0.95`` (squared for hybrid models) holds
    ``cache / (kv_bytes_per_token × (ISL + OSL) + state)`` requests; ``raw_bs = min(that, 4096) / PP``
    and ``raw_tokens = min(raw_bs × (1 + ISL/OSL), 32768)``, rounded up optimistically (batch: 32s
    with a floor of 64 below 256, 128s below 1,024, 256s above; tokens: at least 2,048, 256s below
    4,096, 512s below 8,192, 1,024s above). Hybrids round the batch down to even. Quantization
    modes the heuristic does not know (MXFP4, INT4) keep the LLM-API defaults 2,048 / 8,192.

    Args:
        gpu_memory_bytes: one GPU's memory (bytes, nvidia-smi's total).
        weight_bytes_total: the engine size the heuristic subtracts (bytes,
            :func:`_bench_engine_bytes`).
        kv_bytes_per_token: the heuristic's KV bytes per token (:func:`_bench_kv_bytes_per_token`).
        state_bytes_per_sequence: recurrent state per request (bytes; 0 for attention-only models).
        isl_tokens, osl_tokens: the dataset's mean prompt and output lengths (tokens).
        ranks: GPUs whose memory the heuristic pools, TP × PP (also with attention DP).
        pp: pipeline stages. tuned: the weight format is one the heuristic knows (BF16, FP8, NVFP4).

    Returns:
        (max_batch_size, max_num_tokens), per attention-DP rank where there is attention DP.
    """
    if not tuned:
        return 2048, 8192
    fraction = 0.95 * (0.95 if state_bytes_per_sequence > 0 else 1.0)
    cache = (ranks * gpu_memory_bytes - weight_bytes_total) * fraction
    per_request = kv_bytes_per_token * (isl_tokens + osl_tokens) + state_bytes_per_sequence
    requests = max(cache / per_request, 1.0) if per_request > 0 else 4096.0
    raw_bs = min(requests, 4096) / pp
    raw_tokens = min(raw_bs * (1 + isl_tokens / osl_tokens), 32768)
    if state_bytes_per_sequence > 0:
        bs = max(2 * math.floor(raw_bs / 2), 1)
    elif raw_bs < 256:
        bs = max(64, 32 * math.ceil(raw_bs / 32))
    elif raw_bs < 1024:
        bs = 128 * math.ceil(raw_bs / 128)
    else:
        bs = 256 * math.ceil(raw_bs / 256)
    if raw_tokens < 4096:
        tokens = max(2048, 256 * math.ceil(raw_tokens / 256))
    elif raw_tokens < 8192:
        tokens = 512 * math.ceil(raw_tokens / 512)
    else:
        tokens = 1024 * math.ceil(raw_tokens / 1024)
    return bs, tokens


@dataclass(frozen=True, slots=True)
class Trtllm:
    """TensorRT-LLM's defaults (``catalog/engines.yaml``; each field's source is there)."""

    name: str
    display_name: str
    vendors: tuple[str, ...]
    nvfp4_weight_only: bool
    nvfp4_kv_architectures: tuple[str, ...]
    memory_fraction: float
    reserve_fixed_gib: float
    max_batch_size: int
    max_num_tokens: int
    graph_max_bs: int
    pools: CachePools = CachePools()

    mixed_prefill: ClassVar[bool] = True  # T9: in-flight batching puts context and generation in one step

    @classmethod
    def from_entry(cls, name: str, entry: Mapping[str, Any]) -> Trtllm:
        """Build from the ``trtllm:`` entry of ``catalog/engines.yaml`` (parsed YAML). Raises
        KeyError or TypeError for a missing or unknown key (a shipped-catalog defect)."""
        e = dict(entry)
        e.pop("source")
        kv = tuple(e.pop("nvfp4_kv_architectures"))
        return cls(name=name, vendors=tuple(e.pop("vendors")), nvfp4_kv_architectures=kv, **e)

    # ------------------------------------------------------------------ defaults and memory
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
        """``free_gpu_memory_fraction`` of the memory left after weights and the profiling peak
        ``reserve_fixed_gib`` (T2, T3), ``max_num_tokens`` and ``max_batch_size`` (T1, T2), CUDA
        graphs up to ``graph_max_bs`` (T6), attention-DP balancing as the launch writes it
        (``ADP_BALANCE_TIMEOUT_ITERS``). ``memory_fraction``, ``max_running``, ``chunk_tokens``
        (``max_num_tokens``, per rank): user overrides. With attention DP each rank has its own
        cap and budget: the replica's are their sum, as in :meth:`offline_settings`."""
        ranks = layout.tp if layout.attention_dp else 1
        return EngineSettings(
            memory_fraction or self.memory_fraction,
            self.reserve_fixed_gib * GiB,
            True,
            (chunk_tokens or self.max_num_tokens) * ranks,
            self.graph_max_bs,
            max_running or self.max_batch_size * ranks,
            chunk_set=chunk_tokens is not None,
            adp_balance_timeout_iters=ADP_BALANCE_TIMEOUT_ITERS if layout.attention_dp else 0,
        )

    def expert_padding(self, gpu: Gpu, weight: Dtype) -> tuple[int, int]:
        """(1, 1): no expert padding is modelled for TensorRT-LLM."""
        return 1, 1

    def context_must_fit(self) -> bool:
        """False: not modelled for TensorRT-LLM."""
        return False

    def tight_settings(self, settings: EngineSettings, vision_cut: float = 1.0) -> EngineSettings | None:
        """None: no tighter launch is known for TensorRT-LLM."""
        return None

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
        """An offline run is a ``trtllm-bench`` run: the running-request cap and token budget of
        :func:`trtllm_bench_limits` (T5), as the heuristic stood before TensorRT-LLM PR #16707
        (2026-07-22), when the perf-overview tables were measured: KV bytes per token of
        :func:`_bench_kv_bytes_per_token` (MLA costed as multi-head), the engine size of
        :func:`_bench_engine_bytes`, the memory of TP × PP GPUs pooled (``n_gpus = tp × pp``,
        also with attention DP, where each of the TP ranks then schedules that many requests),
        and a token budget of at least the prompt plus the batch (no chunked prefill).

        Args:
            settings: the default settings. model, gpu, layout, weight_dtype, kv_dtype: the
                deployment. isl_tokens, osl_tokens: mean prompt and output lengths (tokens).
        """
        kv_tok = _bench_kv_bytes_per_token(model, kv_dtype, layout.tp)
        ranks = layout.tp * layout.pp
        bs, tokens = trtllm_bench_limits(
            gpu.memory_bytes,
            _bench_engine_bytes(model, weight_dtype),
            kv_tok,
            state_bytes_per_sequence(model),
            isl_tokens,
            osl_tokens,
            ranks,
            layout.pp,
            weight_dtype in _BENCH_TUNED,
        )
        # trtllm-bench runs without chunked prefill unless asked (T5 get_settings): it raises the
        # token budget to the longest prompt plus a full batch of decode tokens
        tokens = max(tokens, math.ceil(isl_tokens) + bs)
        scale = layout.tp if layout.attention_dp else 1
        return replace(settings, max_running=bs * scale, chunk_tokens=tokens * scale)

    def vision_cut(self, vision_layers: int, vision_hidden: int) -> float:
        """1: TensorRT-LLM's memory rule does not depend on a vision tower."""
        return 1.0

    def auto_kv_dtype(self, weight: Dtype) -> Dtype:
        """FP8 for a quantized FP8/NVFP4 checkpoint, whose quantization config sets FP8 KV
        (``kv_cache_config.dtype = "auto"`` takes the checkpoint's KV quantization, T2;
        ground-truth README); else the model dtype, BF16."""
        return Dtype.FP8 if weight in (Dtype.FP8, Dtype.NVFP4) else Dtype.BF16

    def spec_state_copies(self, draft_tokens: int | None) -> int:
        """0: no extra recurrent state under speculative decoding is known (not verified)."""
        return 0

    # ------------------------------------------------------------------ scheduler
    def disables_radix_cache(self, hybrid_model: bool, max_running: MaxRunning) -> bool:
        """False: the plan never lifts TensorRT-LLM's cap (:meth:`caps_running_by_default`)."""
        return False

    def state_to_kv_ratio(self, hybrid_model: bool, max_running: MaxRunning) -> float | None:
        """The catalog's ``state_to_kv_memory_ratio`` for a hybrid model (``pools``; None where the
        catalog gives none: TensorRT-LLM then holds state and KV in one pool), None for other models."""
        return self.pools.state_to_kv_memory_ratio if hybrid_model else None

    def allocated_running(self, limit: float, settings: EngineSettings, max_running: MaxRunning) -> float:
        """The running limit: TensorRT-LLM allocates state per running request."""
        return limit

    def running_context_tokens(
        self, isl_mean: float, osl_mean: float, osl_running_mean: float, max_tokens: float | None = None
    ) -> float:
        """ISL + the request's ``max_tokens``: GUARANTEED_NO_EVICT (set by trtllm-serve, T1; the
        default, T9) admits a request only when the blocks of its prompt and of ``mMaxNewTokens``
        are free, and never pauses it (``KVCacheManager::getRemainingBlocksToCompletion``:
        ``ceilDiv(min(mPromptLen + mMaxNewTokens, window), tokensPerBlock)``,
        ``cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp``). A job whose requests all carry
        one ``max_tokens`` (``tokenplan generate`` sends the plan's output cap) reserves it
        whatever the answer's length: ISL + ``max_tokens``. A benchmark that sends each request
        its own length (``max_tokens`` None here) reserves that length; the requests running at
        an instant are length-biased, so each holds the running mean output E[OSL²]/E[OSL] on
        top of the mean prompt, with fixed lengths ISL + OSL."""
        return isl_mean + (osl_running_mean if max_tokens is None else max_tokens)

    def max_running(self, settings: EngineSettings, kv_tokens: float, max_request_tokens: float) -> float:
        """``max_batch_size`` (T1, T2; or trtllm-bench's, :meth:`offline_settings`)."""
        if settings.max_running is None:  # :meth:`settings` always sets max_batch_size
            raise TypeError("trtllm: EngineSettings.max_running is None; expected the max_batch_size set by settings()")
        return float(settings.max_running)

    def caps_running_by_default(self, speculative: bool, hybrid_model: bool) -> bool:
        """False: the plan keeps ``max_batch_size``."""
        return False

    @property
    def reserves_whole_output(self) -> bool:
        """True: GUARANTEED_NO_EVICT reserves the whole request at admission (T1, T9)."""
        return True

    def max_memory_fraction(self, settings: EngineSettings, gpu_bytes: float) -> float:
        """TensorRT-LLM's default ``free_gpu_memory_fraction`` (T2), or the planned one if larger:
        its remainder is what other allocations after the profiling run get, and no larger
        figure is sourced, so a launch never raises it; where the pool cannot hold the batch the
        launch lowers ``max_batch_size`` instead."""
        return max(self.memory_fraction, settings.memory_fraction)

    # ------------------------------------------------------------------ launch
    # trtllm-serve's default port (``--port`` 8000, T1).
    base_port: ClassVar[int] = 8000
    # decimals the launch command prints the memory fraction with
    fraction_digits: ClassVar[int] = 2

    def servers_per_replica(self, layout: Parallelism) -> bool:
        """``trtllm-serve`` has no data-parallel flag: every DP replica is a server of its own."""
        return layout.dp > 1

    def launch_command(self, launch: Launch) -> str:
        """``trtllm-serve ... --extra_llm_api_options`` with its YAML written first (a heredoc;
        T1, T2, T12, nvidia.github.io/TensorRT-LLM "trtllm-serve" command reference), every value
        quoted. The weight format comes from the checkpoint (no online quantization flag).
        ``kv_cache_config.free_gpu_memory_fraction`` and ``--max_batch_size`` are the launch's
        sized ones (``Launch.sized``), else the plan's fraction when TensorRT-LLM was planned or
        its default (T2) and the plan's batch limit. Chunked prefill is on: a job's prompts run to
        its cap, past ``max_num_tokens``, and are cut into pieces as the step model takes them."""
        lay, planned = launch.layout, launch.planned_engine == self.name
        fraction, running = launch.sized(self.name, self.memory_fraction)
        yaml = ["kv_cache_config:", f"  free_gpu_memory_fraction: {fraction:.2f}"]
        if launch.kv_dtype in (Dtype.FP8, Dtype.NVFP4):  # KvCacheConfig.dtype auto, fp8, nvfp4 (TensorRT-LLM#6244)
            yaml.append(f"  dtype: {launch.kv_dtype.value}")
        # off by default (T2), when the LLM API refuses every prompt longer than max_num_tokens
        yaml.append("enable_chunked_prefill: true")
        if lay.attention_dp:
            yaml += ["enable_attention_dp: true", "attention_dp_config:", *_ADP_BALANCE_YAML]
        if launch.spec_method is not None:
            yaml += ["speculative_config:", *_spec_yaml(launch.spec_method, launch.draft_tokens, launch.draft_model)]
        ranks = lay.tp if lay.attention_dp else 1  # with attention DP each rank schedules its own batch
        # TensorRT-LLM takes the weight format from the checkpoint: another format is a placeholder for its
        # ModelOpt checkpoint (pasted as is, the repository would be served in its own format, not this one)
        other = launch.weight_dtype.value != launch.native_dtype
        served = f"{launch.weight_dtype.value.upper()}_CHECKPOINT" if other else quote(launch.repo)
        head = [f"trtllm-serve {served}", *launch.remote_code("--trust_remote_code"), "--backend pytorch"]
        args = [*head, f"--tp_size {lay.tp}"]
        if lay.pp > 1:
            args.append(f"--pp_size {lay.pp}")
        if lay.ep > 1:
            args.append(f"--ep_size {lay.ep}")
        args.append(f"--max_batch_size {math.ceil(running / ranks)}")
        if planned:
            args.append(f"--max_num_tokens {math.ceil(launch.settings.chunk_tokens / ranks)}")  # per rank
        args.append("--extra_llm_api_options extra_llm_api_options.yaml")
        parser = launch.parser(self.name)
        if parser:
            args.append(f"--reasoning_parser {quote(parser)}")
        if serves_other_hosts(launch):  # reached from other hosts: not the default localhost
            args.append("--host 0.0.0.0")
        head = ["cat > extra_llm_api_options.yaml <<'EOF'", *yaml, "EOF"]
        if other:
            head.insert(
                0,
                f"# {served}: a ModelOpt {launch.weight_dtype.value} checkpoint of {launch.repo} (its path or repository)",
            )
        hosts, note = replica_hosts(launch), ""
        if hosts > 1:  # one MPI job over the hosts (trtllm-serve docs, multi-node: srun or mpirun)
            n = lay.gpus_per_replica
            args[0] = (
                f"srun -N {hosts} --ntasks {n} --ntasks-per-node {launch.host_gpus} --mpi=pmix trtllm-llmapi-launch {args[0]}"
            )
            note = "trtllm-serve runs as one MPI job over them (srun, or mpirun with trtllm-llmapi-launch), the YAML on a path every host reads"
        command = join_command(launch, args, self.servers_per_replica(lay), "--port", self.base_port, note)
        return "\n".join(head) + "\n" + command


# ``decoding_type`` of each method: the ``Literal`` of its ``*DecodingConfig`` in
# ``tensorrt_llm/llmapi/llm_args.py`` (MTP, Eagle, Eagle3, DFlash; case as written there).
_DECODING_TYPE = {"mtp": "MTP", "eagle": "Eagle", "eagle3": "Eagle3", "dflash": "DFlash"}


def _spec_yaml(method: str, k: int, drafter: str | None) -> list[str]:
    """The YAML ``speculative_config`` lines: MTP reads the checkpoint's own layers; EAGLE,
    EAGLE-3 and DFlash need a draft model the plan does not know (``DRAFT_MODEL``)."""
    if method == "mtp":
        return ["  decoding_type: MTP", f"  num_nextn_predict_layers: {k}"]
    return [
        f"  decoding_type: {_DECODING_TYPE.get(method, method)}",
        f"  max_draft_len: {k}",
        f"  speculative_model_dir: {json.dumps(drafter)}"
        if drafter
        else f"  speculative_model_dir: {DRAFT_MODEL}  # the drafter's checkpoint",
    ]


# Bytes per element trtllm-bench's heuristic gives a weight or KV quantization (T5 BYTES_PER_ELEM:
# NO_QUANT 2, FP8 and FP8_BLOCK_SCALES 1, NVFP4 0.5; anything else 2).
_BENCH_BYTES = {Dtype.FP8: 1.0, Dtype.NVFP4: 0.5}


def _bench_kv_bytes_per_token(model: ModelSpec, kv_dtype: Dtype, tp: int) -> float:
    """KV bytes per token as trtllm-bench's heuristic counts them before TensorRT-LLM PR #16707
    (2026-07-22; the perf-overview tables were measured before it): ``2 × attention layers ×
    max(TP, num_key_value_heads) × head_size × bytes`` for every model, MLA included, where an
    MLA config (DeepSeek-V3/R1, Kimi-K2) states ``num_key_value_heads`` = the attention heads and
    no ``head_dim``, so ``head_size = hidden_size / num_attention_heads`` (T5 ``ModelConfig``):
    DeepSeek-R1 with FP8 KV, 2 × 61 × 128 × 56 × 1 = 874,496 B against the 35,136 B it caches —
    PR #16707 names the ~25× overestimate that capped DeepSeek-V3.2 at max_batch_size 64."""
    a = model.attention
    if a is None:
        return 0.0
    layers = model.full_attention_layers + model.sliding_layers
    if a.kind is AttentionKind.MLA:
        heads, head_size = a.num_heads, model.hidden_size // a.num_heads
    else:
        heads, head_size = a.num_kv_heads, a.head_dim
    return 2.0 * layers * max(tp, heads) * head_size * _BENCH_BYTES.get(kv_dtype, 2.0)


def _bench_engine_bytes(model: ModelSpec, weight_dtype: Dtype) -> float:
    """The engine size trtllm-bench's heuristic subtracts: the checkpoint's parameter count from
    its safetensors headers (4-bit weights are stored two to a byte, so each counts half) times
    the bytes per element of the quantization (T5 ``param_count × BYTES_PER_ELEM``): a BF16 or
    FP8 checkpoint's true size, half the size of an NVFP4 one."""
    p = param_counts(model)
    stored = p.embedding + p.lm_head
    for component in ("attention", "linear_attention", "dense_ffn", "shared_experts", "routed_experts"):
        four_bit = component_dtype(model, weight_dtype, component).bytes_per_element < 1.0
        stored += getattr(p, component) * (0.5 if four_bit else 1.0)
    return stored * _BENCH_BYTES.get(weight_dtype, 2.0)
