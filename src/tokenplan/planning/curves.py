"""The numbers behind the plan's charts: throughput against concurrency per option and layout,
the roofline operating points, the cost–time plane with its Pareto frontier, the memory of each
best configuration, and the speed-up of speculative decoding against batch size.

Pure: takes the searched options (``OptionResult``), the efficiency table and the job, and
returns frozen values. Every point comes from :func:`tokenplan.job.evaluate.evaluate` or
:func:`tokenplan.planning.search.simulate` — the same code path as the plan's table — so a
chart never disagrees with the numbers beside it.

Concurrency is counted across the whole option: requests in flight over all DP replicas
(``requests per replica × DP``), the number a client such as ``tokenplan generate`` keeps open.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from tokenplan.job.evaluate import Config, Evaluation, Rejection, prepare
from tokenplan.perf.efficiency import EfficiencyTable
from tokenplan.planning.search import Job, OptionResult, simulate
from tokenplan.results import JsonResult

GRID_POINTS = 14  # concurrency levels per curve (geometric from 1 to the memory limit)


@dataclass(frozen=True, slots=True)
class OperatingPoint(JsonResult):
    """One configuration at one concurrency.

    Attributes:
        concurrency: requests in flight across the option (all replicas).
        batch_per_replica: sequences each replica runs (concurrency capped by its limit).
        output_tok_s_total, output_tok_s_per_gpu: generated tokens per second (tokens/s).
        tpot_s, ttft_s: time per output token and time to first token (seconds).
        step_s: one decode step (seconds); step_flops_per_gpu (FLOP) and
            step_bytes_per_gpu (bytes) are what that step computes and moves on one GPU.
        bottleneck: what limits the decode step (memory bandwidth, compute, …).
        flop_per_byte: arithmetic intensity of the decode step (step FLOPs ÷ step bytes).
        achieved_flop_per_s: FLOP/s one GPU sustains over the whole decode step
            (step FLOPs ÷ step time, communication and overheads included).
    """

    concurrency: float
    batch_per_replica: float
    output_tok_s_total: float
    output_tok_s_per_gpu: float
    tpot_s: float
    ttft_s: float
    step_s: float
    step_flops_per_gpu: float
    step_bytes_per_gpu: float
    bottleneck: str
    flop_per_byte: float
    achieved_flop_per_s: float


@dataclass(frozen=True, slots=True)
class ThroughputCurve(JsonResult):
    """One configuration swept over concurrency.

    Attributes:
        option: hardware option label (``8× b200``).
        configuration: ``TP1×DP8, fp8 weights, fp8 KV, mtp k=3 τ=2.95`` style label.
        layout: ``TP1×DP8`` style label.
        chosen: True for the configuration the plan recommends on this option.
        points: the sweep, lowest concurrency first.
        memory_max_concurrency: the most requests whose KV cache and state fit, all replicas.
        running_max_concurrency: the most the engine runs at once (memory or its own cap).
        limit_reason: what sets ``running_max_concurrency`` (kv cache, state slots, engine cap).
        hbm_bytes_per_s: datasheet bandwidth of one GPU (bytes/s), the roofline's slope.
        peak_flop_per_s: datasheet dense FLOP/s of one GPU in the GEMM format, the roof.
    """

    option: str
    configuration: str
    layout: str
    chosen: bool
    points: tuple[OperatingPoint, ...]
    memory_max_concurrency: float
    running_max_concurrency: float
    limit_reason: str
    hbm_bytes_per_s: float
    peak_flop_per_s: float


@dataclass(frozen=True, slots=True)
class CostPoint(JsonResult):
    """One configuration's whole job (ramp, steady state, drain).

    Attributes:
        wall_s: job wall time (seconds). usd: its cost (None without a price).
        pareto: no other configuration of any option is both faster and cheaper.
    """

    option: str
    configuration: str
    output_tok_s_total: float
    wall_s: float
    usd: float | None
    chosen: bool
    pareto: bool = False


@dataclass(frozen=True, slots=True)
class MemoryBars(JsonResult):
    """What fills one GPU of a configuration, at its running batch (bytes each).

    ``kv_bytes + state_bytes`` is the engine's cache pool: when the per-sequence state shares
    that pool, ``state_bytes`` is the running batch's share of it (batch ÷ sequence shards ×
    state bytes per sequence per GPU) and ``kv_bytes`` the rest.
    """

    option: str
    configuration: str
    gpu_bytes: float
    weight_bytes: float
    kv_bytes: float
    state_bytes: float
    reserve_bytes: float
    batch_per_replica: float


@dataclass(frozen=True, slots=True)
class SpeedupPoint(JsonResult):
    """Speculative decoding against none, same configuration and concurrency.

    Attributes:
        concurrency: requests in flight across the option.
        batch_per_replica: sequences each replica runs with speculation.
        output_tok_s_spec, output_tok_s_plain: all replicas, with and without (tokens/s).
        speedup: ``output_tok_s_spec / output_tok_s_plain`` (dimensionless).
    """

    concurrency: float
    batch_per_replica: float
    output_tok_s_spec: float
    output_tok_s_plain: float
    speedup: float


@dataclass(frozen=True, slots=True)
class SpeedupCurve(JsonResult):
    """Speed-up of one speculative setting over concurrency; ``breakeven_concurrency`` is where
    it falls to 1 (interpolated on log concurrency), None when it pays at every level."""

    option: str
    configuration: str
    spec: str
    points: tuple[SpeedupPoint, ...]
    breakeven_concurrency: float | None


PAST_THE_LIMIT = 4  # a throughput curve runs on to 4× the running limit: its plateau


def concurrency_grid(limit: float, points: int = GRID_POINTS) -> list[int]:
    """Requests per replica from 1 to ``floor(limit)``, geometrically spaced, both ends
    included, deduplicated (integers)."""
    top = max(1, math.floor(limit))
    if top == 1:
        return [1]
    ratio = top ** (1 / (points - 1))
    return sorted({min(top, round(ratio**i)) for i in range(points)} | {top})


def label(ev: Evaluation) -> str:
    """``TP2×DP4, fp8 weights, fp8 KV, mtp k=3 τ=2.95, running cap raised`` style label."""
    cfg = ev.config
    spec = f", {cfg.spec.describe()}" if cfg.spec else ""
    cap = cfg.max_running.label(cfg.engine.disables_radix_cache(ev.deployment.spec.is_hybrid, cfg.max_running))
    return f"{cfg.layout.describe()}, {cfg.weight_dtype.value} weights, {cfg.kv_dtype.value} KV{spec}{cap}"


def _point(ev: Evaluation, concurrency_total: float) -> OperatingPoint:
    s, step = ev.steady, ev.steady.decode_step
    intensity = step.flops / step.bytes_moved if step.bytes_moved > 0 else 0.0
    achieved = step.flops / step.total_s if step.total_s > 0 else 0.0
    return OperatingPoint(
        concurrency_total,
        s.batch,
        ev.output_tok_s_total,
        ev.output_tok_s_per_gpu,
        s.tpot_s,
        s.ttft_s,
        step.total_s,
        step.flops,
        step.bytes_moved,
        step.bottleneck,
        intensity,
        achieved,
    )


def memory_limit_per_replica(ev: Evaluation) -> float:
    """Whole sequences whose KV cache and state fit in one replica (the engine's cap left
    aside): the pool's capacity in sequences, rounded down (413.1 → 413: the engine admits a
    sequence only when all of it fits)."""
    lim = ev.steady.limits
    return float(math.floor(min(lim.kv, lim.state) if lim.state is not None else lim.kv))


def sweep(
    ev: Evaluation, table: EfficiencyTable, job: Job, per_replica: list[int], config: Config | None = None
) -> list[tuple[int, Evaluation]]:
    """``config`` (default: ``ev``'s) on ``ev``'s model and GPU at each concurrency per replica,
    as (concurrency per replica, evaluation) pairs; rejected levels are left out. The
    configuration is prepared once (``job.evaluate.prepare``: settings, memory, deployment, batch
    limits) and evaluated at each level, which is ``evaluate`` at that level, figure for figure."""
    dep = ev.deployment
    eff = table.resolve(ev.config.engine.name, dep.gpu.architecture)
    prepared = prepare(dep.spec, dep.gpu, config or ev.config, eff, job.isl, job.osl, offline=False)
    if isinstance(prepared, Rejection):
        return []
    out = []
    for c in per_replica:
        r = prepared.at(float(c))
        if isinstance(r, Evaluation):
            out.append((c, r))
    return out


def throughput_curve(
    result: OptionResult, ev: Evaluation, table: EfficiencyTable, job: Job, chosen: bool
) -> ThroughputCurve:
    """One configuration of ``result`` swept from 1 request per replica to two doublings past what
    it runs at once (:data:`PAST_THE_LIMIT` × its running limit, where the rate has gone flat and
    requests only queue), or to its memory limit where that comes first. A 1-layer model's sweep
    ran to its memory limit, 11.7 million in flight beside a cap of 32,768, and its chart's axis
    with it; a cap of 1 still shows its plateau."""
    dp = ev.config.layout.dp
    mem_max = memory_limit_per_replica(ev)
    runs = sweep(ev, table, job, concurrency_grid(min(mem_max, PAST_THE_LIMIT * ev.steady.limits.limit)))
    dep = ev.deployment
    return ThroughputCurve(
        result.option.label,
        label(ev),
        ev.config.layout.describe(),
        chosen,
        tuple(_point(r, c * dp) for c, r in runs),
        mem_max * dp,
        ev.steady.limits.limit * dp,
        ev.steady.limits.reason,
        dep.gpu.hbm_bytes_per_s,
        max(dep.gemm_flops_per_s, dep.attn_flops_per_s),
    )


def layout_curves(result: OptionResult, table: EfficiencyTable, job: Job) -> list[ThroughputCurve]:
    """Per layout of an option, its fastest configuration swept over concurrency; the plan's
    chosen configuration first."""
    if result.best is None:
        return []
    chosen = result.best.evaluation
    curves = [throughput_curve(result, chosen, table, job, True)]
    seen = {chosen.config.layout}
    for ev in result.evaluated:  # fastest first
        if ev.config.layout not in seen:
            seen.add(ev.config.layout)
            curves.append(throughput_curve(result, ev, table, job, False))
    return curves


def cost_points(results: list[OptionResult], table: EfficiencyTable, job: Job) -> list[CostPoint]:
    """Every configuration that runs, as a whole job (days and dollars), with the Pareto
    frontier over all options marked (configurations without a price are never on it)."""
    points = []
    for r in results:
        chosen = r.best.evaluation if r.best else None
        for ev in r.evaluated:
            c = simulate(ev, table, job, r.option)
            points.append(
                CostPoint(r.option.label, label(ev), ev.output_tok_s_total, c.wall_s, c.cost.usd, ev is chosen)
            )
    front = pareto_front([(p.wall_s, p.usd) for p in points])
    return [replace(p, pareto=i in front) for i, p in enumerate(points)]


def pareto_front(points: list[tuple[float, float | None]]) -> set[int]:
    """Indices of the (time, cost) points no other point beats on both (ties kept once).

    Sorted by time then cost, a point is on the frontier when its cost is below every faster
    point's cost; points whose cost is None are left out.
    """
    order = sorted((i for i, (_, usd) in enumerate(points) if usd is not None), key=lambda i: points[i])
    front, best_usd = set(), math.inf
    for i in order:
        usd = points[i][1]
        if usd is not None and usd < best_usd:  # order holds only the priced points
            front.add(i)
            best_usd = usd
    return front


def memory_bars(result: OptionResult) -> MemoryBars | None:
    """Per-GPU memory of an option's chosen configuration (None when nothing runs)."""
    if result.best is None:
        return None
    ev = result.best.evaluation
    m, batch = ev.memory, ev.steady.batch
    if m.state_pool_bytes > 0:  # the engine keeps a separate state pool
        kv, state = m.kv_pool_bytes, m.state_pool_bytes
    else:
        state = min(m.kv_pool_bytes, batch / m.sequence_shards * m.state_bytes_per_sequence_per_gpu)
        kv = m.kv_pool_bytes - state
    return MemoryBars(
        result.option.label, label(ev), m.gpu_bytes, m.weight_bytes_per_gpu, kv, state, m.reserve_bytes, batch
    )


def speedup_curves(result: OptionResult, table: EfficiencyTable, job: Job) -> list[SpeedupCurve]:
    """Each speculative setting searched with the chosen configuration's layout and formats,
    against the same configuration without speculation, from 1 request per replica to the
    larger of the two memory limits."""
    if result.best is None:
        return []
    base = result.best.evaluation.config
    same = [
        ev
        for ev in result.evaluated
        if ev.config.spec is not None and replace(ev.config, spec=None) == replace(base, spec=None)
    ]
    plain = replace(base, spec=None)
    curves = []
    for ev in same:
        assert ev.config.spec is not None  # same holds speculative configurations only
        dp = ev.config.layout.dp
        grid = concurrency_grid(memory_limit_per_replica(ev))
        with_spec = dict(sweep(ev, table, job, grid))
        without = dict(sweep(ev, table, job, grid, plain))
        pts = tuple(
            SpeedupPoint(
                c * dp,
                with_spec[c].steady.batch,
                with_spec[c].output_tok_s_total,
                without[c].output_tok_s_total,
                with_spec[c].output_tok_s_total / without[c].output_tok_s_total,
            )
            for c in grid
            if c in with_spec and c in without
        )
        curves.append(SpeedupCurve(result.option.label, label(ev), ev.config.spec.describe(), pts, breakeven(pts)))
    return curves


def breakeven(points: tuple[SpeedupPoint, ...]) -> float | None:
    """Concurrency where the speed-up first falls to 1, interpolated linearly in log
    concurrency between the two levels around it.

    Args:
        points: speed-ups (dimensionless) at increasing concurrency (requests in flight).

    Returns:
        The break-even concurrency (requests in flight, fractional); the first level when the
        speed-up is ≤ 1 from the start; None when it stays above 1 (or ``points`` is empty).
        Raises nothing.
    """
    for a, b in zip(points, points[1:]):
        if a.speedup > 1 >= b.speedup:
            t = (a.speedup - 1) / (a.speedup - b.speedup)
            return math.exp(math.log(a.concurrency) + t * (math.log(b.concurrency) - math.log(a.concurrency)))
    if points and points[0].speedup <= 1:
        return points[0].concurrency
    return None
