"""What the api commands share: ``PredictRequest`` resolved to a configuration
(``build_config``) and evaluated (``evaluate_request``), the calibration profile in use, and the
error bands attached to predicted figures. Names are resolved through ``tokenplan.catalog``
here, so the layers below receive values only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

from tokenplan.api.results import Bands, ErrorBand, EvaluationFigures
from tokenplan.arch.spec import ModelSpec
from tokenplan.calibration.band_file import table_from_json
from tokenplan.calibration.bands import BandTable, interval, model_family, spec_regime
from tokenplan.catalog import load_engine, load_gpu, load_model, shipped_efficiency, shipped_error_bands_json
from tokenplan.errors import InfeasibleError, InputError
from tokenplan.files.bench_tau import resolve_spec
from tokenplan.files.calibration import moved_lines, read_calibration, read_calibration_file
from tokenplan.hardware import Gpu
from tokenplan.job.evaluate import Config, Evaluation, Rejection, evaluate, kv_and_state
from tokenplan.job.workload import LengthDist, lognormal_with_mean
from tokenplan.perf.efficiency import EfficiencyTable
from tokenplan.perf.layout import Layout
from tokenplan.perf.speculative import parse_spec
from tokenplan.planning.space import Fixed
from tokenplan.units import KV_DTYPES, MAX_REQUEST_TOKENS, MS_PER_S, WEIGHT_DTYPES, parse_dtype


@dataclass(frozen=True)
class PredictRequest:
    """One configuration and workload point, as the CLI's ``predict`` takes it.

    Lengths are in tokens; ``concurrency`` is requests in flight per deployment (None = offline
    ``max``: every request queued, the engine picks its batch). ``spec`` is ``none`` or
    ``METHOD:K[:TAU]``. ``isl_sigma``/``osl_sigma`` > 0 make the lengths lognormal, ``isl``/``osl``
    then their means below the caps ``isl_cap``/``osl_cap`` (as ``plan``'s; None = uncapped).
    The command ``tokenplan predict`` defaults to ``plan``'s job (``job.workload.DEFAULT_ISL``,
    ``DEFAULT_OSL``); the defaults here stay fixed 1,024-token lengths (a point, as scripts and
    ``bench``'s server descriptions use it).
    ``max_num_batched_tokens`` (vLLM) and ``chunked_prefill_size`` (SGLang): the engine's token
    budget per step / prefill chunk (None = the engine's default); each only with its engine.
    """

    model: str
    gpu: str
    num_gpus: int = 1
    tp: int = 1
    pp: int = 1
    ep: int = 1
    attention_dp: bool = False
    weight_dtype: str = "bf16"
    kv_dtype: str = "auto"
    isl: float = 1024
    osl: float = 1024
    concurrency: float | None = None
    spec: str = "none"
    engine: str = "sglang"
    memory_fraction: float | None = None
    max_running: int | None = None
    isl_sigma: float = 0.0
    osl_sigma: float = 0.0
    osl_cap: float | None = None
    isl_cap: float | None = None
    calibration: str | None = None
    ssm_dtype: str | None = None
    kv_offload_gib: float = 0.0
    disable_radix_cache: bool = False
    max_num_batched_tokens: int | None = None
    chunked_prefill_size: int | None = None


def _positive(field: str, value: float | None, allow_none: bool = False, whole: bool = False) -> None:
    """Refuse a missing, non-positive or infinite ``value``; ``whole``: a count (GPUs, TP/PP/EP
    ranks, requests), which the message then asks for as an integer ≥ 1."""
    if value is None and allow_none:
        return
    if value is None or not 0 < value < math.inf:
        raise InputError(field, _shown(value), "an integer ≥ 1" if whole else "a finite number > 0")


def fixed_parts(tp: int | None, dp: int | None, ep: int | None, max_running: int | None) -> Fixed:
    """``plan --tp/--dp/--ep/--max-running`` as the search takes them (``planning.space.Fixed``;
    None = searched). Raises InputError (one line naming the option) for a value that is not a
    whole number ≥ 1."""
    for name, value in (("tp", tp), ("dp", dp), ("ep", ep), ("max-running", max_running)):
        if value is not None and (isinstance(value, bool) or not 1 <= value < math.inf or value != int(value)):
            raise InputError(
                name,
                _shown(value),
                "an integer ≥ 1" + (", running requests per replica" if name == "max-running" else ""),
            )
    return Fixed(*(None if v is None else int(v) for v in (tp, dp, ep, max_running)))


def _shown(value: object) -> object:
    """A number as the user typed it: 0 for 0.0, 10 for 10.0 (options parsed as floats)."""
    # below 2^53 a whole float is exactly the integer typed; 1e30 stays 1e+30, not 31 digits
    return int(value) if isinstance(value, float) and value.is_integer() and abs(value) < 2**53 else value


def check_plan_lengths(req: object, defaults: type) -> None:
    """Name the option of a bad length of a plan request ``req`` (``api.plan.PlanRequest``, whose
    class ``defaults`` holds the default caps) before the distribution is built. Raises InputError."""
    # Named as the options of ``tokenplan plan`` (and the keys of a job file: isl/osl mean,
    # sigma, cap), which is where a user sets them.
    for name, cap_option in (("isl", "isl-cap"), ("osl", "max-tokens")):
        mean, sigma, cap = (getattr(req, f"{name}_{p}") for p in ("mean", "sigma", "cap"))
        if not 1 <= mean <= MAX_REQUEST_TOKENS:
            raise InputError(name, _shown(mean), f"a number of tokens from 1 to {MAX_REQUEST_TOKENS:,}")
        if not 0 <= sigma < math.inf:
            raise InputError(f"{name}-sigma", _shown(sigma), "a lognormal σ ≥ 0")
        if cap is not None and not cap > mean:
            if cap == getattr(defaults, f"{name}_cap"):  # the user raised the mean, not the cap
                raise InputError(
                    name,
                    _shown(mean),
                    f"a mean below --{cap_option} {cap:g} (its default; raise "
                    f"--{cap_option} for longer {'prompts' if name == 'isl' else 'outputs'})",
                )
            raise InputError(cap_option, _shown(cap), f"a number of tokens above the mean {mean:g}")
        if cap is not None and not cap <= MAX_REQUEST_TOKENS:  # 1e30, inf: no request holds that many
            raise InputError(
                cap_option,
                _shown(cap),
                f"a number of tokens above the mean {mean:g} and at most "
                f"{MAX_REQUEST_TOKENS:,} (2^24, above any model's context)",
            )


def efficiency_table(calibration: str | None) -> EfficiencyTable:
    """The calibration file's table, or the shipped one."""
    return read_calibration(calibration) if calibration else shipped_efficiency()


def calibration_moves(calibration: str | None) -> list[str]:
    """What the profile ``calibration`` changes in the shipped fit, one line per group it moves
    (``files.calibration.moved_lines``: factor, shipped → calibrated, change in %, ±1σ); none
    without a profile. Raises InputError/ConfigError for a bad profile."""
    return moved_lines(calibration) if calibration else []


def calibration_warnings(calibration: str | None, point: dict[str, object]) -> list[str]:
    """Warnings for using the profile ``calibration`` far from what it was fitted on (its
    ``fitted_on`` record; none for profiles without one). ``point``: ``engine``, ``gpu``, ``model``,
    ``concurrency`` (per replica), ``isl_tokens``, ``osl_tokens``."""
    from tokenplan.calibration.fitted_range import range_warnings

    if not calibration:
        return []
    fitted = read_calibration_file(calibration).fitted_on
    return range_warnings(fitted, point) if fitted is not None else []


def build_config(req: PredictRequest) -> tuple[Config, ModelSpec, Gpu]:
    """Resolve names and check sizes: (config, model spec, gpu). Raises InputError/CatalogError."""
    for field in ("tp", "pp", "ep", "num_gpus"):
        _positive(field, getattr(req, field), whole=True)
    for field in ("isl", "osl"):
        _positive(field, getattr(req, field))
        # a mean below one token is not a request; one above MAX_REQUEST_TOKENS fits no context
        if not 1 <= getattr(req, field) <= MAX_REQUEST_TOKENS:
            raise InputError(field, _shown(getattr(req, field)), f"a number of tokens from 1 to {MAX_REQUEST_TOKENS:,}")
    _positive("concurrency", req.concurrency, allow_none=True)
    _positive("max_running", req.max_running, allow_none=True, whole=True)
    for name, option, mean, cap in (
        ("osl", "max-tokens", req.osl, req.osl_cap),
        ("isl", "isl-cap", req.isl, req.isl_cap),
    ):
        if cap is not None and not mean < cap <= MAX_REQUEST_TOKENS:  # as plan's --max-tokens, --isl-cap
            raise InputError(
                option,
                _shown(cap),
                f"a number of tokens above the mean {name} {mean:g} and at most {MAX_REQUEST_TOKENS:,}",
            )
    if req.num_gpus % (req.tp * req.pp):
        raise InputError("num_gpus", req.num_gpus, f"a multiple of tp × pp = {req.tp * req.pp}")
    model, gpu, engine = load_model(req.model), load_gpu(req.gpu), load_engine(req.engine)
    chunk = _chunk_tokens(req, engine.name)
    weight = parse_dtype(
        req.weight_dtype if req.weight_dtype != "auto" else model.native_weight_dtype, "weight_dtype", WEIGHT_DTYPES
    )
    kv = engine.auto_kv_dtype(weight) if req.kv_dtype == "auto" else parse_dtype(req.kv_dtype, "kv_dtype", KV_DTYPES)
    layout = Layout(
        tp=req.tp, pp=req.pp, ep=req.ep, dp=req.num_gpus // (req.tp * req.pp), attention_dp=req.attention_dp
    )
    cut = engine.vision_cut(model.vision_layers, model.vision_hidden)
    if not 0 <= req.kv_offload_gib < math.inf:
        raise InputError("kv_offload_gib", req.kv_offload_gib, "GiB of host memory per GPU ≥ 0")
    if req.memory_fraction is not None and not 0 < req.memory_fraction <= 1:
        raise InputError("memory_fraction", req.memory_fraction, "a share of GPU memory in (0, 1]")
    spec = parse_spec(resolve_spec(req.spec, req.isl, req.osl)[0])  # TAU may name a bench file (files.bench_tau)
    config = Config(
        layout,
        weight,
        kv,
        engine,
        spec,
        req.memory_fraction,
        req.max_running,
        req.ssm_dtype,
        cut,
        lift_running_cap=req.disable_radix_cache,
        host_kv_bytes=req.kv_offload_gib * 2**30,
        chunk_tokens=chunk,
    )
    return config, model, gpu


# option field → the engine that takes it (vLLM --max-num-batched-tokens, SGLang --chunked-prefill-size)
_CHUNK_OPTIONS = {"max_num_batched_tokens": "vllm", "chunked_prefill_size": "sglang"}


def _chunk_tokens(req: PredictRequest, engine: str) -> int | None:
    """The token budget per step the request sets for ``engine``, or None. Raises InputError for
    a value that is not a whole number ≥ 1 or an option of another engine."""
    chunk = None
    for field, owner in _CHUNK_OPTIONS.items():
        value = getattr(req, field)
        if value is None:
            continue
        _positive(field, value, whole=True)
        if value != int(value):
            raise InputError(field, _shown(value), "a whole number of tokens ≥ 1")
        if engine != owner:
            raise InputError(field, _shown(value), f"only with --engine {owner}; the engine is {engine}")
        chunk = int(value)
    return chunk


def request_lengths(req: PredictRequest) -> tuple[LengthDist, LengthDist]:
    """The request's prompt and output length distributions (tokens): lognormal with mean
    ``isl``/``osl`` and σ ``isl_sigma``/``osl_sigma`` (0 = fixed), capped at ``isl_cap``/``osl_cap``,
    the mean being that of the capped lengths as in ``plan`` (``job.workload.lognormal_with_mean``).
    Raises InputError for a mean not below its cap (``build_config`` names the option first)."""
    return (
        lognormal_with_mean(req.isl, req.isl_sigma, req.isl_cap),
        lognormal_with_mean(req.osl, req.osl_sigma, req.osl_cap),
    )


def evaluate_request(req: PredictRequest) -> Evaluation | Rejection:
    """Evaluate a request with the calibrated efficiency for its engine and GPU architecture."""
    config, model, gpu = build_config(req)
    eff = efficiency_table(req.calibration).resolve(config.engine.name, gpu.architecture)
    isl, osl = request_lengths(req)
    per_replica = None if req.concurrency is None else req.concurrency / config.layout.dp
    return evaluate(model, gpu, config, eff, isl, osl, per_replica)


def error_bands() -> BandTable | None:
    """The shipped error-band table (``catalog/error_bands.json``), or None when none ships."""
    data = shipped_error_bands_json()
    return None if data is None else table_from_json(data)


# figure key → (band metric, figure scales as 1 / the metric's quantity)
_RATE, _INVERSE_RATE, _TTFT = ("rate", False), ("rate", True), ("ttft", False)
PREDICT_FIGURES = {
    "output_tok_s_total": _RATE,
    "output_tok_s_per_gpu": _RATE,
    "tpot_ms": _INVERSE_RATE,
    "ttft_ms": _TTFT,
}
PLAN_FIGURES = {
    **PREDICT_FIGURES,
    "wall_days": _INVERSE_RATE,
    "usd": _INVERSE_RATE,
    "gpu_hours": _INVERSE_RATE,
    "usd_per_mtok": _INVERSE_RATE,
}


def figure_bands(result: object, ev: Evaluation, figures: dict[str, tuple[str, bool]]) -> Bands | None:
    """The 80 % bands of the figures of ``result`` named in ``figures`` (attributes of
    ``result``; see ``calibration.bands``), and the band's regime (and why the configuration lies
    outside the measured one, if it does). The regime includes the evaluation's speculative
    decoding: none, τ from the prior, or τ stated. None without a shipped band table."""
    table = error_bands()
    if table is None:
        return None
    d = ev.deployment
    where = (
        ev.config.engine.name,
        d.gpu.architecture,
        model_family(d.spec.name),
        d.gpu.key,
        ev.steady.batch,
        spec_regime(ev.config.spec),
    )
    intervals, last = {}, None
    for key, (metric, inverse) in figures.items():
        value = getattr(result, key)  # a misspelt figure fails here, never silently unbanded
        fmt = ev.config.weight_dtype.flops_class
        band = None if value is None else interval(table, value, metric, inverse, *where, weight_format=fmt)
        if band is not None:
            intervals[key] = band
            last = band
    regime = None if last is None else ErrorBand(last.regime, table.coverage, last.outside)
    return Bands(intervals, regime)


def evaluation_figures(ev: Evaluation) -> EvaluationFigures:
    """The figures of an evaluation (units in the field names)."""
    s, m, lay = ev.steady, ev.memory, ev.config.layout
    kv_tok, state_seq = kv_and_state(ev.deployment.spec, ev.config.kv_dtype)
    return EvaluationFigures(
        layout=lay.describe(),
        tp=lay.tp,
        pp=lay.pp,
        ep=lay.ep,
        dp=lay.dp,
        attention_dp=lay.attention_dp,
        num_gpus=lay.num_gpus,
        weight_dtype=ev.config.weight_dtype.value,
        kv_dtype=ev.config.kv_dtype.value,
        engine=ev.config.engine.name,
        spec=ev.config.spec.describe() if ev.config.spec else "none",
        output_tok_s_total=ev.output_tok_s_total,
        output_tok_s_per_gpu=ev.output_tok_s_per_gpu,
        roofline_output_tok_s_total=s.roofline_output_tok_s * lay.dp,
        batch_per_replica=s.batch,
        max_concurrency=s.limits.limit * lay.dp,
        batch_limit_reason=s.batch_reason,
        kv_bytes_per_token=kv_tok,
        state_bytes_per_sequence=state_seq,
        weight_bytes_per_gpu=m.weight_bytes_per_gpu,
        kv_capacity_tokens=m.kv_capacity_tokens * lay.dp,
        state_slots=None if m.state_slots is None else m.state_slots * lay.dp,
        memory_fraction=ev.settings.memory_fraction,
        chunk_tokens=ev.settings.chunk_tokens,
        step_time_ms=s.decode_step.total_s * MS_PER_S,
        tpot_ms=s.tpot_s * MS_PER_S,
        ttft_ms=s.ttft_s * MS_PER_S,
        prefill_share=s.prefill_share,
        bottleneck=s.decode_step.bottleneck,
        warnings=tuple(ev.warnings),
    )


# Rejection kinds that do not depend on the lengths or the concurrency (job.evaluate.REJECTION_KINDS).
_SHAPE_REJECTIONS = ("engine", "format", "layout", "memory", "spec")
_SHAPE_TOKENS = 1024.0  # any valid lengths: the rejections above do not depend on them


def check_server_description(desc: PredictRequest) -> None:
    """Refuse, in one line, a description of the server that names a bad size or a configuration
    the model cannot run (a TP that does not divide the heads, EP on a dense model, a format the
    GPU cannot run, weights that do not fit) before any measurement is read or divided by its
    GPUs. The lengths and concurrency are checked where they are read.

    Raises:
        InputError, CatalogError: a bad name or size. InfeasibleError: the configuration cannot run.
    """
    result = evaluate_request(
        replace(
            desc,
            isl=_SHAPE_TOKENS,
            osl=_SHAPE_TOKENS,
            isl_sigma=0.0,
            osl_sigma=0.0,
            osl_cap=None,
            isl_cap=None,
            concurrency=None,
        )
    )
    if isinstance(result, Rejection) and result.kind in _SHAPE_REJECTIONS:
        raise InfeasibleError(f"configuration cannot run: {result.reason}")


def check_plan_outputs(report: str | None, png: str | None) -> None:
    """Refuse a ``--report`` file or ``--png`` folder that cannot be written, before the search
    (the ``--png`` folder is created, as its writer would create it).

    Raises:
        InputError: naming the option, the path and what is allowed.
    """
    if report is None and png is None:
        return
    from tokenplan.runner.paths import check_output_file, check_run_dir  # only when writing files

    if report is not None:
        check_output_file(report, "--report", "an HTML file path", create_parent=True)
    if png is not None:
        if not png.strip():
            raise InputError("--png", png, "a folder to write the PNG charts into")
        check_run_dir(Path(png), "--png")
