"""vLLM (``vllm serve``): ``gpu_memory_utilization`` of total memory, less the peak of a profiling
run and a CUDA-graph estimate; chunked prefill mixed into decode steps; one pool for KV and a
hybrid model's state.

Rules here, figures in ``catalog/engines.yaml`` (``vllm:``). Sources (``docs/engine-facts.md``):
V1 ``vllm/config/cache.py`` @002f10e0; V2 ``arg_utils.get_batch_defaults``; V3 v0.27.1 engine log;
V4 issue #45178; V5 ``_set_cudagraph_sizes``; V13 issue #32324; V14 ``scheduler.py``; V15
PR #21489; V16 ``vllm/v1/kv_cache_interface.py`` ``MambaSpec``; V17
``vllm/model_executor/layers/quantization/mxfp4.py`` ``Mxfp4MoEMethod.create_weights`` (Marlin
padding); V18 ``vllm/v1/core/kv_cache_utils.py`` ``check_enough_kv_cache_memory``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from tokenplan.arch.spec import ModelSpec
from tokenplan.engines.base import CachePools, EngineSettings, Launch, Parallelism, join_command, quote
from tokenplan.engines.launch import (
    DRAFT_MODEL,
    MaxRunning,
    checkpoint_note,
    draft_note,
    needs_drafter,
    node_ranks_note,
    quantizes_at_load,
    replica_hosts,
)
from tokenplan.hardware import Gpu
from tokenplan.units import Dtype, GiB, MiB

# --quantization for a checkpoint re-quantized online or a pre-quantized one (V2).
_QUANT = {Dtype.FP8: "fp8", Dtype.NVFP4: "modelopt_fp4", Dtype.MXFP4: "mxfp4", Dtype.W4A16: "awq"}


# The CUDA context a process holds before vLLM measures free memory (~0.5 GiB: SGLang logs the
# same context, catalog/engines.yaml ``startup_context_gib``, PR #11716). vLLM refuses to start
# when ``gpu_memory_utilization × total`` exceeds the free memory it measures at start-up
# (vllm ``v1/worker/utils.py`` ``request_memory``: "Free memory on device … is less than desired
# GPU memory utilization"), so a launch's fraction stays below ``1 − context / total``.
CUDA_CONTEXT_BYTES = 0.5 * GiB


def vllm_graph_capture_sizes(max_size: int) -> list[int]:
    """vLLM's default CUDA-graph batch sizes up to ``max_size``:
    ``[1, 2, 4] + range(8, 256, 8) + range(256, max + 1, 16)`` (V5); 51 sizes at 512."""
    sizes = [1, 2, 4] + list(range(8, 256, 8)) + list(range(256, max_size + 1, 16))
    return [s for s in sizes if s <= max_size]


@dataclass(frozen=True, slots=True)
class Vllm:
    """vLLM's defaults (``catalog/engines.yaml``; each field's source is there).

    ``large_gpu_min_gib``: devices with at least this much memory, other than the
    ``small_default_architectures`` (A100 is Ampere), take the ``*_large_gpu`` defaults (V2).
    """

    name: str
    display_name: str
    vendors: tuple[str, ...]
    nvfp4_weight_only: bool
    nvfp4_kv_architectures: tuple[str, ...]
    memory_fraction: float
    reserve_fixed_gib: float
    sampler_bytes_per_logit: float
    graph_estimate_mib_per_size: float
    graph_bs_per_seq: int
    graph_max_bs: int
    max_running_default_large_gpu: int
    max_running_default_small_gpu: int
    large_gpu_min_gib: float
    small_default_architectures: tuple[str, ...]
    chunk_tokens_large_gpu: int
    chunk_tokens_small_gpu: int
    marlin_hidden_multiple: int
    marlin_intermediate_multiple: int
    uncaptured_gdn_layer_s: float
    pools: CachePools = CachePools()

    # V2/V14: chunked prefill is on, prompt chunks ride in decode steps.
    mixed_prefill: ClassVar[bool] = True

    @classmethod
    def from_entry(cls, name: str, entry: Mapping[str, Any]) -> Vllm:
        """Build from the ``vllm:`` entry of ``catalog/engines.yaml`` (parsed YAML). Raises
        KeyError or TypeError for a missing or unknown key (a shipped-catalog defect)."""
        e = dict(entry)
        e.pop("source")
        return cls(
            name=name,
            vendors=tuple(e.pop("vendors")),
            nvfp4_kv_architectures=tuple(e.pop("nvfp4_kv_architectures")),
            small_default_architectures=tuple(e.pop("small_default_architectures")),
            **e,
        )

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
        """``gpu_memory_utilization`` of total memory (V1) less ``reserve_fixed_gib`` of non-torch
        memory (V15) and the profiling peak: a dummy forward of ``max_num_batched_tokens`` and a
        sampler pass over ``max_num_seqs`` rows (the bytes: ``perf.memory.profile_reserve_bytes``)
        plus the CUDA-graph estimate (V3, V4). ``max_num_seqs`` is capped by
        ``max_num_batched_tokens`` (V2); graphs are captured up to ``min(2 × max_num_seqs,
        graph_max_bs, max_num_batched_tokens)`` (V5, V13).

        Args:
            gpu: the GPU (memory and architecture pick the defaults). layout: with DP attention
                each of its TP ranks is an engine core (``--data-parallel-size``): the settings'
                ``max_running``, ``chunk_tokens``, ``graph_max_bs`` and ``graph_cap_tokens`` are
                then the replica's, the ranks' sum (8 ranks at the default 1,024 sequences: 8,192),
                and the profiling run's tokens and rows each rank's. speculative, vision_cut:
                unused. memory_fraction, max_running (the replica's), chunk_tokens
                (``--max-num-batched-tokens``, per rank): user overrides (None = default).
        """
        large = (
            gpu.memory_bytes >= self.large_gpu_min_gib * GiB
            and gpu.architecture not in self.small_default_architectures
        )
        chunk = chunk_tokens or (self.chunk_tokens_large_gpu if large else self.chunk_tokens_small_gpu)
        # an unset max_num_seqs defaults to min(default, max_num_batched_tokens) (V2); a set one above
        # the budget does not start (SchedulerConfig: max_num_batched_tokens must be ≥ max_num_seqs):
        # where the user set only the cap, the launch raises the budget to it (api.resolve refuses a
        # budget the user set below it). max_num_seqs, max_num_batched_tokens and the graphs are per
        # engine rank: with DP attention each of the TP ranks is an engine core with its own
        # scheduler (V2; "each DP rank is deployed as a separate core engine process",
        # vllm docs/serving/data_parallel_deployment.md), so the replica's cap, budget and captured
        # batch are the ranks' sum, while each GPU profiles and captures for its own rank.
        ranks = layout.tp if layout.attention_dp else 1
        per_rank = math.ceil(max_running / ranks) if max_running else 0
        raised = chunk_tokens is None and per_rank > chunk
        chunk = per_rank if raised else chunk
        seqs = per_rank or min(
            self.max_running_default_large_gpu if large else self.max_running_default_small_gpu, chunk
        )
        graph_bs = min(self.graph_bs_per_seq * seqs, self.graph_max_bs, chunk)
        graphs = len(vllm_graph_capture_sizes(graph_bs)) * self.graph_estimate_mib_per_size * MiB
        return EngineSettings(
            memory_fraction or self.memory_fraction,
            self.reserve_fixed_gib * GiB,
            False,
            chunk * ranks,
            graph_bs * ranks,
            max_running or seqs * ranks,
            profile_tokens=chunk,
            profile_seqs=min(seqs, chunk),
            sampler_bytes_per_logit=self.sampler_bytes_per_logit,
            graph_estimate_bytes=graphs,
            chunk_set=chunk_tokens is not None or raised,
            uncaptured_gdn_layer_s=self.uncaptured_gdn_layer_s,
            graph_cap_tokens=min(self.graph_max_bs, chunk) * ranks,
        )

    def expert_padding(self, gpu: Gpu, weight: Dtype) -> tuple[int, int]:
        """MXFP4 experts on a GPU without native FP4 run through the Marlin MoE kernel, which
        needs ``n % 256 == 0`` and ``k % 128 == 0`` for each expert linear: the hidden size is
        padded to a multiple of 256 and the per-partition intermediate size to a multiple of 128
        when the weights are created (V17 ``Mxfp4MoEMethod.create_weights``). gpt-oss-120b
        (2,880 × 2,880) on an H100: 3,072 × 2,944, 9.04 % more expert bytes. (1, 1) otherwise."""
        if weight is Dtype.MXFP4 and not gpu.runs_natively(Dtype.MXFP4):
            return self.marlin_hidden_multiple, self.marlin_intermediate_multiple
        return 1, 1

    def context_must_fit(self) -> bool:
        """True: at start-up vLLM raises ``ValueError`` when the KV cache cannot hold one request of
        ``max_model_len`` tokens, which defaults to the model's ``max_position_embeddings`` (V18
        ``check_enough_kv_cache_memory``; vllm-project/vllm#27508)."""
        return True

    def tight_settings(self, settings: EngineSettings, vision_cut: float = 1.0) -> EngineSettings | None:
        """None: no tighter launch is known for vLLM."""
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
        """``settings``: ``vllm bench throughput`` keeps the engine's defaults."""
        return settings

    def vision_cut(self, vision_layers: int, vision_hidden: int) -> float:
        """1: vLLM's memory rule does not depend on a vision tower."""
        return 1.0

    def auto_kv_dtype(self, weight: Dtype) -> Dtype:
        """``--kv-cache-dtype auto`` = the model dtype (V1), BF16 for every shipped checkpoint."""
        return Dtype.BF16

    def spec_state_copies(self, draft_tokens: int | None) -> int:
        """k: ``MambaSpec`` adds ``num_speculative_blocks`` = k state blocks per request
        (``max_memory_usage_bytes = page × (1 + num_speculative_blocks)``, V16).

        The verify moves no state beyond what ``perf.step`` counts (one read, k + 1 writes per
        sequence) and commits nothing afterwards (``pools.verify_state_commit`` stays False): vLLM's
        ``fused_recurrent_gated_delta_rule_fwd_kernel`` reads the initial state from slot
        ``ssm_state_indices[i, num_accepted_tokens[i] − 1]`` and stores the state after each of
        the T verified tokens into ``ssm_state_indices[i, t]``, in place, so the next step starts
        from the accepted token's slot with no copy (vllm ``vllm/model_executor/layers/fla/ops/
        fused_recurrent.py`` @03c6dad8, ``IS_SPEC_DECODING`` branch; called with
        ``inplace_final_state=True`` from the Qwen3-Next/Qwen3.5 GDN layer, ``qwen3_next.py``
        ``_forward_core`` @6365b387; stored versions of the repository, not the v0.18.0 tag). The SSM
        state is fp32 and the conv state bf16 for Qwen3.5 (vllm PR #34489), as
        ``MemoryBreakdown.state_bytes_per_sequence_per_gpu`` counts."""
        return draft_tokens if draft_tokens else 0

    # ------------------------------------------------------------------ scheduler
    def disables_radix_cache(self, hybrid_model: bool, max_running: MaxRunning) -> bool:
        """False: the plan never lifts vLLM's cap (:meth:`caps_running_by_default`)."""
        return False

    def state_to_kv_ratio(self, hybrid_model: bool, max_running: MaxRunning) -> float | None:
        """The catalog's ``state_to_kv_memory_ratio`` for a hybrid model (``pools``; None where the
        catalog gives none: vLLM then holds state and KV in one pool), None for other models."""
        return self.pools.state_to_kv_memory_ratio if hybrid_model else None

    def allocated_running(self, limit: float, settings: EngineSettings, max_running: MaxRunning) -> float:
        """The running limit: vLLM allocates state per running request."""
        return limit

    def running_context_tokens(
        self, isl_mean: float, osl_mean: float, osl_running_mean: float, max_tokens: float | None = None
    ) -> float:
        """The running mean context: vLLM reserves no KV for future tokens at admission and
        preempts by recompute on overflow (V6)."""
        return isl_mean + osl_running_mean / 2

    def max_running(self, settings: EngineSettings, kv_tokens: float, max_request_tokens: float) -> float:
        """``max_num_seqs`` (V2; set by :meth:`settings`)."""
        if settings.max_running is None:  # :meth:`settings` always sets max_num_seqs
            raise TypeError("vllm: EngineSettings.max_running is None; expected the max_num_seqs set by settings()")
        return float(settings.max_running)

    def caps_running_by_default(self, speculative: bool, hybrid_model: bool) -> bool:
        """False: the plan keeps vLLM's ``max_num_seqs`` default."""
        return False

    @property
    def reserves_whole_output(self) -> bool:
        """False: vLLM admits without reserving future tokens (V6)."""
        return False

    def max_memory_fraction(self, settings: EngineSettings, gpu_bytes: float) -> float:
        """``1 − CUDA context / GPU``: vLLM's own accounting already takes the profiled peak, the
        CUDA-graph estimate and non-torch memory out of ``total × utilization`` (V1, V3), and it
        refuses a utilization above the free memory at start-up (:data:`CUDA_CONTEXT_BYTES`);
        never below the planned fraction."""
        return max(1.0 - CUDA_CONTEXT_BYTES / gpu_bytes, settings.memory_fraction) if gpu_bytes > 0 else 0.0

    # ------------------------------------------------------------------ launch
    # vLLM's default port (``vllm serve --port`` 8000).
    base_port: ClassVar[int] = 8000
    # decimals the launch command prints the memory fraction with
    fraction_digits: ClassVar[int] = 2

    def servers_per_replica(self, layout: Parallelism) -> bool:
        """With EP or attention DP, ``--data-parallel-size`` ranks share one expert group
        (``--enable-expert-parallel`` spans TP × DP): each replica gets a server. Plain DP stays
        one server: ``--max-num-seqs`` is each DP engine core's own scheduler limit (V2)."""
        return layout.dp > 1 and (layout.ep > 1 or layout.attention_dp)

    def launch_command(self, launch: Launch) -> str:
        """``vllm serve ...`` (engine args, V1–V11), every value quoted. ``--gpu-memory-utilization``
        and ``--max-num-seqs`` are the launch's sized ones (``Launch.sized``: the KV pool holds the
        batch with headroom), else the plan's fraction when vLLM was planned or vLLM's default (V1)
        and the plan's batch limit; ``--max-num-seqs`` is per engine rank."""
        lay = launch.layout
        fraction, running = launch.sized(self.name, self.memory_fraction)
        ranks = 1
        model = " ".join(["vllm serve " + quote(launch.repo), *launch.remote_code("--trust-remote-code")])
        if lay.attention_dp:  # vLLM's DP attention: TP 1 per rank, DP ranks share one EP group
            ranks = lay.tp
            args = [model, "--tensor-parallel-size 1", f"--data-parallel-size {lay.tp}"]
        else:
            args = [model, f"--tensor-parallel-size {lay.tp}"]
            per_server = launch.replicas_per_server(self.servers_per_replica(lay))
            if per_server > 1:
                args.append(f"--data-parallel-size {per_server}")
        if lay.pp > 1:
            args.append(f"--pipeline-parallel-size {lay.pp}")
        if lay.ep > 1 or lay.attention_dp:
            args.append("--enable-expert-parallel")
        if quantizes_at_load(launch) and launch.weight_dtype in _QUANT:
            args.append(f"--quantization {quote(_QUANT[launch.weight_dtype])}")
        if launch.kv_dtype in (Dtype.FP8, Dtype.NVFP4):  # CacheDType fp8, nvfp4 (vllm#40177); auto is BF16
            args.append(f"--kv-cache-dtype {launch.kv_dtype.value}")
        args.append(f"--gpu-memory-utilization {fraction:.2f}")
        context = launch.context_tokens(self.name)
        if context is not None:
            # the model's whole context does not fit one rank's KV cache (job.deploy.startup_context):
            # vLLM's start-up check passes for the job's longest request (EngineArgs.max_model_len)
            args.append(f"--max-model-len {context}")
        seqs = math.ceil(running / ranks)
        args.append(f"--max-num-seqs {seqs}")  # per engine rank
        if launch.settings.chunk_set and launch.planned_engine == self.name:  # the replica's budget, per rank
            args.append(f"--max-num-batched-tokens {math.ceil(launch.settings.chunk_tokens / ranks)}")
        elif launch.planned_engine != self.name and seqs > self.chunk_tokens_small_gpu:
            # another engine's plan (its settings, not vLLM's): vLLM refuses max_num_seqs above
            # max_num_batched_tokens, 2,048 by default under 70 GiB and on A100 (V2), so the
            # command sets a budget that starts on any GPU: the ≥ 70 GiB default, or the cap
            args.append(f"--max-num-batched-tokens {max(seqs, self.chunk_tokens_large_gpu)}")
        if launch.spec_method is not None:
            # SpeculativeConfig (vllm/config/speculative.py): method mtp, eagle, eagle3 or dflash;
            # every one but mtp loads its drafter from "model" (launch.DRAFT_MODEL).
            spec: dict[str, object] = {"method": launch.spec_method}
            if needs_drafter(launch.spec_method):
                spec["model"] = launch.draft_model or DRAFT_MODEL
            spec["num_speculative_tokens"] = launch.draft_tokens
            args.append(f"--speculative-config {quote(json.dumps(spec, separators=(',', ':')))}")
        parser = launch.parser(self.name)
        if parser:
            args.append(f"--reasoning-parser {quote(parser)}")
        hosts, note = replica_hosts(launch), ""
        if hosts > 1 and lay.attention_dp:
            note = "not written here: vLLM spreads data-parallel ranks over hosts with its data-parallel deployment flags (docs/serving/data_parallel_deployment.md)"
        elif hosts > 1:
            # ParallelConfig (vllm/config/parallel.py) nnodes, node_rank, master_addr: the mp executor over
            # several hosts; every host but the first runs --headless (docs/serving/parallelism_scaling.md)
            args.append(
                f"--distributed-executor-backend mp --nnodes {hosts} --node-rank $NODE_RANK --master-addr HOST0"
            )
            args.append('$([ "$NODE_RANK" = 0 ] || echo --headless)')
            note = node_ranks_note(hosts, ", where the API server runs", " (headless)")
        command = join_command(launch, args, self.servers_per_replica(lay), "--port", self.base_port, note)
        notes = [n for n in (checkpoint_note(launch), draft_note(launch)) if n is not None]
        return "\n".join([*notes, command])
