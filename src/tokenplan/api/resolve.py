"""A request resolved once: every name looked up, the calibration profile parsed, the sizes
checked, into one frozen :class:`Scenario` (model spec, GPU, a keyword-built ``Config`` with its
engine, the efficiency for engine × architecture, the profile and its fitted range, the length
distributions). ``predict``, ``memory``, ``plan --current``, ``validate``, ``calibrate`` and
``bench``'s fits start from it; the layers below receive values only.

Measured rows (``validate``, ``calibrate``) resolve through it too, unpredictable ones kept with why.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from tokenplan.arch.kv import SSM_STATE_DTYPES
from tokenplan.arch.spec import ModelSpec
from tokenplan.calibration.bands import model_family
from tokenplan.calibration.fitted_range import Profile
from tokenplan.catalog import load_engine, load_gpu, load_model, shipped_efficiency
from tokenplan.engines.auto_kv import auto_kv
from tokenplan.engines.launch import MaxRunning
from tokenplan.errors import InfeasibleError, InputError, TokenplanError, shown
from tokenplan.files.bench_tau import resolve_spec
from tokenplan.files.drafter import attach_drafter
from tokenplan.hardware import Gpu
from tokenplan.job.evaluate import Config, Evaluation, Rejection, evaluate
from tokenplan.job.workload import MAX_SIGMA, LengthDist, lognormal_with_mean, set_lengths, stated_lengths
from tokenplan.perf.efficiency import Efficiency
from tokenplan.perf.layout import Layout
from tokenplan.perf.speculative import parse_spec
from tokenplan.units import KV_DTYPES, MAX_GPUS, MAX_REQUEST_TOKENS, WEIGHT_DTYPES, parse_dtype

# Measurement files, calibration profiles and validation cases: imported where used (a plan
# without --calibration reads none of them, and their modules cost start-up).
if TYPE_CHECKING:
    from tokenplan.calibration.validate import Case
    from tokenplan.files.measurements import MeasurementFile
    from tokenplan.measurement import Measurement, SkippedRow


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
    ``engine_version``: the engine release a measured run used (decides whether its steps overlap
    CPU and GPU work, ``engines.overlap``; None = the current release).
    ``scheduler_recv_interval`` (SGLang ``--scheduler-recv-interval``): decode iterations between
    two receives of new requests (None = the engine's, 1; only with SGLang).
    ``draft_model``: the EAGLE/DFlash drafter's folder or repository id (``files.drafter``).
    ``auto`` formats: the released weights and the engine's KV default, as ``predict``'s.
    """

    model: str
    gpu: str
    num_gpus: int = 1
    tp: int = 1
    pp: int = 1
    ep: int = 1
    attention_dp: bool = False
    weight_dtype: str = "auto"
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
    disable_radix_cache: bool = False
    max_num_batched_tokens: int | None = None
    chunked_prefill_size: int | None = None
    engine_version: str | None = None
    scheduler_recv_interval: int | None = None
    draft_model: str | None = None


def read_profile(calibration: str | None) -> Profile:
    """The profile at ``calibration``, or the shipped fit (None or empty). Raises
    InputError/ConfigError for a missing or malformed profile (``files.calibration``)."""
    if not calibration:
        return Profile(None, shipped_efficiency())
    from tokenplan.files.calibration import read_profile_file

    return read_profile_file(calibration)


@dataclass(frozen=True)
class Scenario:
    """A request resolved: the model's spec, the GPU, the configuration (its ``engine`` resolved),
    the calibration ``profile`` and the ``efficiency`` it gives this engine on this GPU's
    architecture, the prompt and output length distributions (tokens) and the requests in flight
    per replica (None = offline ``max``)."""

    model: ModelSpec
    gpu: Gpu
    config: Config
    profile: Profile
    efficiency: Efficiency
    isl: LengthDist
    osl: LengthDist
    concurrency: float | None

    def evaluate(self) -> Evaluation | Rejection:
        """The configuration evaluated on the scenario's workload (``job.evaluate.evaluate``)."""
        return evaluate(self.model, self.gpu, self.config, self.efficiency, self.isl, self.osl, self.concurrency)


def resolve(req: PredictRequest, profile: Profile | None = None) -> Scenario:
    """Check the sizes, look every name up once and read the profile (``profile``: one already
    read, e.g. the plan's; None = ``req.calibration``) into a :class:`Scenario`.

    Raises:
        InputError, CatalogError, ConfigError: a bad size, name or profile (one line naming it).
    """
    _check_sizes(req)
    model, gpu, engine = load_model(req.model), load_gpu(req.gpu), load_engine(req.engine)
    chunk = _chunk_tokens(req, engine.name)
    radix_off = _radix_cache_off(req.disable_radix_cache, engine.name)
    weight = parse_dtype(
        req.weight_dtype if req.weight_dtype != "auto" else model.native_weight_dtype, "weight_dtype", WEIGHT_DTYPES
    )
    kv = auto_kv(engine, model, weight) if req.kv_dtype == "auto" else parse_dtype(req.kv_dtype, "kv_dtype", KV_DTYPES)
    dp = req.num_gpus // (req.tp * req.pp)
    layout = Layout(tp=req.tp, pp=req.pp, ep=req.ep, dp=dp, attention_dp=req.attention_dp)
    cut = engine.vision_cut(model.vision_layers, model.vision_hidden)
    if req.memory_fraction is not None and not 0 < req.memory_fraction <= 1:
        raise InputError("memory_fraction", req.memory_fraction, "a share of GPU memory in (0, 1]")
    # TAU may name a bench file (files.bench_tau); the drafter a folder (files.drafter)
    spec = attach_drafter(parse_spec(resolve_spec(req.spec, req.isl, req.osl)[0]), req.draft_model)
    config = Config(
        layout=layout,
        weight_dtype=weight,
        kv_dtype=kv,
        engine=engine,
        spec=spec,
        memory_fraction=req.memory_fraction,
        max_running=MaxRunning(req.max_running, radix_off),
        ssm_dtype=_ssm_dtype(req.ssm_dtype, model),
        vision_cut=cut,
        chunk_tokens=chunk,
        engine_version=_engine_version(req.engine_version),
        scheduler_recv_interval=_recv_interval(req, engine.name),
    )
    profile = profile or read_profile(req.calibration)
    # the lengths: lognormal with mean isl/osl and σ isl_sigma/osl_sigma (0 = fixed), capped at
    # isl_cap/osl_cap, the mean being that of the capped lengths, as in plan
    isl = lognormal_with_mean(req.isl, req.isl_sigma, req.isl_cap)
    # the output cap is what each request sends as max_tokens (TRT-LLM reserves it at admission)
    osl = replace(lognormal_with_mean(req.osl, req.osl_sigma, req.osl_cap), cap_is_max_tokens=req.osl_cap is not None)
    per_replica = None if req.concurrency is None else req.concurrency / dp
    return Scenario(
        model, gpu, config, profile, profile.table.resolve(engine.name, gpu.architecture), isl, osl, per_replica
    )


def _check_sizes(req: PredictRequest) -> None:
    """Refuse, naming the field, a size that is not a positive count or a length outside
    [1, MAX_REQUEST_TOKENS] (a cap not above its mean). Raises InputError."""
    for field in ("tp", "pp", "ep", "num_gpus"):  # no layout spans more GPUs than a plan takes
        _positive(field, getattr(req, field), whole=True)
        if getattr(req, field) > MAX_GPUS:
            raise InputError(field, getattr(req, field), f"an integer from 1 to {MAX_GPUS:,}")
    for field in ("isl", "osl"):
        # a mean below one token is not a request; one above MAX_REQUEST_TOKENS fits no context
        # (0, −5 and NaN word their refusal as plan's --isl does: a new-user pass)
        if not 1 <= getattr(req, field) <= MAX_REQUEST_TOKENS:
            raise InputError(field, shown(getattr(req, field)), f"a number of tokens from 1 to {MAX_REQUEST_TOKENS:,}")
    for name in ("isl", "osl"):  # named as the option: LengthDist's own check says only "length sigma"
        sigma = getattr(req, f"{name}_sigma")
        if not 0 <= sigma <= MAX_SIGMA:
            raise InputError(f"{name}-sigma", shown(sigma), f"a lognormal σ from 0 to {MAX_SIGMA:g}")
    _positive("concurrency", req.concurrency, allow_none=True)
    _positive("max_running", req.max_running, allow_none=True, whole=True)
    for name, option, mean, cap in (
        ("osl", "max-tokens", req.osl, req.osl_cap),
        ("isl", "isl-cap", req.isl, req.isl_cap),
    ):
        if cap is not None and not mean < cap <= MAX_REQUEST_TOKENS:  # as plan's --max-tokens, --isl-cap
            raise InputError(
                option,
                shown(cap),
                f"a number of tokens above the mean {name} {mean:g} and at most {MAX_REQUEST_TOKENS:,}",
            )
    if req.num_gpus % (req.tp * req.pp):
        raise InputError("num_gpus", req.num_gpus, f"a multiple of tp × pp = {req.tp * req.pp}")


def _positive(field: str, value: float | None, allow_none: bool = False, whole: bool = False) -> None:
    """Refuse a missing, non-positive or infinite ``value``; ``whole``: a count (GPUs, TP/PP/EP
    ranks, requests), which the message then asks for as an integer ≥ 1."""
    if value is None and allow_none:
        return
    if value is None or not 0 < value < math.inf:
        raise InputError(field, shown(value), "an integer ≥ 1" if whole else "a finite number > 0")


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
            raise InputError(field, shown(value), "a whole number of tokens ≥ 1")
        if engine != owner:
            raise InputError(field, shown(value), f"only with --engine {owner}; the engine is {engine}")
        chunk, seqs, ranks = int(value), req.max_running, (req.tp if req.attention_dp else 1)
        if owner == "vllm" and isinstance(seqs, int | float) and math.ceil(seqs / ranks) > chunk:
            # vllm/config/scheduler.py SchedulerConfig._verify_args: "max_num_batched_tokens (…) must be ≥
            # max_num_seqs (…)", both per engine rank (DP attention: each TP rank; --max-running the replica's)
            each = f" / {ranks} DP-attention ranks = {math.ceil(seqs / ranks):,}" if ranks > 1 else ""
            why = f"at least --max-running ({seqs:g}){each}: vLLM refuses to start below max_num_seqs"
            raise InputError(field, shown(value), why)
    return chunk


def _radix_cache_off(value: bool, engine: str) -> bool:
    """SGLang's ``--disable-radix-cache`` as the request sets it. Raises InputError where it is set
    for another engine (whose prediction would read it and change nothing)."""
    if value and engine != "sglang":
        raise InputError("disable_radix_cache", value, f"only with --engine sglang; the engine is {engine}")
    return bool(value)


def _ssm_dtype(value: object, model: ModelSpec) -> str | None:
    """The recurrent-state dtype the request sets (``--ssm-dtype``, as ``arch.kv`` names them, any
    case), or None (the config's). Raises InputError for another name, or for a model that holds
    no recurrent state (the value would be read and change nothing)."""
    if value is None:
        return None
    name = value.strip().lower() if isinstance(value, str) else value
    if name not in SSM_STATE_DTYPES:
        raise InputError("ssm_dtype", value, SSM_STATE_DTYPES)
    if model.linear is None or not model.is_hybrid:
        raise InputError(
            "ssm_dtype", value, f"only for a model with linear-attention (recurrent) state; {model.name} has none"
        )
    return str(name)


def _engine_version(value: object) -> str | None:
    """The engine release a request names (text, e.g. ``0.5.9`` or an image name), or None.
    Raises InputError for a value that is not text."""
    if value is None or isinstance(value, str):
        return value
    raise InputError("engine_version", shown(value), "text naming the engine release, e.g. 0.5.9 or an image name")


def _recv_interval(req: PredictRequest, engine: str) -> int | None:
    """SGLang's ``--scheduler-recv-interval`` the request sets, or None. Raises InputError for a
    value that is not a whole number ≥ 1 or that is set for another engine."""
    value = req.scheduler_recv_interval
    if value is None:
        return None
    if isinstance(value, bool) or not (isinstance(value, int | float) and value >= 1 and value == int(value)):
        raise InputError("scheduler_recv_interval", shown(value), "a whole number of iterations ≥ 1")
    if engine != "sglang":
        raise InputError("scheduler_recv_interval", shown(value), f"only with --engine sglang; the engine is {engine}")
    return int(value)


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
    shape = replace(desc, isl=_SHAPE_TOKENS, osl=_SHAPE_TOKENS, isl_sigma=0.0, osl_sigma=0.0, osl_cap=None)
    result = resolve(replace(shape, isl_cap=None, concurrency=None)).evaluate()
    if isinstance(result, Rejection) and result.kind in _SHAPE_REJECTIONS:
        raise InfeasibleError(f"configuration cannot run: {result.reason}")


# --- measured rows: the cases ``validate`` and ``calibrate`` predict ---------------------------


def measurement_request(m: Measurement, calibration: str | None = None) -> PredictRequest:
    """The ``tokenplan predict`` request of a measured row (lengths must be known)."""
    return PredictRequest(
        model=m.model,
        gpu=m.gpu,
        num_gpus=m.num_gpus,
        tp=m.tp,
        pp=m.pp,
        ep=m.ep,
        attention_dp=m.attention_dp,
        weight_dtype=m.weight_dtype,
        kv_dtype=m.kv_dtype,
        isl=m.isl_tokens or 1.0,
        osl=m.osl_tokens or 1.0,
        concurrency=m.concurrency,
        spec=m.spec,
        engine=m.engine,
        calibration=calibration,
        max_running=m.max_running,
        memory_fraction=m.memory_fraction,
        chunked_prefill_size=m.chunked_prefill_size,
        disable_radix_cache=bool(m.disable_radix_cache),
        ssm_dtype=m.ssm_dtype,
        engine_version=m.engine_version,
        scheduler_recv_interval=m.scheduler_recv_interval,
    )


# A hybrid row whose launch turned the radix cache off without a running cap: SGLang then splits
# state and KV memory by --mamba-full-memory-ratio and caps the running requests at the state slots
# (docs/engine-facts.md, SGLang, S3); the memory model has the radix cache on, or off with a cap.
_RADIX_OFF_UNCAPPED = (
    "disable_radix_cache true without max_running on hybrid model {model}: SGLang then sizes the state "
    "slots by --mamba-full-memory-ratio, which tokenplan does not model; fill max_running with the "
    "launch's --max-running-requests (SGLang sets 48 with speculative decoding when none is given)"
)


def resolve_case(m: Measurement, profile: Profile | None = None) -> Case | SkippedRow:
    """A measurement resolved to a Case (``profile``: the one read for the whole file; None = the
    shipped fit), or the reason it cannot be predicted."""
    from tokenplan.calibration.validate import Case
    from tokenplan.measurement import SkippedRow

    missing = [name for name, v in (("isl", m.isl_tokens), ("osl", m.osl_tokens)) if v is None]
    if missing:
        return SkippedRow(m.line, m.row_id, f"missing lengths ({', '.join(missing)})")
    assert m.isl_tokens is not None and m.osl_tokens is not None  # missing is empty
    try:
        s = resolve(measurement_request(m), profile)
    except TokenplanError as exc:
        return SkippedRow(m.line, m.row_id, str(exc))
    cap = s.config.max_running
    if cap.lifted and cap.requests is None:  # --disable-radix-cache launched without --max-running-requests
        if s.model.is_hybrid:
            return SkippedRow(m.line, m.row_id, _RADIX_OFF_UNCAPPED.format(model=m.model))
        # no state pool: the flag leaves SGLang's own cap (48 with speculative decoding, S5), not the plan's raised one
        s = replace(s, config=replace(s.config, max_running=MaxRunning()))
    from tokenplan.catalog.length_sets import length_set, length_set_names  # pydantic: only for measurements

    shapes = length_set(m.length_set) if m.length_set else None
    if m.length_set and shapes is None:  # a set whose lengths the catalog does not know: not fixed lengths
        known = ", ".join(length_set_names())
        reason = f"length_distribution {m.length_set!r} is not fixed, uniform:F or a known prompt set ({known})"
        return SkippedRow(m.line, m.row_id, reason)
    if shapes is not None:
        isl = set_lengths(m.isl_tokens, shapes.input.sigma, shapes.input.cap_tokens)
        osl = set_lengths(m.osl_tokens, shapes.output.sigma, shapes.output.cap_tokens)
    else:
        low = m.length_low_fraction
        isl, osl = stated_lengths(m.isl_tokens, low), stated_lengths(m.osl_tokens, low)
    # The run served its requests, so its server was launched for at least the longest of them
    # (vLLM refuses to start for a max_model_len its KV cache cannot hold: the model's whole
    # context is only the default).
    config = replace(s.config, max_model_len=math.ceil(isl.max + osl.max))
    family = model_family(m.model)
    return Case(m, s.model, s.gpu, config, m.engine, s.gpu.architecture, family, isl, osl, s.concurrency)


def resolve_file(data: MeasurementFile) -> tuple[list[Case], list[SkippedRow]]:
    """Cases and skipped rows (malformed first, then unpredictable) of a read file."""
    from tokenplan.measurement import SkippedRow

    shipped = read_profile(None)  # the cases carry no factors: validate and calibrate bring their own
    cases: list[Case] = []
    skipped = list(data.skipped)
    for m in data.rows:
        r = resolve_case(m, shipped)
        if isinstance(r, SkippedRow):
            skipped.append(r)
        else:
            cases.append(r)
    return cases, skipped
