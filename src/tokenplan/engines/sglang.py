"""SGLang (``python -m sglang.launch_server``): a static memory fraction computed from a reserve,
GPU-memory buckets for the prefill chunk and the CUDA-graph batch, prefill apart from decode, a
hybrid model's state in a pool of its own.

Rules here, figures in ``catalog/engines.yaml`` (``sglang:``). Sources (``docs/engine-facts.md``):
S1 ``arg_groups/memory_hook.py`` @031ed82d (reserve, buckets, fraction, vision cut);
S2 ``arg_groups/fields/schedule.py`` @001b8862 (``--enable-mixed-chunk`` off); S3
``model_runner_kv_cache_mixin.py`` @001ccef0 (running cap, state split, draft KV pool); S5
``speculative_hook.py`` @004c82e0 (48 with speculative decoding); S10 (``--mamba-ssm-dtype``);
S18 ``mem_cache/memory_pool.py`` ``MambaPool`` (padded slot, intermediate states); S19
InferenceX ``dsr1_fp8_b200.sh`` (tight launch); S20 ``layers/attention/hybrid_linear_attn_backend.py``
``update_mamba_state_after_mtp_verify`` @012945ec (post-verify state copy).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

from tokenplan.arch.spec import ModelSpec
from tokenplan.engines.base import CachePools, EngineSettings, Launch, Parallelism, join_command, quote
from tokenplan.engines.launch import (
    MaxRunning,
    checkpoint_note,
    draft_note,
    drafter_path,
    needs_drafter,
    node_ranks_note,
    quantizes_at_load,
    replica_hosts,
    serves_other_hosts,
)
from tokenplan.hardware import Gpu
from tokenplan.records import quick_replace
from tokenplan.units import Dtype, GiB, MiB

# --quantization for a checkpoint re-quantized online or a pre-quantized one (S9 QUANTIZATION_CHOICES).
_QUANT = {Dtype.FP8: "fp8", Dtype.NVFP4: "modelopt_fp4", Dtype.MXFP4: "mxfp4", Dtype.W4A16: "awq"}
_KV_FLAG = {Dtype.FP8: "fp8_e4m3", Dtype.NVFP4: "nvfp4"}  # --kv-cache-dtype (nvfp4: sglang#21601)


class SglangBucket(NamedTuple):
    """One SGLang GPU-memory bucket: chunk size and decode CUDA-graph max batch (S1)."""

    below_gib: float
    chunk_tokens: int
    graph_bs_small_tp: int
    graph_bs_large_tp: int


@dataclass(frozen=True, slots=True)
class Sglang:
    """SGLang's defaults (``catalog/engines.yaml``; each field's source is there).

    Reserve (MiB, S1): ``reserve_base_mib + reserve_per_activation_token_mib × max(chunk,
    reserve_activation_tokens_min) + reserve_per_8_gpus_mib × TP·PP/8 + reserve_graph_mib_per_bs
    × graph max_bs``, at least ``reserve_floor_gib`` above ``reserve_floor_above_gib`` of GPU
    memory; the decode graph batch takes a bucket's large-TP column from TP
    ``graph_bs_large_tp_min``.
    """

    name: str
    display_name: str
    vendors: tuple[str, ...]
    nvfp4_weight_only: bool
    nvfp4_kv_architectures: tuple[str, ...]
    reserve_base_mib: float
    reserve_per_activation_token_mib: float
    reserve_activation_tokens_min: int
    reserve_per_8_gpus_mib: float
    reserve_graph_mib_per_bs: float
    reserve_floor_gib: float
    reserve_floor_above_gib: float
    graph_bs_large_tp_min: int
    buckets: tuple[SglangBucket, ...]
    running_per_context_factor: float
    running_min: int
    running_max: int
    spec_max_running_default: int
    tight_memory_fraction: float
    tight_chunk_tokens: int
    tight_graph_max_bs: int
    startup_context_gib: float
    startup_distributed_gib: float
    pools: CachePools

    # S2: --enable-mixed-chunk is off by default: prefill chunks run in steps of their own.
    mixed_prefill: ClassVar[bool] = False

    @classmethod
    def from_entry(cls, name: str, entry: Mapping[str, Any]) -> Sglang:
        """Build from the ``sglang:`` entry of ``catalog/engines.yaml`` (parsed YAML).
        Raises KeyError or TypeError for a missing or unknown key (a shipped-catalog defect)."""
        e = dict(entry)
        e.pop("source")
        running, tight, hybrid = e.pop("max_running_default"), e.pop("tight_memory"), e.pop("hybrid_state")
        return cls(
            name=name,
            vendors=tuple(e.pop("vendors")),
            nvfp4_kv_architectures=tuple(e.pop("nvfp4_kv_architectures")),
            buckets=tuple(SglangBucket(**b) for b in e.pop("buckets")),
            running_per_context_factor=running["per_context_factor"],
            running_min=running["min"],
            running_max=running["max"],
            tight_memory_fraction=tight["fraction"],
            tight_chunk_tokens=tight["chunk_tokens"],
            tight_graph_max_bs=tight["graph_max_bs"],
            # S18: every MambaPool tensor has size + 1 rows (slot 0 takes padded tokens); S3: the
            # MTP/EAGLE draft worker has its own KV pool of the target's token count; S20: each
            # verify ends with a copy of the accepted intermediate state into the request's slot.
            pools=CachePools(
                hybrid["state_to_kv_memory_ratio"],
                hybrid["slots_per_request"],
                hybrid["slots_per_request_spec"],
                padded_state_slot=True,
                draft_kv_pool=True,
                verify_state_commit=True,
                swa_full_tokens_ratio=e.pop("swa_full_tokens_ratio"),
            ),
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
        """``mem_fraction_static = (GPU − reserve) / GPU × vision_cut`` (S1), the bucket's chunk
        (or ``--chunked-prefill-size``, which also sets the reserve's activation term) and decode
        graph batch, and a running cap of 48 with speculative decoding (S5), else None: derived
        from the KV pool by :meth:`max_running`. The fraction is then taken of the memory free
        after start-up (``startup_bytes``: the CUDA context, plus the communicators at TP × PP >
        1; S3 ``profile_max_num_token`` sizes against the free memory measured after
        ``init_torch_distributed``).

        Args:
            gpu: the GPU (its memory in bytes picks the bucket). layout: TP (graph column) and
                TP × PP (reserve). speculative: a speculative algorithm is set. vision_cut:
                :meth:`vision_cut` of a multimodal checkpoint. memory_fraction, max_running,
                chunk_tokens: user overrides (None = default).

        Raises:
            StopIteration: no bucket covers the GPU (the shipped buckets end at 100,000 GiB).
        """
        gpu_bytes = gpu.memory_bytes
        bucket = next(b for b in self.buckets if gpu_bytes / GiB < b.below_gib)
        graph_bs = bucket.graph_bs_small_tp if layout.tp < self.graph_bs_large_tp_min else bucket.graph_bs_large_tp
        chunk = chunk_tokens or bucket.chunk_tokens
        reserve_mib = (
            self.reserve_base_mib
            + self.reserve_per_activation_token_mib * max(chunk, self.reserve_activation_tokens_min)
            + self.reserve_per_8_gpus_mib * layout.gpus_per_replica / 8
            + self.reserve_graph_mib_per_bs * graph_bs
        )
        reserve = reserve_mib * MiB
        if gpu_bytes > self.reserve_floor_above_gib * GiB:
            reserve = max(reserve, self.reserve_floor_gib * GiB)
        fraction = memory_fraction or (gpu_bytes - reserve) / gpu_bytes * vision_cut
        cap = max_running or (self.spec_max_running_default if speculative else None)
        startup = self.startup_context_gib + (self.startup_distributed_gib if layout.tp * layout.pp > 1 else 0.0)
        return EngineSettings(
            fraction,
            0.0,
            False,
            chunk,
            graph_bs,
            cap,
            startup_bytes=startup * GiB,
            chunk_set=chunk_tokens is not None,
            activation_bytes=reserve,
        )

    def expert_padding(self, gpu: Gpu, weight: Dtype) -> tuple[int, int]:
        """(1, 1): no expert padding is modelled for SGLang."""
        return 1, 1

    def context_must_fit(self) -> bool:
        """False: SGLang starts with a KV pool shorter than the context (it caps requests)."""
        return False

    def tight_settings(self, settings: EngineSettings, vision_cut: float = 1.0) -> EngineSettings | None:
        """The launch InferenceX uses when the default reserve leaves no room for a very large
        checkpoint (DeepSeek-R1 FP8 at TP4 on B200: ``--mem-fraction-static 0.95
        --chunked-prefill-size 8192 --cuda-graph-max-bs 32``, S19): ``tight_memory_fraction ×
        vision_cut`` with the smaller chunk and graph batch; None when the default fraction is
        already at least as large."""
        fraction = self.tight_memory_fraction * vision_cut
        if fraction <= settings.memory_fraction:
            return None
        return quick_replace(
            settings,
            memory_fraction=fraction,
            chunk_tokens=min(settings.chunk_tokens, self.tight_chunk_tokens),
            graph_max_bs=min(settings.graph_max_bs, self.tight_graph_max_bs),
            tight=True,
        )

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
        """``settings``: an offline SGLang run (``sglang.bench_offline_throughput``) keeps the
        server's defaults."""
        return settings

    def vision_cut(self, vision_layers: int, vision_hidden: int) -> float:
        """The fraction multiplier for a multimodal checkpoint served with its vision tower (S1):
        ``0.95 × clamp(1 − 0.1·(layers·hidden² / (24·1024²) − 1), 0.8, 1.05)``; 1 for text-only
        models. Qwen3.6-27B (27 × 1152): 0.95 × 0.9576 = 0.910."""
        if vision_layers == 0:
            return 1.0
        size = vision_layers * vision_hidden**2 / (24 * 1024**2)
        return 0.95 * min(max(1 - 0.1 * (size - 1), 0.8), 1.05)

    def auto_kv_dtype(self, weight: Dtype) -> Dtype:
        """``--kv-cache-dtype auto`` = the model dtype, BF16 for every shipped checkpoint (S12)."""
        return Dtype.BF16

    def spec_state_copies(self, draft_tokens: int | None) -> int:
        """k + 1: MambaPool allocates intermediate SSM-state and conv-window caches of shape (GDN
        layers, max_running_requests + 1, speculative_num_draft_tokens, state shape) in the state
        dtypes, i.e. one whole state per verified token, k + 1 per running request (sglang
        ``mem_cache/memory_pool.py`` ``MambaPool.__init__``, S18), reserved before the state/KV
        split (``mamba_cache_per_req × max_running_requests × speculative_num_draft_tokens``, S3
        ``handle_max_mamba_cache``); 0 without speculation."""
        return draft_tokens + 1 if draft_tokens else 0

    # ------------------------------------------------------------------ scheduler
    def disables_radix_cache(self, hybrid_model: bool, max_running: MaxRunning) -> bool:
        """True for a hybrid model whose cap is lifted: with the radix cache on, each running
        request holds several state slots (its ping-pong buffers, S3) and the cap stays at
        state slots ÷ 5; ``--disable-radix-cache`` with an explicit ``--max-running-requests``
        gives one slot per running request (S3)."""
        return hybrid_model and max_running.lifted

    def state_to_kv_ratio(self, hybrid_model: bool, max_running: MaxRunning) -> float | None:
        """``--mamba-full-memory-ratio`` for a hybrid model (S3); None with the radix cache off
        (:meth:`disables_radix_cache`): state slots then equal the running requests and share
        the pool (S3)."""
        if not hybrid_model or self.disables_radix_cache(hybrid_model, max_running):
            return None
        return self.pools.state_to_kv_memory_ratio

    def allocated_running(self, limit: float, settings: EngineSettings, max_running: MaxRunning) -> float:
        """With ``--disable-radix-cache`` (the cap lifted) SGLang gives every one of
        ``--max-running-requests`` a state slot and its speculative copies whether or not that
        many run (S3), so an explicit cap counts in full; otherwise the running limit."""
        if max_running.lifted and settings.max_running is not None:
            return max(limit, float(settings.max_running))
        return limit

    def running_context_tokens(
        self, isl_mean: float, osl_mean: float, osl_running_mean: float, max_tokens: float | None = None
    ) -> float:
        """The running mean context: SGLang admits against an estimate of future tokens and
        retracts on overflow (S6), so the pool holds the prompt and half the output so far."""
        return isl_mean + osl_running_mean / 2

    def max_running(self, settings: EngineSettings, kv_tokens: float, max_request_tokens: float) -> float:
        """``--max-running-requests``, or when unset ``clamp(KV_tokens / context_len × 512, 2048,
        4096)`` (S3; ``context_len`` here is the longest request, tokens)."""
        if settings.max_running is not None:
            return float(settings.max_running)
        raw = kv_tokens / max(max_request_tokens, 1.0) * self.running_per_context_factor
        return float(int(min(max(raw, self.running_min), self.running_max)))

    def caps_running_by_default(self, speculative: bool, hybrid_model: bool) -> bool:
        """True with speculative decoding (48, S5) and for hybrid models (state slots ÷ 5, S3)."""
        return speculative or (hybrid_model and self.pools.state_to_kv_memory_ratio is not None)

    @property
    def reserves_whole_output(self) -> bool:
        """False: a running request holds its prompt and the output so far (S6)."""
        return False

    def max_memory_fraction(self, settings: EngineSettings, gpu_bytes: float) -> float:
        """``1 − reserve / (GPU − start-up)``: the fraction that still leaves SGLang's own S1
        reserve (activations of a prefill chunk, CUDA graphs, communication:
        ``settings.activation_bytes``) outside the pools, of the memory the fraction is taken of
        (S3); never below the planned fraction (a tight launch, S19, already sets more). The
        multimodal cut (S1 ``vision_cut``) is not kept: it is room for the vision encoder's
        activations on image prompts, which a text generation job does not send (a job with
        images plans with ``--memory-fraction``)."""
        base = gpu_bytes - settings.startup_bytes
        return max(1.0 - settings.activation_bytes / base, settings.memory_fraction) if base > 0 else 0.0

    # ------------------------------------------------------------------ launch
    # SGLang's default port (server_args ``port`` = 30000).
    base_port: ClassVar[int] = 30000
    # decimals the launch command prints the memory fraction with
    fraction_digits: ClassVar[int] = 3

    def servers_per_replica(self, layout: Parallelism) -> bool:
        """True for every DP > 1: each replica gets a server (``--tp-size`` without ``--dp-size``)
        on its own port, because what ``--max-running-requests`` means beside ``--dp-size``
        depends on the build. In ``model_runner_kv_cache_mixin.init_memory`` @001ccef0 (S3) and
        @226149ac it is each DP worker's cap (divided only with DP attention and speculative
        decoding); sgl-project/sglang PR #20063 (2026-03) divides it by ``self.dp_size`` (the DP
        size only with ``--enable-dp-attention``); builds whose ``_resolve_max_num_reqs`` divides
        by ``server_args.dp_size`` cut a plain-DP worker to cap ÷ DP (413 at DP8 → 51), which PR
        #32115 (2026-07) names as under-allocating pure-DP replicas, and launch scripts
        compensate (mlcommons/inference ``language/gpt-oss/infer-sglang/run_server.sh``:
        ``--max-running-requests $((dp * 512))``). A server without ``--dp-size`` reads the cap as
        its own on every build. With attention DP, ``--dp-size`` means attention ranks inside one
        replica (``--enable-dp-attention``) and the cap is the replica's on every build (divided
        per rank, issue #10868)."""
        return layout.dp > 1

    def launch_command(self, launch: Launch) -> str:
        """``python -m sglang.launch_server ...`` (server_args / arg_groups, S1–S14), every value
        quoted; with DP, one server per replica (:meth:`servers_per_replica`), port 30000 + i.

        ``--mem-fraction-static`` is the launch's sized fraction (``Launch.sized``), else the
        planned one when SGLang was planned; unsized for another planned engine, SGLang computes
        its own and the flag is left out. ``--max-running-requests`` is written when the plan
        lifts or names the cap, or when sizing lowered the batch below the plan's."""
        lay, s = launch.layout, launch.settings
        fraction, running = launch.sized(self.name, 0.0)
        model = [f"--model-path {quote(launch.repo)}", *launch.remote_code("--trust-remote-code")]
        args = ["python -m sglang.launch_server", *model, *self._parallel_args(lay)]
        if quantizes_at_load(launch) and launch.weight_dtype in _QUANT:
            args.append(f"--quantization {quote(_QUANT[launch.weight_dtype])}")
        if launch.kv_dtype in _KV_FLAG:  # the KV format the plan sized the pool in (auto would be BF16)
            args.append(f"--kv-cache-dtype {_KV_FLAG[launch.kv_dtype]}")
        if fraction > 0:
            args.append(f"--mem-fraction-static {fraction:.3f}")
        if s.tight:  # a checkpoint the default reserve leaves no room for (S19); the decode graph's
            # max batch is --cuda-graph-max-bs-decode since the per-phase cuda_graph_config (S1)
            args.append(f"--chunked-prefill-size {s.chunk_tokens} --cuda-graph-max-bs-decode {s.graph_max_bs}")
        elif s.chunk_set and launch.planned_engine == self.name:
            args.append(f"--chunked-prefill-size {s.chunk_tokens}")
        if launch.spec_method is not None:
            args.append(_spec_args(launch.spec_method, launch.draft_tokens, drafter_path(launch)))
        if launch.ssm_dtype is not None and launch.hybrid:
            args.append(f"--mamba-ssm-dtype {quote(launch.ssm_dtype)}")  # S10; the memory model sized the state in it
        if self.disables_radix_cache(launch.hybrid, launch.max_running):
            # --disable-radix-cache with an explicit --max-running-requests gives one state slot per
            # running request (S3); the plan's limit already holds each request's k + 1 speculative
            # state copies (S18), so these flags allocate (tests/unit/planning/test_plan_allocates.py).
            args.append("--disable-radix-cache")
        if launch.max_running.lifted or launch.max_running.requests is not None or running < launch.planned_running:
            # with DP attention each rank takes the cap // --dp-size (#10868): a multiple of the ranks
            ranks = launch.layout.tp if launch.layout.attention_dp else 1
            args.append(f"--max-running-requests {ranks * math.ceil(running / ranks)}")
        parser = launch.parser(self.name)
        if parser:
            args.append(f"--reasoning-parser {quote(parser)}")
        if serves_other_hosts(launch):  # reached from other hosts: not the default 127.0.0.1
            args.append("--host 0.0.0.0")
        hosts = replica_hosts(launch)
        if hosts > 1:  # arg_groups/fields/parallel.py: --nnodes, --node-rank, --dist-init-addr
            args.append(f"--nnodes {hosts} --node-rank $NODE_RANK --dist-init-addr HOST0:20000")
        note = node_ranks_note(hosts)
        command = join_command(launch, args, self.servers_per_replica(lay), "--port", self.base_port, note)
        notes = [n for n in (checkpoint_note(launch), draft_note(launch)) if n is not None]
        return "\n".join([*notes, command])

    def _parallel_args(self, lay: Parallelism) -> list[str]:
        """``--tp-size``, ``--dp-size`` only for DP attention across the TP ranks of one replica
        (plain DP replicas are servers of their own), ``--pp-size``, ``--ep-size``."""
        args = [f"--tp-size {lay.tp}"]
        if lay.attention_dp:  # attention DP across the TP ranks of one replica (SGLang DP-attention)
            args.append(f"--dp-size {lay.tp} --enable-dp-attention")
        if lay.pp > 1:
            args.append(f"--pp-size {lay.pp}")
        if lay.ep > 1:
            args.append(f"--ep-size {lay.ep}")
        return args


def _spec_args(method: str, k: int, drafter: str) -> str:
    """The speculative flags (``arg_groups/fields/spec.py``: algorithms EAGLE, EAGLE3, NEXTN,
    DFLASH; ``--speculative-draft-model-path``): NEXTN (MTP) drafts with the checkpoint's own
    layers; EAGLE and EAGLE3 name the drafter, k steps of top-1, k + 1 tokens to verify. DFLASH
    drafts a block in one step: ``_handle_dflash`` (``arg_groups/speculative_hook.py``) forces
    steps and top-k to 1 and takes the verify window (block size) from
    ``--speculative-num-draft-tokens``, k + 1."""
    algo = "NEXTN" if method == "mtp" else method.upper()
    head = f"--speculative-algorithm {quote(algo)}"
    if needs_drafter(method):
        head += f" --speculative-draft-model-path {drafter}"
    if method == "dflash":
        return f"{head} --speculative-num-draft-tokens {k + 1}"
    return f"{head} --speculative-num-steps {k} --speculative-eagle-topk 1 --speculative-num-draft-tokens {k + 1}"
