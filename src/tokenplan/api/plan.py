"""``plan``: compare hardware options for a generation job — the Python API behind
``tokenplan plan``.

The default request answers the question tokenplan starts from: Qwen3.6-27B, 914,000
samples with thinking on (mean output 2,500 tokens), on 4× RTX PRO 6000 against 8× B200.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from tokenplan.api._common import (
    PLAN_FIGURES,
    calibration_moves,
    calibration_warnings,
    check_plan_lengths,
    check_plan_outputs,  # noqa: F401 - re-exported: the CLI checks its outputs through the plan module
    efficiency_table,
    figure_bands,
    fixed_parts,
)
from tokenplan.api._current import CurrentInputs, with_current
from tokenplan.api._provisioning import (
    at_count,
    check_targets,
    provisioned_result,
    provisioning,
    provisioning_sentences,
)
from tokenplan.api.plan_results import (
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
from tokenplan.catalog import launch_info, load_engine, load_gpu, load_model
from tokenplan.engines import Engine
from tokenplan.errors import CatalogError, InputError
from tokenplan.files.bench_tau import resolve_spec
from tokenplan.files.job import MAX_PRICE_USD_PER_GPU_HOUR, read_job_file  # noqa: F401 - MAX_PRICE…: re-exported, the CLI's --price bound
from tokenplan.job.workload import DEFAULT_ISL, DEFAULT_OSL, lognormal_with_mean
from tokenplan.perf.efficiency import EfficiencyTable
from tokenplan.perf.speculative import SpecDecode, parse_spec
from tokenplan.planning.launch import client_concurrency, launch_commands, running_limit
from tokenplan.planning.provision import DEFAULT_MAX_UNITS, Target, provision
from tokenplan.planning.rank import (
    bottleneck_text,
    describe,
    explain,
    fastest,
    formats_note,
    radix_note,
    widest_tp_leaders,
)
from tokenplan.planning.search import Job, OptionResult, best_with, leader_with, search_option
from tokenplan.planning.space import HardwareOption
from tokenplan.units import KV_DTYPES, MS_PER_S, S_PER_DAY, WEIGHT_DTYPES, parse_dtype

# The default job's lengths, stated in the output: job.workload.DEFAULT_ISL/DEFAULT_OSL (where
# they come from is said there; predict shares them).
DEFAULT_GPUS = ("4xrtx-pro-6000", "8xb200")
DEFAULT_PROVISION_GPUS = ("rtx-pro-6000", "b200")  # the same GPU types, count left to the search
DEFAULT_SPECS = ("none", "mtp:1", "mtp:3")
ENGINES = ("sglang", "vllm", "trtllm")  # the engines launch commands are written for

_GPU_OPTION = re.compile(r"^\s*(?:(\d+)\s*[x×]\s*)?([a-z0-9._\-]+)\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class PlanRequest:
    """A job and the hardware options to compare.

    Attributes:
        model: catalog name or config.json path.
        gpus: options as ``COUNTxKEY`` (``8xb200``).
        samples: requests in the job.
        isl_mean/isl_sigma/isl_cap, osl_mean/osl_sigma/osl_cap: lognormal lengths (tokens).
        engine: sglang, vllm or trtllm.
        prices: GPU key → $ per GPU-hour (overrides the catalog's typical price).
        specs: speculative settings to try (``none``, ``mtp:K[:TAU]``).
        weight_dtypes, kv_dtypes: restrict the formats searched (None = all the chip runs).
        calibration: a calibration JSON (None = the shipped fit).
        deadline_s, budget_usd: provisioning targets (seconds, USD); with either, each option
            answers the fewest GPUs of its type (whole rental units) that meet the deadline and
            the budget, or, with a budget alone, the count that finishes soonest within it; a
            count in ``gpus`` being the most to consider.
        current, measured_tok_s: the setup run now on the first option (``engine=sglang,tp=4,…``,
            see :mod:`tokenplan.api._current`) and its measured output tokens/s (all GPUs).
        tp, dp, ep: search only layouts with this TP, DP (replicas), EP (None = searched).
        max_running: every candidate launches with this running-request cap per replica
            (SGLang ``--max-running-requests``, vLLM ``--max-num-seqs``, TRT-LLM
            ``--max_batch_size``; None = the engine's default, and where it caps below memory,
            a raised cap as well).
    """

    model: str = "qwen3.6-27b"
    gpus: tuple[str, ...] = DEFAULT_GPUS
    samples: int = 914_000
    isl_mean: float = DEFAULT_ISL.mean
    isl_sigma: float = DEFAULT_ISL.sigma
    isl_cap: float | None = DEFAULT_ISL.cap
    osl_mean: float = DEFAULT_OSL.mean
    osl_sigma: float = DEFAULT_OSL.sigma
    osl_cap: float | None = DEFAULT_OSL.cap
    engine: str = "sglang"
    prices: dict[str, float] = field(default_factory=dict)
    specs: tuple[str, ...] = DEFAULT_SPECS
    weight_dtypes: tuple[str, ...] | None = None
    kv_dtypes: tuple[str, ...] | None = None
    calibration: str | None = None
    deadline_s: float | None = None
    budget_usd: float | None = None
    current: str | None = None
    measured_tok_s: float | None = None
    tp: int | None = None
    dp: int | None = None
    ep: int | None = None
    max_running: int | None = None

    @property
    def provisioning(self) -> bool:
        """True when the plan answers "how many GPUs" (a deadline or a budget is set)."""
        return self.deadline_s is not None or self.budget_usd is not None


def plan_request(job_path: str | None = None, **options: object) -> PlanRequest:
    """The request of ``tokenplan plan``: the job YAML at ``job_path`` (``--job``; None: none)
    under ``options``, PlanRequest's fields by keyword (a value given wins; None = not given).

    Raises:
        InputError, ConfigError: the job file is missing or malformed (one line naming the key).
    """
    fields = read_job_file(job_path).request_fields() if job_path else {}
    fields.update({k: v for k, v in options.items() if v is not None})
    return PlanRequest(**fields)


def parse_gpu_option(text: str) -> tuple[int | None, str]:
    """``8xb200`` → (8, "b200"); ``b200`` → (None, "b200"). Raises InputError."""
    m = _GPU_OPTION.match(text)
    if not m or (m.group(1) is not None and int(m.group(1)) < 1):
        raise InputError("gpu", text, "COUNTxKEY with COUNT ≥ 1 (e.g. 8xb200), or KEY alone (one node)")
    return (int(m.group(1)) if m.group(1) else None), m.group(2).lower()


def _options(req: PlanRequest) -> list[tuple[HardwareOption, bool]]:
    """Each option with whether its count was given (else one rental unit, ``Gpu.node_gpus``)."""
    from tokenplan.catalog import gpu_key, gpu_names

    try:
        prices = {gpu_key(k): v for k, v in req.prices.items()}
    except CatalogError as exc:
        raise InputError("price", exc.value, gpu_names()) from None
    gpus = DEFAULT_PROVISION_GPUS if req.provisioning and req.gpus == DEFAULT_GPUS else req.gpus
    out = []
    for text in dict.fromkeys(gpus):  # the same option twice is compared once
        count, key = parse_gpu_option(text)
        gpu = load_gpu(key)
        price = prices.get(gpu.key)
        if price is not None and not price > 0:
            raise InputError("price", price, "dollars per GPU-hour > 0")
        if price is None and gpu.price is not None:
            price = gpu.price.typical_usd_per_hour
        out.append((HardwareOption(gpu, count or gpu.node_gpus, price), count is not None))
    return out


def plan(req: PlanRequest) -> PlanResult:
    """Search every option and return the comparison (:class:`PlanResult`; ``to_json()`` is
    what ``tokenplan plan --json`` prints).

    Fields: ``job`` (the assumptions), ``options`` (per option: best configuration, tok/s, days,
    $, $/Mtok, bottleneck, rejected reasons, launch commands), ``recommended`` (the fastest
    option — with a deadline or budget, the fastest that meets it — with its
    ``concurrency_per_endpoint``, ``output_tok_s_total``, ``num_replicas``), and ``answer``
    (sentences).

    Raises:
        InputError, CatalogError, ConfigError: bad names, sizes or files.
    """
    model, engine, table, job, results, answers = _searched(req)
    return _with_current(req, _plan_result(req, model, engine, table, job, results, answers), table, job, results)


def _with_current(
    req: PlanRequest, result: PlanResult, table: EfficiencyTable, job: Job, results: list[OptionResult]
) -> PlanResult:
    """``result`` with ``--current`` answered (:func:`tokenplan.api._current.with_current`)."""
    return with_current(
        req.current,
        req.measured_tok_s,
        CurrentInputs(req.model, req.engine, job.isl, job.osl, req.calibration),
        req.specs,
        result,
        table,
        results,
        lambda specs: _replan(replace(req, specs=specs, current=None, measured_tok_s=None)),
    )


def _replan(req: PlanRequest) -> tuple[PlanResult, list[OptionResult]]:
    model, engine, table, job, results, answers = _searched(req)
    return _plan_result(req, model, engine, table, job, results, answers), results


def _searched_specs(req: PlanRequest, model) -> list[SpecDecode | None]:
    """The speculative settings searched: those asked for, less MTP where the model ships no MTP
    layers (plain decoding if nothing is left; a TAU naming a bench file: files.bench_tau). Raises InputError."""
    specs = list(dict.fromkeys(parse_spec(resolve_spec(s, req.isl_mean, req.osl_mean)[0]) for s in req.specs))
    if model.mtp_layers == 0:
        specs = [s for s in specs if s is None or s.method != "mtp"] or [None]
    return specs


def _spec_notes(req: PlanRequest, model) -> list[str]:
    """Say so when asked-for MTP settings were not searched (the model ships no MTP layers), and
    when plain decoding was left out of the comparison (every ``--spec`` given speculates)."""
    notes = [n for s in req.specs if (n := resolve_spec(s, req.isl_mean, req.osl_mean)[1])]
    asked = [s for s in req.specs if s.strip().lower().startswith("mtp")]
    if asked and model.mtp_layers == 0:
        notes.append(
            f"MTP was not searched: {model.name} ships no MTP layers (asked: {', '.join(asked)}); "
            "EAGLE or DFlash need a separate draft model (--spec eagle3:K[:TAU])."
        )
    if None not in _searched_specs(req, model):
        notes.append(
            "Plain decoding was not compared (every --spec given speculates): add --spec none to see "
            "whether speculative decoding pays at all."
        )
    return notes


def _radix_notes(top: OptionResult | None, table: EfficiencyTable, job: Job) -> list[str]:
    """The radix-cache line of the recommended option ``top`` (:func:`planning.rank.radix_note`),
    against its fastest configuration with the cache on and the same speculative setting."""
    if top is None or top.best is None:
        return []
    lifted = top.best.evaluation
    if not lifted.config.engine.disables_radix_cache(lifted.deployment.spec.is_hybrid, lifted.config.lift_running_cap):
        return []
    on = best_with(top, table, job, lambda c: not c.lift_running_cap and c.spec == lifted.config.spec)
    note = radix_note(top, on)
    return [note] if note else []


def _plan_result(
    req: PlanRequest,
    model,
    engine,
    table: EfficiencyTable,
    job: Job,
    results: list[OptionResult],
    answers: list | None = None,
) -> PlanResult:
    """Rank the searched options into ``plan``'s result."""
    all_tp = widest_tp_leaders(model, results, table, job, fixed_parts(req.tp, req.dp, req.ep, req.max_running))
    # a local config.json (or its folder) launches from that folder, as an absolute path: the
    # engines read a bare name as a Hugging Face repository id (load_model reads paths the same way)
    local = Path(req.model)
    repo, parsers = (
        (str((local if local.is_dir() else local.parent).resolve()), None)
        if local.exists()
        else launch_info(model.name)
    )
    engines = {e: load_engine(e) for e in ENGINES}

    def fitted_range_warnings(gpu: str, concurrency: int) -> list[str]:
        # a profile fitted elsewhere is an extrapolation: say so beside the numbers
        return calibration_warnings(
            req.calibration,
            {
                "engine": engine.name,
                "gpu": gpu,
                "model": model.name,
                "isl_tokens": job.isl.mean,
                "osl_tokens": job.osl.mean,
                "concurrency": concurrency,
            },
        )

    options = tuple(
        _plan_option(r, repo, model.native_weight_dtype, parsers, engines, fitted_range_warnings, job) for r in results
    )
    # With a deadline or budget, the recommendation is the fastest option that meets it (all of
    # them when none does: the answer then says so).
    eligible = None if answers is None else [r for r, (_, p) in zip(results, answers) if p.chosen is not None]
    top = fastest(eligible or results)
    recommended = None
    if top is not None and top.best is not None:  # fastest picks among the options where something runs
        ev = top.best.evaluation
        recommended = Recommended(
            top.option.label, client_concurrency(ev), ev.output_tok_s_total, ev.config.layout.dp, describe(top.best)
        )
    prov = provisioning(req.deadline_s, req.budget_usd, answers) if answers is not None else None
    answer = (
        calibration_moves(req.calibration)
        + (provisioning_sentences(prov) if prov else [])  # what moved, first
        + explain(results, all_tp, eligible)
        + _spec_notes(req, model)
    )
    return PlanResult(
        model=model.name,
        engine=engine.name,
        efficiency=table.provenance,
        provisioning=prov,
        job=PlanJob(
            samples=req.samples,
            isl=job.isl.describe(),
            osl=job.osl.describe(),
            isl_mean_tokens=job.isl.mean,
            osl_mean_tokens=job.osl.mean,
            osl_cap_tokens=job.osl.cap_tokens,  # generate --plan sends it as max_tokens
            output_tokens=job.osl.mean * req.samples,
        ),
        options=options,
        recommended=recommended,
        answer=tuple(
            answer
            + _radix_notes(top, table, job)
            + (
                [n]
                if top
                and (
                    n := formats_note(
                        top, leader_with(top, table, job, lambda c: c.weight_dtype.value == c.kv_dtype.value == "bf16")
                    )
                )
                else []
            )
        ),
        configurations_evaluated=sum(r.configurations for r in results),
    )


def _plan_option(
    r: OptionResult,
    repo: str,
    native: str,
    parsers: object,
    engines: dict[str, Engine],
    extra_warnings: Callable[[str, int], list[str]],
    job: Job | None = None,
) -> PlanOption:
    """One option's row; ``extra_warnings(gpu key, concurrency per endpoint)`` adds the
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
    concurrency = client_concurrency(ev)
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
        weight_bytes_per_gpu=ev.memory.weight_bytes_per_gpu,
        kv_capacity_tokens=ev.memory.kv_capacity_tokens,
        warnings=tuple(ev.warnings) + tuple(extra_warnings(r.option.gpu.key, concurrency)),
        non_default_settings=ev.config.lift_running_cap,
        concurrency_per_endpoint=concurrency,
        max_running_requests=running_limit(ev),
        memory_allocation=ev.memory.allocation(running_limit(ev)),
        gpu_bytes=ev.memory.gpu_bytes,
        launch=launch_commands(ev, repo, native, parsers, engines, job.isl if job else None, job.osl if job else None),
        alternatives=tuple(
            Alternative(describe(c), c.evaluation.output_tok_s_total, c.wall_s / S_PER_DAY, c.cost.usd)
            for c in r.ranked[1:5]
        ),
    )
    return replace(option, chosen=replace(chosen, bands=figure_bands(chosen, ev, PLAN_FIGURES)))


REPORT_CHARTS = ("throughput", "cost_time", "memory", "speedup")  # sections plan_report_data computes


def _searched(req: PlanRequest) -> tuple:
    """(model spec, engine facts, efficiency table, job, every option searched, provisioning
    answers or None) — what ``plan`` computes before it ranks. Raises what ``plan`` raises."""
    if req.samples < 1:
        raise InputError("samples", req.samples, "an integer ≥ 1")
    check_plan_lengths(req, PlanRequest)
    check_targets(req.deadline_s, req.budget_usd)
    if req.current is not None and req.provisioning:
        raise InputError("current", req.current, "a plan of fixed GPU counts (leave out --deadline and --budget)")
    if req.measured_tok_s is not None and req.current is None:
        raise InputError("measured-tok-s", req.measured_tok_s, "a figure with --current (the setup it was measured on)")
    model = load_model(req.model)
    engine = load_engine(req.engine)
    table = efficiency_table(req.calibration)
    job = Job(
        req.samples,
        lognormal_with_mean(req.isl_mean, req.isl_sigma, req.isl_cap),
        lognormal_with_mean(req.osl_mean, req.osl_sigma, req.osl_cap),
    )
    specs = _searched_specs(req, model)
    weights = (
        tuple(parse_dtype(d, "weight_dtype", WEIGHT_DTYPES) for d in req.weight_dtypes) if req.weight_dtypes else None
    )
    kvs = tuple(parse_dtype(d, "kv_dtype", KV_DTYPES) for d in req.kv_dtypes) if req.kv_dtypes else None
    cut = engine.vision_cut(model.vision_layers, model.vision_hidden)
    fixed = fixed_parts(req.tp, req.dp, req.ep, req.max_running)

    def search(opt: HardwareOption) -> OptionResult:
        return search_option(model, opt, engine, table, job, specs, weights, kvs, cut, fixed)

    options = _options(req)
    if not req.provisioning:
        return model, engine, table, job, [search(opt) for opt, _ in options], None
    target = Target(req.deadline_s, req.budget_usd)
    answers = []
    for opt, count_given in options:
        unit = opt.gpu.node_gpus
        most = opt.count if count_given else DEFAULT_MAX_UNITS * unit
        answers.append((opt, provision(at_count(search, opt), target, unit, max(most, unit))))
    return model, engine, table, job, [provisioned_result(p) for _, p in answers], answers


def plan_report_data(req: PlanRequest, charts: tuple[str, ...] = REPORT_CHARTS) -> PlanReportData:
    """``plan(req)`` and the numbers behind its charts (:class:`PlanReportData`), for the HTML
    and PNG reports and the terminal chart.

    Fields: ``plan`` (exactly ``plan(req)``), ``assumptions`` (per option: GPU figures, price and
    its source, efficiency factors), and, for each name in ``charts``: ``throughput`` (per option
    and layout, output tok/s against concurrency with the memory-limited maximum; see
    :mod:`tokenplan.planning.curves`), ``cost_time`` (every configuration's job days and $,
    Pareto frontier marked), ``memory`` (bytes per GPU of each chosen configuration),
    ``speedup`` (speculative decoding against none, by concurrency). Units are in the key names
    (``_s``, ``_bytes``, ``_usd``); concurrency counts requests in flight over all replicas.

    Raises:
        InputError, CatalogError, ConfigError: as ``plan``.
    """
    from tokenplan.planning import curves

    unknown = set(charts) - set(REPORT_CHARTS)
    if unknown:
        raise InputError("chart", sorted(unknown)[0], REPORT_CHARTS)
    model, engine, table, job, results, answers = _searched(req)

    def chart(name: str, points) -> tuple | None:  # noqa: ANN001 - an iterable of curve points
        return tuple(points()) if name in charts else None

    return PlanReportData(
        plan=_with_current(req, _plan_result(req, model, engine, table, job, results, answers), table, job, results),
        assumptions=_assumptions(req, table, results),
        throughput=chart("throughput", lambda: (c for r in results for c in curves.layout_curves(r, table, job))),
        cost_time=chart("cost_time", lambda: curves.cost_points(results, table, job)),
        memory=chart("memory", lambda: (m for m in map(curves.memory_bars, results) if m is not None)),
        speedup=chart("speedup", lambda: (c for r in results for c in curves.speedup_curves(r, table, job))),
    )


def _assumptions(req: PlanRequest, table: EfficiencyTable, results: list[OptionResult]) -> Assumptions:
    """What the plan assumed per option: datasheet figures, the price and where it comes from,
    and the efficiency factors applied (fractions of peak, seconds)."""
    options = []
    for r in results:
        gpu = r.option.gpu
        if gpu.key in req.prices:
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
                efficiency=table.resolve(req.engine, gpu.architecture).as_dict(),
            )
        )
    return Assumptions(engine=req.engine, efficiency_source=table.provenance, options=tuple(options))
