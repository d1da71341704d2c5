"""``plan``: compare hardware options for a generation job — the Python API behind
``tokenplan plan``.

The default request answers the question tokenplan starts from: Qwen3.6-27B, 914,000
samples with thinking on (mean output 2,500 tokens), on 4× RTX PRO 6000 against 8× B200.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path

from tokenplan.api.bands import figure_bands, pipeline_measured
from tokenplan.api.job_request import parse_gpu_option, prices_by_key
from tokenplan.api.resolve import PredictRequest, read_profile, resolve
from tokenplan.arch.draft import SEPARATE_DRAFTERS
from tokenplan.calibration.fitted_range import Profile
from tokenplan.catalog import base_repo_of, gpu_key, launch_info, load_engine, load_gpu, load_model
from tokenplan.errors import CatalogError, InputError, import_extra, shown
from tokenplan.files.bench_tau import resolve_spec
from tokenplan.files.drafter import attach_drafter
from tokenplan.job.workload import DEFAULT_ISL, DEFAULT_OSL, check_stated_lengths, lognormal_with_mean
from tokenplan.perf.speculative import parse_spec
from tokenplan.planning.answer import REPORT_CHARTS, Question, Searched, answer, report_data, search
from tokenplan.planning.current import Current, current_entry, parse_current, with_current
from tokenplan.planning.results import PlanReportData, PlanResult
from tokenplan.planning.search import SERVER_STARTUP_S, Job, OptionResult
from tokenplan.planning.space import HardwareOption, fixed_parts
from tokenplan.planning.targets import check_targets
from tokenplan.units import (  # noqa: F401 - MAX_PRICE…: re-exported, the CLI's --price bound
    KV_DTYPES,
    MAX_GPUS,
    MAX_PRICE_USD_PER_GPU_HOUR,
    MAX_SAMPLES,
    WEIGHT_DTYPES,
    parse_dtype,
)

# The default job's lengths, stated in the output: job.workload.DEFAULT_ISL/DEFAULT_OSL (where
# they come from is said there; predict shares them).
DEFAULT_GPUS = ("4xrtx-pro-6000", "8xb200")
DEFAULT_PROVISION_GPUS = ("rtx-pro-6000", "b200")  # the same GPU types, count left to the search
DEFAULT_SPECS = ("none", "mtp:1", "mtp:3")
ENGINES = ("sglang", "vllm", "trtllm")  # the engines launch commands are written for

MAX_STARTUP_S = 86_400.0  # a server start-up longer than a day is a typo (plan --startup)


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
            see :func:`tokenplan.planning.current.parse_current`) and its measured output tokens/s
            (all GPUs).
        tp, dp, ep, pp: search only layouts with this TP, DP (replicas), EP, PP (None = searched).
        max_running: every candidate launches with this running-request cap per replica
            (SGLang ``--max-running-requests``, vLLM ``--max-num-seqs``, TRT-LLM
            ``--max_batch_size``; None = the engine's default, and where it caps below memory,
            a raised cap as well).
        draft_model: the drafter of the eagle/eagle3/dflash settings in ``specs``: a checkpoint
            folder whose config.json gives its shape, or a repository id for the launch commands
            (``files.drafter``).
        startup_s: the servers' start-up (seconds) each option's wall time and cost count before
            the first request (``planning.search.SERVER_STARTUP_S``, 215 s; 0 leaves it out).
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
    pp: int | None = None
    max_running: int | None = None
    draft_model: str | None = None
    startup_s: float = SERVER_STARTUP_S

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
    given: dict = {k: v for k, v in options.items() if v is not None}
    if not job_path:
        return PlanRequest(**given)
    from tokenplan.api.job_request import check_job_names  # only for --job
    from tokenplan.files.job import read_job_file  # its pydantic models: only for --job

    fields = read_job_file(job_path).request_fields()
    req = PlanRequest(**{**fields, **given})
    check_job_names(job_path, fields, given, req.isl_mean, req.osl_mean)
    return req


def _options(req: PlanRequest) -> list[tuple[HardwareOption, bool]]:
    """Each option with whether its count was given (else one rental unit, ``Gpu.node_gpus``)."""
    try:
        prices = prices_by_key(req.prices)  # InputError: two names of one GPU priced apart
    except CatalogError as exc:
        raise CatalogError("price", str(exc.value), exc.known, exc.suggestions) from None  # --gpu's hint
    gpus = DEFAULT_PROVISION_GPUS if req.provisioning and req.gpus == DEFAULT_GPUS else req.gpus
    out, seen = [], set()
    for text in dict.fromkeys(gpus):  # the same option twice is compared once
        count, key = parse_gpu_option(text)
        gpu = load_gpu(key)
        if (count, gpu.key) in seen:  # spelled another way (8xH200, 8xh200; h200-sxm for h200)
            continue
        seen.add((count, gpu.key))
        price = prices.get(gpu.key)
        if price is not None and not price > 0:
            raise InputError("price", price, "dollars per GPU-hour > 0")
        if price is None and gpu.price is not None:
            price = gpu.price.typical_usd_per_hour
        out.append((HardwareOption(gpu, count or gpu.node_gpus, price), count is not None))
    return out


def _unused_prices(req: PlanRequest, options: tuple[tuple[HardwareOption, bool], ...]) -> list[str]:
    """A note for each ``--price`` of a GPU no option plans (it used to be dropped silently)."""
    planned = {o.gpu.key for o, _ in options}
    unused = sorted({gpu_key(k) for k in req.prices} - planned)
    if not unused:
        return []
    names = ", ".join(unused)
    return [
        f"--price for {names} not used: no --gpu option is {names} (the plan compares {', '.join(sorted(planned))})"
    ]


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
    profile, searched = _searched(req)
    return _answered(req, profile, searched)


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
    unknown = set(charts) - set(REPORT_CHARTS)
    if unknown:
        raise InputError("chart", sorted(unknown)[0], REPORT_CHARTS)
    profile, searched = _searched(req)
    return report_data(searched, _answered(req, profile, searched), charts)


def _searched(
    req: PlanRequest, profile: Profile | None = None, spec_measured: bool = False, pp_measured: bool = False
) -> tuple[Profile, Searched]:
    """The request checked and resolved once (names, the calibration profile unless ``profile``
    is the one already read, the job, the formats and speculative settings) into a
    :class:`~tokenplan.planning.answer.Question`, and every option searched; ``spec_measured``: the
    user's run measured the speculative regime of the planned engine (``Question.spec_measured``),
    ``pp_measured`` a pipeline-parallel layout of it (:func:`_pp_measured_here`). Raises what
    ``plan`` raises."""
    if not 1 <= req.samples <= MAX_SAMPLES:
        raise InputError("samples", req.samples, f"an integer from 1 to {MAX_SAMPLES:,}")
    check_stated_lengths("isl", req.isl_mean, req.isl_sigma, req.isl_cap, DEFAULT_ISL)
    check_stated_lengths("osl", req.osl_mean, req.osl_sigma, req.osl_cap, DEFAULT_OSL)
    check_targets(req.deadline_s, req.budget_usd)
    if not (isinstance(req.startup_s, (int, float)) and 0 <= req.startup_s <= MAX_STARTUP_S):
        raise InputError("startup", shown(req.startup_s), "a duration from 0 to 1 d (e.g. 4min, 0)")
    if req.current is not None and req.provisioning:
        raise InputError("current", req.current, "a plan of fixed GPU counts (leave out --deadline and --budget)")
    if req.measured_tok_s is not None and req.current is None:
        raise InputError(
            "measured-tok-s", shown(req.measured_tok_s), "a figure with --current (the setup it was measured on)"
        )
    model, engine = load_model(req.model), load_engine(req.engine)
    profile = profile or read_profile(req.calibration)
    isl = lognormal_with_mean(req.isl_mean, req.isl_sigma, req.isl_cap)
    # the output cap is the max_tokens generate --plan sends with each request
    osl = replace(
        lognormal_with_mean(req.osl_mean, req.osl_sigma, req.osl_cap), cap_is_max_tokens=req.osl_cap is not None
    )
    parsed, spec_notes = [], []
    for text in req.specs:  # a TAU naming a bench file: files.bench_tau
        resolved, note = resolve_spec(text, req.isl_mean, req.osl_mean)
        parsed.append(parse_spec(resolved))
        spec_notes += [note] if note else []
    if (mtp := [s for s in req.specs if s.strip().lower().startswith("mtp")]) and model.mtp_layers == 0:
        said = "asked" if req.specs != DEFAULT_SPECS else "the --spec defaults"  # no --spec given
        spec_notes.append(
            f"MTP was not searched: {model.name} ships no MTP layers ({said}: {', '.join(mtp)}); "
            "EAGLE or DFlash need a separate draft model (--spec eagle3:K[:TAU])."
        )
    drafting = sorted({s.method for s in parsed if s is not None and s.method != "mtp"})
    if req.draft_model is not None and len(drafting) > 1:  # one checkpoint drafts for one method
        raise InputError("draft_model", req.draft_model, f"the drafter of one method, not of {' and '.join(drafting)}")
    specs = [attach_drafter(s, req.draft_model) if s and s.method != "mtp" else s for s in parsed]
    if req.draft_model is not None and not drafting and not _drafts(req):
        attach_drafter(None, req.draft_model)  # refused: no setting loads a drafter
    weights = (
        tuple(parse_dtype(d, "weight_dtype", WEIGHT_DTYPES) for d in req.weight_dtypes) if req.weight_dtypes else None
    )
    kvs = tuple(parse_dtype(d, "kv_dtype", KV_DTYPES) for d in req.kv_dtypes) if req.kv_dtypes else None
    fixed = fixed_parts(req.tp, req.dp, req.ep, req.max_running, req.pp)
    options = tuple(_options(req))
    repo, parsers, remote_code = launch_info(req.model, model.name)
    question = Question(
        model=model,
        engine=engine,
        table=profile.table,
        job=Job(req.samples, isl, osl, float(req.startup_s)),
        options=options,
        specs=tuple(dict.fromkeys(specs)),
        weights=weights,
        kvs=kvs,
        fixed=fixed,
        deadline_s=req.deadline_s,
        budget_usd=req.budget_usd,
        repo=repo,
        base_repo=base_repo_of(req.model, model.name),
        parsers=parsers,
        trust_remote_code=remote_code,
        engines={e: load_engine(e) for e in ENGINES},
        first_notes=(
            *profile.moves_for(req.engine, {o.gpu.architecture for o, _ in options}),
            *_unused_prices(req, options),
        ),
        spec_notes=tuple(spec_notes),
        priced=frozenset(prices_by_key(req.prices)),  # catalog keys: b200_sxm=7 prices b200
        spec_measured=spec_measured,
        pp_measured=pp_measured or pipeline_measured(engine.name) or _pp_measured_here(req),
    )
    return profile, search(question)


def _answered(req: PlanRequest, profile: Profile, searched: Searched) -> PlanResult:
    """The searched options ranked into ``plan``'s result (:func:`planning.answer.answer`),
    with ``--current`` answered (:func:`planning.current.with_current`)."""
    q = searched.question

    def range_warnings(gpu: str, concurrency: int) -> list[str]:
        # a profile fitted elsewhere is an extrapolation: say so beside the numbers
        point: dict[str, object] = {"engine": q.engine.name, "gpu": gpu, "architecture": load_gpu(gpu).architecture}
        point |= {"model": q.model.name, "isl_tokens": q.job.isl.mean}
        return profile.range_warnings({**point, "osl_tokens": q.job.osl.mean, "concurrency": concurrency})

    result = answer(searched, figure_bands, range_warnings)
    if req.current is None:
        return result

    current = _current(req, req.current, searched.results[0].option, profile)
    # the run measured this engine speculating: its figures are no longer an unmeasured upper bound
    measured_here = current.config.engine.name == q.engine.name and current.config.spec is not None
    pp_here = _pp_measured_here(req)

    def replan(specs: tuple[str, ...]) -> tuple[PlanResult, list[OptionResult]]:
        again_req = replace(req, specs=specs, current=None, measured_tok_s=None)
        again = _searched(again_req, profile, measured_here, pp_here)[1]
        return answer(again, figure_bands, range_warnings), again.results

    return with_current(current, req.specs, result, q.table, q.job, searched.results, replan, figure_bands)


def _pp_measured_here(req: PlanRequest) -> bool:
    """Whether ``--current`` with ``--measured-tok-s`` measured a pipeline-parallel layout on the
    planned engine: its PP layouts are then not set aside as unmeasured (``planning.measured``;
    a break-it pass saw a measured vLLM PP2 setup called unmeasured in its own plan). Raises
    InputError: a bad ``--current``."""
    if req.current is None or req.measured_tok_s is None:
        return False
    fields = parse_current(req.current)  # the engine as _current reads it: the plan's by default, any alias
    if int(str(fields.get("pp", 1))) <= 1:
        return False
    try:
        return load_engine(str(fields.get("engine", req.engine))).name == load_engine(req.engine).name
    except CatalogError:  # said by _current, as --current's own entry
        return False


def _drafts(req: PlanRequest) -> bool:
    """True when the ``--current`` setup's speculative method loads a drafter (eagle, eagle3,
    dflash), which ``--draft-model`` then names. Raises InputError: a bad ``--current``."""
    text = parse_current(req.current).get("spec") if req.current is not None else None
    spec = parse_spec(str(text or "none"))  # InputError: a malformed spec, as --current reads it
    return spec is not None and spec.method in SEPARATE_DRAFTERS


def _current(req: PlanRequest, text: str, option: HardwareOption, profile: Profile) -> Current:
    """The setup ``--current`` describes (``text``) on ``option`` (the plan's first), of the
    plan's model and by default its engine, resolved with the plan's ``profile``, and its
    measured output tokens/s. Raises InputError, CatalogError: a bad entry or measurement."""
    if req.measured_tok_s is not None and not 0 < req.measured_tok_s < math.inf:
        raise InputError("measured-tok-s", shown(req.measured_tok_s), "a finite number of output tokens/s > 0")
    where = {"gpu": option.gpu.key, "num_gpus": option.count, "engine": req.engine, "weight_dtype": "auto"}
    fields = {"model": req.model, **where, "calibration": profile.path, **parse_current(text)}
    if req.draft_model is not None and _drafts(req):  # the drafter named runs in the current setup too
        fields["draft_model"] = req.draft_model
    split = int(fields.get("tp", 1)) * int(fields.get("pp", 1))  # type: ignore[call-overload]  # _count: ints
    if split > 0 and option.count % split:  # resolve would name num_gpus, which the user did not give
        raise InputError(
            "current",
            text,
            f"a setup whose TP × PP ({split}) divides the {option.count} GPUs of --gpu {option.label.replace('× ', 'x')}",
        )
    try:
        s = resolve(PredictRequest(**fields), profile)  # type: ignore[arg-type]  # keys checked by parse_current
    except InputError as refused:  # a value of the setup refused by the request's checks: the entry as typed
        entry = current_entry(text, refused.field)
        if entry is None:
            raise
        allowed = refused.allowed
        if isinstance(allowed, str):  # said as --current spells it: engine=sglang, not --engine sglang
            allowed = allowed.replace("--engine ", "engine=")
        raise InputError("current", entry, allowed) from None
    return Current(text, req.measured_tok_s, s.config, s.model, s.gpu)


def check_plan_outputs(report: str | None, png: str | None) -> None:
    """Refuse a ``--report`` file or ``--png`` folder that cannot be written, before the search
    (the ``--png`` folder is created, as its writer would create it).

    Raises:
        InputError: naming the option, the path and what is allowed.
        MissingExtraError: the report extra (plotly, matplotlib) is not installed.
    """
    if report is None and png is None:
        return
    # the extra first: a missing one used to leave the --png folder created and empty
    if report is not None:
        import_extra("plotly", "report")  # report/html.py and figures.py draw with it
    if png is not None:
        import_extra("matplotlib", "report")  # report/png.py
    from tokenplan.runner.paths import check_output_file, check_run_dir  # only when writing files

    if report is not None:
        check_output_file(report, "--report", "an HTML file path", create_parent=True)
    if png is not None:
        if not png.strip():
            raise InputError("--png", png, "a folder to write the PNG charts into")
        check_run_dir(Path(png), "--png")
