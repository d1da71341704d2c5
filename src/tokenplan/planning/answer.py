"""``plan``'s answer: every hardware option searched (at its count, or at the fewest GPUs that meet
a deadline or budget), ranked, and assembled into :class:`~tokenplan.planning.results.PlanResult`
with its notes; the assumptions behind it for the report.

Everything arrives as values (:class:`Question`: the model's spec, the engine, the efficiency
table, the job, the options, ...) and two callables: the error bands of a result's figures
(:data:`BandsOf`) and the calibration profile's range warnings (:data:`RangeWarnings`), so that
this package reads no catalog, calibration or file.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from tokenplan.arch.spec import ModelSpec
from tokenplan.engines import Engine
from tokenplan.engines.launch import PREFIX_CACHE_OFF
from tokenplan.job.evaluate import Evaluation
from tokenplan.perf.efficiency import EfficiencyTable
from tokenplan.perf.speculative import SpecDecode
from tokenplan.planning import curves
from tokenplan.planning.aside import aside_notes
from tokenplan.planning.launch import (
    client_concurrency,
    launch_caps,
    launch_commands,
    launch_sizing,
    planned_running,
    server_count,
)
from tokenplan.planning.provision import DEFAULT_MAX_UNITS, Provision, Target, provision
from tokenplan.planning.rank import (
    bottleneck_text,
    describe,
    explain,
    fastest,
    formats_note,
    graph_cap_note,
    radix_note,
    widest_tp_leaders,
)
from tokenplan.planning.results import (
    Alternative,
    AssumedOption,
    Assumptions,
    ChosenConfiguration,
    PlanJob,
    PlanOption,
    PlanReportData,
    PlanResult,
    Recommended,
)
from tokenplan.planning.search import Candidate, Job, OptionResult, best_with, leader_with, search_option
from tokenplan.planning.space import Fixed, HardwareOption
from tokenplan.planning.targets import at_count, provisioned_result, provisioning, provisioning_sentences
from tokenplan.results import Bands
from tokenplan.units import MS_PER_S, S_PER_DAY, Dtype

# figure key → (band metric, the figure scales as 1 / the metric's quantity): see calibration.bands
# (the mean TTFT over arrivals carries the band of the runs' mean TTFTs, the median request's that
# of the medians: calibration.bands.ttft_metric)
_RATE, _INVERSE_RATE = ("rate", False), ("rate", True)
PREDICT_FIGURES = {
    "output_tok_s_total": _RATE,
    "output_tok_s_per_gpu": _RATE,
    "tpot_ms": _INVERSE_RATE,
    "ttft_ms": ("ttft_mean", False),
    "ttft_median_ms": ("ttft", False),
}
PLAN_FIGURES = {
    **PREDICT_FIGURES,
    "wall_days": _INVERSE_RATE,
    "usd": _INVERSE_RATE,
    "gpu_hours": _INVERSE_RATE,
    "usd_per_mtok": _INVERSE_RATE,
}

# (a result whose attributes hold the figures, its evaluation, figure → (band metric, inverse))
# → the 80 % bands of those figures, or None without a band table
BandsOf = Callable[[object, Evaluation, Mapping[str, tuple[str, bool]]], Bands | None]
# (GPU key, requests in flight per endpoint) → the calibration profile's range warnings there
RangeWarnings = Callable[[str, int], list[str]]
_Point = TypeVar("_Point")  # one point of a report chart (planning.curves)


@dataclass(frozen=True)
class Question:
    """What ``plan`` is asked, resolved to values.

    Attributes:
        model, engine, table, job: the model's spec, the planned engine, the efficiency table and
            the job (requests, lengths in tokens).
        options: each hardware option with whether its count was given (else one rental unit).
        specs: the speculative settings asked for, parsed (before MTP is dropped for a model
            without MTP layers).
        weights, kvs: the formats to search (None = all the chip runs). fixed: what is not searched.
        deadline_s, budget_usd: provisioning targets (seconds, US dollars; None = none).
        repo, parsers: where the launch commands load the model from, and its reasoning parser(s);
            trust_remote_code: the commands let the engine run the repository's own code.
        base_repo: where the user named a checkpoint of another format than the catalog's BF16
            release (``Qwen/Qwen3.6-27B-FP8``), that release's repository: an option planned in
            another weight format than the checkpoint's launches from it (None otherwise).
        engines: every engine a launch command is written for.
        first_notes: the answer's first lines (what the calibration profile moves);
            spec_notes: where a TAU came from (a bench file), MTP settings not searched.
        priced: the GPU keys given a price (``--price`` / the job file) as typed.
        spec_measured: the user's run measured the speculative regime (``--current`` re-planned at
            its implied τ): no speculative figure is set aside as an upper bound.
        pp_measured: some fit row runs the engine with PP > 1 (else a PP layout ranks after the
            fastest measured one, ``planning.measured``).
    """

    model: ModelSpec
    engine: Engine
    table: EfficiencyTable
    job: Job
    options: tuple[tuple[HardwareOption, bool], ...]
    specs: tuple[SpecDecode | None, ...]
    weights: tuple[Dtype, ...] | None
    kvs: tuple[Dtype, ...] | None
    fixed: Fixed
    deadline_s: float | None
    budget_usd: float | None
    repo: str
    parsers: object
    engines: Mapping[str, Engine]
    first_notes: tuple[str, ...] = ()
    spec_notes: tuple[str, ...] = ()
    priced: frozenset[str] = frozenset()
    base_repo: str | None = None
    spec_measured: bool = False
    trust_remote_code: bool = False
    pp_measured: bool = True

    def launch_source(self, weight_dtype: Dtype) -> tuple[str, str]:
        """(repository, its checkpoint's weight format) a launch of ``weight_dtype`` loads: the
        named checkpoint where the format is its own (or no BF16 release stands behind it), else
        the BF16 release it was made from (an FP8 checkpoint cannot be loaded as BF16)."""
        native = self.model.native_weight_dtype
        if self.base_repo is None or weight_dtype.value == native:
            return self.repo, native
        return self.base_repo, Dtype.BF16.value

    @property
    def searched_specs(self) -> list[SpecDecode | None]:
        """The speculative settings searched: those asked for, less MTP where the model ships no
        MTP layers (plain decoding if nothing is left)."""
        specs = list(self.specs)
        if self.model.mtp_layers == 0:
            specs = [s for s in specs if s is None or s.method != "mtp"] or [None]
        return specs


@dataclass(frozen=True)
class Searched:
    """Every option searched (at the count a provisioning answer settled on), and with a deadline
    or budget the answer per option (None without)."""

    question: Question
    results: list[OptionResult]
    answers: list[tuple[HardwareOption, Provision]] | None


def search(q: Question) -> Searched:
    """Search every option of ``q``: at its count, or — with a deadline or budget — at the fewest
    GPUs of its type (whole rental units, up to its count when given, else
    ``DEFAULT_MAX_UNITS`` units) that meet them (:func:`~tokenplan.planning.provision.provision`)."""
    specs = q.searched_specs
    cut = q.engine.vision_cut(q.model.vision_layers, q.model.vision_hidden)

    def one(opt: HardwareOption) -> OptionResult:
        flags = (q.weights, q.kvs, cut, q.fixed, q.spec_measured, q.pp_measured)
        return search_option(q.model, opt, q.engine, q.table, q.job, specs, *flags)

    if q.deadline_s is None and q.budget_usd is None:
        return Searched(q, [one(opt) for opt, _ in q.options], None)
    target = Target(q.deadline_s, q.budget_usd)
    answers = []
    for opt, count_given in q.options:
        unit = opt.gpu.node_gpus
        most = opt.count if count_given else DEFAULT_MAX_UNITS * unit
        answers.append((opt, provision(at_count(one, opt), target, unit, max(most, unit))))
    return Searched(q, [provisioned_result(p) for _, p in answers], answers)


def answer(s: Searched, bands: BandsOf, range_warnings: RangeWarnings) -> PlanResult:
    """Rank the searched options into ``plan``'s result: per option its chosen configuration
    (with bands and range warnings), the recommendation (the fastest option; with a deadline or
    budget, the fastest that meets it), the provisioning rows and the answer in sentences."""
    q, results, answers = s.question, s.results, s.answers
    all_tp = widest_tp_leaders(q.model, results, q.table, q.job, q.fixed)
    options = tuple(_plan_option(r, q, bands, range_warnings) for r in results)
    # With a deadline or budget, the recommendation is the fastest option that meets it (all of
    # them when none does: the answer then says so).
    eligible = None if answers is None else [r for r, (_, p) in zip(results, answers) if p.chosen is not None]
    top = fastest(eligible or results)
    recommended = None
    if top is not None and top.best is not None:  # fastest picks among the options where something runs
        ev, best = top.best.evaluation, top.best
        figures = (client_concurrency(ev), ev.output_tok_s_total, ev.config.layout.dp, describe(best), server_count(ev))
        recommended = Recommended(top.option.label, *figures)
    prov = provisioning(q.deadline_s, q.budget_usd, answers, bands, PLAN_FIGURES) if answers is not None else None
    lines = (
        list(q.first_notes)
        + (provisioning_sentences(prov, q.job.startup_s) if prov else [])  # what moved, first
        + explain(results, all_tp, eligible)
        + _spec_notes(q)
        + _radix_notes(top, q)
        + [note for note in [graph_cap_note(top, q.table, q.job)] if note]
        + _formats_notes(top, q)
        + aside_notes(results)
    )
    job = q.job
    return PlanResult(
        model=q.model.name,
        engine=q.engine.name,
        efficiency=q.table.provenance,
        provisioning=prov,
        job=PlanJob(
            samples=job.num_requests,
            isl=job.isl.describe(),
            osl=job.osl.describe(),
            isl_mean_tokens=job.isl.mean,
            osl_mean_tokens=job.osl.mean,
            osl_cap_tokens=job.osl.cap_tokens,  # generate --plan sends it as max_tokens
            output_tokens=job.osl.mean * job.num_requests,
            startup_s=job.startup_s,
        ),
        options=options,
        recommended=recommended,
        answer=tuple(lines),
        configurations_evaluated=sum(r.configurations for r in results),
    )


def _spec_notes(q: Question) -> list[str]:
    """Where a TAU came from and MTP settings not searched (``q.spec_notes``), and when plain
    decoding was left out of the comparison (every ``--spec`` given speculates)."""
    notes = list(q.spec_notes)
    if None not in q.searched_specs:
        notes.append(
            "Plain decoding was not compared (every --spec given speculates): add --spec none to see "
            "whether speculative decoding pays at all."
        )
    return notes


def _radix_notes(top: OptionResult | None, q: Question) -> list[str]:
    """The radix-cache line of the recommended option ``top`` (:func:`planning.rank.radix_note`),
    against its fastest configuration with the cache on and the same speculative setting."""
    if top is None or top.best is None:
        return []
    lifted = top.best.evaluation
    if not lifted.config.engine.disables_radix_cache(lifted.deployment.spec.is_hybrid, lifted.config.max_running):
        return []
    on = best_with(top, q.table, q.job, lambda c: not c.max_running.lifted and c.spec == lifted.config.spec)
    note = radix_note(top, on)
    return [note] if note else []


def _formats_notes(top: OptionResult | None, q: Question) -> list[str]:
    """The formats line of the recommended option (:func:`planning.rank.formats_note`), against
    its fastest configuration with BF16 weights and KV (and with FP8 weights, where BF16 ones lead)."""
    if not top:
        return []
    bf16 = leader_with(top, q.table, q.job, lambda c: c.weight_dtype.value == c.kv_dtype.value == "bf16")
    fp8 = leader_with(top, q.table, q.job, lambda c: c.weight_dtype.value == "fp8")  # said where BF16 weights lead
    return [note] if (note := formats_note(top, bf16, fp8)) else []


def _plan_option(r: OptionResult, q: Question, bands: BandsOf, range_warnings: RangeWarnings) -> PlanOption:
    """One option's row; ``range_warnings(gpu key, concurrency per endpoint)`` adds the
    calibration profile's range warnings to a configuration that runs."""
    option = PlanOption(
        option=r.option.label,
        gpu=r.option.gpu.key,
        count=r.option.count,
        usd_per_gpu_hour=r.option.usd_per_gpu_hour,
        rejected=r.rejected,
        not_searched=tuple(r.not_searched),
        configurations=r.configurations,
    )
    b = r.best
    if b is None:
        return option
    ev, s = b.evaluation, b.evaluation.steady
    (repo, native), job = q.launch_source(ev.config.weight_dtype), q.job
    sizing = launch_sizing(ev, job.isl, job.osl, q.engines)  # once: the caps and the commands read it
    launched, short = launch_caps(ev, sizing, q.engines)
    concurrency = client_concurrency(ev, launched)
    chosen = ChosenConfiguration(
        best=describe(b),
        layout=ev.config.layout.describe(),
        weight_dtype=ev.config.weight_dtype.value,
        kv_dtype=ev.config.kv_dtype.value,
        spec=ev.config.spec.describe() if ev.config.spec else "none",
        output_tok_s_total=ev.output_tok_s_total,
        output_tok_s_per_gpu=ev.output_tok_s_per_gpu,
        wall_days=b.wall_s / S_PER_DAY,
        drain_hours=b.time.drain_s / 3600,
        gpu_hours=b.cost.gpu_hours,
        usd=b.cost.usd,
        usd_per_mtok=b.cost.usd_per_mtok,
        bottleneck=bottleneck_text(b),
        batch_per_replica=s.batch,
        batch_limit_reason=s.batch_reason,
        tpot_ms=s.tpot_s * MS_PER_S,
        ttft_ms=s.ttft_s * MS_PER_S,
        ttft_median_ms=s.median_ttft_s * MS_PER_S,
        weight_bytes_per_gpu=ev.memory.weight_bytes_per_gpu,
        kv_capacity_tokens=None
        if (kv := ev.memory.kv_tokens_reported(planned_running(ev))) is None
        else kv * ev.config.layout.dp,
        warnings=tuple(ev.warnings) + tuple(range_warnings(r.option.gpu.key, concurrency)) + short,
        non_default_settings=ev.config.max_running.lifted,
        concurrency_per_endpoint=concurrency,
        max_running_requests=planned_running(ev),
        memory_allocation=ev.memory.allocation(planned_running(ev)),
        gpu_bytes=ev.memory.gpu_bytes,
        launch=launch_commands(ev, repo, native, q.parsers, q.engines, sizing=sizing, remote_code=q.trust_remote_code),
        alternatives=tuple(
            Alternative(describe(c), c.evaluation.output_tok_s_total, c.wall_s / S_PER_DAY, c.cost.usd)
            for c in _distinct(r.ranked, 5)[1:]
        ),
    )
    return replace(option, chosen=replace(chosen, bands=bands(chosen, ev, PLAN_FIGURES)))


def _distinct(ranked: Sequence[Candidate], most: int) -> list[Candidate]:
    """The first ``most`` of ``ranked`` without a configuration that repeats an earlier one but
    for a prefix cache turned off at the same figures (a fixed running cap the state slots hold
    either way: the first alternative read as the choice again, at the same tok/s and cost)."""
    seen, kept = set(), []
    for c in ranked:
        key = (describe(c).replace(PREFIX_CACHE_OFF, ""), c.evaluation.output_tok_s_total, c.wall_s, c.cost.usd)
        if key not in seen:
            seen.add(key)
            kept.append(c)
            if len(kept) == most:
                break
    return kept


def assumptions(s: Searched) -> Assumptions:
    """What the plan assumed per option: datasheet figures, the price and where it comes from,
    and the efficiency factors applied (fractions of peak, seconds)."""
    q, options = s.question, []
    for r in s.results:
        gpu = r.option.gpu
        if gpu.key in q.priced:
            price_source = "given with --price / the job file"
        elif gpu.price is not None:
            price_source = f"catalog typical price ({gpu.price.source}, {gpu.price.as_of})"
        else:
            price_source = "no public price known"
        options.append(
            AssumedOption(
                option=r.option.label,
                gpu=gpu.name,
                count=r.option.count,
                usd_per_gpu_hour=r.option.usd_per_gpu_hour,
                price_source=price_source,
                memory_bytes=gpu.memory_bytes,
                hbm_bytes_per_s=gpu.hbm_bytes_per_s,
                dense_flops_per_s=dict(gpu.dense_flops_per_s),
                scaleup=gpu.scaleup.name,
                scaleup_bytes_per_s=gpu.scaleup.bytes_per_s,
                efficiency=q.table.resolve(q.engine.name, gpu.architecture).as_dict(),
            )
        )
    return Assumptions(engine=q.engine.name, efficiency_source=q.table.provenance, options=tuple(options))


REPORT_CHARTS = ("throughput", "cost_time", "memory", "speedup")  # the charts report_data computes


def report_data(s: Searched, plan: PlanResult, charts: tuple[str, ...] = REPORT_CHARTS) -> PlanReportData:
    """``plan`` (the answer of ``s``) with its assumptions and the numbers behind each chart named
    in ``charts`` (:class:`~tokenplan.planning.results.PlanReportData`; the others None)."""
    results, table, job = s.results, s.question.table, s.question.job

    def chart(name: str, points: Callable[[], Iterable[_Point]]) -> tuple[_Point, ...] | None:
        return tuple(points()) if name in charts else None

    return PlanReportData(
        plan=plan,
        assumptions=assumptions(s),
        throughput=chart("throughput", lambda: (c for r in results for c in curves.layout_curves(r, table, job))),
        cost_time=chart("cost_time", lambda: curves.cost_points(results, table, job)),
        memory=chart("memory", lambda: (m for m in map(curves.memory_bars, results) if m is not None)),
        speedup=chart("speedup", lambda: (c for r in results for c in curves.speedup_curves(r, table, job))),
    )
