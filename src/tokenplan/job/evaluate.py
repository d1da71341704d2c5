"""Evaluate one configuration — model × GPU × layout × dtypes × engine × speculative × concurrency —
into a steady-state prediction, or a rejection with its reason. Used by ``predict`` and by the
plan search alike, so both follow one code path.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from tokenplan.arch.kv import kv_bytes_per_token, state_bytes_per_sequence
from tokenplan.arch.spec import ModelSpec
from tokenplan.engines.base import EngineSettings
from tokenplan.hardware import Gpu
from tokenplan.job.batching import BatchLimits, LevelMemo, SteadyState, batch_limits, steady_state

# Config and Rejection (job.config) and what deploys a configuration (job.deploy) lived here
# before issue 30 split the module; they are imported from here throughout (explicit re-exports).
from tokenplan.job.config import REJECTION_KINDS as REJECTION_KINDS
from tokenplan.job.config import Config as Config
from tokenplan.job.config import Rejection as Rejection
from tokenplan.job.deploy import Deployed, deploy
from tokenplan.job.deploy import engine_memory as _memory  # noqa: F401  (planning.launch imports it from here)
from tokenplan.job.deploy import format_issues as format_issues
from tokenplan.job.limits import ENGINE_CAP, RUNNING_CAP
from tokenplan.job.workload import LengthDist, past_context
from tokenplan.perf.deployment import Deployment
from tokenplan.perf.efficiency import Efficiency
from tokenplan.perf.layout import kv_replication
from tokenplan.perf.memory import MemoryBreakdown
from tokenplan.records import quick_init
from tokenplan.units import Dtype, GiB


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


quick_init(Evaluation)  # a quicker __init__, same signature (tokenplan.records)


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
    offline = concurrency is None
    last = _LAST_PREPARED[0] if _LAST_PREPARED else None  # :func:`_prepared`'s first look, without its call
    if last is not None and last[0] is config and last[6] is offline and last[1] is model and last[2] is gpu:
        if last[3] is eff and last[4] is isl and last[5] is osl:
            prepared = last[7]
            return prepared if isinstance(prepared, Rejection) else prepared.at(concurrency)
    prepared = _prepared(model, gpu, config, eff, isl, osl, offline)
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
# job's own size; benchmarks/plan_sweep.py: six levels). What comes before the efficiency factors
# and the offline sizing (settings, memory, deployment) is shared by the offline and online
# preparations, and by every efficiency table ``calibrate`` tries on the same measured case (a fit
# tries thousands on a few thousand cases); what comes after, by the preparations with the same
# settings: the offline and online ones where the offline benchmark keeps the server's settings.
_DEPLOYED: _Memo[Deployed | Rejection] = _Memo(4096)
_SIZED: _Memo[Prepared | Rejection] = _Memo(64)


# The last preparation and the last deployment handed out, looked at before the memos: a sweep
# evaluates one configuration at its levels in a row, offline first. Each holds its inputs, as
# the memos' entries do.
_LAST_PREPARED: list[tuple[Config, ModelSpec, Gpu, Efficiency, LengthDist, LengthDist, bool, Prepared | Rejection]] = []
_LAST_DEPLOYED: list[tuple[Config, ModelSpec, Gpu, LengthDist, LengthDist, Deployed | Rejection]] = []


def _prepared(
    model: ModelSpec, gpu: Gpu, config: Config, eff: Efficiency, isl: LengthDist, osl: LengthDist, offline: bool
) -> Prepared | Rejection:
    """:func:`prepare`, or the last preparation where it is for the same objects."""
    if _LAST_PREPARED:
        c, m, g, e, i, o, f, got = _LAST_PREPARED[0]
        if c is config and f is offline and m is model and g is gpu and e is eff and i is isl and o is osl:
            return got
    got = prepare(model, gpu, config, eff, isl, osl, offline)
    _LAST_PREPARED[:] = [(config, model, gpu, eff, isl, osl, offline, got)]
    return got


def _deployed(model: ModelSpec, gpu: Gpu, config: Config, isl: LengthDist, osl: LengthDist) -> Deployed | Rejection:
    """:func:`job.deploy.deploy`, or its result for the same objects (the last one, else from
    :data:`_DEPLOYED`)."""
    if _LAST_DEPLOYED:
        c, m, g, i, o, got = _LAST_DEPLOYED[0]
        if c is config and m is model and g is gpu and i is isl and o is osl:
            return got
    got = _DEPLOYED.get((model, gpu, config, isl, osl), False, lambda: deploy(model, gpu, config, isl, osl))
    _LAST_DEPLOYED[:] = [(config, model, gpu, isl, osl, got)]
    return got


def _below_one(config: Config, concurrency: float) -> Rejection:
    lay = config.layout
    return Rejection(
        config,
        f"concurrency {concurrency * lay.dp:g} leaves fewer than one request per replica ({lay.dp} replicas: "
        "a replica without one would idle; use fewer replicas, or keep at least one request per replica in flight)",
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
        levels: the figures at each batch computed so far (``job.batching.steady_state``), so
            that the concurrencies at or above the running limit compute the batch's once.
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
    levels: LevelMemo = field(default_factory=dict, repr=False, compare=False)  # figures by batch (job.batching)

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
            None,  # the steps perf.step keeps (job.batching looks them up there)
            self.levels,
        )
        warnings = self.warnings
        if limits.reason == "state slots":
            lift = (
                " (SGLang's radix cache holds the state pool to its share of memory: --disable-radix-cache"
                " with --max-running N gives the running requests the whole pool)"
                if config.engine.name == "sglang" and not config.max_running.lifted
                else ""
            )
            warnings += (f"linear-attention state slots cap the batch at {limits.limit:,.0f} per replica{lift}",)
        total = steady.output_tok_s * lay.dp
        return Evaluation(
            config,
            self.deployment,
            self.settings,
            steady,
            total,
            total / lay.num_gpus,
            warnings + steady.warnings + tuple(self.model.approximations),
        )


quick_init(Prepared)  # a quicker __init__, same signature (tokenplan.records)


def prepare(
    model: ModelSpec, gpu: Gpu, config: Config, eff: Efficiency, isl: LengthDist, osl: LengthDist, offline: bool
) -> Prepared | Rejection:
    """The concurrency-independent part of :func:`evaluate` (``offline``: the engine's offline
    benchmark sizes the batch, as for concurrency None); a Rejection, never raises."""
    deployed = _deployed(model, gpu, config, isl, osl)
    if isinstance(deployed, Rejection):
        return deployed
    config, settings = deployed[0], deployed[1]
    if offline and config.max_running.requests is None:  # the engine's offline benchmark sizes its batch
        settings = config.engine.offline_settings(
            settings, model, gpu, config.layout, config.weight_dtype, config.kv_dtype, isl.mean, osl.mean
        )
    # The rest depends on the settings, not on how they were reached: an engine whose offline
    # benchmark keeps the server's settings (SGLang) has one preparation for both.
    return _SIZED.get((deployed, settings, eff), False, lambda: _sized(model, gpu, eff, isl, osl, deployed, settings))


def _sized(
    model: ModelSpec,
    gpu: Gpu,
    eff: Efficiency,
    isl: LengthDist,
    osl: LengthDist,
    deployed: Deployed,
    settings: EngineSettings,
) -> Prepared | Rejection:
    """The part of :func:`prepare` after the settings: the batch limits, whether the engine can
    allocate their requests and the caveats."""
    config, _, mem, dep, warned = deployed
    warnings = list(warned)
    lay, ctx = config.layout, model.max_context_tokens
    set_cap = config.max_running.requests is not None  # --max-running N: the cap is the launch's, not the engine's
    limits = batch_limits(
        dep, config.engine, settings, isl, osl, config.spec, cap_reason=RUNNING_CAP if set_cap else ENGINE_CAP
    )
    if limits.limit < 1:
        if limits.reason == "state slots":
            per = config.engine.pools.slots(config.spec is not None)
            return Rejection(
                config,
                f"no request fits the linear-attention state pool ({mem.state_slots or 0.0:,.2f} slots; "
                f"a running request takes {per})",
                "kv",
            )
        # the tokens a running request holds, as batch_limits counts them (TRT-LLM: prompt + max_tokens)
        held = config.engine.running_context_tokens(isl.mean, osl.mean, osl.running_mean, osl.max_tokens)
        how = " (prompt + max_tokens, reserved at admission)" if config.engine.reserves_whole_output else ""
        return Rejection(
            config,
            f"no sequence of {held:,.0f} tokens{how} fits the KV cache ({mem.kv_capacity_tokens:,.0f} tokens)",
            "kv",
        )
    running = _allocated(config, settings, limits.limit)
    if not mem.allocates(running):
        a = mem.allocation(running)
        short = -(min(a["kv_cache"], 0.0) + min(a["reserve"], 0.0))
        state = (
            f"their {a['state'] / GiB:,.1f} GiB of state"
            if mem.state_slots is None
            else f"the engine's {a['state'] / GiB:,.1f} GiB state pool ({mem.state_slots:,.0f} slots, sized at start-up)"
        )
        if mem.state_bytes_per_sequence_per_gpu <= 0 and not mem.draft_kv_shared and a["draft_kv"] > 0:
            # no state to blame: the draft's own KV pool (SGLang, at the target's token count) overruns
            state = f"the draft's own {a['draft_kv'] / GiB:,.1f} GiB KV pool"
        spec = f" and their {a['spec_state'] / GiB:,.1f} GiB of speculative state" if a["spec_state"] > 0 else ""
        fixed = config.max_running.requests
        return Rejection(
            config,
            f"cannot allocate {running:,.0f} running requests: {state}{spec} per GPU, beside the weights, a "
            f"{max(a['kv_cache'], 0.0) / GiB:,.1f} GiB KV pool and the engine's reserve, overrun the GPU by "
            f"{short / GiB:,.1f} GiB"
            + (f" (the running cap {fixed:,} is fixed: try a lower --max-running)" if fixed else ""),
            "kv",
        )
    if ctx is not None and isl.max + osl.max > ctx:
        share, lost = past_context(isl, osl, ctx)
        if share >= 0.001:
            warnings.append(
                f"{share:.1%} of requests pass the model's {ctx:,}-token context (prompt + answer at the "
                f"job's lengths): an answer stops at the context and a longer prompt is refused, so the "
                f"job yields {lost:.1%} fewer output tokens than these figures count (plan shorter --osl, "
                "or a model with a longer context)"
            )
        else:
            warnings.append(
                f"the longest requests ({isl.max + osl.max:,.0f} tokens) exceed the {ctx:,}-token "
                "context: their answers stop at the context"
            )
    if config.engine.name == "vllm" and model.is_hybrid and config.spec is not None:
        warnings.append(VLLM_HYBRID_SPEC_CAVEAT)
    rep = kv_replication(model, lay)
    if rep > 1 and model.attention is not None:  # kv_replication is 1 without attention
        warnings.append(f"KV heads replicated ×{rep} (TP{lay.tp} > {model.attention.num_kv_heads} KV heads)")
    return Prepared(model, gpu, config, eff, isl, osl, settings, dep, limits, tuple(warnings))


# The held-out check of data/checks/ (vllm-google-qwen35-27b-b200.csv): vLLM 0.18 running MTP k=1
# on Qwen3.5-27B, 171 requests per B200, measured 3,833 output tok/s per GPU at TPOT ~46 ms; the
# planner says 4,906 (+28 %, inside its band at the low end) with the host time of the steps past
# the CUDA-graph capture size (job.graphs) and 0.18's CPU hidden behind the draft only
# (engines.overlap), 5,134 (+34 %) with the CPU hidden behind the whole step as vLLM 0.19 on, and
# 7,705 (+101 %) without the host time of the uncaptured steps. The fit's one vLLM hybrid
# configuration (Qwen3.5-35B-A3B on H200 without speculation, dev.csv id 139) is predicted at
# −16 %. What slows vLLM's MTP on a hybrid model beyond that is not known (data/checks/README.md
# lists what was ruled out), so it is said rather than modelled.
VLLM_HYBRID_SPEC_CAVEAT = (
    "vLLM speculating on a hybrid (linear-attention) model is outside the measured regime: the one "
    "public high-batch measurement (Qwen3.5-27B, MTP k=1, 171 requests per B200; held out, "
    "data/checks/) ran at 0.78x the tok/s predicted for its vLLM release (0.18); take these figures as an upper bound"
)


def _allocated(config: Config, settings: EngineSettings, limit: float) -> float:
    """Running requests the engine allocates state for at running limit ``limit``
    (``Engine.allocated_running``: an explicit cap may count in full)."""
    return config.engine.allocated_running(limit, settings, config.max_running)


def allocated_requests(ev: Evaluation) -> float:
    """Running requests per replica whose memory the engine allocates for ``ev`` (see
    :func:`_allocated`); what ``MemoryBreakdown.allocation`` is evaluated at."""
    return _allocated(ev.config, ev.settings, ev.steady.limits.limit)


def kv_and_state(model: ModelSpec, kv_dtype: Dtype, ssm_dtype: str | None = None) -> tuple[float, float]:
    """(whole-model KV bytes per token, state bytes per sequence) for reports; ``ssm_dtype``: the
    launch's ``--mamba-ssm-dtype`` (None = the config's), as the memory model sizes the state."""
    return kv_bytes_per_token(model, kv_dtype), state_bytes_per_sequence(model, ssm_dtype)
