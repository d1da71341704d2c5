"""Evaluate one configuration — model × GPU × layout × dtypes × engine × speculative × concurrency —
into a steady-state prediction, or a rejection with its reason. Used by ``predict`` and by the
plan search alike, so both follow one code path.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Generic, TypeVar

from tokenplan.arch.kv import kv_bytes_per_token, state_bytes_per_sequence
from tokenplan.arch.spec import ModelSpec
from tokenplan.engines.base import Engine, EngineSettings
from tokenplan.hardware import Gpu
from tokenplan.job.batching import BatchLimits, SteadyState, StepMemo, batch_limits, steady_state
from tokenplan.job.workload import LengthDist
from tokenplan.perf.deployment import Deployment, build_deployment
from tokenplan.perf.efficiency import Efficiency
from tokenplan.perf.layout import Layout, kv_replication, layout_rejection
from tokenplan.perf.memory import MemoryBreakdown, cuda_visible_bytes, memory_breakdown, profile_reserve_bytes
from tokenplan.perf.speculative import SpecDecode
from tokenplan.units import Dtype, GiB


@dataclass(frozen=True, slots=True)
class Config:
    """One candidate configuration.

    Attributes:
        layout: TP/PP/EP/DP.
        weight_dtype, kv_dtype: number formats.
        engine: the engine (``tokenplan.engines``).
        spec: speculative decoding, or None.
        memory_fraction, max_running: user overrides of engine defaults (None = default).
        ssm_dtype: override of the hybrid state dtype (None = the config's).
        vision_cut: SGLang's memory cut for a multimodal checkpoint (1 = none).
        lift_running_cap: set the engine's running-request limit to what memory allows
            instead of its default (SGLang's 48 with speculative decoding).
        host_kv_bytes: host memory per GPU for KV offload (bytes; 0 = none).
        max_model_len: the longest request the server is launched to serve (tokens; None = the
            model's whole context, vLLM's default ``max_model_len``). A measured run sets it: the
            server served its requests, so it was launched for at least the longest of them.
        chunk_tokens: the prefill chunk / token budget per step (SGLang ``--chunked-prefill-size``,
            vLLM ``--max-num-batched-tokens``, TRT-LLM ``max_num_tokens``; None = the engine's).
    """

    layout: Layout
    weight_dtype: Dtype
    kv_dtype: Dtype
    engine: Engine
    spec: SpecDecode | None = None
    memory_fraction: float | None = None
    max_running: int | None = None
    ssm_dtype: str | None = None
    vision_cut: float = 1.0
    lift_running_cap: bool = False
    host_kv_bytes: float = 0.0
    max_model_len: int | None = None
    chunk_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class Evaluation:
    """A configuration that runs, and how it runs.

    Attributes:
        config, deployment, settings: what was evaluated.
        steady: the replica's steady state.
        output_tok_s_total: all DP replicas together (tokens/s).
        output_tok_s_per_gpu: divided by every GPU of the deployment (tokens/s).
        warnings: format, replication, cap and queueing caveats.
    """

    config: Config
    deployment: Deployment
    settings: EngineSettings
    steady: SteadyState
    output_tok_s_total: float
    output_tok_s_per_gpu: float
    warnings: tuple[str, ...] = field(default=())

    @property
    def memory(self) -> MemoryBreakdown:
        """Per-GPU memory."""
        return self.deployment.memory


# What prepare computes before the efficiency factors and the offline sizing enter: (config with
# τ at the job's context, engine settings, memory, deployment, warnings so far).
Deployed = tuple[Config, EngineSettings, MemoryBreakdown, Deployment, tuple[str, ...]]

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


def format_issues(model: ModelSpec, gpu: Gpu, weight: Dtype, kv: Dtype) -> tuple[str | None, list[str]]:
    """(rejection reason or None, warnings) for running these formats on this GPU.

    NVFP4 needs Blackwell tensor cores (sm_100/103/120) and no engine runs it on AMD; an
    NVFP4 KV cache needs Blackwell. Other formats without native tensor-core support run
    weight-only, dequantized to BF16 in the GEMM (Marlin-style kernels in vLLM/SGLang: FP8 on
    A100, MXFP4 on Hopper), at the BF16 compute rate.
    """
    if weight is Dtype.NVFP4 and gpu.vendor == "amd":
        return f"NVFP4 weights: no engine runs NVFP4 on {gpu.architecture}", []
    if kv is Dtype.NVFP4 and Dtype.NVFP4 not in gpu.native_dtypes:
        return f"NVFP4 KV cache needs Blackwell; {gpu.key} is {gpu.architecture}", []
    warnings = []
    if weight.compute_dtype not in gpu.native_dtypes:
        warnings.append(
            f"{weight.value} weights are not native on {gpu.architecture}: they run weight-only "
            f"(dequantized to BF16) at the BF16 compute rate"
        )
    if weight is Dtype.W4A16:
        warnings.append("w4a16 weights run 16-bit math (weight-only INT4)")
    return None, warnings


def evaluate(
    model: ModelSpec,
    gpu: Gpu,
    config: Config,
    eff: Efficiency,
    isl: LengthDist,
    osl: LengthDist,
    concurrency: float | None,
) -> Evaluation | Rejection:
    """Evaluate a configuration at ``concurrency`` requests in flight per replica (None = offline).

    Returns a Rejection (never raises) for layouts that do not divide, formats the GPU cannot
    run, and models that do not fit. The same as ``prepare(...).at(concurrency)``.
    """
    if concurrency is not None and concurrency < 1:
        return _below_one(config, concurrency)
    prepared = _prepared(model, gpu, config, eff, isl, osl, concurrency is None)
    return prepared if isinstance(prepared, Rejection) else prepared.at(concurrency)


_T = TypeVar("_T")


class _Memo(Generic[_T]):
    """The last ``kept`` results of a pure function, by the identity of its (immutable) inputs.
    Each entry holds its inputs, so no id in a key can be reused by another object while the
    entry lives; the oldest entry goes first."""

    def __init__(self, kept: int) -> None:
        # Ordered: the oldest entry leaves in O(1) (a dict's first live entry is found by scanning
        # past the slots its evictions left: up to a third of its size, 1,000+ for _DEPLOYED).
        self.kept = kept
        self.table: OrderedDict[tuple[int | bool, ...], tuple[tuple[object, ...], _T]] = OrderedDict()

    def get(self, inputs: tuple[object, ...], flag: bool, compute: Callable[[], _T]) -> _T:
        key = (*map(id, inputs), flag)
        hit = self.table.get(key)
        if hit is not None:  # the entry's inputs and the caller's live together: equal ids are the same objects
            return hit[1]
        got = compute()
        if len(self.table) >= self.kept:
            self.table.popitem(last=False)
        self.table[key] = (inputs, got)
        return got


# A search evaluates one configuration at several concurrencies (a plan: offline, then at the
# job's own size; benchmarks/plan_sweep.py: six levels): it is prepared once per offline/online.
# What comes before the efficiency factors and the offline sizing (settings, memory, deployment)
# is shared by both, and by every efficiency table ``calibrate`` tries on the same measured case
# (a fit tries thousands on a few thousand cases).
_PREPARED: _Memo[Prepared | Rejection] = _Memo(64)
_DEPLOYED: _Memo[Deployed | Rejection] = _Memo(4096)
# Step times by deployment and efficiency table: the offline and online preparations of one
# configuration ask for the same prefill steps.
_STEPS: _Memo[StepMemo] = _Memo(64)


# The last preparation handed out, looked at before :data:`_PREPARED`: a sweep evaluates one
# configuration at its levels in a row. It holds its inputs, as the memo's entries do.
_LAST_PREPARED: list[tuple[Config, ModelSpec, Gpu, Efficiency, LengthDist, LengthDist, bool, Prepared | Rejection]] = []


def _prepared(
    model: ModelSpec, gpu: Gpu, config: Config, eff: Efficiency, isl: LengthDist, osl: LengthDist, offline: bool
) -> Prepared | Rejection:
    """:func:`prepare`, or its result for the same objects from :data:`_PREPARED`."""
    if _LAST_PREPARED:
        c, m, g, e, i, o, f, got = _LAST_PREPARED[0]
        if c is config and f is offline and m is model and g is gpu and e is eff and i is isl and o is osl:
            return got
    got = _PREPARED.get(
        (model, gpu, config, eff, isl, osl), offline, lambda: prepare(model, gpu, config, eff, isl, osl, offline)
    )
    _LAST_PREPARED[:] = [(config, model, gpu, eff, isl, osl, offline, got)]
    return got


def _deployed(model: ModelSpec, gpu: Gpu, config: Config, isl: LengthDist, osl: LengthDist) -> Deployed | Rejection:
    """:func:`_deploy`, or its result for the same objects from :data:`_DEPLOYED`."""
    return _DEPLOYED.get((model, gpu, config, isl, osl), False, lambda: _deploy(model, gpu, config, isl, osl))


def _below_one(config: Config, concurrency: float) -> Rejection:
    lay = config.layout
    return Rejection(
        config,
        f"concurrency {concurrency * lay.dp:g} leaves fewer than one request per replica ({lay.dp} replicas)",
        "concurrency",
    )


@dataclass(frozen=True, slots=True)
class Prepared:
    """What :func:`evaluate` computes before the concurrency enters: the engine's settings, the
    memory, the deployment and the batch limits of a configuration that fits. A sweep over
    concurrency (``planning.curves``) prepares once and evaluates each level with :meth:`at`.

    Attributes:
        model, gpu, config, eff, isl, osl: what was prepared (``config`` with τ at the job's
            context where it came from the prior).
        settings, deployment, limits: the engine settings, per-GPU constants and batch limits.
        warnings: format, launch, context and replication caveats so far.
        steps: the step times computed so far, by their arguments (one deployment, one
            ``eff``; shared by the offline and online preparations of a configuration), so that
            the levels of a sweep share their prefill steps.
    """

    model: ModelSpec
    gpu: Gpu
    config: Config
    eff: Efficiency
    isl: LengthDist
    osl: LengthDist
    settings: EngineSettings
    deployment: Deployment
    limits: BatchLimits
    warnings: tuple[str, ...]
    steps: StepMemo = field(default_factory=dict, repr=False, compare=False)  # step-time memo (job.batching)

    def at(self, concurrency: float | None) -> Evaluation | Rejection:
        """The configuration at ``concurrency`` requests in flight per replica (None = offline,
        only for a configuration prepared ``offline``); a Rejection below one request."""
        if concurrency is not None and concurrency < 1:
            return _below_one(self.config, concurrency)
        config, limits, lay = self.config, self.limits, self.config.layout
        steady = steady_state(
            self.deployment,
            self.eff,
            config.engine,
            self.settings,
            self.isl,
            self.osl,
            concurrency,
            config.spec,
            limits,
            self.steps,
        )
        warnings = list(self.warnings)
        if limits.reason == "state slots":
            warnings.append(f"linear-attention state slots cap the batch at {limits.limit:.0f} per replica")
        total = steady.output_tok_s * lay.dp
        return Evaluation(
            config,
            self.deployment,
            self.settings,
            steady,
            total,
            total / lay.num_gpus,
            tuple(warnings) + steady.warnings + tuple(self.model.approximations),
        )


def prepare(
    model: ModelSpec, gpu: Gpu, config: Config, eff: Efficiency, isl: LengthDist, osl: LengthDist, offline: bool
) -> Prepared | Rejection:
    """The concurrency-independent part of :func:`evaluate` (``offline``: the engine's offline
    benchmark sizes the batch, as for concurrency None); a Rejection, never raises."""
    deployed = _deployed(model, gpu, config, isl, osl)
    if isinstance(deployed, Rejection):
        return deployed
    config, settings, mem, dep, warned = deployed
    warnings = list(warned)
    lay, engine, ctx = config.layout, config.engine, model.max_context_tokens
    if offline and config.max_running is None:  # the engine's offline benchmark sizes its batch
        settings = engine.offline_settings(
            settings, model, gpu, lay, config.weight_dtype, config.kv_dtype, isl.mean, osl.mean
        )
    limits = batch_limits(dep, config.engine, settings, isl, osl, config.spec)
    if limits.limit < 1:
        return Rejection(
            config,
            f"no sequence of {isl.mean + osl.mean:,.0f} tokens fits the KV cache "
            f"({mem.kv_capacity_tokens:,.0f} tokens)",
            "kv",
        )
    running = _allocated(config, settings, limits.limit)
    if not mem.allocates(running):
        a = mem.allocation(running)
        short = -(min(a["kv_cache"], 0.0) + min(a["reserve"], 0.0))
        return Rejection(
            config,
            f"cannot allocate {running:,.0f} running requests: their "
            f"{a['state'] / GiB:,.1f} GiB of state and {a['spec_state'] / GiB:,.1f} GiB of "
            f"speculative state per GPU, beside the weights, a {max(a['kv_cache'], 0.0) / GiB:,.1f} "
            f"GiB KV pool and the engine's reserve, overrun the GPU by {short / GiB:,.1f} GiB",
            "kv",
        )
    if ctx is not None and isl.max + osl.max > ctx:
        warnings.append(
            f"the longest requests ({isl.max + osl.max:,.0f} tokens) exceed the {ctx:,}-token "
            "context: the engine refuses them"
        )
    rep = kv_replication(model, lay)
    if rep > 1 and model.attention is not None:  # kv_replication is 1 without attention
        warnings.append(f"KV heads replicated ×{rep} (TP{lay.tp} > {model.attention.num_kv_heads} KV heads)")
    steps = _STEPS.get((deployed, eff), False, dict)
    return Prepared(model, gpu, config, eff, isl, osl, settings, dep, limits, tuple(warnings), steps)


def _deploy(model: ModelSpec, gpu: Gpu, config: Config, isl: LengthDist, osl: LengthDist) -> Deployed | Rejection:
    """What :func:`prepare` computes before the efficiency factors and the offline sizing enter
    (see :data:`Deployed`), or the Rejection of a configuration that runs at no concurrency."""
    lay = config.layout
    if gpu.vendor not in config.engine.vendors:
        return Rejection(
            config,
            f"{config.engine.display_name} does not run on {gpu.vendor.upper()} GPUs "
            f"({gpu.key}); it runs on {', '.join(v.upper() for v in config.engine.vendors)}",
            "engine",
        )
    ctx = model.max_context_tokens
    if ctx is not None and isl.mean + osl.mean > ctx:
        return Rejection(
            config,
            f"a request of {isl.mean + osl.mean:,.0f} tokens exceeds {model.name}'s "
            f"context of {ctx:,} tokens (max_position_embeddings)",
            "context",
        )
    why = layout_rejection(model, lay)
    if why:
        return Rejection(config, why, "layout")
    why, warnings = format_issues(model, gpu, config.weight_dtype, config.kv_dtype)
    if why:
        return Rejection(config, why, "format")
    engine = config.engine
    settings = engine.settings(
        gpu,
        lay,
        speculative=config.spec is not None and not config.lift_running_cap,
        vision_cut=config.vision_cut,
        memory_fraction=config.memory_fraction,
        max_running=config.max_running,
        chunk_tokens=config.chunk_tokens,
    )
    ratio = engine.state_to_kv_ratio(model.is_hybrid, config.lift_running_cap)
    mem = _memory(model, gpu, config, settings, ratio)
    tight = None  # asked for only where the default does not fit
    if not mem.fits and config.memory_fraction is None:
        tight = engine.tight_settings(settings, config.vision_cut)
    if tight is not None:
        # A checkpoint the default reserve leaves no room for: launch as InferenceX does (S19).
        tight_mem = _memory(model, gpu, config, tight, ratio)
        if tight_mem.fits:
            settings, mem = tight, tight_mem
            warnings.append(
                f"the default memory fraction leaves no room for the weights and the cache: the launch raises it "
                f"to {tight.memory_fraction:.3f} with a {tight.chunk_tokens:,}-token prefill chunk and "
                f"CUDA graphs up to batch {tight.graph_max_bs}"
            )
    if not mem.fits:
        weights, spec_state = mem.weight_bytes_per_gpu, mem.spec_state_pool_bytes
        reserve = settings.reserve_bytes + profile_reserve_bytes(model, lay, settings)
        usable = weights + settings.usable_bytes(cuda_visible_bytes(gpu.memory_bytes), weights, reserve)
        extra = f" + {spec_state / GiB:.1f} GiB of speculative state" if spec_state > 0 else ""
        return Rejection(
            config,
            f"does not fit (try more GPUs per replica or a smaller weight format): "
            f"{weights / GiB:.1f} GiB of weights{extra} per GPU "
            f"vs {usable / GiB:.1f} GiB usable on {gpu.key}",
            "memory",
            weights,
            usable,
            spec_state,
        )
    # vLLM's start-up check counts the GPU's KV cache only, not a host offload (V18).
    served = config.max_model_len if config.max_model_len is not None else ctx
    if served is not None and engine.context_must_fit() and replace(mem, host_kv_bytes=0.0).max_sequences(served) < 1:
        whole = (
            f"{model.name}'s whole {served:,}-token context (its default max_model_len)"
            if config.max_model_len is None
            else f"max_model_len {served:,}"
        )
        return Rejection(
            config,
            f"{engine.display_name} does not start: its {mem.kv_pool_bytes / GiB:.2f} GiB KV cache per "
            f"GPU holds {mem.kv_capacity_tokens:,.0f} tokens, less than one request of "
            f"{whole}",
            "kv",
        )
    if config.spec is not None and config.spec.method == "mtp" and model.mtp_layers == 0:
        return Rejection(config, f"MTP needs MTP layers; {model.name} ships none", "spec")
    if config.spec is not None and config.spec.from_prior:
        # τ of the prior at the decoding sequences' mean context (perf.speculative): a long
        # answer is not planned at a short-context acceptance.
        config = replace(config, spec=config.spec.at_context(isl.mean + osl.running_mean / 2))
    dep = build_deployment(model, gpu, lay, config.weight_dtype, config.kv_dtype, mem)
    return config, settings, mem, dep, tuple(warnings)


def _allocated(config: Config, settings: EngineSettings, limit: float) -> float:
    """Running requests the engine allocates state for at running limit ``limit``
    (``Engine.allocated_running``: an explicit cap may count in full)."""
    return config.engine.allocated_running(limit, settings, config.lift_running_cap)


def allocated_requests(ev: Evaluation) -> float:
    """Running requests per replica whose memory the engine allocates for ``ev`` (see
    :func:`_allocated`); what ``MemoryBreakdown.allocation`` is evaluated at."""
    return _allocated(ev.config, ev.settings, ev.steady.limits.limit)


def _memory(
    model: ModelSpec, gpu: Gpu, config: Config, settings: EngineSettings, ratio: float | None
) -> MemoryBreakdown:
    """The per-GPU memory of ``config`` under ``settings`` with the engine's hybrid-state and
    speculative-decoding terms (``perf.memory.memory_breakdown``)."""
    copies = config.engine.spec_state_copies(config.spec.draft_tokens if config.spec else None)
    return memory_breakdown(
        model,
        gpu,
        config.layout,
        config.weight_dtype,
        config.kv_dtype,
        settings,
        ratio,
        with_mtp=config.spec is not None and config.spec.method == "mtp",
        ssm_dtype=config.ssm_dtype,
        host_kv_bytes=config.host_kv_bytes,
        spec_state_copies=copies,
        spec_reserved_running=float(settings.max_running or 0),
        padded_state_slot=config.engine.pools.padded_state_slot,
        draft_kv_pool=config.engine.pools.draft_kv_pool,
        verify_state_commit=config.engine.pools.verify_state_commit,
        expert_padding=config.engine.expert_padding(gpu, config.weight_dtype),
    )


def kv_and_state(model: ModelSpec, kv_dtype: Dtype) -> tuple[float, float]:
    """(whole-model KV bytes per token, state bytes per sequence) for reports."""
    return kv_bytes_per_token(model, kv_dtype), state_bytes_per_sequence(model)
