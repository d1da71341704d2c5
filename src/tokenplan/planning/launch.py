"""Server launch commands for a chosen configuration, and the client concurrency that keeps them busy.

Each engine writes its own command (``Engine.launch_command`` in ``tokenplan.engines``: SGLang
``python -m sglang.launch_server``, vLLM ``vllm serve``, TensorRT-LLM ``trtllm-serve``), with its
memory fraction sized so that its KV pool holds the planned batch with headroom
(:func:`engine_sizing`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from statistics import NormalDist

from tokenplan.engines.base import Engine, EngineSettings, Launch, replicas_per_server
from tokenplan.engines.launch import Sized
from tokenplan.job.deploy import engine_memory as _memory
from tokenplan.job.deploy import format_issues, mtp_engine_rejection, spec_layout_rejection, startup_context
from tokenplan.job.evaluate import Evaluation
from tokenplan.job.workload import LengthDist
from tokenplan.perf.memory import MemoryBreakdown, cuda_visible_bytes, profile_reserve_bytes


def planned_running(ev: Evaluation) -> int:
    """Running requests per replica the plan assumes (the batch limit)."""
    return int(ev.steady.limits.limit)


# Requests kept in flight beyond the running limit: enough that a finished request is replaced
# within the same scheduler step (the engine admits from its queue between steps), without a
# long queue that only adds TTFT. 10 % of the batch, at least 8 for small batches.
QUEUE_HEADROOM_FRACTION = 0.10
QUEUE_HEADROOM_MIN = 8


# A host of PCIe cards: NVIDIA's RTX PRO Servers hold up to eight RTX PRO 6000 Blackwell Server
# Edition cards (nvidia.com/en-us/data-center/rtx-pro-server/), as 8-GPU L40S servers do.
# Boards and trays bring their own count (Gpu.node_gpus: 8 on HGX, 4 on a GB200 NVL72 tray).
PCIE_HOST_GPUS = 8


def host_gpus(ev: Evaluation) -> int:
    """GPUs one host holds: the GPU's rental unit where it is a board or tray, else a host of
    ``PCIE_HOST_GPUS`` PCIe cards."""
    node = ev.deployment.gpu.node_gpus
    return node if node > 1 else PCIE_HOST_GPUS


def server_count(ev: Evaluation) -> int:
    """Endpoints the planned launch of ``ev`` runs: one per replica, or one per host of DP replicas
    where the engine runs them behind one server (``replicas_per_server``)."""
    lay = ev.config.layout
    return -(-lay.dp // replicas_per_server(lay, host_gpus(ev), ev.config.engine.servers_per_replica(lay)))


def client_concurrency(ev: Evaluation, launched: int | None = None) -> int:
    """Requests to keep in flight per server endpoint: the batch of every replica that server
    runs (the DP replicas one host holds behind one server, or one replica where each has its
    own server, ``Engine.servers_per_replica``) plus 10 % (at least 8) so that a finished
    request is replaced at once. A replica's batch is its running limit, or the smaller batch the job
    gives it when it has fewer requests than the replicas hold, or the printed launch's cap
    (``launched``, :func:`launch_caps`) where that is lower."""
    separate = ev.config.engine.servers_per_replica(ev.config.layout)
    # the batch the plan runs: the running limit, or fewer where the job has fewer requests
    # than the replicas hold (100,000 B200 for 914,000 prompts run 9 each, not 48)
    per_replica = min(planned_running(ev), math.ceil(ev.steady.batch))
    if launched is not None:
        per_replica = min(per_replica, launched)
    total = per_replica * replicas_per_server(ev.config.layout, host_gpus(ev), separate)
    return total + max(QUEUE_HEADROOM_MIN, math.ceil(QUEUE_HEADROOM_FRACTION * total))


# The KV pool a launch sets holds the batch's summed context at this quantile: the plan admits at
# the running *mean* context (job.batching), so a pool of exactly B × mean overflows about half
# the time and the engine retracts or preempts; at the 90th percentile it overflows one step in ten.
HEADROOM_QUANTILE = 0.90
_Z = NormalDist().inv_cdf(HEADROOM_QUANTILE)  # 1.2816


def running_context_moments(isl: LengthDist, osl: LengthDist, whole_output: bool) -> tuple[float, float]:
    """(mean, standard deviation) of the KV tokens one running request holds (tokens).

    A request running at a random instant is length-biased: its output L has density ∝ L·f(L).
    Where admission reserves the whole output (``whole_output``, TRT-LLM) it holds ISL + L, so
    ``E[A] = E[L²]/E[L]`` and ``E[A²] = E[L³]/E[L]`` (ISL + the cap, a constant, where every
    request carries the job's cap as its ``max_tokens``: ``Engine.running_context_tokens``); otherwise it holds ISL + U·L with U uniform
    on [0, 1] (the output so far), so ``E[A] = E[L²]/(2E[L])`` and ``E[A²] = E[L³]/(3E[L])``
    (Cox, Renewal Theory, 1962, §5.2). The prompt is independent of the output:
    ``Var = Var(ISL) + E[A²] − E[A]²``. Moments are the capped lognormal's closed form
    (``LengthDist.capped_moment``).
    """
    e1, e2, e3 = (osl.capped_moment(k) for k in (1, 2, 3))
    a1, a2 = (e2 / e1, e3 / e1) if whole_output else (e2 / (2 * e1), e3 / (3 * e1))
    if whole_output and osl.max_tokens is not None:  # every request reserves the max_tokens it carries
        a1, a2 = osl.max_tokens, osl.max_tokens**2
    var = max(isl.capped_moment(2) - isl.mean**2, 0.0) + max(a2 - a1 * a1, 0.0)
    return isl.mean + a1, math.sqrt(var)


def pool_tokens_needed(batch: int, mean: float, sd: float) -> float:
    """KV tokens that hold ``batch`` running requests at :data:`HEADROOM_QUANTILE` of their summed
    context: ``B·m + z·√B·s`` (the sum of B independent contexts is nearly normal for the
    hundreds a replica runs; z = 1.2816 at the 90th percentile)."""
    return batch * mean + _Z * math.sqrt(batch) * sd


def _pool_tokens(mem: MemoryBreakdown, running: int, extra_usable: float) -> float:
    """KV tokens of one replica's pool with ``running`` requests' state in it and
    ``extra_usable`` bytes per GPU more usable memory (a raised fraction): where a ratio splits
    state from KV, the KV pool gets its share ``kv / (kv + state)`` of the extra."""
    per_token = mem.sizing_bytes_per_token_per_gpu
    if per_token <= 0:
        return math.inf
    kv = mem.pool_left(running)
    share = 1.0 if mem.state_slots is None else mem.kv_pool_bytes / max(mem.kv_pool_bytes + mem.state_pool_bytes, 1.0)
    return (kv + extra_usable * share) / per_token * mem.sequence_shards


def engine_sizing(engine: Engine, ev: Evaluation, isl: LengthDist, osl: LengthDist) -> tuple[float, int]:
    """(memory fraction, running requests per replica) for ``engine``'s launch of ``ev``: the KV
    pool holds the planned batch B (``planned_running``) at :data:`HEADROOM_QUANTILE` of its summed
    context (:func:`pool_tokens_needed` with the engine's admission rule).

    The fraction is the planned one (the planned engine) or the engine's default for this
    deployment (another engine), raised by ``Δtokens × bytes per token / base`` where the pool
    falls short (``EngineSettings.fraction_base_bytes``: what the fraction is a share of), rounded
    up to the digits the command prints, and never lowered. It stops at
    ``Engine.max_memory_fraction`` (what the engine needs outside its pools: SGLang's activation
    and CUDA-graph reserve, vLLM's start-up check, TRT-LLM's default); where that cap cannot hold
    B, the running cap drops to the largest batch it holds with the same headroom.
    """
    c, gpu = ev.config, ev.deployment.gpu
    planned = engine.name == c.engine.name
    if planned:
        settings, mem = ev.settings, ev.memory
    else:
        settings, mem = _other_engine(engine, ev, None, c.max_running.requests)
    batch = planned_running(ev)
    mean, sd = running_context_moments(isl, osl, engine.reserves_whole_output)
    visible = cuda_visible_bytes(gpu.memory_bytes)
    reserve = settings.reserve_bytes + profile_reserve_bytes(ev.deployment.spec, c.layout, settings)
    base = settings.fraction_base_bytes(visible, mem.weight_bytes_per_gpu, reserve)
    per_token = mem.sizing_bytes_per_token_per_gpu / mem.sequence_shards
    digits: int = 10**engine.fraction_digits  # int ** int is typed Any (a negative power is a float)
    f0, f_max = settings.memory_fraction, engine.max_memory_fraction(settings, visible)
    f_max = max(math.floor(f_max * digits) / digits, f0)

    def fraction_for(b: int) -> float:
        short = pool_tokens_needed(b, mean, sd) - _pool_tokens(mem, b, 0.0)
        if short <= 0 or base <= 0:
            return f0
        share = (
            1.0 if mem.state_slots is None else mem.kv_pool_bytes / max(mem.kv_pool_bytes + mem.state_pool_bytes, 1.0)
        )
        if share <= 0:  # the state takes the whole pool: no fraction gives KV room (a break-it pass:
            return math.inf  # ZeroDivisionError planning Qwen3-Next-80B on 2× L40S with vLLM)
        return math.ceil((f0 + short * per_token / share / base) * digits) / digits

    if fraction_for(batch) <= f_max:
        return max(fraction_for(batch), f0), batch
    lo, hi = 0, batch  # the largest b ≤ B whose headroom context fits at f_max (0 if none)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if fraction_for(mid) <= f_max else (lo, mid - 1)
    return f_max, max(lo, 1)


def launch_caps(
    ev: Evaluation, sizing: tuple[Sized, ...], engines: Mapping[str, Engine]
) -> tuple[int, tuple[str, ...]]:
    """(the planned engine's launch cap per replica, a warning per printed launch that caps the
    batch below the plan's, sets ``--max-model-len`` or is not written), from ``sizing``
    (:func:`launch_sizing`, the planned engine's first). A launch caps lower where even
    its largest memory fraction holds fewer requests at :data:`HEADROOM_QUANTILE` of their
    summed context (TensorRT-LLM's admission, reserving each request's ``max_tokens``, holds far
    fewer); the plan's figures stay at the planned batch."""
    planned = planned_running(ev)
    # the batch the figures assume: the running limit, or fewer where the job has fewer requests
    # (as client_concurrency counts it); a launch cap at or above it leaves the figures as they are
    runs = min(planned, math.ceil(ev.steady.batch))
    launched, warnings = planned, []
    for name, fraction, running, context, refusal in sizing:
        engine = ev.config.engine if name == ev.config.engine.name else engines[name]
        if refusal is not None:  # its command is not written (launch_commands)
            warnings.append(f"no {engine.display_name} command in --json: {refusal}")
            continue
        if context is not None and engine is not ev.config.engine:
            warnings.append(
                f"the {engine.display_name} launch (in --json) sets --max-model-len {context:,} (the job's longest "
                f"request): {ev.deployment.spec.name}'s whole context does not fit one rank's KV cache at its "
                "memory fraction; a longer request is refused"
            )
        if engine is ev.config.engine:
            launched = running
        if running < runs:
            where = "launch" if engine is ev.config.engine else "launch (in --json)"
            warnings.append(
                f"the {engine.display_name} {where} caps the batch at {running:,} per replica, not the "
                f"{runs:,} planned: at its largest memory fraction ({fraction:.3f}) its KV pool holds {running:,} "
                f"request{'' if running == 1 else 's'} at the {HEADROOM_QUANTILE * 100:.0f}th percentile of their "
                "summed context"
                + (
                    " (it reserves each request's prompt + max_tokens at admission)"
                    if engine.reserves_whole_output
                    else ""
                )
                + (
                    f" (its command writes ⌈{running:,} / {ev.config.layout.tp}⌉ = "
                    f"{math.ceil(running / ev.config.layout.tp):,} per attention-DP rank)"
                    if ev.config.layout.attention_dp
                    else ""
                )
                + "; the plan's figures assume the planned batch"
            )
        c = ev.config
        capped_by_default = engine.caps_running_by_default(c.spec is not None, ev.deployment.spec.is_hybrid)
        if engine is not c.engine and capped_by_default and not c.max_running.lifted and c.max_running.requests is None:
            # the default cap where the engine states one (SGLang: 48 with speculative decoding);
            # at or above the plan's batch it does not bind (it was said to be below 28)
            default_cap = engine.settings(ev.deployment.gpu, c.layout, speculative=c.spec is not None).max_running
            if running >= planned and (default_cap is None or default_cap < planned):  # the default binds
                # which default binds here: the speculative cap, the hybrid's state slots, or both
                # (it named both for a hybrid without speculation, a new-user pass)
                caps = ["48 with speculative decoding"] if c.spec is not None else []
                caps += ["state slots ÷ 5 with the radix cache on"] if ev.deployment.spec.is_hybrid else []
                warnings.append(
                    f"the {engine.display_name} launch (in --json) keeps {engine.display_name}'s default running "
                    f"cap ({'; '.join(caps)}), below the {planned:,} planned per replica: plan with --engine "
                    f"{engine.name} for a launch that lifts it"
                )
    sized = {entry.engine for entry in sizing}
    for name, engine in engines.items():  # an engine of the vendor that refuses this configuration
        why = None if name in sized or ev.deployment.gpu.vendor not in engine.vendors else cannot_start(engine, ev)
        if why:
            warnings.append(f"no {engine.display_name} command in --json: {why}")
    return launched, tuple(warnings)


def launch_sizing(ev: Evaluation, isl: LengthDist, osl: LengthDist, engines: Mapping[str, Engine]) -> tuple[Sized, ...]:
    """:func:`engine_sizing` and :func:`engine_context` of the planned engine and each of
    ``engines`` that can start the configuration on its GPU, as ``Launch.sizing`` takes them."""
    out = []
    for e in launch_engines(ev, engines):
        fraction, running = engine_sizing(e, ev, isl, osl)
        out.append(Sized(e.name, fraction, running, *engine_context(e, ev, isl, osl, fraction, running)))
    return tuple(out)


def engine_context(
    engine: Engine, ev: Evaluation, isl: LengthDist, osl: LengthDist, fraction: float, running: int
) -> tuple[int | None, str | None]:
    """(the ``--max-model-len`` another engine's launch writes, or None; why it would not start,
    or None) at the memory ``fraction`` and ``running`` cap per replica its command sets: vLLM's
    start-up check (``job.deploy.startup_context``) on the memory vLLM allocates there. The
    planned engine's was made when the plan was (``Config.max_model_len``): (None, None). A
    plan for SGLang wrote a vLLM command without ``--max-model-len`` where Llama-3.3-70B's
    131,072-token context did not fit one RTX PRO 6000's KV cache: vLLM would not start."""
    c = ev.config
    if engine.name == c.engine.name or not engine.context_must_fit():
        return None, None
    launched, _, refusal = startup_context(
        engine, ev.deployment.spec, _other_engine(engine, ev, fraction, running)[1], isl, osl, None
    )
    return launched, refusal


def _other_engine(
    engine: Engine, ev: Evaluation, fraction: float | None, running: int | None
) -> tuple[EngineSettings, MemoryBreakdown]:
    """``engine``'s settings and memory for the evaluated configuration planned for another
    engine, at the memory ``fraction`` and ``running`` cap per replica (None: the engine's
    defaults; the plan's own cap where it fixed one)."""
    c, d = ev.config, ev.deployment
    settings = engine.settings(
        d.gpu,
        c.layout,
        speculative=c.spec is not None and not c.max_running.lifted,
        vision_cut=c.vision_cut,
        memory_fraction=fraction,
        max_running=running,
        chunk_tokens=c.chunk_tokens,
    )
    other = replace(c, engine=engine, memory_fraction=fraction)
    ratio = engine.state_to_kv_ratio(d.spec.is_hybrid, c.max_running)
    return settings, _memory(d.spec, d.gpu, other, settings, ratio)


def cannot_start(engine: Engine, ev: Evaluation) -> str | None:
    """Why ``engine`` cannot start the evaluated configuration on its GPU, or None: the GPU's
    vendor, the formats (``job.deploy.format_issues``: SGLang and TensorRT-LLM refuse NVFP4
    weights below Blackwell), the model's MTP layers where the engine has no draft for them
    (``job.deploy.mtp_engine_rejection``) and the speculative method on the layout (SGLang's
    DFLASH refuses PP and DP attention), as the search rejects them for the planned engine."""
    gpu = ev.deployment.gpu
    if gpu.vendor not in engine.vendors:
        return f"{engine.display_name} does not run on {gpu.vendor.upper()} GPUs"
    c, model = replace(ev.config, engine=engine), ev.deployment.spec
    formats = format_issues(model, gpu, c.weight_dtype, c.kv_dtype, engine)[0]
    return formats or mtp_engine_rejection(c, model) or spec_layout_rejection(c)


def launch_engines(ev: Evaluation, engines: Mapping[str, Engine]) -> list[Engine]:
    """The planned engine, then each of ``engines`` that can start its configuration on its GPU
    (:func:`cannot_start`): a command the engine would refuse is not written."""
    planned = ev.config.engine
    return [planned] + [e for name, e in engines.items() if name != planned.name and cannot_start(e, ev) is None]


def launch_for(ev: Evaluation, repo: str, native_dtype: str, parsers: object, remote_code: bool = False) -> Launch:
    """What a launch command is written from, for the evaluated configuration ``ev``.

    Args:
        ev: the chosen configuration. repo: the Hugging Face repository. native_dtype: the
            checkpoint's weight format (value). parsers: reasoning-parser name or {engine: name}.
        remote_code: the engines must run the repository's own code (``--trust-remote-code``).
    """
    c = ev.config
    return Launch(
        repo=repo,
        native_dtype=native_dtype,
        parsers=parsers,
        layout=c.layout,
        weight_dtype=c.weight_dtype,
        kv_dtype=c.kv_dtype,
        spec_method=c.spec.method if c.spec else None,
        draft_tokens=c.spec.draft_tokens if c.spec else 0,
        ssm_dtype=c.ssm_dtype,
        hybrid=ev.deployment.spec.is_hybrid,
        max_running=c.max_running,
        planned_running=planned_running(ev),
        settings=ev.settings,
        planned_engine=c.engine.name,
        host_gpus=host_gpus(ev),
        draft_model=c.spec.draft_model if c.spec else None,
        max_model_len=c.max_model_len,
        trust_remote_code=remote_code,
    )


def launch_commands(
    ev: Evaluation,
    repo: str,
    native_dtype: str,
    parsers: object,
    engines: Mapping[str, Engine],
    isl: LengthDist | None = None,
    osl: LengthDist | None = None,
    sizing: tuple[Sized, ...] | None = None,
    remote_code: bool = False,
) -> dict[str, str]:
    """Every engine's launch command that starts the configuration on its GPU (:func:`launch_engines`),
    the planned engine first.

    Args:
        ev: the chosen configuration. repo: the Hugging Face repository. native_dtype: the
            checkpoint's weight format. parsers: reasoning-parser name or {engine: name}.
        engines: the engines to write commands for, by name, in order (besides the planned one).
        isl, osl: the job's lengths (tokens); with them each command's memory fraction and
            running cap are sized to hold the batch with headroom (:func:`launch_sizing`),
            without them the planned fraction or each engine's default is written.
        sizing: :func:`launch_sizing` where the caller computed it already (it then stands for
            ``isl`` and ``osl``). remote_code: the engines must run the repository's own code.

    Returns:
        engine name → shell command. Raises nothing.
    """
    launch = launch_for(ev, repo, native_dtype, parsers, remote_code)
    if sizing is None and isl is not None and osl is not None:
        sizing = launch_sizing(ev, isl, osl, engines)
    if sizing is not None:
        launch = launch._replace(sizing=sizing)
    refused = {entry.engine for entry in sizing or () if entry.refusal is not None}  # would not start
    return {e.name: e.launch_command(launch) for e in launch_engines(ev, engines) if e.name not in refused}
