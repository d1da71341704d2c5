"""Evaluate every candidate of every hardware option; keep each rejection with its reason.

Candidates are ranked first by steady-state throughput (cheap: ~60 µs each), then the leaders
of each option get the whole-job simulation (ramp, steady state, drain tail) that decides the
wall time and the cost.
"""

from __future__ import annotations

import gc
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

from tokenplan.arch.spec import ModelSpec
from tokenplan.engines.base import Engine
from tokenplan.engines.launch import MaxRunning
from tokenplan.job.cost import JobCost, job_cost
from tokenplan.job.deploy import fit_advice
from tokenplan.job.evaluate import Config, Evaluation, Rejection, evaluate
from tokenplan.job.limits import ENGINE_CAP, RUNNING_CAP
from tokenplan.job.timeline import JobTime, job_time
from tokenplan.job.workload import LengthDist
from tokenplan.perf.efficiency import Efficiency, EfficiencyTable
from tokenplan.perf.speculative import SpecDecode, low_acceptance_ratio
from tokenplan.planning.launch import HEADROOM_QUANTILE, engine_sizing, planned_running
from tokenplan.planning.measured import measured_first, unmeasured
from tokenplan.planning.space import (
    SEARCH_ALL,
    Fixed,
    HardwareOption,
    candidates,
    fixed_layout_reasons,
    kv_dtypes,
    weight_dtypes,
)
from tokenplan.units import Dtype, GiB

JOB_SIMULATED_PER_OPTION = 8  # leaders by steady throughput that get the whole-job simulation


# The servers' start-up a job's wall time and cost count by default (seconds): vLLM serving
# Llama-70B FP8 at TP8, weights in the page cache — ~60 s P2P access check, ~10 s weights, ~15 s
# Dynamo bytecode, ~70 s torch.compile, ~60 s CUDA-graph capture (vllm-project/vllm#19824, the
# startup-time tracking issue): 215 s. A cold download of the weights, or a small model with a
# warm compile cache (vllm#20264: 59 s to the first answer), moves it; ``plan --startup`` sets it.
SERVER_STARTUP_S = 215.0


@dataclass(frozen=True, slots=True)
class Job:
    """The generation job: requests and their length distributions (tokens), and the servers'
    start-up (seconds) its wall time and cost count before the first request
    (:data:`SERVER_STARTUP_S` by default in a plan)."""

    num_requests: int
    isl: LengthDist
    osl: LengthDist
    startup_s: float = 0.0


@dataclass(frozen=True, slots=True)
class Candidate:
    """An evaluated configuration with its whole-job time and cost.

    Attributes:
        evaluation, time, cost: the configuration, its job timeline (seconds) and cost (USD).
        acceptance_low_ratio: τ at the low end of the published acceptance over the τ used, for
            speculative decoding whose τ is a prior (``perf.speculative.low_acceptance_ratio``
            at the job's mean decoding context); 1 otherwise.
    """

    evaluation: Evaluation
    time: JobTime
    cost: JobCost
    acceptance_low_ratio: float = 1.0

    @property
    def wall_s(self) -> float:
        """Job wall time (seconds)."""
        return self.time.total_s

    @property
    def ranking_wall_s(self) -> float:
        """The wall time (seconds) the candidate is ranked and checked against a deadline by:
        ``wall_s / acceptance_low_ratio``. Output rate grows at most in proportion to τ, so
        this is the longest the job takes at the low end of the published acceptance; a
        speculative configuration then leads, or meets a target, only where it does so at the
        lower measured acceptance, not on a prior that long thinking traces may not reach. The
        figures printed stay the prior's. The servers' start-up (``JobTime.startup_s``) does not
        depend on τ and is not scaled."""
        startup = self.time.startup_s
        return startup + (self.wall_s - startup) / self.acceptance_low_ratio

    @property
    def ranking_usd(self) -> float | None:
        """The cost (USD) a budget is checked against: the cost at :attr:`ranking_wall_s`
        (GPU-hours scale with the wall time; the start-up's part is not scaled); None without a
        price."""
        if self.cost.usd is None or self.wall_s <= 0:
            return self.cost.usd
        return self.cost.usd * self.ranking_wall_s / self.wall_s


@dataclass(frozen=True, slots=True)
class OptionResult:
    """One hardware option searched.

    Attributes:
        option: the GPUs.
        ranked: simulated candidates, fastest first.
        evaluated: every configuration that runs (steady state only), best throughput first.
        rejected: reason → how many configurations it rejected. Each reason is said once for
            its scope (a layout-independent reason once; a split's once per split; memory once
            per split and weight format) and is never empty; layouts that do not divide the GPUs
            count 1 each.
        configurations: how many configurations were evaluated in all.
        not_searched: formats left out of the search unasked, each with why (empty when the
            user named the formats).
    """

    option: HardwareOption
    ranked: list[Candidate]
    evaluated: list[Evaluation]
    rejected: dict[str, int] = field(default_factory=dict)
    configurations: int = 0
    not_searched: list[str] = field(default_factory=list)
    spec_measured: bool = False  # the user measured the speculative regime: nothing set aside (measured_first)
    pipeline_measured: bool = True  # some fit row runs the engine with PP > 1 (planning.measured)

    def unmeasured(self, ev: Evaluation) -> bool:
        """Whether ``ev`` runs in a regime no measurement backs (:func:`planning.measured.unmeasured`),
        so the search ranks it after a measured one (:func:`measured_first`)."""
        return unmeasured(ev, self.spec_measured, self.pipeline_measured)

    @property
    def best(self) -> Candidate | None:
        """The leading configuration (None when nothing runs): the fastest, a speculative one
        whose τ is a prior counted at the low end of published acceptance (``Candidate.ranking_wall_s``)."""
        return self.ranked[0] if self.ranked else None


def simulate(ev: Evaluation, table: EfficiencyTable, job: Job, option: HardwareOption) -> Candidate:
    """Whole-job time and cost of one evaluated configuration."""
    eff = table.resolve(ev.config.engine.name, option.gpu.architecture)
    lay = ev.config.layout
    spec = ev.config.spec
    per_replica = job.num_requests / lay.dp
    jt = job_time(ev.deployment, eff, ev.settings, ev.steady, job.isl, job.osl, per_replica, spec, lay.dp)
    if job.startup_s:
        jt = replace(jt, startup_s=job.startup_s)
    low = low_acceptance_ratio(spec, job.isl.mean + job.osl.running_mean / 2) if spec is not None else 1.0
    return Candidate(
        ev, jt, job_cost(lay.num_gpus, jt.total_s, jt.output_tokens * lay.dp, option.usd_per_gpu_hour), low
    )


@contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """Pause CPython's cyclic garbage collector for the block (restored after, also on error).

    A search builds tens of thousands of short-lived frozen records and tuples; reference
    counting frees them, none forms a cycle, yet each allocation burst triggers a generation-0
    collection that walks the records the step memos keep alive. Measured here
    (``benchmarks/plan_sweep.py``, three repeats of 23,664 configurations, before EP across pipeline stages left the search): with the collector
    paused the peak RSS is the same 37 MiB and ``gc.collect()`` afterwards finds 401 objects,
    while the search takes ~6 % less CPU. Python's ``gc`` documentation allows turning it off
    when the program creates no reference cycles.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def search_option(
    model: ModelSpec,
    option: HardwareOption,
    engine: Engine,
    table: EfficiencyTable,
    job: Job,
    specs: list[SpecDecode | None],
    weight_allowed: tuple[Dtype, ...] | None = None,
    kv_allowed: tuple[Dtype, ...] | None = None,
    vision_cut: float = 1.0,
    fixed: Fixed = SEARCH_ALL,
    spec_measured: bool = False,
    pipeline_measured: bool = True,
) -> OptionResult:
    """Search one hardware option (see the module docstring): evaluate every candidate offline,
    re-evaluate at the job's own size those whose full batch the job never fills, and simulate
    the whole job for the :data:`JOB_SIMULATED_PER_OPTION` leaders by throughput.

    Args:
        model: the model. option: the GPUs (type and count). engine: the engine.
        table: efficiency factors, resolved for the engine and the GPU architecture.
        job: requests and their length distributions (tokens).
        specs: speculative settings to try (None = off).
        weight_allowed, kv_allowed: the dtypes to consider (None = every one the GPU runs).
        vision_cut: SGLang's memory multiplier for multimodal checkpoints (1 = none).
        fixed: the layout parts and running cap the user fixed (``planning.space.Fixed``).
        spec_measured: the user's own run measured the speculative regime (``plan --current``
            with a speculative setup and ``--measured-tok-s``): its figures are not set aside as
            an upper bound (:func:`measured_first`).
        pipeline_measured: some fit row runs ``engine`` with PP > 1; False ranks a PP layout after
            the fastest measured one (:mod:`tokenplan.planning.measured`).

    Returns:
        OptionResult: simulated leaders by wall time (seconds; see ``Candidate.ranking_wall_s``),
        every running configuration by throughput (tokens/s), and rejection reasons with their
        counts. Configurations that do not run are results (rejections), not errors; raises
        nothing of its own.
    """
    eff = table.resolve(engine.name, option.gpu.architecture)
    runs: list[Evaluation] = []
    rejections: list[Rejection] = []
    n = 0
    with cyclic_gc_paused():
        for config in candidates(model, option, engine, specs, weight_allowed, kv_allowed, vision_cut, fixed):
            n += 1
            result = evaluate(model, option.gpu, config, eff, job.isl, job.osl, None)
            per_replica = job.num_requests / config.layout.dp
            if isinstance(result, Evaluation) and result.steady.batch > per_replica:
                # A job smaller than one full batch never runs one: evaluate it at its own size.
                result = evaluate(model, option.gpu, config, eff, job.isl, job.osl, per_replica)
            if isinstance(result, Rejection):
                rejections.append(result)
            else:
                runs.append(result)
    runs.sort(key=lambda e: -e.output_tok_s_total)
    leaders = [at_launch_cap(ev, eff, job) for ev in shortlist(runs)]
    ranked = sorted((simulate(ev, table, job, option) for ev in leaders), key=lambda c: c.ranking_wall_s)
    searched = OptionResult(option, [], runs, {}, n, [], spec_measured, pipeline_measured)
    ranked = measured_first(
        ranked, runs, lambda ev: simulate(at_launch_cap(ev, eff, job), table, job, option), searched.unmeasured
    )
    reasons = Counter(fixed_layout_reasons(model, option, fixed))
    reasons.update(rejection_reasons(rejections))
    notes = weight_dtypes(model, option.gpu, weight_allowed)[1] + kv_dtypes(option.gpu, kv_allowed)[1]
    return replace(searched, ranked=ranked, rejected=dict(reasons), not_searched=notes)


def shortlist(runs: list[Evaluation]) -> list[Evaluation]:
    """The configurations of ``runs`` (fastest first in the steady state) whose whole job is
    simulated and ranked: the :data:`JOB_SIMULATED_PER_OPTION` fastest, and as many of each pair
    of weight and KV formats, so that the fastest BF16 setup the formats line compares against
    (``planning.rank.formats_note``, found by :func:`leader_with`) is one the ranking saw. A job
    whose wall time is mostly the drain of its longest answers can end sooner on a layout with a
    lower steady rate (TP8 beside TP4): a break-it pass saw ``plan --budget 500 --samples 2000 --gpu
    b200`` lead with TP4×DP128 (1.47 min) while its BF16 line gave TP8×DP64 at 1.25 min. The
    fastest of each replica split (TP × PP) is kept too, whatever its format."""
    kept: dict[int, Evaluation] = {id(ev): ev for ev in runs[:JOB_SIMULATED_PER_OPTION]}
    per_format: Counter[tuple[str, str]] = Counter()
    per_split: set[tuple[int, int]] = set()
    for ev in runs:
        key = (ev.config.weight_dtype.value, ev.config.kv_dtype.value)
        if per_format[key] < JOB_SIMULATED_PER_OPTION:
            per_format[key] += 1
            kept.setdefault(id(ev), ev)
        # and the fastest of each split of a replica (TP × PP): the one with the shortest step ends
        # a drain-bound job's longest answers soonest, whatever its steady rate
        split = (ev.config.layout.tp, ev.config.layout.pp)
        if split not in per_split:
            per_split.add(split)
            kept.setdefault(id(ev), ev)
    return sorted(kept.values(), key=lambda e: -e.output_tok_s_total)


# the launch's --max-running-requests / --max-num-seqs / --max_batch_size, sized so the KV pool holds
# the batch at the HEADROOM_QUANTILE of its summed context (planning.launch.engine_sizing)
LAUNCH_CAP_REASON = f"launch cap for the p{HEADROOM_QUANTILE * 100:.0f} context"


def at_launch_cap(ev: Evaluation, eff: Efficiency, job: Job) -> Evaluation:
    """``ev`` at the running cap its own engine's launch command prints, where that is below the
    planned batch (:func:`~tokenplan.planning.launch.engine_sizing`: the largest batch the KV
    pool holds at the 90th percentile of its summed context, at the engine's largest memory
    fraction), so the figures describe the launch the plan prints, and the batch is said to be
    capped by :data:`LAUNCH_CAP_REASON`, not the engine's own cap; ``ev`` itself otherwise (or
    where the capped configuration does not evaluate).

    Before, a plan printed e.g. 459 running per replica for Llama-3.1-8B on H200 beside an SGLang
    launch capped at 432, and its figures were for the 459."""
    planned = planned_running(ev)
    _, running = engine_sizing(ev.config.engine, ev, job.isl, job.osl)
    if running >= planned or ev.steady.batch <= running:
        # the cap does not bind: a job smaller than one batch runs its own size (evaluated at
        # it by the search); re-evaluating it offline ran 1,637 for a job of one request
        return ev
    cap = MaxRunning(running, lifted=ev.config.max_running.lifted)
    capped = evaluate(
        ev.deployment.spec, ev.deployment.gpu, replace(ev.config, max_running=cap), eff, job.isl, job.osl, None
    )
    if not isinstance(capped, Evaluation):
        return ev
    limits = capped.steady.limits
    if limits.reason in (ENGINE_CAP, RUNNING_CAP):  # the cap is the launch's, sized by memory
        steady = replace(capped.steady, limits=replace(limits, reason=LAUNCH_CAP_REASON))
        capped = replace(capped, steady=steady)
    fixed = ev.config.max_running.requests
    if fixed is not None and fixed > running:  # the user's --max-running, lowered: say so
        said = (
            f"the running cap {fixed:,} is lowered to {running:,} per replica: at the engine's largest memory "
            f"fraction its KV pool holds {running:,} requests at the {HEADROOM_QUANTILE * 100:.0f}th percentile "
            "of their summed context"
        )
        capped = replace(capped, warnings=(*capped.warnings, said))
    return capped


def rejection_reasons(rejections: list[Rejection]) -> Counter[str]:
    """Rejections → one-line reasons with how many configurations each rejected, each said once
    for its scope: layout-independent reasons alone; a split's reasons after the split; memory
    per split and weight format, with the smallest weights per GPU (and the largest where the
    MTP draft layers add to them), the scope nearest to fitting first: where every scope rejects
    as many, it is the one said when nothing runs (it was TP1×DP8 BF16 for Llama-3.1-405B on
    8× L40S, 756 GiB per GPU, with "try more GPUs per replica" after TP8 had been tried)."""
    out: Counter[str] = Counter()
    memory: dict[str, list[Rejection]] = {}
    for r in rejections:
        cfg = r.config
        if r.kind == "memory":
            memory.setdefault(f"{cfg.layout.describe()}, {cfg.weight_dtype.value} weights", []).append(r)
        elif r.kind == "layout":
            out[f"{cfg.layout.describe()}: {r.reason}"] += 1
        elif r.kind == "kv":
            spec = f", {cfg.spec.method} k={cfg.spec.draft_tokens}" if cfg.spec is not None else ""
            out[
                f"{cfg.layout.describe()}, {cfg.weight_dtype.value} weights, {cfg.kv_dtype.value} KV{spec}: {r.reason}"
            ] += 1
        else:
            out[r.reason] += 1
    least_of = {scope: min(group, key=lambda r: r.weight_bytes_per_gpu) for scope, group in memory.items()}
    for scope in sorted(
        memory, key=lambda s: least_of[s].weight_bytes_per_gpu / max(least_of[s].usable_bytes_per_gpu, 1.0)
    ):
        group, least = memory[scope], least_of[scope]
        most = max(r.weight_bytes_per_gpu for r in group)
        extra = (
            f" ({most / GiB:.1f} GiB with the MTP draft layers)" if most > least.weight_bytes_per_gpu * 1.0001 else ""
        )
        spec_bytes = least.spec_state_bytes_per_gpu
        state = f" + {spec_bytes / GiB:.1f} GiB of speculative state" if spec_bytes > 0 else ""
        out[
            f"{scope}: does not fit: {least.weight_bytes_per_gpu / GiB:.1f} GiB of weights{state} per GPU{extra} vs "
            f"{least.usable_bytes_per_gpu / GiB:.1f} GiB usable ({fit_advice(least.config, spec_bytes)})"
        ] += len(group)
    return out


def best_with(
    result: OptionResult, table: EfficiencyTable, job: Job, predicate: Callable[[Config], bool]
) -> Candidate | None:
    """The fastest evaluated configuration of an option that satisfies ``predicate(Config)``, at
    its launch's running cap (:func:`at_launch_cap`) as the leaders are; one whose figure is an
    upper bound (:func:`measured_first`) only where no other satisfies it, so a comparison (the TP8
    line, the radix line) does not quote a figure the plan itself sets aside."""
    matching = [ev for ev in result.evaluated if predicate(ev.config)]
    measured = [ev for ev in matching if not result.unmeasured(ev)]
    ev = next(iter(measured or matching), None)
    if ev is None:
        return None
    capped = at_launch_cap(ev, table.resolve(ev.config.engine.name, result.option.gpu.architecture), job)
    return simulate(capped, table, job, result.option)


def leader_with(
    result: OptionResult, table: EfficiencyTable, job: Job, predicate: Callable[[Config], bool]
) -> Candidate | None:
    """The configuration an option's search would lead with were it restricted to the configs
    that satisfy ``predicate(Config)``: its ``JOB_SIMULATED_PER_OPTION`` fastest in the steady
    state simulated and ranked as :func:`search_option` ranks (``Candidate.ranking_wall_s``), so a
    speculative one whose τ is a prior leads only at the low end of published acceptance, and one
    whose figure is an upper bound gives way to plain decoding as there (:func:`measured_first`)."""
    matching = [ev for ev in result.evaluated if predicate(ev.config)]
    arch = result.option.gpu.architecture

    def simulated(ev: Evaluation) -> Candidate:
        return simulate(at_launch_cap(ev, table.resolve(ev.config.engine.name, arch), job), table, job, result.option)

    ranked = sorted(map(simulated, matching[:JOB_SIMULATED_PER_OPTION]), key=lambda c: c.ranking_wall_s)
    ranked = measured_first(ranked, matching, simulated, result.unmeasured)
    return ranked[0] if ranked else None
